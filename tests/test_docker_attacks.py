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
from typing import Any, Awaitable, Callable, Dict, List, Optional, Tuple

import pytest
from images import LABEL, users_image
from support import EXAMPLES, PIPE_FORGER, write_files

from nemo_gym.data.tasks.harbor.sandboxes.docker import DockerSandbox
from nemo_gym.data.tasks.harbor.task import load_task
from nemo_gym.data.tasks.harbor.verification import plan_verification, run_verification

pytestmark = pytest.mark.docker
MARKER = "nemo-gym-docker-attack"


def write(root: Path, files: Dict[str, str]) -> Path:
    return write_files(root, files, dedent=True)


def users_sandbox(client: Any, workspace: Path, **options: Any) -> DockerSandbox:
    """A sandbox of the suite's image with the users ``agent`` and ``grader``, working in /workspace."""
    image, volumes = users_image(client, setpriv=options.pop("setpriv", True))
    volumes = {**volumes, **options.pop("volumes", {})}
    workdir = options.pop("workdir", "/workspace")
    return DockerSandbox(
        image, workspace=workspace, volumes=volumes, labels=LABEL, client=client, workdir=workdir, **options
    )


def attack(
    client: Any,
    task_dir: Path,
    workspace: Path,
    *,
    before: Optional[Callable[[DockerSandbox], Awaitable[None]]] = None,
    after: Optional[Callable[[DockerSandbox], Awaitable[Any]]] = None,
    env: Optional[Dict[str, str]] = None,
    volumes: Optional[Dict[str, Dict[str, str]]] = None,
    setpriv: bool = True,
    workdir: str = "/workspace",
) -> tuple:
    plan = plan_verification(load_task(task_dir))

    async def run() -> tuple:
        options = {"env": env, "volumes": volumes or {}, "setpriv": setpriv, "workdir": workdir}
        async with users_sandbox(client, workspace, **options) as sandbox:
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


@pytest.mark.parametrize("verifier_user", [None, "grader"])
def test_the_pipe_that_carries_the_files_is_out_of_verifys_reach(docker_client, tmp_path, verifier_user):
    # The one exec carries the staged files (the run's key among them) in on its stdin and the
    # results out on its stdout: verify reads none of the first. Root's code can spoil the second
    # (it reaches every pipe in the container: the sample is masked), never forge it; the grader
    # reaches no pipe at all.
    import json

    toml = "" if verifier_user is None else f'[verifier]\nuser = "{verifier_user}"\n'
    task_dir = write(tmp_path / "task", {"tests/verifier.py": PIPE_FORGER, "task.toml": toml})

    async def probe(sandbox: DockerSandbox) -> Any:
        return (await sandbox.exec("cat /workspace/pipes.json 2>/dev/null", user="root")).stdout

    outcome, written = attack(docker_client, task_dir, write(tmp_path / "ws", {}), after=probe)
    if verifier_user is None:
        seen = json.loads(written)
        assert any(path.endswith("/fd/6") for path in seen["written"]), seen  # the attack reached the pipe
        # Results ahead of the real ones are damage: masked, never scored.
        assert outcome.masked and "more than one tar" in outcome.detail, outcome
    else:
        seen = json.loads(outcome.stdout.split("pipes: ", 1)[1].splitlines()[0])
        assert seen["written"] == [] and outcome.failure_kind is None, (outcome, seen)
        assert outcome.reward == 0.0 and not outcome.masked, outcome
    assert seen["stdin"] == 0 and "fd 6" in seen["denied"], seen


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


# --- found by attacking it ------------------------------------------------------------------------

HOPPER = """
import os, subprocess
def verify(workspace):
    subprocess.run([str(workspace / "hopper"), str(os.getpid()), "/tmp/hopper-alive"])
    return 0.0
"""


@pytest.mark.parametrize("verifier_user", [None, "grader"])
def test_a_pid_hopping_daemon_does_not_survive(docker_client, tmp_path, verifier_user):
    from support import HOPPER_SOURCE, compile_c

    toml = f'[verifier]\nuser = "{verifier_user}"\n' if verifier_user else ""
    task_dir = write(tmp_path / "task", {"task.toml": toml, "tests/verifier.py": HOPPER})
    workspace = write(tmp_path / "ws", {})
    compile_c(workspace, "hopper", HOPPER_SOURCE)

    async def after(sandbox: DockerSandbox) -> str:
        await sandbox.exec("rm -f /tmp/hopper-alive", user="root")
        await asyncio.sleep(8)  # past its hopping: a survivor has written the file again by now
        return (await sandbox.exec("cat /tmp/hopper-alive 2>/dev/null; true", user="root")).stdout

    outcome, alive = attack(docker_client, task_dir, workspace, after=after)
    assert (outcome.reward, outcome.masked) == (0.0, False), outcome
    assert alive == "", f"a process started during grading outlived it (pid {alive.strip()})"


def test_a_root_daemon_that_copies_the_report_cannot_change_it(docker_client, tmp_path):
    from support import REWRITER

    task_dir = write(tmp_path / "task", {"tests/verifier.py": REWRITER})
    outcome, _ = attack(docker_client, task_dir, write(tmp_path / "ws", {}))
    assert (outcome.reward, outcome.masked) == (0.0, False), outcome


async def _loaded_marks(sandbox: DockerSandbox) -> str:
    """The lines the mark library wrote in /tmp/loaded, read through the engine's archive call: no exec,
    so nothing loads it."""
    import io
    import tarfile

    data = await sandbox.get_archive("/tmp/loaded", limit=1 << 20)
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        member = archive.extractfile(archive.next())  # type: ignore[arg-type]
        assert member is not None
        return member.read().decode()


@pytest.mark.parametrize("verifier_user", [None, "grader"])
@pytest.mark.parametrize("kind", ["verifier.py", "test.sh"])
def test_ld_preload_into_the_workspace_never_reaches_grading(docker_client, tmp_path, verifier_user, kind):
    from support import GRADING_PROGRAMS, loaded_by, preload_library

    workspace = write(tmp_path / "ws", {})
    preload_library(workspace / "lib", "/tmp/loaded")
    if kind == "verifier.py":
        tests = {
            "tests/verifier.py": "import subprocess\ndef verify():\n    subprocess.run(['true'])\n    return 0.5\n"
        }
    else:
        tests = {"tests/test.sh": "/bin/true\necho 0.5 > /logs/verifier/reward.txt\n"}
    toml = '[verifier.env]\nLD_PRELOAD = "/workspace/lib/mark.so"\n'
    if verifier_user:
        toml = f'[verifier]\nuser = "{verifier_user}"\n' + toml
    task_dir = write(tmp_path / "task", {**tests, "task.toml": toml})

    async def before(sandbox: DockerSandbox) -> None:
        await sandbox.exec(": > /tmp/loaded", user="root")  # forget this harness's own execs

    env = {"LD_PRELOAD": "/workspace/lib/mark.so"}
    outcome, loaded = attack(docker_client, task_dir, workspace, env=env, before=before, after=_loaded_marks)
    assert (outcome.reward, outcome.masked) == (0.5, False), outcome
    (tmp_path / "loaded").write_text(loaded)
    programs = {program for program, _ in loaded_by(tmp_path / "loaded")}
    assert "true" in programs, "the task's LD_PRELOAD must still reach what the verifier starts"
    assert not programs & GRADING_PROGRAMS, programs
    if kind == "verifier.py":
        assert not programs & {"python3", "python", "bash", "timeout"}, programs


@pytest.mark.parametrize("variable", ["LD_PRELOAD", "LD_LIBRARY_PATH"])
def test_the_images_loader_variables_never_reach_roots_housekeeping(docker_client, tmp_path, variable):
    """Red team 76: an image whose ENV points a loader variable into the workspace (``LD_LIBRARY_PATH=
    /app/lib`` is a plausible author's line) had root's own shells load the agent's library: the clock
    read before a bounded collect hook, the reaper, a thaw, an artifact's delivery. The agent's
    ``libtinfo.so.6`` there swapped ``timeout`` for its own, and a wrong answer scored 1.0. Grading's
    exec blanked them; every clean shell now does. The hook, the agent's user's, still gets them."""
    from support import PRELOAD_SOURCE, compile_c, loaded_by, preload_library

    workspace = write(tmp_path / "ws", {})
    lib = workspace / "lib"
    if variable == "LD_PRELOAD":
        preload_library(lib, "/tmp/loaded")
    else:  # bash's own library found in the agent's folder first: the mark, which needs the real one
        stub = compile_c(tmp_path / "stub", "libtinfo_real.so.6", "", "-shared", "-Wl,-soname,libtinfo_real.so.6")
        compile_c(
            lib, "libtinfo.so.6", PRELOAD_SOURCE, "-shared", "-fPIC", '-DMARK="/tmp/loaded"',
            "-Wl,-soname,libtinfo.so.6", "-Wl,--no-as-needed", f"-L{stub.parent}", "-l:libtinfo_real.so.6",
        )  # fmt: skip
    toml = '[[verifier.collect]]\ncommand = "/bin/true"\nuser = "agent"\n'
    tests = {"tests/verifier.py": "def verify():\n    return 0.5\n"}
    task_dir = write(tmp_path / "task", {**tests, "task.toml": toml})

    async def before(sandbox: DockerSandbox) -> None:
        real = "cp /lib/x86_64-linux-gnu/libtinfo.so.6 /workspace/lib/libtinfo_real.so.6 && " * (
            variable == "LD_LIBRARY_PATH"
        )
        made = await sandbox.exec(f"{real}: > /tmp/loaded && chmod 666 /tmp/loaded", user="root", env={variable: ""})
        assert made.return_code == 0, made

    env = {variable: "/workspace/lib/mark.so" if variable == "LD_PRELOAD" else "/workspace/lib"}
    outcome, loaded = attack(docker_client, task_dir, workspace, env=env, before=before, after=_loaded_marks)
    assert (outcome.reward, outcome.masked) == (0.5, False), outcome
    (tmp_path / "loaded").write_text(loaded)
    users = {user for _, user in loaded_by(tmp_path / "loaded")}
    assert "1000" in users, "the hook, the agent's own, keeps the image's environment"
    assert "0" not in users, loaded


def test_the_answers_are_closed_to_the_program_verify_runs(docker_client, tmp_path):
    source = """
        import subprocess
        def verify(workspace, task_data):
            seen = subprocess.run(["cat", "/tests/task_data.json"], capture_output=True, text=True)
            return {"reward": float(task_data["answer"] == "hidden"), "leaked": float("hidden" in seen.stdout)}
    """
    task_dir = write(
        tmp_path / "task",
        {
            "task.toml": '[verifier]\nuser = "grader"\n',
            "tests/verifier.py": source,
            "task_data.json": '{"answer": "hidden"}',
        },
    )
    outcome, _ = attack(docker_client, task_dir, write(tmp_path / "ws", {}))
    assert (outcome.reward, outcome.metrics) == (1.0, {"leaked": 0.0}), outcome


def test_an_agent_working_inside_the_logs_folder_cannot_get_masked(docker_client, tmp_path):
    churn = (
        "cd /logs/verifier/mine && exec python3 -c 'import os\ni = 0\nwhile True:\n"
        '    open("f%d" % i, "w").close()\n    i += 1\n    if i > 20: os.unlink("f%d" % (i - 20))\''
    )

    async def before(sandbox: DockerSandbox) -> None:
        await sandbox.exec("mkdir -p /logs/verifier/mine && chmod 777 /logs/verifier /logs/verifier/mine", user="root")
        await leave_behind(sandbox, churn)

    files = {"task.toml": '[agent]\nuser = "agent"\n', "tests/verifier.py": ANSWER, "task_data.json": '{"answer": "y"}'}
    outcome, _ = attack(
        docker_client, write(tmp_path / "task", files), write(tmp_path / "ws", {"answer.txt": "x"}), before=before
    )
    assert (outcome.reward, outcome.masked, outcome.failure_kind) == (0.0, False, None), outcome


def test_without_a_python_root_runs_nothing_from_the_tasks_path(docker_client, tmp_path):
    from images import base_image

    files = {
        "bin/rm": "#!/bin/sh\necho rm >> /workspace/hijacked\n",
        "bin/python3": "#!/bin/sh\necho python3 >> /workspace/hijacked\n",
    }
    workspace = write(tmp_path / "ws", files)
    task_dir = write(tmp_path / "task", {"tests/verifier.py": "def verify():\n    return 1.0\n"})
    plan = plan_verification(load_task(task_dir))

    async def run() -> tuple:
        sandbox = DockerSandbox(
            base_image(docker_client), workspace=workspace, labels=LABEL, client=docker_client, workdir="/workspace",
            env={"PATH": "/workspace/bin:/usr/local/bin:/usr/bin:/bin"},
        )  # fmt: skip
        async with sandbox:
            outcome = await run_verification(plan, sandbox)
            return outcome, (await sandbox.exec("cat /workspace/hijacked 2>/dev/null; true", user="root")).stdout

    outcome, hijacked = asyncio.run(run())
    assert hijacked == "" and outcome.reward == 0.0 and outcome.failure_kind == "harbor:missing_reward", outcome


# Prepended to an encodings/__init__.py: records who started the interpreter, in /workspace/hijacked.
ENCODINGS_TRAP = (
    "import posix; fd = posix.open('/workspace/hijacked', posix.O_WRONLY | posix.O_APPEND | posix.O_CREAT, 0o666);"
    " posix.write(fd, b'encodings %d\\n' % posix.geteuid())"
)


def assert_root_never_starts_the_trapped_interpreter(
    client: Any, tmp_path: Path, setup: List[Tuple[str, str]], interpreter: str
) -> None:
    """Runs ``setup`` ((script, user) pairs) in the sandbox, shows the trapped ``interpreter`` runs the
    agent's encodings for whoever starts it, then grades a root verifier with its folder first on PATH:
    root must never start it, and the run scores as the next interpreter on PATH grades it."""

    async def before(sandbox: DockerSandbox) -> None:
        await sandbox.exec("chmod 777 /workspace", user="root")
        for script, user in setup:
            made = await sandbox.exec(textwrap.dedent(script), user=user)
            assert made.return_code == 0, made
        probe = await sandbox.exec(f"{interpreter} -c pass; cat /workspace/hijacked", user="agent")
        assert "encodings 1000" in probe.stdout, probe  # the trap works on whoever starts it
        await sandbox.exec("rm -f /workspace/hijacked", user="root")

    async def look(sandbox: DockerSandbox) -> str:
        return (await sandbox.exec("cat /workspace/hijacked 2>/dev/null; true", user="root")).stdout

    task_dir = write(tmp_path / "task", {"tests/verifier.py": "def verify():\n    return 0.5\n"})
    env = {"PATH": f"{interpreter.rsplit('/', 1)[0]}:/usr/local/bin:/usr/bin:/bin"}
    outcome, hijacked = attack(client, task_dir, write(tmp_path / "ws", {}), before=before, after=look, env=env)
    assert hijacked == "", hijacked
    assert (outcome.reward, outcome.masked) == (0.5, False), outcome


def test_a_venv_the_agent_can_swap_is_never_started_by_root(docker_client, tmp_path):
    # The agent owns /opt/venv, on the task's PATH: it points the venv's pyvenv.cfg at a copy of the
    # standard library whose encodings package (imported by every interpreter start) is its own.
    _, volumes = users_image(docker_client)
    build = Path(next(iter(volumes)))
    version = build.name.rsplit(".", 1)[0]
    swap = f"""
        real={build}/lib/python{version}
        mkdir -p /opt/venv/bin /opt/venv/fake/bin /opt/venv/fake/lib/python{version}
        ln -s {build}/bin/python{version} /opt/venv/bin/python3
        ln -s {build}/bin/python{version} /opt/venv/fake/bin/python3
        for entry in $real/*; do ln -s $entry /opt/venv/fake/lib/python{version}/; done
        rm /opt/venv/fake/lib/python{version}/encodings
        cp -r $real/encodings /opt/venv/fake/lib/python{version}/encodings
        echo "{ENCODINGS_TRAP}" > /tmp/evil
        cat /tmp/evil $real/encodings/__init__.py > /opt/venv/fake/lib/python{version}/encodings/__init__.py
        printf 'home = /opt/venv/fake/bin\\n' > /opt/venv/pyvenv.cfg
    """
    setup = [("mkdir -p /opt/venv && chown agent /opt/venv", "root"), (swap, "agent")]
    assert_root_never_starts_the_trapped_interpreter(docker_client, tmp_path, setup, "/opt/venv/bin/python3")


def test_a_standard_library_the_agent_owns_is_never_started_by_root(docker_client, tmp_path):
    # The image installs an interpreter in /opt/py and gives the agent its standard library (a chown -R
    # of lib/python3.X, so that it can install packages), not the interpreter: the agent puts its code
    # in encodings, which every interpreter start imports before the runner can look.
    _, volumes = users_image(docker_client)
    build = Path(next(iter(volumes)))
    version = build.name.rsplit(".", 1)[0]
    lib = f"/opt/py/lib/python{version}"
    install = f"""
        mkdir -p /opt/py/bin {lib}
        cp {build}/bin/python{version} /opt/py/bin/python3
        for entry in {build}/lib/python{version}/*; do ln -s $entry {lib}/; done
        rm {lib}/encodings
        cp -r {build}/lib/python{version}/encodings {lib}/encodings
        chown -R agent {lib}
    """
    trap = f"""
        echo "{ENCODINGS_TRAP}" > /tmp/evil
        cat /tmp/evil {build}/lib/python{version}/encodings/__init__.py > {lib}/encodings/__init__.py
    """
    setup = [(install, "root"), (trap, "agent")]
    assert_root_never_starts_the_trapped_interpreter(docker_client, tmp_path, setup, "/opt/py/bin/python3")


def test_site_packages_another_user_can_write_mask_the_sample(docker_client, tmp_path):
    image, volumes = users_image(docker_client)
    build = Path(next(iter(volumes)))
    site = f"{build}/lib/python{build.name.rsplit('.', 1)[0]}/site-packages"
    task_dir = write(tmp_path / "task", {"tests/verifier.py": "def verify():\n    return 0.5\n"})
    # The build is bind-mounted read-only: the test mounts a writable copy of nothing over site-packages.
    scratch = tmp_path / "site"
    scratch.mkdir()
    scratch.chmod(0o777)
    plan = plan_verification(load_task(task_dir))

    async def run():
        sandbox = DockerSandbox(
            image, workspace=write(tmp_path / "ws", {}), labels=LABEL, client=docker_client,
            volumes={**volumes, str(scratch): {"bind": site, "mode": "rw"}},
        )  # fmt: skip
        async with sandbox:
            return await run_verification(plan, sandbox)

    outcome = asyncio.run(run())
    assert outcome.masked and outcome.mask_reason == "verifier_error" and "another user" in outcome.detail, outcome


HIDER = """
import os, subprocess, sys
CODE = '''
import os, time
if os.fork(): os._exit(0)
os.setsid()
if os.fork(): os._exit(0)
open("/proc/self/comm", "w").write("nl\\\\nhide")  # a newline in its name, to break a line-wise scan
time.sleep(3)
while True:
    open("/tmp/hider-alive", "w").write(str(os.getpid()))
    time.sleep(0.2)
'''
def verify():
    subprocess.run([sys.executable, "-c", CODE])
    return 0.0
"""


def test_a_daemon_with_a_newline_in_its_name_does_not_survive(docker_client, tmp_path):
    task_dir = write(tmp_path / "task", {"task.toml": '[verifier]\nuser = "grader"\n', "tests/verifier.py": HIDER})

    async def after(sandbox: DockerSandbox) -> str:
        await asyncio.sleep(4)
        return (await sandbox.exec("cat /tmp/hider-alive 2>/dev/null; true", user="root")).stdout

    outcome, alive = attack(docker_client, task_dir, write(tmp_path / "ws", {}), after=after)
    assert (outcome.reward, outcome.masked) == (0.0, False), outcome
    assert alive == "", f"a process started during grading outlived it (pid {alive.strip()})"


@pytest.mark.parametrize("verifier_user, uid", [(None, "0"), ("grader", "1001")])
def test_a_set_id_program_left_by_grading_lifts_nobody(docker_client, tmp_path, verifier_user, uid):
    source = """
        import os, shutil
        def verify():
            shutil.copy("/bin/bash", "/tmp/lift")  # the agent's program, run by verify
            os.chmod("/tmp/lift", 0o6755)
            return 0.0
    """
    toml = f'[verifier]\nuser = "{verifier_user}"\n' if verifier_user else ""
    task_dir = write(tmp_path / "task", {"task.toml": toml, "tests/verifier.py": source})

    async def after(sandbox: DockerSandbox) -> str:
        made = await sandbox.exec("stat -c %u /tmp/lift", user="root")
        assert made.stdout.strip() == uid, made  # the trap is there, owned by the verifier's user
        return (await sandbox.exec("/tmp/lift -p -c 'id -u'", user="agent")).stdout.strip()

    outcome, lifted = attack(docker_client, task_dir, write(tmp_path / "ws", {}), after=after)
    assert outcome.reward == 0.0 and lifted == "1000", lifted


# A POSIX ACL as the kernel's system.posix_acl_* attribute holds it: user::rwx, group::---, mask::rwx,
# other::r-x, so whatever is made in the folder is open to everyone whatever the umask and mode.
OPEN_ACL = """
import os, struct
def open_acl(path, *names):
    entries = [(0x01, 7), (0x04, 0), (0x10, 7), (0x20, 5)]
    value = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", tag, perm, 0xFFFFFFFF) for tag, perm in entries)
    for name in names:
        os.setxattr(path, "system.posix_acl_" + name, value)
"""

LEAVES_AN_ACL_ON_THE_LOGS = (
    OPEN_ACL
    + """
def verify():
    open_acl("/logs/verifier", "default", "access")  # its program would, as the verifier's user
    return 0.0
"""
)

LEAVES_AN_ACL_ON_THE_TESTS = (
    "#!/bin/bash\npython3 - <<'PY'\n"
    + OPEN_ACL
    + """
open_acl("/tests", "default", "access")
PY
echo 0 > /logs/verifier/reward.txt
"""
)

FINDS_NO_ACL = """
import os
def acl(path, name):
    try:
        return os.getxattr(path, "system.posix_acl_" + name)
    except OSError:
        return None
def verify():
    left = [(path, name) for path in ("/tests", "/logs/verifier") for name in ("access", "default") if acl(path, name)]
    stdout = os.stat("/logs/verifier/test-stdout.txt").st_mode & 0o777
    print("left", left, "test-stdout", oct(stdout))
    return float(not left and stdout == 0o600)
"""


@pytest.mark.parametrize("first", ["verifier.py", "test.sh"])
def test_an_acl_one_grading_leaves_on_its_folders_is_gone_from_the_next(docker_client, tmp_path, first):
    """Red team 48: step 1's program, run as the verifier's user (who owns /logs/verifier during the
    run, and /tests too for a task's own test.sh), left a default ACL on the folder. Grading only fixed
    owner and mode, so step 2's root-only test-stdout.txt (verify's prints) and /tests opened to all."""
    image, volumes = users_image(docker_client)
    user = '[agent]\nuser = "agent"\n[verifier]\nuser = "grader"\n'
    leaves = {"verifier.py": LEAVES_AN_ACL_ON_THE_LOGS, "test.sh": LEAVES_AN_ACL_ON_THE_TESTS}[first]
    step_one = write(tmp_path / "one", {"task.toml": user, f"tests/{first}": leaves})
    step_two = write(tmp_path / "two", {"task.toml": user, "tests/verifier.py": FINDS_NO_ACL})

    async def run() -> tuple:
        sandbox = DockerSandbox(
            image, workspace=write(tmp_path / "ws", {}), volumes=volumes, labels=LABEL, client=docker_client
        )
        async with sandbox:
            first_outcome = await run_verification(plan_verification(load_task(step_one)), sandbox)
            left = await sandbox.exec("getfattr -d -m - /tests /logs/verifier 2>&1; ls -ld /tests /logs/verifier")
            return first_outcome, left.stdout, await run_verification(plan_verification(load_task(step_two)), sandbox)

    first_outcome, left, outcome = asyncio.run(run())
    assert (first_outcome.reward, first_outcome.masked) == (0.0, False), first_outcome
    assert (outcome.reward, outcome.masked) == (1.0, False), (outcome.stdout, outcome.detail, left)
