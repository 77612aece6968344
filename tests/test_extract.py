"""extract_boxed, extract_answer, extract_tag: the last occurrence, never a fall-back."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemo_gym.verifiers import extract_answer, extract_boxed, extract_tag

BOXED = [
    ("The answer is \\boxed{42}.", "42"),
    ("\\boxed{1} then \\boxed{2}", "2"),
    ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
    ("\\boxed{a \\boxed{b}} and \\boxed{\\{1, 2\\}}", "\\{1, 2\\}"),
    ("\\boxed{outer \\boxed{inner}}", "outer \\boxed{inner}"),
    ("\\fbox{7}", "7"),
    ("\\boxed { 7 }", "7"),
    ("\\boxed{1} and \\boxed{2", None),  # the last is unbalanced: no fall-back to the first
    ("\\boxed{}", None),
    ("\\boxed{  }", None),
    ("no box", None),
    ("\\boxed", None),
    ("", None),
]


@pytest.mark.parametrize("text, expected", BOXED)
def test_extract_boxed(text, expected):
    assert extract_boxed(text) == expected


ANSWERS = [
    ("Answer: 42", "42"),
    ("answer: 42", "42"),
    ("Final Answer: 42", "42"),
    ("**Final Answer:** 42", "42"),
    ("**Answer**: 42", "42"),
    ("**Answer: 42**", "42"),
    ("Answer: $x^2$.", "x^2"),
    ("Answer: 3.14.", "3.14"),
    ("Answer:\n\n  17\n", "17"),
    ("Answer: 1\nthen\nAnswer: 2", "2"),
    ("Answer: 5. Final Answer: 6", "6"),
    ("My answer: 9", "9"),
    ("Answer:", None),
    ("Answer:\n\n", None),
    ("The answer is 42", None),
    ("Answers: 5", None),
    (None, None),
]


@pytest.mark.parametrize("text, expected", ANSWERS)
def test_extract_answer(text, expected):
    assert extract_answer(text) == expected


TAGS = [
    ("<answer>42</answer>", "answer", "42"),
    ("<answer> 1 </answer> <answer>\n2\n</answer>", "answer", "2"),
    ("<Answer>42</Answer>", "answer", None),  # case-sensitive
    ("<final>x</final>", "final", "x"),
    ("<answer>42", "answer", None),
    ("42</answer>", "answer", None),
    ("<answer></answer>", "answer", None),
    ("<answer>multi\nline</answer>", "answer", "multi\nline"),
]


@pytest.mark.parametrize("text, tag, expected", TAGS)
def test_extract_tag(text, tag, expected):
    assert extract_tag(text, tag) == expected


@pytest.mark.parametrize("tag", ["", "<a>", "a b", None])
def test_bad_tag_raises(tag):
    with pytest.raises(ValueError, match="extract_tag"):
        extract_tag("x", tag)


@given(st.text())
def test_never_raise(text):
    extract_boxed(text)
    extract_answer(text)
    extract_tag(text)
