"""A task's own commands outside grading (``[[verifier.collect]]`` hooks, healthcheck attempts),
stopped where they run when they outlive their bound.

The engine cannot stop an exec the host gave up waiting for: a hook left streaming the agent's
``/dev/zero`` link, or blocked on its FIFO, ran on, and the sandbox's next grading waited for its
exec until the host's limit masked it, a wrong answer's 0 with it (red team 43). So the command runs
under the sandbox's own ``timeout``, and the host waits a little longer than that bound. A command
of the agent's user can still defeat it (the agent's process traces ``timeout`` and drops its alarm,
red team 44): when the host's wait runs out, a root exec kills every process but root's that started
since the command did, as grading's finish kills its strays (``_strays.sh``).
"""

from __future__ import annotations

import shlex
from typing import Optional

from nemo_gym.data.tasks.harbor.grading import START_TICKS_COMMAND, reap_command
from nemo_gym.data.tasks.harbor.sandboxes.base import ExecResult, ExecTimeout, Sandbox, User, sandbox_option

# The grace between SIGTERM and SIGKILL at the bound (as grading's timeout gives test.sh).
BOUND_KILL_AFTER_SEC = 5
# How much longer than the bound (and its grace) the host waits: an engine's exec returns late.
HOST_MARGIN_SEC = 5
# coreutils timeout's exit status when the bound fired (a command killed at the grace's end gives 137).
BOUND_FIRED = 124
# For the root execs around the command: reading a clock, killing strays.
HOUSEKEEPING_SEC = 30


def bounded(command: str, seconds: float) -> str:
    """``command`` (a ``bash -c`` string, as Harbor runs a hook or a check) under the sandbox's
    ``timeout``: its process group gets SIGTERM after ``seconds``, SIGKILL ``BOUND_KILL_AFTER_SEC``
    later, and the status is ``BOUND_FIRED``. ``timeout`` and ``bash`` are the system's (``/usr/bin``,
    ``/bin``), never found on a PATH that may name the agent's folders (a hook may run as root, and
    on the local sandbox as the host's user). Without them the command runs as given."""
    quoted = shlex.quote(command)
    return (
        "for shell in /bin/bash /usr/bin/bash bash; do [ $shell = bash ] || [ -x $shell ] && break; done; "
        "for bound in /usr/bin/timeout /bin/timeout; do "
        f"[ -x $bound ] && exec $bound -k {BOUND_KILL_AFTER_SEC} {seconds:g} $shell -c {quoted}; done; "
        f"exec $shell -c {quoted}"
    )


async def run_bounded(
    sandbox: Sandbox, command: str, seconds: Optional[float], *, user: Optional[User], cwd: Optional[str] = None
) -> ExecResult:
    """Runs ``command`` as ``user``, stopped in the sandbox when it outlives ``seconds`` (``None`` or
    0: no bound); ``ExecTimeout`` when it did (its status ``BOUND_FIRED``, or the host's wait ran
    out, after which its processes are killed), or when the clock the killing needs could not be
    read first (the command is not run then). Faults of the sandbox propagate."""
    if not seconds:
        return await sandbox.exec(command, cwd=cwd, user=user)
    # Where the sandbox's processes are not its own (a provider's word, the local one without
    # bubblewrap), killing by the clock could reach the host's: the bound alone stops the command.
    since = None
    if sandbox_option(sandbox, "private_pids", False):
        since = await _start_ticks(sandbox)
        if since is None:  # unreaped, the command could hold the sandbox (an agent that starves the read)
            raise ExecTimeout(
                f"the sandbox did not read its clock within {HOUSEKEEPING_SEC} s; the command did not run"
            )
    try:
        result = await sandbox.exec(
            bounded(command, seconds),
            cwd=cwd,
            user=user,
            timeout_s=seconds + BOUND_KILL_AFTER_SEC + HOST_MARGIN_SEC,
        )
    except ExecTimeout:
        if since is not None:
            await _reap(sandbox, since)
        raise ExecTimeout(
            f"the command outlived {seconds:g} s, and its bound in the sandbox failed to stop it"
        ) from None
    if result.return_code == BOUND_FIRED:
        raise ExecTimeout(f"the command outlived {seconds:g} s")
    return result


async def _start_ticks(sandbox: Sandbox) -> Optional[int]:
    """The sandbox's clock as a process starts now, read as the admin (a process of the agent's user
    could be traced, and made to say another), or ``None`` when it cannot be read in time."""
    try:
        said = await sandbox.exec(
            START_TICKS_COMMAND, cwd="/", user=sandbox.admin_user, timeout_s=HOUSEKEEPING_SEC, clean_shell=True
        )
    except ExecTimeout:
        return None
    text = said.stdout.strip()
    return int(text) if said.return_code == 0 and text.isdigit() else None


async def _reap(sandbox: Sandbox, since: int) -> None:
    try:
        await sandbox.exec(
            reap_command(since), cwd="/", user=sandbox.admin_user, timeout_s=HOUSEKEEPING_SEC, clean_shell=True
        )
    except ExecTimeout:
        pass  # the next grading waits for what is left, as before


__all__ = ["BOUND_FIRED", "BOUND_KILL_AFTER_SEC", "HOST_MARGIN_SEC", "bounded", "run_bounded"]
