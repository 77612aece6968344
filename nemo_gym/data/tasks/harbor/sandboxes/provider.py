"""NeMo Gym's sandbox providers as sandboxes to verify in.

NeMo Gym's providers (``nemo_gym.sandbox.providers``: Docker, Apptainer, Enroot, OpenSandbox,
ECS Fargate, Daytona) take a handle with every call, run ``sh -c``, may give ``None`` for an
output, and report most faults as a result (``return_code`` 125 with ``error_type`` ``"timeout"``
or ``"sandbox"``) rather than raising. ``ProviderSandbox`` wraps one provider and one handle in
this package's ``Sandbox`` protocol, so that ``run_verification`` and the separate run work over
any of them unchanged: a fault returned is raised as the ``ExecTimeout`` or ``SandboxError`` it
stands for, and every exception of the provider becomes a ``SandboxError``, so the two mask a
sample exactly alike.

The few facts the verification needs and a provider does not give (the working directory, the
user the sandbox runs as, and whether root is reachable) come from the ``SandboxSpec`` when it
says them and are otherwise probed, once, when the sandbox is attached. Nothing here imports NeMo
Gym: the provider is used by its shape, and ``nemo_gym.sandbox`` is imported only to build the
spec of a separate verifier's sandbox, which only a NeMo Gym provider can start.
"""

from __future__ import annotations

import asyncio
import secrets
import shlex
from contextlib import asynccontextmanager
from pathlib import Path
from typing import (
    TYPE_CHECKING,
    Any,
    AsyncContextManager,
    AsyncIterator,
    Awaitable,
    Callable,
    Dict,
    Mapping,
    Optional,
    Sequence,
    Tuple,
)

from nemo_gym.data.tasks.harbor.grading import ALWAYS_BLANKED
from nemo_gym.data.tasks.harbor.sandboxes.base import MAX_EXEC_OUTPUT_BYTES, ExecResult, ExecTimeout, SandboxError, User
from nemo_gym.data.tasks.harbor.task import TaskError
from nemo_gym.data.tasks.harbor.workdir import DEFAULT_WORKDIR

if TYPE_CHECKING:
    from nemo_gym.data.tasks.harbor.separate import VerifierSandboxSpec

# The return code NeMo Gym's providers give, with an ``error_type``, when the sandbox (not the
# command) failed.
PROVIDER_FAULT_CODE = 125
# How long past a command's own timeout the host waits on a provider before calling it lost: the
# provider's timeout should always answer first.
PROVIDER_GRACE_SEC = 60.0
PROBE_TIMEOUT_SEC = 60.0
# Where the probe finds its programs: the system's folders only, as grading's steps do.
SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# The probe's answer: the working directory, the uid and the user's name, one a line.
_PROBE = 'printf "%s\\n" "$PWD" "$(id -u)" "$(id -un 2>/dev/null)"'


def _text(value: Any) -> str:
    """A provider's output as text: ``None`` is empty, bytes are decoded, the tail is kept."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    return str(value)[-MAX_EXEC_OUTPUT_BYTES:]


def _describe(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class ProviderSandbox:
    """One NeMo Gym sandbox (``provider`` + ``handle``) as a ``Sandbox``; make it with ``attach``.

    ``/tests``, ``/logs/verifier`` are the sandbox's own. Uploads land in ``tmp_dir``, a folder of
    ``/tmp`` made at attach time by the admin with mode 0711 and a random name: nobody else can
    list it or watch it, so a file staged there (the answers, the run's key) is found by no one
    who was not told its name. ``private_pids`` is the caller's word that the sandbox has a PID
    namespace of its own (a container's; an Apptainer instance without ``--pid`` has not), which
    lets grading kill what the verifier left running; it cannot be probed safely, so it is off
    unless given. ``stop`` closes the sandbox through its provider.
    """

    tests_dir = "/tests"
    logs_dir = "/logs/verifier"
    runs_entrypoint = False  # a provider starts the image as it sees fit: no record of it here

    def __init__(
        self,
        provider: Any,
        handle: Any,
        *,
        workdir: str,
        admin_user: Optional[User],
        default_user: Optional[User],
        tmp_dir: str,
        environment: Optional[Mapping[str, str]] = None,
        private_pids: bool = False,
        own_user: Sequence[User] = (),
    ) -> None:
        self.provider, self.handle = provider, handle
        # The user the sandbox runs a command as when none is named (name and uid): asked for by
        # name, it is not named at all, since some providers switch users only through root.
        self._own = {str(user) for user in own_user if user != ""}
        self.workdir, self.admin_user, self.default_user = workdir, admin_user, default_user
        self.tmp_dir = tmp_dir
        self.environment = dict(environment or {})
        self.private_pids = private_pids
        self._closed = False

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
        # The provider runs `sh -c`; bash takes over at once, by its absolute path for a clean shell.
        shell = "exec /bin/bash -p -c " if clean_shell else "exec bash -c "
        return await _provider_exec(
            self.provider,
            self.handle,
            shell + shlex.quote(command),
            cwd=cwd or self.workdir,
            env=dict(env) if env else None,
            timeout_s=timeout_s,
            user=None if user is not None and str(user) in self._own else user,
        )

    async def upload_file(self, local_path: str, sandbox_path: str) -> None:
        await _provider_call("upload", self.provider.upload_file(self.handle, Path(local_path), sandbox_path))

    async def download_file(self, sandbox_path: str, local_path: str) -> None:
        await _provider_call("download", self.provider.download_file(self.handle, sandbox_path, Path(local_path)))

    async def stop(self) -> None:
        """Closes the sandbox through its provider (the separate run is done with the agent's)."""
        if not self._closed:
            self._closed = True
            await _provider_call("close", self.provider.close(self.handle))


async def _provider_call(what: str, call: Any, timeout_s: Optional[float] = None) -> Any:
    """Awaits one provider call; whatever it raises is the sandbox's fault (``SandboxError``)."""
    try:
        return await asyncio.wait_for(call, timeout_s)
    except (asyncio.TimeoutError, TimeoutError) as error:  # the two differ before Python 3.11
        raise ExecTimeout(f"the provider's {what} timed out: {_describe(error)}") from None
    except SandboxError:
        raise
    except Exception as error:  # any fault of the provider: masked, never scored
        raise SandboxError(f"the provider's {what} failed: {_describe(error)}") from error


async def _provider_exec(
    provider: Any,
    handle: Any,
    command: str,
    *,
    cwd: Optional[str],
    env: Optional[Dict[str, str]],
    timeout_s: Optional[float],
    user: Optional[User],
) -> ExecResult:
    """One ``provider.exec``, with a fault it returns raised as one it could have raised."""
    host_limit = None if timeout_s is None else timeout_s + PROVIDER_GRACE_SEC
    call = provider.exec(handle, command, cwd=cwd, env=env, timeout_s=timeout_s, user=user)
    result = await _provider_call("exec", call, host_limit)
    error_type = getattr(result, "error_type", None)
    stdout, stderr = _text(getattr(result, "stdout", None)), _text(getattr(result, "stderr", None))
    if error_type == "timeout":
        raise ExecTimeout(f"the command outlived {timeout_s} s (the provider says: {stderr.strip()[-200:]})")
    if error_type is not None:
        raise SandboxError(f"the sandbox failed ({error_type}): {(stderr or stdout).strip()[-500:]}")
    code = getattr(result, "return_code", None)
    if not isinstance(code, int) or isinstance(code, bool):
        raise SandboxError(f"the provider's exec gave no return code ({code!r})")
    return ExecResult(stdout, stderr, code)


async def attach(
    provider: Any,
    handle: Any,
    *,
    spec: Any = None,
    workdir: Optional[str] = None,
    admin_user: Optional[User] = None,
    private_pids: bool = False,
) -> ProviderSandbox:
    """The sandbox ``handle`` of ``provider`` (a NeMo Gym ``SandboxProvider``), ready to verify in.

    The working directory is ``workdir``, else the spec's, else where the sandbox starts a command
    (probed). The admin (who stages ``/tests`` and reads the results) is ``admin_user``, else root
    when the sandbox runs as root or lets a command run as ``"root"``, else the user it runs as.
    One probe as the sandbox's user, and one more as ``"root"`` when that user is not root; the
    same exec makes the private upload folder. A sandbox that cannot answer raises ``SandboxError``.
    """
    workdir = workdir or getattr(spec, "workdir", None) or None
    environment = getattr(spec, "env", None) or {}
    folder = f"/tmp/nemo-gym-{secrets.token_hex(16)}"
    make_folder = f"mkdir -m 0711 {folder}"

    async def probe(user: Optional[User], extra: str) -> ExecResult:
        # As grading's own steps: a clean bash, a fixed PATH and no preload, since it may run as
        # root in a sandbox the agent has had to itself (its `id` or `mkdir` must never run).
        command = "exec /bin/bash -p -c " + shlex.quote(f"PATH={SAFE_PATH}; {_PROBE} && {extra}")
        blank = dict.fromkeys(ALWAYS_BLANKED, "")
        return await _provider_exec(
            provider, handle, command, cwd=workdir, env=blank, timeout_s=PROBE_TIMEOUT_SEC, user=user
        )

    # The folder is made at once by a named admin or by root; any other user waits for the answer.
    first = await probe(
        admin_user, make_folder if admin_user is not None else f'{{ [ "$(id -u)" != 0 ] || {make_folder}; }}'
    )
    lines = first.stdout.splitlines()
    if first.return_code != 0 or len(lines) < 2 or not lines[1].strip().isdigit():
        raise SandboxError(f"the sandbox could not be probed: {(first.stdout + first.stderr).strip()[-500:]}")
    where, uid, name = lines[0], int(lines[1]), (lines[2].strip() if len(lines) > 2 else "")
    own: Tuple[User, ...] = () if admin_user is not None else (name, uid)
    default_user: Optional[User] = None
    if admin_user is None and uid == 0:
        admin_user = "root"
    elif admin_user is None:
        default_user = name or uid
        if await _try_root(probe, make_folder):
            admin_user = "root"
        else:  # no root in this sandbox: its own user stages and reads
            admin_user = default_user
            made = await probe(None, make_folder)
            if made.return_code != 0:
                raise SandboxError(f"the sandbox's upload folder could not be made: {made.stderr.strip()[-500:]}")
    return ProviderSandbox(
        provider,
        handle,
        workdir=workdir or where or DEFAULT_WORKDIR,
        admin_user=admin_user,
        default_user=default_user,
        tmp_dir=folder,
        environment=environment,
        private_pids=private_pids,
        own_user=own,
    )


async def _try_root(probe: Callable[[Optional[User], str], Awaitable[ExecResult]], make_folder: str) -> bool:
    """Whether the probe ran as ``"root"`` (and made the folder): ``False`` where the sandbox has no root to give."""
    try:
        ran = await probe("root", make_folder)
    except ExecTimeout:
        raise
    except SandboxError:
        return False
    lines = ran.stdout.splitlines()
    return ran.return_code == 0 and len(lines) > 1 and lines[1].strip() == "0"


@asynccontextmanager
async def open_provider_sandbox(
    provider: Any, spec: Any, *, private_pids: bool = False, admin_user: Optional[User] = None
) -> AsyncIterator[ProviderSandbox]:
    """A new sandbox of ``spec`` (a NeMo Gym ``SandboxSpec``) from ``provider``, attached, and
    closed on the way out. A provider that cannot create it raises ``SandboxError``."""
    handle = await _provider_call("create", provider.create(spec))
    try:
        yield await attach(provider, handle, spec=spec, private_pids=private_pids, admin_user=admin_user)
    finally:
        try:
            await asyncio.shield(provider.close(handle))
        except Exception:  # already gone: nothing left to clean
            pass


def provider_verifier_opener(
    provider: Any,
    *,
    image: Optional[str] = None,
    provider_options: Optional[Mapping[str, Any]] = None,
    network_options: Optional[Mapping[str, Mapping[str, Any]]] = None,
    private_pids: bool = False,
) -> Callable[[VerifierSandboxSpec], AsyncContextManager[ProviderSandbox]]:
    """The ``open_verifier`` of ``run_separate_verification`` for a NeMo Gym provider.

    The verifier's sandbox is a ``SandboxSpec`` of ``image``, else the verifier environment's
    declared image, with its env, working directory and limits. A provider builds no images: a
    verifier whose image is built from ``tests/Dockerfile`` needs ``image`` (build and push it
    first), or it is refused. NeMo Gym's spec has no network field, so a restricted network is
    ``network_options[mode]`` (``"no-network"``, ``"allowlist"``), merged into the provider's
    options; a task that asks for one the caller gave no options for is refused, never run open.
    """

    def open_verifier(spec: VerifierSandboxSpec) -> AsyncContextManager[ProviderSandbox]:
        chosen = image or spec.image
        if chosen is None:
            raise TaskError(
                f"the separate verifier's image is built from {spec.build_context}/Dockerfile, which a "
                "NeMo Gym provider cannot build: build and push it, and pass its name as image="
            )
        options = dict(provider_options or {})
        if spec.network is not None:
            extra = (network_options or {}).get(spec.network)
            if extra is None:
                raise TaskError(
                    f"the task's verifier asks for network_mode {spec.network!r}, which this provider is "
                    f"not told how to enforce: pass network_options={{{spec.network!r}: {{...}}}}"
                )
            options.update(extra)
        from nemo_gym.sandbox.providers.base import SandboxSpec  # NeMo Gym's own: only its providers use it

        resources: Dict[str, Any] = {"cpu": spec.cpus, "memory_mib": spec.memory_mb}
        nemo_spec = SandboxSpec(
            image=chosen,
            workdir=spec.workdir,
            env=dict(spec.env),
            resources={key: value for key, value in resources.items() if value is not None},
            provider_options=options,
        )
        return open_provider_sandbox(provider, nemo_spec, private_pids=private_pids)

    return open_verifier


__all__ = [
    "PROVIDER_FAULT_CODE",
    "ProviderSandbox",
    "attach",
    "open_provider_sandbox",
    "provider_verifier_opener",
]
