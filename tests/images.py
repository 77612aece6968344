"""Container images for the suite, built from local parts: no registry is reachable here.

The base is a minimal Debian (debootstrap --variant=minbase, which has bash, timeout, tar, gzip, find
and base64) imported into the engine; interpreter images add a symlink to a pyenv build that the
container gets as a read-only bind mount at the same path (copying six interpreters into images
costs minutes, a bind mount nothing). Every image carries the label ``nemo-gym-test=1`` and a
``nemo-gym-test/`` name, apart from anything else on the engine, and is built once and then reused.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

LABEL = {"nemo-gym-test": "1"}
BASE = "nemo-gym-test/debian:bookworm-minbase-1"
SUITE = "bookworm"


def pyenv_root() -> Path:
    return Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")


def pyenv_build(version: str) -> Path:
    """The pyenv folder of ``version`` (e.g. ``3.12`` -> ``~/.pyenv/versions/3.12.1``)."""
    matches = sorted((pyenv_root() / "versions").glob(f"{version}.*"))
    matches = [path for path in matches if (path / "bin" / f"python{version}").exists()]
    if not matches:
        raise RuntimeError(f"no pyenv build of Python {version} under {pyenv_root()}/versions")
    return matches[-1]


def _has_image(client: Any, tag: str) -> bool:
    import docker.errors

    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def base_image(client: Any) -> str:
    """A minimal Debian, debootstrapped and imported once per engine."""
    if _has_image(client, BASE):
        return BASE
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise RuntimeError("building the test images needs debootstrap (apt-get install debootstrap)")
    with tempfile.TemporaryDirectory(prefix="nemo-gym-rootfs-", dir="/var/tmp") as scratch:
        rootfs = Path(scratch) / "rootfs"
        subprocess.run(
            [debootstrap, "--variant=minbase", SUITE, str(rootfs)],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        tarball = Path(scratch) / "rootfs.tar"
        subprocess.run(["tar", "-C", str(rootfs), "-cf", str(tarball), "."], check=True)
        repository, tag = BASE.rsplit(":", 1)
        client.api.import_image_from_file(
            str(tarball), repository=repository, tag=tag, changes=['LABEL nemo-gym-test="1"', 'CMD ["bash"]']
        )
    return BASE


def _built(client: Any, tag: str, dockerfile: str) -> str:
    if not _has_image(client, tag):
        client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, labels=LABEL, rm=True)
    return tag


def python_image(client: Any, version: str, *, command: str = "python3") -> Tuple[str, Dict[str, Dict[str, str]]]:
    """An image whose ``command`` (python3 or python) is pyenv's ``version``, and the volume it needs."""
    build = pyenv_build(version)
    binary = build / "bin" / f"python{version}"
    tag = f"nemo-gym-test/{command}:{build.name}"
    dockerfile = f"FROM {base_image(client)}\nRUN ln -s {binary} /usr/local/bin/{command}\n"
    return _built(client, tag, dockerfile), {str(build): {"bind": str(build), "mode": "ro"}}


def stripped_image(client: Any, tool: str) -> str:
    """The base image without ``tool`` (bash or timeout): a sandbox that cannot run test.sh."""
    dockerfile = f"FROM {base_image(client)}\nRUN rm -f /bin/{tool} /usr/bin/{tool}\n"
    return _built(client, f"nemo-gym-test/no-{tool}:1", dockerfile)


def engine() -> Optional[Any]:
    """A Docker client when an engine answers, else ``None``."""
    try:
        import docker

        client = docker.from_env(timeout=120)
        client.ping()
    except Exception:
        return None
    return client


def users_image(client: Any, version: str = "3.12", *, setpriv: bool = True) -> Tuple[str, Dict[str, Dict[str, str]]]:
    """A Python image with two ordinary users, ``agent`` (uid 1000) and ``grader`` (uid 1001); without
    ``setpriv``, an image that has none (grading then runs a task's own test.sh as another user in an exec
    of that user's)."""
    image, volumes = python_image(client, version)
    # /root is opened so that the bind-mounted interpreter (a pyenv build under /root) runs for them.
    dockerfile = f"FROM {image}\nRUN useradd -m -u 1000 agent && useradd -m -u 1001 grader && chmod 755 /root\n"
    users = _built(client, f"nemo-gym-test/users-2:{pyenv_build(version).name}", dockerfile)
    if not setpriv:
        tag = f"nemo-gym-test/users-2-no-setpriv:{pyenv_build(version).name}"
        return _built(client, tag, f"FROM {users}\nRUN rm /usr/bin/setpriv\n"), volumes
    return users, volumes


def gym_image(
    client: Any, context: Path, dockerfile: str, files: Optional[Dict[str, str]] = None, **options: Any
) -> Any:
    """An image built the way prepare builds one (``image_build.ImageBuilder``), from a context folder
    holding ``dockerfile`` (its ``FROM`` lines may say ``{base}`` for the suite's Debian) and
    ``files`` (a name ending in ``.sh`` is made executable). Named by its content and labelled
    ``nemo-gym-test=1``, so an unchanged folder reuses the image. Returns its ``ImageRecord``."""
    from nemo_gym.data.tasks.harbor.image_build import AGENT, BuildPlan, ImageBuilder, content_tag

    context.mkdir(parents=True, exist_ok=True)
    (context / "Dockerfile").write_text(dockerfile.replace("{base}", base_image(client)))
    (context / "Dockerfile").chmod(0o644)  # modes count in the name: the same whatever the umask
    for name, text in (files or {}).items():
        (context / name).write_text(text)
        (context / name).chmod(0o755 if name.endswith(".sh") else 0o644)
    kind = options.pop("kind", AGENT)
    plan = BuildPlan(context, content_tag(context, kind), kind)
    return ImageBuilder(client, labels=LABEL).build_many([plan], **options)[plan.tag]
