"""An ``async def`` verify through the real test.sh: driven by hand, without asyncio, while it needs
no event loop; from the moment it imports asyncio, on a loop of its own exactly as under
``asyncio.run``; and through ``asyncio.run`` itself when the verifier imported asyncio at its top.

Every verifier records, at the runner's exit (an ``atexit`` hook it registers), whether asyncio was
ever imported and what the run left behind: the finder, a running loop, async generator hooks, an
open loop. Each loop case runs twice, asyncio imported inside verify (the hand drive hands over to a
loop) and at the top (``asyncio.run``): both must give the same reward.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from support import make_bin, pyenv_python

pytestmark = pytest.mark.every_python  # the in-sandbox part: proven on every Python (noxfile)

MISSING = "no reward written: the run scores 0 (harbor:missing_reward)"

PROBE = """
import atexit as _atexit, json as _json, os as _os, sys as _sys
_PROBE = _os.path.abspath("probe.json")
LOOPS = []
def _probe():
    asyncio = _sys.modules.get("asyncio")
    facts = {
        "asyncio": asyncio is not None,
        "finders": [type(f).__name__ for f in _sys.meta_path if type(f).__module__.startswith("_gym_")],
        "asyncgen_hooks": [hook is None for hook in _sys.get_asyncgen_hooks()],
        "running_loop": asyncio is not None and asyncio.events._get_running_loop() is not None,
        "loops_closed": [loop.is_closed() for loop in LOOPS],
    }
    with open(_PROBE, "w") as handle:
        _json.dump(facts, handle)
_atexit.register(_probe)
"""


def _source(body: str, asyncio_at_top: bool) -> str:
    return ("import asyncio\n" if asyncio_at_top else "") + PROBE + body


def _probe(run) -> dict:
    facts = json.loads((run.workspace / "probe.json").read_text())
    assert facts["finders"] == [] and facts["asyncgen_hooks"] == [True, True] and not facts["running_loop"], facts
    assert all(facts["loops_closed"]), facts
    return facts


@pytest.fixture
def system_path(python_bin: Path) -> str:
    """The test's python3 first, then the system's programs (``true`` for a subprocess)."""
    return f"{python_bin}:/usr/bin:/bin"


# Verifiers that never wait on an event loop: (id, source, expected reward.json).
NO_LOOP = [
    ("returns", "async def verify(task_data):\n    return {'reward': 1, 'n': task_data['n']}\n", {"reward": 1, "n": 3}),
    (
        "awaits-coroutines",
        """
async def double(x):
    return 2 * x
async def verify():
    return {"reward": 1, "v": await double(await double(1))}
""",
        {"reward": 1, "v": 4},
    ),
    (
        "awaitable-yielding-nothing",
        """
class Ready:
    def __init__(self, value):
        self.value = value
    def __await__(self):
        return self.value
        yield
async def verify():
    return {"reward": await Ready(0.5)}
""",
        {"reward": 0.5},
    ),
    (
        "sync-returning-coroutine",
        "async def grade(x):\n    return x\ndef verify(task_data):\n    return grade(task_data['n'] / 4)\n",
        {"reward": 0.75},
    ),
    (
        "bare-yield",  # asyncio's sleep(0) without asyncio: nothing else to run, so it just goes on
        """
import types
@types.coroutine
def pause():
    yield
async def verify():
    await pause()
    await pause()
    return 1
""",
        {"reward": 1},
    ),
    (
        "async-generator-and-context-manager",
        """
class Managed:
    async def __aenter__(self):
        return 2
    async def __aexit__(self, *exc):
        return False
async def numbers():
    for n in range(4):
        yield n
async def verify():
    async with Managed() as two:
        return {"reward": 1, "total": sum([n async for n in numbers()]) * two}
""",
        {"reward": 1, "total": 12},
    ),
    (
        "context-var-token",
        """
import contextvars
VAR = contextvars.ContextVar("v", default=0)
async def verify():
    token = VAR.set(5)
    seen = VAR.get()
    VAR.reset(token)
    return {"reward": 1, "seen": seen, "after": VAR.get()}
""",
        {"reward": 1, "seen": 5, "after": 0},
    ),
    (
        "bad-yield",  # what an asyncio task throws in, with or without asyncio
        """
class Odd:
    def __await__(self):
        yield 5
async def verify():
    try:
        await Odd()
    except RuntimeError as error:
        return {"reward": float(str(error) == "Task got bad yield: 5")}
    return 0
""",
        {"reward": 1.0},
    ),
]


@pytest.mark.parametrize("asyncio_at_top", [False, True], ids=["no-asyncio", "asyncio-at-top"])
@pytest.mark.parametrize("body, expected", [case[1:] for case in NO_LOOP], ids=[case[0] for case in NO_LOOP])
def test_a_verify_that_needs_no_loop_never_imports_asyncio(run_shim, body, expected, asyncio_at_top):
    run = run_shim(_source(body, asyncio_at_top), {"n": 3})
    assert run.returncode == 0, run.output
    assert run.reward == expected
    assert _probe(run)["asyncio"] is asyncio_at_top  # the whole run, runner included


# Verifiers that wait on the loop; each imports asyncio inside verify: (id, source, expected).
ON_LOOP = [
    (
        "sleep",
        """
import time
async def verify():
    import asyncio
    start = time.monotonic()
    await asyncio.sleep(0.05)
    return {"reward": 1, "slept": int(time.monotonic() - start >= 0.05)}
""",
        {"reward": 1, "slept": 1},
    ),
    (
        "subprocess",
        """
import sys
async def verify():
    import asyncio
    true = await asyncio.create_subprocess_exec("true")
    code = await true.wait()
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "print(6 * 7)", stdout=asyncio.subprocess.PIPE
    )
    out, _ = await child.communicate()
    return {"reward": float(code == 0 and child.returncode == 0), "out": int(out)}
""",
        {"reward": 1.0, "out": 42},
    ),
    (
        "gather",
        """
async def verify():
    import asyncio
    async def part(n):
        await asyncio.sleep(0.01 * (5 - n))
        return n
    parts = await asyncio.gather(*(part(n) for n in range(5)))
    return {"reward": 1, "sum": sum(parts), "ordered": int(parts == sorted(parts))}
""",
        {"reward": 1, "sum": 10, "ordered": 1},
    ),
    (
        "wait-for",
        """
async def verify():
    import asyncio
    quick = await asyncio.wait_for(asyncio.sleep(0, result=3), timeout=5)
    try:
        await asyncio.wait_for(asyncio.sleep(10), timeout=0.05)
        timed_out = 0
    except asyncio.TimeoutError:
        timed_out = 1
    return {"reward": 1, "quick": quick, "timed_out": timed_out}
""",
        {"reward": 1, "quick": 3, "timed_out": 1},
    ),
    (
        "awaitable-yielding-nothing",
        """
class Ready:
    def __await__(self):
        return 0.25
        yield
async def verify():
    import asyncio
    await asyncio.sleep(0)
    return await Ready()
""",
        {"reward": 0.25},
    ),
    (
        "submodule-import",  # asyncio first imported through a submodule, before any await
        """
async def verify():
    from asyncio.subprocess import PIPE
    from asyncio import get_running_loop, sleep
    get_running_loop()
    await sleep(0)
    return {"reward": 1, "pipe": int(PIPE == -1)}
""",
        {"reward": 1, "pipe": 1},
    ),
    (
        "the-loop-as-asyncio-run-has-it",
        """
async def verify():
    import asyncio
    loop, task = asyncio.get_running_loop(), asyncio.current_task()
    LOOPS.append(loop)
    running, tasks = loop.is_running(), len(asyncio.all_tasks())
    same_loop = asyncio.get_event_loop() is loop
    await asyncio.sleep(0)
    same = asyncio.get_running_loop() is loop and asyncio.current_task() is task and task is not None
    executor = await loop.run_in_executor(None, sum, [1, 2])
    try:
        asyncio.run(asyncio.sleep(0))
        nested = 0
    except RuntimeError as error:
        nested = int("running event loop" in str(error))
    return {"reward": 1, "running": int(running), "tasks": tasks, "same_loop": int(same_loop),
            "same": int(same), "executor": executor, "nested": nested}
""",
        {"reward": 1, "running": 1, "tasks": 1, "same_loop": 1, "same": 1, "executor": 3, "nested": 1},
    ),
    (
        "context-var-token-across-await",
        """
import contextvars
VAR = contextvars.ContextVar("v", default=0)
async def verify():
    token = VAR.set(7)  # before the loop exists
    import asyncio
    token2 = VAR.set(8)
    await asyncio.sleep(0)
    seen = VAR.get()
    VAR.reset(token2)
    VAR.reset(token)
    child = await asyncio.ensure_future(asyncio.sleep(0, result=VAR.get()))
    return {"reward": 1, "seen": seen, "after": VAR.get(), "child": child}
""",
        {"reward": 1, "seen": 8, "after": 0, "child": 0},
    ),
    (
        "cancelled-before-its-first-await",  # the task cancels the child it awaits, as asyncio's does
        """
async def verify():
    import asyncio
    child = asyncio.ensure_future(asyncio.sleep(10))
    asyncio.current_task().cancel()
    try:
        await child
    except asyncio.CancelledError:
        return {"reward": 1, "child_cancelled": int(child.cancelled())}
    return 0
""",
        {"reward": 1, "child_cancelled": 1},
    ),
]


@pytest.mark.parametrize("asyncio_at_top", [False, True], ids=["imported-in-verify", "imported-at-top"])
@pytest.mark.parametrize("body, expected", [case[1:] for case in ON_LOOP], ids=[case[0] for case in ON_LOOP])
def test_a_verify_that_waits_on_the_loop(run_shim, system_path, body, expected, asyncio_at_top):
    run = run_shim(_source(body, asyncio_at_top), path=system_path)
    assert run.returncode == 0, run.output
    assert run.reward == expected
    assert _probe(run)["asyncio"]


TIMEOUT_AND_TASK_GROUP = """
async def verify():
    import asyncio
    try:
        async with asyncio.timeout(0.05):  # needs the current task, before any await
            await asyncio.sleep(10)
        timed_out = 0
    except TimeoutError:
        timed_out = 1
    async with asyncio.TaskGroup() as group:
        parts = [group.create_task(asyncio.sleep(0, result=n)) for n in range(3)]
    return {"reward": 1, "timed_out": timed_out, "sum": sum(p.result() for p in parts)}
"""


@pytest.mark.skipif(sys.version_info < (3, 11), reason="asyncio.timeout and TaskGroup are 3.11+")
@pytest.mark.parametrize("asyncio_at_top", [False, True], ids=["imported-in-verify", "imported-at-top"])
def test_timeout_and_task_group_find_their_task(run_shim, asyncio_at_top):
    run = run_shim(_source(TIMEOUT_AND_TASK_GROUP, asyncio_at_top))
    assert run.returncode == 0, run.output
    assert run.reward == {"reward": 1, "timed_out": 1, "sum": 3}


@pytest.mark.parametrize("asyncio_at_top", [False, True], ids=["imported-in-verify", "imported-at-top"])
def test_the_end_of_the_run_is_asyncio_runs(run_shim, asyncio_at_top):
    # A task left running is cancelled, an async generator left open is closed, as asyncio.run does.
    body = """
GENERATORS = []
async def numbers():
    try:
        yield 1
        yield 2
    finally:
        open("generator-closed", "w").close()
async def forever():
    import asyncio
    try:
        await asyncio.sleep(100)
    finally:
        open("task-cancelled", "w").close()
async def verify():
    import asyncio
    generator = numbers()
    GENERATORS.append(generator)  # kept alive: only the loop's shutdown can close it
    first = await generator.__anext__()  # still in the step that imported asyncio
    asyncio.ensure_future(forever())
    await asyncio.sleep(0.01)
    return first
"""
    run = run_shim(_source(body, asyncio_at_top))
    assert run.returncode == 0, run.output
    assert run.reward == {"reward": 1}
    assert (run.workspace / "generator-closed").exists() and (run.workspace / "task-cancelled").exists()
    _probe(run)


def test_verify_runs_once(run_shim):
    body = """
async def verify():
    with open("starts", "a") as handle:
        handle.write("start\\n")
    import asyncio
    with open("starts", "a") as handle:
        handle.write("imported\\n")
    await asyncio.sleep(0.01)
    return 1
"""
    run = run_shim(_source(body, False))
    assert run.reward == {"reward": 1}, run.output
    assert (run.workspace / "starts").read_text() == "start\nimported\n"


# Failures: (id, source, the runner's message). The failing line names no asyncio.
ERRORS = [
    (
        "raises-without-a-loop",
        "def helper(x):\n    raise ValueError(f'bad {x}')\nasync def verify():\n    helper(1)\n",
        "verify raised ValueError: bad 1",
    ),
    (
        "raises-in-the-step-that-imported-asyncio",
        "def helper(x):\n    raise ValueError(f'bad {x}')\nasync def verify():\n    import asyncio\n    helper(2)\n",
        "verify raised ValueError: bad 2",
    ),
    (
        "raises-after-awaiting",
        "def helper(x):\n    raise ValueError(f'bad {x}')\n"
        "async def verify():\n    import asyncio\n    await asyncio.sleep(0.01)\n    helper(3)\n",
        "verify raised ValueError: bad 3",
    ),
    (
        "exits-after-awaiting",
        "import sys\ndef helper(x):\n    sys.exit(x)\nasync def verify():\n    import asyncio\n    await asyncio.sleep(0)\n    helper(3)\n",
        "verify raised SystemExit(3)",
    ),
]


@pytest.mark.parametrize("asyncio_at_top", [False, True], ids=["asyncio-in-verify", "asyncio-at-top"])
@pytest.mark.parametrize("body, message", [case[1:] for case in ERRORS], ids=[case[0] for case in ERRORS])
def test_an_exception_reads_as_a_sync_verifys(run_shim, body, message, asyncio_at_top):
    run = run_shim(_source(body, asyncio_at_top))
    assert run.returncode == 1 and run.reward is None
    assert message in run.output and MISSING in run.output
    if "SystemExit" not in message:  # the verifier's own frames, and no one else's
        assert "in helper" in run.output and "in verify" in run.output, run.output
        assert "_gym_" not in run.output and "asyncio" not in run.output, run.output
    _probe(run)


@pytest.mark.once
@pytest.mark.parametrize("version", ["3.8", "3.9", "3.10", "3.11", "3.12", "3.13"])
def test_every_python(run_shim, tmp_path: Path, version):
    python = make_bin(tmp_path / f"python-{version}", python3=str(pyenv_python(version)))
    path = f"{python}:/usr/bin:/bin"
    for name, body, expected in NO_LOOP:
        run = run_shim(PROBE + body, {"n": 3}, path=path)
        assert run.reward == expected, (name, run.output)
        assert not _probe(run)["asyncio"], name
    cases = ON_LOOP + (
        [("timeout", TIMEOUT_AND_TASK_GROUP, {"reward": 1, "timed_out": 1, "sum": 3})]
        if tuple(map(int, version.split("."))) >= (3, 11)
        else []
    )
    for name, body, expected in cases:
        run = run_shim(PROBE + body, path=path)
        assert run.reward == expected, (name, run.output)
        assert _probe(run)["asyncio"]
    run = run_shim(PROBE + ERRORS[2][1], path=path)
    assert run.returncode == 1 and ERRORS[2][2] in run.output and "in helper" in run.output, run.output
    assert "_gym_" not in run.output and "asyncio" not in run.output, run.output


ZIPPED = """
import sys
sys.path.insert(0, ZIP)  # asyncio from a zip: zipimport's loader (a legacy one before 3.10)
async def verify():
    import asyncio
    await asyncio.sleep(0.01)
    return {"reward": 1, "zipped": int(".zip" in asyncio.__file__), "loop": int(asyncio.get_running_loop() is not None)}
"""


@pytest.mark.parametrize("version", ["3.8", "this"])
def test_asyncio_imported_from_a_zip(run_shim, tmp_path: Path, version):
    python = Path(sys.executable) if version == "this" else pyenv_python(version)
    stdlib = Path(
        subprocess.run(
            [str(python), "-c", "import asyncio, os; print(os.path.dirname(asyncio.__file__))"],
            stdout=subprocess.PIPE,
            check=True,
        )
        .stdout.decode()
        .strip()
    )
    archive = tmp_path / "asyncio.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        for source in sorted(stdlib.glob("*.py")):
            bundle.write(source, f"asyncio/{source.name}")
    bin_dir = make_bin(tmp_path / f"zip-{version}", python3=str(python))
    run = run_shim(f"ZIP = {str(archive)!r}\n" + PROBE + ZIPPED, path=str(bin_dir))
    assert run.reward == {"reward": 1, "zipped": 1, "loop": 1}, run.output
    _probe(run)
