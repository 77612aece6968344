"""extract_boxed, extract_answer, extract_tag: the last occurrence, never a fall-back."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemo_gym.verifiers import _extract, extract_answer, extract_boxed, extract_tag

pytestmark = pytest.mark.every_python  # the in-sandbox part: proven on every Python (noxfile)

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
    # A box that holds nothing but a box is opened to the innermost one.
    ("\\boxed{\\boxed{5}}", "5"),
    ("\\boxed{ \\fbox { \\boxed{-3} } }", "-3"),
    ("\\boxed{\\boxed{\\frac{1}{2}}}", "\\frac{1}{2}"),
    ("\\boxed{\\boxed{\\{1\\}}}", "\\{1\\}"),
    ("\\boxed{1} \\boxed{\\boxed{2}}", "2"),
    ("\\boxed{\\boxed{1}} \\boxed{2}", "2"),
    # Near-misses: an empty innermost box, a box beside other text, an unbalanced one.
    ("\\boxed{\\boxed{}}", None),
    ("\\boxed{\\boxed{ }}", None),
    ("\\boxed{\\boxed{1} + \\boxed{2}}", "\\boxed{1} + \\boxed{2}"),
    ("\\boxed{\\boxed{5}.}", "\\boxed{5}."),
    ("\\boxed{\\boxed{5}", None),
    ("\\boxed{\\boxed{5\\}}", None),  # the escaped brace leaves both boxes open
    # A last box without braces is a malformed last answer, never a fall-back (red team 47: LaTeX
    # draws `\\boxed 6`, and the earlier `\\boxed{5}` was taken).
    ("So \\boxed{5}. No wait, it is $\\boxed 6$.", None),
    ("\\boxed{5} ... \\fbox 6", None),
    ("\\boxed{5} \\boxed", None),
    ("\\boxed 6 and then \\boxed{7}", "7"),
    ("\\boxedfoo{5}", None),  # another command
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
    # Underscore emphasis, balanced: before the colon, just after it, or at the end of the line.
    ("__Answer__: A", "A"),
    ("_Answer_: A", "A"),
    ("__Final Answer__: 3", "3"),
    ("_Answer:_ A", "A"),
    ("__Answer:__ A", "A"),
    ("_Answer: 42_", "42"),
    ("_Answer: **42**_", "42"),
    ("**_Answer_**: 9", "9"),
    ("__Answer__:\n\n8", "8"),
    ("Answer: 1\n__Answer__: 2", "2"),
    # Near-misses: unbalanced underscores make a malformed label (None, no fall-back to an earlier
    # one); a label inside an identifier is no label at all.
    ("_Answer: A", None),
    ("Answer_: A", None),
    ("__Answer_: A", None),
    ("_Final Answer: 3", None),
    ("_Answer:\n42", None),  # emphasis left open at the end of the line
    ("_Answer_: ", None),
    ("Answer: 1\n_Answer: 2", None),
    ("my_answer: 5", None),
    ("Answer: 1\nmy_answer: 5", "1"),
    ("the_answer_: 4", None),
    ("Answer:_x_", "_x_"),  # underscores after a plain label are the payload's
    # A fullwidth colon.
    ("Answer：42", "42"),
    ("FINAL ANSWER：12", "12"),
    ("**Answer**：7", "7"),
    ("Answer ： 5", "5"),
    ("Answer：\n\n6", "6"),
    ("Answer：", None),
    ("Answer：\n", None),
    ("Answer；5", None),  # a fullwidth semicolon is not a colon
    # Bold answers (an author's trial, 2026-12-05: "Answer: **42**." gave "42**", a right answer's 0).
    ("Answer: **42**.", "42"),
    ("Answer: **42.**", "42"),
    ("**Answer:** **$42**.", "$42"),
    ("**Answer:**\n\n**42**", "42"),
    ("**Answer:**\n\n**42**.", "42"),
    ("Answer: **x**y**.", "x**y"),  # asterisks inside the answer are its own
    ("Answer: **Paris**!", "Paris**!"),  # only a full stop is taken off (documented)
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
    # A last tag that never closes is a malformed last answer, never a fall-back (red team 47).
    ("<answer>5</answer>\nWait, that is wrong.\n<answer>6", "answer", None),
    ("<answer>5</answer> <answer>", "answer", None),
    ("<answer>5</answer> <answers>", "answer", "5"),
    # An opening with white space, attributes or a slash is one too (red team 50).
    ("<answer>6</answer> wait, actually <answer >7", "answer", None),
    ("<answer>6</answer> wait <answer\n>7", "answer", None),
    ("<answer>6</answer> wait <answer id='2'>7", "answer", None),
    ("<answer>6</answer> Hmm, actually <answer", "answer", None),
    ("<answer>6</answer><answer/>", "answer", None),
    ("<answer>6</answer> <answer foo>7</answer>", "answer", "7"),
    ('<answer id="1">\n8\n</answer>', "answer", "8"),
    ("<answer>6</answer> <answer-key>7", "answer", "6"),
]


@pytest.mark.parametrize("text, tag, expected", TAGS)
def test_extract_tag(text, tag, expected):
    assert extract_tag(text, tag) == expected


@pytest.mark.parametrize("tag", ["", "<a>", "a b", "a\rb", "a\u00a0b", "a\u2003b", "a\x0cb", None])
def test_bad_tag_raises(tag):
    with pytest.raises(ValueError, match="extract_tag"):
        extract_tag("x", tag)


def test_runs_of_emphasis_marks_cost_linear_time():
    # Red team 32: 40 KB of "*" took 20 s (each mark began a scan to the run's end); a megabyte, hours.
    start = time.perf_counter()
    for text in ("*" * 1_000_000, "*_" * 500_000, ("*" * 7 + "x") * 125_000, ("x" + "*" * 20) * 50_000, " *" * 500_000):
        assert extract_answer(text) is None
    assert extract_answer("*" * 1_000_000 + "**Answer:** 42") == "42"
    assert time.perf_counter() - start < 5.0


@pytest.mark.parametrize("marks", [1, 8, 9, 40])
def test_a_long_run_of_emphasis_is_still_the_last_label(marks):
    # Red team 33: with the run bounded at 8 marks, the last label went unseen and an earlier one
    # answered (a fall-back the contract rules out).
    for mark in "*_":
        assert extract_answer(f"Answer: 1\n{mark * marks}Answer: 2{mark * marks}") == "2"


def test_deeply_nested_boxes_cost_linear_time():
    start = time.perf_counter()
    assert extract_boxed("\\boxed{" * 100_000 + "5" + "}" * 100_000) == "5"
    assert extract_boxed("\\boxed{" * 100_000 + "}" * 100_000) is None
    assert extract_boxed("\\boxed{" * 100_000) is None
    assert time.perf_counter() - start < 5.0


@given(st.text())
def test_never_raise(text):
    extract_boxed(text)
    extract_answer(text)
    extract_tag(text)


@given(st.text(alphabet="_*:：Answer Final\n\\boxedfbx{}5.$", max_size=40))
def test_never_raise_on_labels_and_boxes(text):
    for extract in (extract_boxed, extract_answer, extract_tag):
        result = extract(text)
        assert result is None or (isinstance(result, str) and result.strip() == result and result)


@given(st.integers(min_value=1, max_value=50), st.text(alphabet="abc 12+-", min_size=1).filter(str.strip))
def test_nested_boxes_open_to_the_innermost(depth, payload):
    assert extract_boxed("x " + "\\boxed{" * depth + payload + "}" * depth) == payload.strip()


def _last_match(text):
    """The regular expression's last label, as ``_extract._last_label`` gives it."""
    matches = list(_extract._PATTERNS.label.finditer(text))
    return None if not matches else (matches[-1].groups(), matches[-1].start(3), matches[-1].end())


LABEL_PARTS = [
    "answer",
    "Answer",
    "ANSWER",
    "final",
    "Final ",
    " ",
    "\t",
    "\n",
    "\x1c",
    "*",
    "_",
    "**",
    ":",
    "x",
    "1",
    ".",
]


@given(st.lists(st.sampled_from(LABEL_PARTS), max_size=24).map("".join))
def test_the_label_scan_of_ascii_text_finds_what_the_regular_expression_finds(text):
    # ASCII text is scanned without importing re (shim start-up): the scan must find the same last
    # label, with the same emphasis runs and spans, or an agent's answer would read differently here.
    assert _extract._last_label(text) == _last_match(text)


@pytest.mark.parametrize(
    "text",
    ["x_answer: 1", "x*answer: 1", "x**answer: 1", "*_answer: 1", "answer:*answer: 2", "answer:_answer: 2",
     "final  answer: 3", "xfinal answer: 3", "*final answer: 3", "**Final**Answer: 4", "Answer :\n5", "answer 6"],
)  # fmt: skip
def test_the_label_scan_agrees_on_the_edges_of_a_label(text):
    assert _extract._last_label(text) == _last_match(text)
