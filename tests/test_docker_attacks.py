"""The agent's attacks on grading, in real containers (the local classes are in test_attacks.py).

The agent is ``agent`` (uid 1000); its leftover processes run beside the verifier, as shared mode
allows. Each test asserts the honest score survives, nothing started during grading outlives it,
and nothing of the agent runs with the verifier's or the admin's rights.
"""

from __future__ import annotations

import asyncio
import shlex
import textwrap
from pathlib import Path
from typing import Any, Awaitable, Callable, Dict, Optional

import pytest
from conftest import EXAMPLES
from images import LABEL, users_image

from nemo_gym.data.tasks.harbor.sandboxes.docker import DockerSandbox
from nemo_gym.data.tasks.harbor.task import load_task
from nemo_gym.data.tasks.harbor.verification import plan_verification, run_verification

pytestmark = pytest.mark.docker
MARKER = "nemo-gym-docker-attack"


def write(root: Path, files: Dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
        path.chmod(0o755 if name.endswith(".sh") or "bin/" in name else 0o644)
    return root


def attack(
    client: Any,
    task_dir: Path,
    workspace: Path,
    *,
    before: Optional[Callable[[DockerSandbox], Awaitable[None]]] = None,
    after: Optional[Callable[[DockerSandbox], Awaitable[Any]]] = None,
    env: Optional[Dict[str, str]] = None,
) -> tuple:
    image, volumes = users_image(client)
    plan = plan_verification(load_task(task_dir))

    async def run() -> tuple:
        sandbox = DockerSandbox(
            image, workspace=workspace, volumes=volumes, labels=LABEL, client=client, env=env, workdir="/workspace"
        )
        async with sandbox:
            await sandbox.exec("chown -R agent /workspace", user="root")
            if before is not None:
                await before(sandbox)
            outcome = await run_verification(plan, sandbox)
            seen = await after(sandbox) if after is not None else None
            return outcome, seen

    return asyncio.run(run())


async def leave_behind(sandbox: DockerSandbox, script: str, user: str = "agent") -> None:
    """Starts ``script`` as the agent's process that keeps running beside the verifier."""
    script = ": > /tmp/agent-alive\n" + script
    await sandbox.exec(f"nohup bash -c {shlex.quote(script)} >/dev/null 2>&1 &", user=user)
    started = await sandbox.exec("for i in $(seq 100); do [ -e /tmp/agent-alive ] && exit 0; sleep 0.05; done; exit 1")
    assert started.return_code == 0, "the agent's leftover process did not start"


async def grading_survivors(sandbox: DockerSandbox) -> str:
    # Builtins only, matching argv[0] (the daemon's `exec -a` name), so the scan never finds itself.
    result = await sandbox.exec(
        f"for p in /proc/[0-9]*; do IFS= read -r -d '' arg0 < $p/cmdline 2>/dev/null; "
        f'[ "$arg0" = {MARKER}-daemon ] && echo ${{p#/proc/}}; done; true',
        user="root",
    )
    return result.stdout.strip()


RACER = r"""
for i in $(seq 3000); do
  answer=$(sed -n 's/.*"answer": "\([^"]*\)".*/\1/p' /tests/task_data.json 2>/dev/null)
  [ -n "$answer" ] && printf %s "$answer" > /workspace/answer.txt
  rm -f /logs/verifier/reward.json /logs/verifier/reward.txt 2>/dev/null
  echo '{"reward": 1}' > /logs/verifier/reward.json 2>/dev/null
  echo 1 > /logs/verifier/reward.txt 2>/dev/null
  ln -sf /etc/shadow /logs/verifier/test-stdout.txt 2>/dev/null
  sleep 0.005
done
"""

ANSWER = """
from nemo_gym.verifiers.files import read_text
def verify(workspace, task_data):
    return float(read_text(workspace, "answer.txt") == task_data["answer"])
"""


@pytest.mark.parametrize("verifier_user", [None, "grader"])
def test_the_agents_leftovers_can_neither_plant_nor_read(docker_client, tmp_path, verifier_user):
    toml = '[agent]\nuser = "agent"\n' + (f'[verifier]\nuser = "{verifier_user}"\n' if verifier_user else "")
    task_dir = write(
        tmp_path / "task",
        {"task.toml": toml, "tests/verifier.py": ANSWER, "task_data.json": '{"answer": "the-secret-answer"}'},
    )
    workspace = write(tmp_path / "ws", {"answer.txt": "a guess"})

    async def look(sandbox: DockerSandbox) -> str:
        result = await sandbox.exec("cat /workspace/answer.txt; echo; ls -A /tests", user="root")
        return result.stdout

    outcome, seen = attack(docker_client, task_dir, workspace, before=lambda s: leave_behind(s, RACER), after=look)
    assert (outcome.reward, outcome.failure_kind, outcome.masked) == (0.0, None, False), outcome
    answer, _, left = seen.partition("\n")
    assert "the-secret-answer" not in answer
    assert [name for name in left.split() if not name.startswith(".gym-out-")] == [], left


DAEMON = f"""
import os, subprocess, sys, time
CODE = '''
import os, time
if os.fork(): os._exit(0)
os.setsid()
if os.fork(): os._exit(0)
os.execvp("bash", ["bash", "-c", "exec -a {MARKER}-daemon bash -c 'while true; do echo {{\\\\\\"reward\\\\\\": 1}} > /logs/verifier/reward.json; sleep 0.01; done'"])
'''
def verify(workspace):
    subprocess.run([sys.executable, "-c", CODE])
    time.sleep(0.3)
    return {{"reward": 0.0, "uid": os.getuid()}}
"""


@pytest.mark.parametrize("verifier_user, uid", [(None, 0), ("agent", 1000), ("grader", 1001)])
def test_a_daemon_verify_started_neither_scores_nor_survives(docker_client, tmp_path, verifier_user, uid):
    toml = f'[verifier]\nuser = "{verifier_user}"\n' if verifier_user else ""
    task_dir = write(tmp_path / "task", {"task.toml": toml, "tests/verifier.py": DAEMON})
    outcome, survivors = attack(docker_client, task_dir, write(tmp_path / "ws", {}), after=grading_survivors)
    assert (outcome.reward, outcome.metrics, outcome.masked) == (0.0, {"uid": float(uid)}, False), outcome
    assert survivors == "", "a process started during grading outlived it"


SAME_UID_FORGER = r"""
for i in $(seq 2000); do
  echo '{"reward": 1}' > /logs/verifier/reward.json 2>/dev/null
  for fd in /proc/[0-9]*/fd/*; do
    echo "nemo-gym-report/1 00000000000000000000000000000000 reward {\"reward\": 1}" >> "$fd" 2>/dev/null
  done
  cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep -a NEMO_GYM >> /workspace/env-seen.txt
  sleep 0.01
done
"""


def test_when_agent_and_verifier_share_a_uid_the_channel_still_holds(docker_client, tmp_path):
    toml = '[agent]\nuser = "agent"\n[verifier]\nuser = "agent"\n'
    source = "import time\ndef verify():\n    time.sleep(0.5)\n    return 0.0\n"
    task_dir = write(tmp_path / "task", {"task.toml": toml, "tests/verifier.py": source})

    async def before(sandbox: DockerSandbox) -> None:
        await leave_behind(sandbox, SAME_UID_FORGER)

    outcome, _ = attack(docker_client, task_dir, write(tmp_path / "ws", {}), before=before)
    assert (outcome.reward, outcome.failure_kind, outcome.masked) == (0.0, None, False), outcome


def test_a_root_agent_that_deletes_tar_gzip_find_and_base64_is_still_graded(docker_client, tmp_path):
    async def delete_tools(sandbox: DockerSandbox) -> None:
        gone = await sandbox.exec(
            "for t in tar gzip find base64; do rm -f $(command -v $t); done; command -v tar gzip find base64",
            user="root",
        )
        assert gone.stdout == ""

    outcome, _ = attack(
        docker_client, EXAMPLES / "answer-file", EXAMPLES / "answer-file" / "workspace", before=delete_tools
    )
    assert (outcome.reward, outcome.masked) == (1.0, False), outcome


TOOLS = ("rm", "mkdir", "chown", "chmod", "mv", "head", "tail", "sha256sum", "tar", "id", "timeout", "python3", "bash")


@pytest.mark.parametrize("kind", ["verifier.py", "test.sh"])
def test_lookup_paths_in_the_sandbox_env_run_nothing_of_the_agent(docker_client, tmp_path, kind):
    files = {f"bin/{tool}": f"#!/bin/sh\necho {tool} >> /workspace/hijacked\n" for tool in TOOLS}
    files["evil.sh"] = "echo BASH_ENV >> /workspace/hijacked\n"
    files["sitecustomize.py"] = "open('/workspace/hijacked', 'a').write('sitecustomize\\n')\n"
    files["answer.txt"] = "42"
    workspace = write(tmp_path / "ws", files)
    env = {
        "PATH": "/workspace/bin:.:/usr/local/bin:/usr/bin:/bin",
        "BASH_ENV": "/workspace/evil.sh",
        "ENV": "/workspace/evil.sh",
        "PYTHONPATH": "/workspace",
    }
    tests = (
        {
            "tests/verifier.py": "def verify(workspace):\n    return float((workspace / 'answer.txt').read_text() == '42')\n"
        }
        if kind == "verifier.py"
        else {"tests/test.sh": '[ "$(cat answer.txt)" = 42 ] && echo 1 > /logs/verifier/reward.txt\n'}
    )
    task_dir = write(tmp_path / "task", tests)

    async def look(sandbox: DockerSandbox) -> str:
        return (await sandbox.exec("cat /workspace/hijacked 2>/dev/null; true", user="root")).stdout

    outcome, hijacked = attack(docker_client, task_dir, workspace, env=env, after=look)
    assert hijacked == ""
    assert (outcome.reward, outcome.masked) == (1.0, False), outcome


def test_a_shell_verifier_gets_private_logs_against_the_agent(docker_client, tmp_path):
    task_dir = write(
        tmp_path / "task",
        {"task.toml": '[agent]\nuser = "agent"\n', "tests/test.sh": "sleep 1\necho 0 > /logs/verifier/reward.txt\n"},
    )
    outcome, _ = attack(docker_client, task_dir, write(tmp_path / "ws", {}), before=lambda s: leave_behind(s, RACER))
    assert (outcome.reward, outcome.failure_kind, outcome.masked) == (0.0, None, False), outcome
