"""The sandbox protocol the verification run talks to, and its errors."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Dict, Iterator, Mapping, Optional, Protocol, Set, Union, runtime_checkable

User = Union[str, int]

# How a clean shell starts bash: -p runs no BASH_ENV/ENV file and imports no function or
# SHELLOPTS; --norc runs no ~/.bashrc or /etc/bash.bashrc either, which bash -c otherwise sources
# when SSH_CLIENT is set or its stdin is a socket (Python 3.8's asyncio gives a subprocess one),
# before the command can set PATH.
CLEAN_SHELL_OPTIONS = ("--norc", "-p")

# What one exec keeps of each output stream: its tail, enough for any error message, bounded for a
# flood (a verifier's own output goes to test-stdout.txt, never here).
MAX_EXEC_OUTPUT_BYTES = 1 << 20


@dataclass(frozen=True)
class ExecResult:
    """What a command printed and how it ended."""

    stdout: str
    stderr: str
    return_code: int


class SandboxError(RuntimeError):
    """The sandbox failed (lost, unreachable, an upload that did not land): masked, never scored."""


class OutputTooLarge(SandboxError):
    """A command printed more than its caller allowed: the sandbox's own doing (its programs'), which
    grading tells from a call the engine or provider failed."""


class SandboxNotStarted(RuntimeError):
    """The caller's mistake, raised rather than masked: a sandbox used before it was started (or
    after it was closed). Not a ``SandboxError``: no fault of the sandbox, every sample would hit it."""


class ExecTimeout(SandboxError):
    """A command outlived the time the host gave it."""


class CopyStalled(SandboxError):
    """A copy out of the sandbox that stopped moving until the client gave up; ``partial`` holds the
    bytes that came before it. Whose doing that is depends on what ran in the sandbox meanwhile."""

    def __init__(self, message: str, partial: bytes = b"") -> None:
        super().__init__(message)
        self.partial = partial


class LinkEscape(SandboxError):
    """A path whose parent folders lead, through a symbolic link the agent made, out of the
    sandbox: the agent's doing, so a copy leaves it out rather than masking the sample."""


class Sandbox(Protocol):
    """A place to run verification: NeMo Gym's ``exec``/``upload_file``/``download_file`` shape.

    ``tests_dir``, ``logs_dir`` and ``tmp_dir`` are the sandbox's own paths for ``/tests``,
    ``/logs/verifier`` and ``/tmp`` (a local sandbox without a private mount namespace maps them to
    folders of its own), and ``workdir`` is the task's working directory in it. ``admin_user``
    empties and fills those folders (``root`` in a container; ``None``, the caller, locally).
    ``default_user`` is who a command runs as when no user is named (the image's ``USER``;
    ``None`` when that is the admin or unknown). ``private_pids`` says every process a scan of
    ``/proc`` finds belongs to this sandbox (its own PID namespace), so grading may kill whatever
    started after it began.
    """

    admin_user: Optional[User]
    tests_dir: str
    logs_dir: str
    tmp_dir: str
    workdir: str

    async def exec(
        self,
        command: str,
        *,
        cwd: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        timeout_s: Optional[float] = None,
        user: Optional[User] = None,
        clean_shell: bool = False,
    ) -> ExecResult:
        """Runs ``command`` with bash; ``ExecTimeout`` past ``timeout_s``, ``SandboxError`` when lost.

        ``clean_shell`` starts bash as ``bash --norc -p`` (``CLEAN_SHELL_OPTIONS``): no startup file,
        no function or ``SHELLOPTS`` from the environment runs before ``command``. Each output is
        kept to its last ``MAX_EXEC_OUTPUT_BYTES``.
        """
        ...

    async def upload_file(self, local_path: str, sandbox_path: str) -> None:
        """Copies a file in; it must arrive readable by the admin user alone."""
        ...

    async def download_file(self, sandbox_path: str, local_path: str) -> None: ...


@dataclass(frozen=True)
class PipedResult:
    """What a piped command printed and how it ended: its standard output whole, as bytes."""

    stdout: bytes
    stderr: str
    return_code: int


@runtime_checkable
class PipeSandbox(Protocol):
    """A sandbox whose exec can take bytes on standard input and give standard output back as bytes:
    grading then moves its files in and out inside its one exec. (On the Docker engine each archive
    call costs about as much as an exec, since the engine starts a helper process for it.)"""

    async def exec_piped(
        self,
        command: str,
        stdin: bytes,
        *,
        stdout_limit: int,
        cwd: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        timeout_s: Optional[float] = None,
        user: Optional[User] = None,
        clean_shell: bool = False,
        exit_marker: bytes = b"",
    ) -> PipedResult:
        """``exec`` with ``stdin`` written to the command's standard input (then closed); its whole
        standard output comes back, and more than ``stdout_limit`` bytes of it is a ``SandboxError``.
        An output that ends with a non-empty ``exit_marker`` (which the command prints last, and then
        exits 0) may be given exit status 0 without asking the sandbox: a round trip fewer."""
        ...


@runtime_checkable
class ArchiveSandbox(Protocol):
    """A sandbox that moves files in and out as tar archives without any tool inside it (the
    Docker engine's archive calls): grading then needs no ``tar`` the agent could delete."""

    async def put_archive(self, folder: str, data: bytes) -> None:
        """Unpacks the tar ``data`` into ``folder``, with the members' modes and owners."""
        ...

    async def get_archive(self, path: str, *, limit: int) -> bytes:
        """A tar of ``path`` (a folder and what it holds, links as links); ``SandboxError`` past ``limit`` bytes."""
        ...


def causes(error: BaseException) -> Iterator[BaseException]:
    """``error`` and each error it was raised from or while handling, once each: a client library's
    error often wraps the one that tells what happened (a socket's timeout, an engine's 404)."""
    seen: Set[int] = set()
    current: Optional[BaseException] = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def names_root(user: Optional[User]) -> bool:
    """Whether ``user`` (``name``, ``uid``, ``name:group``, ``uid:gid``) is uid 0 by its name."""
    name = str(user).split(":", 1)[0]
    return name == "root" or (name.isdigit() and int(name) == 0)


# Images already warned about (warn_killable_keep_alive): a server starts thousands of sandboxes of one.
_KEEP_ALIVE_WARNED: Set[str] = set()


def warn_killable_keep_alive(image: Optional[str], user: User) -> None:
    """Logs, once per image, that a sandbox's first process runs as ``user``, not root: a process of
    that user (the agent's, when it runs as that user) can kill it and end the sandbox, which masks
    the sample (counted, never scored; README, the threat model). Nothing here can change whose it
    is: the image's ``USER`` and its own ENTRYPOINT, or the provider, decide."""
    key = image or ""
    if key in _KEEP_ALIVE_WARNED:
        return
    _KEEP_ALIVE_WARNED.add(key)
    logging.getLogger("nemo_gym.harbor").warning(
        "%s: the sandbox's first process runs as %s, not root, and a process of that user can end the "
        "sandbox and mask the sample; give the image a root USER and name the agent's user in [agent].user",
        image or "a sandbox",
        user,
    )


def clean_shell_env(env: Optional[Mapping[str, str]], inherited: Mapping[str, str]) -> Dict[str, str]:
    """The environment of a clean shell: ``env``, with the variables that act on a program as it
    starts set empty (``grading.ALWAYS_BLANKED``, and each name ``grading.deferred`` holds back that
    ``env`` or ``inherited``, the sandbox's own environment, sets). A clean shell is the admin's own
    (grading, the clock read around a hook, the reaper, a delivery): an image whose ENV points
    ``LD_LIBRARY_PATH`` into the agent's files had root's bash load the agent's library there (red
    team 76). Grading hands the verifier its own values back."""
    from nemo_gym.data.tasks.harbor.grading import ALWAYS_BLANKED, deferred

    names = {*ALWAYS_BLANKED, *(name for source in (env or {}, inherited) for name in source if deferred(name))}
    return {**(env or {}), **dict.fromkeys(names, "")}


def sandbox_option(sandbox: Any, name: str, default: Any) -> Any:
    """An optional attribute of a sandbox (``default_user``, ``private_pids``), else ``default``."""
    return getattr(sandbox, name, default)


def require_started(sandbox: Any) -> None:
    """``SandboxNotStarted`` for a sandbox that says it is not running (its optional ``started``):
    every command in it would fail, and each sample would be masked for the caller's mistake."""
    if sandbox_option(sandbox, "started", True) is False:
        raise SandboxNotStarted(
            f"the {type(sandbox).__name__} is not running (never started, or closed): verify in it inside its "
            "`async with` (or between its start() and close())"
        )


__all__ = [
    "CLEAN_SHELL_OPTIONS",
    "MAX_EXEC_OUTPUT_BYTES",
    "ArchiveSandbox",
    "CopyStalled",
    "ExecResult",
    "ExecTimeout",
    "LinkEscape",
    "OutputTooLarge",
    "PipeSandbox",
    "PipedResult",
    "Sandbox",
    "SandboxError",
    "SandboxNotStarted",
    "User",
    "causes",
    "clean_shell_env",
    "names_root",
    "require_started",
    "sandbox_option",
    "warn_killable_keep_alive",
]
