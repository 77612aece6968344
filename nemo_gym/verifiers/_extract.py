"""Pull the final answer out of free text: the last box, the last ``Answer:`` label, the last tag.

Each takes the *last* occurrence, as models restate and correct themselves, and never falls back
to an earlier one: a malformed last answer is no answer.
"""

from __future__ import annotations

from nemo_gym.verifiers._lazy import Patterns

TYPE_CHECKING = False  # typing is imported for the type checker only: it costs start-up time
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional, Tuple

    # A found label: its three emphasis runs (before the label, before the colon, after it), where
    # the run after the colon starts, and where the label ends (the groups and spans of a match).
    Label = Tuple[Tuple[str, str, str], int, int]

_PATTERNS = Patterns(
    # A box command, and its opening brace when it has one (LaTeX draws `\boxed 6` too).
    box=r"\\(?:boxed|fbox)(?![A-Za-z])\s*(\{)?",
    # The label: not inside a word or an identifier (``my_answer:`` is code, not a label), markdown
    # emphasis around it, then an ASCII or a fullwidth colon, any case. Underscore emphasis must
    # balance (see _payload); asterisks are tolerated as they come. The emphasis before the label starts
    # a run of marks, never inside one: each mark of a long run started a scan to the run's end, and 40
    # KB of "*" took 20 s. A run after a word's letter is no emphasis; the label after it still counts.
    label=r"(?i)((?<![\w*])[*_]*|(?<=\*))(?:final\s+)?answer([*_]*)[ \t]*[:\uff1a]([*_]*)",
)


def _text_or_none(text: Any, helper: str) -> Optional[str]:
    """``text`` when it is a ``str``, else ``None`` (no answer: ``read_text`` of a missing file, an
    agent's JSON value). A Responses API response (a dict with ``output``) is the author's mistake,
    and raises: it is never text, and reading it as no answer scored every sample 0 in silence."""
    if isinstance(text, str):
        return text
    if isinstance(text, dict) and "output" in text:
        raise TypeError(f"{helper}(): got a Responses API response, not its text: pass final_text(response)")
    return None


def _closing_brace(text: str, start: int) -> int:
    """Index of the brace closing the one opened just before ``start``; -1 when unbalanced."""
    depth, index = 1, start
    while index < len(text):
        char = text[index]
        if char == "\\":
            index += 2  # an escaped \{ or \} does not count
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index
        index += 1
    return -1


def _innermost(text: str) -> str:
    """``text`` (stripped) without the boxes that wrap all of it: ``\\boxed{\\boxed{5}}`` is ``5``.

    One pass pairs every brace, so a hostile ``\\boxed{`` nested a hundred thousand deep costs
    linear time, not one scan per level.
    """
    pairs: Dict[int, int] = {}  # index of an opening brace -> index of its closing brace
    opened: List[int] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\":
            index += 2  # an escaped \{ or \} does not count, as in _closing_brace
            continue
        if char == "{":
            opened.append(index)
        elif char == "}" and opened:
            pairs[opened.pop()] = index
        index += 1
    low, high, box = 0, len(text), _PATTERNS.box
    while True:
        while low < high and text[low].isspace():
            low += 1
        while high > low and text[high - 1].isspace():
            high -= 1
        match = box.match(text, low, high)
        if match is None or pairs.get(match.end() - 1) != high - 1:
            return text[low:high]
        low, high = match.end(), high - 1


def extract_boxed(text: Any) -> Optional[str]:
    """The stripped content of the last top-level ``\\boxed{…}`` or ``\\fbox{…}``.

    Braces are counted (escaped ones ignored), so nested groups such as ``\\frac{1}{2}`` stay
    whole. A box that holds nothing but another box is opened down to the innermost one:
    ``\\boxed{\\boxed{5}}`` gives ``"5"`` (``\\boxed{a \\boxed{b}}`` stays whole). ``None`` when
    there is no box, when the last one is empty (at any depth), never closes or has no braces
    (``\\boxed 6``).
    """
    text = _text_or_none(text, "extract_boxed")
    if text is None:
        return None
    found: Optional[str] = None
    position, box = 0, _PATTERNS.box
    while True:
        match = box.search(text, position)
        if match is None:
            break
        if match.group(1) is None:  # no braces: a malformed box, unless a later one is whole
            found, position = None, match.end()
            continue
        end = _closing_brace(text, match.end())
        if end < 0:
            return None
        found, position = text[match.end() : end], end + 1
    return _innermost(found or "") or None


def _last_label(text: str) -> Optional[Label]:
    """The last match of ``_PATTERNS.label`` in ``text``; ASCII text is scanned without ``re``.

    Importing ``re`` costs a large part of an interpreter's start, and a model's answer is most
    often plain ASCII. The scan finds what ``finditer`` finds (a property test holds the two equal):
    each ``answer`` in turn must be followed by emphasis, blanks and a colon, and its match starts
    at the earliest place the pattern allows, never inside the previous match.
    """
    if not text.isascii():  # case folding and \w beyond ASCII are the regular expression's
        found = None
        for match in _PATTERNS.label.finditer(text):
            found = match
        return None if found is None else ((found[1], found[2], found[3]), found.start(3), found.end())
    lowered, size = text.lower(), len(text)
    label: Optional[Label] = None
    bound = 0  # where the next match may start: the end of the previous one
    keyword = lowered.find("answer")
    while keyword >= 0:
        index = keyword + len("answer")
        while index < size and text[index] in "*_":
            index += 1
        before_colon = text[keyword + len("answer") : index]
        while index < size and text[index] in " \t":
            index += 1
        start = _label_start(text, lowered, keyword, bound) if index < size and text[index] == ":" else None
        if start is None:
            keyword = lowered.find("answer", keyword + 1)
            continue
        index += 1
        after = index
        while index < size and text[index] in "*_":
            index += 1
        emphasis = text[start : _emphasis_end(text, start)]
        label, bound = ((emphasis, before_colon, text[after:index]), after, index), index
        keyword = lowered.find("answer", index)
    return label


def _emphasis_end(text: str, start: int) -> int:
    while text[start] in "*_":
        start += 1
    return start


def _label_start(text: str, lowered: str, keyword: int, bound: int) -> Optional[int]:
    """Where a label whose ``answer`` is at ``keyword`` starts (ASCII), ``None`` when none can.

    A ``final`` and blanks may come first; then the label starts at a run of emphasis marks that no
    word character or ``*`` precedes, or (with no marks of its own) right after a ``*``.
    """
    heads = [keyword]
    blank = keyword
    while blank > 0 and text[blank - 1].isspace():
        blank -= 1
    if blank < keyword and blank - 5 >= bound and lowered.startswith("final", blank - 5):
        heads.insert(0, blank - 5)
    for head in heads:
        start = head
        while start > bound and text[start - 1] in "*_":
            start -= 1
        if start == 0 or not (text[start - 1].isalnum() or text[start - 1] in "*_"):
            return start
        if text[head - 1] == "*":
            return head
    return None


def _payload(text: str, label: Label) -> Optional[str]:
    """The raw payload after ``label``; ``None`` when the label's underscore emphasis is unbalanced."""
    emphasis, colon_end, end = label
    opening, closing, after = (group.count("_") for group in emphasis)
    owed = opening - closing  # underscores that must still close the emphasis opened before the label
    if owed < 0:
        return None  # "Answer_:": an identifier's tail, not emphasis
    if owed == 0:
        # Only asterisks after the colon close emphasis ("**Answer:** 42"); "_x_" is the payload's.
        colon_run = emphasis[2]
        start = colon_end + len(colon_run) - len(colon_run.lstrip("*"))
    elif after == owed:
        start, owed = end, 0  # "_Answer:_ 42"
    elif after == 0:
        start = end  # "_Answer: 42_": the emphasis must close at the end of the line
    else:
        return None
    lines = text[start:].split("\n")
    payload = lines[0].strip().strip("*").strip()
    if owed:
        if not payload.endswith("_" * owed):
            return None  # "_Answer: 42": an unbalanced underscore is not emphasis
        return payload[:-owed].strip().strip("*").strip()
    if not payload:  # "**Answer:**" alone, the answer on a later line ("**42**"), as bold as the label's
        payload = next((line.strip() for line in lines[1:] if line.strip()), "").strip("*").strip()
    return payload


def extract_answer(text: Any) -> Optional[str]:
    """The payload of the last ``Answer:`` (or ``Final Answer:``) label, case-insensitive.

    The colon may be fullwidth (``Answer：42``). Markdown emphasis around the label is tolerated
    (``**Answer:**``, ``__Answer__:``, ``_Answer:_``); underscores must balance, before the colon,
    just after it or at the end of the payload's line (``_Answer: 42_``), else the label is
    malformed and gives ``None`` (``_Answer: 42``, ``Answer_: 42``); a label inside a word or an
    identifier (``my_answer:``) is no label. The payload is the rest of the label's line, or the
    next non-empty line when that is empty; asterisk emphasis around it (``**42**``, ``**42**.``),
    wrapping ``$…$`` and one trailing ``.`` are removed. ``None`` when there is no label or it has
    no payload.
    """
    text = _text_or_none(text, "extract_answer")
    if text is None:
        return None
    label = _last_label(text)
    if label is None:
        return None
    payload = _payload(text, label)
    if not payload:
        return None
    if payload.endswith("."):
        # The full stop may follow the emphasis ("**42**."): the asterisks it kept are emphasis too.
        payload = payload[:-1].rstrip().strip("*").strip()
    for wrapper in ("$$", "$"):
        if len(payload) > 2 * len(wrapper) and payload.startswith(wrapper) and payload.endswith(wrapper):
            payload = payload[len(wrapper) : -len(wrapper)].strip()
            break
    return payload or None


def _is_opening(text: str, after: int) -> bool:
    """Whether the ``<tag`` that ends at ``after`` opens the tag: ``>``, white space (attributes) or a
    ``/`` (``<tag/>``, empty) follows it, or the text ends there (an answer cut off)."""
    return after >= len(text) or text[after] in ">/" or text[after].isspace()


def extract_tag(text: Any, tag: str = "answer") -> Optional[str]:
    """The stripped content of the last ``<tag>…</tag>`` (case-sensitive; the opening may carry
    attributes); ``None`` when absent or empty, or when a ``<tag`` after the last ``</tag>`` opens an
    answer that never closes (or an empty ``<tag/>``): never a fall-back to an earlier one."""
    if not isinstance(tag, str) or not tag or any(char in "<>/" or char.isspace() for char in tag):
        raise ValueError(f"extract_tag(): tag must be a plain tag name such as 'answer', got {tag!r}")
    text = _text_or_none(text, "extract_tag")
    if text is None:
        return None
    name, closing = f"<{tag}", f"</{tag}>"
    end = text.rfind(closing)
    if end < 0:
        return None
    later = text.find(name, end)
    while later >= 0:  # any opening after the last closing: a malformed last answer
        if _is_opening(text, later + len(name)):
            return None
        later = text.find(name, later + 1)
    start = text.rfind(name, 0, end)
    while start >= 0 and not _is_opening(text, start + len(name)):  # <answers>, <answer-key>
        start = text.rfind(name, 0, start)
    if start < 0:
        return None
    close = text.find(">", start, end)
    if close < 0 or text[close - 1] == "/":  # never closed before the closing tag, or empty
        return None
    return text[close + 1 : end].strip() or None
