"""Task healthchecks: ``[environment.healthcheck]`` once the agent's sandbox has started (the seed
says: at every seed), and a step's ``[steps.healthcheck]`` after that step's setup, before its agent.

The loop is Harbor's (``BaseEnvironment.run_healthcheck``), which follows Docker's HEALTHCHECK: the
command runs until it exits 0. A failure during the first ``start_period_sec`` is not counted and
waits ``start_interval_sec``; after that, ``retries`` failures in a row fail the check, each followed
by ``interval_sec`` of waiting. Whether an attempt falls in the start period is decided as it starts.

The command runs in the sandbox's working directory with its environment, as the user Harbor has as
the default then: the sandbox's own for ``[environment.healthcheck]`` before any agent has run, and
the step's agent for a step's (``Task.agent_user_of``), which follows an agent's step. Where
``[environment.healthcheck]`` meets the agent's files (``gym-harbor verify`` starts the sandbox with
the workspace the agent left) it runs as ``[agent].user`` too (``for_task.open_task_sandbox``): a
check as root would run the agent's module or program as root (red team 35). So a healthcheck never
runs with more rights than the agent whose files it may meet.

Where this differs from Harbor, on purpose: an attempt that outlives ``timeout_sec`` counts as a
failure, as Docker counts it (Harbor's exec raises there, ending the whole check at once), and is
stopped where it runs (``bounded``), as Docker stops it; and
``timeout_sec`` is used as written, where Harbor truncates it to whole seconds (so that below 1 it
sets no bound). 0 sets no bound in both.
"""

from __future__ import annotations

import asyncio
import time
from typing import Awaitable, Callable, Optional, Tuple

from nemo_gym.data.tasks.harbor.bounded import run_bounded
from nemo_gym.data.tasks.harbor.sandboxes.base import ExecTimeout, Sandbox, SandboxError, User
from nemo_gym.data.tasks.harbor.task import Healthcheck

OUTPUT_TAIL_CHARS = 500  # of the last attempt's output, in the error


class HealthcheckError(SandboxError):
    """The sandbox never reported healthy: the task's service did not come up, or (a step's check)
    an agent's step left it broken. Harbor raises its own ``HealthcheckError`` there."""


def after_failure(check: Healthcheck, in_start_period: bool, failures: int) -> Tuple[int, Optional[float]]:
    """After a failed attempt: the failures counted in a row, and the seconds to wait before the
    next attempt, or ``None`` when the check has failed (``retries`` of them counted; a failure in
    the start period never counts)."""
    if in_start_period:
        return failures, check.start_interval_sec
    failures += 1
    return failures, None if failures >= check.retries else check.interval_sec


async def run_healthcheck(
    sandbox: Sandbox,
    check: Healthcheck,
    *,
    user: Optional[User] = None,
    key: str = "[environment.healthcheck]",
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> None:
    """Runs ``check`` in ``sandbox`` as ``user`` (``None``: the sandbox's default) until it passes;
    ``HealthcheckError`` naming ``key``, the command and its last attempt when it fails. A fault of
    the sandbox itself propagates as the ``SandboxError`` it is."""
    start_period_ends = clock() + check.start_period_sec
    failures = 0
    while True:
        in_start_period = clock() < start_period_ends
        try:
            # Stopped where it runs at its bound, as Docker's own healthcheck stops it (bounded).
            result = await run_bounded(sandbox, check.command, check.timeout_sec, user=user)
        except ExecTimeout:
            last = f"outlived its timeout_sec ({check.timeout_sec:g} s)"
        else:
            if result.return_code == 0:
                return
            output = (result.stdout + result.stderr).strip()[-OUTPUT_TAIL_CHARS:]
            last = f"exited with {result.return_code}" + (f": {output}" if output else "")
        failures, wait = after_failure(check, in_start_period, failures)
        if wait is None:
            raise HealthcheckError(
                f"{key} failed {failures} time(s) in a row after its start period: {check.command!r}; "
                f"its last attempt {last}"
            )
        await sleep(wait)


__all__ = ["OUTPUT_TAIL_CHARS", "HealthcheckError", "after_failure", "run_healthcheck"]
