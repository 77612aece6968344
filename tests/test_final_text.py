"""final_text on real and odd Responses API shapes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemo_gym.verifiers import final_text

pytestmark = pytest.mark.every_python  # the in-sandbox part: proven on every Python (noxfile)


def message(*parts, role="assistant", **extra):
    content = list(parts) if (parts and not isinstance(parts[0], str)) or not parts else parts[0]
    return {"type": "message", "role": role, "content": content, **extra}


def text(value):
    return {"type": "output_text", "text": value, "annotations": []}


REASONING = {"type": "reasoning", "summary": [{"type": "summary_text", "text": "thinking 41"}]}
CALL = {"type": "function_call", "name": "bash", "arguments": "{}", "call_id": "c1"}
CALL_OUTPUT = {"type": "function_call_output", "call_id": "c1", "output": "42"}

CASES = [
    ("one-message", [message(text("42"))], "42"),
    ("parts-joined-without-separator", [message(text("4"), text("2"))], "42"),
    ("not-stripped", [message(text("  42\n"))], "  42\n"),
    ("plain-string-content", [message("42")], "42"),
    ("last-message-wins", [message(text("41")), message(text("42"))], "42"),
    ("reasoning-ignored", [REASONING, message(text("42"))], "42"),
    ("ends-in-tool-calls", [message(text("let me check")), CALL, CALL_OUTPUT], "let me check"),
    ("only-tool-calls", [CALL, CALL_OUTPUT], ""),
    ("refusal-only-no-fallback", [message(text("41")), message({"type": "refusal", "refusal": "no"})], ""),
    ("refusal-part-skipped", [message({"type": "refusal", "refusal": "no"}, text("42"))], "42"),
    ("user-message-ignored", [message(text("42")), message(text("hi"), role="user")], "42"),
    ("role-absent", [{"type": "message", "content": [text("42")]}], "42"),
    ("type-absent", [{"role": "assistant", "content": "42"}], "42"),
    (
        "phase-final-answer",
        [message(text("42"), phase="final_answer"), message(text("more"), phase="commentary")],
        "42",
    ),
    (
        "phase-last-final",
        [message(text("1"), phase="final_answer"), message(text("2"), phase="final_answer")],
        "2",
    ),
    ("phase-without-final", [message(text("1"), phase="commentary")], ""),
    ("phase-on-some", [message(text("1"), phase="final_answer"), message(text("2"))], "1"),
    # A serializer that writes every optional field gives "phase": null: no phase (red team 32: read as
    # one, every such response gave "").
    ("phase-null-is-no-phase", [message(text("1"), phase=None), message(text("2"), phase=None)], "2"),
    ("phase-null-beside-final", [message(text("1"), phase="final_answer"), message(text("2"), phase=None)], "1"),
    ("empty-output", [], ""),
    ("non-text-part", [message({"type": "output_audio", "data": "..."})], ""),
    ("text-not-str", [message({"type": "output_text", "text": 42})], ""),
    ("garbage-items", [None, 3, "x", [], message(text("42"))], "42"),
]


@pytest.mark.parametrize("output, expected", [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_final_text(output, expected):
    assert final_text({"id": "resp", "output": output}) == expected


@pytest.mark.parametrize("response", [None, "42", 42, [], {}, {"output": None}, {"output": "42"}, {"output": {}}])
def test_odd_shapes_give_empty_text(response):
    assert final_text(response) == ""


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(["type", "role", "content", "text", "phase", "output"]), children, max_size=4)
    ),
    max_leaves=20,
)


@given(json_values)
def test_never_raises(value):
    assert isinstance(final_text({"output": value}), str)
    assert isinstance(final_text(value), str)
