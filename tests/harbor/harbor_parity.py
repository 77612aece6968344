"""What the parity tests against the real ``harbor`` package share: a source dataset with every kind
of task ``gym-harbor dataset publish --harbor`` writes, the workspaces to grade it on, the image both
graders run in, and small readers of ``gym-harbor``'s output.

Importable as ``harbor_parity`` (``tests/harbor/conftest.py`` puts this folder on ``sys.path``). This
folder has no ``__init__.py`` on purpose: as a package it would shadow the real ``harbor``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import images
from support import write_files

GYM = str(Path(sys.executable).parent / "gym-harbor")
HARBOR = str(Path(sys.executable).parent / "harbor")

# The interpreter baked into the image both graders run in (Harbor cannot bind-mount a pyenv build
# the way tests/images.py does, so this one is copied in).
IMAGE_PYTHON = "3.12"
IMAGE_REVISION = "1"

# --- the source dataset ----------------------------------------------------------------------------

ROOT_VERIFIER = """\
from nemo_gym.verifiers import exact_match
from nemo_gym.verifiers.files import read_text


def verify(workspace, task_data):
    return exact_match(read_text(workspace, "answer.md"), task_data["answer"])
"""

SINGLE_VERIFIER = """\
from helper import normalise

from nemo_gym.verifiers import numeric_match
from nemo_gym.verifiers.files import read_text


def verify(workspace, task_data):
    text = read_text(workspace, "answer.txt")
    if text == "boom":
        raise RuntimeError("the author's own bug")
    exact = 1.0 if normalise(text) == str(task_data["answer"]) else 0.0
    return {"reward": 1.0 if numeric_match(text, task_data["answer"]) else 0.0, "exact": exact}
"""

PARTIAL_VERIFIER = """\
import asyncio


async def verify(workspace):
    await asyncio.sleep(0)
    present = (workspace / "out.txt").is_file()
    return {"reward": 0.5 if present else 0.0, "present": 1.0 if present else 0.0}
"""

BASH_TEST = """\
#!/bin/bash
if [ "$(cat answer.txt 2>/dev/null)" = hello ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""

STEP_VERIFIER = """\
from common import notes


def verify(workspace, task_data):
    return 1.0 if notes(workspace) == task_data["expected"][{index}] else 0.0
"""

COMMON = """\
def notes(workspace):
    path = workspace / "notes.txt"
    return path.read_text().splitlines() if path.is_file() else None
"""


def _toml(*lines: str) -> str:
    return "\n".join(('schema_version = "1.3"', *lines)) + "\n"


def _sh(body: str) -> str:
    return "#!/bin/bash\nset -e\n" + body + "\n"


ROWS = [
    {
        "id": "row-paris",
        "instruction": "Write the capital of France to answer.md.",
        "answer": "Paris",
        "solution": "Paris\n",
    },
    {
        "id": "row-rome",
        "instruction": "Write the capital of Italy to answer.md.",
        "answer": "Rome",
        "solution": "Rome\n",
    },
]

# Every file of the source dataset, by relative path. An executable is named *.sh.
SOURCE: Dict[str, str] = {
    "verifier.py": ROOT_VERIFIER,
    "rows.jsonl": "".join(json.dumps(row) + "\n" for row in ROWS),
    # A single-step Python verifier with its own helper module, a working directory of its own and
    # a workspace/ folder of starting files (published inside environment/, never as workspace/).
    "single-py/task.toml": _toml("[verifier]", "timeout_sec = 120.0", "[environment]", 'workdir = "/app"'),
    "single-py/instruction.md": "Write the answer, 42, to answer.txt.\n",
    "single-py/task_data.json": json.dumps({"answer": 42}) + "\n",
    "single-py/tests/verifier.py": SINGLE_VERIFIER,
    "single-py/tests/helper.py": "def normalise(text):\n    return (text or '').strip()\n",
    "single-py/solution/solve.sh": _sh("echo 42.0 > answer.txt"),
    "single-py/workspace/README.txt": "Put the answer in answer.txt.\n",
    # An async verify that never gives full marks: the oracle scores 0.5 under both graders.
    "partial/task.toml": _toml("[verifier]", "timeout_sec = 120.0"),
    "partial/instruction.md": "Create out.txt.\n",
    "partial/tests/verifier.py": PARTIAL_VERIFIER,
    "partial/solution/solve.sh": _sh("echo x > out.txt"),
    # A plain test.sh task: published unchanged.
    "bash-test/task.toml": _toml("[verifier]", "timeout_sec = 120.0"),
    "bash-test/instruction.md": "Write hello to answer.txt.\n",
    "bash-test/tests/test.sh": BASH_TEST,
    "bash-test/solution/solve.sh": _sh("echo hello > answer.txt"),
    # No tests/: the dataset root's verifier.py grades it; its oracle is an answer.md.
    "root-graded/task.toml": _toml("[verifier]", "timeout_sec = 120.0"),
    "root-graded/instruction.md": "Write 42 to answer.md.\n",
    "root-graded/task_data.json": json.dumps({"answer": "42"}) + "\n",
    "root-graded/solution/answer.md": "42\n",
    # Two steps with Python verifiers, a shared helper in the task's tests/, an oracle per step.
    "multi-step/task.toml": _toml(
        "[verifier]", "timeout_sec = 120.0", "[[steps]]", 'name = "write"', "[[steps]]", 'name = "extend"'
    ),
    "multi-step/task_data.json": json.dumps({"expected": [["one"], ["one", "two"]]}) + "\n",
    "multi-step/tests/common.py": COMMON,
    "multi-step/steps/write/instruction.md": "Write one to notes.txt.\n",
    "multi-step/steps/write/tests/verifier.py": STEP_VERIFIER.format(index=0),
    "multi-step/steps/write/solution/solve.sh": _sh("echo one > notes.txt"),
    "multi-step/steps/extend/instruction.md": "Append two to notes.txt.\n",
    "multi-step/steps/extend/tests/verifier.py": STEP_VERIFIER.format(index=1),
    "multi-step/steps/extend/solution/solve.sh": _sh("echo two >> notes.txt"),
}

# What `publish --harbor` must write, by task id: "python" tasks carry the shim in tests/ (or in each
# step's tests/), "bash" ones their own test.sh.
TASK_KINDS: Dict[str, str] = {
    "bash-test": "bash",
    "multi-step": "python-steps",
    "partial": "python",
    "root-graded": "python",
    "row-paris": "python",
    "row-rome": "python",
    "single-py": "python",
}
STEPS: Dict[str, Tuple[str, ...]] = {"multi-step": ("write", "extend")}


def write_tree(root: Path, files: Dict[str, str]) -> Path:
    return write_files(root, files)


def write_source(root: Path) -> Path:
    """The source dataset: every kind of task `publish --harbor` handles."""
    return write_tree(root, SOURCE)


def publish(source: Path, out: Path, base_image: str) -> List[str]:
    """``publish_for_harbor`` with the base image the published environments build ``FROM``."""
    from nemo_gym.data.tasks.harbor.publishing import publish_for_harbor

    return publish_for_harbor(source, out, base_image=base_image)


# --- workspaces to grade ----------------------------------------------------------------------------


MISSING = "missing"  # no reward file: Harbor's RewardFileNotFoundError, Gym's harbor:missing_reward


@dataclass(frozen=True)
class State:
    """One grading: a task (and step, or row), the workspace's files, and the rewards both graders
    must report (a dict as Harbor reports it, or ``MISSING``), so that agreeing on nothing fails."""

    name: str
    task: str
    files: Dict[str, str]
    expected: Any
    step: Optional[str] = None

    @property
    def id(self) -> str:
        return f"{self.task}{'/' + self.step if self.step else ''}:{self.name}"


STATES = [
    State("oracle", "single-py", {"answer.txt": "42.0\n"}, {"reward": 1.0, "exact": 0.0}),
    State("exact", "single-py", {"answer.txt": "42\n"}, {"reward": 1.0, "exact": 1.0}),
    State("wrong", "single-py", {"answer.txt": "41\n"}, {"reward": 0.0, "exact": 0.0}),
    State("verify-raises", "single-py", {"answer.txt": "boom\n"}, MISSING),
    State("oracle", "partial", {"out.txt": "x\n"}, {"reward": 0.5, "present": 1.0}),
    State("empty", "partial", {}, {"reward": 0.0, "present": 0.0}),
    State("oracle", "bash-test", {"answer.txt": "hello\n"}, {"reward": 1.0}),
    State("empty", "bash-test", {}, {"reward": 0.0}),
    State("oracle", "root-graded", {"answer.md": "42\n"}, {"reward": 1.0}),
    State("wrong", "root-graded", {"answer.md": "43\n"}, {"reward": 0.0}),
    State("oracle", "row-paris", {"answer.md": "Paris\n"}, {"reward": 1.0}),
    State("wrong", "row-rome", {"answer.md": "Paris\n"}, {"reward": 0.0}),
    State("oracle", "multi-step", {"notes.txt": "one\n"}, {"reward": 1.0}, "write"),
    State("oracle", "multi-step", {"notes.txt": "one\ntwo\n"}, {"reward": 1.0}, "extend"),
    State("stale", "multi-step", {"notes.txt": "one\n"}, {"reward": 0.0}, "extend"),
]

# What the oracle of each task scores under `gym-harbor dataset validate` and `harbor run -a oracle` alike.
ORACLE_REWARDS = {task: 1.0 for task in TASK_KINDS}
ORACLE_REWARDS["partial"] = 0.5


# --- gym's side -------------------------------------------------------------------------------------


def run(argv: List[str], *, timeout: float = 600, env: Optional[Dict[str, str]] = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def gym_verify(source: Path, state: State, workspace: Path, image: str) -> Dict[str, Any]:
    """``gym-harbor verify --sandbox docker --json`` of ``state`` on the source dataset."""
    rows = {row["id"] for row in ROWS}
    target = ["--row", state.task, str(source)] if state.task in rows else [str(source / state.task)]
    step = ["--step", state.step] if state.step else []
    argv = [GYM, "verify", *target, *step, "--workspace", str(workspace), "--sandbox", "docker", "--image", image]
    done = run([*argv, "--json"])
    assert done.returncode == 0, f"{' '.join(argv)} failed ({done.returncode}): {done.stderr}{done.stdout}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def as_harbor_rewards(outcome: Dict[str, Any]) -> Any:
    """What Harbor reports for the reward files behind a ``gym-harbor verify --json`` outcome: the rewards
    dict, ``MISSING`` for no reward file, else the failure as it is."""
    if outcome["failure_kind"] == "harbor:missing_reward" and not outcome["masked"]:
        return MISSING
    if outcome["masked"] or outcome["failure_kind"] is not None:
        return f"{outcome['failure_kind'] or outcome['mask_reason']}: {outcome['detail']}"
    if outcome["reward_components"]:
        return dict(outcome["metrics"])
    return {"reward": outcome["reward"], **outcome["metrics"]}


def validate_rewards(output: str) -> Dict[str, Optional[float]]:
    """The per-task rewards of ``gym-harbor dataset validate``'s summary table (found by its header row:
    ``| task | ... | reward | ... |``)."""
    rewards: Dict[str, Optional[float]] = {}
    columns: List[str] = []
    for line in output.splitlines():
        line = line.strip()
        if not (line.startswith("|") and line.endswith("|")):
            columns = []  # a table ends where its lines do
            continue
        cells = [cell.strip() for cell in line[1:-1].split("|")]
        if not columns:
            columns = cells if "task" in cells and "reward" in cells else []
            continue
        if set("".join(cells)) <= set("-: "):
            continue
        row = dict(zip(columns, cells))
        rewards[row["task"]] = None if row["reward"] in ("-", "") else float(row["reward"])
    return rewards


# --- the image --------------------------------------------------------------------------------------

_INSTALL = """\
set -e
mkdir -p /opt/python
cp -a /src/. /opt/python/
cd /opt/python/lib/python{version}
rm -rf test idlelib tkinter turtledemo ensurepip site-packages/*
echo /opt/python/lib > /etc/ld.so.conf.d/nemo-gym-python.conf
ldconfig
ln -s /opt/python/bin/python{version} /usr/local/bin/python3
/usr/local/bin/python3 -c 'import json, pathlib, asyncio'
"""


def python_image(client: Any, version: str = IMAGE_PYTHON) -> str:
    """The minimal Debian base with a real ``python3`` inside (pyenv's build copied to /opt/python),
    built once per engine and reused; labelled ``nemo-gym-test=1`` like the suite's other images."""
    import docker.errors

    build = images.pyenv_build(version)
    tag = f"nemo-gym-test/harbor-python:{build.name}-{IMAGE_REVISION}"
    try:
        client.images.get(tag)
        return tag
    except docker.errors.ImageNotFound:
        pass
    base = images.base_image(client)
    container = client.containers.run(
        base,
        ["bash", "-c", _INSTALL.format(version=version)],
        volumes={str(build): {"bind": "/src", "mode": "ro"}},
        labels=images.LABEL,
        detach=True,
    )
    try:
        status = container.wait(timeout=600)
        if status.get("StatusCode") != 0:
            raise RuntimeError(f"building {tag} failed: {container.logs().decode(errors='replace')[-2000:]}")
        repository, name = tag.rsplit(":", 1)
        container.commit(repository=repository, tag=name, changes=['LABEL nemo-gym-test="1"', 'CMD ["bash"]'])
    finally:
        container.remove(force=True)
    return tag


def harbor_workdir(task_dir: Path) -> Optional[str]:
    """Where Harbor runs a published task's commands: ``[environment].workdir``, else the ``WORKDIR``
    its ``environment/Dockerfile`` ends in (a plain absolute one; ``None`` when it sets none)."""
    from harbor.models.task.config import TaskConfig

    config = TaskConfig.model_validate_toml((task_dir / "task.toml").read_text())
    if config.environment.workdir:
        return config.environment.workdir
    dockerfile = task_dir / "environment" / "Dockerfile"
    workdir = None
    for line in dockerfile.read_text().splitlines() if dockerfile.is_file() else []:
        parts = line.split()
        if parts and parts[0].upper() == "FROM":
            workdir = None
        elif len(parts) == 2 and parts[0].upper() == "WORKDIR" and parts[1].startswith("/"):
            workdir = parts[1]
    return workdir
