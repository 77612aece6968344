"""The agent's attacks on grading, on the local sandbox: each class of issue 9, written as the agent
(or code that verify runs) would try it. The same classes run in containers in test_docker_attacks.py.

Every test here asserts the honest score survives the attack, or that the sample is masked only
where the sandbox itself failed. The machine kind runs the suite as root, which lets verify's
children switch users like an agent's processes would.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import pwd
import shlex
import stat
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import PIPE_FORGER, write_files

from nemo_gym.data.tasks.harbor.rewards import MISSING_REWARD
from nemo_gym.data.tasks.harbor.sandboxes import LocalSandbox
from nemo_gym.data.tasks.harbor.sandboxes.base import ExecResult, PipedResult
from nemo_gym.data.tasks.harbor.sandboxes.local import namespaces_available, own_path
from nemo_gym.data.tasks.harbor.task import load_task
from nemo_gym.data.tasks.harbor.verification import (
    STDOUT_CUT_NOTE,
    STDOUT_TAIL_BYTES,
    VerificationOutcome,
    VerificationPlan,
    mask_counts,
    plan_verification,
    run_verification,
)

MARKER = f"nemo-gym-attack-{os.getpid()}"


@pytest.fixture(autouse=True)
def _needs_the_namespace() -> None:
    if not namespaces_available():
        pytest.fail("this machine kind provides bubblewrap (installed by .ci/run); the attacks need it")


def needs_root() -> None:
    if os.getuid() != 0:
        if os.environ.get("NEMO_GYM_REQUIRE_DOCKER") == "1":
            pytest.fail("CI runs the suite as root, which these attacks need to switch users")
        pytest.skip("switching users needs root (CI runs as root)")


def task(root: Path, files: Dict[str, str]) -> Path:
    return write_files(root, files, dedent=True)


def verify(
    task_dir: Path,
    workspace: Path,
    *,
    sandbox_env: Optional[Dict[str, str]] = None,
    mounts: Optional[Dict[str, Path]] = None,
    wrap: Optional[Callable[[LocalSandbox], Any]] = None,
    after: Optional[Callable[[LocalSandbox], None]] = None,
    plan: Optional[VerificationPlan] = None,
    workdir: Optional[str] = None,
    **options: Any,
) -> VerificationOutcome:
    plan = plan or plan_verification(load_task(task_dir), **options)

    async def run() -> VerificationOutcome:
        async with LocalSandbox(workspace, env=sandbox_env, mounts=mounts, workdir=workdir) as sandbox:
            # Bounded: an attack that hangs the verification fails its test rather than the suite.
            outcome = await asyncio.wait_for(run_verification(plan, wrap(sandbox) if wrap else sandbox), 300)
            if after is not None:
                after(sandbox)
            return outcome

    return asyncio.run(run())


def survivors() -> List[str]:
    """Processes of this machine whose command line holds the test's marker."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    if MARKER.encode() in handle.read():
                        found.append(entry)
            except OSError:
                pass
    return found


# --- 1 and 3: a planted or rewritten reward, and processes that outlive grading --------------

DAEMON = f"""
import os, subprocess, sys, time
CODE = '''
import os, time
if os.fork(): os._exit(0)
os.setsid()
if os.fork(): os._exit(0)
for _ in range(1000):  # {MARKER}
    for name in ("reward.json", "reward.txt"):
        try:
            with open("/logs/verifier/" + name, "w") as handle:
                handle.write('{{"reward": 1}}' if name == "reward.json" else "1")
        except OSError:
            pass
    time.sleep(0.005)
'''
def verify(workspace, task_data):
    subprocess.run([sys.executable, "-c", CODE])  # the agent's program, which leaves a daemon
    time.sleep(0.2)
    return float((workspace / "answer.txt").read_text() == task_data["answer"])
"""


def test_a_daemon_that_verify_started_cannot_rewrite_the_score(tmp_path):
    task_dir = task(tmp_path / "task", {"tests/verifier.py": DAEMON, "task_data.json": '{"answer": "42"}'})
    workspace = task(tmp_path / "ws", {"answer.txt": "41"})
    outcome = verify(task_dir, workspace)
    assert (outcome.reward, outcome.failure_kind, outcome.masked) == (0.0, None, False), outcome
    assert survivors() == [], "a process started during grading outlived it"


def test_a_planted_reward_does_not_stand_when_verify_fails(tmp_path):
    # The collect hooks run in the sandbox before grading, as the agent's leftovers could.
    task_dir = task(
        tmp_path / "task",
        {
            "tests/verifier.py": "def verify():\n    raise RuntimeError('no answer')\n",
            "task.toml": """
                [[verifier.collect]]
                command = "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt && echo '{\\"reward\\": 1}' > /logs/verifier/reward.json"
            """,
        },
    )
    outcome = verify(task_dir, tmp_path)
    assert (outcome.reward, outcome.failure_kind) == (0.0, MISSING_REWARD), outcome


# --- the private channel: forging the report -----------------------------------------------------

FORGER = r"""
import json, os, re, subprocess, sys
CODE = r'''
import json, os, re, sys
found = {"nonces": [], "opened": [], "denied": []}
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    for name in ("environ", "cmdline"):
        try:
            found["nonces"] += re.findall(r"[0-9a-f]{32}", open("/proc/%s/%s" % (pid, name), "rb").read().decode("latin-1"))
        except OSError:
            pass
    try:
        with open("/proc/%s/mem" % pid, "rb") as handle:
            found["opened"].append("mem:" + pid)
    except OSError:
        found["denied"].append("mem:" + pid)
    try:
        fds = os.listdir("/proc/%s/fd" % pid)
    except OSError:
        found["denied"].append("fd:" + pid)
        continue
    for fd in fds:
        try:
            target = os.readlink("/proc/%s/fd/%s" % (pid, fd))
        except OSError:
            target = "report?"  # unreadable: try it anyway
        if "report" in target:
            try:
                with open("/proc/%s/fd/%s" % (pid, fd), "a") as handle:
                    for nonce in set(found["nonces"]) | {"0" * 32}:
                        handle.write("nemo-gym-report/1 %s reward {\"reward\": 1}\n" % nonce)
                found["opened"].append("report:" + pid)
            except OSError:
                found["denied"].append("report:" + pid)
for path in ("/tests", "/tests/.gym-nonce"):
    try:
        found[path] = sorted(os.listdir(path)) if os.path.isdir(path) else open(path).read()
    except OSError as error:
        found[path] = str(error)
found["runner"] = os.getppid()
json.dump(found, open(sys.argv[1], "w"))
'''
def verify(workspace):
    subprocess.run([sys.executable, "-c", CODE, str(workspace / "probe.json")], check=True)
    return 0.0
"""


def test_code_verify_runs_cannot_forge_the_report(tmp_path):
    task_dir = task(tmp_path / "task", {"tests/verifier.py": FORGER})
    workspace = tmp_path / "ws"
    workspace.mkdir()
    outcome = verify(task_dir, workspace)
    assert (outcome.reward, outcome.failure_kind, outcome.masked) == (0.0, None, False), outcome
    probe = json.loads((workspace / "probe.json").read_text())
    runner = probe["runner"]
    # The runner is sealed: its memory and descriptors are closed even to its own user's processes.
    assert f"mem:{runner}" in probe["denied"] and f"report:{runner}" not in probe["opened"], probe


def test_the_runs_key_is_gone_before_verify_runs(tmp_path):
    source = """
        import glob, os
        def verify():
            gone = not [key for key in os.environ if key.startswith("NEMO_GYM_")]
            secrets = glob.glob("/tests/.gym-out-*/key") + glob.glob("/tests/.gym-out-*/deferred")
            return {"reward": 1, "gone": float(gone), "no_nonce_file": float(not secrets)}
    """
    outcome = verify(task(tmp_path / "task", {"tests/verifier.py": source}), tmp_path)
    assert outcome.reward == 1.0 and outcome.metrics == {"gone": 1.0, "no_nonce_file": 1.0}, outcome


def test_a_verifier_that_may_not_search_its_working_directory_still_has_it_noted(tmp_path):
    # The runner notes the folder it hands verify as workspace, which files then reads alone (red team
    # 99). A user that may not search the folder it stands in cannot stat "." (this workspace is root's,
    # 0700): the runner reads it through /proc, so that an agent closing its folder lifts no check.
    needs_root()
    source = """
        import sys
        def verify(workspace):
            name, folder = sys.modules["_gym_runner"].WORKSPACE
            return {"reward": 1, "noted": float(folder is not None and name == str(workspace))}
    """
    task_dir = task(tmp_path / "task", {"tests/verifier.py": source, "task.toml": '[verifier]\nuser = "nobody"\n'})
    workspace = tmp_path / "ws"
    workspace.mkdir(mode=0o700)
    outcome = verify(task_dir, workspace)
    assert outcome.reward == 1.0 and outcome.metrics == {"noted": 1.0}, outcome


@pytest.mark.parametrize("user", [None, "nobody"])
def test_the_pipe_that_carries_the_files_is_out_of_verifys_reach(tmp_path, user):
    # The staged files (the run's key among them) came in on the grading exec's stdin and the results
    # go out on its stdout: verify reads none of the first. Code a root verify runs can write into the
    # grading shell's stdout (root reaches every file and pipe of the sandbox) and so spoil the
    # results, as it could spoil the files they are packed from, but forge nothing: the host
    # believes the runner's report alone, which carries the key, and results with anything ahead of
    # the real ones mask the sample. Any other user reaches no pipe.
    needs_root()
    toml = "" if user is None else f'[verifier]\nuser = "{user}"\n'
    task_dir = task(tmp_path / "task", {"tests/verifier.py": PIPE_FORGER, "task.toml": toml})
    outcome = verify(task_dir, tmp_path)
    if user is None:
        seen = json.loads((tmp_path / "pipes.json").read_text())
    else:
        seen = json.loads(outcome.stdout.split("pipes: ", 1)[1].splitlines()[0])
    assert seen["stdin"] == 0 and "fd 6" in seen["denied"], seen
    if user is None:
        assert any(path.endswith("/fd/6") for path in seen["written"]), seen  # the attack did reach the pipe
        # Results ahead of the real ones are damage (red team, round 20: tarfile read the first tar
        # alone, so they were read instead): masked, never scored.
        assert outcome.masked and "more than one tar" in outcome.detail, (outcome, seen)
    else:
        assert outcome.reward == 0.0 and not outcome.masked, (outcome, seen)
        assert seen["written"] == [] and outcome.failure_kind is None, (outcome, seen)


# --- 2: the answers are private while staged and gone afterwards --------------------------------

PEEKER = """
import json, os
def verify(workspace, task_data):
    read, write = os.pipe()
    if os.fork() == 0:  # an agent's process: another user
        try:
            os.setgroups([]); os.setgid(65534); os.setuid(65534)
            seen = {}
            for path in ("/tests/task_data.json", "/tests/verifier.py", "/logs/verifier/test-stdout.txt"):
                try:
                    seen[path] = open(path).read()
                except OSError as error:
                    seen[path] = type(error).__name__
            os.write(write, json.dumps(seen).encode())
        finally:
            os._exit(0)
    os.close(write)
    os.wait()
    (workspace / "peek.json").write_bytes(os.read(read, 1 << 16))
    return 1.0
"""


def test_the_answers_are_closed_to_other_users_and_removed_after(tmp_path):
    needs_root()
    task_dir = task(tmp_path / "task", {"tests/verifier.py": PEEKER, "task_data.json": '{"answer": "secret-42"}'})
    workspace = tmp_path / "ws"
    workspace.mkdir()
    left: Dict[str, List[str]] = {}

    def look(sandbox: LocalSandbox) -> None:
        left["tests"] = [path.name for path in sandbox.host_path("/tests").iterdir()]

    outcome = verify(task_dir, workspace, after=look)
    assert outcome.reward == 1.0, outcome
    peek = json.loads((workspace / "peek.json").read_text())
    assert set(peek.values()) == {"PermissionError"}, peek
    assert [name for name in left["tests"] if not name.startswith(".gym-out-")] == [], left


def test_a_verifier_user_reads_tests_but_cannot_change_them(tmp_path):
    needs_root()
    source = """
        import os
        def verify(task_data):
            try:
                open("/tests/verifier.py", "a").close()
                writable = 1.0
            except OSError:
                writable = 0.0
            return {"reward": float(task_data["x"] == 1), "uid": os.getuid(), "writable": writable}
    """
    task_dir = task(
        tmp_path / "task",
        {"tests/verifier.py": source, "task_data.json": '{"x": 1}', "task.toml": "[verifier]\nuser = 65534\n"},
    )
    outcome = verify(task_dir, tmp_path)
    assert (outcome.reward, outcome.metrics) == (1.0, {"uid": 65534.0, "writable": 0.0}), outcome


# --- 4: lookup paths that reach into the agent's files --------------------------------------------

TOOLS = (
    "rm", "mkdir", "chown", "chmod", "mv", "head", "tail", "sha256sum", "tar", "id", "timeout",
    "python3", "python", "bash", "setpriv", "bwrap", "env",
)  # fmt: skip


def test_lookup_paths_into_the_workspace_run_nothing_of_the_agent(tmp_path):
    workspace = tmp_path / "ws"
    files = {f"bin/{tool}": f"#!/bin/sh\necho {tool} >> {workspace}/hijacked\n" for tool in TOOLS}
    files.update(
        {
            "evil.sh": f"echo BASH_ENV >> {workspace}/hijacked\n",
            "sitecustomize.py": f"open({str(workspace)!r} + '/hijacked', 'a').write('sitecustomize\\n')\n",
            "json.py": f"open({str(workspace)!r} + '/hijacked', 'a').write('json\\n')\n",
            "nemo_gym/__init__.py": f"open({str(workspace)!r} + '/hijacked', 'a').write('nemo_gym\\n')\n",
            "answer.txt": "42",
        }
    )
    for tool in TOOLS:  # a relative PATH entry resolves inside the working directory
        files[tool] = files[f"bin/{tool}"]
    task(workspace, files)
    poisoned = {
        "PATH": f"{workspace}/bin:.:bin:{os.environ['PATH']}",
        "BASH_ENV": f"{workspace}/evil.sh",
        "ENV": f"{workspace}/evil.sh",
        "PYTHONPATH": f"{workspace}:.",
        "PYTHONSTARTUP": f"{workspace}/evil.sh",
        "PYTHONHOME": str(workspace),
        # bash takes EUID (and UID) from its environment: a root shell that reads 1000 there must still
        # know it is root (red team round 24, follow-up)
        "EUID": "1000",
        "UID": "1000",
    }
    source = """
        import sys
        from nemo_gym.verifiers import exact_match
        from nemo_gym.verifiers.files import read_text
        def verify(workspace):
            return {"reward": float(exact_match(read_text(workspace, "answer.txt"), "42")), "last": float(sys.path[-1] == str(workspace))}
    """
    table = "\n".join(f"{key} = {json.dumps(value)}" for key, value in poisoned.items())
    task_dir = task(tmp_path / "task", {"tests/verifier.py": source, "task.toml": f"[verifier.env]\n{table}\n"})
    outcome = verify(task_dir, workspace, sandbox_env=poisoned)
    assert not (workspace / "hijacked").exists(), (workspace / "hijacked").read_text()
    # The task's PYTHONPATH is honoured after the standard library, and never with the working directory.
    assert (outcome.reward, outcome.metrics, outcome.masked) == (1.0, {"last": 0.0}, False), outcome


def test_a_task_test_sh_gets_no_bash_env_and_the_root_steps_no_agent_tool(tmp_path):
    workspace = tmp_path / "ws"
    files = {f"bin/{tool}": f"#!/bin/sh\necho {tool} >> {workspace}/hijacked\n" for tool in TOOLS}
    files["evil.sh"] = f"echo BASH_ENV >> {workspace}/hijacked\n"
    task(workspace, files)
    env = {"PATH": f"{workspace}/bin:{os.environ['PATH']}", "BASH_ENV": f"{workspace}/evil.sh"}
    task_dir = task(tmp_path / "task", {"tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n"})
    outcome = verify(task_dir, workspace, sandbox_env=env)
    assert outcome.reward == 1.0, outcome
    assert not (workspace / "hijacked").exists(), (workspace / "hijacked").read_text()


# --- 1: a planted symlink must not turn a root write into a write elsewhere ------------------------


def test_planted_symlinks_in_the_logs_are_never_followed(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "victim.txt").write_text("original")
    hook = f"mkdir -p /logs/verifier && ln -sf {workspace}/victim.txt /logs/verifier/test-stdout.txt && ln -sf /etc/passwd /logs/verifier/reward.json"
    task_dir = task(
        tmp_path / "task",
        {
            "tests/verifier.py": "def verify():\n    print('x' * 100)\n    return 0.5\n",
            "task.toml": f"[[verifier.collect]]\ncommand = {json.dumps(hook)}\n",
        },
    )
    outcome = verify(task_dir, workspace)
    assert outcome.reward == 0.5, outcome
    assert (workspace / "victim.txt").read_text() == "original"


def test_a_collect_hook_made_to_print_forever_is_cut_at_its_timeout_and_the_answer_graded(tmp_path):
    # The task's hook prints the agent's run log; the agent made the log a link to /dev/zero. The
    # local sandbox stopped reading at the hook's timeout and then waited for the pipe to close,
    # forever: the server's own timeout would have masked the sample, sparing a wrong answer its 0.
    grade = 'if [ "$(cat answer.txt)" = 42 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n'
    hook = '[[verifier.collect]]\ncommand = "cat run.log"\ntimeout_sec = 1\n'
    task_dir = task(tmp_path / "task", {"tests/test.sh": grade, "task.toml": hook})
    for answer, reward in (("41", 0.0), ("42", 1.0)):
        workspace = task(tmp_path / answer, {"answer.txt": answer})
        os.symlink("/dev/zero", workspace / "run.log")
        started = time.monotonic()
        outcome = verify(task_dir, workspace)
        assert (outcome.reward, outcome.masked) == (reward, False), outcome
        assert time.monotonic() - started < 60


# --- 9: the local sandbox protects the host ------------------------------------------------------


def test_no_device_node_or_set_id_file_the_agent_makes_stays_on_the_host(tmp_path):
    """The workspace is a host folder: nosuid and nodev inside the namespace, but not on the host. A
    root verifier ran the agent's program, which made device nodes there (/dev/mem's, 0666) and a
    set-uid-root shell for any host user who reaches it (red team 44). No node can be made now, and
    the set-id bits are gone once the sandbox closes."""
    needs_root()
    solve = (
        "mknod -m 0666 .mem c 1 1; mknod -m 0666 .null c 1 3\n"
        "cp /bin/sh .rootsh && chmod 4755 .rootsh && cp /bin/sh .groupsh && chmod 2755 .groupsh\n"
        "mkdir -p deep/er && cp /bin/sh deep/er/.sh && chmod 6755 deep/er/.sh\n"
        # Past PATH_MAX, where a path-by-path walk cannot reach it and the host can (cd by cd).
        "(for i in $(seq 300); do mkdir -p dddddddddddddddddddd && cd dddddddddddddddddddd || exit; done; "
        "cp /bin/sh .far && chmod 4755 .far && mknod .farnull c 1 3)\n"
        "[ -u .rootsh ] && echo set-id-inside > made.txt\n"
        "echo 41 > answer.txt\n"
    )
    grade = 'bash solve.sh\nif [ "$(cat answer.txt)" = 42 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n'
    task_dir = task(tmp_path / "task", {"tests/test.sh": grade})
    workspace = task(tmp_path / "ws", {"solve.sh": solve})
    outcome = verify(task_dir, workspace)
    assert (outcome.reward, outcome.masked) == (0.0, False), outcome
    assert (workspace / "made.txt").read_text() == "set-id-inside\n"  # the attack ran
    assert not (workspace / ".mem").exists() and not (workspace / ".null").exists()
    for name in (".rootsh", ".groupsh", "deep/er/.sh"):
        mode = (workspace / name).lstat().st_mode
        assert stat.S_ISREG(mode) and not mode & (stat.S_ISUID | stat.S_ISGID), (name, oct(mode))
    assert os.access(workspace / ".rootsh", os.X_OK)  # the file itself stays
    far = subprocess.run(
        ["find", str(workspace), "-name", ".far*", "-printf", "%y %m\n"], capture_output=True, text=True, check=True
    )
    assert far.stdout == "f 755\n", far.stdout  # made (300 folders deep), its bit gone; the node never made


def test_no_file_capability_the_agent_sets_stays_on_the_host(tmp_path):
    """Red team 60: as red team 44's set-id shell, but through file capabilities, which the closing
    sweep does not look at: a root verifier ran the agent's program, which copied cat and python into
    the workspace with cap_dac_read_search and cap_setuid, and any host user who reached them read
    /etc/shadow and became root. The sandbox keeps no CAP_SETFCAP, so no capability can be set."""
    needs_root()
    setxattr = (
        "import os, struct, sys\n"
        "for name, bits in (('.cat', 1 << 2), ('.py', (1 << 6) | (1 << 7))):\n"
        "    try:\n"
        "        os.setxattr(name, 'security.capability', struct.pack('<5I', 0x02000001, bits, 0, 0, 0))\n"
        "        print('set', name)\n"
        "    except OSError as error:\n"
        "        print('refused', name, error.errno)\n"
    )
    python = os.path.realpath(sys.executable)  # the venv of the tests sits in the host's /tmp, not the sandbox's
    solve = f"cp /bin/cat .cat && cp {python} .py\n{python} setcap.py > made.txt 2>&1\necho 41 > answer.txt\n"
    grade = 'bash solve.sh\nif [ "$(cat answer.txt)" = 42 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n'
    task_dir = task(tmp_path / "task", {"tests/test.sh": grade})
    workspace = task(tmp_path / "ws", {"solve.sh": solve, "setcap.py": setxattr})
    outcome = verify(task_dir, workspace)
    assert (outcome.reward, outcome.masked) == (0.0, False), outcome
    assert (workspace / "made.txt").read_text().startswith("refused .cat"), (workspace / "made.txt").read_text()
    for name in (".cat", ".py"):
        with pytest.raises(OSError):
            os.getxattr(workspace / name, "security.capability")


def test_the_host_is_read_only_and_its_environment_absent(tmp_path, monkeypatch):
    monkeypatch.setenv("NEMO_GYM_HOST_CANARY", "host-credential")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    probes = [
        "/etc/nemo-gym-probe",
        "/usr/local/nemo-gym-probe",
        f"{Path.home()}/nemo-gym-probe",
        "/var/tmp/nemo-gym-probe",
    ]
    script = "\n".join(f"echo x > {path} && echo wrote {path}" for path in probes)
    script += f"\nmount -o remount,rw / 2>/dev/null && echo remounted\nenv > {workspace}/env.txt\necho 1 > /logs/verifier/reward.txt\n"
    outcome = verify(task(tmp_path / "task", {"tests/test.sh": script}), workspace)
    assert outcome.reward == 1.0, outcome
    assert "remounted" not in outcome.stdout and "wrote /etc" not in outcome.stdout
    for path in probes:
        assert not Path(path).exists(), f"{path} reached the host"
    assert "host-credential" not in (workspace / "env.txt").read_text()


# --- 5: the collect path: damage, loss and any exception mask, never score --------------------------


class Hostile:
    """A LocalSandbox whose provider misbehaves: ``mutate`` rewrites what get_archive returns,
    ``raise_at`` names the call that raises ``error``."""

    def __init__(
        self,
        inner: LocalSandbox,
        mutate: Optional[Callable[[bytes], bytes]] = None,
        raise_at: str = "",
        error: Optional[BaseException] = None,
    ) -> None:
        self.inner, self.mutate, self.raise_at, self.error = inner, mutate, raise_at, error
        for name in ("admin_user", "tests_dir", "logs_dir", "tmp_dir", "workdir", "private_pids"):
            setattr(self, name, getattr(inner, name))

    def _maybe(self, call: str) -> None:
        if call == self.raise_at:
            assert self.error is not None
            raise self.error

    async def exec(self, command: str, **options: Any) -> ExecResult:
        self._maybe("exec")
        return await self.inner.exec(command, **options)

    async def upload_file(self, local_path: str, sandbox_path: str) -> None:
        await self.inner.upload_file(local_path, sandbox_path)

    async def download_file(self, sandbox_path: str, local_path: str) -> None:
        await self.inner.download_file(sandbox_path, local_path)

    async def put_archive(self, folder: str, data: bytes) -> None:
        self._maybe("put_archive")
        await self.inner.put_archive(folder, data)

    async def get_archive(self, path: str, *, limit: int) -> bytes:
        self._maybe("get_archive")
        data = await self.inner.get_archive(path, limit=limit)
        return self.mutate(data) if self.mutate else data


class HostilePipe(Hostile):
    """The same misbehaviour on the one exec that carries the files in and out (``exec_piped``):
    ``mutate`` rewrites its stdout, the results."""

    async def exec_piped(self, command: str, stdin: bytes, **options: Any) -> PipedResult:
        self._maybe("exec_piped")
        result = await self.inner.exec_piped(command, stdin, **options)
        return replace(result, stdout=self.mutate(result.stdout)) if self.mutate else result


REPORTED = {"tests/verifier.py": "def verify():\n    print('graded')\n    return {'reward': 0.75, 'm': 2}\n"}


@pytest.fixture(scope="module")
def reported_task(tmp_path_factory) -> Path:
    return task(tmp_path_factory.mktemp("reported"), REPORTED)


@pytest.mark.once
@pytest.mark.parametrize("hostile", [Hostile, HostilePipe])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(position=st.floats(0, 1, exclude_max=True), bit=st.integers(0, 7))
def test_a_flipped_byte_in_the_results_masks_or_changes_nothing(reported_task, tmp_path, hostile, position, bit):
    def flip(data: bytes) -> bytes:
        index = int(position * len(data))
        return data[:index] + bytes([data[index] ^ (1 << bit)]) + data[index + 1 :]

    outcome = verify(reported_task, tmp_path, wrap=lambda sandbox: hostile(sandbox, mutate=flip))
    honest = (0.75, {"m": 2.0}, None, False)
    assert (outcome.masked and outcome.mask_reason == "sandbox_error") or (
        outcome.reward,
        outcome.metrics,
        outcome.failure_kind,
        outcome.masked,
    ) == honest, outcome


@pytest.mark.once
@pytest.mark.parametrize("hostile", [Hostile, HostilePipe])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fraction=st.floats(0, 1, exclude_max=True))
def test_truncated_results_mask_or_change_nothing(reported_task, tmp_path, hostile, fraction):
    outcome = verify(
        reported_task, tmp_path, wrap=lambda sandbox: hostile(sandbox, mutate=lambda d: d[: int(fraction * len(d))])
    )
    assert (outcome.masked and outcome.mask_reason == "sandbox_error") or (outcome.reward, outcome.metrics) == (
        0.75,
        {"m": 2.0},
    ), outcome


@pytest.mark.parametrize(
    "hostile, call",
    [(Hostile, "put_archive"), (Hostile, "exec"), (Hostile, "get_archive"), (HostilePipe, "exec_piped")],
)
@pytest.mark.parametrize(
    "error",
    [ConnectionResetError("reset by peer"), OSError(5, "I/O error"), EOFError(), RuntimeError("lost"), KeyError("Id")],
    ids=lambda error: type(error).__name__,
)
def test_any_exception_from_the_provider_masks_the_sample(reported_task, tmp_path, hostile, call, error):
    outcome = verify(reported_task, tmp_path, wrap=lambda sandbox: hostile(sandbox, raise_at=call, error=error))
    assert outcome.masked and outcome.mask_reason == "sandbox_error" and outcome.failure_kind is None, outcome


@pytest.mark.parametrize("hostile", [Hostile, HostilePipe])
def test_a_lost_stream_masks_the_sample(reported_task, tmp_path, hostile):
    outcome = verify(reported_task, tmp_path, wrap=lambda sandbox: hostile(sandbox, mutate=lambda data: b""))
    assert outcome.masked and "could not be copied out" in outcome.detail, outcome


def test_every_mask_is_counted_and_logged(reported_task, tmp_path, caplog):
    before = mask_counts().get("sandbox_error", 0)
    with caplog.at_level(logging.WARNING, logger="nemo_gym.harbor"):
        verify(reported_task, tmp_path, wrap=lambda sandbox: Hostile(sandbox, raise_at="exec", error=OSError("gone")))
    assert mask_counts()["sandbox_error"] == before + 1
    assert any("masked a sample (sandbox_error)" in record.getMessage() for record in caplog.records)


def test_a_flood_of_output_is_capped(tmp_path):
    source = "import sys\ndef verify():\n    for _ in range(64):\n        sys.stdout.write('y' * (1 << 20))\n    return 0.5\n"
    outcome = verify(task(tmp_path / "task", {"tests/verifier.py": source}), tmp_path)
    assert outcome.reward == 0.5 and len(outcome.stdout) <= STDOUT_TAIL_BYTES, (outcome.reward, len(outcome.stdout))
    assert outcome.stdout.startswith(STDOUT_CUT_NOTE)


def test_a_cut_output_says_so_and_starts_at_a_line(tmp_path):
    """A new author's trial: 200,000 printed lines came back as their last 64 KiB, starting mid-line,
    with nothing to say that the rest was left out."""
    source = "def verify():\n    for n in range(200000):\n        print('line', n, 'x' * 40)\n    return 1\n"
    outcome = verify(task(tmp_path / "task", {"tests/verifier.py": source}), tmp_path)
    assert outcome.stdout.startswith(STDOUT_CUT_NOTE + "line "), outcome.stdout[:200]
    assert outcome.stdout.endswith('reward.json: {"reward": 1}\n') and len(outcome.stdout) <= STDOUT_TAIL_BYTES
    short = verify(
        task(tmp_path / "short", {"tests/verifier.py": "def verify():\n    print('hi')\n    return 1\n"}), tmp_path
    )
    assert short.stdout.startswith("hi\n"), short.stdout


# --- 8: secrets never leak, escaped or cut in half ----------------------------------------------------

SECRET = 'Zq9xK2mW7pR4tY8v"\\é'


@pytest.mark.parametrize("shift", [0, 7, STDOUT_TAIL_BYTES - 9, STDOUT_TAIL_BYTES + 16 * 1024 - 9])
def test_secrets_are_redacted_in_every_form_and_at_every_cut(tmp_path, shift):
    source = f"""
        import json, os
        def verify():
            secret = os.environ["JUDGE_KEY"]
            print(secret, repr(secret), json.dumps(secret), json.dumps(secret, ensure_ascii=False), secret.encode())
            print(secret, end="")
            print("." * {shift}, end="")
            return {{"reward": 1, secret: 1}}
    """
    task_dir = task(
        tmp_path / "task", {"tests/verifier.py": source, "task.toml": '[verifier.env]\nJUDGE_KEY = "${JUDGE_KEY}"\n'}
    )
    outcome = verify(task_dir, tmp_path, secrets={"JUDGE_KEY": SECRET})
    text = outcome.stdout + outcome.detail + json.dumps(outcome.metrics, ensure_ascii=False)
    plain = SECRET.replace('"', "").replace("\\", "").replace("é", "")
    pieces = {plain[start : start + 3] for start in range(len(plain) - 2)}
    assert not [piece for piece in pieces if piece in text], text[:300]
    assert outcome.reward == 1.0


def test_the_channel_scores_a_python_verifier_when_reward_json_is_lost(tmp_path):
    # verify's own child deletes reward.json after the runner wrote it: the report still scores.
    source = """
        import os, subprocess, sys
        CODE = "import os, time\\nif os.fork(): os._exit(0)\\ntime.sleep(0.3)\\nos.unlink('/logs/verifier/reward.json')\\n"
        def verify():
            subprocess.run([sys.executable, "-c", CODE])
            return 0.25
    """
    outcome = verify(task(tmp_path / "task", {"tests/verifier.py": source}), tmp_path)
    assert outcome.reward == 0.25 and not outcome.masked, outcome


def test_the_report_is_required_reward_json_alone_scores_nothing(tmp_path):
    # A verifier that kills its own runner after planting a perfect reward.json.
    source = """
        import os, signal
        def verify():
            with open("/logs/verifier/reward.json", "w") as handle:
                handle.write('{"reward": 1}')
            os.kill(os.getpid(), signal.SIGKILL)
    """
    outcome = verify(task(tmp_path / "task", {"tests/verifier.py": source}), tmp_path)
    assert (outcome.reward, outcome.failure_kind) == (0.0, MISSING_REWARD), outcome
    assert "not written by the runner" in outcome.detail


def test_the_runner_under_stock_harbor_writes_reward_json_alone(run_shim):
    # No channel set: the runner behaves exactly as Harbor expects, and prints no report anywhere.
    run = run_shim("def verify():\n    return 0.5\n")
    assert run.reward == {"reward": 0.5} and "nemo-gym-report" not in run.output


# --- found by attacking it: variables that act on a program as it starts ---------------------------


@pytest.mark.parametrize("kind", ["verifier.py", "test.sh"])
def test_ld_preload_into_the_workspace_never_reaches_grading(tmp_path, kind):
    from support import GRADING_PROGRAMS, loaded_by, preload_library

    workspace = tmp_path / "ws"
    workspace.mkdir()
    library = preload_library(workspace / "lib", f"{workspace}/loaded")
    env = {"LD_PRELOAD": str(library)}
    if kind == "verifier.py":
        tests = {
            "tests/verifier.py": "import subprocess\ndef verify():\n    subprocess.run(['true'])\n    return 0.5\n"
        }
    else:
        tests = {"tests/test.sh": "/bin/true  # a program, not the builtin\necho 0.5 > /logs/verifier/reward.txt\n"}
    table = "[verifier.env]\n" + "".join(f"{key} = {json.dumps(value)}\n" for key, value in env.items())
    task_dir = task(tmp_path / "task", {**tests, "task.toml": table})
    outcome = verify(task_dir, workspace, sandbox_env=env)
    assert outcome.reward == 0.5 and not outcome.masked, outcome
    programs = {program for program, _ in loaded_by(workspace / "loaded")}
    assert "true" in programs, "the task's LD_PRELOAD must still reach what the verifier starts"
    assert not programs & GRADING_PROGRAMS, programs
    if kind == "verifier.py":
        assert not programs & {"python3", "python", "bash", "timeout"}, programs


@pytest.mark.parametrize("where", ["sandbox", "verifier.env"])
def test_a_bash_cmds_variable_never_names_what_grading_runs_as_root(tmp_path, where):
    """Found by red team round 24: bash takes a BASH_CMDS in its environment for a plain variable, not
    its table of found programs, so grading that read timeout's path from ${BASH_CMDS[timeout]} ran the
    variable's value, a program in the workspace, as root. Grading finds its programs with builtins."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    evil = workspace / "evil"
    evil.write_text(f"#!/bin/bash\nid -u > {workspace}/ran-as\necho 1 > /logs/verifier/reward.txt\n")
    evil.chmod(0o755)
    table = f'[verifier.env]\nBASH_CMDS = "{evil}"\n' if where == "verifier.env" else ""
    task_dir = task(tmp_path / "task", {"tests/test.sh": "echo 0 > /logs/verifier/reward.txt\n", "task.toml": table})
    outcome = verify(task_dir, workspace, sandbox_env={"BASH_CMDS": str(evil)} if where == "sandbox" else None)
    assert not (workspace / "ran-as").exists()
    assert (outcome.reward, outcome.masked) == (0.0, False), outcome


def test_a_pythonpath_inside_the_workspace_never_reaches_verify(tmp_path):
    workspace = task(tmp_path / "ws", {"src/speedups.py": "FORGED = True\n"})
    source = """
        try:
            import speedups
            forged = 1.0
        except ImportError:
            forged = 0.0
        def verify():
            return {"reward": 0.5, "forged": forged}
    """
    task_dir = task(
        tmp_path / "task",
        {"tests/verifier.py": source, "task.toml": f'[verifier.env]\nPYTHONPATH = "{workspace}/:{workspace}/src/"\n'},
    )
    outcome = verify(task_dir, workspace)
    assert (outcome.reward, outcome.metrics) == (0.5, {"forged": 0.0}), outcome
    assert "is inside the working directory: not added to sys.path" in outcome.stdout


def test_a_rewritten_report_does_not_score(tmp_path):
    # verify runs the agent's program; its daemon copies the runner's report line (key and all) with
    # another score, and plants a matching reward.json.
    from support import REWRITER

    outcome = verify(task(tmp_path / "task", {"tests/verifier.py": REWRITER}), tmp_path)
    assert outcome.reward == 0.0 and not outcome.masked, outcome


def test_many_metrics_and_odd_keys_are_scored_exactly(tmp_path):
    source = """
        def verify():
            result = {"reward": 1.0, "two  spaces": 2, "tab\\tkey": 3}
            result.update((f"metric_{index:03d}", index) for index in range(200))
            return result
    """
    outcome = verify(task(tmp_path / "task", {"tests/verifier.py": source}), tmp_path)
    assert (outcome.reward, outcome.failure_kind, outcome.masked) == (1.0, None, False), outcome
    assert outcome.metrics["two  spaces"] == 2.0 and outcome.metrics["tab\tkey"] == 3.0 and len(outcome.metrics) == 202
    assert "changed after the runner wrote it" not in outcome.detail


def test_the_hosts_sockets_are_out_of_reach(tmp_path):
    sockets = "/run/docker.sock /var/run/docker.sock /run/dbus/system_bus_socket"
    script = f"for s in {sockets}; do [ -S $s ] && echo reachable $s; done\necho 1 > /logs/verifier/reward.txt\n"
    outcome = verify(task(tmp_path / "task", {"tests/test.sh": script}), tmp_path)
    assert outcome.reward == 1.0 and "reachable" not in outcome.stdout, outcome.stdout


FORGE = r"""
import gc, glob, os
open(os.environ["MARKS"], "a").write(__name__ + " ")
line = b"nemo-gym-report/2 " + b"0" * 64 + b' reward {"reward": 1}\n'
for thing in gc.get_objects():  # whatever in the runner can send a report
    if type(thing).__name__ in ("Channel", "Reporter"):
        try:
            thing.send("reward", '{"reward": 1}')
        except Exception:
            pass
for descriptor in range(3, 256):  # every descriptor it holds
    try:
        os.write(descriptor, line)
    except OSError:
        pass
for path in glob.glob("/tests/.gym-out-*/report"):  # the report file itself, as root
    with open(path, "ab") as report:
        report.write(line)
with open("/logs/verifier/reward.json", "w") as planted:
    planted.write('{"reward": 1}')
"""
PLANTED = (
    "_sha2", "_sha256", "hashlib", "json", "_json", "numbers", "traceback", "linecache", "_gym_runner_rare",
    "_gym_await", "_contextvars", "inspect",
)  # fmt: skip
PLANTER = f"""
import os, subprocess, sys
PLANT = '''
for name in {PLANTED!r}:
    with open("/tests/%s.py" % name, "w") as module:
        module.write(bytes.fromhex({FORGE.encode().hex()!r}).decode())
'''
def plant(workspace):
    subprocess.run([sys.executable, "-c", PLANT], check=True)
    os.environ["MARKS"] = str(workspace / "marks")  # for the planted modules, should any run here
def result(workspace):
    if (workspace / "fail").exists():
        raise RuntimeError("the error path imports too")
    return {{"reward": 0.0, "caf\\u00e9 \\u2713": 1}}
"""
PLANTING_VERIFY = {
    "sync": "def verify(workspace):\n    plant(workspace)\n    return result(workspace)\n",
    # Without asyncio imported, the runner awaits the coroutine with _gym_await, which it loads only
    # then: after the agent's program ran (so asyncio must not be imported yet).
    "async": (
        "async def grade(workspace):\n    assert 'asyncio' not in sys.modules\n    return result(workspace)\n"
        "def verify(workspace):\n    plant(workspace)\n    return grade(workspace)\n"
    ),
}


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("fail", [False, True])
def test_modules_planted_while_verify_runs_cannot_forge_the_report(tmp_path, fail, kind):
    # A root verifier runs the agent's program, which writes modules where the runner looks for
    # what it imports once verify has returned (the report's hash, JSON for an unusual key, the
    # runner's own rare paths, tracebacks) or once verifier.py has run, to await a coroutine verify
    # returned (_gym_await and _contextvars), each trying every way to report a reward of 1. None
    # runs before the report is sent: the runner loaded those before any code of the task ran.
    # Printing a failure's traceback afterwards does import them; by then the report is sent and
    # its key was never in the runner's process, so they forge nothing.
    workspace = tmp_path / "ws"
    workspace.mkdir()
    if fail:
        (workspace / "fail").write_text("")
    outcome = verify(task(tmp_path / "task", {"tests/verifier.py": PLANTER + PLANTING_VERIFY[kind]}), workspace)
    ran = (workspace / "marks").read_text().split() if (workspace / "marks").exists() else []
    if fail:
        assert outcome.failure_kind == MISSING_REWARD and outcome.reward == 0.0 and not outcome.masked, outcome
        assert "the error path imports too" in outcome.detail, outcome
        assert "traceback" in ran and set(ran) <= {"traceback", "linecache"}, ran  # printing the traceback imports them
    else:
        assert ran == [], ran
        assert (outcome.reward, outcome.metrics, outcome.masked) == (0.0, {"café ✓": 1.0}, False), outcome


def test_the_host_network_cannot_be_sniffed(tmp_path):
    source = """
        import socket
        def verify():
            try:
                socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
                return 1.0
            except OSError:
                return 0.0
    """
    outcome = verify(task(tmp_path / "task", {"tests/verifier.py": source}), tmp_path)
    assert (outcome.reward, outcome.masked) == (0.0, False), outcome


def test_an_interpreter_that_is_a_script_finds_none_of_the_agents_tools(tmp_path):
    # A pyenv shim is a bash script started through `#!/usr/bin/env bash`: with the task's PATH it
    # would run the agent's bash, as root, before the runner.
    import sys

    real = os.path.realpath(sys.executable)  # /tmp is the sandbox's own: the interpreter itself is not
    wrapper = write_files(tmp_path / "wrap", {"python3": f'#!/usr/bin/env bash\nexec {real} "$@"\n'})
    (wrapper / "python3").chmod(0o755)
    workspace = tmp_path / "ws"
    marker = f'#!/bin/sh\necho hijacked >> {workspace}/hijacked\nexec /bin/bash "$@"\n'
    task(workspace, {"bin/bash": marker, "bin/env": marker, "answer.txt": "42"})
    source = """
        import os
        def verify(workspace):
            return {"reward": 1.0, "path_kept": float(os.environ["PATH"].startswith(str(workspace) + "/bin:"))}
    """
    env = {"PATH": f"{workspace}/bin:/opt/wrap:/usr/bin:/bin"}
    task_dir = task(
        tmp_path / "task", {"tests/verifier.py": source, "task.toml": f'[verifier.env]\nPATH = "{env["PATH"]}"\n'}
    )
    outcome = verify(task_dir, workspace, sandbox_env=env, mounts={"/opt/wrap": wrapper})
    assert not (workspace / "hijacked").exists(), (workspace / "hijacked").read_text()
    assert (outcome.reward, outcome.metrics) == (1.0, {"path_kept": 1.0}), outcome  # verify gets the task's PATH


SYSV_SEGMENT = """
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.shmget.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int]
key = int(sys.argv[1])
made = libc.shmget(key, 1 << 20, 0o1666 if sys.argv[2] == "make" else 0)
print("found" if made >= 0 else "absent")
"""


def test_shared_memory_a_command_leaves_dies_with_it(tmp_path):
    # Red team 36: each command shared the host's IPC namespace, so a SysV segment the agent left
    # (no process owns it, and nothing frees it) held the host's memory for good, and the next sample's
    # sandbox, or the host itself, could read and write it.
    key = 0x4E470000 + os.getpid() % 0xFFFF
    probe = ["python3", "-c", SYSV_SEGMENT, str(key)]

    async def run() -> List[str]:
        seen = []
        for _ in range(2):
            workspace = tmp_path / f"ws{len(seen)}"
            workspace.mkdir()
            async with LocalSandbox(workspace, workdir="/workspace") as sandbox:
                seen.append((await sandbox.exec(shlex.join([*probe, "make"]))).stdout.strip())
                seen.append((await sandbox.exec(shlex.join([*probe, "look"]))).stdout.strip())
        return seen

    try:
        assert asyncio.run(run()) == ["found", "absent", "found", "absent"]
        with open("/proc/sysvipc/shm") as segments:
            assert not any(line.split()[0] == str(key) for line in segments.readlines()[1:])
    finally:
        subprocess.run(["ipcrm", "-M", str(key)], capture_output=True)


def test_the_hosts_path_into_the_sandboxs_own_folders_runs_nothing_the_agent_planted(tmp_path, monkeypatch):
    # Red team 83: every command got the host's PATH, and a venv activated from /tmp put /tmp/venv/bin
    # first: inside, /tmp is the sandbox's own, open to every user and kept across commands, so the
    # agent's program planted a `cat` there that the task's test.sh then ran as root: 1.0.
    own = [f"/tmp/nemo-gym-planted-{os.getpid()}/bin", "/var/tmp/planted", "/logs/planted", "/workspace/bin"]
    monkeypatch.setenv("PATH", ":".join([*own, os.environ["PATH"]]))
    workspace = tmp_path / "ws"
    task(workspace, {"answer.txt": "0\n"})
    task_dir = task(tmp_path / "task", {"tests/test.sh": "cat answer.txt > /logs/verifier/reward.txt\n"})
    plant = "".join(
        f"mkdir -p {folder}; printf '#!/bin/sh\\necho 1\\n' > {folder}/cat; chmod +x {folder}/cat\n" for folder in own
    )

    async def run() -> VerificationOutcome:
        async with LocalSandbox(workspace, workdir="/workspace") as sandbox:
            assert not set(sandbox.environment["PATH"].split(":")) & set(own), sandbox.environment["PATH"]
            planted = await sandbox.exec(plant + f"head -n 1 {own[0]}/cat", user="nobody")
            assert planted.stdout.startswith("#!/bin/sh"), planted  # the agent's program could plant it
            return await run_verification(plan_verification(load_task(task_dir)), sandbox)

    outcome = asyncio.run(run())
    assert (outcome.reward, outcome.masked) == (0.0, False), outcome


def test_a_path_entry_whose_link_leads_into_the_sandboxs_own_folders_is_dropped(tmp_path):
    (tmp_path / "own" / "bin").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "own")
    (tmp_path / "kept").mkdir()
    path = f"{tmp_path}/link/bin:{tmp_path}/kept:{tmp_path}/missing:{tmp_path}/own/bin:/usr/bin"
    assert own_path(path, [str(tmp_path / "own")]) == f"{tmp_path}/kept:/usr/bin"


def test_a_numeric_agent_user_never_shares_its_uid_with_a_named_verifier(tmp_path):
    # Red team 83: a name the host lacks got the first uid the host's passwd did not list, which an
    # agent named by number ([agent].user = 1000) could already be: the verifier, `grader`, was the agent.
    needs_root()
    taken = {entry.pw_uid for entry in pwd.getpwall()}
    free = next(number for number in range(1000, 60000) if number not in taken)

    async def run() -> str:
        async with LocalSandbox(tmp_path, users=["nemo-gym-grader", free]) as sandbox:
            return (await sandbox.exec("id -u", user="nemo-gym-grader")).stdout.strip()

    assert asyncio.run(run()) != str(free)


@pytest.mark.parametrize("lead", [1, 2])
def test_a_secret_cut_inside_its_first_character_is_still_redacted(tmp_path, lead):
    # Red team 84: the output's tail is cut by bytes, and a cut inside the secret's first character
    # (é, two bytes) left a U+FFFD in its place, after which no part of the text started a form of the
    # secret: the rest of it was shown. Padded with three-byte characters, nothing trimmed it after.
    from nemo_gym.data.tasks.harbor.verification import REDACTION_MARGIN_BYTES

    secret = "ésk-live-ABCDEF0123456789"
    total = STDOUT_TAIL_BYTES + REDACTION_MARGIN_BYTES  # what finish keeps: the output's last bytes
    wide, rest = divmod(total + lead - len(secret.encode()), 3)
    # The kept tail starts `lead` byte(s) into the secret (test.sh prints nothing else).
    script = f"import os, sys; sys.stdout.buffer.write(b'x' * 4096 + os.environ['JUDGE_KEY'].encode() + '界'.encode() * {wide} + b'.' * {rest})"
    test_sh = f'python3 -c "{script}"\necho 1 > /logs/verifier/reward.txt\n'
    task_dir = task(
        tmp_path / "task", {"tests/test.sh": test_sh, "task.toml": '[verifier.env]\nJUDGE_KEY = "${JUDGE_KEY}"\n'}
    )
    outcome = verify(task_dir, tmp_path, secrets={"JUDGE_KEY": secret})
    assert "ABCDEF" not in outcome.stdout, outcome.stdout[:80]
    assert outcome.stdout.startswith("***界"), outcome.stdout[:80]
    assert outcome.reward == 1.0


def test_a_secret_cut_short_in_a_detail_is_still_redacted(tmp_path):
    # Red team 84: a reward.json value that is not a number is quoted in the detail cut to 40
    # characters, before redaction, which then found no whole form of the secret: 39 of its characters
    # were shown. A piece of a secret of at least 8 characters is redacted anywhere in a detail.
    secret = "sk-live-ABCDEF0123456789-abcdefghijklmnopqrstuvwxyz"
    test_sh = 'printf \'{"reward": "%s"}\' "$JUDGE_KEY" > /logs/verifier/reward.json\n'
    task_dir = task(
        tmp_path / "task", {"tests/test.sh": test_sh, "task.toml": '[verifier.env]\nJUDGE_KEY = "${JUDGE_KEY}"\n'}
    )
    outcome = verify(task_dir, tmp_path, secrets={"JUDGE_KEY": secret})
    assert outcome.failure_kind == "harbor:invalid_reward", outcome
    assert "ABCDEF" not in outcome.detail and "***" in outcome.detail, outcome.detail


def test_pieces_of_a_secret_are_redacted_anywhere_in_a_detail():
    from nemo_gym.data.tasks.harbor.redaction import redact

    secret = "sk-live-ABCDEF0123456789"
    assert redact(f"head {secret[:9]} mid {secret[5:14]}. tail", [secret], pieces=True) == "head *** mid ***. tail"
    assert redact("a sk-live- b", [secret], pieces=True) == "a *** b"  # 8 characters or more
    assert redact("a sk-live b", [secret], pieces=True) == "a sk-live b"  # 7: left
    assert redact(f"x {secret[:9]}", [secret]) == f"x {secret[:9]}"  # only where asked


def test_a_metric_named_with_a_lone_surrogate_is_scored_and_printable(tmp_path):
    # Red team 84: a reward.json key "\ud800" (JSON lets it be) reached the outcome as it was, which
    # no strict UTF-8 writer can write: `gym-harbor verify` died printing it, and a server's JSON would too.
    test_sh = 'printf \'{"reward": 1, "a\\\\ud800b": 2}\' > /logs/verifier/reward.json\n'
    outcome = verify(task(tmp_path / "task", {"tests/test.sh": test_sh}), tmp_path)
    assert outcome.reward == 1.0, outcome
    [name] = outcome.metrics
    name.encode("utf-8")  # strict: raises on a lone surrogate
    assert name.startswith("a") and name.endswith("b") and outcome.metrics[name] == 2.0
