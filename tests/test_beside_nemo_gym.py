"""This package beside the real ``nemo-gym`` (``nox -s nemo-gym``, Python 3.12+): both put files into
``nemo_gym/``, in either install order, and neither overwrites a file of the other.

This package ships no ``nemo_gym/__init__.py`` (NeMo Gym's, which does work on import, stays the
package's), its host side and SDK live in ``nemo_gym.data.tasks.harbor`` and ``nemo_gym.verifiers``,
which NeMo Gym does not have, and its command is ``gym-harbor``, beside NeMo Gym's ``gym``. The session
installs ``nemo-gym`` with ``--no-deps``: what is checked needs none of its dependencies. Without
``nemo-gym`` the tests skip, or fail under ``NEMO_GYM_REQUIRE_NEMO_GYM=1`` (the session sets it).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path
from typing import Dict, List

import pytest
from support import EXAMPLES, write_files

pytestmark = pytest.mark.nemo_gym

NEMO_GYM = "nemo-gym"
THIS = "nemo-gym-harbor-verifiers"
# The venv's scripts: the commands under test, never whatever else PATH holds.
BIN = Path(sys.executable).parent
# What NeMo Gym's nemo_gym/__init__.py sets on import; no command here may inherit them from the caller.
NEMO_GYM_ENV = ("HF_HOME", "HF_DATASETS_CACHE", "TOKENIZERS_PARALLELISM")


@pytest.fixture(scope="module", autouse=True)
def nemo_gym_installed() -> metadata.Distribution:
    """The installed ``nemo-gym``; without it the test is skipped, or fails under NEMO_GYM_REQUIRE_NEMO_GYM=1."""
    try:
        return metadata.distribution(NEMO_GYM)
    except metadata.PackageNotFoundError:
        if os.environ.get("NEMO_GYM_REQUIRE_NEMO_GYM") == "1":
            pytest.fail("NEMO_GYM_REQUIRE_NEMO_GYM=1 but nemo-gym is not installed (nox -s nemo-gym installs it)")
        pytest.skip("nemo-gym is not installed (nox -s nemo-gym installs it; NEMO_GYM_REQUIRE_NEMO_GYM=1 fails)")


def _env() -> Dict[str, str]:
    """The caller's environment with this venv's scripts first and none of NeMo Gym's import side effects."""
    env = {name: value for name, value in os.environ.items() if name not in NEMO_GYM_ENV}
    env["PATH"] = os.pathsep.join([str(BIN), env.get("PATH", "")])
    return env


def run(*command: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        list(command), cwd=cwd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120
    )


def _digest(path: Path, mode: str) -> str:
    """A file's hash as RECORD writes it: urlsafe base64 without padding."""
    return base64.urlsafe_b64encode(hashlib.new(mode, path.read_bytes()).digest()).rstrip(b"=").decode()


# Files each distribution must list, and this package must never list NeMo Gym's __init__.py: so the
# checks below cannot pass on an empty or unrelated RECORD.
OWN_FILES = {
    NEMO_GYM: ["nemo_gym/__init__.py", "nemo_gym/cli/main.py", "nemo_gym/sandbox/providers/base.py"],
    THIS: [
        "nemo_gym/verifiers/__init__.py",
        "nemo_gym/data/tasks/harbor/cli.py",
        "nemo_gym/data/tasks/harbor/_shim/test.sh",
    ],
}


@pytest.mark.parametrize("name", [NEMO_GYM, THIS])
def test_every_file_of_each_distribution_is_as_it_installed_it(name):
    dist = metadata.distribution(name)
    hashed = [file for file in dist.files or [] if file.hash is not None]
    listed = {str(file) for file in hashed}
    assert set(OWN_FILES[name]) <= listed, f"{name}'s RECORD lacks {sorted(set(OWN_FILES[name]) - listed)}"
    if name == THIS:
        assert "nemo_gym/__init__.py" not in {str(file) for file in dist.files or []}
    changed: List[str] = []
    for file in hashed:
        path = Path(str(dist.locate_file(file)))
        if not path.is_file() or _digest(path, file.hash.mode) != file.hash.value:
            changed.append(str(file))
    assert changed == [], f"files of {name} that no longer match its RECORD (overwritten or removed): {changed}"


def test_the_two_distributions_share_the_nemo_gym_folder_but_no_file():
    ours, theirs = metadata.distribution(THIS), metadata.distribution(NEMO_GYM)
    # One site-packages, one nemo_gym/ folder: the two really are installed into each other.
    assert Path(str(ours.locate_file("nemo_gym"))).resolve() == Path(str(theirs.locate_file("nemo_gym"))).resolve()

    def paths(dist: metadata.Distribution) -> set:
        return {Path(os.path.normpath(str(dist.locate_file(file)))) for file in dist.files or []}

    shared = paths(ours) & paths(theirs)
    assert shared == set(), f"paths both RECORDs list: {sorted(map(str, shared))}"


@pytest.mark.parametrize(
    ("command", "owner", "target"),
    [("gym", NEMO_GYM, "nemo_gym.cli.main:main"), ("gym-harbor", THIS, "nemo_gym.data.tasks.harbor.cli:main")],
)
def test_each_command_belongs_to_its_package(command, owner, target):
    # A set: NeMo Gym's __init__ appends site-packages to sys.path once more, so every distribution
    # there is found twice once anything under nemo_gym (this suite's imports too) has been imported.
    claims = {
        (dist.metadata["Name"], entry_point.value)
        for dist in metadata.distributions()
        for entry_point in dist.entry_points
        if entry_point.group == "console_scripts" and entry_point.name == command
    }
    assert claims == {(owner, target)}
    script = BIN / command
    assert script.is_file(), f"no {command} in {BIN}"
    module, _, function = target.partition(":")
    assert f"from {module} import {function}" in script.read_text()


@pytest.mark.parametrize(
    ("command", "usage"),
    [
        (["gym", "--help"], "usage: gym "),
        # --help and the subcommands' help need none of NeMo Gym's dependencies; `gym --version` and
        # `gym list` import psutil and pydantic, which --no-deps leaves out.
        (["gym", "env", "--help"], "usage: gym env "),
        (["gym", "dataset", "--help"], "usage: gym dataset "),
        (["gym-harbor", "--help"], "usage: gym-harbor "),
        (["gym-harbor", "verify", "--help"], "usage: gym-harbor verify "),
        (["python", "-m", "nemo_gym.data.tasks.harbor", "--help"], "usage: gym-harbor "),
    ],
)
def test_both_command_lines_answer(command, usage, tmp_path):
    program = sys.executable if command[0] == "python" else str(BIN / command[0])
    result = run(program, *command[1:], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(usage), result.stdout


IMPORTS = """
import json
import nemo_gym.sandbox.providers.base, nemo_gym.cli.main
import nemo_gym.verifiers, nemo_gym.data.tasks.harbor.verification
import nemo_gym
print(json.dumps({
    "nemo_gym": nemo_gym.__file__,
    "version": nemo_gym.__version__,
    "cli": nemo_gym.cli.main.__file__,
    "providers": nemo_gym.sandbox.providers.base.__file__,
    "verifiers": nemo_gym.verifiers.__file__,
    "verification": nemo_gym.data.tasks.harbor.verification.__file__,
}))
"""


def test_both_packages_import_and_nemo_gym_is_nemo_gyms(tmp_path):
    # From an empty folder: the checkout's nemo_gym/ must not stand in for the installed one.
    result = run(sys.executable, "-c", IMPORTS, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout.splitlines()[-1])
    theirs, ours = metadata.distribution(NEMO_GYM), metadata.distribution(THIS)

    def installed(dist: metadata.Distribution, name: str) -> str:
        return str(Path(str(dist.locate_file(name))).resolve())

    assert found == {
        "nemo_gym": installed(theirs, "nemo_gym/__init__.py"),
        "version": theirs.version,
        "cli": installed(theirs, "nemo_gym/cli/main.py"),
        "providers": installed(theirs, "nemo_gym/sandbox/providers/base.py"),
        "verifiers": installed(ours, "nemo_gym/verifiers/__init__.py"),
        "verification": installed(ours, "nemo_gym/data/tasks/harbor/verification.py"),
    }


def verify(task: Path, cwd: Path, *options: str) -> dict:
    result = run(str(BIN / "gym-harbor"), "verify", str(task), "--json", *options, cwd=cwd)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def test_a_verification_grades(tmp_path):
    outcome = verify(EXAMPLES / "answer-file", tmp_path)
    assert outcome["reward"] == 1.0, outcome["stdout"]
    assert outcome["failure_kind"] is None


# Scores 1 only when the verifier's nemo_gym is the one staged into /tests (and the SDK beside it), and
# none of NeMo Gym's __init__ ran. The metric says whether NeMo Gym's package was on the sandbox
# interpreter's path at all, i.e. whether the staged one had something to win over.
STAGED_VERIFIER = """
import builtins
import os
import sys
from pathlib import Path

import nemo_gym
import nemo_gym.verifiers

TESTS = Path(__file__).resolve().parent


def verify(workspace):
    staged = Path(nemo_gym.__file__).resolve() == TESTS / "nemo_gym" / "__init__.py"
    sdk = Path(nemo_gym.verifiers.__file__).resolve() == TESTS / "nemo_gym" / "verifiers" / "__init__.py"
    side_effects = [name for name in ("HF_HOME", "HF_DATASETS_CACHE", "TOKENIZERS_PARALLELISM") if name in os.environ]
    side_effects += [name for name in ("PARENT_DIR", "ROOT_DIR", "__version__") if hasattr(nemo_gym, name)]
    if type(builtins.print).__name__ != "builtin_function_or_method":
        side_effects.append("print")
    reachable = any((Path(entry) / "nemo_gym" / "cli" / "main.py").is_file() for entry in sys.path if entry)
    print("interpreter", sys.executable, "nemo_gym", nemo_gym.__file__, "side effects", side_effects)
    return {"reward": float(staged and sdk and not side_effects), "nemo_gym_reachable": float(reachable)}
"""


def test_the_sandbox_imports_the_staged_nemo_gym_not_nemo_gyms(tmp_path):
    task = write_files(
        tmp_path / "task",
        {
            "task.toml": (EXAMPLES / "answer-file" / "task.toml").read_text(),
            "tests/verifier.py": textwrap.dedent(STAGED_VERIFIER),
            "workspace/README": "nothing to grade here\n",
        },
    )
    # The local sandbox has a /tmp of its own: a venv there (a checkout under /tmp) is put back in it,
    # so that the sandbox's python3 is this venv's, with NeMo Gym installed.
    venv = Path(sys.prefix)
    mount = ["--mount", f"{venv}:{venv}"] if venv.parts[:2] == ("/", "tmp") else []
    outcome = verify(task, tmp_path, *mount)
    assert outcome["reward"] == 1.0, outcome["stdout"]
    # Else the check proves nothing: the sandbox's Python must be this venv's, where nemo-gym is installed.
    assert outcome["metrics"] == {"nemo_gym_reachable": 1.0}, outcome["stdout"]
