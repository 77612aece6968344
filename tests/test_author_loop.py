"""The task author's loop: ``gym-harbor init`` writes tasks that pass check and validate as written,
``gym-harbor verify`` never writes into the task folder and shows the verifier's output with ``-v``,
and the host side's face: its ``__all__`` and the README's host-side example, run as written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, Tuple

import pytest
from support import EXAMPLES, write_files

GYM = str(Path(sys.executable).parent / "gym-harbor")
ROOT = Path(__file__).resolve().parent.parent


def gym(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    return subprocess.run([GYM, *args], capture_output=True, text=True, cwd=cwd, timeout=300)


# --- gym-harbor init -------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["file", "answer", "test-sh"])
def test_init_writes_a_task_that_checks_verifies_and_validates(tmp_path, kind):
    task = tmp_path / "ds" / kind
    made = gym("init", str(task), "--kind", kind)
    assert made.returncode == 0, made.stderr
    checked = gym("check", str(task))
    assert (checked.returncode, checked.stdout) == (0, f"{task}: nothing found\n"), checked.stdout
    verified = gym("verify", str(task), "--check")
    assert verified.returncode == 0 and verified.stdout.startswith("reward 1 "), verified.stdout
    validated = gym("dataset", "validate", str(tmp_path / "ds"))
    assert validated.returncode == 0 and "1 of 1 task(s) scored full marks" in validated.stdout, validated.stdout
    if kind != "test-sh":  # its unit tests of verify pass, with no sandbox
        tested = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_verifier.py"],
            capture_output=True,
            text=True,
            cwd=task,
        )
        assert tested.returncode == 0 and "3 passed" in tested.stdout, tested.stdout + tested.stderr


def test_a_datasets_test_verifier_files_run_together_as_the_readme_says(tmp_path):
    for kind in ("file", "answer"):
        assert gym("init", str(tmp_path / "ds" / kind), "--kind", kind).returncode == 0
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--import-mode=importlib", "ds"]
    assert " ".join(command[3:]).replace("-q -p no:cacheprovider ", "") in (ROOT / "README.md").read_text().replace(
        "DATASET", "ds"
    )
    tested = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path)
    assert tested.returncode == 0 and "6 passed" in tested.stdout, tested.stdout + tested.stderr
    # The tests init writes catch a verify that raises, not only a wrong score: without its
    # task_data.json, the answer task's verify raises KeyError wherever it reads an answer, and the
    # wrong answer's test fails as the right one's does (its 0 is an error's).
    (tmp_path / "ds" / "answer" / "task_data.json").unlink()
    tested = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path)
    assert (
        tested.returncode == 1 and "2 failed, 4 passed" in tested.stdout and "test_a_wrong_answer" in tested.stdout
    ), tested.stdout + tested.stderr


# The README's "A task in steps", file for file.
STEPS_TASK = {
    "task.toml": '[environment]\nworkdir = "/workspace"\n\n[[steps]]\nname = "create"\n\n[[steps]]\nname = "extend"\n',
    "instruction.md": "Configure the app, in two steps.\n",
    "tests/ini_check.py": (
        "import configparser\n\n\ndef load(workspace):\n    cp = configparser.ConfigParser()\n"
        "    try:\n        if not cp.read(workspace / 'app.ini'):\n            return None\n"
        "    except configparser.Error:\n        return None\n    return cp\n"
    ),
    "steps/create/instruction.md": "Write app.ini with [server] port = 8080.\n",
    "steps/create/workdir/README.txt": "The app reads app.ini.\n",
    "steps/create/tests/verifier.py": (
        "from ini_check import load\n\n\ndef verify(workspace):\n    cp = load(workspace)\n"
        "    return cp is not None and cp.get('server', 'port', fallback=None) == '8080'\n"
    ),
    "steps/create/solution/solve.sh": '#!/bin/bash\nprintf "[server]\\nport = 8080\\n" > app.ini\n',
    "steps/extend/instruction.md": "Add [db] url = sqlite:///app.db; keep the server section.\n",
    "steps/extend/tests/verifier.py": (
        "from ini_check import load\n\n\ndef verify(workspace):\n    cp = load(workspace)\n"
        "    if cp is None:\n        return {'reward': 0.0, 'kept_server': 0}\n"
        "    kept = cp.get('server', 'port', fallback=None) == '8080'\n"
        "    db = cp.get('db', 'url', fallback=None) == 'sqlite:///app.db'\n"
        "    return {'reward': (kept + db) / 2, 'kept_server': int(kept)}\n"
    ),
    "steps/extend/solution/solve.sh": '#!/bin/bash\nprintf "\\n[db]\\nurl = sqlite:///app.db\\n" >> app.ini\n',
}


def test_the_readmes_task_in_steps_validates_and_verifies_as_it_says(tmp_path):
    readme = (ROOT / "README.md").read_text()
    for line in ("tests/ini_check.py", "steps/create/workdir/README.txt", "steps/extend/tests/verifier.py"):
        assert f"  {line} " in readme, line
    toml = readme.split("`task.toml`, whole:\n\n```toml\n", 1)[1].split("```", 1)[0]
    assert toml == STEPS_TASK["task.toml"]  # the README's task.toml is the one validated below
    task = write_files(tmp_path / "config-steps", STEPS_TASK)
    assert "gym-harbor dataset validate config-steps" in readme
    validated = gym("dataset", "validate", str(task))
    assert validated.returncode == 0 and "1 of 1 task(s) scored full marks" in validated.stdout, validated
    assert "| config-steps | create: solve.sh (1), extend: solve.sh (1) | 1 | ok |" in validated.stdout  # step by step
    assert "config-steps: ok (reward 1, oracle create: solve.sh, extend: solve.sh)" in validated.stdout
    # One step graded over a workspace where only the first step's work is done: the server kept, no db.
    assert "gym-harbor verify --step extend config-steps --workspace DIR" in " ".join(readme.split())
    workspace = write_files(tmp_path / "done-create", {"app.ini": "[server]\nport = 8080\n"})
    verified = gym("verify", "--step", "extend", str(task), "--workspace", str(workspace), "--json")
    outcome = json.loads(verified.stdout.splitlines()[-1])
    assert (outcome["reward"], outcome["metrics"]) == (0.5, {"kept_server": 1}), verified


def test_a_step_without_an_oracle_is_named_and_its_task_has_no_reward(tmp_path):
    """A new author's trial: with one step's solution/ missing, validate blamed the task's solution/
    folder, showed the earlier step's oracle output under the failure, and a reward of 1 on the FAILED row."""
    files = {name: text for name, text in STEPS_TASK.items() if not name.startswith("steps/extend/solution/")}
    task = write_files(tmp_path / "config-steps", files)
    validated = gym("dataset", "validate", str(task))
    assert validated.returncode == 1, validated
    assert (
        f"config-steps: FAILED ({task / 'steps' / 'extend'}: no solution/ folder, and the task has none: "
        "the oracle of step 'extend' has nothing to run)"
    ) in validated.stdout, validated.stdout
    assert "| config-steps | create: solve.sh (1) | - | FAILED |" in validated.stdout, validated.stdout
    assert "oracle (solve.sh) exited with" not in validated.stdout, validated.stdout


def test_init_never_overwrites_and_refuses_an_unknown_kind(tmp_path):
    folder = write_files(tmp_path / "mine", {"notes.md": "my own work\n"})
    refused = gym("init", str(folder))
    assert refused.returncode == 1 and "already exists and is not an empty folder" in refused.stderr
    assert sorted(path.name for path in folder.iterdir()) == ["notes.md"]
    assert (folder / "notes.md").read_text() == "my own work\n"
    assert gym("init", str(tmp_path / "new"), "--kind", "essay").returncode == 2


# --- gym-harbor verify leaves the task folder alone ---------------------------------------------


def _snapshot(folder: Path) -> Dict[str, Tuple[int, int]]:
    return {
        str(path.relative_to(folder)): (path.stat().st_size, path.stat().st_mtime_ns)
        for path in sorted(folder.rglob("*"))
    }


WRITER = """\
import subprocess
import sys


def verify(workspace):
    # What real verifiers do: import the agent's module (bytecode), run its tests (output files).
    sys.path.insert(0, str(workspace))
    import solution

    (workspace / "test-report.xml").write_text("<ok/>")
    subprocess.run([sys.executable, "-c", "import solution"], cwd=workspace, check=True)
    print("graded", solution.ANSWER)
    return 1.0 if solution.ANSWER == 42 else 0.0
"""


def test_verify_grades_a_copy_and_the_task_folder_never_changes(tmp_path):
    task = write_files(
        tmp_path / "task",
        {
            "task.toml": '[verifier]\ntimeout_sec = 60\n[environment]\nworkdir = "/workspace"\n',
            "tests/verifier.py": WRITER,
            "workspace/solution.py": "ANSWER = 42\n",
        },
    )
    before = _snapshot(task)
    ran = gym("verify", str(task))
    assert ran.returncode == 0 and ran.stdout.startswith("reward 1 "), ran.stdout + ran.stderr
    assert _snapshot(task) == before
    assert not list(task.rglob("__pycache__"))
    # Asked to, it grades the folder itself.
    in_place = gym("verify", str(task), "--in-place")
    assert in_place.stdout.startswith("reward 1 "), in_place.stdout
    assert (task / "workspace" / "test-report.xml").is_file()


def test_verbose_shows_the_verifiers_output_on_success(tmp_path):
    quiet = gym("verify", str(EXAMPLES / "answer-file"))
    loud = gym("verify", str(EXAMPLES / "answer-file"), "-v")
    assert "test-stdout.txt" not in quiet.stdout
    assert loud.returncode == 0 and '--- test-stdout.txt ---\nreward.json: {"reward": 1}' in loud.stdout, loud.stdout


# --- the host side's face ---------------------------------------------------------------------


def test_the_host_side_exports_what_a_server_needs_lazily():
    program = (
        "import sys, nemo_gym.data.tasks.harbor as harbor\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('nemo_gym.data.tasks.harbor.'))\n"
        "assert loaded == [], loaded\n"
        "names = harbor.__all__\n"
        "assert {'load_task', 'plan_verification', 'run_verification', 'LocalSandbox', 'attach', 'verify_rollouts',"
        " 'run_verify', 'check', 'run_separate_verification', 'verifier_sandbox_opener'} <= set(names), names\n"
        "for name in names: getattr(harbor, name)\n"
        "print(len(names))\n"
    )
    ran = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    with pytest.raises(AttributeError):
        import nemo_gym.data.tasks.harbor as harbor

        harbor.no_such_name  # noqa: B018


def test_every_host_module_declares_its_public_names():
    folder = ROOT / "nemo_gym" / "data" / "tasks" / "harbor"
    missing = [
        str(path.relative_to(folder))
        for path in sorted(folder.rglob("*.py"))
        if not path.name.startswith("_") and path.name != "cli.py" and "__all__ =" not in path.read_text()
    ]
    assert missing == []


def test_the_readmes_host_side_example_runs_as_written(tmp_path):
    readme = (ROOT / "README.md").read_text()
    block = readme.split("<!-- host-side example -->\n```python\n", 1)[1].split("```", 1)[0]
    script = tmp_path / "example.py"
    script.write_text(block)
    ran = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, cwd=ROOT, env={**os.environ}, timeout=120
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "1.0 False None\n"


def test_the_readme_lists_every_shipped_example():
    readme = (ROOT / "README.md").read_text()
    listed = readme.split("The shipped examples are:", 1)[1].split("\n\n", 1)[0]
    shipped = sorted(path.name for path in (ROOT / "examples").iterdir() if (path / "task.toml").is_file())
    assert [name for name in shipped if f"`examples/{name}`" not in listed] == []


def test_every_link_within_the_readme_names_one_of_its_headings():
    """GitHub's anchors: the heading in lower case, without punctuation but ``-`` and ``_``, spaces
    made ``-``. A heading renamed breaks the links to it, the contents at the top most of all."""
    import re

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    prose = re.sub(r"^```.*?^```", "", readme, flags=re.MULTILINE | re.DOTALL)  # a `# comment` is no heading
    headings = re.findall(r"^#{1,6} (.+)$", prose, flags=re.MULTILINE)
    anchors = {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}
    links = re.findall(r"\]\(#([^)]+)\)", readme)
    assert len(links) >= 15
    assert [link for link in links if link not in anchors] == []
