"""One verification run: task folder -> staged files -> sandbox -> results -> outcome.

``plan_verification`` decides everything from the task folder (pure apart from reading it);
``run_verification`` carries the plan out in a constant number of round trips, whatever the
task's file count: one upload (the staged files and the run's key), one exec as the sandbox's
admin (two when a task's own test.sh runs as another user), one download of the results. The
in-sandbox steps are ``grading``'s; the results are read by ``collected`` and scored by
``rewards`` (a task's own test.sh) or ``reports`` (the shim: the runner's private report wins
over any file). Faults of the sandbox mask the sample, never score it, and every mask is counted.
"""

from __future__ import annotations

import asyncio
import difflib
import inspect
import logging
import os
import re
import secrets
import tempfile
import time
import weakref
from collections import Counter
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple, Union

from nemo_gym.data.tasks.harbor._values import finite_float
from nemo_gym.data.tasks.harbor.bounded import run_bounded
from nemo_gym.data.tasks.harbor.bytecode import ImageTags, for_tag
from nemo_gym.data.tasks.harbor.check import unusable_verify
from nemo_gym.data.tasks.harbor.collected import CACHE_TAG, Collected, CollectError, read_collected
from nemo_gym.data.tasks.harbor.env_templates import resolve_env
from nemo_gym.data.tasks.harbor.env_templates import template_name as _template_name
from nemo_gym.data.tasks.harbor.grading import (
    ALWAYS_BLANKED,
    DONE_MARKER,
    HANDOVER_OWN,
    HANDOVER_READ,
    NO_NULL_DEVICE,
    NO_PROVIDER_TOOL,
    NO_TAR,
    NO_VERIFIER_TOOL,
    PREPARED_ONLY,
    STAGING_FAILED,
    UNKNOWN_USER,
    GradingSteps,
    broken_for_grading,
    deferred,
    grading_command,
    system_folders,
)
from nemo_gym.data.tasks.harbor.redaction import redact, redact_bytes
from nemo_gym.data.tasks.harbor.reports import REFUSED, find_reports, judge_report
from nemo_gym.data.tasks.harbor.rewards import (
    MISSING_REWARD,
    TIMEOUT_DETAIL,
    UNREADABLE,
    VERIFIER_TIMEOUT,
    reward_from_files,
)
from nemo_gym.data.tasks.harbor.sandboxes.base import (
    ArchiveSandbox,
    ExecTimeout,
    OutputTooLarge,
    PipeSandbox,
    Sandbox,
    SandboxError,
    User,
    names_root,
    require_started,
    sandbox_option,
)
from nemo_gym.data.tasks.harbor.staging import (
    ShimFile,
    StagingError,
    check_names,
    merged_test_files,
    run_archive,
    shim_files,
    stage_archive,
)
from nemo_gym.data.tasks.harbor.task import CollectHook, Task, TaskError, as_task
from nemo_gym.data.tasks.harbor.verifier_env import step_verifier_mode, verifier_mode

TEST_SH, PYTHON = "test.sh", "verifier.py"
# The seed's mask for an ENTRYPOINT that died during the rollout, and where its output is kept.
ENTRYPOINT_FAILED = "harbor:entrypoint_failed"
# Staging failed for want of space: still a mask (a neighbour's fill looks the same from inside the
# sandbox), but counted apart, so that a policy that learns to fill its disk shows as a rising count.
# A disk filled once verify runs keeps no verdict from being scored (reports.UNWRITTEN).
DISK_FULL = "disk_full"
# Grading failed in a sandbox whose own limits (its pids or memory) left it no room. Only what runs
# inside a container counts against them, so that is the agent's doing (a fill it left behind) or the
# verifier's: scored 0, never masked (red team 34), and logged.
RESOURCES_EXHAUSTED = "resources_exhausted"
# Grading failed in a sandbox whose programs or user files grading needs the agent had changed since its
# image (deleted `timeout`, replaced `tar`, removed the verifier's user): its own doing, scored 0 (red team 91).
GRADING_BROKEN = "grading_broken"
# The masks a broken program or user file can cause: those of an image without them, a full disk (whose count
# a replaced program can print), and a fault of the sandbox seen from inside it (an exit status, damaged or
# oversized results). A call the engine or provider failed (a lost container, a broken connection, an upload
# or a download) is never the agent's programs' doing: it stays a mask, whatever changed.
_BREAKABLE = ("sandbox_error", "verifier_error", "provider_unavailable", DISK_FULL)
_CALL_FAILED = "grading failed: "
_BROKEN_BY_AGENT = "grading failed where the agent had changed what it runs"
ENTRYPOINT_LOG = "entrypoint-stdout.txt"
LOGGER = logging.getLogger("nemo_gym.harbor")
# How long `timeout` waits after SIGTERM before SIGKILL, and the host's own margin on top: the
# in-sandbox `timeout` should always fire first; the host's only catches a sandbox that hangs.
KILL_AFTER_SEC = 5
HOST_MARGIN_SEC = 30
HOUSEKEEPING_TIMEOUT_SEC = 120
# The tail of test-stdout.txt kept in the outcome: enough for a traceback, bounded for a flood. The
# sandbox sends a margin more, so that a secret cut in half at its start is still recognised.
STDOUT_TAIL_BYTES = 64 * 1024
# What a cut output starts with: readers (an author at gym-harbor verify -v) must not take it for the whole.
STDOUT_CUT_NOTE = "[... the verifier's earlier output is left out: only its last 64 KiB are kept ...]\n"
REDACTION_MARGIN_BYTES = 16 * 1024
MAX_REWARD_BYTES = 1 << 20
MAX_REPORT_CHARS = MAX_REWARD_BYTES + 4096  # one line: reward.json's text and its HMAC
# All the results of one run: two reward files, the report, the tail, the verifier's other output
# files (8 MiB at most) and some bookkeeping.
MAX_RESULTS_BYTES = 16 << 20
# Process-wide counts of masked samples (by reason) and of results something tampered with.
MASKS: Counter[str] = Counter()
TAMPERING: Counter[str] = Counter()
# Process-wide, which interpreter each image's runner reported: later runs stage its bytecode alone.
IMAGE_TAGS = ImageTags()


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
    timed_out: bool = False
    # What the verifier left in /logs/verifier besides test-stdout.txt, by path (reward.json,
    # reward.txt, ctrf.json, ...), within collected.py's caps; secrets redacted.
    files: Dict[str, bytes] = field(default_factory=dict, repr=False)

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
        whose = f" for step {step!r}" if step else ""
        hint = _misplaced_verifier(task_dir, step, folders)
        raise TaskError(f"{' and '.join(map(str, folders))}: holds neither test.sh nor verifier.py{whose}{hint}")
    if step is None and dataset_root is not None and (dataset_root / "verifier.py").is_file():
        return VerifierChoice(PYTHON, (), dataset_root / "verifier.py")
    where = f"{task_dir}/steps/{step}" if step else str(task_dir)
    hint = _misplaced_verifier(task_dir, step, [])
    raise TaskError(f"{where}: has no tests/ folder and no dataset verifier.py beside it{hint}")


def _misplaced_verifier(task_dir: Path, step: Optional[str], folders: Sequence[Path]) -> str:
    """A new author's slip, said after the error: a verifier.py beside task.toml (or beside the step's
    instruction.md), or a file in ``tests/`` named nearly so (``verify.py``)."""
    home = task_dir / "steps" / step if step else task_dir
    if (home / "verifier.py").is_file():
        return f" (its verifier.py belongs in tests/: move it to {home / 'tests' / 'verifier.py'})"
    for folder in reversed(folders):
        for name in ("verifier.py", "test.sh"):
            if (folder / name).exists() and not (folder / name).is_file():
                return f" ({folder / name} is not a regular file)"
        names = sorted(path.name for path in folder.glob("*.py") if not path.name.startswith("test_"))
        near = difflib.get_close_matches("verifier.py", names, n=1, cutoff=0.75)
        if near:
            return f" (did you mean to name {folder / near[0]} verifier.py?)"
    return ""


def task_verifier(task: Task, step: Optional[str] = None) -> VerifierChoice:
    """The verifier a run of ``task`` would choose (``choose_verifier``); a multi-step task's ``step``
    must be named, and be one of its steps (``TaskError`` otherwise)."""
    if step is None and task.steps:
        names = ", ".join(item.name for item in task.steps)
        raise TaskError(f"{task.path}: a multi-step task; name the step to verify (steps: {names})")
    if step is not None:
        task.step(step)
    return choose_verifier(task.path, task.dataset_root, step)


@dataclass(frozen=True)
class VerificationPlan:
    """Everything a run needs, decided before any sandbox starts: what ``/tests`` will hold (the
    shim for a Python verifier, the task's own files for a ``test.sh``), who runs it, how long."""

    kind: str
    files: Tuple[ShimFile, ...]
    timeout_sec: float
    env: Dict[str, str] = field(repr=False)  # values filled from secrets: never in a log line
    user: Optional[User] = None
    inputs: Tuple[str, ...] = ()
    # The user each of the task's agents runs as (``Task.agent_users``; ``None``: the image's ``USER``): a
    # kept input one of them owns was never the sidecar's (``_grading.sh``'s secure_inputs).
    agent_users: Tuple[Optional[User], ...] = ()
    collect: Tuple[CollectHook, ...] = ()
    secrets: Tuple[str, ...] = field(default=(), repr=False)
    # "shared" (in the agent's sandbox) or "separate" (a sandbox of its own: ``separate``'s run).
    mode: str = "shared"
    step: Optional[str] = None
    # Set by the separate run: grading happens in the verifier's own sandbox, and may run the
    # /tests/test.sh its image ships instead of staging the task's tests/.
    in_verifier_sandbox: bool = False
    keep_tests: bool = False
    # The task the plan was made for (its folder and id: a row's id tells the rows of one dataset
    # apart), so a run given another task refuses rather than grading with the wrong verifier.
    task_key: Optional[Tuple[str, str]] = None

    @property
    def archive(self) -> bytes:
        """The staged files as one deterministic gzip'd tar (cacheable, comparable; SPEC 5)."""
        return stage_archive(self.files)

    def redact(self, text: str, *, cut: bool = False, pieces: bool = False) -> str:
        """``text`` with every secret value replaced: secrets never reach any output (``redaction.redact``)."""
        return redact(text, self.secrets, cut=cut, pieces=pieces)


def plan_verification(
    task: Union[Task, str, os.PathLike[str]],
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

    ``task`` is a ``Task`` (``load_task``'s) or its folder. ``timeout_sec`` overrides the task's
    timeout and must be a finite number of seconds above 0; ``response`` and ``task_data`` are any
    mappings JSON can write (``TaskError`` otherwise).
    """
    task = as_task(task, "plan_verification()")
    if timeout_sec is not None and not (finite_float(timeout_sec) or 0) > 0:
        raise TaskError(
            f"plan_verification(): timeout_sec must be a finite number of seconds above 0, not {timeout_sec!r}"
        )
    for argument, mapping in (("secrets", secrets), ("host_env", host_env)):
        if mapping is not None and not isinstance(mapping, Mapping):
            raise TypeError(
                f"plan_verification(): {argument} must be a mapping of names to strings (a dict), "
                f"not {type(mapping).__name__}"
            )
    given: Mapping[Any, Any] = secrets or {}  # a caller's, unchecked by type: any keys and values
    for name, value in given.items():
        if not isinstance(name, str) or not isinstance(value, str):
            wrong = value if isinstance(name, str) else name
            raise TaskError(
                f"plan_verification(): secrets must map names to strings: {name!r} is {type(wrong).__name__}"
            )
        if "\0" in value or not name or "=" in name or "\0" in name:  # what a process environment holds
            raise TaskError(
                f"plan_verification(): secrets[{name!r}]: a name is not empty and has no '=' or NUL, a value "
                "has no NUL (a process environment holds nothing else)"
            )
    where = f"{task.path / 'task.toml'} [verifier].env"
    choice = task_verifier(task, step)
    if step is None:
        config, env_table, hooks = task.verifier, dict(task.verifier.env), task.verifier.collect
        mode = verifier_mode(task)
    else:
        config = task.step(step).verifier
        env_table = {**task.verifier.env, **config.env}
        hooks = task.verifier.collect + config.collect
        mode = step_verifier_mode(task, step)
    task_files = merged_test_files(choice.tests_dirs)
    if choice.kind == TEST_SH:
        files: Tuple[ShimFile, ...] = tuple(task_files)
    else:
        assert choice.verifier_path is not None
        data = task.task_data if task_data is None else task_data
        verifier = choice.verifier_path.read_bytes()
        unusable = unusable_verify(verifier)
        if unusable is not None:  # the author's mistake: every sample would score 0, so fail loudly
            raise TaskError(f"{choice.verifier_path}: {unusable}")
        try:
            files = tuple(shim_files(verifier, data, response, task_files))
        except StagingError as error:  # a response or task_data that JSON cannot write
            raise TaskError(str(error)) from None
    check_names(files)
    secrets = dict(secrets or {})
    source = {**(os.environ if host_env is None else host_env), **secrets}
    env = resolve_env(env_table, source, where=where, secrets=True)
    used_secrets = tuple(value for key, value in env.items() if value and _template_name(env_table[key]) in secrets)
    user = task.verifier_user_of(step)
    seconds = timeout_sec if timeout_sec is not None else config.timeout_sec * task.timeout_multiplier
    return VerificationPlan(
        kind=choice.kind,
        files=files,
        timeout_sec=seconds,
        env=env,
        user=user,
        inputs=task.inputs,
        agent_users=task.agent_users(),
        collect=hooks,
        secrets=used_secrets,
        mode=mode,
        step=step,
        task_key=task_key(task),
    )


def task_key(task: Task) -> Tuple[str, str]:
    """What tells ``task`` apart from any other: its folder and its id."""
    return (str(task.path), task.id)


def check_arguments(plan: Any, sandbox: Any, where: str) -> None:
    """``TypeError``, naming ``where`` and the argument, for a plan or sandbox of the wrong kind: the
    caller's mistake, which would otherwise surface as an ``AttributeError`` deep in a run."""
    if not isinstance(plan, VerificationPlan):
        raise TypeError(f"{where}: plan must be a VerificationPlan (plan_verification's), not {type(plan).__name__}")
    if not callable(getattr(sandbox, "exec", None)) or not hasattr(sandbox, "admin_user"):
        raise TypeError(
            f"{where}: sandbox must be a sandbox (a LocalSandbox, a DockerSandbox, attach()'s), "
            f"not {type(sandbox).__name__}"
        )


def _is_admin(user: Optional[User], sandbox: Sandbox) -> bool:
    """Whether ``user`` is the sandbox's admin (root, by name or uid) or stands for it (a sandbox with
    one uid for every name, ``single_user``)."""
    admin = sandbox.admin_user
    if user is None or sandbox_option(sandbox, "single_user", False):
        return True
    names = {str(admin), *(("root", "0", "0:0", "root:root") if str(admin) in ("root", "0") else ())}
    return str(user) in names


def verifier_user(plan: VerificationPlan, sandbox: Sandbox) -> Optional[User]:
    """Who the verifier runs as in ``sandbox``: the plan's user (``[verifier].user``, else
    ``[agent].user``), else the sandbox's default user (its image's ``USER``), else its admin (``None``)."""
    return plan.user if plan.user is not None else sandbox_option(sandbox, "default_user", None)


async def run_verification(plan: VerificationPlan, sandbox: Sandbox) -> VerificationOutcome:
    """Runs the collect hooks, stages the plan over /tests, runs test.sh from the sandbox's workdir
    under its timeout, and scores what comes back. Secret values never reach the outcome; any
    fault of the sandbox (an exception of any kind from it, damaged or lost results) masks the
    sample, never scores it."""
    check_arguments(plan, sandbox, "run_verification()")
    if isinstance(plan.user, str) and ":" in plan.user and not getattr(sandbox, "supports_user_groups", False):
        raise TaskError(
            f"[verifier].user = {plan.user!r}: a user with a group (name:group) works on the Docker sandbox only"
        )
    if plan.mode == "separate":
        raise TaskError(
            "this task's verifier runs in a separate sandbox of its own: verify it with "
            "separate.run_separate_verification (gym-harbor verify --sandbox docker does)"
        )
    if plan.kind == TEST_SH and (sandbox.tests_dir, sandbox.logs_dir) != ("/tests", "/logs/verifier"):
        # A task's own test.sh writes the absolute /logs/verifier: it runs only where that path is the sandbox's.
        raise TaskError(
            "this sandbox cannot give a task's own test.sh a private /tests and /logs/verifier "
            "(the local sandbox needs Linux with bubblewrap for that); run it with --sandbox docker"
        )
    require_started(sandbox)
    verifier = verifier_user(plan, sandbox)
    if not _is_admin(verifier, sandbox) and str(sandbox.admin_user) not in ("root", "0"):
        raise SandboxError(
            f"this sandbox runs as {sandbox.admin_user} and cannot switch to [verifier].user {verifier!r}"
        )
    limit = _run_limit(plan)
    async with _one_at_a_time(sandbox, limit) as turn:
        if not turn:  # the sandbox is lost: a grading of it the host gave up on runs on
            return masked("sandbox_error", f"an earlier grading of this sandbox was still running after {limit:g} s")
        return await _verify(plan, sandbox, verifier)


# Gradings of one sandbox wait for each other: two at once share /tests and /logs/verifier, and
# each removes what the other staged. By the sandbox's identity, for as long as it lives.
_TURNS: weakref.WeakKeyDictionary[Any, Tuple[asyncio.AbstractEventLoop, asyncio.Lock]] = weakref.WeakKeyDictionary()


# The tasks that hand a sandbox's turn on once its abandoned grading has ended (the loop keeps only
# weak references to tasks).
_HANDOVERS: Set[asyncio.Task[None]] = set()


@asynccontextmanager
async def _one_at_a_time(sandbox: Sandbox, limit: float) -> AsyncIterator[bool]:
    """Holds ``sandbox``'s turn (a lock of the running loop's) for one grading, and says whether it got
    it: ``False`` when ``limit`` seconds passed first. A sandbox that cannot be weakly referenced is not
    serialised. A grading may end with its exec still running in the sandbox (an engine's cannot be
    stopped): cancelled, timed out by its caller, or given up on by the host (``ExecTimeout``, which
    returns an outcome), so the turn passes on only when the sandbox's ``settled()`` says every exec
    has ended, however the grading ended; the next one never runs beside it."""
    loop = asyncio.get_running_loop()
    try:
        held = _TURNS.get(sandbox)
        if held is None or held[0] is not loop:
            held = _TURNS[sandbox] = (loop, asyncio.Lock())
    except TypeError:  # unhashable, or no weak reference to it
        yield True
        return
    turn = held[1]
    if not await _acquire(turn, limit):
        yield False
        return
    settled = getattr(sandbox, "settled", None)
    try:
        yield True
    finally:
        if settled is None:
            turn.release()
        else:
            handover = loop.create_task(_pass_on(turn, settled))
            _HANDOVERS.add(handover)
            handover.add_done_callback(_HANDOVERS.discard)


async def _acquire(lock: asyncio.Lock, limit: float) -> bool:
    """Whether ``lock`` was acquired within ``limit`` seconds; never leaves it taken when cancelled
    (``wait_for`` could lose a lock acquired as it timed out, before Python 3.12). An acquire that is
    cancelled before it resumes never holds the lock."""
    acquiring = asyncio.ensure_future(lock.acquire())
    try:
        await asyncio.wait({acquiring}, timeout=limit)
    except BaseException:
        if not acquiring.cancel() and not acquiring.cancelled() and acquiring.exception() is None:
            lock.release()  # it was acquired as the wait was cancelled
        raise
    return not acquiring.cancel()


async def _pass_on(turn: asyncio.Lock, settled: Callable[[], Awaitable[None]]) -> None:
    try:
        await settled()
    except Exception as error:  # cannot tell: the next grading finds out what is left of the sandbox
        LOGGER.warning("could not tell whether a sandbox's last grading has ended (%s)", error)
    finally:
        turn.release()


def _run_limit(plan: VerificationPlan) -> float:
    """How long grading ``plan`` may take in all before the host gives up on it."""
    return plan.timeout_sec + KILL_AFTER_SEC + HOUSEKEEPING_TIMEOUT_SEC + HOST_MARGIN_SEC


async def _verify(plan: VerificationPlan, sandbox: Sandbox, verifier: Optional[User]) -> VerificationOutcome:
    await run_collect_hooks(plan.collect, sandbox)
    alive, entrypoint_output = await entrypoint_state(sandbox)
    if alive is False:
        outcome = masked(ENTRYPOINT_FAILED, "the image's ENTRYPOINT died before grading", entrypoint_output)
    else:
        started = time.time()
        outcome = await _unless_exhausted(await _grade(plan, sandbox, verifier), sandbox, started)
        outcome = await _unless_broken(outcome, sandbox)
        if outcome.masked and alive:
            # An entrypoint that has just died can still read as running, and its container stops
            # under the grading: asked again, the engine knows.
            alive, output = await entrypoint_state(sandbox)
            if alive is False:
                entrypoint_output = output or entrypoint_output
                outcome = masked(ENTRYPOINT_FAILED, "the image's ENTRYPOINT died before grading", entrypoint_output)
    if entrypoint_output:
        name = f"verifier-{ENTRYPOINT_LOG}" if plan.in_verifier_sandbox else ENTRYPOINT_LOG
        outcome = replace(outcome, files={**outcome.files, name: entrypoint_output.encode("utf-8", "replace")})
    outcome = replace(
        outcome,
        detail=plan.redact(outcome.detail, pieces=True),  # it quotes output and values cut short (red team 84)
        metrics={plan.redact(_unicode(key)): value for key, value in outcome.metrics.items()},
        reward_components=None
        if outcome.reward_components is None
        else [plan.redact(_unicode(name)) for name in outcome.reward_components],
    )
    if outcome.masked:  # counted and logged once redacted: a provider's fault may quote the env
        count_mask(outcome)
    return outcome


# How bash (and the engine's runtime) say a fork failed for want of a process: EAGAIN.
_FORK_FAILED = re.compile(r"fork\b.*resource temporarily unavailable", re.IGNORECASE)


async def _unless_exhausted(outcome: VerificationOutcome, sandbox: Sandbox, since: float) -> VerificationOutcome:
    """A ``sandbox_error`` mask, unless the sandbox says its own limits left grading, begun at
    ``since``, no room (its ``exhausted``, asked only here): then a 0 (``RESOURCES_EXHAUSTED``). An
    agent that fills its container's memory with what no process owns (shared memory, tmpfs files)
    or holds every pid it may have gets grading's own shell killed or unable to fork; that was a mask."""
    exhausted = sandbox_option(sandbox, "exhausted", None)
    if outcome.mask_reason != "sandbox_error" or exhausted is None:
        return outcome
    try:
        reason = await exhausted(since=since, fork_failed=bool(_FORK_FAILED.search(outcome.detail)))
    except Exception as error:  # the sandbox cannot say: the mask stands
        LOGGER.warning("could not tell whether the sandbox was exhausted: %s", error)
        return outcome
    if reason is None:
        return outcome
    return _scored_0(outcome, RESOURCES_EXHAUSTED, f"the sandbox had no room left for grading: {reason}")


def _scored_0(outcome: VerificationOutcome, kind: str, why: str) -> VerificationOutcome:
    """The 0 (``kind``) a mask turns into once the sandbox showed it its own doing (``why``), logged."""
    LOGGER.warning("scored 0 (%s): %s", kind, why)
    return VerificationOutcome(reward=0.0, failure_kind=kind, detail=f"{why}; {outcome.detail}", stdout=outcome.stdout)


async def _unless_broken(outcome: VerificationOutcome, sandbox: Sandbox) -> VerificationOutcome:
    """A mask of ``_BREAKABLE`` from inside the sandbox, unless its changes against its image (its
    ``changes``, asked only here) show a program or user file grading needs changed
    (``broken_for_grading``): then a 0 (``GRADING_BROKEN``). An image without them masks; a root agent
    that deleted `timeout` or the verifier's user chose that mask for its wrong answer. An agent that
    installed a package over one of them (libc, a system user) and met a real fault of its sandbox is
    scored 0 too: that fault is one its own changes could have caused."""
    changes = sandbox_option(sandbox, "changes", None)
    inside = outcome.masked and outcome.mask_reason in _BREAKABLE and not outcome.detail.startswith(_CALL_FAILED)
    if not inside or changes is None:
        return outcome
    links_of = sandbox_option(sandbox, "links", None)
    try:
        changed = await changes()
        if changed is None:  # no longer running: nothing it changed speaks for the failure
            return outcome
        folders = system_folders(changed)
        broken = broken_for_grading(changed, await links_of(folders) if folders and links_of is not None else [])
    except Exception as error:  # the sandbox cannot say: the mask stands
        LOGGER.warning("could not read what changed in the sandbox: %s", error)
        return outcome
    if broken is None:
        return outcome
    return _scored_0(outcome, GRADING_BROKEN, f"{_BROKEN_BY_AGENT}: {broken}")


async def entrypoint_state(sandbox: Sandbox) -> Tuple[Optional[bool], str]:
    """Whether the image's ENTRYPOINT (run where the sandbox has its configuration on record) is
    still running, and what it printed; ``(None, "")`` where no ENTRYPOINT runs."""
    alive_of = sandbox_option(sandbox, "entrypoint_alive", None)
    output_of = sandbox_option(sandbox, "entrypoint_output", None)
    if alive_of is None or not sandbox_option(sandbox, "runs_entrypoint", False):
        return None, ""
    try:
        alive = alive_of()
        alive = await alive if inspect.isawaitable(alive) else alive
        output = output_of() if output_of is not None else ""
        output = await output if inspect.isawaitable(output) else output
    except Exception as error:  # the sandbox is lost: grading will mask it
        LOGGER.warning("the entrypoint's state could not be read: %s", error)
        return None, ""
    return (None if alive is None else bool(alive)), str(output or "")


async def run_collect_hooks(hooks: Sequence[CollectHook], sandbox: Sandbox) -> None:
    """``[[verifier.collect]]`` hooks, in order, before the verifier's folders are emptied.

    Best effort, as Harbor runs them: a failure, a timeout or a lost sandbox is logged, never fatal.
    A timeout below one second means none (Harbor passes ``int(timeout_sec)``). A hook on a Compose
    sidecar (a task loaded with ``check_runnable=False``) is refused: it must not run on ``main``.
    """
    for hook in hooks:
        if hook.service != "main":
            raise TaskError(
                f"the collect hook {hook.command!r} is on the Compose service {hook.service!r}, which this "
                "server does not start (it runs the task's main sandbox alone)"
            )
    for hook in hooks:
        seconds = int(hook.timeout_sec) or None
        try:  # stopped where it runs at its bound (bounded)
            result = await run_bounded(sandbox, hook.command, seconds, cwd=sandbox.workdir, user=hook.user)
        except Exception as error:  # any fault of the sandbox: hooks never decide the outcome
            LOGGER.warning("collect hook %r failed: %s", hook.command, error)
            continue
        if result.return_code != 0:
            LOGGER.warning("collect hook %r exited with %d: %s", hook.command, result.return_code, result.stderr[-500:])


# What grading's prepare prints of the disk when it fails (_grading.sh's fail).
_DISK_STATE = re.compile(r"the disk: (\d+) of (\d+) blocks free to users, (\d+) of (\d+) inodes free")


def disk_full(text: str) -> bool:
    """Whether a failure's text says the sandbox's disk is full: grading's account of the disk with no
    block free to users or no inode, where it gave one (the last such line: grading prints its own
    after what failed); else the kernel's ENOSPC in words (the engine's, a provider's). Where grading
    counted, the words never decide: a program's output is the agent's to write (red team 92: a root
    agent's `install` printed them for a disk_full mask; red team 93, a count of its own before
    grading's)."""
    counts = _DISK_STATE.findall(text)
    if not counts:
        return "no space left on device" in text.lower()
    blocks, total_blocks, inodes, total_inodes = (int(number) for number in counts[-1])  # grading's is last
    # A filesystem that counts no inodes (btrfs, vfat, 9p, FUSE, tmpfs with nr_inodes=0) says 0 of 0: not
    # full (red team 79: every forfeited grading there was masked).
    return (total_blocks > 0 and blocks == 0) or (total_inodes > 0 and inodes == 0)


def _mask_for_exit(return_code: int, output: str) -> VerificationOutcome:
    """The mask for a grading exec that stopped before its results (``grading``'s statuses), or the 0
    of a sandbox whose /dev/null code in it made something else (``NO_NULL_DEVICE``)."""
    output = output.strip()
    if return_code == NO_NULL_DEVICE:
        detail = f"{_BROKEN_BY_AGENT}: {output[-500:]}"
        return VerificationOutcome(reward=0.0, failure_kind=GRADING_BROKEN, detail=detail)
    if return_code == NO_VERIFIER_TOOL or (return_code in (126, 127) and "bash" in output):
        return masked("verifier_error", f"test.sh cannot start: {output[-500:] or 'the image has no bash'}")
    if return_code == UNKNOWN_USER or (return_code == 126 and "unable to find user" in output):
        return masked("verifier_error", f"test.sh cannot start: {output[-500:]}")
    if return_code == NO_PROVIDER_TOOL:
        return masked("provider_unavailable", f"the shim cannot be staged: {output[-500:]}")
    if return_code == STAGING_FAILED and disk_full(output):
        return masked(DISK_FULL, f"the sandbox's disk is full (exit {return_code}): {output[-500:]}")
    return masked("sandbox_error", f"grading failed in the sandbox (exit {return_code}): {output[-500:]}")


async def _grade(plan: VerificationPlan, sandbox: Sandbox, verifier: Optional[User]) -> VerificationOutcome:
    run_id = secrets.token_hex(8)
    python = plan.kind == PYTHON
    key = secrets.token_bytes(32) if python else None
    env, held, blanked = _grading_env(plan, sandbox)
    tests = sandbox.tests_dir.rstrip("/")
    by_admin = python or _is_admin(verifier, sandbox)
    handover = "" if _is_admin(verifier, sandbox) else (HANDOVER_READ if python else HANDOVER_OWN)
    steps = GradingSteps(
        steps=("prepare", "run", "finish"),
        kind="python" if python else "shell",
        tests_dir=tests,
        logs_dir=sandbox.logs_dir,
        stage=f".gym-stage-{run_id}",
        out_dir=f"{tests}/.gym-out-{run_id}",
        timeout_sec=plan.timeout_sec,
        kill_after_sec=KILL_AFTER_SEC,
        tail_bytes=STDOUT_TAIL_BYTES + REDACTION_MARGIN_BYTES,
        max_reward_bytes=MAX_REWARD_BYTES,
        max_report_chars=MAX_REPORT_CHARS,
        inputs=plan.inputs,
        agents=_agent_users(plan, sandbox) if plan.inputs else (),
        handover=handover,
        run_as="" if not handover else str(verifier),
        kill_strays=bool(sandbox_option(sandbox, "private_pids", False)),
        blanked=blanked,
        keep_tests=plan.keep_tests,
        workdir=sandbox.workdir,
    )
    private: Dict[str, bytes] = {}
    if held:
        private["deferred"] = b"\0".join(f"{name}={value}".encode() for name, value in held.items())
    if key is not None:
        private["key"] = key.hex().encode("ascii")
    image = getattr(sandbox, "image", None)
    image = image if isinstance(image, str) else None
    grading = _Grading(plan, sandbox, steps, env, verifier, by_admin, private, run_id, IMAGE_TAGS.get(image))
    result = await _collect(grading)
    if grading.handed_over:  # whatever came of it: a sandbox too broken for reclaim masks
        try:
            disk = await grading.reclaim()
        except _Stopped as stopped:
            return stopped.outcome
        if grading.forfeited and disk_full(disk):
            return masked(DISK_FULL, f"the sandbox's disk is full: {disk.strip()[-500:]}")
    if isinstance(result, VerificationOutcome):
        return result
    IMAGE_TAGS.learn(image, result.files.get(CACHE_TAG))
    return _outcome(plan, result, key)


async def _collect(grading: _Grading) -> Union[Collected, VerificationOutcome]:
    """The run's results, or the outcome of a run that returned none."""
    try:
        collected = await grading.piped() if isinstance(grading.sandbox, PipeSandbox) else None
        return collected if collected is not None else await grading.staged()  # no pipes, or no tar for them
    except _Stopped as stopped:
        return stopped.outcome
    except Exception as error:  # damaged, lost or oversized results: never scored
        # Damaged or oversized results came so from inside the sandbox; any other error is a call's.
        inside = isinstance(error, (CollectError, OutputTooLarge))
        why = f"{'' if inside else _CALL_FAILED}the results could not be copied out: {_describe(error)}"
        return grading.forfeit(why) if grading.handed_over else masked("sandbox_error", why)


def _agent_users(plan: VerificationPlan, sandbox: Sandbox) -> Tuple[str, ...]:
    """The agents' users: each the task names, and the sandbox's default user (its image's ``USER``) for
    an agent it names none for, where that is not root (red team 79: a first step that named none)."""
    default = sandbox_option(sandbox, "default_user", None)
    users = (default if user is None else user for user in plan.agent_users or (None,))
    return tuple(dict.fromkeys(str(user) for user in users if user is not None and not names_root(user)))


class _Stopped(Exception):
    """Grading ended without results: ``outcome`` says how (a mask, or the host's timeout)."""

    def __init__(self, outcome: VerificationOutcome) -> None:
        super().__init__(outcome.detail)
        self.outcome = outcome


@dataclass
class _Grading:
    """The exec or two of one run, with the staged files and results carried one of three ways:
    on the exec's stdin and stdout (``piped``), else through archive calls or an uploaded and a
    downloaded tar (``staged``). Each returns the results, or raises ``_Stopped`` (or
    ``CollectError`` for results that did not arrive whole)."""

    plan: VerificationPlan
    sandbox: Sandbox
    steps: GradingSteps
    env: Dict[str, str]
    verifier: Optional[User]
    by_admin: bool
    private: Dict[str, bytes]
    run_id: str
    cache_tag: Optional[str] = None  # the sandbox's interpreter, when a run on its image said
    handed_over: bool = False  # an exec ran as the verifier's user: reclaim must follow
    forfeited: bool = False  # and it did not end whole

    @property
    def run_limit(self) -> float:
        return _run_limit(self.plan)

    def archive(self, *, piped: bool) -> bytes:
        top = self.steps.tests_dir.rsplit("/", 1)[1]
        files = () if piped and self.plan.keep_tests else for_tag(self.plan.files, self.cache_tag)
        out = self.steps.out_dir.rsplit("/", 1)[1] if piped else None
        return run_archive(files, top=top, stage=self.steps.stage, private=self.private, out=out)

    async def piped(self) -> Optional[Collected]:
        """One exec that gets the staged files on stdin and prints the results to stdout (a task's own
        test.sh run as another user in an image without setpriv: prepare, then an exec of that user's,
        then ``reclaim``); ``None`` when the image has no tar for them.

        Grading prints ``DONE_MARKER`` after the results, its last act: where no code of the task
        could reach grading's shell, it stands for exit status 0. Elsewhere (code run as root, or as
        the user of that shell) the engine is asked: such code could stop the shell before it kills
        what the run started and removes the answers, and print the results and the marker itself,
        where the engine sees a killed shell and the sample is masked."""
        sandbox: Any = self.sandbox
        steps = replace(self.steps, piped=True)
        # Nothing of the task runs in the first exec as its admin: test.sh runs as the verifier's user
        # (switched by setpriv, or in an exec of its own after prepare alone), or the runner switches to it,
        # and a root shell's pipe and signals are out of that user's reach: unless that user
        # is uid 0 with a group (root:agent, 0:1000), which the runner switches to all the same (red
        # team, round 21; a name that hides uid 0 is refused by the runner).
        untouched = not names_root(self.verifier) and (not self.by_admin or steps.handover == HANDOVER_READ)
        first = await self._exec(
            lambda: sandbox.exec_piped(
                grading_command(steps),
                self.archive(piped=True),
                stdout_limit=MAX_RESULTS_BYTES,
                cwd="/",  # run enters the working directory itself (_grading.sh), after prepare
                env=self.env,
                user=sandbox.admin_user,
                timeout_s=self.run_limit,
                clean_shell=True,
                exit_marker=DONE_MARKER if untouched else b"",
            )
        )
        if first.return_code == NO_TAR:
            return None
        ran = first
        if first.return_code == PREPARED_ONLY and not self.by_admin:
            ran = await self._as_verifier(
                lambda: sandbox.exec_piped(
                    grading_command(replace(steps, steps=("run", "finish"))),
                    b"",
                    stdout_limit=MAX_RESULTS_BYTES,
                    cwd="/",
                    env=self.env,
                    user=self.verifier,
                    timeout_s=self.run_limit,
                    clean_shell=True,
                )
            )
        # Only a failure to start puts text on stdout (the engine's own message): the script's go to stderr.
        _check_exit(ran.return_code, ran.stdout[-4096:].decode(errors="replace") + ran.stderr)
        results = bytes(ran.stdout)
        return read_collected(results[: -len(DONE_MARKER)] if results.endswith(DONE_MARKER) else results)

    async def staged(self) -> Collected:
        """The staged files uploaded before the exec (or two), the results downloaded after it."""
        sandbox: Any = self.sandbox
        archives = isinstance(sandbox, ArchiveSandbox)
        tests = self.steps.tests_dir
        upload = "" if archives else f"{sandbox.tmp_dir}/nemo-gym-stage-{self.run_id}.tar"
        steps = replace(self.steps, archive=upload, out_tar="" if archives else f"{self.steps.out_dir}.tar")
        data = self.archive(piped=False)
        with tempfile.TemporaryDirectory(prefix="nemo-gym-verification-") as scratch:
            try:
                if archives:
                    await sandbox.put_archive(tests.rsplit("/", 1)[0] or "/", data)
                else:
                    local = Path(scratch) / "stage.tar"
                    local.write_bytes(data)
                    os.chmod(local, 0o600)
                    await sandbox.upload_file(str(local), upload)
            except Exception as error:  # any fault of the sandbox or its provider
                reason = DISK_FULL if disk_full(str(error)) else "sandbox_error"
                raise _Stopped(masked(reason, f"{_CALL_FAILED}staging /tests failed: {_describe(error)}")) from error
            ran = await self._exec(
                lambda: sandbox.exec(
                    grading_command(steps),
                    cwd="/",
                    env=self.env,
                    user=sandbox.admin_user,
                    timeout_s=self.run_limit,
                    clean_shell=True,
                )
            )
            if ran.return_code == PREPARED_ONLY and not self.by_admin:
                ran = await self._as_verifier(
                    lambda: sandbox.exec(
                        grading_command(replace(steps, steps=("run", "finish"), archive="")),
                        cwd="/",
                        env=self.env,
                        user=self.verifier,
                        timeout_s=self.run_limit,
                        clean_shell=True,
                    )
                )
            _check_exit(ran.return_code, ran.stdout + ran.stderr)
            if archives:
                return read_collected(await sandbox.get_archive(steps.out_dir, limit=MAX_RESULTS_BYTES))
            local_results = Path(scratch) / "results.tar"
            await sandbox.download_file(steps.out_tar, str(local_results))
            if local_results.stat().st_size > MAX_RESULTS_BYTES:
                raise CollectError(f"the results are larger than {MAX_RESULTS_BYTES} bytes")
            return read_collected(local_results.read_bytes())

    async def _as_verifier(self, call: Callable[[], Awaitable[Any]]) -> Any:
        """The exec of a task's own test.sh run as its user, with run and finish in it (Harbor's way:
        the folders are that user's). Its programs, the agent's in a coding step, share that user: they
        can kill its shell, write into its results pipe, trace it and give it any exit status. So any
        way it ends but its timeout reads as a run that wrote no reward (``forfeit``), once ``reclaim``
        (which must follow) has found the sandbox whole and its disk not full (red teams 77, 78)."""
        self.handed_over = True
        try:
            ran = await self._exec(call)
        except _Stopped as stopped:
            if stopped.outcome.failure_kind == VERIFIER_TIMEOUT:
                raise
            raise _Stopped(self.forfeit(stopped.outcome.detail)) from None
        if ran.return_code != 0:
            output = ran.stdout if isinstance(ran.stdout, str) else ran.stdout[-4096:].decode(errors="replace")
            raise _Stopped(self.forfeit(f"exit {ran.return_code}: {(output + ran.stderr).strip()[-500:]}"))
        return ran

    def forfeit(self, why: str) -> VerificationOutcome:
        """The outcome of a grading as the verifier's user that did not end whole: no reward (0)."""
        self.forfeited = True
        return VerificationOutcome(
            reward=0.0,
            failure_kind=MISSING_REWARD,
            detail=f"grading as {self.verifier} did not end whole ({why}): test.sh runs its programs as that "
            "user, who can stop it",
        )

    async def reclaim(self) -> str:
        """After the exec as the verifier's user (``_as_verifier``), whose programs could stop its
        finish or undo it, the admin kills what the run started, takes the folders back and removes
        what the run made of the kept inputs (red team 77: a daemon it left planted the next step's
        input; a folder it closed kept one; an out folder it pinned masked its 0). Returns its account
        of the disk."""
        steps = replace(self.steps, steps=("reclaim",), piped=False, archive="", out_tar="")
        ran = await self._exec(
            lambda: self.sandbox.exec(
                grading_command(steps),
                cwd="/",
                env=self.env,
                user=self.sandbox.admin_user,
                timeout_s=HOUSEKEEPING_TIMEOUT_SEC,
                clean_shell=True,
            )
        )
        _check_exit(ran.return_code, ran.stdout + ran.stderr)
        return str(ran.stdout)

    async def _exec(self, call: Callable[[], Awaitable[Any]]) -> Any:
        try:
            return await call()
        except ExecTimeout:
            # The in-sandbox timeout always fires first; the sandbox hung past it, so nothing came back.
            await _thaw_sandbox(self.sandbox, self.steps)
            raise _Stopped(
                VerificationOutcome(
                    reward=0.0, failure_kind=VERIFIER_TIMEOUT, detail="the sandbox did not return from grading in time"
                )
            ) from None
        except OutputTooLarge as error:  # the sandbox's own doing: a program of grading's printed it
            raise _Stopped(masked("sandbox_error", f"grading's output was too large: {_describe(error)}")) from error
        except Exception as error:
            raise _Stopped(masked("sandbox_error", f"{_CALL_FAILED}{_describe(error)}")) from error


# Grading reads the run's elapsed time from /proc/uptime, in centiseconds, each of its two readings cut
# down: a run killed at its 1 ms timeout can read as 0 s, so a timeout is judged to the tick.
ELAPSED_TICK_SEC = 0.01

THAW_TIMEOUT_SEC = 10  # one builtin's run; a sandbox that cannot do that in 10 s is lost anyway


async def _thaw_sandbox(sandbox: Any, steps: GradingSteps) -> None:
    """Continues what grading's kill_strays stopped, when the host gave up on grading before its
    finish did (a hang past every timeout): the agent's own processes, which shared mode keeps
    running (a service a later step needs), would stay stopped for good. Best effort: a sandbox
    that fails this was lost already, and the outcome says so."""
    if not steps.kill_strays:
        return
    try:
        await sandbox.exec("kill -CONT -1", user=sandbox.admin_user, timeout_s=THAW_TIMEOUT_SEC, clean_shell=True)
    except Exception as error:  # the outcome (a timeout) stands; this only says why processes stay stopped
        LOGGER.warning("could not continue the sandbox's stopped processes after grading timed out: %s", error)


def _check_exit(return_code: int, output: str) -> None:
    if return_code != 0:
        raise _Stopped(_mask_for_exit(return_code, output))


def _grading_env(plan: VerificationPlan, sandbox: Sandbox) -> Tuple[Dict[str, str], Dict[str, str], Tuple[str, ...]]:
    """The grading exec's environment, the variables held back from it, and those it sets empty.

    The exec carries the verifier's env, except what ``grading.deferred`` names: those are set
    empty (over whatever the sandbox's own environment holds, when it reports one) and travel in
    the staged files instead, for test.sh or the runner to restore.
    """
    inherited: Mapping[str, str] = sandbox_option(sandbox, "environment", None) or {}
    env = dict(plan.env)
    if sandbox.logs_dir != "/logs/verifier":
        env["VERIFIER_LOGS_DIR"] = sandbox.logs_dir
    held = {name: value for name, value in {**inherited, **env}.items() if deferred(name)}
    blanked = tuple(sorted(set(ALWAYS_BLANKED) | set(held)))
    exec_env = {name: value for name, value in env.items() if not deferred(name)}
    exec_env.update(dict.fromkeys(blanked, ""))
    return exec_env, held, blanked


def _unicode(name: str) -> str:
    """A name a verifier chose (a reward.json key), with any lone surrogate, which JSON allows and no
    UTF-8 writer takes, as U+FFFD: printed or sent on, it raised (red team 84)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return name.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return name


def _from_whole_character(data: bytes) -> bytes:
    """``data``, a tail cut by bytes, from its first whole UTF-8 character: the rest of one the cut split
    would read as U+FFFD, which starts no form of a secret, and the secret after it was shown (red team 84)."""
    start = 0
    while start < min(3, len(data)) and 0x80 <= data[start] < 0xC0:
        start += 1
    return data[start:]


def _outcome(plan: VerificationPlan, collected: Collected, key: Optional[bytes]) -> VerificationOutcome:
    """Scores what came back: a task's own test.sh by its reward files, as Harbor does; the shim by
    the runner's report (``reports``)."""
    elapsed = collected.elapsed_sec or 0.0
    timed_out = collected.status in (124, 137) and elapsed + ELAPSED_TICK_SEC >= plan.timeout_sec
    files: Dict[str, Optional[bytes]] = {}
    for name, kind in collected.kinds.items():
        files[name] = collected.files.get(name) if kind == "file" else UNREADABLE
    raw_stdout = collected.files.get("test-stdout.txt", b"")
    cut = len(raw_stdout) >= STDOUT_TAIL_BYTES + REDACTION_MARGIN_BYTES
    if cut:
        raw_stdout = _from_whole_character(raw_stdout)
    # Redacted before it is trimmed to its tail, so that no trimming can split a secret.
    stdout = plan.redact(raw_stdout.decode(errors="replace"), cut=cut)
    if len(stdout) > STDOUT_TAIL_BYTES:  # its tail, said to be one, from its first whole line
        tail = stdout[len(STDOUT_CUT_NOTE) - STDOUT_TAIL_BYTES :]
        whole = tail.find("\n") + 1
        stdout = STDOUT_CUT_NOTE + (tail[whole:] if 0 < whole < len(tail) else tail)
    if key is None:
        reward = reward_from_files(files, timed_out=timed_out)
    else:
        reports = find_reports(collected.files.get("report", b""), key)
        if len(reports) == 1 and reports[0].kind == REFUSED:  # the task's verifier environment is unsafe
            return masked("verifier_error", f"the verifier refused to grade: {reports[0].text}", stdout)
        reward, note = judge_report(reports, files, timed_out=timed_out)
        if note is not None:
            LOGGER.warning("a verifier's result was tampered with: %s", note)
            TAMPERING[note.split(":")[0]] += 1
    if reward.detail == TIMEOUT_DETAIL:
        reward = replace(reward, detail=f"{TIMEOUT_DETAIL} of {plan.timeout_sec:g} s")
    kept = {name: data for name, data in collected.files.items() if name in ("reward.json", "reward.txt")}
    kept.update(collected.outputs)
    detail = reward.detail
    if collected.skipped:
        note = f"{collected.skipped} other file(s) in /logs/verifier were not kept (too many, too large or oddly named)"
        detail = f"{detail}; {note}" if detail else note
    return VerificationOutcome(
        reward=reward.reward,
        metrics=reward.metrics,
        reward_components=reward.reward_components,
        failure_kind=reward.failure_kind,
        detail=detail,
        stdout=stdout,
        timed_out=timed_out,
        files={name: redact_bytes(data, plan.secrets) for name, data in kept.items()},
    )


def _describe(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def count_mask(outcome: VerificationOutcome) -> VerificationOutcome:
    # Masking is itself a reward hack when the agent can cause it (fill the disk, delete a tool):
    # every mask is counted and logged so that operators see a rate that moves.
    assert outcome.mask_reason is not None
    MASKS[outcome.mask_reason] += 1
    LOGGER.warning("masked a sample (%s): %s", outcome.mask_reason, outcome.detail)
    return outcome


def mask_counts() -> Dict[str, int]:
    """How many samples this process masked, by reason (also logged, one warning each)."""
    return dict(MASKS)


__all__ = [
    "DISK_FULL",
    "ENTRYPOINT_FAILED",
    "ENTRYPOINT_LOG",
    "GRADING_BROKEN",
    "HOST_MARGIN_SEC",
    "HOUSEKEEPING_TIMEOUT_SEC",
    "KILL_AFTER_SEC",
    "MASKS",
    "MAX_REPORT_CHARS",
    "MAX_RESULTS_BYTES",
    "MAX_REWARD_BYTES",
    "PYTHON",
    "REDACTION_MARGIN_BYTES",
    "RESOURCES_EXHAUSTED",
    "STDOUT_CUT_NOTE",
    "STDOUT_TAIL_BYTES",
    "TAMPERING",
    "TEST_SH",
    "VerificationOutcome",
    "VerificationPlan",
    "VerifierChoice",
    "choose_verifier",
    "count_mask",
    "disk_full",
    "entrypoint_state",
    "mask_counts",
    "masked",
    "plan_verification",
    "run_collect_hooks",
    "run_verification",
    "task_verifier",
    "verifier_user",
]
