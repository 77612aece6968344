"""Where the files that run inside the sandbox live: the shim and the SDK.

An installed wheel carries the shim as ``_shim/`` beside this module (``pyproject.toml``
force-includes it); a source checkout has it at the top of the tree, ``shim/``.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Tuple

import nemo_gym
import nemo_gym.verifiers

_PACKAGE_SHIM = Path(__file__).resolve().parent / "_shim"
_CHECKOUT_SHIM = Path(__file__).resolve().parents[4] / "shim"

# The shim's files, by their name in /tests.
SHIM_FILES = ("test.sh", "gym_runner.py", "_gym_runner.py", "_gym_runner_rare.py", "_gym_channel.py")


def shim_dir() -> Path:
    """The folder holding ``test.sh`` and the runner."""
    for candidate in (_PACKAGE_SHIM, _CHECKOUT_SHIM):
        if (candidate / "test.sh").is_file():
            return candidate
    raise FileNotFoundError(
        f"the verifier shim is missing: neither {_PACKAGE_SHIM} nor {_CHECKOUT_SHIM} holds test.sh; "
        "reinstall the package"
    )


def sdk_files() -> List[Tuple[str, Path]]:
    """``(name in /tests, path)`` for ``nemo_gym/__init__.py`` and every file of ``nemo_gym.verifiers``."""
    package_init = Path(nemo_gym.__file__ or "")
    sdk = Path(nemo_gym.verifiers.__file__ or "").parent
    files = [("nemo_gym/__init__.py", package_init)]
    for path in sorted(sdk.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix in (".py", ".typed"):
            files.append(("nemo_gym/verifiers/" + path.relative_to(sdk).as_posix(), path))
    return files
