"""The files a Python verifier needs in ``/tests``, and the deterministic archive that carries them.

Data flows one way: the task's ``tests/`` folder, ``verifier.py``, task_data and the response become a
sorted list of ``ShimFile`` values (``shim_files``); the server packs them into one gzip'd tar
(``stage_archive``) and tests lay them out in a folder (``lay_out``) to run the real ``test.sh``.
"""

from __future__ import annotations

import functools
import gzip
import io
import json
import os
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, List, Mapping, Optional, Set, Tuple

from nemo_gym.data.tasks.harbor._resources import SHIM_FILES, sdk_files, shim_dir

# Fixed archive metadata: the same inputs must give the same bytes, whoever stages them, whenever.
_MTIME = 0
_EXECUTABLE, _REGULAR, _DIRECTORY = 0o755, 0o644, 0o755


class StagingError(ValueError):
    """A task file that cannot be staged safely; the message names it."""


@dataclass(frozen=True)
class ShimFile:
    """One file under ``/tests``: its relative POSIX name, its bytes and its mode."""

    name: str
    data: bytes
    mode: int = _REGULAR


@functools.lru_cache(maxsize=None)
def static_files() -> Tuple[ShimFile, ...]:
    """test.sh, the runner and the SDK copy: read once per process, shared by every staging."""
    folder = shim_dir()
    files = [
        ShimFile(name, (folder / name).read_bytes(), _EXECUTABLE if name.endswith(".sh") else _REGULAR)
        for name in SHIM_FILES
    ]
    files.extend(ShimFile(name, path.read_bytes()) for name, path in sdk_files())
    return tuple(files)


def _json_bytes(value: Mapping[str, Any], what: str) -> bytes:
    if not isinstance(value, Mapping):
        raise StagingError(f"{what} must be a JSON object (a dict), not {type(value).__name__}")
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as error:
        raise StagingError(f"{what} cannot be written as JSON: {error}") from None


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
                raise StagingError(
                    f"tests/{relative} is a symlink leading out of the task folder ({resolved})"
                )
            if name in subfolders:
                if path.is_symlink():
                    raise StagingError(f"tests/{relative} is a symlinked folder; stage real folders only")
                continue
            if not resolved.is_file():
                raise StagingError(f"tests/{relative} is not a regular file")
            mode = _EXECUTABLE if os.access(resolved, os.X_OK) else _REGULAR
            files.append(ShimFile(relative, resolved.read_bytes(), mode))
    return files


def shim_files(
    verifier: bytes,
    task_data: Mapping[str, Any],
    response: Optional[Mapping[str, Any]] = None,
    task_files: Iterable[ShimFile] = (),
) -> List[ShimFile]:
    """Everything ``/tests`` holds for a Python verifier, sorted by name.

    The shim's files (test.sh, runner, SDK, verifier.py, task_data.json, response.json when a
    response is given) win over the task's own files of the same name.
    """
    shim = list(static_files())
    shim.append(ShimFile("verifier.py", verifier))
    shim.append(ShimFile("task_data.json", _json_bytes(task_data, "task_data")))
    if response is not None:
        shim.append(ShimFile("response.json", _json_bytes(response, "the response")))
    by_name = {file.name: file for file in task_files}
    by_name.update((file.name, file) for file in shim)
    return [by_name[name] for name in sorted(by_name)]


def lay_out(folder: Path, files: Iterable[ShimFile]) -> None:
    """Writes ``files`` under ``folder`` (created when missing), with their modes."""
    for file in files:
        target = folder.joinpath(*file.name.split("/"))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(file.data)
        target.chmod(file.mode)


def _folders(files: Iterable[ShimFile]) -> List[str]:
    folders: Set[str] = set()
    for file in files:
        parts = file.name.split("/")[:-1]
        folders.update("/".join(parts[: index + 1]) for index in range(len(parts)))
    return sorted(folders)


def stage_archive(files: Iterable[ShimFile]) -> bytes:
    """One gzip'd tar of ``files`` (and their folders): sorted, fixed times and owners, no gzip timestamp."""
    files = list(files)
    members: List[Tuple[str, Optional[ShimFile]]] = [(name, None) for name in _folders(files)]
    members.extend((file.name, file) for file in files)
    members.sort(key=lambda member: member[0])
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name, file in members:
            info = tarfile.TarInfo(name)
            info.mtime, info.uid, info.gid, info.uname, info.gname = _MTIME, 0, 0, "", ""
            if file is None:
                info.type, info.mode = tarfile.DIRTYPE, _DIRECTORY
                archive.addfile(info)
            else:
                info.size, info.mode = len(file.data), file.mode
                archive.addfile(info, io.BytesIO(file.data))
    return gzip.compress(raw.getvalue(), compresslevel=6, mtime=0)
