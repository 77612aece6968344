"""pathlib, for a verify that declares ``workspace``, is imported with what it runs only on some uses
(``re``, ``fnmatch``, ``ntpath``, ``urllib.parse``, 3.8-3.11's ``functools`` and 3.13's ``contextlib``)
left unrun until first used: most of pathlib's import on 3.8-3.11. A deferred module must work exactly as an imported
one for every importer, from any thread, and fail as a failed import fails.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from nemo_gym.data.tasks.harbor.bytecode import shim_dir

pytestmark = pytest.mark.every_python  # the in-sandbox part: proven on every Python (noxfile)

# Which of them pathlib's import runs itself, and so never waits: fnmatch on 3.12 (and so re), re
# on 3.13 (glob's).
RUN_AT_IMPORT = (
    {"re", "fnmatch"} if sys.version_info[:2] == (3, 12) else {"re"} if sys.version_info >= (3, 13) else set()
)
DEFERRED = {"re", "fnmatch", "ntpath", "urllib.parse"} | (
    {"functools"} if sys.version_info < (3, 12) else {"contextlib"} if sys.version_info >= (3, 13) else set()
)


def _run(tmp_path: Path, modules: dict, script: str) -> subprocess.CompletedProcess:
    """``script`` in a fresh interpreter with the runner importable as ``runner`` and ``modules``
    (name: source) on sys.path."""
    for name, source in modules.items():
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    prologue = f"import sys\nsys.path[:0] = [{str(tmp_path)!r}, {str(shim_dir())!r}]\nimport _gym_runner as runner\n"
    return subprocess.run(
        [sys.executable, "-S", "-c", prologue + textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_pathlib_comes_with_what_it_uses_later_unrun(tmp_path: Path):
    # In an interpreter without site (whose .pth files may import pathlib first, as an editable
    # install's does): what path_class, the runner's import of pathlib for workspace, leaves.
    done = _run(
        tmp_path,
        {},
        f"""
        path = runner.path_class()
        assert path is sys.modules["pathlib"].Path
        assert sys.modules["urllib"].parse is sys.modules["urllib.parse"]  # as an import leaves them
        # functools' collections (with heapq, keyword, reprlib) stays out where functools waits.
        assert ("collections" in sys.modules) == (sys.version_info >= (3, 12)), sorted(sys.modules)
        print(sorted((name, type(sys.modules[name]).__name__) for name in {sorted(DEFERRED)!r}))
        """,
    )
    assert done.returncode == 0, done.stderr
    expected = sorted((name, "module" if name in RUN_AT_IMPORT else "_Deferred") for name in DEFERRED)
    assert done.stdout.strip() == str(expected)


def test_a_verify_without_workspace_defers_nothing(run_shim):
    run = run_shim(
        """
        import sys

        def verify(task_data):
            return float(not any(type(module).__name__ == "_Deferred" for module in list(sys.modules.values())))
        """
    )
    assert run.reward == {"reward": 1.0}, run.output


def test_deferred_modules_work_as_imported_ones_for_every_importer(run_shim):
    run = run_shim(
        """
        import sys

        def verify(workspace):
            import pathlib, re, urllib.parse, ntpath
            from urllib.parse import quote_from_bytes, quote
            assert "compile" in dir(re)  # dir() runs it: no half-empty module
            assert re.compile("a+").fullmatch("aa") and sys.modules["re"] is re
            assert type(re) is type(sys) and type(urllib.parse) is type(sys)
            assert urllib.parse is sys.modules["urllib"].parse  # the package holds its submodule
            assert quote_from_bytes(b"a b") == "a%20b" == quote("a b")
            assert workspace.as_uri() == "file://" + quote(str(workspace))
            assert [path.name for path in workspace.glob("*.txt")] == ["answer.txt"]
            assert workspace.joinpath("answer.txt").match("*.TXT") is False
            assert ntpath.join("a", "b") == "a\\\\b" and str(pathlib.PureWindowsPath("c:/x")) == "c:\\\\x"
            import fnmatch
            assert fnmatch.fnmatch("x.txt", "*.txt") and type(fnmatch) is type(sys)
            if sys.version_info >= (3, 13):
                import contextlib
                with contextlib.suppress(KeyError):
                    raise KeyError
            # pathlib's own cache works as functools' (3.8-3.11 decorated it while functools waited),
            # and a verify's own lru_cache is functools' own.
            import functools
            from functools import lru_cache
            assert type(functools) is type(sys) and lru_cache is functools.lru_cache
            assert type(lru_cache(len)).__name__ == "_lru_cache_wrapper"
            if sys.version_info < (3, 12):
                hits = pathlib._make_selector.cache_info().hits
                assert list(workspace.glob("*.txt")) and pathlib._make_selector.cache_info().hits == hits + 1
            left = [name for name, module in list(sys.modules.items()) if type(module).__name__ == "_Deferred"]
            return {"reward": 1.0, "left_deferred": len(left)}
        """,
        workspace_files={"answer.txt": "42"},
    )
    assert run.reward == {"reward": 1.0, "left_deferred": 0}, run.output


def test_deferred_modules_run_the_standard_librarys_code_whatever_the_agent_planted(run_shim):
    # They run once verify has started, from the working directory: the module found as they were
    # deferred runs, never one of the agent's of the same name (nor one PYTHONPATH points at there).
    planted = "raise SystemExit('planted module imported')\n"
    names = ("re.py", "fnmatch.py", "ntpath.py", "contextlib.py", "glob.py", "functools.py", "heapq.py", "reprlib.py")
    workspace = {name: planted for name in names}
    workspace.update({"urllib/__init__.py": planted, "urllib/parse.py": planted, "answer.txt": "42"})
    workspace.update({"collections/__init__.py": planted, "keyword.py": planted})  # what functools imports
    verifier = """
    import sys

    def verify(workspace):
        import re
        found = [path.name for path in workspace.glob("*.txt")] + [re.sub("4", "x", "42")]
        return float(found == ["answer.txt", "x2"] and workspace.as_uri().startswith("file:///"))
    """
    for pythonpath in (None, ".", ":"):
        env = {} if pythonpath is None else {"PYTHONPATH": pythonpath}
        run = run_shim(verifier, workspace_files=workspace, env=env)
        assert run.reward == {"reward": 1.0}, (pythonpath, run.output)
        assert "planted" not in run.output


def test_a_second_thread_waits_for_the_module_the_first_is_running(tmp_path: Path):
    slow = """
        import sys, time
        X = 1
        def late():
            return LATER
        time.sleep(0.5)
        Z = sys.modules[__name__].X + 1  # its own code looks itself up: no second run, no deadlock
        Y = 2
        LATER = 3
    """
    done = _run(
        tmp_path,
        {"slow": slow},
        """
        import threading, time
        runner.defer("slow")
        module = sys.modules["slow"]
        assert type(module).__name__ == "_Deferred", type(module)
        seen = []
        first = threading.Thread(target=lambda: seen.append(("X", module.X)))
        first.start()
        time.sleep(0.1)  # the first thread is inside the module's sleep
        seen.append(("late", module.late()))  # a name it holds already waits too (red team 100)
        seen.append(("Y", module.Y))  # so does one it has not made yet: no AttributeError
        first.join()
        print(sorted(seen), module.Z, type(module) is type(sys))
        """,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[('X', 1), ('Y', 2), ('late', 3)] 2 True"


def test_a_deferred_module_that_fails_leaves_sys_modules_and_raises_as_an_import(tmp_path: Path):
    done = _run(
        tmp_path,
        {"broken": "X = 1\nraise ValueError('broken at import')\n"},
        """
        runner.defer("broken")
        module = sys.modules["broken"]
        for attempt in range(2):
            try:
                module.X if attempt == 0 else __import__("broken")
            except ValueError as error:
                print(attempt, error, "broken" in sys.modules)
        """,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["0 broken at import False", "1 broken at import False"]


def test_what_is_imported_already_or_not_found_is_not_deferred(tmp_path: Path):
    done = _run(
        tmp_path,
        {},
        """
        import os
        runner.defer("os")
        runner.defer("no_such_module_here")
        print(type(sys.modules["os"]) is type(sys), "no_such_module_here" in sys.modules)
        """,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True False"


def test_a_forwarded_name_runs_its_module_when_called(tmp_path: Path):
    done = _run(
        tmp_path,
        {"late": "def double(value):\n    return 2 * value\nRAN = True\n"},
        """
        runner.defer("late", ("double",))
        from late import double  # what pathlib does with urllib.parse's quote_from_bytes
        module = sys.modules["late"]
        print(type(module).__name__, double(21), type(module).__name__, module.double is not double, module.RAN)
        """,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "_Deferred 42 module True True"


def test_a_cache_decorated_while_functools_waits_is_functools_own_once_used(tmp_path: Path):
    # What pathlib's import does with functools.lru_cache on 3.8-3.11, in every form lru_cache takes.
    done = _run(
        tmp_path,
        {},
        """
        runner.defer("functools", (), ("lru_cache",))
        functools = sys.modules["functools"]
        calls = []
        def square(value):
            calls.append(value)
            return value * value
        decorated = [functools.lru_cache()(square), functools.lru_cache(maxsize=1)(square), functools.lru_cache(square)]
        runner.forget_cached("functools", ("lru_cache",))
        print(type(functools).__name__, "collections" in sys.modules)
        import threading  # which imports functools on some Pythons
        threads = [threading.Thread(target=decorated[0], args=(3,)) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        print(type(functools).__name__, [function(3) for function in decorated], len(calls))
        print(decorated[0].cache_info().hits, decorated[1].cache_info().maxsize, decorated[2].__wrapped__ is square)
        from functools import lru_cache
        print(type(lru_cache(square)).__name__)
        """,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "_Deferred False",  # decorating ran nothing
        "module [9, 9, 9] 3",  # one function per decorator: the four threads' calls were one miss
        "4 1 True",  # functools' own cache behind each
        "_lru_cache_wrapper",  # forgotten after pathlib's import: a later import gets functools' own
    ]


# Red team 102: the modules a plain import of pathlib loads before verify, a deferred one imports as it
# first runs, inside verify. A verify that put the workspace first on sys.path (to import the agent's
# solution) and then used re ran the agent's enum.py, and through it forged its reward. Each is found
# where pathlib's import would have found it. The control, a verifier that imports pathlib itself (no
# deferral), shows the planted names are all ones a plain import loads before verify runs.
PLANTED_BENEATH = (
    "enum",
    "collections",
    "keyword",
    "heapq",
    "reprlib",
    "types",
    "copyreg",
    "operator",
    "warnings",
    "sre_compile",
    "sre_parse",
    "sre_constants",
    "nt",  # ntpath's import tries it, and _winapi, expecting neither on POSIX (red team 103)
    "_winapi",
)
USES_THE_DEFERRED = """
import sys

def verify(workspace):
    sys.path.insert(0, str(workspace))  # as a verify that imports the agent's solution does
    import solution
    import fnmatch, functools, ntpath, re
    found = [path.name for path in workspace.glob("*.txt")] + [re.sub("4", "x", "42"), solution.ANSWER]
    found += [functools.reduce(lambda a, b: a + b, [1, 2]), fnmatch.fnmatch("a.txt", "*.txt"), ntpath.join("a", "b")]
    return float(found == ["answer.txt", "x2", 42, 3, True, "a\\\\b"] and workspace.as_uri().startswith("file:///"))
"""


@pytest.mark.parametrize("control", [False, True])
def test_what_a_deferred_module_imports_is_found_where_pathlibs_import_found_it(run_shim, control):
    planted = "raise SystemExit('planted module imported')\n"
    workspace = {f"{name}.py": planted for name in PLANTED_BENEATH if name != "collections"}
    workspace.update({"collections/__init__.py": planted, "answer.txt": "42", "solution.py": "ANSWER = 42\n"})
    run = run_shim(("import pathlib\n" if control else "") + USES_THE_DEFERRED, workspace_files=workspace)
    assert run.reward == {"reward": 1.0}, run.output
    assert "planted" not in run.output


def test_walking_sys_modules_for_where_each_came_from_runs_no_deferred_one(run_shim):
    # Red team 102: reading __file__ of every module ran a deferred one, whose imports added modules to
    # sys.modules under the walk (RuntimeError: dictionary changed size during iteration).
    run = run_shim(
        """
        import sys

        PRELOADED = "pathlib" in sys.modules  # then nothing is deferred (an editable install's .pth, say)

        def verify(workspace):
            deferred = [name for name, module in sys.modules.items() if type(module).__name__ == "_Deferred"]
            files = [getattr(module, "__file__", None) for module in sys.modules.values()]
            packages = [getattr(module, "__package__", None) for module in sys.modules.values()]
            inside = [name for name in files if name and name.startswith(str(workspace))]
            still = [name for name in deferred if type(sys.modules[name]).__name__ == "_Deferred"]
            ok = not inside and len(files) == len(packages) and len(still) == len(deferred)
            return {"reward": float(ok), "deferred": len(still), "preloaded": float(PRELOADED)}
        """
    )
    assert run.reward is not None and run.reward["reward"] == 1.0, run.output
    assert (run.reward["deferred"] > 0) == (run.reward["preloaded"] == 0.0), run.reward


def test_a_fork_while_another_thread_runs_a_deferred_module_waits_for_it(tmp_path: Path):
    # Red team 102: the child of a fork made while another thread ran a deferred module held a lock
    # nobody in it could release, and hung at its first use of that module.
    slow = "import time\nX = 1\ntime.sleep(0.5)\nY = 2\n"
    done = _run(
        tmp_path,
        {"slow": slow},
        """
        import os, threading, time
        runner.defer("slow")
        module = sys.modules["slow"]
        # The other thread lives on after the run, so the fork does not race its exit (the one failure
        # seen, a child that crashed on 3.8 under load, forked as that thread ended).
        ended = threading.Event()
        first = threading.Thread(target=lambda: (module.X, ended.wait()))
        first.start()
        time.sleep(0.1)  # the other thread is inside the module's sleep
        child = os.fork()
        if child == 0:
            import signal
            signal.alarm(5)  # a hang ends here, with SIGALRM
            os._exit(0 if (module.X, module.Y) == (1, 2) else 3)
        _, status = os.waitpid(child, 0)
        ended.set()
        first.join()
        print(status, module.Y)
        """,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0 2"


def test_another_threads_imports_while_a_deferred_module_runs_are_its_own(tmp_path: Path):
    # Red team 103: the finder of a deferred module's imports went into sys.meta_path as a run began and
    # out as it ended, while another thread's import walked the list (which then skipped the path finder:
    # ModuleNotFoundError for the verifier's own module). It is there from the first deferral on, never
    # moved, and finds nothing for a thread other than the one running the deferred module.
    later = tmp_path / "later"
    later.mkdir()
    (later / "later_module.py").write_text("VALUE = 7\n")
    done = _run(
        tmp_path,
        {"slow": "import time\nX = 1\ntime.sleep(0.5)\n"},
        f"""
        import threading, time
        runner.defer("slow")
        module = sys.modules["slow"]
        before = list(sys.meta_path)
        sys.path.append({str(later)!r})  # not on sys.path when the module was deferred
        first = threading.Thread(target=lambda: module.X)
        first.start()
        time.sleep(0.1)  # the other thread is inside the module's sleep
        during = list(sys.meta_path)
        import later_module
        first.join()
        print(later_module.VALUE, during == before == list(sys.meta_path), type(module) is type(sys))
        """,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "7 True True"


def _brought_by_pathlib(*, deferred: bool) -> set:
    """The top-level modules that importing pathlib puts in sys.modules, in an interpreter without site
    that has imported the runner: plainly, or as the runner does (``path_class``)."""
    body = "runner.path_class()" if deferred else "import pathlib"
    script = (
        f"import sys\nsys.path.insert(0, {str(shim_dir())!r})\nimport _gym_runner as runner\n"
        f"before = set(sys.modules)\n{body}\nprint(' '.join(sorted(set(sys.modules) - before)))\n"
    )
    done = subprocess.run([sys.executable, "-S", "-c", script], capture_output=True, text=True, check=True)
    return {name for name in done.stdout.split() if "." not in name}


def test_what_pathlibs_import_brings_and_the_deferral_leaves_out_is_listed(tmp_path: Path):
    # Red team 104: those names a verify imports itself later are found where pathlib's import would have
    # found them (_PATHLIB_BRINGS): the list must be whole on each Python, and (red team 105) hold no other
    # name, which a vendored module of the verifier's would lose to the standard library's.
    left_out = _brought_by_pathlib(deferred=False) - _brought_by_pathlib(deferred=True)
    assert "collections" in left_out or sys.version_info >= (3, 12), left_out  # the test sees what it should
    done = _run(tmp_path, {}, "print(' '.join(sorted(runner._PATHLIB_BRINGS)))")
    assert done.returncode == 0, done.stderr
    assert set(done.stdout.split()) == left_out


def test_pathlib_is_imported_without_changing_sys_path(run_shim):
    # Red team 105: path_class set sys.path to the runner's while it imported pathlib, and a thread
    # verifier.py had started, importing its own helpers meanwhile, found none of them.
    run = run_shim(
        """
        import sys

        class Watched(list):
            changed = []

            def __setitem__(self, *args):
                Watched.changed.append(args[0])
                list.__setitem__(self, *args)

        sys.path = Watched(sys.path)

        def verify(workspace):
            return float(not Watched.changed and type(sys.path) is Watched and workspace.is_dir())
        """
    )
    assert run.reward == {"reward": 1.0}, run.output


@pytest.mark.parametrize("control", [False, True])
def test_what_pathlib_brings_is_found_where_its_import_found_it_whoever_imports_it(run_shim, control):
    # Red team 104: a verify that put the workspace first on sys.path (to import the agent's solution) and
    # then imported collections itself ran the agent's: a plain import of pathlib had loaded it before.
    names = sorted(_brought_by_pathlib(deferred=False) & (set(PLANTED_BENEATH) | {"math", "ipaddress"}))
    planted = "raise SystemExit('planted module imported')\n"
    workspace = {f"{name}.py": planted for name in names if name != "collections"}
    workspace.update({"collections/__init__.py": planted, "answer.txt": "42", "solution.py": "ANSWER = 42\n"})
    verifier = f"""
import importlib, sys

def verify(workspace):
    sys.path.insert(0, str(workspace))
    import solution
    loaded = [importlib.import_module(name) for name in {names!r}]
    return float(solution.ANSWER == 42 and all(not module.__file__.startswith(str(workspace)) for module in loaded if getattr(module, "__file__", None)))
"""
    run = run_shim(("import pathlib\n" if control else "") + verifier, workspace_files=workspace)
    assert run.reward == {"reward": 1.0}, (names, run.output)
    assert "planted" not in run.output


@pytest.mark.parametrize("control", [False, True])
def test_pathlib_is_imported_on_the_runners_sys_path_whatever_verifier_py_did_to_it(run_shim, tmp_path, control):
    # Red team 104: a verifier.py that put a folder first on sys.path at its top (a common
    # `sys.path.insert(0, "/app")`) had the agent's pathlib.py there imported for its workspace, and
    # deferred modules found there too (its enum.py, its nt.py).
    workspace = tmp_path / "workspace"
    planted = "raise SystemExit('planted module imported')\n"
    files = {name: planted for name in ("pathlib.py", "enum.py", "nt.py", "_winapi.py", "types.py")}
    files.update({"answer.txt": "42"})
    verifier = f"""
import sys
sys.path.insert(0, {str(workspace)!r})

def verify(workspace):
    import ntpath, re
    found = [re.sub("4", "x", (workspace / "answer.txt").read_text()), ntpath.join("a", "b")]
    return float(found == ["x2", "a\\\\b"] and [path.name for path in workspace.glob("*.txt")] == ["answer.txt"])
"""
    run = run_shim(("import pathlib\n" if control else "") + verifier, workspace_files=files)
    assert run.reward == {"reward": 1.0}, run.output
    assert "planted" not in run.output
