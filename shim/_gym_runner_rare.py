"""What the runner needs only off its common path: ``inspect`` for callables that are not plain
functions, awaiting an awaitable (with ``asyncio`` only once it needs an event loop; the driver
that waits without it is ``_gym_await``), full result checks with precise messages, ``json`` for
unusual keys, and ``traceback`` for errors. Kept apart because the shim is compiled afresh in every
sandbox: code the common path never runs must not cost it compile time. Standard library only.
"""

from __future__ import annotations

import math
import numbers
import os
import sys

from _gym_runner import VerifierError

TYPE_CHECKING = False  # typing is not imported at run time (start-up time is benchmarked)
if TYPE_CHECKING:
    from typing import Any, Dict, List

    from _gym_runner import Parameter


def signature_parameters(function: Any) -> List[Parameter]:
    """``(name, kind, has_default, default)`` through ``inspect.signature``, which unwraps
    ``functools.partial``, ``functools.wraps`` decorators, bound methods and ``__call__``."""
    import inspect

    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError) as error:
        raise VerifierError(f"cannot read the parameters of verify ({error})") from None
    return [
        (p.name, int(p.kind), p.default is not p.empty, None if p.default is p.empty else p.default)
        for p in signature.parameters.values()
    ]


async def _wait_for(awaitable: Any) -> Any:
    return await awaitable


def wait(awaitable: Any) -> Any:
    """The result of an awaitable (an ``async def`` verify's, or a coroutine a sync one returned),
    exactly as ``asyncio.run`` gives it, but without importing asyncio (most of an async verify's
    start-up) while the coroutine does not need an event loop.

    When asyncio is imported already (the verifier imported it: the common case), ``asyncio.run``
    runs the coroutine. Otherwise ``_gym_await`` runs it by hand, and a coroutine that never
    suspends is done without asyncio; one that imports asyncio meanwhile finishes on a loop of its
    own, as under ``asyncio.run`` (see ``_gym_await._Drive``). The coroutine is never started twice.
    """
    coroutine = _wait_for(awaitable)
    # The hand drive relies on asyncio internals (_set_running_loop, _enter_task, _leave_task, the
    # loop's _thread_id and async generator hooks) as they are on 3.8-3.13: a newer Python takes
    # asyncio.run until it is checked too.
    if "asyncio" in sys.modules or sys.version_info >= (3, 14):
        import asyncio

        return asyncio.run(coroutine)
    from _gym_runner import late_module

    return late_module("_gym_await").run(coroutine)


def describe(error: BaseException) -> str:
    if isinstance(error, SystemExit):
        return f"SystemExit({error.code!r})"
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _finite(value: Any) -> bool:
    if not isinstance(value, numbers.Real):
        return False
    try:
        return math.isfinite(float(value))
    except (OverflowError, ValueError):
        return False


def _number(value: Any) -> Any:
    """A JSON-ready copy of a finite number: ints stay exact, the rest become floats."""
    return int(value) if isinstance(value, numbers.Integral) else float(value)


def rewards_from_result(result: Any) -> Dict[str, Any]:
    """The ``reward.json`` object for any result, or ``VerifierError`` naming what is wrong."""
    expectation = "it must return a finite number or a dict of finite numbers"
    if not isinstance(result, dict):
        if _finite(result):
            return {"reward": _number(result)}
        shown = repr(result)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        raise VerifierError(f"verify returned {type(result).__name__} {shown}; {expectation}")
    if not result:
        raise VerifierError(f"verify returned an empty dict; {expectation}, with a `reward` key")
    for key, value in result.items():
        if not isinstance(key, str):
            raise VerifierError(f"verify returned a dict with the non-string key {key!r}; {expectation}")
        if not _finite(value):
            raise VerifierError(f"verify returned {type(value).__name__} {value!r} for {key!r}; {expectation}")
    if "reward" not in result and len(result) > 1:
        raise VerifierError(
            f"verify returned several keys ({', '.join(sorted(result))}) but no `reward`: name the score "
            "`reward` (the other keys become metrics); unlike reward.json, the runner never sums keys"
        )
    return {key: _number(value) for key, value in result.items()}


def json_text(rewards: Dict[str, Any]) -> str:
    """``json.dumps(rewards)`` for string keys and finite numbers, through the C encoder of its
    strings: the json package imports re, enum and more, and the server's root runner may import
    nothing that code of the task could have rewritten (``_gym_channel.take_over`` imports _json)."""
    try:
        from _json import encode_basestring_ascii
    except ImportError:  # an interpreter without the C accelerator
        import json

        return json.dumps(rewards, allow_nan=False)
    items = (f"{encode_basestring_ascii(key)}: {value!r}" for key, value in rewards.items())
    return "{" + ", ".join(items) + "}"


def print_error(error: VerifierError) -> None:
    """The message, the traceback of the verifier's own frames, and what it means for the score."""
    print(f"verifier error: {error}")
    cause = error.error
    if cause is not None and not isinstance(cause, SystemExit):
        import linecache
        import traceback

        from _gym_runner import PRELOADED

        shim = os.path.dirname(os.path.abspath(__file__))
        if "verifier.py" in PRELOADED:  # the verifier's user may not read the file: show its lines anyway
            source = PRELOADED["verifier.py"].decode("utf-8", "replace").splitlines(True)
            path = os.path.join(shim, "verifier.py")
            linecache.cache[path] = (len(source), None, source, path)

        runner_files = {
            os.path.join(shim, name)
            for name in ("gym_runner.py", "_gym_runner.py", "_gym_runner_rare.py", "_gym_await.py")
        }
        asyncio = sys.modules.get("asyncio")
        asyncio_dir = os.path.dirname(asyncio.__file__ or "") if asyncio is not None else None
        report = traceback.TracebackException(type(cause), cause, cause.__traceback__)
        # Only the verifier's own frames: the runner and asyncio are noise to the author.
        report.stack = traceback.StackSummary.from_list(
            [
                frame
                for frame in report.stack
                if os.path.abspath(frame.filename) not in runner_files
                and not (asyncio_dir and frame.filename.startswith(asyncio_dir + os.sep))
            ]
        )
        print("".join(report.format()), end="")
    print("no reward written: the run scores 0 (harbor:missing_reward)")
