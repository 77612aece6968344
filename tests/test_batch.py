"""Verification at scale: ``map_bounded``, ``verify_rollouts`` and ``gym-harbor dataset validate
--jobs/--json/--secrets`` with its progress (a bar on a terminal, lines elsewhere)."""

from __future__ import annotations

import asyncio
import io
import json
import random
import shutil
import subprocess
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, List

import pytest
from support import EXAMPLES, write_files

from nemo_gym.data.tasks.harbor.batch import Rollout, map_bounded, verify_rollouts
from nemo_gym.data.tasks.harbor.progress import ProgressReport
from nemo_gym.data.tasks.harbor.sandboxes.base import SandboxError
from nemo_gym.data.tasks.harbor.sandboxes.local import LocalSandbox, namespaces_available
from nemo_gym.data.tasks.harbor.task import TaskError, load_task
from nemo_gym.data.tasks.harbor.verification import plan_verification

GYM = str(Path(sys.executable).parent / "gym-harbor")
needs_namespaces = pytest.mark.skipif(not namespaces_available(), reason="needs bubblewrap")


# --- map_bounded ------------------------------------------------------------------------------


def test_results_come_back_in_order_with_at_most_jobs_running():
    running, peak = 0, 0

    async def work(item: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(random.uniform(0, 0.01))  # they end out of order
        running -= 1
        return item * item

    calls: List[Any] = []
    results = asyncio.run(map_bounded(list(range(40)), work, jobs=4, progress=lambda *call: calls.append(call)))
    assert results == [item * item for item in range(40)]
    assert peak == 4
    assert [call[0] for call in calls] == list(range(1, 41))  # done counts up by one
    assert all(call[1] == 40 and call[3] == call[2] ** 2 for call in calls)  # total, index, result
    assert sorted(call[2] for call in calls) == list(range(40))  # each index reported once


def test_no_items_is_no_work_and_a_bad_jobs_is_refused():
    async def work(item: int) -> int:
        raise AssertionError("never called")

    assert asyncio.run(map_bounded([], work, jobs=3)) == []
    for jobs in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="jobs must be a whole number"):
            asyncio.run(map_bounded([1], work, jobs=jobs))  # type: ignore[arg-type]


def test_the_first_exception_cancels_the_rest_and_is_raised():
    cancelled = []

    async def work(item: int) -> int:
        if item == 3:
            raise TaskError("the task's verifier is misconfigured")
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.append(item)
            raise
        return item

    with pytest.raises(TaskError, match="misconfigured"):
        asyncio.run(asyncio.wait_for(map_bounded(list(range(8)), work, jobs=4), 4))
    assert sorted(cancelled) == [0, 1, 2]  # the others running beside it; the rest never started


# --- verify_rollouts ------------------------------------------------------------------------


class Lost(LocalSandbox):
    """A sandbox that is gone by the time it is graded."""

    async def exec(self, command: str, **options: Any) -> Any:
        raise SandboxError("the container is gone")

    async def exec_piped(self, command: str, stdin: bytes, **options: Any) -> Any:
        raise SandboxError("the container is gone")


@needs_namespaces
def test_each_rollout_gets_its_own_outcome_in_order_and_a_lost_sandbox_masks_only_its_own(tmp_path):
    task = load_task(EXAMPLES / "answer-file")
    answers = ["Paris", "Lyon", "Paris", None, "Paris", "Rome", "Paris", "Paris"]  # None: the sandbox is lost

    async def run() -> List[Any]:
        async with AsyncExitStack() as stack:
            rollouts = []
            for index, answer in enumerate(answers):
                workspace = tmp_path / f"ws{index}"
                workspace.mkdir()
                (workspace / "answer.txt").write_text(f"{answer}\n")
                kind = Lost if answer is None else LocalSandbox
                sandbox = await stack.enter_async_context(kind(workspace, workdir="/workspace"))
                rollouts.append(Rollout(plan_verification(task), sandbox))
            return await verify_rollouts(rollouts, jobs=3)

    outcomes = asyncio.run(run())
    assert [outcome.reward for outcome in outcomes] == [1.0 if answer == "Paris" else 0.0 for answer in answers]
    assert [outcome.masked for outcome in outcomes] == [answer is None for answer in answers]


class NoSwitch(LocalSandbox):
    """A sandbox whose admin is an ordinary user: it cannot run the verifier as anyone else, and
    ``run_verification`` raises rather than grade."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.admin_user, self.single_user = "agent", False


@needs_namespaces
def test_a_rollout_whose_sandbox_raises_is_masked_alone_and_counted(tmp_path):
    from nemo_gym.data.tasks.harbor.verification import mask_counts

    task = load_task(
        write_files(
            tmp_path / "task",
            {"task.toml": '[verifier]\nuser = "grader"\n', "tests/verifier.py": "def verify():\n    return 1\n"},
        )
    )
    before = mask_counts().get("sandbox_error", 0)

    async def run() -> List[Any]:
        async with AsyncExitStack() as stack:
            rollouts = []
            for index, kind in enumerate((LocalSandbox, NoSwitch, LocalSandbox)):
                workspace = tmp_path / f"ws{index}"
                workspace.mkdir()
                sandbox = await stack.enter_async_context(kind(workspace, users=("grader",)))
                rollouts.append(Rollout(plan_verification(task), sandbox))
            return await verify_rollouts(rollouts, jobs=3)

    outcomes = asyncio.run(run())
    assert [(outcome.reward, outcome.masked) for outcome in outcomes] == [(1.0, False), (0.0, True), (1.0, False)]
    assert "cannot switch" in outcomes[1].detail
    assert mask_counts().get("sandbox_error", 0) == before + 1


@needs_namespaces
def test_a_hostile_rollout_cannot_reach_its_neighbours_outcome(tmp_path):
    """Rollouts verified side by side: an agent that leaves a process writing a full reward into
    every /logs/verifier it can find, and into its neighbours' folders, scores its own 0 and
    changes no one else's."""
    task = load_task(EXAMPLES / "answer-file")

    async def run() -> List[Any]:
        async with AsyncExitStack() as stack:
            rollouts = []
            for index in range(4):
                workspace = tmp_path / f"ws{index}"
                workspace.mkdir()
                (workspace / "answer.txt").write_text("Lyon\n")
                sandbox = await stack.enter_async_context(LocalSandbox(workspace, workdir="/workspace"))
                if index == 0:
                    planter = (
                        "for i in $(seq 200); do for d in /logs/verifier " + str(tmp_path) + "/*/; do "
                        'echo \'{"reward": 1}\' > "$d/reward.json" 2>/dev/null; done; sleep 0.02; done'
                    )
                    await sandbox.exec(f"nohup bash -c {json.dumps(planter)} >/dev/null 2>&1 &", timeout_s=10)
                rollouts.append(Rollout(plan_verification(task), sandbox))
            return await verify_rollouts(rollouts, jobs=4)

    outcomes = asyncio.run(run())
    assert [(outcome.reward, outcome.masked) for outcome in outcomes] == [(0.0, False)] * 4


def test_a_separate_rollout_without_its_verifier_sandbox_is_refused_before_any_runs(tmp_path):
    task = load_task(EXAMPLES / "separate-verifier")
    ran = []

    class Watched:
        admin_user = "root"

        async def exec(self, *args: Any, **kwargs: Any) -> Any:
            ran.append(args)
            raise AssertionError("no verification may start")

    rollouts = [Rollout(plan_verification(load_task(EXAMPLES / "answer-file")), Watched())]  # type: ignore[arg-type]
    rollouts.append(Rollout(plan_verification(task), Watched()))  # type: ignore[arg-type]
    with pytest.raises(TaskError, match="rollout 1: its verifier runs in a sandbox of its own"):
        asyncio.run(verify_rollouts(rollouts))
    assert ran == []


# --- the progress report --------------------------------------------------------------------


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _verdict(result: Any) -> Any:
    return result[0], f"{result[1]}: {'ok' if result[0] else 'FAILED'}", [] if result[0] else ["    why"]


def test_a_terminal_gets_a_bar_and_each_failure_in_full():
    stream = Terminal()
    report = ProgressReport(3, stream, verdict=_verdict)
    for done, result in enumerate([(True, "a"), (False, "b"), (True, "c")], start=1):
        report.update(done, 3, done - 1, result)
    report.close()
    text = stream.getvalue()
    assert "\r\x1b[K[" in text and "3/3  ok 2  failed 1" in text
    assert "\r\x1b[Kb: FAILED\n    why\n" in text  # the failure in full, above the bar
    assert "a: ok" not in text  # passes only move the bar
    assert text.endswith("\r\x1b[K")  # the bar is taken away


def test_anything_else_gets_one_line_per_item():
    stream = io.StringIO()
    report = ProgressReport(2, stream, verdict=_verdict)
    report.update(1, 2, 1, (False, "b"))
    report.update(2, 2, 0, (True, "a"))
    report.close()
    assert stream.getvalue() == "[1/2] b: FAILED\n    why\n[2/2] a: ok\n"


# --- gym-harbor dataset validate ---------------------------------------------------------------


def _validate(*args: str) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    return subprocess.run([GYM, "dataset", "validate", *args], capture_output=True, text=True, timeout=600)


def _dataset(tmp_path: Path, copies: int, secret_task: bool = False) -> Path:
    dataset = tmp_path / "ds"
    for index in range(copies):
        shutil.copytree(EXAMPLES / "answer-file", dataset / f"task-{index:02d}")
    if secret_task:
        write_files(
            dataset / "with-secret",
            {
                "task.toml": '[verifier]\ntimeout_sec = 60\n[verifier.env]\nJUDGE_KEY = "${JUDGE_KEY}"\n',
                "instruction.md": "Nothing to do.\n",
                "solution/solve.sh": "#!/bin/bash\ntrue\n",
                "tests/verifier.py": (
                    "import os\n\ndef verify(workspace):\n"
                    "    print('the key is', os.environ['JUDGE_KEY'])\n"
                    "    return 1.0 if os.environ.get('JUDGE_KEY') == 'hunter2-secret' else 0.0\n"
                ),
            },
        )
    return dataset


@needs_namespaces
def test_validate_with_jobs_and_json_gives_one_object_in_the_datasets_order(tmp_path):
    dataset = _dataset(tmp_path, 5)
    (dataset / "task-03" / "solution" / "solve.sh").write_text("#!/bin/bash\necho Lyon > answer.txt\n")
    ran = _validate(str(dataset), "--jobs", "3", "--json")
    assert ran.returncode == 1, ran.stderr
    report = json.loads(ran.stdout)  # stdout holds the object alone
    assert [task["task_id"] for task in report["tasks"]] == [f"task-{index:02d}" for index in range(5)]
    assert [task["passed"] for task in report["tasks"]] == [True, True, True, False, True]
    assert (report["total"], report["passed"]) == (5, 4)
    failed = report["tasks"][3]["steps"][0]
    assert (failed["reward"], failed["masked"], failed["oracle_status"]) == (0.0, False, 0)
    assert "[5/5]" in ran.stderr and "task-03: FAILED" in ran.stderr  # progress went to stderr
    assert "validation failed for 1 task(s): task-03" in ran.stderr


@needs_namespaces
def test_validate_fills_secrets_and_never_prints_them(tmp_path):
    dataset = _dataset(tmp_path, 1, secret_task=True)
    secrets = tmp_path / "secrets.json"
    secrets.write_text(json.dumps({"JUDGE_KEY": "hunter2-secret"}))
    without = _validate(str(dataset), "--json")
    assert without.returncode != 0  # ${JUDGE_KEY} has no value without the secret
    ran = _validate(str(dataset), "--json", "--secrets", str(secrets))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "hunter2-secret" not in ran.stdout + ran.stderr
    # A wrong secret fails, and the verifier's output, which prints it, shows it redacted.
    secrets.write_text(json.dumps({"JUDGE_KEY": "wrong-secret-value"}))
    wrong = _validate(str(dataset), "--secrets", str(secrets))
    assert wrong.returncode == 1 and "the key is ***" in wrong.stdout, wrong.stdout
    assert "wrong-secret-value" not in wrong.stdout + wrong.stderr


def test_validate_refuses_a_jobs_below_one(tmp_path):
    ran = _validate(str(EXAMPLES), "--jobs", "0")
    assert ran.returncode == 2 and "gym-harbor dataset validate: error: --jobs 0: give at least 1" in ran.stderr


# --- An operator's trial (2026-12-05): the caller's mistakes raise, a display cannot lose a batch ---


def test_a_progress_callback_that_raises_loses_nothing(caplog):
    async def work(item: int) -> int:
        return item * 2

    def broken(done: int, total: int, index: int, result: int) -> None:
        raise ZeroDivisionError("a display's bug")

    assert asyncio.run(map_bounded([1, 2, 3], work, jobs=2, progress=broken)) == [2, 4, 6]
    assert "the progress callback raised ZeroDivisionError" in caplog.text


def test_verify_rollouts_refuses_what_is_not_a_rollout_and_a_bad_jobs(tmp_path):
    task = load_task(EXAMPLES / "answer-file")
    sandbox = LocalSandbox(tmp_path)
    with pytest.raises(TypeError, match=r"rollout 0: plan must be a VerificationPlan \(plan_verification's\)"):
        asyncio.run(verify_rollouts([Rollout(None, sandbox)]))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="rollout 1: must be a Rollout, not tuple"):
        asyncio.run(verify_rollouts([Rollout(plan_verification(task), sandbox), (1, 2)]))  # type: ignore[list-item]
    with pytest.raises(ValueError, match="jobs must be a whole number of at least 1, not 0"):
        asyncio.run(verify_rollouts([Rollout(plan_verification(task), sandbox)], jobs=0))
    # An operator's trial: each of these was a mask of every rollout (or a callback never run).
    plan = plan_verification(task)
    with pytest.raises(TypeError, match=r"^rollout 0: sandbox must be a sandbox .*, not NoneType$"):
        asyncio.run(verify_rollouts([Rollout(plan, None)]))  # type: ignore[arg-type]
    separate = plan_verification(EXAMPLES / "separate-verifier")
    with pytest.raises(TypeError, match=r"^rollout 0: open_verifier must be what opens .*, not str$"):
        asyncio.run(verify_rollouts([Rollout(separate, sandbox, task, "local")]))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^rollout 0: task must be a Task \(load_task's\) or a task folder$"):
        asyncio.run(verify_rollouts([Rollout(separate, sandbox, 7, lambda spec: None)]))  # type: ignore[arg-type]

    async def shown(done: int, total: int, index: int, outcome: Any) -> None:
        pass

    for progress in (shown, "bar"):
        with pytest.raises(TypeError, match=r"^verify_rollouts\(\): progress must be a plain function"):
            asyncio.run(verify_rollouts([Rollout(plan, sandbox)], progress=progress))  # type: ignore[arg-type]


@needs_namespaces
def test_rollouts_sharing_one_sandbox_are_graded_one_after_another(tmp_path):
    # Two gradings at once in one sandbox share /tests and /logs/verifier: two of three were masked,
    # with a detail that read as a full disk. They now wait for each other.
    task = load_task(EXAMPLES / "answer-file")
    (tmp_path / "answer.txt").write_text("Paris\n")

    async def run() -> List[Any]:
        async with LocalSandbox(tmp_path, workdir="/workspace") as sandbox:
            return await verify_rollouts([Rollout(plan_verification(task), sandbox)] * 3, jobs=3)

    outcomes = asyncio.run(run())
    assert [(outcome.reward, outcome.masked) for outcome in outcomes] == [(1.0, False)] * 3, outcomes


def test_an_artifact_the_local_sandbox_cannot_place_masks_that_rollout_and_the_batch_goes_on(tmp_path):
    # Red team 84: one agent left its artifact /srv/out a file where the others left a folder; a file's
    # folder the host has (/srv) cannot be hidden, and the local verifier's sandbox raised TaskError,
    # which stopped the batch: every other rollout's outcome lost to one agent's doing.
    from nemo_gym.data.tasks.harbor.sandboxes.for_task import verifier_sandbox_opener

    if not namespaces_available() or not Path("/srv").is_dir():
        pytest.fail("this machine kind provides bubblewrap and /srv")
    toml = (
        'artifacts = ["/srv/out"]\n[verifier]\nenvironment_mode = "separate"\n'
        '[environment]\ndocker_image = "agent:1"\nworkdir = "/workspace"\n'
    )
    test_sh = 'if [ "$(cat /srv/out/answer)" = 42 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n'
    task = load_task(write_files(tmp_path / "task", {"task.toml": toml, "tests/test.sh": test_sh}))
    honest = write_files(tmp_path / "honest", {"ws/.keep": "", "srv/out/answer": "42"})
    hostile = write_files(tmp_path / "hostile", {"ws/.keep": "", "srv/out": "a file, not a folder"})

    async def go() -> List[Any]:
        async with AsyncExitStack() as stack:
            sandboxes = [
                await stack.enter_async_context(
                    LocalSandbox(root / "ws", workdir="/workspace", mounts={"/srv": root / "srv"})
                )
                for root in (honest, hostile)
            ]
            opener = verifier_sandbox_opener(task, kind="local")
            rollouts = [
                Rollout(plan_verification(task), sandbox, task=task, open_verifier=opener) for sandbox in sandboxes
            ]
            return await verify_rollouts(rollouts, jobs=2)

    first, second = asyncio.run(go())
    assert (first.reward, first.masked) == (1.0, False), first
    # The local sandbox's limit, where another agent's folder fits: masked (a 0 would score every agent
    # of a task whose artifact is a file there: red team 86), never the batch's error.
    assert (second.masked, second.mask_reason) == (True, "sandbox_error"), second
    assert "--sandbox docker" in second.detail
