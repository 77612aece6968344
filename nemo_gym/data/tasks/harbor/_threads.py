"""Blocking calls run off the event loop, each in a thread of its own.

Not the loop's default executor: it has a few threads (``min(32, cores + 4)``), shared with the
server and with every other sandbox's calls, and an exec holds one for as long as its command runs.
With more slow gradings than threads, the rest waited in its queue while their timeouts ran, and an
honest answer scored ``harbor:verifier_timeout`` (red team 36: a batch of agents whose programs hang
made their neighbours' right answers score 0). A thread per call starts at once; there are never
more than the calls in flight (a few per verification). A call abandoned by its caller (a timeout)
finishes in its thread and its result is dropped; the thread is a daemon, so a call that never
returns (a lost engine) holds no interpreter or ``asyncio.run`` open at exit.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable, Optional, Set, TypeVar

T = TypeVar("T")
THREAD_NAME = "nemo-gym-blocking-call"


async def in_thread(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``function(*args, **kwargs)`` in a new daemon thread; its result, or its exception."""
    return await _started(function, args, kwargs)  # no local of this frame holds the future (_work)


class Calls:
    """The blocking calls of one owner (a sandbox) in flight. A call its caller gave up on (a cancelled
    or timed-out grading) runs on in its thread, and the engine's exec with it: ``settled`` returns
    once every call has ended, so the owner's next grading never runs beside an abandoned one."""

    def __init__(self) -> None:
        self._ends: Set[asyncio.Future[None]] = set()

    async def run(self, function: Callable[[], T]) -> T:
        """``function()`` in a thread of its own (``in_thread``), counted until it returns."""
        loop = asyncio.get_running_loop()
        end: asyncio.Future[None] = loop.create_future()
        self._ends.add(end)

        def counted() -> T:
            try:
                return function()
            finally:
                try:
                    loop.call_soon_threadsafe(self._ended, end)
                except RuntimeError:  # the loop has closed: nobody waits for it any more
                    pass

        return await in_thread(counted)

    def _ended(self, end: asyncio.Future[None]) -> None:
        self._ends.discard(end)
        if not end.done():
            end.set_result(None)

    async def settled(self) -> None:
        """Returns once every call started on the running loop has ended (a call of a loop that has
        closed cannot be waited for, and is forgotten)."""
        loop = asyncio.get_running_loop()
        while True:
            self._ends = {end for end in self._ends if end.get_loop() is loop}
            if not self._ends:
                return
            await asyncio.wait(set(self._ends))


def _started(function: Callable[..., T], args: Any, kwargs: Any) -> asyncio.Future[T]:
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    threading.Thread(target=_work, args=(loop, future, function, args, kwargs), name=THREAD_NAME, daemon=True).start()
    return future


def _work(loop: asyncio.AbstractEventLoop, future: Any, function: Callable[..., Any], args: Any, kwargs: Any) -> None:
    # A raised exception's traceback holds the frames it passed, here and in the awaiting task: a
    # frame that still held the future, which holds the exception, would make a cycle keeping the
    # failed call's locals (an engine stream left open, which stalls the container's next archive
    # call) until a collection. The future is dropped once delivered, as concurrent.futures does.
    try:
        result = function(*args, **kwargs)
    except BaseException as error:
        _deliver(loop, future, None, error)
        future = None
    else:
        _deliver(loop, future, result, None)


def _deliver(
    loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], result: Any, error: Optional[BaseException]
) -> None:
    try:
        loop.call_soon_threadsafe(_settle, future, result, error)
    except RuntimeError:  # the loop has closed: nobody awaits the call any more
        pass


def _settle(future: asyncio.Future[Any], result: Any, error: Optional[BaseException]) -> None:
    if future.done():  # cancelled: the caller gave up on it (a timeout)
        return
    if error is None:
        future.set_result(result)
    else:  # a future cannot hold StopIteration
        future.set_exception(RuntimeError(error) if isinstance(error, StopIteration) else error)


__all__ = ["THREAD_NAME", "Calls", "in_thread"]
