"""Drives an awaitable by hand, without importing asyncio, for ``_gym_runner.wait``.

A file of its own because the shim is compiled afresh in every sandbox and only some runs need this
driver (an async verify whose verifier has not imported asyncio): in ``_gym_runner_rare`` it cost
every run that loads that module 1-3 ms of compiling. ``wait`` loads it (and not that module) only
to drive a coroutine by hand; on NeMo Gym's server from the source ``take_over`` read before any
code of the task ran (``_gym_runner.late_module``). Standard library only."""

import _contextvars
import _thread
import sys

from _gym_runner import _wait_for

TYPE_CHECKING = False  # typing is not imported at run time (start-up time is benchmarked)
if TYPE_CHECKING:
    from typing import Any, Optional, Tuple


def run(awaitable: "Any") -> "Any":
    """The result of ``awaitable``, as ``asyncio.run`` gives it: driven by hand while it needs no
    event loop, on a loop of its own from the moment it imports asyncio (see ``_Drive``)."""
    return _Drive(_wait_for(awaitable)).run()


class _Drive:
    """Runs a coroutine by hand, step by step, as the task ``asyncio.run`` makes would, until it
    needs an event loop; meanwhile it is the first ``sys.meta_path`` finder, to see asyncio imported.

    - It runs in a copy of the current context, as that task would: a ``contextvars`` token made
      in one step can be reset in a later one, on the loop or not.
    - Without asyncio there is no loop and nothing else to run: a bare ``yield`` (a ``sleep(0)``)
      just resumes it, and anything else yielded gets the error a task throws in (a bad yield).
    - When the coroutine imports asyncio (it cannot await a future without it), the rest of that
      step must find a running loop: as soon as asyncio has loaded, ``_AsyncioLoader`` makes a new
      loop the running one, with a current task, as ``asyncio.run`` and the loop would before that
      task's first step. The step goes on as that first step; at its end (a yield, a return, an
      exception) the loop stops being the running one, and ``_finish`` runs the rest as
      ``asyncio.run`` does: the task (a ``_Continuation``) ends its first step as the step by hand
      ended and runs every later one; then the other tasks are cancelled, async generators and the
      default executor shut down, and the loop closed.
    """

    def __init__(self, coroutine: "Any") -> None:
        self.coroutine = coroutine
        self.context = _contextvars.copy_context()
        self.thread: Optional[int] = _thread.get_ident()  # None once the drive is over
        self.asyncio: Any = None  # set with the three below when the coroutine imports asyncio
        self.loop: Any = None
        self.task: Any = None
        self.asyncgen_hooks: Any = None
        # How the last step by hand ended, for the task's first step: (kind, value) with kind one
        # of "yield", "return" and "raise".
        self.pending: Optional[Tuple[str, Any]] = None

    def run(self) -> "Any":
        sys.meta_path.insert(0, self)
        try:
            step, argument = self.coroutine.send, None
            while True:
                if self.loop is None:
                    # asyncio imported meanwhile by another thread (find_spec sees this one's
                    # imports alone): the loop starts before the next step.
                    imported = sys.modules.get("asyncio")
                    spec = getattr(imported, "__spec__", None)
                    if imported is not None and not getattr(spec, "_initializing", False):
                        self.start_loop(imported)
                try:
                    yielded = self.context.run(step, argument)
                except StopIteration as done:
                    if self.loop is None:
                        return done.value
                    self.pending = ("return", done.value)
                    break
                except BaseException as error:
                    if self.loop is None:
                        raise
                    self.pending = ("raise", error)
                    break
                if self.loop is not None:
                    self.pending = ("yield", yielded)
                    break
                if yielded is None:
                    step, argument = self.coroutine.send, None
                else:  # the error an asyncio task throws in (no future can come without asyncio)
                    step, argument = self.coroutine.throw, RuntimeError(f"Task got bad yield: {yielded!r}")
        finally:
            self.thread = None
            try:
                sys.meta_path.remove(self)
            except ValueError:  # the coroutine replaced sys.meta_path
                pass
            if self.loop is not None:  # what the loop undoes after a step and after run_forever
                sys.set_asyncgen_hooks(*self.asyncgen_hooks)
                self.loop._thread_id = None
                self.asyncio.events._set_running_loop(None)
                self.asyncio.tasks._leave_task(self.loop, self.task)
        return self._finish()

    def start_loop(self, asyncio: "Any") -> None:
        """What ``asyncio.run`` does before its task's first step, and the loop before it runs a
        step, once asyncio is there: the step about to run (or running) is that first step."""
        if self.asyncio is not None or _thread.get_ident() != self.thread:
            return
        loop = asyncio.new_event_loop()
        try:
            asyncio.set_event_loop(loop)
            task = loop.create_task(_Continuation(self))
        except BaseException:
            asyncio.set_event_loop(None)
            loop.close()
            raise
        self.asyncio, self.loop, self.task = asyncio, loop, task
        self.asyncgen_hooks = sys.get_asyncgen_hooks()
        sys.set_asyncgen_hooks(firstiter=loop._asyncgen_firstiter_hook, finalizer=loop._asyncgen_finalizer_hook)
        loop._thread_id = self.thread  # loop.is_running(), as inside run_forever
        asyncio.events._set_running_loop(loop)
        asyncio.tasks._enter_task(loop, task)

    def find_spec(self, name: "str", path: "Any" = None, target: "Any" = None) -> "Any":
        """asyncio's spec as the other finders find it, loaded by an ``_AsyncioLoader``; ``None``
        (the next finder's turn) for any other module, or asyncio imported by another thread."""
        if name != "asyncio" or self.asyncio is not None or _thread.get_ident() != self.thread:
            return None
        for finder in list(sys.meta_path):
            find_spec = getattr(finder, "find_spec", None) if finder is not self else None
            spec = find_spec(name, path, target) if find_spec is not None else None
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _AsyncioLoader(self, spec)
                return spec
        return None

    def _finish(self) -> "Any":
        """The rest of ``asyncio.run`` (3.8-3.13 alike): the task to its end, then the clean-up."""
        asyncio, loop = self.asyncio, self.loop
        try:
            return loop.run_until_complete(self.task)
        finally:
            self.task = None
            try:
                asyncio.runners._cancel_all_tasks(loop)
                loop.run_until_complete(loop.shutdown_asyncgens())
                if hasattr(loop, "shutdown_default_executor"):  # 3.9+
                    timeout = getattr(asyncio.constants, "THREAD_JOIN_TIMEOUT", None)  # passed on 3.12+
                    arguments = () if timeout is None else (timeout,)
                    loop.run_until_complete(loop.shutdown_default_executor(*arguments))
            finally:
                asyncio.set_event_loop(None)
                loop.close()


class _AsyncioLoader:
    """asyncio's own loader, then what ``asyncio.run`` does before its task's first step and the
    loop before it runs a step: the step that imported asyncio is that first step. The spec and the
    module get the original loader back."""

    def __init__(self, drive: "_Drive", spec: "Any") -> None:
        self.drive, self.spec, self.loader = drive, spec, spec.loader
        if hasattr(self.loader, "exec_module"):
            self.exec_module = self._exec_module
        else:  # a legacy loader (zipimport before 3.10)
            self.load_module = self._load_module

    def __getattr__(self, name: "str") -> "Any":
        return getattr(self.loader, name)

    def _exec_module(self, module: "Any") -> None:
        self.spec.loader = module.__loader__ = self.loader
        self.loader.exec_module(module)
        self.drive.start_loop(module)

    def _load_module(self, name: "str") -> "Any":
        self.spec.loader = self.loader
        module = self.loader.load_module(name)
        self.drive.start_loop(module)
        return module


class _Continuation:
    """The coroutine of the task that finishes a ``_Drive``'s coroutine on its loop: its first step
    ends as the last step by hand did (that was the task's first step, begun before the task ran),
    and every later step is a step of the coroutine, in the drive's context. A task takes it for a
    coroutine (``send``, ``throw``, ``close`` and ``__await__``)."""

    def __init__(self, drive: "_Drive") -> None:
        self.drive = drive

    def send(self, value: "Any") -> "Any":
        drive = self.drive
        pending, drive.pending = drive.pending, None
        if pending is None:
            return drive.context.run(drive.coroutine.send, value)
        kind, result = pending
        if kind == "yield":
            return result
        if kind == "return":
            raise StopIteration(result)
        raise result

    def throw(self, error: "Any", *rest: "Any") -> "Any":
        """A task cancelled before its first step throws in at once (``Task.__step``)."""
        drive = self.drive
        pending, drive.pending = drive.pending, None
        if pending is not None:
            kind, result = pending
            if kind == "raise":  # the coroutine's own exception wins, as in a task's step
                raise result
            if kind == "return":  # the task ends cancelled, as when cancelled right before it returned
                raise error
            # The step awaited a future of the loop while its task was being cancelled: the task
            # cancels that future (and wakes up with its CancelledError) when it can.
            awaits = getattr(result, "_asyncio_future_blocking", False) and result is not drive.task
            if awaits and drive.asyncio.futures._get_loop(result) is drive.loop:
                message = error.args[0] if isinstance(error, BaseException) and error.args else None
                if result.cancel() if message is None else result.cancel(msg=message):
                    return result
        return drive.context.run(drive.coroutine.throw, error, *rest)

    def close(self) -> None:
        self.drive.pending = None
        self.drive.context.run(self.drive.coroutine.close)

    def __await__(self) -> "Any":
        return self
