"""Keeping secret values out of everything the host prints or returns.

A verifier can print a secret as it is, escaped (``repr``, JSON) or encoded, and the output the host
keeps is a tail cut at an arbitrary byte, so a secret can straddle the cut. ``redact`` replaces
every form, and, in text that was cut, any tail of a form that the text starts with; in a detail, which
quotes other text cut anywhere, any piece of a form of ``PIECE_CHARS`` characters or more.
"""

from __future__ import annotations

import json
from typing import Iterable, List, Set

MASK = "***"


def secret_forms(secrets: Iterable[str]) -> List[str]:
    """Each secret as printed raw, through ``repr`` (of the text and of its UTF-8 bytes) and as a
    JSON string (ASCII-escaped or not); longest first, so a form inside another is never split."""
    forms: Set[str] = set()
    for secret in secrets:
        if not secret:
            continue
        forms.update(
            (
                secret,
                repr(secret)[1:-1],
                repr(secret.encode("utf-8", "surrogatepass"))[2:-1],
                json.dumps(secret)[1:-1],
                json.dumps(secret, ensure_ascii=False)[1:-1],
            )
        )
    forms.discard("")
    return sorted(forms, key=lambda form: (-len(form), form))


# In ``redact``'s ``pieces`` mode, the shortest run of a form's characters that is taken for a piece of
# it: long enough that ordinary text rarely shares one with a key, short enough that what is left shown
# of a secret is too little to use.
PIECE_CHARS = 8


def redact(text: str, secrets: Iterable[str], *, cut: bool = False, pieces: bool = False) -> str:
    """``text`` with every form of every secret replaced by ``***``; with ``cut`` (the text is a
    tail), a leading piece that ends a form is replaced too, however short; with ``pieces`` (a short
    text that quotes others cut anywhere: a detail), any run of ``PIECE_CHARS`` or more characters
    found in a form is replaced too."""
    forms = secret_forms(secrets)
    for form in forms:
        text = text.replace(form, MASK)
    if cut:
        piece = max(
            (size for form in forms for size in range(1, len(form)) if text.startswith(form[-size:])), default=0
        )
        if piece:
            text = MASK + text[piece:]
    if pieces:
        text = _without_pieces(text, forms)
    return text


def _without_pieces(text: str, forms: List[str]) -> str:
    """``text`` with every run of at least ``PIECE_CHARS`` characters that some form holds replaced."""
    grams = {form[at : at + PIECE_CHARS] for form in forms for at in range(len(form) - PIECE_CHARS + 1)}
    if not grams:
        return text
    covered = [False] * len(text)
    for at in range(len(text) - PIECE_CHARS + 1):
        if text[at : at + PIECE_CHARS] in grams:
            covered[at : at + PIECE_CHARS] = [True] * PIECE_CHARS
    out: List[str] = []
    for at, char in enumerate(text):
        if not covered[at]:
            out.append(char)
        elif at == 0 or not covered[at - 1]:
            out.append(MASK)
    return "".join(out)


def redact_bytes(data: bytes, secrets: Iterable[str]) -> bytes:
    """``data`` (a file the verifier wrote) with every form of every secret, as UTF-8, replaced."""
    for form in secret_forms(secrets):
        data = data.replace(form.encode("utf-8", "surrogatepass"), MASK.encode("ascii"))
    return data


__all__ = [
    "MASK",
    "PIECE_CHARS",
    "redact",
    "redact_bytes",
    "secret_forms",
]
