"""Separate mode without an engine: the network refusal table, the verifier's sandbox spec, and a
separate run over sandboxes that stand in for containers (the Docker runs are in
test_separate_docker.py)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Dict, List, Optional

import pytest
from support import nested_folders, write_files

from nemo_gym.data.tasks.harbor.separate import VerifierSandboxSpec, run_separate_verification, verifier_sandbox_spec
from nemo_gym.data.tasks.harbor.task import TaskError, load_task
from nemo_gym.data.tasks.harbor.verification import plan_verification, run_verification

SEPARATE = '[verifier]\nenvironment_mode = "separate"\n[environment]\ndocker_image = "agent:1"\n'
TEST_SH = {"tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n"}
# The task: keep main.py and delete secret.txt, both in /app.
SECRET_DELETED = 'if [ "$(cat /app/main.py)" = ok ] && [ ! -e /app/secret.txt ]; then echo 1; else echo 0; fi >/logs/verifier/reward.txt\n'

# id, task.toml, the refusal (a part of it), or None and the separate verifier's network.
NETWORK = [
    ("no-network-separate", SEPARATE.replace("[environment]", 'network_mode = "no-network"\n[environment]'), None, "no-network"),
    ("allowlist-separate", SEPARATE.replace("[environment]", 'network_mode = "allowlist"\nallowed_hosts = ["pypi.org"]\n[environment]'), None, "allowlist"),
    ("public-is-no-restriction", SEPARATE.replace("[environment]", 'network_mode = "public"\n[environment]'), None, None),
    ("legacy-allow-internet", SEPARATE.replace("[environment]", "allow_internet = false\n[environment]"), None, "no-network"),
    ("shared-verifier", '[verifier]\nnetwork_mode = "no-network"\n', "with a verifier that runs in the agent's sandbox", None),
    ("environment-table", '[environment]\nnetwork_mode = "no-network"\n', "[environment].network_mode = 'no-network': only [verifier]", None),
    ("agent-table", '[agent]\nnetwork_mode = "no-network"\n', "[agent].network_mode", None),
    ("verifier-environment-table", '[verifier.environment]\ndocker_image = "g:1"\nnetwork_mode = "no-network"\n', "[verifier.environment].network_mode", None),
    ("unknown-mode", SEPARATE.replace("[environment]", 'network_mode = "offline"\n[environment]'), "network_mode must be one of public, no-network, allowlist", None),
    ("hosts-without-allowlist", SEPARATE.replace("[environment]", 'allowed_hosts = ["a"]\n[environment]'), "allowed_hosts is only for network_mode = 'allowlist'", None),
    ("hosts-not-a-list", SEPARATE.replace("[environment]", 'network_mode = "allowlist"\nallowed_hosts = "a"\n[environment]'), "allowed_hosts must be a list of host names", None),
    ("step-of-a-shared-step", '[[steps]]\nname = "a"\n[steps.verifier]\nnetwork_mode = "no-network"\n', "steps[0].verifier.network_mode = 'no-network' with a verifier that runs in the agent's", None),
]  # fmt: skip


@pytest.mark.parametrize("toml, refusal, network", [case[1:] for case in NETWORK], ids=[case[0] for case in NETWORK])
def test_the_network_refusal_table(tmp_path, toml, refusal, network):
    task = write_files(tmp_path / "task", {"task.toml": toml, **TEST_SH, "steps/a/instruction.md": ""})
    if refusal is not None:
        with pytest.raises(TaskError) as raised:
            load_task(task)
        text = str(raised.value)
        assert refusal in text and str(task / "task.toml") in text and "\n" not in text
        load_task(task, check_runnable=False)  # still loads for inspection
        return
    assert verifier_sandbox_spec(load_task(task)).network == network


def test_a_step_takes_its_own_network_else_the_tasks(tmp_path):
    toml = (
        '[verifier]\nnetwork_mode = "no-network"\n[verifier.environment]\ndocker_image = "g:1"\n'
        '[[steps]]\nname = "a"\n[[steps]]\nname = "b"\n[steps.verifier]\nnetwork_mode = "public"\n'
    )
    files = {"task.toml": toml, **TEST_SH, "steps/a/instruction.md": "", "steps/b/instruction.md": ""}
    task = load_task(write_files(tmp_path / "task", files))
    assert verifier_sandbox_spec(task, "a").network == "no-network"
    # "public" is no restriction of the step's own, so it takes the task's.
    assert verifier_sandbox_spec(task, "b").network == "no-network"


def test_the_spec_takes_env_workdir_and_limits_from_the_verifier_environment(tmp_path):
    toml = (
        '[environment]\ndocker_image = "agent:1"\nworkdir = "/app"\nenv = { AGENT_ONLY = "1" }\n'
        '[verifier.environment]\nworkdir = "/grade"\ncpus = 2\nmemory_mb = 512\n'
        'env = { TOKEN = "${GRADER_TOKEN}", MODE = "${MODE:-strict}" }\n'
    )
    task = load_task(write_files(tmp_path / "task", {"task.toml": toml, **TEST_SH, "tests/Dockerfile": "FROM x\n"}))
    spec = verifier_sandbox_spec(task, host_env={"GRADER_TOKEN": "t0k"})
    # A [verifier.environment] inherits no image from [environment]: it is built from tests/.
    assert spec == VerifierSandboxSpec(
        image=None,
        build_context=task.path / "tests",
        env={"TOKEN": "t0k", "MODE": "strict"},
        workdir="/grade",
        network=None,
        cpus=2.0,
        memory_mb=512,
    )
    with pytest.raises(TaskError, match="GRADER_TOKEN"):
        verifier_sandbox_spec(task, host_env={})


def test_without_verifier_environment_the_spec_is_the_agents_environment(tmp_path):
    toml = SEPARATE + 'workdir = "/app"\nenv = { A = "1" }\ncpus = 1\n'
    spec = verifier_sandbox_spec(load_task(write_files(tmp_path / "task", {"task.toml": toml, **TEST_SH})))
    assert (spec.image, spec.build_context, spec.env, spec.workdir, spec.cpus) == (
        "agent:1",
        None,
        {"A": "1"},
        "/app",
        1.0,
    )


@pytest.mark.parametrize(
    "toml, message",
    [
        ("[environment]\ncpus = 0\n", "environment.cpus must be a number above 0, not 0"),
        ('[environment]\ncpus = "2"\n', "environment.cpus must be a number above 0"),
        ("[environment]\nmemory_mb = 1.5\n", "environment.memory_mb must be a whole number above 0, not 1.5"),
        ("[verifier.environment]\nmemory_mb = -1\n", "verifier.environment.memory_mb must be a whole number above 0"),
    ],
)
def test_bad_limits_are_refused_at_load(tmp_path, toml, message):
    with pytest.raises(TaskError, match=message):
        load_task(write_files(tmp_path / "task", {"task.toml": toml, **TEST_SH}))


# --- a separate run over stand-in sandboxes ---------------------------------------------------------


class Recording:
    """Wraps a sandbox and records the calls the separate run makes of it."""

    def __init__(self, inner: Any, log: List[str], name: str) -> None:
        self.inner, self.log, self.name = inner, log, name
        for attribute in ("admin_user", "workdir", "tests_dir", "logs_dir", "tmp_dir", "default_user", "environment"):
            setattr(self, attribute, getattr(inner, attribute, None))
        self.private_pids = inner.private_pids

    async def exec(self, command: str, **options: Any) -> Any:
        return await self.inner.exec(command, **options)

    async def upload_file(self, *args: Any) -> None:
        await self.inner.upload_file(*args)

    async def download_file(self, *args: Any) -> None:
        await self.inner.download_file(*args)

    async def put_archive(self, *args: Any, **options: Any) -> None:
        await self.inner.put_archive(*args, **options)

    async def get_archive(self, *args: Any, **options: Any) -> bytes:
        self.log.append(f"{self.name}: get {args[0]}")
        return await self.inner.get_archive(*args, **options)

    async def stop(self) -> None:
        self.log.append(f"{self.name}: stop")


def test_the_run_collects_stops_then_grades_in_a_fresh_sandbox(tmp_path):
    from nemo_gym.data.tasks.harbor.sandboxes.local import LocalSandbox, namespaces_available

    if not namespaces_available():
        pytest.fail("this machine kind provides bubblewrap (installed by .ci/run)")
    toml = 'artifacts = ["/app/out.txt"]\n' + SEPARATE + 'workdir = "/app"\n'
    test_sh = (
        'set -e\n[ "$(cat /app/out.txt)" = "42" ]\n[ ! -e /app/scratch.txt ]\n'
        "[ -s /logs/agent/trajectory.json ]\necho 1 > /logs/verifier/reward.txt\n"
    )
    task = load_task(write_files(tmp_path / "task", {"task.toml": toml, "tests/test.sh": test_sh}))
    agent_state = write_files(tmp_path / "agent", {"out.txt": "42", "scratch.txt": "the agent's, not graded"})
    transcript = write_files(tmp_path / "agent-logs", {"trajectory.json": '{"steps": []}'})
    log: List[str] = []
    specs: List[VerifierSandboxSpec] = []

    @asynccontextmanager
    async def open_verifier(spec: VerifierSandboxSpec) -> AsyncIterator[Any]:
        specs.append(spec)
        log.append("verifier: start")
        async with LocalSandbox(write_files(tmp_path / "fresh", {}), workdir="/app") as fresh:
            yield Recording(fresh, log, "verifier")

    async def go() -> Any:
        mounts = {"/logs/agent": transcript}
        async with LocalSandbox(agent_state, workdir="/app", mounts=mounts) as agent:
            plan = plan_verification(task)
            with pytest.raises(TaskError, match="run_separate_verification"):
                await run_verification(plan, agent)
            return await run_separate_verification(task, plan, Recording(agent, log, "agent"), open_verifier)

    outcome = asyncio.run(go())
    assert (outcome.reward, outcome.masked, outcome.failure_kind) == (1.0, False, None), outcome
    assert log[:5] == [
        "agent: get /logs/artifacts",
        "agent: get /app/out.txt",
        "agent: get /logs/agent/trajectory.json",
        "agent: stop",
        "verifier: start",
    ]
    assert [entry.rsplit("-", 1)[0] for entry in log[5:]] == ["verifier: get /tests/.gym-out"]  # the results
    assert specs[0].image == "agent:1" and specs[0].workdir == "/app"


def graded_separately(task: Any, workspace: Path, tmp_path: Path, mounts: Optional[Dict[str, Path]] = None) -> Any:
    """The outcome of ``task`` graded separately on the local sandbox: the agent's at ``/app`` over
    ``workspace`` (and ``mounts``), the verifier's a fresh one."""
    from nemo_gym.data.tasks.harbor.sandboxes.local import LocalSandbox

    @asynccontextmanager
    async def open_verifier(spec: VerifierSandboxSpec) -> AsyncIterator[Any]:
        async with LocalSandbox(write_files(tmp_path / "fresh", {}), workdir="/app") as fresh:
            yield fresh

    async def go() -> Any:
        async with LocalSandbox(workspace, workdir="/app", mounts=mounts) as agent:
            return await run_separate_verification(task, plan_verification(task), agent, open_verifier)

    return asyncio.run(go())


@pytest.mark.parametrize("answer", ["41", "42"])
def test_folders_nested_past_what_a_copy_can_make_score_0_never_mask(tmp_path, answer):
    # The agent nests folders beside its answer until no path of them can be made on the host (past
    # Python's recursion limit and Linux's PATH_MAX): masking the sample would spare a wrong answer
    # its 0. The copy is cut short there, which is the agent's doing: 0, the right answer's too (the
    # verifier graded the rest, until red team 85 chose what the rest left out).
    from nemo_gym.data.tasks.harbor.sandboxes.local import namespaces_available

    if not namespaces_available():
        pytest.fail("this machine kind provides bubblewrap (installed by .ci/run)")
    toml = 'artifacts = ["/app"]\n' + SEPARATE + 'workdir = "/app"\n'
    test_sh = 'if [ "$(cat /app/out.txt)" = 42 ] && [ -d /app/deep/a/a ]; then echo 1; else echo 0; fi >/logs/verifier/reward.txt\n'
    task = load_task(write_files(tmp_path / "task", {"task.toml": toml, "tests/test.sh": test_sh}))
    workspace = write_files(tmp_path / "agent", {"out.txt": answer})

    with nested_folders(workspace / "deep", ["a"] * 2100, scratch=tmp_path):
        outcome = graded_separately(task, workspace, tmp_path)
    assert (outcome.reward, outcome.masked, outcome.failure_kind) == (0.0, False, "artifacts_cut_short"), outcome


def test_a_verifier_sandbox_that_cannot_start_masks_and_a_refusal_raises(tmp_path):
    from nemo_gym.data.tasks.harbor.sandboxes.local import LocalSandbox

    task = load_task(write_files(tmp_path / "task", {"task.toml": SEPARATE, **TEST_SH}))

    def opener(error: Exception) -> Any:
        @asynccontextmanager
        async def open_verifier(spec: VerifierSandboxSpec) -> AsyncIterator[Any]:
            raise error
            yield  # pragma: no cover

        return open_verifier

    async def go(error: Exception) -> Any:
        async with LocalSandbox(write_files(tmp_path / "agent", {"a": ""})) as agent:
            return await run_separate_verification(task, plan_verification(task), agent, opener(error))

    lost = asyncio.run(go(ConnectionError("engine gone")))
    assert (lost.masked, lost.mask_reason) == (True, "sandbox_error")
    assert "engine gone" in lost.detail
    with pytest.raises(TaskError, match="allowlist"):
        asyncio.run(go(TaskError("cannot enforce an allowlist")))


# --- gym-harbor verify on the local sandbox ----------------------------------------------------------------

GYM = str(Path(sys.executable).parent / "gym-harbor")

LOCAL_TEST = """\
check() { if ! eval "$1"; then echo "failed: $1"; echo 0 > /logs/verifier/reward.txt; exit 0; fi; }
check '[ "$PWD" = /grade ]'
check '[ "$(cat /app/out.txt)" = 42 ]'
check '[ ! -e /app/debug.log ]'
check '[ "$(cat /srv/results/r.txt)" = result ]'
check '[ ! -e /opt/agent-only/x ]'
check '[ "$(cat /logs/artifacts/note.txt)" = published ]'
check '[ "$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " ")" = lo ]'   # no network but loopback
check '[ "$GRADER" = yes ] && [ -z "$AGENT_ONLY" ]'
echo 1 > /logs/verifier/reward.txt
"""


def gym(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([GYM, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)


def test_the_local_sandbox_verifies_separately_from_the_artifacts_alone(tmp_path):
    toml = """
artifacts = [{ source = "/app", exclude = ["*.log"] }, "/srv/results"]
[verifier]
environment_mode = "separate"
network_mode = "no-network"
[verifier.environment]
docker_image = "grader:1"  # the local sandbox has no images: this machine stands in for it
workdir = "/grade"
env = { GRADER = "yes" }
[environment]
workdir = "/app"
env = { AGENT_ONLY = "1" }
"""
    task = write_files(tmp_path / "task", {"task.toml": toml, "tests/test.sh": LOCAL_TEST})
    workspace = write_files(tmp_path / "ws", {"out.txt": "42", "debug.log": "noise"})
    results = write_files(tmp_path / "results", {"r.txt": "result"})
    agent_only = write_files(tmp_path / "agent-only", {"x": "the agent's"})
    published = write_files(tmp_path / "published", {"note.txt": "published"})
    ran = gym(
        "verify", str(task), "--json",
        "--workspace", str(workspace),
        "--mount", f"{results}:/srv/results",
        "--mount", f"{agent_only}:/opt/agent-only",
        "--artifacts", str(published),
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    outcome = json.loads(ran.stdout.splitlines()[-1])
    assert (outcome["reward"], outcome["masked"]) == (1.0, False), outcome["stdout"]
    assert (results / "r.txt").read_text() == "result"  # copies went across, the host's folders untouched


@pytest.mark.parametrize(
    "files, message",
    [
        (
            {"tests/Dockerfile": "FROM x\n", "task.toml": "[verifier.environment]\n"},
            "which the local sandbox cannot build",
        ),
        (
            {"task.toml": 'artifacts = ["/etc/app.conf"]\n' + SEPARATE},
            "the artifact /etc/app.conf lands in /etc, a folder of this machine",
        ),
        (
            {
                "task.toml": SEPARATE.replace(
                    "[environment]", 'network_mode = "allowlist"\nallowed_hosts = ["a"]\n[environment]'
                )
            },
            "the local sandbox cannot enforce an allowlist",
        ),
    ],
)
def test_what_the_local_sandbox_cannot_give_a_separate_verifier_is_refused(tmp_path, files, message):
    task = write_files(tmp_path / "task", {**TEST_SH, **files})
    agent_etc = write_files(tmp_path / "etc", {"app.conf": "x"})
    ran = gym("verify", str(task), "--mount", f"{agent_etc}:/etc")
    assert ran.returncode == 1, ran.stdout
    assert message in ran.stderr and len(ran.stderr.strip().splitlines()) == 1, ran.stderr


def padded(folder: Path) -> None:
    """``folder`` made with 20,000 empty files: past the collection's entry limit, before what sorts after."""
    folder.mkdir()
    for number in range(20000):
        (folder / f"{number:05d}").touch()


def test_an_artifact_the_agent_had_cut_short_scores_0(tmp_path):
    # Red team 85: the collection's limits leave out what passes them and go on, so the agent chose what
    # the verifier would not see: told to delete secret.txt, it kept it and put 20,000 entries before it,
    # and a verifier that checks the file is gone graded the rest: 1.0. An artifact cut short by what the
    # agent left is its doing: 0, never graded (whatever the rest holds) and never masked.
    toml = 'artifacts = ["/app"]\n' + SEPARATE + 'workdir = "/app"\n'
    task = load_task(write_files(tmp_path / "task", {"task.toml": toml, "tests/test.sh": SECRET_DELETED}))
    workspace = write_files(tmp_path / "agent", {"main.py": "ok", "secret.txt": "kept"})
    padded(workspace / "pad")

    outcome = graded_separately(task, workspace, tmp_path)
    assert (outcome.reward, outcome.masked) == (0.0, False), outcome
    assert outcome.failure_kind == "artifacts_cut_short" and "/app/pad/" in outcome.detail, outcome.detail


@pytest.mark.parametrize("left", ["ln -s /etc/hostname secret.txt", "mkfifo secret.txt", "ln -s /nowhere secret.txt"])
def test_a_file_the_agent_made_a_link_out_or_a_fifo_is_still_there_for_the_verifier(tmp_path, left):
    # Red team 85, the same trick without the limits: a link out of the artifact (or a FIFO) is left out
    # of the copy, so a secret.txt the agent was told to delete and made a link to anywhere looked gone:
    # 1.0. Its name now stays, as an empty file (a dangling link's too, which
    # Harbor's verifier would call gone: the agent made a link where it was told to delete a file).
    toml = 'artifacts = ["/app"]\n' + SEPARATE + 'workdir = "/app"\n'
    task = load_task(write_files(tmp_path / "task", {"task.toml": toml, "tests/test.sh": SECRET_DELETED}))
    workspace = write_files(tmp_path / "agent", {"main.py": "ok"})
    subprocess.run(left, shell=True, cwd=workspace, check=True)

    outcome = graded_separately(task, workspace, tmp_path)
    assert (outcome.reward, outcome.masked) == (0.0, False), outcome


def test_an_artifact_inside_the_convention_folder_cut_short_scores_0(tmp_path):
    # Red team 86: a task's artifact inside /logs/artifacts is copied with that folder (collected first,
    # the task's entry then "already copied"), and the folder's copy cut short was not the task's: the
    # agent's 20,000 entries before secret.txt hid it again (1.0).
    toml = 'artifacts = ["/logs/artifacts/out"]\n' + SEPARATE + 'workdir = "/app"\n'
    test_sh = (
        'out=/logs/artifacts/out; if [ "$(cat $out/main.py)" = ok ] && [ ! -e $out/secret.txt ]; '
        "then echo 1; else echo 0; fi >/logs/verifier/reward.txt\n"
    )
    task = load_task(write_files(tmp_path / "task", {"task.toml": toml, "tests/test.sh": test_sh}))
    published = write_files(tmp_path / "published", {"out/main.py": "ok", "out/secret.txt": "kept"})
    padded(published / "out" / "pad")

    agent = write_files(tmp_path / "agent", {})
    outcome = graded_separately(task, agent, tmp_path, mounts={"/logs/artifacts": published})
    assert (outcome.reward, outcome.masked, outcome.failure_kind) == (0.0, False, "artifacts_cut_short"), outcome
