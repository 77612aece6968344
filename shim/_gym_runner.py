"""The runner: imports ``verify`` from verifier.py, calls it, and writes ``reward.json``.

Contract (SPEC section 4): ``verify`` declares any of ``workspace`` (the working directory, a
``pathlib.Path``), ``task_data`` (task_data.json, ``{}`` without it), ``response`` (response.json,
supplied only when that file exists) and ``state`` (``{"workspace": Path}``); it gets those it
declares, and ``**kwargs`` gets every other supplied one. Its result, awaited when awaitable, must
be a finite number or a dict of finite numbers with a ``reward`` key or exactly one key. Success
writes ``reward.json`` atomically and exits 0; any failure prints why and exits 1 with no reward
file, which the server scores 0 as ``harbor:missing_reward``.

Start-up time is a product feature (its overhead over a bare interpreter start is benchmarked).
This file loads from the shim's shipped bytecode where the interpreter has some (3.8-3.13), and is
compiled afresh in every sandbox elsewhere, at about a microsecond per syntax node; so it holds the
common path alone and imports only what that needs, and ``_gym_runner_rare`` holds the rest,
failures included. Annotations are strings, so that no ``from __future__`` import is run. Standard
library only.
"""

import _imp
import _io
import _thread
import _warnings
import atexit
import gc
import marshal
import os
import sys
from _frozen_importlib import _find_spec, module_from_spec  # type: ignore[attr-defined]
from _frozen_importlib_external import _RAW_MAGIC_NUMBER, MAGIC_NUMBER, PathFinder  # type: ignore[attr-defined]

TYPE_CHECKING = False  # typing is not imported at run time: it costs more than this module
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple

KNOWN_ARGUMENTS = ("workspace", "task_data", "response", "state")

_CO_VARIADIC = 0x04 | 0x08  # code object flags of *args and **kwargs (stable since Python 2)
_PLAIN_FUNCTION = type(lambda: None)
_MODULE = type(sys)
_FILE = _io._IOBase  # what every file object is
_EXTENSIONS = tuple(_imp.extension_suffixes())
_BEFORE_RUN: "Set[str]" = set()  # the modules loaded before verifier.py (see main)
# The runner's own inputs as NeMo Gym's run step let it read them, before it switched users (only
# the admin can read those files then), and the source and bytecode of the late modules as they
# were before any code of the task ran; empty under stock Harbor, where files are read as needed.
PRELOADED: "Dict[str, bytes]" = {}
MISSING_REWARD = "no reward written: the run scores 0 (harbor:missing_reward)"
_RARE = "_gym_runner_rare"


class VerifierError(Exception):
    """A failure of the verifier (the task author's or the agent's), reported in one message."""

    def __init__(self, message: "str", error: "Optional[BaseException]" = None) -> None:
        super().__init__(message)
        self.error = error


def plan_arguments(verify: "Any", available: "Sequence[str]") -> "Tuple[List[Any], Dict[str, str]]":
    """Which supplied arguments ``verify`` gets, as ``(positional, keywords)`` (see
    ``_gym_runner_rare.plan_call``). Here only the common case, read from ``__code__``: a plain
    function whose parameters are all plain names the run supplies (no defaults, ``*``, ``**``,
    ``/`` or decorator); ``_gym_runner_rare`` reads any other signature, and says what is wrong."""
    code = getattr(verify, "__code__", None)
    if (
        type(verify) is _PLAIN_FUNCTION
        and code is not None
        and not (verify.__defaults__ or hasattr(verify, "__wrapped__") or hasattr(verify, "__signature__"))
        and not (code.co_flags & _CO_VARIADIC or code.co_kwonlyargcount or code.co_posonlyargcount)
    ):
        names = code.co_varnames[: code.co_argcount]
        if all(name in available for name in names):
            return [], {name: name for name in names}
    return rare().plan_arguments(verify, available)  # type: ignore[no-any-return]


def late_module(name: "str") -> "Any":
    """The runner's module ``name`` (``_gym_runner_rare``, ``_gym_await``), loaded on first use:
    compiled from the source ``_gym_channel.take_over`` read before any code of the task ran, when
    it did (code a root verify runs, or a program it started, could have rewritten the file since),
    else imported from beside this file."""
    module = sys.modules.get(name)
    if module is None:
        source = PRELOADED.get(f"{name}.py")
        if source is None:
            return __import__(name)
        module = _MODULE(name)
        module.__file__ = path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
        sys.modules[name] = module
        exec(_code(PRELOADED.get(cached_name(name), b""), source, path), module.__dict__)
    return module


def cached_name(module: "str") -> "str":
    """Where, beside the runner, this interpreter's bytecode of the runner's ``module`` is staged."""
    return f"__pycache__/{module}.{sys.implementation.cache_tag}.pyc"


def _code(bytecode: "bytes", source: "bytes", path: "str") -> "Any":
    """The code of ``source``: from ``bytecode`` when that is checked-hash bytecode of this very
    source for this interpreter (what the import system accepts, PEP 552), else compiled."""
    if bytecode[:16] == MAGIC_NUMBER + b"\x03\0\0\0" + _imp.source_hash(_RAW_MAGIC_NUMBER, source):
        code = marshal.loads(bytecode[16:])
        _imp._fix_co_filename(code, path)  # type: ignore[attr-defined]
        return code
    return compile(source, path, "exec", dont_inherit=True)


def rare() -> "Any":
    return late_module(_RARE)


def _exists(here: "str", name: "str") -> "bool":
    return name in PRELOADED if PRELOADED else os.path.exists(os.path.join(here, name))


def _read(here: "str", name: "str") -> "bytes":
    if name in PRELOADED:
        return PRELOADED[name]
    with open(os.path.join(here, name), "rb") as handle:
        return handle.read()


# What pathlib's import brings in, on some Python 3.8-3.13, but runs only once a path is matched
# against a pattern, globbed or made a URI: each is left unrun until first used (``_Deferred``). They
# are about half of pathlib's import on 3.8-3.11, which every verify that declares ``workspace`` pays.
# Where pathlib's import runs one (3.12 fnmatch, and so re; 3.13's glob re), it runs then. With each,
# the names pathlib takes from it by ``from ... import`` as it is imported (see ``_forwarder``), and
# the caches it decorates its functions with (see ``_Cached``).
_PATHLIB_DEFERRED = (
    ("re", (), ()),
    ("fnmatch", (), ()),
    ("ntpath", (), ()),
    ("urllib.parse", ("quote_from_bytes",), ()),
) + (
    # functools, with collections (a third of a bare start): 3.8-3.11's pathlib only decorates
    # _make_selector with its lru_cache; from 3.12 re runs at pathlib's import, and functools with it.
    (("functools", (), ("lru_cache",)),)
    if sys.version_info < (3, 12)
    else (("contextlib", (), ()),)  # glob's, since 3.13's pathlib imports glob
    if sys.version_info >= (3, 13)
    else ()
)
# One deferred module runs at a time; the thread running one re-enters when its code needs another.
# A fork waits for the run to end, so no child holds a half-run module or a lock nobody can release
# (red team 102: a child that forked while another thread ran one hung).
_DEFERRED_LOCK = _thread.RLock()
_DEFERRED_RUNNING: "Set[str]" = set()
# Where deferred modules, and what they import, are found: the runner's sys.path (``_RUNNER_PATH``), whatever
# verifier.py did to it; set with the first deferral.
_DEFERRED_PATH: "Optional[List[str]]" = None
# sys.path as the runner set it up, before verifier.py's module code ran: where pathlib is imported from
# (red team 104: a verifier.py that put a folder of the agent's first on sys.path at its top had the
# agent's pathlib.py imported for its workspace). Empty where main did not run (run_verify's tests).
_RUNNER_PATH: "List[str]" = []
# What a plain import of pathlib puts in sys.modules on this Python that the deferral leaves out until a
# deferred module runs (builtin ones included, which may be files of lib-dynload): found where pathlib's
# import would have found them, whoever imports them and whenever (red team 104: a verify that put the
# workspace first on sys.path, then imported collections, ran the agent's), and no other name (red team
# 105: one list for every Python sent a vendored heapq to the standard library's on 3.10). A test holds
# the list equal to the difference on each Python.
_PATHLIB_BRINGS = frozenset(
    (
        ("_collections", "_functools", "_sre", "collections", "copyreg", "enum", "itertools", "keyword", "reprlib")
        + ("types",)
        + (("_locale", "sre_compile", "sre_constants", "sre_parse") if sys.version_info < (3, 11) else ())
        + (("_heapq", "heapq", "warnings") if sys.version_info < (3, 10) else ())
        + (("ipaddress",) if sys.version_info >= (3, 11) else ())
    )
    if sys.version_info < (3, 12)
    else ("ipaddress", "math")
    if sys.version_info < (3, 13)
    else ()
)
# The thread importing pathlib in path_class: its imports too are found on _DEFERRED_PATH alone, without
# changing sys.path under other threads (red team 105: a thread of verifier.py's saw the runner's).
_PATHLIB_IMPORTER: "Optional[int]" = None
# What the import system looks up on a module it finds in sys.modules: none of these runs it.
_IMPORT_SYSTEM_NAMES = frozenset(("__spec__", "__name__", "__path__"))
# What module_from_spec sets and a module's code leaves alone: read without running it, as code that
# walks sys.modules reads it (red team 102: running one there added modules under the walk).
_SET_AT_IMPORT = frozenset(("__file__", "__cached__", "__loader__", "__package__"))


class _Deferred(_MODULE):  # type: ignore[misc,valid-type]
    """A standard-library module imported but not run yet: looking up any name in it runs it, in
    place, first (``importlib.util.LazyLoader``'s design, without importing importlib), so that
    every importer holds the one module object, which is a plain module from then on. Exempt are
    the names the import system looks up, ``_forwarder``'s, which run it when called, and
    ``_cache_forwarder``'s, whose functions run it when called."""

    def __getattribute__(self, name: "str") -> "Any":
        # A name the module holds already is one of _forwarder's, or one its code has made so far
        # while a thread runs it: that thread goes on, any other waits for it (red team 100: a half-run
        # re's compile, called from a second thread, found no _compile yet).
        names = _MODULE.__getattribute__(self, "__dict__")
        if name not in _IMPORT_SYSTEM_NAMES and not (
            name in names and (name in _SET_AT_IMPORT or (name[:2] != "__" and not _DEFERRED_RUNNING))
        ):
            run_deferred(self)
        return _MODULE.__getattribute__(self, name)


class _DeferredImports:
    """The finder of what a deferred module's code imports as it runs: on ``_DEFERRED_PATH`` alone,
    where pathlib's import would have found it before verify ran (red team 102: a verify that put the
    workspace first on sys.path, then used re, ran the agent's enum.py; red team 103: one that appended
    it, then used ntpath, ran the agent's nt.py, which ntpath's import expects to be missing on POSIX).
    In sys.meta_path just before the path finder from the first deferral on, never moved (red team 103:
    taken out as another thread's import walked the list, that import skipped the path finder), and
    acting only in the thread running a deferred module or importing pathlib, and for ``_PATHLIB_BRINGS`` in
    any; top-level
    names alone (a submodule is found in its package's folder)."""

    @staticmethod
    def find_spec(name: "str", path: "Any" = None, target: "Any" = None) -> "Any":
        if path is not None:
            return None
        if (_DEFERRED_RUNNING and _DEFERRED_LOCK._is_owned()) or _thread.get_ident() == _PATHLIB_IMPORTER:  # type: ignore[attr-defined]
            spec = PathFinder.find_spec(name, _DEFERRED_PATH)
            if spec is None:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return spec
        return PathFinder.find_spec(name, _DEFERRED_PATH) if name in _PATHLIB_BRINGS else None


def run_deferred(module: "Any") -> "None":
    """Runs ``module``'s code if it is a ``_Deferred`` not run yet; a module whose code fails leaves
    sys.modules and raises, as a failed import does."""
    with _DEFERRED_LOCK:
        name = _MODULE.__getattribute__(module, "__name__")
        if type(module) is not _Deferred or name in _DEFERRED_RUNNING:  # run, or its own code asks
            return
        _DEFERRED_RUNNING.add(name)
        try:
            _MODULE.__getattribute__(module, "__spec__").loader.exec_module(module)
        except BaseException:
            if sys.modules.get(name) is module:
                del sys.modules[name]
            raise
        finally:
            _DEFERRED_RUNNING.discard(name)
            module.__class__ = _MODULE  # type: ignore[assignment]  # a plain module from now on


def _forwarder(module: "Any", name: "str") -> "Callable[..., Any]":
    """A function that runs ``module`` and calls its ``name``: what ``from module import name``
    binds while ``module`` waits to run (the module's own ``name`` replaces it once it runs)."""

    def forward(*args: "Any", **kwargs: "Any") -> "Any":
        run_deferred(module)
        return getattr(module, name)(*args, **kwargs)

    forward.__name__ = forward.__qualname__ = name
    return forward


class _Cached:
    """A function decorated by a deferred module's cache (``functools.lru_cache``): ``make`` decorates
    it with the module's own, running the module, when it is first called or looked into."""

    __slots__ = ("_made", "_make")

    def __init__(self, make: "Callable[[], Any]") -> None:
        self._make = make
        self._made: Any = None

    def _function(self) -> "Any":
        with _DEFERRED_LOCK:
            if self._made is None:
                self._made = self._make()
            return self._made

    def __call__(self, *args: "Any", **kwargs: "Any") -> "Any":
        return (self._made or self._function())(*args, **kwargs)

    def __getattr__(self, name: "str") -> "Any":  # cache_info, cache_clear, __wrapped__, ...
        return getattr(self._function(), name)


def _cache_forwarder(module: "Any", name: "str") -> "Callable[..., Any]":
    """What a deferred module's cache decorator ``name`` is while pathlib is imported: it decorates
    with ``_Cached``, so that the module runs only once a decorated function is used. Both of
    lru_cache's forms: ``lru_cache(function)`` and ``lru_cache(maxsize)(function)``."""

    def real() -> "Any":
        run_deferred(module)
        return getattr(module, name)

    def forward(*args: "Any", **kwargs: "Any") -> "Any":
        if args and callable(args[0]):
            return _Cached(lambda: real()(*args, **kwargs))
        return lambda function: _Cached(lambda: real()(*args, **kwargs)(function))

    forward.__name__ = forward.__qualname__ = name
    return forward


def defer(name: "str", forwarded: "Sequence[str]" = (), cached: "Sequence[str]" = ()) -> "None":
    """Puts standard-library module ``name`` in sys.modules unrun (see ``_Deferred``), where no
    import has put it yet: the same module an import would find now, by the same search. Its
    ``forwarded`` names run it when called (``_forwarder``), its ``cached`` decorators when what they
    decorate is (``_cache_forwarder``)."""
    if name in sys.modules:
        return
    global _DEFERRED_PATH
    if _DEFERRED_PATH is None:
        _DEFERRED_PATH = list(_RUNNER_PATH or sys.path)
        finders = sys.meta_path
        finders.insert(finders.index(PathFinder) if PathFinder in finders else len(finders), _DeferredImports)
        os.register_at_fork(
            before=_DEFERRED_LOCK.acquire, after_in_parent=_DEFERRED_LOCK.release, after_in_child=_DEFERRED_LOCK.release
        )
    parent, _, child = name.rpartition(".")
    package = None
    if parent:
        __import__(parent)
        package = sys.modules[parent]
    spec = _find_spec(name, None if package is None else package.__path__)
    if spec is None or not hasattr(spec.loader, "exec_module"):
        return  # the import, whenever it comes, says what is wrong
    module = module_from_spec(spec)
    for item in forwarded:
        setattr(module, item, _forwarder(module, item))
    for item in cached:
        setattr(module, item, _cache_forwarder(module, item))
    module.__class__ = _Deferred
    sys.modules[name] = module
    if package is not None:
        setattr(package, child, module)  # what an import of the submodule sets on its package


def forget_cached(name: "str", cached: "Sequence[str]") -> "None":
    """Removes ``cached`` from deferred module ``name`` once pathlib is imported: a later look-up (a
    verify's own ``from functools import lru_cache``) runs the module and gets its own decorator."""
    module = sys.modules.get(name)
    if type(module) is _Deferred:
        names = _MODULE.__getattribute__(module, "__dict__")
        for item in cached:
            names.pop(item, None)


def path_class() -> "Any":
    """``pathlib.Path``; when pathlib is not imported yet, imported with ``_PATHLIB_DEFERRED`` deferred,
    all of it found on the runner's own sys.path (``_DEFERRED_PATH``)."""
    global _PATHLIB_IMPORTER
    if "pathlib" not in sys.modules:
        _PATHLIB_IMPORTER = _thread.get_ident()
        try:
            for name, forwarded, cached in _PATHLIB_DEFERRED:
                defer(name, forwarded, cached)
            import pathlib  # noqa: F401
        finally:
            _PATHLIB_IMPORTER = None
    from pathlib import Path

    for name, _, cached in _PATHLIB_DEFERRED:
        forget_cached(name, cached)
    return Path


# The working directory handed to verify as ``workspace``: its name then, and the folder (device,
# inode) it named. ``nemo_gym.verifiers.files`` reads only that folder by that name.
WORKSPACE: "Optional[Tuple[str, Optional[Tuple[int, int]]]]" = None
_HANDED: "Any" = None  # the Path of WORKSPACE's name


def _working_folder() -> "Optional[Tuple[int, int]]":
    """The working directory's device and inode. A user that may not search the folder it stands in
    cannot stat ``.``, but can stat it through /proc; without either, ``None``, which no walk reaches
    (an agent that closed its folder to the verifier must not lift the check)."""
    for name in (".", "/proc/self/cwd"):
        try:
            folder = os.stat(name)
        except OSError:
            continue
        return folder.st_dev, folder.st_ino
    return None


def _handed_workspace() -> "Any":
    """The working directory as a ``Path``, noted in ``WORKSPACE``: made once a call, so that
    ``workspace`` and ``state`` hold one name (red team 100: two looks at a name the agent kept
    exchanging read two names, and files knew only the second)."""
    global WORKSPACE, _HANDED
    if _HANDED is None:
        text = os.getcwd()
        WORKSPACE = (text, _working_folder())
        _HANDED = path_class()(text)
    return _HANDED


def _argument(name: "str", here: "str") -> "Any":
    if name in ("workspace", "state"):
        workspace = _handed_workspace()
        return workspace if name == "workspace" else {"workspace": workspace}
    if name == "task_data" and not _exists(here, "task_data.json"):
        return {}
    path = os.path.join(here, f"{name}.json")
    try:
        value = json_loads(_read(here, f"{name}.json").decode("utf-8"))
    except (OSError, ValueError) as error:
        raise VerifierError(rare().bad_json(name, path, error)) from None
    if type(value) is not dict:
        raise VerifierError(rare().bad_json(name, path, value))
    return value


class _Unsure(Exception):
    """A constant the scanner met: the text goes to json.loads, whose NaN is one shared object."""


def _constant(name: "str") -> "Any":
    raise _Unsure(name)


class _Decoding:
    """What ``json.loads`` gives its C scanner: plain dicts, floats and ints."""

    strict = True
    object_hook = object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = _constant


def json_loads(text: "str") -> "Any":
    """``json.loads(text)``, read by the C scanner json.loads itself uses, without importing the
    json package (its re, enum and functools cost about as much as a bare start).

    Only a text the scanner takes whole from its first character, with no NaN or infinity in it, is
    read here (staging writes just that); any other (whitespace around the value, a second value, a
    BOM) goes to json.loads, which decides, as do the errors the scanner of 3.10-3.11 cannot report
    while json is not imported (SystemError). Every other exception propagates as it would from
    json.loads: its error, RecursionError (on 3.8-3.11, two levels deeper than json.loads, whose
    own frames count there), a signal handler's."""
    try:
        from _json import make_scanner
    except ImportError:  # an interpreter without the C accelerator
        pass
    else:
        try:
            value, end = make_scanner(_Decoding)(text, 0)  # type: ignore[arg-type]  # any object with its attributes
        except (StopIteration, SystemError, _Unsure):
            pass
        else:
            if end == len(text):
                return value
    import json

    return json.loads(text)


class _Compiled(BaseException):
    """Stops the module ``compile_module`` has ``exec`` compile, before its first instruction."""


# Turns any warning raised while compiling into an error, so that ``compile`` gives it again, naming
# the file (``exec`` names every text ``<string>``).
_WARNINGS_AS_ERRORS = ("error", None, Warning, None, 0)
# What compiling a text raises (a warning above becomes a SyntaxError, or itself on some versions).
_COMPILE_ERRORS = (SyntaxError, ValueError, LookupError, MemoryError, RecursionError, Warning)


def _watched() -> "bool":
    """Whether a profiler, a tracer or (3.12+) a ``sys.monitoring`` tool watches this thread: the hook
    ``compile_module`` sets would stand in their way, or they would see its exception."""
    if sys.getprofile() is not None or sys.gettrace() is not None:
        return True
    monitoring = getattr(sys, "monitoring", None)
    return monitoring is not None and any(monitoring.get_tool(tool) is not None for tool in range(6))


def compile_module(source: "bytes", path: "str") -> "Any":
    """``compile(source, path, "exec", dont_inherit=True)``, without what the first ``compile`` of a
    process costs (0.7-1.2 ms, a tenth of a bare start: it builds the ``ast`` module's types, which
    ``exec`` of a text never needs).

    ``exec`` compiles the text in C, with this function's compiler flags (none: no ``__future__``
    here), and a profile hook stops the module's frame before its first instruction, in globals
    with no builtins besides; the code then takes ``path`` as its file name throughout, as the
    import system renames moved bytecode. ``compile`` decides everything else, so that errors and
    warnings name the file: a text that does not compile or warns while compiling, a profiler,
    tracer or monitoring tool already watching, a module frame that was never stopped. Any other
    exception (a signal handler's) propagates, as it would from ``compile``."""
    warnings = sys.modules.get("warnings")
    filters = _warnings.filters if warnings is None else warnings.filters  # what C reads
    if _watched() or type(filters) is not list:
        return compile(source, path, "exec", dont_inherit=True)
    codes: List[Any] = []
    here = sys._getframe().f_code

    def stop(frame: "Any", event: "str", _: "Any") -> None:
        code = frame.f_code  # the module's, called by exec from here (not a codec's search function)
        if event == "call" and not codes and frame.f_back.f_code is here and code.co_name == "<module>":
            codes.append(code)
            raise _Compiled

    try:
        filters.insert(0, _WARNINGS_AS_ERRORS)
        try:
            sys.setprofile(stop)
            exec(source, {"__builtins__": {}})
        finally:
            sys.setprofile(None)
    except _Compiled:
        pass
    except _COMPILE_ERRORS:
        codes.clear()  # compile says what is wrong, naming the file
    finally:
        if filters and filters[0] is _WARNINGS_AS_ERRORS:
            del filters[0]
    if codes:
        _imp._fix_co_filename(codes[0], path)  # type: ignore[attr-defined]
        return codes[0]
    return compile(source, path, "exec", dont_inherit=True)


def load_verify(here: "str") -> "Callable[..., Any]":
    """``verify`` from verifier.py in ``here``, run as module ``verifier`` (no importlib needed)."""
    path = os.path.join(here, "verifier.py")
    try:
        source = _read(here, "verifier.py")
    except OSError as error:
        raise VerifierError(f"cannot read verifier.py beside test.sh ({error})") from None
    module = _MODULE("verifier")
    module.__file__ = path
    sys.modules["verifier"] = module  # dataclasses, pickle and friends look their module up here
    try:
        exec(compile_module(source, path), module.__dict__)
    except BaseException as error:  # SystemExit and SyntaxError too: the module is the author's
        if isinstance(error, KeyboardInterrupt):
            raise
        raise VerifierError(f"importing verifier.py failed: {rare().describe(error)}", error) from None
    verify = module.__dict__.get("verify")
    if not callable(verify):
        raise VerifierError(rare().not_a_verify(verify))
    return verify  # type: ignore[no-any-return]


def wait(awaitable: "Any") -> "Any":
    """The result of an awaitable (an ``async def`` verify's, or a coroutine a sync one returned),
    exactly as ``asyncio.run`` gives it, but without importing asyncio (most of an async verify's
    start-up) while the coroutine does not need an event loop: ``_gym_await`` drives it by hand,
    and one that imports asyncio meanwhile finishes on a loop of its own (see ``_gym_await``).

    ``asyncio.run`` (``_gym_runner_rare.wait``) where the hand drive cannot be sure: asyncio imported
    already (the verifier imported it), other threads alive (one could import asyncio in the middle
    of a step, too late for its loop), or a Python newer than the asyncio internals the drive was
    checked against (3.8-3.13).
    """
    if "asyncio" in sys.modules or sys.version_info >= (3, 14) or _thread._count():
        return rare().wait(awaitable)
    return late_module("_gym_await").run(awaitable)


async def _wait_for(awaitable: "Any") -> "Any":
    # A coroutine around any awaitable (asyncio.run and the hand drive take coroutines only).
    return await awaitable


def call_verify(verify: "Callable[..., Any]", here: "str") -> "Any":
    """Calls ``verify`` with the arguments it declares; awaits the result when it is awaitable."""
    global WORKSPACE, _HANDED
    WORKSPACE = _HANDED = None  # a call of run_verify's before this one may have handed over another
    available = [name for name in KNOWN_ARGUMENTS if name != "response" or _exists(here, "response.json")]
    positional, keywords = plan_arguments(verify, available)
    names = set(keywords.values()).union(item for item in positional if isinstance(item, str))
    values = {name: _argument(name, here) for name in names}
    try:
        result = verify(
            *[values[item] if isinstance(item, str) else item[0] for item in positional],
            **{parameter: values[name] for parameter, name in keywords.items()},
        )
        if hasattr(type(result), "__await__"):
            result = wait(result)
    except BaseException as error:
        if isinstance(error, KeyboardInterrupt):
            raise
        raise VerifierError(f"verify raised {rare().describe(error)}", error) from None
    return result


def _number_text(value: "Any") -> "Optional[str]":
    """The JSON text of a plain finite int, float or bool a float can hold, else ``None`` (the rare
    module decides): NaN fails both comparisons, as the infinities fail one."""
    kind = type(value)
    if (kind is float or kind is int or kind is bool) and -1e308 < value < 1e308:
        return repr(value if kind is float else int(value))
    return None


def _plain_key(key: "Any") -> "bool":
    # A string JSON needs no escape for: printable ASCII, without quotes or backslashes.
    return type(key) is str and key.isascii() and key.isprintable() and '"' not in key and "\\" not in key


def reward_json(result: "Any") -> "str":
    """The text of ``reward.json`` for ``verify``'s result; ``VerifierError`` when it is not valid."""
    number = _number_text(result)
    if number is not None:
        return '{"reward": ' + number + "}"
    if type(result) is dict and ("reward" in result or len(result) == 1):
        items = [(key, _number_text(value)) for key, value in result.items()]
        if all(text is not None and _plain_key(key) for key, text in items):
            return "{" + ", ".join(f'"{key}": {text}' for key, text in items) + "}"
    module = rare()
    return module.json_text(module.rewards_from_result(result))  # type: ignore[no-any-return]


def write_reward(logs_dir: "str", text: "str") -> None:
    """Writes ``reward.json`` atomically (a temporary file in the same folder, then a rename)."""
    os.makedirs(logs_dir, exist_ok=True)
    temporary = os.path.join(logs_dir, f".reward.json.{os.getpid()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        descriptor = os.open(temporary, flags, 0o644)
    except FileExistsError:  # a leftover (or planted) file of that name
        os.unlink(temporary)
        descriptor = os.open(temporary, flags, 0o644)
    try:
        with open(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
        os.replace(temporary, os.path.join(logs_dir, "reward.json"))
    except OSError:  # a full disk: nothing of it is left
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def writable_by_others(path: "str", own_uid: "int", named: "str" = "") -> "Optional[str]":
    """Why another user than root and ``own_uid`` could change ``path`` (said as ``named``), or ``None``."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    if status.st_uid not in (0, own_uid):
        return f"{named or path} belongs to uid {status.st_uid}"
    if others_may_write(status.st_mode):
        return f"{named or path} is writable by its group or by everyone"
    return None


def others_may_write(mode: "int") -> "bool":
    """Whether ``mode`` lets a user other than the owner write: its group or everyone. A group no
    other user seems to be in is no exception: the agent can be in a group /etc/group does not list
    it in (``docker exec -u agent:staff``, a container's ``group_add``, a second line with the same
    gid), and Debian's staff convention let it plant a module in site-packages (red team 65)."""
    return bool(mode & 0o022)


def unsafe_site() -> "List[str]":
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
        try:
            names = os.listdir(folder)
        except OSError:  # none, or one this user cannot list: site skips it too
            continue
        for path in [folder, os.path.dirname(folder)] + [
            os.path.join(folder, name) for name in names if name.endswith(".pth")
        ]:
            problem = writable_by_others(path, uid)
            if problem:
                problems.append(problem)
    return problems


def moved_in() -> "Optional[str]":
    """Why the working directory may be a folder another user moved into its place and may not read,
    the verifier's answers say, else ``None`` (red team 100: grading entered the working directory by
    name while the agent, who owned the folder above it, exchanged it for a folder of root's;
    ``rename(2)`` needs no right on what it moves). From ``/`` down, whoever besides root and this
    user may have moved a folder on the way into its place (``movers``) must be able to pass through
    it and every folder below it, as ``nemo_gym.verifiers.files`` requires of what it reads. A
    working directory this user may not search is let be (nothing in it can be read), and the check
    goes only as far up as this user may look: under NeMo Gym's server grading has checked the whole
    way as root before the runner starts (``moved_in`` in ``_grading.sh``); under stock Harbor this
    is the only check."""
    try:
        chain = [os.stat(".")]
    except OSError:
        return None
    top = os.stat("/")
    up = "."
    while (chain[-1].st_dev, chain[-1].st_ino) != (top.st_dev, top.st_ino):
        up += "/.."
        try:
            chain.append(os.stat(up))
        except OSError:  # above a folder this user may not search: grading's own check sees it all
            break
    trusted = (0, os.geteuid())
    seen: List[Tuple[int, int]] = []
    down = chain[::-1]
    for folder, entry in zip(down, down[1:]):
        seen.extend(mover for mover in movers(folder, entry, trusted) if mover not in seen)
        if not all(readable_by(entry, mover) for mover in seen):
            return (
                f"the working directory {os.getcwd()} could have been put in its place by a user who may not "
                "read it (its folders' owners and modes from / down say so): the verifier did not run"
            )
    return None


# Who may have moved an entry into its place: a user, a group's members, or anyone.
_USER, _GROUP, _ANYONE = 0, 1, 2
_S_IWGRP, _S_IWOTH, _S_ISVTX = 0o20, 0o2, 0o1000  # stat's (not imported: start-up time)


def movers(folder: "Any", entry: "Any", trusted: "Tuple[int, ...]") -> "List[Tuple[int, int]]":
    """Who, besides ``trusted``, may have moved ``entry`` into ``folder`` (``os.stat_result`` both):
    the folder's owner, who may make it writable whenever it likes; its group's members or anyone where
    they may write it, but in a sticky folder (``/tmp``) only the entry's owner.
    ``nemo_gym.verifiers.files._movers`` is the same rule, for the walks of what verify reads (a test
    holds the two equal)."""
    mode = folder.st_mode
    found = []
    if folder.st_uid not in trusted:  # whatever its mode says: an owner may change it (red team 101)
        found.append((_USER, folder.st_uid))
    if mode & (_S_IWGRP | _S_IWOTH):
        if not mode & _S_ISVTX:
            found.append((_ANYONE, 0) if mode & _S_IWOTH else (_GROUP, folder.st_gid))
        elif entry.st_uid not in trusted:
            found.append((_USER, entry.st_uid))
    return found


def readable_by(entry: "Any", mover: "Tuple[int, int]") -> "bool":
    """Whether ``mover`` could read ``entry`` (pass through it, a folder) by its mode bits: as its
    owner, who may change them anyway, as the group it shares with a group's members, or as anyone."""
    kind, who = mover
    need = 0o1 if entry.st_mode & 0o170000 == 0o040000 else 0o4  # a folder's x, a file's r, for others
    if entry.st_mode & need:
        return True
    if kind == _USER:
        return entry.st_uid == who  # type: ignore[no-any-return]
    return kind == _GROUP and entry.st_gid == who and bool(entry.st_mode & (need << 3))


def site_refusal() -> "Optional[str]":
    """Why this interpreter's site-packages may not grade (``unsafe_site``: code another user put
    there would run inside the runner), under NeMo Gym's server and stock Harbor alike, or ``None``."""
    problems = unsafe_site()
    if not problems:
        return None
    return (
        f"the verifier's Python can be changed by another user ({'; '.join(problems)}): code put there would "
        "run inside the runner, so it does not grade here; give the verifier an interpreter only root and its "
        "own user can write"
    )


# What site imports from anywhere on sys.path once it is set up: see _set_up_sys_path.
_CUSTOMIZE = ("sitecustomize", "usercustomize")
# What was kept off sys.path while site set it up, and why: said once it is done.
_OFF_PATH: "List[str]" = []


def _set_up_sys_path(here: "str") -> None:
    # test.sh starts Python with -E -S: no PYTHON* variable and no site-packages act before the
    # runner, so nothing the task's environment names (a PYTHONPATH into the workspace and its
    # sitecustomize.py) runs first. site runs here; the task's PYTHONPATH is honoured after the
    # standard library and site-packages, so it can add modules but never shadow one, and never
    # with a folder inside the working directory or one another user could change. Nor is a folder
    # a .pth file names (an editable install's names the agent's project, /app/src), checked before
    # the file's next line runs (_add_pth); sitecustomize is imported once sys.path is set up
    # (red teams 60 and 62: site imported the agent's from there, inside the runner).
    import site

    original = list(sys.path)
    try:
        _set_up_site(here, site)
    except Exception as error:  # the agent's doing (a working directory removed): no grade, no stray path
        sys.path[:] = original
        raise VerifierError(f"setting up sys.path failed ({type(error).__name__}: {error})", error) from None
    site.execsitecustomize()  # the image's own, found where site-packages and root's folders are


def _set_up_site(here: "str", site: "Any") -> None:
    """``_set_up_sys_path``'s work, but for the image's ``sitecustomize``."""
    for name in _CUSTOMIZE:
        sys.modules[name] = None  # type: ignore[assignment]  # site's own import fails quietly
    site.addpackage, add = _add_pth, site.addpackage
    try:
        site.main()
    finally:
        site.addpackage = add
        for name in _CUSTOMIZE:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]
    cwd = os.getcwd()
    sys.path[:] = [entry for entry in sys.path if entry == here or (entry and os.path.abspath(entry) != cwd)]
    if os.environ.get("PYTHONPATH"):
        kept, dropped = _shim_module("_gym_channel").safe_python_path(cwd)
        sys.path.extend(entry for entry in kept if entry not in sys.path)
        _OFF_PATH.extend(f"{problem}: not added to sys.path" for problem in dropped)
    for problem in _OFF_PATH:
        print(f"verifier warning: {problem}")


def _add_pth(sitedir: "str", name: "str", known_paths: "Any") -> "Any":
    """``site.addpackage`` for the runner: a folder a line of the ``.pth`` file names, or that one of
    its import lines puts on sys.path, stays there only once ``_vet`` took it, before the next line
    runs, so that no import (a later line's, the runner's) ever looks in a folder of the agent's."""
    import site

    reset = known_paths is None
    if reset:
        known_paths = site._init_pathinfo()  # type: ignore[attr-defined]
    path = os.path.join(sitedir, name)
    if os.path.abspath(sitedir) not in {os.path.abspath(folder) for folder in site.getsitepackages()}:
        # A folder a .pth import line gave site.addsitedir (red team 66): its .pth files are read only
        # once it, and they, are vetted as any other (site-packages' own were, by site_refusal).
        channel = _shim_module("_gym_channel")
        _, dropped = channel.safe_entries([sitedir], os.getcwd(), f"{{}} (from {name}'s folder)")
        problem = dropped[0] if dropped else writable_by_others(path, os.geteuid())
        if problem:
            _OFF_PATH.append(f"{path} was not read: {problem}")
            return None if reset else known_paths
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return None if reset else known_paths
    if data.startswith(b"\xef\xbb\xbf"):  # as "utf-8-sig" decodes, without importing that codec
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:  # site falls back on the locale's encoding
        text = data.decode("latin-1")
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("#") or not line.strip():
            continue
        before = list(sys.path)
        if line.startswith(("import ", "import\t")):
            try:
                exec(line, dict(vars(site)))  # as site runs it
            except Exception as error:
                _OFF_PATH.append(f"{path} line {number} failed ({type(error).__name__}: {error}); the rest was skipped")
                _vet(before, f"{{}} (from {name})")
                break
        else:
            folder, case = site.makepath(sitedir, line.rstrip())
            if case in known_paths or not os.path.exists(folder):
                continue
            sys.path.append(folder)
            known_paths.add(case)
        if sys.path != before:
            _vet(before, f"{{}} (from {name})")
    return None if reset else known_paths


def _shim_module(name: "str") -> "Any":
    """The shim's module ``name``, imported (once) from the shim's folder alone: sys.path may hold
    folders not vetted yet while site runs."""
    module = sys.modules.get(name)
    if module is None:
        saved = list(sys.path)
        sys.path[:] = [os.path.dirname(os.path.abspath(__file__))]
        try:
            module = __import__(name)
        finally:
            sys.path[:] = saved
    return module


def _vet(before: "List[str]", label: "str") -> None:
    """Keeps, of what joined sys.path since it was ``before``, what ``_gym_channel.safe_entries``
    takes, each as the folder it resolves to; why it dropped the rest is said later."""
    current, vetted = list(sys.path), set(before)
    channel = _shim_module("_gym_channel")
    kept, dropped = channel.safe_entries([entry for entry in current if entry not in vetted], os.getcwd(), label)
    sys.path[:] = [entry if entry in vetted else kept[entry] for entry in current if entry in vetted or entry in kept]
    _OFF_PATH.extend(f"{problem}: not added to sys.path" for problem in dropped)


def main(here: "str") -> "int":
    """Runs the verifier of the shim in ``here``; returns the process's exit status."""
    try:
        sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    except (AttributeError, ValueError):
        pass
    path = os.environ.pop("NEMO_GYM_PATH", None)
    if path is not None:  # test.sh started this interpreter with the system's PATH: verify gets the task's
        os.environ["PATH"] = path
    channel = None
    if "NEMO_GYM_REPORT_FD" in os.environ:  # NeMo Gym's server: see _gym_channel
        from _gym_channel import serve

        channel = serve(here)
        if channel is None:  # it said why
            return 1
    logs_dir = os.environ.get("VERIFIER_LOGS_DIR") or "/logs/verifier"
    try:
        # NeMo Gym's server empties the folder first; stock Harbor does not, so a reward the agent
        # planted would stand whenever the run fails, from here on (red team 63). A failed run must
        # read as "no reward" under both.
        for name in ("reward.json", "reward.txt"):
            try:
                os.unlink(os.path.join(logs_dir, name))
            except FileNotFoundError:
                pass
        refusal = site_refusal() if channel is None else None  # serve() checked under NeMo Gym
        if refusal is not None:
            raise VerifierError(refusal)
        _set_up_sys_path(here)
        _RUNNER_PATH[:] = sys.path
        refusal = moved_in()
        if refusal is not None:
            raise VerifierError(refusal)
    except (VerifierError, OSError) as error:
        return rare().fail(error, logs_dir, channel)  # type: ignore[no-any-return]
    _BEFORE_RUN.update(sys.modules)
    gc.freeze()  # what exists now is the runner's: ``end`` looks only at what the run made
    try:
        text = reward_json(call_verify(load_verify(here), here))
    except (VerifierError, OSError) as error:
        return rare().fail(error, logs_dir, channel)  # type: ignore[no-any-return]
    try:  # one lstat: stock Harbor adds a reward.txt to a reward.json with no "reward" as its score
        os.lstat(os.path.join(logs_dir, "reward.txt"))
    except OSError:
        pass
    else:  # verify's, or its program's (red team 68): never the score
        rare().remove_stray_rewards(logs_dir, ("reward.txt",))
    try:
        write_reward(logs_dir, text)
    except OSError as error:  # the verdict stands: the server's report carries it
        return rare().unwritten(error, text, logs_dir, channel)  # type: ignore[no-any-return]
    if channel is not None:
        channel.send("reward", text)
    print(f"reward.json: {text}")
    return 0


def end(status: "int") -> "int":
    """Ends a successful run (``status`` 0) without the interpreter's teardown, which costs about
    2-3 ms, a sixth of a bare start, where nothing the run left behind needs it; returns ``status``,
    for a normal exit, otherwise, and after a failure.

    A thread verify left running (not a daemon) is waited for ``_THREAD_GRACE_SEC`` at most; then the
    run ends without it (``_leave_stuck_threads``). Teardown is needed, and taken, when the run
    leaves: an ``atexit`` callback; another thread (a normal exit waits for it); a file open for
    writing (teardown flushes and closes it, a wrapper before the file it wraps, which no order
    found from outside can promise); or C code of its
    own, an extension module from outside the standard library or ``ctypes`` (the C library's own
    output buffers are flushed only by a normal exit). Otherwise the standard streams are flushed
    and the process ends: other objects' ``__del__`` methods do not run then, which Python does not
    promise at exit either (the data model's ``object.__del__``).
    """
    if status == 0 and _thread._count():
        _leave_stuck_threads()
    if status != 0 or atexit._ncallbacks() or _thread._count() or _left_behind():
        return status
    try:
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            if stream is not None:
                stream.flush()
    except BaseException:  # normal exit flushes again, and says why it cannot
        return status
    os._exit(status)


# How long a successful run waits for the threads verify left running (not daemons) before it ends
# without them. A normal exit waits for them forever: a watchdog timer, or a pool's worker on the agent's
# hung program, held test.sh until the timeout, where NeMo Gym's server scores the reward already
# reported and stock Harbor, which then parses nothing, does not (red team 70).
_THREAD_GRACE_SEC = 1.0


def _leave_stuck_threads() -> "None":
    """Waits up to ``_THREAD_GRACE_SEC`` for the threads verify left running; if some still run, ends
    the process without them (the score is written), after flushing what the run left open for
    writing, and says so. Returns when none is left: the run then ends as it would have."""
    threading = sys.modules.get("threading")
    if threading is None:  # only threading's own threads hold up an exit
        return
    import time

    deadline = time.monotonic() + _THREAD_GRACE_SEC
    main = threading.main_thread()
    for thread in threading.enumerate():
        if thread is not main and not thread.daemon:
            thread.join(max(0.0, deadline - time.monotonic()))
    stuck = [
        thread.name
        for thread in threading.enumerate()
        if thread is not main and not thread.daemon and thread.is_alive()
    ]
    if not stuck:
        return
    print(
        f"verifier note: verify left {len(stuck)} thread(s) running ({', '.join(stuck[:5])}); the run ends "
        f"without waiting for them, as its score is written"
    )
    for item in _open_for_writing():  # its data is kept (see end)
        try:
            item.flush()
        except Exception:
            pass
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except Exception:
            pass
    os._exit(0)


def _open_for_writing() -> "Iterator[Any]":
    """The files the run left open for writing, and those that cannot say whether they are: only
    what the run made (the runner's own objects are frozen, and ``gc`` skips them)."""
    for item in gc.get_objects():
        if issubclass(type(item), _FILE):
            try:
                if item.closed or not item.writable():
                    continue
            except Exception:  # a file that cannot say: counted as open
                pass
            yield item


def _left_behind() -> "bool":
    """Whether the run left a file open for writing, or loaded C code of its own (see ``end``)."""
    for _ in _open_for_writing():  # teardown flushes and closes it
        return True
    library = os.path.dirname(getattr(os, "__file__", None) or os.sep) + os.sep  # the standard library's folder
    for name in set(sys.modules).difference(_BEFORE_RUN):
        if name in ("ctypes", "_ctypes"):
            return True
        try:  # read past the module's own attribute lookup: a lazy module would load itself
            path = object.__getattribute__(sys.modules[name], "__dict__").get("__file__")
        except Exception:
            continue
        foreign = type(path) is str and (not path.startswith(library) or "-packages" + os.sep in path)
        if foreign and path.endswith(_EXTENSIONS):  # outside it, or in its site- or dist-packages
            return True
    return False
