"""The sandbox protocol the verification run talks to, and its errors."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional, Protocol, Union

User = Union[str, int]


@dataclass(frozen=True)
class ExecResult:
    """What a command printed and how it ended."""

    stdout: str
    stderr: str
    return_code: int


class SandboxError(RuntimeError):
    """The sandbox failed (lost, unreachable, an upload that did not land): masked, never scored."""


class ExecTimeout(SandboxError):
    """A command outlived the time the host gave it."""


class Sandbox(Protocol):
    """A place to run verification: NeMo Gym's ``exec``/``upload_file``/``download_file`` shape.

    ``tests_dir``, ``logs_dir`` and ``tmp_dir`` are the sandbox's own paths for ``/tests``,
    ``/logs/verifier`` and ``/tmp`` (a local sandbox without a private mount namespace maps them to
    folders of its own), and ``workdir`` is the task's working directory in it. ``admin_user``
    empties and fills those folders (``root`` in a container; ``None``, the caller, locally).
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
    ) -> ExecResult:
        """Runs ``command`` with bash; ``ExecTimeout`` past ``timeout_s``, ``SandboxError`` when lost."""
        ...

    async def upload_file(self, local_path: str, sandbox_path: str) -> None: ...

    async def download_file(self, sandbox_path: str, local_path: str) -> None: ...
