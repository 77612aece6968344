"""The images a task builds, named by their content, and the record of each one built here.

Harbor builds the agent's image from ``environment/Dockerfile`` when the task names no
``[environment].docker_image``, and a separate verifier's from ``tests/`` when its environment
declares or inherits no image (``verifier_env.verifier_build_context``). This module plans those
builds (``plan_builds``, pure), carries them out on a Docker engine (``ImageBuilder``), and reads
back what it built (``image_record``).

**Names.** ``content_tag`` names an image by a content hash of its build context: ``hb__<hash>``
for the agent's image, ``hb__<hash>-verifier`` for the verifier's. An unchanged folder gives the
same name, so it is never rebuilt. The hash (``content_digest``, SHA-256, the first 32 hex digits
in the name) covers every entry of the folder, in a fixed order: its kind (file, folder, symlink,
other), its path relative to the folder (raw bytes), its mode bits (``0o7777``: permissions, set-id,
sticky), and a file's size and bytes or a symlink's target (never followed). Nothing is ignored:
``.dockerignore`` d files, ``.git`` and ``__pycache__`` count too, so the hash changes whenever
anything Docker could send changes (a change to an ignored file rebuilds needlessly, never keeps a
stale image). Owners and timestamps do not count: Docker sends files as root, and a fresh checkout
must name the same image. Not covered: the ``FROM`` images themselves (a base image replaced under
the same name does not rebuild; remove the built image to force it).

Harbor 0.26 names its build ``hb__<environment_content_hash>`` (``environments/docker/docker.py``,
``environments/definition.py``), for the agent's image and a separate verifier's alike. Ours differ:
Harbor hashes regular files only (path, size, bytes: no modes, no symlinks, no empty folders) and
skips ``.DS_Store``, ``.git`` and ``__pycache__``; a verifier's name here ends in ``-verifier`` (the
seed's name, so an agent and a verifier image built from equal folders stay apart); the hash
functions differ, so the two never name the same image.

**The record.** Every image built here carries labels (``nemo-gym.built=1``, the content hash, the
kind and the name it was built as). ``image_record`` gives the configuration of such an image
(ENTRYPOINT, CMD, HEALTHCHECK, USER, WORKDIR, ENV): what the seed calls "the image's configuration
on record". Any other image, a prebuilt ``docker_image`` included, has no record (``None``), unless
a pull-mode ``environment/Dockerfile`` sits beside it (``pull_mode_base``: nothing but ``FROM`` that
image), as the seed says: ``pulled_record`` then reads the image's own configuration.

**Builds** never pull: ``pull=False``, and every ``FROM`` (and ``COPY --from``) image the
Dockerfile names must already be on the engine, which ``ImageBuilder`` checks first (a name built
from an ``ARG`` cannot be checked, and is left to the engine). A failure is an ``ImageBuildError``
(a ``SandboxError``: a sandbox that cannot start) whose message ends with the builder's last lines.
The Docker SDK is synchronous; ``build_many_async`` and ``image_record_async`` run it in a worker
thread.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import json
import os
import posixpath
import re
import stat
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import (
    Any,
    Callable,
    Deque,
    Dict,
    Iterable,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from nemo_gym.data.tasks.harbor._threads import in_thread
from nemo_gym.data.tasks.harbor.sandboxes.base import SandboxError
from nemo_gym.data.tasks.harbor.task import Task, TaskError, load_task, read_text_file

try:
    import docker.errors
except ImportError:  # pragma: no cover - exercised only without the optional extra
    docker = None

AGENT, VERIFIER = "agent", "verifier"
KINDS = (AGENT, VERIFIER)
PREFIX = "hb__"
HASH_LENGTH = 32  # hex digits of the digest in a name, as many as Harbor's
# The labels that make an image's configuration "on record".
BUILT_LABEL = "nemo-gym.built"
HASH_LABEL = "nemo-gym.content-hash"
KIND_LABEL = "nemo-gym.kind"
IMAGE_LABEL = "nemo-gym.image"
ERROR_LINES = 20  # the builder's lines an ImageBuildError ends with
DOCKERFILE = "Dockerfile"
_HASH_VERSION = b"nemo-gym build context 1\0"
_CHUNK = 1 << 20

Progress = Callable[["BuildPlan", str], None]


class ImageBuildError(SandboxError):
    """An image could not be built: a bad Dockerfile, a failing step, a missing ``FROM`` image, an
    unreadable context. A ``SandboxError`` (the sandbox it was for cannot start); the task's own
    fault in practice, so prepare should fail the task loudly rather than mask samples one by one.
    ``lines`` are the builder's last lines (also at the end of the message)."""

    def __init__(self, message: str, lines: Sequence[str] = ()) -> None:
        self.lines = list(lines)
        super().__init__("\n".join([message, *self.lines]) if self.lines else message)


# --- names -----------------------------------------------------------------------------------------


def _field(hasher: Any, data: bytes) -> None:
    hasher.update(struct.pack(">Q", len(data)))
    hasher.update(data)


def _entries(folder: Path, relative: bytes = b"") -> Iterator[Tuple[bytes, Path, os.stat_result]]:
    """Every entry under ``folder``, depth first, names sorted by their bytes; links not followed."""
    names = sorted(os.listdir(os.fsencode(folder)))
    for name in names:
        path = folder / os.fsdecode(name)
        info = os.lstat(path)
        rel = relative + b"/" + name if relative else name
        yield rel, path, info
        if stat.S_ISDIR(info.st_mode):
            yield from _entries(path, rel)


def content_digest(context: Union[str, Path]) -> str:
    """The SHA-256 (hex) of a build context folder, as the module's docstring says."""
    folder = Path(context)
    if not folder.is_dir():
        raise ImageBuildError(f"the build context {folder} is not a folder")
    hasher = hashlib.sha256(_HASH_VERSION)
    try:
        for rel, path, info in _entries(folder):
            mode = info.st_mode
            if stat.S_ISREG(mode):
                kind = b"f"
            elif stat.S_ISDIR(mode):
                kind = b"d"
            elif stat.S_ISLNK(mode):
                kind = b"l"
            else:
                kind = b"o"  # a FIFO, socket or device: never opened
            _field(hasher, kind)
            _field(hasher, rel)
            _field(hasher, b"%o" % stat.S_IMODE(mode))
            if kind == b"l":
                _field(hasher, os.fsencode(os.readlink(path)))
            elif kind == b"f":
                with open(path, "rb") as handle:
                    hasher.update(struct.pack(">Q", info.st_size))
                    size = 0
                    for chunk in iter(lambda: handle.read(_CHUNK), b""):
                        size += len(chunk)
                        hasher.update(chunk)
                if size != info.st_size:
                    raise ImageBuildError(f"{path} changed while it was read")
    except OSError as error:
        raise ImageBuildError(f"cannot read the build context {folder}: {error}") from error
    return hasher.hexdigest()


def _tag(digest: str, kind: str) -> str:
    name = PREFIX + digest[:HASH_LENGTH]
    return name + "-verifier" if kind == VERIFIER else name


def content_tag(context: Union[str, Path], kind: str) -> str:
    """``hb__<hash>`` for the agent's image (``kind="agent"``, built from ``environment/``),
    ``hb__<hash>-verifier`` for a verifier's (``kind="verifier"``, built from ``tests/``)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    return _tag(content_digest(context), kind)


# --- plans -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BuildPlan:
    """One image to build: its context folder (with a ``Dockerfile``), its name and its kind.

    ``task`` is the task it was planned for (``plan_builds`` sets it): ``ImageBuilder`` then refuses
    a verifier image whose task the loader would refuse, before any build.
    """

    context: Path
    tag: str
    kind: str
    task: Optional[Task] = field(default=None, compare=False, repr=False)


def plan_builds(task: Union[str, Path, Task]) -> List[BuildPlan]:
    """The images ``task`` builds, the agent's first: the agent's when it has
    ``environment/Dockerfile`` and no ``[environment].docker_image``; the verifier's when
    ``verifier_env.verifier_build_context`` gives a folder (separate mode, ``tests/Dockerfile``, no
    declared or inherited image). ``[]`` when it builds nothing. Reads the folders, builds nothing."""
    from nemo_gym.data.tasks.harbor.verifier_env import verifier_build_context  # it imports task.py

    loaded = task if isinstance(task, Task) else load_task(task)
    plans = []
    environment = loaded.path / "environment"
    if not loaded.environment.docker_image and (environment / DOCKERFILE).is_file():
        plans.append(BuildPlan(environment, content_tag(environment, AGENT), AGENT, loaded))
    tests = verifier_build_context(loaded)
    if tests is not None:
        plans.append(BuildPlan(tests, content_tag(tests, VERIFIER), VERIFIER, loaded))
    return plans


# --- records ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImageRecord:
    """The configuration of an image built here (``image_record``).

    ``entrypoint`` and ``cmd`` are ``None`` when unset (``ENTRYPOINT []`` reads as unset, as the
    engine stores it); ``healthcheck`` is the image's ``Healthcheck`` as the engine gives it
    (``Test``, ``Interval``, ``Timeout``, ``StartPeriod``, ``Retries``; durations in nanoseconds), or
    ``None`` for none or ``HEALTHCHECK NONE``; ``user`` and ``workdir`` are ``""`` when unset.
    """

    tag: str
    entrypoint: Optional[List[str]]
    cmd: Optional[List[str]]
    healthcheck: Optional[Dict[str, Any]]
    user: str
    workdir: str
    env: Dict[str, str]
    image_id: str = ""
    kind: str = ""
    content_hash: str = ""


def _full_name(tag: str) -> str:
    """``name`` -> ``name:latest``, as the engine reads a name without a tag or digest."""
    last = tag.rsplit("/", 1)[-1]
    return tag if ":" in last or "@" in tag else tag + ":latest"


def same_image(first: str, second: str) -> bool:
    """Whether two references name one image as the engine reads them: ``ubuntu``,
    ``ubuntu:latest``, ``library/ubuntu`` and ``docker.io/library/ubuntu:latest`` are one."""

    def canonical(name: str) -> str:
        for registry in ("docker.io/", "index.docker.io/", "registry-1.docker.io/"):
            if name.startswith(registry):
                name = name[len(registry) :]
                break
        return _full_name(name[len("library/") :] if name.startswith("library/") else name)

    return canonical(first) == canonical(second)


def _record(tag: str, attrs: Mapping[str, Any], *, ours: bool = True) -> Optional[ImageRecord]:
    """The record of the image ``attrs`` describes; with ``ours``, only when it was built here as ``tag``."""
    config = attrs.get("Config") or {}
    labels = config.get("Labels") or {}
    # Labels are inherited: an image built elsewhere FROM one of ours carries our labels, but not
    # under the name they record, so the name must match too.
    built_here = labels.get(BUILT_LABEL) == "1" and _full_name(str(labels.get(IMAGE_LABEL) or "")) == _full_name(tag)
    if ours and not built_here:
        return None
    healthcheck = config.get("Healthcheck") or None
    if healthcheck is not None and (healthcheck.get("Test") or ["NONE"])[0] == "NONE":
        healthcheck = None
    return ImageRecord(
        tag=tag,
        entrypoint=list(config["Entrypoint"]) if config.get("Entrypoint") else None,
        cmd=list(config["Cmd"]) if config.get("Cmd") else None,
        healthcheck=dict(healthcheck) if healthcheck else None,
        user=config.get("User") or "",
        workdir=config.get("WorkingDir") or "",
        env=dict(entry.split("=", 1) for entry in config.get("Env") or [] if "=" in entry),
        image_id=str(attrs.get("Id") or ""),
        kind=str(labels.get(KIND_LABEL) or "") if built_here else "",
        content_hash=str(labels.get(HASH_LABEL) or "") if built_here else "",
    )


def _inspect(client: Any, tag: str) -> Optional[Mapping[str, Any]]:
    try:
        return client.api.inspect_image(tag)  # type: ignore[no-any-return]
    except Exception as error:
        if docker is not None and isinstance(error, docker.errors.ImageNotFound):
            return None
        raise SandboxError(f"cannot inspect the image {tag}: {error}") from error


def image_exists(client: Any, tag: str) -> bool:
    """Whether the engine holds the image ``tag`` (``SandboxError`` when it cannot say)."""
    return _inspect(client, tag) is not None


def image_record(client: Any, tag: str) -> Optional[ImageRecord]:
    """The record of the image ``tag`` when it was built here (it carries this module's labels,
    naming ``tag``); ``None`` for any other image, or none of that name."""
    attrs = _inspect(client, tag)
    return None if attrs is None else _record(tag, attrs)


def pull_mode_base(dockerfile: str) -> Optional[str]:
    """The image a pull-mode Dockerfile pulls: one whose only instruction is ``FROM image`` (with
    ``--platform`` or ``AS name`` at most, and no ``ARG`` in the name); ``None`` for any other."""
    instructions = [line for line in _instructions(dockerfile) if line.strip()]
    found = _FROM.match(instructions[0]) if len(instructions) == 1 else None
    words = [word for word in found.group(1).split() if not word.startswith("--")] if found else []
    if len(words) == 3 and words[1].lower() == "as":
        words = words[:1]
    return words[0] if len(words) == 1 and "$" not in words[0] else None


def pulled_record(client: Any, tag: str, dockerfile: Path) -> Optional[ImageRecord]:
    """The record of the prebuilt image ``tag`` when ``dockerfile`` is a pull-mode Dockerfile of it
    (``pull_mode_base`` names ``tag``): its own configuration, as the engine has it; else ``None``,
    and for an image not on the engine (it never pulls)."""
    try:
        text = read_text_file(dockerfile)
    except (OSError, UnicodeDecodeError):
        return None
    base = pull_mode_base(text)
    if base is None or not same_image(base, tag):
        return None
    attrs = _inspect(client, tag)
    return None if attrs is None else _record(tag, attrs, ours=False)


async def image_record_async(client: Any, tag: str) -> Optional[ImageRecord]:
    """``image_record`` in a worker thread."""
    return await in_thread(image_record, client, tag)


async def pulled_record_async(client: Any, tag: str, dockerfile: Path) -> Optional[ImageRecord]:
    """``pulled_record`` in a worker thread."""
    return await in_thread(pulled_record, client, tag, dockerfile)


# --- the builder -----------------------------------------------------------------------------------

# Docker's separators are spaces and tabs: a no-break space after FROM is no instruction to it.
_FROM = re.compile(r"^[ \t]*FROM[ \t]+(.*)$", re.IGNORECASE)
_COPY_FROM = re.compile(r"^[ \t]*COPY[ \t].*?--from=(\S+)", re.IGNORECASE)


def _instructions(text: str) -> Iterator[str]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped (after a leading
    byte order mark, which Docker's parser skips)."""
    current = ""
    for line in (text[1:] if text.startswith("\ufeff") else text).splitlines():
        if not current and line.lstrip().startswith("#"):
            continue
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + " "
            continue
        yield current + line
        current = ""
    if current:
        yield current


def base_images(dockerfile: str) -> List[str]:
    """The images a Dockerfile starts from or copies from (``FROM``, ``COPY --from``), in order,
    without ``scratch``, earlier stages and names built from an ``ARG`` (``$``)."""
    stages: List[str] = []
    images: List[str] = []

    def add(name: str) -> None:
        skip = name.lower() in ("scratch", *stages) or "$" in name or name.isdigit() or name in images
        if not skip:
            images.append(name)

    for instruction in _instructions(dockerfile):
        found = _FROM.match(instruction)
        if found:
            words = [word for word in found.group(1).split() if not word.startswith("--")]
            if words:
                add(words[0])
                if len(words) >= 3 and words[1].lower() == "as":
                    stages.append(words[2].lower())
            continue
        copied = _COPY_FROM.match(instruction)
        if copied:
            add(copied.group(1).strip("\"'"))
    return images


_WORD = re.compile(r"^[ \t]*(\w+)[ \t]*(.*)$")


def copied_workdir(dockerfile: str) -> Optional[str]:
    """The final stage's ``WORKDIR`` when one of its ``COPY``/``ADD`` puts files there (a relative
    destination, or one inside it), else ``None``; a path built from a variable (``$``) is never
    guessed. What a task's ``[environment].workdir`` must match for its agent to start beside them."""
    workdir = "/"
    placed: List[str] = []  # where the stage's copies land
    for instruction in _instructions(dockerfile):
        found = _WORD.match(instruction)
        if found is None:
            continue
        word, rest = found.group(1).upper(), found.group(2).strip()
        if word == "FROM":
            workdir, placed = "/", []
        elif word == "WORKDIR" and rest:
            target = rest.strip("\"'")
            known = "$" not in target and (workdir or target.startswith("/"))  # relative to an unknown one: unknown
            workdir = posixpath.normpath(posixpath.join(workdir, target)) if known else ""
        elif word in ("COPY", "ADD") and workdir:
            words = [item for item in rest.split() if not item.startswith("--")]
            if rest.startswith("["):
                try:
                    words = [str(item) for item in json.loads(rest)]
                except ValueError:
                    continue
            if len(words) >= 2 and "$" not in words[-1]:
                placed.append(posixpath.normpath(posixpath.join(workdir, words[-1])))
    if workdir in ("", "/"):
        return None
    inside = [path for path in placed if path == workdir or path.startswith(workdir + "/")]
    return workdir if inside else None


def _lines(text: str, pending: str) -> Tuple[List[str], str]:
    """Complete lines of ``pending + text`` and what is left of an unfinished one."""
    parts = (pending + text).split("\n")
    return [line.rstrip("\r") for line in parts[:-1]], parts[-1]


class ImageBuilder:
    """Builds planned images on a Docker engine (the SDK's client): offline, labelled, reused.

    ``labels`` are added to every image it builds, beside its own (the suite adds
    ``nemo-gym-test=1``).
    """

    def __init__(self, client: Any, *, labels: Optional[Mapping[str, str]] = None) -> None:
        self.client = client
        self.labels = dict(labels or {})

    def build_many(
        self,
        plans: Iterable[BuildPlan],
        progress: Optional[Progress] = None,
        *,
        timeout_s: Optional[float] = None,
    ) -> Dict[str, ImageRecord]:
        """Builds each planned image that is not there yet, in order, and gives every plan's record
        by tag (plans of one tag, such as two tasks with equal ``environment/`` folders, build once).

        An image of the plan's tag is reused when it was built here from the same content (its
        record's content hash); any other image of that name is replaced (the tag moves to the new
        build). ``progress(plan, line)`` receives the builder's output line by line, and a line of
        this module's (``using ...``, ``building ...``) per plan. A verifier plan whose task the
        loader refuses (sidecars, runtime settings on ``main`` in ``tests/docker-compose.yaml``, ...)
        is refused with ``TaskError`` before anything is built; a missing ``FROM`` image, a failed
        step or a build past ``timeout_s`` (per image) raise ``ImageBuildError``.
        """
        from nemo_gym.data.tasks.harbor.verifier_env import load_refusal  # it imports task.py

        unique: Dict[str, BuildPlan] = {}
        for plan in plans:
            if plan.kind not in KINDS:
                raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {plan.kind!r}")
            first = unique.setdefault(plan.tag, plan)
            if first.context != plan.context and content_digest(first.context) != content_digest(plan.context):
                # Equal folders (two tasks with the same environment/) share their image; others may not.
                raise ImageBuildError(
                    f"two build plans name the image {plan.tag}: {first.context} and {plan.context}, which differ"
                )
            if plan.kind == VERIFIER and plan.task is not None:
                refusal = load_refusal(plan.task)
                if refusal is not None:
                    raise TaskError(refusal)
        records: Dict[str, ImageRecord] = {}
        for tag, plan in unique.items():
            records[tag] = self._build(plan, progress, timeout_s)
        return records

    async def build_many_async(
        self,
        plans: Iterable[BuildPlan],
        progress: Optional[Progress] = None,
        *,
        timeout_s: Optional[float] = None,
    ) -> Dict[str, ImageRecord]:
        """``build_many`` in a worker thread; ``progress`` is called on the event loop's thread, in
        order, and every call has run when this returns."""
        loop = asyncio.get_running_loop()
        relay: Optional[Progress] = None
        if progress is not None:
            callback = progress

            def relay(plan: BuildPlan, line: str) -> None:
                loop.call_soon_threadsafe(callback, plan, line)

        plans = list(plans)
        return await in_thread(self.build_many, plans, relay, timeout_s=timeout_s)

    def _say(self, progress: Optional[Progress], plan: BuildPlan, line: str) -> None:
        if progress is not None:
            progress(plan, line)

    def _build(self, plan: BuildPlan, progress: Optional[Progress], timeout_s: Optional[float]) -> ImageRecord:
        what = f"the {plan.kind} image {plan.tag} from {plan.context}"
        digest = content_digest(plan.context)
        existing = image_record(self.client, plan.tag)
        if existing is not None and existing.content_hash == digest:
            self._say(progress, plan, f"using {plan.tag} (built from {plan.context}, unchanged)")
            return existing
        dockerfile = plan.context / DOCKERFILE
        try:
            text = read_text_file(dockerfile, errors="replace")
        except OSError as error:
            raise ImageBuildError(f"cannot build {what}: cannot read {dockerfile}: {error}") from error
        for base in base_images(text):
            try:
                self.client.api.inspect_image(base)
            except Exception as error:
                if docker is not None and isinstance(error, docker.errors.ImageNotFound):
                    raise ImageBuildError(
                        f"cannot build {what}: its Dockerfile starts from {base}, which is not on this Docker "
                        "engine, and builds never pull (build or load it first)"
                    ) from None
                raise ImageBuildError(f"cannot build {what}: cannot inspect {base}: {error}") from error
        self._say(progress, plan, f"building {what}")
        labels = {**self.labels, BUILT_LABEL: "1", HASH_LABEL: digest, KIND_LABEL: plan.kind, IMAGE_LABEL: plan.tag}
        tail: Deque[str] = collections.deque(maxlen=ERROR_LINES)
        failure: Optional[str] = None
        pending = ""
        started = time.monotonic()
        stream = None
        try:
            stream = self.client.api.build(
                path=str(plan.context),
                tag=plan.tag,
                labels=labels,
                pull=False,
                rm=True,
                forcerm=True,
                decode=True,
                timeout=timeout_s,
            )
            for chunk in stream:
                if not isinstance(chunk, dict):
                    continue
                text_part = chunk.get("stream")
                if text_part is None and chunk.get("status"):
                    parts = (str(chunk[key]) for key in ("id", "status", "progress") if chunk.get(key))
                    text_part = " ".join(parts) + "\n"
                if isinstance(text_part, str):
                    lines, pending = _lines(text_part, pending)
                    for line in lines:
                        if line.strip():
                            tail.append(line)
                            self._say(progress, plan, line)
                if chunk.get("error") or chunk.get("errorDetail"):
                    detail = chunk.get("errorDetail") or {}
                    failure = str(chunk.get("error") or detail.get("message") or "the builder failed")
                if timeout_s is not None and time.monotonic() - started > timeout_s:
                    failure = f"the build took longer than {timeout_s:g} s"
                    break
        except Exception as error:  # the SDK's errors, requests' ones (a read past timeout_s)
            failure = failure or f"{type(error).__name__}: {error}"
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                try:
                    close()  # stops the engine's build when it still runs
                except Exception:
                    pass
        if pending.strip():
            tail.append(pending)
            self._say(progress, plan, pending)
        if failure is not None:
            raise ImageBuildError(f"building {what} failed: {failure.strip()}{_last(tail)}", list(tail))
        record = image_record(self.client, plan.tag)
        if record is None:
            raise ImageBuildError(f"building {what} gave no image of that name{_last(tail)}", list(tail))
        return record


def _last(tail: Sequence[str]) -> str:
    return "; the builder's last lines:" if tail else ""


__all__ = [
    "AGENT",
    "BUILT_LABEL",
    "DOCKERFILE",
    "ERROR_LINES",
    "HASH_LABEL",
    "HASH_LENGTH",
    "IMAGE_LABEL",
    "KINDS",
    "KIND_LABEL",
    "PREFIX",
    "VERIFIER",
    "BuildPlan",
    "ImageBuildError",
    "ImageBuilder",
    "ImageRecord",
    "Progress",
    "base_images",
    "content_digest",
    "content_tag",
    "image_exists",
    "image_record",
    "image_record_async",
    "plan_builds",
    "pull_mode_base",
    "pulled_record",
    "pulled_record_async",
    "same_image",
]
