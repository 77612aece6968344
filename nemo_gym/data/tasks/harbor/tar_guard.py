"""A tar from a sandbox, checked before ``tarfile`` reads it: its PAX headers must cost linear time.

Most interpreters a host runs (3.8-3.12 before their 2024 security releases) read a PAX header with
regular expressions that take time quadratic in a run of digits (``\\d+ hdrcharset=`` searched over
the header, CVE-2024-6232) and in a record whose length does not end it (``(\\d+) ([^=]+)=`` matched
record after record). ``re`` holds the interpreter's lock while it matches, so one crafted header
stops every thread of the server: red team 36 froze it for 16 s with a 150 KB results tar (a root
agent's ``tar``), and an agent's links to 4 KB runs of digits cost 18 ms each through the engine's
own archive. ``check_pax`` walks the headers once and refuses what could cost more.
"""

from __future__ import annotations

from typing import IO, Optional

BLOCK = 512
_PAX_TYPES = (b"x", b"g", b"X")  # extended, global, Solaris extended: all read as PAX
# A run of digits costs tarfile's searches its length squared; runs shorter than this cost at most
# this much a byte, and are left uncounted (counting them would cost as much as the search).
LONG_RUN = 64
# The most the long runs of one archive's PAX headers may cost, as a sum of squares: some 20 ms of
# matching on this machine kind. A real archive's PAX records (paths, link targets, times, ids,
# extended attributes) hold no run near 64 digits.
MAX_PAX_WORK = 1 << 24
# A record's length field: more digits than any header could need.
_MAX_LENGTH_DIGITS = 12
# Digits to "1", the rest to NUL: a long run is then found by bytes.find, in linear time.
_DIGITS = bytes(0x31 if 0x30 <= byte <= 0x39 else 0 for byte in range(256))
_RUN = b"1" * LONG_RUN


class UnsafeTar(ValueError):
    """A tar whose PAX headers ``tarfile`` could take quadratic time to read."""


def check_pax(stream: IO[bytes], budget: int = MAX_PAX_WORK) -> None:
    """Raises ``UnsafeTar`` when a PAX header of the tar in ``stream`` (seekable, read from where it
    is and put back there) is not a list of well-formed records (``LENGTH KEYWORD=VALUE\\n``, each
    length exactly its record's), or its runs of ``LONG_RUN`` or more digits cost more than
    ``budget`` together. What it cannot walk (a header cut short, a size it cannot read) it leaves
    to ``tarfile``, which reads the same bytes and reports the damage."""
    start = stream.tell()
    work = 0
    try:
        while True:
            header = stream.read(BLOCK)
            if len(header) < BLOCK or not header.strip(b"\0"):
                return
            size = _size(header[124:136])
            if size is None or size < 0:
                return
            if header[156:157] in _PAX_TYPES:
                data = stream.read(size)
                _check_records(data, whole=len(data) == size)
                work += _long_runs(data)
                if work > budget:
                    raise UnsafeTar(f"its PAX headers hold runs of digits that would take {work} steps to read")
                stream.seek(-size % BLOCK, 1)
            else:
                stream.seek(size + -size % BLOCK, 1)
    finally:
        stream.seek(start)


def _size(field: bytes) -> Optional[int]:
    """A header's size field as tarfile reads it: octal text, or base-256 (first byte 0x80 or 0xff)."""
    if field[:1] in (b"\x80", b"\xff"):
        value = int.from_bytes(field[1:], "big")
        return value - 256 ** (len(field) - 1) if field[:1] == b"\xff" else value
    text = field.split(b"\0", 1)[0].strip()
    try:
        return int(text or b"0", 8)
    except ValueError:
        return None


def _long_runs(data: bytes) -> int:
    """The sum of the squares of the lengths of ``data``'s runs of ``LONG_RUN`` or more digits."""
    mapped, work, position = data.translate(_DIGITS), 0, 0
    while True:
        start = mapped.find(_RUN, position)
        if start < 0:
            return work
        position = mapped.find(b"\0", start)
        position = len(mapped) if position < 0 else position
        work += (position - start) ** 2


def _check_records(data: bytes, whole: bool) -> None:
    """Every record well formed; of a header cut short (``whole`` false), the last may run past the cut."""
    position = 0
    while position < len(data):
        space = data.find(b" ", position, position + _MAX_LENGTH_DIGITS + 1)
        digits = data[position:space] if space > position else b""
        if not digits.isdigit():
            if not whole and space < 0 and data[position:].isdigit():
                return  # the cut is in the length itself
            raise UnsafeTar(f"a PAX record at byte {position} of its header has no length")
        end = position + int(digits)
        if end > len(data) and not whole and end > space + 1:
            return
        if end > len(data) or end <= space + 1 or data[end - 1 : end] != b"\n":
            raise UnsafeTar(f"a PAX record at byte {position} of its header does not end where its length says")
        if data.find(b"=", space + 2, end) < 0:
            raise UnsafeTar(f"a PAX record at byte {position} of its header has no keyword")
        position = end


__all__ = ["LONG_RUN", "MAX_PAX_WORK", "UnsafeTar", "check_pax"]
