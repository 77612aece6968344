"""Scripted healthcheck attempts on a fake clock, and the loop's cases: ``test_healthchecks`` runs them
through ``healthchecks.run_healthcheck``, ``harbor/test_harbor_healthchecks`` through Harbor's own loop."""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple, Union

from nemo_gym.data.tasks.harbor.sandboxes.base import ExecResult, ExecTimeout
from nemo_gym.data.tasks.harbor.task import Healthcheck

TIMEOUT = "timeout"  # a scripted attempt that outlives its timeout
Attempt = Union[int, str]


class Scripted:
    """A sandbox whose attempts end as ``script`` says (an exit status, or ``TIMEOUT``), each
    ``cost`` seconds on a fake clock that ``sleep`` advances too."""

    workdir = "/workspace"
    admin_user = "root"
    private_pids = True  # its processes are its own: a timed-out attempt's are reaped

    def __init__(self, script: Sequence[Attempt], cost: float = 0.0) -> None:
        self.script, self.cost, self.now = list(script), cost, 0.0
        self.calls: List[Tuple[str, Optional[float], Any]] = []
        self.housekeeping: List[str] = []  # the admin's clean-shell execs around a bounded attempt
        self.clock_stalls = False  # the admin's read of the clock times out (an agent starving it)
        self.sleeps: List[float] = []

    async def exec(
        self, command: str, *, timeout_s: Optional[float] = None, user: Any = None, clean_shell: bool = False, **_: Any
    ) -> ExecResult:
        if clean_shell:
            self.housekeeping.append(command)
            if self.clock_stalls:
                raise ExecTimeout("the command outlived its timeout")
            return ExecResult("7\n", "", 0)  # the clock, in ticks; a reap says nothing
        self.calls.append((command, timeout_s, user))
        self.now += self.cost
        outcome = self.script.pop(0)
        if outcome == TIMEOUT:
            raise ExecTimeout("the command outlived its timeout")
        return ExecResult("", "not yet" if outcome else "", int(outcome))

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def clock(self) -> float:
        return self.now


CHECK = Healthcheck("pg_isready", interval_sec=2.0, timeout_sec=3.0, start_period_sec=10.0, start_interval_sec=1.0)
# (attempts, seconds each takes, whether CHECK passes, the waits between attempts)
CASES = [
    ([0], 0.0, True, []),
    # In the start period (10 s) failures only wait start_interval_sec; after it, three in a row fail.
    ([1] * 10 + [0], 0.0, True, [1.0] * 10),
    ([1] * 10 + [1, 1, 1], 0.0, False, [1.0] * 10 + [2.0, 2.0]),
    # The first exit 0 ends the check, however many failures came before.
    ([1] * 10 + [1, 1, 0], 0.0, True, [1.0] * 10 + [2.0, 2.0]),
    # Whether an attempt is in the start period is decided as it starts: the second, from 6 s to
    # 11 s, is not counted.
    ([1] * 5, 5.0, False, [1.0, 1.0, 2.0, 2.0]),
]
# Where Gym differs from Harbor on purpose: an attempt that outlives timeout_sec is a failure, as
# Docker counts it (Harbor's exec raises, and the whole check fails at once).
TIMEOUT_CASES = [
    ([1] * 10 + [TIMEOUT, TIMEOUT, 1], 0.0, False, [1.0] * 10 + [2.0, 2.0]),
    ([TIMEOUT] * 10 + [0], 0.0, True, [1.0] * 10),
]
