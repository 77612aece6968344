"""Where verification runs: a small async protocol shaped like NeMo Gym's sandbox providers.

``LocalSandbox`` runs on this machine (the default of ``gym-harbor verify``); ``DockerSandbox`` runs in a
container through the Docker SDK (the optional ``docker`` extra) and is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nemo_gym.data.tasks.harbor.sandboxes.base import ExecResult, ExecTimeout, Sandbox, SandboxError
from nemo_gym.data.tasks.harbor.sandboxes.local import LocalSandbox

if TYPE_CHECKING:
    from nemo_gym.data.tasks.harbor.sandboxes.docker import DockerSandbox

__all__ = ("DockerSandbox", "ExecResult", "ExecTimeout", "LocalSandbox", "Sandbox", "SandboxError")


def __getattr__(name: str) -> Any:
    if name == "DockerSandbox":  # the Docker SDK is optional: import it only when asked for
        from nemo_gym.data.tasks.harbor.sandboxes.docker import DockerSandbox

        return DockerSandbox
    raise AttributeError(name)
