"""`gym-harbor verify`: the human summary, --json, exit statuses and one-sentence errors."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, List

import pytest
from support import EXAMPLES, write_files

GYM = str(Path(sys.executable).parent / "gym-harbor")


def gym(*args: str, cwd: Path = EXAMPLES.parent) -> subprocess.CompletedProcess:
    return subprocess.run([GYM, *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)


@pytest.mark.parametrize("example", ["answer-file", "async-metrics", "bash-test", "numeric-response"])
def test_verify_an_example(example):
    result = gym("verify", f"examples/{example}")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"reward 1 [examples/{example}]")


def test_verify_with_a_response_file_json_or_text(tmp_path):
    result = gym("verify", "examples/numeric-response", "--response", "examples/numeric-response/response.json")
    assert result.stdout.startswith("reward 1 ")
    (tmp_path / "answer.md").write_text("The total is\n\n**Answer:** 4.2\n")
    result = gym("verify", "examples/numeric-response", "--response", str(tmp_path / "answer.md"))
    assert result.stdout.startswith("reward 1 ")
    assert gym("verify", "examples/numeric-response").stdout.startswith("reward 1 ")  # its response.json by default
    unread = f"gym-harbor: note: verify declares no `response`, so {tmp_path / 'answer.md'} was not read\n"
    assert "declares no `response`" not in result.stderr  # numeric-response's verify reads it
    # A verify that never gets a response: the file given is said to be unread, and the run goes on.
    result = gym("verify", "examples/answer-file", "--response", str(tmp_path / "answer.md"))
    assert result.stdout.startswith("reward 1 ")
    assert result.stderr.endswith(unread), result.stderr


def test_a_response_or_task_data_given_to_a_test_sh_verifier_is_said_to_be_unread(tmp_path):
    """A new author's trial: --response (and --task-data) went silently unused on a test.sh task,
    which gets neither (Harbor hands test.sh no response), so a failing answer looked graded."""
    (tmp_path / "answer.md").write_text("42\n")
    (tmp_path / "data.json").write_text('{"expected": 42}\n')
    result = gym(
        "verify",
        "examples/bash-test",
        "--response",
        str(tmp_path / "answer.md"),
        "--task-data",
        str(tmp_path / "data.json"),
    )
    assert result.stdout.startswith("reward 1 "), result.stdout + result.stderr
    assert result.stderr.endswith(
        f"gym-harbor: note: examples/bash-test's verifier is a test.sh, which gets no response or task_data "
        f"(Harbor hands test.sh neither), so {tmp_path / 'answer.md'} and {tmp_path / 'data.json'} were not read\n"
    ), result.stderr
    assert "not read" not in gym("verify", "examples/bash-test").stderr
    result = gym("verify", "examples/bash-test", "--task-data", str(tmp_path / "data.json"))
    assert result.stderr.endswith(f"so {tmp_path / 'data.json'} was not read\n"), result.stderr


def test_a_misspelt_task_toml_key_is_said_by_verify_too(tmp_path):
    """A new author's trial: `[verifer] timeout_sec = 5` was said by `check` only, and `verify`
    graded with the default timeout in silence. An unknown key near no known one stays unsaid."""
    task = tmp_path / "typo"
    shutil.copytree(EXAMPLES / "answer-file", task)
    with open(task / "task.toml", "a") as toml:
        toml.write('\n[verifer]\ntimeout_sec = 5\n\n[metadata]\nauthor = "me"\n\n[extra_stuff]\nx = 1\n')
    result = gym("verify", str(task))
    assert result.stdout.startswith("reward 1 "), result.stderr
    assert (
        f"gym-harbor: {task / 'task.toml'}: verifer: warning: unknown key, ignored (as Harbor ignores it), "
        "and with it timeout_sec; did you mean verifier?\n"
    ) in result.stderr
    assert "extra_stuff" not in result.stderr and "metadata" not in result.stderr
    assert "unknown key" not in gym("verify", "examples/answer-file").stderr


def test_a_task_folder_given_as_the_workspace_is_noted():
    result = gym("verify", "examples/answer-file", "--workspace", "examples/answer-file")
    assert result.stdout.startswith("reward 0 ")  # graded all the same: no answer.txt there
    assert result.stderr.endswith(
        "gym-harbor: note: --workspace examples/answer-file holds a task.toml: it was graded as the agent's "
        "working directory (a task's own sample is its workspace/ folder, the default)\n"
    ), result.stderr
    assert "holds a task.toml" not in gym("verify", "examples/answer-file").stderr


def test_json_output_is_one_object_on_the_last_line():
    result = gym("verify", "examples/async-metrics", "--json")
    outcome = json.loads(result.stdout.splitlines()[-1])
    assert set(outcome) >= {"reward", "metrics", "reward_components", "failure_kind", "masked", "stdout"}
    assert outcome["reward"] == 1.0 and outcome["metrics"]["recall"] == 1.0 and outcome["masked"] is False


def test_a_failed_verifier_shows_its_output(tmp_path):
    (tmp_path / "answer.txt").write_text("Lyon")
    result = gym("verify", "examples/answer-file", "--workspace", str(tmp_path))
    assert result.returncode == 0 and result.stdout.startswith("reward 0 ")
    assert "test-stdout.txt" not in result.stdout  # a score of 0 is not a failure of the verifier
    task = tmp_path / "no-sample"
    shutil.copytree(EXAMPLES / "numeric-response", task)
    (task / "response.json").unlink()
    result = gym("verify", str(task))
    assert result.returncode == 0
    assert "failure: harbor:missing_reward: the verifier wrote no reward (" in result.stdout  # one level of brackets
    assert "--- test-stdout.txt ---" in result.stdout and "verify requires `response`" in result.stdout
    assert "`gym-harbor verify` the task's response.json or --response" in result.stdout  # says how to give one


def test_task_data_and_timeout_options(tmp_path):
    (tmp_path / "data.json").write_text('{"answer": "Lyon"}')
    result = gym("verify", "examples/answer-file", "--task-data", str(tmp_path / "data.json"), "--json")
    assert json.loads(result.stdout.splitlines()[-1])["reward"] == 0.0
    task = tmp_path / "slow"
    (task / "tests").mkdir(parents=True)
    (task / "tests" / "verifier.py").write_text("import time\ndef verify():\n    time.sleep(30)\n")
    result = gym("verify", str(task), "--timeout", "1", "--json")
    assert json.loads(result.stdout.splitlines()[-1])["failure_kind"] == "harbor:verifier_timeout"


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "the following arguments are required"),
        (["examples/answer-file", "--sandbox", "cloud"], "invalid choice"),
        (["examples/answer-file", "--response", "missing.json"], "--response missing.json: cannot read it"),
        (["examples/answer-file", "--workspace", "missing"], "--workspace missing: not a folder"),
        (["examples/answer-file", "--timeout", "0"], "--timeout must be a finite positive number"),
    ],
)
def test_usage_errors_exit_2(args: List[str], message):
    result = gym("verify", *args)
    assert result.returncode == 2 and message in result.stderr
    # The usage shown is verify's, also for what is found wrong after parsing (a new author's walkthrough).
    assert result.stderr.startswith("usage: gym-harbor verify ") and "gym-harbor verify: error: " in result.stderr


@pytest.mark.parametrize(
    "place", ["/tests", "/tests/data", "/logs/verifier", "/logs/verifier/x", "/", "/workspace", "/workspace/"]
)
def test_a_mount_where_grading_or_the_workspace_goes_is_a_usage_error_and_the_host_folder_is_kept(tmp_path, place):
    # Red team 57: --mount DIR:/tests (or /logs/verifier) bound DIR where grading empties the folder:
    # the host's files were lost (the task folder itself, given as DIR). At the working directory it hid
    # the workspace (a silent 0).
    precious = write_files(tmp_path / "precious", {"notes.txt": "mine\n"})
    result = gym("verify", "examples/answer-file", "--mount", f"{precious}:{place}")
    assert result.returncode == 2, result.stderr
    assert f"--mount {precious}:{place}: the sandbox path " in result.stderr
    assert sorted(os.listdir(precious)) == ["notes.txt"]


@pytest.mark.parametrize("place", ["/tests", "/logs/verifier/x", "/app", "/"])
def test_the_sandboxes_refuse_such_a_mount_themselves(tmp_path, place):
    from nemo_gym.data.tasks.harbor.sandboxes import LocalSandbox, SandboxError
    from nemo_gym.data.tasks.harbor.sandboxes.docker import DockerSandbox

    precious = write_files(tmp_path / "precious", {"notes.txt": "mine\n"})
    workspace = write_files(tmp_path / "workspace", {})
    with pytest.raises(SandboxError, match=f"the mount {precious}:{place} is refused: the sandbox path "):
        LocalSandbox(workspace, workdir="/app", mounts={place: precious})
    with pytest.raises(SandboxError, match=f"the mount {precious}:{place} is refused: the sandbox path "):
        DockerSandbox("any:image", workspace=workspace, workdir="/app", mounts={place: precious}, client=object())
    # Without a declared working directory, the one the container runs in is checked once it is known.
    docker = DockerSandbox("any:image", workspace=workspace, mounts={"/srv": precious})
    with pytest.raises(SandboxError, match="is refused: the sandbox path is or holds the working directory /srv"):
        docker._refuse_mounts("/srv")
    assert sorted(os.listdir(precious)) == ["notes.txt"]


def test_a_mount_elsewhere_and_artifacts_still_go_in(tmp_path):
    data = write_files(tmp_path / "data", {"notes.txt": "mine\n"})
    artifacts = write_files(tmp_path / "artifacts", {"a.txt": "a\n"})
    result = gym("verify", "examples/answer-file", "--mount", f"{data}:/data", "--artifacts", str(artifacts))
    assert result.returncode == 0 and result.stdout.startswith("reward 1"), result.stdout + result.stderr


def test_a_mount_inside_the_workspace_or_another_mount_leaves_no_mount_point_behind(tmp_path):
    # Red team 59: bubblewrap makes a mount's folder in the host folder it is bound into; verify --in-place
    # left an empty sub/data in the author's own workspace (and one in the other mount's host folder).
    from nemo_gym.data.tasks.harbor.sandboxes.local import namespaces_available

    if not namespaces_available():
        pytest.skip("the sandbox places folders only with bubblewrap")
    workspace = write_files(tmp_path / "ws", {"answer.txt": "Paris\n", "kept/x.txt": "x\n"})
    outer = write_files(tmp_path / "outer", {"o.txt": "o\n"})
    inner = write_files(tmp_path / "inner", {"i.txt": "i\n"})
    kept = write_files(tmp_path / "kept", {"k.txt": "k\n"})
    mounts = ["--mount", f"{inner}:/workspace/sub/data/deep/er", "--mount", f"{outer}:/workspace/sub/data"]
    mounts += ["--mount", f"{kept}:/workspace/kept"]
    result = gym("verify", "examples/answer-file", "--workspace", str(workspace), "--in-place", *mounts)
    assert result.returncode == 0 and result.stdout.startswith("reward 1"), result.stdout + result.stderr
    assert sorted(str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*")) == [
        "inner",
        "inner/i.txt",
        "kept",
        "kept/k.txt",
        "outer",
        "outer/o.txt",
        "ws",
        "ws/answer.txt",
        "ws/kept",
        "ws/kept/x.txt",
    ]
    # Given inner first, the outer mount went on top of it and hid it; each is where it was put.
    from nemo_gym.data.tasks.harbor.sandboxes import LocalSandbox

    async def read() -> str:
        mounted = {"/app/sub/data/deep/er": inner, "/app/sub/data": outer}
        async with LocalSandbox(workspace, workdir="/app", mounts=mounted) as sandbox:
            result = await sandbox.exec("cat sub/data/deep/er/i.txt sub/data/o.txt", cwd="/app")
            return result.stdout

    assert asyncio.run(read()) == "i\no\n"


def test_init_where_no_folder_can_be_made_is_one_sentence(tmp_path):
    (tmp_path / "a-file").write_text("x")
    result = gym("init", str(tmp_path / "a-file" / "task"))
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert (
        result.stderr.strip()
        == f"gym-harbor: {tmp_path / 'a-file' / 'task'}: cannot write a task there (Not a directory: {tmp_path / 'a-file' / 'task'})"
    )


def test_logs_out_that_is_a_file_is_a_usage_error_before_the_run(tmp_path):
    # Red team 57: the whole verification ran, then --logs-out FILE ended in a FileExistsError traceback.
    (tmp_path / "a-file").write_text("kept")
    result = gym("verify", "examples/answer-file", "--logs-out", str(tmp_path / "a-file"))
    assert result.returncode == 2 and f"--logs-out {tmp_path / 'a-file'}: not a folder" in result.stderr
    assert (tmp_path / "a-file").read_text() == "kept"
    result = gym("verify", "examples/answer-file", "--logs-out", str(tmp_path / "a-file" / "logs"))
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert "cannot write the verifier's files (Not a directory" in result.stderr


def test_a_fifo_or_a_bom_in_the_tasks_files_is_one_sentence_and_never_hangs(tmp_path):
    # Red team 57: a FIFO at task_data.json hung verify (and it took SIGKILL to stop); a BOM in
    # task.toml gave TOML's "Invalid statement" with no word of the BOM.
    task = tmp_path / "task"
    shutil.copytree(EXAMPLES / "answer-file", task)
    (task / "task_data.json").unlink()
    os.mkfifo(task / "task_data.json")
    result = subprocess.run(
        [sys.executable, "-m", "nemo_gym.data.tasks.harbor", "verify", str(task)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1 and "task_data.json: cannot read task_data" in result.stderr
    assert "not a regular file" in result.stderr
    (task / "task_data.json").unlink()
    (task / "task.toml").write_bytes(b"\xef\xbb\xbf" + (EXAMPLES / "answer-file" / "task.toml").read_bytes())
    result = gym("check", str(task))
    assert "task.toml: error: not valid TOML (it starts with a byte order mark" in result.stdout + result.stderr


@pytest.mark.parametrize("workdir", ["/tests", "/logs/verifier/app", "/"])
def test_a_dockerfile_workdir_where_grading_goes_is_an_error_and_the_workspace_is_kept(tmp_path, workdir):
    # The Dockerfile's WORKDIR (what the task declares without [environment].workdir) at /tests: the
    # local sandbox bound the workspace there and grading emptied it, the author's own with --in-place.
    task = tmp_path / "task"
    shutil.copytree(EXAMPLES / "answer-file", task)
    toml = (task / "task.toml").read_text()
    kept = [line for line in toml.splitlines() if not line.startswith(("docker_image", "workdir"))]
    (task / "task.toml").write_text("\n".join(kept) + "\n")
    write_files(task / "environment", {"Dockerfile": f"FROM python:3.12-slim\nWORKDIR {workdir}\n"})
    workspace = write_files(tmp_path / "workspace", {"answer.txt": "Paris\n"})
    result = gym("verify", str(task), "--workspace", str(workspace), "--in-place")
    assert result.returncode == 1 and f"Dockerfile: WORKDIR {workdir} " in result.stderr, result.stderr
    assert sorted(os.listdir(workspace)) == ["answer.txt"]
    result = gym("check", str(task))
    assert result.returncode == 1 and f"Dockerfile: WORKDIR: error: WORKDIR {workdir} " in result.stdout


def test_a_fifo_or_a_device_among_a_tasks_other_files_is_refused_never_waited_on(tmp_path):
    # Red team 59: a FIFO as environment/Dockerfile or rows.jsonl hung verify and check (SIGKILL to
    # stop), and a Dockerfile linked to /dev/zero read until memory ran out.
    task = tmp_path / "task"
    shutil.copytree(EXAMPLES / "answer-file", task)
    (task / "environment").mkdir()
    os.mkfifo(task / "environment" / "Dockerfile")
    for command in (["verify", str(task)], ["check", str(task)]):
        result = subprocess.run([GYM, *command], capture_output=True, text=True, timeout=60)
        assert "Traceback" not in result.stderr, result.stderr
    (task / "environment" / "Dockerfile").unlink()
    (task / "environment" / "Dockerfile").symlink_to("/dev/zero")
    result = subprocess.run([GYM, "check", str(task)], capture_output=True, text=True, timeout=60)
    assert "Traceback" not in result.stderr, result.stderr
    rows = tmp_path / "rows"
    shutil.copytree(EXAMPLES / "answer-file", rows)
    os.mkfifo(rows / "rows.jsonl")
    result = subprocess.run([GYM, "verify", str(rows), "--row", "x"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "rows.jsonl: cannot read it" in result.stderr, result.stderr


def test_options_may_name_a_pipe(tmp_path):
    # Red team 59: --task-data <(echo ...) (a pipe the shell gives as /dev/fd/N) was refused as no regular
    # file once the task's own files were; a path the operator names is read as it comes.
    read, write = os.pipe()
    os.write(write, b'{"answer": "Paris"}')
    os.close(write)
    try:
        result = subprocess.run(
            [GYM, "verify", "examples/answer-file", "--task-data", f"/dev/fd/{read}"],
            cwd=EXAMPLES.parent,
            capture_output=True,
            text=True,
            timeout=120,
            pass_fds=(read,),
        )
    finally:
        os.close(read)
    assert result.returncode == 0 and result.stdout.startswith("reward 1"), result.stdout + result.stderr


def test_json_output_says_an_error_too(tmp_path):
    # Red team 57: with --json, a task that failed to load printed nothing on stdout.
    result = gym("verify", str(_bad_task(tmp_path, "[verifier\n")), "--json")
    assert result.returncode == 1 and "task.toml: not valid TOML" in result.stderr
    assert "task.toml: not valid TOML" in json.loads(result.stdout.splitlines()[-1])["error"]


def test_limits_the_local_sandbox_does_not_enforce_are_said(tmp_path):
    # Red team 57: a verify allocating 1 GiB scored 1 under memory_mb = 256, with no word of the limit.
    task = tmp_path / "task"
    shutil.copytree(EXAMPLES / "answer-file", task)
    toml = (task / "task.toml").read_text()
    (task / "task.toml").write_text(toml.replace("[environment]\n", "[environment]\nmemory_mb = 256\ncpus = 0.5\n", 1))
    result = gym("verify", str(task))
    assert result.returncode == 0 and result.stdout.startswith("reward 1"), result.stdout + result.stderr
    note = "gym-harbor: note: the local sandbox does not enforce [environment] cpus = 0.5, memory_mb = 256"
    assert note in result.stderr
    assert "does not enforce" not in gym("verify", "examples/answer-file").stderr


def test_a_verifier_py_that_is_a_folder_is_said_to_be_one(tmp_path):
    task = tmp_path / "task"
    shutil.copytree(EXAMPLES / "answer-file", task)
    (task / "tests" / "verifier.py").unlink()
    (task / "tests" / "verifier.py").mkdir()
    result = gym("verify", str(task))
    assert result.returncode == 1
    assert f"({task / 'tests' / 'verifier.py'} is not a regular file)" in result.stderr, result.stderr


def test_a_task_that_cannot_be_staged_fails_alone_naming_its_file(tmp_path):
    # Red team 57: tests/verifier.py linked out of one task's folder stopped `dataset validate` for every
    # task, with a message that named no task, no JSON, and only a warning from `check`.
    outside = tmp_path / "outside.py"
    outside.write_text((EXAMPLES / "answer-file" / "tests" / "verifier.py").read_text())
    for name in ("bad", "good"):
        shutil.copytree(EXAMPLES / "answer-file", tmp_path / "ds" / name)
    (tmp_path / "ds" / "bad" / "tests" / "verifier.py").unlink()
    (tmp_path / "ds" / "bad" / "tests" / "verifier.py").symlink_to(outside)
    named = f"{tmp_path / 'ds' / 'bad' / 'tests' / 'verifier.py'} is a symlink leading out of the task folder"
    result = gym("dataset", "validate", str(tmp_path / "ds"), "--json")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout.splitlines()[-1])
    tasks = {task["task_id"]: task for task in report["tasks"]}
    assert tasks["good"]["passed"] and not tasks["bad"]["passed"] and named in tasks["bad"]["error"]
    result = gym("check", str(tmp_path / "ds"))
    assert (
        result.returncode == 1
        and f"{tmp_path / 'ds' / 'bad' / 'tests'}: error: cannot be staged: {named}" in result.stdout
    )


def _bad_task(tmp_path: Path, toml: str) -> Path:
    (tmp_path / "tests").mkdir(exist_ok=True)
    (tmp_path / "tests" / "verifier.py").write_text("def verify():\n    return 1\n")
    (tmp_path / "task.toml").write_text(toml)
    return tmp_path


@pytest.mark.parametrize(
    "toml, message",
    [
        ("[verifier\n", "task.toml: not valid TOML"),
        ('[verifier]\ntimeout_sec = "soon"\n', "verifier.timeout_sec must be a finite positive number"),
        (
            '[verifier]\nenv = { K = "${NEMO_GYM_SURELY_UNSET}" }\n',
            "needs the environment variable NEMO_GYM_SURELY_UNSET",
        ),
        ("[environment]\nworkdir = 3\n", "environment.workdir must be a string"),
    ],
)
def test_task_errors_are_one_sentence(tmp_path, toml, message):
    result = gym("verify", str(_bad_task(tmp_path, toml)))
    assert result.returncode == 1
    assert message in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_task_without_a_verifier(tmp_path):
    result = gym("verify", str(tmp_path))
    assert result.returncode == 1 and "no tests/ folder and no dataset verifier.py" in result.stderr


def test_docker_needs_an_image(tmp_path):
    result = gym("verify", str(_bad_task(tmp_path, "")), "--sandbox", "docker")
    assert result.returncode == 1 and "no Docker image" in result.stderr


@pytest.mark.docker
def test_verify_on_docker(docker_client):
    from images import base_image

    result = gym("verify", "examples/bash-test", "--sandbox", "docker", "--image", base_image(docker_client), "--json")
    outcome = json.loads(result.stdout.splitlines()[-1])
    assert (outcome["reward"], outcome["failure_kind"], outcome["masked"]) == (1.0, None, False)


@pytest.mark.docker
def test_a_sandbox_that_cannot_start_is_an_error_not_a_score(docker_client):
    result = gym("verify", "examples/bash-test", "--sandbox", "docker", "--image", "nemo-gym-test/no-such-image:0")
    assert result.returncode == 1 and "cannot start a container" in result.stderr


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e999", "-1"])
def test_timeout_must_be_finite_and_positive(value):
    result = gym("verify", "examples/answer-file", f"--timeout={value}")
    assert result.returncode == 2 and "--timeout must be a finite positive number" in result.stderr


DEEP = "[" * 5000 + "]" * 5000


@pytest.mark.parametrize(
    "option, name, content, message",
    [
        ("--response", "r.json", b'{"output": ' + DEEP.encode() + b"}", "not valid JSON (nested more than 100 levels"),
        ("--response", "r.json", b'{"output": NaN}', "not valid JSON (NaN is not a JSON number)"),
        ("--response", "r.json", b"[1]", "must hold a JSON object"),
        (
            "--response",
            "r.json",
            b'{"output_text": "42"}',
            "a JSON object without `output` is no Responses API response",
        ),
        ("--response", "r.json", b'{"output": "Answer: 72"}', "`output` must be a list of output items, not str"),
        (
            "--response",
            "r.json",
            b'{"output": {"type": "message"}}',
            "`output` must be a list of output items, not dict",
        ),
        ("--response", "r.json", b"\xff{}", "not UTF-8 text"),
        ("--response", "r.txt", b"answer \xff", "not UTF-8 text"),
        ("--task-data", "d.json", b'{"a": ' + DEEP.encode() + b"}", "cannot read --task-data (nested more than 100"),
        ("--task-data", "d.json", b'{"a": 1e999}', "cannot read --task-data (the number 1e999 is out of range)"),
        ("--secrets", "s.json", b'{"K": "a\\u0000"}', "secrets.K holds a NUL character"),
        ("--secrets", "s.toml", b"K = " + DEEP.encode() + b"\n", "not valid TOML (nested more than 100 levels"),
    ],
)
def test_bad_option_files_are_one_sentence_and_exit_1(tmp_path, option, name, content, message):
    (tmp_path / name).write_bytes(content)
    result = gym("verify", "examples/answer-file", option, str(tmp_path / name))
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.startswith(
        f"gym-harbor: {option} {tmp_path / name}: " if option == "--response" else "gym-harbor: "
    )
    assert message in result.stderr and str(tmp_path / name) in result.stderr
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr


def test_an_error_naming_a_newline_stays_one_line(tmp_path):
    task = tmp_path / "two\nlines"
    (task / "tests").mkdir(parents=True)
    (task / "task.toml").write_text("[verifier\n")
    result = gym("verify", str(task))
    assert result.returncode == 1 and len(result.stderr.splitlines()) == 1
    assert "two\\nlines" in result.stderr and "not valid TOML" in result.stderr


# --- signals: gym stops in order, removes its temporary folders, prints one line ------------------

SLEEPER = """\
import time

def verify(workspace):
    (workspace / "tick").write_text("-1")  # before "started": the signal may come before the loop's first tick
    (workspace / "started").write_text("")
    for tick in range(600):
        (workspace / "tick").write_text(str(tick))
        time.sleep(0.05)
    return 1
"""


def _interrupt(argv: List[str], tmp: Path, started: Callable[[], bool], signum: int) -> subprocess.CompletedProcess:
    """Runs ``python -m nemo_gym.data.tasks.harbor.cli ARGV`` with TMPDIR=tmp, sends ``signum`` once ``started()``."""
    env = {**os.environ, "TMPDIR": str(tmp)}
    process = subprocess.Popen(
        [sys.executable, "-m", "nemo_gym.data.tasks.harbor.cli", *argv],
        cwd=EXAMPLES.parent,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not started():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the verifier never started"
            time.sleep(0.05)
        process.send_signal(signum)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def _assert_stopped(result: subprocess.CompletedProcess, signum: int, tmp: Path, workspace: Path) -> None:
    name = signal.Signals(signum).name
    assert result.returncode == 128 + signum, result.stderr
    assert result.stderr == f"gym-harbor: interrupted ({name})\n"
    assert list(tmp.iterdir()) == []  # sandbox, workspace and verification folders all removed
    tick = (workspace / "tick").read_text()
    time.sleep(0.3)
    assert (workspace / "tick").read_text() == tick  # the verifier died with its sandbox


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_verify_stops_in_order_on_a_signal(tmp_path, signum):
    task, workspace, tmp = tmp_path / "task", tmp_path / "workspace", tmp_path / "tmp"
    for folder in (task / "tests", workspace, tmp):
        folder.mkdir(parents=True)
    (task / "tests" / "verifier.py").write_text(SLEEPER)
    argv = ["verify", str(task), "--workspace", str(workspace), "--in-place"]  # watched from here
    result = _interrupt(argv, tmp, (workspace / "started").exists, signum)
    _assert_stopped(result, signum, tmp, workspace)
    assert result.stdout == ""


def test_dataset_validate_stops_in_order_on_sigterm(tmp_path):
    dataset, tmp = tmp_path / "dataset", tmp_path / "tmp"
    for folder in (dataset / "slow" / "tests", dataset / "slow" / "solution", tmp):
        folder.mkdir(parents=True)
    (dataset / "slow" / "tests" / "verifier.py").write_text(SLEEPER)
    (dataset / "slow" / "solution" / "answer.md").write_text("x")
    workspaces: List[Path] = []

    def started() -> bool:  # validate grades a fresh workspace under TMPDIR
        workspaces[:] = [path.parent for path in tmp.glob("nemo-gym-validate-*/workspace/started")]
        return bool(workspaces)

    result = _interrupt(["dataset", "validate", str(dataset)], tmp, started, signal.SIGTERM)
    assert result.returncode == 128 + signal.SIGTERM, result.stderr
    assert result.stderr == "gym-harbor: interrupted (SIGTERM)\n"
    assert list(tmp.iterdir()) == []


RESPONSE_ROWS = {
    "verifier.py": "def verify(response, task_data):\n    return 1.0\n",
    "rows.jsonl": "".join(
        json.dumps({"id": f"r{index}", "instruction": "Say it.", "solution": "it"}) + "\n" for index in range(7)
    ),
}


def _write(root: Path, files: dict) -> Path:
    return write_files(root, files)


def test_publish_refusals_are_grouped_one_line_per_reason(tmp_path, capsys):
    from nemo_gym.data.tasks.harbor.cli import main

    dataset = _write(tmp_path / "rows", RESPONSE_ROWS)
    assert main(["dataset", "publish", "--harbor", str(dataset), str(tmp_path / "out")]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("gym-harbor: ") and len(lines) == 2, lines
    assert lines[1].startswith("  7 rows (r0, r1, r2, r3, r4 and 2 more): verify declares `response`"), lines
    assert not (tmp_path / "out").exists()


def test_validate_warns_about_tasks_that_cannot_publish(tmp_path, capsys):
    from nemo_gym.data.tasks.harbor.cli import main

    dataset = _write(tmp_path / "rows", RESPONSE_ROWS)
    main(["dataset", "validate", str(dataset)])
    out = capsys.readouterr().out
    assert out.startswith(f"{dataset}: publish --harbor: warning: cannot publish for Harbor: 7 rows (r0, r1"), out


def test_publish_takes_the_base_image(tmp_path, capsys):
    from nemo_gym.data.tasks.harbor.cli import main

    dataset = _write(
        tmp_path / "ds",
        {"t/instruction.md": "Do it.", "t/tests/test.sh": "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n"},
    )
    out = tmp_path / "out"
    assert main(["dataset", "publish", "--harbor", str(dataset), str(out), "--base-image", "local/python:3.12"]) == 0
    assert (out / "t" / "environment" / "Dockerfile").read_text().splitlines()[1:3] == [
        "FROM local/python:3.12",
        "WORKDIR /workspace",
    ]
    assert capsys.readouterr().out.startswith("published 1 task(s) for Harbor")


def test_validate_takes_one_task_folder_with_its_datasets_settings(tmp_path):
    """A new author's walkthrough (2026-12-04): ``dataset validate TASK`` was refused, and an author
    with one task to check had to make a dataset of it. One task folder validates alone, with what
    the folder holding it adds (here its ``verifier.py``, so the task's own ``tests/`` is empty)."""
    dataset = tmp_path / "ds"
    oracle = {"solution/solve.sh": "#!/bin/bash\necho 42 > answer.txt\n"}
    write_files(
        dataset,
        {"verifier.py": "def verify(workspace):\n    return (workspace / 'answer.txt').read_text().strip() == '42'\n"},
    )
    for name in ("one", "two"):
        write_files(dataset / name, {"task.toml": "", "instruction.md": "Write 42 to answer.txt.\n", **oracle})
    (dataset / "two" / "solution" / "solve.sh").write_text("#!/bin/bash\necho 41 > answer.txt\n")
    validated = gym("dataset", "validate", str(dataset / "one"), "--json")
    assert validated.returncode == 0, validated
    report = json.loads(validated.stdout)
    assert [(task["task_id"], task["reward"]) for task in report["tasks"]] == [("one", 1.0)], report
    validated = gym("dataset", "validate", str(dataset / "two"))
    assert validated.returncode == 1 and "| two |" in validated.stdout and "| one |" not in validated.stdout, validated


@pytest.mark.parametrize("given", ["empty", "untitled"])
def test_a_command_given_no_task_fails_naming_the_folder(tmp_path, given):
    # A new author's walkthrough (2026-12-02): validate, publish and check of a task folder, or of an
    # empty one, reported "0 of 0 task(s) scored full marks", "published 0 task(s)" or "nothing found",
    # with exit status 0: a CI job would have passed for nothing.
    folder = tmp_path / "folder"
    folder.mkdir()
    if given == "untitled":  # a task's folder without task.toml: a dataset's task, never one alone
        write_files(folder, {"task_data.json": "{}", "tests/verifier.py": "def verify():\n    return 1.0\n"})
    reason = {
        "empty": "holds no task folder (one with task.toml, tests/ or task_data.json) and no rows.jsonl",
        "untitled": "holds no task folder and no rows.jsonl; it has tests/ and task_data.json as a task has, "
        "but no task.toml, which a task given alone needs (an empty one will do)",
    }[given]
    validated = gym("dataset", "validate", str(folder))
    assert validated.returncode == 1 and reason in validated.stderr, validated
    published = gym("dataset", "publish", "--harbor", str(folder), str(tmp_path / "out"))
    assert published.returncode == 1 and reason in published.stderr, published
    assert not (tmp_path / "out").exists()
    checked = gym("check", str(folder))
    assert checked.returncode != 0 and reason in checked.stdout, checked


def test_publish_takes_one_task_folder_as_check_and_validate_do(tmp_path):
    # A new author's walkthrough (2026-12-05): publish refused a task folder that check and validate took.
    dataset = write_files(
        tmp_path / "ds",
        {
            "dataset.toml": "timeout_multiplier = 2\n",
            "one/task.toml": "[verifier]\ntimeout_sec = 30\n",
            "one/instruction.md": "Say hello.\n",
            "one/tests/verifier.py": "def verify():\n    return 1.0\n",
            "two/instruction.md": "Not this one.\n",
            "two/tests/verifier.py": "def verify():\n    return 1.0\n",
        },
    )
    published = gym("dataset", "publish", "--harbor", str(dataset / "one"), str(tmp_path / "out"))
    assert published.returncode == 0 and "published 1 task(s) for Harbor" in published.stdout, published
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == ["one"]
    assert (tmp_path / "out" / "one" / "tests" / "test.sh").is_file()
    # With what its dataset adds: the timeout_multiplier, as the task's own timeout in Harbor.
    assert "timeout_sec = 60" in (tmp_path / "out" / "one" / "task.toml").read_text()


def test_validate_notes_what_full_marks_would_hide(tmp_path, capsys):
    """An oracle that exited non-zero, and a reward above full marks, pass (Harbor's oracle ignores its
    status) but are said: an author who misses them learns at training time."""
    from nemo_gym.data.tasks.harbor.cli import main

    dataset = _write(
        tmp_path / "ds",
        {
            "fails/solution/solve.sh": "#!/bin/bash\necho 42 > answer.txt\nfalse\n",
            "fails/tests/verifier.py": "def verify(workspace):\n    return float((workspace / 'answer.txt').exists())\n",
            "big/solution/solve.sh": "#!/bin/bash\ntrue\n",
            "big/tests/verifier.py": "def verify():\n    return 2.5\n",
            "clean/solution/solve.sh": "#!/bin/bash\ntrue\n",
            "clean/tests/verifier.py": "def verify():\n    return 1\n",
        },
    )
    assert main(["dataset", "validate", str(dataset)]) == 0
    out = capsys.readouterr().out
    assert "fails: ok (reward 1, oracle solve.sh; but the oracle (solve.sh) exited with 1)" in out, out
    assert "big: ok (reward 2.5, oracle solve.sh; but reward 2.5 is above full marks (1))" in out, out
    assert "clean: ok (reward 1, oracle solve.sh)\n" in out, out
    assert "\n3 of 3 task(s) scored full marks (1 of them above full marks: see their notes)\n" in out, out
    assert main(["dataset", "validate", str(dataset), "--json"]) == 0
    tasks = {task["task_id"]: task["notes"] for task in json.loads(capsys.readouterr().out.splitlines()[-1])["tasks"]}
    assert tasks == {
        "big": ["reward 2.5 is above full marks (1)"],
        "clean": [],
        "fails": ["the oracle (solve.sh) exited with 1"],
    }


def test_the_local_sandbox_says_what_of_the_tasks_environment_it_runs_without(tmp_path, capsys):
    """A task may pass on this machine's tools and fail in its image: the local sandbox says so."""
    from nemo_gym.data.tasks.harbor.cli import main

    verifier = "def verify():\n    return 1\n"
    dataset = _write(
        tmp_path / "ds",
        {
            "built/task.toml": "",
            "built/environment/Dockerfile": "FROM debian\nRUN apt-get install -y jq\n",
            "built/tests/verifier.py": verifier,
            "pulled/task.toml": '[environment]\ndocker_image = "python:3.12-slim"\n',
            "pulled/tests/verifier.py": verifier,
            "plain/task.toml": "",
            "plain/tests/verifier.py": verifier,
            **{f"{name}/solution/solve.sh": "#!/bin/bash\ntrue\n" for name in ("built", "pulled", "plain")},
        },
    )
    assert main(["verify", str(dataset / "built")]) == 0
    said = capsys.readouterr()
    assert said.out.startswith("reward 1 ") and said.err == (
        "gym-harbor: note: the local sandbox runs this machine's tools and Python, not environment/Dockerfile, "
        "and without the files the image would hold; --sandbox docker grades in the task's image\n"
    )
    assert main(["verify", str(dataset / "plain")]) == 0
    assert capsys.readouterr().err == ""
    assert main(["dataset", "validate", str(dataset)]) == 0
    notes = [line for line in capsys.readouterr().out.splitlines() if line.startswith("note: ")]
    assert notes == [
        "note: the local sandbox runs this machine's tools and Python, not [environment].docker_image or "
        "environment/Dockerfile (2 task(s): built, pulled), and without the files the image would hold; "
        "--sandbox docker grades in the task's image"
    ]


def test_a_task_failing_locally_for_its_images_files_is_told_to_use_docker(tmp_path, capsys):
    """A new author's task whose input comes from environment/Dockerfile (COPY sales.csv): its oracle
    fails in the local sandbox's empty working directory, and the failure says why, by file name."""
    from nemo_gym.data.tasks.harbor.cli import main

    task = _write(
        tmp_path / "ds" / "sum",
        {
            "task.toml": '[environment]\nworkdir = "/workspace"\n',
            "environment/Dockerfile": "FROM python:3.12-slim\nWORKDIR /workspace\nCOPY sales.csv /workspace/\n",
            "environment/sales.csv": "3\n4\n",
            "instruction.md": "Write the sum of sales.csv's numbers to total.txt.\n",
            "task_data.json": '{"answer": "7"}',
            "tests/verifier.py": "def verify(workspace, task_data):\n"
            "    return (workspace / 'total.txt').read_text().strip() == task_data['answer']\n",
            "solution/solve.sh": "#!/bin/bash\nawk '{s += $1} END {print s}' sales.csv > total.txt\n",
        },
    )
    assert main(["dataset", "validate", str(task)]) == 1
    out = capsys.readouterr().out
    hint = [line.strip() for line in out.splitlines() if "empty working directory" in line]
    assert hint == [
        "the local sandbox ran without environment/Dockerfile (with sales.csv beside it): the oracle started in an "
        "empty working directory, without the files the image would hold; --sandbox docker grades in the task's image"
    ], out


def test_a_failed_verify_without_task_data_json_says_it_got_an_empty_dict(tmp_path, capsys):
    """A new author who forgot task_data.json saw only `verify raised KeyError: 'answer'`."""
    from nemo_gym.data.tasks.harbor.cli import main

    task = _write(
        tmp_path / "t",
        {
            "task.toml": "",
            "tests/verifier.py": "def verify(workspace, task_data):\n    return task_data['answer'] == '42'\n",
        },
    )
    assert main(["verify", str(task)]) == 0
    said = capsys.readouterr()
    assert "verify raised KeyError: 'answer'" in said.out
    assert (
        said.err
        == f"gym-harbor: note: verify declares task_data, but {task / 'task_data.json'} does not exist: it gets {{}}\n"
    )
    (task / "task_data.json").write_text('{"answer": "41"}')
    assert main(["verify", str(task)]) == 0
    assert capsys.readouterr().err == ""  # a 0 it earned, and task_data there: nothing to add


def test_publish_can_leave_the_refused_tasks_out(tmp_path, capsys):
    """A server operator's dataset with a few tasks Harbor cannot grade: --skip-refused publishes
    the others, naming what it left out; without it nothing is written, and the error says so."""
    from nemo_gym.data.tasks.harbor.cli import main

    files = {
        **RESPONSE_ROWS,
        "plain/instruction.md": "Do it.",
        "plain/tests/test.sh": "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n",
        "plain/solution/solve.sh": "#!/bin/bash\ntrue\n",
    }
    dataset = _write(tmp_path / "ds", files)
    assert main(["dataset", "publish", "--harbor", str(dataset), str(tmp_path / "none")]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "gym-harbor: refused 7 task(s), nothing written (--skip-refused publishes the others):", lines
    assert not (tmp_path / "none").exists()

    out = tmp_path / "out"
    assert main(["dataset", "publish", "--harbor", "--skip-refused", str(dataset), str(out)]) == 0
    captured = capsys.readouterr()
    assert (
        "cannot publish for Harbor: 7 rows (r0, r1, r2, r3, r4 and 2 more): verify declares `response`" in captured.err
    )
    assert captured.out.startswith("published 1 task(s) for Harbor into")
    assert "left out the tasks refused for the 1 reason(s) above" in captured.out
    assert sorted(path.name for path in out.iterdir()) == ["plain"]


def test_publish_skipping_refusals_still_refuses_a_dataset_refused_whole(tmp_path, capsys):
    from nemo_gym.data.tasks.harbor.cli import main

    dataset = _write(tmp_path / "rows", RESPONSE_ROWS)
    assert main(["dataset", "publish", "--harbor", "--skip-refused", str(dataset), str(tmp_path / "out")]) == 1
    assert "refused 7 task(s) (every task), nothing written:" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_validate_tables_reward_column_is_the_tasks_reward_with_the_steps_beside_their_oracles():
    """Scripts (and the Harbor parity suite) read the reward column as a number: a multi-step task's
    is its mean, as Harbor's trial scores it; each step's own reward stands beside its oracle."""
    from nemo_gym.data.tasks.harbor.cli import _oracles_and_rewards
    from nemo_gym.data.tasks.harbor.validation import StepResult, TaskResult
    from nemo_gym.data.tasks.harbor.verification import VerificationOutcome

    steps = [
        StepResult("create", "solve.sh", VerificationOutcome(reward=1.0)),
        StepResult("extend", "answer.md", VerificationOutcome(reward=0.5)),
    ]
    assert _oracles_and_rewards(TaskResult("t", steps)) == ("create: solve.sh (1), extend: answer.md (0.5)", "0.75")
    one = [StepResult(None, "solve.sh", VerificationOutcome(reward=0.25))]
    assert _oracles_and_rewards(TaskResult("t", one)) == ("solve.sh", "0.25")
    assert _oracles_and_rewards(TaskResult("t", [StepResult("create", "solve.sh")])) == ("create: solve.sh (-)", "-")


def test_a_row_with_no_solution_field_is_told_about_the_field(tmp_path, capsys):
    """A row's oracle is its `solution` field: the failure names that field and rows.jsonl, not a
    solution/ folder the author never meant to write."""
    from nemo_gym.data.tasks.harbor.cli import main

    rows = [{"id": "none", "instruction": "Say it."}, {"id": "number", "instruction": "Say it.", "solution": 42}]
    dataset = _write(
        tmp_path / "ds",
        {
            "verifier.py": "def verify():\n    return 1.0\n",
            "rows.jsonl": "".join(json.dumps(row) + "\n" for row in rows),
        },
    )
    assert main(["dataset", "validate", str(dataset)]) == 1
    out = capsys.readouterr().out
    rows_file = dataset / "rows.jsonl"
    assert f"none: FAILED ({rows_file}: row 'none': its `solution` field (the answer, a string) is missing, and" in out
    assert (
        f"number: FAILED ({rows_file}: row 'number': its `solution` field (the answer, a string) is not a string,"
        in out
    )
    assert ": no solution/ folder:" not in out


# --- Red team 57/59's leftovers: what an operator's script or a careless mount still lost ----------


def test_a_usage_error_found_after_parsing_says_it_in_json_too(tmp_path):
    # --json promised a script one object on stdout's last line; a --mount refusal, a missing
    # --workspace or a bad --timeout (exit 2) printed none.
    precious = write_files(tmp_path / "precious", {"notes.txt": "mine\n"})
    for args, said in (
        (["--mount", f"{precious}:/tests"], f"--mount {precious}:/tests: the sandbox path "),
        (["--workspace", str(tmp_path / "missing")], f"--workspace {tmp_path / 'missing'}: not a folder"),
        (["--timeout", "0"], "--timeout must be a finite positive number"),
        (["--timeout", "soon"], "argument --timeout: invalid float value: 'soon'"),
    ):
        result = gym("verify", "examples/answer-file", *args, "--json")
        assert result.returncode == 2 and said in result.stderr, result.stderr
        assert said in json.loads(result.stdout.splitlines()[-1])["error"], result.stdout
        assert gym("verify", "examples/answer-file", *args).stdout == ""  # without --json, stdout stays empty


def test_logs_out_that_cannot_be_written_still_gives_the_outcome(tmp_path):
    # The run graded, then --logs-out failed to write (a file in the way under it): the outcome was lost.
    logs = write_files(tmp_path / "logs", {"test-stdout.txt/x": "in the way\n"})
    result = gym("verify", "examples/answer-file", "--logs-out", str(logs), "--json")
    assert result.returncode == 1 and f"--logs-out {logs}: cannot write the verifier's files" in result.stderr
    assert json.loads(result.stdout.splitlines()[-1])["reward"] == 1.0, result.stdout
    result = gym("verify", "examples/answer-file", "--logs-out", str(logs))
    assert result.returncode == 1 and result.stdout.startswith("reward 1 [examples/answer-file]"), result.stdout
    assert (logs / "test-stdout.txt" / "x").read_text() == "in the way\n"


def test_two_mounts_at_one_sandbox_path_are_a_usage_error(tmp_path):
    # The last one silently won: the verifier saw other files than the operator meant it to.
    first = write_files(tmp_path / "first", {"a.txt": "a\n"})
    second = write_files(tmp_path / "second", {"b.txt": "b\n"})
    result = gym("verify", "examples/answer-file", "--mount", f"{first}:/data", "--mount", f"{second}:/data/")
    assert result.returncode == 2, result.stderr
    assert f"--mount {second}:/data/: /data is given twice (also {first})" in result.stderr, result.stderr
    result = gym("verify", "examples/answer-file", "--mount", f"{first}:/logs/artifacts", "--artifacts", str(second))
    assert result.returncode == 2 and "/logs/artifacts is given twice" in result.stderr, result.stderr


@pytest.mark.parametrize("kind", ["file", "link"])
def test_a_mount_holding_the_verifiers_folder_never_replaces_a_host_file_there(tmp_path, kind):
    # Red team 59: --mount HOST:/logs, with HOST/verifier a file of the operator's, replaced that file with
    # the verifier's folder. A folder there is the verifier's (made afresh, as a Harbor trial's is). The
    # local sandbox binds HOST; a container gets a copy, which leaves the host's file as it was.
    host = tmp_path / "trial"
    host.mkdir()
    if kind == "file":
        (host / "verifier").write_text("precious\n")
    else:
        (tmp_path / "elsewhere").mkdir()
        (host / "verifier").symlink_to(tmp_path / "elsewhere")
    result = gym("verify", "examples/answer-file", "--mount", f"{host}:/logs")
    assert result.returncode == 1 and not result.stdout, result.stdout + result.stderr
    assert f"the mount {host}:/logs is refused: {host / 'verifier'} is a {kind}, where grading makes" in result.stderr
    if kind == "file":
        assert (host / "verifier").read_text() == "precious\n"
    else:
        assert (host / "verifier").is_symlink()
    from nemo_gym.data.tasks.harbor.sandboxes import LocalSandbox, SandboxError
    from nemo_gym.data.tasks.harbor.sandboxes.docker import DockerSandbox

    workspace = write_files(tmp_path / "workspace", {})
    with pytest.raises(SandboxError, match=f"is a {kind}, where grading makes"):
        LocalSandbox(workspace, workdir="/app", mounts={"/logs": host})
    DockerSandbox("any:image", workspace=workspace, workdir="/app", mounts={"/logs": host}, client=object())
    (host / "verifier").unlink()
    (host / "verifier").mkdir()
    result = gym("verify", "examples/answer-file", "--mount", f"{host}:/logs")
    assert result.returncode == 0 and result.stdout.startswith("reward 1"), result.stdout + result.stderr
    assert json.loads((host / "verifier" / "reward.json").read_text()) == {"reward": 1.0}


def test_metric_names_print_on_one_line_and_cut_short(tmp_path):
    # Red team 57: a 100,000-character metric name printed in full; one with a line break printed a line
    # of its own, such as "reward 1 [task]" under a reward of 0.
    task = write_files(
        tmp_path / "task",
        {
            "task.toml": "",
            "tests/verifier.py": (
                "def verify():\n    return {'reward': 0.0, 'x\\nreward 1 [task]': 1.0, 'y' * 100000: 2.0}\n"
            ),
        },
    )
    result = gym("verify", str(task))
    assert result.returncode == 0 and result.stdout.startswith("reward 0 "), result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert not any(line.startswith("reward 1") for line in lines), lines
    metrics = next(line for line in lines if line.startswith("metrics: "))
    assert "x\\nreward 1 [task]=1" in metrics and len(metrics) < 1000, metrics[:300]
    outcome = json.loads(gym("verify", str(task), "--json").stdout.splitlines()[-1])
    assert outcome["metrics"]["y" * 100000] == 2.0  # --json keeps them whole


def test_a_folder_without_task_toml_is_graded_and_told_what_the_other_commands_need(tmp_path):
    # Red team 57: verify graded a folder with tests/ and no task.toml, which check, validate, publish and
    # Harbor each refuse given alone: the author found out only on publishing.
    task = write_files(tmp_path / "task", {"tests/verifier.py": "def verify():\n    return 1.0\n"})
    result = gym("verify", str(task))
    assert result.returncode == 0 and result.stdout.startswith("reward 1"), result.stdout + result.stderr
    assert (
        f"gym-harbor: note: {task} has no task.toml: check, dataset validate, dataset publish and Harbor take a "
        "folder as a task by itself only with one (an empty one will do)\n"
    ) in result.stderr, result.stderr
    assert "has no task.toml" not in gym("verify", "examples/answer-file").stderr


@pytest.mark.parametrize("place", ["/usr", "/bin", "/lib"])
def test_the_local_sandbox_refuses_to_hide_this_machines_tools_under_the_workspace_or_a_mount(tmp_path, place):
    # Red team 57: [environment].workdir = "/usr" bound the workspace over the host's /usr: no bash, no
    # Python, and every run masked with "bwrap: execvp bash" (a Docker image would have its own /usr).
    from nemo_gym.data.tasks.harbor.sandboxes import LocalSandbox, SandboxError
    from nemo_gym.data.tasks.harbor.sandboxes.local import namespaces_available

    if not namespaces_available():
        pytest.skip("the sandbox places folders only with bubblewrap")
    workspace = write_files(tmp_path / "workspace", {})
    data = write_files(tmp_path / "data", {})
    hides = f"is or holds {place}, which the local sandbox takes from this machine"
    with pytest.raises(SandboxError, match=f"the working directory {place} {hides}"):
        LocalSandbox(workspace, workdir=place)
    with pytest.raises(SandboxError, match=f"the mount {data}:{place} {hides}"):
        LocalSandbox(workspace, workdir="/app", mounts={place: data})
    LocalSandbox(workspace, workdir=f"{place}/src/app", mounts={f"{place}/share/data": data})  # under it: taken
    task = tmp_path / "task"
    shutil.copytree(EXAMPLES / "answer-file", task)
    toml = (task / "task.toml").read_text()
    (task / "task.toml").write_text(toml.replace('workdir = "/workspace"', f'workdir = "{place}"'))
    result = gym("verify", str(task))
    assert result.returncode == 1 and f"the working directory {place} {hides}" in result.stderr, result.stderr
    for kept in ("/etc", "/root", "/opt"):  # commands still start with the workspace bound there: taken
        (task / "task.toml").write_text(toml.replace('workdir = "/workspace"', f'workdir = "{kept}"'))
        result = gym("verify", str(task))
        assert result.returncode == 0 and result.stdout.startswith("reward 1"), result.stdout + result.stderr
