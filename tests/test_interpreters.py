"""test.sh picks python3, else python, the first that is 3.8+; with none it says why and writes nothing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from support import make_bin, pyenv_python

pytestmark = pytest.mark.every_python  # the in-sandbox part: proven on every Python (noxfile)

VERIFIER = "import sys\ndef verify():\n    print('ran on', sys.version_info[:2])\n    return 1\n"
THIS = f"ran on {tuple(sys.version_info[:2])}"


def test_python3_is_preferred(run_shim, tmp_path: Path):
    bin_dir = make_bin(tmp_path / "both", python3=sys.executable, python=str(pyenv_python("3.7")))
    run = run_shim(VERIFIER, path=str(bin_dir))
    assert run.reward == {"reward": 1} and THIS in run.output
    assert "too old" not in run.output and "3.8 or newer" not in run.output  # one interpreter start


def test_only_python(run_shim, tmp_path: Path):
    run = run_shim(VERIFIER, path=str(make_bin(tmp_path / "only-python", python=sys.executable)))
    assert run.reward == {"reward": 1} and THIS in run.output


def test_python3_too_old_then_a_good_python(run_shim, tmp_path: Path):
    for old in ("3.6", "3.7"):
        bin_dir = make_bin(tmp_path / f"old-{old}", python3=str(pyenv_python(old)), python=sys.executable)
        run = run_shim(VERIFIER, path=str(bin_dir))
        assert run.reward == {"reward": 1}, run.output
        assert f"is Python {old}." in run.output and "needs Python 3.8 or newer" in run.output
        assert THIS in run.output


def test_only_old_pythons(run_shim, tmp_path: Path):
    bin_dir = make_bin(
        tmp_path / "old", python3=str(pyenv_python("3.7")), python=str(pyenv_python("2.7")), rm="/bin/rm"
    )
    run = run_shim(VERIFIER, path=str(bin_dir))
    assert run.returncode != 0 and run.reward is None
    assert "is Python 3.7." in run.output and "is Python 2.7." in run.output
    assert "no Python 3.8 or newer found" in run.output and "python3 is too old; python is too old" in run.output


def test_no_python_at_all(run_shim, tmp_path: Path):
    logs = tmp_path / "logs" / "verifier"
    logs.mkdir(parents=True)
    (logs / "reward.txt").write_text("1")  # planted: must not stand when nothing can grade
    run = run_shim(VERIFIER, path=str(make_bin(tmp_path / "none", rm="/bin/rm")))
    assert run.returncode == 127 and run.reward is None
    assert "no Python 3.8 or newer found" in run.output
    assert "python3 is not on PATH; python is not on PATH;" in run.output
    assert run.files == []
