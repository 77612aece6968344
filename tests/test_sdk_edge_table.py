"""The README's table of every SDK helper's edge cases: each statement in it, run.

One test per row; the examples are the table's own. A change to a helper's edges that leaves
these green but the table wrong is still a bug: keep the two together.
"""

from __future__ import annotations

import os
import re
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest

import nemo_gym.verifiers
from nemo_gym.verifiers import (
    exact_match,
    extract_answer,
    extract_boxed,
    extract_tag,
    files,
    final_text,
    numeric_match,
    parse_number,
)

pytestmark = pytest.mark.every_python  # the in-sandbox part: proven on every Python (noxfile)

README = Path(__file__).resolve().parent.parent / "README.md"


def _sdk_section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("## The SDK (`nemo_gym.verifiers`")
    return text[start : text.index("\n## ", start + 1)]


def test_the_table_has_one_row_per_exported_name():
    rows = re.findall(r"^\| `([\w.]+)", _sdk_section(), re.MULTILINE)
    public_files = sorted(
        f"files.{name}"
        for name, value in vars(files).items()
        if not name.startswith("_") and name != "TYPE_CHECKING"
        and getattr(value, "__module__", files.__name__) == files.__name__ and (callable(value) or name.isupper())
    )  # fmt: skip
    assert sorted(rows) == sorted([*nemo_gym.verifiers.__all__, *public_files])


def _message(*parts, **fields):
    return {"type": "message", "role": "assistant", "content": list(parts), **fields}


def _text(text):
    return {"type": "output_text", "text": text}


def test_final_text_row():
    earlier = _message(_text("earlier"))
    assert final_text({"output": [_message(_text(" a"), _text("b "))]}) == " ab "  # joined, never stripped
    assert final_text({"output": [{"role": "assistant", "content": "plain"}]}) == "plain"
    phased = [_message(_text("final"), phase="final_answer"), _message(_text("note"), phase="commentary")]
    assert final_text({"output": phased}) == "final"
    for response in (None, "x", {}, {"output": "x"}, {"output": []}, {"output": [{"type": "reasoning"}]}):
        assert final_text(response) == ""
    refusal = _message({"type": "refusal", "refusal": "no"})
    assert final_text({"output": [earlier, refusal]}) == ""  # no fall-back to an earlier message
    tool = {"type": "function_call", "name": "f", "arguments": "{}"}
    assert final_text({"output": [earlier, tool]}) == "earlier"


def test_exact_match_row():
    assert exact_match("  \u201cx\u201d \u2014 y\u200b ", '"x" - y')
    assert exact_match("a\u00a0b", "a b")
    assert exact_match("caf\u0065\u0301", "caf\u00e9")  # NFC
    assert exact_match(42, ["41", "42"])
    for actual in (None, True, 4.0, b"4"):
        assert exact_match(actual, "4") is False
    assert exact_match("?", "?", ignore_punctuation=True) is False  # normalises to ""
    assert exact_match("4", "42") is False and exact_match("42", "4") is False
    for expected in (None, True, 4.0, {"a": 1}, ["4", None]):
        with pytest.raises(TypeError, match="exact_match"):
            exact_match("4", expected)
    for options in ({}, {"unicode_form": "NFD"}):
        with pytest.raises(ValueError, match="exact_match"):
            exact_match("4", [] if not options else "4", **options)


def test_numeric_match_row():
    assert numeric_match(str(2**100), 2**100) and not numeric_match(str(2**100 + 1), 2**100)
    assert numeric_match("0.30000000000000004", "0.3")
    assert numeric_match("101", 100, rel_tol=0.02)
    assert numeric_match("2", ["1", "2"])
    for actual in ("abc", "5 apples", float("nan"), "nan", None, True):
        assert numeric_match(actual, 5) is False
    assert numeric_match("50%", 50) is False
    for actual in ("3", "abc", None):
        for expected in ("abc", "3 apples", "", float("nan"), float("inf"), ["3", "abc"]):
            with pytest.raises(ValueError, match="numeric_match"):
                numeric_match(actual, expected)
    bad_options = [
        {"percent": "loose"},
        {"rel_tol": -1},
        {"abs_tol": float("inf")},
        {"rel_tol": "0.1"},
        {"abs_tol": True},
    ]
    for options in bad_options:
        with pytest.raises(ValueError, match="numeric_match"):
            numeric_match("3", 3, **options)
    with pytest.raises(ValueError, match="numeric_match"):
        numeric_match("3", [])
    for expected in (None, True, b"3", {"a": 3}):
        with pytest.raises(TypeError, match="numeric_match"):
            numeric_match("3", expected)


def test_parse_number_row():
    assert parse_number("50%") == 50
    assert parse_number("\\boxed{" * 16 + "5" + "}" * 16) == 5
    assert parse_number("1e1000") == 10**1000
    assert parse_number("9" * 4300) == int("9" * 4300)
    nothing = [
        True, None, float("nan"), float("inf"), Decimal("NaN"), Decimal("-Infinity"), "five", "0x1F", "10²",
        "0.1+0.2", "5 apples", "1,5", "1_000", "1/0", "1e1001", "1e-1001", "9" * 4301,
        "\\(" * 17 + "5" + "\\)" * 17, "\\boxed{" * 17 + "5" + "}" * 17,
    ]  # fmt: skip
    for value in nothing:
        assert parse_number(value) is None, value
    assert parse_number(Fraction(1, 3)) == Fraction(1, 3)


def test_extract_boxed_row():
    assert extract_boxed("\\boxed{ \\frac{1}{2} }") == "\\frac{1}{2}"
    assert extract_boxed("\\fbox{\\{1\\}}") == "\\{1\\}"
    assert extract_boxed("\\boxed{\\boxed{5}}") == "5"
    assert extract_boxed("\\boxed{a \\boxed{b}}") == "a \\boxed{b}"
    for text in (None, 5, "no box", "\\boxed{}", "\\boxed{\\boxed{ }}", "\\boxed{1} \\boxed{2", "\\boxed{1} \\boxed{}"):
        assert extract_boxed(text) is None, text


def test_extract_answer_row():
    for text in ("ANSWER: 7", "Final Answer: 7", "Answer：7", "**Answer:** 7", "__Answer__: 7", "_Answer_: 7",
                 "Answer:\n\n7", "Answer: $7$.", "_Answer: 7_"):  # fmt: skip
        assert extract_answer(text) == "7", text
    for text in (None, "The answer is 42", "Answers: 5", "my_answer: 5", "Answer:", "Answer：", "_Answer: A",
                 "Answer_: A", "Answer: 1\nAnswer:", "Answer: 1\n_Answer: 2"):  # fmt: skip
        assert extract_answer(text) is None, text


@pytest.mark.parametrize("helper", [extract_boxed, extract_answer, extract_tag])
def test_an_extractor_given_the_response_itself_raises(helper):
    """The author's mistake (the response, not final_text of it) raises; an agent's JSON dict is no answer."""
    with pytest.raises(TypeError, match=rf"{helper.__name__}\(\): got a Responses API response, not its text"):
        helper({"output": [_message(_text("Answer: \\boxed{7} <answer>7</answer>"))]})
    assert helper({"answer": "7"}) is None


def test_extract_tag_row():
    assert extract_tag("<answer> 1 </answer><answer>2</answer>") == "2"
    assert extract_tag("<answer>a<answer>b</answer>") == "b"
    for text in (None, "<answer>1", "1</answer>", "</answer><answer>1", "<answer> </answer>", "<Answer>1</Answer>"):
        assert extract_tag(text) is None, text
    for tag in ("", None, 5, "<a>", "a/b", "a b"):
        with pytest.raises(ValueError, match="extract_tag"):
            extract_tag("x", tag)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    root.mkdir()
    (root / "answer.txt").write_bytes(b"42\r\n")
    (root / "two.txt").write_bytes(b"x\n\n")
    (root / "bad.txt").write_bytes(b"\xff\xfe")
    (root / "folder").mkdir()
    os.mkfifo(root / "fifo")
    (tmp_path / "outside.txt").write_text("secret")
    (root / "out").symlink_to(tmp_path / "outside.txt")
    (root / "in").symlink_to(root / "answer.txt")
    return root


def test_read_text_row(workspace: Path):
    assert files.read_text(workspace, "answer.txt") == "42"
    assert files.read_text(workspace, "two.txt") == "x\n"
    assert files.read_text(workspace, "answer.txt", strip_trailing_newline=False) == "42\r\n"
    assert files.read_text(workspace, "in") == "42"
    for path in ("missing", "folder", "fifo", "out", "bad.txt"):
        assert files.read_text(workspace, path) is None, path
    assert files.read_text(workspace, "answer.txt", max_bytes=3) is None
    # A socket and a device: tests/test_files.py (binding a socket needs a short path).
    assert files.read_text(Path("/"), "dev/null") is None
    for path in ("", "/etc/passwd", "../outside.txt", "a/../answer.txt"):
        with pytest.raises(ValueError, match="read_text"):
            files.read_text(workspace, path)
    for max_bytes in (-1, "1", 1.5):
        with pytest.raises(ValueError, match="read_text"):
            files.read_text(workspace, "answer.txt", max_bytes=max_bytes)
    with pytest.raises(TypeError, match="read_text"):
        files.read_text(workspace, b"answer.txt")  # type: ignore[arg-type]


def test_file_exists_row(workspace: Path):
    assert files.file_exists(workspace, "answer.txt") and files.file_exists(workspace, "in")
    assert files.file_exists(workspace, "bad.txt")  # content is not read
    for path in ("missing", "folder", "fifo", "out"):
        assert files.file_exists(workspace, path) is False, path
    for path in ("", "/etc/passwd", "../outside.txt"):
        with pytest.raises(ValueError, match="file_exists"):
            files.file_exists(workspace, path)


def test_text_file_equals_row(workspace: Path):
    assert files.text_file_equals(workspace, "answer.txt", "42\n")
    assert files.text_file_equals(workspace, "two.txt", "x\n\n")
    assert files.text_file_equals(workspace, "two.txt", "x\n") is False
    for path, expected in (("answer.txt", " 42"), ("answer.txt", "42 "), ("missing", ""), ("bad.txt", "")):
        assert files.text_file_equals(workspace, path, expected) is False
    with pytest.raises(TypeError, match="text_file_equals"):
        files.text_file_equals(workspace, "answer.txt", 42)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        files.text_file_equals(workspace, "/etc/passwd", "x")
    with pytest.raises(ValueError):
        files.text_file_equals(workspace, "answer.txt", "42", max_bytes=-1)


def test_max_read_bytes_row():
    assert files.MAX_READ_BYTES == 32 * 1024 * 1024
