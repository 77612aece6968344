"""The runner compiles verifier.py without ``compile()`` (whose first call builds the ``ast`` module's
types, about a tenth of a bare interpreter start), and must get exactly what ``compile`` gives:
the same code, the same file name in tracebacks and warnings, the same errors, and the module run
once."""

from __future__ import annotations

import gc
import importlib.util
import marshal
import sys
import textwrap
import traceback
from pathlib import Path
from typing import Any, List

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nemo_gym.data.tasks.harbor.bytecode import shim_dir

pytestmark = pytest.mark.every_python  # the in-sandbox part: proven on every Python (noxfile)

_SPEC = importlib.util.spec_from_file_location("_gym_runner_compile_under_test", shim_dir() / "_gym_runner.py")
assert _SPEC is not None and _SPEC.loader is not None
RUNNER = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(RUNNER)

ROOT = Path(__file__).resolve().parent.parent
PATH = "/tests/verifier.py"

SOURCES = [
    b"",
    b"def verify():\n    return 1.0\n",
    b"from __future__ import annotations\n\ndef verify(workspace: Path) -> float:\n    return 1.0\n",
    b"def verify() -> float:\n    return 1.0\n",
    b"# -*- coding: latin-1 -*-\nA = '\xe9t\xe9'\ndef verify():\n    return float(A == '\\u00e9t\\u00e9')\n",
    b"\xef\xbb\xbfdef verify():\n    return 1\n",
    b'"""Doc."""\nimport os\n\n\nclass K:\n    def m(self):\n        return [x for x in range(3) if (lambda y: y)(x)]\n',
    b"async def verify():\n    async with a as b:\n        await b\n    return {k: v async for k, v in c}\n",
    b"def g():\n    yield from (i for i in range(2))\n\n@dec\ndef f(x, /, *a, y=1, **k):\n    nonlocal_ = f'{x!r:>{y}}'\n",
    b"def outer():\n    v = 1\n    def inner():\n        nonlocal v\n        return v\n    return inner\n",
]


def _shipped_sources() -> List[bytes]:
    """Real verifiers and the SDK's own modules: larger files with every construct they use."""
    files = sorted(ROOT.glob("examples/*/verifier.py")) + sorted((ROOT / "nemo_gym" / "verifiers").glob("*.py"))
    return [file.read_bytes() for file in files]


def _same(code: Any, other: Any) -> bool:
    """Whether two code objects are the same, nested code and file names included (marshal's
    version 2 has no back-references, which depend on reference counts)."""
    return marshal.dumps(code, 2) == marshal.dumps(other, 2)


def _fast(source: bytes, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``compile_module``, which must not fall back to ``compile`` for this source."""

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("compile() was called")

    assert sys.getprofile() is None and sys.gettrace() is None, "run the tests without a profiler or tracer"
    with monkeypatch.context() as patch:
        patch.setattr(RUNNER, "compile", refused, raising=False)
        return RUNNER.compile_module(source, PATH)


@pytest.mark.parametrize("source", SOURCES + _shipped_sources())
def test_the_code_is_what_compile_gives(source: bytes, monkeypatch: pytest.MonkeyPatch):
    code = _fast(source, monkeypatch)
    assert _same(code, compile(source, PATH, "exec", dont_inherit=True))
    assert not _same(code, compile(source, "/tests/other.py", "exec", dont_inherit=True))


def _outcome(make: Any) -> Any:
    try:
        return make()
    except Exception as error:  # SyntaxError, ValueError (NUL), UnicodeDecodeError, ...
        return type(error), str(error), getattr(error, "filename", None), getattr(error, "lineno", None)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_piece_of_a_real_source_compiles_or_fails_as_compile_does(data: Any):
    # Slices of real sources, cut anywhere (inside a line, a string, a UTF-8 character): most do not
    # compile, and the error must be compile's own; those that do must give compile's code.
    source = data.draw(st.sampled_from(_shipped_sources()))
    start = data.draw(st.integers(0, len(source)))
    piece = source[start : data.draw(st.integers(start, len(source)))]
    got = _outcome(lambda: RUNNER.compile_module(piece, PATH))
    expected = _outcome(lambda: compile(piece, PATH, "exec", dont_inherit=True))
    if isinstance(expected, tuple):
        assert got == expected
    else:
        assert not isinstance(got, tuple) and _same(got, expected), got


def test_every_nested_code_names_the_file(monkeypatch: pytest.MonkeyPatch):
    code = _fast(SOURCES[6], monkeypatch)
    names, stack = [], [code]
    while stack:
        item = stack.pop()
        names.append(item.co_filename)
        stack.extend(const for const in item.co_consts if hasattr(const, "co_filename"))
    assert len(names) >= 4 and set(names) == {PATH}


def test_nothing_of_the_module_runs_and_the_hooks_are_left_as_they_were(monkeypatch: pytest.MonkeyPatch):
    ran: List[str] = []
    monkeypatch.setattr("builtins.RAN", ran, raising=False)
    filters = list(sys.modules["warnings"].filters) if "warnings" in sys.modules else None
    _fast(b"import builtins\nbuiltins.RAN.append('module')\n", monkeypatch)
    assert ran == [] and sys.getprofile() is None
    if filters is not None:
        assert sys.modules["warnings"].filters == filters


@pytest.mark.parametrize(
    "source",
    [b"def verify(:\n", b"x = 1\x00\n", b"# coding: no-such-codec\nx = 1\n", b"x = '\xff'\n", b"return 1\n"],
    ids=["syntax", "nul", "unknown-codec", "not-utf8", "outside-function"],
)
def test_an_error_is_compiles_own_naming_the_file(source: bytes):
    with pytest.raises(Exception) as expected:
        compile(source, PATH, "exec", dont_inherit=True)
    with pytest.raises(type(expected.value)) as raised:
        RUNNER.compile_module(source, PATH)
    assert str(raised.value) == str(expected.value)
    assert getattr(raised.value, "filename", None) == getattr(expected.value, "filename", None)
    assert "<string>" not in repr(raised.value.args)


def test_a_profiler_already_set_is_kept_and_compile_decides():
    calls: List[str] = []

    def profiler(frame: Any, event: str, arg: Any) -> None:
        calls.append(event)

    sys.setprofile(profiler)
    try:
        code = RUNNER.compile_module(SOURCES[1], PATH)
        assert sys.getprofile() is profiler
    finally:
        sys.setprofile(None)
    assert _same(code, compile(SOURCES[1], PATH, "exec", dont_inherit=True))
    assert calls  # the profiler saw the calls


def test_a_monitoring_tool_already_set_is_kept_and_compile_decides(monkeypatch: pytest.MonkeyPatch):
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is None:
        pytest.skip("sys.monitoring is Python 3.12+")
    calls: List[Any] = []
    monkeypatch.setattr(
        RUNNER, "compile", lambda *args, **kwargs: calls.append(args) or compile(*args, **kwargs), raising=False
    )
    tool = next(tool for tool in range(6) if monitoring.get_tool(tool) is None)
    monitoring.use_tool_id(tool, "a debugger")
    try:
        code = RUNNER.compile_module(SOURCES[1], PATH)
    finally:
        monitoring.free_tool_id(tool)
    assert len(calls) == 1 and _same(code, compile(SOURCES[1], PATH, "exec", dont_inherit=True))


def test_a_signal_handlers_exception_propagates_and_nothing_is_left_set():
    # Red team 90: a signal handler raises at the first Python code that runs, the hook; compile() would
    # have let its exception through, and the hook or the warnings filter stayed set.
    import signal

    class Deadline(Exception):
        pass

    def expire(signum: int, frame: Any) -> None:
        raise Deadline

    source = b"".join(b"def f%d(a, b):\n    return [a + b for _ in range(a)]\n" % number for number in range(3000))
    filters = list(sys.modules["warnings"].filters)
    previous = signal.signal(signal.SIGALRM, expire)
    gc.disable()  # no finalizer of the test run's may run Python code (and the handler) while compiling
    try:
        for _ in range(10):  # on a loaded machine the timer may fire before compile_module starts: again
            try:
                signal.setitimer(signal.ITIMER_REAL, 0.001)  # compiling the source takes 50 ms or more
                RUNNER.compile_module(source, PATH)
            except Deadline as error:
                if "compile_module" in {frame.name for frame in traceback.extract_tb(error.__traceback__)}:
                    break
            else:
                pytest.fail("the handler's exception did not propagate from compile_module")
        else:
            pytest.fail("the timer never fired inside compile_module")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        gc.enable()
    assert sys.getprofile() is None and sys.modules["warnings"].filters == filters


# Through the real test.sh: what an author sees.


def test_the_module_runs_exactly_once(run_shim, tmp_path: Path):
    counter = tmp_path / "imports.txt"
    run = run_shim(
        f"""
        with open({str(counter)!r}, "a") as handle:
            handle.write("imported\\n")
        def verify():
            return 1.0
        """
    )
    assert run.reward == {"reward": 1.0}, run.output
    assert counter.read_text() == "imported\n"


def test_a_syntax_error_names_verifier_py(run_shim):
    run = run_shim("def verify():\n    return 1\n\ndef broken(:\n")
    assert run.reward is None
    assert "(verifier.py, line 4)" in run.output and "<string>" not in run.output, run.output


def test_a_warning_while_compiling_names_verifier_py_and_still_grades(run_shim):
    # A SyntaxWarning on every Python 3.8+: shown by default, with the file, its line and its text.
    run = run_shim("def verify():\n    return 1.0 if 1 is not 1.5 else 0.0\n")
    assert run.reward == {"reward": 1.0}, run.output
    assert "verifier.py:2: SyntaxWarning" in run.output and "<string>" not in run.output, run.output


def test_tracebacks_and_inspect_read_verifier_py(run_shim):
    run = run_shim(
        textwrap.dedent(
            """
            import inspect
            def verify():
                source = inspect.getsource(verify)
                assert "inspect.getsource" in source, source
                raise ValueError("shown")
            """
        )
    )
    assert run.reward is None
    assert 'verifier.py", line 6, in verify' in run.output and "ValueError: shown" in run.output, run.output
