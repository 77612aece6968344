"""Artifacts between two real containers: collected from the agent's through the engine's archive
calls, delivered into a fresh verifier's at their own paths (the local round trips are in
test_artifacts.py)."""

from __future__ import annotations

import asyncio
from typing import Any, Dict

import docker
import pytest
from images import LABEL, base_image
from support import write_files

from nemo_gym.data.tasks.harbor.artifacts import (
    FILE,
    FOLDER,
    MAX_ARTIFACT_DEPTH,
    CollectedArtifact,
    CollectedArtifacts,
    collect_artifacts,
    deliver_artifacts,
)
from nemo_gym.data.tasks.harbor.sandboxes.base import SandboxError
from nemo_gym.data.tasks.harbor.sandboxes.docker import DockerSandbox
from nemo_gym.data.tasks.harbor.task import Artifact

pytestmark = pytest.mark.docker

# What the agent leaves beyond its workspace: published notes, a log outside it, and the traps.
AGENT_SETUP = """
set -e
mkdir -p /logs/artifacts /var/log/api
echo 'published by the agent' > /logs/artifacts/notes.txt
echo 'GET /orders 200' > /var/log/api/orders.log
chmod 4755 /app/run.sh
ln /app/run.sh /app/hard-link
mkfifo /app/fifo
ln -s /etc/passwd /app/passwd
ln -s . /app/dot
ln -s dot/../etc/shadow /app/trick
ln -s run.sh /app/run
ln -s /etc/passwd /app/link-source
"""

ARTIFACTS = (
    Artifact("/app", "app", exclude=("*.tmp", "cache")),
    Artifact("/var/log/api/orders.log", "orders.log"),
    Artifact("/app/missing.txt", "missing.txt"),
    Artifact("/app/run.sh/x", "x"),  # a file where a folder should be: missing, not a fault
    Artifact("/app/link-source", "link-source"),
)

# What the verifier's container holds afterwards: path, type, mode, owner, and a link's target or
# a file's text (find -printf; the image's own /app/stale.txt is gone).
# The FIFO and the links out of /app are empty files there, their names kept (red team 85).
EXPECTED = """\
/app d 755 1000
/app/dot l 777 1000 .
/app/fifo f 666 1000
/app/hard-link f 755 1000 #!/bin/sh|echo ran|
/app/link-source f 666 1000
/app/out.json f 644 1000 {"answer": 42}
/app/passwd f 666 1000
/app/run l 777 1000 run.sh
/app/run.sh f 755 1000 #!/bin/sh|echo ran|
/app/src d 755 1000
/app/src/main.py f 644 1000 print('hi')|
/app/trick f 666 1000
/logs/artifacts d 755 1000
/logs/artifacts/notes.txt f 644 1000 published by the agent|
/var/log/api/orders.log f 644 1000 GET /orders 200|
"""

SHOW = (
    "for path in $(find /app /logs/artifacts /var/log/api/orders.log | sort); do "
    'printf "%s %s %s %s" "$path" "$(stat -c %F "$path" | cut -c1 | tr sr lf)" "$(stat -c %a "$path")" '
    '"$(stat -c %u "$path")"; '
    'if [ -L "$path" ]; then printf " %s" "$(readlink "$path")"; '
    'elif [ -f "$path" ] && [ -s "$path" ]; then printf " %s" "$(tr "\\n" "|" < "$path")"; fi; echo; done'
)


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def test_a_round_trip_between_two_containers(docker_client, tmp_path):
    image = base_image(docker_client)
    workspace = write_files(
        tmp_path / "agent",
        {
            "out.json": '{"answer": 42}',
            "run.sh": "#!/bin/sh\necho ran\n",
            "src/main.py": "print('hi')\n",
            "src/scratch.tmp": "x",
            "cache/blob": "y",
        },
    )
    verifier_workspace = write_files(tmp_path / "verifier", {"stale.txt": "the image's own"})
    seen: Dict[str, Any] = {}

    async def go() -> None:
        async with DockerSandbox(
            image, workspace=workspace, workdir="/app", labels=LABEL, client=docker_client
        ) as agent:
            made = await agent.exec(AGENT_SETUP, user="root")
            assert made.return_code == 0, made.stderr
            seen["collected"] = await collect_artifacts(agent, ARTIFACTS, tmp_path / "collected")
        async with DockerSandbox(
            image, workspace=verifier_workspace, workdir="/app", labels=LABEL, client=docker_client
        ) as verifier:
            await deliver_artifacts(verifier, seen["collected"], owner=1000)
            shown = await verifier.exec(SHOW, cwd="/")
            seen["shown"] = shown.stdout
            seen["verifier_logs"] = (await verifier.exec("ls -A /logs/verifier", cwd="/")).stdout

    run(go())
    collected = seen["collected"]
    assert [(item.artifact.source, item.kind) for item in collected.artifacts] == [
        ("/logs/artifacts", FOLDER),
        ("/app", FOLDER),
        ("/var/log/api/orders.log", FILE),
        ("/app/link-source", FILE),  # a link: its name kept by an empty file (red team 85)
    ]
    assert collected.missing == ("/app/missing.txt", "/app/run.sh/x")
    assert {item.path for item in collected.skipped} == {"/app/fifo", "/app/passwd", "/app/trick", "/app/link-source"}
    assert collected.excluded == 3  # src/scratch.tmp, cache, cache/blob
    host = tmp_path / "collected"
    assert (host / "orders.log").read_text() == "GET /orders 200\n"
    assert (host / "app/run.sh").stat().st_mode & 0o7777 == 0o755  # no set-uid bit, even on the host
    assert seen["shown"] == EXPECTED
    assert "root:" not in seen["shown"] and seen["verifier_logs"] == ""


def test_an_archive_past_the_transfer_limit_is_skipped_in_a_container(docker_client, tmp_path):
    workspace = write_files(tmp_path / "agent", {"big.bin": b"\0" * (3 << 20), "small.txt": "x"})

    async def go() -> Any:
        async with DockerSandbox(
            base_image(docker_client), workspace=workspace, workdir="/app", labels=LABEL, client=docker_client
        ) as agent:
            return await collect_artifacts(
                agent,
                [Artifact("/app", "app"), Artifact("/app/small.txt", "small.txt")],
                tmp_path / "out",
                limit_bytes=1 << 10,
                limit_files=10,
            )

    collected = run(go())
    assert [item.artifact.source for item in collected.artifacts] == ["/app/small.txt"]
    assert any(item.path == "/app" and "larger than" in item.reason for item in collected.skipped)
    assert not (tmp_path / "out" / "app").exists()


def test_a_lost_container_is_a_sandbox_error_not_a_missing_artifact(docker_client, tmp_path):
    write_files(tmp_path / "copy", {"app/x": "1"})
    copy = CollectedArtifacts(
        tmp_path / "copy", (CollectedArtifact(Artifact("/app", "app"), tmp_path / "copy" / "app", FOLDER, 2, 1),)
    )

    async def go() -> None:
        async with DockerSandbox(
            base_image(docker_client), workdir="/app", labels=LABEL, client=docker_client
        ) as sandbox:
            docker_client.containers.get(sandbox._container.id).remove(force=True)  # gone behind its back
            with pytest.raises(SandboxError, match="No such container"):
                await collect_artifacts(sandbox, [Artifact("/app", "app")], tmp_path / "out")
            with pytest.raises(SandboxError, match="No such container"):
                await deliver_artifacts(sandbox, copy)

    run(go())


def test_folders_nested_past_what_a_copy_can_make_cut_the_artifact_short(docker_client, tmp_path):
    # The agent nests folders until no path of them fits Linux's PATH_MAX (the engine archives them
    # anyway): the host copy failed on them, and the sample was masked. It is cut short instead.
    workspace = write_files(tmp_path / "agent", {"out.json": '{"answer": 42}'})
    nest = 'cd /app && mkdir deep && cd deep && perl -e \'for (1..2100) { mkdir "a" or die; chdir "a" or die }\''
    seen: Dict[str, Any] = {}

    async def go() -> None:
        image = base_image(docker_client)
        async with DockerSandbox(
            image, workspace=workspace, workdir="/app", labels=LABEL, client=docker_client
        ) as agent:
            made = await agent.exec(nest, user="root")
            assert made.return_code == 0, made.stderr
            seen["collected"] = await collect_artifacts(agent, [Artifact("/app", "app")], tmp_path / "collected")
        async with DockerSandbox(image, workdir="/app", labels=LABEL, client=docker_client) as verifier:
            await deliver_artifacts(verifier, seen["collected"])
            seen["shown"] = (await verifier.exec("cat out.json; find deep -type d | wc -l")).stdout

    run(go())
    assert seen["collected"].truncated == ("/app",)
    assert seen["shown"] == '{"answer": 42}' + f"{MAX_ARTIFACT_DEPTH}\n"  # deep, then deep/a to 128 parts


def collect_after(docker_client: Any, setup: str, artifacts: Any, folder: Any) -> Any:
    """``artifacts`` collected into ``folder`` from a container where root ran ``setup`` (the agent's doing)."""

    async def go() -> Any:
        async with DockerSandbox(
            base_image(docker_client), workdir="/app", labels=LABEL, client=docker_client
        ) as agent:
            made = await agent.exec(setup, user="root")
            assert made.return_code == 0, made.stderr
            return await collect_artifacts(agent, artifacts, folder)

    return run(go())


def test_a_socket_where_an_artifact_should_be_is_left_out_in_a_container(docker_client, tmp_path):
    # The engine's archive of a socket holds nothing, which read as a damaged transfer: masked.
    bind = "perl -MIO::Socket::UNIX -e 'IO::Socket::UNIX->new(Local => \"/app/out.json\", Listen => 1) or die'"
    collected = collect_after(docker_client, bind, [Artifact("/app/out.json", "out.json")], tmp_path / "out")
    assert collected.artifacts == ()
    assert [(item.path, item.reason) for item in collected.skipped] == [
        ("/app/out.json", "not a file, folder or symbolic link (a socket, which no archive holds)")
    ]


def test_a_parent_folder_the_agent_made_a_link_is_never_followed_in_a_container(docker_client, tmp_path):
    # Red team 85: the engine resolves an artifact's path as root, so /app/out -> /srv/secret, made by an
    # agent that cannot read there, had the verifier read the image's hidden answer.txt (1.0).
    setup = (
        "mkdir -p -m 0700 /srv/secret && echo 42 > /srv/secret/answer.txt && chmod 777 /app && "
        "setpriv --reuid=nobody --regid=nogroup --clear-groups ln -s /srv/secret /app/out && "
        "ln -s shared /app/data && setpriv --reuid=nobody --regid=nogroup --clear-groups ln -s /srv/secret /app/shared"
    )  # /app/data: the image's own link, root's, which leads through the agent's (red team 86)
    artifacts = [Artifact("/app/out/answer.txt", "answer.txt"), Artifact("/app/data/answer.txt", "data.txt")]
    collected = collect_after(docker_client, setup, artifacts, tmp_path / "out")
    assert collected.cut == ("/app/out/answer.txt", "/app/data/answer.txt"), collected
    assert not (tmp_path / "out" / "answer.txt").exists() and not (tmp_path / "out" / "data.txt").exists()


def test_a_link_loop_among_an_artifacts_parents_is_missing_in_a_container(docker_client, tmp_path):
    # The engine answers 500 "evalSymlinksInScope: too many links" for a path through res -> res,
    # and /logs/agent -> agent breaks the transcript every separate run collects: both masked.
    loop = "ln -s res /app/res && mkdir -p /logs && rm -rf /logs/agent && ln -s agent /logs/agent"
    artifacts = [Artifact("/app/res/out.json", "out.json"), Artifact("/logs/agent/trajectory.json", "t.json")]

    collected = collect_after(docker_client, loop, artifacts, tmp_path / "out")
    assert collected.missing == ("/app/res/out.json", "/logs/agent/trajectory.json")


# What the agent leaves behind in its container before a separate run collects: each once masked a
# wrong answer (red teams 30 and 31).
LEFT_BEHIND = {
    # A process cuts a published file to 0 bytes and back while the engine archives it: the stream
    # ended mid-file and the damaged archive masked the sample (6 runs in 6).
    "a file rewritten as it is copied": (
        'mkdir -p /logs/artifacts && (setsid perl -e \'open(my $f, ">", "/logs/artifacts/big") or die; '
        "while (1) { truncate($f, 0); truncate($f, 64 << 20); select(undef, undef, undef, 0.002) }' "
        ">/dev/null 2>&1 &) && sleep 1"
    ),
    # A process holds write leases (F_SETLEASE) on its own files, which any user may: the engine's open
    # of each waits 45 s for the holder (frozen by a pause), past the client's read timeout (60 s).
    "leases on published files": (
        "mkdir -p /logs/artifacts && for i in 1 2 3; do echo x > /logs/artifacts/f$i; done && "
        "chown -R nobody /logs/artifacts && (setsid setpriv --reuid=nobody --regid=nogroup --clear-groups "
        "perl -e '$SIG{IO} = q(IGNORE); my @held; for (glob q(/logs/artifacts/f*)) { "
        "open(my $h, q(<), $_) or die; fcntl($h, 1024, 1) or die; push @held, $h } sleep 100000' "
        ">/dev/null 2>&1 &) && sleep 1 && [ $(grep -c LEASE /proc/locks) = 3 ]"
    ),
    # The agent stops its own container (its init passes SIGTERM on and exits): pausing it failed.
    "the container stopped": "(sleep 1; kill -TERM 1) >/dev/null 2>&1 &",
}


# The agent's last step ends its processes before the copy; a step with more after it only pauses them
# (the next step runs in the same sandbox), and a lease held by a paused process stalls the copy until
# the client gives up: the artifact is then cut short, never the sample masked. The agent's client here
# gives up after 15 s without a byte (Docker's default is 60 s).
CASES = [(left_behind, last_step) for left_behind in sorted(LEFT_BEHIND) for last_step in (True, False)]


@pytest.mark.parametrize("left_behind, last_step", CASES)
def test_what_the_agent_leaves_running_never_masks_a_separate_run(docker_client, tmp_path, left_behind, last_step):
    from contextlib import asynccontextmanager

    from nemo_gym.data.tasks.harbor.separate import run_separate_verification
    from nemo_gym.data.tasks.harbor.task import load_task
    from nemo_gym.data.tasks.harbor.verification import plan_verification

    toml = '[verifier]\nenvironment_mode = "separate"\n[environment]\ndocker_image = "agent:1"\nworkdir = "/app"\n'
    grade = 'if [ "$(cat /app/out.txt)" = 42 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n'
    task = load_task(write_files(tmp_path / "task", {"task.toml": toml, "tests/test.sh": grade}))
    workspace = write_files(tmp_path / "agent", {"out.txt": "41"})
    image = base_image(docker_client)

    @asynccontextmanager
    async def open_verifier(spec: Any) -> Any:
        async with DockerSandbox(image, workdir="/app", labels=LABEL, client=docker_client) as verifier:
            yield verifier

    impatient = docker.from_env(timeout=15)

    async def go() -> Any:
        async with DockerSandbox(image, workspace=workspace, workdir="/app", labels=LABEL, client=impatient) as agent:
            made = await agent.exec(LEFT_BEHIND[left_behind], user="root")
            assert made.return_code == 0, made.stderr
            await asyncio.sleep(3)
            plan = plan_verification(task)
            return await run_separate_verification(task, plan, agent, open_verifier, stop_agent=last_step)

    try:
        outcome = run(asyncio.wait_for(go(), 300))
    finally:
        impatient.close()
    assert (outcome.reward, outcome.masked) == (0.0, False), outcome.detail


@pytest.mark.parametrize(
    "verifier_user, owner",
    [("grader", 65534), ("1001:1001", 65534), ("nobody", 65533), ("65534:65534", 65533), ("judge:judge", 65533)],
)
def test_delivered_artifacts_are_never_the_verifiers_own(docker_client, tmp_path, verifier_user, owner):
    """Red team 73: a verifier run as nobody trusted artifacts owned by nobody as its own files. The
    image decides who that is: ``judge`` is uid 65534 there under another name."""
    copy = write_files(tmp_path / "copy", {"app/out.json": '{"answer": 42}', "app/src/main.py": "print(1)\n"})
    collected = CollectedArtifacts(copy, (CollectedArtifact(Artifact("/app", "app"), copy / "app", FOLDER, 2, 2),))
    users = "useradd -M -u 1001 grader && useradd -M -o -u 65534 judge"

    async def go() -> str:
        async with DockerSandbox(
            base_image(docker_client), workdir="/app", labels=LABEL, client=docker_client
        ) as verifier:
            made = await verifier.exec(users, user="root")
            assert made.return_code == 0, made.stderr
            await deliver_artifacts(verifier, collected, owner=65534, verifier_user=verifier_user)
            return (await verifier.exec("stat -c '%u %n' /app /app/out.json /app/src /app/src/main.py")).stdout

    shown = run(go())
    assert shown.split() == [
        part for path in ("/app", "/app/out.json", "/app/src", "/app/src/main.py") for part in (str(owner), path)
    ], shown
