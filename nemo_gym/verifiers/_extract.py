"""Pull the final answer out of free text: the last box, the last ``Answer:`` label, the last tag.

Each takes the *last* occurrence, as models restate and correct themselves, and never falls back
to an earlier one: a malformed last answer is no answer.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False  # typing is imported for the type checker only: it costs start-up time
if TYPE_CHECKING:
    from typing import Any, Optional

_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")
_LABEL = re.compile(r"[*_]*\b(?:final\s+)?answer\b[*_]*[ \t]*:[*_]*", re.IGNORECASE)


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


def extract_boxed(text: Any) -> Optional[str]:
    """The stripped content of the last top-level ``\\boxed{…}`` or ``\\fbox{…}``.

    Braces are counted (escaped ones ignored), so nested groups such as ``\\frac{1}{2}`` stay
    whole. ``None`` when there is no box, when the last one is empty, or when it never closes.
    """
    if not isinstance(text, str):
        return None
    found: Optional[str] = None
    position = 0
    while True:
        match = _BOX.search(text, position)
        if match is None:
            break
        end = _closing_brace(text, match.end())
        if end < 0:
            return None
        found, position = text[match.end() : end], end + 1
    return (found or "").strip() or None


def extract_answer(text: Any) -> Optional[str]:
    """The payload of the last ``Answer:`` (or ``Final Answer:``) label, case-insensitive.

    Markdown emphasis around the label is tolerated (``**Answer:**``). The payload is the rest of
    the label's line, or the next non-empty line when that is empty; wrapping ``$…$`` and one
    trailing ``.`` are removed. ``None`` when there is no label or it has no payload.
    """
    if not isinstance(text, str):
        return None
    labels = list(_LABEL.finditer(text))
    if not labels:
        return None
    rest = text[labels[-1].end() :]
    lines = rest.split("\n")
    payload = lines[0].strip().strip("*").strip()
    if not payload:
        payload = next((line.strip() for line in lines[1:] if line.strip()), "")
    if payload.endswith("."):
        payload = payload[:-1].rstrip()
    for wrapper in ("$$", "$"):
        if len(payload) > 2 * len(wrapper) and payload.startswith(wrapper) and payload.endswith(wrapper):
            payload = payload[len(wrapper) : -len(wrapper)].strip()
            break
    return payload or None


def extract_tag(text: Any, tag: str = "answer") -> Optional[str]:
    """The stripped content of the last ``<tag>…</tag>`` (case-sensitive); ``None`` when absent or empty."""
    if not isinstance(tag, str) or not tag or any(char in tag for char in "<>/ \t\n"):
        raise ValueError(f"extract_tag(): tag must be a plain tag name such as 'answer', got {tag!r}")
    if not isinstance(text, str):
        return None
    opening, closing = f"<{tag}>", f"</{tag}>"
    end = text.rfind(closing)
    start = text.rfind(opening, 0, end) if end >= 0 else -1
    if start < 0:
        return None
    return text[start + len(opening) : end].strip() or None
