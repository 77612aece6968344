"""The agent's attacks on the provider adapter (``sandboxes/provider.py``), for real: NeMo Gym's
provider protocol over the Docker engine (``tests/nemo_gym_docker_provider.py``), the users image's
``agent`` (uid 1000) and ``grader`` (uid 1001), and the agent's leftover processes running beside
attach and grading, as shared mode allows. Runs beside the real ``nemo-gym`` only (``nox -s
nemo-gym``).

A leftover process of the agent sees every ``/proc/<pid>/cmdline`` (the commands the host sends: the
probe's names the upload folder, grading's names the staged archive), writes into the stdout of any
process of its own uid, and owns what the provider uploads when the container runs as the agent.
Each test asserts the safe behaviour: no reward the agent did not earn, no root for its programs,
no mask it can cause that goes uncounted. ``tests/test_provider_attacks.py`` models the same attacks
deterministically on the stand-in provider.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Set, Tuple

import pytest
from support import EXAMPLES, write_files

if os.environ.get("NEMO_GYM_REQUIRE_NEMO_GYM") != "1":
    pytest.importorskip("nemo_gym.sandbox.providers.base", reason="needs the real nemo-gym (nox -s nemo-gym)")

from nemo_gym.sandbox.providers.base import SandboxHandle, SandboxSpec
from nemo_gym_docker_provider import DockerEngineProvider, list_sandboxes

from nemo_gym.data.tasks.harbor.sandboxes.base import SandboxError
from nemo_gym.data.tasks.harbor.sandboxes.provider import SAFE_PATH, ProviderSandbox, attach
from nemo_gym.data.tasks.harbor.task import load_task
from nemo_gym.data.tasks.harbor.verification import (
    VerificationOutcome,
    VerificationPlan,
    mask_counts,
    plan_verification,
    run_verification,
)

pytestmark = [pytest.mark.nemo_gym, pytest.mark.docker]

Volumes = Dict[str, Dict[str, str]]


@pytest.fixture
def owner() -> str:
    return f"nemo-gym-test.owner={uuid.uuid4().hex}"


@pytest.fixture
def provider(docker_client: Any, owner: str) -> DockerEngineProvider:
    name, value = owner.split("=")
    return DockerEngineProvider(docker_client, labels={name: value})


@pytest.fixture(scope="module")
def users(docker_client: Any) -> Tuple[str, Volumes]:
    from images import users_image

    return users_image(docker_client)


@pytest.fixture
def left(docker_client: Any, owner: str) -> Callable[[], Set[str]]:
    return lambda: set(list_sandboxes(docker_client, owner))


def _spec(
    users: Tuple[str, Volumes], workdir: str = "/workspace", env: Optional[Dict[str, str]] = None, **options: Any
):
    image, volumes = users
    return SandboxSpec(image=image, workdir=workdir, env=env or {}, provider_options={"volumes": volumes, **options})


async def _root(provider: Any, handle: SandboxHandle, command: str) -> str:
    """The harness's own command, as root, with the system's PATH (never the agent's ``sh``)."""
    ran = await provider.exec(handle, command, user="root", env={"PATH": SAFE_PATH})
    assert ran.return_code == 0, ran
    return ran.stdout or ""


async def _workspace(provider: Any, handle: SandboxHandle, files: Dict[str, str], folder: str = "/workspace") -> None:
    """The agent's working directory: ``files`` in it, all of it the agent's."""
    writes = [f"mkdir -p {folder}"]
    for name, text in files.items():
        path = shlex.quote(f"{folder}/{name}")
        writes.append(f"mkdir -p $(dirname {path}) && printf %s {shlex.quote(text)} > {path}")
    writes.append(f"chown -R agent: {folder}")
    await _root(provider, handle, " && ".join(writes))


async def _leave_behind(provider: Any, handle: SandboxHandle, source: str) -> None:
    """Starts the agent's Python ``source`` as its leftover process (uid 1000), running from now on."""
    script = shlex.quote("import os, time\nopen('/tmp/agent-alive', 'w').close()\n" + source)
    start = f"printf %s {script} > /tmp/agent.py && nohup /usr/local/bin/python3 /tmp/agent.py > /tmp/agent.out 2>&1 &"
    started = await provider.exec(handle, start, user="agent", env={"PATH": SAFE_PATH})
    assert started.return_code == 0, started
    await _root(provider, handle, "for i in $(seq 200); do [ -e /tmp/agent-alive ] && exit 0; sleep 0.05; done; exit 1")


async def _agent_log(provider: Any, handle: SandboxHandle) -> str:
    return await _root(provider, handle, "cat /tmp/agent-log /tmp/agent.out 2>/dev/null; true")


# The agent's watcher: every process's command line, as often as it can, for 30 s.
WATCH = """
import re
def processes():
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    yield pid, handle.read(), os.stat(f"/proc/{pid}").st_uid
            except OSError:
                pass
def log(line):
    with open("/tmp/agent-log", "a") as handle:
        handle.write(line + "\\n")
end = time.time() + 30
"""

ANSWER = """
from nemo_gym.verifiers.files import read_text
def verify(workspace, task_data):
    return float(read_text(workspace, "answer.txt") == task_data["answer"])
"""


def _answer_plan(tmp_path: Path, toml: str = "") -> VerificationPlan:
    """A Python verifier that scores 1 only for the answer in task_data.json, which the agent never saw."""
    files = {
        "task.toml": '[agent]\nuser = "agent"\n' + toml,
        "tests/verifier.py": ANSWER,
        "task_data.json": '{"answer": "the-secret-answer"}',
    }
    return plan_verification(load_task(write_files(tmp_path / "task", files)))


def _key(outcome: VerificationOutcome) -> Tuple[Any, ...]:
    return (outcome.reward, outcome.masked, outcome.mask_reason, outcome.failure_kind)


# --- the provider's own `sh -c` ------------------------------------------------------------------

AGENT_SH = '#!/bin/bash\necho "$(/usr/bin/id -un)" >> /tmp/agent-sh-ran\nexec /bin/sh "$@"\n'
AGENT_PATH = "/workspace/bin:/usr/local/bin:/usr/bin:/bin"


@pytest.mark.parametrize("where", ["image-env", "verifier-env"])
def test_the_providers_sh_is_never_the_agents(provider, users, left, tmp_path, where):
    """The provider runs ``["sh", "-c", ...]`` and the runtime finds ``sh`` on the command's PATH.
    With a PATH that names a folder of the agent's first (the container's, as an image's ``ENV
    PATH=/app/.venv/bin:$PATH`` gives it, or a task's ``[verifier.env] PATH``), the agent's ``sh``
    must never run: the probe and grading run as root."""
    spec = _spec(users, env={"PATH": AGENT_PATH} if where == "image-env" else None)
    toml = f'[verifier.env]\nPATH = "{AGENT_PATH}"\n' if where == "verifier-env" else ""
    script = '[ "$(cat answer.txt)" = 42 ] && echo 1 > /logs/verifier/reward.txt\n'
    plan = plan_verification(load_task(write_files(tmp_path / "task", {"task.toml": toml, "tests/test.sh": script})))

    async def run() -> Tuple[VerificationOutcome, str]:
        handle = await provider.create(spec)
        try:
            await _workspace(provider, handle, {"answer.txt": "42\n", "bin/sh": AGENT_SH})
            await _root(provider, handle, "chmod 755 /workspace/bin/sh")
            sandbox = await attach(provider, handle, spec=spec, private_pids=True)
            outcome = await run_verification(plan, sandbox)
            return outcome, await _root(provider, handle, "cat /tmp/agent-sh-ran 2>/dev/null; true")
        finally:
            await provider.close(handle)

    outcome, ran = asyncio.run(run())
    assert _key(outcome) == (1.0, False, None, None), outcome
    assert ran == "", f"the agent's sh ran as: {ran.split()}"
    assert left() == set()


# --- the probe: who is the admin -----------------------------------------------------------------

SQUAT = (
    WATCH
    + """
made = {}
while time.time() < end:
    for pid, command, uid in processes():
        found = re.search(rb"/tmp/nemo-gym-[A-Za-z0-9]{16}", command)
        if not found:
            continue
        name = found.group().decode()
        if name not in made:  # the first probe, run as the agent: make its folder before root does
            try:
                os.mkdir(name, 0o700)
                made[name] = "made"
                log("made " + name)
            except OSError:
                made[name] = "lost"
        elif uid == 0 and made[name] == "made":
            made[name] = "root"
    for name, state in list(made.items()):
        if state == "root" and not any(name.encode() in c and u == 0 for _, c, u in processes()):
            os.rmdir(name)  # root's probe has failed: give the folder back for the agent's own probe
            made[name] = "given back"
            log("gave back " + name)
"""
)


def test_the_agent_cannot_make_itself_the_admin_by_claiming_the_upload_folder(provider, users, left):
    """The container runs as the agent, and root is reachable. The first probe (as the agent) names
    the folder the root probe then makes; the agent's leftover process makes it first, so root's
    ``mkdir`` fails and ``_try_root`` reads "no root"; it removes it again, so the third probe, as the
    agent, succeeds: the admin is the agent."""
    spec = _spec(users, user="agent")

    async def run() -> Tuple[Any, str, str]:
        handle = await provider.create(spec)
        try:
            await _workspace(provider, handle, {})
            await _leave_behind(provider, handle, SQUAT)
            try:
                sandbox = await attach(provider, handle, spec=spec, private_pids=True)
            except SandboxError as error:
                return f"raised: {error}", "", await _agent_log(provider, handle)
            who = await sandbox.exec("id -un", user=sandbox.admin_user, clean_shell=True)
            return sandbox.admin_user, who.stdout.strip(), await _agent_log(provider, handle)
        finally:
            await provider.close(handle)

    admin, really, log = asyncio.run(run())
    assert "made /tmp/nemo-gym-" in log, f"the agent never saw the folder's name: {log}"
    assert (admin, really) == ("root", "root"), f"the admin is {admin!r} (runs as {really!r}); the agent: {log}"
    assert left() == set()


FORGE = (
    WATCH
    + """
done = set()
while time.time() < end:
    for pid, command, uid in processes():
        if pid in done or uid != os.getuid() or b"/tmp/nemo-gym-" not in command or b"id -u" not in command:
            continue
        done.add(pid)
        try:  # the probe is a process of the agent's own uid: its stdout is the agent's to write in
            out = os.open(f"/proc/{pid}/fd/1", os.O_WRONLY)
            os.write(out, b"/workspace\\n0\\nroot\\n")
            os.close(out)
            log("forged " + pid)
        except OSError as error:
            log(f"could not forge {pid}: {error}")
"""
)


def test_the_agent_cannot_write_the_probes_answer(provider, users, left):
    """The container runs as the agent: the first probe is a process of the agent's uid, and the
    agent writes "uid 0, root" into its stdout before the probe prints. ``attach`` takes the admin
    for root and never names it to the provider (its "own" user), so every admin command runs as
    the agent while the host believes it runs as root."""
    spec = _spec(users, user="agent")

    async def run() -> Tuple[Any, str, str]:
        handle = await provider.create(spec)
        try:
            await _workspace(provider, handle, {})
            await _leave_behind(provider, handle, FORGE)
            sandbox = await attach(provider, handle, spec=spec, private_pids=True)
            who = await sandbox.exec("id -un", user=sandbox.admin_user, clean_shell=True)
            return sandbox.admin_user, who.stdout.strip(), await _agent_log(provider, handle)
        finally:
            await provider.close(handle)

    admin, really, log = asyncio.run(run())
    assert really == "root", f"attach took the admin for {admin!r}; its commands run as {really!r} (agent: {log})"
    assert left() == set()


# --- the private upload folder -------------------------------------------------------------------

STEAL = (
    WATCH
    + """
import json, tarfile
done = set()
while time.time() < end:
    for pid, command, uid in processes():
        found = re.search(rb"/tmp/nemo-gym-[A-Za-z0-9]{16}/nemo-gym-stage-[0-9a-f]+\\.tar", command)
        if not found or found.group() in done:
            continue
        done.add(found.group())
        try:  # grading's command line names the staged archive; the folder's mode 0711 lets anyone in
            with open(found.group(), "rb") as handle, tarfile.open(fileobj=handle) as archive:
                for member in archive.getmembers():
                    if member.name.endswith("/task_data.json"):
                        answer = json.load(archive.extractfile(member))["answer"]
                        with open("/workspace/answer.txt", "w") as out:
                            out.write(answer)
                        log("stole " + answer)
        except OSError as error:
            log(f"could not read the archive: {error}")
"""
)


class WorldReadable(DockerEngineProvider):
    """Writes an upload with mode 0644, as NeMo Gym's OpenSandbox provider (``files.write_file``)
    and its Apptainer provider (``cp`` of a file it wrote with the default umask) do."""

    async def upload_file(self, handle: SandboxHandle, source_path: Path, target_path: str) -> None:
        os.chmod(source_path, 0o644)
        await super().upload_file(handle, source_path, target_path)


@pytest.mark.parametrize("form", ["owned-by-the-agent", "world-readable"])
def test_the_staged_answers_cannot_be_read_during_grading(docker_client, owner, users, left, tmp_path, form):
    """``owned-by-the-agent``: the container runs as the agent and root is reachable; the provider
    writes uploads as the container's user (this suite's provider does, 0600). ``world-readable``:
    the container runs as root and the provider writes uploads 0644. Either way, the agent's
    leftover process reads the archive's name in grading's command line, opens it before the
    prepare step removes it, and writes the answer where ``verify`` then reads it."""
    name, value = owner.split("=")
    if form == "world-readable":
        provider: DockerEngineProvider = WorldReadable(docker_client, labels={name: value})
        spec = _spec(users)
    else:
        provider = DockerEngineProvider(docker_client, labels={name: value})
        spec = _spec(users, user="agent")
    plan = _answer_plan(tmp_path)

    async def run() -> Tuple[VerificationOutcome, ProviderSandbox, str]:
        handle = await provider.create(spec)
        try:
            await _workspace(provider, handle, {"answer.txt": "a guess"})
            sandbox = await attach(provider, handle, spec=spec, private_pids=True)
            await _leave_behind(provider, handle, STEAL)
            outcome = await run_verification(plan, sandbox)
            return outcome, sandbox, await _agent_log(provider, handle)
        finally:
            await provider.close(handle)

    outcome, sandbox, log = asyncio.run(run())
    assert sandbox.admin_user == "root"
    assert "stole" not in log, f"the agent read the staged answer ({log.strip()}) and scored {outcome.reward}"
    assert _key(outcome) == (0.0, False, None, None), outcome
    assert left() == set()


REWRITE = (
    WATCH
    + """
import io, tarfile
done = set()
while time.time() < end:
    for pid, command, uid in processes():
        found = re.search(rb"/tmp/nemo-gym-[A-Za-z0-9]{16}/nemo-gym-stage-[0-9a-f]+\\.tar", command)
        if not found or found.group() in done:
            continue
        done.add(found.group())
        try:  # the agent owns the upload: it rewrites it before root unpacks it into /
            with open(found.group(), "r+b") as handle:
                original, rewritten = io.BytesIO(handle.read()), io.BytesIO()
                with tarfile.open(fileobj=original) as old, tarfile.open(fileobj=rewritten, mode="w") as new:
                    for member in old.getmembers():
                        data = old.extractfile(member).read() if member.isfile() else None
                        if member.name.endswith("/verifier.py"):
                            data = b"def verify():\\n    return 1.0\\n"
                            member.size = len(data)
                        new.addfile(member, io.BytesIO(data) if data is not None else None)
                    planted = tarfile.TarInfo("etc/planted-by-the-agent")
                    planted.size = 4
                    new.addfile(planted, io.BytesIO(b"pwnd"))
                handle.seek(0)
                handle.truncate()
                handle.write(rewritten.getvalue())
            log("rewrote " + found.group().decode())
        except OSError as error:
            log(f"could not rewrite the archive: {error}")
"""
)


def test_the_staged_archive_cannot_be_rewritten_during_grading(provider, users, left, tmp_path):
    """The container runs as the agent, root is reachable, and the upload is the agent's (as above).
    The agent rewrites the archive between the upload and ``tar -xf ... -C /`` as root: a verifier
    of its own (the run's key is in the archive, so the runner signs the agent's score), and a file
    anywhere in the file system, written by root."""
    spec = _spec(users, user="agent")
    plan = _answer_plan(tmp_path)

    async def run() -> Tuple[VerificationOutcome, str, str]:
        handle = await provider.create(spec)
        try:
            await _workspace(provider, handle, {"answer.txt": "a guess"})
            sandbox = await attach(provider, handle, spec=spec, private_pids=True)
            await _leave_behind(provider, handle, REWRITE)
            outcome = await run_verification(plan, sandbox)
            planted = await _root(provider, handle, "stat -c '%U %n' /etc/planted-by-the-agent 2>/dev/null; true")
            return outcome, planted, await _agent_log(provider, handle)
        finally:
            await provider.close(handle)

    outcome, planted, log = asyncio.run(run())
    assert (planted, _key(outcome)) == ("", (0.0, False, None, None)), (
        f"root wrote the agent's file ({planted.strip()}), the agent's verifier scored {outcome.reward} "
        f"(agent: {log.strip()})"
    )
    assert left() == set()


# --- the working directory -----------------------------------------------------------------------


@pytest.mark.parametrize("when", ["before-attach", "after-attach"])
def test_a_workdir_the_agent_removes_is_scored_or_a_counted_mask(provider, users, left, tmp_path, when):
    """The task's working directory is a folder of the agent's (``/workspace/app``, in its own
    ``/workspace``); the agent removes it, so every command started there fails. A mask the agent
    can cause is allowed only if it is counted: ``attach`` must not fail outside the count."""
    spec = _spec(users, workdir="/workspace/app")
    plan = plan_verification(load_task(EXAMPLES / "answer-file"))
    before = sum(mask_counts().values())

    async def run() -> Tuple[Optional[VerificationOutcome], str]:
        handle = await provider.create(spec)
        try:
            await _workspace(provider, handle, {"app/answer.txt": "Paris\n"})
            removal = "rm -rf /workspace/app"
            if when == "before-attach":
                assert (await provider.exec(handle, removal, user="agent", env={"PATH": SAFE_PATH})).return_code == 0
            try:
                sandbox = await attach(provider, handle, spec=spec, private_pids=True)
            except SandboxError as error:
                return None, str(error)
            if when == "after-attach":
                assert (await provider.exec(handle, removal, user="agent", env={"PATH": SAFE_PATH})).return_code == 0
            return await run_verification(plan, sandbox), ""
        finally:
            await provider.close(handle)

    outcome, error = asyncio.run(run())
    counted = sum(mask_counts().values()) - before
    assert outcome is not None, f"attach raised, and no mask was counted ({counted}): {error}"
    assert not outcome.masked or counted == 1, (outcome, counted)
    assert outcome.reward == 0.0, outcome
    assert left() == set()


# --- processes that outlive their welcome --------------------------------------------------------

PLANTER = """
end = time.time() + 20
while time.time() < end:
    for name, text in (("reward.json", '{"reward": 1}'), ("reward.txt", "1")):
        try:
            os.unlink(f"/logs/verifier/{name}")
        except OSError:
            pass
        try:
            with open(f"/logs/verifier/{name}", "w") as handle:
                handle.write(text)
        except OSError:
            pass
    try:
        answer = open("/tests/task_data.json").read().split('"answer": "')[1].split('"')[0]
        open("/workspace/answer.txt", "w").write(answer)
    except (OSError, IndexError):
        pass
    time.sleep(0.002)
"""


@pytest.mark.parametrize("private_pids", [True, False], ids=["private-pids", "shared-pids"])
def test_a_leftover_agent_process_never_plants_a_reward(provider, users, left, tmp_path, private_pids):
    """The agent's own process (started before grading, so never killed) rewrites the reward files
    and reads ``/tests`` throughout grading, whatever ``private_pids`` says."""
    spec = _spec(users)
    plan = _answer_plan(tmp_path)

    async def run() -> VerificationOutcome:
        handle = await provider.create(spec)
        try:
            await _workspace(provider, handle, {"answer.txt": "a guess"})
            sandbox = await attach(provider, handle, spec=spec, private_pids=private_pids)
            await _leave_behind(provider, handle, PLANTER)
            return await run_verification(plan, sandbox)
        finally:
            await provider.close(handle)

    assert _key(asyncio.run(run())) == (0.0, False, None, None)
    assert left() == set()


LINGER = """#!/usr/bin/env python3
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        end = time.time() + 120  # past any grading, however loaded the machine: the container's end stops it
        beat = 0
        while time.time() < end:
            # Whole or absent, never empty (a rename): a reader never takes a beat for none.
            beat += 1
            with open("/tmp/linger-beat", "w") as handle:
                handle.write("%d %d" % (os.getpid(), beat))
            os.replace("/tmp/linger-beat", "/tmp/linger-alive")
            time.sleep(0.01)
    os._exit(0)
"""


@pytest.mark.parametrize(
    "private_pids",
    [
        True,
        pytest.param(
            False,
            marks=pytest.mark.xfail(
                strict=True,
                reason="documented (README, private_pids): without it nothing is killed, and a process the verifier "
                "started can outlive grading",
            ),
        ),
    ],
    ids=["private-pids", "shared-pids"],
)
def test_a_daemon_the_agents_program_leaves_does_not_outlive_grading(provider, users, left, tmp_path, private_pids):
    """A task's own test.sh, run as ``grader``, runs the agent's program, which leaves a daemon (a
    new session, double fork). With ``private_pids`` grading kills it; the daemon keeps writing a
    heartbeat, so one that survives shows up after grading. test.sh waits for its first beat, so the
    daemon is alive whenever grading's end comes."""
    toml = '[verifier]\nuser = "grader"\ntimeout_sec = 30\n'
    script = (
        "/workspace/linger.py\n"
        "for i in $(seq 200); do [ -s /tmp/linger-alive ] && break; sleep 0.05; done\n"
        "echo 0 > /logs/verifier/reward.txt\n"
    )
    plan = plan_verification(load_task(write_files(tmp_path / "task", {"task.toml": toml, "tests/test.sh": script})))
    spec = _spec(users)

    async def run() -> Tuple[VerificationOutcome, str]:
        handle = await provider.create(spec)
        try:
            await _workspace(provider, handle, {"linger.py": LINGER})
            await _root(provider, handle, "chmod 755 /workspace/linger.py")
            sandbox = await attach(provider, handle, spec=spec, private_pids=private_pids)
            outcome = await run_verification(plan, sandbox)
            # A heartbeat within 3 s: a survivor shows up even on a loaded machine.
            alive = await _root(
                provider,
                handle,
                "rm -f /tmp/linger-alive; for i in $(seq 30); do sleep 0.1; [ -s /tmp/linger-alive ] && break; done; "
                "cat /tmp/linger-alive 2>/dev/null; true",
            )
            return outcome, alive
        finally:
            await provider.close(handle)

    outcome, alive = asyncio.run(run())
    assert _key(outcome) == (0.0, False, None, None), outcome
    assert alive == "", f"the daemon (pid {alive}) outlived grading"
    assert left() == set()


@pytest.mark.parametrize("private_pids", [True, False], ids=["private-pids", "shared-pids"])
def test_an_agent_sharing_the_verifiers_uid_cannot_mask_its_wrong_answer(provider, users, left, tmp_path, private_pids):
    """Red team 39 through a provider: the agent's leftover process, with the verifier's uid, swaps
    files and folders in a folder of /logs/verifier it keeps its working directory in. Without
    ``private_pids`` nothing is stopped, so an output that changed under its copy must count as
    skipped, never mask the wrong answer's 0."""
    from test_docker_attacks_grading import SWAPPER

    toml = '[agent]\nuser = "agent"\n[verifier]\nuser = "agent"\n'
    source = "import time\ndef verify():\n    time.sleep(0.5)\n    return 0.0\n"
    plan = plan_verification(
        load_task(write_files(tmp_path / "task", {"task.toml": toml, "tests/verifier.py": source}))
    )
    spec = _spec(users)

    async def run() -> VerificationOutcome:
        handle = await provider.create(spec)
        try:
            await _workspace(provider, handle, {})
            sandbox = await attach(provider, handle, spec=spec, private_pids=private_pids)
            await _leave_behind(provider, handle, SWAPPER)
            return await run_verification(plan, sandbox)
        finally:
            await provider.close(handle)

    for _ in range(3):
        outcome = asyncio.run(run())
        assert _key(outcome) == (0.0, False, None, None), outcome
    assert left() == set()
