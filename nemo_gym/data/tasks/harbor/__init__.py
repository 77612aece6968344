"""The host side of NeMo Gym's Harbor tasks: load a task, plan its verification, run it in a
sandbox, read the outcome.

The names a server needs, re-exported from the modules that hold them; each is imported on first
use, so ``import nemo_gym.data.tasks.harbor`` costs nothing and pulls in no optional dependency
(the Docker SDK comes with ``DockerSandbox``, NeMo Gym with a provider's separate sandbox)::

    task = load_task("tasks/capitals")
    plan = plan_verification(task, response=final_response)
    async with LocalSandbox(workspace) as sandbox:            # or DockerSandbox, or attach(provider, handle)
        outcome = await run_verification(plan, sandbox)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Dict

if TYPE_CHECKING:
    from nemo_gym.data.tasks.harbor.batch import Rollout, verify_rollouts
    from nemo_gym.data.tasks.harbor.check import Finding, check
    from nemo_gym.data.tasks.harbor.publishing import publish_for_harbor, publish_problems
    from nemo_gym.data.tasks.harbor.responses import response
    from nemo_gym.data.tasks.harbor.rewards import read_reward
    from nemo_gym.data.tasks.harbor.sandboxes.base import ExecTimeout, Sandbox, SandboxError
    from nemo_gym.data.tasks.harbor.sandboxes.docker import DockerSandbox
    from nemo_gym.data.tasks.harbor.sandboxes.for_task import verifier_sandbox_opener
    from nemo_gym.data.tasks.harbor.sandboxes.local import LocalSandbox
    from nemo_gym.data.tasks.harbor.sandboxes.provider import attach, open_provider_sandbox, provider_verifier_opener
    from nemo_gym.data.tasks.harbor.separate import run_separate_verification
    from nemo_gym.data.tasks.harbor.task import Task, TaskError, load_dataset, load_task
    from nemo_gym.data.tasks.harbor.testing import run_verify
    from nemo_gym.data.tasks.harbor.validation import validate_task
    from nemo_gym.data.tasks.harbor.verification import (
        VerificationOutcome,
        VerificationPlan,
        mask_counts,
        plan_verification,
        run_verification,
    )

# Each name, and the module (under this package) that holds it.
_HOMES: Dict[str, str] = {
    "load_task": "task",
    "load_dataset": "task",
    "Task": "task",
    "TaskError": "task",
    "plan_verification": "verification",
    "run_verification": "verification",
    "VerificationPlan": "verification",
    "VerificationOutcome": "verification",
    "mask_counts": "verification",
    "run_separate_verification": "separate",
    "Sandbox": "sandboxes.base",
    "SandboxError": "sandboxes.base",
    "ExecTimeout": "sandboxes.base",
    "LocalSandbox": "sandboxes.local",
    "DockerSandbox": "sandboxes.docker",
    "attach": "sandboxes.provider",
    "open_provider_sandbox": "sandboxes.provider",
    "provider_verifier_opener": "sandboxes.provider",
    "verifier_sandbox_opener": "sandboxes.for_task",
    "Rollout": "batch",
    "verify_rollouts": "batch",
    "read_reward": "rewards",
    "check": "check",
    "Finding": "check",
    "validate_task": "validation",
    "publish_for_harbor": "publishing",
    "publish_problems": "publishing",
    "response": "responses",
    "run_verify": "testing",
}

__all__ = [
    "DockerSandbox",
    "ExecTimeout",
    "Finding",
    "LocalSandbox",
    "Rollout",
    "Sandbox",
    "SandboxError",
    "Task",
    "TaskError",
    "VerificationOutcome",
    "VerificationPlan",
    "attach",
    "check",
    "load_dataset",
    "load_task",
    "mask_counts",
    "open_provider_sandbox",
    "plan_verification",
    "provider_verifier_opener",
    "publish_for_harbor",
    "publish_problems",
    "read_reward",
    "response",
    "run_separate_verification",
    "run_verification",
    "run_verify",
    "validate_task",
    "verifier_sandbox_opener",
    "verify_rollouts",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # found once
    return value


def __dir__() -> Any:
    return sorted(set(globals()) | set(__all__))
