"""Sandboxes set up for a task as Harbor would start them: the agent's (its image, environment,
working directory, users and limits, with the workspace and any other agent state inside) and a
separate verifier's (``separate.VerifierSandboxSpec``).

Images, in the order each is looked for: for the agent, ``image`` (``--image``), else
``[environment].docker_image``, else one built from ``environment/Dockerfile``; for a separate
verifier, ``verifier_image`` (``--verifier-image``), else the image ``verifier_env`` declares or
inherits, else one built from ``tests/`` (``image_build``: named by content, built once). An image
built here has its configuration on record, so its ENTRYPOINT and HEALTHCHECK run, and so has an
agent's ``[environment].docker_image`` beside a pull-mode ``environment/Dockerfile`` (nothing but
``FROM`` that image); any other image is started with neither, as the seed says of a prebuilt
image. The agent's sandbox then awaits ``[environment.healthcheck]``, whatever its image
(``healthchecks``).
"""

from __future__ import annotations

import os
import posixpath
import tempfile
from contextlib import asynccontextmanager
from pathlib import Path
from typing import (
    TYPE_CHECKING,
    Any,
    AsyncContextManager,
    AsyncIterator,
    Callable,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from nemo_gym.data.tasks.harbor.env_templates import resolve_env
from nemo_gym.data.tasks.harbor.healthchecks import run_healthcheck
from nemo_gym.data.tasks.harbor.task import Task, TaskError, as_task
from nemo_gym.data.tasks.harbor.workdir import (
    DEFAULT_WORKDIR,
    declared_workdir,
    dockerfile_workdir_refusal,
    working_directory,
)

if TYPE_CHECKING:
    from nemo_gym.data.tasks.harbor.image_build import BuildPlan, ImageRecord
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
    """The image to start, and its record: ``chosen`` (with the record it has when it was built here,
    or, for the agent's ``[environment].docker_image``, when ``context`` holds a pull-mode Dockerfile
    of it), else one built from ``context``."""
    from nemo_gym.data.tasks.harbor.image_build import (
        DOCKERFILE,
        BuildPlan,
        ImageBuilder,
        content_tag,
        image_record_async,
        pulled_record_async,
    )

    if chosen:
        record = await image_record_async(client, chosen)
        if record is None and kind == "agent" and context is not None and chosen == task.environment.docker_image:
            record = await pulled_record_async(client, chosen, context / DOCKERFILE)
        return chosen, record
    assert context is not None
    plan = BuildPlan(context, content_tag(context, kind), kind, task)
    records = await ImageBuilder(client).build_many_async([plan], progress)
    return plan.tag, records[plan.tag]


def local_stand_ins(task: Task) -> List[str]:
    """What of ``task``'s environment the local sandbox does not provide (it runs this machine's
    tools and Python): ``[environment].docker_image``, ``environment/Dockerfile``, a separate
    verifier's image. Said rather than refused, as a task may pass here and fail in its image."""
    missing = []
    if task.environment.docker_image:
        missing.append(f"[environment].docker_image {task.environment.docker_image!r}")
    elif (task.path / "environment" / "Dockerfile").is_file():
        # The files beside it are what a COPY brings in (a new author's input data): named, as the
        # local sandbox's working directory lacks them.
        beside = sorted(path.name for path in (task.path / "environment").iterdir() if path.name != "Dockerfile")
        shown = ", ".join(beside[:3]) + (" and more" if len(beside) > 3 else "")
        missing.append("environment/Dockerfile" + (f" (with {shown} beside it)" if beside else ""))
    verifier = task.verifier.environment
    if verifier is not None and verifier.docker_image:
        missing.append(f"[verifier.environment].docker_image {verifier.docker_image!r}")
    return missing


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
    paths (copied into a container). It is given once ``[environment.healthcheck]`` has passed
    (``healthchecks.HealthcheckError`` when it fails): as the sandbox's default user in an empty
    workspace, as ``[agent].user`` where the agent's files already are.
    """
    refusal = dockerfile_workdir_refusal(task)
    if refusal is not None:
        raise TaskError(f"{task.path / 'environment' / 'Dockerfile'}: {refusal}")
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
            await _healthy(task, sandbox, workspace, mounts)
            yield sandbox
        return
    if kind != "local":
        raise TaskError(f"unknown sandbox {kind!r}: choose one of {', '.join(SANDBOX_KINDS)}")
    from nemo_gym.data.tasks.harbor.sandboxes.local import LocalSandbox

    users = task.named_users()
    local = LocalSandbox(
        workspace,
        env=env,
        workdir=working_directory(task),
        mounts=mounts,
        users=users,
    )
    async with local:
        await _healthy(task, local, workspace, mounts)
        yield local


async def _healthy(task: Task, sandbox: Any, workspace: Path, mounts: Optional[Mapping[str, Path]]) -> None:
    """``[environment.healthcheck]``: as the sandbox's default user, as Harbor runs it before any
    agent; but as ``[agent].user`` when the sandbox already holds the agent's files (a non-empty
    ``workspace`` or ``mounts``: ``gym-harbor verify`` grades what the agent left), which the check may
    run (a module in the working directory, a program on ``PATH``) with no more rights than the agent's."""
    check = task.environment.healthcheck
    if check is None:
        return
    agent_state = bool(mounts) or any(Path(workspace).iterdir())
    key = f"{task.path / 'task.toml'}: [environment.healthcheck]"
    await run_healthcheck(sandbox, check, user=task.agent_user if agent_state else None, key=key)


def verifier_sandbox_opener(
    task: Union[Task, str, os.PathLike[str]],
    *,
    kind: str = "docker",
    image: Optional[str] = None,
    task_image: Optional[str] = None,
    progress: Optional[Progress] = None,
) -> Callable[[VerifierSandboxSpec], AsyncContextManager[Any]]:
    """What opens a separate verifier's sandbox for ``task`` (``separate.run_separate_verification``'s
    ``open_verifier``), with the spec's env, working directory, network and limits.

    On Docker, a container of ``image``, else of the spec's image (``task_image`` when the verifier
    inherits the task's own image and the caller replaced it, as ``--image`` does), else of the one
    built from its ``tests/``. The local sandbox has no images (as in shared mode, this machine is
    the image): a fresh one, empty folders where the artifacts land; a verifier whose image is built
    from ``tests/Dockerfile`` is refused there, since what that Dockerfile adds would be missing.
    An allowlist is refused (``TaskError``) on both: neither can enforce one, and a verifier given
    more network than its task allows could reach what the task fenced off.
    """
    task = as_task(task, "verifier_sandbox_opener()")
    where = task.path / "task.toml"

    def refuse_allowlist(spec: VerifierSandboxSpec) -> None:
        if spec.network not in (None, "no-network", "public"):
            raise TaskError(
                f"{where}: [verifier].network_mode = {spec.network!r}: the {kind} sandbox cannot enforce an "
                "allowlist (it runs with no network, or with the whole of its host's)"
            )

    @asynccontextmanager
    async def open_container(spec: VerifierSandboxSpec) -> AsyncIterator[Any]:
        from nemo_gym.data.tasks.harbor.sandboxes.docker import DockerSandbox

        refuse_allowlist(spec)
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

    @asynccontextmanager
    async def open_local(spec: VerifierSandboxSpec) -> AsyncIterator[Any]:
        from nemo_gym.data.tasks.harbor.sandboxes.local import LocalSandbox

        refuse_allowlist(spec)
        if spec.image is None and spec.build_context is not None:
            raise TaskError(
                f"{where}: the separate verifier's image is built from {spec.build_context / 'Dockerfile'}, "
                "which the local sandbox cannot build: add --sandbox docker"
            )
        workdir = spec.workdir or DEFAULT_WORKDIR
        with tempfile.TemporaryDirectory(prefix="nemo-gym-verifier-") as scratch:
            folders = _landing_folders(spec.landing, workdir, where)
            mounts = {path: Path(scratch) / f"landing-{index}" for index, path in enumerate(folders)}
            for folder in (Path(scratch) / "workdir", *mounts.values()):
                folder.mkdir()
            users = [task.verifier.user, *(step.verifier.user for step in task.steps)]
            local = LocalSandbox(
                Path(scratch) / "workdir",
                env=spec.env,
                workdir=workdir,
                mounts=mounts,
                users=[user for user in users if user is not None],
                network=spec.network,
            )
            async with local:
                yield local

    async def prepare_container(spec: VerifierSandboxSpec) -> None:
        """Before the agent's sandbox stops: the image there (built, when it is built from tests/), or
        ``TaskError``, a configuration error that would mask every rollout of the task."""
        from nemo_gym.data.tasks.harbor._threads import in_thread
        from nemo_gym.data.tasks.harbor.image_build import image_exists

        refuse_allowlist(spec)
        client = docker_client()
        declared = (task_image if spec.inherits_image and spec.image else None) or spec.image
        name, _ = await _image(client, task, image or declared, "verifier", spec.build_context, progress)
        if not await in_thread(image_exists, client, name):
            raise TaskError(
                f"{where}: the separate verifier's image {name!r} is not on the Docker engine (nothing is "
                "pulled here): build or load it first, or name another with image="
            )

    if kind == "docker":
        open_container.prepare = prepare_container  # type: ignore[attr-defined]
        return open_container
    if kind == "local":
        return open_local
    raise TaskError(f"unknown sandbox {kind!r}: choose one of {', '.join(SANDBOX_KINDS)}")


# The local sandbox's own folders, where any artifact can land without a folder of its own.
_OWN_FOLDERS = ("/logs", "/tmp", "/tests", "/solution")


def _landing_folders(landing: Sequence[Tuple[str, str]], workdir: str, where: Path) -> List[str]:
    """The folders a fresh local sandbox places (empty) for its artifacts to land in: a folder
    artifact's own path, a file artifact's folder; none inside the working directory, the sandbox's
    own folders, or another of them. A folder the host has is hidden by the empty one, which a folder
    artifact replaces anyway; a file artifact's folder the host has is refused, since hiding it
    (``/etc``, say) would change what the verifier runs."""

    from nemo_gym.data.tasks.harbor.artifacts import LandingRefused

    def inside(path: str, folder: str) -> bool:
        return path == folder or path.startswith(folder.rstrip("/") + "/")

    folders = {source if kind == "folder" else posixpath.dirname(source): (source, kind) for source, kind in landing}
    placed: List[str] = []
    for path in sorted(folders, key=len):
        if any(inside(path, folder) for folder in (workdir, *_OWN_FOLDERS, *placed)):
            continue
        source, kind = folders[path]
        if kind != "folder" and os.path.lexists(path):
            raise LandingRefused(
                f"{where}: the artifact {source} lands in {path}, a folder of this machine that the local "
                "sandbox would have to hide: add --sandbox docker, or make the artifact a folder of its own"
            )
        placed.append(path)
    return placed


__all__ = [
    "SANDBOX_KINDS",
    "docker_client",
    "local_stand_ins",
    "open_task_sandbox",
    "prepare_images",
    "verifier_sandbox_opener",
]
