"""``DockerSandbox``: verification in a container of a given image, through the Docker SDK.

The container starts with ``sleep infinity`` as its entrypoint: a prebuilt image's ENTRYPOINT and
HEALTHCHECK do not run, as the contract says of an image NeMo Gym has no record of. Given the
image's record (``image_build.image_record``: an image built here), its ENTRYPOINT runs with
``sh -c "sleep infinity"`` in place of its CMD and its HEALTHCHECK is awaited. The SDK is
synchronous, so each call runs in a thread of its own (``_threads``); one call is one round trip to
the engine.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import io
import json
import math
import re
import socket
import tarfile
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Tuple, TypeVar

from nemo_gym.data.tasks.harbor._threads import Calls, in_thread
from nemo_gym.data.tasks.harbor.sandboxes.base import (
    CLEAN_SHELL_OPTIONS,
    MAX_EXEC_OUTPUT_BYTES,
    CopyStalled,
    ExecResult,
    ExecTimeout,
    OutputTooLarge,
    PipedResult,
    SandboxError,
    User,
    causes,
    clean_shell_env,
    names_root,
    warn_killable_keep_alive,
)
from nemo_gym.data.tasks.harbor.workdir import DEFAULT_WORKDIR, mounts_refusal

try:
    import docker
    import docker.errors
    import docker.utils.socket
    from requests.exceptions import ReadTimeout  # the Docker SDK's own dependencies
    from urllib3.exceptions import ReadTimeoutError

    _READ_TIMEOUTS: Tuple[type, ...] = (ReadTimeout, ReadTimeoutError, socket.timeout)
except ImportError:  # pragma: no cover - exercised only without the optional extra
    docker = None
    _READ_TIMEOUTS = (socket.timeout,)

if TYPE_CHECKING:
    from nemo_gym.data.tasks.harbor.image_build import ImageRecord

T = TypeVar("T")

# The variables that tell common thread pools how many CPUs to use (OpenMP and the BLAS libraries
# NumPy, SciPy and PyTorch load; numexpr; Rust's rayon; Polars; Go's runtime). Most size their
# pools from the host's CPU count, not the container's CPU limit; with a limit, each is set to it.
CPU_COUNT_HINTS = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "RAYON_NUM_THREADS",
    "POLARS_MAX_THREADS",
    "GOMAXPROCS",
)
# What entrypoint_output keeps of the container's log: its tail.
MAX_ENTRYPOINT_OUTPUT_BYTES = 1 << 20
_ENTRYPOINT_LINES = 20  # the lines of its output an entrypoint's failure quotes
# The image's ENTRYPOINT runs in the foreground of this keep-alive, with the keep-alive command as
# its arguments (its CMD): one that exits 0 leaves the sandbox running; one that fails stops the
# container with its status. Its output is the container's log, and nothing else is.
_KEEP_ALIVE = '"$@"; status=$?; if [ "$status" -ne 0 ]; then exit "$status"; fi; exec sleep infinity'
_KEEP_ALIVE_COMMAND = ["sh", "-c", "sleep infinity"]
# What grading needs free in the container at once, below which a grading that failed there is the
# container's own exhaustion (``exhaustion``): about a dozen processes (its shell, a tool it runs,
# timeout, bash, the runner and its key holder, test.sh's stat), and room for a shell, tar and a bare
# Python runner (some 30-40 MiB), with a margin.
GRADING_PIDS = 16
# Processes (threads count) a container may hold unless its caller says otherwise: an agent's fork
# bomb stays in its own container, where grading that finds no pid left scores 0
# (``exhaustion``), instead of taking the host's pids and masking the neighbours' samples. Far above
# what a build, a test suite or a browser uses on the few CPUs a sandbox gets.
DEFAULT_PIDS_LIMIT = 4096
GRADING_MEMORY_BYTES = 64 << 20
NO_NETWORK = ("none", "no-network")  # Docker's name, and Harbor's
DEFAULT_NETWORK = ("public",)
_SECOND_NS = 1_000_000_000
FEEDER_THREAD = "nemo-gym-exec-stdin"  # the thread that writes a piped exec's stdin


def _shell(command: str, clean_shell: bool) -> List[str]:
    # A clean shell is found by its absolute path: the container's PATH may name the agent's folders.
    return ["/bin/bash", *CLEAN_SHELL_OPTIONS, "-c", command] if clean_shell else ["bash", "-c", command]


def _feed(connection: Any, data: bytes) -> None:
    """Writes ``data`` to an exec's attached connection, then closes its write side (the command's
    end of file). A command that exits without reading it all closes the connection: that is fine."""
    try:
        connection.sendall(data)
        connection.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def exhaustion(
    stats: Mapping[str, Any],
    memory_limit: int,
    *,
    oom_kills: int = 0,
    fork_failed: bool = False,
    stopped_by_oom: bool = False,
) -> Optional[str]:
    """Why a container has no room left for grading, or ``None``, from the engine's ``stats`` of it,
    its ``memory_limit`` (bytes, 0 for none), the OOM kills in it since grading began, whether
    grading's output says a fork failed for want of a process (``EAGAIN``) and whether the container
    has stopped with the engine's record that the kernel killed it for want of memory:
    - under a pids limit: grading could not fork, or fewer than ``GRADING_PIDS`` processes are free;
    - under a memory limit: the container stopped killed for want of memory (at any time: a fill of
      the agent's made its init the OOM killer's choice, red team 91), the kernel killed a process
      for want of memory during grading, or less than ``GRADING_MEMORY_BYTES`` is left that it could
      reclaim (usage past the page cache of files, active or not: shared memory and tmpfs files, on
      the anonymous lists, which no process owns and no OOM kill frees, count).
    The events and the failed fork count even where the stats show room again: a process of the
    agent's may free what it held the moment grading failed, before the host asks."""
    pids = stats.get("pids_stats") or {}
    current, limit = pids.get("current"), pids.get("limit")
    if isinstance(limit, int) and 0 < limit < 1 << 62:
        if fork_failed:
            return f"grading could not start a process under its pids limit of {limit}"
        if isinstance(current, int) and limit - current < GRADING_PIDS:
            return f"{current} of its {limit} processes are in use"
    if memory_limit <= 0:
        return None
    if stopped_by_oom:
        return f"the kernel killed the container for want of memory under its {memory_limit >> 20} MiB limit"
    if oom_kills > 0:
        return f"the kernel killed {oom_kills} process(es) for want of memory under its {memory_limit >> 20} MiB limit"
    memory = stats.get("memory_stats") or {}
    usage, detail = memory.get("usage"), memory.get("stats") or {}
    cache = 0
    for lru in ("active_file", "inactive_file"):
        pages = detail.get(f"total_{lru}", detail.get(lru))  # cgroup v1, v2
        cache += pages if isinstance(pages, int) else 0
    if isinstance(usage, int):
        used = usage - cache
        if memory_limit - used < GRADING_MEMORY_BYTES:
            return f"{used >> 20} MiB of its {memory_limit >> 20} MiB of memory cannot be reclaimed"
    return None


def _is_link(container: Any, path: str) -> Optional[bool]:
    """Whether ``path`` is a symbolic link in ``container``, by the engine's stat of it (which works
    paused or stopped too); ``None`` where it has none (missing, a link loop)."""
    api = container.client.api
    answer = api.head(api._url("/containers/{0}/archive", container.id), params={"path": path})
    if not answer.ok:
        return None
    header = answer.headers.get("X-Docker-Container-Path-Stat", "")
    return bool(header and json.loads(base64.b64decode(header)).get("linkTarget"))


# How soon after an OOM kill the container's end must come to be that kill's: the init the kernel takes
# ends it at once; a process killed for memory long before says nothing of a later end (red team 93).
OOM_END_WINDOW_SEC = 2.0


def killed_for_memory(events: List[Tuple[Any, float]]) -> bool:
    """Whether a stopped container's end was the kernel's for want of memory, from the engine's events
    of it since it started, in order, as ``(action, seconds)`` (``oom``, ``kill``, ``stop``, ``die``):
    its last end came within ``OOM_END_WINDOW_SEC`` of an OOM kill, with no kill or stop of the
    engine's between them."""
    ends = [index for index, (action, _) in enumerate(events) if action == "die"]
    if not ends:
        return False
    end = ends[-1]
    ooms = [index for index, (action, _) in enumerate(events[:end]) if action == "oom"]
    if not ooms:
        return False
    between = (action for action, _ in events[ooms[-1] + 1 : end])
    return events[end][1] - events[ooms[-1]][1] <= OOM_END_WINDOW_SEC and not any(
        action in ("kill", "stop") for action in between
    )


def _event(event: Mapping[str, Any]) -> Tuple[Any, float]:
    """An engine event's action and time (seconds, from its nanoseconds where it gives them)."""
    nanoseconds = event.get("timeNano")
    seconds = nanoseconds / 1e9 if isinstance(nanoseconds, int) else float(event.get("time") or 0)
    return event.get("Action") or event.get("status"), seconds


# The engine's clock as ``/info`` gives it (RFC 3339, to the nanosecond, "Z" or an offset).
_SYSTEM_TIME = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)", re.IGNORECASE)


def engine_seconds(system_time: Any) -> Optional[float]:
    """The engine's ``SystemTime`` (``/info``) as seconds since the epoch, or ``None`` if it is not
    one: the engine's events are asked for by its own clock, which may differ from this host's."""
    match = _SYSTEM_TIME.fullmatch(system_time) if isinstance(system_time, str) else None
    if match is None:
        return None
    whole, fraction, zone = match.groups()
    try:
        moment = datetime.datetime.fromisoformat(whole + ("+00:00" if zone.upper() == "Z" else zone))
    except ValueError:
        return None
    return moment.timestamp() + float(fraction or 0)


def _single_file_tar(data: bytes, name: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = tarfile.TarInfo(name)
        info.size, info.mode = len(data), 0o600  # readable by root alone until grading moves it
        archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _default_user(image_user: str) -> Optional[str]:
    """Who a command that names no user runs as: the image's ``USER``, ``None`` for root (or unset)."""
    return None if not image_user or names_root(image_user) else image_user


def _cpu_hints(cpus: Optional[float], image_env: Mapping[str, str]) -> Dict[str, str]:
    """``CPU_COUNT_HINTS`` at the CPU limit, minus those the image's own ENV sets (``env`` is laid
    over them by the caller)."""
    if cpus is None:
        return {}
    count = str(max(1, math.floor(cpus)))
    return {name: count for name in CPU_COUNT_HINTS if name not in image_env}


class DockerSandbox:
    """A container of ``image``; use it as an async context manager (``close`` removes it).

    ``workspace`` (a host folder) is copied into ``workdir`` when the container starts: the task's
    working directory, else the image's ``WORKDIR``, else ``DEFAULT_WORKDIR``. ``mounts`` copies more
    host folders in (``{sandbox_path: host_folder}``: the agent's state beyond the workspace);
    ``volumes`` are extra bind mounts (``{host_path: {"bind": path, "mode": "ro"}}``, the SDK's shape).
    A command that names no user runs as the image's ``USER`` (``default_user``); the container itself
    runs as root unless the image's own ENTRYPOINT or HEALTHCHECK runs (``_run_options`` says why).

    Options, all off by default but the pids limit:
    - ``record``: the image's ``ImageRecord``. With a non-empty ENTRYPOINT, the container runs it
      with ``sh -c "sleep infinity"`` as its arguments, in the foreground of a keep-alive
      (``/bin/sh``), instead of plain ``sleep infinity``: an entrypoint that exits 0 leaves the
      sandbox running, one that fails stops the container (``entrypoint_alive`` turns false). With a
      HEALTHCHECK (whatever the ENTRYPOINT, ``ENTRYPOINT []`` included, as Harbor's ``up --wait``),
      ``start`` waits until it reports healthy: for ``health_timeout_s``, else for as long as
      Docker takes to call it unhealthy (start period + (retries + 1) x (interval + timeout)).
      Without a record the image's HEALTHCHECK is turned off.
    - ``network``: ``"none"`` (or Harbor's ``"no-network"``) gives the container no network but
      loopback; ``None`` (or ``"public"``) the engine's default. Anything else (an allowlist) is
      refused: the Docker sandbox cannot enforce one.
    - ``pids_limit``: the most processes (threads count) the container may hold, ``DEFAULT_PIDS_LIMIT``
      unless given; ``None`` for the engine's default, usually none (no task key sets it; a guard
      for the host: without one, an agent's fork bomb takes the host's pids).
    - ``cpus``, ``memory_mb``: the container's limits (``[environment].cpus``/``memory_mb``); a CPU
      limit above the engine's CPU count is lowered to it (the engine refuses more). A CPU limit
      also sets ``CPU_COUNT_HINTS`` to it, rounded down (at least 1), each unless ``env`` or the
      image's own ENV (the record's, else the image's as the engine reports it) sets it.
    A ``start`` that fails removes the container.
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
        record: Optional[ImageRecord] = None,
        network: Optional[str] = None,
        cpus: Optional[float] = None,
        memory_mb: Optional[int] = None,
        health_timeout_s: Optional[float] = None,
        pids_limit: Optional[int] = DEFAULT_PIDS_LIMIT,
    ) -> None:
        if docker is None and client is None:
            raise SandboxError(
                "the Docker sandbox needs the Docker SDK: pip install 'nemo-gym-harbor-verifiers[docker]'"
            )
        if network is not None and network not in NO_NETWORK + DEFAULT_NETWORK:
            raise SandboxError(
                f"the Docker sandbox cannot enforce network {network!r}: it runs a container with no network "
                "(network_mode 'no-network') or with the engine's default one, never behind an allowlist"
            )
        if cpus is not None and (isinstance(cpus, bool) or not math.isfinite(cpus) or cpus <= 0):
            raise ValueError(f"cpus must be a number above 0, not {cpus!r}")
        if memory_mb is not None and (isinstance(memory_mb, bool) or int(memory_mb) != memory_mb or memory_mb <= 0):
            raise ValueError(f"memory_mb must be a whole number above 0, not {memory_mb!r}")
        if pids_limit is not None and (
            isinstance(pids_limit, bool) or not isinstance(pids_limit, int) or pids_limit <= 0
        ):
            raise ValueError(f"pids_limit must be a whole number above 0, not {pids_limit!r}")
        self.record = record
        # The image's ENTRYPOINT runs only from its record, and ENTRYPOINT [] turns it off.
        self.runs_entrypoint = bool(record is not None and record.entrypoint)
        self._network_none = network in NO_NETWORK
        self._cpus = cpus
        self._memory_mb = memory_mb
        self._pids_limit = pids_limit
        self._health_timeout_s = health_timeout_s
        self._entrypoint_log: Optional[str] = None  # kept when a failed start removes the container
        self.image = image
        self.workspace = workspace
        self._declared_workdir = workdir
        self.workdir = workdir or DEFAULT_WORKDIR  # the image's WORKDIR, once the container runs
        self._mounts = {path: Path(host) for path, host in (mounts or {}).items()}
        self._refuse_mounts(workdir)
        self._env = dict(env or {})
        self._volumes = dict(volumes or {})
        self._labels = {"nemo-gym.sandbox": "1", **(labels or {})}
        self._client = client
        self._container: Any = None
        self.default_user: Optional[User] = None  # the image's USER, once the container runs
        self.environment: Dict[str, str] = {}  # what every exec inherits, once the container runs
        self._execs = Calls()

    def _refuse_mounts(self, workdir: Optional[str]) -> None:
        """A mount is copied in, never bound, but one at the verifier's folders would be emptied, and
        one at (or above) the working directory would replace the workspace: refused alike."""
        refusal = mounts_refusal(self._mounts, workdir)
        if refusal is not None:
            raise SandboxError(refusal)

    async def settled(self) -> None:
        """Returns once every exec this sandbox started has ended, those a caller gave up on included:
        the engine cannot stop an exec, so an abandoned grading runs on in the container."""
        await self._execs.settled()

    async def __aenter__(self) -> DockerSandbox:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self) -> None:
        try:
            if self._client is None:
                self._client = await in_thread(docker.from_env)
            cpus = await self._cpu_limit()
            image_user, image_env = await self._image_config()
            self.default_user = _default_user(image_user)
            environment = {**_cpu_hints(cpus, image_env), **self._env}
            options = self._run_options(environment, cpus)
            self._container = await in_thread(self._client.containers.run, self.image, **options)
        except Exception as error:  # the SDK raises its own errors and requests' ones
            raise SandboxError(f"cannot start a container of {self.image}: {error}") from error
        try:
            await self._settle()
        except BaseException as error:
            failure = await self._keep_entrypoint_output() if isinstance(error, Exception) else None
            await self.close()
            if failure is not None:
                raise SandboxError(failure) from error
            raise

    def _run_options(self, environment: Dict[str, str], cpus: Optional[float]) -> Dict[str, Any]:
        options: Dict[str, Any] = dict(
            init=True,  # an init that reaps: orphaned zombies would otherwise pile up for good
            # A set-id program written during grading (the agent's program, run by verify) must
            # not lift the agent to the verifier's user, or to root, afterwards.
            security_opt=["no-new-privileges"],
            detach=True,
            environment=environment,
            volumes=self._volumes,
            labels=self._labels,
            name=f"nemo-gym-sandbox-{uuid.uuid4().hex[:12]}",
        )
        if self.runs_entrypoint:
            assert self.record is not None and self.record.entrypoint
            options["entrypoint"] = ["/bin/sh", "-c", _KEEP_ALIVE, "nemo-gym-entrypoint", *self.record.entrypoint]
            options["command"] = list(_KEEP_ALIVE_COMMAND)
        else:
            options["entrypoint"] = ["sleep", "infinity"]
        if self._healthcheck() is None:
            options["healthcheck"] = {"test": ["NONE"]}  # no record, no HEALTHCHECK
        if self.default_user is not None:
            # Docker gives the execs of a container whose user is not root no capabilities, and
            # under no-new-privileges a root exec cannot gain them: grading could not hand /tests
            # over, and every sample was masked. So the container runs as root (its keep-alive
            # too, which the agent could otherwise kill), and a command that names no user runs
            # as the image's USER. Only an ENTRYPOINT or a HEALTHCHECK of the image's own, which
            # Docker runs as the container's user and which must not run as root beside the
            # agent's files, keeps the container the USER's, without no-new-privileges.
            if self.runs_entrypoint or self._healthcheck() is not None:
                options["security_opt"] = []
                warn_killable_keep_alive(self.image, self.default_user)
            else:
                options["user"] = "0:0"
        if self._network_none:
            options["network_mode"] = "none"
        if cpus is not None:
            options["nano_cpus"] = round(cpus * _SECOND_NS)
        if self._memory_mb is not None:
            options["mem_limit"] = int(self._memory_mb) * 1024 * 1024
        if self._pids_limit is not None:
            options["pids_limit"] = self._pids_limit
        return options

    def _healthcheck(self) -> Optional[Dict[str, Any]]:
        """The HEALTHCHECK ``start`` awaits: the record's, and none without a record."""
        return self.record.healthcheck if self.record is not None else None

    async def _cpu_limit(self) -> Optional[float]:
        """The CPU limit asked for, at most the engine's CPU count (the engine refuses more)."""
        if self._cpus is None:
            return None
        info = await in_thread(self._client.info)
        available = info.get("NCPU") if isinstance(info, dict) else None
        return min(self._cpus, float(available)) if isinstance(available, int) and available > 0 else self._cpus

    async def _image_config(self) -> Tuple[str, Dict[str, str]]:
        """The image's ``USER`` (``""`` when unset) and ENV: the record's, else the engine's."""
        if self.record is not None:
            return self.record.user, self.record.env
        attrs = await in_thread(self._client.api.inspect_image, self.image)
        config = attrs.get("Config") or {}
        entries = config.get("Env") or []
        return config.get("User") or "", dict(entry.split("=", 1) for entry in entries if "=" in entry)

    async def _settle(self) -> None:
        """After ``containers.run``: the HEALTHCHECK awaited, the working directory made and filled."""
        if self._healthcheck() is not None:
            await self._await_healthy()
        config = (getattr(self._container, "attrs", None) or {}).get("Config") or {}
        self.environment = dict(entry.split("=", 1) for entry in config.get("Env") or [] if "=" in entry)
        image_workdir = config.get("WorkingDir") or ""
        if not self._declared_workdir and image_workdir not in ("", "/"):
            self.workdir = image_workdir
        self._refuse_mounts(self.workdir)  # the one it runs in, declared or not
        made = await self._exec_argv(
            ["mkdir", "-p", self.workdir, *self._mounts], cwd="/", env=None, timeout_s=60, user=self.admin_user
        )
        if made.return_code != 0:
            raise SandboxError(f"cannot create the working directory {self.workdir}: {made.stdout.strip()}")
        if self.workspace is not None:
            await self._put_folder(Path(self.workspace), self.workdir)
        for path, host in self._mounts.items():  # copies: the sandbox never writes back to the host
            await self._put_folder(host, path)
        if self.runs_entrypoint and not await self.entrypoint_alive():
            raise SandboxError("the image's ENTRYPOINT stopped the container")

    def _health_bound(self, healthcheck: Mapping[str, Any]) -> float:
        """How long Docker may take to call the container unhealthy, in seconds (its defaults for
        what the HEALTHCHECK leaves unset), plus a little; or ``health_timeout_s``."""
        if self._health_timeout_s is not None:
            return self._health_timeout_s

        def seconds(key: str, default: float) -> float:
            value = healthcheck.get(key) or 0
            return value / _SECOND_NS if value > 0 else default

        retries = healthcheck.get("Retries") or 3
        return seconds("StartPeriod", 0.0) + (retries + 1) * (seconds("Interval", 30.0) + seconds("Timeout", 30.0)) + 5

    async def _await_healthy(self) -> None:
        healthcheck = self._healthcheck() or {}
        bound = self._health_bound(healthcheck)
        container = self._require()
        loop = asyncio.get_running_loop()
        deadline, delay = loop.time() + bound, 0.05
        while True:
            await in_thread(container.reload)
            state = container.attrs.get("State") or {}
            if not state.get("Running"):
                raise SandboxError("the container stopped before its HEALTHCHECK reported healthy")
            health = state.get("Health") or {}
            status = health.get("Status")
            if status == "healthy":
                return
            if status == "unhealthy":
                probes = health.get("Log") or [{}]
                output = str(probes[-1].get("Output") or "").strip()[-2000:]
                raise SandboxError(
                    f"the image's HEALTHCHECK reported {self.image} unhealthy"
                    + (f"; its last probe said: {output}" if output else "")
                )
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise SandboxError(f"the image's HEALTHCHECK did not report {self.image} healthy within {bound:g} s")
            await asyncio.sleep(min(delay, remaining))
            delay = min(delay * 2, 0.5)

    async def _keep_entrypoint_output(self) -> Optional[str]:
        """Before a failed start removes the container: keeps the image's ENTRYPOINT's output for
        ``entrypoint_output``, and says why the start failed when the entrypoint stopped the
        container (with the end of its output); ``None`` when it did not."""
        if not self.runs_entrypoint or self._container is None:
            return None
        try:
            self._entrypoint_log = await self.entrypoint_output()
            await in_thread(self._container.reload)
            state = self._container.attrs.get("State") or {}
        except Exception:
            return None
        if state.get("Running"):
            return None
        lines = self._entrypoint_log.strip().splitlines()[-_ENTRYPOINT_LINES:]
        said = ("; its last lines:\n" + "\n".join(lines)) if lines else " without output"
        return f"the ENTRYPOINT of {self.image} exited with status {state.get('ExitCode')}{said}"

    async def entrypoint_output(self) -> str:
        """The container's log (the image's ENTRYPOINT's output, stdout and stderr), its last
        ``MAX_ENTRYPOINT_OUTPUT_BYTES``; after a start that failed, what it was then; else ``""``
        once the container is gone."""
        container = self._container
        if container is None:
            return self._entrypoint_log or ""

        def read() -> str:
            kept = bytearray()
            for chunk in container.logs(stdout=True, stderr=True, stream=True, follow=False):
                kept += chunk
                if len(kept) > 2 * MAX_ENTRYPOINT_OUTPUT_BYTES:  # trimmed now and then: linear in the log
                    del kept[:-MAX_ENTRYPOINT_OUTPUT_BYTES]
            return bytes(kept[-MAX_ENTRYPOINT_OUTPUT_BYTES:]).decode(errors="replace")

        try:
            return await in_thread(read)
        except Exception as error:
            raise SandboxError(f"cannot read the container's log: {error}") from error

    async def entrypoint_alive(self) -> bool:
        """Whether the container still runs: false once the image's ENTRYPOINT failed (or the
        container was lost or closed). An entrypoint that exited 0 leaves it running."""
        container = self._container
        if container is None:
            return False
        try:
            await in_thread(container.reload)
        except Exception:
            return False
        return bool((container.attrs.get("State") or {}).get("Running"))

    async def halt(self) -> None:
        """Kills every process of a running container and leaves its files, which the engine's
        archive call reads from a stopped container as from a running one: nothing of the agent's
        can change a file as it is copied, or hold a lease that makes the engine's open of it wait."""
        container = self._require()

        def kill() -> None:
            container.reload()
            if container.status == "running":
                container.kill()
                container.wait(timeout=60)

        await in_thread(kill)

    async def exhausted(self, *, since: float, fork_failed: bool = False) -> Optional[str]:
        """Why the container's own pids or memory limit left grading no room (``exhaustion``), or
        ``None``: asked once grading, begun at ``since`` (``time.time()``), has failed there; from the
        container's limits and state, the engine's stats and its record of OOM kills since then, by the
        engine's clock (four round trips, the last waiting a second for the engine's clock to pass the
        present)."""
        container = self._require()

        def read() -> Optional[str]:
            container.reload()
            memory_limit = int((container.attrs.get("HostConfig") or {}).get("Memory") or 0)
            stats = self._client.api.stats(container.id, stream=False, one_shot=True) or {}
            kills = 0
            if memory_limit > 0:
                # By the engine's clock (ahead, an OOM kill of the agent's own time would count;
                # behind, the events call would wait out the difference), read mid-call.
                asked = time.time()
                engine_now = engine_seconds(self._client.api.info().get("SystemTime"))
                skew = 0.0 if engine_now is None else engine_now - (asked + time.time()) / 2
                events = self._client.api.events(
                    since=f"{since + skew:.6f}",
                    until=f"{time.time() + skew + 1:.6f}",
                    filters={"container": container.id, "event": "oom"},
                )
                kills = sum(1 for _ in events)
            state = container.attrs.get("State") or {}
            stopped_by_oom = False
            if memory_limit > 0 and not state.get("Running", True) and state.get("OOMKilled") is True:
                # OOMKilled stays set from any kill in the container's life: an end long after the last OOM
                # kill, or after the engine's own stop or kill (a lost container), is no exhaustion (red
                # teams 92, 93).
                started = engine_seconds(state.get("StartedAt"))
                engine_now = engine_seconds(self._client.api.info().get("SystemTime"))
                if started is not None and engine_now is not None:
                    events = self._client.api.events(
                        since=f"{started:.6f}",
                        until=f"{engine_now + 1:.6f}",
                        filters={"container": container.id, "event": ["oom", "kill", "stop", "die"]},
                        decode=True,
                    )
                    stopped_by_oom = killed_for_memory([_event(event) for event in events])
            return exhaustion(
                stats, memory_limit, oom_kills=kills, fork_failed=fork_failed, stopped_by_oom=stopped_by_oom
            )

        return await in_thread(read)

    async def changes(self) -> Optional[List[Dict[str, Any]]]:
        """The container's files changed, added or deleted against its image (the engine's diff), or
        ``None`` once it no longer runs (a container lost in grading: nothing it changed speaks for
        the failure, red team 92): asked only once grading failed in it (``verification``), to tell
        the agent's doing from the image's."""
        container = self._require()

        def read() -> Optional[List[Dict[str, Any]]]:
            container.reload()
            if not (container.attrs.get("State") or {}).get("Running", False):
                return None
            return list(container.diff() or [])

        return await in_thread(read)

    async def links(self, paths: List[str]) -> List[str]:
        """Those of ``paths`` that are symbolic links in the container now (one stat call each)."""
        container = self._require()
        return await in_thread(lambda: [path for path in paths if _is_link(container, path)])

    async def pause(self) -> None:
        """Freezes every process of the container (the cgroup freezer): its files can be copied out
        while nothing of the agent's changes them. ``unpause`` thaws them."""
        await in_thread(self._require().pause)

    async def unpause(self) -> None:
        await in_thread(self._require().unpause)

    async def stop(self) -> None:
        """Stops the sandbox for good (a separate run is done with the agent's once its artifacts
        are out): the container is removed, as ``close`` does."""
        await self.close()

    async def close(self) -> None:
        """Removes the container with the anonymous volumes its image's ``VOLUME`` lines gave it (else one
        would stay on the engine per verification); named volumes the caller mounted stay."""
        if self._container is not None:
            container, self._container = self._container, None
            try:
                await in_thread(container.remove, force=True, v=True)
            except Exception:  # already gone: nothing left to clean
                pass

    @property
    def started(self) -> bool:
        """Whether the container runs (``start``, or ``async with``), and has not been closed."""
        return self._container is not None

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
        if clean_shell:
            env = clean_shell_env(env, self.environment)
        return await self._exec_argv(_shell(command, clean_shell), cwd=cwd, env=env, timeout_s=timeout_s, user=user)

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
        """``exec`` over the engine's attached connection: ``stdin`` goes in on it (then its write
        side closes, the command's end of file) while the output comes back on it, one round trip.
        The exit status is the engine's (another round trip), unless the output ends with
        ``exit_marker``: the command printed it last, and exited 0."""
        api = self._client.api
        argv = _shell(command, clean_shell)
        if clean_shell:
            env = clean_shell_env(env, self.environment)

        def run() -> PipedResult:
            exec_id = self._exec_create(argv, cwd, env, user, stdin=True)
            connection = api.exec_start(exec_id, socket=True)
            raw = getattr(connection, "_sock", connection)  # the SDK wraps the socket for reading
            feeder = threading.Thread(target=_feed, args=(raw, stdin), name=FEEDER_THREAD, daemon=True)
            feeder.start()
            stdout, stderr = bytearray(), b""
            try:
                for stream, data in docker.utils.socket.frames_iter(connection, tty=False):
                    if stream == docker.utils.socket.STDOUT:
                        stdout += data
                        if len(stdout) > stdout_limit:
                            raise OutputTooLarge(f"the command printed more than {stdout_limit} bytes")
                    else:
                        stderr = (stderr + data)[-MAX_EXEC_OUTPUT_BYTES:]
            finally:
                # A command that ended without reading its stdin leaves the feeder blocked in a
                # write that closing the connection does not wake; shutting the socket down does.
                try:
                    raw.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                connection.close()
                feeder.join(timeout=5)
            code = 0 if exit_marker and stdout.endswith(exit_marker) else self._exit_code(exec_id)
            return PipedResult(bytes(stdout), stderr.decode(errors="replace"), code)

        return await self._in_time(run, timeout_s)

    async def _exec_argv(
        self,
        argv: List[str],
        *,
        cwd: Optional[str],
        env: Optional[Mapping[str, str]],
        timeout_s: Optional[float],
        user: Optional[User],
    ) -> ExecResult:
        api = self._client.api

        def run() -> ExecResult:
            exec_id = self._exec_create(argv, cwd, env, user)
            stdout, stderr = b"", b""
            for out, err in api.exec_start(exec_id, stream=True, demux=True):
                stdout = (stdout + (out or b""))[-MAX_EXEC_OUTPUT_BYTES:]
                stderr = (stderr + (err or b""))[-MAX_EXEC_OUTPUT_BYTES:]
            code = self._exit_code(exec_id)
            return ExecResult(stdout.decode(errors="replace"), stderr.decode(errors="replace"), code)

        return await self._in_time(run, timeout_s)

    def _exec_create(
        self,
        argv: List[str],
        cwd: Optional[str],
        env: Optional[Mapping[str, str]],
        user: Optional[User],
        *,
        stdin: bool = False,
    ) -> str:
        created = self._client.api.exec_create(
            self._require().id,
            argv,
            stdout=True,
            stderr=True,
            stdin=stdin,
            workdir=cwd or self.workdir,
            environment=dict(env or {}),
            # No user named: the image's USER (the container may run as root; _run_options).
            user=str(self.default_user or "") if user is None else str(user),
        )
        return str(created["Id"])

    def _exit_code(self, exec_id: str) -> int:
        code = self._client.api.exec_inspect(exec_id).get("ExitCode")
        return -1 if code is None else int(code)

    async def _in_time(self, run: Callable[[], T], timeout_s: Optional[float]) -> T:
        self._require()
        try:
            return await asyncio.wait_for(self._execs.run(run), timeout_s)
        except asyncio.TimeoutError:
            raise ExecTimeout(f"the command outlived {timeout_s} s") from None
        except SandboxError:
            raise
        except Exception as error:
            if any(isinstance(cause, _READ_TIMEOUTS) for cause in causes(error)):
                # The engine did not answer within the client's timeout: a container whose processes
                # starve the exec's own start (the agent's thousands of spinners, red team 45) reads as
                # one that outlived the host's wait, as it would with a longer client timeout; never
                # as a fault of the sandbox, which would mask the agent's wrong answer on demand.
                raise ExecTimeout(f"the engine did not answer in time ({error})") from error
            raise SandboxError(f"exec in the container failed: {error}") from error

    async def upload_file(self, local_path: str, sandbox_path: str) -> None:
        folder, _, name = sandbox_path.rpartition("/")
        data = _single_file_tar(Path(local_path).read_bytes(), name)
        await self.put_archive(folder or "/", data)

    async def put_archive(self, folder: str, data: bytes) -> None:
        """Unpacks the tar ``data`` into ``folder`` through the engine: no tool inside the container."""
        container = self._require()
        try:
            if not await in_thread(container.put_archive, folder, data):
                raise SandboxError(f"upload into {folder} failed")
        except SandboxError:
            raise
        except Exception as error:
            raise SandboxError(f"upload into {folder} failed: {error}") from error

    async def get_archive(self, path: str, *, limit: int) -> bytes:
        """A tar of ``path`` through the engine, read up to ``limit`` bytes; ``CopyStalled``, with
        what came, when nothing more came within the client's timeout (the engine waits on an open
        of a file a process of the container holds a lease on)."""
        container = self._require()

        def read() -> bytes:
            chunks: List[bytes] = []
            size = 0
            stream: Any = None
            try:
                stream, _ = container.get_archive(path, chunk_size=1 << 16)
                for chunk in stream:
                    size += len(chunk)
                    if size > limit:
                        # Closed now: the engine holds the container's archive calls until this
                        # stream is read or gone, and the next artifact's would wait on it.
                        stream.close()
                        raise SandboxError(f"{path} is larger than {limit} bytes")
                    chunks.append(chunk)
            except Exception as error:
                if any(isinstance(cause, socket.timeout) for cause in causes(error)):
                    waited = getattr(getattr(container.client, "api", None), "timeout", None)
                    raise CopyStalled(
                        f"the copy of {path} stalled: nothing came for {waited} s", b"".join(chunks)
                    ) from error
                raise
            return b"".join(chunks)

        try:
            return await in_thread(read)
        except SandboxError:
            raise
        except Exception as error:
            raise SandboxError(f"download of {path} failed: {error}") from error

    async def parent_links(self, path: str) -> List[str]:
        """The folders above ``path``, as written, that are symbolic links, which the engine would
        follow (as root, in any state of the container, paused or stopped too): one stat call a folder,
        up to the first link."""
        container = self._require()
        parts = [part for part in path.split("/") if part]

        def look() -> List[str]:
            for depth in range(1, len(parts)):
                prefix = "/" + "/".join(parts[:depth])
                link = _is_link(container, prefix)
                if link is None:
                    break  # missing, or a link loop (500): the archive call of the path says so
                if link:
                    return [prefix]
            return []

        try:
            return await in_thread(look)
        except Exception as error:
            raise SandboxError(f"looking at the folders above {path} failed: {error}") from error

    async def _put_folder(self, folder: Path, target: str) -> None:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            for path in sorted(folder.iterdir()):
                archive.add(str(path), arcname=path.name)
        await self.put_archive(target, buffer.getvalue())

    async def download_file(self, sandbox_path: str, local_path: str) -> None:
        container = self._require()
        try:
            stream, _ = await in_thread(container.get_archive, sandbox_path)
            data = await in_thread(lambda: b"".join(stream))
        except Exception as error:
            raise SandboxError(f"download of {sandbox_path} failed: {error}") from error
        with tarfile.open(fileobj=io.BytesIO(data)) as archive:
            member = archive.next()
            if member is None or not member.isfile():
                raise SandboxError(f"{sandbox_path} is not a regular file in the container")
            extracted = archive.extractfile(member)
            assert extracted is not None
            Path(local_path).write_bytes(extracted.read())


__all__ = [
    "CPU_COUNT_HINTS",
    "DEFAULT_NETWORK",
    "DEFAULT_PIDS_LIMIT",
    "GRADING_MEMORY_BYTES",
    "GRADING_PIDS",
    "MAX_ENTRYPOINT_OUTPUT_BYTES",
    "NO_NETWORK",
    "DockerSandbox",
    "engine_seconds",
    "exhaustion",
]
