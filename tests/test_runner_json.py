"""The runner reads ``task_data.json`` and ``response.json`` as ``json.loads`` reads them, without
importing the json package (its ``re``, ``enum`` and ``functools`` cost a verifier that reads its
task's fields 12-16 ms, most of a bare interpreter start).

``response.json`` holds what the model answered, so a text the fast path read otherwise than
``json.loads`` (a second object after the first, a BOM, whitespace JSON does not allow) would hand
``verify`` a value the task never had.
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nemo_gym.data.tasks.harbor.bytecode import shim_dir

pytestmark = pytest.mark.every_python  # the in-sandbox part: proven on every Python (noxfile)

_SPEC = importlib.util.spec_from_file_location("_gym_runner_json_under_test", shim_dir() / "_gym_runner.py")
assert _SPEC is not None and _SPEC.loader is not None
RUNNER = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(RUNNER)

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(st.characters(blacklist_categories=("Cs",)) | st.sampled_from('"\\\n\x00\u2028')),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
)
# Whitespace JSON allows, and characters str.strip() would also take, which it does not.
PADDING = st.text(st.sampled_from(" \t\n\r\x0b\x0c\u00a0\u2028\u3000\ufeff"), max_size=3)
# What may follow the first value: nothing, more whitespace, or a second value (a planted reward).
TAILS = st.sampled_from(["", " ", "\n", ' {"reward": 1}', "}", "x", "\x00", "\u00a0", "//", "1"])


def _shape(value: Any) -> Any:
    """``value`` compared structurally, with NaN equal to itself and types kept apart (1 != 1.0 != True)."""
    if isinstance(value, float) and math.isnan(value):
        return ("nan",)
    if isinstance(value, dict):
        return ("dict", [(key, _shape(item)) for key, item in value.items()])
    if isinstance(value, list):
        return ("list", [_shape(item) for item in value])
    return (type(value).__name__, value)


def _outcome(loads: Any, text: str) -> Any:
    try:
        return ("value", _shape(loads(text)))
    except ValueError as error:  # json.JSONDecodeError, the error bad_json reports
        return ("error", type(error).__name__, str(error))


def assert_reads_as_json_does(text: str) -> None:
    assert _outcome(RUNNER.json_loads, text) == _outcome(json.loads, text), repr(text)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(JSON_VALUES, PADDING, PADDING, TAILS, st.booleans())
def test_json_texts_read_as_json_loads_reads_them(value: Any, before: str, after: str, tail: str, ascii: bool):
    assert_reads_as_json_does(before + json.dumps(value, ensure_ascii=ascii) + after + tail)


@settings(max_examples=400, deadline=None)
@given(st.text(st.sampled_from('{}[]",:0123456789-+.eE tnrufalsNIinfy\\\n\ufeff'), max_size=30))
def test_any_text_reads_as_json_loads_reads_it(text: str):
    assert_reads_as_json_does(text)


@pytest.mark.parametrize(
    "text",
    [
        '{"answer": 1} {"answer": 2}',  # two objects: json refuses the second ("Extra data")
        '\ufeff{"answer": 1}',  # a BOM: json refuses it, naming utf-8-sig
        '\u00a0{"answer": 1}',  # a no-break space: not JSON whitespace
        '{"answer": 1}\x0c',
        '{"a": NaN, "b": -Infinity, "c": Infinity}',
        '{"a": 1, "a": 2}',  # the last wins
        '"\\ud800"',  # a lone surrogate, escaped
        '{"a": "\x01"}',  # a raw control character: strict refuses it
        "",
        "   ",
        "[" * 50 + "]" * 50,
    ],
)
def test_texts_an_agent_could_shape_read_as_json_loads_reads_them(text: str):
    assert_reads_as_json_does(text)


def test_nesting_past_the_recursion_limit_fails_as_json_loads_fails():
    text = "[" * (sys.getrecursionlimit() * 50) + "]" * (sys.getrecursionlimit() * 50)
    with pytest.raises(RecursionError):
        json.loads(text)
    with pytest.raises(RecursionError):
        RUNNER.json_loads(text)


def test_a_verifier_reading_its_task_data_and_response_imports_no_json(run_shim):
    run = run_shim(
        "import sys\n\ndef verify(task_data, response):\n"
        "    assert 'json' not in sys.modules, 'the runner imported json'\n"
        "    return task_data['n'] + len(response['output'])\n",
        {"n": 0.5, "nested": {"list": [1, 2.5, None, True, "é\u2028"]}},
        {"id": "r", "output": [{"type": "message"}]},
    )
    assert run.reward == {"reward": 1.5}, run.output


def test_task_data_with_a_second_object_after_the_first_is_refused(run_shim, tmp_path):
    run = run_shim("def verify(task_data):\n    return task_data['reward']\n", {"reward": 0})
    (tmp_path / "tests" / "task_data.json").write_text('{"reward": 0}\n{"reward": 1}\n')
    (run.logs / "reward.json").unlink()
    run = run.again()
    assert run.returncode == 1
    assert "cannot read task_data.json" in run.output and "Extra data" in run.output, run.output
    assert run.reward is None


class OutOfTime(Exception):
    """What a verifier's own signal handler raises when its time budget is spent."""


def test_an_exception_raised_while_reading_propagates_and_is_not_read_again(monkeypatch):
    """Red team 26: an ``except Exception`` around the fast path swallowed an exception a signal
    handler raised while the scanner ran (a verifier's time budget), then read the text again with
    json.loads, and verify ran with its budget spent. Anything but the scanner's refusal propagates."""
    calls = []

    def spent(text: str) -> float:
        calls.append(text)
        raise OutOfTime

    monkeypatch.setattr(RUNNER._Decoding, "parse_float", spent)
    with pytest.raises(OutOfTime):
        RUNNER.json_loads('{"answer": 4.2}')
    assert calls == ["4.2"]


def test_a_constant_is_jsons_own_object():
    """json.loads hands out one NaN object, and list equality tries identity first: a verifier
    comparing with what it read through json itself must see the same (red team 26)."""
    text = '{"values": [NaN, Infinity, -Infinity]}'
    read, expected = RUNNER.json_loads(text)["values"], json.loads(text)["values"]
    assert read == expected and all(a is b for a, b in zip(read, expected))


def test_the_fast_path_copies_no_text():
    """Whitespace around the value goes to json.loads, which skips it in place: stripping it here
    copied a text of mostly spaces whole (red team 26)."""
    import tracemalloc

    text = " [" + " " * 5_000_000 + '"\u00e9"] '
    tracemalloc.start()
    try:
        assert RUNNER.json_loads(text) == ["\u00e9"]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < len(text) // 2, peak


def test_an_interpreter_without_the_c_scanner_reads_through_json(monkeypatch):
    monkeypatch.setitem(sys.modules, "_json", None)  # importing it now fails, as where it was never built
    assert RUNNER.json_loads('{"a": [1, 2.5, "\\u00e9"]}') == {"a": [1, 2.5, "\u00e9"]}
