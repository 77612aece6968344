"""Verification at scale: many rollouts, a bounded number at a time, one outcome each, in order.

A server that has finished a batch of rollouts hands ``verify_rollouts`` one ``Rollout`` per agent
sandbox (still running, as shared mode needs it): at most ``jobs`` verifications run at once, the
outcomes come back in the rollouts' order, and ``progress`` hears of each as it ends. Going past
one machine is the sandbox provider's business (NeMo Gym's providers start sandboxes on a
cluster); ``jobs`` bounds how many this process drives at once, whatever runs them.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
from dataclasses import dataclass
from typing import (
    TYPE_CHECKING,
    AsyncContextManager,
    Awaitable,
    Callable,
    Iterable,
    List,
    Optional,
    Sequence,
    TypeVar,
)

from nemo_gym.data.tasks.harbor.task import Task, TaskError

if TYPE_CHECKING:
    from nemo_gym.data.tasks.harbor.sandboxes.base import Sandbox
    from nemo_gym.data.tasks.harbor.separate import VerifierSandboxSpec
    from nemo_gym.data.tasks.harbor.verification import VerificationOutcome, VerificationPlan

LOGGER = logging.getLogger(__name__)
T = TypeVar("T")
R = TypeVar("R")
# The machine's cores: a verification's own work on this host (staging, reading results) is CPU,
# and a local sandbox runs on the same cores; a remote provider may take more (--jobs).
DEFAULT_JOBS = os.cpu_count() or 1

Progress = Callable[[int, int, int, R], None]


def default_jobs() -> int:
    """The default bound on verifications at once: the machine's cores."""
    return DEFAULT_JOBS


async def map_bounded(
    items: Sequence[T],
    work: Callable[[T], Awaitable[R]],
    *,
    jobs: int,
    progress: Optional[Progress[R]] = None,
) -> List[R]:
    """``work(item)`` for every item, at most ``jobs`` at once; the results in the items' order.

    ``progress(done, total, index, result)`` is called as each one ends (in the order they end);
    an exception it raises is logged, never raised (the results are kept).
    The first exception cancels the work still running and is raised: callers turn the faults they
    expect into results, so what escapes is a mistake that must be seen.
    """
    if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1:
        raise ValueError(f"jobs must be a whole number of at least 1, not {jobs!r}")
    total = len(items)
    results: List[Optional[R]] = [None] * total
    pending = iter(range(total))  # shared by the workers: each takes the next index
    done = 0

    async def worker() -> None:
        nonlocal done
        for index in pending:
            result = await work(items[index])
            results[index] = result
            done += 1
            if progress is not None:
                try:
                    progress(done, total, index, result)
                except Exception as error:  # a display's bug must not lose the results
                    LOGGER.warning("the progress callback raised %s: %s", type(error).__name__, error)

    workers = [asyncio.ensure_future(worker()) for _ in range(min(jobs, total))]
    try:
        await asyncio.gather(*workers)
    except BaseException:
        for running in workers:
            running.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        raise
    return results  # type: ignore[return-value]  # every slot is filled once gather returns


@dataclass(frozen=True)
class Rollout:
    """One rollout to verify: its plan (``plan_verification``) and the agent's sandbox, still
    running. A separate-mode plan also needs its ``task`` and ``open_verifier`` (the verifier's
    own sandbox: ``separate.run_separate_verification``'s), and stops the agent's sandbox."""

    plan: VerificationPlan
    sandbox: Sandbox
    task: Optional[Task] = None
    open_verifier: Optional[Callable[[VerifierSandboxSpec], AsyncContextManager[Sandbox]]] = None


async def verify_rollout(rollout: Rollout) -> VerificationOutcome:
    """One rollout's outcome, in shared or separate mode as its plan says. Any fault of its sandbox
    (an agent may cause one) masks this rollout alone; the task's mistakes raise. An artifact the
    verifier's sandbox cannot place as this agent left it (``LandingRefused``: the local sandbox's
    limit) masks it too: another agent may leave it otherwise, and one agent must not stop the batch
    (red team 84); nor score a 0 where every agent would (red team 86: a file artifact in /srv)."""
    from nemo_gym.data.tasks.harbor.artifacts import LandingRefused
    from nemo_gym.data.tasks.harbor.image_build import ImageBuildError
    from nemo_gym.data.tasks.harbor.sandboxes.base import SandboxNotStarted
    from nemo_gym.data.tasks.harbor.separate import run_separate_verification
    from nemo_gym.data.tasks.harbor.verification import count_mask, masked, run_verification

    try:
        if rollout.plan.mode != "separate":
            return await run_verification(rollout.plan, rollout.sandbox)
        assert rollout.task is not None and rollout.open_verifier is not None  # checked by verify_rollouts
        return await run_separate_verification(rollout.task, rollout.plan, rollout.sandbox, rollout.open_verifier)
    except LandingRefused as error:
        return count_mask(masked("sandbox_error", rollout.plan.redact(str(error), pieces=True)))
    except (TaskError, ImageBuildError, SandboxNotStarted):
        raise
    except Exception as error:  # this sandbox's fault, whatever its kind: this rollout's mask alone
        detail = rollout.plan.redact(f"the verification failed: {type(error).__name__}: {error}", pieces=True)
        return count_mask(masked("sandbox_error", detail))


async def verify_rollouts(
    rollouts: Iterable[Rollout],
    *,
    jobs: Optional[int] = None,
    progress: Optional[Progress[VerificationOutcome]] = None,
) -> List[VerificationOutcome]:
    """Every rollout's outcome, in order, at most ``jobs`` (default: the machine's cores) at once.

    Faults of a sandbox mask that rollout alone, as ``run_verification`` does. A rollout that
    cannot run at all (a separate-mode plan without its task or verifier sandbox) is refused with
    ``TaskError`` before any verification starts; a task's mistake found during a run (``TaskError``)
    stops the batch and is raised, since every rollout of that task would hit it (but what one agent
    left, ``verify_rollout`` says).
    """
    from nemo_gym.data.tasks.harbor.verification import check_arguments

    if progress is not None and (not callable(progress) or inspect.iscoroutinefunction(progress)):
        raise TypeError(
            "verify_rollouts(): progress must be a plain function, called as each rollout ends "
            f"(an async def one would never run), not {getattr(progress, '__name__', type(progress).__name__)}"
        )
    items = list(rollouts)
    for index, rollout in enumerate(items):
        if not isinstance(rollout, Rollout):
            raise TypeError(f"rollout {index}: must be a Rollout, not {type(rollout).__name__}")
        check_arguments(rollout.plan, rollout.sandbox, f"rollout {index}")
        if rollout.plan.mode == "separate" and (rollout.task is None or rollout.open_verifier is None):
            raise TaskError(
                f"rollout {index}: its verifier runs in a sandbox of its own: give its task and open_verifier"
            )
        if rollout.task is not None and not isinstance(rollout.task, (Task, str, os.PathLike)):
            raise TypeError(f"rollout {index}: task must be a Task (load_task's) or a task folder")
        if rollout.open_verifier is not None and not callable(rollout.open_verifier):
            raise TypeError(
                f"rollout {index}: open_verifier must be what opens the verifier's sandbox "
                f"(verifier_sandbox_opener's), not {type(rollout.open_verifier).__name__}"
            )
    return await map_bounded(items, verify_rollout, jobs=default_jobs() if jobs is None else jobs, progress=progress)


__all__ = ["DEFAULT_JOBS", "Rollout", "default_jobs", "map_bounded", "verify_rollout", "verify_rollouts"]
