"""The corpus (tests/corpus): Harbor tasks written the way real datasets write them.

Absolute ``/app`` paths from the Dockerfile's ``WORKDIR``, ``python3 /tests/helper.py`` checks,
``reward.txt`` from an exit status, ``solve.sh`` reading ``/solution/...``, ``[agent].user``,
``[verifier].user``, collect hooks, a multi-step task with a step ``workdir/`` and ``setup.sh``,
``reward.json`` with several keys, a verifier timeout. ``gym-harbor dataset validate`` must give every task
full marks, on the local sandbox and on Docker.

A reference run proves the tasks themselves right, so that a failure of ``validate`` is Gym's:
each task's own ``environment/Dockerfile`` is built (on the suite's local Python image instead of
``python:3.12-slim``, since no registry is reachable) and graded in Harbor's own order: the step's
``workdir/`` and ``setup.sh``, ``/solution/solve.sh`` as ``[agent].user``, the collect hooks, then
``(/tests/test.sh)`` as ``[verifier].user``, on the copy ``gym-harbor dataset publish --harbor`` writes.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Dict, List, Optional, Tuple

import pytest

from nemo_gym.data.tasks.harbor.env_templates import resolve_env
from nemo_gym.data.tasks.harbor.rewards import read_reward
from nemo_gym.data.tasks.harbor.task import Task, load_dataset
from nemo_gym.data.tasks.harbor.validation import TaskResult, validate_task
from nemo_gym.data.tasks.harbor.workdir import declared_workdir

CORPUS = Path(__file__).resolve().parent / "corpus"
GYM = str(Path(sys.executable).parent / "gym-harbor")

# Every task of the corpus, and the shape it stands for.
SHAPES = {
    "agent-owned-notes": "[agent].user = agent: the oracle runs as agent and owns its files; test.sh as root",
    "calc-module-unittest": "solve.sh copies /solution/calc.py; python3 /tests/calc_spec.py (unittest) && echo 1 || echo 0",
    "fibonacci-json": "an async Python verifier returning a reward and metrics",
    "fizzbuzz-script": "solve.sh writes /app/fizzbuzz.sh; test.sh diffs with /tests/expected_20.txt, trap fallback to 0",
    "greet-cli-multistep": "two steps: step tests over a shared tests/helpers.sh, step env, workdir/ with setup.sh",
    "greeter-as-grader": "[verifier].user = grader: a Python verifier that runs the agent's program",
    "hello-app": "the simplest: solve.sh writes a relative path from /app; test.sh checks /app/hello.txt",
    "inventory-export-collect": "two [[verifier.collect]] hooks (relative paths, a user) that test.sh grades",
    "prime-count-fast": "[verifier].timeout_sec = 20 and `timeout 3` around the agent's program",
    "sales-total": "a Python verifier: read_text + numeric_match against task_data.json",
    "service-config-json": "a Python verifier: JSON in /app/config.json, exact_match per field",
    "settings-from-env": "[environment].workdir = /opt/service, [environment].env, [verifier].env templates, [solution].env",
    "status-code-report": "partial credit: test.sh writes reward.json with a reward and four check keys",
    "word-count-cli": "solve.sh copies /solution/wc.py; test.sh runs python3 /tests/check_wc.py, reward from $?",
}
TASKS = sorted(SHAPES)

# What the outcomes carry besides the reward, where a task reports more.
METRICS = {
    "fibonacci-json": {"correct_terms": 40, "length": 40},
    "status-code-report": {"file_exists": 1, "valid_json": 1, "counts_match": 1, "total_matches": 1},
}


def _steps(task: Task) -> List[Optional[str]]:
    return [step.name for step in task.steps] or [None]


def _step_dir(task: Task, step: Optional[str]) -> Path:
    return task.path if step is None else task.path / "steps" / step


# --- the corpus itself -----------------------------------------------------------------------------


def test_the_corpus_is_a_dataset_of_harbor_task_folders():
    dataset = load_dataset(CORPUS)
    assert list(dataset.task_ids) == TASKS
    for task_id in TASKS:
        task = dataset.task(task_id)
        dockerfile = (task.path / "environment" / "Dockerfile").read_text()
        assert dockerfile.startswith("FROM python:3.12-slim\n"), task_id
        assert declared_workdir(task) in ("/app", "/opt/service"), task_id
        entry_points = []
        for step in _steps(task):
            folder = _step_dir(task, step)
            assert (folder / "instruction.md").is_file(), (task_id, step)
            solution = folder / "solution" if (folder / "solution").is_dir() else task.path / "solution"
            entry_points.append(solution / "solve.sh")
            tests = folder / "tests" if (folder / "tests" / "test.sh").is_file() else task.path / "tests"
            if (tests / "test.sh").is_file():
                entry_points.append(tests / "test.sh")
            else:
                assert step is None and (tests / "verifier.py").is_file(), (task_id, step)
            if (folder / "workdir" / "setup.sh").is_file():
                entry_points.append(folder / "workdir" / "setup.sh")
        for script in entry_points:
            # Harbor runs (/solution/solve.sh) and (/tests/test.sh) directly: a shebang and the run bit.
            assert script.read_bytes().startswith(b"#!/bin/bash\n"), script
            assert os.access(script, os.X_OK), script


def test_the_corpus_has_the_shapes_real_datasets_use():
    dataset = load_dataset(CORPUS)
    tasks = {task_id: dataset.task(task_id) for task_id in TASKS}
    text = {
        task_id: {
            path.relative_to(task.path).as_posix(): path.read_text()
            for path in task.path.rglob("*")
            if path.is_file() and path.suffix in (".sh", ".py", ".toml")
        }
        for task_id, task in tasks.items()
    }

    def scripts(task_id: str, name: str) -> str:
        return "".join(body for path, body in text[task_id].items() if path.endswith(name))

    assert tasks["agent-owned-notes"].agent_user == "agent"
    assert tasks["greeter-as-grader"].verifier.user == "grader"
    hooks = tasks["inventory-export-collect"].verifier.collect
    assert len(hooks) == 2 and hooks[1].user == "root" and "inventory.csv >" in hooks[0].command
    multi = tasks["greet-cli-multistep"]
    assert [step.name for step in multi.steps] == ["scaffold", "personalise"]
    assert multi.step("personalise").verifier.env == {"EXPECTED_GREETING": "Good morning, Ada!"}
    assert (multi.path / "steps" / "personalise" / "workdir" / "setup.sh").is_file()
    assert tasks["prime-count-fast"].verifier.timeout_sec == 20.0
    assert tasks["settings-from-env"].environment.workdir == "/opt/service"
    assert "reward.json" in scripts("status-code-report", "test.sh")
    assert "python3 /tests/check_wc.py" in scripts("word-count-cli", "test.sh")
    assert "cp /solution/wc.py /app/wc.py" in scripts("word-count-cli", "solve.sh")
    assert "cp /solution/calc.py" in scripts("calc-module-unittest", "solve.sh")
    python_verifiers = [task_id for task_id in TASKS if "tests/verifier.py" in text[task_id]]
    assert python_verifiers == ["fibonacci-json", "greeter-as-grader", "sales-total", "service-config-json"]
    # Most real verifiers hard-code the working directory's absolute paths.
    absolute = [
        task_id for task_id in TASKS if any("/app" in body for path, body in text[task_id].items() if "tests/" in path)
    ]
    assert len(absolute) >= 8, absolute


# --- gym-harbor dataset validate, on the local sandbox ----------------------------------------------------


@pytest.fixture(scope="module")
def local_validation() -> subprocess.CompletedProcess:
    return subprocess.run(
        [GYM, "dataset", "validate", str(CORPUS)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        timeout=600,
    )


def _progress_line(output: str, task_id: str) -> str:
    lines = [line for line in output.splitlines() if re.match(rf"\[\d+/\d+\] {re.escape(task_id)}: ", line)]
    return lines[0] if lines else f"(no progress line for {task_id})"


@pytest.mark.parametrize("task_id", TASKS)
def test_validate_locally(local_validation, task_id):
    line = _progress_line(local_validation.stdout, task_id)
    assert re.search(r": ok \(reward 1\b", line), (
        f"{line}\n--- stdout ---\n{local_validation.stdout}\n--- stderr ---\n{local_validation.stderr}"
    )


def test_validate_locally_passes_the_whole_corpus(local_validation):
    assert local_validation.returncode == 0, local_validation.stdout + local_validation.stderr
    assert f"{len(TASKS)} of {len(TASKS)} task(s) scored full marks" in local_validation.stdout


# --- gym-harbor dataset validate, on Docker ---------------------------------------------------------------


def _describe(result: TaskResult) -> str:
    """Why a task failed, in full: the error, or each step's outcome and the verifier's output."""
    if result.error:
        return f"{result.task_id}: {result.error}"
    parts = [result.task_id]
    for step in result.steps:
        outcome = step.outcome
        where = f"step {step.step}" if step.step else "task"
        if outcome is None:
            parts.append(f"{where}: {step.error or 'no outcome'}")
            continue
        parts.append(
            f"{where} (oracle {step.oracle}): reward {outcome.reward:g}, failure {outcome.failure_kind}, "
            f"masked {outcome.mask_reason}, detail {outcome.detail!r}\n--- test-stdout.txt ---\n{outcome.stdout}"
        )
    return "\n".join(parts)


@pytest.fixture(scope="module")
def docker_validation(docker_client) -> Dict[str, TaskResult]:
    """validate_task for every task, in the suite's image with users agent (1000) and grader (1001):
    what ``gym-harbor dataset validate --sandbox docker --image IMAGE`` does (``open_task_sandbox``: the
    task's env and declared working directory), plus the read-only bind mount of the interpreter
    that the command line cannot give."""
    from images import LABEL, users_image

    from nemo_gym.data.tasks.harbor.sandboxes.docker import DockerSandbox

    image, volumes = users_image(docker_client)

    @asynccontextmanager
    async def docker(task: Task, workspace: Path) -> AsyncIterator[Any]:
        env = resolve_env(task.environment.env, os.environ, where=f"{task.path / 'task.toml'} [environment].env")
        sandbox = DockerSandbox(
            image,
            workspace=workspace,
            workdir=declared_workdir(task),
            env=env,
            volumes=volumes,
            labels=LABEL,
            client=docker_client,
        )
        async with sandbox:
            yield sandbox

    dataset = load_dataset(CORPUS)

    async def run() -> Dict[str, TaskResult]:
        return {task_id: await validate_task(dataset.task(task_id), docker) for task_id in TASKS}

    return asyncio.run(run())


# The tasks that need nothing but bash and coreutils: the command line can run them in the suite's
# image without the interpreter's bind mount.
BASH_ONLY = ["agent-owned-notes", "fizzbuzz-script", "greet-cli-multistep", "hello-app"]


@pytest.mark.docker
def test_validate_on_docker_from_the_command_line(docker_client, tmp_path):
    from images import users_image

    image, _ = users_image(docker_client)
    dataset = tmp_path / "corpus"
    for task_id in BASH_ONLY:
        shutil.copytree(CORPUS / task_id, dataset / task_id)
    result = subprocess.run(
        [GYM, "dataset", "validate", str(dataset), "--sandbox", "docker", "--image", image],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        timeout=600,
    )
    for task_id in BASH_ONLY:
        line = _progress_line(result.stdout, task_id)
        assert re.search(r": ok \(reward 1\b", line), (
            f"{line}\n--- stdout ---\n{result.stdout}\n--- stderr ---\n{result.stderr}"
        )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.docker
@pytest.mark.parametrize("task_id", TASKS)
def test_validate_on_docker(docker_validation, task_id):
    result = docker_validation[task_id]
    assert result.passed, _describe(result)
    assert result.reward == 1.0
    for step in result.steps:
        assert step.oracle == "solve.sh"
        assert step.outcome is not None
        for key, value in METRICS.get(task_id, {}).items():
            assert step.outcome.metrics.get(key) == value, (key, step.outcome.metrics)


# --- the reference: Harbor's own sequence in each task's own image ---------------------------------


def task_image(client: Any, task_dir: Path) -> Tuple[str, Dict[str, Dict[str, str]]]:
    """The task's environment/Dockerfile built on the suite's Python 3.12 image (python:3.12-slim
    cannot be pulled here), whose interpreter is a read-only bind mount under /root."""
    import docker.errors
    from images import LABEL, python_image

    base, volumes = python_image(client, "3.12")
    dockerfile = (task_dir / "environment" / "Dockerfile").read_text()
    dockerfile = re.sub(r"^FROM python:3\.12-slim$", f"FROM {base}", dockerfile, count=1, flags=re.MULTILINE)
    dockerfile += (
        "\n# The interpreter is bind-mounted from /root/.pyenv: every user must reach it.\nRUN chmod 755 /root\n"
    )
    tag = f"nemo-gym-test/corpus-{task_dir.name}:{hashlib.sha256(dockerfile.encode()).hexdigest()[:12]}"
    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, labels=LABEL, rm=True)
    return tag, volumes


def _tar_of(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for path in sorted(folder.iterdir()):
            archive.add(str(path), arcname=path.name)
    return buffer.getvalue()


async def harbor_rewards(task: Task, image: str, volumes: Dict[str, Dict[str, str]], client: Any) -> List[str]:
    """Grades a published task as Harbor's shared-mode trial does (HARBOR-NOTES A.3, A.5, E) and
    returns, per step, its reward and the tail of what the oracle and the verifier printed."""
    from images import LABEL

    from nemo_gym.data.tasks.harbor.sandboxes.docker import DockerSandbox

    where = task.path / "task.toml"
    env = resolve_env(task.environment.env, os.environ, where=f"{where} [environment].env")
    solution_table = task.config.get("solution") or {}
    solution_env = resolve_env(solution_table.get("env") or {}, os.environ, where=f"{where} [solution].env")
    workdir = declared_workdir(task)
    reports = []
    sandbox = DockerSandbox(image, workdir=workdir, env=env, volumes=volumes, labels=LABEL, client=client)
    async with sandbox:
        container = sandbox._require()

        async def as_root(command: str) -> None:
            result = await sandbox.exec(command, cwd="/", user="root")
            assert result.return_code == 0, (command, result)

        await as_root("mkdir -p /logs/agent /logs/artifacts && chmod 777 /logs/agent /logs/artifacts")
        for step in _steps(task):
            folder = _step_dir(task, step)
            agent_user = task.agent_user
            if (folder / "workdir").is_dir():  # uploaded into the working directory, then setup.sh
                container.put_archive(workdir, _tar_of(folder / "workdir"))
                if (folder / "workdir" / "setup.sh").is_file():
                    await sandbox.exec(f"bash {workdir}/setup.sh", cwd=workdir, user=agent_user)
            solution = folder / "solution" if (folder / "solution").is_dir() else task.path / "solution"
            await as_root("rm -rf /solution && mkdir /solution")
            container.put_archive("/solution", _tar_of(solution))
            await as_root("chmod +x /solution/solve.sh")
            env_for_oracle = {"DEBIAN_FRONTEND": "noninteractive", **solution_env}
            oracle = await sandbox.exec(
                "(/solution/solve.sh) > /logs/agent/oracle.txt 2>&1; status=$?; cat /logs/agent/oracle.txt; exit $status",
                cwd=workdir,
                env=env_for_oracle,
                user=agent_user,
                timeout_s=120,
            )
            verifier = task.verifier if step is None else task.step(step).verifier
            hooks = task.verifier.collect + (verifier.collect if step is not None else ())
            for hook in hooks:
                await sandbox.exec(hook.command, cwd=workdir, user=hook.user, timeout_s=int(hook.timeout_sec) or None)
            await as_root("rm -rf /tests /logs/verifier && mkdir -p /tests /logs/verifier && chmod 777 /logs/verifier")
            if (task.path / "tests").is_dir():
                container.put_archive("/tests", _tar_of(task.path / "tests"))
            if step is not None and (folder / "tests").is_dir():
                container.put_archive("/tests", _tar_of(folder / "tests"))
            await as_root("chmod +x /tests/test.sh")
            verifier_env = {**task.verifier.env, **(verifier.env if step is not None else {})}
            verifier_env = resolve_env(verifier_env, os.environ, where=f"{where} [verifier].env")
            user = verifier.user if verifier.user is not None else task.verifier.user
            graded = await sandbox.exec(
                "(/tests/test.sh) > /logs/verifier/test-stdout.txt 2>&1; cat /logs/verifier/test-stdout.txt",
                cwd=workdir,
                env=verifier_env,
                user=user,
                timeout_s=verifier.timeout_sec,
            )
            with tempfile.TemporaryDirectory(prefix="nemo-gym-corpus-") as logs:
                for name in ("reward.json", "reward.txt"):
                    probe = await sandbox.exec(f"test -f /logs/verifier/{name}", cwd="/", user="root")
                    if probe.return_code == 0:
                        await sandbox.download_file(f"/logs/verifier/{name}", str(Path(logs) / name))
                reward = read_reward(Path(logs)).reward
            reports.append(
                f"{step or 'task'}: reward {reward:g}\n--- oracle (exit {oracle.return_code}) ---\n"
                f"{oracle.stdout[-2000:]}\n--- test-stdout.txt ---\n{graded.stdout[-2000:]}"
            )
    return reports


@pytest.fixture(scope="module")
def published_corpus(tmp_path_factory) -> Path:
    from nemo_gym.data.tasks.harbor.publishing import publish_for_harbor

    out = tmp_path_factory.mktemp("corpus") / "published"
    assert publish_for_harbor(CORPUS, out) == TASKS
    return out


@pytest.mark.docker
@pytest.mark.parametrize("task_id", TASKS)
def test_the_task_scores_full_marks_under_harbors_own_sequence(docker_client, published_corpus, task_id):
    task = load_dataset(published_corpus).task(task_id)
    image, volumes = task_image(docker_client, CORPUS / task_id)
    reports = asyncio.run(harbor_rewards(task, image, volumes, docker_client))
    assert len(reports) == len(_steps(task))
    assert all(report.split("\n", 1)[0].endswith(": reward 1") for report in reports), "\n".join(reports)
