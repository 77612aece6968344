"""The in-sandbox part (SDK and runner) imports the standard library alone, on every Python."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from nemo_gym.data.tasks.harbor.staging import lay_out, shim_files

pytestmark = pytest.mark.every_python  # the in-sandbox part: proven on every Python (noxfile)

CHECK = r"""
import sys
sys.path.insert(0, sys.argv[1])
before = set(sys.modules)
import nemo_gym.verifiers, nemo_gym.verifiers.files, _gym_runner, _gym_runner_rare, _gym_await, _gym_channel
for name in nemo_gym.verifiers.__all__:
    getattr(nemo_gym.verifiers, name)
outside = sorted(
    name for name in set(sys.modules) - before
    if name.split(".")[0] not in ("nemo_gym", "_gym_runner", "_gym_runner_rare", "_gym_await", "_gym_channel")
    and getattr(sys, "stdlib_module_names", None) is not None
    and name.split(".")[0] not in sys.stdlib_module_names
)
assert not outside, outside
for module in ("nemo_gym.verifiers", "_gym_runner", "_gym_runner_rare", "_gym_await", "_gym_channel"):
    assert sys.modules[module].__file__.startswith(sys.argv[1]), sys.modules[module].__file__
heavy = sorted({"asyncio", "inspect", "typing", "traceback", "pathlib", "json"} & set(sys.modules))
print("heavy:", heavy)
"""


def test_sdk_and_runner_import_without_site_packages(tmp_path: Path):
    lay_out(tmp_path, shim_files(b"def verify():\n    return 1\n", {}))
    completed = subprocess.run(
        [sys.executable, "-S", "-I", "-c", CHECK, str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
    )
    assert completed.returncode == 0, completed.stdout.decode()


def test_runner_loads_heavy_modules_only_when_needed(tmp_path: Path):
    lay_out(tmp_path, shim_files(b"def verify():\n    return 1\n", {}))
    completed = subprocess.run(
        [
            sys.executable,
            "-S",
            "-I",
            "-c",
            "import sys; sys.path.insert(0, sys.argv[1]); import _gym_runner;"
            "print(sorted({'asyncio', 'inspect', 'typing', 'traceback', 'json', 'pathlib'} & set(sys.modules)))",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert completed.stdout.decode().strip() == "[]", completed.stdout.decode()
