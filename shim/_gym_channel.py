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

import os
import sys

from _gym_runner import VerifierError, cached_name, others_may_write, writable_by_others

TYPE_CHECKING = False  # typing is not imported at run time (start-up time is benchmarked)
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional, Tuple

REPORT_FD, KEY_FILE = "NEMO_GYM_REPORT_FD", "NEMO_GYM_KEY_FILE"
DEFERRED_ENV, RUN_AS = "NEMO_GYM_DEFERRED_ENV", "NEMO_GYM_RUN_AS"
# The report line the host parses (nemo_gym/data/tasks/harbor/reports.py; keep in sync).
REPORT_PREFIX = "nemo-gym-report/2"
INPUTS = ("verifier.py", "task_data.json", "response.json")
# The runner's modules it may load once code of the task has run (keep in sync with _gym_runner.py).
LATE_MODULES = ("_gym_runner_rare.py", "_gym_await.py")
# Every module those import, at their top or in the code the runner runs before it reports.
LATE_IMPORTS = ("_contextvars", "_json", "_thread")
_MAX_MESSAGE = (1 << 20) + 8192  # a report's text: reward.json's at most (the host's cap), and its kind
_MAX_DETAIL = 2000  # an error's message, on one bounded line
_PR_SET_DUMPABLE = 4  # <linux/prctl.h>
_FALLOC_FL_KEEP_SIZE = 1  # <linux/falloc.h>
# Disk set aside for the report and grading's finish (see ``reserve``): the output's tail it copies
# (80 KB), the report, its meta and sums file, and, without piped results, their tar.
RESERVE_BYTES = 256 * 1024
# The files finish writes into the out folder (_grading.sh; keep in sync), with the bytes set aside for
# each: the meta file and the checksums (a line for each of up to 105 files) write into their own.
FINISH_FILES = (("meta", 4096), (".sums", 64 * 1024), ("test-stdout.txt", 0), ("reward.json", 0), ("reward.txt", 0))
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
CACHE_TAG_FILE = "cache_tag"  # in the results (nemo_gym/data/tasks/harbor/collected.py; keep in sync)


def _sha256() -> "Any":
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

    def __init__(self, descriptor: "int", key: "bytes") -> None:
        sha256 = _sha256()
        block = 64
        if len(key) > block:
            key = sha256(key).digest()
        key = key.ljust(block, b"\0")
        self.descriptor = descriptor
        self._inner = sha256(bytes(byte ^ 0x36 for byte in key))
        self._outer = sha256(bytes(byte ^ 0x5C for byte in key))

    def mac(self, message: "bytes") -> "str":
        inner, outer = self._inner.copy(), self._outer.copy()
        inner.update(message)
        outer.update(inner.digest())
        return str(outer.hexdigest())

    def send(self, kind: "str", text: "str") -> None:
        """``kind`` is ``reward`` or ``unwritten`` (``text`` is reward.json's, exactly), ``error`` or
        ``refused``."""
        body = f"{kind} {text}".encode("utf-8", "surrogateescape")
        line = f"{REPORT_PREFIX} {self.mac(body)} ".encode("ascii") + body + b"\n"
        try:
            while line:
                line = line[os.write(self.descriptor, line) :]
        except OSError as error:  # nothing else can reach the host: say so where the author looks
            print(f"verifier error: the report to the server failed ({error})")


def _read_and_remove(path: "str", limit: "int") -> "bytes":
    handle = os.open(path, os.O_RDONLY | _NOFOLLOW)
    try:
        data = os.read(handle, limit + 1)
    finally:
        os.close(handle)
    os.unlink(path)
    if len(data) > limit:
        raise ValueError(f"{path} is larger than {limit} bytes")
    return data


class Reporter:
    """The runner's end of the channel: the report goes, once, to a key holder (``hold_key``), a
    process of its own that alone ever holds the run's key and the report's descriptor.

    So nothing the runner imports or runs once it has reported can forge a report, even as root:
    that code could read this process's memory, never the key holder's (sealed, and no sandbox
    gives its root ``CAP_SYS_PTRACE``). What the runner needs between the first code of the task
    and the report is in memory before that code runs (see ``take_over``)."""

    def __init__(self, pipe: "int", holder: "int", ready: "int") -> None:
        self.pipe, self.holder, self._ready = pipe, holder, ready
        # A child verify forks (a multiprocessing worker) is no runner: it must neither report nor
        # keep the pipe open, or the key holder would wait on it to the timeout.
        os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        for name in ("pipe", "_ready"):
            descriptor = getattr(self, name)
            if descriptor >= 0:
                setattr(self, name, -1)
                try:
                    os.close(descriptor)
                except OSError:
                    pass

    def confirm(self) -> None:
        """Waits until the key holder has read and removed the run's key: call it before any code of
        the task runs (which could read the key file as root). ``VerifierError`` when it could not."""
        if self._ready < 0:
            return
        ready, self._ready = self._ready, -1
        said = os.read(ready, 1024)
        os.close(ready)
        if said != b"ready":
            pipe, self.pipe = self.pipe, -1
            os.close(pipe)
            os.waitpid(self.holder, 0)
            problem = said[1:].decode("utf-8", "replace") or "the key holder did not start"
            raise VerifierError(f"the server's report channel is unusable ({problem})")

    def send(self, kind: "str", text: "str") -> None:
        """``kind`` is ``reward`` (``text`` is reward.json's, exactly), ``unwritten`` (the text
        reward.json could not be written with), ``error`` or ``refused``; the first call reports, and
        returns once the key holder has written the line (``serve`` has confirmed it before it
        returned this reporter)."""
        if self.pipe < 0:
            return
        pipe, self.pipe = self.pipe, -1
        if kind not in ("reward", "unwritten"):  # those carry reward.json's text, exactly
            text = " ".join(text.split())[:_MAX_DETAIL]
        message = f"{kind} {text}".encode("utf-8", "surrogateescape")
        try:
            while message:
                message = message[os.write(pipe, message) :]
        except OSError as error:
            print(f"verifier error: the report to the server failed ({error})")
        finally:
            os.close(pipe)
            os.waitpid(self.holder, 0)


def hold_key(descriptor: "int", key_file: "str") -> "Reporter":
    """Forks the key holder: it reads and removes the run's key, tells the runner it has it, leaves
    the interpreter's cache tag for the host (``note_cache_tag``), waits for the one report, writes
    it with its HMAC to ``descriptor`` and exits. The runner closes ``descriptor`` and never reads
    the key; it goes on at once, while the holder starts, and waits for it in ``Reporter.confirm``."""
    ready_read, ready_write = os.pipe()
    report_read, report_write = os.pipe()
    holder = os.fork()
    if holder == 0:  # the key holder: nothing of the task ever runs here
        status = 0
        try:
            os.close(ready_read)
            os.close(report_write)
            try:
                key = bytes.fromhex(_read_and_remove(key_file, 256).decode("ascii").strip())
                channel = Channel(descriptor, key)
                reserve(descriptor, os.path.dirname(key_file))
            except (OSError, ValueError) as error:
                os.write(ready_write, f"!{error}".encode("utf-8", "replace")[:1000])
                raise
            os.write(ready_write, b"ready")
            os.close(ready_write)
            note_cache_tag(os.path.dirname(key_file))  # here, off the runner's way
            chunks = []
            size = 0
            while size <= _MAX_MESSAGE:
                chunk = os.read(report_read, 1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            message = b"".join(chunks)
            if message and size <= _MAX_MESSAGE:  # nothing, when the runner died before reporting
                kind, _, text = message.decode("utf-8", "surrogateescape").partition(" ")
                channel.send(kind, text)
        except BaseException:
            status = 1
        finally:
            os._exit(status)
    os.close(ready_write)
    os.close(report_read)
    os.close(descriptor)
    return Reporter(report_write, holder, ready_read)


def take_over(here: "str") -> "Tuple[Reporter, Dict[str, bytes]]":
    """The server's channel and the runner's inputs, with this process as safe as it can be made
    before any code of the task runs (see the module's docstring). ``VerifierError`` when the
    server's setup is unusable.

    The inputs include the source of the runner's own modules that it may need once code of the
    task has run (``LATE_MODULES``), and their shipped bytecode for this interpreter where staged:
    read now, loaded from these bytes when needed (``_gym_runner.late_module``), never from the
    files, which code a root verify runs could rewrite meanwhile."""
    try:
        descriptor = int(os.environ.pop(REPORT_FD))
        key_file = os.environ.pop(KEY_FILE)
        deferred_file = os.environ.pop(DEFERRED_ENV, "")
        deferred = _read_and_remove(deferred_file, 1 << 20) if deferred_file else b""
        inputs: Dict[str, bytes] = {}
        bytecode = tuple(cached_name(name[: -len(".py")]) for name in LATE_MODULES)
        for name in INPUTS + LATE_MODULES + bytecode:
            try:
                with open(os.path.join(here, name), "rb") as handle:
                    inputs[name] = handle.read()
            except FileNotFoundError:
                if name in LATE_MODULES:
                    raise
    except (KeyError, OSError, ValueError) as error:
        raise VerifierError(f"the server's report channel is unusable ({error})") from None
    seal()  # first, so that the key holder is born sealed
    reporter = hold_key(descriptor, key_file)
    user = os.environ.pop(RUN_AS, "")
    if user:
        become(user)
        seal()  # switching users made the process dumpable again
    for entry in deferred.split(b"\0"):
        variable, _, value = entry.partition(b"=")
        if variable:
            os.environb[variable] = value  # for what verify starts; this process has already started
    # What the late modules import from the standard library, which code a root verify runs could
    # rewrite (and /tests, first on sys.path, could shadow): imported now, all of it (C modules and
    # small ones; JSON's encoder is _json's). test_late_modules_import_nothing_new keeps this whole.
    for name in LATE_IMPORTS:
        __import__(name)
    return reporter, inputs


def note_cache_tag(folder: "str") -> None:
    """Leaves this interpreter's cache tag beside the key, in the run's private out folder, whence
    the results carry it to the host: later runs on the same image are sent its bytecode alone. A
    hint (a wrong one costs a compile), so a file that cannot be written is let be; never one that
    is there already, or a link (code of the task may run by then: the key holder writes it)."""
    tag = sys.implementation.cache_tag
    if not tag:
        return
    try:
        handle = os.open(os.path.join(folder, CACHE_TAG_FILE), os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
    except OSError:
        return
    try:
        os.write(handle, tag.encode("ascii", "replace"))
    except OSError:  # a full disk, say: the report that follows is what matters
        pass
    finally:
        os.close(handle)


def serve(here: "str") -> "Optional[Reporter]":
    """``take_over``, then a check of this interpreter's site-packages (``site_refusal``): the
    reporter, or ``None`` once the runner may not grade (it printed why, and reported a refusal
    when it could)."""
    from _gym_runner import MISSING_REWARD, PRELOADED, site_refusal

    try:
        reporter, inputs = take_over(here)
    except VerifierError as error:
        print(f"verifier error: {error}\n{MISSING_REWARD}")
        return None
    PRELOADED.update(inputs)
    message = site_refusal()
    try:
        reporter.confirm()  # the last step before code of the task (or a .pth file) can run
    except VerifierError as error:
        print(f"verifier error: {error}\n{MISSING_REWARD}")
        return None
    if message is not None:
        print(f"verifier error: {message}\n{MISSING_REWARD}")
        reporter.send("refused", message)
        return None
    return reporter


def become(user: "str") -> None:
    """Switches to ``user`` (``name``, ``uid``, ``name:group`` or ``uid:gid``) as Docker's exec would:
    the passwd entry's uid, group and supplementary groups; a uid without an entry gets group 0; a
    group named gives that group alone (``docker exec -u grader:grader`` drops grader's others: red team 70).
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
    if uid == 0 and name != "root" and not name.isdigit():
        # The server guards grading by the name: root's names get root's guards (the engine is asked
        # how grading ended), another user's do not. A name that hides uid 0 would get the wrong ones.
        raise VerifierError(f"[verifier].user {user!r} is uid 0: name it root (or 0) so that it is treated as root")
    gid = 0 if entry is None else entry.pw_gid
    try:
        if group:
            gid = int(group) if group.isdigit() else grp.getgrnam(group).gr_gid
        groups = [gid] if entry is None or group else os.getgrouplist(entry.pw_name, gid)
        home = os.environ.get("HOME")
        if entry is not None and (not home or home == pwd.getpwuid(os.getuid()).pw_dir):
            os.environ["HOME"] = entry.pw_dir
        os.setgroups(groups)
        os.setgid(gid)
        os.setuid(uid)
    except (KeyError, OSError) as error:
        raise VerifierError(f"cannot run as [verifier].user {user!r} ({error})") from None


def _c_function(name: "str") -> "Any":
    """The C library's function ``name``, called with C ints (``_long`` for a 64-bit argument) and
    returning an int, or ``None`` where the interpreter has no ctypes or the library no ``name``.

    ``ctypes`` would cost several milliseconds of start-up; its C core alone costs a fraction of one.
    """
    global _C_TYPES
    try:
        import _ctypes
    except ImportError:
        return None
    core: Any = _ctypes  # private C API: typed loosely on purpose
    if _C_TYPES is None:

        class _Int(core._SimpleCData):  # type: ignore[misc]
            _type_ = "i"

        class _Long(core._SimpleCData):  # type: ignore[misc]
            _type_ = "q"

        class _Function(core.CFuncPtr):  # type: ignore[misc]
            _flags_ = core.FUNCFLAG_CDECL
            _restype_ = _Int

        class _Process:
            _handle = core.dlopen(None, getattr(core, "RTLD_LOCAL", 0))

        _C_TYPES = (_Long, _Function, _Process())
    _, function, process = _C_TYPES
    try:
        return function((name, process))
    except AttributeError:  # not in this C library (not Linux)
        return None


_C_TYPES: "Any" = None  # (_Long, _Function, the process's own symbols), made on first use


def seal() -> None:
    """Makes this process non-dumpable: ``/proc/<pid>/mem``, ``fd`` and ``environ`` and ``ptrace``
    are then closed to every process without ``CAP_SYS_PTRACE``, its own user's included. Where there
    is no ctypes, the key and descriptor are as safe as ``/proc`` makes them."""
    prctl = _c_function("prctl")
    if prctl is not None:
        try:
            prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
        except OSError:
            pass


def reserve(descriptor: "int", folder: "str") -> None:
    """Sets disk aside for grading's finish, so that a disk the run filled (the agent's program, which
    verify ran) leaves room for the report and the results, and the verdict is scored rather than
    masked: ``RESERVE_BYTES`` for the report's file, which stays empty (the size is kept) and which
    finish rewrites, freeing the rest, once nothing of the run is left alive; and, in ``folder``, the
    files finish writes (``FINISH_FILES``), made empty now, so that no new inode is needed then, with
    blocks set aside for its own. Best effort: where the file system cannot, nothing is set aside."""
    fallocate = _c_function("fallocate")
    _set_aside(fallocate, descriptor, RESERVE_BYTES)
    for name, size in FINISH_FILES:
        try:
            handle = os.open(os.path.join(folder, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
        except OSError:
            continue
        try:
            _set_aside(fallocate, handle, size)
        finally:
            os.close(handle)


def _set_aside(fallocate: "Any", descriptor: "int", size: "int") -> None:
    if fallocate is not None and size:
        long = _C_TYPES[0]
        try:
            fallocate(descriptor, _FALLOC_FL_KEEP_SIZE, long(0), long(size))
        except OSError:
            pass


def safe_python_path(cwd: "str") -> "Tuple[List[str], List[str]]":
    """The task's ``PYTHONPATH`` entries the runner may append, as the folders they resolve to
    (``safe_entries``), and why the others were dropped."""
    kept, dropped = safe_entries(os.environ.get("PYTHONPATH", "").split(os.pathsep), cwd, "PYTHONPATH entry {!r}")
    return list(dict.fromkeys(kept.values())), dropped


def safe_entries(entries: "List[str]", cwd: "str", label: "str") -> "Tuple[Dict[str, str], List[str]]":
    """Of ``entries`` (folders, or zips, for ``sys.path``), those the runner may keep, each with the path
    it resolves to now, which is what goes on sys.path (a link the agent could point elsewhere once
    checked never does): absolute, a folder or file, outside the working directory ``cwd``, and changeable
    by root and the verifier's user alone, as are the folders above it (where it could be renamed
    away and replaced; a sticky one, such as /tmp, excepted); and why the others were dropped, each
    named by ``label`` (a format string)."""
    uid = os.geteuid()
    root = os.path.realpath(cwd)
    kept: Dict[str, str] = {}
    dropped = []
    for entry in entries:
        if not entry:
            continue
        named = label.format(entry)
        try:
            real = os.path.realpath(entry)
        except (OSError, RecursionError, ValueError):  # a chain of links longer than the recursion limit
            dropped.append(f"{named} cannot be resolved")
            continue
        if not os.path.isabs(entry):
            problem: Optional[str] = f"{named} is relative: it would resolve in the working directory"
        elif not (os.path.isdir(real) or os.path.isfile(real)):  # a file: a zip (a zipped egg)
            problem = f"{named} is no folder or file"
        elif real == root or real.startswith(root.rstrip("/") + "/"):
            problem = f"{named} is inside the working directory"
        else:
            problem = writable_by_others(real, uid, named) or _renamable_by_others(real, uid, named)
        if problem:
            dropped.append(problem)
        else:
            kept[entry] = real
    return kept, dropped


def _renamable_by_others(path: "str", own_uid: "int", named: "str") -> "Optional[str]":
    """Why another user than root and ``own_uid`` could rename ``path`` (said as ``named``) away and put
    their own in its place (a folder above it is theirs, or writable by its group or everyone and not
    sticky), or ``None``."""
    folder = path
    while folder != "/":
        folder = os.path.dirname(folder)
        try:
            status = os.stat(folder)
        except OSError:
            return f"{folder}, above {named}, cannot be read"
        if status.st_uid not in (0, own_uid):
            return f"{folder}, above {named}, belongs to uid {status.st_uid}"
        if not status.st_mode & 0o1000 and others_may_write(status.st_mode):
            return f"{folder}, above {named}, is writable by its group or by everyone"
    return None
