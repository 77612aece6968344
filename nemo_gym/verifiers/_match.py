"""``exact_match``: string equality that ignores only what no reader can see, plus opt-in folds."""

from __future__ import annotations

from nemo_gym.verifiers._expected import alternatives
from nemo_gym.verifiers._lazy import Patterns

TYPE_CHECKING = False  # typing is imported for the type checker only: it costs start-up time
if TYPE_CHECKING:
    from re import Match
    from typing import Any, Optional

_UNICODE_FORMS = ("NFC", "NFKC")
# What str.split() splits on (str.isspace, the same 29 on every Python 3.8-3.13), each made a space:
# collapse_whitespace joined split()'s words, an object per word, 20 times the text's size for a
# response of short words; re.sub keeps a piece per match too.
_SPACES = str.maketrans(
    dict.fromkeys(
        "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
        "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000",
        " ",
    )
)

# Typographic quotes and dashes folded to ASCII, invisible spaces to a space, and zero-width
# characters dropped: a reader cannot tell these apart, so an answer must not fail on them.
_INVISIBLE = str.maketrans(
    {
        **dict.fromkeys("\u2018\u2019\u201a\u201b\u2032\uff07", "'"),
        **dict.fromkeys("\u201c\u201d\u201e\u201f\u2033\uff02", '"'),
        **dict.fromkeys(
            "\u1680\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u2e3a\u2e3b\ufe31\ufe32\ufe58\ufe63\uff0d", "-"
        ),
        **dict.fromkeys("\u00a0\u2007\u202f", " "),
        **dict.fromkeys("\u200b\u2060\ufeff", None),
    }
)
# Under ignore_punctuation: every percent sign (%, per mille, per ten thousand, the Arabic ones,
# the full-width and small forms) stays, and so does a dash a reader takes for a minus before a number
# (those _INVISIBLE leaves as they are, kept as written): 5 % is not 5, and a Hebrew maqaf before 5 is
# not 5.
_PERCENT_SIGNS = "%\u0609\u060a\u066a\u2030\u2031\ufe6a\uff05"
_MINUS_LIKE = "\u058a\u05be\u1400\u1806\u2027\u2043\u2053\u2e17\u2e1a\u2e40\u2e43\u2e5d\u301c\u3030\u30a0\U00010ead"
_SIGN = f"[-+{_MINUS_LIKE}]"
_PATTERNS = Patterns(
    # Numbers keep their sign and the marks between their digits under ignore_punctuation: -5 is not
    # 5, .5 is not 5, 1/2 is not 12, 10:30 is not 1030. A sign up to four marks or spaces before a
    # number stays (- 5, -$5, -(5) are not 5 or $5), and so does one that starts a word of anything
    # but spaces (-\frac{1}{2}, -½, -x: red team 50), never a hyphen inside a word (x-ray) or a dash
    # before a space. The look-ahead is bounded, and a run of marks between digits is taken once, so
    # a long run costs linear time; a sign further away (-(((((5))))) is dropped.
    number_or_punctuation=f"({_SIGN}?"
    + r"(?:\d+|\.\d+)(?:[^\w\s]+\d+)*|"
    + f"{_SIGN}"
    + r"(?=[^\w]{0,4}\d)|(?<!\w)"
    + f"{_SIGN}"
    + r"(?=\S))|([^\w\s])",
    article=r"(?i)\b(?:a|an|the)\b\s*",
)


def _strip_punctuation(text: str) -> str:
    import unicodedata  # on first use: it costs start-up time

    def keep_numbers(match: Match[str]) -> str:
        if match.group(1) is not None:
            return match.group(1)
        mark = match.group(2)
        return "" if mark not in _PERCENT_SIGNS and unicodedata.category(mark).startswith("P") else mark

    return _PATTERNS.number_or_punctuation.sub(keep_numbers, text)


def _normalize(
    text: str,
    *,
    ignore_case: bool,
    collapse_whitespace: bool,
    ignore_punctuation: bool,
    remove_articles: bool,
    unicode_form: str,
) -> str:
    if not text.isascii():  # ASCII text is in every normal form already
        import unicodedata  # on first use: it costs start-up time

        text = unicodedata.normalize(unicode_form, text).translate(_INVISIBLE)  # type: ignore[arg-type]
    text = text.strip()
    if ignore_case:
        text = text.casefold()
    if ignore_punctuation:
        text = _strip_punctuation(text)
    if remove_articles:
        text = _PATTERNS.article.sub("", text)
    if collapse_whitespace:
        text = text.translate(_SPACES)
        while "  " in text:  # each pass halves every run: a few passes, one string each
            text = text.replace("  ", " ")
    return text.strip()


def _as_text(value: Any) -> Optional[str]:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        try:
            return str(value)
        except ValueError:  # past the interpreter's digit limit (4300): no answer, never an error
            return None
    return value if isinstance(value, str) else None


def exact_match(
    actual: Any,
    expected: Any,
    *,
    ignore_case: bool = False,
    collapse_whitespace: bool = False,
    ignore_punctuation: bool = False,
    remove_articles: bool = False,
    unicode_form: str = "NFC",
) -> bool:
    """Whether ``actual`` equals ``expected`` (or any of a collection of alternatives).

    Always: both ends stripped, Unicode ``unicode_form`` (``"NFC"``, or ``"NFKC"`` on request),
    typographic quotes and dashes folded to ASCII, non-breaking spaces read as spaces and zero-width
    spaces dropped. Opt-in: ``ignore_case`` (``casefold``), ``collapse_whitespace``,
    ``ignore_punctuation`` (numbers keep their sign and the marks between their digits, and percent
    signs stay: ``-5``, ``- 5``, ``-$5``, ``.5``, ``5%`` and ``5 %`` stay distinct from ``5`` and
    ``$5``, ``1/2`` from ``12``; a sign stays up to four marks or spaces before its number),
    ``remove_articles`` (English a/an/the). ``actual`` is a ``str`` or an ``int``; anything else
    is ``False``. An alternative that normalises to ``""`` never matches. No substring semantics.
    """
    if unicode_form not in _UNICODE_FORMS:
        raise ValueError(f"exact_match(): unicode_form must be 'NFC' or 'NFKC', got {unicode_form!r}")
    wanted = [_as_text(item) for item in alternatives(expected, (str, int), "exact_match", "a str or an int")]
    if None in wanted:
        raise ValueError(
            "exact_match(): expected holds an int with more digits than this Python writes as text: pass a str"
        )
    text = _as_text(actual)
    if text is None:
        return False

    def normalize(value: str) -> str:
        return _normalize(
            value,
            ignore_case=ignore_case,
            collapse_whitespace=collapse_whitespace,
            ignore_punctuation=ignore_punctuation,
            remove_articles=remove_articles,
            unicode_form=unicode_form,
        )

    got = normalize(text)
    for alternative in wanted:
        normalized = normalize(alternative or "")
        if normalized and normalized == got:
            return True
    return False
