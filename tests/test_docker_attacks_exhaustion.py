"""The agent exhausts its container's own limits before grading, to have its wrong answer masked
(red team 34). Only what runs inside a container counts against its pids and memory limits, so a
grading that fails in a container with no room left is the container's own doing, the agent's or
the verifier's: it scores 0 (``resources_exhausted``), never a mask.

- memory: SysV shared memory and ``/dev/shm`` files fill ``memory_mb`` and their writer exits, so
  the OOM killer has nothing of the agent's to kill, only grading's own shell (exit 137, or an exec
  the engine cannot start);
- pids: a filler keeps every free pid of the container's pids limit taken, so grading's shell
  cannot fork (bash retries for about 15 s, then exits 254). A container has a pids limit unless
  its caller turns it off (``DEFAULT_PIDS_LIMIT``): without one, the same filler takes the host's.
"""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path
from typing import Any, Dict, Optional

import pytest
from images import LABEL, users_image
from support import write_files

from nemo_gym.data.tasks.harbor.sandboxes.docker import DEFAULT_PIDS_LIMIT, DockerSandbox
from nemo_gym.data.tasks.harbor.task import load_task
from nemo_gym.data.tasks.harbor.verification import (
    RESOURCES_EXHAUSTED,
    VerificationOutcome,
    plan_verification,
    run_verification,
)

pytestmark = pytest.mark.docker

TASK = {
    "task.toml": "[agent]\nuser = 'agent'\n",
    "task_data.json": '{"answer": "the-secret-answer"}',
    "tests/verifier.py": (
        "from nemo_gym.verifiers.files import read_text\n"
        "def verify(workspace, task_data):\n"
        "    return float(read_text(workspace, 'answer.txt') == task_data['answer'])\n"
    ),
}

# Fills the memory cgroup with memory no process owns, leaving LEAVE MiB: SysV shared memory
# segments (made, touched and detached by a Python process that then exits), then /dev/shm files in
# 64 KiB steps until a write fails. cgroup v1 or v2.
MEMORY_FILLER = r"""
import ctypes, os, sys
def read(*names):
    for name in names:
        if os.path.exists(name):
            return int(open(name).read().split()[0])
usage = lambda: read("/sys/fs/cgroup/memory/memory.usage_in_bytes", "/sys/fs/cgroup/memory.current")
limit = read("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory.max")
libc = ctypes.CDLL(None, use_errno=True)
libc.shmget.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int]
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
libc.shmdt.argtypes = [ctypes.c_void_p]
chunk, leave = 1 << 20, int(sys.argv[1]) << 20
while limit - usage() > leave + chunk:
    address = libc.shmat(libc.shmget(0, chunk, 0o1600), None, 0)
    ctypes.memset(address, 1, chunk)
    libc.shmdt(ctypes.c_void_p(address))
"""
FILL_MEMORY = f"""
python3 -c {shlex.quote(MEMORY_FILLER)} 8
i=0
while head -c 64K /dev/zero > /dev/shm/f$i 2>/dev/null; do i=$((i+1)); done
"""
# Takes every free pid and keeps retaking them: a fork that fails is tried again.
PIDS_FILLER = r"""
import os, time
while True:
    try:
        if os.fork() == 0:
            while True:
                time.sleep(1000)
    except OSError:
        time.sleep(0.001)
"""
FILL_PIDS = f"python3 -c {shlex.quote(PIDS_FILLER)}"
# The same with threads, which the pids limit counts too: thousands cost a few MiB.
THREADS_FILLER = r"""
import threading, time
threading.stack_size(64 << 10)
while True:
    try:
        threading.Thread(target=time.sleep, args=(1e6,), daemon=True).start()
    except RuntimeError:
        time.sleep(0.001)
"""
FILL_THREADS = f"python3 -c {shlex.quote(THREADS_FILLER)}"
UNSET: Any = object()


def stats(client: Any, container: str) -> Dict[str, Any]:
    return client.api.stats(container, stream=False, one_shot=True)  # type: ignore[no-any-return]


def full(stats: Dict[str, Any]) -> bool:
    """Whether the container's pids or memory are within a few of its limit (the fillers' aim)."""
    pids = stats.get("pids_stats") or {}
    if pids.get("limit") and pids.get("current", 0) >= pids["limit"] - 2:
        return True
    memory = stats.get("memory_stats") or {}
    detail = memory.get("stats") or {}
    used = memory.get("usage", 0) - detail.get("total_inactive_file", detail.get("inactive_file", 0))
    return bool(memory.get("limit")) and used >= memory["limit"] - (16 << 20)


def graded(
    client: Any,
    tmp_path: Path,
    filler: str,
    *,
    memory_mb: Optional[int] = None,
    pids_limit: Optional[int] = UNSET,
    task: Optional[Dict[str, str]] = None,
) -> VerificationOutcome:
    image, volumes = users_image(client)
    plan = plan_verification(load_task(write_files(tmp_path / "task", task or TASK)))
    workspace = write_files(tmp_path / "workspace", {"answer.txt": "a guess"})

    async def run() -> VerificationOutcome:
        sandbox = DockerSandbox(
            image,
            workspace=workspace,
            volumes=volumes,
            labels=LABEL,
            client=client,
            workdir="/workspace",
            memory_mb=memory_mb,
            **({} if pids_limit is UNSET else {"pids_limit": pids_limit}),
        )
        async with sandbox:
            limit = sandbox._require().attrs["HostConfig"]["PidsLimit"]
            assert limit == (DEFAULT_PIDS_LIMIT if pids_limit is UNSET else pids_limit), "no filler without a limit"
            await sandbox.exec("chown -R agent /workspace", user="root")
            await sandbox.exec(f"nohup bash -c {shlex.quote(filler)} >/dev/null 2>&1 &", user="agent")
            # Watched through the engine's stats: a full container starts no process to answer.
            container = sandbox._require()
            for _ in range(300):
                if full(await asyncio.get_running_loop().run_in_executor(None, stats, client, container.id)):
                    break
                await asyncio.sleep(0.1)
            else:
                raise AssertionError("the agent's filler never filled the container")
            await asyncio.sleep(1)  # the filler's last writes settle, or it takes what is left
            return await run_verification(plan, sandbox)

    return asyncio.run(run())


def test_memory_no_process_owns_scores_0_not_a_mask(docker_client, tmp_path):
    outcome = graded(docker_client, tmp_path, FILL_MEMORY, memory_mb=128)
    assert (outcome.reward, outcome.masked) == (0.0, False), outcome
    if outcome.failure_kind != "harbor:missing_reward":  # the OOM killer took the runner: a 0 already
        assert outcome.failure_kind == RESOURCES_EXHAUSTED, outcome
        assert "for want of memory under its 128 MiB limit" in outcome.detail, outcome


def test_a_full_pids_cgroup_scores_0_not_a_mask(docker_client, tmp_path):
    outcome = graded(docker_client, tmp_path, FILL_PIDS, pids_limit=64)
    assert (outcome.reward, outcome.masked, outcome.failure_kind) == (0.0, False, RESOURCES_EXHAUSTED), outcome
    assert "could not start a process under its pids limit of 64" in outcome.detail, outcome


def test_a_full_pids_cgroup_before_grading_reads_the_verifiers_groups_scores_0_not_a_mask(docker_client, tmp_path):
    """A task's own test.sh run as another user: grading's first fork reads that user's groups (`id -G`), where
    a failure reads as a user grading cannot set up (status 93), the author's mistake (verifier_error), a mask.
    Red team 95 suspected that route: bash ends the whole script when a command substitution cannot fork, so
    the status is 254, and the sandbox's own count turns it into a 0."""
    task = {
        "task.toml": "[agent]\nuser = 'agent'\n[verifier]\nuser = 'grader'\n",
        "tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n",
    }
    outcome = graded(docker_client, tmp_path, FILL_PIDS, pids_limit=64, task=task)
    assert (outcome.reward, outcome.masked, outcome.failure_kind) == (0.0, False, RESOURCES_EXHAUSTED), outcome
    assert "could not start a process under its pids limit of 64" in outcome.detail, outcome


def test_a_container_has_a_pids_limit_unless_its_caller_turns_it_off(docker_client, tmp_path):
    # The filler never exhausts the host: without the default, graded() refuses to start it.
    outcome = graded(docker_client, tmp_path, FILL_THREADS)
    assert (outcome.reward, outcome.masked, outcome.failure_kind) == (0.0, False, RESOURCES_EXHAUSTED), outcome
    # Grading's fork failed, or (on a loaded machine) the engine could not start its exec at all: either
    # way the default limit is what the detail names.
    limit = (f"under its pids limit of {DEFAULT_PIDS_LIMIT}", f"of its {DEFAULT_PIDS_LIMIT} processes are in use")
    assert any(words in outcome.detail for words in limit), outcome


def test_a_container_the_agents_fill_had_killed_before_grading_scores_0_not_a_mask(docker_client, tmp_path):
    """Red team 91: the agent's fill made the container's init the OOM killer's choice (the agent ran, last,
    a program smaller than every other process; here root raises init's oom_score_adj to the same end), and
    the container stopped before grading began: a ``sandbox_error`` mask, though only what ran inside it
    counted against its limit. The engine records the kill: the container's own doing, a 0."""
    image, volumes = users_image(docker_client)
    plan = plan_verification(load_task(write_files(tmp_path / "task", TASK)))
    workspace = write_files(tmp_path / "workspace", {"answer.txt": "a guess"})

    async def run() -> VerificationOutcome:
        sandbox = DockerSandbox(
            image, workspace=workspace, volumes=volumes, labels=LABEL, client=docker_client, memory_mb=128
        )
        async with sandbox:
            await sandbox.exec("chown -R agent /workspace && echo 1000 > /proc/1/oom_score_adj", user="root")
            await sandbox.exec(f"nohup bash -c {shlex.quote(FILL_MEMORY)} >/dev/null 2>&1 &", user="agent")
            container = sandbox._require()
            for _ in range(300):
                await asyncio.get_running_loop().run_in_executor(None, container.reload)
                if container.status != "running":
                    break
                await asyncio.sleep(0.1)
            else:
                raise AssertionError("the fill never had the container's init killed")
            assert container.attrs["State"]["OOMKilled"] is True, container.attrs["State"]
            return await run_verification(plan, sandbox)

    outcome = asyncio.run(run())
    assert (outcome.reward, outcome.masked, outcome.failure_kind) == (0.0, False, RESOURCES_EXHAUSTED), outcome
    assert "killed the container for want of memory under its 128 MiB limit" in outcome.detail, outcome
