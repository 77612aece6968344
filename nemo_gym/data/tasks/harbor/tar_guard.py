"""Tars from a sandbox, read by ``tarfile`` only where its header parsing takes linear time.

Most interpreters a host runs (3.8-3.12 before their 2024 security releases) read a PAX header with
regular expressions that take time quadratic in a run of digits (``\\d+ hdrcharset=`` searched over
the header's blocks, CVE-2024-6232) and in a record whose ``=`` lies far past its length (``(\\d+)
([^=]+)=``, matched record after record); every interpreter copies a global header's records into
each later member, and recurses once per header that extends the next. ``re`` holds the
interpreter's lock while it matches, so one crafted header stops every thread of a server: red team
36 froze one for 16 s with a 150 KB results tar (a root agent's ``tar``), and an agent's links to
4 KB runs of digits cost 18 ms each through the engine's own archive.

``open_tar`` checks each such header inside ``tarfile``'s own walk (a ``TarInfo`` whose
``_proc_pax`` and ``_proc_gnulong`` look first), on the very bytes ``tarfile`` is about to search, so
no header can hide from it (red team 37 hid them behind sizes the walk and ``tarfile`` read apart).
A header it refuses raises ``UnsafeTar``; a real writer's (GNU tar, ``tarfile``, the engine's Go
``archive/tar``) never is.
"""

from __future__ import annotations

import tarfile
from typing import IO, Any

# Digits to "1", the rest to NUL: a long run is then found by bytes.find, in linear time.
_DIGITS = bytes(0x31 if 0x30 <= byte <= 0x39 else 0 for byte in range(256))
# A run of digits costs tarfile's searches its length squared; a run shorter than this costs at
# most this much a byte, like any other byte, and is left uncounted.
LONG_RUN = 16
_RUN = b"1" * LONG_RUN
# The most the long runs of one archive's PAX headers may cost, as a sum of squares: about a
# quarter of a second of matching on this machine kind. Real records (paths, link targets, times,
# ids, extended attributes) hold short runs: 4,000 file names of 255 digits each fit.
MAX_PAX_WORK = 1 << 28
# Headers that extend the next one (PAX, GNU long name or link), in a row: tarfile recurses once
# for each; a real member has at most a global header, an extended one and two long names.
MAX_CHAINED = 8
# Records of global headers, all of them together: tarfile copies them into every later member.
# (git archive writes one, a comment with the commit.)
MAX_GLOBAL_RECORDS = 16
# A record's length field: more digits than any header could need.
_MAX_LENGTH_DIGITS = 12


class UnsafeTar(ValueError):
    """A tar with a header ``tarfile`` could take more than linear time or memory to read."""


def open_tar(fileobj: IO[bytes]) -> tarfile.TarFile:
    """``tarfile.open(fileobj=fileobj, mode="r:")`` (a seekable file), whose reading raises
    ``UnsafeTar`` at a header that would cost more than linear time or memory: a PAX header that is
    not well-formed records filling its size (its block's padding all NUL), runs of digits past
    ``MAX_PAX_WORK``, more than ``MAX_GLOBAL_RECORDS`` global records, more than ``MAX_CHAINED``
    extending headers in a row, or a sparse member; ``tarfile.ReadError`` at an extending header
    larger than the rest of the file (a tar cut short)."""
    return tarfile.open(fileobj=fileobj, mode="r:", tarinfo=_CheckedInfo)


class _CheckedInfo(tarfile.TarInfo):
    def _proc_pax(self, tarfile: Any) -> Any:  # tarfile's own hook
        with _Chained(tarfile):
            _check_pax(self, tarfile)
            return super()._proc_pax(tarfile)  # type: ignore[misc]

    def _proc_gnulong(self, tarfile: Any) -> Any:  # tarfile's own hook
        with _Chained(tarfile):
            _check_size(self, tarfile)
            return super()._proc_gnulong(tarfile)  # type: ignore[misc]

    def _proc_sparse(self, tarfile: Any) -> Any:  # tarfile's own hook
        raise UnsafeTar(f"the member at byte {self.offset} is an old GNU sparse file ({_NO_SPARSE})")


# Sparse members are refused: no tar a sandbox's files come through writes one (the engine's Go
# writer makes none, and grading and the artifact fallback run tar without -S), and tarfile reads a
# sparse map with a Python loop per entry (red team 38: a 16 MB map took 4 s and 440 MB on every
# interpreter).
_NO_SPARSE = "no tar of a sandbox's files holds one"


class _Chained:
    """Counts the extending headers being read in a row (each reads the next inside it)."""

    def __init__(self, archive: Any) -> None:
        self.archive = archive

    def __enter__(self) -> None:
        depth = getattr(self.archive, "_nemo_gym_chained", 0) + 1
        if depth > MAX_CHAINED:
            raise UnsafeTar(f"more than {MAX_CHAINED} headers extend one member")
        self.archive._nemo_gym_chained = depth

    def __exit__(self, *_: object) -> None:
        self.archive._nemo_gym_chained -= 1


def _check_size(info: tarfile.TarInfo, archive: Any) -> int:
    """Where the extending header's data starts; its size must fit in what is left of the file, else
    the tar is cut short (``tarfile.ReadError``, as tarfile reports a cut): tarfile reads it whole,
    and a size of 2**40 had it allocate a TiB (red team 38: a MemoryError escaped the artifact copy)."""
    where = archive.fileobj.tell()
    left = archive.fileobj.seek(0, 2) - where
    archive.fileobj.seek(where)
    if info.size < 0:
        raise UnsafeTar(f"the header at byte {info.offset} has a negative size")
    if info.size > left:
        raise tarfile.ReadError(f"the header at byte {info.offset} has a size of {info.size}, and {left} bytes follow")
    return int(where)


def _check_pax(info: tarfile.TarInfo, archive: Any) -> None:
    """The checks ``open_tar`` names, on the bytes ``_proc_pax`` will read (its size in whole
    blocks: it searches the padding too), the file put back where it was."""
    where = _check_size(info, archive)
    data = archive.fileobj.read(info._block(info.size))  # type: ignore[attr-defined]
    archive.fileobj.seek(where)
    records = _check_records(data[: info.size])
    if data[info.size :].strip(b"\0"):
        raise UnsafeTar(f"the PAX header at byte {info.offset} holds bytes past its records")
    work = getattr(archive, "_nemo_gym_pax_work", 0) + _long_runs(data)
    archive._nemo_gym_pax_work = work
    if work > MAX_PAX_WORK:
        raise UnsafeTar(f"its PAX headers hold runs of digits that would take {work} steps to read")
    if info.type == tarfile.XGLTYPE:
        total = getattr(archive, "_nemo_gym_global_records", 0) + records
        archive._nemo_gym_global_records = total
        if total > MAX_GLOBAL_RECORDS:
            raise UnsafeTar(f"its global PAX headers hold {total} records, more than {MAX_GLOBAL_RECORDS}")


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


def _check_records(data: bytes) -> int:
    """How many records ``data`` holds, each ``LENGTH KEYWORD=VALUE\\n`` with its ``=`` inside it."""
    position = count = 0
    while position < len(data):
        space = data.find(b" ", position, position + _MAX_LENGTH_DIGITS + 1)
        digits = data[position:space] if space > position else b""
        if not digits.isdigit():
            raise UnsafeTar(f"a PAX record at byte {position} of its header has no length")
        end = position + int(digits)
        if end > len(data) or end <= space + 1 or data[end - 1 : end] != b"\n":
            raise UnsafeTar(f"a PAX record at byte {position} of its header does not end where its length says")
        if data.find(b"=", space + 2, end) < 0:
            raise UnsafeTar(f"a PAX record at byte {position} of its header has no keyword")
        if data.startswith(b"GNU.sparse.", space + 1):
            raise UnsafeTar(f"a PAX record at byte {position} of its header makes a sparse file ({_NO_SPARSE})")
        position, count = end, count + 1
    return count


__all__ = ["LONG_RUN", "MAX_CHAINED", "MAX_GLOBAL_RECORDS", "MAX_PAX_WORK", "UnsafeTar", "open_tar"]
