"""``ProviderSandbox`` over a real NeMo Gym provider of real containers: ``DockerEngineProvider``
(tests/nemo_gym_docker_provider.py) subclasses NeMo Gym's own ``SandboxProvider`` and returns its
``SandboxHandle`` and ``SandboxExecResult``, so this runs beside the real ``nemo-gym`` only (``nox -s
nemo-gym``). Shared and separate verification through the adapter, a non-root verifier, a sandbox
without root, and the faults the provider returns (a timeout, a container removed under the run),
each checked for what it scores or masks; every container the run starts is gone at the end.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import pytest
from support import EXAMPLES, write_files

if os.environ.get("NEMO_GYM_REQUIRE_NEMO_GYM") != "1":
    pytest.importorskip("nemo_gym.sandbox.providers.base", reason="needs the real nemo-gym (nox -s nemo-gym)")

from nemo_gym.sandbox.providers.base import (
    SandboxExecResult,
    SandboxHandle,
    SandboxProvider,
    SandboxSpec,
)
from nemo_gym_docker_provider import FAULT_CODE, DockerEngineProvider, list_sandboxes

from nemo_gym.data.tasks.harbor.rewards import VERIFIER_TIMEOUT
from nemo_gym.data.tasks.harbor.sandboxes.provider import (
    ProviderSandbox,
    attach,
    open_provider_sandbox,
    provider_verifier_opener,
)
from nemo_gym.data.tasks.harbor.separate import run_separate_verification
from nemo_gym.data.tasks.harbor.task import TaskError, load_task
from nemo_gym.data.tasks.harbor.verification import (
    VerificationOutcome,
    plan_verification,
    run_verification,
)

pytestmark = [pytest.mark.nemo_gym, pytest.mark.docker]

Volumes = Dict[str, Dict[str, str]]


@pytest.fixture
def owner() -> str:
    """A label for the containers of this test alone: other runs may share the engine."""
    return f"nemo-gym-test.owner={uuid.uuid4().hex}"


@pytest.fixture
def provider(docker_client: Any, owner: str) -> DockerEngineProvider:
    name, value = owner.split("=")
    return DockerEngineProvider(docker_client, labels={name: value})


@pytest.fixture(scope="module")
def python312(docker_client: Any) -> Tuple[str, Volumes]:
    from images import python_image

    return python_image(docker_client, "3.12")


@pytest.fixture(scope="module")
def users(docker_client: Any) -> Tuple[str, Volumes]:
    from images import users_image

    return users_image(docker_client)


@pytest.fixture(scope="module")
def base(docker_client: Any) -> str:
    from images import base_image

    return base_image(docker_client)


@pytest.fixture
def left(docker_client: Any, owner: str) -> Callable[[], Set[str]]:
    """The sandboxes this test started that are still on the engine (running or not)."""
    return lambda: set(list_sandboxes(docker_client, owner))


def _spec(image: str, volumes: Optional[Volumes] = None, workdir: str = "/workspace", **options: Any) -> SandboxSpec:
    return SandboxSpec(
        image=image, workdir=workdir, provider_options={**({"volumes": volumes} if volumes else {}), **options}
    )


async def _put_folder(provider: Any, handle: SandboxHandle, folder: Path, target: str) -> None:
    """Copies a host folder into the sandbox, a file at a time, through the provider's upload."""
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            await provider.upload_file(handle, path, f"{target}/{path.relative_to(folder).as_posix()}")


def _key(outcome: VerificationOutcome) -> Tuple[Any, ...]:
    return (outcome.reward, outcome.masked, outcome.mask_reason, outcome.failure_kind)


class Wrapper(SandboxProvider):
    """A NeMo Gym provider that hands every call to ``inner``; subclasses change one of them."""

    name = "wrapped-docker-engine"

    def __init__(self, inner: DockerEngineProvider) -> None:
        self.inner = inner
        self.execs: List[Dict[str, Any]] = []

    async def create(self, spec: SandboxSpec) -> SandboxHandle:
        return await self.inner.create(spec)

    async def exec(self, handle: SandboxHandle, command: str, **options: Any) -> SandboxExecResult:
        self.execs.append(options)
        return await self.inner.exec(handle, command, **options)

    async def upload_file(self, handle: SandboxHandle, source_path: Path, target_path: str) -> None:
        await self.inner.upload_file(handle, source_path, target_path)

    async def download_file(self, handle: SandboxHandle, source_path: str, target_path: Path) -> None:
        await self.inner.download_file(handle, source_path, target_path)

    async def status(self, handle: SandboxHandle) -> Any:
        return await self.inner.status(handle)

    async def close(self, handle: SandboxHandle) -> None:
        await self.inner.close(handle)

    async def aclose(self) -> None:
        pass


# -- the provider itself ---------------------------------------------------------------------------


def test_the_provider_keeps_nemo_gyms_contract(provider, docker_client, base, left, tmp_path):
    """sh -c with the workdir, env and user asked for; None for an empty stream; a timeout kills the
    command and what it started and answers 125/"timeout"; a lost container answers 125/"sandbox"."""
    source = tmp_path / "in.txt"
    source.write_text("payload\n")
    source.chmod(0o640)

    async def run() -> Dict[str, Any]:
        handle = await provider.create(_spec(base, workdir="/srv/work", labels={"suite": "provider"}))
        seen: Dict[str, Any] = {"handle": handle}
        try:
            seen["shell"] = await provider.exec(
                handle, 'echo "$0|$PWD|$FROM_CALL|$(id -un)"', cwd="/tmp", env={"FROM_CALL": "yes"}, user="nobody"
            )
            seen["default"] = await provider.exec(handle, "pwd; echo oops >&2; exit 3")
            seen["quiet"] = await provider.exec(handle, "true")
            started = time.monotonic()
            seen["timeout"] = await provider.exec(
                handle, "sleep 301 & env -i setsid sleep 302 & sleep 303", timeout_s=1
            )
            seen["timeout_took"] = time.monotonic() - started
            seen["after"] = await provider.exec(handle, "cat /proc/[0-9]*/cmdline | tr '\\0' ' '")
            await provider.upload_file(handle, source, "/made/on/upload/out.txt")
            seen["uploaded"] = await provider.exec(handle, "stat -c '%a %U' /made/on/upload/out.txt")
            await provider.download_file(handle, "/made/on/upload/out.txt", tmp_path / "back" / "out.txt")
            seen["labels"] = docker_client.containers.get(handle.sandbox_id).labels
        finally:
            await provider.close(handle)
        seen["gone"] = await provider.exec(handle, "true")
        await provider.close(handle)  # twice: no error
        return seen

    seen = asyncio.run(run())
    assert isinstance(seen["handle"], SandboxHandle) and isinstance(seen["shell"], SandboxExecResult)
    assert seen["shell"].stdout == "sh|/tmp|yes|nobody\n", seen["shell"]
    assert (seen["default"].stdout, seen["default"].stderr, seen["default"].return_code) == ("/srv/work\n", "oops\n", 3)
    assert (seen["quiet"].stdout, seen["quiet"].stderr, seen["quiet"].return_code) == (None, None, 0)
    assert (seen["timeout"].return_code, seen["timeout"].error_type) == (FAULT_CODE, "timeout"), seen["timeout"]
    assert seen["timeout_took"] < 10
    assert not any(f"sleep {n}" in seen["after"].stdout for n in (301, 302, 303)), seen["after"].stdout
    assert seen["uploaded"].stdout == "640 root\n"
    assert (tmp_path / "back" / "out.txt").read_text() == "payload\n"
    assert {"nemo-gym-test": "1", "nemo-gym.sandbox": "1", "suite": "provider"}.items() <= seen["labels"].items()
    assert (seen["gone"].return_code, seen["gone"].error_type) == (FAULT_CODE, "sandbox"), seen["gone"]
    assert left() == set()


# -- shared mode -----------------------------------------------------------------------------------


def _shared(
    provider: Any, spec: SandboxSpec, task_dir: Path, workspace: Path, **plan_options: Any
) -> Tuple[VerificationOutcome, ProviderSandbox]:
    task = load_task(task_dir)
    plan = plan_verification(task, **plan_options)

    async def run() -> Tuple[VerificationOutcome, ProviderSandbox]:
        async with open_provider_sandbox(provider, spec, private_pids=True) as sandbox:
            await _put_folder(provider, sandbox.handle, workspace, sandbox.workdir)
            return await run_verification(plan, sandbox), sandbox

    return asyncio.run(run())


@pytest.mark.parametrize(("answer", "reward"), [("Paris\n", 1.0), ("London\n", 0.0)], ids=["right", "wrong"])
def test_the_answer_file_example_scores_through_the_provider(provider, python312, left, tmp_path, answer, reward):
    image, volumes = python312
    workspace = write_files(tmp_path / "ws", {"answer.txt": answer})
    outcome, sandbox = _shared(provider, _spec(image, volumes), EXAMPLES / "answer-file", workspace)
    assert _key(outcome) == (reward, False, None, None), outcome
    # Told by the spec and probed: the working directory, and root as the admin.
    assert (sandbox.workdir, sandbox.admin_user, sandbox.default_user) == ("/workspace", "root", None)
    assert left() == set()


def test_the_images_loader_variables_reach_the_verifier_and_no_root_shell(provider, docker_client, python312, tmp_path):
    """Red team 76: a provider tells nothing of the image's ENV, so the probe reads the variables that
    act on a program as it starts from the sandbox's first process: root's shells get them empty, and
    the verifier gets the image's values, as under Docker and stock Harbor (it had none: a verifier
    whose programs need the image's LD_LIBRARY_PATH failed under a provider alone)."""
    from images import _built

    image, volumes = python312
    dockerfile = f"FROM {image}\nENV LD_LIBRARY_PATH=/opt/image-lib TZDIR=/opt/zones\n"
    image = _built(docker_client, "nemo-gym-test/python3-loader-env:1", dockerfile)
    verifier = (
        "import os\n\ndef verify():\n"
        "    print('seen', os.environ.get('LD_LIBRARY_PATH'), os.environ.get('TZDIR'))\n"
        "    return float((os.environ.get('LD_LIBRARY_PATH'), os.environ.get('TZDIR')) == ('/opt/image-lib', '/opt/zones'))\n"
    )
    task = write_files(tmp_path / "task", {"tests/verifier.py": verifier})
    outcome, sandbox = _shared(provider, _spec(image, volumes), task, write_files(tmp_path / "ws", {}))
    assert _key(outcome) == (1.0, False, None, None), outcome.stdout
    assert {"LD_LIBRARY_PATH": "/opt/image-lib", "TZDIR": "/opt/zones"}.items() <= sandbox.environment.items()


WHO = {
    "test.sh": (
        'reward=0\necho "graded by $(id -un)"\n'
        '[ "$(id -un)" = grader ] && [ "$(cat /workspace/answer.txt)" = 42 ] && reward=1\n'
        "echo $reward > /logs/verifier/reward.txt\n"
    ),
    "verifier.py": (
        "import os, pwd\nfrom nemo_gym.verifiers.files import read_text\n\n\ndef verify(workspace):\n"
        "    who = pwd.getpwuid(os.geteuid()).pw_name\n    print('graded by', who)\n"
        "    return 1.0 if who == 'grader' and read_text(workspace, 'answer.txt').strip() == '42' else 0.0\n"
    ),
}


@pytest.mark.parametrize("setpriv", [True, False], ids=["setpriv", "no setpriv"])
@pytest.mark.parametrize("verifier", sorted(WHO))
def test_a_verifier_user_grades_as_that_user(provider, docker_client, left, tmp_path, verifier, setpriv):
    from images import users_image

    image, volumes = users_image(docker_client, setpriv=setpriv)
    toml = '[verifier]\nuser = "grader"\ntimeout_sec = 30\n[environment]\nworkdir = "/workspace"\n'
    task = write_files(tmp_path / "task", {"task.toml": toml, f"tests/{verifier}": WHO[verifier]})
    workspace = write_files(tmp_path / "ws", {"answer.txt": "42\n"})
    recorder = Wrapper(provider)
    outcome, _ = _shared(recorder, _spec(image, volumes), task, workspace)
    assert _key(outcome) == (1.0, False, None, None), outcome
    assert "graded by grader" in outcome.stdout, outcome.stdout
    # A shell verifier is started as its user through the provider only where the image has no setpriv
    # (with it, and the sandbox's own PIDs, root's one exec switches to that user itself); a Python
    # verifier's runner switches itself either way.
    as_grader = any(call.get("user") == "grader" for call in recorder.execs)
    assert as_grader == (verifier == "test.sh" and not setpriv), recorder.execs
    assert left() == set()


class NoRoot(Wrapper):
    """A sandbox with no root to give (Docker's exec always can): a command asked to run as root is
    refused, as a provider fault (``"sandbox"``) or as the failure of a command (``"denied"``)."""

    def __init__(self, inner: DockerEngineProvider, form: str) -> None:
        super().__init__(inner)
        self.form, self.refused = form, 0

    async def exec(self, handle: SandboxHandle, command: str, **options: Any) -> SandboxExecResult:
        if str(options.get("user")) in ("root", "0"):
            self.refused += 1
            if self.form == "sandbox":
                return SandboxExecResult(None, "no root in this sandbox", FAULT_CODE, "sandbox")
            return SandboxExecResult(None, "su: Authentication failure\n", 1)
        return await super().exec(handle, command, **options)


@pytest.mark.parametrize("form", ["sandbox", "denied"])
def test_a_sandbox_without_root_is_run_by_its_own_user(provider, users, left, tmp_path, form):
    image, volumes = users
    spec = _spec(image, volumes, user="agent")
    no_root = NoRoot(provider, form)
    task = load_task(EXAMPLES / "answer-file")
    plan = plan_verification(task)

    async def run() -> Tuple[VerificationOutcome, ProviderSandbox, str]:
        handle = await provider.create(spec)
        try:
            # The image of a sandbox without root: its user owns the folders grading writes.
            made = await provider.exec(handle, "mkdir -p /tests /logs && chown agent: /tests /logs", user="root")
            assert made.return_code == 0, made
            sandbox = await attach(no_root, handle, spec=spec)
            await _put_folder(no_root, handle, EXAMPLES / "answer-file" / "workspace", sandbox.workdir)
            outcome = await run_verification(plan, sandbox)
            folder = await provider.exec(handle, f"stat -c '%U %a' {sandbox.tmp_dir}")
            return outcome, sandbox, folder.stdout or ""
        finally:
            await provider.close(handle)

    outcome, sandbox, folder = asyncio.run(run())
    assert no_root.refused == 1  # asked once, at attach
    # The admin is the sandbox's own user, so no other default user is named (the protocol's None).
    assert (sandbox.admin_user, sandbox.default_user) == ("agent", None)
    assert folder == "agent 700\n", folder  # the private upload folder is the sandbox user's
    assert _key(outcome) == (1.0, False, None, None), outcome
    assert not any(str(call.get("user")) in ("root", "0") for call in no_root.execs)
    # Its own user is never named: a provider that switches users only through root could not.
    assert not any(call.get("user") == "agent" for call in no_root.execs)
    assert left() == set()


# -- faults the provider returns -------------------------------------------------------------------


class Capped(Wrapper):
    """Gives every exec at most ``cap`` seconds: the provider's own timeout, far below grading's."""

    def __init__(self, inner: DockerEngineProvider, cap: float) -> None:
        super().__init__(inner)
        self.cap = cap
        self.results: List[SandboxExecResult] = []

    async def exec(self, handle: SandboxHandle, command: str, **options: Any) -> SandboxExecResult:
        given = options.get("timeout_s")
        options["timeout_s"] = self.cap if given is None else min(given, self.cap)
        result = await super().exec(handle, command, **options)
        self.results.append(result)
        return result


STALLS = "echo started > /tmp/grading-started\necho 1 > /logs/verifier/reward.txt\nsleep 40\n"


def test_a_provider_timeout_is_the_verifiers_timeout(provider, base, left, tmp_path):
    """The grading exec outlives the provider's timeout (3 s, under the task's 40): the provider kills
    it and answers 125/"timeout", which scores as a host timeout does (``_grade``): 0, not masked, and
    the reward written before it is not read (nothing came back)."""
    task = write_files(tmp_path / "task", {"task.toml": "[verifier]\ntimeout_sec = 40\n", "tests/test.sh": STALLS})
    capped = Capped(provider, 3)
    started = time.monotonic()

    async def run() -> Tuple[VerificationOutcome, str]:
        async with open_provider_sandbox(capped, _spec(base), private_pids=True) as sandbox:
            outcome = await run_verification(plan_verification(load_task(task)), sandbox)
            after = await provider.exec(sandbox.handle, "cat /proc/[0-9]*/cmdline | tr '\\0' ' '")
            return outcome, after.stdout or ""

    outcome, processes = asyncio.run(run())
    assert time.monotonic() - started < 30
    assert [result.error_type for result in capped.results].count("timeout") == 1, capped.results
    assert _key(outcome) == (0.0, False, None, VERIFIER_TIMEOUT), outcome
    assert "did not return from grading in time" in outcome.detail
    assert "sleep 40" not in processes, processes  # killed, not left running
    assert left() == set()


@pytest.mark.parametrize("when", ["before staging", "while grading"])
def test_a_container_removed_under_the_run_masks_the_sample(provider, docker_client, base, left, tmp_path, when):
    task = write_files(tmp_path / "task", {"task.toml": "[verifier]\ntimeout_sec = 40\n", "tests/test.sh": STALLS})
    plan = plan_verification(load_task(task))

    def remove_once_grading(container_id: str) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            processes = docker_client.api.top(container_id)["Processes"] or []
            if any("sleep 40" in " ".join(row) for row in processes):
                break
            time.sleep(0.1)
        docker_client.api.remove_container(container_id, force=True)

    async def run() -> VerificationOutcome:
        async with open_provider_sandbox(provider, _spec(base), private_pids=True) as sandbox:
            if when == "before staging":
                await asyncio.to_thread(docker_client.api.remove_container, sandbox.handle.sandbox_id, force=True)
                return await run_verification(plan, sandbox)
            remover = asyncio.ensure_future(asyncio.to_thread(remove_once_grading, sandbox.handle.sandbox_id))
            outcome = await run_verification(plan, sandbox)
            await remover
            return outcome

    started = time.monotonic()
    outcome = asyncio.run(run())
    assert time.monotonic() - started < 30
    assert _key(outcome) == (0.0, True, "sandbox_error", None), outcome
    if when == "while grading":
        assert "the sandbox failed (sandbox)" in outcome.detail and "stopped under the command" in outcome.detail
    else:
        assert "staging /tests failed" in outcome.detail, outcome.detail
    assert left() == set()


# -- separate mode ---------------------------------------------------------------------------------


class Recording(Wrapper):
    """Records each create's spec, and whether the containers made before it still exist then."""

    def __init__(self, inner: DockerEngineProvider, client: Any) -> None:
        super().__init__(inner)
        self.client = client
        self.specs: List[SandboxSpec] = []
        self.created: List[str] = []
        self.alive_at_create: List[List[bool]] = []

    async def create(self, spec: SandboxSpec) -> SandboxHandle:
        import docker.errors

        alive = []
        for container_id in self.created:
            try:
                self.client.containers.get(container_id)
                alive.append(True)
            except docker.errors.NotFound:
                alive.append(False)
        self.alive_at_create.append(alive)
        self.specs.append(spec)
        handle = await super().create(spec)
        self.created.append(handle.sandbox_id)
        return handle


def _separate(
    recording: Recording, base: str, task_dir: Path, workspace: Path, **opener: Any
) -> Tuple[VerificationOutcome, str]:
    task = load_task(task_dir)
    plan = plan_verification(task)
    open_verifier = provider_verifier_opener(recording, **opener)

    async def run() -> Tuple[VerificationOutcome, str]:
        async with open_provider_sandbox(recording, _spec(base), private_pids=True) as agent:
            await _put_folder(recording, agent.handle, workspace, "/workspace")
            outcome = await run_separate_verification(task, plan, agent, open_verifier)
            return outcome, agent.handle.sandbox_id

    return asyncio.run(run())


NO_NETWORK = {"no-network": {"network_mode": "none"}}


@pytest.mark.parametrize(
    ("script", "reward"), [("echo $(( $1 + $2 ))", 1.0), ("echo $(( $1 - $2 ))", 0.0)], ids=["right", "wrong"]
)
def test_the_separate_verifier_example_grades_in_a_container_of_its_own(
    provider, docker_client, base, python312, left, tmp_path, script, reward
):
    image, volumes = python312
    workspace = write_files(tmp_path / "ws", {"add.sh": script + "\n"})
    recording = Recording(provider, docker_client)
    outcome, agent_id = _separate(
        recording,
        base,
        EXAMPLES / "separate-verifier",
        workspace,
        image=image,
        provider_options={"volumes": volumes},
        network_options=NO_NETWORK,
    )
    assert _key(outcome) == (reward, False, None, None), outcome
    assert ("ok: 40 + 2 = 42" in outcome.stdout) == (reward == 1.0), outcome.stdout
    _, verifier_spec = recording.specs
    assert (verifier_spec.image, verifier_spec.workdir) == (image, "/workspace")
    assert verifier_spec.provider_options == {"volumes": volumes}  # the example asks for no network mode
    # The agent's container was removed before the verifier's started, and nothing is left.
    assert recording.alive_at_create == [[], [False]]
    assert agent_id not in list_sandboxes(docker_client)
    assert left() == set()


OFFLINE = """\
reward=1
[ "$(cat /workspace/out.txt)" = 42 ] || { echo "wrong answer"; reward=0; }
[ "$(ls /sys/class/net)" = lo ] || { echo "a network: $(ls /sys/class/net | tr '\\n' ' ')"; reward=0; }
echo $reward > /logs/verifier/reward.txt
"""


def _offline_task(tmp_path: Path, base: str) -> Path:
    toml = (
        'artifacts = ["/workspace"]\n[verifier]\ntimeout_sec = 30\nenvironment_mode = "separate"\n'
        f'network_mode = "no-network"\n[environment]\ndocker_image = "{base}"\nworkdir = "/workspace"\n'
    )
    return write_files(tmp_path / "task", {"task.toml": toml, "tests/test.sh": OFFLINE})


def test_a_no_network_verifier_gets_the_network_options(provider, docker_client, base, left, tmp_path):
    workspace = write_files(tmp_path / "ws", {"out.txt": "42\n"})
    recording = Recording(provider, docker_client)
    outcome, _ = _separate(recording, base, _offline_task(tmp_path, base), workspace, network_options=NO_NETWORK)
    assert _key(outcome) == (1.0, False, None, None), outcome.stdout
    assert recording.specs[1].provider_options == {"network_mode": "none"}
    assert recording.specs[1].image == base  # inherited from [environment]
    assert left() == set()


def test_a_no_network_verifier_without_network_options_is_refused(provider, docker_client, base, left, tmp_path):
    workspace = write_files(tmp_path / "ws", {"out.txt": "42\n"})
    recording = Recording(provider, docker_client)
    with pytest.raises(TaskError, match="network_mode 'no-network'") as refused:
        _separate(recording, base, _offline_task(tmp_path, base), workspace)
    assert "network_options" in str(refused.value)
    assert len(recording.specs) == 1  # no verifier's sandbox was started: the task never ran open
    assert left() == set()


def test_the_refusal_comes_before_the_agents_sandbox_stops(provider, docker_client, base, left, tmp_path):
    """A verifier sandbox the opener refuses is refused while the agent's sandbox still runs: the
    server can still verify that rollout another way."""
    workspace = write_files(tmp_path / "ws", {"out.txt": "42\n"})
    task = load_task(_offline_task(tmp_path, base))
    open_verifier = provider_verifier_opener(provider)

    async def run() -> bool:
        async with open_provider_sandbox(provider, _spec(base), private_pids=True) as agent:
            await _put_folder(provider, agent.handle, workspace, "/workspace")
            with pytest.raises(TaskError, match="network_mode"):
                await run_separate_verification(task, plan_verification(task), agent, open_verifier)
            still = await agent.exec("cat /workspace/out.txt")
            return still.stdout == "42\n"

    assert asyncio.run(run()) is True
    assert left() == set()
