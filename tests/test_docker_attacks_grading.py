"""Red team, round 20: grading cut short, results written ahead of the real ones, a planted cache
tag (the done marker and bytecode per image). Each found a way through; each is closed: the engine is
asked for the exit status wherever code of the task could reach grading's shell, results with anything
in front of the real ones are damage, and the cache tag never drops a task's own files."""

import shlex
import sys
from pathlib import Path
from typing import Any, Tuple

import pytest
from support import IN_SANDBOX, write_files

from nemo_gym.data.tasks.harbor.verification import GRADING_BROKEN

sys.path.insert(0, str(Path(__file__).parent))

pytestmark = pytest.mark.docker
MARKER = "nemo-gym-docker-attack"


def write(root: Path, files: dict) -> Path:
    return write_files(root, files, dedent=True)


# ---------------------------------------------------------------------------------------------
# Area 1: the done marker. A root verify's program stops grading's shell, waits for the runner's
# genuine report, writes the results itself followed by the marker, and kills the shell: finish
# (kill_strays, the lock, removing /tests) never runs, and the host takes exit status 0.
# The attack is CUT_SHORT, below (with a handshake: verify returns once the shell is stopped).


def test_a_root_verify_that_cuts_grading_short_is_masked(docker_client, tmp_path):
    from test_docker_attacks import attack, grading_survivors

    task_dir = write(tmp_path / "task", {"tests/verifier.py": CUT_SHORT, "task_data.json": '{"answer": "secret"}'})

    async def after(sandbox: Any) -> Any:
        survivors = await grading_survivors(sandbox)
        left = (await sandbox.exec("ls -A /tests; stat -c %a /logs/verifier", user="root")).stdout
        return survivors, left

    outcome, (survivors, left) = attack(docker_client, task_dir, write(tmp_path / "ws", {}), after=after)
    # Nothing started during grading survives it, or the sample is masked: the engine saw a killed shell.
    # (An attack that lost its race leaves the honest outcome and nothing behind: that is fine too.)
    honest = (outcome.reward, outcome.masked, survivors) == (0.75, False, "")
    assert (outcome.masked and outcome.mask_reason == "sandbox_error") or honest, (outcome, survivors, left)


# The same for a task's own test.sh run as a [verifier].user: the second grading exec's shell is that
# user's, so the program test.sh runs (the agent's, in a coding task) reaches its fd 6 and can kill it.
OWN_DAEMON = (
    IN_SANDBOX
    + r"""
import os, signal, time
bash = grading_shell()
if os.fork():
    os._exit(0)
os.setsid()
pipe = os.open(f"/proc/{bash}/fd/6", os.O_WRONLY)
os.kill(bash, signal.SIGSTOP)
files = {"reward.txt": b"1\n", "meta": b"status 0\nelapsed_cs 1\nkinds reward.txt=file \nskipped 0\n"}
buffer = pack_results(files)
os.write(pipe, buffer + b"\nnemo-gym-grading-done\n")
os.close(pipe)
time.sleep(0.5)  # test.sh has written its 0 by now
os.kill(bash, signal.SIGKILL)
os.execvp("bash", ["bash", "-c", "exec -a MARKER-daemon sleep 600"])
""".replace("MARKER", MARKER)
)


# With setpriv in the image, grading's root shell runs test.sh as that user itself, out of its programs'
# reach; without it, test.sh runs in an exec of that user's own, and reclaim follows.
SETPRIV = pytest.mark.parametrize("setpriv", [True, False], ids=["one exec", "no setpriv"])


@SETPRIV
def test_a_shell_verifiers_user_that_cuts_grading_short_scores_0_and_leaves_nothing_running(
    docker_client, tmp_path, setpriv
):
    """It was masked (its forged results, then a killed shell); red teams 77 and 78: that user's programs
    can end its exec any way they like, so a grading that did not end whole scores 0, and reclaim, as
    root, kills what the run left."""
    from test_docker_attacks import attack, grading_survivors

    task_dir = write(
        tmp_path / "task",
        {
            "task.toml": '[verifier]\nuser = "grader"\n',
            "tests/test.sh": "python3 /workspace/prog.py </dev/null >/dev/null 2>&1\nsleep 1\necho 0 > /logs/verifier/reward.txt\n",
        },
    )
    workspace = write(tmp_path / "ws", {"prog.py": OWN_DAEMON})
    outcome, survivors = attack(docker_client, task_dir, workspace, after=grading_survivors, setpriv=setpriv)
    assert (outcome.reward, outcome.masked, survivors) == (0.0, False, ""), (outcome, survivors)


# Red team 82: the agent's leftover, started before grading, fills what is left of the disk as the
# program test.sh ran as `grader` (which read the answers: a wrong one) kills the grading shell, and
# keeps taking whatever is freed. Reclaim, which stops it and empties /tests, used to let it go on
# before reading the disk, which it had filled again by then: a forfeit's 0 became a disk_full mask.
REFILLER = r"""
import os, time
fd = os.open("/tmp/filler", os.O_WRONLY | os.O_CREAT, 0o600)
os.write(fd, bytes(12 << 20))  # the rollout's doing: most of the disk, 4 MB left
while not os.path.exists("/tmp/go"):
    time.sleep(0.001)
end = time.time() + 60
while time.time() < end:
    for size in (1 << 20, 4096):
        try:
            os.write(fd, bytes(size))
        except OSError:
            pass
"""
KILLS_ITS_SHELL = (
    IN_SANDBOX
    + r"""
import os, signal
open("/tmp/go", "w").close()
os.kill(grading_shell(), signal.SIGKILL)
"""
)


def test_a_disk_filled_after_a_forfeit_never_masks_it(docker_client, tmp_path):
    """Without setpriv (test.sh in an exec of its user's, which can be cut short: a forfeit); with it, the
    root shell is out of reach, and a disk filled while test.sh runs masks, as for any test.sh."""
    import subprocess

    from test_attacks import needs_root
    from test_docker_attacks import attack, leave_behind

    needs_root()
    disk = tmp_path / "disk"  # one small disk under /tests, /logs and /tmp, as a sandbox's one disk
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(disk)], check=True)
    try:
        for folder in ("tests", "logs", "tmp"):
            (disk / folder).mkdir()
        (disk / "tmp").chmod(0o1777)
        task_dir = write(
            tmp_path / "task",
            {
                "task.toml": '[verifier]\nuser = "grader"\n',
                "tests/test.sh": "python3 /workspace/prog.py\necho 0 > /logs/verifier/reward.txt\n",
            },
        )
        workspace = write(tmp_path / "ws", {"prog.py": KILLS_ITS_SHELL})

        async def before(sandbox: Any) -> None:
            await leave_behind(sandbox, f"exec python3 -c {shlex.quote(REFILLER)}")

        volumes = {str(disk / folder): {"bind": f"/{folder}", "mode": "rw"} for folder in ("tests", "logs", "tmp")}
        outcome, _ = attack(docker_client, task_dir, workspace, before=before, volumes=volumes, setpriv=False)
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=True)
    assert (outcome.reward, outcome.masked, outcome.failure_kind) == (0.0, False, "harbor:missing_reward"), outcome


# Without killing anything: results written into fd 6 before finish packs its own are read first
# (tarfile stops at the first end-of-archive; what follows is never looked at). Sums included, for
# the parent commit's check.
PREFIX_FORGER = (
    IN_SANDBOX
    + r"""
files = {"reward.txt": b"1\n", "meta": b"status 0\nelapsed_cs 1\nkinds reward.txt=file \nskipped 0\n"}
with open(f"/proc/{grading_shell()}/fd/6", "wb") as pipe:
    pipe.write(pack_results(files))
"""
)


@SETPRIV
def test_results_a_shell_verifiers_user_writes_ahead_of_the_real_ones_are_damage(docker_client, tmp_path, setpriv):
    from test_docker_attacks import attack

    task_dir = write(
        tmp_path / "task",
        {
            "task.toml": '[verifier]\nuser = "grader"\n',
            "tests/test.sh": "python3 /workspace/prog.py </dev/null\necho 0 > /logs/verifier/reward.txt\n",
        },
    )
    outcome, _ = attack(docker_client, task_dir, write(tmp_path / "ws", {"prog.py": PREFIX_FORGER}), setpriv=setpriv)
    assert (outcome.reward, outcome.masked) == (0.0, False), outcome
    # Only an exec of that user's own has a results pipe its programs can reach.
    assert ("more than one tar" in outcome.detail) == (not setpriv), outcome


# ---------------------------------------------------------------------------------------------
# Area 2: the cache tag. for_tag drops every staged `__pycache__/*.cpython-3XY.pyc` of another tag,
# the task's own files included. A task that ships a module as unchecked-hash bytecode (its .py a
# stub: an obfuscated grader) is graded by that bytecode under stock Harbor and while the tag is
# right; a tag a root verify of any task on the same image planted makes the server drop it.
POISONER = """
import glob
def verify():
    for out in glob.glob("/tests/.gym-out-*"):
        import os
        path = os.path.join(out, "cache_tag")
        try:
            os.unlink(path)
        except OSError:
            pass
        with open(path, "w") as handle:
            handle.write("cpython-38")
    return 0.0
"""

OBFUSCATED = """
import checker
def verify(workspace):
    return float((workspace / "answer.txt").read_text().strip() == checker.ANSWER)
"""


def test_a_planted_cache_tag_never_changes_another_tasks_score(docker_client, tmp_path, monkeypatch):
    import subprocess

    from images import python_image
    from test_docker import verify_in

    from nemo_gym.data.tasks.harbor import verification
    from nemo_gym.data.tasks.harbor.bytecode import ImageTags

    tags = ImageTags()
    monkeypatch.setattr(verification, "IMAGE_TAGS", tags)
    image, volumes = python_image(docker_client, "3.12")
    # checker's bytecode for 3.12, unchecked hash (PEP 552 flags 0b01): used whatever the stub says
    from support import pyenv_python

    py312 = pyenv_python("3.12")
    source = 'ANSWER = "42"\n'
    code = subprocess.run(
        [
            str(py312),
            "-c",
            "import sys, marshal, importlib.util; c = compile(sys.argv[1], 'checker.py', 'exec');"
            "sys.stdout.buffer.write(importlib.util.MAGIC_NUMBER + b'\\x01\\0\\0\\0' + b'\\0' * 8 + marshal.dumps(c))",
            source,
        ],
        capture_output=True,
        check=True,
    ).stdout
    victim = tmp_path / "victim"
    (victim / "tests" / "__pycache__").mkdir(parents=True)
    (victim / "tests" / "verifier.py").write_text(OBFUSCATED)
    (victim / "tests" / "checker.py").write_text("ANSWER = None  # shipped compiled\n")
    (victim / "tests" / "__pycache__" / "checker.cpython-312.pyc").write_bytes(code)
    (victim / "workspace").mkdir()
    (victim / "workspace" / "answer.txt").write_text("42")
    poisoner = write(tmp_path / "poisoner", {"tests/verifier.py": POISONER})

    first = verify_in(image, victim, volumes=volumes, client=docker_client, workspace=victim / "workspace")
    assert (first.reward, first.masked, tags.get(image)) == (1.0, False, "cpython-312"), first
    verify_in(image, poisoner, volumes=volumes, client=docker_client, workspace=tmp_path)
    assert tags.get(image) == "cpython-38"  # a root verify can write it: a hint, never more
    second = verify_in(image, victim, volumes=volumes, client=docker_client, workspace=victim / "workspace")
    assert (second.reward, second.masked) == (1.0, False), (second, tags.get(image))


# Red team, round 21: a [verifier].user that is uid 0 by a name with a group (root:agent, 0:1000) took
# the non-root path (the runner switches to it), so the engine was not asked how grading ended; verify,
# root all the same, stopped the shell and printed whole results (sums included) and the marker.
DAEMON = (
    IN_SANDBOX
    + r"""
import os, signal, sys, time
bash, runner = int(sys.argv[1]), int(sys.argv[2])
if os.fork(): os._exit(0)
os.setsid()
if os.fork(): os._exit(0)
pipe = os.open(f"/proc/{bash}/fd/6", os.O_WRONLY)
os.kill(bash, signal.SIGSTOP)
open("/tmp/rt-stopped", "w").close()
def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
while alive(runner):
    time.sleep(0.01)
time.sleep(0.2)
out = [name for name in os.listdir("/tests") if name.startswith(".gym-out-")][0]
files = {
    "report": open(f"/tests/{out}/report", "rb").read(),
    "reward.json": open("/logs/verifier/reward.json", "rb").read(),
    "meta": b"status 0\nelapsed_cs 1\nkinds reward.json=file \nskipped 0\n",
}
os.write(pipe, pack_results(files) + b"\nnemo-gym-grading-done\n")
os.close(pipe)
os.kill(bash, signal.SIGKILL)
os.execvp("bash", ["bash", "-c", "exec -a MARKER-daemon sleep 600"])
""".replace("MARKER", MARKER)
)
CUT_SHORT = (
    IN_SANDBOX
    + f"DAEMON = {DAEMON!r}\n"
    + r"""
import os, subprocess, sys, time
def verify():
    assert os.getuid() == 0, os.getuid()
    os.setgroups([0]); os.setgid(0)  # uid 0 keeps CAP_SETGID: back to the shell's gid, /proc/<bash>/fd opens
    subprocess.run([sys.executable, "-c", DAEMON, str(grading_shell()), str(os.getpid())])
    for _ in range(500):
        if os.path.exists("/tmp/rt-stopped"):
            break
        time.sleep(0.01)
    return 0.75
"""
)


@pytest.mark.parametrize("user", ["root:agent", "0:1000", "root:0"])
def test_a_uid0_verifier_user_with_a_group_that_cuts_grading_short_is_masked(docker_client, tmp_path, user):
    from test_docker_attacks import attack, grading_survivors

    files = {"task.toml": f'[verifier]\nuser = "{user}"\n', "tests/verifier.py": CUT_SHORT}
    task_dir = write(tmp_path / "task", files)
    outcome, survivors = attack(docker_client, task_dir, write(tmp_path / "ws", {}), after=grading_survivors)
    honest = (outcome.reward, outcome.masked, survivors) == (0.75, False, "")  # the attack lost its race
    assert (outcome.masked and outcome.mask_reason == "sandbox_error") or honest, (outcome, survivors)


def test_a_verifier_user_that_hides_uid_0_behind_another_name_is_refused(docker_client, tmp_path):
    # The server guards grading by the user's name; a name that is uid 0 would get a non-root's guards.
    from test_docker_attacks import attack

    async def alias(sandbox: Any) -> None:
        await sandbox.exec("echo 'toor:x:0:0::/root:/bin/sh' >> /etc/passwd", user="root")

    task_dir = write(tmp_path / "task", {"task.toml": '[verifier]\nuser = "toor"\n', "tests/verifier.py": CUT_SHORT})
    outcome, _ = attack(docker_client, task_dir, write(tmp_path / "ws", {}), before=alias)
    assert (outcome.reward, outcome.masked) == (0.0, False), outcome
    assert "is uid 0: name it root" in outcome.stdout, outcome


# ---------------------------------------------------------------------------------------------
# Red team 39: a mask on demand. The agent's leftover process has the verifier's uid ([agent].user
# = [verifier].user). While verify runs, /logs/verifier is that uid's: the process makes a folder
# there and keeps its working directory in it, so finish's lock on /logs/verifier does not shut it
# out. There it swaps, atomically and forever, each of 60 names between a file and a folder
# (renameat2 RENAME_EXCHANGE): a name is a file when finish looks and a folder when `head -c` opens
# it, and the failed copy masked the sample. Now every process but grading's stays stopped from
# kill_strays until finish has read /logs/verifier.
SWAPPER = r"""
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
deadline = time.time() + 60
while time.time() < deadline:
    try:
        os.chdir("/logs/verifier")
        os.mkdir("sub")
        os.chdir("sub")
        break
    except OSError:
        time.sleep(0.001)
names = []
for i in range(60):
    open("f%02d" % i, "w").write("x")
    os.mkdir("g%02d" % i)
    names.append((b"f%02d" % i, b"g%02d" % i))
while time.time() < deadline:
    for a, b in names:
        libc.renameat2(-100, a, -100, b, 2)  # AT_FDCWD, RENAME_EXCHANGE
"""


def test_an_agent_sharing_the_verifiers_uid_cannot_mask_its_wrong_answer(docker_client, tmp_path):
    from test_docker_attacks import attack, leave_behind

    toml = '[agent]\nuser = "agent"\n[verifier]\nuser = "agent"\n'
    source = "import time\ndef verify():\n    time.sleep(0.5)\n    return 0.0\n"  # the wrong answer's 0
    task_dir = write(tmp_path / "task", {"task.toml": toml, "tests/verifier.py": source})
    workspace = write(tmp_path / "ws", {"swap.py": SWAPPER})

    async def before(sandbox: Any) -> None:
        await leave_behind(sandbox, "exec python3 /workspace/swap.py")

    async def after(sandbox: Any) -> str:  # the agent's process goes on afterwards, as shared mode keeps it
        return (await sandbox.exec("grep -h State: /proc/[0-9]*/status | sort | uniq -c", user="root")).stdout

    for _ in range(3):
        outcome, states = attack(docker_client, task_dir, workspace, before=before, after=after)
        assert (outcome.reward, outcome.masked) == (0.0, False), outcome
        assert "stopped" not in states, states


# ---------------------------------------------------------------------------------------------
# Red team 40: an image whose USER is not root. Docker gives the execs of a container that runs as
# such a user no capabilities, and under no-new-privileges `exec -u root` cannot gain them: grading's
# handover failed (chown: Operation not permitted) and every sample was masked. And the keep-alive
# ran as that user, the agent's: its last command killed it, the container stopped, and grading's
# failed exec masked a wrong answer's 0. Now the container runs as root and a command that names no
# user runs as the image's USER; an image whose own ENTRYPOINT runs keeps the USER's container.
AGENT_IMAGE = "nemo-gym-test/users-as-agent:1"
AS_AGENT_VERIFIER = "def verify(workspace, task_data):\n    return float((workspace / 'answer.txt').read_text() == task_data['answer'])\n"


@pytest.mark.parametrize("entrypoint", [False, True], ids=["plain", "its-entrypoint"])
def test_an_image_whose_user_is_the_agents_grades_and_its_keep_alive_is_not_the_agents(
    docker_client, tmp_path, entrypoint
):
    import asyncio
    import io

    from images import LABEL, users_image

    from nemo_gym.data.tasks.harbor.image_build import ImageRecord
    from nemo_gym.data.tasks.harbor.sandboxes.docker import DockerSandbox
    from nemo_gym.data.tasks.harbor.task import load_task
    from nemo_gym.data.tasks.harbor.verification import plan_verification, run_verification

    base, volumes = users_image(docker_client)
    if not docker_client.images.list(name=AGENT_IMAGE):
        dockerfile = io.BytesIO(f"FROM {base}\nUSER agent\n".encode())
        docker_client.images.build(fileobj=dockerfile, tag=AGENT_IMAGE, labels=LABEL, rm=True)
    record = None
    if entrypoint:
        script = ': > /tmp/entrypoint-ran; exec "$@"'
        record = ImageRecord(AGENT_IMAGE, ["/bin/sh", "-c", script, "ep"], None, None, "agent", "", {})
    files = {"task.toml": "", "task_data.json": '{"answer": "42"}', "tests/verifier.py": AS_AGENT_VERIFIER}
    plan = plan_verification(load_task(write(tmp_path / "task", files)))

    async def run(answer: str) -> Any:
        workspace = write(tmp_path / f"ws-{answer}", {"answer.txt": answer})
        sandbox = DockerSandbox(
            AGENT_IMAGE, workspace=workspace, volumes=volumes, labels=LABEL, client=docker_client,
            workdir="/workspace", record=record,
        )  # fmt: skip
        async with sandbox:
            who = (await sandbox.exec("id -un")).stdout.strip()
            if entrypoint:
                ran = (await sandbox.exec("stat -c %U /tmp/entrypoint-ran")).stdout.strip()
                assert ran == "agent", "the image's ENTRYPOINT runs as its USER, as under Harbor"
            else:
                await sandbox.exec("kill $(cat /proc/1/task/1/children)")  # the agent's last command
            return who, await run_verification(plan, sandbox)

    for answer, reward in (("42", 1.0), ("41", 0.0)):
        who, outcome = asyncio.run(run(answer))
        assert who == "agent", "a command that names no user runs as the image's USER"
        assert (outcome.reward, outcome.masked) == (reward, False), outcome


# ---------------------------------------------------------------------------------------------
# A host that gives up on grading after kill_strays stopped every other process (finish hung): the
# agent's own processes, which shared mode keeps running (a service a later step needs), stayed
# stopped for good. The host now continues them, best effort, once it has given up.
KEEPER = "echo $$ > /tmp/keeper.pid\nexec sleep 600"


def test_a_host_that_gives_up_on_grading_leaves_no_agent_process_stopped(docker_client, tmp_path):
    from test_docker_attacks import attack, leave_behind

    from nemo_gym.data.tasks.harbor.rewards import VERIFIER_TIMEOUT
    from nemo_gym.data.tasks.harbor.sandboxes.base import ExecTimeout

    toml = '[agent]\nuser = "agent"\n'
    task_dir = write(tmp_path / "task", {"task.toml": toml, "tests/verifier.py": "def verify():\n    return 1.0\n"})
    state = "grep -h State: /proc/$(cat /tmp/keeper.pid)/status"

    async def before(sandbox: Any) -> None:
        await leave_behind(sandbox, KEEPER)
        real = sandbox.exec_piped

        async def exec_piped(*args: Any, **options: Any) -> Any:
            await real(*args, **options)  # grading, given up after kill_strays stopped the rest (a hang)
            await sandbox.exec("kill -STOP $(cat /tmp/keeper.pid)", user="root")
            assert "stopped" in (await sandbox.exec(state, user="root")).stdout
            raise ExecTimeout("the command outlived 1 s")

        sandbox.exec_piped = exec_piped

    async def after(sandbox: Any) -> str:
        return (await sandbox.exec(state, user="root")).stdout

    outcome, seen = attack(docker_client, task_dir, write(tmp_path / "ws", {}), before=before, after=after)
    assert (outcome.reward, outcome.failure_kind) == (0.0, VERIFIER_TIMEOUT), outcome
    assert "sleeping" in seen and "stopped" not in seen, seen


# ---------------------------------------------------------------------------------------------
# Red team 41: the agent's leftover process holds write leases (which any owner may take) on files
# of its own, made 0666; the agent's program, which verify runs as the verifier's user, hard-links
# them into /logs/verifier, which that user owns during the run. Finish opened each link as root,
# and each open waited the kernel's lease-break-time (45 s) on the stopped holder: a few links held
# grading past the host's limit, and the abandoned grading ran on into the next step's, wiping its
# /tests (a right answer masked). Finish now opens only files of root's or the verifier's user there.
LEASER = """
import fcntl, os, signal, time
signal.signal(signal.SIGIO, signal.SIG_IGN)
held = []
os.makedirs("/workspace/leased", exist_ok=True)
for name in ("a", "b"):
    path = "/workspace/leased/" + name
    with open(path, "w") as handle:
        handle.write("1")
    os.chmod(path, 0o666)
    descriptor = os.open(path, os.O_RDONLY)
    fcntl.fcntl(descriptor, 1024, fcntl.F_WRLCK)  # F_SETLEASE
    held.append(descriptor)
open("/tmp/leases-held", "w").close()
time.sleep(600)
"""
LINKER = """
import os
os.link("/workspace/leased/a", "/logs/verifier/out.txt")
os.link("/workspace/leased/b", "/logs/verifier/reward.txt")
print(42)
"""


# The verify of red teams 41 and 42: it runs the agent's solution.py as [verifier].user.
RUNS_SOLUTION = (
    "import subprocess, sys\n"
    "def verify(workspace):\n"
    "    ran = subprocess.run([sys.executable, str(workspace / 'solution.py')], capture_output=True, text=True)\n"
    "    return float(ran.stdout.strip() == '42')\n"
)


def graded_beside_a_leaseholder(docker_client: Any, tmp_path: Path, solution: str, holder: str) -> tuple:
    """Grades RUNS_SOLUTION with ``holder`` left running as the agent's process (it says it is ready
    in /tmp/leases-held): the outcome and the seconds grading took."""
    import time

    from test_docker_attacks import attack, leave_behind

    toml = '[agent]\nuser = "agent"\n[verifier]\nuser = "grader"\ntimeout_sec = 30\n'
    task_dir = write(tmp_path / "task", {"task.toml": toml, "tests/verifier.py": RUNS_SOLUTION})
    workspace = write(tmp_path / "ws", {"solution.py": solution, "holder.py": holder})

    async def before(sandbox: Any) -> None:
        await leave_behind(sandbox, "exec python3 /workspace/holder.py")
        ready = "for i in $(seq 200); do [ -e /tmp/leases-held ] && exit 0; sleep 0.05; done; exit 1"
        assert (await sandbox.exec(ready)).return_code == 0, "the holder did not start"

    started = time.monotonic()
    outcome, _ = attack(docker_client, task_dir, workspace, before=before)
    return outcome, time.monotonic() - started


def test_leased_files_linked_into_the_logs_never_stall_grading(docker_client, tmp_path):
    outcome, took = graded_beside_a_leaseholder(docker_client, tmp_path, LINKER, LEASER)
    assert (outcome.reward, outcome.masked, outcome.failure_kind) == (1.0, False, None), outcome
    assert "out.txt" not in outcome.files and "reward.txt" not in outcome.files, outcome.files
    assert took < 40, f"grading waited on the leases ({took:.0f} s)"  # two stalls were 90 s


# Red team 42: the verifier's user leases files of its own in /logs/verifier (the owner check passes
# them) and hands the open descriptions (SCM_RIGHTS) to the agent's leftover process. A lease lives as
# long as its description, not its taker: kill_strays killed the taker, and every open of those files
# still waited 45 s. Finish now opens them without blocking (dd's O_NONBLOCK open fails at once).
HOLDER = """
import array, os, socket, time
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind("\\0gym-test-holder")
server.listen(5)
open("/tmp/leases-held", "w").close()
held = []
while True:
    peer, _ = server.accept()
    while True:
        message, ancillary, _, _ = peer.recvmsg(1, socket.CMSG_SPACE(4 * 4))
        if not message:
            break
        for _, _, data in ancillary:
            held.extend(array.array("i", data[: len(data) - len(data) % 4]))
        peer.send(b"k")
"""
PASSER = """
import array, fcntl, os, signal, socket
signal.signal(signal.SIGIO, signal.SIG_IGN)
peer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
peer.connect("\\0gym-test-holder")
for name in ("out0.txt", "out1.txt", "reward.txt"):
    path = "/logs/verifier/" + name
    with open(path, "w") as handle:
        handle.write("1")
    descriptor = os.open(path, os.O_RDONLY)
    fcntl.fcntl(descriptor, 1024, fcntl.F_WRLCK)  # F_SETLEASE, on a file of its own user's
    peer.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [descriptor]))])
    os.close(descriptor)
    peer.recv(1)
print(42)
"""


def test_leases_handed_to_the_agents_process_never_stall_grading(docker_client, tmp_path):
    outcome, took = graded_beside_a_leaseholder(docker_client, tmp_path, PASSER, HOLDER)
    assert (outcome.reward, outcome.masked, outcome.failure_kind) == (1.0, False, None), outcome
    assert not {"out0.txt", "out1.txt", "reward.txt"} & set(outcome.files), outcome.files
    assert took < 40, f"grading waited on the leases ({took:.0f} s)"  # three stalls were 135 s


def test_a_task_test_sh_run_as_another_user_cannot_aim_finishs_writes(docker_client, tmp_path):
    """A task's own test.sh run as [verifier].user owns /tests and /logs/verifier, as under Harbor; the
    run's out folder lies inside /tests, and finish writes there as root. Links planted in it (or the
    folder itself swapped) must not aim those writes at files of root's."""
    from test_docker_attacks import attack

    toml = '[agent]\nuser = "agent"\n[verifier]\nuser = "grader"\n'
    test_sh = (
        "out=$(ls -d /tests/.gym-out-* | head -n 1)\n"
        'ln -s /etc/gym-victim-reward "$out/reward.txt"\n'
        'ln -s /etc/gym-victim-meta "$out/meta"\n'
        "echo 1 > /logs/verifier/reward.txt\n"
    )
    task_dir = write(tmp_path / "task", {"task.toml": toml, "tests/test.sh": test_sh})

    async def after(sandbox: Any) -> str:
        return (await sandbox.exec("ls /etc/gym-victim-* 2>&1; true", user="root")).stdout

    outcome, seen = attack(docker_client, task_dir, write(tmp_path / "ws", {}), after=after)
    assert "No such file" in seen and "gym-victim" in seen, seen  # nothing written through the links
    assert (outcome.reward, outcome.masked) == (1.0, False), outcome


# Red team 43: the task's collect hook prints the agent's run log (`cat run.log`, timeout_sec = 1),
# and the agent made the log a link to /dev/zero or a FIFO nobody writes. The engine cannot stop an
# exec: the host gave up at the hook's timeout, the hook ran on (as root, the host's thread reading
# /dev/zero at a core's cost), and the sandbox's next grading (the next step's) waited for it until
# the host's limit masked that step, a wrong answer's 0 with it. Hooks now run under the sandbox's
# own timeout, which stops them where they run.
@pytest.mark.parametrize("log", ["ln -s /dev/zero run.log", "mkfifo run.log"], ids=["dev-zero", "fifo"])
def test_a_collect_hook_that_outlives_its_timeout_is_stopped_and_the_next_grading_scores(docker_client, tmp_path, log):
    import time

    from test_docker_attacks import attack

    from nemo_gym.data.tasks.harbor.task import load_task
    from nemo_gym.data.tasks.harbor.verification import plan_verification, run_verification

    toml = '[agent]\nuser = "agent"\n[[verifier.collect]]\ncommand = "cat run.log"\ntimeout_sec = 1\n'
    grade = 'if [ "$(cat /workspace/answer.txt)" = 42 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n'
    task_dir = write(tmp_path / "task", {"task.toml": toml, "tests/test.sh": grade})
    workspace = write(tmp_path / "ws", {"answer.txt": "41\n"})

    async def before(sandbox: Any) -> None:
        await sandbox.exec(f"cd /workspace && {log}", user="agent")

    async def after(sandbox: Any) -> Any:
        started = time.monotonic()
        second = await run_verification(plan_verification(load_task(task_dir)), sandbox)
        took = time.monotonic() - started
        hooks = (
            "for p in /proc/[0-9]*; do read -r c < $p/comm && [ $c = cat ] && echo ${p#/proc/}; done 2>/dev/null; true"
        )
        return second, took, (await sandbox.exec(hooks, user="root")).stdout.strip()

    outcome, (second, took, left) = attack(docker_client, task_dir, workspace, before=before, after=after)
    assert (outcome.reward, outcome.masked) == (0.0, False), outcome
    assert (second.reward, second.masked) == (0.0, False), second  # was masked after 165 s
    assert took < 30, f"the next grading waited for the hook ({took:.0f} s)"
    assert left == "", f"the hooks still run: {left}"


# Red team 44: the hook runs as the agent's user, so its `timeout` is a process of the agent's uid.
# The agent's leftover process traces it (same uid) and drops every signal it gets: its alarm never
# fires, and the hook's exec never ends. When the host's wait runs out now, a root exec kills what
# started since the hook did (but root's), which no tracer can stop, and the next grading scores.
TRACER = r"""
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
PTRACE_CONT, PTRACE_SEIZE = 7, 0x4206
uid, seen, traced = os.getuid(), set(), set()
open("/tmp/tracer-up", "w").close()
while True:
    for p in os.listdir("/proc"):
        if not p.isdigit() or p in seen:
            continue
        try:
            if os.stat("/proc/" + p).st_uid != uid or open(f"/proc/{p}/comm").read().strip() != "timeout":
                continue
        except OSError:
            continue
        seen.add(p)
        if libc.ptrace(PTRACE_SEIZE, int(p), None, None) == 0:
            traced.add(int(p))
            open("/tmp/tracer-seized", "w").close()
    while traced:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG | 0x40000000)
        except ChildProcessError:
            break
        if pid == 0:
            break
        if os.WIFSTOPPED(status):
            libc.ptrace(PTRACE_CONT, pid, None, None)
        else:
            traced.discard(pid)
    time.sleep(0.005)
"""


def test_a_hook_whose_bound_the_agent_defeats_is_reaped_and_the_next_grading_scores(docker_client, tmp_path):
    import time

    from test_docker_attacks import attack, leave_behind

    from nemo_gym.data.tasks.harbor.task import load_task
    from nemo_gym.data.tasks.harbor.verification import plan_verification, run_verification

    hook = '[[verifier.collect]]\ncommand = "cat run.log"\ntimeout_sec = 1\nuser = "agent"\n'
    grade = 'if [ "$(cat /workspace/answer.txt)" = 42 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n'
    task_dir = write(tmp_path / "task", {"task.toml": '[agent]\nuser = "agent"\n' + hook, "tests/test.sh": grade})
    workspace = write(tmp_path / "ws", {"answer.txt": "41\n", "tracer.py": TRACER})

    async def before(sandbox: Any) -> None:
        await sandbox.exec("cd /workspace && mkfifo run.log", user="agent")
        await leave_behind(sandbox, "exec python3 /workspace/tracer.py")

    async def after(sandbox: Any) -> Any:
        seized = (await sandbox.exec("test -e /tmp/tracer-seized", user="root")).return_code == 0
        started = time.monotonic()
        second = await run_verification(plan_verification(load_task(task_dir)), sandbox)
        return seized, second, time.monotonic() - started

    started = time.monotonic()
    outcome, (seized, second, took) = attack(docker_client, task_dir, workspace, before=before, after=after)
    assert seized, "the tracer never caught the hook's timeout: the attack did not run"
    assert (outcome.reward, outcome.masked) == (0.0, False), outcome
    assert (second.reward, second.masked) == (0.0, False), second  # was masked after 165 s
    assert took < 30 and time.monotonic() - started < 60, f"the next grading waited for the hook ({took:.0f} s)"


# Red team 53: a root agent swaps its working directory for a link into /tests (`/workspace ->
# /tests/expected`), made real beforehand so that the first exec starts there. Grading makes /tests
# afresh, and the second exec (a task's own test.sh run as its [verifier].user) starts where the link
# now leads: the task's golden files, compared with themselves. The verifier must not run there.
GOLDEN_COMPARE = (
    "if cmp -s answer.txt /tests/expected/answer.txt; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n"
    "pwd -P\n"
)


@pytest.mark.parametrize("user", ["grader", "root"])
def test_a_working_directory_made_a_link_into_tests_grades_nothing_there(docker_client, tmp_path, user):
    from test_docker_attacks import attack

    toml = f'[agent]\nuser = "agent"\n[verifier]\nuser = "{user}"\n'
    task_dir = write(
        tmp_path / "task",
        {"task.toml": toml, "tests/test.sh": GOLDEN_COMPARE, "tests/expected/answer.txt": "golden-53\n"},
    )

    async def before(sandbox: Any) -> None:
        swapped = await sandbox.exec(
            "rm -rf /workspace && mkdir -p /tests/expected && ln -s /tests/expected /workspace", user="root"
        )
        assert swapped.return_code == 0, swapped

    outcome, _ = attack(docker_client, task_dir, write(tmp_path / "ws", {"answer.txt": "wrong\n"}), before=before)
    assert (outcome.reward, outcome.masked) == (0.0, False), outcome
    assert "leads into /tests or /logs/verifier (a link): the verifier did not run" in outcome.stdout, outcome


# Red team 95: a non-root agent that owns the folder above its working directory (/home/agent/ws) swaps
# the working directory for a link to a folder of root's it cannot read, which holds what the verifier
# looks for. A root verifier followed the link and graded that folder as the agent's work: 1.0.
HIDDEN_ANSWER = """
from nemo_gym.verifiers import exact_match
from nemo_gym.verifiers.files import read_text
def verify(workspace, task_data):
    return exact_match(read_text(workspace, "answer.txt"), task_data["answer"])
"""


def paris_task(root: Path, kind: str, user: str) -> Path:
    """A task of the agent's whose verifier, of ``user``, scores an answer.txt of Paris 1: ``HIDDEN_ANSWER``
    (``kind`` python) or a test.sh of its own (``kind`` shell)."""
    files = {"task.toml": f'[agent]\nuser = "agent"\n[verifier]\nuser = "{user}"\n'}
    if kind == "python":
        files.update({"tests/verifier.py": HIDDEN_ANSWER, "task_data.json": '{"answer": "Paris"}'})
    else:
        files["tests/test.sh"] = '[ "$(cat answer.txt)" = Paris ] && echo 1 > /logs/verifier/reward.txt\n'
    return write(root, files)


@pytest.mark.parametrize(
    "kind, user, setpriv",
    [
        ("python", "root", True),
        ("shell", "root", True),
        ("python", "grader", True),
        ("shell", "grader", True),
        ("shell", "grader", False),  # test.sh in an exec of grader's own
    ],
)
def test_a_working_directory_made_a_link_of_the_agents_grades_nothing_there(
    docker_client, tmp_path, kind, user, setpriv
):
    """The folder is the verifier's user's, which that user may read and the agent may not."""
    from test_docker_attacks import attack

    task_dir = paris_task(tmp_path / "task", kind, user)
    swap = (
        "cat /opt/hidden/answer.txt; cd /home/agent && echo wrong > ws/answer.txt && mv ws old && ln -s /opt/hidden ws"
    )

    async def before(sandbox: Any) -> None:
        hidden = await sandbox.exec(
            "mkdir -p /opt/hidden && chown -R agent /home/agent/ws && echo Paris > /opt/hidden/answer.txt"
            f" && chown -R {user} /opt/hidden && chmod 700 /opt/hidden && chmod 755 /home/agent",
            user="root",
        )
        assert hidden.return_code == 0, hidden
        swapped = await sandbox.exec(swap, user="agent", cwd="/")
        assert swapped.return_code == 0 and "Permission denied" in swapped.stderr, swapped

    workspace = write(tmp_path / "ws", {})
    outcome, _ = attack(docker_client, task_dir, workspace, before=before, workdir="/home/agent/ws", setpriv=setpriv)
    assert (outcome.reward, outcome.masked) == (0.0, False), outcome
    assert "/home/agent/ws leads elsewhere through a link of another user's" in outcome.stdout, outcome


# Red team 100: the same agent exchanges its working directory for a folder beside it, no link: one of the
# verifier's user's that it may not read. Grading entered the name, a folder now, and graded that folder as
# the agent's work (the red team raced the exchange against grading's entry; done beforehand it needs no race).
@pytest.mark.parametrize(
    "kind, user, setpriv",
    [
        ("python", "root", True),
        ("shell", "root", True),
        ("python", "grader", True),
        ("shell", "grader", True),  # the verifier's user's start (user_start) looks too
        ("shell", "grader", False),  # test.sh in an exec of grader's own
    ],
)
def test_a_working_directory_exchanged_for_a_folder_the_agent_may_not_read_grades_nothing_there(
    docker_client, tmp_path, kind, user, setpriv
):
    from test_docker_attacks import attack

    task_dir = paris_task(tmp_path / "task", kind, user)

    async def before(sandbox: Any) -> None:
        hidden = await sandbox.exec(
            "mkdir /home/agent/hidden && echo Paris > /home/agent/hidden/answer.txt && chown -R agent /home/agent/ws"
            f" && chown -R {user} /home/agent/hidden && chmod 700 /home/agent/hidden && chmod 755 /home/agent",
            user="root",
        )
        assert hidden.return_code == 0, hidden
        swap = "cat hidden/answer.txt; echo wrong > ws/answer.txt && mv ws old && mv hidden ws"
        swapped = await sandbox.exec(swap, user="agent", cwd="/home/agent")
        assert swapped.return_code == 0 and "Permission denied" in swapped.stderr, swapped

    workspace = write(tmp_path / "ws", {})
    outcome, _ = attack(docker_client, task_dir, workspace, before=before, workdir="/home/agent/ws", setpriv=setpriv)
    assert (outcome.reward, outcome.masked) == (0.0, False), outcome
    assert "could have been put in its place by a user who may not read it" in outcome.stdout, outcome


# Red team 97: an honest setup the walk above first refused. The verifier's user may pass through the agent's
# home (0711) but not read it, and the walk held each folder it stood in open, which takes the right to read.
@pytest.mark.parametrize(("kind", "setpriv"), [("shell", True), ("shell", False), ("python", True)])
def test_a_working_directory_under_a_folder_the_verifier_may_only_pass_through_is_graded(
    docker_client, tmp_path, kind, setpriv
):
    from test_docker_attacks import attack

    task_dir = paris_task(tmp_path / "task", kind, "grader")

    async def before(sandbox: Any) -> None:
        made = await sandbox.exec("chmod 711 /home/agent && chmod 755 /home/agent/ws", user="root")
        assert made.return_code == 0, made

    workspace = write(tmp_path / "ws", {"answer.txt": "Paris\n"})
    outcome, _ = attack(docker_client, task_dir, workspace, before=before, workdir="/home/agent/ws", setpriv=setpriv)
    assert (outcome.reward, outcome.masked) == (1.0, False), outcome


# The same agent, failing its task, removes its working directory instead: every grading exec started
# there, so none could start, and the sample was masked (sandbox_error), a wrong answer's 0 with it.
@pytest.mark.parametrize("user", ["grader", "root"])
@pytest.mark.parametrize(
    "how", ["rm -rf /workspace", "rm -rf /workspace && ln -s /nowhere /workspace", "chmod 700 /workspace"]
)
def test_a_working_directory_removed_or_closed_scores_0_rather_than_masking(docker_client, tmp_path, user, how):
    from test_docker_attacks import attack

    toml = f'[agent]\nuser = "agent"\n[verifier]\nuser = "{user}"\n'
    task_dir = write(tmp_path / "task", {"task.toml": toml, "tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n"})

    async def before(sandbox: Any) -> None:
        assert (await sandbox.exec(how, user="root")).return_code == 0

    outcome, _ = attack(docker_client, task_dir, write(tmp_path / "ws", {}), before=before)
    if how.startswith("chmod") and user == "root":  # root enters it all the same
        assert (outcome.reward, outcome.masked) == (1.0, False), outcome
        return
    assert (outcome.reward, outcome.masked) == (0.0, False), outcome
    assert "the working directory /workspace is gone or closed to this user: the verifier did not run" in outcome.stdout


# Red team 55: the verifier's user's exec still started in the working directory. A process the agent
# left behind moved it away once prepare had handed /tests over, and back before the host asked whether it
# was gone: the exec could not start, the folder was there, and the sample was masked.
TOGGLER = r"""
while [ "$(stat -c %u /tests 2>/dev/null)" != 1001 ]; do sleep 0.002; done
mv /opt/w/ws /opt/w/ws.off; sleep 0.05; mv /opt/w/ws.off /opt/w/ws
"""


def test_a_working_directory_moved_away_between_the_execs_never_masks(docker_client, tmp_path):
    from test_docker_attacks import attack, leave_behind

    grade = 'if [ "$(cat /workspace/answer.txt)" = 42 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n'
    toml = '[agent]\nuser = "agent"\n[verifier]\nuser = "grader"\n'
    task_dir = write(tmp_path / "task", {"task.toml": toml, "tests/test.sh": grade})

    async def before(sandbox: Any) -> None:
        moved = "set -e; mkdir -p /opt/w; mv /workspace /opt/w/ws; ln -s /opt/w/ws /workspace; chown -R agent /opt/w"
        assert (await sandbox.exec(moved, user="root")).return_code == 0
        await leave_behind(sandbox, TOGGLER)

    for _ in range(3):
        outcome, _ = attack(docker_client, task_dir, write(tmp_path / "ws", {"answer.txt": "41\n"}), before=before)
        assert (outcome.reward, outcome.masked) == (0.0, False), outcome


# Red team 55: prepare made /logs root's with install, which follows a link: the agent's /logs -> /opt/a/x,
# in a folder the agent owns, let a process it left behind rename /opt/a/x for its own folder holding
# reward.json once prepare was done. A file at /logs failed prepare (a mask).
LOGS_SWAPPER = r"""
exec 3>/workspace/answer.txt   # waits until test.sh opens the FIFO: prepare is over
mv /opt/a/x /opt/a/x.old && mv /opt/a/evil /opt/a/x
echo wrong >&3; exec 3>&-
"""


@pytest.mark.parametrize("user", ["grader", "root"])
@pytest.mark.parametrize("logs", ["link", "file"])
def test_a_logs_folder_the_agent_made_a_link_or_a_file_is_made_again(docker_client, tmp_path, user, logs):
    from test_docker_attacks import attack, leave_behind

    toml = f'[agent]\nuser = "agent"\n[verifier]\nuser = "{user}"\n'
    task_dir = write(
        tmp_path / "task",
        {"task.toml": toml, "tests/test.sh": GOLDEN_COMPARE, "tests/expected/answer.txt": "golden-53\n"},
    )

    async def before(sandbox: Any) -> None:
        if logs == "file":
            assert (await sandbox.exec("rm -rf /logs && echo x > /logs", user="root")).return_code == 0
            return
        made = await sandbox.exec(
            "set -e; mkdir -p /opt/a/x /opt/a/evil/verifier; "
            "printf '{\"reward\": 1}' > /opt/a/evil/verifier/reward.json; chmod 777 /opt/a/evil/verifier; "
            "chmod 644 /opt/a/evil/verifier/reward.json; chown -R agent /opt/a; rm -rf /logs; ln -s /opt/a/x /logs; "
            "cd /workspace && rm -f answer.txt && mkfifo -m 644 answer.txt && chown agent answer.txt",
            user="root",
        )
        assert made.return_code == 0, made
        await leave_behind(sandbox, LOGS_SWAPPER)

    outcome, _ = attack(docker_client, task_dir, write(tmp_path / "ws", {"answer.txt": "wrong\n"}), before=before)
    assert (outcome.reward, outcome.masked) == (0.0, False), outcome


class _Counting:
    """A sandbox that counts the execs grading makes."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.execs = inner, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def exec(self, *args: Any, **options: Any) -> Any:
        self.execs += 1
        return await self.inner.exec(*args, **options)

    async def exec_piped(self, *args: Any, **options: Any) -> Any:
        self.execs += 1
        return await self.inner.exec_piped(*args, **options)


WHO = 'id -u; id -g; id -G; echo "$HOME"; pwd; echo 1 > /logs/verifier/reward.txt\n'


def graded_in_users_sandbox(
    docker_client: Any, folder: Path, toml: str, test_sh: str, *, setpriv: bool = True, root_first: str = ""
) -> Tuple[Any, int]:
    """A task's own test.sh graded in the suite's image of users (root, agent, grader), with or without
    setpriv, after root ran ``root_first`` there: the outcome, and how many execs grading took."""
    import asyncio

    from test_docker_attacks import users_sandbox

    from nemo_gym.data.tasks.harbor.task import load_task
    from nemo_gym.data.tasks.harbor.verification import plan_verification, run_verification

    plan = plan_verification(load_task(write(folder / "task", {"task.toml": toml, "tests/test.sh": test_sh})))

    async def graded() -> Tuple[Any, int]:
        async with users_sandbox(docker_client, write(folder / "ws", {}), setpriv=setpriv) as sandbox:
            if root_first:
                made = await sandbox.exec(root_first, user="root")
                assert made.return_code == 0, made
            counting = _Counting(sandbox)
            return await run_verification(plan, counting), counting.execs

    return asyncio.run(graded())


@pytest.mark.parametrize("user", ["grader", "grader:agent", "1001", "4242", "1001:1000"])
def test_a_task_test_sh_runs_as_its_user_alike_in_one_exec_and_in_an_exec_of_its_own(docker_client, tmp_path, user):
    """Issue 14: a task's own test.sh as another user took three execs (prepare, the run as that user,
    reclaim); with setpriv, grading's root shell switches itself, in one. That user is set up as Docker's
    `exec -u` sets it up: uid, group, supplementary groups, HOME, working directory."""
    toml = f'[verifier]\nuser = "{user}"\n'
    (one, one_execs), (own, own_execs) = (
        graded_in_users_sandbox(
            docker_client, tmp_path / str(setpriv), toml, WHO, setpriv=setpriv, root_first="chmod 755 /workspace"
        )
        for setpriv in (True, False)
    )
    assert (one.reward, own.reward) == (1.0, 1.0), (one, own)
    assert one.stdout == own.stdout, (one.stdout, own.stdout)
    assert (one_execs, own_execs) == (1, 3)


def test_a_tasks_loader_variables_reach_no_root_program_of_a_test_sh_run_as_its_user(docker_client, tmp_path):
    # Red team 87: the task's LD_* variables were handed back (env) before root's timeout and setpriv ran,
    # so a library of the agent's in the task's LD_LIBRARY_PATH ran as root and forged the results (1.0).
    # Here a library only root can read stands for it: root's programs loading it say "too short", the
    # verifier's user's say they cannot open it.
    toml = '[verifier]\nuser = "grader"\n[verifier.env]\nLD_PRELOAD = "/root/preload.so"\n'
    test_sh = 'echo "$LD_PRELOAD" > /dev/null; echo 1 > /logs/verifier/reward.txt\n'
    root_first = "printf x > /root/preload.so && chmod 600 /root/preload.so"
    outcome, _ = graded_in_users_sandbox(docker_client, tmp_path, toml, test_sh, root_first=root_first)
    assert outcome.reward == 1.0, outcome
    assert "too short" not in outcome.stdout, outcome.stdout  # no root program loaded it
    assert "cannot open shared object file" in outcome.stdout, outcome.stdout  # the verifier's programs got it


def test_a_verifier_user_that_is_root_by_another_number_never_runs_in_the_trusted_exec(docker_client, tmp_path):
    # Red team 87: "00" is uid 0, but not root's name: test.sh ran as root in the one exec whose done
    # marker the host trusts, and a program it ran forged the results (1.0). It runs in an exec of its
    # own, as any uid 0 by another name, whose ending the engine is asked about.
    test_sh = "id -u; echo 1 > /logs/verifier/reward.txt\n"
    outcome, execs = graded_in_users_sandbox(docker_client, tmp_path, '[verifier]\nuser = "00"\n', test_sh)
    assert (outcome.reward, outcome.stdout.strip(), execs) == (1.0, "0", 3), (outcome, execs)


# Red team 88: the check that the verifier's user can enter the working directory ran as that user beside
# root's shell, holding its descriptors, the results pipe among them: a leftover of the same user took it
# (pidfd_getfd) and wrote its own results first. Here the leftover, the verifier's user itself, notes every
# pipe a process of its user holds while grading runs, and a process of root's notes every pipe root's
# processes hold: none may be both. (The user's own start makes pipes of its own, to read stat's look at the
# chain: those any program of that user's may reach, as it may reach the start itself.)
PIPE_SEEKER = r"""
import os, sys, time
root = sys.argv[1] == "root"
mine = {os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd") if os.path.exists(f"/proc/self/fd/{fd}")}
found = set()
end = time.time() + 20
while time.time() < end and not os.path.exists("/tmp/graded"):
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            if root and os.stat(f"/proc/{pid}").st_uid != 0:
                continue
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("pipe:") and target not in mine:
                    found.add(f"{pid}:{fd}:{target}")
        except OSError:
            pass
open(f"/tmp/pipes-{sys.argv[1]}", "w").write("\n".join(sorted(found)))
"""


def test_no_process_of_the_verifiers_user_holds_a_pipe_of_grading(docker_client, tmp_path):
    from test_docker_attacks import attack, leave_behind

    task_dir = write(
        tmp_path / "task",
        {
            "task.toml": '[verifier]\nuser = "grader"\n',
            "tests/test.sh": "sleep 1; touch /tmp/graded; echo 0 > /logs/verifier/reward.txt\n",
        },
    )

    async def before(sandbox: Any) -> None:
        for user in ("grader", "root"):
            assert (await sandbox.exec("rm -f /tmp/agent-alive", user="root")).return_code == 0
            await leave_behind(sandbox, f"exec python3 -c {shlex.quote(PIPE_SEEKER)} {user}", user=user)

    async def after(sandbox: Any) -> Any:
        done = "for i in $(seq 100); do [ -e /tmp/pipes-grader ] && [ -e /tmp/pipes-root ] && break; sleep 0.1; done"
        assert (await sandbox.exec(done, user="root")).return_code == 0
        return [(await sandbox.exec(f"cat /tmp/pipes-{user}", user="root")).stdout for user in ("grader", "root")]

    outcome, (users, roots) = attack(docker_client, task_dir, write(tmp_path / "ws", {}), before=before, after=after)
    assert (outcome.reward, outcome.masked) == (0.0, False), outcome
    pipes = {line.split(":", 2)[2]: line for line in users.split()}
    assert roots.split(), "root's processes held no pipe: the look saw nothing"
    shared = [line for line in roots.split() if line.split(":", 2)[2] in pipes]
    assert shared == [], (shared, users)


@pytest.mark.parametrize(
    ("agent", "toml", "changed"),
    [
        ("rm -f /usr/bin/timeout /bin/timeout", "", "/usr/bin/timeout (deleted)"),  # was verifier_error
        ("sed -i '/^grader:/d' /etc/passwd", '[verifier]\nuser = "grader"\n', "/etc/passwd (changed)"),  # the same
        ("printf '#!/bin/sh\\necho garbage\\n' > /usr/bin/tar", "", "/usr/bin/tar (changed)"),  # was sandbox_error
        ("rm -f $(ldd /bin/bash | grep -o '/[^ ]*libtinfo[^ ]*')", "", "libtinfo.so.6 (deleted)"),  # bash cannot start
        # Red team 92: every tool read as missing (a mask); the engine's record never shows /dev, a tmpfs.
        ("rm -f /dev/null && mkdir /dev/null", "", "/dev/null is not the null device"),
        ("rm -f /dev/null && mknod -m 666 /dev/null c 1 5", "", "/dev/null is not the null device"),  # red team 93
        (
            "sed -i 's/^passwd:.*/passwd: nosuchservice/' /etc/nsswitch.conf",
            '[verifier]\nuser = "grader"\n',
            "nsswitch",
        ),
        # A program of grading's that prints the kernel's words for a full disk: grading's own count decides.
        (
            "printf '#!/bin/sh\\necho No space left on device >&2; exit 1\\n' > /usr/bin/install",
            "",
            "install (changed)",
        ),
        # A copy without timeout put in /usr/bin's place: the engine's record shows the folder changed alone.
        (
            "cp -a /usr/bin /opt/b && rm /opt/b/timeout && /opt/b/rm -rf /usr/bin && /opt/b/ln -s /opt/b /usr/bin",
            "",
            "/usr/bin (changed: a link now)",
        ),
        # Red team 93: a tar that unpacks as tar does and packs past the results' limit (16 MiB): the output
        # cut short is the sandbox's own doing (OutputTooLarge), never a failed engine call the check skips.
        (
            "cp /usr/bin/tar /opt/tar && printf '#!/bin/sh\\ncase $1 in -c*) head -c 17000000 /dev/zero ;;"
            ' *) exec /opt/tar "$@" ;; esac\\n\' > /usr/bin/tar',
            "",
            "/usr/bin/tar (changed) since its image; grading's output was too large",
        ),
    ],
    ids=[
        "timeout-deleted",
        "verifiers-user-removed",
        "tar-replaced",
        "bashs-library-deleted",
        "dev-null-a-folder",
        "dev-null-made-dev-zero",
        "nsswitch-broken",
        "disk-full-forged",
        "usr-bin-swapped-for-a-link",
        "tar-packs-past-the-limit",
    ],
)
def test_a_root_agent_that_breaks_what_grading_runs_scores_0_not_a_mask(docker_client, tmp_path, agent, toml, changed):
    # Red team 91: the agent, root as Docker's default, broke a program or a user grading needs, and grading
    # failed as it fails in an image without them: a mask it chose for its answer (here, a right one). The
    # engine's record of what changed since the image tells them apart; an image without them still masks
    # (test_docker.py).
    outcome, _ = graded_in_users_sandbox(docker_client, tmp_path, toml, WHO, root_first=agent)
    assert (outcome.reward, outcome.masked, outcome.failure_kind) == (0.0, False, GRADING_BROKEN), outcome
    assert changed in outcome.detail, outcome.detail


def test_a_container_lost_in_grading_stays_a_mask_whatever_the_agent_changed(docker_client, tmp_path):
    # Red team 92: after an honest `useradd` (/etc/passwd changed), a container lost to the engine mid-grading
    # read as grading_broken, a false 0. A container that no longer runs says nothing of what changed in it.
    import asyncio

    from test_docker_attacks import users_sandbox

    from nemo_gym.data.tasks.harbor.task import load_task
    from nemo_gym.data.tasks.harbor.verification import plan_verification, run_verification

    test_sh = "sleep 20; echo 1 > /logs/verifier/reward.txt\n"
    plan = plan_verification(load_task(write(tmp_path / "task", {"tests/test.sh": test_sh})))

    async def graded() -> Any:
        async with users_sandbox(docker_client, write(tmp_path / "ws", {})) as sandbox:
            made = await sandbox.exec("useradd -r svc", user="root")
            assert made.return_code == 0, made
            grading = asyncio.ensure_future(run_verification(plan, sandbox))
            await asyncio.sleep(4)  # test.sh sleeps: the engine loses the container meanwhile
            await asyncio.get_running_loop().run_in_executor(None, sandbox._require().kill)
            return await grading

    outcome = asyncio.run(graded())
    assert (outcome.masked, outcome.mask_reason) == (True, "sandbox_error"), outcome
