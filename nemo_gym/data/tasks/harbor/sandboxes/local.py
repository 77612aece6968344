"""``LocalSandbox``: verification on this machine, in private temporary folders.

On Linux with bubblewrap, every command runs in a private mount and PID namespace: ``/tests``,
``/logs`` and ``/tmp`` are the sandbox's own folders, the workspace keeps its path, and the rest of
the file system is the host's. So a task's own ``test.sh`` that writes ``/logs/verifier/reward.txt``
works, concurrent sandboxes never share a folder, and every process a verifier leaves behind dies
with it. Without bubblewrap, the paths map to the sandbox's folders instead (the shim takes
``VERIFIER_LOGS_DIR``), and a task's own ``test.sh`` is refused with a pointer to ``--sandbox docker``.
It never writes outside its temporary folders and the workspace.
"""

from __future__ import annotations

import asyncio
import functools
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Dict, List, Mapping, Optional

from nemo_gym.data.tasks.harbor.sandboxes.base import ExecResult, ExecTimeout, SandboxError, User

# The host's top-level entries a namespaced command does not see: the sandbox brings its own.
_PRIVATE = ("tests", "logs", "tmp", "proc", "dev")


@functools.lru_cache(maxsize=None)
def namespaces_available() -> bool:
    """Whether bubblewrap can start a private mount and PID namespace here (probed once)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return False
    try:
        probe = subprocess.run(
            [bwrap, "--dev-bind", "/", "/", "--unshare-pid", "--proc", "/proc", "true"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return probe.returncode == 0


def _host_binds() -> List[str]:
    arguments: List[str] = []
    for entry in sorted(os.listdir("/")):
        if entry in _PRIVATE:
            continue
        path = "/" + entry
        if os.path.islink(path):
            arguments += ["--symlink", os.readlink(path), path]
        else:
            arguments += ["--bind", path, path]
    return arguments


class LocalSandbox:
    """A sandbox on this machine; use it as an async context manager (``close`` removes its folders)."""

    admin_user: Optional[User] = None  # its folders are the caller's own

    def __init__(
        self,
        workspace: Path,
        *,
        env: Optional[Mapping[str, str]] = None,
        isolate: Optional[bool] = None,
    ) -> None:
        self.workspace = Path(workspace).resolve()
        if not self.workspace.is_dir():
            raise SandboxError(f"the workspace {workspace} is not a folder")
        self.isolated = namespaces_available() if isolate is None else isolate
        self._root = Path(tempfile.mkdtemp(prefix="nemo-gym-sandbox-"))
        for folder in ("tests", "logs/verifier", "tmp"):
            (self._root / folder).mkdir(parents=True)
        self._env = dict(env or {})
        if self.isolated:
            self.tests_dir, self.logs_dir, self.tmp_dir = "/tests", "/logs/verifier", "/tmp"
        else:
            self.tests_dir = str(self._root / "tests")
            self.logs_dir = str(self._root / "logs" / "verifier")
            self.tmp_dir = str(self._root / "tmp")
        self.workdir = str(self.workspace)

    async def __aenter__(self) -> LocalSandbox:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        shutil.rmtree(self._root, ignore_errors=True)

    def host_path(self, sandbox_path: str) -> Path:
        """The host path behind a sandbox path; only the sandbox's folders and the workspace."""
        path = os.path.normpath(sandbox_path)
        mounts = {self.tests_dir: "tests", self.logs_dir: "logs/verifier", self.tmp_dir: "tmp"}
        if self.isolated:
            mounts["/logs"] = "logs"
        for prefix, folder in sorted(mounts.items(), key=lambda item: -len(item[0])):
            if path == prefix or path.startswith(prefix.rstrip("/") + "/"):
                return self._root / folder / os.path.relpath(path, prefix)
        if path == self.workdir or path.startswith(self.workdir + "/"):
            return Path(path)
        raise SandboxError(f"{sandbox_path} is outside the local sandbox's folders and workspace")

    def _command(self, command: str, cwd: str, user: Optional[User]) -> List[str]:
        argv = ["bash", "-c", command]
        if user is not None:
            argv = self._as_user(user) + argv
        if not self.isolated:
            return argv
        return [
            "bwrap",
            *_host_binds(),
            "--dev-bind", "/dev", "/dev",
            "--proc", "/proc",
            "--bind", str(self._root / "tmp"), "/tmp",
            "--bind", str(self._root / "tests"), "/tests",
            "--bind", str(self._root / "logs"), "/logs",
            "--bind", str(self.workspace), str(self.workspace),
            "--unshare-pid",
            "--die-with-parent",
            "--chdir", cwd,
            "--",
            *argv,
        ]  # fmt: skip

    @staticmethod
    def _as_user(user: User) -> List[str]:
        try:
            entry = pwd.getpwuid(user) if isinstance(user, int) else pwd.getpwnam(user)
        except KeyError:
            if isinstance(user, int):
                return ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups"]
            raise SandboxError(f"the local sandbox has no user named {user!r}") from None
        if entry.pw_uid == os.getuid():
            return []
        if os.getuid() != 0:
            raise SandboxError(f"the local sandbox runs as uid {os.getuid()} and cannot switch to {user!r}")
        return ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--init-groups"]

    async def exec(
        self,
        command: str,
        *,
        cwd: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        timeout_s: Optional[float] = None,
        user: Optional[User] = None,
    ) -> ExecResult:
        if isinstance(user, str) and ":" in user:
            raise SandboxError(f"user {user!r}: a user with a group (name:group) works on the Docker sandbox only")
        directory = cwd or self.workdir
        environment: Dict[str, str] = {**os.environ, **self._env, **(env or {})}
        if not self.isolated:
            environment["TMPDIR"] = self.tmp_dir
        try:
            process = await asyncio.create_subprocess_exec(
                *self._command(command, directory, user),
                cwd=directory if not self.isolated else None,
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as error:
            raise SandboxError(f"cannot start a command in the local sandbox: {error}") from error
        try:
            stdout, stderr = await asyncio.wait_for(process.communicate(), timeout_s)
        except asyncio.TimeoutError:
            raise ExecTimeout(f"the command outlived {timeout_s} s") from None
        finally:
            if process.returncode is None or not self.isolated:
                _kill_group(process.pid)  # whatever it left behind goes with it
            if process.returncode is None:
                await process.wait()
        assert process.returncode is not None
        return ExecResult(stdout.decode(errors="replace"), stderr.decode(errors="replace"), process.returncode)

    async def upload_file(self, local_path: str, sandbox_path: str) -> None:
        target = self.host_path(sandbox_path)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_symlink():
                target.unlink()
            shutil.copyfile(local_path, target)
        except OSError as error:
            raise SandboxError(f"upload to {sandbox_path} failed: {error}") from error

    async def download_file(self, sandbox_path: str, local_path: str) -> None:
        source = self.host_path(sandbox_path)
        try:
            if source.is_symlink() or not source.is_file():
                raise SandboxError(f"{sandbox_path} is not a regular file in the sandbox")
            shutil.copyfile(source, local_path)
        except OSError as error:
            raise SandboxError(f"download of {sandbox_path} failed: {error}") from error


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
