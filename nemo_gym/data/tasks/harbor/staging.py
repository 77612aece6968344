"""The files a Python verifier needs in ``/tests``, and the deterministic archive that carries them.

Data flows one way: the task's ``tests/`` folder, ``verifier.py``, task_data and the response become
``ShimFile`` values: the static part (test.sh, runner, SDK; ``static_files``) and the task's part
(``task_part``). Tests and publishing lay them out in a folder (``shim_files``, ``lay_out``); the
server packs them into one gzip'd tar (``stage_shim``, or ``stage_archive`` for any file list).

The archive is two gzip members, which ``tar -xz`` reads as one stream: the static part's tar blocks,
compressed once per process, then the task's part and the end-of-archive blocks. Each part's
members are sorted, times and owners are fixed, and the gzip framing is written here (no timestamp,
no OS byte that varies by Python version), so the same inputs give the same bytes, and staging
costs only the task's own bytes.
"""

from __future__ import annotations

import functools
import json
import os
import struct
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, FrozenSet, Iterable, List, Mapping, Optional, Set, Tuple

from nemo_gym.data.tasks.harbor._resources import SDK_BUNDLE, SHIM_FILES, sdk_files, shim_dir
from nemo_gym.data.tasks.harbor.bytecode import CACHE_TAGS, shipped

# Fixed archive metadata: the same inputs must give the same bytes, whoever stages them, whenever.
_MTIME = 0
# A gzip member header with no name, no timestamp and "unknown" OS (RFC 1952), the same everywhere.
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
# The static part is compressed once per process, so it gets zlib's best. The task's part is
# stored by default: deflating a 100 KB response costs 1-4 ms, several times the rest of staging,
# to save bytes on what is usually one hop inside a cluster; ``compresslevel`` trades CPU for bytes.
_STATIC_LEVEL = 9
TASK_LEVEL = 0
_END_OF_ARCHIVE = b"\0" * (2 * tarfile.BLOCKSIZE)
_RECORD_SIZE = tarfile.RECORDSIZE  # what tar reads at a time (20 blocks)
_EXECUTABLE, _REGULAR, _DIRECTORY = 0o755, 0o644, 0o755
# The modes a run's files land with: test.sh executable (grading runs it, as Harbor does, where it
# unpacks the files itself), and the runner's inputs readable by the admin alone from the start (it
# reads them before it switches users; grading never widens a mode it hands over).
_RUN_MODES = {"test.sh": _EXECUTABLE, "verifier.py": 0o600, "task_data.json": 0o600, "response.json": 0o600}


class StagingError(ValueError):
    """A task file that cannot be staged safely; the message names it."""


@dataclass(frozen=True)
class ShimFile:
    """One file under ``/tests``: its relative POSIX name, its bytes and its mode."""

    name: str
    data: bytes
    mode: int = _REGULAR


def static_sources() -> Dict[str, bytes]:
    """test.sh, the runner and the SDK copy, by their names in /tests."""
    folder = shim_dir()
    return {**{name: (folder / name).read_bytes() for name in SHIM_FILES}, **dict(sdk_files())}


@functools.lru_cache(maxsize=None)
def static_files() -> Tuple[ShimFile, ...]:
    """test.sh, the runner, the SDK copy and their shipped bytecode (``bytecode``): read once per
    process, shared by every staging."""
    sources = static_sources()
    files = [ShimFile(name, data, _EXECUTABLE if name.endswith(".sh") else _REGULAR) for name, data in sources.items()]
    files.extend(ShimFile(name, data) for name, data in shipped(sources).items())
    return tuple(sorted(files, key=lambda file: file.name))


@functools.lru_cache(maxsize=None)
def _static_names() -> FrozenSet[str]:
    return frozenset(file.name for file in static_files())


@functools.lru_cache(maxsize=None)
def _static_folders() -> FrozenSet[str]:
    return frozenset(_folders(static_files()))


def json_bytes(value: Mapping[str, Any], what: str, *, allow_nan: bool = False) -> bytes:
    """``value`` as the bytes of a JSON file (``task_data.json``, ``response.json``); ``allow_nan``
    writes NaN and infinities as Python's json does (``NaN``, ``-Infinity``), which ``json.loads``
    reads back."""
    if not isinstance(value, Mapping):
        raise StagingError(f"{what} must be a JSON object (a dict), not {type(value).__name__}")
    try:
        # ensure_ascii: CPython's escaping encoder is twice as fast as its UTF-8 one, and lossless.
        # Any mapping (a MappingProxyType, a UserDict): json writes dicts alone.
        plain = value if isinstance(value, dict) else dict(value)
        return json.dumps(plain, allow_nan=allow_nan).encode("ascii")
    except (TypeError, ValueError) as error:
        raise StagingError(f"{what} cannot be written as JSON: {error}") from None
    except RecursionError:  # 3.8-3.11's encoder stops at some 990 levels
        raise StagingError(f"{what} cannot be written as JSON: it nests too deep") from None


def response_bytes(response: Mapping[str, Any]) -> bytes:
    """``response.json``: the server's record of what the model said, whose numbers are not the task
    author's to fix (a token's logprob of ``-inf``): NaN and infinities are written as Python's json
    writes them rather than refused, which masked the sample (red team 32)."""
    return json_bytes(response, "the response", allow_nan=True)


def task_test_files(tests_dir: Path) -> List[ShimFile]:
    """The regular files of a task's ``tests/`` folder, with safe relative names.

    A symlink is staged as the file it points to when that stays inside the task folder
    (``tests_dir``'s parent); one that leaves it, and anything that is not a regular file or a
    folder, is refused with ``StagingError`` naming it.
    """
    root = Path(os.path.realpath(tests_dir))
    task_root = root.parent
    files: List[ShimFile] = []
    for folder, subfolders, names in os.walk(root):
        for name in sorted(subfolders + names):
            path = Path(folder) / name
            relative = path.relative_to(root).as_posix()
            resolved = Path(os.path.realpath(path))
            if os.path.commonpath([str(task_root), str(resolved)]) != str(task_root):
                raise StagingError(f"{path} is a symlink leading out of the task folder ({resolved})")
            if name in subfolders:
                if path.is_symlink():
                    raise StagingError(f"{path} is a symlinked folder; stage real folders only")
                continue
            if not resolved.is_file():
                raise StagingError(f"{path} is not a regular file")
            mode = _EXECUTABLE if os.access(resolved, os.X_OK) else _REGULAR
            files.append(ShimFile(relative, resolved.read_bytes(), mode))
    return files


def merged_test_files(tests_dirs: Iterable[Path]) -> List[ShimFile]:
    """The files of ``tests_dirs`` as one ``/tests`` holds them, sorted by name: each folder's
    ``task_test_files`` lie over the earlier folders' (a step's ``tests/`` over the task's, as
    Harbor uploads one and then the other)."""
    merged: Dict[str, ShimFile] = {}
    for folder in tests_dirs:
        merged.update((file.name, file) for file in task_test_files(folder))
    return [merged[name] for name in sorted(merged)]


def task_part(
    verifier: bytes,
    task_data: Mapping[str, Any],
    response: Optional[Mapping[str, Any]] = None,
    task_files: Iterable[ShimFile] = (),
) -> List[ShimFile]:
    """The per-task files, sorted: verifier.py, task_data.json, response.json (when a response is
    given) and the task's own ``tests/`` files, except those the shim's files replace."""
    own = [ShimFile("verifier.py", verifier), ShimFile("task_data.json", json_bytes(task_data, "task_data"))]
    if response is not None:
        own.append(ShimFile("response.json", response_bytes(response)))
    taken = _static_names().union(file.name for file in own)
    own.extend(file for file in task_files if file.name not in taken and file.name.split("/")[0] != SDK_BUNDLE)
    return sorted(own, key=lambda file: file.name)


def shim_files(
    verifier: bytes,
    task_data: Mapping[str, Any],
    response: Optional[Mapping[str, Any]] = None,
    task_files: Iterable[ShimFile] = (),
) -> List[ShimFile]:
    """Everything ``/tests`` holds for a Python verifier: the static part, then the task's part.

    The shim's files (test.sh, runner, SDK, verifier.py, task_data.json, response.json) win over
    the task's own files of the same name, as does the name of the SDK's bundle (``bytecode.for_tag``).
    """
    return [*static_files(), *task_part(verifier, task_data, response, task_files)]


def lay_out(folder: Path, files: Iterable[ShimFile]) -> None:
    """Writes ``files`` under ``folder`` (created when missing), with their modes."""
    for file in files:
        target = folder.joinpath(*file.name.split("/"))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(file.data)
        target.chmod(file.mode)


def _check_name(name: str) -> None:
    parts = name.split("/")
    if not name or name.startswith("/") or "\\" in name or any(part in ("", ".", "..") for part in parts):
        raise StagingError(f"refusing to stage {name!r}: member names must be plain relative paths inside /tests")


def check_names(files: Iterable[ShimFile]) -> None:
    """``StagingError`` for any name that is not a plain relative path inside ``/tests``."""
    for file in files:
        _check_name(file.name)


def _folders(files: Iterable[ShimFile]) -> List[str]:
    folders: Set[str] = set()
    for file in files:
        parts = file.name.split("/")[:-1]
        folders.update("/".join(parts[: index + 1]) for index in range(len(parts)))
    return sorted(folders)


def _tar_blocks(
    files: Iterable[ShimFile], skip_folders: Iterable[str] = (), folder_modes: Optional[Mapping[str, int]] = None
) -> bytes:
    """The tar blocks of ``files``, their folders and those ``folder_modes`` names (empty ones too), with
    no end-of-archive blocks: each folder before what it holds, sorted."""
    files = list(files)
    for file in files:
        _check_name(file.name)
    skipped = set(skip_folders)
    modes = folder_modes or {}
    folders = sorted(set(_folders(files)) | set(modes))
    members: List[Tuple[str, Optional[ShimFile]]] = [(name, None) for name in folders if name not in skipped]
    members.extend((file.name, file) for file in files)
    members.sort(key=lambda member: member[0])
    blocks: List[bytes] = []
    for name, entry in members:
        info = tarfile.TarInfo(name)
        info.mtime, info.uid, info.gid, info.uname, info.gname = _MTIME, 0, 0, "", ""
        if entry is None:
            info.type, info.mode = tarfile.DIRTYPE, modes.get(name, _DIRECTORY)
        else:
            info.size, info.mode = len(entry.data), entry.mode
        blocks.append(info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape"))
        if entry is not None:
            blocks.append(entry.data)
            blocks.append(b"\0" * (-len(entry.data) % tarfile.BLOCKSIZE))
    return b"".join(blocks)


def _stored(data: bytes) -> bytes:
    """``data`` as stored (uncompressed) deflate blocks of at most 65,535 bytes (RFC 1951 3.2.4)."""
    blocks = []
    for start in range(0, max(len(data), 1), 0xFFFF):
        chunk = data[start : start + 0xFFFF]
        last = start + 0xFFFF >= len(data)
        blocks.append(struct.pack("<BHH", last, len(chunk), len(chunk) ^ 0xFFFF) + chunk)
    return b"".join(blocks)


def _gzip_member(data: bytes, level: int) -> bytes:
    if level == 0:
        body = _stored(data)
    else:
        compressor = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
        body = compressor.compress(data) + compressor.flush()
    return _GZIP_HEADER + body + struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)


@functools.lru_cache(maxsize=None)
def _static_member() -> bytes:
    return _gzip_member(_tar_blocks(static_files()), _STATIC_LEVEL)


def stage_shim(
    verifier: bytes,
    task_data: Mapping[str, Any],
    response: Optional[Mapping[str, Any]] = None,
    task_files: Iterable[ShimFile] = (),
    *,
    compresslevel: int = TASK_LEVEL,
) -> bytes:
    """The gzip'd tar of ``shim_files(...)``: the static part compressed once, then the task's part."""
    own = _tar_blocks(task_part(verifier, task_data, response, task_files), _static_folders())
    return _static_member() + _gzip_member(own + _END_OF_ARCHIVE, compresslevel)


def stage_archive(files: Iterable[ShimFile], *, compresslevel: int = 6) -> bytes:
    """One gzip'd tar of ``files`` and their folders: sorted, fixed times and owners, no timestamp."""
    return _gzip_member(_tar_blocks(files) + _END_OF_ARCHIVE, compresslevel)


@functools.lru_cache(maxsize=None)
def _static_set() -> FrozenSet[ShimFile]:
    return frozenset(static_files())


def _placed(files: Iterable[ShimFile], top: str) -> List[ShimFile]:
    return [ShimFile(f"{top}/{file.name}", file.data, _RUN_MODES.get(file.name, file.mode)) for file in files]


# The static part as a sandbox gets it: all of it, or one Python's bytecode and the SDK's bundle
# (``bytecode.for_tag``; no task file bears the bundle's name).
@functools.lru_cache(maxsize=len(CACHE_TAGS) + 1)
def _static_blocks(files: Tuple[ShimFile, ...], top: str) -> Tuple[bytes, FrozenSet[str]]:
    """The tar blocks of the static ``files`` under ``top/`` and of their folders (not ``top/``
    itself), and those folders: the same in every run, so built once (about 4 ms)."""
    placed = _placed(files, top)
    return _tar_blocks(placed, skip_folders=(top,)), frozenset(_folders(placed))


def run_archive(
    files: Iterable[ShimFile],
    *,
    top: str,
    stage: str,
    private: Optional[Mapping[str, bytes]] = None,
    out: Optional[str] = None,
) -> bytes:
    """The staged files of a verification run as one uncompressed tar, unpacked into the parent of
    the sandbox's tests folder: ``top/`` (that folder, mode 0700 and root's as it lands, so the
    agent cannot read or add to what follows), ``top/stage/`` holding ``files``, and the run's
    ``private`` files (its key, its held-back variables) as ``.gym-<name>``, readable by root alone.
    The engine unpacks it before grading (no ``tar`` or ``gzip`` inside the sandbox), which then
    moves the stage's files into place and the private ones where only the admin can reach them.

    With ``out`` (grading unpacks it itself, once it has emptied ``top/``: a piped exec), everything
    lands in place: ``files`` in ``top/``, the private files as ``top/out/<name>``. The tar is then
    padded to whole 10 KiB records, so that no ``tar`` waits for more of a pipe.
    """
    if out is not None:
        own = [ShimFile(f"{top}/{out}/{name}", data, 0o400) for name, data in (private or {}).items()]
        blocks = _tar_blocks(own, folder_modes={top: 0o700, f"{top}/{out}": 0o700})
        static = _static_set()
        shared_files: List[ShimFile] = []
        own_files: List[ShimFile] = []
        for file in files:
            (shared_files if file in static or file.name == SDK_BUNDLE else own_files).append(file)
        shared, shared_folders = _static_blocks(tuple(shared_files), top)
        rest = _placed(own_files, top)
        blocks += shared + _tar_blocks(rest, skip_folders=shared_folders | {top}) + _END_OF_ARCHIVE
        return blocks + b"\0" * (-len(blocks) % _RECORD_SIZE)
    secret = {f".gym-{name}": data for name, data in (private or {}).items()}
    members = [
        ShimFile(f"{top}/{stage}/{file.name}", file.data, _RUN_MODES.get(file.name, file.mode))
        for file in files
        if file.name not in secret
    ]
    members += [ShimFile(f"{top}/{stage}/{name}", data, 0o400) for name, data in secret.items()]
    folders = {top: 0o700, f"{top}/{stage}": 0o700}
    return _tar_blocks(members, folder_modes=folders) + _END_OF_ARCHIVE


__all__ = [
    "TASK_LEVEL",
    "ShimFile",
    "StagingError",
    "check_names",
    "json_bytes",
    "lay_out",
    "merged_test_files",
    "response_bytes",
    "run_archive",
    "shim_files",
    "stage_archive",
    "stage_shim",
    "static_files",
    "static_sources",
    "task_part",
    "task_test_files",
]
