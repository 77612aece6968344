"""nemo_gym.data.tasks.harbor.verifier_env: Harbor's separate verifier environment.

Pure resolution functions over a loaded task (or a task folder's path), after Harbor's
``verifier_mode.py``: which mode a verifier runs in, and the environment it runs in.
"""

from __future__ import annotations

from pathlib import Path
from typing import Union

from nemo_gym.data.tasks.harbor.task import Task, VerifierConfig, load_task

TaskLike = Union[str, Path, Task]

SHARED, SEPARATE = "shared", "separate"


def _task(task: TaskLike) -> Task:
    return task if isinstance(task, Task) else load_task(task)


def _mode(verifier: VerifierConfig) -> Union[str, None]:
    if verifier.environment_mode is not None:
        return verifier.environment_mode
    return SEPARATE if verifier.environment is not None else None


def verifier_mode(task: TaskLike) -> str:
    """The task's mode, as Harbor's ``resolve_task_verifier_mode``: the explicit
    ``[verifier].environment_mode``, else separate when ``[verifier.environment]`` is declared, else shared."""
    return _mode(_task(task).verifier) or SHARED


def step_verifier_mode(task: TaskLike, step_name: str) -> str:
    """ "separate" or "shared" for one step, as Harbor's resolve_step_verifier_mode (verifier_mode.py at
    v0.22.0) resolves it: the step's explicit [steps.verifier].environment_mode, else separate when the
    step declares a [steps.verifier.environment], else the task's own mode. Steps of one task may
    resolve differently."""
    loaded = _task(task)
    return _mode(loaded.step(step_name).verifier) or verifier_mode(loaded)
