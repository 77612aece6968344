"""Verification runs on LocalSandbox: examples, failure shapes, round trips, concurrency."""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest
from support import EXAMPLES, write_files

from nemo_gym.data.tasks.harbor.responses import response
from nemo_gym.data.tasks.harbor.rewards import INVALID_REWARD, MISSING_REWARD, VERIFIER_TIMEOUT
from nemo_gym.data.tasks.harbor.sandboxes import LocalSandbox
from nemo_gym.data.tasks.harbor.sandboxes.base import ExecResult, ExecTimeout, PipedResult, SandboxError
from nemo_gym.data.tasks.harbor.sandboxes.local import namespaces_available
from nemo_gym.data.tasks.harbor.task import TaskError, load_task
from nemo_gym.data.tasks.harbor.testing import run_verify
from nemo_gym.data.tasks.harbor.verification import (
    DISK_FULL,
    PYTHON,
    TEST_SH,
    VerificationOutcome,
    VerificationPlan,
    choose_verifier,
    plan_verification,
    run_verification,
)

# The host's path end to end, and the shim on the Python that runs the tests: every Python (noxfile).
pytestmark = pytest.mark.every_python

RESPONSE = json.loads((EXAMPLES / "numeric-response" / "response.json").read_text())


def verify_locally(task_dir: Path, workspace: Optional[Path] = None, **options: Any) -> VerificationOutcome:
    plan = plan_verification(load_task(task_dir), **options)

    async def run() -> VerificationOutcome:
        async with LocalSandbox(workspace or task_dir / "workspace") as sandbox:
            return await run_verification(plan, sandbox)

    return asyncio.run(run())


@pytest.mark.parametrize(
    "name, options, reward, metrics",
    [
        ("answer-file", {}, 1.0, {}),
        ("numeric-response", {"response": RESPONSE}, 1.0, {}),
        ("async-metrics", {}, 1.0, {"correct": 10.0, "extra": 0.0, "recall": 1.0}),
        ("bash-test", {}, 1.0, {}),
    ],
)
def test_examples_on_the_local_sandbox(name, options, reward, metrics):
    outcome = verify_locally(EXAMPLES / name, **options)
    assert (outcome.reward, outcome.metrics, outcome.failure_kind, outcome.masked) == (
        reward,
        metrics,
        None,
        False,
    )


def test_wrong_answers_score_zero(tmp_path):
    (tmp_path / "answer.txt").write_text("Lyon\n")
    assert verify_locally(EXAMPLES / "answer-file", tmp_path).reward == 0.0
    wrong = {"output": [{"type": "message", "role": "assistant", "content": "Answer: 4.21"}]}
    assert verify_locally(EXAMPLES / "numeric-response", response=wrong).reward == 0.0
    assert verify_locally(EXAMPLES / "bash-test", tmp_path).reward == 0.0


def test_a_response_holding_nan_or_infinities_is_graded_never_masked():
    # Red team 32: a token's logprob of -Infinity on the wire is -inf once the server parsed it;
    # staging refused the response, which masked the sample. Graded as any other, the numbers intact.
    right = {
        "output": [{"type": "message", "role": "assistant", "content": "Answer: 4.20"}],
        "logprobs": [float("-inf"), float("nan"), float("inf")],
    }
    outcome = verify_locally(EXAMPLES / "numeric-response", response=right)
    assert (outcome.reward, outcome.masked) == (1.0, False), outcome
    seen = run_verify(
        lambda response: {"reward": 1.0, "infinite": float(sum(map(math.isinf, response["logprobs"])))},
        workspace=EXAMPLES / "numeric-response" / "workspace",
        response=right,
    )
    assert seen.metrics == {"infinite": 2.0}


def test_numeric_response_without_a_response_is_a_missing_reward():
    outcome = verify_locally(EXAMPLES / "numeric-response")
    assert outcome.failure_kind == MISSING_REWARD
    assert "verify requires `response`" in outcome.stdout


def make_task(root: Path, files: Dict[str, str], task_toml: str = "") -> Path:
    return write_files(root, {**files, **({"task.toml": task_toml} if task_toml else {})})


def test_missing_reward(tmp_path):
    task = make_task(tmp_path / "task", {"tests/verifier.py": "def verify():\n    raise RuntimeError('nope')\n"})
    outcome = verify_locally(task, tmp_path)
    assert outcome.failure_kind == MISSING_REWARD and outcome.reward == 0.0 and not outcome.masked
    assert "verify raised RuntimeError: nope" in outcome.stdout


def test_invalid_reward_from_a_test_sh(tmp_path):
    task = make_task(tmp_path / "task", {"tests/test.sh": "echo nan > /logs/verifier/reward.txt\n"})
    if not namespaces_available():
        pytest.fail("this machine kind provides bubblewrap (installed by .ci/run); the local sandbox needs it here")
    assert verify_locally(task, tmp_path).failure_kind == INVALID_REWARD


def test_timeout_without_a_reward(tmp_path):
    task = make_task(tmp_path / "task", {"tests/verifier.py": "import time\ndef verify():\n    time.sleep(30)\n"})
    started = time.monotonic()
    outcome = verify_locally(task, tmp_path, timeout_sec=1.5)
    assert outcome.failure_kind == VERIFIER_TIMEOUT
    assert outcome.detail == "the verifier ran past its timeout of 1.5 s"  # the value an author looks up
    assert time.monotonic() - started < 20


@pytest.mark.parametrize("seconds", [0.001, 0.004, 0.009])
def test_a_timeout_shorter_than_the_clocks_tick_still_reads_as_a_timeout(tmp_path, seconds):
    """An operator's trial: `--timeout 0.001` read as "the runner sent no report" (missing_reward),
    0.01 as a timeout: the run's elapsed time is read in centiseconds (/proc/uptime), each reading cut
    down, so a run killed at 1 ms measured 0 s, short of its timeout."""
    task = make_task(tmp_path / "task", {"tests/verifier.py": "import time\ndef verify():\n    time.sleep(30)\n"})
    for _ in range(3):
        outcome = verify_locally(task, tmp_path, timeout_sec=seconds)
        assert (outcome.failure_kind, outcome.timed_out) == (VERIFIER_TIMEOUT, True), outcome.detail


def test_a_reward_written_before_the_timeout_stands(tmp_path):
    task = make_task(tmp_path / "task", {"tests/test.sh": "echo 0.25 > /logs/verifier/reward.txt\nsleep 30\n"})
    outcome = verify_locally(task, tmp_path, timeout_sec=1)
    assert (outcome.reward, outcome.failure_kind) == (0.25, None)


def test_a_verifier_that_ignores_sigterm_is_stopped(tmp_path):
    task = make_task(tmp_path / "task", {"tests/test.sh": "trap '' TERM\nwhile true; do sleep 1; done\n"})
    started = time.monotonic()
    outcome = verify_locally(task, tmp_path, timeout_sec=1)
    assert outcome.failure_kind == VERIFIER_TIMEOUT
    assert time.monotonic() - started < 20


def test_timeout_comes_from_task_toml(tmp_path):
    task = make_task(
        tmp_path / "task",
        {"tests/verifier.py": "import time\ndef verify():\n    time.sleep(30)\n"},
        "[verifier]\ntimeout_sec = 1\n",
    )
    assert verify_locally(task, tmp_path).failure_kind == VERIFIER_TIMEOUT


def test_verifier_env_reaches_the_verifier(tmp_path):
    task = make_task(
        tmp_path / "task",
        {"tests/verifier.py": "import os\ndef verify():\n    return float(os.environ['MODE'] == 'strict')\n"},
        '[verifier]\nenv = { MODE = "${NEMO_GYM_TEST_MODE:-strict}" }\n',
    )
    assert verify_locally(task, tmp_path).reward == 1.0


def test_helpers_in_tests_and_a_dataset_root_verifier(tmp_path):
    task = make_task(
        tmp_path / "task",
        {
            "tests/verifier.py": "from helper import score\ndef verify():\n    return score()\n",
            "tests/helper.py": "def score():\n    return 0.5\n",
        },
    )
    assert verify_locally(task, tmp_path).reward == 0.5
    dataset = make_task(
        tmp_path / "dataset",
        {
            "verifier.py": "def verify(task_data):\n    return task_data['x']\n",
            "t1/task_data.json": '{"x": 0.75}',
        },
    )
    assert verify_locally(dataset / "t1", tmp_path).reward == 0.75


@pytest.mark.parametrize(
    "files, kind",
    [
        ({"tests/test.sh": "", "tests/verifier.py": ""}, TEST_SH),  # test.sh wins; verifier.py is a helper
        ({"tests/verifier.py": ""}, PYTHON),
        ({"../verifier.py": "", "task.toml": ""}, PYTHON),  # no tests/: the dataset root's verifier.py
        ({"tests/verifier.py": "", "../verifier.py": ""}, PYTHON),
    ],
)
def test_choose_verifier(tmp_path, files, kind):
    task = tmp_path / "dataset" / "task"
    task.mkdir(parents=True)
    make_task(task, files)
    choice = choose_verifier(task, load_task(task).dataset_root)
    assert choice.kind == kind
    if "tests/verifier.py" in files and kind == PYTHON:
        assert choice.verifier_path == task / "tests" / "verifier.py"


@pytest.mark.parametrize("files", [{"tests/helper.py": ""}, {"task.toml": ""}])
def test_no_verifier_is_refused(tmp_path, files):
    make_task(tmp_path / "task", files)
    with pytest.raises(TaskError, match=r"verifier\.py"):
        choose_verifier(tmp_path / "task", None)


class RecordingSandbox:
    """A LocalSandbox that counts its round trips, seen through the bare protocol (no archive calls)."""

    def __init__(self, inner: LocalSandbox) -> None:
        self.inner = inner
        self.calls: List[str] = []
        for name in ("admin_user", "tests_dir", "logs_dir", "tmp_dir", "workdir", "private_pids"):
            setattr(self, name, getattr(inner, name))

    async def exec(self, command: str, **options: Any) -> ExecResult:
        self.calls.append("exec")
        return await self.inner.exec(command, **options)

    async def upload_file(self, local_path: str, sandbox_path: str) -> None:
        self.calls.append("upload")
        await self.inner.upload_file(local_path, sandbox_path)

    async def download_file(self, sandbox_path: str, local_path: str) -> None:
        self.calls.append("download")
        await self.inner.download_file(sandbox_path, local_path)


class RecordingArchiveSandbox(RecordingSandbox):
    """The same, with the archive calls a Docker engine offers."""

    async def put_archive(self, folder: str, data: bytes) -> None:
        self.calls.append("put_archive")
        await self.inner.put_archive(folder, data)

    async def get_archive(self, path: str, *, limit: int) -> bytes:
        self.calls.append("get_archive")
        return await self.inner.get_archive(path, limit=limit)


class RecordingPipeSandbox(RecordingSandbox):
    """The same, with an exec that takes stdin and gives stdout back whole (Docker, LocalSandbox)."""

    async def exec_piped(self, command: str, stdin: bytes, **options: Any) -> PipedResult:
        self.calls.append("exec_piped")
        return await self.inner.exec_piped(command, stdin, **options)


@pytest.mark.parametrize(
    "wrapper, expected",
    [
        (RecordingSandbox, ["upload", "exec", "download"]),
        (RecordingArchiveSandbox, ["put_archive", "exec", "get_archive"]),
        (RecordingPipeSandbox, ["exec_piped"]),
    ],
)
@pytest.mark.parametrize("kind", ["verifier.py", "test.sh"])
def test_round_trips_do_not_grow_with_the_file_count(tmp_path, kind, wrapper, expected):
    counts = []
    for file_count in (2, 200):
        files = {f"tests/data/{index}.txt": str(index) for index in range(file_count)}
        if kind == "test.sh":
            files["tests/test.sh"] = "cat /tests/data/*.txt > /dev/null && echo 1 > /logs/verifier/reward.txt\n"
        else:
            files["tests/verifier.py"] = (
                "import pathlib\ndef verify():\n    return len(list(pathlib.Path(__file__).parent.glob('data/*.txt')))\n"
            )
        task = make_task(tmp_path / f"{kind}-{file_count}", files)
        plan = plan_verification(load_task(task))

        async def run(plan: VerificationPlan = plan) -> tuple:
            async with LocalSandbox(tmp_path) as local:
                recording = wrapper(local)
                outcome = await run_verification(plan, recording)  # type: ignore[arg-type]
                return outcome, recording.calls

        outcome, calls = asyncio.run(run())
        assert outcome.failure_kind is None
        assert outcome.reward == (1.0 if kind == "test.sh" else float(file_count))
        counts.append(calls)
    assert counts[0] == counts[1] == expected


@pytest.mark.once
def test_200_concurrent_verifications_each_get_their_own_reward(tmp_path, monkeypatch):
    marker = f"nemo-gym-leak-probe-{os.getpid()}"
    task = make_task(
        tmp_path / "task",
        {
            "tests/verifier.py": (
                "import subprocess, pathlib\n"
                "def verify(workspace, task_data):\n"
                f"    subprocess.Popen(['bash', '-c', 'exec -a {marker} sleep 300'], start_new_session=True)\n"
                "    (workspace / 'seen.txt').write_text(str(task_data['i']))\n"
                "    return task_data['i']\n"
            )
        },
    )
    loaded = load_task(task)
    private_tmp = tmp_path / "tmp"  # a temporary folder of this test's own: other runs cannot blur the count
    private_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private_tmp))

    async def one(index: int) -> VerificationOutcome:
        workspace = tmp_path / "workspaces" / str(index)
        workspace.mkdir(parents=True)
        plan = plan_verification(loaded, task_data={"i": index})
        async with LocalSandbox(workspace) as sandbox:
            return await run_verification(plan, sandbox)

    async def all_of_them() -> List[VerificationOutcome]:
        return await asyncio.gather(*(one(index) for index in range(200)))

    outcomes = asyncio.run(all_of_them())
    assert [outcome.reward for outcome in outcomes] == [float(index) for index in range(200)]
    assert all(outcome.failure_kind is None for outcome in outcomes)
    for index in range(200):
        assert (tmp_path / "workspaces" / str(index) / "seen.txt").read_text() == str(index)
    assert os.listdir(private_tmp) == [], "temporary folders leaked"
    if namespaces_available():  # each sandbox's PID namespace dies with it: nothing is left running
        leftover = subprocess.run(["pgrep", "-f", marker], stdout=subprocess.PIPE).stdout.split()
        assert leftover == [], "processes leaked"


def test_local_sandbox_refuses_paths_outside_its_folders(tmp_path):
    async def run() -> None:
        async with LocalSandbox(tmp_path) as sandbox:
            with pytest.raises(SandboxError, match="outside"):
                await sandbox.upload_file(__file__, "/etc/nemo-gym-test")
            with pytest.raises(SandboxError, match="Docker sandbox only"):
                await sandbox.exec("true", user="nobody:nogroup")

    asyncio.run(run())


@pytest.mark.parametrize("isolated", [True, False], ids=["bubblewrap", "plain"])
def test_the_local_sandbox_ends_a_command_whose_output_it_stops_reading(tmp_path, isolated):
    # asyncio's wait() (3.11+) returns only once every pipe has closed, and it stops reading a pipe
    # whose buffer is full: a command still printing when its timeout or output limit struck used to
    # hang the call forever (a collect hook that cats the agent's /dev/zero link, say).
    if isolated and not namespaces_available():
        pytest.fail("this machine kind provides bubblewrap (installed by .ci/run)")
    (tmp_path / "big").mkdir()
    (tmp_path / "big" / "zeros").write_bytes(bytes(3 << 20))

    async def run() -> Dict[str, str]:
        seen: Dict[str, str] = {}
        async with LocalSandbox(tmp_path, isolate=isolated) as sandbox:
            seen["workdir"] = sandbox.workdir
            calls = {
                "timeout": sandbox.exec("yes", timeout_s=1),
                "limit": sandbox.exec_piped("head -c 3000000 /dev/zero", b"", stdout_limit=1000),
                "archive": sandbox.get_archive(sandbox.workdir + "/big", limit=1000),
                "flood and exit": sandbox.exec_piped("head -c 3000000 /dev/zero; exit 3", b"", stdout_limit=1000),
            }
            for name, call in calls.items():
                started = time.monotonic()
                try:
                    await asyncio.wait_for(call, 60)
                except (ExecTimeout, SandboxError) as error:
                    seen[name] = f"{type(error).__name__}: {error}"
                assert time.monotonic() - started < 30, name
            seen["after"] = (await sandbox.exec("echo still there")).stdout
        return seen

    seen = asyncio.run(run())
    workdir = seen.pop("workdir")
    assert seen == {
        "timeout": "ExecTimeout: the command outlived 1 s",
        "limit": "OutputTooLarge: the command printed more than 1000 bytes",
        "archive": f"SandboxError: {workdir}/big is larger than 1000 bytes",
        "flood and exit": "OutputTooLarge: the command printed more than 1000 bytes",
        "after": "still there\n",
    }


class FaultySandbox(RecordingSandbox):
    """Loses the sandbox at one step."""

    def __init__(self, inner: LocalSandbox, fail_at: int) -> None:
        super().__init__(inner)
        self.fail_at = fail_at

    def _maybe_fail(self) -> None:
        if len(self.calls) == self.fail_at:
            raise SandboxError("the sandbox is gone")

    async def exec(self, command: str, **options: Any) -> ExecResult:
        self._maybe_fail()
        return await super().exec(command, **options)

    async def upload_file(self, local_path: str, sandbox_path: str) -> None:
        self._maybe_fail()
        await super().upload_file(local_path, sandbox_path)

    async def download_file(self, sandbox_path: str, local_path: str) -> None:
        self._maybe_fail()
        await super().download_file(sandbox_path, local_path)


@pytest.mark.parametrize(
    "fail_at, detail",
    [
        (0, "staging /tests failed"),
        (1, "grading failed"),
        (2, "could not be copied out"),
    ],
)
def test_sandbox_faults_are_masked_never_scored(tmp_path, fail_at, detail):
    plan = plan_verification(load_task(EXAMPLES / "answer-file"))

    async def run() -> VerificationOutcome:
        async with LocalSandbox(EXAMPLES / "answer-file" / "workspace") as local:
            return await run_verification(plan, FaultySandbox(local, fail_at))  # type: ignore[arg-type]

    outcome = asyncio.run(run())
    assert outcome.masked and outcome.mask_reason == "sandbox_error" and detail in outcome.detail
    assert outcome.failure_kind is None


def test_a_test_sh_task_is_refused_without_a_private_namespace(tmp_path):
    plan = plan_verification(load_task(EXAMPLES / "bash-test"))

    async def run() -> VerificationOutcome:
        async with LocalSandbox(tmp_path, isolate=False) as sandbox:
            return await run_verification(plan, sandbox)

    with pytest.raises(TaskError, match="run it with --sandbox docker"):
        asyncio.run(run())
    assert not Path("/logs/verifier/reward.txt").exists()


def test_a_python_verifier_runs_without_a_private_namespace(tmp_path):
    plan = plan_verification(load_task(EXAMPLES / "answer-file"))

    async def run() -> VerificationOutcome:
        async with LocalSandbox(EXAMPLES / "answer-file" / "workspace", isolate=False) as sandbox:
            assert sandbox.logs_dir != "/logs/verifier"  # its own folder, passed as VERIFIER_LOGS_DIR
            return await run_verification(plan, sandbox)

    assert asyncio.run(run()).reward == 1.0


def test_a_namespace_that_bubblewrap_could_not_set_up_is_tried_again(tmp_path, monkeypatch):
    # The Docker engine mounting under /var while bwrap binds it read-only makes bwrap fail before
    # anything runs; the local sandbox starts the command again rather than fail the run.
    if not namespaces_available():
        pytest.fail("this machine kind provides bubblewrap (installed by .ci/run)")
    real = LocalSandbox._run
    failures = ["bwrap: Can't bind mount /oldroot/var on /newroot/var: Invalid argument\n"] * 2

    async def flaky(self: LocalSandbox, *args: Any) -> PipedResult:
        if failures:
            return PipedResult(b"", failures.pop(), 1)
        return await real(self, *args)

    monkeypatch.setattr(LocalSandbox, "_run", flaky)

    async def run() -> ExecResult:
        async with LocalSandbox(tmp_path) as sandbox:
            return await sandbox.exec("echo ran")

    assert asyncio.run(run()) == ExecResult("ran\n", "", 0) and failures == []


@pytest.mark.parametrize("wrapper", [RecordingSandbox, RecordingArchiveSandbox, RecordingPipeSandbox])
def test_a_tasks_own_test_sh_runs_executable_however_the_files_travel(tmp_path, wrapper):
    task = make_task(
        tmp_path / "task", {"tests/test.sh": "[ -x /tests/test.sh ] && echo 1 > /logs/verifier/reward.txt\n"}
    )
    (tmp_path / "task" / "tests" / "test.sh").chmod(0o644)
    plan = plan_verification(load_task(task))

    async def run() -> VerificationOutcome:
        async with LocalSandbox(tmp_path) as local:
            return await run_verification(plan, wrapper(local))  # type: ignore[arg-type]

    assert asyncio.run(run()).reward == 1.0


def test_a_disk_the_agent_filled_masks_as_disk_full(tmp_path, monkeypatch):
    # Grading cannot stage its files on a full disk (the agent's or a neighbour's: from inside the
    # sandbox they look the same), so the sample is masked, as before, but counted as disk_full: the
    # failure used to read "install: cannot change owner and permissions" as a plain sandbox_error.
    from test_attacks import needs_root

    needs_root()
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)], check=True)
    try:
        monkeypatch.setattr(tempfile, "tempdir", str(disk))
        workspace = write_files(disk / "workspace", {"answer.txt": "Paris\n"})
        plan = plan_verification(load_task(EXAMPLES / "answer-file"))

        async def run() -> VerificationOutcome:
            async with LocalSandbox(workspace) as sandbox:
                # What the agent leaves behind: a file that took every block left.
                with open(workspace / "filler", "wb", buffering=0) as filler, pytest.raises(OSError, match="No space"):
                    while True:
                        filler.write(b"\0" * 65536)
                return await run_verification(plan, sandbox)

        outcome = asyncio.run(run())
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=True)
    assert (outcome.masked, outcome.mask_reason) == (True, DISK_FULL), outcome
    assert "the disk: 0 of 512 blocks free to users" in outcome.detail, outcome.detail


FILLS_THE_DISK = """\
import os
def verify(workspace):
    print(("x" * 99 + "\\n") * 1000)  # more output than the tail finish copies, before the disk is full
    # What the agent's program does when verify runs it (red teams 48, 49): take every block (or every
    # inode) left on the sandbox's one disk, /tests and /logs/verifier included, so that no reward.json
    # can be written; and leave outputs in /logs/verifier first, for finish to copy into what it frees.
    if FILL == "outputs":
        for number in range(100):
            with open(f"/logs/verifier/output-{number}.txt", "wb") as output:
                output.write(bytes(4096))
    if FILL == "deep-outputs":  # empty, at the end of 8 folders of long names: a large tar (red team 51)
        for number in range(100):
            folder = "/logs/verifier/" + "/".join(f"d{number:03d}{level}" + "x" * 22 for level in range(8))
            os.makedirs(folder)
            open(folder + "/f" + "y" * 20, "wb").close()
    try:
        if FILL == "inodes":
            for number in range(10**6):
                open(workspace / f"empty-{number}", "wb").close()
        with open(workspace / "filler", "wb", buffering=0) as filler:
            while True:
                filler.write(bytes(65536))
    except OSError:
        pass
    return VERDICT
"""


class _WithoutPipes:
    """A sandbox as a provider's is: neither piped exec nor archive calls, so the results are packed
    into a tar inside the sandbox (its disk) and downloaded."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name in ("exec_piped", "put_archive", "get_archive"):
            raise AttributeError(name)
        return getattr(self._inner, name)


@pytest.mark.parametrize(
    ("fill", "verdict", "pipes"),
    [
        ("bytes", 0.0, True),
        ("bytes", 1.0, True),
        ("outputs", 0.0, True),
        ("inodes", 0.0, True),
        ("outputs", 0.0, False),
        ("deep-outputs", 0.0, False),
    ],
)
def test_a_disk_filled_while_verify_runs_never_masks_its_verdict(tmp_path, monkeypatch, fill, verdict, pipes):
    # A disk filled before grading masks (disk_full: a neighbour's and the agent's look the same), but
    # one filled while verify runs came too late to change its verdict: the runner's report carries it,
    # and it is scored. It used to be masked on demand: a wrong answer, whose program filled the disk,
    # was left out of the score instead of scoring 0.
    from test_attacks import needs_root

    needs_root()
    disk = tmp_path / "disk"
    disk.mkdir()
    size = "size=16m,nr_inodes=400" if fill == "inodes" else "size=4m"
    subprocess.run(["mount", "-t", "tmpfs", "-o", size, "tmpfs", str(disk)], check=True)
    try:
        monkeypatch.setattr(tempfile, "tempdir", str(disk))
        workspace = write_files(disk / "workspace", {"answer.txt": "Paris\n"})
        source = FILLS_THE_DISK.replace("VERDICT", repr(verdict)).replace("FILL", repr(fill))
        task = write_files(tmp_path / "task", {"tests/verifier.py": source})

        async def run() -> VerificationOutcome:
            async with LocalSandbox(workspace) as sandbox:
                monkeypatch.undo()  # the host's own scratch stays off the sandbox's disk
                return await run_verification(
                    plan_verification(load_task(task)), sandbox if pipes else _WithoutPipes(sandbox)
                )

        outcome = asyncio.run(run())
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=True)
    assert (outcome.masked, outcome.reward) == (False, verdict), outcome
    assert "could not write reward.json" in outcome.detail, outcome.detail
    assert outcome.stdout.count("x" * 99 + "\n") > 600  # finish's copies found room (the report's reserve)
    if "outputs" not in fill:
        assert "not kept" not in outcome.detail  # nor did the runner leave its temporary file


def test_a_shell_verifier_whose_run_fills_the_disk_masks_as_disk_full(tmp_path, monkeypatch):
    # A task's own test.sh has no runner to report its verdict: its reward files are the result, and a
    # disk it filled (the agent's program it ran) leaves no room for them or for finish's files. Masked,
    # and counted as disk_full (red team 51: an unchecked meta file made it a sandbox_error).
    from test_attacks import needs_root

    needs_root()
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)], check=True)
    try:
        monkeypatch.setattr(tempfile, "tempdir", str(disk))
        workspace = write_files(disk / "workspace", {"answer.txt": "Paris\n"})
        fills = "#!/bin/bash\nhead -c 100000000 /dev/zero > filler\nhead -c 100000 /dev/zero > filler2\necho 0 > /logs/verifier/reward.txt\n"
        task = write_files(tmp_path / "task", {"tests/test.sh": fills})

        async def run() -> VerificationOutcome:
            async with LocalSandbox(workspace) as sandbox:
                monkeypatch.undo()
                return await run_verification(plan_verification(load_task(task)), sandbox)

        outcome = asyncio.run(run())
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=True)
    assert (outcome.masked, outcome.mask_reason) == (True, DISK_FULL), outcome


FILLS_LOGS = """\
def verify(workspace):
    # What an agent's leftover process does while grading runs: take every block left on the disk
    # that holds /logs (its own, here), so that the runner cannot write reward.json.
    try:
        with open("/logs/filler", "wb", buffering=0) as filler:
            while True:
                filler.write(bytes(65536))
    except OSError:
        pass
    return 1.0
"""


@pytest.mark.parametrize(
    ("verifier", "masked_as"),
    [
        (FILLS_LOGS, "scored"),
        # The agent's answer carries the words of a full disk into verify's error: a 0, never a mask.
        (
            "def verify(workspace):\n    raise ValueError((workspace / 'answer.txt').read_text())\n",
            None,
        ),
    ],
)
def test_a_reward_json_a_full_disk_kept_out_scores_the_verdict(tmp_path, verifier, masked_as):
    # An operator's trial (2026-12-05): /logs on a full disk scored a 0 (harbor:missing_reward), where a
    # full disk under /tests masks as disk_full; it was masked then, and the runner's reported verdict
    # is scored now (red team 48: a disk the agent's program filled masked its wrong answer).
    from test_attacks import needs_root

    needs_root()
    disk = tmp_path / "logs"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)], check=True)
    try:
        planted = "cannot write reward.json: [Errno 28] No space left on device: '/logs/verifier/reward.json'\n"
        workspace = write_files(tmp_path / "workspace", {"answer.txt": planted})
        task = write_files(tmp_path / "task", {"tests/verifier.py": verifier})

        async def run() -> VerificationOutcome:
            async with LocalSandbox(workspace, mounts={"/logs": disk}) as sandbox:
                return await run_verification(plan_verification(load_task(task)), sandbox)

        outcome = asyncio.run(run())
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=True)
    if masked_as is None:
        assert (outcome.masked, outcome.reward, outcome.failure_kind) == (False, 0.0, MISSING_REWARD), outcome
        assert "verify raised ValueError: cannot write reward.json" in outcome.detail
    else:  # the verdict verify returned, 1, though no reward.json could hold it
        assert (outcome.masked, outcome.reward) == (False, 1.0), outcome
        assert "the runner could not write reward.json (a full disk?)" in outcome.detail, outcome.detail


@pytest.mark.parametrize(
    "text, full",
    [
        ("cannot create /logs\nthe disk: 0 of 384000 blocks free to users, 89083 of 96000 inodes free", True),
        (
            "cannot make /tests and /logs/verifier private\nthe disk: 59000 of 384000 blocks free to users, 0 of 96000 inodes free",
            True,
        ),
        ("cannot create /logs\nthe disk: 10 of 384000 blocks free to users, 5 of 96000 inodes free", False),
        ('500 Server Error ("Error setting up pivot dir: mkdir /x/.pivot_root1: no space left on device")', True),
        ("cannot create /logs", False),
        # Red team 79: btrfs, vfat, 9p, FUSE and tmpfs with nr_inodes=0 count no inodes at all: not full.
        ("the disk: 16384 of 16384 blocks free to users, 0 of 0 inodes free", False),
        ("the disk: 0 of 0 blocks free to users, 0 of 0 inodes free", False),
        ("the disk: 0 of 16384 blocks free to users, 0 of 0 inodes free", True),
        # Red team 92: a root agent's install printed the kernel's words; grading's own count decides.
        (
            "install: cannot create directory '/tests': No space left on device\n"
            "the disk: 20000000 of 30000000 blocks free to users, 89083 of 96000 inodes free",
            False,
        ),
        # Red team 93: a count of the agent's printing before grading's own, which is last.
        (
            "the disk: 0 of 1000 blocks free to users, 10 of 10 inodes free\ncannot create /logs\n"
            "the disk: 20000000 of 30000000 blocks free to users, 89083 of 96000 inodes free",
            False,
        ),
    ],
)
def test_a_full_disk_is_told_from_the_failures_text(text, full):
    from nemo_gym.data.tasks.harbor.verification import disk_full

    assert disk_full(text) is full


UNUSABLE = {
    "def verify(ws):\n    return 1.0\n": "declares `ws`, which the runner cannot supply",
    "def grade(workspace):\n    return 1.0\n": "defines no `verify` at the top level",
    "def verify():\n    return 1.0\ndef verify(answer, *, strict):\n    return 0.0\n": "declares `answer`",
}
CALLABLE = [
    "def verify(ws=None):\n    return 1.0\n",  # a default: the runner leaves it
    "from helpers import *\n",  # a star import may bring verify
    "globals()['verify'] = lambda: 1.0\n",
    "verify = lambda: 1.0\n",
    "def verify(workspace, task_data, response, state):\n    return 1.0\n",
    "def verify():\n    match 1:\n        case 1:\n            return 1.0\n",  # newer syntax than 3.8 reads
]


@pytest.mark.parametrize(("source", "message"), UNUSABLE.items())
def test_a_verify_the_runner_can_never_call_is_the_authors_error(tmp_path, source, message):
    # A new author's walkthrough (2026-12-02): `def verify(ws)` or no verify at all scored every
    # sample 0 (harbor:missing_reward), silently on a server; check knew it without running anything.
    task = write_files(tmp_path / "task", {"task.toml": "", "tests/verifier.py": source})
    with pytest.raises(TaskError, match=rf"verifier\.py: .*{message}"):
        plan_verification(load_task(task))


@pytest.mark.parametrize("source", CALLABLE)
def test_a_verify_that_may_be_callable_is_planned(tmp_path, source):
    task = write_files(tmp_path / "task", {"task.toml": "", "tests/verifier.py": source})
    assert plan_verification(load_task(task)).kind == "verifier.py"


# --- An operator's trial (2026-12-05): plan_verification's arguments are checked, in one sentence ---


@pytest.mark.parametrize("seconds", [-1, 0, float("nan"), float("inf"), "5", True, None])
def test_a_timeout_that_is_no_number_of_seconds_is_refused_before_any_sandbox(seconds):
    task = load_task(EXAMPLES / "answer-file")
    if seconds is None:  # the task's own
        assert plan_verification(task, timeout_sec=seconds).timeout_sec == 60.0
        return
    with pytest.raises(TaskError, match=r"timeout_sec must be a finite number of seconds above 0, not "):
        plan_verification(task, timeout_sec=seconds)


def test_a_response_or_task_data_that_is_no_json_object_is_a_task_error_and_any_mapping_will_do():
    import types
    from collections import UserDict

    task = load_task(EXAMPLES / "numeric-response")
    with pytest.raises(TaskError, match=r"the response must be a JSON object \(a dict\), not str"):
        plan_verification(task, response="Answer: 4.2")  # type: ignore[arg-type]
    with pytest.raises(TaskError, match="task_data cannot be written as JSON"):
        plan_verification(task, task_data={"answer": object()})
    given = response("Answer: 4.2")
    proxied = plan_verification(task, response=types.MappingProxyType(given), task_data=UserDict({"answer": "4.2"}))
    assert proxied.files == plan_verification(task, response=given, task_data={"answer": "4.2"}).files


def test_a_task_is_a_task_or_its_folder_and_secrets_are_strings(tmp_path):
    by_path = plan_verification(EXAMPLES / "answer-file")  # type: ignore[arg-type]
    assert by_path.files == plan_verification(load_task(EXAMPLES / "answer-file")).files
    assert plan_verification(str(EXAMPLES / "answer-file")).files == by_path.files  # type: ignore[arg-type]
    with pytest.raises(
        TypeError, match="plan_verification\\(\\): task must be a Task \\(load_task's\\) or a task folder, not int"
    ):
        plan_verification(5)  # type: ignore[arg-type]
    with pytest.raises(TaskError, match="secrets must map names to strings: 'A' is int"):
        plan_verification(load_task(EXAMPLES / "answer-file"), secrets={"A": 1})  # type: ignore[dict-item]


def test_a_docker_sandbox_never_started_is_the_callers_mistake_and_raises(tmp_path):
    from nemo_gym.data.tasks.harbor.sandboxes.base import SandboxNotStarted
    from nemo_gym.data.tasks.harbor.sandboxes.docker import DockerSandbox

    sandbox = DockerSandbox("any-image", workspace=tmp_path, client=object())
    with pytest.raises(SandboxNotStarted, match="verify in it inside its `async with`"):
        asyncio.run(run_verification(plan_verification(load_task(EXAMPLES / "answer-file")), sandbox))


def test_an_operators_wrong_arguments_are_one_sentence_naming_them(tmp_path):
    """An operator's trial: each of these surfaced as an AttributeError deep in a run, or masked."""
    task = load_task(EXAMPLES / "answer-file")
    plan = plan_verification(task)
    sandbox = LocalSandbox(tmp_path)
    with pytest.raises(TypeError, match=r"^run_verification\(\): plan must be a VerificationPlan .*, not Task$"):
        asyncio.run(run_verification(task, sandbox))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^run_verification\(\): sandbox must be a sandbox .*, not str$"):
        asyncio.run(run_verification(plan, "/tmp"))  # type: ignore[arg-type]
    for secrets in ([("API_KEY", "x")], "API_KEY=x"):
        with pytest.raises(TypeError, match=r"secrets must be a mapping of names to strings \(a dict\), not "):
            plan_verification(task, secrets=secrets)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"host_env must be a mapping of names to strings \(a dict\), not str"):
        plan_verification(task, host_env="API_KEY=1")  # type: ignore[arg-type]
    with pytest.raises(TaskError, match=r"secrets\['API_KEY'\]: a name is not empty and has no '=' or NUL, a value"):
        plan_verification(task, secrets={"API_KEY": "tok\0en"})
    asyncio.run(sandbox.close())


def test_a_plans_repr_never_shows_a_secret_filled_into_its_env(tmp_path):
    task = write_files(tmp_path / "task", {"task.toml": '[verifier]\nenv = { KEY = "${API_KEY}" }\n'})
    write_files(task, {"tests/verifier.py": "def verify():\n    return 1\n"})
    plan = plan_verification(task, secrets={"API_KEY": "s3cr3t-VALUE-xyz"})
    assert plan.env == {"KEY": "s3cr3t-VALUE-xyz"}  # it is there to run with
    assert "s3cr3t" not in repr(plan) and "s3cr3t" not in str(plan)


def test_a_separate_run_refuses_a_plan_made_for_another_task(tmp_path):
    """A plan holds no verifier of its task's choosing beyond its files: run with another task, it
    graded with that task's sandbox and artifacts and this plan's verifier, silently."""
    import shutil

    from nemo_gym.data.tasks.harbor.sandboxes.for_task import verifier_sandbox_opener
    from nemo_gym.data.tasks.harbor.separate import run_separate_verification

    other = Path(shutil.copytree(EXAMPLES / "separate-verifier", tmp_path / "other"))
    plan = plan_verification(other)  # a folder will do, as for plan_verification
    sandbox = LocalSandbox(tmp_path)
    opener = verifier_sandbox_opener(EXAMPLES / "separate-verifier", kind="local")
    with pytest.raises(TaskError, match=r"the plan was made for the task 'other' \(.*other\), not for 'separate-ve"):
        asyncio.run(run_separate_verification(EXAMPLES / "separate-verifier", plan, sandbox, opener))
    with pytest.raises(TypeError, match=r"open_verifier must be what opens the verifier's sandbox .* not str$"):
        asyncio.run(run_separate_verification(other, plan, sandbox, "local"))  # type: ignore[arg-type]
    assert sandbox.started  # refused before anything ran: the agent's sandbox is still there
    asyncio.run(sandbox.close())


def test_a_local_working_directory_inside_a_users_home_shows_the_workspace(tmp_path):
    """Red team 98: the home of a user the task names was bound over the working directory inside it."""
    if not namespaces_available():
        pytest.fail("this machine kind provides bubblewrap (installed by .ci/run); the local sandbox needs it here")
    (tmp_path / "answer.txt").write_text("Paris\n")

    async def run() -> ExecResult:
        async with LocalSandbox(tmp_path, workdir="/home/agent/ws", users=["agent"]) as sandbox:
            return await sandbox.exec("cat answer.txt", user="root", cwd="/home/agent/ws")

    result = asyncio.run(run())
    assert (result.return_code, result.stdout) == (0, "Paris\n"), result


def test_a_local_sandbox_closed_raises_and_one_dropped_leaves_no_folder(tmp_path):
    import gc

    from nemo_gym.data.tasks.harbor.sandboxes.base import SandboxNotStarted

    plan = plan_verification(load_task(EXAMPLES / "answer-file"))
    sandbox = LocalSandbox(tmp_path)
    root = sandbox.host_path(sandbox.tests_dir).parent
    asyncio.run(sandbox.close())
    assert not root.exists() and not sandbox.started
    with pytest.raises(SandboxNotStarted, match=r"is not running \(never started, or closed\)"):
        asyncio.run(run_verification(plan, sandbox))
    asyncio.run(sandbox.close())  # a second close does nothing
    dropped = LocalSandbox(tmp_path)
    root = dropped.host_path(dropped.tests_dir).parent
    assert root.is_dir()
    del dropped
    gc.collect()
    assert not root.exists()
