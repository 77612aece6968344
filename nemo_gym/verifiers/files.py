"""Read the agent's files, only inside the workspace, without trusting anything the agent made.

A missing file, a directory, a FIFO, a socket, a device, a symlink leading out of the workspace and
invalid UTF-8 all read as "no answer" (``None``/``False``): the agent's mistakes score 0. A ``path``
that is absolute or climbs out with ``..`` is the author's bug and raises ``ValueError``.

Agent processes may still run beside the verifier, so the checked path is opened one component at a
time with ``O_NOFOLLOW``: a file swapped for a symlink after the check reads as missing. The
workspace is opened once and pinned (``_open_workspace``): the agent's link to it, or out of the
working directory, leads nowhere.

Reads are capped: a file larger than ``max_bytes`` (``MAX_READ_BYTES``, 32 MiB, by default) reads
as "no answer" without being read, so an agent's 2 GB (or sparse 2 TB) file costs no memory.
"""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False  # typing is imported for the type checker only: it costs start-up time
if TYPE_CHECKING:
    from typing import List, Optional, Tuple, Union

    StrPath = Union[str, "os.PathLike[str]"]

# An answer file is small; anything past this is the agent's attempt to exhaust the verifier.
MAX_READ_BYTES = 32 * 1024 * 1024
# The links one path may pass through: Linux's MAXSYMLINKS, past which no program opens it (ELOOP).
_MAX_LINKS = 40
# The longest path a resolution may build: Linux's PATH_MAX. Each step copies the path, so without
# it 40 links of 4 KB targets cost seconds (red team 33).
_MAX_PATH = 4096
_NOT_A_LINK = 22  # EINVAL, readlink's answer for a file or folder that is no link (errno, unimported)
_DIRECTORY_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
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
    root = os.path.abspath(os.fspath(workspace))
    inside = os.path.relpath(text, root) if os.path.isabs(text) else ".."
    if inside == ".." or inside.startswith(".." + os.sep) or inside == ".":
        return f" (the workspace is {root!r} here)"
    return f" (the workspace is {root!r} here: give {inside!r})"


def _resolve(root: str, parts: List[str], roots_links: bool = False) -> Optional[str]:
    """Where ``root/parts`` leads (``root`` is real), following links as the kernel does: ``None``
    past ``_MAX_LINKS`` of them, through a part that is missing or no folder, past ``_MAX_PATH``
    bytes, or (``roots_links``) through a link neither root nor this process's user owns.
    ``os.path.realpath`` recurses once per link before 3.13, so the agent's chain of a thousand raised
    ``RecursionError``, and it follows chains no program could open."""
    pending, current, links = parts[::-1], root, 0
    while pending:
        part = pending.pop()
        if part in ("", "."):
            continue
        if part == "..":
            current = os.path.dirname(current)
            continue
        candidate = os.path.join(current, part)
        if len(candidate) > _MAX_PATH:
            return None
        try:
            target = os.readlink(candidate)
            if roots_links and os.lstat(candidate).st_uid not in (0, os.geteuid()):
                return None
        except OSError as error:
            if error.errno != _NOT_A_LINK:
                return None  # missing, under a file, or not searchable: no program gets past it
            if pending and not os.path.isdir(candidate):
                return None  # "real.txt/", "real.txt/../x": the kernel's ENOTDIR
            current = candidate
            continue
        links += 1
        if links > _MAX_LINKS:
            return None
        if target.startswith("/"):
            current = "/"
        pending.extend(target.split("/")[::-1])
    return current


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _open_workspace(workspace: StrPath) -> Optional[Tuple[int, str]]:
    """A descriptor of the workspace folder and its physical path, else ``None``.

    The folder is opened once and every read walks from that descriptor, so a workspace swapped
    while it is read is read as it was, or not at all. A link on the workspace's own path is
    followed only when root (an image's ``/app -> /srv/app``) or the verifier's own user owns it
    (whose files are its own anyway), never another user's, the agent's, and a
    workspace named within the working directory (the runner's is the agent's workspace) must stay
    within it: ``workspace / "out"`` with the agent's ``out -> /tests/expected`` is no workspace.
    """
    text = os.path.abspath(os.fspath(workspace))
    try:
        descriptor = os.open(text, _DIRECTORY_FLAGS & ~getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        opened = os.fstat(descriptor)
        try:  # the path of the folder opened, not of whatever the name holds by now
            root = os.readlink(f"/proc/self/fd/{descriptor}")
        except OSError:
            root = os.path.realpath(text)
        here = os.stat(root)
        if (here.st_dev, here.st_ino) != (opened.st_dev, opened.st_ino):
            raise OSError  # moved or removed since it was opened
        if root != text:  # reached through links: whose, and to where
            if _resolve("/", text.split("/"), roots_links=True) != root:
                raise OSError
            cwd = os.getcwd()
            if _inside(text, cwd) and not _inside(root, cwd):
                raise OSError
    except (OSError, RecursionError, ValueError):
        os.close(descriptor)
        return None
    return descriptor, root


def _open_regular(workspace: StrPath, path: StrPath, function: str) -> Optional[int]:
    """A read-only descriptor of the regular file ``path`` inside ``workspace``, else ``None``."""
    parts = _relative_parts(path, function, workspace)
    pinned = _open_workspace(workspace)
    if pinned is None:
        return None
    directory, root = pinned
    try:
        target = _resolve(root, parts)
        if target is None or os.path.commonpath([root, target]) != root or target == root:
            return None
        for part in os.path.relpath(target, root).split(os.sep)[:-1]:
            child = os.open(part, _DIRECTORY_FLAGS, dir_fd=directory)
            os.close(directory)
            directory = child
        descriptor = os.open(os.path.basename(target), _FILE_FLAGS, dir_fd=directory)
    except OSError:
        return None
    finally:
        os.close(directory)
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        return None
    return descriptor


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
    with open(descriptor, "rb") as handle:
        if os.fstat(descriptor).st_size > max_bytes:
            return None
        data = handle.read(max_bytes + 1)  # the file may grow while it is read
    if len(data) > max_bytes:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return _strip_newline(text) if strip_trailing_newline else text


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
