"""``ProviderSandbox`` over a NeMo Gym-shaped provider: every fault a provider can return (a result
with ``error_type``) masks a sample exactly as the same fault raised does, on each call of a run.

The provider here is a stand-in over ``LocalSandbox`` with NeMo Gym's calling convention (a handle
with every call, ``None`` for empty output, faults returned as code 125); its result and handle
types are NeMo Gym's own when the real package is installed (``nox -s nemo-gym``), else
field-for-field copies. ``tests/test_provider_docker.py`` drives a provider over the Docker engine.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest
from provider_types import REAL, SandboxExecResult, SandboxHandle, SandboxSpec
from support import EXAMPLES

from nemo_gym.data.tasks.harbor.rewards import VERIFIER_TIMEOUT
from nemo_gym.data.tasks.harbor.sandboxes.base import ExecTimeout, SandboxError
from nemo_gym.data.tasks.harbor.sandboxes.local import LocalSandbox, namespaces_available
from nemo_gym.data.tasks.harbor.sandboxes.provider import PROVIDER_FAULT_CODE, attach, open_provider_sandbox
from nemo_gym.data.tasks.harbor.task import load_task
from nemo_gym.data.tasks.harbor.verification import VerificationOutcome, plan_verification, run_verification

pytestmark = pytest.mark.skipif(not namespaces_available(), reason="the stand-in provider needs bubblewrap")


class LocalProvider:
    """NeMo Gym's provider protocol over ``LocalSandbox``: each ``create`` copies ``workspace`` in."""

    name = "local-stand-in"

    def __init__(self, workspace: Path, scratch: Path) -> None:
        self.workspace, self.scratch, self.closed = workspace, scratch, 0
        self.calls: List[str] = []

    async def create(self, spec: Any) -> Any:
        copy = self.scratch / f"ws-{len(self.calls)}"
        shutil.copytree(self.workspace, copy)
        sandbox = LocalSandbox(copy, workdir=spec.workdir or "/app", env=spec.env)
        await sandbox.__aenter__()
        return SandboxHandle(sandbox_id=str(copy), provider_name=self.name, raw=sandbox)

    async def exec(self, handle: Any, command: str, *, cwd=None, env=None, timeout_s=None, user=None) -> Any:
        self.calls.append("exec")
        try:
            ran = await handle.raw.exec(command, cwd=cwd, env=env, timeout_s=timeout_s, user=user)
        except ExecTimeout as error:
            return SandboxExecResult(
                stdout=None, stderr=str(error), return_code=PROVIDER_FAULT_CODE, error_type="timeout"
            )
        except SandboxError as error:
            return SandboxExecResult(
                stdout=None, stderr=str(error), return_code=PROVIDER_FAULT_CODE, error_type="sandbox"
            )
        # NeMo Gym's providers give None for an empty stream.
        return SandboxExecResult(stdout=ran.stdout or None, stderr=ran.stderr or None, return_code=ran.return_code)

    async def upload_file(self, handle: Any, source_path: Path, target_path: str) -> None:
        self.calls.append("upload")
        await handle.raw.upload_file(str(source_path), target_path)

    async def download_file(self, handle: Any, source_path: str, target_path: Path) -> None:
        self.calls.append("download")
        await handle.raw.download_file(source_path, str(target_path))

    async def status(self, handle: Any) -> str:
        return "running"

    async def close(self, handle: Any) -> None:
        self.closed += 1
        await handle.raw.close()

    async def aclose(self) -> None:
        pass


class Faulty(LocalProvider):
    """Fails the ``nth`` call named ``call`` (0 = the first), in the ``form`` given:
    ``returned:<error_type>`` gives NeMo Gym's result for it; ``raised:<Exception>`` raises it."""

    def __init__(self, workspace: Path, scratch: Path, call: str, nth: int, form: str) -> None:
        super().__init__(workspace, scratch)
        self.fault, self.seen = (call, nth, form), 0

    def _due(self, call: str) -> Optional[str]:
        name, nth, form = self.fault
        if call != name:
            return None
        self.seen += 1
        return form if self.seen - 1 == nth else None

    def _raise(self, form: str) -> None:
        kind = form.split(":", 1)[1]
        raise {"RuntimeError": RuntimeError, "OSError": OSError, "ConnectionResetError": ConnectionResetError}.get(
            kind, TimeoutError
        )(f"injected {kind}")

    async def exec(self, handle: Any, command: str, **options: Any) -> Any:
        form = self._due("exec")
        if form is None:
            return await super().exec(handle, command, **options)
        self.calls.append("exec")
        if form.startswith("returned:"):
            return SandboxExecResult(
                stdout=None, stderr="injected", return_code=PROVIDER_FAULT_CODE, error_type=form.split(":")[1]
            )
        self._raise(form)

    async def upload_file(self, handle: Any, source_path: Path, target_path: str) -> None:
        form = self._due("upload")
        if form is not None:
            self._raise(form)
        await super().upload_file(handle, source_path, target_path)

    async def download_file(self, handle: Any, source_path: str, target_path: Path) -> None:
        form = self._due("download")
        if form is not None:
            self._raise(form)
        await super().download_file(handle, source_path, target_path)


def _verify(provider: LocalProvider, task_dir: Path = EXAMPLES / "answer-file", **plan: Any) -> VerificationOutcome:
    task = load_task(task_dir)

    async def run() -> VerificationOutcome:
        async with open_provider_sandbox(provider, SandboxSpec(image="local", workdir="/app")) as sandbox:
            return await run_verification(plan_verification(task, **plan), sandbox)

    return asyncio.run(run())


def _key(outcome: VerificationOutcome) -> Tuple[Any, ...]:
    return (outcome.reward, outcome.masked, outcome.mask_reason, outcome.failure_kind)


def test_the_types_are_nemo_gyms_where_it_is_installed():
    import importlib.util

    assert (importlib.util.find_spec("nemo_gym.sandbox") is not None) == REAL
    if REAL:
        assert SandboxExecResult.__module__ == "nemo_gym.sandbox.providers.base"


def test_a_run_over_a_provider_scores_and_costs_one_upload_two_execs_one_download(tmp_path):
    provider = LocalProvider(EXAMPLES / "answer-file" / "workspace", tmp_path)
    outcome = _verify(provider)
    assert (outcome.reward, outcome.masked, outcome.failure_kind) == (1.0, False, None), outcome
    # The probe (which also makes the private upload folder), then one upload, one exec, one download.
    assert provider.calls == ["exec", "upload", "exec", "download"]
    assert provider.closed == 1


def test_a_wrong_answer_over_a_provider_scores_zero_not_masked(tmp_path):
    wrong = tmp_path / "wrong"
    wrong.mkdir()
    (wrong / "answer.txt").write_text("41\n")
    outcome = _verify(LocalProvider(wrong, tmp_path))
    assert (outcome.reward, outcome.masked) == (0.0, False), outcome


# Each fault of the run, in the form a provider returns it and in the form it could raise it.
# (call, nth call of that name, returned form, raised form, the outcome's reward, masked, mask reason, failure)
GRADING_FAULTS = [
    ("exec", 1, "returned:sandbox", "raised:ConnectionResetError", (0.0, True, "sandbox_error", None)),
    ("exec", 1, "returned:timeout", "raised:TimeoutError", (0.0, False, None, VERIFIER_TIMEOUT)),
    ("upload", 0, None, "raised:RuntimeError", (0.0, True, "sandbox_error", None)),
    ("upload", 0, None, "raised:OSError", (0.0, True, "sandbox_error", None)),
    ("download", 0, None, "raised:RuntimeError", (0.0, True, "sandbox_error", None)),
    ("download", 0, None, "raised:TimeoutError", (0.0, True, "sandbox_error", None)),
]


@pytest.mark.parametrize(("call", "nth", "returned", "raised", "expected"), GRADING_FAULTS)
def test_a_fault_returned_masks_as_the_same_fault_raised(tmp_path, call, nth, returned, raised, expected):
    workspace = EXAMPLES / "answer-file" / "workspace"
    outcomes: Dict[str, VerificationOutcome] = {}
    for form in filter(None, (returned, raised)):
        provider = Faulty(workspace, tmp_path / form.replace(":", "-"), call, nth, form)
        (tmp_path / form.replace(":", "-")).mkdir()
        outcomes[form] = _verify(provider)
        assert provider.closed == 1  # the sandbox is closed whatever happened
    for form, outcome in outcomes.items():
        assert _key(outcome) == expected, (form, outcome)
        assert "injected" in outcome.detail or outcome.failure_kind == VERIFIER_TIMEOUT, outcome.detail


def test_a_fault_of_our_own_sandbox_masks_as_the_providers_does(tmp_path):
    """The same fault at the grading exec, raised by one of this package's sandboxes and returned by
    a provider, gives the same outcome."""

    class Lost(LocalSandbox):
        async def exec(self, command: str, **options: Any) -> Any:
            if options.get("clean_shell"):  # the grading exec
                raise SandboxError("the container is gone")
            return await super().exec(command, **options)

        async def exec_piped(self, command: str, stdin: bytes, **options: Any) -> Any:
            raise SandboxError("the container is gone")  # the grading exec, where files go through it

    copy = tmp_path / "ws"
    shutil.copytree(EXAMPLES / "answer-file" / "workspace", copy)
    task = load_task(EXAMPLES / "answer-file")

    async def ours() -> VerificationOutcome:
        async with Lost(copy, workdir="/app") as sandbox:
            return await run_verification(plan_verification(task), sandbox)

    (tmp_path / "p").mkdir()
    theirs = _verify(Faulty(EXAMPLES / "answer-file" / "workspace", tmp_path / "p", "exec", 1, "returned:sandbox"))
    assert _key(asyncio.run(ours())) == _key(theirs) == (0.0, True, "sandbox_error", None)


class AlwaysFails(Faulty):
    """Every exec fails in ``form``: neither root nor the sandbox's own user can answer a probe."""

    def _due(self, call: str) -> Optional[str]:
        return self.fault[2] if call == "exec" else None


@pytest.mark.parametrize("form", ["returned:sandbox", "returned:timeout", "raised:RuntimeError", "raised:TimeoutError"])
def test_a_probe_that_fails_raises_a_sandbox_error_and_closes_the_sandbox(tmp_path, form):
    from nemo_gym.data.tasks.harbor.verification import mask_counts

    provider = AlwaysFails(EXAMPLES / "answer-file" / "workspace", tmp_path, "exec", 0, form)
    before = sum(mask_counts().values())

    async def run() -> None:
        async with open_provider_sandbox(provider, SandboxSpec(image="local", workdir="/app")):
            pass

    with pytest.raises(SandboxError):
        asyncio.run(run())
    assert provider.closed == 1
    assert sum(mask_counts().values()) == before + 1  # a sandbox that cannot be attached is a counted mask


def test_root_refused_once_falls_back_to_the_sandboxs_own_user(tmp_path):
    """A provider that refuses "root" (a fault on the first probe) leaves the sandbox's own user as
    the admin, found by a second probe."""
    provider = Faulty(EXAMPLES / "answer-file" / "workspace", tmp_path, "exec", 0, "returned:sandbox")

    async def run() -> Any:
        async with open_provider_sandbox(provider, SandboxSpec(image="local", workdir="/app")) as sandbox:
            return sandbox.admin_user

    assert asyncio.run(run()) == "root"  # the stand-in's own user is root (the caller)
    assert provider.calls == ["exec", "exec"]


def test_a_create_that_fails_raises_a_sandbox_error(tmp_path):
    class NoCreate(LocalProvider):
        async def create(self, spec: Any) -> Any:
            raise ConnectionResetError("the cluster is unreachable")

    async def run() -> None:
        async with open_provider_sandbox(NoCreate(tmp_path, tmp_path), SandboxSpec(image="local")):
            pass

    with pytest.raises(SandboxError, match="create failed: ConnectionResetError"):
        asyncio.run(run())


def test_the_probe_finds_the_working_directory_and_the_admin(tmp_path):
    provider = LocalProvider(EXAMPLES / "answer-file" / "workspace", tmp_path)

    async def run() -> Tuple[str, Any, str, str]:
        handle = await provider.create(SandboxSpec(image="local", workdir="/app"))
        try:
            sandbox = await attach(provider, handle)  # no spec: the working directory is probed
            listed = await sandbox.exec(f"stat -c %a {sandbox.tmp_dir}; ls /tmp", user=sandbox.admin_user)
            return sandbox.workdir, sandbox.admin_user, sandbox.tmp_dir, listed.stdout
        finally:
            await provider.close(handle)

    workdir, admin, folder, listed = asyncio.run(run())
    assert workdir == "/app" and admin == "root", (workdir, admin)
    # The upload folder: random (mktemp), and nobody but its owner may enter it.
    assert folder.startswith("/tmp/nemo-gym-") and len(folder) == len("/tmp/nemo-gym-") + 16
    assert listed.splitlines()[0] == "700", listed


def test_a_keep_alive_that_runs_as_a_user_is_logged_once_per_image(tmp_path, caplog, monkeypatch):
    """Red team 40 (F3): a provider whose image's USER is the agent's runs its keep-alive as that
    user, whom the agent can kill to end the sandbox (a mask). Attach cannot change that; it says
    so, once per image. The stand-in's first process is root's, so its probe is made to say 1000."""
    from nemo_gym.data.tasks.harbor.sandboxes import base

    class UserKeepAlive(LocalProvider):
        async def exec(self, handle: Any, command: str, **options: Any) -> Any:
            ran = await super().exec(handle, command, **options)
            if "/proc/1/status" not in command:
                return ran
            lines = ran.stdout.split("\n")
            lines[2:4] = ["1000", "agent"]
            return SandboxExecResult(stdout="\n".join(lines), stderr=ran.stderr, return_code=ran.return_code)

    monkeypatch.setattr(base, "_KEEP_ALIVE_WARNED", set())

    async def run(provider: LocalProvider, image: str) -> Any:
        async with open_provider_sandbox(provider, SandboxSpec(image=image, workdir="/app")) as sandbox:
            return sandbox.default_user

    workspace = EXAMPLES / "answer-file" / "workspace"
    assert asyncio.run(run(LocalProvider(workspace, tmp_path / "root"), "plain:1")) is None
    for number, image in enumerate(("user:1", "user:1", "other:1")):
        assert asyncio.run(run(UserKeepAlive(workspace, tmp_path / f"scratch-{number}"), image)) == "agent"
    warned = [record.getMessage() for record in caplog.records if "first process runs as" in record.getMessage()]
    assert [text.split(":", 2)[:2] for text in warned] == [["user", "1"], ["other", "1"]], warned
    assert "runs as agent, not root" in warned[0] and "[agent].user" in warned[0]


def test_a_hung_provider_is_a_timeout_not_a_hang(tmp_path, monkeypatch):
    from nemo_gym.data.tasks.harbor.sandboxes import provider as module

    monkeypatch.setattr(module, "PROVIDER_GRACE_SEC", 0.2)

    class Hung(LocalProvider):
        async def exec(self, handle: Any, command: str, **options: Any) -> Any:
            await asyncio.sleep(3600)

    async def run() -> None:
        handle = await Hung(tmp_path, tmp_path).create(SandboxSpec(image="local"))
        sandbox = module.ProviderSandbox(
            Hung(tmp_path, tmp_path), handle, workdir="/", admin_user="root", default_user=None, tmp_dir="/tmp"
        )
        try:
            await sandbox.exec("true", timeout_s=0.1)
        finally:
            await handle.raw.close()

    with pytest.raises(ExecTimeout):
        asyncio.run(asyncio.wait_for(run(), 30))


def test_the_probe_never_runs_the_agents_programs(tmp_path):
    """The sandbox's PATH names the workspace (its env says so), where the agent left an ``id`` and
    a ``mkdir``: the probe, which runs as root, finds the system's own."""
    workspace = tmp_path / "ws"
    shutil.copytree(EXAMPLES / "answer-file" / "workspace", workspace)
    for name in ("id", "mkdir", "printf", "bash"):
        program = workspace / name
        program.write_text(f"#!/bin/sh\necho {name} >> /app/ran-as-root\nexit 0\n")
        program.chmod(0o755)
    provider = LocalProvider(workspace, tmp_path / "scratch")
    (tmp_path / "scratch").mkdir()
    task = load_task(EXAMPLES / "answer-file")
    spec = SandboxSpec(image="local", workdir="/app", env={"PATH": "/app:/usr/bin:/bin", "LD_PRELOAD": "/app/x.so"})

    async def run() -> Tuple[VerificationOutcome, str]:
        async with open_provider_sandbox(provider, spec) as sandbox:
            outcome = await run_verification(plan_verification(task), sandbox)
            ran = await sandbox.exec("cat /app/ran-as-root 2>/dev/null; true", clean_shell=True)
            return outcome, ran.stdout

    outcome, ran = asyncio.run(run())
    assert (outcome.reward, outcome.masked) == (1.0, False), outcome
    assert ran == "", f"the agent's programs ran: {ran!r}"
