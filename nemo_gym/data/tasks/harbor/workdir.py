"""Where a task's working directory is: the folder the agent works in and ``test.sh`` runs from.

Real Harbor tasks read and write absolute paths such as ``/app/answer.txt``: the ``WORKDIR`` their
``environment/Dockerfile`` sets. Both sandboxes put the workspace there, and publishing for Harbor
makes the published environment have it.
"""

from __future__ import annotations

import os
import posixpath
import re
from pathlib import Path
from typing import TYPE_CHECKING, List, Mapping, Optional

from nemo_gym.data.tasks.harbor.task import PROTECTED_PATHS, normal_path, path_within, protected_clash, read_text_file

if TYPE_CHECKING:
    from nemo_gym.data.tasks.harbor.task import Task

# Where the workspace sits when neither task.toml, nor environment/Dockerfile, nor the image names
# a working directory: Gym's examples' choice, and the one publishing writes into the Dockerfile.
DEFAULT_WORKDIR = "/workspace"

_INSTRUCTION = re.compile(r"^\s*(FROM|WORKDIR)\s+(.*?)\s*$", re.IGNORECASE)


def _logical_lines(text: str) -> List[str]:
    """The Dockerfile's instructions, with continuation lines joined and comments dropped."""
    lines: List[str] = []
    current = ""
    for raw in text.splitlines():
        if raw.lstrip().startswith("#"):
            continue
        if raw.rstrip().endswith("\\"):
            current += raw.rstrip()[:-1] + " "
            continue
        lines.append(current + raw)
        current = ""
    if current:
        lines.append(current)
    return lines


def dockerfile_workdir(text: str) -> Optional[str]:
    """The ``WORKDIR`` the final stage of a Dockerfile ends in, or ``None`` when it sets none or one
    that names a variable (only the build knows it). A relative ``WORKDIR`` joins the one before."""
    workdir: Optional[str] = None
    for line in _logical_lines(text):
        match = _INSTRUCTION.match(line)
        if match is None:
            continue
        if match.group(1).upper() == "FROM":
            workdir = None  # a new stage starts from its base image's working directory
            continue
        value = match.group(2).strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        if not value or "$" in value:
            return None
        workdir = posixpath.normpath(posixpath.join(workdir or "/", value))
    return workdir


def declared_workdir(task: Task) -> Optional[str]:
    """The working directory the task names: ``[environment].workdir``, else the ``WORKDIR`` of its
    ``environment/Dockerfile``; ``None`` when it names none (the image's own then applies, else
    ``DEFAULT_WORKDIR``)."""
    if task.environment.workdir:
        return task.environment.workdir
    dockerfile = Path(task.path) / "environment" / "Dockerfile"
    try:
        text = read_text_file(dockerfile)
    except (OSError, UnicodeDecodeError):
        return None
    return dockerfile_workdir(text)


def working_directory(task: Task, image_workdir: Optional[str] = None) -> str:
    """Where the workspace sits: the task's declared working directory, else the image's own
    ``WORKDIR`` (when the sandbox knows it and it is not ``/``), else ``DEFAULT_WORKDIR``."""
    declared = declared_workdir(task)
    if declared:
        return declared
    if image_workdir and image_workdir != "/":
        return image_workdir
    return DEFAULT_WORKDIR


def dockerfile_workdir_refusal(task: Task) -> Optional[str]:
    """Why the ``WORKDIR`` of the task's ``environment/Dockerfile``, which it declares when
    ``[environment].workdir`` is not set (``load_task`` refuses that one), can hold no workspace, or
    ``None``: it is, lies under or holds ``/tests`` or ``/logs/verifier``, which grading makes afresh."""
    declared = None if task.environment.workdir else declared_workdir(task)
    clash = protected_clash(declared) if declared else None
    if clash is None:
        return None
    return (
        f"WORKDIR {declared} {clash}: grading makes that folder afresh for every run, and the agent's files "
        "in it would be lost; work elsewhere (e.g. /app)"
    )


def mount_refusal(path: str, workdir: Optional[str]) -> Optional[str]:
    """Why no host folder may be put at the sandbox ``path`` (``--mount``), or ``None``: it is not
    absolute, or it is or lies under ``/tests`` or ``/logs/verifier``, which grading makes afresh (the
    host folder would be emptied), or it is the working directory ``workdir`` or holds it (the
    workspace would be hidden). One that holds the verifier's folders (``/logs``, as Harbor mounts a
    trial's) is taken: grading makes its ``verifier`` folder afresh, as a run would."""
    if not path.startswith("/") or "\0" in path:
        return "the sandbox path must be absolute"
    clash = protected_clash(path, holding=False)
    if clash is not None:
        return f"the sandbox path {clash} (grading makes it afresh for every run: the host folder would be emptied)"
    if workdir is not None and path_within(workdir, path):
        return f"the sandbox path is or holds the working directory {workdir}, where the workspace goes"
    return None


def bind_refusal(path: str, host: Path) -> Optional[str]:
    """Why the ``host`` folder cannot be bound (not copied) at the sandbox ``path``, which holds the
    verifier's folders (``/logs``), or ``None``: it has a file or a link where grading makes a
    verifier's folder afresh, so the host's file would be replaced."""
    for folder in PROTECTED_PATHS:
        if not path_within(folder, path):
            continue
        inside = Path(host, posixpath.relpath(normal_path(folder), normal_path(path)))
        if os.path.islink(inside) or (os.path.lexists(inside) and not os.path.isdir(inside)):
            kind = "link" if os.path.islink(inside) else "file"
            return (
                f"{inside} is a {kind}, where grading makes the folder {folder} afresh for every run: it would be "
                "replaced (move it, or mount another folder)"
            )
    return None


def mounts_refusal(mounts: Mapping[str, Path], workdir: Optional[str], *, bound: bool = False) -> Optional[str]:
    """The first of ``mounts`` (sandbox path to host folder) that ``mount_refusal`` refuses, or, when
    they are ``bound`` rather than copied, ``bind_refusal``, as the sentence a sandbox raises, or ``None``."""
    for path, host in mounts.items():
        refusal = mount_refusal(path, workdir) or (bind_refusal(path, Path(host)) if bound else None)
        if refusal is not None:
            return f"the mount {host}:{path} is refused: {refusal}"
    return None


__all__ = [
    "DEFAULT_WORKDIR",
    "bind_refusal",
    "declared_workdir",
    "dockerfile_workdir",
    "dockerfile_workdir_refusal",
    "mount_refusal",
    "mounts_refusal",
    "working_directory",
]
