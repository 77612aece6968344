"""The runner's private report to NeMo Gym's server, and how it takes only what it was given.

NeMo Gym's run step starts the runner as the sandbox's admin (root), with what no other process
can reach: ``NEMO_GYM_REPORT_FD``, a descriptor of a file in a folder only the admin can enter;
``NEMO_GYM_KEY_FILE``, the run's one-time key in that folder; ``NEMO_GYM_DEFERRED_ENV``, the task's
variables that would act on a process as it starts (``LD_PRELOAD`` and the like), held back from
every process grading starts as root; and ``NEMO_GYM_RUN_AS``, the verifier's user when that is
not root. Before any code of the task runs, ``take_over`` reads and deletes the key and the
deferred variables, reads the runner's own inputs (``verifier.py``, ``task_data.json``,
``response.json``, which only the admin can read), keeps the descriptor from every child, switches
to the verifier's user, makes the process non-dumpable (so that not even a process of that user,
not even one ``verify`` starts, can read its memory or reach its descriptor through ``/proc``),
and only then hands the deferred variables to ``verify``'s children.

The report, the ``reward.json`` text the runner wrote (or why it wrote none), carries an HMAC under
the key. Reading it teaches nothing (the key never leaves this process), so it cannot be rewritten
into another score; the host believes it over the file, which a process of the verifier's user
could rewrite. Under stock Harbor none of this is set and the runner writes ``reward.json`` alone.
Standard library only.
"""

from __future__ import annotations

import os
import sys

from _gym_runner import VerifierError

TYPE_CHECKING = False  # typing is not imported at run time (start-up time is benchmarked)
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional, Tuple

REPORT_FD, KEY_FILE = "NEMO_GYM_REPORT_FD", "NEMO_GYM_KEY_FILE"
DEFERRED_ENV, RUN_AS = "NEMO_GYM_DEFERRED_ENV", "NEMO_GYM_RUN_AS"
# The report line the host parses (nemo_gym/data/tasks/harbor/reports.py; keep in sync).
REPORT_PREFIX = "nemo-gym-report/2"
INPUTS = ("verifier.py", "task_data.json", "response.json")
_MAX_DETAIL = 2000  # an error's message, on one bounded line
_PR_SET_DUMPABLE = 4  # <linux/prctl.h>


def _sha256() -> Any:
    for module in ("_sha2", "_sha256"):  # Python 3.12+, then 3.8-3.11: a fraction of a millisecond
        try:
            return __import__(module).sha256
        except ImportError:
            pass
    import hashlib  # loads OpenSSL: several milliseconds, only where the above are missing

    return hashlib.sha256


class Channel:
    """The report line to the host: ``send`` it once, at the end.

    HMAC-SHA256 (RFC 2104) without ``hmac``, which would load OpenSSL at every start. Its two keyed
    states are made here, before any code of the task runs: ``send`` imports nothing, so no module
    that code planted can run inside the runner after ``verify``.
    """

    def __init__(self, descriptor: int, key: bytes) -> None:
        sha256 = _sha256()
        block = 64
        if len(key) > block:
            key = sha256(key).digest()
        key = key.ljust(block, b"\0")
        self.descriptor = descriptor
        self._inner = sha256(bytes(byte ^ 0x36 for byte in key))
        self._outer = sha256(bytes(byte ^ 0x5C for byte in key))

    def mac(self, message: bytes) -> str:
        inner, outer = self._inner.copy(), self._outer.copy()
        inner.update(message)
        outer.update(inner.digest())
        return str(outer.hexdigest())

    def send(self, kind: str, text: str) -> None:
        """``kind`` is ``reward`` (``text`` is reward.json's, exactly), ``error`` or ``refused``."""
        if kind != "reward":
            text = " ".join(text.split())[:_MAX_DETAIL]
        body = f"{kind} {text}".encode("utf-8", "surrogateescape")
        line = f"{REPORT_PREFIX} {self.mac(body)} ".encode("ascii") + body + b"\n"
        try:
            while line:
                line = line[os.write(self.descriptor, line) :]
        except OSError as error:  # nothing else can reach the host: say so where the author looks
            print(f"verifier error: the report to the server failed ({error})")


def _read_and_remove(path: str, limit: int) -> bytes:
    handle = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    try:
        data = os.read(handle, limit + 1)
    finally:
        os.close(handle)
    os.unlink(path)
    if len(data) > limit:
        raise ValueError(f"{path} is larger than {limit} bytes")
    return data


def take_over(here: str) -> Tuple[Channel, Dict[str, bytes]]:
    """The server's channel and the runner's inputs, with this process as safe as it can be made
    before any code of the task runs (see the module's docstring). ``VerifierError`` when the
    server's setup is unusable."""
    try:
        descriptor = int(os.environ.pop(REPORT_FD))
        os.set_inheritable(descriptor, False)
        key = bytes.fromhex(_read_and_remove(os.environ.pop(KEY_FILE), 256).decode("ascii").strip())
        deferred_file = os.environ.pop(DEFERRED_ENV, "")
        deferred = _read_and_remove(deferred_file, 1 << 20) if deferred_file else b""
        inputs: Dict[str, bytes] = {}
        for name in INPUTS:
            try:
                with open(os.path.join(here, name), "rb") as handle:
                    inputs[name] = handle.read()
            except FileNotFoundError:
                pass
    except (KeyError, OSError, ValueError) as error:
        raise VerifierError(f"the server's report channel is unusable ({error})") from None
    user = os.environ.pop(RUN_AS, "")
    if user:
        become(user)
    seal()
    for entry in deferred.split(b"\0"):
        variable, _, value = entry.partition(b"=")
        if variable:
            os.environb[variable] = value  # for what verify starts; this process has already started
    channel = Channel(descriptor, key)
    if os.geteuid() == 0:
        # Code that a root verify runs can write any file, /tests and the standard library included:
        # whatever the runner needs once verify has returned is imported now, before it runs. So is
        # what it needs once verifier.py has run, to await an async verify: _contextvars is a file
        # (in lib-dynload; _thread is built in), about 0.2 ms; _gym_await's source is read (a few
        # hundredths of a millisecond) and compiled only when it is needed
        # (_gym_runner_rare._load_await), where importing it would cost every root run 1-3 ms.
        import _contextvars  # noqa: F401
        import json  # noqa: F401
        import linecache  # noqa: F401
        import traceback  # noqa: F401

        import _gym_runner_rare

        name = _gym_runner_rare.AWAIT_FILE
        try:
            with open(os.path.join(here, name), "rb") as handle:
                inputs[name] = handle.read()
        except OSError as error:
            raise VerifierError(f"cannot read the runner's {name} ({error})") from None
    return channel, inputs


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
    except ImportError:  # built without ctypes: the key and descriptor are then as safe as /proc makes them
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


def _writable_by_others(path: str, own_uid: int) -> Optional[str]:
    """Why another user than root and ``own_uid`` could change ``path``, or ``None``."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    if status.st_uid not in (0, own_uid):
        return f"{path} belongs to uid {status.st_uid}"
    if status.st_mode & 0o022:
        return f"{path} is writable by its group or by everyone"
    return None


def unsafe_site() -> List[str]:
    """The site-packages folders (and ``.pth`` files) of this interpreter that a user other than root
    and the verifier's own could change: code there would run inside this process (``site`` has not
    run yet: test.sh starts Python with ``-S``)."""
    import site

    uid = os.geteuid()
    prefixes = {sys.prefix, sys.exec_prefix, getattr(sys, "base_prefix", sys.prefix)}
    executable_dir = os.path.dirname(os.path.abspath(sys.executable))
    for folder in (executable_dir, os.path.dirname(executable_dir)):  # a venv's pyvenv.cfg
        if os.path.isfile(os.path.join(folder, "pyvenv.cfg")):
            prefixes.add(os.path.dirname(executable_dir))
    problems = []
    for folder in site.getsitepackages(sorted(prefixes)):
        if not os.path.isdir(folder):
            continue
        for path in [folder, os.path.dirname(folder)] + [
            os.path.join(folder, name) for name in os.listdir(folder) if name.endswith(".pth")
        ]:
            problem = _writable_by_others(path, uid)
            if problem:
                problems.append(problem)
    return problems


def safe_python_path(cwd: str) -> Tuple[List[str], List[str]]:
    """The task's ``PYTHONPATH`` entries the runner may append (absolute, outside the working
    directory, changeable by root and the verifier's user alone), and why the others were dropped."""
    uid = os.geteuid()
    root = os.path.realpath(cwd)
    kept, dropped = [], []
    for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if not entry:
            continue
        real = os.path.realpath(entry)
        problem = None
        if not os.path.isabs(entry):
            problem = f"PYTHONPATH entry {entry!r} is relative: it would resolve in the working directory"
        elif real == root or real.startswith(root.rstrip("/") + "/"):
            problem = f"PYTHONPATH entry {entry!r} is inside the working directory"
        else:
            problem = _writable_by_others(real, uid)
        if problem:
            dropped.append(problem)
        elif entry not in kept:
            kept.append(entry)
    return kept, dropped
