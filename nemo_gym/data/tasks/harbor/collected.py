"""What a verification's finish step left in its out folder, read back without trusting the trip.

The finish step (``_grading.sh``) copies the reward files, the runner's report and the output's
tail into one folder with a ``meta`` file and the SHA-256 of each (``.sums``); the host receives it
as a tar. ``read_collected`` accepts it only whole: every file listed, every sum matching, every
size within its cap, nothing else. Anything less is ``CollectError``, which masks the sample: a
damaged or lost result must never be scored (a byte flipped on the way in the report would
otherwise read as no report, a false 0); nor may anything ahead of the results be read.
"""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
from dataclasses import dataclass, field
from typing import Dict, Mapping, Optional

from nemo_gym.data.tasks.harbor.tar_guard import open_tar

SUMS, META, OUTPUTS = ".sums", "meta", "files/"
CACHE_TAG = "cache_tag"  # the server's runner says which interpreter ran it (bytecode.ImageTags)
# The verifier's other output files that finish copies (what does not fit is skipped and counted):
# at most this many, of these bytes in all, each named by a path of at most MAX_OUTPUT_NAME
# characters and MAX_OUTPUT_DEPTH folders (so that no name, however legal in /logs/verifier, is too
# long under the out folder, and the folders stay few).
MAX_OUTPUT_FILES = 100
MAX_OUTPUT_FILE_BYTES = 8 << 20
MAX_OUTPUT_NAME = 255
MAX_OUTPUT_DEPTH = 8
# The entries of /logs/verifier finish looks at, folders included, before it stops looking: the
# verifier's user can fill the folder, and a walk of all of it held grading past the host's limit
# (red team 42: 300,000 files under a chain of 1,900 folders).
MAX_OUTPUT_SCAN = 10 * MAX_OUTPUT_FILES
# The caps of what finish writes (its own limits plus slack): a bigger member is damage. The sums
# hold a line per file: the five of finish's own and the outputs.
_SUM_LINE_BYTES = 64 + 2 + len(OUTPUTS) + MAX_OUTPUT_NAME + 1
CAPS: Mapping[str, int] = {
    "reward.json": (1 << 20) + 1,
    "reward.txt": (1 << 20) + 1,
    "test-stdout.txt": 1 << 20,
    "report": (1 << 20) + 8192,
    META: 4096,
    CACHE_TAG: 64,
    SUMS: (5 + MAX_OUTPUT_FILES) * _SUM_LINE_BYTES,
}
_SUM_LINE = re.compile(r"([0-9a-f]{64})  ([A-Za-z0-9._/-]+)")
_OUTPUT_NAME = re.compile(r"files/[A-Za-z0-9_-][A-Za-z0-9._-]*(?:/[A-Za-z0-9_-][A-Za-z0-9._-]*)*")
_KINDS = ("file", "link", "other")


class CollectError(ValueError):
    """The results did not arrive whole; the message says what is wrong."""


@dataclass(frozen=True)
class Collected:
    """The results of one run: test.sh's exit status and run time (when it ran in that exec), what
    kind of entry each reward file was, and the bytes of the files that came back."""

    status: Optional[int] = None
    elapsed_sec: Optional[float] = None
    kinds: Dict[str, str] = field(default_factory=dict)
    files: Dict[str, bytes] = field(default_factory=dict)
    skipped: int = 0  # the verifier's output files that did not fit (or had odd names)

    @property
    def outputs(self) -> Dict[str, bytes]:
        """The verifier's other output files, by their path in ``/logs/verifier``."""
        return {name[len(OUTPUTS) :]: data for name, data in self.files.items() if name.startswith(OUTPUTS)}


def _relative(member: str) -> str:
    """A member's path inside the out folder: the engine names it ``.gym-out-<run>/...``, tar ``./...``."""
    parts = [part for part in member.split("/") if part not in ("", ".")]
    if parts and parts[0].startswith(".gym-out-"):
        parts = parts[1:]
    return "/".join(parts)


def _members(data: bytes) -> Dict[str, bytes]:
    files: Dict[str, bytes] = {}
    try:
        with open_tar(io.BytesIO(data)) as archive:
            for member in archive:
                if member.isdir():
                    continue
                name = _relative(member.name)
                cap = MAX_OUTPUT_FILE_BYTES if _OUTPUT_NAME.fullmatch(name) else CAPS.get(name)
                if not member.isfile() or cap is None:
                    raise CollectError(f"unexpected member {member.name!r} in the results")
                if member.size > cap:
                    raise CollectError(f"{name} in the results is {member.size} bytes, over its cap")
                if name in files:
                    raise CollectError(f"{name} appears twice in the results")
                extracted = archive.extractfile(member)
                assert extracted is not None
                files[name] = extracted.read()
                if len(files[name]) != member.size:
                    raise CollectError(f"{name} in the results is truncated")
            end = archive.offset
    except (
        tarfile.TarError,
        EOFError,
        OSError,
        ValueError,
        IndexError,
        OverflowError,
        RecursionError,
        MemoryError,
    ) as error:
        if isinstance(error, CollectError):
            raise
        raise CollectError(f"the results are not a readable tar ({error})") from None
    # tarfile stops at the first end of archive: results that something wrote ahead of the real ones
    # (code a root verifier runs reaches grading's stdout) would be read, and the real ones not.
    if data[end:].strip(b"\0"):
        raise CollectError("the results hold more than one tar: something else wrote into them")
    return files


def _meta(text: str) -> Collected:
    values: Dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        values[key] = value
    if set(values) != {"status", "elapsed_cs", "kinds", "skipped"}:
        raise CollectError("the results' meta file is malformed")
    try:
        status = int(values["status"]) if values["status"] else None
        elapsed = int(values["elapsed_cs"]) / 100 if values["elapsed_cs"] else None
        skipped = int(values["skipped"])
    except ValueError:
        raise CollectError("the results' meta file is malformed") from None
    kinds: Dict[str, str] = {}
    for item in values["kinds"].split():
        name, _, kind = item.partition("=")
        if name not in ("reward.json", "reward.txt") or kind not in _KINDS:
            raise CollectError("the results' meta file is malformed")
        kinds[name] = kind
    return Collected(status=status, elapsed_sec=elapsed, kinds=kinds, skipped=skipped)


def _check_sums(sums: bytes, files: Mapping[str, bytes]) -> None:
    try:
        lines = sums.decode("ascii").splitlines()
    except UnicodeDecodeError:
        raise CollectError("the results' checksums are not text") from None
    listed: Dict[str, str] = {}
    for line in lines:
        match = _SUM_LINE.fullmatch(line)
        if match is None or match.group(2) in listed:
            raise CollectError("the results' checksum file is malformed")
        listed[match.group(2)] = match.group(1)
    if set(listed) != set(files):
        raise CollectError(f"the results hold {sorted(files)} but their checksums list {sorted(listed)}")
    for name, digest in listed.items():
        if hashlib.sha256(files[name]).hexdigest() != digest:
            raise CollectError(f"{name} does not match its checksum: the results were damaged on the way")


def read_collected(data: bytes) -> Collected:
    """The results in the tar ``data``; ``CollectError`` unless they arrived whole."""
    files = _members(data)
    if META not in files or SUMS not in files:
        raise CollectError("the results are incomplete (no checksums or no meta file)")
    try:
        meta_text = files[META].decode("ascii")
    except UnicodeDecodeError:
        raise CollectError("the results' meta file is not text") from None
    _check_sums(files.pop(SUMS), files)
    meta = _meta(meta_text)
    for name, kind in meta.kinds.items():
        if (kind == "file") != (name in files):
            raise CollectError(f"the results' meta file and their files disagree about {name}")
    files.pop(META)
    total = sum(len(data) for name, data in files.items() if name.startswith(OUTPUTS))
    if total > MAX_OUTPUT_FILE_BYTES:
        raise CollectError(f"the verifier's output files come to {total} bytes, over their cap")
    return Collected(
        status=meta.status, elapsed_sec=meta.elapsed_sec, kinds=meta.kinds, files=files, skipped=meta.skipped
    )


__all__ = [
    "CACHE_TAG",
    "CAPS",
    "MAX_OUTPUT_DEPTH",
    "MAX_OUTPUT_FILES",
    "MAX_OUTPUT_FILE_BYTES",
    "MAX_OUTPUT_NAME",
    "META",
    "OUTPUTS",
    "SUMS",
    "CollectError",
    "Collected",
    "read_collected",
]
