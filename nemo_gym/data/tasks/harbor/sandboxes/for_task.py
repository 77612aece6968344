"""A sandbox set up for a task as Harbor would start it: its image, environment, working directory
and users, with the workspace (and any other agent state) inside."""

from __future__ import annotations

import os
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Mapping, Optional

from nemo_gym.data.tasks.harbor.env_templates import resolve_env
from nemo_gym.data.tasks.harbor.task import Task, TaskError
from nemo_gym.data.tasks.harbor.workdir import declared_workdir, working_directory

SANDBOX_KINDS = ("local", "docker")


@asynccontextmanager
async def open_task_sandbox(
    task: Task,
    workspace: Path,
    *,
    kind: str = "local",
    image: Optional[str] = None,
    mounts: Optional[Mapping[str, Path]] = None,
) -> AsyncIterator[Any]:
    """The ``kind`` of sandbox for ``task``, with ``workspace`` at its working directory.

    Its env is ``[environment].env`` (templates filled from the host environment); its image
    ``image``, else ``[environment].docker_image``; the working directory the task declares, else
    the image's ``WORKDIR`` (Docker), else ``/workspace``; the local sandbox also provides the users
    the task names. ``mounts`` puts more host folders at sandbox paths (copied into a container).
    """
    env = resolve_env(task.environment.env, os.environ, where=f"{task.path / 'task.toml'} [environment].env")
    if kind == "docker":
        from nemo_gym.data.tasks.harbor.sandboxes.docker import DockerSandbox

        image = image or task.environment.docker_image
        if not image:
            raise TaskError(f"{task.path}: no Docker image: give --image or set [environment].docker_image")
        sandbox = DockerSandbox(image, workspace=workspace, workdir=declared_workdir(task), env=env, mounts=mounts)
        async with sandbox:
            yield sandbox
        return
    if kind != "local":
        raise TaskError(f"unknown sandbox {kind!r}: choose one of {', '.join(SANDBOX_KINDS)}")
    from nemo_gym.data.tasks.harbor.sandboxes.local import LocalSandbox

    users = [task.agent_user, task.verifier.user, *(step.verifier.user for step in task.steps)]
    local = LocalSandbox(
        workspace,
        env=env,
        workdir=working_directory(task),
        mounts=mounts,
        users=[user for user in users if user is not None],
    )
    async with local:
        yield local
