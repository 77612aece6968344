"""The whole run in real containers: every Python 3.8-3.13, and images with an odd or no Python.

Images are built by the suite from local parts (tests/images.py) and cached on the engine.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest
from images import LABEL, base_image, python_image, stripped_image
from support import EXAMPLES

from nemo_gym.data.tasks.harbor.rewards import MISSING_REWARD, VERIFIER_TIMEOUT
from nemo_gym.data.tasks.harbor.sandboxes.docker import DockerSandbox
from nemo_gym.data.tasks.harbor.task import load_task
from nemo_gym.data.tasks.harbor.verification import VerificationOutcome, plan_verification, run_verification

pytestmark = pytest.mark.docker

VERSIONS = ["3.8", "3.9", "3.10", "3.11", "3.12", "3.13"]
RESPONSE_FILE = EXAMPLES / "numeric-response" / "response.json"
# (example, expected reward, expected metrics)
EXPECTED = {
    "answer-file": (1.0, {}),
    "numeric-response": (1.0, {}),
    "async-metrics": (1.0, {"correct": 10.0, "extra": 0.0, "recall": 1.0}),
    "bash-test": (1.0, {}),
}


def verify_in(
    image: str,
    task_dir: Path,
    *,
    volumes: Optional[Dict[str, Dict[str, str]]] = None,
    client: Any = None,
    workspace: Optional[Path] = None,
    **plan_options: Any,
) -> VerificationOutcome:
    task = load_task(task_dir)
    plan = plan_verification(task, **plan_options)

    async def run() -> VerificationOutcome:
        sandbox = DockerSandbox(
            image,
            workspace=workspace or task_dir / "workspace",
            workdir=task.environment.workdir,
            volumes=volumes,
            labels=LABEL,
            client=client,
        )
        async with sandbox:
            return await run_verification(plan, sandbox)

    return asyncio.run(run())


def _response() -> Dict[str, Any]:
    import json

    return json.loads(RESPONSE_FILE.read_text())


@pytest.mark.parametrize("version", VERSIONS)
def test_every_example_in_a_container(docker_client, version):
    image, volumes = python_image(docker_client, version)
    for name, (reward, metrics) in EXPECTED.items():
        response = _response() if name == "numeric-response" else None
        outcome = verify_in(image, EXAMPLES / name, volumes=volumes, client=docker_client, response=response)
        assert (outcome.reward, outcome.metrics, outcome.failure_kind, outcome.masked) == (
            reward,
            metrics,
            None,
            False,
        ), (
            name,
            outcome,
        )


@pytest.mark.parametrize("version", VERSIONS)
def test_a_failing_verifier_in_a_container(docker_client, version, tmp_path):
    image, volumes = python_image(docker_client, version)
    task = tmp_path / "task"
    (task / "tests").mkdir(parents=True)
    (task / "tests" / "verifier.py").write_text(
        "import sys\ndef verify(workspace):\n    raise ValueError(sys.version.split()[0])\n"
    )
    outcome = verify_in(image, task, volumes=volumes, client=docker_client, workspace=tmp_path)
    assert outcome.failure_kind == MISSING_REWARD and not outcome.masked
    assert f"verify raised ValueError: {version}." in outcome.stdout


def test_an_image_with_only_python(docker_client):
    image, volumes = python_image(docker_client, "3.12", command="python")
    outcome = verify_in(image, EXAMPLES / "answer-file", volumes=volumes, client=docker_client)
    assert outcome.reward == 1.0 and outcome.failure_kind is None


def test_an_image_whose_python3_is_3_7(docker_client):
    image, volumes = python_image(docker_client, "3.7")
    outcome = verify_in(image, EXAMPLES / "answer-file", volumes=volumes, client=docker_client)
    assert outcome.failure_kind == MISSING_REWARD and not outcome.masked
    assert "is Python 3.7" in outcome.stdout and "no Python 3.8 or newer found" in outcome.stdout


def test_an_image_without_python(docker_client):
    outcome = verify_in(base_image(docker_client), EXAMPLES / "answer-file", client=docker_client)
    assert outcome.failure_kind == MISSING_REWARD and not outcome.masked
    assert "python3 is not on PATH; python is not on PATH" in outcome.stdout


def test_a_plain_test_sh_needs_no_python(docker_client):
    outcome = verify_in(base_image(docker_client), EXAMPLES / "bash-test", client=docker_client)
    assert outcome.reward == 1.0 and outcome.failure_kind is None


@pytest.mark.parametrize("tool", ["bash", "timeout"])
def test_an_image_without_bash_or_timeout_is_masked(docker_client, tool):
    outcome = verify_in(stripped_image(docker_client, tool), EXAMPLES / "bash-test", client=docker_client)
    assert outcome.masked and outcome.mask_reason == "verifier_error", outcome


def test_without_tar_the_files_go_through_the_engines_archive_calls(docker_client, monkeypatch):
    # The one exec carries the files on its stdin and stdout when the image has tar; without it they
    # go through the engine's archive calls instead, and the run is graded all the same.
    calls: List[str] = []
    for name in ("exec_piped", "put_archive", "get_archive"):
        real = getattr(DockerSandbox, name)

        async def spy(self: DockerSandbox, *args: Any, _real: Any = real, _name: str = name, **options: Any) -> Any:
            calls.append(_name)
            return await _real(self, *args, **options)

        monkeypatch.setattr(DockerSandbox, name, spy)
    plan = plan_verification(load_task(EXAMPLES / "bash-test"))

    async def run(delete_tar: bool) -> VerificationOutcome:
        workspace = EXAMPLES / "bash-test" / "workspace"
        async with DockerSandbox(
            base_image(docker_client), workspace=workspace, labels=LABEL, client=docker_client
        ) as sandbox:
            if delete_tar:
                await sandbox.exec("rm -f $(command -v tar)", user="root")
            calls.clear()
            return await run_verification(plan, sandbox)

    outcome = asyncio.run(run(delete_tar=False))
    assert (outcome.reward, calls) == (1.0, ["exec_piped"]), (outcome, calls)
    outcome = asyncio.run(run(delete_tar=True))
    assert (outcome.reward, calls) == (1.0, ["exec_piped", "put_archive", "get_archive"]), (outcome, calls)


def test_a_piped_command_that_reads_no_stdin_leaves_no_writer_behind(docker_client):
    # Grading that fails before its tar reads stdin (a full disk) left the thread writing 600 KB of
    # staged files blocked until a 5 s join gave up on it: 5 s a masked sample, the thread left over.
    import threading

    from nemo_gym.data.tasks.harbor.sandboxes.docker import FEEDER_THREAD

    async def run() -> Any:
        async with DockerSandbox(base_image(docker_client), labels=LABEL, client=docker_client) as sandbox:
            result = await sandbox.exec_piped("exit 3", b"x" * 4_000_000, stdout_limit=1 << 20)
            return result.return_code, [thread for thread in threading.enumerate() if thread.name == FEEDER_THREAD]

    assert asyncio.run(run()) == (3, [])


def test_a_closed_sandbox_leaves_none_of_its_images_volumes(docker_client):
    """An image that declares a VOLUME gets an anonymous volume per container; removing the container alone
    left it on the engine, one per verification on a server."""
    import docker
    from images import _built

    image = _built(
        docker_client, "nemo-gym-test/declares-a-volume:1", f"FROM {base_image(docker_client)}\nVOLUME /data\n"
    )

    async def run() -> List[str]:
        async with DockerSandbox(image, labels=LABEL, client=docker_client) as sandbox:
            mounts = sandbox._require().attrs["Mounts"]
            return [mount["Name"] for mount in mounts if mount.get("Type") == "volume"]

    volumes = asyncio.run(run())
    assert len(volumes) == 1, volumes
    with pytest.raises(docker.errors.NotFound):
        docker_client.volumes.get(volumes[0])


def _shell_task(tmp_path: Path, script: str) -> Path:
    task = tmp_path / "task"
    (task / "tests").mkdir(parents=True)
    (task / "tests" / "test.sh").write_text(script)
    return task


def test_timeout_without_a_reward(docker_client, tmp_path):
    task = _shell_task(tmp_path, "sleep 30\n")
    outcome = verify_in(base_image(docker_client), task, client=docker_client, workspace=tmp_path, timeout_sec=1)
    assert outcome.failure_kind == VERIFIER_TIMEOUT and outcome.reward == 0.0


def test_a_reward_written_before_the_timeout_stands(docker_client, tmp_path):
    task = _shell_task(tmp_path, "echo 0.5 > /logs/verifier/reward.txt\nsleep 30\n")
    outcome = verify_in(base_image(docker_client), task, client=docker_client, workspace=tmp_path, timeout_sec=1)
    assert outcome.failure_kind is None and outcome.reward == 0.5


def test_a_verifier_that_ignores_sigterm_is_still_stopped(docker_client, tmp_path):
    import time

    task = _shell_task(tmp_path, "trap '' TERM\nwhile true; do sleep 1; done\n")
    started = time.monotonic()
    outcome = verify_in(base_image(docker_client), task, client=docker_client, workspace=tmp_path, timeout_sec=1)
    assert outcome.failure_kind == VERIFIER_TIMEOUT
    assert time.monotonic() - started < 25


def test_a_planted_reward_is_emptied_before_the_run(docker_client, tmp_path):
    task = _shell_task(tmp_path, "ls /logs/verifier\n")
    image = base_image(docker_client)
    loaded = load_task(task)
    plan = plan_verification(loaded)

    async def run() -> VerificationOutcome:
        async with DockerSandbox(image, workspace=tmp_path, labels=LABEL, client=docker_client) as sandbox:
            await sandbox.exec(
                "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt && echo x > /tests/helper",
                user="root",
            )
            return await run_verification(plan, sandbox)

    outcome = asyncio.run(run())
    assert outcome.failure_kind == MISSING_REWARD
    assert outcome.stdout.split() == ["test-stdout.txt"]


def test_the_workspace_sits_at_the_tasks_or_the_images_workdir(docker_client, tmp_path):
    from images import _built

    from nemo_gym.data.tasks.harbor.sandboxes.for_task import open_task_sandbox

    image = _built(
        docker_client, "nemo-gym-test/workdir-srv:1", f"FROM {base_image(docker_client)}\nWORKDIR /srv/app\n"
    )
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "answer.txt").write_text("42")
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    (artifacts / "done").write_text("yes")
    plain = tmp_path / "plain"
    (plain / "tests").mkdir(parents=True)
    (plain / "tests" / "test.sh").write_text(
        'pwd\n[ "$(cat answer.txt)" = 42 ] && [ "$(cat /logs/artifacts/done)" = yes ] && echo 1 > /logs/verifier/reward.txt\n'
    )
    declared = tmp_path / "declared"
    (declared / "tests").mkdir(parents=True)
    (declared / "tests" / "test.sh").write_text((plain / "tests" / "test.sh").read_text())
    (declared / "environment").mkdir()
    (declared / "environment" / "Dockerfile").write_text("FROM python:3.12-slim\nWORKDIR /app\n")

    async def run(task_dir: Path) -> VerificationOutcome:
        task = load_task(task_dir)
        mounts = {"/logs/artifacts": artifacts}
        async with open_task_sandbox(task, workspace, kind="docker", image=image, mounts=mounts) as sandbox:
            return await run_verification(plan_verification(task), sandbox)

    from_image = asyncio.run(run(plain))
    from_dockerfile = asyncio.run(run(declared))
    assert (from_image.reward, from_image.stdout.strip()) == (1.0, "/srv/app"), from_image
    assert (from_dockerfile.reward, from_dockerfile.stdout.strip()) == (1.0, "/app"), from_dockerfile


TAG_COUNTER = """
import glob, re
def verify():
    tags = {re.search(r"\\.(cpython-3\\d+)\\.pyc$", path).group(1) for path in glob.glob("/tests/**/*.pyc", recursive=True)}
    return {"reward": 1, "tags": len(tags), "own": float(tags == {"cpython-311"})}
"""


def test_later_runs_on_an_image_stage_its_interpreters_bytecode_alone(docker_client, tmp_path, monkeypatch):
    # The first run on an image stages the bytecode of every interpreter the shim supports; its runner
    # says which one it is, and later runs on that image (new containers) stage that one alone. A
    # wrong tag remembered (an image rebuilt on another Python, or one a root verify wrote) costs a
    # run its compile, never its score, and that run puts it right.
    from nemo_gym.data.tasks.harbor import verification
    from nemo_gym.data.tasks.harbor.bytecode import CACHE_TAGS, ImageTags

    tags = ImageTags()
    monkeypatch.setattr(verification, "IMAGE_TAGS", tags)
    image, volumes = python_image(docker_client, "3.11")
    task = tmp_path / "task"
    (task / "tests").mkdir(parents=True)
    (task / "tests" / "verifier.py").write_text(TAG_COUNTER)

    def staged_tags() -> Dict[str, float]:
        outcome = verify_in(image, task, volumes=volumes, client=docker_client, workspace=tmp_path)
        assert outcome.reward == 1.0 and not outcome.masked, outcome
        return outcome.metrics

    assert staged_tags() == {"tags": float(len(CACHE_TAGS)), "own": 0.0}
    assert tags.get(image) == "cpython-311"
    assert staged_tags() == {"tags": 1.0, "own": 1.0}
    tags.learn(image, b"cpython-38")
    assert staged_tags() == {"tags": 1.0, "own": 0.0}
    assert tags.get(image) == "cpython-311"


SDK_FROM = """
from nemo_gym.verifiers import exact_match
def verify(workspace):
    import nemo_gym.verifiers._match as match
    print("loaded from", match.__file__)
    return exact_match((workspace / "answer.txt").read_text().strip(), "42")
"""


@pytest.mark.parametrize("version", VERSIONS)
def test_later_runs_load_the_sdk_from_its_bundles_bytecode(docker_client, version, tmp_path, monkeypatch):
    # Once the image's Python is known, the SDK travels as one zip (bytecode.sdk_bundle), and every
    # Python loads it from the bytecode in there (zipimport names the module after the .pyc it ran).
    from nemo_gym.data.tasks.harbor import verification
    from nemo_gym.data.tasks.harbor.bytecode import ImageTags

    monkeypatch.setattr(verification, "IMAGE_TAGS", ImageTags())
    image, volumes = python_image(docker_client, version)
    task = tmp_path / "task"
    (task / "tests").mkdir(parents=True)
    (task / "tests" / "verifier.py").write_text(SDK_FROM)
    (tmp_path / "answer.txt").write_text("42\n")
    loaded = []
    for _ in range(2):
        outcome = verify_in(image, task, volumes=volumes, client=docker_client, workspace=tmp_path)
        assert (outcome.reward, outcome.masked) == (1.0, False), outcome
        loaded.append(outcome.stdout.split("loaded from ", 1)[1].split()[0])
    assert loaded == [
        "/tests/nemo_gym/verifiers/_match.py",
        "/tests/_gym_sdk.zip/nemo_gym/verifiers/_match.pyc",
    ]


def test_the_engine_is_asked_for_the_exit_status_only_where_code_of_the_task_could_stop_grading(
    docker_client, monkeypatch
):
    # Grading prints a marker after its results (grading.DONE_MARKER). Where code of the task cannot
    # reach grading's shell (a Python verifier run as another user: the runner switches to it), the
    # engine is not asked for the exit status, a round trip fewer. A root verify could stop the shell
    # and print the marker itself, so there the engine is asked; and wherever the marker is missing.
    from images import users_image

    asked: List[str] = []
    real = type(docker_client.api).exec_inspect

    def spy(api: Any, exec_id: str) -> Any:
        asked.append(exec_id)
        return real(api, exec_id)

    image, volumes = users_image(docker_client)

    async def run(image: str, volumes: Optional[Dict[str, Dict[str, str]]], user: Optional[str]) -> VerificationOutcome:
        plan = plan_verification(load_task(EXAMPLES / "answer-file"))
        plan = replace(plan, user=user)
        workspace = EXAMPLES / "answer-file" / "workspace"
        async with DockerSandbox(
            image, workspace=workspace, volumes=volumes, labels=LABEL, client=docker_client
        ) as sandbox:
            asked.clear()
            with monkeypatch.context() as patch:
                patch.setattr(type(docker_client.api), "exec_inspect", spy)
                return await run_verification(plan, sandbox)

    outcome = asyncio.run(run(image, volumes, "grader"))
    assert (outcome.reward, outcome.masked, asked) == (1.0, False, []), (outcome, asked)
    outcome = asyncio.run(run(image, volumes, None))
    assert (outcome.reward, outcome.masked, len(asked)) == (1.0, False, 1), (outcome, asked)
    outcome = asyncio.run(run(stripped_image(docker_client, "timeout"), None, "root"))
    assert outcome.masked and len(asked) == 1, (outcome, asked)


def test_a_busy_default_executor_never_holds_up_a_grading(docker_client, tmp_path):
    # Red team 36: every call to the engine ran in the loop's default executor, a few threads
    # (min(32, cores + 4)) shared with the server, where an exec holds one for as long as its
    # command runs. Slow gradings took them all; the next ones waited in its queue while their
    # timeouts ran, and right answers scored harbor:verifier_timeout. Here the one thread is held
    # throughout: the grading must not need it.
    image, volumes = python_image(docker_client, "3.12")
    task = tmp_path / "task"
    (task / "tests").mkdir(parents=True)
    (task / "tests" / "verifier.py").write_text("def verify():\n    return 1.0\n")
    plan = plan_verification(load_task(task))
    release = threading.Event()

    async def run() -> Tuple[VerificationOutcome, bool]:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(max_workers=1))
        held = loop.run_in_executor(None, release.wait, 60)
        try:
            sandbox = DockerSandbox(image, workspace=tmp_path, volumes=volumes, labels=LABEL, client=docker_client)
            async with sandbox:
                outcome = await run_verification(plan, sandbox)
                return outcome, not held.done()
        finally:
            release.set()
            await held

    outcome, while_held = asyncio.run(run())
    assert while_held, "the grading waited for the default executor's thread"
    assert (outcome.reward, outcome.masked, outcome.failure_kind) == (1.0, False, None), outcome


def test_a_grading_the_caller_gave_up_on_holds_the_sandbox_until_it_ends(docker_client, tmp_path):
    """An operator's trial: a grading cancelled midway (``asyncio.wait_for``) ran on in the container,
    since an engine's exec cannot be stopped from outside, and its finish killed what the next grading
    of that sandbox had started, masking a right answer. The sandbox's turn now passes on only once
    the abandoned exec has ended."""
    import time

    slow = _shell_task(tmp_path / "slow", "sleep 4\necho 0 > /logs/verifier/reward.txt\n")
    right = _shell_task(tmp_path / "right", "sleep 3\necho 1 > /logs/verifier/reward.txt\n")

    async def run() -> Tuple[VerificationOutcome, float]:
        sandbox = DockerSandbox(base_image(docker_client), workspace=tmp_path, labels=LABEL, client=docker_client)
        async with sandbox:
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(run_verification(plan_verification(load_task(slow)), sandbox), 1.5)
            started = time.monotonic()
            outcome = await run_verification(plan_verification(load_task(right)), sandbox)
            return outcome, time.monotonic() - started

    outcome, waited = asyncio.run(run())
    assert (outcome.reward, outcome.masked) == (1.0, False), outcome
    assert waited >= 5, waited  # the rest of the abandoned grading's 4 s (2.5), then its own 3 s
