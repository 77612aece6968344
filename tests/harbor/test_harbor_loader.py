"""Harbor's own task loader loads every task ``gym-harbor dataset publish --harbor`` writes (issue 10).

The loader is Harbor's ``Task(task_dir)``: ``TaskConfig.model_validate_toml`` on ``task.toml`` and
``Task._validate_tests`` (an instruction, a test script the verifier can run, per step for multi-step
tasks). ``Task.is_valid_dir`` is what ``harbor run -p DATASET`` uses to find the tasks of a folder:
one it rejects is skipped silently, so it is checked too. No image is built here: loading needs none.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Dict, Tuple

import harbor_parity as hp
import pytest
from harbor.environments.definition import has_agent_environment_definition, should_use_prebuilt_docker_image
from harbor.models.job.config import DatasetConfig
from harbor.models.task.config import TaskOS
from harbor.models.task.task import Task

pytestmark = pytest.mark.harbor

BASE_IMAGE = "nemo-gym-test/harbor-python:loader"  # named only: nothing is built from it here
LINUX = TaskOS.LINUX
SHIM = ("test.sh", "gym_runner.py", "nemo_gym/__init__.py", "nemo_gym/verifiers/__init__.py")


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> Tuple[Path, Path]:
    root = tmp_path_factory.mktemp("loader")
    source = hp.write_source(root / "source")
    out = root / "published"
    hp.publish(source, out, BASE_IMAGE)
    return source, out


def _files(folder: Path) -> Dict[str, bytes]:
    if not folder.is_dir():
        return {}
    return {path.relative_to(folder).as_posix(): path.read_bytes() for path in folder.rglob("*") if path.is_file()}


def _harbor_tests(task: Path, step: str = "") -> Dict[str, bytes]:
    """What Harbor's Verifier uploads to /tests: tests/, then steps/<step>/tests/ over it."""
    return {**_files(task / "tests"), **(_files(task / "steps" / step / "tests") if step else {})}


def _runnable(path: Path) -> bool:
    """Harbor runs ``(/tests/test.sh)`` itself: the script needs its shebang (it chmods it)."""
    return path.is_file() and path.read_bytes().startswith(b"#!")


def _source_task_data(source: Path, task_id: str) -> dict:
    rows = {row["id"]: row for row in hp.ROWS}
    if task_id in rows:
        return rows[task_id]
    path = source / task_id / "task_data.json"
    return json.loads(path.read_text()) if path.exists() else {}


def test_every_task_is_published(published):
    _, out = published
    assert sorted(path.name for path in out.iterdir() if path.is_dir()) == sorted(hp.TASK_KINDS)


def test_harbor_run_finds_every_published_task(published):
    """``harbor run -p OUT`` lists OUT's tasks with ``Task.is_valid_dir``; none may drop out."""
    _, out = published
    configs = asyncio.run(DatasetConfig(path=out).get_task_configs())
    assert sorted(Path(config.path).name for config in configs) == sorted(hp.TASK_KINDS)


@pytest.mark.parametrize("task_id", sorted(hp.TASK_KINDS))
def test_harbor_loads_the_published_task(published, task_id):
    source, out = published
    folder = out / task_id
    task = Task(folder)  # raises on a task.toml Harbor refuses or a missing test script
    assert Task.is_valid_dir(folder)
    assert [step.name for step in task.config.steps or []] == list(hp.STEPS.get(task_id, ()))
    if task_id in {row["id"] for row in hp.ROWS}:
        assert task.instruction == _source_task_data(source, task_id)["instruction"]
    elif not task.has_steps:
        assert task.instruction == (source / task_id / "instruction.md").read_text()
        assert task.config.verifier.timeout_sec == 120.0
    # Where Harbor runs every command: [environment].workdir, else the Dockerfile's WORKDIR. It must
    # be where Gym puts the workspace: the task's own (/app), else Gym's default.
    assert hp.harbor_workdir(folder) == ("/app" if task_id == "single-py" else "/workspace")


@pytest.mark.parametrize("task_id", sorted(hp.TASK_KINDS))
def test_the_published_environment_builds_from_the_base_image(published, task_id):
    _, out = published
    task = Task(out / task_id)
    environment = task.paths.environment_dir
    image = task.config.environment.docker_image
    assert has_agent_environment_definition(environment, docker_image=image)
    dockerfile = environment / "Dockerfile"
    assert dockerfile.is_file(), "the published environment is a Dockerfile FROM the base image"
    first = next(line.split() for line in dockerfile.read_text().splitlines() if line.strip().startswith("FROM"))
    assert first[1] == BASE_IMAGE
    # A [environment].docker_image would win over the Dockerfile unless --force-build, and with it the
    # working directory and starting files the Dockerfile provides would be lost.
    assert not should_use_prebuilt_docker_image(environment, docker_image=image, force_build=False)


@pytest.mark.parametrize("task_id", sorted(hp.TASK_KINDS))
def test_harbor_runs_the_shim_or_the_tasks_own_test_sh(published, task_id):
    source, out = published
    kind = hp.TASK_KINDS[task_id]
    task = Task(out / task_id)
    if kind == "bash":
        assert task.paths.discovered_test_path_for(LINUX) == task.paths.tests_dir / "test.sh"
        assert _files(out / task_id / "tests") == _files(source / task_id / "tests")  # unchanged
        return
    if kind == "python":
        staged = _harbor_tests(out / task_id)
        test_path = task.paths.discovered_test_path_for(LINUX)
        assert test_path is not None and _runnable(test_path)
        own = source / task_id / "tests" / "verifier.py"
        verifier = own if own.exists() else source / "verifier.py"
        assert staged["verifier.py"] == verifier.read_bytes()
        assert json.loads(staged["task_data.json"]) == _source_task_data(source, task_id)
        assert set(SHIM) <= set(staged)
        if task_id == "single-py":
            assert staged["helper.py"] == (source / task_id / "tests" / "helper.py").read_bytes()
        return
    for step in hp.STEPS[task_id]:
        staged = _harbor_tests(out / task_id, step)
        step_test = task.paths.discovered_step_test_path_for(step, LINUX)
        assert step_test is not None and _runnable(step_test), f"step {step}: no runnable steps/{step}/tests/test.sh"
        assert set(SHIM) <= set(staged), f"step {step}: the shim is missing from what Harbor uploads"
        assert staged["verifier.py"] == (source / task_id / "steps" / step / "tests" / "verifier.py").read_bytes()
        assert json.loads(staged["task_data.json"]) == _source_task_data(source, task_id)
        assert staged["common.py"] == (source / task_id / "tests" / "common.py").read_bytes()


@pytest.mark.parametrize("task_id", sorted(hp.TASK_KINDS))
def test_harbor_finds_the_oracle(published, task_id):
    """Harbor's OracleAgent: steps/<step>/solution/solve.sh, else solution/solve.sh."""
    _, out = published
    task = Task(out / task_id)
    scripts = (
        [task.paths.discovered_step_solve_path_for(step, LINUX) for step in hp.STEPS[task_id]]
        if task.has_steps
        else [task.paths.discovered_solve_path_for(LINUX)]
    )
    for script in scripts:
        assert script is not None and script.is_file() and script.read_bytes().startswith(b"#!")


def test_nothing_harbor_does_not_read_is_copied(published):
    """The author's ``workspace/`` (issue 10, 8c) and the task's root ``task_data.json`` are Gym's own:
    Harbor never reads them."""
    _, out = published
    assert not (out / "single-py" / "workspace").exists()
    assert not (out / "single-py" / "task_data.json").exists()  # the shim's copy is in tests/
    assert sorted(os.listdir(out)) == sorted(hp.TASK_KINDS)  # no rows.jsonl, no root verifier.py
