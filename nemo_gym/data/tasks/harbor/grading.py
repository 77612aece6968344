"""The in-sandbox steps of one verification, as bash commands: ``_grading.sh`` and its settings.

Pure: the host decides every value (no secret is among them: the run's key travels in the staged
files, never on a command line or in an environment another process could read) and ``_grading.sh`` does
the rest with bash builtins and coreutils, started as ``bash --norc -p`` (``clean_shell``).
"""

from __future__ import annotations

import functools
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Collection, Iterable, List, Mapping, Optional, Tuple

from nemo_gym.data.tasks.harbor.collected import (
    MAX_OUTPUT_DEPTH,
    MAX_OUTPUT_FILE_BYTES,
    MAX_OUTPUT_FILES,
    MAX_OUTPUT_NAME,
    MAX_OUTPUT_SCAN,
)

# Exit statuses of _grading.sh when nothing could run (keep in sync with the script).
NO_VERIFIER_TOOL = 90  # timeout (or bash): the seed's verifier_error
NO_PROVIDER_TOOL = 91  # a coreutils tool, or tar where the sandbox has no archive calls: provider_unavailable
STAGING_FAILED = 92  # the staged files did not arrive, or the folders could not be set up: sandbox_error
UNKNOWN_USER = 93  # [verifier].user names nobody in the sandbox: the task's fault, verifier_error
NO_TAR = 94  # no tar for files on the exec's stdin and stdout: the host sends them another way
# A task's own test.sh run as another user where the image has no setpriv: prepared, and to run in an
# exec of that user's (the host then reclaims as the admin).
PREPARED_ONLY = 95
NO_NULL_DEVICE = 96  # /dev/null is not the null device: only code in the sandbox makes it so, a 0
# What a piped run prints last on its stdout, after the results, before it exits 0: where no code of
# the task could reach the shell, its exit status is 0 without a round trip to the sandbox
# (``verification._Grading.piped``). The results keep their checksums: a byte flipped on the way
# must mask the sample, never read as a missing report.
DONE_MARKER = b"\nnemo-gym-grading-done\n"

# Variables that act on a program as it starts (the dynamic loader's, glibc's, tar's). A task may
# set them, and may point them into the agent's files; no program grading runs as the admin may see
# them. The admin's exec sets them empty, and the verifier gets its own values back: in test.sh's
# environment, or, for the shim, from the runner once it has switched users and sealed itself.
DEFERRED_NAMES = frozenset(
    (
        "GCONV_PATH", "GETCONF_DIR", "GLIBC_TUNABLES", "HOSTALIASES", "LOCALDOMAIN", "LOCPATH", "MALLOC_TRACE",
        "NIS_PATH", "NLSPATH", "RESOLV_HOST_CONF", "RES_OPTIONS", "TAR_OPTIONS", "TZDIR",
    )
)  # fmt: skip
# Set empty even when nobody said they were set: a sandbox need not report its environment.
ALWAYS_BLANKED = ("LD_AUDIT", "LD_LIBRARY_PATH", "LD_PRELOAD")


# The programs grading runs as the admin (``_grading.sh``, ``_strays.sh``; the shim's test.sh adds
# ``stat``; BusyBox's one program stands for them all on Alpine), where its PATH finds them, and the
# files that say who a user is or load into every program. An agent that changed one (deleted it,
# replaced it, or put its own first on that PATH) broke its own grading, which then failed for it (red
# team 91): a 0, not the mask of an image without them.
GRADING_PROGRAMS = frozenset(
    (
        "bash", "timeout", "setpriv", "env", "tar", "rm", "mkdir", "chown", "chmod", "mv", "head", "tail",
        "sha256sum", "stat", "install", "cp", "id", "dd", "busybox",
    )
)  # fmt: skip
ADMIN_PATH = ("/usr/sbin", "/usr/bin", "/sbin", "/bin")  # _grading.sh's PATH
IDENTITY_FILES = frozenset(("/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/ld.so.preload"))
# The folders grading's programs and the loader's libraries are in, and /usr above them: one the agent
# deleted, or swapped for a link to a copy of its making (red team 92), breaks them all at once.
SYSTEM_FOLDERS = re.compile(r"/usr|(/usr)?/(s?bin|lib(32|64|x32)?(/[^/]+-linux-gnu[^/]*)?)")
# The loader's own folders (a multiarch one among them), and a shared library's name there.
_LIBRARY_FOLDER = re.compile(r"(/usr)?/lib(32|64|x32)?(/[^/]+-linux-gnu[^/]*)?")
_LIBRARY = re.compile(r"(lib[^/]*|ld-(linux|musl)[^/]*|ld64)\.so(\.\d+)*")
# The C library and the loader, by the names glibc and musl give them: changed, never a package's upgrade
# of another library.
_LOADER = ("ld-linux", "ld-musl", "ld64.so", "libc.so", "libc-", "libc.musl")
# The engine's kinds of change of a container's file against its image (``GET /containers/{id}/changes``).
CHANGE_KINDS = {0: "changed", 1: "added", 2: "deleted"}
CHANGED, DELETED = 0, 2


def system_folders(changes: Iterable[Mapping[str, Any]]) -> List[str]:
    """The ``SYSTEM_FOLDERS`` a container's ``changes`` show changed: whether each is a link now tells a
    folder swapped for one from a folder whose content changed (an installed package changes that)."""
    found = {change.get("Path") for change in changes if change.get("Kind") == CHANGED}
    return sorted(path for path in found if isinstance(path, str) and SYSTEM_FOLDERS.fullmatch(path))


def broken_for_grading(changes: Iterable[Mapping[str, Any]], links: Collection[str] = ()) -> Optional[str]:
    """Which of grading's programs and files a container's ``changes`` against its image (the engine's,
    each ``{"Path", "Kind"}``) show changed, as one phrase, or ``None``: a program of
    ``GRADING_PROGRAMS`` in a folder of ``ADMIN_PATH``, a file of ``IDENTITY_FILES``, the C library
    or the dynamic loader, any shared library deleted from the loader's folders (bash's ``libtinfo``:
    installing a package deletes none there), a system folder deleted, or changed and among ``links``
    (those of ``system_folders`` that are links now). A change there is no image's fault. Other libraries
    changed are not counted (a package's upgrade changes them too), nor a module deleted deeper in
    (a Python or Perl package's, which an upgrade may remove)."""
    found = []
    for change in changes:
        path, kind = change.get("Path"), change.get("Kind")
        if not isinstance(path, str):
            continue
        folder, _, name = path.rpartition("/")
        library = bool(_LIBRARY_FOLDER.fullmatch(folder) and _LIBRARY.fullmatch(name))
        if (
            path in IDENTITY_FILES
            or (folder in ADMIN_PATH and name in GRADING_PROGRAMS)
            or (library and (kind == DELETED or name.startswith(_LOADER)))
            or (SYSTEM_FOLDERS.fullmatch(path) and (kind == DELETED or (kind == CHANGED and path in links)))
        ):
            how = CHANGE_KINDS.get(kind, "changed") if isinstance(kind, int) else "changed"
            found.append(f"{path} ({how}{': a link now' if kind == CHANGED and path in links else ''})")
    if not found:
        return None
    more = f" and {len(found) - 5} more" if len(found) > 5 else ""
    return "the sandbox's " + ", ".join(sorted(found)[:5]) + more + " since its image"


def deferred(name: str) -> bool:
    """Whether ``name`` is held back from grading's own programs (``DEFERRED_NAMES``, ``LD_*``)."""
    return name.startswith("LD_") or name in DEFERRED_NAMES


# How the prepared folders go to the verifier's user when that is not the admin: "read" for a
# Python verifier (the runner starts as the admin and switches itself, /tests stays the admin's),
# "own" for a task's own test.sh (Harbor's semantics: the folders become that user's).
HANDOVER_READ, HANDOVER_OWN = "read", "own"


@functools.lru_cache(maxsize=None)
def _text(name: str) -> str:
    """The bash file ``name`` without its comment lines and blank lines: they are half of grading's
    text, which the exec's request carries and bash parses on every run (1-2% of a Docker run).
    Bash's messages then number the lines of what ran, not of the file."""
    lines = (Path(__file__).resolve().parent / name).read_text(encoding="utf-8").splitlines()
    return "".join(line + "\n" for line in lines if line.strip() and not line.lstrip().startswith("#"))


def _script() -> str:
    return _text("_strays.sh") + _text("_grading.sh")


# The start of the shell that runs it, in clock ticks since boot (/proc's stat, field 22): what the
# reaper kills from (``reap_command``). Bash builtins alone.
START_TICKS_COMMAND = 'IFS= read -r stat < "/proc/$$/stat"; set -- ${stat##*) }; echo "${20}"'


def reap_command(since_ticks: int) -> str:
    """The bash command (run it as the admin, ``clean_shell=True``) that kills every process but
    root's started at or after ``since_ticks`` (``START_TICKS_COMMAND``), as grading's finish kills
    its strays: what a hook or a check of another user left running past its bound."""
    return f"started={int(since_ticks)}\nKILL_STRAYS=1\nSPARE_ROOT=1\n" + _text("_strays.sh") + "kill_strays\nthaw\n"


@dataclass(frozen=True)
class GradingSteps:
    """The settings of one ``_grading.sh`` run: which steps, on which folders, for which verifier."""

    steps: Tuple[str, ...]
    kind: str  # "python" (the shim: a report comes back) or "shell" (a task's own test.sh)
    tests_dir: str
    logs_dir: str
    stage: str  # the run's stage folder, inside tests_dir
    out_dir: str  # where finish leaves the results, inside tests_dir
    timeout_sec: float
    kill_after_sec: int
    tail_bytes: int
    max_reward_bytes: int
    max_report_chars: int
    max_output_files: int = MAX_OUTPUT_FILES
    max_output_bytes: int = MAX_OUTPUT_FILE_BYTES
    max_output_name: int = MAX_OUTPUT_NAME
    max_output_depth: int = MAX_OUTPUT_DEPTH
    max_output_scan: int = MAX_OUTPUT_SCAN
    inputs: Tuple[str, ...] = ()
    agents: Tuple[str, ...] = ()  # the agent's users, whose kept inputs are made root's (secure_inputs)
    handover: str = ""
    run_as: str = ""
    kill_strays: bool = True
    blanked: Tuple[str, ...] = ()  # the variables the exec sets empty (``deferred``)
    keep_tests: bool = False  # run the /tests/test.sh a separate verifier's image ships, as it is
    piped: bool = False  # the staged files come as a tar on stdin, the results go as one to stdout
    archive: str = ""  # the uploaded tar, for a sandbox without archive calls
    out_tar: str = ""  # the results as one tar to download, likewise
    workdir: str = "/"  # the task's working directory, which run enters (the exec starts in /)


def grading_command(steps: GradingSteps) -> str:
    """The bash command that carries ``steps`` out (run it with ``clean_shell=True``)."""
    values = {
        "STEPS": " ".join(steps.steps),
        "KIND": steps.kind,
        "TESTS": steps.tests_dir.rstrip("/") or "/",
        "LOGS": steps.logs_dir.rstrip("/") or "/",
        "STAGE": steps.stage,
        "OUT": steps.out_dir,
        "TIMEOUT": f"{steps.timeout_sec:g}",
        "KILL_AFTER": str(steps.kill_after_sec),
        "TAIL_BYTES": str(steps.tail_bytes),
        "MAX_REWARD_BYTES": str(steps.max_reward_bytes + 1),
        "MAX_REPORT_CHARS": str(steps.max_report_chars),
        "MAX_OUTPUT_FILES": str(steps.max_output_files),
        "MAX_OUTPUT_BYTES": str(steps.max_output_bytes),
        "MAX_OUTPUT_NAME": str(steps.max_output_name),
        "MAX_OUTPUT_DEPTH": str(steps.max_output_depth),
        "MAX_OUTPUT_SCAN": str(steps.max_output_scan),
        "HANDOVER": steps.handover,
        "RUN_AS": steps.run_as,
        "KILL_STRAYS": "1" if steps.kill_strays else "0",
        "SPARE_ROOT": "0",
        "PIPED": "1" if steps.piped else "0",
        "ARCHIVE": steps.archive,
        "OUT_TAR": steps.out_tar,
        "KEEP_TESTS": "1" if steps.keep_tests else "0",
        "WORKDIR": steps.workdir.rstrip("/") or "/",
        "DONE": DONE_MARKER.decode("ascii") if steps.piped else "",
    }
    lines = [f"{name}={shlex.quote(value)}" for name, value in values.items()]
    lines.append("INPUTS=(" + " ".join(shlex.quote(name) for name in steps.inputs) + ")")
    lines.append("BLANKED=(" + " ".join(shlex.quote(name) for name in steps.blanked) + ")")
    lines.append("AGENTS=(" + " ".join(shlex.quote(name) for name in steps.agents) + ")")
    return "\n".join(lines) + "\n" + _script()


__all__ = [
    "ALWAYS_BLANKED",
    "DEFERRED_NAMES",
    "DONE_MARKER",
    "HANDOVER_OWN",
    "HANDOVER_READ",
    "NO_PROVIDER_TOOL",
    "NO_TAR",
    "NO_VERIFIER_TOOL",
    "PREPARED_ONLY",
    "STAGING_FAILED",
    "START_TICKS_COMMAND",
    "UNKNOWN_USER",
    "GradingSteps",
    "deferred",
    "grading_command",
    "reap_command",
]
