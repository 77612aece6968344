"""Helpers shared by test modules (importable: pytest puts tests/ on sys.path)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def make_bin(folder: Path, **links: str) -> Path:
    """A folder of symlinks (name -> target) to build a PATH from."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, target in links.items():
        (folder / name).symlink_to(target)
    return folder


def pyenv_python(version: str) -> Path:
    """The pyenv build of ``version`` (e.g. "3.7"), which this machine kind provides."""
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    matches = sorted((root / "versions").glob(f"{version}.*/bin/python{version}"))
    if not matches:
        pytest.fail(f"no pyenv build of Python {version} under {root}/versions (the machine provides 2.7 and 3.6-3.13)")
    return matches[-1]
