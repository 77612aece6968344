"""Artifacts: the files a separate verifier receives from the agent's sandbox (seed 000, "Shared and
separate verification"; Harbor's ``trial/artifact_handler.py``).

``collect_artifacts`` copies each artifact out of the agent's sandbox into a host folder, the
convention folder ``/logs/artifacts`` always among them; ``deliver_artifacts`` puts those copies
back at their own paths in the verifier's sandbox. Both move files through the sandbox's archive
calls where it has them (no tool inside the sandbox, so an agent that deletes ``tar`` changes
nothing), else through one ``exec`` of ``tar`` and ``download_file``/``upload_file``. The decisions
(what to copy, what to leave out and why, where a link leads) are the pure functions below; the two
async functions only carry them out.

Choices, where Harbor or the contract is silent or differs:
- **Names.** A host copy lands at ``folder/<destination>``; the default destination is the source
  without its leading ``/`` (``/var/log/x`` -> ``var/log/x``), as Harbor names it. Entries are
  collected in Harbor's order: ``/logs/artifacts`` first (unless an entry names it), then the
  task's, then the step's. A later entry whose destination overlaps an earlier one's is skipped and
  reported, as Harbor skips it, and silently when the earlier copy already holds it (Harbor's
  ``artifact_is_covered_by``).
- **Exclude patterns** are GNU tar's ``--exclude``, which Harbor passes (``tar -C SOURCE .``):
  ``fnmatch`` with ``*`` matching ``/``, case-sensitive, a leading ``.`` not special, tried against
  every tail of the member's path ``./REL`` that starts at a component, and a folder that matches
  takes everything in it. So ``*.tmp`` and ``node_modules`` match at any depth, ``a/b`` matches
  ``x/a/b``, a trailing ``/`` matches nothing, and ``*`` or ``.`` leaves an empty folder. A file
  artifact ignores them, as Harbor's does. Patterns are applied on the host, after the transfer:
  excluded files still count towards ``transfer_limit`` (the archive calls return whole archives).
- **Links.** A symbolic link is never followed. One inside a folder is kept, as a link, only when
  it leads (through the folder's own links, as the kernel would resolve it) to a file or folder
  the copy itself holds; a link that is absolute, leads out of the source, dangles or loops is
  left out and reported. So no copy can reach outside itself, here or in the verifier's sandbox,
  where a link to ``/etc/passwd`` or ``/tests/expected.txt`` would read the verifier's own file. A
  source that is itself a link is left out likewise. A hard link is copied as a file. What is left
  out for what it is (such a link, a device, a FIFO) keeps its name, as an empty file (0666): a file
  the agent was told to delete and made a link out of the artifact must not look gone to a verifier
  that checks it is (red team 85). A socket no archive holds: it is gone from the copy.
- **Limits.** ``MAX_ARTIFACT_BYTES`` and ``MAX_ARTIFACT_FILES`` bound a whole collection (every
  artifact together). A file that would pass either is left out, and the artifact is reported
  truncated; an archive larger than ``transfer_limit`` is refused by the sandbox and the artifact is
  skipped whole. A path nested more than ``MAX_ARTIFACT_DEPTH`` folders inside its artifact or longer
  than ``MAX_ARTIFACT_PATH`` bytes is left out in the same way: a tree the agent built so that no
  copy can make it cuts the artifact short, never fails the collection (a separate verification then
  scores the sample 0: ``separate.incomplete_artifacts``). Devices, FIFOs and sockets are
  left out. Set-id and sticky bits are dropped; on the host a file keeps its mode plus ``u+rw``, a
  folder plus ``u+rwx``, and modification times.
- **Missing** sources are reported, never fatal; the convention folder is never reported missing
  (an agent that publishes nothing is the common case).
- **Delivery** goes parents first (by source depth), so a nested artifact lands inside its parent's.
  A folder's place is emptied first and keeps its own root (Harbor's ``empty_dirs``: a mount point
  survives); a file's place is removed and its parents made. Delivered files belong to ``owner``,
  never as the verifier's own uid (``hand_over_script``), else to the admin. A sandbox that maps
  ``/tests`` and ``/logs/verifier`` to folders of its own (the local sandbox without bubblewrap) has
  no own paths to deliver to, and refuses.
"""

from __future__ import annotations

import errno
import fnmatch
import functools
import io
import os
import posixpath
import re
import shlex
import shutil
import stat
import tarfile
import tempfile
import uuid
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Pattern, Sequence, Set, Tuple

from nemo_gym.data.tasks.harbor._threads import in_thread
from nemo_gym.data.tasks.harbor.sandboxes.base import (
    ArchiveSandbox,
    CopyStalled,
    LinkEscape,
    Sandbox,
    SandboxError,
    User,
    causes,
    sandbox_option,
)
from nemo_gym.data.tasks.harbor.tar_guard import UnsafeTar, open_tar
from nemo_gym.data.tasks.harbor.task import (
    CONVENTION_ARTIFACTS,
    PROTECTED_PATHS,
    Artifact,
    TaskError,
    artifact_destination_refusal,
    artifact_source_refusal,
    default_destination,
)

# The most a collection copies, all its artifacts together. The archive calls hold one artifact's
# archive in memory, and a server collects for many rollouts at once, so this is what one rollout
# may cost; it holds a repository checkout (Django's is ~50 MiB, 7,000 files) with room to spare,
# but not a .git history or node_modules: exclude those.
MAX_ARTIFACT_BYTES = 256 << 20
# Files, folders and links: each is a tar header to move and a host inode to make; a tree of
# millions of empty files is as costly as a large one.
MAX_ARTIFACT_FILES = 20_000
# How deep and how long a path inside an artifact may be. The agent can nest folders until no path
# can be made: Linux refuses one of 4096 bytes or more (the host copy's folder and the verifier's
# source path come first), and Python walks a tree once per level (os.walk, tarfile) on 3.8-3.11,
# up to its recursion limit. A real tree (a checkout, a venv, node_modules) stays far inside both.
MAX_ARTIFACT_DEPTH = 128
MAX_ARTIFACT_PATH = 2048
# What a tar spends beside file contents, per entry (a 512-byte header, a PAX header for a long name
# or a large field, padding to 512 bytes) and per archive (end blocks, the engine's blocking).
TAR_ENTRY_OVERHEAD = 2048
TAR_ARCHIVE_OVERHEAD = 1 << 20
# At most this many left-out paths are listed (the rest are counted): a truncated tree leaves out
# thousands.
MAX_REPORTED = 100
# Links followed to resolve one link, as Linux's MAXSYMLINKS: a loop ends here.
MAX_LINK_HOPS = 40
# Parts of link targets followed while one artifact's links are checked, all of them together. The
# kernel lets one path take 40 links of 4 KB each, so an agent can make every link cost some 80,000
# steps of Python on the server's event loop (red team 30: 20,000 such links would have frozen it
# for an hour); real links take a few parts each. Once spent, the links left are left out.
MAX_LINK_WORK = 1 << 20
# How long one exec of the delivery or the tar fallback may take.
EXEC_TIMEOUT_SEC = 600.0
# The most one exec's script holds (links to make): far below Linux's 128 KiB for one argument.
SCRIPT_BYTES = 64 << 10
FAIL = "fail() { printf '%s\\n' \"$1\" >&2; exit 1; }"

FILE, FOLDER, LINK, OTHER = "file", "folder", "link", "other"
CONVENTION = Artifact(CONVENTION_ARTIFACTS, default_destination(CONVENTION_ARTIFACTS))

_EXCLUDED, _LIMITED, _SKIPPED = "excluded", "limited", "skipped"


# The mode of what stands in for a link or a special file left out: empty, for any user to read and write.
PLACEHOLDER_MODE = 0o666


class LandingRefused(TaskError):
    """A sandbox cannot place an artifact as the agent left it (the local sandbox: a file whose folder
    this machine has). This rollout's 0, not the task's error: another agent leaves a folder there, and
    one agent's doing must not stop a batch (red team 84)."""


# --- results -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Skipped:
    """Something left out of a collection: ``path`` in the agent's sandbox, and why."""

    path: str
    reason: str


@dataclass(frozen=True)
class CollectedArtifact:
    """One artifact's host copy: ``path`` is ``folder/<destination>``, ``kind`` ``file`` or
    ``folder``; ``files`` counts what it holds (files, folders, links, itself included), ``bytes``
    their contents; ``truncated`` says a limit left some of it out."""

    artifact: Artifact
    path: Path
    kind: str
    files: int
    bytes: int
    truncated: bool = False


@dataclass(frozen=True)
class CollectedArtifacts:
    """What ``collect_artifacts`` brought out: the copies, the sources that were not there, and what
    was left out (at most ``MAX_REPORTED`` listed, ``more_skipped`` beyond them); ``cut``, the sources
    left out whole for what the sandbox held there (an archive over the limit, a socket, an unsafe
    archive, a stall, a link among the parent folders)."""

    folder: Path
    artifacts: Tuple[CollectedArtifact, ...] = ()
    missing: Tuple[str, ...] = ()
    skipped: Tuple[Skipped, ...] = ()
    more_skipped: int = 0
    excluded: int = 0
    cut: Tuple[str, ...] = ()

    @property
    def truncated(self) -> Tuple[str, ...]:
        """The sources whose copy a limit cut short."""
        return tuple(item.artifact.source for item in self.artifacts if item.truncated)

    @property
    def incomplete(self) -> Tuple[str, ...]:
        """The sources not copied whole for what the sandbox held: cut short, or left out whole."""
        return (*self.truncated, *self.cut)

    @property
    def files(self) -> int:
        return sum(item.files for item in self.artifacts)

    @property
    def bytes(self) -> int:
        return sum(item.bytes for item in self.artifacts)

    def describe(self) -> str:
        """One line for a log: what was copied, missing, cut short and left out."""
        parts = [f"{len(self.artifacts)} artifact(s), {self.files} file(s), {self.bytes} bytes"]
        if self.missing:
            parts.append("missing: " + ", ".join(self.missing))
        if self.truncated:
            parts.append("cut short by the limits: " + ", ".join(self.truncated))
        left_out = len(self.skipped) + self.more_skipped
        if left_out:
            shown = "; ".join(f"{item.path!r} ({item.reason})" for item in self.skipped[:5])
            parts.append(f"{left_out} left out: {shown}{'; ...' if left_out > 5 else ''}")
        return ", ".join(parts)


# --- which artifacts, where (pure) ---------------------------------------------------------------


def collection_set(*groups: Iterable[Artifact]) -> Tuple[Artifact, ...]:
    """One collection pass: ``/logs/artifacts`` first (unless an entry of the main service names it,
    which then takes its place, as Harbor's ``with_convention_entry``), then the groups in order
    (the task's, a step's), an entry repeated as it is kept once."""
    entries: List[Artifact] = []
    for group in groups:
        for artifact in group:
            if artifact not in entries:
                entries.append(artifact)
    if not any(item.source == CONVENTION_ARTIFACTS and item.service == "main" for item in entries):
        entries.insert(0, CONVENTION)
    return tuple(entries)


def _parts(path: str) -> List[str]:
    return [part for part in path.split("/") if part not in ("", ".")]


def _within(path: str, folder: str) -> bool:
    """Whether the relative or absolute ``path`` is ``folder`` or inside it, by components."""
    inner, outer = _parts(path), _parts(folder)
    return inner[: len(outer)] == outer


def covers(prior: Artifact, artifact: Artifact) -> bool:
    """Whether ``prior``'s copy already holds ``artifact``'s, at the same place (Harbor's
    ``artifact_is_covered_by``)."""
    if prior.service != artifact.service or not _within(artifact.source, prior.source):
        return False
    if artifact.source == prior.source and artifact.destination == prior.destination:
        return prior.exclude == artifact.exclude
    below = _parts(artifact.source)[len(_parts(prior.source)) :]
    return not prior.exclude and _parts(artifact.destination) == _parts(prior.destination) + below


def claim_refusal(claimed: Sequence[Artifact], artifact: Artifact) -> Optional[str]:
    """Why ``artifact`` is not copied after the ``claimed`` ones, or ``None``: an earlier copy holds
    it already, or its destination is, holds or lies in an earlier one's (Harbor keeps the first)."""
    for prior in claimed:
        if covers(prior, artifact):
            return f"already copied with {prior.source}"
        if _within(artifact.destination, prior.destination) or _within(prior.destination, artifact.destination):
            return f"its destination {artifact.destination!r} overlaps that of {prior.source} ({prior.destination!r})"
    return None


def transfer_limit(limit_bytes: int, limit_files: int) -> int:
    """The largest archive worth moving for a collection under these limits: any larger one holds
    more bytes or more entries than the collection may keep."""
    return limit_bytes + limit_files * TAR_ENTRY_OVERHEAD + TAR_ARCHIVE_OVERHEAD


@functools.lru_cache(maxsize=1024)
def _pattern(pattern: str) -> Pattern[str]:
    """``pattern`` as GNU tar's ``fnmatch`` reads it (a backslash escapes the next character outside
    brackets), compiled for ``re``; ``*`` and ``?`` match ``/`` too (tar's exclusion default)."""
    out: List[str] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\" and index + 1 < len(pattern):
            following = pattern[index + 1]
            out.append(f"[{following}]" if following in "*?[" else following)
            index += 2
        elif char == "[":
            end = index + 1
            if end < len(pattern) and pattern[end] in "!^":
                end += 1
            if end < len(pattern) and pattern[end] == "]":
                end += 1
            end = pattern.find("]", end)
            if end < 0:
                out.append("[[]")
                index += 1
            else:
                out.append(pattern[index : end + 1].replace("[^", "[!", 1))
                index = end + 1
        else:
            out.append(char)
            index += 1
    return re.compile(fnmatch.translate("".join(out)))


def _matches_itself(relative: str, patterns: Sequence[Pattern[str]]) -> bool:
    """Whether a pattern matches the member ``./relative`` itself (any tail starting at a component)."""
    parts = relative.split("/") if relative else []
    names = ["./" + relative if relative else "."] + ["/".join(parts[start:]) for start in range(len(parts))]
    return any(pattern.match(name) for pattern in patterns for name in names)


def is_excluded(relative: str, patterns: Sequence[str]) -> bool:
    """Whether GNU tar's ``--exclude`` ``patterns`` leave out ``relative`` (a path inside a folder
    artifact, ``""`` for the folder itself): it or a folder holding it matches (see the module)."""
    compiled = [_pattern(pattern) for pattern in patterns]
    if not compiled:
        return False
    parts = relative.split("/") if relative else []
    return any(_matches_itself("/".join(parts[:length]), compiled) for length in range(len(parts) + 1))


class _Work:
    """The parts of link targets that one artifact's link checks may still follow."""

    def __init__(self, left: int = MAX_LINK_WORK) -> None:
        self.left = left

    def spend(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise _Spent


class _Spent(Exception):
    """The parts a link check may follow are spent."""


def resolve_link(
    link: str,
    target: str,
    links: Mapping[str, str],
    folders: Set[str],
    files: Set[str],
    *,
    work: Optional[_Work] = None,
    through: Optional[List[str]] = None,
) -> Optional[str]:
    """Where the symbolic link ``link`` (a path inside a copy, ``target`` its text) leads, as the
    kernel resolves it, following the copy's own ``links`` (path -> target): a path in ``folders``
    (``""`` is the copy's root) or ``files``. ``None`` when it is absolute, leaves the copy, passes
    through or ends at anything the copy does not hold, or takes more than ``MAX_LINK_HOPS`` links.
    Each part followed is spent from ``work`` (``_Spent`` once it is empty); each link followed is
    added to ``through``."""
    if not target or target.startswith("/"):
        return None
    current = _parts(posixpath.dirname(link))
    pending = deque(target.split("/"))
    hops = 0
    while pending:
        if work is not None:
            work.spend()
        part = pending.popleft()
        if part in ("", "."):
            continue
        if part == "..":
            if not current:
                return None
            current.pop()
            continue
        path = "/".join([*current, part])
        if path in links:
            hops += 1
            following = links[path]
            if through is not None:
                through.append(path)
            if hops > MAX_LINK_HOPS or not following or following.startswith("/"):
                return None
            pending.extendleft(reversed(following.split("/")))
        elif path in folders or (path in files and not pending):
            current.append(part)
        else:
            return None
    return "/".join(current)


def vetted_links(links: Mapping[str, str], folders: Set[str], files: Set[str]) -> Dict[str, str]:
    """The ``links`` that lead to something the copy holds once every other link left out is gone
    (dropping one can strand another that passed through it)."""
    return _vet(links, folders, files)[0]


def _vet(links: Mapping[str, str], folders: Set[str], files: Set[str]) -> Tuple[Dict[str, str], Set[str]]:
    """``vetted_links``, and the links left out unchecked once ``MAX_LINK_WORK`` parts were followed.
    Each link is checked once, and again only when a link it passed through is dropped."""
    kept = dict(links)
    unchecked: Set[str] = set()
    work = _Work()
    users: Dict[str, Set[str]] = {}  # a link -> the kept links whose resolution passed through it
    queue = deque(kept)
    queued = set(kept)
    while queue:
        path = queue.popleft()
        queued.discard(path)
        through: List[str] = []
        try:
            resolved = resolve_link(path, kept[path], kept, folders, files, work=work, through=through)
        except _Spent:
            unchecked.add(path)
            resolved = None
        if resolved is not None:
            for link in through:
                users.setdefault(link, set()).add(path)
            continue
        del kept[path]
        for user in users.pop(path, set()):
            if user in kept and user not in queued:
                queue.append(user)
                queued.add(user)
    return kept, unchecked


@dataclass(frozen=True)
class Entry:
    """One member of an artifact's archive: ``relative`` to the artifact (``""`` is the artifact
    itself), its ``kind`` (``file``, ``folder``, ``link``, ``other``), a file's ``size``, a link's
    ``target``."""

    relative: str
    kind: str
    size: int = 0
    target: str = ""


@dataclass(frozen=True)
class CopyPlan:
    """What ``plan_copy`` keeps of an archive, in the order to write it (folders before what they
    hold, links last), what stands in for what it leaves out (``placeholders``), and what it leaves out."""

    keep: Tuple[str, ...] = ()
    skipped: Tuple[Tuple[str, str], ...] = ()  # (relative path, why)
    limited: int = 0  # entries left out for the limits
    excluded: int = 0
    bytes: int = 0
    files: int = 0
    placeholders: Tuple[str, ...] = ()  # empty files (PLACEHOLDER_MODE) in their place, in a folder the copy holds


def plan_copy(entries: Sequence[Entry], exclude: Sequence[str] = (), *, bytes_left: int, files_left: int) -> CopyPlan:
    """What to keep of an artifact's ``entries`` (archive order, the artifact itself first) under the
    ``exclude`` patterns (a folder's only) and the budget left (see the module's choices)."""
    if not entries:
        return CopyPlan()
    root = entries[0]
    over_files = f"over the limit of {files_left} more files"
    if files_left < 1:
        return CopyPlan(skipped=(("", over_files),), limited=1)
    if root.kind == LINK:
        return CopyPlan(skipped=(("", "a symbolic link, which is never followed"),), files=1, placeholders=("",))
    if root.kind not in (FILE, FOLDER):
        return CopyPlan(skipped=(("", "not a file or folder (a device, FIFO or socket)"),), files=1, placeholders=("",))
    if root.kind == FILE:
        if root.size > bytes_left:
            return CopyPlan(skipped=(("", f"its {root.size} bytes are over the {bytes_left} bytes left"),), limited=1)
        return CopyPlan(keep=("",), bytes=root.size, files=1)
    patterns = [_pattern(pattern) for pattern in exclude]
    keep: List[str] = [""]
    skipped: List[Tuple[str, str]] = []
    folders: Set[str] = {""}
    files: Set[str] = set()
    gone: Dict[str, str] = {"": _EXCLUDED} if _matches_itself("", patterns) else {}
    links: Dict[str, str] = {}
    placeholders: List[str] = []
    limited = excluded = used_bytes = 0
    used_files = 1
    for entry in entries[1:]:
        path, parent = entry.relative, posixpath.dirname(entry.relative)
        if path in folders or path in files or path in links or path in gone:
            skipped.append((path, "named twice in the archive"))
            continue
        if parent not in folders or parent in gone:
            why = gone.get(parent)
            gone[path] = why or _SKIPPED
            if why == _EXCLUDED:
                excluded += 1
            elif why == _LIMITED:
                limited += 1
                skipped.append((path, "inside a folder left out for the limits"))
            else:
                skipped.append((path, "not inside a folder the copy holds"))
            continue
        too_far = _too_far(path)
        if _matches_itself(path, patterns):
            gone[path] = _EXCLUDED
            excluded += 1
        elif too_far is not None:
            gone[path] = _LIMITED
            limited += 1
            skipped.append((path, too_far))
        elif entry.kind == LINK:
            links[path] = entry.target
        elif entry.kind not in (FILE, FOLDER):
            gone[path] = _SKIPPED
            placeholders.append(path)
            skipped.append((path, "not a file, folder or symbolic link (a device, FIFO or socket)"))
        elif used_files >= files_left or (entry.kind == FILE and used_bytes + entry.size > bytes_left):
            gone[path] = _LIMITED
            limited += 1
            over_bytes = f"over the limit of {bytes_left} bytes"
            skipped.append((path, over_files if used_files >= files_left else over_bytes))
        else:
            keep.append(path)
            used_files += 1
            if entry.kind == FILE:
                files.add(path)
                used_bytes += entry.size
            else:
                folders.add(path)
    vetted, unchecked = _vet(links, folders, files)
    capped: Dict[str, str] = {}
    for path, target in links.items():
        if path in unchecked:
            placeholders.append(path)
            skipped.append((path, f"a symbolic link left unchecked: the artifact's links took {MAX_LINK_WORK} steps"))
        elif path not in vetted:
            placeholders.append(path)
            skipped.append((path, "a symbolic link that leads out of the artifact, or to nothing it holds"))
        elif used_files + len(capped) >= files_left:
            limited += 1
            skipped.append((path, over_files))
        else:
            capped[path] = target
    final = vetted_links(capped, folders, files)
    for path in capped:
        if path not in final:
            placeholders.append(path)
            skipped.append((path, "a symbolic link through another one left out for the limits"))
    keep.extend(final)
    # What is left out for what it is keeps its name (red team 85: a file the agent was told to delete,
    # made a link out of the artifact, looked gone to a verifier that checks it is), within the limits.
    room = max(0, files_left - used_files - len(final))
    limited += max(0, len(placeholders) - room)
    placeholders = placeholders[:room]
    files_used = used_files + len(final) + len(placeholders)
    return CopyPlan(tuple(keep), tuple(skipped), limited, excluded, used_bytes, files_used, tuple(placeholders))


def _too_far(path: str) -> Optional[str]:
    """Why no copy can hold ``path`` (relative to its artifact), or ``None``."""
    if path.count("/") >= MAX_ARTIFACT_DEPTH:
        return f"nested deeper than {MAX_ARTIFACT_DEPTH} folders"
    if len(path.encode("utf-8", "surrogateescape")) > MAX_ARTIFACT_PATH:
        return f"a path longer than {MAX_ARTIFACT_PATH} bytes"
    return None


def delivery_order(items: Iterable[CollectedArtifact]) -> List[CollectedArtifact]:
    """Parents first: by the depth of the source, then as collected."""
    return sorted(items, key=lambda item: len(_parts(item.artifact.source)))


def delivery_refusal(path: str, protected: Sequence[str] = PROTECTED_PATHS) -> Optional[str]:
    """Why an artifact may not land at ``path`` in the verifier's sandbox, or ``None``: the load-time
    rules (``task.artifact_source_refusal``) against the ``protected`` folders."""
    return artifact_source_refusal(path, tuple(protected))


def delivery_script(items: Sequence[CollectedArtifact]) -> str:
    """The bash that readies each artifact's place (in order): a folder's is made and emptied, its
    root kept; a file's is removed and its parents made. Only bash, ``rm`` and ``mkdir``."""
    lines = ["shopt -s dotglob nullglob", FAIL]
    for item in items:
        place = shlex.quote(item.artifact.source)
        if item.kind == FOLDER:
            why = shlex.quote("cannot empty " + item.artifact.source)
            lines.append(
                f"if [ -L {place} ] || {{ [ -e {place} ] && [ ! -d {place} ]; }}; then rm -f -- {place}; fi; "
                f"mkdir -p -- {place} && rm -rf -- {place}/* || fail {why}"
            )
        else:
            parent = shlex.quote(posixpath.dirname(item.artifact.source))
            lines.append(
                f"rm -rf -- {place} && mkdir -p -- {parent} "
                f"|| fail {shlex.quote('cannot make room for ' + item.artifact.source)}"
            )
    return "\n".join(lines)


def _linked_parent_test(source: str) -> str:
    """A bash test that holds when one of ``source``'s parent folders, as written, is a symbolic link:
    the copy, made as root, would follow it, so the agent (who may not read there itself) could have
    the verifier read any file of the image's by the artifact's name (red team 85: /app/out ->
    /srv/secret). Whoever owns it: a root's link may lead through one of the agent's (red team 86:
    the image's /app/data -> shared, and the agent's /app/shared -> /srv/secret). Where none is, the
    path resolves through real folders alone."""
    parts = _parts(source)[:-1]
    prefixes = " ".join(shlex.quote("/" + "/".join(parts[: depth + 1])) for depth in range(len(parts)))
    if not prefixes:
        return "false"
    return f'{{ for p in {prefixes}; do [ -L "$p" ] && exit 0; done; exit 1; }}'


def collect_script(sources: Sequence[str], tmp_dir: str, limit: int) -> str:
    """The bash that tars each source (links as links) into a private file in ``tmp_dir``, at most
    ``limit`` bytes, for a sandbox without archive calls. It prints ``INDEX ok FILE``, ``INDEX
    missing``, ``INDEX large``, ``INDEX linked`` (``_linked_parent_test``) or ``INDEX failed STATUS``
    per source; it needs ``tar``, ``mktemp``, ``head`` and ``wc``. tar's status 1 (a file
    changed as it was read) and 2 (one vanished, or could not be read) still give an archive, which the
    host then reads whole or refuses: the agent's processes still run, and must not be able to mask
    the sample by deleting a file at the right time."""
    template = shlex.quote(posixpath.join(tmp_dir, "nemo-gym-artifact-XXXXXXXX"))
    lines = ["umask 077"]
    for index, source in enumerate(sources):
        path = shlex.quote(source)
        parent, name = (shlex.quote(part or "/") for part in posixpath.split(source))
        lines.append(
            f"if ( {_linked_parent_test(source)} ); then echo '{index} linked'; "
            f"elif [ ! -e {path} ] && [ ! -L {path} ]; then echo '{index} missing'; else "
            f"t=$(mktemp {template}) || exit 90; "
            f'tar -c -f - -C {parent} -- {name} 2>/dev/null | head -c {limit + 1} > "$t"; '
            f'status=("${{PIPESTATUS[@]}}"); size=$(wc -c < "$t"); '
            f'if [ "$size" -gt {limit} ]; then rm -f -- "$t"; echo \'{index} large\'; '
            f'elif [ "${{status[0]}}" -gt 2 ]; then rm -f -- "$t"; echo "{index} failed ${{status[0]}}"; '
            f'else echo "{index} ok $t"; fi; fi'
        )
    return "\n".join(lines)


# --- sandbox faults ------------------------------------------------------------------------------


def source_missing(error: BaseException) -> bool:
    """Whether a failed ``get_archive`` says the path is not there (the local sandbox's
    ``FileNotFoundError``/``NotADirectoryError``; the engine's "Could not find the file" 404 or
    "not a directory" 500), or cannot be reached through the agent's links (``ELOOP``; the engine's
    "too many links" 500: a parent folder linked to itself), rather than that the sandbox failed."""
    for cause in causes(error):
        if isinstance(cause, (FileNotFoundError, NotADirectoryError)):
            return True
        if isinstance(cause, OSError) and cause.errno == errno.ELOOP:
            return True
        status = getattr(cause, "status_code", None)
        explanation = str(getattr(cause, "explanation", "") or "")
        if status == 404 and "Could not find the file" in explanation:
            return True
        if status == 500 and (explanation.endswith("not a directory") or "too many links" in explanation):
            return True
    return False


def _fault(what: str, error: BaseException) -> SandboxError:
    if isinstance(error, SandboxError):
        return error
    text = str(error)
    return SandboxError(f"{what} failed: {type(error).__name__}{': ' + text if text else ''}")


async def _exec(sandbox: Sandbox, script: str, what: str) -> str:
    """Runs ``script`` as the admin in a clean shell; its stdout, or ``SandboxError``."""
    try:
        result = await sandbox.exec(
            script, cwd="/", user=sandbox.admin_user, timeout_s=EXEC_TIMEOUT_SEC, clean_shell=True
        )
    except Exception as error:  # any fault of the sandbox or its provider
        raise _fault(what, error) from error
    if result.return_code != 0:
        detail = (result.stderr or result.stdout).strip()[-500:]
        raise SandboxError(f"{what} failed (exit {result.return_code}){': ' + detail if detail else ''}")
    return result.stdout


# --- collecting ----------------------------------------------------------------------------------


def _name(member: tarfile.TarInfo) -> str:
    """A member's name. Python 3.8 keeps the trailing "/" of a folder's GNU long name (GNU tar writes
    one for a path past 100 bytes); later versions drop it."""
    return member.name.rstrip("/") if member.isdir() else member.name


# What tarfile raises on a damaged archive besides TarError: a header cut inside a sparse map
# (IndexError, ValueError), a negative size on 3.8 (ValueError: a negative seek), headers that
# extend the next too many times (RecursionError; open_tar stops them first).
_DAMAGED = (tarfile.TarError, ValueError, IndexError, EOFError, OverflowError, RecursionError, MemoryError)


def _read_members(archive: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    """The archive's members in order, each one's header after the last one's: tarfile reads a header
    whose size is negative again and again, forever (CVE-2025-8194, in most releases), so one that
    does not move on is a damaged archive."""
    last = -1
    for member in archive:  # not next(): on 3.8 a next() past an empty archive's end seeks to -1
        if member.offset <= last:
            raise tarfile.ReadError(f"the member {member.name!r} does not move the archive on (a negative size)")
        last = member.offset
        yield member


def complete_members(data: bytes) -> bytes:
    """The members at the start of a tar stream cut short that came whole, as a tar of their own
    (``b""`` when none did): a member whose header or data the cut reached is left out."""
    end = 0
    try:
        with open_tar(io.BytesIO(data)) as archive:
            # tarfile's offset is where the next header starts: the member read last ends before it.
            for _ in _read_members(archive):
                if archive.offset > len(data):
                    break
                end = archive.offset
    except _DAMAGED:
        pass  # the cut, in a header or in a member's data (or a PAX header tarfile would read slowly)
    return data[:end] + bytes(2 * tarfile.BLOCKSIZE) if end else b""


def _entries(archive: tarfile.TarFile, source: str) -> Tuple[List[Entry], Dict[str, tarfile.TarInfo]]:
    """The archive's members as entries relative to the artifact (the first member is the artifact
    itself, whatever its name; none when it was a socket, which no archive holds); a hard link
    becomes a file of its target's size. ``UnsafeTar`` for a name held twice."""
    members = list(_read_members(archive))
    if not members:
        return [], {}
    top = _name(members[0])
    if not top or "/" in top or top in (".", ".."):
        raise SandboxError(f"the archive of {source} from the sandbox starts with {top!r}, not the artifact")
    entries: List[Entry] = []
    by_path: Dict[str, tarfile.TarInfo] = {}
    for member in members:
        name = _name(member)
        if name == top:
            relative = ""
        elif name.startswith(top + "/"):
            relative = name[len(top) + 1 :]
            if any(part in ("", ".", "..") for part in relative.split("/")):
                raise SandboxError(f"the archive of {source} from the sandbox holds {name!r}")
        else:
            raise SandboxError(f"the archive of {source} from the sandbox holds {name!r}, which is not inside it")
        if member.isreg():
            entries.append(Entry(relative, FILE, member.size))
        elif member.isdir():
            entries.append(Entry(relative, FOLDER))
        elif member.issym():
            entries.append(Entry(relative, LINK, target=member.linkname))
        elif member.islnk():
            linked = member.linkname
            inside = linked[len(top) + 1 :] if linked.startswith(top + "/") else None
            target = by_path.get(inside) if inside is not None else None
            if target is not None and target.isreg():
                entries.append(Entry(relative, FILE, target.size))
            else:
                entries.append(Entry(relative, OTHER))
        else:
            entries.append(Entry(relative, OTHER))
        if relative in by_path:
            # No tar of one folder holds a name twice; a forged one could size a hard link by the
            # first copy while tarfile's extraction follows the last (red team 39).
            raise UnsafeTar(f"the archive holds {name!r} twice")
        by_path[relative] = member
    return entries, by_path


def _remove(path: Path) -> None:
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def _make_folders(folder: Path, relative: str) -> Path:
    """``folder/relative``'s parent, made folder by folder, never through a link."""
    current = folder
    for part in _parts(relative)[:-1]:
        current = current / part
        if current.is_symlink():
            raise ValueError(f"{current} is a symbolic link: a host copy never goes through one")
        current.mkdir(exist_ok=True)
    return folder.joinpath(*_parts(relative))


def _write(archive: tarfile.TarFile, members: Mapping[str, tarfile.TarInfo], plan: CopyPlan, target: Path) -> None:
    """Writes what ``plan`` keeps at ``target`` (which must not exist): files and folders made
    afresh (``O_EXCL``, ``O_NOFOLLOW``), never through a link."""
    folders: List[Tuple[Path, tarfile.TarInfo]] = []
    for relative in plan.keep:
        member = members[relative]
        path = target.joinpath(*relative.split("/")) if relative else target
        if member.isdir():
            path.mkdir(mode=0o700)
            folders.append((path, member))
        elif member.issym():
            os.symlink(member.linkname, path)
        else:
            extracted = archive.extractfile(member)
            if extracted is None:
                raise SandboxError(f"the archive from the sandbox has no contents for {member.name!r}")
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
            with extracted, open(os.open(path, flags, 0o600), "wb") as handle:
                shutil.copyfileobj(extracted, handle, 1 << 20)
            os.chmod(path, (member.mode & 0o777) | 0o600)
            os.utime(path, (member.mtime, member.mtime))
    for relative in plan.placeholders:
        placeholder = target.joinpath(*relative.split("/"))
        os.close(os.open(placeholder, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
        # Any verifier's user may read it, and write over it (a venv made again over one: red team 86).
        os.chmod(placeholder, PLACEHOLDER_MODE)
    for path, member in reversed(folders):  # innermost first: writing inside a folder changes its time
        os.chmod(path, (member.mode & 0o777) | 0o700)
        os.utime(path, (member.mtime, member.mtime))


def _validate(artifacts: Sequence[Artifact]) -> None:
    for artifact in artifacts:
        if artifact.service != "main":
            raise ValueError(
                f"the artifact {artifact.source} is on the Compose service {artifact.service!r}; "
                "only 'main' can be collected (refuse the task first)"
            )
        refusal = artifact_source_refusal(artifact.source) or artifact_destination_refusal(artifact.destination)
        if refusal is not None:
            raise ValueError(f"the artifact {artifact.source!r} -> {artifact.destination!r}: {refusal}")


class _Collection:
    """The running tally of one ``collect_artifacts`` call."""

    def __init__(self, folder: Path, limit_bytes: int, limit_files: int) -> None:
        self.folder = folder
        self.bytes_left, self.files_left = limit_bytes, limit_files
        self.collected: List[CollectedArtifact] = []
        self.missing: List[str] = []
        self.skipped: List[Skipped] = []
        self.more_skipped = 0
        self.excluded = 0
        self.cut: List[str] = []

    def skip(self, path: str, reason: str) -> None:
        if len(self.skipped) < MAX_REPORTED:
            self.skipped.append(Skipped(path, reason))
        else:
            self.more_skipped += 1

    def skip_whole(self, artifact: Artifact, reason: str) -> None:
        """Leaves ``artifact`` out for what the sandbox held there (``CollectedArtifacts.cut``)."""
        self.skip(artifact.source, reason)
        self.cut.append(artifact.source)

    def take(self, artifact: Artifact, data: IO[bytes], cut: bool = False) -> None:
        """Copies the archive ``data`` of ``artifact`` to its host copy, as ``plan_copy`` says;
        ``cut``: the archive holds only part of the artifact (its copy stalled)."""
        try:
            with open_tar(data) as archive:
                entries, members = _entries(archive, artifact.source)
                if not entries:
                    self.skip_whole(artifact, "not a file, folder or symbolic link (a socket, which no archive holds)")
                    return
                exclude = artifact.exclude if entries[0].kind == FOLDER else ()
                plan = plan_copy(entries, exclude, bytes_left=self.bytes_left, files_left=self.files_left)
                for relative, reason in plan.skipped:
                    self.skip(posixpath.join(artifact.source, relative) if relative else artifact.source, reason)
                self.excluded += plan.excluded
                if not plan.keep and not plan.placeholders:
                    return
                target = _make_folders(self.folder, artifact.destination)
                _remove(target)
                _write(archive, members, plan, target)
        except UnsafeTar as error:  # names of the agent's, read by the engine's own tar writer
            self.skip_whole(artifact, str(error))
            return
        except _DAMAGED as error:
            raise SandboxError(f"the archive of {artifact.source} from the sandbox is damaged: {error}") from error
        self.bytes_left -= plan.bytes
        self.files_left -= plan.files
        kind = FOLDER if entries[0].kind == FOLDER else FILE
        self.collected.append(
            CollectedArtifact(artifact, target, kind, plan.files, plan.bytes, cut or plan.limited > 0)
        )

    def result(self) -> CollectedArtifacts:
        return CollectedArtifacts(
            self.folder,
            tuple(self.collected),
            tuple(self.missing),
            tuple(self.skipped),
            self.more_skipped,
            self.excluded,
            tuple(self.cut),
        )


async def collect_artifacts(
    sandbox: Sandbox,
    artifacts: Sequence[Artifact],
    folder: Path,
    *,
    limit_bytes: int = MAX_ARTIFACT_BYTES,
    limit_files: int = MAX_ARTIFACT_FILES,
    frozen: bool = False,
) -> CollectedArtifacts:
    """Copies ``/logs/artifacts`` and ``artifacts`` (``collection_set``) out of ``sandbox`` into
    ``folder/<destination>`` (an existing copy there is replaced), within ``limit_bytes`` and
    ``limit_files`` for all of them together.

    A missing source is reported in ``missing``; what is left out, and why, in ``skipped``. A fault
    of the sandbox raises ``SandboxError`` (mask the sample); an artifact that cannot be collected
    at all (a sidecar's, a bad path) raises ``ValueError``. ``frozen`` says the agent's processes
    are paused, not gone, meanwhile: an archive call that stalls (``CopyStalled``) then waits on one
    of them (the engine's open of a file it holds a lease on waits for it), the agent's doing, so
    the artifact keeps what came whole before the stall and is reported cut short.
    """
    if limit_bytes < 0 or limit_files < 0:
        raise ValueError("the limits of a collection are numbers >= 0")
    entries = collection_set(artifacts)
    _validate(entries)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tally = _Collection(folder, limit_bytes, limit_files)
    wanted: List[Artifact] = []
    for artifact in entries:
        refusal = claim_refusal(wanted, artifact)
        if refusal is None:
            wanted.append(artifact)
        elif not refusal.startswith("already copied"):
            tally.skip(artifact.source, refusal)
    limit = transfer_limit(limit_bytes, limit_files)
    if isinstance(sandbox, ArchiveSandbox):
        await _collect_by_archive(sandbox, wanted, limit, tally, frozen)
    else:
        await _collect_by_tar(sandbox, wanted, limit, tally)
    return tally.result()


async def _off_the_loop(function: Callable[..., None], *args: Any) -> None:
    """Runs ``function`` in a worker thread: reading an archive of the agent's and writing its copy
    can take seconds (hundreds of thousands of entries fit under the transfer limit), and a server's
    event loop serves every other rollout meanwhile."""
    await in_thread(function, *args)


def _report_missing(tally: _Collection, artifact: Artifact) -> None:
    if artifact != CONVENTION:
        tally.missing.append(artifact.source)


# Why an artifact whose parent folders hold a link is left out (``_linked_parent_test``).
LINKED_PARENT = "a folder above it is a symbolic link: never followed"


async def _collect_by_archive(
    sandbox: Any, wanted: Sequence[Artifact], limit: int, tally: _Collection, frozen: bool
) -> None:
    look = getattr(sandbox, "parent_links", None)
    for artifact in wanted:
        # The sandbox resolves the path as root (the engine in the container, the local sandbox on its
        # host): a link among its parents is never followed (_linked_parent_test).
        try:
            links = await look(artifact.source) if look is not None else []
        except Exception as error:  # any fault of the sandbox
            raise _fault(f"looking at the folders above {artifact.source}", error) from error
        if links:
            tally.skip_whole(artifact, LINKED_PARENT)
            continue
        try:
            data = await sandbox.get_archive(artifact.source, limit=limit)
        except CopyStalled as stall:
            if not frozen:  # nothing of the agent's runs (or it runs freely): the sandbox failed
                raise
            reason = f"{stall} (a paused process of the agent's holds a lease on a file in it?)"
            whole = complete_members(stall.partial)
            if whole:
                tally.skip(artifact.source, reason)
                await _off_the_loop(tally.take, artifact, io.BytesIO(whole), True)
            else:
                tally.skip_whole(artifact, reason)
            continue
        except Exception as error:  # any fault of the sandbox or its provider, or no such path
            if str(error).endswith(f" is larger than {limit} bytes"):
                tally.skip_whole(artifact, f"its archive is larger than {limit} bytes (exclusions apply after it)")
            elif source_missing(error):
                _report_missing(tally, artifact)
            elif isinstance(error, LinkEscape):
                tally.skip_whole(artifact, "a link among its parent folders leads out of the sandbox: never followed")
            else:
                raise _fault(f"copying {artifact.source} out of the sandbox", error) from error
            continue
        await _off_the_loop(tally.take, artifact, io.BytesIO(data))


async def _collect_by_tar(sandbox: Sandbox, wanted: Sequence[Artifact], limit: int, tally: _Collection) -> None:
    if not wanted:
        return
    output = await _exec(
        sandbox, collect_script([item.source for item in wanted], sandbox.tmp_dir, limit), "archiving the artifacts"
    )
    statuses: Dict[int, List[str]] = {}
    for line in output.splitlines():
        fields = line.split(" ", 2)
        if len(fields) >= 2 and fields[0].isdigit():
            statuses[int(fields[0])] = fields[1:]
    made = [fields[1] for fields in statuses.values() if fields[0] == "ok" and len(fields) == 2]
    try:
        with tempfile.TemporaryDirectory(prefix="nemo-gym-artifact-") as scratch:
            for index, artifact in enumerate(wanted):
                status = statuses.get(index)
                if status is None:
                    raise SandboxError(f"archiving {artifact.source} in the sandbox said nothing about it")
                if status[0] == "missing":
                    _report_missing(tally, artifact)
                elif status[0] == "large":
                    tally.skip_whole(artifact, f"its archive is larger than {limit} bytes (exclusions apply after it)")
                elif status[0] == "linked":
                    tally.skip_whole(artifact, LINKED_PARENT)
                elif status[0] == "ok" and len(status) == 2:
                    local = Path(scratch) / f"{index}.tar"
                    try:
                        await sandbox.download_file(status[1], str(local))
                    except Exception as error:  # any fault of the sandbox or its provider
                        raise _fault(f"copying {artifact.source} out of the sandbox", error) from error
                    with open(local, "rb") as data:
                        await _off_the_loop(tally.take, artifact, data)
                    local.unlink()
                else:
                    raise SandboxError(f"archiving {artifact.source} in the sandbox failed ({' '.join(status)})")
    finally:
        if made:
            try:
                await _exec(sandbox, "rm -f -- " + " ".join(shlex.quote(path) for path in made), "cleaning up")
            except SandboxError:
                pass  # the agent's sandbox is stopped next; a leftover archive harms nothing


# --- delivering ----------------------------------------------------------------------------------


def _pack(path: Path, name: str, handle: IO[bytes], *, links: bool = True) -> List[Tuple[str, str]]:
    """Writes a tar of the host copy at ``path`` (a file or folder) to ``handle``, its top member
    ``name``: files, folders and the links ``vetted_links`` keeps, owned by root, without set-id or
    sticky bits; nothing is followed. Without ``links`` the links are left out of the tar and
    returned instead, as (path relative to the copy, target) in the order to make them."""
    listing: List[Tuple[str, str]] = [("", str(path))]
    if stat.S_ISDIR(os.lstat(path).st_mode):
        for current, dirs, names in os.walk(path):
            dirs.sort()
            for entry in sorted(dirs + names):
                full = os.path.join(current, entry)
                listing.append((os.path.relpath(full, path).replace(os.sep, "/"), full))
    kinds = {relative: os.lstat(full).st_mode for relative, full in listing}
    folders = {relative for relative, mode in kinds.items() if stat.S_ISDIR(mode)}
    files = {relative for relative, mode in kinds.items() if stat.S_ISREG(mode)}
    if "" not in folders and "" not in files:
        raise ValueError(f"the copy at {path} is neither a file nor a folder")
    found = {relative: os.readlink(full) for relative, full in listing if relative and stat.S_ISLNK(kinds[relative])}
    kept = vetted_links(found, folders, files)
    left: List[Tuple[str, str]] = []
    with tarfile.open(fileobj=handle, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for relative, full in listing:
            mode = kinds[relative]
            if relative in kept and not links:
                left.append((relative, kept[relative]))
                continue
            if not (relative in folders or relative in files or relative in kept):
                continue
            info = archive.gettarinfo(full, arcname=f"{name}/{relative}" if relative else name)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mode &= 0o777
            if stat.S_ISREG(mode):
                with open(os.open(full, os.O_RDONLY | os.O_NOFOLLOW), "rb") as contents:
                    archive.addfile(info, contents)
            else:
                archive.addfile(info)
    return left


def _batches(lines: Sequence[str], limit: int = SCRIPT_BYTES) -> List[str]:
    """``lines`` joined into scripts of at most about ``limit`` bytes each, in order."""
    batches: List[List[str]] = [[]]
    size = 0
    for line in lines:
        if batches[-1] and size + len(line) + 1 > limit:
            batches.append([])
            size = 0
        batches[-1].append(line)
        size += len(line) + 1
    return ["\n".join(batch) for batch in batches if batch]


def _places(sandbox: Sandbox, collected: CollectedArtifacts) -> List[CollectedArtifact]:
    """The artifacts to deliver, parents first, each checked: its place is none of the verifier's
    folders (the protocol's and this sandbox's), its copy lies in the collection's folder."""
    if sandbox.tests_dir != "/tests" or sandbox.logs_dir != "/logs/verifier":
        raise SandboxError(
            "this sandbox maps /tests and /logs/verifier to folders of its own (no private namespace), "
            "so it has no paths of its own to deliver artifacts to"
        )
    protected = (*PROTECTED_PATHS, sandbox.tests_dir, sandbox.logs_dir)
    items = delivery_order(collected.artifacts)
    root = os.path.abspath(collected.folder)
    for item in items:
        refusal = delivery_refusal(item.artifact.source, protected)
        if refusal is not None:
            raise ValueError(f"an artifact may not land there: {item.artifact.source!r} {refusal}")
        if item.kind not in (FILE, FOLDER) or os.path.commonpath([root, os.path.abspath(item.path)]) != root:
            raise ValueError(f"the copy of {item.artifact.source} is not a {FILE} or {FOLDER} in {root}")
    return items


def hand_over_script(places: Sequence[str], owner: User, verifier_user: Optional[User] = None) -> str:
    """The shell lines that give ``places`` (and all in them, links not followed) to ``owner``, a user
    or uid, or to the uid below it where that is ``verifier_user``'s own uid as the sandbox's image
    resolves it (by name or number, its group dropped): the runner trusts a file of its own user's as
    its own, whatever that user is called there (red team 73)."""

    def uid(user: User) -> str:
        name = shlex.quote(str(user).partition(":")[0])
        return f"$(id -u -- {name} 2>/dev/null || echo {name})"

    lines = [f"owner={uid(owner)}"]
    if verifier_user is not None:  # as numbers (065534 is 65534); a name id cannot resolve runs nothing
        lines += [
            f"verifier={uid(verifier_user)}",
            'case "$verifier:$owner" in',
            "  :*|*::*|*[!0-9:]*) ;;",
            "  *) [ $((10#$verifier)) != $((10#$owner)) ] || owner=$((10#$owner - 1)) ;;",
            "esac",
        ]
    quoted = " ".join(shlex.quote(place) for place in places)
    lines.append(f"chown -hR -- \"$owner\" {quoted} || fail 'cannot hand the artifacts to the owner'")
    return "\n".join(lines)


async def deliver_artifacts(
    sandbox: Sandbox,
    collected: CollectedArtifacts,
    *,
    owner: Optional[User] = None,
    verifier_user: Optional[User] = None,
) -> None:
    """Puts each collected artifact at its own source path in ``sandbox`` (the separate verifier's),
    parents first, making the folders above it; ``owner`` (a user or uid) gets what was delivered,
    never as ``verifier_user``'s own uid (``hand_over_script``), else it belongs to the sandbox's
    admin (as it does where the admin is not root, which cannot give files away). Never under
    ``/tests`` or ``/logs/verifier`` (``ValueError``). A fault of the sandbox raises
    ``SandboxError``."""
    items = _places(sandbox, collected)
    if not items:
        return
    chown = ""
    root_admin = str(sandbox.admin_user).partition(":")[0] in ("root", "0")  # root:root is root too
    if owner is not None and root_admin and not sandbox_option(sandbox, "single_user", False):
        chown = hand_over_script([item.artifact.source for item in items], owner, verifier_user)
    if isinstance(sandbox, ArchiveSandbox):
        # Links go in by ``ln -s`` after the archives: the local sandbox's archive call takes files
        # and folders only (it writes on the host, where a link could lead a later write out). A
        # link's place may hold a folder by then, made for an artifact inside another through the
        # agent's link (sub -> d, and sub/x.txt): the link replaces it, as the agent had them.
        await _exec(sandbox, delivery_script(items), "readying the artifacts' places")
        made: List[str] = []
        for item in items:
            buffer = io.BytesIO()
            links = _pack(item.path, posixpath.basename(item.artifact.source), buffer, links=False)
            try:
                await sandbox.put_archive(posixpath.dirname(item.artifact.source), buffer.getvalue())
            except Exception as error:  # any fault of the sandbox or its provider
                raise _fault(f"delivering {item.artifact.source}", error) from error
            for relative, target in links:
                place = shlex.quote(posixpath.join(item.artifact.source, relative))
                why = shlex.quote(f"cannot link {item.artifact.source}/{relative}")
                made.append(f"rm -rf -- {place} && ln -s -- {shlex.quote(target)} {place} || fail {why}")
        for script in _batches([*made, chown] if chown else made):
            await _exec(sandbox, f"{FAIL}\n{script}", "linking and handing over the artifacts")
        return
    run = uuid.uuid4().hex[:12]
    staged = [posixpath.join(sandbox.tmp_dir, f"nemo-gym-artifact-{run}-{index}.tar") for index in range(len(items))]
    with tempfile.TemporaryDirectory(prefix="nemo-gym-artifact-") as scratch:
        for index, item in enumerate(items):
            local = os.path.join(scratch, f"{index}.tar")
            with open(local, "wb") as handle:
                _pack(item.path, posixpath.basename(item.artifact.source), handle)
            try:
                await sandbox.upload_file(local, staged[index])
            except Exception as error:  # any fault of the sandbox or its provider
                raise _fault(f"delivering {item.artifact.source}", error) from error
    # Each staged archive is opened, then unlinked, before any place is emptied: an artifact at
    # the temporary folder itself cannot remove what is still to be unpacked.
    opened = " ".join(f"{10 + index}<{shlex.quote(path)}" for index, path in enumerate(staged))
    unpack = [
        f"tar -x -f - --no-same-owner -C {shlex.quote(posixpath.dirname(item.artifact.source))} <&{10 + index} "
        f"|| fail {shlex.quote('cannot unpack ' + item.artifact.source)}"
        for index, item in enumerate(items)
    ]
    script = "\n".join(
        [
            f"exec {opened} || exit 1",
            "rm -f -- " + " ".join(shlex.quote(path) for path in staged),
            delivery_script(items),
            *unpack,
            chown,
        ]
    )
    await _exec(sandbox, script, "delivering the artifacts")


__all__ = [
    "CONVENTION",
    "MAX_ARTIFACT_BYTES",
    "MAX_ARTIFACT_DEPTH",
    "MAX_ARTIFACT_FILES",
    "MAX_ARTIFACT_PATH",
    "MAX_LINK_WORK",
    "Artifact",
    "CollectedArtifact",
    "CollectedArtifacts",
    "CopyPlan",
    "Entry",
    "LandingRefused",
    "Skipped",
    "claim_refusal",
    "collect_artifacts",
    "collect_script",
    "collection_set",
    "covers",
    "deliver_artifacts",
    "delivery_order",
    "delivery_refusal",
    "delivery_script",
    "hand_over_script",
    "is_excluded",
    "plan_copy",
    "resolve_link",
    "source_missing",
    "transfer_limit",
    "vetted_links",
]
