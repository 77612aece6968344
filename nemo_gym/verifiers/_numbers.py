"""``parse_number`` and ``numeric_match``: exact number reading, never through bare ``float()``.

Strings are parsed to ``fractions.Fraction`` so that huge integers compare exactly and ``0.1``
means one tenth. The grammar is deliberately narrow: what it does not recognise is not a number.
"""

from __future__ import annotations

import sys

from nemo_gym.verifiers._expected import COLLECTIONS, alternatives
from nemo_gym.verifiers._lazy import Patterns

# fractions, numbers, math and re cost start-up time: each is imported where it is first needed,
# fractions once a number beyond plain decimals has been read (see _quick). decimal is never
# imported to test for a Decimal: a Decimal's module is loaded already (see _is_decimal).
TYPE_CHECKING = False  # typing is imported for the type checker only: it costs start-up time
if TYPE_CHECKING:
    from fractions import Fraction
    from typing import Any, Callable, Optional, Tuple

# An exponent beyond this is refused, not computed: 10**n for a huge n takes time and memory that
# a hostile answer such as "1e999999999" must not be able to claim, and no real answer needs it.
EXPONENT_CAP = 1000
# CPython 3.11+ refuses to convert longer digit strings to int by default (quadratic-time guard);
# the same limit on every version keeps the answer the same on every version.
MAX_DIGITS = 4300
# Decorations wrapping one number ("$\boxed{\text{5}}$" has three) are unwrapped one scan each: past
# this many, the text is not a number, so "\boxed{" nested 10**5 deep cannot cost quadratic time.
MAX_DECORATIONS = 16
# The longest text read as a number: MAX_DIGITS digits and every decoration fit well within it, and
# each unwrapping scan is bounded by it (a box nested 10**5 deep is refused at once, not scanned).
MAX_NUMBER_TEXT = 20_000

_PERCENT_MODES = ("strict", "ignore", "either")
_DEFAULT_REL_TOL = (1, 10**9)  # as a Fraction's numerator and denominator
# What a whole expected number takes for float noise (41.99999999999999 for 42), relatively: binary64
# arithmetic is off by a few parts in 10**16 a step, so a few hundred steps stay within it.
_FLOAT_NOISE = (1, 10**13)

_FOLD = str.maketrans(
    {
        **{chr(0xFF10 + digit): str(digit) for digit in range(10)},
        "\uff0e": ".",
        "\uff0c": ",",
        "\uff0b": "+",
        "\uff0d": "-",
        "\u2212": "-",
        "\uff0f": "/",
        "\uff05": "%",
        "\uff04": "$",
    }
)
# Vulgar fractions, as a Fraction's numerator and denominator.
_VULGAR = {
    "½": (1, 2), "⅓": (1, 3), "⅔": (2, 3), "¼": (1, 4), "¾": (3, 4), "⅕": (1, 5), "⅖": (2, 5),
    "⅗": (3, 5), "⅘": (4, 5), "⅙": (1, 6), "⅚": (5, 6), "⅐": (1, 7), "⅛": (1, 8), "⅜": (3, 8),
    "⅝": (5, 8), "⅞": (7, 8), "⅑": (1, 9), "⅒": (1, 10), "↉": (0, 3),
}  # fmt: skip

# Unsigned decimals: strict thousands groups (1,234,567; never 1,5 or 0,123), an optional
# fraction part, an optional e-exponent.
_UNSIGNED = r"(?:[1-9][0-9]{0,2}(?:,[0-9]{3})+|[0-9]+)(?:\.[0-9]+)?|\.[0-9]+"
_PATTERNS = Patterns(
    decimal=rf"(?a)([+-]?)({_UNSIGNED})(?:[eE]([+-]?[0-9]+))?",
    times_ten=(
        rf"(?a)([+-]?)({_UNSIGNED})\s*(?:×|\\times|\\cdot|·)\s*10\s*\^\s*"
        r"(?:\{\s*([+-]?[0-9]+)\s*\}|([+-]?[0-9]+))"
    ),
    frac=r"(?a)\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}",
    slash=r"([^/]+)/([^/]+)",
    vulgar_mixed="(?:([0-9]+) ?)?([" + "".join(_VULGAR) + "])",
    # A sign, then an optional currency sign (white space may follow a currency sign, not a bare sign).
    prefix=r"(?s)([+-]?)(?:(?:\\\$|[$€£¥₹])\s*)?(.*)",
)

# Decorations that may wrap the whole string: (opening, closing); brace-closed ones are checked
# for balance so that "\boxed{1}+\boxed{2}" is not read as one box.
_WRAPPERS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"), ("**", "**"), ("`", "`"))
_BRACE_WRAPPERS = ("\\boxed{", "\\fbox{", "\\text{", "\\textbf{", "\\mathrm{", "\\mathbf{")


def _closes_at_end(text: str, start: int) -> bool:
    """Whether the brace opened just before ``start`` closes at the last character of ``text``."""
    depth = 1
    for index in range(start, len(text)):
        char = text[index]
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index == len(text) - 1
    return False


def _unwrap(text: str) -> Optional[str]:
    """``text`` without one decoration wrapping all of it, or ``None`` when there is none."""
    for opening, closing in _WRAPPERS:
        if len(text) > len(opening) + len(closing) and text.startswith(opening) and text.endswith(closing):
            return text[len(opening) : -len(closing)]
    for opening in _BRACE_WRAPPERS:
        if text.startswith(opening) and _closes_at_end(text, len(opening)):
            return text[len(opening) : -1]
    return None


def _exact(mantissa: str, exponent: Optional[str]) -> Optional[Fraction]:
    if sum(char.isdigit() for char in mantissa) + len(exponent or "") > MAX_DIGITS:
        return None
    from fractions import Fraction

    value = Fraction(mantissa.replace(",", ""))
    if exponent is not None:
        # Its digits are measured before int() reads them: a longer one is past the cap anyway, and
        # int() of more than MAX_DIGITS of them raises (3.11+, and security releases before).
        digits = exponent.lstrip("+-").lstrip("0")
        if len(digits) > len(str(EXPONENT_CAP)):
            return None
        power = -int(digits or "0") if exponent.startswith("-") else int(digits or "0")
        if abs(power) > EXPONENT_CAP:
            return None
        value *= Fraction(10) ** power
    return value


def _plain(text: str) -> Optional[Fraction]:
    """A signed decimal such as ``-1,234.5e-3`` (the parts of fractions and ``× 10^n``)."""
    match = _PATTERNS.decimal.fullmatch(text)
    if match is None:
        return None
    value = _exact(match.group(2), match.group(3))
    if value is None:
        return None
    return -value if match.group(1) == "-" else value


def _ratio(numerator: str, denominator: str) -> Optional[Fraction]:
    top, bottom = _plain(numerator.strip()), _plain(denominator.strip())
    if top is None or bottom is None or bottom == 0:
        return None
    return top / bottom


def _body(text: str) -> Optional[Fraction]:
    """The unsigned-or-signed number that remains once decorations, sign and currency are gone."""
    match = _PATTERNS.times_ten.fullmatch(text)
    if match:
        value = _exact(match.group(2), match.group(3) or match.group(4))
        return None if value is None else (-value if match.group(1) == "-" else value)
    match = _PATTERNS.frac.fullmatch(text)
    if match:
        return _ratio(match.group(1), match.group(2))
    match = _PATTERNS.vulgar_mixed.fullmatch(text)
    if match:
        from fractions import Fraction

        if len(match.group(1) or "") > MAX_DIGITS:
            return None  # as _exact: int() of that many digits raises
        return int(match.group(1) or 0) + Fraction(*_VULGAR[match.group(2)])
    match = _PATTERNS.slash.fullmatch(text)
    if match:
        return _ratio(match.group(1), match.group(2))
    return _plain(text)


def _parse_text(text: str) -> Optional[Tuple[Fraction, bool]]:
    """``(value, has_percent)`` for a number written as text, else ``None``."""
    if len(text) > MAX_NUMBER_TEXT:
        return None
    if "\u1680" in text:  # white space to str.strip, drawn as a dash, and a minus to exact_match: no number
        return None
    # LaTeX's thousands separator, 1{,}234 (a comma is punctuation in math mode without the braces).
    text = text.translate(_FOLD).replace("{,}", ",").strip()
    percent = dot = False
    decorations = 0
    while True:
        inner = _unwrap(text)
        if inner is not None:
            decorations += 1
            if decorations > MAX_DECORATIONS:
                return None
            text = inner.strip()
        elif not percent and (text.endswith("\\%") or text.endswith("%")):
            percent, text = True, text[: -2 if text.endswith("\\%") else -1].rstrip()
        elif not dot and text.endswith(".") and not text.endswith(".."):
            dot, text = True, text[:-1].rstrip()
        else:
            break
    prefix = _PATTERNS.prefix.fullmatch(text)
    assert prefix is not None  # the pattern matches every string
    sign, rest = prefix.groups()
    if sign and rest.startswith(("+", "-")):
        return None
    value = _body(rest)
    if value is None:
        return None
    return (-value if sign == "-" else value), percent


def _parse(value: Any) -> Optional[Tuple[Fraction, bool]]:
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        return _parse_text(value)
    import numbers

    if isinstance(value, numbers.Rational):
        from fractions import Fraction

        return Fraction(int(value.numerator), int(value.denominator)), False
    if _is_decimal(value):
        # Read as its exact text: sNaN/NaN/Infinity are not numbers, and the exponent and digit caps
        # apply as they do to text (Fraction(Decimal("1e999999999")) would build a huge int).
        return _parse_text(str(value))
    if isinstance(value, (float, numbers.Real)):
        try:
            number = float(value)
        except (ArithmeticError, TypeError, ValueError):  # an odd numbers.Real of someone's making
            return None
        import math

        if not math.isfinite(number):
            return None
        from fractions import Fraction

        # The shortest repr of a float is the decimal its author wrote: 0.1 is one tenth.
        return Fraction(repr(number)), False
    return None


def _is_decimal(value: Any) -> bool:
    """Whether ``value`` is a ``decimal.Decimal``, without importing ``decimal`` to find out.

    An instance's class is loaded already, by ``decimal`` or by ``_decimal`` (its C half) alone.
    """
    for name in ("decimal", "_decimal"):
        module = sys.modules.get(name)
        kind = getattr(module, "Decimal", None)
        if isinstance(kind, type) and isinstance(value, kind):
            return True
    return False


def parse_number(value: Any) -> Optional[Fraction]:
    """The exact value of a number or of a number written as text, ``None`` when it is not one.

    Reads ints of any size (up to ``MAX_DIGITS`` digits in text), decimals, ``e`` exponents and
    ``× 10^{n}`` (beyond ``EXPONENT_CAP``: not a number), a leading ``+``, the Unicode minus,
    strict thousands groups, a leading currency sign, ``a/b``, ``\\frac{a}{b}``, vulgar fractions,
    full-width digits, one trailing ``.``, a trailing ``%`` (dropped: ``"50%"`` is 50), LaTeX's
    ``{,}`` thousands separator (``1{,}234``) and decorations that wrap the whole string
    (``$…$``, ``\\(…\\)``, ``**…**``, `` `…` ``, ``\\boxed{…}``, ``\\text{…}``; at most
    ``MAX_DECORATIONS`` deep). Never a number: ``bool``, ``nan``, ``inf``,
    words, hex, superscripts, expressions, leftovers such as ``"5 apples"``, text longer than
    ``MAX_NUMBER_TEXT`` characters.
    """
    parsed = _parse(value)
    return None if parsed is None else parsed[0]


def _tolerance(name: str, value: Any) -> Optional[Fraction]:
    if value is None:
        return None
    parsed = None if isinstance(value, str) else _parse(value)
    if parsed is None or parsed[0] < 0:
        raise ValueError(f"numeric_match(): {name} must be a finite number >= 0, got {value!r}")
    return parsed[0]


def _expected_number(value: Any, in_collection: bool) -> Tuple[Fraction, bool]:
    """One alternative of ``expected``, parsed; an unreadable one is the author's bug, not a miss."""
    parsed = _parse(value)
    if parsed is None:
        shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
        where = f"the alternative {shown} in expected" if in_collection else f"expected {shown}"
        raise ValueError(
            f"numeric_match(): {where} is not a number parse_number can read, so no answer could ever "
            "match it; fix the task's expected value"
        )
    return parsed


def _quick(value: Any) -> Optional[Tuple[int, int]]:
    """``(n, k)``, meaning ``n / 10**k``, for an ``int``, a ``float`` or plain ASCII decimal text.

    ``None`` for anything else (the full parser decides then). Plain text is what ``parse_number``
    reads without ``re`` or ``fractions``: a sign, a ``$``, digits with an optional point, one
    trailing ``.``; it reads to the same value as there (a property test holds the two equal).
    """
    kind = type(value)
    if kind is int:
        return value, 0
    if kind is float:
        value = repr(value)  # the decimal its author wrote, as _parse reads a float
    elif kind is not str or not value.isascii() or len(value) > MAX_NUMBER_TEXT:
        return None
    text = value.strip()
    if text.endswith(".") and not text.endswith(".."):
        text = text[:-1].rstrip()
    negative = text.startswith("-")
    if text.startswith(("+", "-")):
        text = text[1:]
    if text.startswith("$"):
        text = text[1:].lstrip()
    whole, point, fraction = text.partition(".")
    digits = whole + fraction
    if not digits.isdigit() or (point and not fraction) or len(digits) > MAX_DIGITS:
        return None  # isdigit() of ASCII text is [0-9]+ (an empty part is allowed on one side)
    return (-int(digits) if negative else int(digits)), len(fraction)


def _quick_match(actual: Any, expected: Any) -> Optional[bool]:
    """``numeric_match`` with no tolerance when every side is a ``_quick`` number, else ``None``.

    Scaled to a common power of ten the values are integers, and the default comparison needs no
    ``Fraction`` (``_default_close``).
    """
    got = _quick(actual)
    items = list(expected) if isinstance(expected, COLLECTIONS) else [expected]
    wanted = [other for other in map(_quick, items) if other is not None]
    if got is None or not items or len(wanted) < len(items):
        return None  # the full parser reads them (and tells the author of an unreadable alternative)
    for other in wanted:
        scale = max(got[1], other[1])
        a, b = got[0] * 10 ** (scale - got[1]), other[0] * 10 ** (scale - other[1])
        if _default_close(a, b, 10**scale):
            return True
    return False


def _default_close(a: Any, b: Any, unit: Any) -> bool:
    """``numeric_match``'s comparison with no tolerance given, of the answer ``a`` and the expected
    ``b``, in units of ``unit`` (two ``Fraction``s and 1, or two ints scaled alike and the scale).

    An expected whole number is met by itself, or by float noise (within ``_FLOAT_NOISE``, and nearer
    to it than to any other whole number); any other expected number, within ``rel_tol=1e-9``.
    Whether a number is whole is read from the expected side alone: the agent writes the other, and a
    guess made not whole (``1000000006.5``) took the band around ``1000000007`` (red teams 46, 50)."""
    if a == b:
        return True
    whole = b % unit == 0
    numerator, denominator = _FLOAT_NOISE if whole else _DEFAULT_REL_TOL
    if abs(a - b) * denominator > numerator * max(abs(a), abs(b)):
        return False
    return bool(not whole or 2 * abs(a - b) < unit)


def numeric_match(
    actual: Any,
    expected: Any,
    *,
    rel_tol: Optional[float] = None,
    abs_tol: Optional[float] = None,
    percent: str = "strict",
) -> bool:
    """Whether ``actual`` is numerically equal to ``expected`` (or any of a collection of them).

    Both sides are numbers or text read by ``parse_number``. An ``actual`` that does not parse is
    ``False`` (the agent's miss); an ``expected`` (or any alternative of it) that does not parse,
    such as ``"abc"``, ``"3 apples"`` or ``nan``, raises ``ValueError`` (the author's bug), as does a
    wrong type such as ``None`` or ``bool`` (``TypeError``).
    With no tolerance given, an expected whole number is met exactly (or by float noise, within one
    part in 10**13) and any other within ``rel_tol=1e-9``; a given
    ``rel_tol``/``abs_tol`` applies to every pair. ``percent``:
    ``"strict"`` (both sides or neither carry ``%``), ``"ignore"`` (the sign is dropped),
    ``"either"`` (``X%`` equals ``X`` or ``X/100``).
    """
    if percent not in _PERCENT_MODES:
        raise ValueError(f"numeric_match(): percent must be 'strict', 'ignore' or 'either', got {percent!r}")
    if rel_tol is None and abs_tol is None:
        quick = _quick_match(actual, expected)  # most answers: without importing fractions or re
        if quick is not None:
            return quick
    import numbers

    rel, absolute = _tolerance("rel_tol", rel_tol), _tolerance("abs_tol", abs_tol)
    items = alternatives(expected, (str, numbers.Number), "numeric_match", "a number or a str")
    wanted = [_expected_number(item, isinstance(expected, COLLECTIONS)) for item in items]
    got = _parse(actual)
    if got is None:
        return False

    def close(a: Fraction, b: Fraction) -> bool:
        if rel is None and absolute is None:
            return _default_close(a, b, 1)
        return abs(a - b) <= max((rel or 0) * max(abs(a), abs(b)), absolute or 0)

    return any(_percent_pairs_match(got, other, percent, close) for other in wanted)


def _percent_pairs_match(
    got: Tuple[Fraction, bool],
    other: Tuple[Fraction, bool],
    percent: str,
    close: Callable[[Fraction, Fraction], bool],
) -> bool:
    (a, a_percent), (b, b_percent) = got, other
    if a_percent == b_percent or percent == "ignore":
        return close(a, b)
    if percent == "strict":
        return False
    # "either": the side with % may mean X or X/100.
    if a_percent:
        return close(a, b) or close(a / 100, b)
    return close(a, b) or close(a, b / 100)
