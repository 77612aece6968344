"""One verification run: task folder -> staged archive -> sandbox -> reward files -> outcome.

``plan_verification`` decides everything from the task folder (pure apart from reading it);
``run_verification`` carries the plan out in a sandbox in a constant number of round trips: one
upload (the archive), three execs (prepare, run, collect) and no download, whatever the task's
file count. Sandbox faults give a masked outcome, never a score.
"""

from __future__ import annotations

import base64
import io
import logging
import os
import shlex
import tarfile
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from nemo_gym.data.tasks.harbor.env_templates import resolve_env
from nemo_gym.data.tasks.harbor.env_templates import template_name as _template_name
from nemo_gym.data.tasks.harbor.rewards import RewardOutcome, read_reward
from nemo_gym.data.tasks.harbor.sandboxes.base import ExecTimeout, Sandbox, SandboxError, User
from nemo_gym.data.tasks.harbor.staging import ShimFile, stage_archive, stage_shim, task_test_files
from nemo_gym.data.tasks.harbor.task import CollectHook, Task, TaskError
from nemo_gym.data.tasks.harbor.verifier_env import step_verifier_mode, verifier_mode

TEST_SH, PYTHON = "test.sh", "verifier.py"
LOGGER = logging.getLogger("nemo_gym.harbor")
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
    """Which verifier grades a task: a ``test.sh``, or a Python ``verifier.py``, and the test folders."""

    kind: str
    tests_dirs: Tuple[Path, ...]
    verifier_path: Optional[Path] = None


def choose_verifier(task_dir: Path, dataset_root: Optional[Path] = None, step: Optional[str] = None) -> VerifierChoice:
    """``test.sh`` wins when it exists; else ``verifier.py``; a single-step task without ``tests/``
    uses the dataset root's ``verifier.py``.

    For a step, ``steps/<step>/tests/`` lies over the task's ``tests/`` (its files win), as Harbor
    uploads one and then the other into ``/tests``.
    """
    folders = [task_dir / "tests"] + ([task_dir / "steps" / step / "tests"] if step else [])
    folders = [folder for folder in folders if folder.is_dir()]
    if folders:
        if any((folder / "test.sh").is_file() for folder in folders):
            return VerifierChoice(TEST_SH, tuple(folders))
        for folder in reversed(folders):
            if (folder / "verifier.py").is_file():
                return VerifierChoice(PYTHON, tuple(folders), folder / "verifier.py")
        raise TaskError(f"{' and '.join(map(str, folders))}: holds neither test.sh nor verifier.py")
    if step is None and dataset_root is not None and (dataset_root / "verifier.py").is_file():
        return VerifierChoice(PYTHON, (), dataset_root / "verifier.py")
    where = f"{task_dir}/steps/{step}" if step else str(task_dir)
    raise TaskError(f"{where}: has no tests/ folder and no dataset verifier.py beside it")


@dataclass(frozen=True)
class VerificationPlan:
    """Everything a run needs, decided before any sandbox starts."""

    kind: str
    archive: bytes
    timeout_sec: float
    env: Dict[str, str]
    user: Optional[User] = None
    inputs: Tuple[str, ...] = ()
    collect: Tuple[CollectHook, ...] = ()
    secrets: Tuple[str, ...] = field(default=(), repr=False)

    def redact(self, text: str) -> str:
        """``text`` with every secret value replaced: secrets never reach any output."""
        for secret in sorted(self.secrets, key=len, reverse=True):
            text = text.replace(secret, "***")
        return text


def plan_verification(
    task: Task,
    *,
    step: Optional[str] = None,
    response: Optional[Mapping[str, Any]] = None,
    task_data: Optional[Mapping[str, Any]] = None,
    timeout_sec: Optional[float] = None,
    secrets: Optional[Mapping[str, str]] = None,
    host_env: Optional[Mapping[str, str]] = None,
) -> VerificationPlan:
    """The plan for verifying ``task`` (or one of its steps); ``TaskError`` for anything that cannot
    run, raised before any sandbox starts.

    A step's ``[steps.verifier]`` falls back as Harbor's does: its env lies over ``[verifier].env``,
    its user defaults to ``[verifier].user``, its timeout to 600 s (never the task's). Secrets fill
    ``${NAME}`` templates in the verifier env tables only, and win over the host environment.
    """
    where = f"{task.path / 'task.toml'} [verifier].env"
    if step is None:
        if task.steps:
            names = ", ".join(item.name for item in task.steps)
            raise TaskError(f"{task.path}: a multi-step task; name the step to verify (steps: {names})")
        config, env_table, hooks = task.verifier, dict(task.verifier.env), task.verifier.collect
        mode = verifier_mode(task)
    else:
        config = task.step(step).verifier
        env_table = {**task.verifier.env, **config.env}
        hooks = task.verifier.collect + config.collect
        mode = step_verifier_mode(task, step)
    if mode == "separate":
        raise TaskError(
            f"{task.path / 'task.toml'}: the verifier runs in a separate environment, which this server "
            "starts only with its separate-verifier support; gym verify runs shared-mode verifiers"
        )
    choice = choose_verifier(task.path, task.dataset_root, step)
    merged: Dict[str, ShimFile] = {}
    for folder in choice.tests_dirs:
        merged.update((file.name, file) for file in task_test_files(folder))
    task_files = [merged[name] for name in sorted(merged)]
    if choice.kind == TEST_SH:
        archive = stage_archive(task_files)
    else:
        assert choice.verifier_path is not None
        data = task.task_data if task_data is None else task_data
        archive = stage_shim(choice.verifier_path.read_bytes(), data, response, task_files)
    secrets = dict(secrets or {})
    source = {**(os.environ if host_env is None else host_env), **secrets}
    env = resolve_env(env_table, source, where=where)
    used_secrets = tuple(value for key, value in env.items() if value and _template_name(env_table[key]) in secrets)
    user = config.user if config.user is not None else task.verifier.user
    if user is None and task.agent_user is not None:
        user = "root"  # the contract: no record of the image's user and [agent].user set
    seconds = timeout_sec if timeout_sec is not None else config.timeout_sec * task.timeout_multiplier
    return VerificationPlan(
        kind=choice.kind,
        archive=archive,
        timeout_sec=seconds,
        env=env,
        user=user,
        inputs=task.inputs,
        collect=hooks,
        secrets=used_secrets,
    )


def prepare_command(sandbox: Sandbox, stage: str, inputs: Sequence[str]) -> str:
    """Empties /tests and /logs/verifier (keeping declared inputs that are regular files), unpacks
    the archive."""
    tests, logs = shlex.quote(sandbox.tests_dir), shlex.quote(sandbox.logs_dir)
    keep = " ".join(f"! \\( -type f -name {shlex.quote(name)} \\)" for name in inputs)
    return "\n".join(
        [
            f'command -v timeout >/dev/null 2>&1 || {{ echo "the image has no timeout"; exit {_NO_VERIFIER_TOOL}; }}',
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
            '  if [ -f "$f" ] && [ ! -L "$f" ]; then head -c ' + str(MAX_REWARD_BYTES + 1) + ' -- "$f" > "$out/$f"',
            '  elif [ -e "$f" ] || [ -L "$f" ]; then mkdir "$out/$f"; fi',
            "done",
            f'if [ -f test-stdout.txt ]; then tail -c {STDOUT_TAIL_BYTES} test-stdout.txt > "$out/test-stdout.txt"; fi',
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
    """Runs the collect hooks, stages the plan's archive over /tests, runs test.sh from the sandbox's
    workdir under its timeout, and reads the rewards. Secret values never reach the outcome."""
    if isinstance(plan.user, str) and ":" in plan.user and not getattr(sandbox, "supports_user_groups", False):
        raise TaskError(
            f"[verifier].user = {plan.user!r}: a user with a group (name:group) works on the Docker sandbox only"
        )
    if plan.kind == TEST_SH and (sandbox.tests_dir, sandbox.logs_dir) != ("/tests", "/logs/verifier"):
        # A task's own test.sh writes the absolute /logs/verifier: it runs only where that path is the sandbox's.
        raise TaskError(
            "this sandbox cannot give a task's own test.sh a private /tests and /logs/verifier "
            "(the local sandbox needs Linux with bubblewrap for that); run it with --sandbox docker"
        )
    await run_collect_hooks(plan.collect, sandbox)
    outcome = await _run(plan, sandbox)
    return replace(outcome, stdout=plan.redact(outcome.stdout), detail=plan.redact(outcome.detail))


async def run_collect_hooks(hooks: Sequence[CollectHook], sandbox: Sandbox) -> None:
    """``[[verifier.collect]]`` hooks, in order, before the verifier's folders are emptied.

    Best effort, as Harbor runs them: a failure, a timeout or a lost sandbox is logged, never fatal.
    A timeout below one second means none (Harbor passes ``int(timeout_sec)``).
    """
    for hook in hooks:
        seconds = int(hook.timeout_sec) or None
        try:
            result = await sandbox.exec(hook.command, cwd=sandbox.workdir, timeout_s=seconds, user=hook.user)
        except SandboxError as error:
            LOGGER.warning("collect hook %r failed: %s", hook.command, error)
            continue
        if result.return_code != 0:
            LOGGER.warning("collect hook %r exited with %d: %s", hook.command, result.return_code, result.stderr[-500:])


async def _run(plan: VerificationPlan, sandbox: Sandbox) -> VerificationOutcome:
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
            if ran.return_code == 126 and "unable to find user" in ran.stdout + ran.stderr:
                # Docker's refusal of an unknown [verifier].user: the task's fault, never the agent's.
                return masked("verifier_error", f"test.sh cannot start: {(ran.stdout + ran.stderr).strip()}")
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
