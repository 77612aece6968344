"""A NeMo Gym sandbox provider over the Docker engine (the docker SDK), for the suite only.

NeMo Gym 0.4.0 ships no Docker provider; this one follows the contract of its own providers
(``nemo_gym.sandbox.providers.base``, and Apptainer's as the model): ``exec`` runs ``["sh", "-c",
command]`` with the working directory, environment and user asked for; a command that outlives
``timeout_s`` is killed and answers code 125 with ``error_type="timeout"``; a fault of the engine or
of the container (it is gone, or stopped under the command) answers 125 with ``error_type="sandbox"``;
an empty output is ``None``. ``create`` starts a container of ``spec.image`` running ``sleep
infinity`` and returns once a command runs in it; ``close`` removes it, and a container already gone
is no error.

``labels`` given to the provider go on every container it starts (the suite tells its own apart
from those of another run on the same engine). ``provider_options`` (unknown keys are refused, so a typo in a test cannot pass silently):
``network_mode`` (the engine's, ``"none"`` for no network), ``volumes`` (the SDK's
``{host_path: {"bind": path, "mode": "ro"}}``), ``labels``, and ``user`` (who the container runs as,
and so who ``exec`` runs as when no user is named; uploads are owned by that user). Every container
carries the labels ``nemo-gym-test=1`` and ``nemo-gym.sandbox=1``, which the suite's checks for
leftover containers look for.
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import posixpath
import secrets
import tarfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, TypeVar, Union

import docker
import docker.errors
from nemo_gym.sandbox.providers.base import (
    SandboxCreateError,
    SandboxExecResult,
    SandboxHandle,
    SandboxProvider,
    SandboxResources,
    SandboxSpec,
    SandboxStatus,
)

LOGGER = logging.getLogger(__name__)
T = TypeVar("T")

LABELS = {"nemo-gym-test": "1", "nemo-gym.sandbox": "1"}
FAULT_CODE = 125  # NeMo Gym's providers' code for a fault of the sandbox, not of the command
MAX_OUTPUT_BYTES = 8 << 20
SETTLE_S = 2.0  # how long a command killed by a signal waits to see whether its container went too  # the tail of each stream that is kept
OPTIONS = frozenset(("network_mode", "volumes", "labels", "user"))
# Every exec carries this variable with a value of its own, so that a command past its timeout can
# be found and killed with whatever it started (the engine has no call to kill an exec).
EXEC_MARK = "NEMO_GYM_TEST_EXEC"
# Finds the processes of one exec (those whose environment holds the mark) and their descendants,
# which may have emptied their environment, stops them all, then kills them. Needs sh and /proc only.
_KILL = r"""
mark="$1"; pids=" "
for dir in /proc/[0-9]*; do
  pid=${dir#/proc/}
  [ "$pid" = $$ ] && continue
  if tr '\0' '\n' < "$dir/environ" 2>/dev/null | grep -qxF "$mark"; then pids="$pids$pid "; fi
done
while :; do
  grown=""
  for dir in /proc/[0-9]*; do
    pid=${dir#/proc/}
    case "$pids" in *" $pid "*) continue ;; esac
    stat=$(cat "$dir/stat" 2>/dev/null) || continue
    set -- ${stat##*) }
    case "$pids" in *" $2 "*) pids="$pids$pid "; grown=1 ;; esac
  done
  [ -n "$grown" ] || break
done
[ "$pids" = " " ] && exit 0
kill -STOP $pids 2>/dev/null
kill -KILL $pids 2>/dev/null
echo "killed:$pids"
"""


@dataclass
class DockerContainer:
    """The provider's state on ``SandboxHandle.raw``: the container, and the user that owns uploads."""

    container_id: str
    image: str
    env: Dict[str, str]
    owner: tuple  # (uid, gid) of the container's user


async def _in_thread(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, lambda: function(*args, **kwargs))


def _describe(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _text(data: bytes) -> Optional[str]:
    return data.decode(errors="replace") if data else None


def _fault(kind: str, message: str, stdout: Optional[str] = None) -> SandboxExecResult:
    return SandboxExecResult(stdout=stdout, stderr=message, return_code=FAULT_CODE, error_type=kind)


class DockerEngineProvider(SandboxProvider):
    """NeMo Gym's ``SandboxProvider`` over a Docker engine (``client``, else ``docker.from_env()``).

    ``default_timeout_s`` bounds an ``exec`` given no timeout (``None``: unbounded);
    ``ready_timeout_s`` bounds ``create``'s wait for the first command to run.
    """

    name = "docker-engine-test"

    def __init__(
        self,
        client: Any = None,
        *,
        default_timeout_s: Optional[float] = None,
        ready_timeout_s: float = 60.0,
        kill_grace_s: float = 10.0,
        labels: Optional[Dict[str, str]] = None,
    ) -> None:
        self._client = client
        self.labels = {**(labels or {}), **LABELS}
        self._owns_client = client is None
        self.default_timeout_s = default_timeout_s
        self.ready_timeout_s = ready_timeout_s
        self.kill_grace_s = kill_grace_s

    async def _engine(self) -> Any:
        if self._client is None:
            self._client = await _in_thread(docker.from_env, timeout=120)
        return self._client

    # -- lifecycle ---------------------------------------------------------------------------------

    async def create(self, spec: SandboxSpec) -> SandboxHandle:
        if not spec.image:
            raise SandboxCreateError("spec.image is required by the Docker engine provider")
        options = dict(spec.provider_options or {})
        unknown = sorted(set(options) - OPTIONS)
        if unknown:
            raise SandboxCreateError(f"unknown provider_options {unknown}; known: {sorted(OPTIONS)}")
        if spec.entrypoint is not None:
            raise SandboxCreateError("spec.entrypoint is not supported: the container runs `sleep infinity`")
        client = await self._engine()
        run: Dict[str, Any] = dict(
            entrypoint=["sleep", "infinity"],
            detach=True,
            init=True,  # reaps what a killed command orphans
            environment=dict(spec.env),
            labels={**{str(k): str(v) for k, v in (options.get("labels") or {}).items()}, **self.labels},
            healthcheck={"test": ["NONE"]},
            name=f"nemo-gym-provider-{uuid.uuid4().hex[:12]}",
        )
        if spec.workdir:
            run["working_dir"] = spec.workdir  # the engine makes it when the image lacks it
        if options.get("volumes"):
            run["volumes"] = dict(options["volumes"])
        if options.get("network_mode"):
            run["network_mode"] = str(options["network_mode"])
        if options.get("user") is not None:
            run["user"] = str(options["user"])
        run.update(await self._limits(client, spec.resources))
        try:
            container = await _in_thread(client.containers.run, spec.image, **run)
        except Exception as error:
            raise SandboxCreateError(f"cannot start a container of {spec.image}: {_describe(error)}") from error
        handle = SandboxHandle(
            sandbox_id=container.id,
            provider_name=self.name,
            raw=DockerContainer(container.id, spec.image, dict(spec.env), (0, 0)),
        )
        try:
            handle.raw.owner = await self._ready(handle)
        except BaseException:
            await self.close(handle)
            raise
        return handle

    async def _limits(self, client: Any, resources: Union[SandboxResources, Any]) -> Dict[str, Any]:
        limits: Dict[str, Any] = {}
        if not isinstance(resources, SandboxResources):
            resources = SandboxResources.from_mapping(resources)
        if resources.disk_gib is not None or resources.gpu:
            raise SandboxCreateError("disk_gib and gpu are not supported by the Docker engine provider")
        if resources.cpu is not None:
            engine_cpus = (await _in_thread(client.info)).get("NCPU") or os.cpu_count() or 1
            limits["nano_cpus"] = round(min(float(resources.cpu), float(engine_cpus)) * 1_000_000_000)
        if resources.memory_mib is not None:
            limits["mem_limit"] = int(resources.memory_mib) * 1024 * 1024
        return limits

    async def _ready(self, handle: SandboxHandle) -> tuple:
        """Waits until a command runs in the container; returns the (uid, gid) of its user."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.ready_timeout_s
        while True:
            probe = await self.exec(handle, 'printf "%s %s" "$(id -u)" "$(id -g)"', timeout_s=30)
            fields = (probe.stdout or "").split()
            if probe.return_code == 0 and len(fields) == 2 and all(field.isdigit() for field in fields):
                return int(fields[0]), int(fields[1])
            if (probe.error_type == "sandbox" and "stopped under" in (probe.stderr or "")) or loop.time() >= deadline:
                raise SandboxCreateError(
                    f"the container of {handle.raw.image} did not run a command: "
                    f"{probe.return_code} {(probe.stderr or probe.stdout or '').strip()[-500:]}"
                )
            await asyncio.sleep(0.2)

    async def status(self, handle: SandboxHandle) -> SandboxStatus:
        client = await self._engine()
        try:
            state = (await _in_thread(client.api.inspect_container, handle.raw.container_id))["State"]
        except docker.errors.NotFound:
            return SandboxStatus.STOPPED
        except Exception:
            return SandboxStatus.UNKNOWN
        return {
            "running": SandboxStatus.RUNNING,
            "created": SandboxStatus.STARTING,
            "restarting": SandboxStatus.STARTING,
            "exited": SandboxStatus.STOPPED,
            "removing": SandboxStatus.STOPPED,
            "dead": SandboxStatus.ERROR,
        }.get(str(state.get("Status")), SandboxStatus.UNKNOWN)

    async def close(self, handle: SandboxHandle) -> None:
        client = await self._engine()
        try:
            await _in_thread(client.api.remove_container, handle.raw.container_id, force=True)
        except docker.errors.NotFound:
            pass  # already gone
        except docker.errors.APIError as error:
            if "already in progress" not in str(error):
                raise

    async def aclose(self) -> None:
        if self._owns_client and self._client is not None:
            client, self._client = self._client, None
            await _in_thread(client.close)

    # -- commands ----------------------------------------------------------------------------------

    async def exec(
        self,
        handle: SandboxHandle,
        command: str,
        *,
        cwd: Optional[str] = None,
        env: Optional[Dict[str, str]] = None,
        timeout_s: Optional[Union[int, float]] = None,
        user: Optional[Union[str, int]] = None,
    ) -> SandboxExecResult:
        try:
            client = await self._engine()
        except Exception as error:
            return _fault("sandbox", f"the Docker engine is unreachable: {_describe(error)}")
        api = client.api
        container_id = handle.raw.container_id
        mark = f"{EXEC_MARK}={secrets.token_hex(12)}"
        environment = {**(env or {}), EXEC_MARK: mark.split("=", 1)[1]}
        timeout = timeout_s if timeout_s is not None else self.default_timeout_s

        def run() -> tuple:
            created = api.exec_create(
                container_id,
                ["sh", "-c", command],
                stdout=True,
                stderr=True,
                workdir=cwd or None,
                environment=environment,
                user="" if user is None else str(user),
            )
            stdout, stderr = b"", b""
            for out, err in api.exec_start(created["Id"], stream=True, demux=True):
                stdout = (stdout + (out or b""))[-MAX_OUTPUT_BYTES:]
                stderr = (stderr + (err or b""))[-MAX_OUTPUT_BYTES:]
            return api.exec_inspect(created["Id"]).get("ExitCode"), stdout, stderr

        work = asyncio.ensure_future(_in_thread(run))
        try:
            code, stdout, stderr = await asyncio.wait_for(asyncio.shield(work), timeout)
        except asyncio.TimeoutError:
            killed = await self._kill(container_id, mark)
            try:  # the stream ends once its processes are dead
                await asyncio.wait_for(work, self.kill_grace_s)
            except BaseException:
                LOGGER.warning("an exec past its timeout in %s did not end once killed", container_id[:12])
            return _fault("timeout", f"the command outlived its timeout of {timeout} s ({killed})")
        except Exception as error:  # the SDK's errors and requests' ones
            return _fault("sandbox", f"exec in {container_id[:12]} failed: {_describe(error)}")
        # The engine gives the exec a code even when the container died under it (137 when removed),
        # and may still call the container running for a moment: a command killed by a signal waits
        # for the container's state to settle.
        running, why = await self._running(api, container_id)
        settle = asyncio.get_running_loop().time() + (SETTLE_S if isinstance(code, int) and code > 128 else 0)
        while running and asyncio.get_running_loop().time() < settle:
            await asyncio.sleep(0.1)
            running, why = await self._running(api, container_id)
        if not running:
            return _fault("sandbox", f"the container stopped under the command: {why}", _text(stdout))
        if not isinstance(code, int):
            return _fault("sandbox", f"the engine gave no exit code for the exec ({code!r})", _text(stdout))
        return SandboxExecResult(stdout=_text(stdout), stderr=_text(stderr), return_code=code)

    async def _running(self, api: Any, container_id: str) -> tuple:
        try:
            state = (await _in_thread(api.inspect_container, container_id))["State"]
        except docker.errors.NotFound:
            return False, "it was removed"
        except Exception as error:
            return False, _describe(error)
        return bool(state.get("Running")) and state.get("Status") == "running", str(state.get("Status"))

    async def _kill(self, container_id: str, mark: str) -> str:
        """Kills the processes of the exec marked ``mark`` (as root, in the container); a summary."""
        client = await self._engine()

        def kill() -> str:
            created = client.api.exec_create(container_id, ["sh", "-c", _KILL, "kill", mark], user="0")
            output = client.api.exec_start(created["Id"])
            return (output or b"").decode(errors="replace").strip() or "nothing to kill"

        try:
            return await asyncio.wait_for(_in_thread(kill), self.kill_grace_s)
        except BaseException as error:  # a lost container: nothing left to kill
            return f"could not kill: {_describe(error)}"

    # -- files -------------------------------------------------------------------------------------

    async def upload_file(self, handle: SandboxHandle, source_path: Path, target_path: str) -> None:
        """Writes one host file at ``target_path`` (parents made as needed), owned by the container's
        user, with the source's mode."""
        if not target_path.startswith("/"):
            raise ValueError(f"the target must be an absolute path: {target_path!r}")
        data = Path(source_path).read_bytes()
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            info = tarfile.TarInfo(posixpath.normpath(target_path).lstrip("/"))
            info.size, info.mode = len(data), Path(source_path).stat().st_mode & 0o7777
            info.uid, info.gid = handle.raw.owner
            info.mtime = int(Path(source_path).stat().st_mtime)
            archive.addfile(info, io.BytesIO(data))
        client = await self._engine()
        if not await _in_thread(client.api.put_archive, handle.raw.container_id, "/", buffer.getvalue()):
            raise RuntimeError(f"the engine refused the upload to {target_path}")

    async def download_file(self, handle: SandboxHandle, source_path: str, target_path: Path) -> None:
        client = await self._engine()

        def read() -> bytes:
            stream, _ = client.api.get_archive(handle.raw.container_id, source_path)
            return b"".join(stream)

        data = await _in_thread(read)
        with tarfile.open(fileobj=io.BytesIO(data)) as archive:
            member = archive.next()
            if member is None or not member.isfile():
                raise FileNotFoundError(f"{source_path} is not a regular file in the container")
            extracted = archive.extractfile(member)
            assert extracted is not None
            content = extracted.read()
        target_path = Path(target_path)
        target_path.parent.mkdir(parents=True, exist_ok=True)
        target_path.write_bytes(content)


def list_sandboxes(client: Any, label: str = "nemo-gym.sandbox=1") -> List[str]:
    """The ids of every container with ``label`` (``name=value``; every sandbox's by default), stopped ones too."""
    return [container.id for container in client.containers.list(all=True, filters={"label": label})]


__all__ = ["FAULT_CODE", "LABELS", "DockerContainer", "DockerEngineProvider", "list_sandboxes"]
