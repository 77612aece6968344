"""Task-folder features in real runs: timeouts with the multiplier, sidecar inputs, secrets,
collect hooks, multi-step tasks and users."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Optional

import pytest

from nemo_gym.data.tasks.harbor.rewards import MISSING_REWARD, VERIFIER_TIMEOUT
from nemo_gym.data.tasks.harbor.sandboxes import LocalSandbox
from nemo_gym.data.tasks.harbor.task import TaskError, load_task
from nemo_gym.data.tasks.harbor.verification import VerificationOutcome, plan_verification, run_verification

VERIFY = "def verify():\n    return 1.0\n"  # a verifier the plans below accept
GYM = str(Path(sys.executable).parent / "gym-harbor")


def write(root: Path, files: Dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def run_local(
    task_dir: Path,
    workspace: Path,
    before: Optional[Callable[[LocalSandbox], None]] = None,
    **options: Any,
) -> VerificationOutcome:
    plan = plan_verification(load_task(task_dir), **options)

    async def run() -> VerificationOutcome:
        async with LocalSandbox(workspace) as sandbox:
            if before is not None:
                before(sandbox)
            return await run_verification(plan, sandbox)

    return asyncio.run(run())


SLEEPER = {"tests/verifier.py": "import time\ndef verify():\n    time.sleep(1.6)\n    return 1\n"}


def test_timeouts_take_the_dataset_multiplier(tmp_path):
    write(
        tmp_path / "ds", {"a/task.toml": "[verifier]\ntimeout_sec = 2\n", **{f"a/{k}": v for k, v in SLEEPER.items()}}
    )
    assert run_local(tmp_path / "ds" / "a", tmp_path).reward == 1.0  # 2 s is enough
    write(tmp_path / "ds", {"dataset.toml": "timeout_multiplier = 0.5\n"})
    assert load_task(tmp_path / "ds" / "a").timeout_sec == 1.0
    assert run_local(tmp_path / "ds" / "a", tmp_path).failure_kind == VERIFIER_TIMEOUT  # 1 s is not


INPUT_PROBE = """
import os
def verify():
    folder = os.environ.get("VERIFIER_LOGS_DIR", "/logs/verifier")
    print("seen:", sorted(os.listdir(folder)))
    with open(os.path.join(folder, "actions.jsonl")) as handle:
        return float(handle.read() == '{"a": 1}\\n')
"""


def _plant(sandbox: LocalSandbox) -> None:
    logs = sandbox.host_path(sandbox.logs_dir)
    (logs / "actions.jsonl").write_text('{"a": 1}\n')  # declared: kept
    (logs / "undeclared.txt").write_text("x")  # not declared: removed
    (logs / "reward.txt").write_text("1")  # planted reward: removed
    (logs / "notes.jsonl").symlink_to(logs / "actions.jsonl")  # declared, but a symlink: removed
    (logs / "dir.jsonl").mkdir()  # declared, but a folder: removed
    tests = sandbox.host_path(sandbox.tests_dir)
    (tests / "stale_helper.py").write_text("x")  # the image's /tests: removed


def test_sidecar_inputs_survive_and_nothing_else(tmp_path):
    root = write(
        tmp_path / "ds",
        {
            "a/tests/verifier.py": INPUT_PROBE,
            "dataset.toml": '[gym.tasks."a".verifier]\ninputs = ["actions.jsonl", "notes.jsonl", "dir.jsonl"]\n',
        },
    )
    outcome = run_local(root / "a", tmp_path, before=_plant)
    assert outcome.reward == 1.0, outcome
    assert "seen: ['actions.jsonl', 'test-stdout.txt']" in outcome.stdout


def test_an_undeclared_input_is_gone(tmp_path):
    root = write(tmp_path / "ds", {"a/tests/verifier.py": INPUT_PROBE})
    outcome = run_local(root / "a", tmp_path, before=_plant)
    assert outcome.failure_kind == MISSING_REWARD and "FileNotFoundError" in outcome.stdout


SECRET = "s3cr3t-Value-that-must-not-leak"


def test_secrets_fill_verifier_env_win_over_the_host_and_never_appear(tmp_path):
    task = write(
        tmp_path / "task",
        {
            "task.toml": '[verifier]\nenv = { KEY = "${API_KEY}", PLAIN = "${HOST_ONLY}" }\n',
            "tests/verifier.py": (
                "import os\ndef verify():\n"
                "    print('key is', os.environ['KEY'], 'plain is', os.environ['PLAIN'])\n"
                f"    assert os.environ['KEY'] == {SECRET!r}\n"
                "    raise ValueError(os.environ['KEY'])\n"
            ),
        },
    )
    (tmp_path / "secrets.json").write_text(json.dumps({"API_KEY": SECRET}))
    env = {**os.environ, "API_KEY": "host-value", "HOST_ONLY": "visible"}
    for extra in ([], ["--json"]):
        result = subprocess.run(
            [
                GYM,
                "verify",
                str(task),
                "--workspace",
                str(tmp_path),
                "--secrets",
                str(tmp_path / "secrets.json"),
                *extra,
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert result.returncode == 0
        assert SECRET not in result.stdout + result.stderr
        assert "key is *** plain is visible" in result.stdout
        assert "ValueError: ***" in result.stdout
        assert "AssertionError" not in result.stdout  # the secret won over the host's API_KEY


def test_a_short_secret_masks_the_output_and_never_the_reward(tmp_path):
    """Masking is plain replacement: a secret as short as "1" masks every 1 in what is printed and kept,
    metric names included (a verifier could leak a secret through one), but the reward and the metrics'
    values are read before it, so the grade stands."""
    task = write(
        tmp_path / "task",
        {
            "task.toml": '[verifier]\nenv = { KEY = "${API_KEY}" }\n',
            "tests/verifier.py": "import os\ndef verify():\n    print('got', os.environ['KEY'])\n    return {'reward': 1, 'f1': 1}\n",
        },
    )
    outcome = run_local(task, tmp_path, secrets={"API_KEY": "1"})
    assert (outcome.reward, outcome.metrics, outcome.failure_kind) == (1.0, {"f***": 1.0}, None)
    assert "got ***" in outcome.stdout and "got 1" not in outcome.stdout
    assert b"1" not in outcome.files.get("reward.json", b"1")


def test_secrets_fill_only_verifier_env(tmp_path):
    task = write(
        tmp_path / "task",
        {
            "task.toml": '[environment]\nenv = { X = "${API_KEY}" }\n',
            "tests/verifier.py": "def verify():\n    return 1\n",
        },
    )
    (tmp_path / "secrets.toml").write_text(f'API_KEY = "{SECRET}"\n')
    env = {key: value for key, value in os.environ.items() if key != "API_KEY"}
    result = subprocess.run(
        [GYM, "verify", str(task), "--workspace", str(tmp_path), "--secrets", str(tmp_path / "secrets.toml")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert result.returncode == 1 and "needs the environment variable API_KEY" in result.stderr
    assert "--secrets" not in result.stderr  # secrets never fill [environment].env: no advice to give one


def test_a_missing_variable_fails_before_any_sandbox(tmp_path, monkeypatch):
    task = write(
        tmp_path / "task", {"task.toml": '[verifier]\nenv = { K = "${NEMO_GYM_NOPE}" }\n', "tests/verifier.py": VERIFY}
    )
    started = []
    monkeypatch.setattr(LocalSandbox, "__init__", lambda *a, **k: started.append(1))
    with pytest.raises(TaskError, match="needs the environment variable NEMO_GYM_NOPE") as raised:
        run_local(task, tmp_path)
    assert str(raised.value).endswith("is not set (set it, or give it as a secret: gym-harbor's --secrets FILE)")
    assert started == []


def test_collect_hooks_run_first_and_are_best_effort(tmp_path, caplog):
    toml = """
[[verifier.collect]]
command = "echo collected > hook.txt && echo 1 > %s/reward.txt"
[[verifier.collect]]
command = "exit 3"
[[verifier.collect]]
command = "sleep 30"
timeout_sec = 1
"""
    task = write(
        tmp_path / "task",
        {
            "tests/verifier.py": "def verify(workspace):\n    return float((workspace / 'hook.txt').read_text() == 'collected\\n') / 2\n"
        },
    )
    logs = "/logs/verifier"
    write(task, {"task.toml": toml % logs})
    workspace = tmp_path / "ws"
    workspace.mkdir()
    outcome = run_local(task, workspace)
    assert outcome.reward == 0.5  # the hook ran, and its planted reward.txt was emptied before test.sh
    messages = " ".join(record.getMessage() for record in caplog.records)
    assert "'exit 3' exited with 3" in messages and "'sleep 30' failed" in messages


MULTI_STEP = {
    "task.toml": """
[verifier]
user = "%s"
env = { SHARED = "task", OVERRIDE = "task" }
[[steps]]
name = "build"
[[steps]]
name = "grade"
[steps.verifier]
timeout_sec = 30
env = { OVERRIDE = "step" }
""",
    "steps/build/instruction.md": "",
    "steps/grade/instruction.md": "",
    "tests/verifier.py": (
        "import os\nfrom helper import score\n"
        "def verify():\n    return {'reward': score(), 'shared': float(os.environ['SHARED'] == 'task'), 'step_env': float(os.environ['OVERRIDE'] == 'step')}\n"
    ),
    "tests/helper.py": "def score():\n    return 0.25\n",
    "steps/grade/tests/helper.py": "def score():\n    return 1.0\n",
}


def test_multi_step_tasks_verify_one_step(tmp_path):
    import getpass

    files = dict(MULTI_STEP, **{"task.toml": MULTI_STEP["task.toml"] % getpass.getuser()})
    task_dir = write(tmp_path / "task", files)
    task = load_task(task_dir)
    grade = plan_verification(task, step="grade", host_env={})
    build = plan_verification(task, step="build", host_env={})
    assert (grade.timeout_sec, build.timeout_sec) == (30.0, 600.0)  # a step never takes the task's timeout
    assert grade.user == build.user == getpass.getuser()  # the step's user falls back to [verifier].user
    assert grade.env == {"SHARED": "task", "OVERRIDE": "step"}
    outcome = run_local(task_dir, tmp_path, step="grade")
    assert (outcome.reward, outcome.metrics) == (1.0, {"shared": 1.0, "step_env": 1.0})  # the step's helper.py wins
    outcome = run_local(task_dir, tmp_path, step="build")
    assert (outcome.reward, outcome.metrics) == (0.25, {"shared": 1.0, "step_env": 0.0})
    with pytest.raises(TaskError, match="name the step to verify"):
        plan_verification(task)
    with pytest.raises(TaskError, match="no step named 'deploy'"):
        plan_verification(task, step="deploy")


def test_a_user_with_a_group_is_refused_locally(tmp_path):
    task = write(tmp_path / "task", {"task.toml": '[verifier]\nuser = "nobody:nogroup"\n', "tests/verifier.py": VERIFY})
    with pytest.raises(TaskError, match="works on the Docker sandbox only"):
        run_local(task, tmp_path)


def test_agent_user_without_verifier_user_runs_as_root(tmp_path):
    task = write(tmp_path / "task", {"task.toml": '[agent]\nuser = "agent"\n', "tests/verifier.py": VERIFY})
    assert plan_verification(load_task(task)).user == "root"
    write(task, {"task.toml": '[agent]\nuser = "agent"\n[verifier]\nuser = 7\n'})
    assert plan_verification(load_task(task)).user == 7
    write(task, {"task.toml": ""})
    assert plan_verification(load_task(task)).user is None


def test_a_separate_plan_is_not_run_in_the_agents_sandbox(tmp_path):
    toml = '[verifier]\nenvironment_mode = "separate"\n[environment]\ndocker_image = "grader:1"\n'
    task = write(tmp_path / "task", {"task.toml": toml, "tests/verifier.py": VERIFY})
    plan = plan_verification(load_task(task))
    assert plan.mode == "separate"
    workspace = write(tmp_path / "ws", {"answer.txt": ""})
    with pytest.raises(TaskError, match="run_separate_verification"):
        asyncio.run(run_verification(plan, LocalSandbox(workspace)))


USER_PROBE = """
echo "uid=$(id -u) gid=$(id -g)"
if [ "$(cat answer.txt)" = "ok" ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
"""


@pytest.mark.docker
@pytest.mark.parametrize(
    "user, expected",
    [
        ("1000", "uid=1000 gid=0"),
        ('"nobody"', "uid=65534 gid=65534"),
        ('"nobody:nogroup"', "uid=65534 gid=65534"),
        ("0", "uid=0 gid=0"),
    ],
)
def test_the_verifier_runs_as_the_user_given(docker_client, tmp_path, user, expected):
    from images import LABEL, base_image

    from nemo_gym.data.tasks.harbor.sandboxes.docker import DockerSandbox

    task = write(tmp_path / "task", {"task.toml": f"[verifier]\nuser = {user}\n", "tests/test.sh": USER_PROBE})
    workspace = write(tmp_path / "ws", {"answer.txt": "ok"})
    plan = plan_verification(load_task(task))

    async def run() -> VerificationOutcome:
        sandbox = DockerSandbox(base_image(docker_client), workspace=workspace, labels=LABEL, client=docker_client)
        async with sandbox:
            return await run_verification(plan, sandbox)

    outcome = asyncio.run(run())
    assert expected in outcome.stdout, outcome
    assert outcome.reward == 1.0  # the workspace is still readable


@pytest.mark.docker
def test_an_unknown_verifier_user_is_masked_not_scored(docker_client, tmp_path):
    from images import LABEL, base_image

    from nemo_gym.data.tasks.harbor.sandboxes.docker import DockerSandbox

    task = write(tmp_path / "task", {"task.toml": '[verifier]\nuser = "no-such-user"\n', "tests/test.sh": USER_PROBE})
    plan = plan_verification(load_task(task))

    async def run() -> VerificationOutcome:
        sandbox = DockerSandbox(
            base_image(docker_client), workspace=tmp_path / "task", labels=LABEL, client=docker_client
        )
        async with sandbox:
            return await run_verification(plan, sandbox)

    outcome = asyncio.run(run())
    assert outcome.masked and outcome.mask_reason == "verifier_error", outcome
    assert "no-such-user" in outcome.detail


@pytest.mark.docker
@pytest.mark.parametrize(
    "toml, key",
    [
        ('[agent]\nuser = "ghost"\n', "[agent].user"),
        ('[[steps]]\nname = "one"\n[steps.agent]\nuser = "ghost"\n', "[steps.agent].user"),
    ],
)
def test_an_agent_user_the_image_lacks_fails_validation_naming_its_key(docker_client, tmp_path, toml, key):
    """A new author's task named a user its image did not create: validate said only that chown failed."""
    from contextlib import asynccontextmanager

    from images import LABEL, base_image

    from nemo_gym.data.tasks.harbor.sandboxes.docker import DockerSandbox
    from nemo_gym.data.tasks.harbor.validation import validate_task

    task = write(
        tmp_path / "task",
        {
            "task.toml": toml,
            "tests/verifier.py": "def verify():\n    return 1\n",
            "solution/solve.sh": "true\n",
            "steps/one/x": "",
        },
    )

    @asynccontextmanager
    async def docker(task: Any, workspace: Path) -> Any:
        async with DockerSandbox(
            base_image(docker_client), workspace=workspace, labels=LABEL, client=docker_client
        ) as box:
            yield box

    result = asyncio.run(validate_task(load_task(task), docker))
    message = result.error
    assert not result.passed
    assert f"to ghost, the agent's user ({key})" in message and "the image must create it" in message, message
    assert "invalid user" in message  # chown's own words stay


def test_the_local_sandboxs_scratch_folders_are_everyones_as_in_a_container(tmp_path):
    # A new author's task (the walkthrough of 2026-12-02): with [agent].user or [verifier].user, the
    # local sandbox's /tmp, /var/tmp and /dev/shm were root's 0755, so tempfile.mkdtemp() in verify and
    # mktemp in the oracle failed where a container (1777) lets every user write.
    if os.getuid() != 0:
        pytest.skip("named users need root (CI runs as root)")

    async def run() -> str:
        async with LocalSandbox(tmp_path, users=("agent",), workdir="/workspace") as sandbox:
            script = "for d in /tmp /var/tmp /dev/shm; do stat -c %a $d; mktemp -p $d > /dev/null && echo made; done"
            return (await sandbox.exec(script, user="agent")).stdout

    assert asyncio.run(run()).split() == ["1777", "made"] * 3


def test_what_an_agent_leaves_in_the_now_writable_tmp_derails_no_grading(tmp_path):
    # /tmp is the agent's to write now (1777): links it leaves there, named as grading's own files
    # or pointing at /tests and /logs/verifier, a FIFO and a filled folder, change no score.
    if os.getuid() != 0:
        pytest.skip("named users need root (CI runs as root)")
    plant = (
        "cd /tmp && for n in nemo-gym-stage-0 nemo-gym-oracle-0.b64 nemo-gym-artifact-0.tar reward.json; do "
        "ln -s /logs/verifier/reward.json $n; done; ln -s /tests tests; mkfifo pipe; mkdir full; "
        "for i in $(seq 200); do ln -s /logs/verifier/reward.json full/$i; done"
    )
    task = write(
        tmp_path / "task",
        {
            "task.toml": "[agent]\nuser = 'agent'\n",
            "task_data.json": '{"answer": "42"}',
            "tests/verifier.py": (
                "import tempfile\n"
                "def verify(workspace, task_data):\n"
                "    with tempfile.TemporaryDirectory():\n"
                "        pass\n"
                "    return float((workspace / 'answer.txt').read_text().strip() == task_data['answer'])\n"
            ),
        },
    )
    plan = plan_verification(load_task(task))

    async def run(answer: str) -> VerificationOutcome:
        workspace = tmp_path / f"ws-{answer}"
        workspace.mkdir()
        (workspace / "answer.txt").write_text(answer)
        async with LocalSandbox(workspace, users=("agent",), workdir="/workspace") as sandbox:
            planted = await sandbox.exec(plant, user="agent")
            assert planted.return_code == 0, planted
            return await run_verification(plan, sandbox)

    for answer, reward in (("41", 0.0), ("42", 1.0)):
        outcome = asyncio.run(run(answer))
        assert (outcome.reward, outcome.masked) == (reward, False), outcome
