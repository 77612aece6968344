"""The agent's attacks on the provider adapter (``sandboxes/provider.py``), on ``verify_rollouts``
and on ``gym-harbor dataset validate``, modelled on the stand-in provider over ``LocalSandbox``.

Each command of the local sandbox has a PID namespace of its own, so the agent's leftover processes
cannot run beside the verifier here: the stand-in plays the agent at the moments a real leftover
process would act, with what such a process can see. A process of the agent's uid reads every
``/proc/<pid>/cmdline`` (the commands the host sends, which name the private upload folder and the
staged archive) and writes into ``/proc/<pid>/fd/1`` of any process of its own uid (the probe's
answer, when the sandbox runs as the agent). ``tests/test_provider_docker_attacks.py`` runs the
same attacks for real, with a leftover process in a container, and shows that it wins those races.

Each test asserts the safe behaviour: no reward the agent did not earn, no root for the agent's
programs, no secret printed, no rollout's fate decided by another's agent.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import shlex
import shutil
import subprocess
import sys
import uuid
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest
from provider_types import SandboxExecResult, SandboxHandle, SandboxSpec
from support import EXAMPLES, write_files
from test_provider import LocalProvider

from nemo_gym.data.tasks.harbor.batch import Rollout, verify_rollouts
from nemo_gym.data.tasks.harbor.sandboxes.base import SandboxError
from nemo_gym.data.tasks.harbor.sandboxes.local import LocalSandbox, namespaces_available
from nemo_gym.data.tasks.harbor.sandboxes.provider import PROVIDER_FAULT_CODE, attach
from nemo_gym.data.tasks.harbor.task import load_task
from nemo_gym.data.tasks.harbor.verification import (
    VerificationOutcome,
    mask_counts,
    plan_verification,
    run_verification,
)

needs_namespaces = pytest.mark.skipif(not namespaces_available(), reason="the stand-in provider needs bubblewrap")
GYM = str(Path(sys.executable).parent / "gym-harbor")
FOLDER = re.compile(r"/tmp/nemo-gym-[A-Za-z0-9]{16}")
ARCHIVE = re.compile(r"/tmp/nemo-gym-[A-Za-z0-9]{16}/nemo-gym-stage-[0-9a-f]+\.tar")

ANSWER = """
from nemo_gym.verifiers.files import read_text
def verify(workspace, task_data):
    return float(read_text(workspace, "answer.txt") == task_data["answer"])
"""


def _answer_task(tmp_path: Path, toml: str = "") -> Path:
    """A Python verifier that scores 1 only for the answer in task_data.json, which the agent never saw."""
    files = {
        "task.toml": '[agent]\nuser = "agent"\n' + toml,
        "tests/verifier.py": ANSWER,
        "task_data.json": '{"answer": "the-secret-answer"}',
    }
    return write_files(tmp_path / "task", files)


class UsersProvider(LocalProvider):
    """The stand-in with the users of ``tests/images.py``'s users image: ``agent`` (who owns the
    working directory) and ``grader``, a ``/tmp`` anyone may write in (mode 1777, as everywhere),
    and, with ``as_agent``, a sandbox that runs a command as ``agent`` when no user is named (an
    image whose ``USER`` is the agent's) while ``"root"`` stays reachable, as Docker's exec allows.

    ``agent(handle, script)`` runs ``script`` as the agent: what its leftover process does."""

    def __init__(self, workspace: Path, scratch: Path, *, as_agent: bool = False) -> None:
        super().__init__(workspace, scratch)
        self.as_agent = as_agent

    async def create(self, spec: Any) -> Any:
        copy = self.scratch / f"ws-{uuid.uuid4().hex}"
        shutil.copytree(self.workspace, copy)
        sandbox = LocalSandbox(copy, workdir=spec.workdir or "/app", env=spec.env, users=("agent", "grader"))
        await sandbox.__aenter__()
        ready = await sandbox.exec(f"chmod 1777 /tmp && chown -R agent {shlex.quote(sandbox.workdir)}")
        assert ready.return_code == 0, ready
        return SandboxHandle(sandbox_id=str(copy), provider_name=self.name, raw=sandbox)

    def _user(self, user: Any) -> Any:
        if str(user) in ("root", "0"):
            return None  # the local sandbox's caller: root
        if user is None and self.as_agent:
            return "agent"
        return user

    async def exec(self, handle: Any, command: str, *, user: Any = None, **options: Any) -> Any:
        return await super().exec(handle, command, user=self._user(user), **options)

    async def agent(self, handle: Any, script: str) -> Any:
        return await handle.raw.exec(script, user="agent", cwd="/")


# --- the probe: who is the admin -----------------------------------------------------------------


class FolderSquatter(UsersProvider):
    """The agent, running beside a sandbox whose user is its own, reads the first probe's command
    line (it names the upload folder) and makes that folder before the root probe can; with
    ``give_back``, it removes it again once the root probe has failed, so the third probe (as the
    sandbox's user) succeeds."""

    def __init__(self, workspace: Path, scratch: Path, *, give_back: bool) -> None:
        super().__init__(workspace, scratch, as_agent=True)
        self.give_back, self.squatted, self.log = give_back, "", []

    async def exec(self, handle: Any, command: str, *, user: Any = None, **options: Any) -> Any:
        result = await super().exec(handle, command, user=user, **options)
        found = FOLDER.search(command)
        if found and not self.squatted and user is None:  # /proc/<pid>/cmdline of a process of its own uid
            self.squatted = found.group()
            made = await self.agent(handle, f"mkdir -m 0700 {self.squatted}")
            self.log.append(f"squatted: {made.return_code}")
        elif found and self.squatted and str(user) == "root" and self.give_back:
            gone = await self.agent(handle, f"rmdir {self.squatted}")
            self.log.append(f"gave back: {gone.return_code}")
        return result


@needs_namespaces
def test_the_agent_cannot_make_itself_the_admin_by_claiming_the_upload_folder(tmp_path):
    """Were a probe's command to name the upload folder before root made it, the agent (who reads
    every command line of its uid) would make it first, and a failed ``mkdir`` could read as "no
    root here". The folder is named by no command before it exists, and the admin stays root."""
    provider = FolderSquatter(EXAMPLES / "answer-file" / "workspace", tmp_path, give_back=True)

    async def run() -> Tuple[Any, Any]:
        handle = await provider.create(SandboxSpec(image="local", workdir="/app"))
        try:
            sandbox = await attach(provider, handle, spec=SandboxSpec(image="local", workdir="/app"))
            who = await sandbox.exec("id -un", user=sandbox.admin_user, clean_shell=True)
            return sandbox.admin_user, who.stdout.strip()
        finally:
            await provider.close(handle)

    admin, really = asyncio.run(run())
    assert provider.log == [], provider.log  # nothing to squat: no command named the folder
    assert (admin, really) == ("root", "root"), f"the admin is {admin!r} (runs as {really!r}): the agent took it"


@needs_namespaces
def test_the_agent_cannot_make_attach_fail_by_claiming_the_upload_folder(tmp_path):
    """The same squat, kept: every ``mkdir`` of the folder fails and ``attach`` raises. The rollout
    is lost outside ``mask_counts()``: a mask the agent chooses that nobody counts."""
    provider = FolderSquatter(EXAMPLES / "answer-file" / "workspace", tmp_path, give_back=False)
    before = sum(mask_counts().values())

    async def run() -> Optional[str]:
        handle = await provider.create(SandboxSpec(image="local", workdir="/app"))
        try:
            sandbox = await attach(provider, handle, spec=SandboxSpec(image="local", workdir="/app"))
            return str(sandbox.admin_user)
        except SandboxError as error:
            return f"raised: {error}"
        finally:
            await provider.close(handle)

    admin = asyncio.run(run())
    counted = sum(mask_counts().values()) - before
    assert admin == "root" or counted == 1, f"attach: {admin}; masks counted: {counted}"


class AnswerForger(UsersProvider):
    """The agent writes into the first probe's stdout (``/proc/<pid>/fd/1`` of a process of its own
    uid) before the probe prints: the host reads the agent's lines first."""

    def __init__(self, workspace: Path, scratch: Path) -> None:
        super().__init__(workspace, scratch, as_agent=True)
        self.forged = 0

    async def exec(self, handle: Any, command: str, *, user: Any = None, **options: Any) -> Any:
        result = await super().exec(handle, command, user=user, **options)
        if user is None and "id -u" in command and not self.forged:  # a probe run as the agent
            self.forged += 1
            return SandboxExecResult("/app\n0\nroot\n" + (result.stdout or ""), result.stderr, result.return_code)
        return result


@needs_namespaces
def test_the_agent_cannot_write_the_probes_answer(tmp_path):
    provider = AnswerForger(EXAMPLES / "answer-file" / "workspace", tmp_path)

    async def run() -> Tuple[Any, str]:
        handle = await provider.create(SandboxSpec(image="local", workdir="/app"))
        try:
            sandbox = await attach(provider, handle, spec=SandboxSpec(image="local", workdir="/app"))
            who = await sandbox.exec("id -un", user=sandbox.admin_user, clean_shell=True)
            return sandbox.admin_user, who.stdout.strip()
        finally:
            await provider.close(handle)

    admin, really = asyncio.run(run())
    assert provider.forged == 0  # no probe ran as the agent: root answered
    assert really == "root", f"attach took the admin for {admin!r}, and its commands run as {really!r}"


# --- the provider's own `sh -c` ------------------------------------------------------------------


class ShellByPath(UsersProvider):
    """NeMo Gym's providers run ``["sh", "-c", command]``, and the runtime finds ``sh`` on the PATH
    of the command's environment (the exec's env over the sandbox's): so does this stand-in."""

    async def exec(self, handle: Any, command: str, **options: Any) -> Any:
        return await super().exec(handle, "exec sh -c " + shlex.quote(command), **options)


AGENT_SH = '#!/bin/bash\necho "$(/usr/bin/id -un)" >> /tmp/agent-sh-ran\nexec /bin/sh "$@"\n'
AGENT_PATH = "/app/bin:/usr/local/bin:/usr/bin:/bin"


@needs_namespaces
@pytest.mark.parametrize("where", ["sandbox-env", "verifier-env"])
def test_the_providers_sh_is_never_the_agents(tmp_path, where):
    """A PATH that names a folder of the agent's (an image's ``ENV PATH=/app/.venv/bin:$PATH``, or a
    task's ``[verifier.env] PATH``) and the agent's ``sh`` in it: the probe and grading run as root
    through the provider's ``sh -c``, so the agent's ``sh`` must never be the one found."""
    workspace = write_files(tmp_path / "ws", {"answer.txt": "42\n", "bin/sh": AGENT_SH})
    (workspace / "bin" / "sh").chmod(0o755)
    (tmp_path / "scratch").mkdir()
    provider = ShellByPath(workspace, tmp_path / "scratch")
    toml = '[verifier.env]\nPATH = "' + AGENT_PATH + '"\n' if where == "verifier-env" else ""
    script = '[ "$(cat answer.txt)" = 42 ] && echo 1 > /logs/verifier/reward.txt\n'
    task = write_files(tmp_path / "task", {"task.toml": toml, "tests/test.sh": script})
    env = {"PATH": AGENT_PATH} if where == "sandbox-env" else {}
    spec = SandboxSpec(image="local", workdir="/app", env=env)

    async def run() -> Tuple[VerificationOutcome, str]:
        handle = await provider.create(spec)
        try:
            sandbox = await attach(provider, handle, spec=spec, private_pids=True)
            outcome = await run_verification(plan_verification(load_task(task)), sandbox)
            ran = await handle.raw.exec("cat /tmp/agent-sh-ran 2>/dev/null; true", clean_shell=True)
            return outcome, ran.stdout
        finally:
            await provider.close(handle)

    outcome, ran = asyncio.run(run())
    assert (outcome.reward, outcome.masked) == (1.0, False), outcome
    assert ran == "", f"the agent's sh ran as: {ran.split()}"


# --- the private upload folder -------------------------------------------------------------------


class Uploads(UsersProvider):
    """Uploads land as the provider writes them: ``kept`` with the source's mode (0600, as the
    suite's Docker provider does), ``world`` 0644 (OpenSandbox's ``files.write_file``, Apptainer's
    ``cp`` of a file it wrote with the default umask), or ``owned`` by the sandbox's user (the
    suite's Docker provider in a container whose user is the agent's). When grading starts, the
    agent reads its command line (which names the archive) and tries to read the answer out of it."""

    def __init__(self, workspace: Path, scratch: Path, form: str) -> None:
        super().__init__(workspace, scratch)
        self.form, self.stole = form, []

    async def upload_file(self, handle: Any, source_path: Path, target_path: str) -> None:
        await super().upload_file(handle, source_path, target_path)
        if self.form == "world":
            handle.raw.host_path(target_path).chmod(0o644)
        elif self.form == "owned":
            await handle.raw.exec(f"chown agent {shlex.quote(target_path)}")

    async def exec(self, handle: Any, command: str, **options: Any) -> Any:
        found = ARCHIVE.search(command)
        if found:  # the grading exec's command line, as /proc/<pid>/cmdline shows it to anyone
            archive = shlex.quote(found.group())
            steal = (
                f"tar -xOf {archive} --wildcards '*/task_data.json' "
                '| sed -n \'s/.*"answer": *"\\([^"]*\\)".*/\\1/p\' | tr -d \'\\n\' > /tmp/stolen '
                "&& [ -s /tmp/stolen ] && cp /tmp/stolen /app/answer.txt && cat /tmp/stolen"
            )
            stolen = await self.agent(handle, steal)
            self.stole.append(stolen.stdout)
        return await super().exec(handle, command, **options)


@needs_namespaces
@pytest.mark.parametrize("form", ["kept", "world", "owned"])
def test_the_staged_answers_cannot_be_read_from_the_upload_folder(tmp_path, form):
    workspace = write_files(tmp_path / "ws", {"answer.txt": "a guess"})
    (tmp_path / "scratch").mkdir()
    provider = Uploads(workspace, tmp_path / "scratch", form)
    plan = plan_verification(load_task(_answer_task(tmp_path)))
    spec = SandboxSpec(image="local", workdir="/app")

    async def run() -> VerificationOutcome:
        handle = await provider.create(spec)
        try:
            sandbox = await attach(provider, handle, spec=spec, private_pids=True)
            assert sandbox.admin_user == "root"
            return await run_verification(plan, sandbox)
        finally:
            await provider.close(handle)

    outcome = asyncio.run(run())
    assert provider.stole == [""], f"the agent read the staged answer: {provider.stole}"
    assert (outcome.reward, outcome.masked) == (0.0, False), outcome


# --- a batch -------------------------------------------------------------------------------------


@needs_namespaces
@pytest.mark.parametrize("hostile", [False, True], ids=["control", "hostile"])
def test_one_rollouts_agent_cannot_sink_the_batch(tmp_path, hostile):
    """Three rollouts of a task verified as ``grader``; in the middle one's sandbox (whose user is
    the agent's) the agent claimed the upload folder at attach and became the admin. That rollout
    may be masked; the other two must still be scored. (The control: no attack, all three score.)"""
    task = load_task(_answer_task(tmp_path, '[verifier]\nuser = "grader"\n'))
    right = write_files(tmp_path / "right", {"answer.txt": "the-secret-answer"})
    (tmp_path / "scratch").mkdir()
    honest = UsersProvider(right, tmp_path / "scratch")
    middle = FolderSquatter(right, tmp_path / "scratch", give_back=True) if hostile else honest
    spec = SandboxSpec(image="local", workdir="/app")

    async def run() -> List[VerificationOutcome]:
        async with AsyncExitStack() as stack:
            rollouts = []
            for provider in (honest, middle, honest):
                handle = await provider.create(spec)
                stack.push_async_callback(provider.close, handle)
                sandbox = await attach(provider, handle, spec=spec, private_pids=True)
                rollouts.append(Rollout(plan_verification(task), sandbox))
            return await verify_rollouts(rollouts, jobs=3)

    try:
        outcomes = asyncio.run(run())
    except Exception as error:  # the point: nothing of one rollout escapes the batch
        pytest.fail(f"one rollout's agent sank the whole batch: {type(error).__name__}: {error}")
    assert [outcome.reward for outcome in outcomes[::2]] == [1.0, 1.0], outcomes
    # The squat finds nothing to claim (no command names the folder): the rollout scores what it earned.
    assert outcomes[1].masked or outcomes[1].reward == 1.0, outcomes[1]


# --- what a provider returns ---------------------------------------------------------------------


class Flood(LocalProvider):
    """Returns ``size`` characters of output (half of them invalid UTF-8, as bytes) from the grading
    exec, which fails."""

    def __init__(self, workspace: Path, scratch: Path, size: int) -> None:
        super().__init__(workspace, scratch)
        self.size = size

    async def exec(self, handle: Any, command: str, **options: Any) -> Any:
        if "STEPS=" in command:
            noise = b"\xff\xfe" * (self.size // 4) + b"x" * (self.size // 2)
            return SandboxExecResult(stdout=noise, stderr="e" * self.size, return_code=1)
        return await super().exec(handle, command, **options)


@needs_namespaces
def test_a_flood_of_provider_output_masks_with_a_short_detail(tmp_path):
    provider = Flood(EXAMPLES / "answer-file" / "workspace", tmp_path, 64 << 20)
    task = load_task(EXAMPLES / "answer-file")
    spec = SandboxSpec(image="local", workdir="/app")

    async def run() -> VerificationOutcome:
        handle = await provider.create(spec)
        try:
            return await run_verification(plan_verification(task), await attach(provider, handle, spec=spec))
        finally:
            await provider.close(handle)

    outcome = asyncio.run(run())
    assert (outcome.reward, outcome.masked, outcome.mask_reason) == (0.0, True, "sandbox_error"), outcome.detail[:200]
    assert len(outcome.detail) < 1000 and len(outcome.stdout) < 1000


class Echoing(LocalProvider):
    """A provider whose fault message repeats the command's environment, as NeMo Gym's Apptainer
    provider's does (its timeout message carries the ``apptainer exec --env NAME=VALUE ...`` argv)."""

    async def exec(self, handle: Any, command: str, *, env: Any = None, **options: Any) -> Any:
        if "STEPS=" in command:
            # The task's own variables last: the message's tail (what a mask's detail keeps) holds them.
            ordered = sorted((env or {}).items(), key=lambda item: item[0] == "JUDGE_KEY")
            argv = ["apptainer", "exec", *[f"--env={name}={value}" for name, value in ordered], "sh"]
            return SandboxExecResult(None, f"FATAL: exec failed: {argv}", PROVIDER_FAULT_CODE, "sandbox")
        return await super().exec(handle, command, env=env, **options)


@needs_namespaces
def test_a_secret_in_a_providers_fault_message_is_never_logged(tmp_path, caplog):
    """The outcome's detail is redacted; the warning that counts the mask must be too."""
    task_dir = write_files(
        tmp_path / "task",
        {
            "task.toml": '[verifier.env]\nJUDGE_KEY = "${JUDGE_KEY}"\n',
            "tests/verifier.py": "def verify():\n    return 1.0\n",
        },
    )
    plan = plan_verification(load_task(task_dir), secrets={"JUDGE_KEY": "hunter2-judge-key"})
    provider = Echoing(EXAMPLES / "answer-file" / "workspace", tmp_path)
    spec = SandboxSpec(image="local", workdir="/app")

    async def run() -> VerificationOutcome:
        handle = await provider.create(spec)
        try:
            return await run_verification(plan, await attach(provider, handle, spec=spec))
        finally:
            await provider.close(handle)

    with caplog.at_level(logging.WARNING):
        outcome = asyncio.run(run())
    assert outcome.masked and "hunter2-judge-key" not in outcome.detail, outcome.detail
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "JUDGE_KEY=" in logged, logged  # the mask was logged
    assert "hunter2-judge-key" not in logged, f"the secret is in the log: {logged[-300:]}"


def test_a_probe_answered_with_garbage_raises_a_sandbox_error():
    """A provider whose probe answers garbage (no uid line, a boolean code): ``SandboxError``."""

    class Garbage:
        async def exec(self, handle: Any, command: str, **options: Any) -> Any:
            return SandboxExecResult("\n".join(["x"] * 100000), None, True)  # type: ignore[arg-type]

    with pytest.raises(SandboxError):
        asyncio.run(attach(Garbage(), object()))


# --- gym-harbor dataset validate -----------------------------------------------------------------


def _validate(*args: str) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    return subprocess.run([GYM, "dataset", "validate", *args], capture_output=True, text=True, timeout=300)


@needs_namespaces
def test_validate_takes_a_huge_jobs_without_starting_more_than_it_has(tmp_path):
    dataset = tmp_path / "ds"
    for index in range(2):
        shutil.copytree(EXAMPLES / "answer-file", dataset / f"task-{index}")
    ran = _validate(str(dataset), "--jobs", str(10**18), "--json")
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["passed"] == 2


@pytest.mark.parametrize("value", [48213907, {"value": "sk-live-hunter2"}, ["sk-live-hunter2"]])
def test_validate_never_prints_a_secret_that_is_not_a_string(tmp_path, value):
    """A secrets file with a value of the wrong shape (a PIN as a number, a secrets manager's export
    ``{"value": ...}``) is refused; the refusal must not print the value."""
    secrets = tmp_path / "secrets.json"
    secrets.write_text(json.dumps({"JUDGE_KEY": value}))
    ran = _validate(str(EXAMPLES), "--secrets", str(secrets))
    assert ran.returncode != 0
    assert "JUDGE_KEY" in ran.stderr, ran.stderr
    for shown in ("48213907", "sk-live-hunter2"):
        assert shown not in ran.stdout + ran.stderr, f"the secret is printed: {ran.stderr.strip()}"


@needs_namespaces
def test_validate_never_prints_a_secret_through_a_later_oracles_output(tmp_path):
    """Step one's verifier has the secret in its env (a judge's key) and what it runs leaves it in
    the working directory; step two's oracle prints the file and fails. The failure's details show
    the oracle's output, which must be redacted as the verifier's is."""
    dataset = tmp_path / "ds"
    write_files(
        dataset / "two-steps",
        {
            "task.toml": (
                '[verifier]\ntimeout_sec = 60\n[verifier.env]\nJUDGE_KEY = "${JUDGE_KEY}"\n'
                '[environment]\nworkdir = "/workspace"\n[[steps]]\nname = "one"\n[[steps]]\nname = "two"\n'
            ),
            "instruction.md": "Two steps.\n",
            "steps/one/instruction.md": "One.\n",
            "steps/two/instruction.md": "Two.\n",
            "steps/one/solution/solve.sh": "#!/bin/bash\ntrue\n",
            "steps/two/solution/solve.sh": "#!/bin/bash\ncat /workspace/left-behind.txt\nexit 1\n",
            "steps/one/tests/test.sh": (
                'echo "judge says: $JUDGE_KEY" > /workspace/left-behind.txt\necho 1 > /logs/verifier/reward.txt\n'
            ),
            "steps/two/tests/test.sh": "echo 0 > /logs/verifier/reward.txt\n",
        },
    )
    secrets = tmp_path / "secrets.json"
    secrets.write_text(json.dumps({"JUDGE_KEY": "hunter2-judge-key"}))
    ran = _validate(str(dataset), "--secrets", str(secrets))
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "judge says" in ran.stdout, ran.stdout  # the oracle's output is shown
    assert "hunter2-judge-key" not in ran.stdout + ran.stderr, ran.stdout


@needs_namespaces
def test_validate_json_never_holds_a_secret_the_verifier_wrote_everywhere(tmp_path):
    """The verifier writes the secret to its stdout, into reward.json's keys and as an invalid
    reward (so the detail quotes it): the JSON on stdout and the progress on stderr stay clean."""
    dataset = tmp_path / "ds"
    script = (
        'echo "key=$JUDGE_KEY"\n'
        'printf \'{"reward": "%s", "%s": 1}\' "$JUDGE_KEY" "$JUDGE_KEY" > /logs/verifier/reward.json\n'
    )
    write_files(
        dataset / "leaky",
        {
            "task.toml": '[verifier]\ntimeout_sec = 60\n[verifier.env]\nJUDGE_KEY = "${JUDGE_KEY}"\n',
            "instruction.md": "Nothing.\n",
            "solution/solve.sh": "#!/bin/bash\ntrue\n",
            "tests/test.sh": script,
        },
    )
    secrets = tmp_path / "secrets.toml"
    secrets.write_text('JUDGE_KEY = "hunter2-judge-key"\n')
    ran = _validate(str(dataset), "--json", "--secrets", str(secrets))
    assert ran.returncode == 1
    report: Dict[str, Any] = json.loads(ran.stdout)
    assert report["tasks"][0]["steps"][0]["reward"] == 0.0, report
    assert "hunter2-judge-key" not in ran.stdout + ran.stderr


# The stand-in's own sandbox stays usable by the attacks above: a quick check that the agent is a
# real other user there, or the attacks would prove nothing.
@needs_namespaces
def test_the_stand_ins_agent_is_another_user_than_root(tmp_path):
    provider = UsersProvider(EXAMPLES / "answer-file" / "workspace", tmp_path, as_agent=True)

    async def run() -> Tuple[str, str, str]:
        handle = await provider.create(SandboxSpec(image="local", workdir="/app"))
        try:
            plain = await provider.exec(handle, "id -un")
            root = await provider.exec(handle, "id -un", user="root")
            denied = await provider.agent(handle, "cat /etc/shadow >/dev/null 2>&1 && echo read || echo denied")
            return plain.stdout or "", root.stdout or "", denied.stdout
        finally:
            await provider.close(handle)

    assert asyncio.run(run()) == ("agent\n", "root\n", "denied\n")
