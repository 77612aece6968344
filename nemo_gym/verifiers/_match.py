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
# the full-width and small forms) stays: 5 % is not 5.
_PERCENT_SIGNS = "%\u0609\u060a\u066a\u2030\u2031\ufe6a\uff05"
# Marks a reader takes for a minus that are not Unicode dashes (Pd): a Hebrew maqaf before 5 is not 5.
_MINUS_LIKE = (
    "\u058a\u05be\u070b\u070c\u1400\u1806\u2027\u2043\u2053\u2e17\u2e1a\u2e1b\u2e1e\u2e1f\u2e40\u2e43"
    "\u2e5d\u301c\u3030\u30a0\ufe49\U00010ead"
)
# Slashes stay wherever they are: x/y is not xy, nor 2/x 2x (U+2044 and U+2215 are symbols, kept anyway).
_SLASHES = "/\u2e4a\ufe68\uff0f"
_POINTS = ".\u066b\u2024\uff0e"  # a decimal point before a digit stays: .5 is not 5
_OPERATORS = "*"  # stays with a number beside it, as a dash does: 2 * 3 is not 2 3
# UAX #15's stream-safe format: a run of combining marks gets a U+034F after each 30, before the text
# is normalised. CPython orders a run by insertion sort, so an answer of one long run took minutes
# (red team 58); the standard's own streams never hold a longer one.
_MAX_MARKS = 30
# No combining marks themselves, but nothing else once decomposed (U+0F73 is U+0F71 U+0F72; U+FF9E and
# U+FF9F under NFKC), counted as the marks they become: the only five from Unicode 12.1 to 15.1.
_MARKS_WITHIN = {"\u0f73": 2, "\u0f75": 2, "\u0f81": 2, "\uff9e": 1, "\uff9f": 1}
_PATTERNS = Patterns(
    # A run of marks and spaces holding at least one mark, whole: its start is never inside a run of
    # spaces (the look-behind), so a long run of spaces costs linear time.
    marks=r"(?<!\s)\s*[^\w\s][^\w]*",
    # An article before what follows it; "a" not before a letter that stands alone: "A, B" and "A B"
    # keep their A (a hedge across options), "Hepatitis A" too (no word follows), "a cat" loses it.
    article=r"(?i)\b(?:an|the)\s+(?=\S)|\ba\s+(?=\S)(?![^\W\d_](?!\w|[-./:'\u2019]\w))",
)


def _stream_safe(text: str) -> str:
    """``text`` with U+034F after every ``_MAX_MARKS`` combining marks in a row (UAX #15's stream-safe
    text format), so that normalising it costs linear time; the same text when it has no such run."""
    import unicodedata

    combining, within = unicodedata.combining, _MARKS_WITHIN.get
    pieces, run, start = [], 0, 0
    for index, char in enumerate(text):
        marks = 1 if combining(char) else within(char, 0)
        if not marks:
            run = 0
        elif run + marks > _MAX_MARKS:
            pieces.append(text[start:index])
            pieces.append("\u034f")
            start, run = index, marks
        else:
            run += marks
    return "".join(pieces) + text[start:] if pieces else text


def _strip_punctuation(text: str) -> str:
    """``text`` without its punctuation, except where it belongs to a number (the contract: it never
    touches numbers). In each run of marks and spaces, between the word characters ``left`` and
    ``right`` (``""`` at an end):

    - spaces, percent signs, slashes and anything that is not punctuation (``+``, ``=``, ``$``) stay;
    - a run between two digits with no space in it stays whole: ``1/2``, ``3.14``, ``10:30``;
    - a decimal point just before a digit stays: ``.5``;
    - a dash or ``*`` stays where a number is its operand: a digit (any numeric character) just left
      of the run, or right of it, or a LaTeX command (``\\``) or a math or currency symbol after it
      in the run: ``2-i``, ``2 * 3``, ``- 5``, ``-     5``, ``- ((5``, ``- \\frac12``, ``- ½``;
    - a dash also stays as the sign of what it touches: ``-x``, ``-(x)``, never one inside a word
      (``x-ray``, and so ``n-k``) or one before a space (``Paris - France``, a list's ``- Paris``, and
      so ``- x``);
    - any other punctuation is dropped (``Paris.``, ``U.S.A.``, brackets, ``5!``: a factorial is lost,
      as is a prime ``f'``: ``ignore_punctuation`` is for answers in words, not algebra).
    """
    import unicodedata  # on first use: it costs start-up time

    category = unicodedata.category
    length = len(text)

    def keep(match: Match[str]) -> str:
        run, start, end = match.group(), match.start(), match.end()
        left = text[start - 1] if start else ""
        right = text[end] if end < length else ""
        if left.isdecimal() and right.isdecimal() and not any(c.isspace() for c in run):
            return run
        numeric = left.isnumeric() or right.isnumeric()
        if len(run) == 1 and category(run)[0] == "P":  # the usual: , . ? ! ( ) and x-ray's hyphen
            hyphen = (category(run) == "Pd" or run in _MINUS_LIKE) and left and right and not numeric
            if hyphen or not _special(run):
                return ""
        last_operand = -1  # the last place in the run that starts a number's operand (\frac, \u221a, $)
        for j in range(len(run) - 1, -1, -1):
            if run[j] == "\\" or category(run[j]) in ("Sm", "Sc"):
                last_operand = j
                break
        kept = []
        for j, c in enumerate(run):
            kind = category(c)
            if c.isspace() or kind[0] != "P" or c in _PERCENT_SIGNS or c in _SLASHES:
                kept.append(c)
            elif c in _POINTS:
                if j == len(run) - 1 and right.isdecimal():
                    kept.append(c)
            elif kind == "Pd" or c in _MINUS_LIKE or c in _OPERATORS:
                if numeric or last_operand > j:
                    kept.append(c)
                elif c not in _OPERATORS and (j or not left):  # a sign touching what follows: -x, -(x)
                    after = run[j + 1] if j + 1 < len(run) else right
                    if after and not after.isspace():
                        kept.append(c)
        return "".join(kept)

    return _PATTERNS.marks.sub(keep, text)


def _special(mark: str) -> bool:
    """Whether the punctuation ``mark`` needs its neighbours to decide (a dash, a slash, a point...)."""
    import unicodedata

    return (
        mark in _PERCENT_SIGNS
        or mark in _SLASHES
        or mark in _POINTS
        or mark in _MINUS_LIKE
        or mark in _OPERATORS
        or unicodedata.category(mark) == "Pd"
    )


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

        if len(text) > _MAX_MARKS:
            text = _stream_safe(text)
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
    ``ignore_punctuation`` (numbers keep their sign, at any distance, and the marks between their
    digits; a dash or ``*`` by a number, slashes and percent signs stay: ``-5``, ``- 5``, ``-$5``,
    ``.5``, ``5%`` and ``5 %`` stay distinct from ``5`` and ``$5``, ``1/2`` from ``12``, ``2-i`` from
    ``2i``, ``x/y`` from ``xy``; see ``_strip_punctuation``; it is for answers in words: ``n-k`` is
    ``nk``), ``remove_articles`` (English a/an/the before what follows, but not "a" before a letter
    standing alone: ``A, B`` and ``A B`` keep their ``A``). Each option only loosens: what matches
    without it matches with it. A run of more than 30 combining marks gets a U+034F after every 30
    (stream-safe text) before normalising, which costs linear time then. ``actual`` is a ``str`` or
    an ``int``; anything else is ``False``. An alternative that normalises to ``""`` never matches.
    No substring semantics.
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
