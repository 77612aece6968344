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
import shlex
from contextlib import asynccontextmanager
from pathlib import Path
from typing import (
    TYPE_CHECKING,
    Any,
    AsyncContextManager,
    AsyncIterator,
    Callable,
    Dict,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
)

from nemo_gym.data.tasks.harbor.grading import DEFERRED_NAMES, deferred
from nemo_gym.data.tasks.harbor.sandboxes.base import (
    CLEAN_SHELL_OPTIONS,
    MAX_EXEC_OUTPUT_BYTES,
    ExecResult,
    ExecTimeout,
    SandboxError,
    User,
    clean_shell_env,
    warn_killable_keep_alive,
)
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
# Where the probe finds its programs: the system's folders only, as grading's steps do (not
# /usr/local, which an image may open to a group or to the agent: red team 67).
SAFE_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
# A command's PATH when neither the task nor the sandbox's first process names one: Docker's default,
# the task's to search (test.sh checks the interpreter it finds there), never root's.
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# The probe, as the admin: its uid, a new private folder (mktemp -d: 0700, a name nobody saw), and
# the sandbox's first process's uid, user name, working directory and PATH, one a line; then that
# process's variables that grading holds back (grading.deferred), NAME=value a line (NAME alone for
# a value with a newline in it): a provider tells nothing of the image's ENV, whose LD_LIBRARY_PATH
# root's shells must not see and the verifier must (red team 76). Bash builtins and coreutils only
# (mktemp, readlink).
_PROBE_LINES = ("uid", "folder", "first_uid", "first_name", "first_cwd", "first_path", "cwd")
_DEFERRED_PATTERN = "|".join(["LD_*=*", *(f"{name}=*" for name in sorted(DEFERRED_NAMES))])
_PROBE = r"""
id -u || exit 1
mktemp -d /tmp/nemo-gym-XXXXXXXXXXXXXXXX || exit 1
first_uid=""
while read -r key value _; do [ "$key" = "Uid:" ] && first_uid=$value && break; done 2>/dev/null < /proc/1/status
printf '%s\n' "$first_uid"
name=""
if [ -n "$first_uid" ]; then
  while IFS=: read -r entry _ number _; do
    [ "$number" = "$first_uid" ] && name=$entry && break
  done < /etc/passwd
fi
printf '%s\n' "$name"
printf '%s\n' "$(readlink /proc/1/cwd 2>/dev/null)"
path="" found="" deferred=()
while IFS= read -r -d '' entry; do
  case $entry in
    PATH=*) [ -n "$found" ] || { path=${entry#PATH=} found=1; } ;;
    @DEFERRED@) deferred+=("$entry") ;;
  esac
done 2>/dev/null < /proc/1/environ
printf '%s\n' "$path" "$PWD"
for entry in "${deferred[@]}"; do
  case $entry in *$'\n'*) printf '%s\n' "${entry%%=*}" ;; *) printf '%s\n' "$entry" ;; esac
done
""".replace("@DEFERRED@", _DEFERRED_PATTERN)
# grading.sh's variable for the verifier's own PATH, when the exec's PATH is the system's.
VERIFIER_PATH_VARIABLE = "NEMO_GYM_VERIFIER_PATH"


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
    ``/tmp`` the admin made at attach time (``mktemp -d``: mode 0700, a name no command line showed
    before it existed): nobody else can enter it, whatever mode or owner the provider gives a file
    it writes there (the answers, the run's key). ``private_pids`` is the caller's word that the sandbox has a PID
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
        image_path: Optional[str] = None,
        image: Optional[str] = None,
    ) -> None:
        self.provider, self.handle = provider, handle
        self.image = image  # the spec's: which shipped bytecode its runs need is learned per image
        # The user the sandbox runs a command as when none is named (name and uid): asked for by
        # name, it is not named at all, since some providers switch users only through root.
        self._own = {str(user) for user in own_user if user != ""}
        self.workdir, self.admin_user, self.default_user = workdir, admin_user, default_user
        self.tmp_dir = tmp_dir
        self.environment = dict(environment or {})
        self.private_pids = private_pids
        # The PATH a command gets when it names none: the spec's, else the image's (its first process's).
        self.image_path = image_path
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
        # The provider finds `sh` on the exec's PATH, before anything here runs: that PATH is always
        # the system's. The command's own PATH (given, else the image's) is set inside: for a clean
        # shell, handed to grading (which restores it for test.sh alone); else before bash is found.
        wanted = dict(env or {})
        path = wanted.pop("PATH", None) or self.image_path or DEFAULT_PATH
        if clean_shell:
            wanted = clean_shell_env(wanted, self.environment)
            wanted[VERIFIER_PATH_VARIABLE] = path
            wrapped = f"exec /bin/bash {' '.join(CLEAN_SHELL_OPTIONS)} -c " + shlex.quote(command)
        else:
            wrapped = f"PATH={shlex.quote(path)}; export PATH; exec bash -c " + shlex.quote(command)
        wanted["PATH"] = SAFE_PATH
        return await _provider_exec(
            self.provider,
            self.handle,
            wrapped,
            cwd=cwd or self.workdir,
            env=wanted,
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


def _deferred_variables(lines: Sequence[str]) -> Dict[str, str]:
    """The probe's lines of the first process's held-back variables, as a mapping (a name alone is
    set empty: its value held a newline)."""
    found: Dict[str, str] = {}
    for line in lines:
        name, _, value = line.partition("=")
        if deferred(name):
            found.setdefault(name, value)
    return found


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

    The admin (who stages ``/tests`` and reads the results) is ``admin_user``, else root when a
    command can run as ``"root"``, else the sandbox's own user (then nothing is private from the
    agent, who is that user too). One probe, as the admin: everything it learns comes from a
    process no other user can write into, and from the kernel's record of the sandbox's first
    process (its user, working directory and PATH). It makes the private upload folder (mktemp,
    0700) under a name nobody else saw. The working directory is ``workdir``, else the spec's, else
    the first process's. Only when root is refused does a second probe run as the sandbox's user.
    A sandbox that cannot be attached raises ``SandboxError``, counted as a mask.
    """
    try:
        return await _attach(provider, handle, spec, workdir, admin_user, private_pids)
    except SandboxError as error:
        from nemo_gym.data.tasks.harbor.verification import count_mask, masked

        count_mask(masked("sandbox_error", f"the sandbox could not be attached: {error}"))
        raise


async def _attach(
    provider: Any, handle: Any, spec: Any, workdir: Optional[str], admin_user: Optional[User], private_pids: bool
) -> ProviderSandbox:
    workdir = workdir or getattr(spec, "workdir", None) or None
    environment = dict(getattr(spec, "env", None) or {})

    async def probe(user: Optional[User], cwd: Optional[str]) -> List[str]:
        # A clean bash, the system's PATH, no preload: the agent's programs never run.
        env = clean_shell_env({"PATH": SAFE_PATH}, environment)
        command = f"exec /bin/bash {' '.join(CLEAN_SHELL_OPTIONS)} -c " + shlex.quote(_PROBE)
        ran = await _provider_exec(provider, handle, command, cwd=cwd, env=env, timeout_s=PROBE_TIMEOUT_SEC, user=user)
        lines = ran.stdout.split("\n")
        if ran.return_code != 0 or len(lines) < len(_PROBE_LINES) or not lines[0].isdigit():
            raise SandboxError(f"the sandbox could not be probed: {(ran.stdout + ran.stderr).strip()[-500:]}")
        return lines

    async def probe_anywhere(user: Optional[User]) -> List[str]:
        """From the sandbox's own working directory when it is not known (the answer says where
        that is), else from "/": a working directory the agent removed cannot fail the probe."""
        if workdir is None:
            try:
                return await probe(user, None)
            except ExecTimeout:
                raise
            except SandboxError:
                pass
        return await probe(user, "/")

    own: Tuple[User, ...] = ()
    if admin_user is not None:
        answer = await probe_anywhere(admin_user)
    else:
        try:
            answer = await probe_anywhere("root")
            refused = answer[0] != "0"  # a provider that ran it as someone else
        except ExecTimeout:
            raise
        except SandboxError:
            refused = True
        if refused:  # no root to give: the sandbox's own user stages and reads (the agent, often)
            answer = await probe_anywhere(None)
            admin_user = answer[3] if answer[2] == answer[0] and answer[3] else int(answer[0])
            own = (admin_user, int(answer[0]))
        else:
            admin_user = "root"
    uid, folder, first_uid, first_name, first_cwd, first_path, cwd = answer[: len(_PROBE_LINES)]
    environment = {**_deferred_variables(answer[len(_PROBE_LINES) :]), **environment}
    if not folder.startswith("/tmp/nemo-gym-"):
        raise SandboxError(f"the sandbox's upload folder could not be made: {folder!r}")
    default_user: Optional[User] = None
    if first_uid.isdigit() and first_uid != uid:
        default_user = _user(first_name, first_uid)
        own = own or (first_name, int(first_uid))
    path = environment.get("PATH") or first_path or None
    where = cwd if cwd and cwd != "/" else first_cwd
    image = getattr(spec, "image", None)
    if uid == "0" and first_uid.isdigit() and first_uid != "0":  # the provider's keep-alive is a user's
        warn_killable_keep_alive(image if isinstance(image, str) else None, _user(first_name, first_uid))
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
        image_path=path,
        image=image if isinstance(image, str) else None,
    )


def _user(name: str, uid: str) -> User:
    return name if name else int(uid)


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
