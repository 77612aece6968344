"""``_threads.in_thread``: a blocking call in a thread of its own, never the loop's default executor,
which the server and every other sandbox share (red team 36: slow gradings held all of its threads and
the next gradings timed out in its queue)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import threading
import time
import weakref
from typing import List

import pytest

from nemo_gym.data.tasks.harbor._threads import THREAD_NAME, Calls, in_thread


def test_a_call_runs_while_the_default_executor_is_held():
    release = threading.Event()

    async def run() -> str:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(max_workers=1))
        held = loop.run_in_executor(None, release.wait, 30)
        try:
            name = await asyncio.wait_for(in_thread(lambda: threading.current_thread().name), 10)
            assert not held.done()
            return name
        finally:
            release.set()
            await held

    assert asyncio.run(run()) == THREAD_NAME


def test_the_calls_exception_is_raised_to_its_caller():
    def fail(kind: type) -> None:
        raise kind("the engine went away")

    with pytest.raises(ConnectionError, match="the engine went away"):
        asyncio.run(in_thread(fail, ConnectionError))
    with pytest.raises(RuntimeError):  # a future cannot hold StopIteration
        asyncio.run(in_thread(fail, StopIteration))


def test_a_call_its_caller_gave_up_on_finishes_quietly(caplog):
    finished = threading.Event()

    def slow() -> int:
        time.sleep(0.3)
        finished.set()
        return 1

    async def run() -> None:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(in_thread(slow), 0.05)
        await asyncio.sleep(0.5)  # its result comes back to a cancelled future: dropped

    asyncio.run(run())
    assert finished.is_set()
    assert not [record for record in caplog.records if record.levelname in ("ERROR", "CRITICAL")]


def test_a_call_that_never_returns_holds_no_asyncio_run_open():
    stuck = threading.Event()
    started = time.perf_counter()

    async def run() -> None:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(in_thread(stuck.wait, 20), 0.05)

    asyncio.run(run())  # the default executor's threads are joined here; a daemon of its own is not
    assert time.perf_counter() - started < 5
    stuck.set()


def test_a_failed_calls_locals_are_freed_without_a_collection():
    # An engine stream the failed call left open held the container's next archive call (the
    # transfer-limit test stalled 120 s): nothing may keep the call's frame alive past the caller's
    # handling of its exception.
    class Stream:
        pass

    seen: List[weakref.ref[Stream]] = []

    def fail() -> None:
        stream = Stream()
        seen.append(weakref.ref(stream))
        raise ConnectionError("too large")

    async def run() -> None:
        try:
            await in_thread(fail)
        except ConnectionError:
            pass
        await asyncio.sleep(0)

    gc.disable()
    try:
        asyncio.run(run())
        for thread in threading.enumerate():  # the call's thread hands its exception over, then ends
            if thread.name == THREAD_NAME:
                thread.join(5)
        assert seen[0]() is None
    finally:
        gc.enable()


def test_calls_settled_waits_for_a_call_its_caller_gave_up_on():
    """A sandbox's next grading must not run beside an abandoned exec: settled() returns only once
    the thread of a call that timed out for its caller has ended; a call of a closed loop is forgotten."""
    calls = Calls()
    release = threading.Event()

    async def abandon() -> float:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(calls.run(lambda: release.wait(5)), 0.05)
        waiter = asyncio.ensure_future(calls.settled())
        await asyncio.sleep(0.2)
        assert not waiter.done()  # the thread still runs
        release.set()
        started = asyncio.get_running_loop().time()
        await asyncio.wait_for(waiter, 5)
        return asyncio.get_running_loop().time() - started

    assert asyncio.run(abandon()) < 1
    stuck = threading.Event()

    async def leave() -> None:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(calls.run(lambda: stuck.wait(5)), 0.05)

    asyncio.run(leave())  # that loop closes with the call still running
    asyncio.run(asyncio.wait_for(calls.settled(), 1))  # another loop cannot wait for it: forgotten
    stuck.set()


def test_a_sandboxs_turn_passes_on_only_once_its_last_exec_has_ended_however_grading_ended():
    """Red team 41: a host that gave up on an exec (ExecTimeout) returns an outcome while the exec runs
    on in the container, and the turn passed on at once, so the next grading ran beside it (and had its
    /tests wiped). The turn now waits for ``settled()`` on every way out; a grading that waits past its
    limit is told so (it masks the sample) rather than run beside it."""
    from nemo_gym.data.tasks.harbor.verification import _one_at_a_time

    class Box:
        def __init__(self) -> None:
            self.ended = asyncio.Event()

        async def settled(self) -> None:
            await self.ended.wait()

    async def turn_of(box: Box, limit: float) -> bool:
        async with _one_at_a_time(box, limit) as turn:
            return turn

    async def run() -> None:
        box = Box()
        assert await turn_of(box, 60)  # a grading that returned while its exec ran on
        waiting = asyncio.ensure_future(turn_of(box, 60))
        await asyncio.sleep(0.2)
        assert not waiting.done(), "the next grading started beside the last one's exec"
        box.ended.set()
        assert await asyncio.wait_for(waiting, 5)
        box.ended.clear()
        assert await turn_of(box, 60)
        assert await turn_of(box, 0.2) is False  # its exec never ends: the sandbox is lost
        cancelled = asyncio.ensure_future(turn_of(box, 60))
        await asyncio.sleep(0.1)
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        box.ended.set()
        assert await asyncio.wait_for(turn_of(box, 60), 5)  # the cancelled wait left the turn free

    asyncio.run(run())
