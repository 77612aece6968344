"""Read the agent's files, only inside the workspace, without trusting anything the agent made.

A missing file, a directory, a FIFO, a socket, a device, a symlink leading out of the workspace and
invalid UTF-8 all read as "no answer" (``None``/``False``): the agent's mistakes score 0. A ``path``
that is absolute or climbs out with ``..`` is the author's bug and raises ``ValueError``.

Agent processes may still run beside the verifier, so every path, the workspace's own included, is
walked one part at a time from open folders (``_Walk``), never looked up twice: a part swapped for a
link after it was looked at reads as missing, and a link's owner and target come from one open of it.
The agent's link on the workspace's path, or out of the working directory, leads nowhere, as does
the runner's ``workspace`` once its name is swapped for another folder. Whoever besides root and the
verifier's user may write a folder on the way may exchange any name in it for a folder or file of
root's there (``rename(2)``): what the walk enters after such a folder must be readable by them
(``_Walk._vet``), so the verifier reads nothing for the agent that the agent could not read itself.

Reads are capped: a file larger than ``max_bytes`` (``MAX_READ_BYTES``, 32 MiB, by default) reads
as "no answer" without being read, so an agent's 2 GB (or sparse 2 TB) file costs no memory.
"""

from __future__ import annotations

import os
import stat
import sys

TYPE_CHECKING = False  # typing is imported for the type checker only: it costs start-up time
if TYPE_CHECKING:
    from typing import List, Optional, Tuple, Union

    StrPath = Union[str, "os.PathLike[str]"]

# An answer file is small; anything past this is the agent's attempt to exhaust the verifier.
MAX_READ_BYTES = 32 * 1024 * 1024
# The links one path may pass through: Linux's MAXSYMLINKS, past which no program opens it (ELOOP).
_MAX_LINKS = 40
_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH  # a folder its group or anyone may write: anyone's links
_CHUNK = 1024 * 1024  # a read's size: a small answer file is one read, a large one costs no copy of the cap
_LOOP = 40  # ELOOP: what opening a link with O_NOFOLLOW answers (errno, unimported)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
# One step of a walk: O_PATH (Linux) opens a link itself, never what it names, and a FIFO without
# waiting for a writer; elsewhere a plain open, which a link refuses (ELOOP).
_O_PATH = getattr(os, "O_PATH", 0)
_STEP_FLAGS = (_O_PATH or os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)) | getattr(os, "O_NOFOLLOW", 0)
# O_NONBLOCK: opening a FIFO for reading must not wait for a writer; O_NOCTTY: never adopt a tty.
_FILE_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)


def _relative_parts(path: StrPath, function: str, workspace: StrPath) -> List[str]:
    text = os.fspath(path)
    if not isinstance(text, str):
        raise TypeError(f"{function}(): path must be a str or a path, got {type(path).__name__}")
    if not text or os.path.isabs(text) or text.startswith(("/", "\\")):
        where = _within(text, workspace)
        raise ValueError(f"{function}(): path must be relative to the workspace, got {text!r}{where}")
    parts = [part for part in text.replace("\\", "/").split("/") if part not in ("", ".")]
    if ".." in parts:
        raise ValueError(f"{function}(): path must not climb out of the workspace with '..', got {text!r}")
    return parts


def _within(text: str, workspace: StrPath) -> str:
    """Where an absolute ``text`` lies from the workspace, for the author's error (an empty one, none)."""
    if not text:
        return ""
    root = os.path.abspath(os.fsdecode(os.fspath(workspace)))
    inside = os.path.relpath(text, root) if os.path.isabs(text) else ".."
    if inside == ".." or inside.startswith(".." + os.sep) or inside == ".":
        return f" (the workspace is {root!r} here)"
    return f" (the workspace is {root!r} here: give {inside!r})"


class _Walk:
    """A path followed as the kernel follows it, one part at a time from an open folder, so that no
    part is looked up twice: a link is opened itself (``O_PATH``), its owner and target read from that
    one open, and each ``..`` must reach the folder it came from. ``trail`` holds the folders from
    ``/`` to where the walk stands, ``seen`` every folder it stood in (as device and inode), to tell
    where a path leads from where it went. Each step is one system call or three: the agent's chains
    of links cost at most ``_MAX_LINKS`` targets' steps, never a copy of the whole path per step."""

    def __init__(self) -> None:
        self.descriptor = os.open("/", _STEP_FLAGS | _DIRECTORY)
        self.trail = [_identity(os.fstat(self.descriptor))]
        self.seen = set(self.trail)
        self.links = 0
        self.name = ""  # the file the walk found, in the folder it stands in
        # Once set (the workspace's trail), the walk stands outside the workspace only on its way: it
        # never looks into another folder with the verifier's rights, for the agent to learn what is there.
        self.fence: List[Tuple[int, int]] = []
        self.trusted = (0, os.geteuid())
        self.movers: List[Tuple[int, int]] = []  # see _vet

    def close(self) -> None:
        os.close(self.descriptor)

    def follow(self, parts: List[str], owners: Optional[Tuple[int, ...]] = None) -> Optional[os.stat_result]:
        """Walks ``parts``, following links (only those ``owners`` own, when given); the regular file
        the last part names, else ``None`` (the walk stands in the folder it names). ``OSError`` where
        the kernel would fail, or past a file, a link of someone else's or ``_MAX_LINKS`` links."""
        pending = parts[::-1]
        while pending:
            name = pending.pop()
            if name in ("", "."):
                continue
            if name == "..":
                self._up()
                continue
            child, info, target = self._open(name)
            if target is not None:
                self.links += 1
                if self.links > _MAX_LINKS or (owners is not None and not self._trusted(info, owners)):
                    raise OSError("a link not to follow")
                if target.startswith("/"):
                    self._move(os.open("/", _STEP_FLAGS | _DIRECTORY), restart=True)
                pending.extend(target.split("/")[::-1])
            elif stat.S_ISDIR(info.st_mode) and child is not None:
                self._vet(info, child)
                self._move(child)
            else:
                self._vet(info, child)
                if child is not None:
                    os.close(child)
                if pending or not stat.S_ISREG(info.st_mode):
                    raise OSError("no folder, or no regular file")
                self.name = name
                return info
        return None

    def _vet(self, entry: os.stat_result, child: Optional[int]) -> None:
        """Raises ``OSError`` (closing ``child``) unless whoever may have moved what the walk has entered
        so far into its place, besides root and the verifier's user, could read ``entry`` itself: such a
        user may exchange a name it may write for any folder or file there (``rename(2)``), the
        verifier's answers included, and the verifier would read them as its work (red teams 99 and
        100). What it could read, it could as well have copied."""
        for mover in _movers(os.fstat(self.descriptor), entry, self.trusted):
            if mover not in self.movers:
                self.movers.append(mover)
        if not all(_readable_by(entry, mover) for mover in self.movers):
            if child is not None:
                os.close(child)
            raise OSError("moved into its place by another user, who may not read it")

    def _trusted(self, link: os.stat_result, owners: Tuple[int, ...]) -> bool:
        """Whether a link ``owners`` may trust: theirs, in a folder of theirs no one else may write.
        Another user who may write the folder can move in any link, root's too (red team 99): a
        rename needs no right on the link, and ``fs.protected_hardlinks`` guards hard links only."""
        folder = os.fstat(self.descriptor)
        return link.st_uid in owners and folder.st_uid in owners and not folder.st_mode & _OTHERS_WRITE

    def _open(self, name: str) -> Tuple[Optional[int], os.stat_result, Optional[str]]:
        """``name`` in the current folder: its descriptor (a folder's), its status and a link's target."""
        try:
            child = os.open(name, _STEP_FLAGS, dir_fd=self.descriptor)
        except OSError as error:
            if _O_PATH or error.errno != _LOOP:
                raise
            # Without O_PATH (not Linux: no sandbox runs there) a link is looked at by its name.
            return None, os.lstat(name, dir_fd=self.descriptor), os.readlink(name, dir_fd=self.descriptor)
        info = os.fstat(child)
        if not stat.S_ISLNK(info.st_mode):
            return child, info, None
        try:
            return None, info, os.readlink("", dir_fd=child)
        finally:
            os.close(child)

    def _move(self, child: int, restart: bool = False) -> None:
        old, self.descriptor = self.descriptor, child  # one owner of each descriptor, whatever interrupts
        os.close(old)
        place = _identity(os.fstat(child))
        if restart:
            self.trail = []
        depth = len(self.trail)
        if depth < len(self.fence) and place != self.fence[depth]:
            raise OSError("outside the workspace")
        self.trail.append(place)
        self.seen.add(place)

    def _up(self) -> None:
        if len(self.trail) == 1:
            return  # the root's .. is the root
        parent = os.open("..", _STEP_FLAGS | _DIRECTORY, dir_fd=self.descriptor)
        if _identity(os.fstat(parent)) != self.trail[-2]:  # the folder was moved meanwhile
            os.close(parent)
            raise OSError("moved")
        old, self.descriptor = self.descriptor, parent
        os.close(old)
        self.trail.pop()


# Who may have moved an entry into its place: a user, a group's members, or anyone.
_USER, _GROUP, _ANYONE = 0, 1, 2


def _movers(folder: os.stat_result, entry: os.stat_result, trusted: Tuple[int, ...]) -> List[Tuple[int, int]]:
    """Who, besides ``trusted``, may have moved ``entry`` into ``folder``: the folder's owner, who may
    make it writable whenever it likes; its group's members or anyone where they may write it, except
    in a sticky folder (``/tmp``), where only the entry's owner may move it."""
    mode = folder.st_mode
    movers = []
    if folder.st_uid not in trusted:  # whatever its mode says: an owner may change it (red team 101)
        movers.append((_USER, folder.st_uid))
    if mode & _OTHERS_WRITE:
        if not mode & stat.S_ISVTX:
            movers.append((_ANYONE, 0) if mode & stat.S_IWOTH else (_GROUP, folder.st_gid))
        elif entry.st_uid not in trusted:
            movers.append((_USER, entry.st_uid))
    return movers


def _readable_by(entry: os.stat_result, mover: Tuple[int, int]) -> bool:
    """Whether ``mover`` could read ``entry`` (pass through it, for a folder) by its mode bits: as its
    owner, who may change them anyway, as the group a group's members share, or as anyone."""
    kind, who = mover
    need = stat.S_IXOTH if stat.S_ISDIR(entry.st_mode) else stat.S_IROTH
    if entry.st_mode & need:
        return True
    if kind == _USER:
        return entry.st_uid == who
    return kind == _GROUP and entry.st_gid == who and bool(entry.st_mode & (need << 3))


def _identity(info: os.stat_result) -> Tuple[int, int]:
    return info.st_dev, info.st_ino


def _open_regular(workspace: StrPath, path: StrPath, function: str) -> Optional[int]:
    """A read-only descriptor of the regular file ``path`` inside ``workspace``, else ``None``.

    The workspace's own path is followed through links that root or the verifier's own user owns
    (an image's ``/app -> /srv/app``; the verifier's files are its own anyway) in a folder of theirs
    no one else may write, never another user's, the agent's; the runner's ``workspace`` must lead
    to the folder the runner handed over (``_leads_where_named``). A workspace whose path passes
    through the working directory (the runner's is the agent's workspace) must end inside it:
    ``workspace / "out"`` with the agent's ``out -> /tests/expected`` is no workspace. Inside, the
    agent's links are followed as long as they lead to a file inside the workspace.
    """
    parts = _relative_parts(path, function, workspace)
    walk = None
    try:
        text = os.fsdecode(os.fspath(workspace))
        try:
            cwd: Optional[str] = os.getcwd()
        except OSError:  # removed: a relative workspace leads nowhere, an absolute one as named
            cwd = None
        if cwd is not None or os.path.isabs(text):
            # os.path.abspath's, but for the two leading slashes POSIX lets it keep: one name, one text
            text = "/" + os.path.normpath(os.path.join(cwd or "/", text)).lstrip("/")
        else:
            return None
        here = _identity(os.stat("."))
        walk = _Walk()
        if walk.follow(text.split("/"), owners=(0, os.geteuid())) is not None:
            return None  # a file, not a folder
        if here in walk.seen and here not in walk.trail:
            return None
        if not _leads_where_named(text, walk.trail, None if cwd is None else (cwd, here)):
            return None
        walk.fence = list(walk.trail)
        found = walk.follow(parts)
        if found is None or len(walk.trail) < len(walk.fence):
            return None
        descriptor = os.open(walk.name, _FILE_FLAGS, dir_fd=walk.descriptor)
    except OSError:
        return None
    finally:
        if walk is not None:
            walk.close()
    if _identity(os.fstat(descriptor)) != _identity(found):  # swapped since it was looked at
        os.close(descriptor)
        return None
    return descriptor


def _leads_where_named(text: str, trail: List[Tuple[int, int]], working: Optional[Tuple[str, Tuple[int, int]]]) -> bool:
    """Whether a walk of ``text`` that ended on ``trail`` reached the folders known by name: the
    working directory (``working``: its name and its device and inode, read together) and the one the
    shim's runner handed ``verify`` as ``workspace``, where ``text`` names one or a folder in it.
    Both are held, but ``text`` is a name, and an agent that may write the folder above one can
    exchange the name for a folder or link the verifier may read and it may not (red teams 99 and
    100: ``rename(2)`` with ``RENAME_EXCHANGE``, against ``workspace``, ``"."`` and ``os.getcwd()``)."""
    known = [] if working is None else [working]
    handed = getattr(sys.modules.get("_gym_runner"), "WORKSPACE", None)
    if handed is not None:
        known.append(handed)
    for name, identity in known:
        if text == name:
            if trail[-1] != identity:
                return False
        elif text.startswith(name.rstrip("/") + "/") and identity not in trail:
            return False
    return True


def read_text(
    workspace: StrPath, path: StrPath, *, strip_trailing_newline: bool = True, max_bytes: int = MAX_READ_BYTES
) -> Optional[str]:
    """The UTF-8 text of the regular file ``path`` inside ``workspace``; ``None`` when unreadable
    or larger than ``max_bytes``.

    One trailing ``\\n`` or ``\\r\\n`` is dropped unless ``strip_trailing_newline=False``; nothing
    else is changed (no newline translation, no stripping).
    """
    if not isinstance(max_bytes, int) or isinstance(max_bytes, bool) or max_bytes < 0:
        raise ValueError(f"read_text(): max_bytes must be a non-negative int, got {max_bytes!r}")
    descriptor = _open_regular(workspace, path, "read_text")
    if descriptor is None:
        return None
    data = _read_capped(descriptor, max_bytes)
    if data is None:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return _strip_newline(text) if strip_trailing_newline else text


def _read_capped(descriptor: int, max_bytes: int) -> Optional[bytes]:
    """The file's bytes, read in chunks (memory as the file needs it, not as ``max_bytes`` allows),
    and closed; ``None`` past ``max_bytes`` (the file may grow while it is read) or on a read error
    (a file of /proc that refuses, one with nothing to read yet)."""
    chunks: List[bytes] = []
    total = 0
    try:
        if os.fstat(descriptor).st_size > max_bytes:
            return None
        while True:
            chunk = os.read(descriptor, min(_CHUNK, max_bytes + 1 - total))
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                return None
    except OSError:
        return None
    finally:
        os.close(descriptor)


def _strip_newline(text: str) -> str:
    if text.endswith("\r\n"):
        return text[:-2]
    return text[:-1] if text.endswith("\n") else text


def file_exists(workspace: StrPath, path: StrPath) -> bool:
    """Whether ``path`` is a regular file inside ``workspace`` (a symlink to one inside counts)."""
    descriptor = _open_regular(workspace, path, "file_exists")
    if descriptor is None:
        return False
    os.close(descriptor)
    return True


def text_file_equals(
    workspace: StrPath,
    path: StrPath,
    expected: str,
    *,
    strip_trailing_newline: bool = True,
    max_bytes: int = MAX_READ_BYTES,
) -> bool:
    """Whether the file's text equals ``expected`` exactly (``read_text`` semantics).

    With ``strip_trailing_newline``, one trailing newline is dropped from ``expected`` too, so
    ``"42\\n"`` and ``"42"`` are the same expectation.
    """
    if not isinstance(expected, str):
        raise TypeError(f"text_file_equals(): expected must be a str, got {type(expected).__name__}")
    text = read_text(workspace, path, strip_trailing_newline=strip_trailing_newline, max_bytes=max_bytes)
    if strip_trailing_newline:
        expected = _strip_newline(expected)
    return text is not None and text == expected


__all__ = ("MAX_READ_BYTES", "file_exists", "read_text", "text_file_equals")
