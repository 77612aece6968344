"""Sandboxes set up for a task as Harbor would start them: the agent's (its image, environment,
working directory, users and limits, with the workspace and any other agent state inside) and a
separate verifier's (``separate.VerifierSandboxSpec``).

Images, in the order each is looked for: for the agent, ``image`` (``--image``), else
``[environment].docker_image``, else one built from ``environment/Dockerfile``; for a separate
verifier, ``verifier_image`` (``--verifier-image``), else the image ``verifier_env`` declares or
inherits, else one built from ``tests/`` (``image_build``: named by content, built once). An image
built here has its configuration on record, so its ENTRYPOINT and HEALTHCHECK run; any other image
is started with neither, as the seed says of a prebuilt image.
"""

from __future__ import annotations

import os
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, AsyncContextManager, AsyncIterator, Callable, Mapping, Optional, Tuple

from nemo_gym.data.tasks.harbor.env_templates import resolve_env
from nemo_gym.data.tasks.harbor.task import Task, TaskError
from nemo_gym.data.tasks.harbor.workdir import declared_workdir, working_directory

if TYPE_CHECKING:
    from nemo_gym.data.tasks.harbor.image_build import BuildPlan, ImageRecord
    from nemo_gym.data.tasks.harbor.sandboxes.docker import DockerSandbox
    from nemo_gym.data.tasks.harbor.separate import VerifierSandboxSpec

    Progress = Callable[[BuildPlan, str], None]

SANDBOX_KINDS = ("local", "docker")


def docker_client() -> Any:
    """The Docker SDK's client of the engine the environment names (``DOCKER_HOST``, else the
    local socket)."""
    from nemo_gym.data.tasks.harbor.sandboxes.base import SandboxError

    try:
        import docker
    except ImportError:
        raise SandboxError(
            "the Docker sandbox needs the Docker SDK: pip install 'nemo-gym-harbor-verifiers[docker]'"
        ) from None
    try:
        return docker.from_env()
    except Exception as error:  # no engine, or one that does not answer
        raise SandboxError(f"cannot reach the Docker engine: {error}") from error


async def _image(
    client: Any, task: Task, chosen: Optional[str], kind: str, context: Optional[Path], progress: Optional[Progress]
) -> Tuple[str, Optional[ImageRecord]]:
    """The image to start, and its record: ``chosen`` (with the record it has when it was built here),
    else one built from ``context``."""
    from nemo_gym.data.tasks.harbor.image_build import BuildPlan, ImageBuilder, content_tag, image_record_async

    if chosen:
        return chosen, await image_record_async(client, chosen)
    assert context is not None
    plan = BuildPlan(context, content_tag(context, kind), kind, task)
    records = await ImageBuilder(client).build_many_async([plan], progress)
    return plan.tag, records[plan.tag]


async def prepare_images(
    task: Task,
    *,
    image: Optional[str] = None,
    verifier_image: Optional[str] = None,
    progress: Optional[Progress] = None,
) -> None:
    """Builds the images ``task`` needs (``image_build.plan_builds``) and are not given (``image``
    for the agent's, ``verifier_image`` for a separate verifier's) before any sandbox starts, as
    Harbor's prepare does: a Dockerfile that does not build fails the task (``ImageBuildError``)
    before an agent spends time on it. Images already built from the same content are reused."""
    from nemo_gym.data.tasks.harbor.image_build import AGENT, ImageBuilder, plan_builds

    given = {AGENT: image or task.environment.docker_image}
    plans = [plan for plan in plan_builds(task) if not given.get(plan.kind, verifier_image)]
    if plans:
        await ImageBuilder(docker_client()).build_many_async(plans, progress)


@asynccontextmanager
async def open_task_sandbox(
    task: Task,
    workspace: Path,
    *,
    kind: str = "local",
    image: Optional[str] = None,
    mounts: Optional[Mapping[str, Path]] = None,
    progress: Optional[Progress] = None,
) -> AsyncIterator[Any]:
    """The ``kind`` of sandbox for ``task``, with ``workspace`` at its working directory.

    Its env is ``[environment].env`` (templates filled from the host environment); its image as the
    module's docstring says, built when needed (``progress(plan, line)`` hears the builder); the
    working directory the task declares, else the image's ``WORKDIR`` (Docker), else
    ``/workspace``; a container gets ``[environment].cpus`` and ``memory_mb`` as its limits; the
    local sandbox provides the users the task names. ``mounts`` puts more host folders at sandbox
    paths (copied into a container).
    """
    env = resolve_env(task.environment.env, os.environ, where=f"{task.path / 'task.toml'} [environment].env")
    if kind == "docker":
        from nemo_gym.data.tasks.harbor.sandboxes.docker import DockerSandbox

        context = task.path / "environment"
        chosen = image or task.environment.docker_image
        if not chosen and not (context / "Dockerfile").is_file():
            raise TaskError(
                f"{task.path}: no Docker image: give --image, set [environment].docker_image "
                "or add environment/Dockerfile"
            )
        client = docker_client()
        name, record = await _image(client, task, chosen, "agent", context, progress)
        sandbox = DockerSandbox(
            name,
            workspace=workspace,
            workdir=declared_workdir(task),
            env=env,
            mounts=mounts,
            client=client,
            record=record,
            cpus=task.environment.cpus,
            memory_mb=task.environment.memory_mb,
        )
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


def verifier_sandbox_opener(
    task: Task,
    *,
    image: Optional[str] = None,
    task_image: Optional[str] = None,
    progress: Optional[Progress] = None,
) -> Callable[[VerifierSandboxSpec], AsyncContextManager[DockerSandbox]]:
    """What opens a separate verifier's sandbox for ``task`` (``separate.run_separate_verification``'s
    ``open_verifier``): a container of ``image``, else of the spec's image (``task_image`` when the
    verifier inherits the task's own image and the caller replaced it, as ``--image`` does), else
    of the one built from its ``tests/``; with the spec's env, working directory, network and limits.

    An allowlist is refused (``TaskError``): a container has no network or the engine's whole one,
    and a verifier given more network than its task allows could reach what the task fenced off.
    """

    @asynccontextmanager
    async def open_verifier(spec: VerifierSandboxSpec) -> AsyncIterator[DockerSandbox]:
        from nemo_gym.data.tasks.harbor.sandboxes.docker import DockerSandbox

        if spec.network not in (None, "no-network", "public"):
            raise TaskError(
                f"{task.path / 'task.toml'}: [verifier].network_mode = {spec.network!r}: the Docker sandbox "
                "cannot enforce an allowlist (it runs a container with no network, or with the engine's whole one)"
            )
        client = docker_client()
        declared = (task_image if spec.inherits_image and spec.image else None) or spec.image
        name, record = await _image(client, task, image or declared, "verifier", spec.build_context, progress)
        sandbox = DockerSandbox(
            name,
            workdir=spec.workdir,
            env=spec.env,
            client=client,
            record=record,
            network=spec.network,
            cpus=spec.cpus,
            memory_mb=spec.memory_mb,
        )
        async with sandbox:
            yield sandbox

    return open_verifier
