"""``DockerSandbox``: verification in a container of a given image, through the Docker SDK.

The container starts with ``sleep infinity`` as its entrypoint: a prebuilt image's ENTRYPOINT does
not run, as the contract says of an image NeMo Gym has no record of. The SDK is synchronous, so
each call runs in a worker thread; one call is one round trip to the engine.
"""

from __future__ import annotations

import asyncio
import io
import tarfile
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, TypeVar

from nemo_gym.data.tasks.harbor.sandboxes.base import MAX_EXEC_OUTPUT_BYTES, ExecResult, ExecTimeout, SandboxError, User
from nemo_gym.data.tasks.harbor.workdir import DEFAULT_WORKDIR

try:
    import docker
    import docker.errors
except ImportError:  # pragma: no cover - exercised only without the optional extra
    docker = None

T = TypeVar("T")


async def _in_thread(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, lambda: function(*args, **kwargs))


def _single_file_tar(data: bytes, name: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = tarfile.TarInfo(name)
        info.size, info.mode = len(data), 0o600  # readable by root alone until grading moves it
        archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


class DockerSandbox:
    """A container of ``image``; use it as an async context manager (``close`` removes it).

    ``workspace`` (a host folder) is copied into ``workdir`` when the container starts: the task's
    working directory, else the image's ``WORKDIR``, else ``DEFAULT_WORKDIR``. ``mounts`` copies more
    host folders in (``{sandbox_path: host_folder}``: the agent's state beyond the workspace);
    ``volumes`` are extra bind mounts (``{host_path: {"bind": path, "mode": "ro"}}``, the SDK's shape).
    """

    admin_user: Optional[User] = "root"
    supports_user_groups = True  # docker exec -u accepts name:group
    private_pids = True  # the container's own PID namespace
    tests_dir = "/tests"
    logs_dir = "/logs/verifier"
    tmp_dir = "/tmp"

    def __init__(
        self,
        image: str,
        *,
        workspace: Optional[Path] = None,
        workdir: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        volumes: Optional[Dict[str, Dict[str, str]]] = None,
        labels: Optional[Mapping[str, str]] = None,
        client: Any = None,
        mounts: Optional[Mapping[str, Path]] = None,
    ) -> None:
        if docker is None and client is None:
            raise SandboxError(
                "the Docker sandbox needs the Docker SDK: pip install 'nemo-gym-harbor-verifiers[docker]'"
            )
        self.image = image
        self.workspace = workspace
        self._declared_workdir = workdir
        self.workdir = workdir or DEFAULT_WORKDIR  # the image's WORKDIR, once the container runs
        self._mounts = {path: Path(host) for path, host in (mounts or {}).items()}
        self._env = dict(env or {})
        self._volumes = dict(volumes or {})
        self._labels = {"nemo-gym.sandbox": "1", **(labels or {})}
        self._client = client
        self._container: Any = None
        self.default_user: Optional[User] = None  # the image's USER, once the container runs
        self.environment: Dict[str, str] = {}  # what every exec inherits, once the container runs

    async def __aenter__(self) -> DockerSandbox:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self) -> None:
        try:
            if self._client is None:
                self._client = await _in_thread(docker.from_env)
            self._container = await _in_thread(
                self._client.containers.run,
                self.image,
                entrypoint=["sleep", "infinity"],
                init=True,  # an init that reaps: orphaned zombies would otherwise pile up for good
                # A set-id program written during grading (the agent's program, run by verify) must
                # not lift the agent to the verifier's user, or to root, afterwards.
                security_opt=["no-new-privileges"],
                detach=True,
                environment=self._env,
                volumes=self._volumes,
                labels=self._labels,
                name=f"nemo-gym-sandbox-{uuid.uuid4().hex[:12]}",
            )
        except Exception as error:  # the SDK raises its own errors and requests' ones
            raise SandboxError(f"cannot start a container of {self.image}: {error}") from error
        config = (getattr(self._container, "attrs", None) or {}).get("Config") or {}
        self.environment = dict(entry.split("=", 1) for entry in config.get("Env") or [] if "=" in entry)
        image_workdir = config.get("WorkingDir") or ""
        if not self._declared_workdir and image_workdir not in ("", "/"):
            self.workdir = image_workdir
        configured = config.get("User") or ""
        self.default_user = configured if configured not in ("", "root", "0", "0:0", "root:root") else None
        made = await self._exec_argv(
            ["mkdir", "-p", self.workdir, *self._mounts], cwd="/", env=None, timeout_s=60, user=self.admin_user
        )
        if made.return_code != 0:
            raise SandboxError(f"cannot create the working directory {self.workdir}: {made.stdout.strip()}")
        if self.workspace is not None:
            await self._put_folder(Path(self.workspace), self.workdir)
        for path, host in self._mounts.items():  # copies: the sandbox never writes back to the host
            await self._put_folder(host, path)

    async def close(self) -> None:
        if self._container is not None:
            container, self._container = self._container, None
            try:
                await _in_thread(container.remove, force=True)
            except Exception:  # already gone: nothing left to clean
                pass

    def _require(self) -> Any:
        if self._container is None:
            raise SandboxError("the container is not running (use the sandbox as `async with`)")
        return self._container

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
        # A clean shell is found by its absolute path: the container's PATH may name the agent's folders.
        argv = ["/bin/bash", "-p", "-c", command] if clean_shell else ["bash", "-c", command]
        return await self._exec_argv(argv, cwd=cwd, env=env, timeout_s=timeout_s, user=user)

    async def _exec_argv(
        self,
        argv: List[str],
        *,
        cwd: Optional[str],
        env: Optional[Mapping[str, str]],
        timeout_s: Optional[float],
        user: Optional[User],
    ) -> ExecResult:
        container = self._require()
        api = self._client.api

        def run() -> ExecResult:
            created = api.exec_create(
                container.id,
                argv,
                stdout=True,
                stderr=True,
                workdir=cwd or self.workdir,
                environment=dict(env or {}),
                user="" if user is None else str(user),
            )
            stdout, stderr = b"", b""
            for out, err in api.exec_start(created["Id"], stream=True, demux=True):
                stdout = (stdout + (out or b""))[-MAX_EXEC_OUTPUT_BYTES:]
                stderr = (stderr + (err or b""))[-MAX_EXEC_OUTPUT_BYTES:]
            code = api.exec_inspect(created["Id"]).get("ExitCode")
            return ExecResult(
                stdout.decode(errors="replace"), stderr.decode(errors="replace"), -1 if code is None else code
            )

        try:
            return await asyncio.wait_for(_in_thread(run), timeout_s)
        except asyncio.TimeoutError:
            raise ExecTimeout(f"the command outlived {timeout_s} s") from None
        except Exception as error:
            raise SandboxError(f"exec in the container failed: {error}") from error

    async def upload_file(self, local_path: str, sandbox_path: str) -> None:
        folder, _, name = sandbox_path.rpartition("/")
        data = _single_file_tar(Path(local_path).read_bytes(), name)
        await self.put_archive(folder or "/", data)

    async def put_archive(self, folder: str, data: bytes) -> None:
        """Unpacks the tar ``data`` into ``folder`` through the engine: no tool inside the container."""
        container = self._require()
        try:
            if not await _in_thread(container.put_archive, folder, data):
                raise SandboxError(f"upload into {folder} failed")
        except SandboxError:
            raise
        except Exception as error:
            raise SandboxError(f"upload into {folder} failed: {error}") from error

    async def get_archive(self, path: str, *, limit: int) -> bytes:
        """A tar of ``path`` through the engine, read up to ``limit`` bytes."""
        container = self._require()

        def read() -> bytes:
            stream, _ = container.get_archive(path, chunk_size=1 << 16)
            chunks, size = [], 0
            for chunk in stream:
                size += len(chunk)
                if size > limit:
                    raise SandboxError(f"{path} is larger than {limit} bytes")
                chunks.append(chunk)
            return b"".join(chunks)

        try:
            return await _in_thread(read)
        except SandboxError:
            raise
        except Exception as error:
            raise SandboxError(f"download of {path} failed: {error}") from error

    async def _put_folder(self, folder: Path, target: str) -> None:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            for path in sorted(folder.iterdir()):
                archive.add(str(path), arcname=path.name)
        await self.put_archive(target, buffer.getvalue())

    async def download_file(self, sandbox_path: str, local_path: str) -> None:
        container = self._require()
        try:
            stream, _ = await _in_thread(container.get_archive, sandbox_path)
            data = await _in_thread(lambda: b"".join(stream))
        except Exception as error:
            raise SandboxError(f"download of {sandbox_path} failed: {error}") from error
        with tarfile.open(fileobj=io.BytesIO(data)) as archive:
            member = archive.next()
            if member is None or not member.isfile():
                raise SandboxError(f"{sandbox_path} is not a regular file in the container")
            extracted = archive.extractfile(member)
            assert extracted is not None
            Path(local_path).write_bytes(extracted.read())
