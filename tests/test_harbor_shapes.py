"""Tasks in the shapes real Harbor tasks have: an absolute working directory from the Dockerfile,
named users, an oracle that reads /solution, agent state beyond the workspace, verifier output
besides the reward, and what gym-harbor verify reports about them."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Dict

import pytest
from support import write_files

from nemo_gym.data.tasks.harbor.cli import CHECK_FAILED, main
from nemo_gym.data.tasks.harbor.sandboxes.local import namespaces_available
from nemo_gym.data.tasks.harbor.workdir import DEFAULT_WORKDIR, dockerfile_workdir


@pytest.fixture(autouse=True)
def _needs_the_namespace() -> None:
    if not namespaces_available():
        pytest.fail("this machine kind provides bubblewrap (installed by .ci/run); these tasks need it")


def write(root: Path, files: Dict[str, str]) -> Path:
    return write_files(root, files, dedent=True)


def gym(capsys, *argv: str) -> tuple:
    status = main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize(
    "dockerfile, expected",
    [
        ("FROM python:3.12-slim\nWORKDIR /app\n", "/app"),
        ("FROM x\nWORKDIR /srv\nWORKDIR data\n", "/srv/data"),
        ("FROM x AS build\nWORKDIR /build\nFROM y\nRUN true\n", None),  # the final stage sets none
        ("FROM x\nWORKDIR $HOME/app\n", None),  # only the build knows it
        ('FROM x\n# WORKDIR /not\nWORKDIR "/quoted dir"\n', "/quoted dir"),
        ("FROM x\nRUN echo a \\\n  WORKDIR /no\nworkdir /lower\n", "/lower"),
    ],
)
def test_the_dockerfiles_workdir(dockerfile, expected):
    assert dockerfile_workdir(dockerfile) == expected


APP_TASK = {
    "environment/Dockerfile": "FROM python:3.12-slim\nWORKDIR /app\n",
    "tests/test.sh": """
        echo "pwd=$(pwd)"
        if [ "$(cat /app/answer.txt)" = 42 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
    """,
}


def test_the_workspace_sits_at_the_dockerfiles_workdir(tmp_path, capsys):
    task = write(tmp_path / "task", APP_TASK)
    workspace = write(tmp_path / "ws", {"answer.txt": "42"})
    status, out, _ = gym(capsys, "verify", task, "--workspace", workspace, "--json")
    report = json.loads(out.splitlines()[-1])
    assert status == 0 and report["reward"] == 1.0 and "pwd=/app" in report["stdout"], report


def test_without_a_declared_workdir_the_workspace_sits_at_the_default(tmp_path, capsys):
    task = write(tmp_path / "task", {"tests/test.sh": "pwd; echo 1 > /logs/verifier/reward.txt\n"})
    _, out, _ = gym(capsys, "verify", task, "--json")
    assert json.loads(out.splitlines()[-1])["stdout"].strip() == DEFAULT_WORKDIR


def test_a_workdir_under_a_host_folder_gets_room_made(tmp_path, capsys):
    # /usr/src exists on the host, read-only in the sandbox: the workspace still sits below it.
    files = dict(APP_TASK, **{"task.toml": '[environment]\nworkdir = "/usr/src/app"\n'})
    files["tests/test.sh"] = 'pwd; [ "$(cat answer.txt)" = 42 ] && echo 1 > /logs/verifier/reward.txt\n'
    task = write(tmp_path / "task", files)
    _, out, _ = gym(capsys, "verify", task, "--workspace", write(tmp_path / "ws", {"answer.txt": "42"}), "--json")
    report = json.loads(out.splitlines()[-1])
    assert (report["reward"], report["stdout"].strip()) == (1.0, "/usr/src/app"), report


def test_the_users_a_task_names_exist_in_the_sandbox_only(tmp_path, capsys):
    if os.getuid() != 0:
        pytest.skip("distinct users need root on the host; as anyone else every name is the caller")
    task = write(
        tmp_path / "task",
        {
            "task.toml": '[agent]\nuser = "harbor-agent"\n[verifier]\nuser = "harbor-checker"\n',
            "tests/test.sh": "id -un; id -un harbor-agent; echo 1 > /logs/verifier/reward.txt\n",
        },
    )
    _, out, _ = gym(capsys, "verify", task, "--json")
    report = json.loads(out.splitlines()[-1])
    assert report["reward"] == 1.0 and report["stdout"].split() == ["harbor-checker", "harbor-agent"], report
    assert "harbor-checker" not in Path("/etc/passwd").read_text()


def test_the_agents_artifacts_and_other_mounts_reach_the_verifier(tmp_path, capsys):
    artifacts = write(tmp_path / "artifacts", {"result.txt": "done"})
    state = write(tmp_path / "state", {"db.txt": "rows=3"})
    script = '[ "$(cat /logs/artifacts/result.txt)" = done ] && [ "$(cat /var/lib/app/db.txt)" = rows=3 ] && echo 1 > /logs/verifier/reward.txt\n'
    task = write(tmp_path / "task", {"tests/test.sh": script})
    _, out, _ = gym(capsys, "verify", task, "--artifacts", artifacts, "--mount", f"{state}:/var/lib/app", "--json")
    assert json.loads(out.splitlines()[-1])["reward"] == 1.0, out


def test_a_mount_needs_a_folder_and_an_absolute_path(tmp_path, capsys):
    task = write(tmp_path / "task", {"tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n"})
    with pytest.raises(SystemExit) as stopped:
        main(["verify", str(task), "--mount", f"{tmp_path}:relative"])
    assert stopped.value.code == 2 and "ABSOLUTE" in capsys.readouterr().err


def test_the_verifiers_other_files_come_back(tmp_path, capsys):
    script = """
        mkdir -p /logs/verifier/junit
        echo '{"tests": 3}' > /logs/verifier/ctrf.json
        echo '<xml/>' > /logs/verifier/junit/report.xml
        echo x > '/logs/verifier/odd name.txt'
        echo '{"reward": 1}' > /logs/verifier/reward.json
    """
    task = write(tmp_path / "task", {"tests/test.sh": script})
    out_dir = tmp_path / "logs-out"
    _, out, _ = gym(capsys, "verify", task, "--json", "--logs-out", out_dir)
    report = json.loads(out.splitlines()[-1])
    assert report["files"] == {"ctrf.json": 13, "junit/report.xml": 7, "reward.json": 14}, report
    assert "1 other file(s) in /logs/verifier were not kept" in report["detail"]
    assert (out_dir / "junit" / "report.xml").read_text() == "<xml/>\n"
    assert json.loads((out_dir / "ctrf.json").read_text()) == {"tests": 3}
    assert (out_dir / "test-stdout.txt").exists()


def test_a_timeout_is_reported_and_a_reward_written_before_it_stands(tmp_path, capsys):
    task = write(tmp_path / "task", {"tests/test.sh": "echo 0.5 > /logs/verifier/reward.txt\nsleep 30\n"})
    _, out, _ = gym(capsys, "verify", task, "--timeout", "1", "--json")
    report = json.loads(out.splitlines()[-1])
    assert (report["reward"], report["timed_out"], report["failure_kind"]) == (0.5, True, None), report


def test_check_makes_a_failed_run_exit_non_zero(tmp_path, capsys):
    crash = write(tmp_path / "crash", {"tests/verifier.py": "def verify():\n    raise RuntimeError('boom')\n"})
    wrong = write(tmp_path / "wrong", {"tests/verifier.py": "def verify():\n    return 0.0\n"})
    assert gym(capsys, "verify", crash)[0] == 0  # an outcome was produced
    assert gym(capsys, "verify", crash, "--check")[0] == CHECK_FAILED
    assert gym(capsys, "verify", wrong, "--check")[0] == 0  # a wrong answer is a score, not a failure


def test_labels_name_the_row_and_the_step(tmp_path, capsys):
    dataset = write(
        tmp_path / "rows",
        {
            "verifier.py": "def verify(task_data):\n    return task_data['x']\n",
            "rows.jsonl": '{"id": "france", "x": 1}\n',
        },
    )
    status, out, _ = gym(capsys, "verify", dataset, "--row", "france")
    assert status == 0 and out.startswith(f"reward 1 [{dataset} row france]"), out


ORACLE_TASK = {
    "environment/Dockerfile": "FROM python:3.12-slim\nWORKDIR /app\n",
    "task.toml": '[agent]\nuser = "harbor-agent"\n',
    "solution/solve.sh": """
        #!/bin/bash
        set -e
        cp /solution/answer.txt /app/answer.txt
        echo "solved as $(id -un) in $(pwd)"
    """,
    "solution/answer.txt": "42",
    "tests/test.sh": '[ "$(cat /app/answer.txt)" = 42 ] && echo 1 > /logs/verifier/reward.txt; ls -l /app\n',
}


def test_the_oracle_runs_from_solution_as_the_agent_in_the_workdir(tmp_path, capsys):
    if os.getuid() != 0:
        pytest.skip("the agent's own user needs root on the host")
    dataset = tmp_path / "dataset"
    write(dataset / "solved", ORACLE_TASK)
    broken = dict(ORACLE_TASK, **{"solution/solve.sh": "#!/bin/bash\necho 'cannot find it' >&2\nexit 7\n"})
    write(dataset / "broken", broken)
    status, out, err = gym(capsys, "dataset", "validate", dataset)
    assert status == 1 and "validation failed for 1 task(s): broken" in err
    assert "solved: ok (reward 1, oracle solve.sh)" in out
    assert "oracle (solve.sh) exited with 7; its output ends:" in out and "| cannot find it" in out
    assert "the verifier's output (test-stdout.txt) ends:" in out


MULTI_STEP = {
    "task.toml": """
        [environment]
        workdir = "/app"
        [[steps]]
        name = "one"
        [[steps]]
        name = "two"
    """,
    "steps/one/instruction.md": "",
    "steps/one/workdir/setup.sh": "echo ready > /app/setup-ran\n",
    "steps/one/workdir/input.txt": "21",
    "steps/one/solution/solve.sh": "#!/bin/bash\necho $(( $(cat /app/input.txt) * 2 )) > /app/answer.txt\n",
    "steps/one/tests/test.sh": '[ "$(cat /app/answer.txt)" = 42 ] && [ -f /app/setup-ran ] && echo 1 > /logs/verifier/reward.txt\n',
    "steps/two/instruction.md": "",
    "steps/two/solution/solve.sh": "#!/bin/bash\necho done > /app/two.txt\n",
    "steps/two/tests/test.sh": "[ -f /app/answer.txt ] && [ -f /app/two.txt ] && echo 1 > /logs/verifier/reward.txt\n",
}


def test_a_multi_step_task_gets_each_steps_workdir_and_setup(tmp_path, capsys):
    write(tmp_path / "dataset" / "steps", MULTI_STEP)
    status, out, err = gym(capsys, "dataset", "validate", tmp_path / "dataset")
    assert status == 0 and "steps: ok (reward 1" in out, out + err
