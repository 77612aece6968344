"""Shared fixtures: run the real shim (test.sh + runner + SDK) as a subprocess in a temporary folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Optional

import pytest
from support import make_bin

from nemo_gym.data.tasks.harbor.staging import ShimFile, lay_out, shim_files


def _has_nemo_gym() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("nemo_gym.sandbox.providers.base") is not None
    except ImportError:
        return False


# The tests of a provider built on NeMo Gym's own classes import them at the top: without the real
# nemo-gym they are not collected at all (``nox -s nemo-gym`` runs them, and requires it).
collect_ignore = (
    []
    if _has_nemo_gym() or os.environ.get("NEMO_GYM_REQUIRE_NEMO_GYM") == "1"
    else ["test_provider_docker.py", "test_provider_docker_attacks.py", "nemo_gym_docker_provider.py"]
)


@dataclass
class ShimRun:
    returncode: int
    output: str
    reward: Optional[Dict[str, Any]]
    logs: Path
    workspace: Path
    again: Callable[[], ShimRun]

    @property
    def files(self) -> list:
        return sorted(path.name for path in self.logs.iterdir())


@pytest.fixture
def python_bin(tmp_path: Path) -> Path:
    """A PATH folder whose python3 is the interpreter running the tests (so nox covers 3.8-3.13)."""
    return make_bin(tmp_path / "bin", python3=sys.executable, rm="/bin/rm")


@pytest.fixture
def run_shim(tmp_path: Path, python_bin: Path) -> Callable[..., ShimRun]:
    """Lays out the shim for a verifier and runs ``bash test.sh`` from the workspace."""

    def run(
        verifier: str,
        task_data: Optional[Dict[str, Any]] = None,
        response: Optional[Dict[str, Any]] = None,
        *,
        workspace_files: Optional[Dict[str, str]] = None,
        extra_files: Optional[Dict[str, str]] = None,
        path: Optional[str] = None,
        env: Optional[Dict[str, str]] = None,
        drop_task_data: bool = False,
    ) -> ShimRun:
        tests = tmp_path / "tests"
        logs = tmp_path / "logs" / "verifier"  # not created: test.sh must create it
        workspace = tmp_path / "workspace"
        workspace.mkdir(exist_ok=True)
        for name, text in (workspace_files or {}).items():
            (workspace / name).parent.mkdir(parents=True, exist_ok=True)
            (workspace / name).write_text(text)
        task_files = [ShimFile(name, text.encode()) for name, text in (extra_files or {}).items()]
        files = shim_files(textwrap.dedent(verifier).encode(), task_data or {}, response, task_files)
        if drop_task_data:
            files = [file for file in files if file.name != "task_data.json"]
        lay_out(tests, files)
        environment = {"PATH": path if path is not None else str(python_bin), "VERIFIER_LOGS_DIR": str(logs)}
        environment.update(env or {})

        def execute() -> ShimRun:
            completed = subprocess.run(
                ["/bin/bash", str(tests / "test.sh")],
                cwd=workspace,
                env=environment,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                timeout=60,
            )
            assert completed.stderr == b"", "test.sh must send its stderr to its stdout"
            reward_file = logs / "reward.json"
            reward = json.loads(reward_file.read_text()) if reward_file.exists() else None
            return ShimRun(completed.returncode, completed.stdout.decode(), reward, logs, workspace, execute)

        return execute()

    return run


@pytest.fixture(scope="session")
def docker_client():
    """A Docker client; without an engine the test is skipped, or fails under NEMO_GYM_REQUIRE_DOCKER=1."""
    from images import engine

    client = engine()
    if client is None:
        if os.environ.get("NEMO_GYM_REQUIRE_DOCKER") == "1":
            pytest.fail("NEMO_GYM_REQUIRE_DOCKER=1 but no Docker engine is reachable")
        pytest.skip("no Docker engine is reachable (set NEMO_GYM_REQUIRE_DOCKER=1 to make this a failure)")
    return client
