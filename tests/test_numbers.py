"""parse_number and numeric_match: the exact parser, its hard cases and the match rules."""

from __future__ import annotations

import re
import time
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemo_gym.verifiers import _numbers, exact_match, numeric_match, parse_number

pytestmark = pytest.mark.every_python  # the in-sandbox part: proven on every Python (noxfile)

PARSED = [
    ("5", Fraction(5)),
    ("-5", Fraction(-5)),
    ("+5", Fraction(5)),
    ("\u22125", Fraction(-5)),  # the Unicode minus
    ("0.1", Fraction(1, 10)),
    (".5", Fraction(1, 2)),
    ("5.", Fraction(5)),  # one trailing period
    ("1e3", Fraction(1000)),
    ("2.5E-3", Fraction(1, 400)),
    ("1e-400", Fraction(1, 10**400)),
    ("3 × 10^{5}", Fraction(300000)),
    ("2.5\\times10^-3", Fraction(1, 400)),
    ("1,234,567", Fraction(1234567)),
    ("1,234.5", Fraction(2469, 2)),
    ("$5", Fraction(5)),
    ("\\$5", Fraction(5)),
    ("€ 3.50", Fraction(7, 2)),
    ("-$5", Fraction(-5)),
    ("$-5", Fraction(-5)),
    ("£1,000", Fraction(1000)),
    ("1/2", Fraction(1, 2)),
    ("-3/4", Fraction(-3, 4)),
    ("\\frac{1}{2}", Fraction(1, 2)),
    ("\\dfrac{3}{-4}", Fraction(-3, 4)),
    ("-\\tfrac{1}{3}", Fraction(-1, 3)),
    ("½", Fraction(1, 2)),
    ("2½", Fraction(5, 2)),
    ("1 ¾", Fraction(7, 4)),
    ("１２３", Fraction(123)),  # full-width digits
    ("$5$", Fraction(5)),
    ("\\(7\\)", Fraction(7)),
    ("**8**", Fraction(8)),
    ("\\boxed{9}", Fraction(9)),
    ("\\boxed{\\frac{1}{2}}", Fraction(1, 2)),
    ("\\text{10}", Fraction(10)),
    ("$\\boxed{-2.5}$.", Fraction(-5, 2)),
    ("50%", Fraction(50)),
    ("50\\%", Fraction(50)),
    ("  42  ", Fraction(42)),
    ("123456789012345678901234567890", Fraction(123456789012345678901234567890)),
    (10**40 + 1, Fraction(10**40 + 1)),
    (0.1, Fraction(1, 10)),
    (Decimal("0.25"), Fraction(1, 4)),
    (Fraction(2, 3), Fraction(2, 3)),
    ("1e0001", Fraction(10)),  # an exponent's leading zeros
    ("25e-0002", Fraction(1, 4)),
    ("1" * 4300 + "½", int("1" * 4300) + Fraction(1, 2)),
    # An author's trial (2026-12-05): LaTeX's thousands separator and markdown code, as models write them.
    ("1{,}234", Fraction(1234)),
    ("$\\boxed{1{,}234{,}567}$", Fraction(1234567)),
    ("`1234`", Fraction(1234)),
    ("`-3.5`.", Fraction(-7, 2)),
    ("**`42`**", Fraction(42)),
]

NOT_NUMBERS = [
    "nan", "NaN", "inf", "-inf", "Infinity", "five", "0x1F", "10²", "0.1+0.2", "5 apples", "1,5",
    "1_000", "0,123", "12,34", "--5", "- 5", "+-5", "-$-5", "5..", "", " ", "$", "1/0", "\\frac{1}{0}",
    "\\boxed{1}+\\boxed{2}", "1e", "e5", "1{,}5", "1{,}23", "{,}123", "``", "`5", "1{,}{,}000", "1.2.3", True, False, None, [1], float("nan"), float("inf"),
    Decimal("NaN"), Decimal("sNaN"), Decimal("-Infinity"), Decimal("1e999999999"), "1e999999999", "1e-999999999", "5 × 10^{999999999}", "1" * 5000,
    # Red team 32: each raised ValueError (int() of more than 4300 digits) where the text is no number.
    "1e" + "0" * 4999 + "1", "1 \\times 10^{" + "0" * 4999 + "1}", "\\frac{1e" + "0" * 4999 + "1}{2}", "1" * 5000 + "½",
]  # fmt: skip


@pytest.mark.parametrize("text, value", PARSED, ids=[repr(case[0]) for case in PARSED])
def test_parse_number(text, value):
    assert parse_number(text) == value


@pytest.mark.parametrize("text", NOT_NUMBERS, ids=[repr(case)[:40] for case in NOT_NUMBERS])
def test_not_numbers(text):
    assert parse_number(text) is None


def test_capped_exponents_return_quickly():
    start = time.perf_counter()
    for text in ("1e999999999", "9" * 4000 + "e1000", "1e-1000", "1 × 10^{99999999}"):
        parse_number(text)
    assert time.perf_counter() - start < 1.0


MATCHES = [
    ("42", 42, {}, True),
    ("1,5", 15, {}, False),  # not a thousands group: no silent reading as 15
    ("1,500", 1500, {}, True),
    (str(2**200), 2**200, {}, True),
    (str(2**200 + 1), 2**200, {}, False),  # huge integers compare exactly, never as floats
    ("1e-400", 0, {}, False),
    ("1e-400", "0", {"abs_tol": 1e-300}, True),
    ("0.1", 0.1, {}, True),
    ("0.30000000000000004", "0.3", {}, True),  # rel_tol 1e-9 for non-integers
    ("0.3001", "0.3", {}, False),
    ("3.0000000001", 3, {}, False),  # a whole answer takes float noise alone (red team 50)
    ("3.0000000000000004", 3, {}, True),
    ("100", 101, {"rel_tol": 0.02}, True),  # a given tolerance applies to whole numbers too
    ("100", 103, {"rel_tol": 0.02}, False),
    ("nan", "0", {}, False),
    (float("nan"), 0, {}, False),
    ("inf", 10**400, {}, False),
    (Decimal("sNaN"), 0, {}, False),  # a signalling NaN does not signal
    (Decimal("1e999999999"), 0, {}, False),  # the exponent cap applies to Decimal as to text
    (Decimal("2.50"), "5/2", {}, True),
    ("\u22125", -5, {}, True),
    ("\\frac{1}{2}", 0.5, {}, True),
    ("½", "0.5", {}, True),
    ("-5", 5, {}, False),
    ("50%", 50, {}, False),  # strict: both or neither carry %
    ("50%", "50%", {}, True),
    ("50%", 50, {"percent": "ignore"}, True),
    ("50%", 0.5, {"percent": "either"}, True),
    ("50%", 50, {"percent": "either"}, True),
    (0.5, "50%", {"percent": "either"}, True),
    ("50%", 0.4, {"percent": "either"}, False),
    ("7", ["6", "7"], {}, True),
    ("7", ("6", 8), {}, False),
    ("seven", 7, {}, False),
    (None, 7, {}, False),
    (True, 1, {}, False),
    ("5 apples", 5, {}, False),
    ("abc", "3", {}, False),  # the agent's unreadable answer is a miss, never an error
    ("", 3, {}, False),
    (float("nan"), 3, {}, False),
    (Decimal("NaN"), 3, {}, False),
    ([3], 3, {}, False),
    ("3", ["3", 4.5, Fraction(1, 2)], {}, True),
]


@pytest.mark.parametrize("actual, expected, options, result", MATCHES)
def test_numeric_match(actual, expected, options, result):
    assert numeric_match(actual, expected, **options) is result


@pytest.mark.parametrize(
    "options, message",
    [
        ({"percent": "loose"}, "percent must be"),
        ({"rel_tol": -1}, "rel_tol must be"),
        ({"abs_tol": float("nan")}, "abs_tol must be"),
        ({"rel_tol": "0.1"}, "rel_tol must be"),
    ],
)
def test_authors_mistakes_raise(options, message):
    with pytest.raises(ValueError, match=message):
        numeric_match("1", 1, **options)


@pytest.mark.parametrize("expected", [None, {"a": 1}, [], [None]])
def test_bad_expected_raises(expected):
    with pytest.raises((TypeError, ValueError), match="numeric_match"):
        numeric_match("1", expected)


UNREADABLE_EXPECTED = [
    "abc", "3 apples", "", " ", "nan", "inf", "0x1F", "1,5", "1/0", "1e999999999", "\\boxed{" * 17 + "5" + "}" * 17,
    float("nan"), float("inf"), float("-inf"), Decimal("NaN"), Decimal("sNaN"), Decimal("Infinity"), 1 + 2j,
]  # fmt: skip


@pytest.mark.parametrize("expected", UNREADABLE_EXPECTED, ids=[repr(case)[:40] for case in UNREADABLE_EXPECTED])
@pytest.mark.parametrize("actual", ["3", "abc", None])
def test_unreadable_expected_is_the_authors_mistake(actual, expected):
    # Raised whatever the agent answered: a task whose answer can never match fails loudly.
    with pytest.raises(ValueError, match=r"^numeric_match\(\): expected .* is not a number parse_number can read"):
        numeric_match(actual, expected)


@pytest.mark.parametrize("expected", [["3", "abc"], ("abc",), {"x", "4"}, [3, float("nan")]])
def test_unreadable_alternative_names_itself(expected):
    bad = next(item for item in expected if parse_number(item) is None)
    with pytest.raises(ValueError, match=rf"the alternative {re.escape(repr(bad))} in expected is not a number"):
        numeric_match("3", expected)


def test_long_unreadable_expected_is_shortened_in_the_message():
    with pytest.raises(ValueError) as raised:
        numeric_match("3", "x" * 10_000)
    assert len(str(raised.value)) < 300


@pytest.mark.parametrize("expected", [True, False, None, b"3", object(), {"a": 1}, [], [True], ["3", None]])
def test_wrong_type_expected_is_a_type_or_value_error(expected):
    with pytest.raises((TypeError, ValueError), match="^numeric_match\\(\\): expected"):
        numeric_match("3", expected)


def test_the_author_is_told_before_the_agent_is_read():
    # An agent that answered nothing must not hide the author's mistake.
    with pytest.raises(ValueError):
        numeric_match(None, "three")


def test_parse_number_stays_the_parser():
    for value in [*UNREADABLE_EXPECTED, True, None]:
        assert parse_number(value) is None


def test_deeply_decorated_text_returns_quickly():
    start = time.perf_counter()
    assert parse_number("\\boxed{" * 16 + "5" + "}" * 16) == 5
    assert parse_number("\\boxed{" * 100_000 + "5" + "}" * 100_000) is None
    assert numeric_match("$" * 50_000 + "5" + "$" * 50_000, 5) is False
    assert time.perf_counter() - start < 5.0


ANY_ACTUAL = st.one_of(
    st.text(max_size=30),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.decimals(allow_nan=True, allow_infinity=True),
    st.fractions(),
    st.none(),
    st.booleans(),
    st.binary(max_size=5),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@given(
    ANY_ACTUAL,
    st.sampled_from(["3", 3, 0.5, "50%", ["1", "2/3"], Fraction(-7, 2), "\\boxed{1,234}"]),
    st.sampled_from(["strict", "ignore", "either"]),
    st.sampled_from([{}, {"rel_tol": 0.1}, {"abs_tol": 1}, {"rel_tol": 0, "abs_tol": 0}]),
)
def test_an_actual_never_raises(actual, expected, percent, tolerance):
    assert numeric_match(actual, expected, percent=percent, **tolerance) in (True, False)


@given(st.text(max_size=30))
def test_expected_text_raises_exactly_when_it_does_not_parse(text):
    if parse_number(text) is None:
        with pytest.raises(ValueError, match="numeric_match"):
            numeric_match("1", text)
    else:
        assert numeric_match(text, text) is True


@given(st.integers())
def test_integers_round_trip_exactly(value):
    assert parse_number(str(value)) == value
    assert numeric_match(str(value), value)


@given(st.fractions())
def test_fractions_round_trip(value):
    assert parse_number(f"{value.numerator}/{value.denominator}") == value


@given(st.text(max_size=30))
def test_never_raises_on_any_text(text):
    parse_number(text)
    numeric_match(text, "1")


NUMBER_PARTS = ["0", "1", "5", "9", "00", ".", "..", "+", "-", "$", " ", "\t", "\x1c", "%", ",", "e", "x", "/"]
NUMBER_TEXT = st.lists(st.sampled_from(NUMBER_PARTS), max_size=10).map("".join)
PLAIN_NUMBERS = st.one_of(NUMBER_TEXT, st.integers(), st.floats(allow_nan=True, allow_infinity=True), st.booleans())


@given(PLAIN_NUMBERS)
def test_the_quick_reading_is_the_parsers_reading(value):
    # Plain numbers are read without re or fractions (shim start-up): whatever the quick reading
    # accepts must be exactly the value parse_number reads, or a plain answer would grade differently.
    quick = _numbers._quick(value)
    if quick is not None:
        assert parse_number(value) == Fraction(quick[0], 10 ** quick[1])


@given(PLAIN_NUMBERS, st.one_of(PLAIN_NUMBERS, st.lists(PLAIN_NUMBERS, max_size=3)))
def test_the_quick_match_is_the_full_match(actual, expected):
    quick = _numbers._quick_match(actual, expected)
    if quick is not None:
        assert quick is _slow_numeric_match(actual, expected)


@pytest.mark.parametrize(
    ("actual", "expected", "result"),
    [
        ("$4.20", "4.20", True),
        ("4.2", 4.2, True),
        ("1000000000000", "1000000000001", False),  # whole numbers compare exactly
        ("1000000000000.5", "1000000000000.50000001", True),  # others within rel_tol=1e-9
        ("1.5", "1.6", False),
        ("-0.0", 0, True),
        ("5.", ["4", "5"], True),
    ],
)
def test_the_quick_match_on_answers_as_written(actual, expected, result):
    assert _numbers._quick_match(actual, expected) is result
    assert _slow_numeric_match(actual, expected) is result


@pytest.mark.parametrize(
    ("actual", "expected", "result"),
    [
        # Red team 46: a non-whole guess took rel_tol's band around a whole expected number, +-1 at
        # 1e9 and +-1099 at 2**40, so `<estimate>.5` scored where `<estimate>` did not.
        ("1000000006.1", 1000000007, False),
        ("1000000007.9", "1000000007", False),
        ("1099511627000.5", 2**40, False),
        ("1099511628800.5", 2**40, False),
        ("999999999999999000.5", "1000000000000000000", False),
        ("1000000007.5", 1000000007, False),  # halfway: no nearer to it than to the next
        ("1.0000000061e9", 1000000007, False),  # the full parser's reading
        ("\\frac{2000000013}{2}", 1000000007, False),
        # Float noise on a whole answer still reads as that answer: it rounds to it alone.
        ("42.00000000000001", 42, True),
        ("41.99999999999999", "42", True),
        ("1000000007.0000001", 1000000007, True),
        # Float noise is a few parts in 10**12 at most: 0.4 off a whole answer is no noise (red team 50).
        ("1000000007.4", 1000000007, False),
        ("1000000006.6", 1000000007, False),
        ("999999999999.51", 10**12, False),
        ("123456789012.4", "123456789012", False),
        ("1.0000000074e9", 1000000007, False),
        # Around an expected number that is not whole, rel_tol applies as before.
        ("1000000006.6", "1000000007.5", True),
    ],
)
def test_a_whole_expected_number_gives_a_guess_no_band(actual, expected, result):
    assert numeric_match(actual, expected) is result
    assert _slow_numeric_match(actual, expected) is result


def test_an_unreadable_alternative_after_a_match_still_tells_the_author():
    assert _numbers._quick_match("5", ["5", "abc"]) is None
    with pytest.raises(ValueError, match="'abc'"):
        numeric_match("5", ["5", "abc"])


def _slow_numeric_match(actual, expected):
    """``numeric_match`` as the full parser and Fractions decide it."""
    quick_match = _numbers._quick_match
    _numbers._quick_match = lambda actual, expected: None
    try:
        return numeric_match(actual, expected)
    finally:
        _numbers._quick_match = quick_match


@pytest.mark.parametrize(
    "answer, reward",
    [
        ("Answer: 180 km", True),
        ("Answer: 180km", True),
        ("Answer: **180 km**.", True),
        ("Answer: 180 Kilometres", True),
        ("Answer: $180\\,\\text{km}$", True),
        ("Answer: $180\\ \\mathrm{km}$", True),
        ("Answer: 180", True),
        ("Answer: 190 km", False),
        ("Answer: 180 miles", False),
        ("about 180 km", False),
    ],
)
def test_the_readmes_recipe_for_a_quantity_with_units(answer, reward):
    """A new author's trial: "Answer: 180 km" scored 0 with no hint; the README now shows the way."""
    from pathlib import Path

    from nemo_gym.data.tasks.harbor.responses import response

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    source = readme.split("**A quantity with units.**", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict = {}
    exec(compile(source, "README.md", "exec"), namespace)
    assert namespace["verify"](response(f"The distance is:\n\n{answer}"), {"answer": "180"}) is reward


def test_an_ogham_space_mark_is_no_sign_and_no_space_to_a_number():
    # Red team 61: exact_match reads U+1680 (drawn as a dash) as "-", while parse_number stripped it as
    # white space: "\u16805" was 5 to numeric_match and -5 to exact_match, and
    # `numeric_match(a, E) or exact_match(a, E)` scored it for either sign.
    answer = "\u16805"
    assert parse_number(answer) is None
    assert [numeric_match(answer, 5) or exact_match(answer, "5"), exact_match(answer, "-5")] == [False, True]
    assert parse_number("5\u1680") is None and parse_number("\u2212 5".replace(" ", "")) == -5
