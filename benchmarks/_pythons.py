"""The real interpreter binaries of the pyenv builds (pyenv's shims are slow to start)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict

VERSIONS = ("3.8", "3.9", "3.10", "3.11", "3.12", "3.13")


def pyenv_pythons() -> Dict[str, Path]:
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    found = {}
    for version in VERSIONS:
        matches = sorted((root / "versions").glob(f"{version}.*/bin/python{version}"))
        if matches:
            found[version] = matches[-1]
    return found
