"""Harbor's own ``Verifier`` grades the published tasks with the rewards ``gym-harbor verify`` gives the source.

Both graders run in a container of the same image, on the same workspace. Gym's side is the CLI,
``gym-harbor verify SOURCE_TASK --sandbox docker --image IMAGE --workspace WS --json``. Harbor's side is
``harbor.verifier.verifier.Verifier(task=Task(PUBLISHED_TASK), ...).verify()`` on an environment
object that gives it what Harbor's Docker environment does (``exec`` with a working directory, user
and env; ``upload_dir`` as ``docker compose cp SRC/. main:DST``; ``download_dir`` of
``/logs/verifier``), built here over Gym's ``DockerSandbox`` so that no Compose project is needed.
``test_harbor_run.py`` runs stock ``harbor run`` itself.
"""

from __future__ import annotations

import asyncio
import io
import shlex
import tarfile
from pathlib import Path
from typing import Any, Optional

import harbor_parity as hp
import pytest
from harbor.environments.base import ExecResult
from harbor.models.task.config import TaskOS
from harbor.models.task.task import Task
from harbor.models.trial.paths import TrialPaths
from harbor.verifier.verifier import RewardFileNotFoundError, Verifier

from nemo_gym.data.tasks.harbor.sandboxes.docker import DockerSandbox

pytestmark = pytest.mark.harbor

MOUNT_TARGETS = "/logs/verifier /logs/agent /logs/artifacts"


class SandboxEnvironment:
    """The part of Harbor's ``BaseEnvironment`` its ``Verifier`` calls, over a running ``DockerSandbox``."""

    os = TaskOS.LINUX

    def __init__(self, sandbox: DockerSandbox, workdir: str) -> None:
        self.sandbox = sandbox
        self.workdir = workdir

    async def exec(
        self,
        command: str,
        cwd: Optional[str] = None,
        env: Optional[dict] = None,
        timeout_sec: Optional[int] = None,
        user: Any = None,
        **_: Any,
    ) -> ExecResult:
        # Harbor: `docker compose exec -w WORKDIR [-e ...] [-u USER] main bash -c COMMAND`.
        done = await self.sandbox.exec(command, cwd=cwd or self.workdir, env=env, timeout_s=timeout_sec, user=user)
        return ExecResult(stdout=done.stdout, stderr=done.stderr, return_code=done.return_code)

    async def upload_dir(self, source_dir: Any, target_dir: str) -> None:
        # Harbor: `docker compose cp SRC/. main:DST`, a merge that keeps modes; the files are root's.
        made = await self.sandbox.exec(f"mkdir -p {shlex.quote(target_dir)}", cwd="/", user="root")
        assert made.return_code == 0, made.stderr
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            for path in sorted(Path(source_dir).rglob("*")):
                info = archive.gettarinfo(str(path), arcname=path.relative_to(source_dir).as_posix())
                info.uid = info.gid = 0
                info.uname = info.gname = "root"
                if path.is_file():
                    with path.open("rb") as data:
                        archive.addfile(info, data)
                else:
                    archive.addfile(info)
        await self.sandbox.put_archive(target_dir, buffer.getvalue())

    def is_path_mounted(self, env_path: Any, host_path: Any) -> bool:
        return False  # so the Verifier downloads /logs/verifier, as for any non-mounted provider

    async def download_dir(self, source_dir: str, target_dir: Any) -> None:
        data = await self.sandbox.get_archive(source_dir, limit=64 << 20)
        target = Path(target_dir)
        target.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(data)) as archive:
            for member in archive.getmembers():
                name = member.name.split("/", 1)[1] if "/" in member.name else ""
                if name and member.isfile():
                    extracted = archive.extractfile(member)
                    assert extracted is not None
                    (target / name).parent.mkdir(parents=True, exist_ok=True)
                    (target / name).write_bytes(extracted.read())


async def harbor_verify(task_dir: Path, step: Optional[str], workspace: Path, image: str, trial: Path) -> Any:
    task = Task(task_dir)
    workdir = hp.harbor_workdir(task_dir) or "/"
    paths = TrialPaths(trial)
    paths.mkdir()
    async with DockerSandbox(image, workspace=workspace, workdir=workdir) as sandbox:
        environment = SandboxEnvironment(sandbox, workdir)
        # What DockerEnvironment.start does for the trial's mounts (ensure_dirs, as root).
        made = await environment.exec(f"mkdir -p {MOUNT_TARGETS} && chmod 777 {MOUNT_TARGETS}", user="root")
        assert made.return_code == 0, made.stderr
        verifier = Verifier(task=task, trial_paths=paths, environment=environment, step_name=step)  # type: ignore[arg-type]
        try:
            result = await verifier.verify()
        except RewardFileNotFoundError:
            return hp.MISSING
    return dict(result.rewards or {})


@pytest.fixture(scope="module")
def datasets(tmp_path_factory, harbor_image):
    root = tmp_path_factory.mktemp("verifier")
    source = hp.write_source(root / "source")
    hp.publish(source, root / "published", harbor_image)
    return source, root / "published"


def test_every_state_names_a_published_task():
    assert {state.task for state in hp.STATES} == set(hp.TASK_KINDS)
    assert len({state.id for state in hp.STATES}) == len(hp.STATES)


@pytest.mark.parametrize("state", hp.STATES, ids=[state.id for state in hp.STATES])
def test_harbor_verifier_grades_as_gym_verify(tmp_path, datasets, harbor_image, state):
    source, published = datasets
    workspace = hp.write_tree(tmp_path / "workspace", state.files)
    workspace.mkdir(exist_ok=True)
    gym = hp.as_harbor_rewards(hp.gym_verify(source, state, workspace, harbor_image))
    harbor = asyncio.run(harbor_verify(published / state.task, state.step, workspace, harbor_image, tmp_path / "trial"))
    assert gym == state.expected, f"gym-harbor verify: {gym!r}"
    assert harbor == state.expected, f"Harbor's Verifier: {harbor!r}"
