"""One verification run: task folder -> staged archive -> sandbox -> reward files -> outcome.

``plan_verification`` decides everything from the task folder (pure apart from reading it);
``run_verification`` carries the plan out in a sandbox in a constant number of round trips: one
upload (the archive), three execs (prepare, run, collect) and no download, whatever the task's
file count. Sandbox faults give a masked outcome, never a score.
"""

from __future__ import annotations

import base64
import io
import os
import shlex
import tarfile
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from nemo_gym.data.tasks.harbor.env_templates import resolve_env
from nemo_gym.data.tasks.harbor.rewards import RewardOutcome, read_reward
from nemo_gym.data.tasks.harbor.sandboxes.base import ExecTimeout, Sandbox, SandboxError, User
from nemo_gym.data.tasks.harbor.staging import stage_archive, stage_shim, task_test_files
from nemo_gym.data.tasks.harbor.task import Task, TaskError

TEST_SH, PYTHON = "test.sh", "verifier.py"
# How long `timeout` waits after SIGTERM before SIGKILL, and the host's own margin on top: the
# in-sandbox `timeout` should always fire first; the host's only catches a sandbox that hangs.
KILL_AFTER_SEC = 5
HOST_MARGIN_SEC = 30
HOUSEKEEPING_TIMEOUT_SEC = 120
# The tail of test-stdout.txt kept in the outcome: enough for a traceback, bounded for a flood.
STDOUT_TAIL_BYTES = 64 * 1024
MAX_REWARD_BYTES = 1 << 20
# Exit statuses of the prepare step for a missing tool (the seed's mask reasons).
_NO_VERIFIER_TOOL, _NO_PROVIDER_TOOL = 90, 91


@dataclass(frozen=True)
class VerificationOutcome:
    """The result of one verification: a score, or a masked sample that is left out of the score."""

    reward: float
    metrics: Dict[str, float] = field(default_factory=dict)
    reward_components: Optional[List[str]] = None
    failure_kind: Optional[str] = None
    masked: bool = False
    mask_reason: Optional[str] = None
    detail: str = ""
    stdout: str = ""

    def as_dict(self) -> Dict[str, Any]:
        return asdict(self)


def masked(reason: str, detail: str, stdout: str = "") -> VerificationOutcome:
    return VerificationOutcome(reward=0.0, masked=True, mask_reason=reason, detail=detail, stdout=stdout)


@dataclass(frozen=True)
class VerifierChoice:
    """Which verifier grades a task: its own ``tests/test.sh``, or a Python ``verifier.py``."""

    kind: str
    tests_dir: Optional[Path]
    verifier_path: Optional[Path] = None


def choose_verifier(task_dir: Path, dataset_root: Optional[Path] = None) -> VerifierChoice:
    """``tests/test.sh`` wins when it exists; else ``tests/verifier.py``; a task without ``tests/``
    uses the dataset root's ``verifier.py``."""
    tests = task_dir / "tests"
    if tests.is_dir():
        if (tests / "test.sh").is_file():
            return VerifierChoice(TEST_SH, tests)
        if (tests / "verifier.py").is_file():
            return VerifierChoice(PYTHON, tests, tests / "verifier.py")
        raise TaskError(f"{tests}: holds neither test.sh nor verifier.py")
    if dataset_root is not None and (dataset_root / "verifier.py").is_file():
        return VerifierChoice(PYTHON, None, dataset_root / "verifier.py")
    raise TaskError(f"{task_dir}: has no tests/ folder and no dataset verifier.py beside it")


@dataclass(frozen=True)
class VerificationPlan:
    """Everything a run needs, decided before any sandbox starts."""

    kind: str
    archive: bytes
    timeout_sec: float
    env: Dict[str, str]
    user: Optional[User] = None
    inputs: Tuple[str, ...] = ()


def plan_verification(
    task: Task,
    *,
    response: Optional[Mapping[str, Any]] = None,
    task_data: Optional[Mapping[str, Any]] = None,
    timeout_sec: Optional[float] = None,
    host_env: Optional[Mapping[str, str]] = None,
) -> VerificationPlan:
    """The plan for verifying ``task``; ``TaskError`` for anything that cannot run (before any sandbox)."""
    choice = choose_verifier(task.path, task.dataset_root)
    task_files = task_test_files(choice.tests_dir) if choice.tests_dir is not None else []
    if choice.kind == TEST_SH:
        archive = stage_archive(task_files)
    else:
        assert choice.verifier_path is not None
        data = task.task_data if task_data is None else task_data
        archive = stage_shim(choice.verifier_path.read_bytes(), data, response, task_files)
    env = resolve_env(task.verifier.env, os.environ if host_env is None else host_env, where="[verifier].env")
    return VerificationPlan(
        kind=choice.kind,
        archive=archive,
        timeout_sec=timeout_sec if timeout_sec is not None else task.verifier.timeout_sec,
        env=env,
        user=task.verifier.user,
    )


def _quoted(*parts: str) -> str:
    return " ".join(shlex.quote(part) for part in parts)


def prepare_command(sandbox: Sandbox, stage: str, inputs: Sequence[str]) -> str:
    """Empties /tests and /logs/verifier (keeping declared inputs that are regular files), unpacks
    the archive."""
    tests, logs = shlex.quote(sandbox.tests_dir), shlex.quote(sandbox.logs_dir)
    keep = " ".join(f"! \\( -type f -name {shlex.quote(name)} \\)" for name in inputs)
    return "\n".join(
        [
            "command -v timeout >/dev/null 2>&1 || "
            f'{{ echo "the image has no timeout"; exit {_NO_VERIFIER_TOOL}; }}',
            "for tool in tar gzip find; do command -v $tool >/dev/null 2>&1 || "
            f'{{ echo "the image has no $tool"; exit {_NO_PROVIDER_TOOL}; }}; done',
            "set -e",
            f"for d in {tests} {logs}; do",
            '  if [ -L "$d" ] || { [ -e "$d" ] && [ ! -d "$d" ]; }; then rm -rf -- "$d"; fi',
            '  mkdir -p -- "$d"',
            "done",
            f"find {tests} -mindepth 1 -maxdepth 1 -exec rm -rf -- {{}} +",
            f"find {logs} -mindepth 1 -maxdepth 1 {keep} -exec rm -rf -- {{}} +",
            f"chmod 777 {logs}",
            f"tar -xzf {shlex.quote(stage)} -C {tests} --no-same-owner",
            f"rm -f -- {shlex.quote(stage)}",
            f"chmod +x {tests}/test.sh",
        ]
    )


def run_command(sandbox: Sandbox, timeout_sec: float) -> str:
    """``bash /tests/test.sh`` under ``timeout``, its output in ``/logs/verifier/test-stdout.txt``."""
    seconds = f"{timeout_sec:g}"
    return (
        f"timeout -k {KILL_AFTER_SEC} {seconds} bash {shlex.quote(sandbox.tests_dir + '/test.sh')} "
        f"> {shlex.quote(sandbox.logs_dir + '/test-stdout.txt')} 2>&1"
    )


def collect_command(sandbox: Sandbox) -> str:
    """Prints, base64'd, a tar of the reward files (a non-regular one as a folder) and the output's tail."""
    return "\n".join(
        [
            "set -e",
            "out=$(mktemp -d); trap 'rm -rf -- \"$out\"' EXIT",
            f"cd {shlex.quote(sandbox.logs_dir)}",
            "for f in reward.json reward.txt; do",
            '  if [ -f "$f" ] && [ ! -L "$f" ]; then head -c '
            + str(MAX_REWARD_BYTES + 1)
            + ' -- "$f" > "$out/$f"',
            '  elif [ -e "$f" ] || [ -L "$f" ]; then mkdir "$out/$f"; fi',
            "done",
            "if [ -f test-stdout.txt ]; then "
            f'tail -c {STDOUT_TAIL_BYTES} test-stdout.txt > "$out/test-stdout.txt"; fi',
            'tar -C "$out" -czf - . | base64',
        ]
    )


def _unpack_collected(text: str, folder: Path) -> str:
    """Writes the collected reward files into ``folder``; returns the output's tail."""
    stdout = ""
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(text)), mode="r:gz") as archive:
        for member in archive.getmembers():
            name = member.name[2:] if member.name.startswith("./") else member.name
            if name in ("reward.json", "reward.txt"):
                if member.isdir():
                    (folder / name).mkdir()
                elif member.isfile():
                    extracted = archive.extractfile(member)
                    assert extracted is not None
                    (folder / name).write_bytes(extracted.read())
            elif name == "test-stdout.txt" and member.isfile():
                extracted = archive.extractfile(member)
                assert extracted is not None
                stdout = extracted.read().decode(errors="replace")
    return stdout


def _mask_for_prepare(return_code: int, output: str) -> VerificationOutcome:
    if return_code == _NO_VERIFIER_TOOL or (return_code in (126, 127) and "bash" in output):
        return masked("verifier_error", f"test.sh cannot start: {output.strip() or 'the image has no bash'}")
    if return_code == _NO_PROVIDER_TOOL:
        return masked("provider_unavailable", f"the shim cannot be staged: {output.strip()}")
    return masked("sandbox_error", f"staging /tests failed (exit {return_code}): {output.strip()[-500:]}")


async def run_verification(plan: VerificationPlan, sandbox: Sandbox) -> VerificationOutcome:
    """Stages the plan's archive over /tests, runs test.sh from the sandbox's workdir under its
    timeout, and reads the rewards."""
    stage = f"{sandbox.tmp_dir}/nemo-gym-stage-{uuid.uuid4().hex}.tgz"
    env = dict(plan.env)
    if sandbox.logs_dir != "/logs/verifier":
        env["VERIFIER_LOGS_DIR"] = sandbox.logs_dir
    with tempfile.TemporaryDirectory(prefix="nemo-gym-verification-") as scratch:
        local_stage = Path(scratch) / "stage.tgz"
        local_stage.write_bytes(plan.archive)
        try:
            await sandbox.upload_file(str(local_stage), stage)
            prepared = await sandbox.exec(
                prepare_command(sandbox, stage, plan.inputs),
                cwd="/",
                user=sandbox.admin_user,
                timeout_s=HOUSEKEEPING_TIMEOUT_SEC,
            )
        except SandboxError as error:
            return masked("sandbox_error", f"staging /tests failed: {error}")
        if prepared.return_code != 0:
            return _mask_for_prepare(prepared.return_code, prepared.stdout + prepared.stderr)

        started = time.monotonic()
        timed_out = False
        try:
            ran = await sandbox.exec(
                run_command(sandbox, plan.timeout_sec),
                cwd=sandbox.workdir,
                env=env,
                user=plan.user,
                timeout_s=plan.timeout_sec + KILL_AFTER_SEC + HOST_MARGIN_SEC,
            )
            elapsed = time.monotonic() - started
            timed_out = ran.return_code in (124, 137) and elapsed >= plan.timeout_sec
        except ExecTimeout:
            timed_out = True
        except SandboxError as error:
            return masked("sandbox_error", f"running test.sh failed: {error}")

        try:
            collected = await sandbox.exec(
                collect_command(sandbox), cwd="/", user=sandbox.admin_user, timeout_s=HOUSEKEEPING_TIMEOUT_SEC
            )
            if collected.return_code != 0:
                raise SandboxError(collected.stderr.strip() or f"exit {collected.return_code}")
            logs = Path(scratch) / "logs"
            logs.mkdir()
            stdout = _unpack_collected(collected.stdout, logs)
        except (SandboxError, tarfile.TarError, ValueError, OSError) as error:
            return masked("sandbox_error", f"the reward could not be copied out: {error}")
        outcome: RewardOutcome = read_reward(logs, timed_out=timed_out)
    return VerificationOutcome(
        reward=outcome.reward,
        metrics=outcome.metrics,
        reward_components=outcome.reward_components,
        failure_kind=outcome.failure_kind,
        detail=outcome.detail,
        stdout=stdout,
    )
