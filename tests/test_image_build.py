"""image_build (content names, plans, offline builds, records) and the DockerSandbox options they
feed: the image's ENTRYPOINT and HEALTHCHECK from its record, no network, CPU and memory limits.

Engine tests build FROM the suite's local Debian (tests/images.py) and label what they build
``nemo-gym-test=1``; images are named by content, so a second run reuses them.
"""

from __future__ import annotations

import asyncio
import io
import os
import re
import shutil
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any, Awaitable, Callable, Dict, List, Optional, Tuple, TypeVar

import pytest
from images import LABEL, base_image, gym_image

from nemo_gym.data.tasks.harbor.image_build import (
    AGENT,
    VERIFIER,
    BuildPlan,
    ImageBuilder,
    ImageBuildError,
    ImageRecord,
    base_images,
    content_digest,
    content_tag,
    copied_workdir,
    image_record,
    image_record_async,
    plan_builds,
    pull_mode_base,
    pulled_record,
    same_image,
)
from nemo_gym.data.tasks.harbor.sandboxes.base import SandboxError
from nemo_gym.data.tasks.harbor.sandboxes.docker import CPU_COUNT_HINTS, DockerSandbox
from nemo_gym.data.tasks.harbor.sandboxes.for_task import open_task_sandbox
from nemo_gym.data.tasks.harbor.task import TaskError, load_task

T = TypeVar("T")
TAG = re.compile(r"hb__[0-9a-f]{32}")


def write(folder: Path, files: Dict[str, str]) -> Path:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


# --- content_tag -----------------------------------------------------------------------------------


def test_content_tag_names_and_stability(tmp_path):
    one = write(tmp_path / "one", {"Dockerfile": "FROM x\n", "data/a.txt": "a"})
    two = write(tmp_path / "two", {"Dockerfile": "FROM x\n", "data/a.txt": "a"})
    for folder in (one, two):
        os.chmod(folder / "Dockerfile", 0o644)
        os.chmod(folder / "data" / "a.txt", 0o644)
        os.chmod(folder / "data", 0o755)
    agent = content_tag(one, AGENT)
    assert TAG.fullmatch(agent)
    assert content_tag(one, VERIFIER) == agent + "-verifier"
    assert content_tag(two, AGENT) == agent == content_tag(one, AGENT)  # where the folder is does not count
    os.utime(two / "data" / "a.txt", (0, 0))
    assert content_tag(two, AGENT) == agent  # nor do timestamps
    with pytest.raises(ValueError, match="kind"):
        content_tag(one, "sidecar")
    with pytest.raises(ImageBuildError, match="not a folder"):
        content_tag(one / "Dockerfile", AGENT)


@pytest.mark.parametrize(
    "change",
    ["content", "mode", "new-empty-file", "new-empty-folder", "rename", "symlink", "dockerignored", "git"],
)
def test_content_tag_changes_with_anything_docker_could_send(tmp_path, change):
    folder = write(tmp_path / "ctx", {"Dockerfile": "FROM x\n", "a.txt": "a", ".dockerignore": "secret\n"})
    before = content_tag(folder, AGENT)
    if change == "content":
        (folder / "a.txt").write_text("b")
    elif change == "mode":
        os.chmod(folder / "a.txt", 0o755)
    elif change == "new-empty-file":
        (folder / "empty").write_text("")
    elif change == "new-empty-folder":
        (folder / "empty").mkdir()
    elif change == "rename":
        (folder / "a.txt").rename(folder / "b.txt")
    elif change == "symlink":
        (folder / "link").symlink_to("a.txt")
        linked = content_tag(folder, AGENT)
        (folder / "link").unlink()
        (folder / "link").symlink_to("/etc/passwd")  # a link's target counts, and is never followed
        assert content_tag(folder, AGENT) != linked
    elif change == "dockerignored":
        (folder / "secret").write_text("s")  # conservative: an ignored file still renames the image
    elif change == "git":
        write(folder, {".git/HEAD": "ref"})
    assert content_tag(folder, AGENT) != before


def test_content_digest_never_opens_a_fifo(tmp_path):
    folder = write(tmp_path / "ctx", {"Dockerfile": "FROM x\n"})
    os.mkfifo(folder / "pipe")
    assert len(content_digest(folder)) == 64


def test_base_images():
    dockerfile = (
        "# FROM commented:1\n"
        "ARG BASE=x\n"
        "FROM --platform=linux/amd64 builder:1 AS build\n"
        "FROM build\n"
        "FROM scratch\n"
        "from ${BASE}\n"
        "FROM \\\n  second:2\n"
        "COPY --from=build /a /a\n"
        "COPY --chown=1 --from=tools:3 /b /b\n"
        "COPY --from=0 /c /c\n"
    )
    assert base_images(dockerfile) == ["builder:1", "second:2", "tools:3"]


@pytest.mark.parametrize(
    ("dockerfile", "workdir"),
    [
        ("FROM x\nWORKDIR /app\nCOPY sales.csv /app/\n", "/app"),
        ("FROM x\nWORKDIR /app\nCOPY sales.csv .\n", "/app"),
        ("FROM x\nWORKDIR /app\nWORKDIR src\nCOPY --chown=1:1 a ./\n", "/app/src"),
        ('FROM x\nWORKDIR "/app"\nCOPY ["a b", "sub/"]\n', "/app"),
        ("FROM x\nworkdir \\\n  /app\nadd a .\n", "/app"),
        ("FROM x\nWORKDIR /app\nCOPY a /data/\n", None),  # copied elsewhere
        ("FROM x\nWORKDIR /app\nCOPY a ./\nWORKDIR /srv\n", None),  # the final WORKDIR got nothing
        ("FROM x AS b\nWORKDIR /app\nCOPY a .\nFROM y\nRUN true\n", None),  # an earlier stage's
        ("FROM x\nWORKDIR $HOME\nCOPY a .\n", None),  # never guessed
        ("FROM x\nWORKDIR $HOME\nWORKDIR sub\nCOPY a .\n", None),  # nor below it
        ("FROM x\nWORKDIR $HOME\nWORKDIR /app\nCOPY a .\n", "/app"),  # an absolute one is known again
        ("FROM x\nCOPY a .\n", None),  # the root folder
        ("FROM x\nWORKDIR /app\nCOPY [not json\n", None),
    ],
)
def test_copied_workdir(dockerfile, workdir):
    assert copied_workdir(dockerfile) == workdir


@pytest.mark.parametrize(
    ("dockerfile", "base"),
    [
        ("FROM app:1\n", "app:1"),
        ("# pulled as it is\nFROM --platform=linux/amd64 registry/app:1 AS base\n\n", "registry/app:1"),
        ("FROM \\\n  app:1\n", "app:1"),
        ("\ufeffFROM app:1\n", "app:1"),  # Docker's parser skips a byte order mark
        ("FROM\u00a0app:1\n", None),  # and takes spaces and tabs alone for separators
        ("FROM app:1\nRUN true\n", None),  # an overlay: Harbor ignores it beside a docker_image, so do we
        ("ARG TAG=1\nFROM app:$TAG\n", None),
        ("FROM $IMAGE\n", None),
        ("FROM app:1 other\n", None),
        ("", None),
        ("RUN true\n", None),
    ],
)
def test_pull_mode_base(dockerfile, base):
    assert pull_mode_base(dockerfile) == base


@pytest.mark.parametrize(
    ("first", "second", "same"),
    [
        ("ubuntu", "ubuntu:latest", True),
        ("ubuntu", "docker.io/library/ubuntu", True),
        ("library/ubuntu:22.04", "index.docker.io/library/ubuntu:22.04", True),
        ("registry.example/team/app", "registry.example/team/app:latest", True),
        ("ubuntu", "ubuntu:22.04", False),
        ("ubuntu", "registry.example/ubuntu", False),
        ("team/app", "docker.io/team/app:latest", True),
    ],
)
def test_same_image(first, second, same):
    assert same_image(first, second) is same


class Inspected:
    """A client whose engine holds one prebuilt image, with an ENTRYPOINT (none of this package's labels)."""

    class api:  # the SDK's attribute name
        @staticmethod
        def inspect_image(tag: str) -> Dict[str, Any]:
            return {"Id": "sha256:1", "Config": {"Entrypoint": ["/entry.sh"], "Labels": {}}}


def test_a_pull_mode_dockerfile_may_spell_the_image_as_the_engine_reads_it(tmp_path):
    dockerfile = write(tmp_path / "ctx", {"Dockerfile": "FROM docker.io/library/app\n"}) / "Dockerfile"
    record = pulled_record(Inspected(), "app:latest", dockerfile)
    assert record is not None and record.entrypoint == ["/entry.sh"] and record.kind == ""
    assert pulled_record(Inspected(), "app:2", dockerfile) is None


# --- plan_builds -----------------------------------------------------------------------------------

ENV_DOCKERFILE = {"environment/Dockerfile": "FROM x\nWORKDIR /app\n"}
TESTS_DOCKERFILE = {"tests/Dockerfile": "FROM x\nCOPY test.sh /tests/test.sh\n", "tests/test.sh": "true\n"}
SEPARATE = '[verifier]\nenvironment_mode = "separate"\n'

PLAN_CASES = [
    ("agent-dockerfile", {**ENV_DOCKERFILE, "tests/test.sh": "true\n"}, [AGENT]),
    ("agent-declared-image", {"task.toml": '[environment]\ndocker_image = "a:1"\n', **ENV_DOCKERFILE}, []),
    ("verifier-tests-dockerfile", {"task.toml": SEPARATE, **TESTS_DOCKERFILE}, [VERIFIER]),
    ("both", {"task.toml": SEPARATE, **ENV_DOCKERFILE, **TESTS_DOCKERFILE}, [AGENT, VERIFIER]),
    (
        "verifier-declared-image",
        {"task.toml": '[verifier.environment]\ndocker_image = "g:1"\n', **ENV_DOCKERFILE, **TESTS_DOCKERFILE},
        [AGENT],
    ),
    (
        "verifier-inherited-image",
        {"task.toml": SEPARATE + '[environment]\ndocker_image = "a:1"\n', **ENV_DOCKERFILE, **TESTS_DOCKERFILE},
        [],
    ),
    ("shared-mode", {**TESTS_DOCKERFILE}, []),
    ("explicit-shared", {"task.toml": '[verifier]\nenvironment_mode = "shared"\n', **TESTS_DOCKERFILE}, []),
    ("nothing", {"tests/test.sh": "true\n"}, []),
]


@pytest.mark.parametrize("name, files, kinds", PLAN_CASES, ids=[case[0] for case in PLAN_CASES])
def test_plan_builds(tmp_path, name, files, kinds):
    task_dir = write(tmp_path / name, files)
    plans = plan_builds(task_dir)
    assert [plan.kind for plan in plans] == kinds
    for plan in plans:
        folder = "environment" if plan.kind == AGENT else "tests"
        assert plan.context == task_dir.resolve() / folder
        assert plan.tag == content_tag(plan.context, plan.kind)
        assert plan.task is not None and plan.task.path == task_dir.resolve()
    assert plan_builds(load_task(task_dir)) == plans  # a loaded task plans the same


def test_build_many_refuses_a_verifier_the_loader_refuses_before_any_build(tmp_path):
    compose = "services:\n  main:\n    build: .\n  db:\n    image: postgres\n"
    task_dir = write(
        tmp_path / "sidecar", {"task.toml": SEPARATE, **TESTS_DOCKERFILE, "tests/docker-compose.yaml": compose}
    )
    with pytest.raises(TaskError, match="services besides main"):
        load_task(task_dir)
    plans = plan_builds(load_task(task_dir, check_runnable=False))
    assert [plan.kind for plan in plans] == [VERIFIER]
    with pytest.raises(TaskError, match=r"services besides main \(db\)"):
        ImageBuilder(client=None).build_many(plans)  # no engine call happens first


def test_the_sandbox_refuses_an_allowlist():
    with pytest.raises(SandboxError, match="cannot enforce network 'allowlist'"):
        DockerSandbox("any", client=object(), network="allowlist")
    with pytest.raises(ValueError, match="cpus"):
        DockerSandbox("any", client=object(), cpus=0)
    with pytest.raises(ValueError, match="memory_mb"):
        DockerSandbox("any", client=object(), memory_mb=1.5)  # type: ignore[arg-type]


# --- building (engine) -----------------------------------------------------------------------------


def _remove(client: Any, tag: str) -> None:
    try:
        client.images.remove(tag, force=True)
    except Exception:
        pass


@pytest.mark.docker
def test_build_streams_progress_then_reuses(docker_client, tmp_path):
    context = write(
        tmp_path / "ctx", {"Dockerfile": f"FROM {base_image(docker_client)}\nRUN echo built-{uuid.uuid4().hex}\n"}
    )
    plan = BuildPlan(context, content_tag(context, AGENT), AGENT)
    twin = BuildPlan(Path(shutil.copytree(context, tmp_path / "twin")), plan.tag, AGENT)  # another task, equal folder
    builder = ImageBuilder(docker_client, labels=LABEL)
    lines: List[Tuple[str, str]] = []
    try:
        started = time.monotonic()
        records = builder.build_many([plan, twin, plan], progress=lambda p, line: lines.append((p.tag, line)))
        built_in = time.monotonic() - started
        assert set(records) == {plan.tag}
        record = records[plan.tag]
        assert record.tag == plan.tag and record.kind == AGENT and record.content_hash == content_digest(context)
        texts = [line for _, line in lines]
        assert {tag for tag, _ in lines} == {plan.tag}
        assert texts[0].startswith(f"building the agent image {plan.tag}")
        assert [text for text in texts if text.startswith("building")] == [texts[0]]  # built once
        assert any(re.match(r"Step 2/\d+ : RUN echo built-", text) for text in texts)
        assert any(text.startswith("built-") for text in texts)  # the step's own output
        labels = docker_client.images.get(plan.tag).labels
        assert labels["nemo-gym.built"] == "1" and labels["nemo-gym-test"] == "1"
        assert labels["nemo-gym.content-hash"] == content_digest(context)

        lines.clear()
        started = time.monotonic()
        again = builder.build_many([plan], progress=lambda p, line: lines.append((p.tag, line)))
        assert again[plan.tag].image_id == record.image_id
        assert [line for _, line in lines] == [f"using {plan.tag} (built from {context}, unchanged)"]
        print(f"built in {built_in:.2f} s, reused in {time.monotonic() - started:.3f} s")
    finally:
        _remove(docker_client, plan.tag)


@pytest.mark.docker
def test_build_many_async_relays_progress_on_the_loop(docker_client, tmp_path):
    record = gym_image(docker_client, tmp_path / "ctx", "FROM {base}\nENV GYM_ASYNC=1\n")
    plan = BuildPlan(tmp_path / "ctx", record.tag, AGENT)
    seen: List[str] = []

    async def run() -> Dict[str, ImageRecord]:
        loop_thread = asyncio.get_running_loop()

        def progress(_: BuildPlan, line: str) -> None:
            assert asyncio.get_running_loop() is loop_thread
            seen.append(line)

        return await ImageBuilder(docker_client, labels=LABEL).build_many_async([plan], progress=progress)

    assert asyncio.run(run())[record.tag].image_id == record.image_id
    assert seen == [f"using {record.tag} (built from {plan.context}, unchanged)"]
    assert asyncio.run(image_record_async(docker_client, record.tag)) == record


@pytest.mark.docker
def test_a_failing_step_raises_with_the_builders_last_lines(docker_client, tmp_path):
    run = "RUN for i in $(seq 1 30); do echo line-$i; done; exit 3"
    context = write(tmp_path / "ctx", {"Dockerfile": f"FROM {base_image(docker_client)}\n{run}\n"})
    plan = BuildPlan(context, content_tag(context, VERIFIER), VERIFIER)
    with pytest.raises(ImageBuildError) as raised:
        ImageBuilder(docker_client, labels=LABEL).build_many([plan])
    message = str(raised.value)
    assert message.startswith(f"building the verifier image {plan.tag} from {context} failed: ")
    assert "returned a non-zero code: 3; the builder's last lines:\n" in message
    lines = raised.value.lines
    assert len(lines) == 20 and lines[:-1] == [f"line-{i}" for i in range(12, 31)]
    assert lines[-1].startswith("Removing intermediate container")
    assert message.endswith("\n".join(lines)) and "line-11\n" not in message
    assert image_record(docker_client, plan.tag) is None


@pytest.mark.docker
def test_a_missing_base_image_is_never_pulled(docker_client, tmp_path):
    context = write(tmp_path / "ctx", {"Dockerfile": "FROM nemo-gym-test/not-on-this-engine:1\nRUN true\n"})
    plan = BuildPlan(context, content_tag(context, AGENT), AGENT)
    lines: List[str] = []
    with pytest.raises(ImageBuildError, match="starts from nemo-gym-test/not-on-this-engine:1, which is not on this"):
        ImageBuilder(docker_client).build_many([plan], progress=lambda _, line: lines.append(line))
    assert lines == []  # refused before the builder started


@pytest.mark.docker
def test_image_record_ours_and_foreign(docker_client, tmp_path):
    dockerfile = (
        "FROM {base}\nWORKDIR /srv\nENV GREETING=hi\nUSER nobody\n"
        'ENTRYPOINT ["/bin/echo", "hello"]\nCMD ["world"]\n'
        "HEALTHCHECK --interval=2s --timeout=3s --retries=4 CMD true\n"
    )
    record = gym_image(docker_client, tmp_path / "ours", dockerfile)
    assert record == image_record(docker_client, record.tag)
    assert record.entrypoint == ["/bin/echo", "hello"] and record.cmd == ["world"]
    assert record.healthcheck == {
        "Test": ["CMD-SHELL", "true"],
        "Interval": 2_000_000_000,
        "Timeout": 3_000_000_000,
        "Retries": 4,
    }
    assert (record.user, record.workdir, record.env["GREETING"]) == ("nobody", "/srv", "hi")
    assert image_record(docker_client, record.tag + ":latest") == replace(record, tag=record.tag + ":latest")
    # Foreign: the suite's base image, a missing one, and one built elsewhere FROM ours (it inherits
    # our labels, but not under the name they record).
    assert image_record(docker_client, base_image(docker_client)) is None
    assert image_record(docker_client, "nemo-gym-test/no-such-image:1") is None
    derived = "nemo-gym-test/derived-from-gym:1"
    docker_client.images.build(
        fileobj=io.BytesIO(f"FROM {record.tag}\nENV MORE=1\n".encode()), tag=derived, labels=LABEL, rm=True
    )
    assert docker_client.images.get(derived).labels["nemo-gym.built"] == "1"
    assert image_record(docker_client, derived) is None
    # HEALTHCHECK NONE and ENTRYPOINT [] read as none.
    off = gym_image(docker_client, tmp_path / "off", f"FROM {record.tag}\nENTRYPOINT []\nHEALTHCHECK NONE\n")
    assert (off.entrypoint, off.cmd, off.healthcheck) == (None, None, None)


# --- DockerSandbox: the image's entrypoint and healthcheck ---------------------------------------

ENTRY = (
    "#!/bin/sh\n"
    'echo "entrypoint up as $(id -u), args: $*"\n'
    "echo from-the-entrypoint > /tmp/entrypoint-ready\n"
    'exec "$@"\n'
)


def sandbox(client: Any, image: str, **options: Any) -> DockerSandbox:
    return DockerSandbox(image, client=client, labels=LABEL, **options)


def run(coroutine: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(coroutine())


async def _eventually(check: Callable[[], Awaitable[bool]], within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if await check():
            return True
        await asyncio.sleep(0.1)
    return False


@pytest.fixture(scope="module")
def entry_images(docker_client, tmp_path_factory) -> Dict[str, ImageRecord]:
    folder = tmp_path_factory.mktemp("entry")
    base = "FROM {base}\n"
    images = {
        "runs": gym_image(
            docker_client,
            folder / "runs",
            base + 'COPY entry.sh /entry.sh\nENTRYPOINT ["/entry.sh"]\n',
            {"entry.sh": ENTRY},
        ),
        "healthy": gym_image(
            docker_client,
            folder / "healthy",
            base
            + 'COPY entry.sh /entry.sh\nENTRYPOINT ["/entry.sh"]\n'
            + "HEALTHCHECK --interval=100ms --timeout=2s --retries=3 CMD test -f /tmp/entrypoint-ready\n",
            {"entry.sh": ENTRY},
        ),
        "dies": gym_image(docker_client, folder / "dies", base + 'ENTRYPOINT ["sh", "-c", "echo giving up; exit 3"]\n'),
        "dies-awaited": gym_image(
            docker_client,
            folder / "dies-awaited",
            base + 'ENTRYPOINT ["sh", "-c", "echo giving up; exit 3"]\nHEALTHCHECK --interval=100ms CMD true\n',
        ),
        "dies-later": gym_image(
            docker_client,
            folder / "dies-later",
            base + 'ENTRYPOINT ["sh", "-c", "echo started; sleep 1; echo bye; exit 4"]\n',
        ),
        "finishes": gym_image(
            docker_client, folder / "finishes", base + 'ENTRYPOINT ["sh", "-c", "echo set up; exit 0"]\n'
        ),
        "unhealthy": gym_image(
            docker_client,
            folder / "unhealthy",
            base
            + 'ENTRYPOINT ["sh", "-c", "echo serving; exec \\"$@\\"", "entry"]\n'
            + "HEALTHCHECK --interval=100ms --retries=2 CMD echo not yet; false\n",
        ),
        "slow-health": gym_image(docker_client, folder / "slow-health", base + "HEALTHCHECK --interval=60s CMD true\n"),
    }
    images["disabled"] = gym_image(
        docker_client, folder / "disabled", f"FROM {images['dies-awaited'].tag}\nENTRYPOINT []\n"
    )
    return images


@pytest.mark.docker
def test_an_entrypoint_on_record_runs(docker_client, entry_images):
    record = entry_images["runs"]

    async def go() -> Tuple[str, str, bool]:
        async with sandbox(docker_client, record.tag, record=record) as box:
            assert box.runs_entrypoint

            async def ready() -> bool:
                return (await box.exec("cat /tmp/entrypoint-ready")).return_code == 0

            assert await _eventually(ready)
            seen = await box.exec("cat /tmp/entrypoint-ready")
            return seen.stdout, await box.entrypoint_output(), await box.entrypoint_alive()

    seen, output, alive = run(go)
    assert seen == "from-the-entrypoint\n"
    assert output == "entrypoint up as 0, args: sh -c sleep infinity\n"
    assert alive


@pytest.mark.docker
def test_a_healthcheck_on_record_is_awaited(docker_client, entry_images):
    record = entry_images["healthy"]

    async def go() -> Tuple[str, str]:
        async with sandbox(docker_client, record.tag, record=record) as box:
            # No polling: start returned only once the HEALTHCHECK (the entrypoint's file) passed.
            seen = await box.exec("cat /tmp/entrypoint-ready")
            state = box._require().attrs["State"]
            return seen.stdout, state["Health"]["Status"]

    started = time.monotonic()
    assert run(go) == ("from-the-entrypoint\n", "healthy")
    assert time.monotonic() - started < 10


@pytest.mark.docker
def test_an_entrypoint_that_fails_at_once_fails_the_start(docker_client, entry_images):
    record = entry_images["dies-awaited"]
    box = sandbox(docker_client, record.tag, record=record)

    async def go() -> None:
        async with box:
            pass

    with pytest.raises(SandboxError, match=r"ENTRYPOINT of .* exited with status 3; its last lines:\ngiving up$"):
        run(go)
    assert run(box.entrypoint_output) == "giving up\n"  # kept after the failed start removed the container
    assert not run(box.entrypoint_alive)
    assert not docker_client.containers.list(all=True, filters={"label": "nemo-gym.sandbox=1", "ancestor": record.tag})


@pytest.mark.docker
def test_an_entrypoint_that_fails_without_a_healthcheck(docker_client, entry_images):
    """Without a HEALTHCHECK nothing waits for it: the start fails, or the sandbox is seen dead soon after."""
    record = entry_images["dies"]

    async def go() -> Optional[str]:
        box = sandbox(docker_client, record.tag, record=record)
        try:
            await box.start()
        except SandboxError as error:
            return str(error)
        try:
            assert await _eventually(lambda: _not(box.entrypoint_alive()))
            assert await box.entrypoint_output() == "giving up\n"
            return None
        finally:
            await box.close()

    failure = run(go)
    assert failure is None or "exited with status 3" in failure


async def _not(check: Awaitable[bool]) -> bool:
    return not await check


@pytest.mark.docker
def test_an_entrypoint_that_dies_later(docker_client, entry_images):
    record = entry_images["dies-later"]

    async def go() -> None:
        async with sandbox(docker_client, record.tag, record=record) as box:
            assert await box.entrypoint_alive()
            assert await _eventually(lambda: _not(box.entrypoint_alive()))
            assert await box.entrypoint_output() == "started\nbye\n"
            with pytest.raises(SandboxError):
                await box.exec("true")

    run(go)


@pytest.mark.docker
def test_an_entrypoint_that_exits_0_leaves_the_sandbox_running(docker_client, entry_images):
    record = entry_images["finishes"]

    async def go() -> None:
        async with sandbox(docker_client, record.tag, record=record) as box:
            await asyncio.sleep(0.5)
            assert await box.entrypoint_alive()
            assert await box.entrypoint_output() == "set up\n"
            assert (await box.exec("echo still here")).stdout == "still here\n"

    run(go)


@pytest.mark.docker
def test_entrypoint_empty_turns_it_off(docker_client, entry_images):
    record = entry_images["disabled"]  # FROM the one that dies, with ENTRYPOINT []: its HEALTHCHECK stays
    assert record.entrypoint is None and record.healthcheck is not None

    async def go() -> None:
        async with sandbox(docker_client, record.tag, record=record) as box:
            assert not box.runs_entrypoint
            assert box._require().attrs["State"]["Health"]["Status"] == "healthy"
            assert await box.entrypoint_output() == ""
            assert (await box.exec("echo ok")).stdout == "ok\n"

    run(go)


@pytest.mark.docker
def test_without_a_record_neither_entrypoint_nor_healthcheck_runs(docker_client, entry_images):
    image = entry_images["dies-awaited"].tag  # its ENTRYPOINT would fail, its HEALTHCHECK would run

    async def go() -> None:
        async with sandbox(docker_client, image) as box:
            assert not box.runs_entrypoint
            await asyncio.sleep(0.5)
            container = box._require()
            await asyncio.get_running_loop().run_in_executor(None, container.reload)
            assert container.attrs["Config"]["Healthcheck"]["Test"] == ["NONE"]
            assert "Health" not in container.attrs["State"]
            assert await box.entrypoint_alive() and await box.entrypoint_output() == ""

    run(go)


@pytest.mark.docker
def test_a_pull_mode_dockerfile_puts_a_prebuilt_image_on_record(docker_client, entry_images, tmp_path):
    # A prebuilt image (built elsewhere: none of this package's labels) with an ENTRYPOINT and a
    # HEALTHCHECK. Beside a pull-mode environment/Dockerfile the seed has its configuration on
    # record, so both run; beside none, or an overlay (Harbor ignores it: the image is used as it is),
    # neither runs.
    prebuilt = "nemo-gym-test/prebuilt-with-entrypoint:1"
    docker_client.images.build(
        fileobj=io.BytesIO(f"FROM {entry_images['healthy'].tag}\nLABEL nemo-gym.built=0\n".encode()),
        tag=prebuilt,
        labels=LABEL,
        rm=True,
    )
    assert image_record(docker_client, prebuilt) is None
    toml = f'[environment]\ndocker_image = "{prebuilt}"\n'
    dockerfiles = {"pull": f"FROM {prebuilt}\n", "overlay": f"FROM {prebuilt}\nRUN true\n", "none": None}

    async def started(dockerfile: Optional[str]) -> Tuple[bool, int]:
        files = {"task.toml": toml, "tests/test.sh": "true\n"}
        if dockerfile is not None:
            files["environment/Dockerfile"] = dockerfile
        task = load_task(write(tmp_path / uuid.uuid4().hex, files))
        workspace = tmp_path / uuid.uuid4().hex
        workspace.mkdir()
        async with open_task_sandbox(task, workspace, kind="docker") as box:
            ready = await box.exec("cat /tmp/entrypoint-ready")  # at once: the HEALTHCHECK was awaited
            return box.runs_entrypoint, ready.return_code

    seen = {name: run(lambda dockerfile=dockerfile: started(dockerfile)) for name, dockerfile in dockerfiles.items()}
    assert seen == {"pull": (True, 0), "overlay": (False, 1), "none": (False, 1)}


@pytest.mark.docker
def test_a_healthcheck_that_fails_fails_the_start(docker_client, entry_images):
    record = entry_images["unhealthy"]
    box = sandbox(docker_client, record.tag, record=record)
    started = time.monotonic()
    with pytest.raises(SandboxError, match="HEALTHCHECK reported .* unhealthy; its last probe said: not yet"):
        run(box.start)
    assert time.monotonic() - started < 10
    assert run(box.entrypoint_output) == "serving\n"  # kept for entrypoint-stdout.txt
    assert not docker_client.containers.list(all=True, filters={"label": "nemo-gym.sandbox=1", "ancestor": record.tag})


@pytest.mark.docker
def test_a_healthcheck_that_never_answers_is_bounded(docker_client, entry_images):
    record = entry_images["slow-health"]  # the first probe would come after 60 s
    started = time.monotonic()
    with pytest.raises(SandboxError, match=r"did not report .* healthy within 1 s"):
        run(lambda: sandbox(docker_client, record.tag, record=record, health_timeout_s=1).start())
    assert time.monotonic() - started < 5
    assert DockerSandbox(record.tag, client=docker_client, record=record)._health_bound(record.healthcheck or {}) == 365


# --- DockerSandbox: network and limits -----------------------------------------------------------


@pytest.mark.docker
@pytest.mark.parametrize("mode", ["none", "no-network"])
def test_no_network(docker_client, mode):
    async def go() -> str:
        async with sandbox(docker_client, base_image(docker_client), network=mode) as box:
            return (await box.exec("ls /sys/class/net")).stdout

    assert run(go).split() == ["lo"]


@pytest.mark.docker
def test_cpu_limit_hints_and_memory(docker_client, tmp_path):
    own_env = gym_image(docker_client, tmp_path / "env", "FROM {base}\nENV MKL_NUM_THREADS=3\n")

    async def go(image: str, **options: Any) -> Tuple[Dict[str, str], Dict[str, Any]]:
        async with sandbox(docker_client, image, **options) as box:
            printed = (await box.exec("env")).stdout
            env = dict(line.split("=", 1) for line in printed.splitlines() if "=" in line)
            return env, box._require().attrs["HostConfig"]

    env, host = run(lambda: go(base_image(docker_client), cpus=1.9, memory_mb=300, env={"OMP_NUM_THREADS": "7"}))
    assert env["OMP_NUM_THREADS"] == "7"  # the task's value wins
    assert {name: env[name] for name in CPU_COUNT_HINTS if name != "OMP_NUM_THREADS"} == {
        name: "1" for name in CPU_COUNT_HINTS if name != "OMP_NUM_THREADS"
    }
    assert host["NanoCpus"] == 1_900_000_000 and host["Memory"] == 300 * 1024 * 1024

    # More CPUs than the engine has: all of them (the engine refuses more), and hints to match.
    engine_cpus = docker_client.info()["NCPU"]
    env, host = run(lambda: go(base_image(docker_client), cpus=engine_cpus + 2.5))
    assert host["NanoCpus"] == engine_cpus * 1_000_000_000 and env["OMP_NUM_THREADS"] == str(engine_cpus)

    for options in ({}, {"record": own_env}):  # the image's own ENV wins, on record or inspected
        env, _ = run(lambda options=options: go(own_env.tag, cpus=0.5, **options))
        assert env["MKL_NUM_THREADS"] == "3" and env["OMP_NUM_THREADS"] == "1" and env["GOMAXPROCS"] == "1"

    env, host = run(lambda: go(base_image(docker_client)))  # no limit, no hints
    assert not set(CPU_COUNT_HINTS) & set(env) and host["NanoCpus"] == 0 and host["Memory"] == 0
