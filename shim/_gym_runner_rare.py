"""What the runner needs only off its common path: ``inspect`` for callables that are not plain
functions, awaiting an awaitable (with ``asyncio`` only once it needs an event loop; the driver
that waits without it is ``_gym_await``), full result checks with precise messages, ``json`` for
unusual keys, and ``traceback`` for errors. Kept apart because the shim is compiled afresh in every
sandbox: code the common path never runs must not cost it compile time. Standard library only.
"""

import os
import sys

from _gym_runner import _PLAIN_FUNCTION, KNOWN_ARGUMENTS, MISSING_REWARD, VerifierError, _wait_for

TYPE_CHECKING = False  # typing is not imported at run time (start-up time is benchmarked)
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional, Sequence, Tuple

    from _gym_channel import Reporter

    Parameter = Tuple[str, int, bool, Any]

# Parameter kinds, numbered as inspect.Parameter numbers them.
POSITIONAL_ONLY, POSITIONAL_OR_KEYWORD, VAR_POSITIONAL, KEYWORD_ONLY, VAR_KEYWORD = range(5)
_CO_VARARGS, _CO_VARKEYWORDS = 0x04, 0x08  # code object flags (stable since Python 2)


def plan_arguments(verify: "Any", available: "Sequence[str]") -> "Tuple[List[Any], Dict[str, str]]":
    """``plan_call`` for any callable (``_gym_runner.plan_arguments`` takes the common case itself)."""
    return plan_call(declared_parameters(verify), available)


def declared_parameters(function: "Any") -> "List[Parameter]":
    """The parameters ``function`` declares, as ``(name, kind, has_default, default)``.

    - a plain function (no ``__wrapped__``, no ``__signature__``): read from ``__code__``, which
      costs no import;
    - anything else (``functools.partial``, a ``functools.wraps`` decorator, an object with
      ``__call__``, a bound method, a builtin): ``inspect.signature``, which unwraps.
    """
    if type(function) is not _PLAIN_FUNCTION or hasattr(function, "__wrapped__") or hasattr(function, "__signature__"):
        return signature_parameters(function)
    code = function.__code__
    count, keyword_count = code.co_argcount, code.co_kwonlyargcount
    names, defaults = code.co_varnames, function.__defaults__ or ()
    keyword_defaults = function.__kwdefaults__ or {}
    first_default = count - len(defaults)
    parameters: List[Parameter] = []
    for index in range(count):
        kind = POSITIONAL_ONLY if index < code.co_posonlyargcount else POSITIONAL_OR_KEYWORD
        default = defaults[index - first_default] if index >= first_default else None
        parameters.append((names[index], kind, index >= first_default, default))
    for name in names[count : count + keyword_count]:
        parameters.append((name, KEYWORD_ONLY, name in keyword_defaults, keyword_defaults.get(name)))
    index = count + keyword_count
    if code.co_flags & _CO_VARARGS:
        parameters.append((names[index], VAR_POSITIONAL, False, None))
        index += 1
    if code.co_flags & _CO_VARKEYWORDS:
        parameters.append((names[index], VAR_KEYWORD, False, None))
    return parameters


def plan_call(parameters: "Sequence[Parameter]", available: "Sequence[str]") -> "Tuple[List[Any], Dict[str, str]]":
    """Which supplied arguments go where: ``(positional, keywords)``.

    ``positional`` holds supplied names, or a one-item tuple holding the default of a skipped
    positional-only parameter; ``keywords`` maps parameter names to supplied names. A declared known
    argument that is not supplied keeps its default or is an error; so is an unknown parameter
    without a default. ``**kwargs`` gets every supplied argument not declared by name.
    """
    positional: List[Any] = []
    skipped: List[Any] = []
    keywords: Dict[str, str] = {}
    declared = set()
    takes_keywords = False
    for name, kind, has_default, default in parameters:
        if kind == VAR_POSITIONAL:
            continue
        if kind == VAR_KEYWORD:
            takes_keywords = True
            continue
        declared.add(name)
        if name in available:
            if kind == POSITIONAL_ONLY:
                positional.extend(skipped)
                skipped = []
                positional.append(name)
            else:
                keywords[name] = name
        elif has_default:
            if kind == POSITIONAL_ONLY:
                skipped.append((default,))
        elif name == "response":
            raise VerifierError(
                "verify requires `response`, but no response was given (response.json is absent): only "
                "NeMo Gym's harbor server passes one, and `gym-harbor verify` the task's response.json or --response"
            )
        elif name in KNOWN_ARGUMENTS:
            raise VerifierError(f"verify requires `{name}`, which this run does not supply")
        else:
            raise VerifierError(
                f"verify declares `{name}`, which the runner cannot supply: it can declare "
                "workspace, task_data, response and state (or give it a default)"
            )
    if takes_keywords:
        keywords.update((name, name) for name in available if name not in declared)
    return positional, keywords


def signature_parameters(function: "Any") -> "List[Parameter]":
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


def wait(awaitable: "Any") -> "Any":
    """The result of an awaitable (an ``async def`` verify's, or a coroutine a sync one returned),
    with ``asyncio.run``: where ``_gym_runner.wait`` cannot drive it by hand."""
    import asyncio

    return asyncio.run(_wait_for(awaitable))


def not_a_verify(verify: "Any") -> "str":
    """Why what verifier.py calls ``verify`` (``None`` when it defines none) cannot be called."""
    if verify is None:
        return "verifier.py defines no `verify`"
    return f"`verify` in verifier.py is a {type(verify).__name__}, not a callable"


def bad_json(name: "str", path: "str", value: "Any") -> "str":
    """Why ``name``.json (at ``path``) gives no argument: it could not be read or parsed (``value`` is
    the error), or it holds ``value``, which is not an object."""
    if isinstance(value, (OSError, ValueError)):
        return f"cannot read {name}.json ({path}): {value}"
    return f"{name}.json ({path}) must hold a JSON object, not {type(value).__name__}"


def fail(error: "BaseException", logs_dir: "str", channel: "Optional[Reporter]") -> "int":
    """Reports a failed run (``VerifierError``, or an ``OSError`` writing the reward) to the server's
    channel, when there is one, then in the test's output; returns the exit status, 1."""
    if isinstance(error, VerifierError):
        if channel is not None:  # first: printing the traceback imports modules
            channel.send("error", str(error))
        remove_stray_rewards(logs_dir)
        print_error(error)
        return 1
    if channel is not None:
        channel.send("error", f"cannot write reward.json: {error}")
    remove_stray_rewards(logs_dir)
    print(f"verifier error: cannot write reward.json into {logs_dir}: {error}\n{MISSING_REWARD}")
    return 1


def unwritten(error: "OSError", text: "str", logs_dir: "str", channel: "Optional[Reporter]") -> "int":
    """Reports a verdict whose ``reward.json`` could not be written (a disk the run filled, a folder
    verify's program took): NeMo Gym's server scores the verdict its report carries, as it would the
    file; stock Harbor finds no reward. Returns the exit status, 1."""
    if channel is not None:
        channel.send("unwritten", text)
    remove_stray_rewards(logs_dir)
    then = "the server scores the verdict the runner reported" if channel is not None else MISSING_REWARD
    print(f"verifier error: cannot write reward.json ({text}) into {logs_dir}: {error}\n{then}")
    return 1


def remove_stray_rewards(
    logs_dir: "str",
    names: "Tuple[str, ...]" = ("reward.json", "reward.txt"),
    origin: "str" = "verify (or a program it ran) wrote",
) -> None:
    """Removes the reward files ``names`` a run leaves: both after a failed run, ``reward.txt`` after
    one that wrote ``reward.json`` (the runner removed both before ``verify`` ran, so ``verify``, or a
    program it ran, wrote them), both when the run never started (``origin`` says so): stock Harbor
    would score them, and NeMo Gym's server, which scores the runner's report alone, would not. A
    process ``verify`` left running can still write one afterwards; under NeMo Gym's server none
    outlives grading."""
    for name in names:
        try:
            os.unlink(os.path.join(logs_dir, name))
        except FileNotFoundError:  # none there: the common case
            continue
        except OSError as error:  # not ours to remove (a folder the agent owns, under stock Harbor)
            print(
                f"verifier warning: {name} in {logs_dir} cannot be removed ({error.strerror}): it is not "
                "verify's score, but stock Harbor would read it (red team 64)"
            )
            continue
        print(f"verifier note: removed the {name} that {origin}: only verify's return value is the score")


def describe(error: "BaseException") -> "str":
    if isinstance(error, SystemExit):
        return f"SystemExit({error.code!r})"
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _kinds() -> "Tuple[Any, Any]":
    """What counts as a real number and as an integer: ``numbers.Real`` and ``numbers.Integral`` once
    anything loaded ``numbers`` (a type registers there only by importing it: ``fractions``, NumPy),
    else just the built-in types they stand for. The runner never imports ``numbers`` itself, which
    would cost every run a millisecond, or load it after code of the task ran."""
    loaded = sys.modules.get("numbers")
    if loaded is None:
        return (int, float), int
    return loaded.Real, loaded.Integral


def _is_numpy_bool(value: "Any") -> "bool":
    """NumPy's bool (``(a == b).all()``), a NumPy scalar as SPEC's results allow that no
    ``numbers`` class registers; known by its type's name, without importing NumPy."""
    kind = type(value)
    return getattr(kind, "__module__", None) == "numpy" and kind.__name__ in ("bool", "bool_")


def _finite(value: "Any") -> "bool":
    if _is_numpy_bool(value):
        return True
    if not isinstance(value, _kinds()[0]):
        return False
    try:
        number = float.__float__(float(value))  # a plain float, even from a __float__ that gave a subclass
    except (OverflowError, ValueError):
        return False
    return number - number == 0  # NaN and the infinities give NaN


def _number(value: "Any") -> "Any":
    """A JSON-ready copy of a finite number: ints stay exact, a bool and NumPy's become 0 or 1, the
    rest become floats."""
    if _is_numpy_bool(value):
        return int(bool(value))
    return int(value) if isinstance(value, _kinds()[1]) else float(value)


def _hint(value: "Any") -> "str":
    """What to do about a number the result cannot hold: a ``Decimal`` is no ``numbers.Real``."""
    return " (a Decimal is not one: return float() of it)" if type(value).__name__ == "Decimal" else ""


def rewards_from_result(result: "Any") -> "Dict[str, Any]":
    """The ``reward.json`` object for any result, or ``VerifierError`` naming what is wrong."""
    expectation = "it must return a finite number or a dict of finite numbers"
    if not isinstance(result, dict):
        if _finite(result):
            return {"reward": _number(result)}
        shown = repr(result)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        # None is what a verify gives that reaches its end without a return.
        hint = " (did a path through verify end without a `return`?)" if result is None else _hint(result)
        raise VerifierError(f"verify returned {type(result).__name__} {shown}; {expectation}{hint}")
    if not result:
        raise VerifierError(f"verify returned an empty dict; {expectation}, with a `reward` key")
    for key, value in result.items():
        if not isinstance(key, str):
            raise VerifierError(f"verify returned a dict with the non-string key {key!r}; {expectation}")
        if not _finite(value):
            raise VerifierError(
                f"verify returned {type(value).__name__} {value!r} for {key!r}; {expectation}{_hint(value)}"
            )
    if "reward" not in result and len(result) > 1:
        raise VerifierError(
            f"verify returned several keys ({', '.join(sorted(result))}) but no `reward`: name the score "
            "`reward` (the other keys become metrics); unlike reward.json, the runner never sums keys"
        )
    return {key: _number(value) for key, value in result.items()}


def json_text(rewards: "Dict[str, Any]") -> "str":
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


def print_error(error: "VerifierError", here: "Optional[str]" = None) -> None:
    """The message, the traceback of the verifier's own frames, and what it means for the score;
    ``here`` is verifier.py's folder when it is not this file's (``/tests``), as under run_verify."""
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
        missing = getattr(cause, "filename", None) if isinstance(cause, FileNotFoundError) else None
        if isinstance(missing, str) and not os.path.isabs(missing):  # a new author's open("expected.json")
            parts = os.path.normpath(missing).split(os.sep)
            inside = os.sep.join(parts[1:]) if parts[0] == "tests" and len(parts) > 1 else missing
            print(
                f"note: {missing!r} was looked for in the working directory, the agent's workspace; "
                f"a file of the task's tests/ is Path(__file__).parent / {inside!r}"
            )
        elif isinstance(missing, str) and os.path.dirname(os.path.abspath(missing)) == os.path.abspath(here or shim):
            print(
                f"note: {missing!r} is not beside verifier.py in the sandbox: a task's tests/ is staged there "
                "whole, a dataset root's verifier.py alone (nothing beside it)"
            )
    print(MISSING_REWARD)
