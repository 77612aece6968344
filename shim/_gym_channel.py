"""The runner's private report to NeMo Gym's server, and its switch to the verifier's user.

NeMo Gym's run step starts the runner as the sandbox's admin user (root) with three things no other
user can reach: ``NEMO_GYM_REPORT_FD``, a descriptor of a file in a folder only the admin can
enter; ``NEMO_GYM_NONCE_FILE``, a file in that folder holding the run's nonce; and, when
``[verifier].user`` names someone else, ``NEMO_GYM_RUN_AS``. Before any code of the task runs, ``open_channel`` reads
and deletes the nonce and keeps the descriptor from every child; ``become`` switches to the
verifier's user; ``seal`` makes the process non-dumpable, so that no other process, not even one
``verify`` starts, can read the nonce or reach the descriptor through ``/proc``. The report (the
``reward.json`` text the runner wrote, or why it wrote none) carries the nonce, and the host
believes it over the file, which any process of the verifier's user could rewrite.

Under stock Harbor none of this is set: the runner writes ``reward.json`` and nothing else.
Standard library only.
"""

from __future__ import annotations

import os

from _gym_runner import VerifierError

TYPE_CHECKING = False  # typing is not imported at run time (start-up time is benchmarked)
if TYPE_CHECKING:
    from typing import Any, Optional

REPORT_FD, NONCE_FILE, RUN_AS = "NEMO_GYM_REPORT_FD", "NEMO_GYM_NONCE_FILE", "NEMO_GYM_RUN_AS"
# The line format the host parses (nemo_gym/data/tasks/harbor/reports.py; keep in sync).
REPORT_PREFIX = "nemo-gym-report/1"
_MAX_DETAIL = 2000  # a report is one bounded line, whatever the error message holds
_PR_SET_DUMPABLE = 4  # <linux/prctl.h>


class Channel:
    """The report line to the host: ``send`` it once, at the end."""

    def __init__(self, descriptor: int, nonce: str) -> None:
        self.descriptor, self.nonce = descriptor, nonce

    def send(self, kind: str, text: str) -> None:
        detail = " ".join(text.split())[:_MAX_DETAIL]
        line = f"{REPORT_PREFIX} {self.nonce} {kind} {detail}\n".encode("utf-8", "backslashreplace")
        try:
            os.write(self.descriptor, line)
        except OSError as error:  # nothing else can reach the host: say so where the author looks
            print(f"verifier error: the report to the server failed ({error})")


def open_channel() -> Optional[Channel]:
    """The channel when NeMo Gym's server opened one, else ``None``; the nonce file is gone after."""
    number = os.environ.pop(REPORT_FD, None)
    if number is None:
        return None
    try:
        descriptor = int(number)
        os.set_inheritable(descriptor, False)
        path = os.environ.pop(NONCE_FILE)
        handle = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        try:
            nonce = os.read(handle, 256).decode("ascii").strip()
        finally:
            os.close(handle)
        os.unlink(path)
    except (KeyError, OSError, ValueError) as error:
        raise VerifierError(f"the server's report channel is unusable ({error})") from None
    if not nonce.isalnum():
        raise VerifierError("the server's report channel is unusable (a malformed nonce)")
    return Channel(descriptor, nonce)


def become(user: str) -> None:
    """Switches to ``user`` (``name``, ``uid``, ``name:group`` or ``uid:gid``) as Docker's exec would:
    the passwd entry's uid, group and supplementary groups; a uid without an entry gets group 0.
    ``HOME`` follows the user unless the task set its own."""
    import grp
    import pwd

    name, _, group = user.partition(":")
    try:
        entry = pwd.getpwuid(int(name)) if name.isdigit() else pwd.getpwnam(name)
    except KeyError:
        if not name.isdigit():
            raise VerifierError(f"the sandbox has no user named {name!r} ([verifier].user)") from None
        entry = None
    uid = int(name) if entry is None else entry.pw_uid
    gid = 0 if entry is None else entry.pw_gid
    try:
        if group:
            gid = int(group) if group.isdigit() else grp.getgrnam(group).gr_gid
        groups = [gid] if entry is None else os.getgrouplist(entry.pw_name, gid)
        home = os.environ.get("HOME")
        if entry is not None and (not home or home == pwd.getpwuid(os.getuid()).pw_dir):
            os.environ["HOME"] = entry.pw_dir
        os.setgroups(groups)
        os.setgid(gid)
        os.setuid(uid)
    except (KeyError, OSError) as error:
        raise VerifierError(f"cannot run as [verifier].user {user!r} ({error})") from None


def seal() -> None:
    """Makes this process non-dumpable: ``/proc/<pid>/mem``, ``fd`` and ``environ`` and ``ptrace``
    are then closed to every process without ``CAP_SYS_PTRACE``, its own user's included.

    ``ctypes`` would cost several milliseconds of start-up; its C core alone costs a fraction of one.
    """
    try:
        import _ctypes
    except ImportError:  # built without ctypes: the nonce and descriptor are then as safe as /proc makes them
        return
    core: Any = _ctypes  # private C API: typed loosely on purpose

    class _Int(core._SimpleCData):  # type: ignore[misc]
        _type_ = "i"

    class _Function(core.CFuncPtr):  # type: ignore[misc]
        _flags_ = core.FUNCFLAG_CDECL
        _restype_ = _Int

    class _Process:
        _handle = core.dlopen(None, getattr(core, "RTLD_LOCAL", 0))

    try:
        _Function(("prctl", _Process()))(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (AttributeError, OSError):  # not Linux
        pass
