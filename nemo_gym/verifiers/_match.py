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
# Dashes a reader takes for a minus that are not Unicode dashes (Pd): a Hebrew maqaf before 5 is not 5.
_MINUS_LIKE = "\u058a\u05be\u1400\u1806\u2027\u2043\u2053\u2e17\u2e1a\u2e40\u2e43\u2e5d\u301c\u3030\u30a0\U00010ead"
_SLASHES = "/\uff0f"  # a fraction's bar when a number stands by it (1/x is not 1x); U+2044 and U+2215 are symbols
# The minus sign proper (U+2212) is no hyphen: under ignore_punctuation it is folded to "-" only after
# the marks are dropped, so n\u2212k stays apart from nk, where an ASCII n-k (a hyphen?) does not.
_MINUS_SIGN = "\u2212"
_INVISIBLE_BUT_MINUS = {code: fold for code, fold in _INVISIBLE.items() if code != ord(_MINUS_SIGN)}
_PATTERNS = Patterns(
    # A run of marks and spaces holding at least one mark, whole: its start is never inside a run of
    # spaces (the look-behind), so a long run of spaces costs linear time.
    marks=r"(?<!\s)\s*[^\w\s][^\w]*",
    # An article before another word, but one of a single character: "A, B" and "Hepatitis A" keep
    # their A (a hedge across options, a name), "a cat" loses it.
    article=r"(?i)\b(?:a|an|the)\s+(?=\w)(?!\w\b)",
)


def _strip_punctuation(text: str) -> str:
    """``text`` without its punctuation, except where it belongs to a number (the contract: it never
    touches numbers). In each run of marks and spaces, between the word characters ``left`` and
    ``right`` (``""`` at an end):

    - spaces, percent signs and anything that is not punctuation (``+``, ``=``, ``$``, the minus sign
      U+2212) stay;
    - a run between two digits with no space in it stays whole: ``1/2``, ``3.14``, ``10:30``;
    - a point just before a digit stays: ``.5``;
    - a dash or a slash stays where a number is its operand: a digit (any numeric character) just
      left of the run, or right of it, or a LaTeX command (``\\``) or a math or currency symbol after
      it in the run: ``2-i``, ``2/x``, ``- 5``, ``-     5``, ``- ((5``, ``- \\frac12``, ``- \u00bd``;
    - a dash also stays as the sign of what it touches: ``-x``, ``-(x)``, never one inside a word
      (``x-ray``, ``well-known``) or one before a space (``Paris - France``, a list's ``- Paris``);
    - any other punctuation is dropped (``Paris.``, ``U.S.A.``, ``5!``: a factorial is lost, as is a
      prime ``f'``: ``ignore_punctuation`` is for answers in words).
    """
    import unicodedata  # on first use: it costs start-up time

    def operator(c: str) -> bool:  # a mark that may stand between a number and its operand
        return c in _SLASHES or c in _MINUS_LIKE or unicodedata.category(c) == "Pd"

    def keep(match: Match[str]) -> str:
        run, start, end = match.group(), match.start(), match.end()
        left = text[start - 1] if start else ""
        right = text[end] if end < len(text) else ""
        if left.isdecimal() and right.isdecimal() and not any(c.isspace() for c in run):
            return run
        numeric_left = left.isnumeric()
        last_operand = -1  # the last place in the run that starts a number's operand (\\frac, \u221a, $)
        if not numeric_left and any(operator(c) for c in run):
            for j in range(len(run) - 1, -1, -1):
                if run[j] == "\\" or unicodedata.category(run[j]) in ("Sm", "Sc"):
                    last_operand = j
                    break
        numeric_right = right.isnumeric()

        def stays(j: int, c: str) -> bool:
            if c.isspace() or c in _PERCENT_SIGNS or unicodedata.category(c)[0] != "P":
                return True
            if c == ".":
                return j == len(run) - 1 and right.isdecimal()  # .5
            if not operator(c):
                return False
            if numeric_left or numeric_right or last_operand > j:
                return True
            # A sign touching what follows (-x, -(x)), never a hyphen inside a word or a dash before a space.
            after = run[j + 1] if j + 1 < len(run) else right
            return c not in _SLASHES and (j > 0 or not left) and after != "" and not after.isspace()

        return "".join([c for j, c in enumerate(run) if stays(j, c)])

    return _PATTERNS.marks.sub(keep, text)


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

        folds = _INVISIBLE_BUT_MINUS if ignore_punctuation else _INVISIBLE
        text = unicodedata.normalize(unicode_form, text).translate(folds)  # type: ignore[arg-type]
    text = text.strip()
    if ignore_case:
        text = text.casefold()
    if ignore_punctuation:
        text = _strip_punctuation(text).replace(_MINUS_SIGN, "-")
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
    digits, a dash or a slash by a number stays, and percent signs stay: ``-5``, ``- 5``, ``-$5``,
    ``.5``, ``5%`` and ``5 %`` stay distinct from ``5`` and ``$5``, ``1/2`` from ``12``, ``2-i`` from
    ``2i``; see ``_strip_punctuation``), ``remove_articles`` (English a/an/the before another word of
    more than one character: ``A, B`` keeps its ``A``). ``actual`` is a ``str`` or an ``int``; anything else
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
