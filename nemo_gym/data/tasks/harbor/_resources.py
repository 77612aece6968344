"""Where the files that run inside the sandbox live: the shim and the SDK.

An installed wheel carries the shim as ``_shim/`` beside this module (``pyproject.toml``
force-includes it); a source checkout has it at the top of the tree, ``shim/``.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Tuple

import nemo_gym.verifiers

_PACKAGE_SHIM = Path(__file__).resolve().parent / "_shim"
_CHECKOUT_SHIM = Path(__file__).resolve().parents[4] / "shim"

# The shim's files, by their name in /tests.
SHIM_FILES = ("test.sh", "gym_runner.py", "_gym_runner.py", "_gym_runner_rare.py", "_gym_await.py", "_gym_channel.py")


def shim_dir() -> Path:
    """The folder holding ``test.sh`` and the runner."""
    for candidate in (_PACKAGE_SHIM, _CHECKOUT_SHIM):
        if (candidate / "test.sh").is_file():
            return candidate
    raise FileNotFoundError(
        f"the verifier shim is missing: neither {_PACKAGE_SHIM} nor {_CHECKOUT_SHIM} holds test.sh; "
        "reinstall the package"
    )


# The sandbox's ``nemo_gym/__init__.py``: nothing but finding the SDK, so that importing it there runs
# nothing else. The package ships none of its own (``nemo_gym`` is a namespace it shares with NeMo Gym,
# whose ``__init__.py`` does work on import), so staging writes this one. Where the server staged the
# SDK as one zip beside the folder (``bytecode.sdk_bundle``), the package's modules are in there: any
# Python with /tests on its path (the runner, or a helper script verify starts) finds them.
SDK_BUNDLE = "_gym_sdk.zip"
PACKAGE_INIT = f'''"""NeMo Gym's verifier SDK, as staged into a sandbox: nothing more on purpose."""
# posix is built in: no folder on the path can stand in for it (os could be found on PYTHONPATH first
# in a helper started with -S, where nothing has imported it yet).
from posix import stat as _stat

_bundle = __path__[0].rpartition("/")[0] + "/{SDK_BUNDLE}"  # staged by the server alone
try:
    if _stat(_bundle).st_mode & 0o170000 == 0o100000:  # a regular file
        __path__ = [_bundle + "/nemo_gym"]
except OSError:
    pass
del _stat, _bundle
'''.encode()


def sdk_files() -> List[Tuple[str, bytes]]:
    """``(name in /tests, content)`` for ``nemo_gym/__init__.py`` and every file of ``nemo_gym.verifiers``."""
    sdk = Path(nemo_gym.verifiers.__file__ or "").parent
    files = [("nemo_gym/__init__.py", PACKAGE_INIT)]
    for path in sorted(sdk.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix in (".py", ".typed"):
            files.append(("nemo_gym/verifiers/" + path.relative_to(sdk).as_posix(), path.read_bytes()))
    return files
