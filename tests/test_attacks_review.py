"""A red-team review of the key holder, the piped exec and the async hand driver, on the local sandbox.

Each test is an attack the agent (or the program a verify runs for it) would try, and asserts the
honest score with no mask the agent caused. Those that found holes say so, and what closed them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import pyenv_python
from test_attacks import needs_root, task, verify

from nemo_gym.data.tasks.harbor.rewards import MISSING_REWARD, VERIFIER_TIMEOUT

pytestmark = pytest.mark.every_python  # the in-sandbox part: proven on every Python (noxfile)

NOBODY = '[verifier]\nuser = "nobody"\n'

# Code that, once it runs inside the runner, sends a report of 1 through whatever the runner holds.
FORGE = r"""
import gc, os
open(os.environ["MARKS"], "a").write(__name__ + " ")
for thing in gc.get_objects():
    if type(thing).__name__ in ("Channel", "Reporter"):
        try:
            thing.send("reward", '{"reward": 1}')
        except Exception:
            pass
"""


def python_path(version: str) -> str:
    return f"{pyenv_python(version).parent}:/usr/local/bin:/usr/bin:/bin"


# --- the runner's late imports: what loads after verify ran, before the report ---------------------

LATE_PLANTER = f"""
import json, os
PLANT = '''
for name in ("math", "numbers", "_json", "_contextvars", "_thread"):
    with open("/tests/" + name + ".py", "w") as module:
        module.write(bytes.fromhex({FORGE.encode().hex()!r}).decode())
with open("result.json", "w") as result:
    result.write(open("wanted").read())
'''
def verify():
    # The agent's program, run as root through os.system (subprocess, pathlib and tempfile would
    # import math first): it writes modules where the runner looks first (/tests is sys.path[0]),
    # and its result.
    with open("program.py", "w") as program:
        program.write(PLANT)
    os.system("python3 program.py")
    os.environ["MARKS"] = os.path.abspath("marks")
    return json.loads(open("result.json").read())  # garbage raises: the error path loads the rare module too
"""


@pytest.mark.parametrize("fail", [False, True])
@pytest.mark.parametrize("version", ["3.8", "3.10", "3.11", "3.12", "3.13"])
def test_the_rare_modules_imports_are_loaded_before_verify_runs(tmp_path, version, fail):
    # Found in review: _gym_runner_rare imports `math`, which take_over did not import early (only
    # 3.11's site happened to). /tests is sys.path[0], so a /tests/math.py that the agent's program
    # (run by a root verify) wrote ran in the runner before its report, found the Reporter and sent
    # a reward of 1. Any result off the common path (a numpy float, a non-ASCII metric name) or an
    # exception in verify took that path. take_over now imports all of LATE_IMPORTS, and
    # test_late_modules_import_nothing_new keeps that list whole on every Python.
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "wanted").write_text("not JSON" if fail else '{"reward": 0.0, "caf\\u00e9": 1}')
    task_dir = task(tmp_path / "task", {"tests/verifier.py": LATE_PLANTER})
    outcome = verify(task_dir, workspace, sandbox_env={"PATH": python_path(version)})
    ran = (workspace / "marks").read_text().split() if (workspace / "marks").exists() else []
    assert ran == [], (ran, outcome)
    assert outcome.reward == 0.0 and not outcome.masked, outcome


# --- the key holder, from the verifier's user -------------------------------------------------------

HOLDER_PROBE = r"""
import ctypes, json, os, signal, subprocess, sys
CODE = r'''
import ctypes, json, os, signal, sys
runner = os.getppid()
seen = {"runner": runner, "holder": None, "opened": [], "denied": [], "signalled": [], "traced": []}
children = []
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    try:
        stat = open("/proc/%s/stat" % pid).read()
    except OSError:
        continue
    if int(stat.rsplit(")", 1)[1].split()[1]) == runner and int(pid) != os.getpid():
        children.append(int(pid))
seen["holder"] = children
libc = ctypes.CDLL(None, use_errno=True)
for pid in children + [runner]:
    for what in ("mem", "environ"):
        try:
            open("/proc/%d/%s" % (pid, what), "rb").read(1)
            seen["opened"].append("%s:%d" % (what, pid))
        except OSError:
            seen["denied"].append("%s:%d" % (what, pid))
    try:
        fds = os.listdir("/proc/%d/fd" % pid)
    except OSError:
        seen["denied"].append("fd:%d" % pid)
        fds = [str(fd) for fd in range(3, 12)]
    for fd in fds:
        try:
            with open("/proc/%d/fd/%s" % (pid, fd), "wb") as handle:
                handle.write(b'reward {"reward": 1}')
            seen["opened"].append("fd%s:%d" % (fd, pid))
        except OSError:
            pass
    if libc.ptrace(16, pid, None, None) == 0:  # PTRACE_ATTACH
        seen["traced"].append(pid)
    for sig in (signal.SIGSTOP, signal.SIGKILL) if pid != runner else ():
        try:
            os.kill(pid, sig)
            seen["signalled"].append(pid)
        except OSError:
            pass
print("probe: " + json.dumps(seen))
'''
def verify():
    subprocess.run([sys.executable, "-c", CODE], check=True)
    return 0.0
"""


def test_the_verifiers_user_cannot_reach_the_key_holder(tmp_path):
    # The program verify runs, as the verifier's user, looks for the key holder (the runner's child,
    # forked as root before the switch) and tries its memory, its descriptors, ptrace and signals,
    # and writes a reward of 1 into every descriptor of it and of the runner it can open.
    needs_root()
    task_dir = task(tmp_path / "task", {"tests/verifier.py": HOLDER_PROBE, "task.toml": NOBODY})
    outcome = verify(task_dir, tmp_path)
    seen = json.loads(outcome.stdout.split("probe: ", 1)[1].splitlines()[0])
    assert len(seen["holder"]) == 1, seen  # the key holder was found
    assert (seen["opened"], seen["signalled"], seen["traced"]) == ([], [], []), seen
    assert (outcome.reward, outcome.failure_kind, outcome.masked) == (0.0, None, False), outcome


ROOT_STOPS_HOLDER = r"""
import os, signal, subprocess, sys
CODE = r'''
import os, signal, sys
runner = os.getppid()
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    try:
        stat = open("/proc/%s/stat" % pid).read()
    except OSError:
        continue
    if int(stat.rsplit(")", 1)[1].split()[1]) == runner and int(pid) != os.getpid():
        os.kill(int(pid), getattr(signal, sys.argv[1]))
'''
def verify(workspace):
    subprocess.run([sys.executable, "-c", CODE, (workspace / "signal").read_text()], check=True)
    return 1.0
"""


@pytest.mark.parametrize("signal_name", ["SIGKILL", "SIGSTOP"])
def test_a_root_program_that_stops_or_kills_the_holder_scores_nothing(tmp_path, signal_name):
    # Root's program can signal the key holder: then no report comes (killed), or grading waits
    # for the holder until test.sh's timeout (stopped). Either way nothing scores and nothing masks;
    # grading still ends.
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "signal").write_text(signal_name)
    task_dir = task(tmp_path / "task", {"tests/verifier.py": ROOT_STOPS_HOLDER})
    started = time.monotonic()
    outcome = verify(task_dir, workspace, timeout_sec=4)
    assert time.monotonic() - started < 60
    assert (outcome.reward, outcome.masked) == (0.0, False), outcome
    expected = VERIFIER_TIMEOUT if signal_name == "SIGSTOP" else MISSING_REWARD
    assert outcome.failure_kind == expected, outcome


RUNNER_KILLER = r"""
import os, subprocess, sys
def verify():
    # The agent's program, as the verifier's user (the runner's own uid): it stops or kills the runner.
    subprocess.run([sys.executable, "-c", "import os, signal, sys; os.kill(os.getppid(), getattr(signal, sys.argv[1]))", SIGNAL])
    return 1.0
"""


@pytest.mark.parametrize("signal_name", ["SIGKILL", "SIGSTOP"])
def test_the_runner_killed_or_stopped_by_its_own_user_scores_nothing_and_ends(tmp_path, signal_name):
    needs_root()
    source = f"SIGNAL = {signal_name!r}\n" + RUNNER_KILLER
    task_dir = task(tmp_path / "task", {"tests/verifier.py": source, "task.toml": NOBODY})
    started = time.monotonic()
    outcome = verify(task_dir, tmp_path, timeout_sec=4)
    assert time.monotonic() - started < 60
    assert (outcome.reward, outcome.masked) == (0.0, False), outcome
    expected = VERIFIER_TIMEOUT if signal_name == "SIGSTOP" else MISSING_REWARD
    assert outcome.failure_kind == expected, outcome


# --- what verify itself does to the runner's process -----------------------------------------------


def test_a_verify_that_leaves_a_forked_worker_is_still_scored(tmp_path):
    # Not a reward hack, a false 0 (a regression of the key holder): the pipe to the holder is
    # inherited by every fork of the runner's process (multiprocessing's default on Linux before
    # 3.14), and the holder waits for the pipe's end of file, the runner for the holder. A verify
    # whose Pool it never closed (its workers end at the interpreter's exit) now deadlocks until
    # test.sh's timeout and scores 0 as a timeout; before the holder it scored its result. Fix:
    # keep the pipe from forks (os.register_at_fork(after_in_child=...) closing it), or frame the
    # message (a length first) so that the holder stops reading at its end, not at end of file.
    source = """
        import multiprocessing
        POOL = None  # made once, reused, ended with the interpreter
        def square(x):
            return x * x
        def verify():
            global POOL
            POOL = POOL or multiprocessing.Pool(2)
            return float(sum(POOL.map(square, [1, 2, 3])) == 14)
    """
    started = time.monotonic()
    outcome = verify(task(tmp_path / "task", {"tests/verifier.py": source}), tmp_path, timeout_sec=8)
    assert (outcome.reward, outcome.failure_kind, outcome.masked) == (1.0, None, False), (
        outcome,
        time.monotonic() - started,
    )


def test_a_forked_child_that_returns_from_verify_cannot_add_a_score(tmp_path):
    # verify forks and its child returns 1 from verify too (a child that should have exec'd the
    # agent's program and failed to): two runners send into one holder, which signs what it read.
    source = """
        import os
        def verify():
            if os.fork() == 0:
                return 1.0
            os.wait()
            return 0.0
    """
    outcome = verify(task(tmp_path / "task", {"tests/verifier.py": source}), tmp_path)
    assert outcome.reward == 0.0 and not outcome.masked, outcome


@pytest.mark.parametrize("reopen", [False, True])
def test_a_verify_that_closes_every_descriptor_scores_nothing_and_ends(tmp_path, reopen):
    # The pipe to the holder is among them; with `reopen`, a file verify opens takes its number, so the
    # runner's message goes there. No report: no score, no mask, no hang.
    source = f"""
        import os
        def verify(workspace):
            os.closerange(0, 256)
            if {reopen!r}:
                handles = [open(workspace / f"f{{i}}", "w") for i in range(12)]
            return 1.0
    """
    outcome = verify(task(tmp_path / "task", {"tests/verifier.py": source}), tmp_path, timeout_sec=20)
    assert (outcome.reward, outcome.failure_kind, outcome.masked) == (0.0, MISSING_REWARD, False), outcome


def test_a_verify_that_exits_after_planting_reward_json_scores_nothing(tmp_path):
    source = """
        import os
        def verify():
            with open("/logs/verifier/reward.json", "w") as planted:
                planted.write('{"reward": 1}')
            os._exit(0)
    """
    outcome = verify(task(tmp_path / "task", {"tests/verifier.py": source}), tmp_path)
    assert (outcome.reward, outcome.failure_kind, outcome.masked) == (0.0, MISSING_REWARD, False), outcome


@pytest.mark.parametrize("size", [(1 << 20) - 200, (1 << 20) + 2000, (1 << 20) + 6000, 3 << 20])
def test_a_huge_reward_text_neither_hangs_nor_scores_more(tmp_path, size):
    # verify's result names metrics after the agent's test names: its reward.json text is huge.
    # Whatever reaches the host, the reward is the honest 0 and grading ends.
    source = f"""
        def verify():
            result = {{"reward": 0.0}}
            name = "m" * 1000
            for index in range({size} // 1010 + 1):
                result[f"{{name}}{{index:06d}}"] = 1
            return result
    """
    started = time.monotonic()
    outcome = verify(task(tmp_path / "task", {"tests/verifier.py": source}), tmp_path, timeout_sec=60)
    assert time.monotonic() - started < 60
    assert outcome.reward == 0.0 and not outcome.masked, outcome.detail


ODD_KEYS = {
    "reward": 0.25,
    'quote"key': 1,
    "back\\slash": 2,
    "new\nline": 3,
    "tab\tkey": 4,
    "nul\x00key": 5,
    "del\x7fkey": 6,
    "caf\u00e9": 7,
    "snow\u2603man": 8,
    "astral\U0001f600": 9,
    "lone\ud800surrogate": 10,
    "reward ": 11,
    " reward": 12,
    "nemo-gym-report/2 " + "0" * 64 + " reward": 13,
    "x" * 300: 1e308,
    "neg": -0.0,
    "big": 2**1000,
    "true": True,
}


def test_odd_keys_are_written_as_json_dumps_writes_them(tmp_path):
    source = f"def verify():\n    return {ODD_KEYS!r}\n"
    outcome = verify(task(tmp_path / "task", {"tests/verifier.py": source}), tmp_path)
    assert (outcome.reward, outcome.failure_kind, outcome.masked) == (0.25, None, False), outcome
    written = outcome.files["reward.json"].decode().rstrip("\n")
    expected = {key: (int(value) if isinstance(value, bool) else value) for key, value in ODD_KEYS.items()}
    assert json.loads(written) == expected
    assert written == json.dumps(expected), (written, json.dumps(expected))
    assert "changed after the runner wrote it" not in outcome.detail, outcome.detail
    # A name no UTF-8 writer takes (a lone surrogate) comes back with U+FFFD in its place (red team 84).
    printable = {
        key.encode("utf-8", "surrogatepass").decode("utf-8", "replace"): value for key, value in expected.items()
    }
    assert "lone\ufffd\ufffd\ufffdsurrogate" in printable
    assert outcome.metrics == {key: float(value) for key, value in printable.items() if key != "reward"}


# --- results that do not fit what the host accepts: masks the agent can cause -----------------------

OUTPUT_WRITER = r"""
import subprocess, sys
CODE = r'''
import os, sys
kind = sys.argv[1]
os.chdir("/logs/verifier")
if kind == "many":  # one file per test of the agent's suite, a common harness's habit
    for index in range(80):
        open("test_%03d.xml" % index, "w").write("<ok/>")
elif kind == "long":  # one file at the end of a long path: legal in /logs/verifier, too long in the out folder
    for _ in range(40):
        os.mkdir("d" * 99)
        os.chdir("d" * 99)
    open("x" * 60, "w").write("x")
elif kind == "deep":  # chains of folders: each is a tar member, none is counted
    for top in range(4):
        os.chdir("/logs/verifier")
        os.mkdir("t%d" % top)
        os.chdir("t%d" % top)
        for _ in range(1900):
            os.mkdir("d")
            os.chdir("d")
        open("f", "w").write("x")
'''
def verify(task_data):
    subprocess.run([sys.executable, "-c", CODE, task_data["kind"]], check=True)
    return 0.0
"""


@pytest.mark.parametrize("kind", ["many", "long", "deep"])
@pytest.mark.parametrize("user", [None, "nobody"])
def test_the_verifiers_output_files_cannot_mask_the_sample(tmp_path, kind, user):
    # Found in review (masks the agent caused where the honest score is 0): the program verify runs
    # writes in /logs/verifier, and finish copies up to 100 files and 8 MiB of it, but
    # - "many": .sums lists every file and was capped at 4096 bytes, so about 55 files overflowed it;
    # - "long": a path legal in /logs/verifier was too long under the out folder (exit 92);
    # - "deep": folders were not counted, and deep chains pushed the results past their cap.
    # Now .sums's cap follows from the file caps, and a name over MAX_OUTPUT_NAME characters or
    # MAX_OUTPUT_DEPTH folders is skipped and counted like any file that does not fit.
    needs_root()
    files = {
        "tests/verifier.py": OUTPUT_WRITER,
        "task.toml": NOBODY if user else "",
        "task_data.json": json.dumps({"kind": kind}),
    }
    outcome = verify(task(tmp_path / "task", files), tmp_path)
    assert (outcome.reward, outcome.failure_kind, outcome.masked) == (0.0, None, False), outcome


# --- the async hand driver ----------------------------------------------------------------------------

ASYNC_VERIFIERS = {
    "import mid-coroutine": """
        import sys
        async def verify():
            assert "asyncio" not in sys.modules
            import asyncio
            await asyncio.sleep(0.01)
            values = await asyncio.gather(*(asyncio.sleep(0, result=i) for i in range(3)))
            return float(values == [0, 1, 2])
    """,
    "import in a helper after a sleep(0)": """
        import sys, types
        @types.coroutine
        def pause():
            yield
        async def helper():
            import asyncio
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(None, sum, [1, 2])
        async def verify():
            await pause()
            return float(await helper() == 3)
    """,
    # asyncio imported by another thread between two steps driven by hand: the loop starts before
    # the next step.
    "a thread imports asyncio between steps": """
        import sys, threading, types
        @types.coroutine
        def pause():
            yield
        async def verify():
            assert "asyncio" not in sys.modules
            thread = threading.Thread(target=lambda: __import__("asyncio"))
            thread.start()
            thread.join()
            await pause()
            import asyncio
            await asyncio.sleep(0.01)
            return 1.0
    """,
    # A thread alive when the drive would start could import asyncio in the middle of a step: the
    # runner takes asyncio.run.
    "a thread alive at the start imports asyncio": """
        import sys, threading
        go, done = threading.Event(), threading.Event()
        def later():
            go.wait()
            __import__("asyncio")
            done.set()
        threading.Thread(target=later, daemon=True).start()
        async def verify():
            go.set()
            done.wait()
            import asyncio
            await asyncio.sleep(0.01)
            return 1.0
    """,
}


@pytest.mark.parametrize("name", sorted(ASYNC_VERIFIERS))
def test_an_async_verify_gets_what_asyncio_run_gives(tmp_path, name):
    outcome = verify(task(tmp_path / "task", {"tests/verifier.py": ASYNC_VERIFIERS[name]}), tmp_path)
    assert (outcome.reward, outcome.failure_kind, outcome.masked) == (1.0, None, False), outcome


@pytest.mark.xfail(
    strict=True,
    reason="a known limit of the hand drive (README, Performance): a thread the coroutine itself starts "
    "imports asyncio and the same step then awaits the loop; no loop can be made running in the "
    "coroutine's thread from another one, so that step fails where asyncio.run would not",
)
def test_a_thread_the_coroutine_starts_importing_asyncio_within_one_step(tmp_path):
    source = """
        import sys, threading
        async def verify():
            thread = threading.Thread(target=lambda: __import__("asyncio"))
            thread.start()
            thread.join()
            import asyncio
            await asyncio.sleep(0.01)
            return 1.0
    """
    outcome = verify(task(tmp_path / "task", {"tests/verifier.py": source}), tmp_path)
    assert (outcome.reward, outcome.failure_kind, outcome.masked) == (1.0, None, False), outcome


def test_stdout_flooded_by_verify_is_graded(tmp_path):
    source = """
        import os
        def verify():
            block = b"y" * (1 << 20)
            for _ in range(64):
                os.write(1, block)
            return 0.0
    """
    outcome = verify(task(tmp_path / "task", {"tests/verifier.py": source}), tmp_path)
    assert (outcome.reward, outcome.failure_kind, outcome.masked) == (0.0, None, False), outcome.detail


LATE_LOAD = r"""
import sys
sys.path.insert(0, sys.argv[1])
import _gym_channel, _gym_runner
for name in _gym_channel.LATE_IMPORTS:
    __import__(name)
before = set(sys.modules)
for file in _gym_channel.LATE_MODULES:
    with open(sys.argv[1] + "/" + file, "rb") as source:
        _gym_runner.PRELOADED[file] = source.read()
    _gym_runner.late_module(file[:-3])
rare = sys.modules["_gym_runner_rare"]
# What the runner runs of them before it reports: reading an unusual signature, checking and writing
# an unusual result, describing an error.
def verify(workspace, task_data=None, *args, **kwargs):
    return 1
rare.plan_arguments(verify, ["workspace", "task_data", "state"])
rare.json_text(rare.rewards_from_result({"reward": 0.5, "caf\u00e9": 1, "n": True}))
rare.describe(ValueError("x"))
print(sorted(set(sys.modules) - before - {"_gym_runner_rare", "_gym_await"}))
"""


@pytest.mark.parametrize("version", ["3.8", "3.9", "3.10", "3.11", "3.12", "3.13"])
def test_late_modules_import_nothing_new(version):
    # The runner loads its late modules (and runs what it needs of them before it reports) after
    # code of the task ran, which may have planted modules on its sys.path: everything they import
    # must be in take_over's LATE_IMPORTS, on every Python.
    import subprocess

    from nemo_gym.data.tasks.harbor._resources import shim_dir

    python = str(pyenv_python(version))
    ran = subprocess.run(
        [python, "-E", "-S", "-s", "-B", "-c", LATE_LOAD, str(shim_dir())], capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "[]", ran.stdout


@pytest.mark.parametrize("kind", ["verifier.py", "test.sh"])
def test_no_startup_file_runs_before_the_root_steps(tmp_path, kind):
    # Found on Python 3.8 (its asyncio gives a subprocess a socket for stdin): `bash -p -c` still
    # sources ~/.bashrc when its stdin is a socket or SSH_CLIENT is set, before grading can set PATH;
    # root's ~/.bashrc here runs `pyenv init -`, whose `#!/usr/bin/env bash` found the agent's bash
    # first on the sandbox's PATH. A HOME the task's environment names is a folder the agent may
    # write. The admin's shell now starts with --norc, whatever its stdin and environment.
    workspace = tmp_path / "ws"
    marker = workspace / "hijacked"
    task(workspace, {".bashrc": f"echo bashrc >> {marker}\n", "bin/bash": f"#!/bin/sh\necho bash >> {marker}\n"})
    env = {"SSH_CLIENT": "10.0.0.1 22 22", "HOME": str(workspace), "PATH": f"{workspace}/bin:{os.environ['PATH']}"}
    files = {"tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n"} if kind == "test.sh" else {}
    if kind == "verifier.py":
        files["tests/verifier.py"] = "def verify():\n    return 1.0\n"
    outcome = verify(task(tmp_path / "task", files), workspace, sandbox_env=env)
    assert outcome.reward == 1.0 and not outcome.masked, outcome
    assert not marker.exists(), marker.read_text()


def test_no_code_of_the_task_runs_before_the_key_holder_has_the_key(tmp_path):
    # The runner goes on while its key holder starts (they overlap), and waits for it before any
    # code of the task runs: a root verify could otherwise read the key file while the holder is
    # still on its way to removing it. Here the key is a FIFO that the holder's open blocks on
    # until the test writes it: verifier.py must not start in the meantime, and sees no key after.
    import subprocess

    from nemo_gym.data.tasks.harbor.reports import find_reports
    from nemo_gym.data.tasks.harbor.staging import lay_out, shim_files

    early = tmp_path / "early.json"
    source = (
        "import json, os\n"
        f"json.dump({{'key_left': os.path.exists({str(tmp_path / 'key')!r})}}, open({str(early)!r}, 'w'))\n"
        "def verify():\n    return 1.0\n"
    )
    tests = tmp_path / "tests"
    lay_out(tests, shim_files(source.encode(), {}))
    os.mkfifo(tmp_path / "key")
    report = os.open(tmp_path / "report", os.O_WRONLY | os.O_CREAT, 0o600)
    env = {"PATH": os.environ["PATH"], "NEMO_GYM_REPORT_FD": str(report), "NEMO_GYM_KEY_FILE": str(tmp_path / "key")}
    env["VERIFIER_LOGS_DIR"] = str(tmp_path / "logs")
    runner = subprocess.Popen(
        [str(pyenv_python("3.12")), "-E", "-S", "-s", "-B", str(tests / "gym_runner.py")],
        cwd=tmp_path,
        env=env,
        pass_fds=(report,),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    os.close(report)
    try:
        time.sleep(1.0)
        assert runner.poll() is None and not early.exists(), "verifier.py ran before the key holder had the key"
        key = os.urandom(32)
        with open(tmp_path / "key", "w") as fifo:
            fifo.write(key.hex())
        output = runner.communicate(timeout=30)[0].decode()
    finally:
        runner.kill()
    assert runner.returncode == 0, output
    assert json.loads(early.read_text()) == {"key_left": False}
    reports = find_reports((tmp_path / "report").read_bytes(), key)
    assert [(found.kind, found.text) for found in reports] == [("reward", '{"reward": 1.0}')], reports


# --- the cache tag the key holder leaves: a hint that may never cost the report ----------------------

HOLDER = r"""
import os, sys
sys.path.insert(0, sys.argv[1])
import _gym_channel
folder, planted = sys.argv[2], sys.argv[3]
with open(os.path.join(folder, "key"), "w") as handle:
    handle.write(os.urandom(32).hex())
tag = os.path.join(folder, _gym_channel.CACHE_TAG_FILE)
if planted == "fifo":  # an open for writing would wait for a reader forever
    os.mkfifo(tag)
elif planted == "link":  # followed, the tag would go wherever the link points
    os.symlink(os.path.join(folder, "elsewhere"), tag)
report = os.open(os.path.join(folder, "report"), os.O_WRONLY | os.O_CREAT, 0o600)
reporter = _gym_channel.hold_key(report, os.path.join(folder, "key"))
reporter.confirm()
reporter.send("reward", '{"reward": 1}')
"""


@pytest.mark.parametrize("planted", ["fifo", "link", "nothing"])
def test_a_planted_cache_tag_neither_holds_up_the_key_holder_nor_costs_the_report(tmp_path, planted):
    """Found by red team round 21 as a question, held: whatever sits at ``$OUT/cache_tag`` (a FIFO, a
    link), the holder's write (``O_EXCL | O_NOFOLLOW``) fails at once and the report is still sent;
    with nothing there, the tag is written."""
    shim = Path(__file__).parent.parent / "shim"
    ran = subprocess.run(
        [sys.executable, "-c", HOLDER, str(shim), str(tmp_path), planted], capture_output=True, text=True, timeout=20
    )
    assert ran.returncode == 0, ran.stderr
    assert ' reward {"reward": 1}' in (tmp_path / "report").read_text()
    assert not (tmp_path / "key").exists()
    tag = tmp_path / "cache_tag"
    if planted == "nothing":
        assert tag.read_text() == sys.implementation.cache_tag
    elif planted == "link":
        assert tag.is_symlink() and not (tmp_path / "elsewhere").exists()
    else:
        assert tag.is_fifo()


# --- the disk the key holder sets aside: a verdict a filled disk cannot mask (red team 48) --------------


RESERVES = r"""
import os, sys
sys.path.insert(0, sys.argv[1])
import _gym_channel
descriptor = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT, 0o600)
_gym_channel.reserve(descriptor, os.path.dirname(sys.argv[2]))
status = os.fstat(descriptor)
os.write(descriptor, b"the report\n")
print(status.st_size, status.st_blocks * 512, _gym_channel.RESERVE_BYTES)
for name, size in _gym_channel.FINISH_FILES:  # finish's own files: made, empty, with their room
    made = os.stat(os.path.join(os.path.dirname(sys.argv[2]), name))
    assert (made.st_size, made.st_mode & 0o777) == (0, 0o600), name
    assert made.st_blocks * 512 >= size, name
"""


def test_the_key_holder_sets_disk_aside_for_the_report_without_growing_it(tmp_path):
    shim = Path(__file__).parent.parent / "shim"
    report = tmp_path / "report"
    ran = subprocess.run([sys.executable, "-c", RESERVES, str(shim), str(report)], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    size, allocated, wanted = map(int, ran.stdout.split())
    assert size == 0  # finish reads the report as the runner wrote it, nothing after
    assert allocated >= wanted
    assert report.read_bytes() == b"the report\n"
    with open(report, "r+b") as handle:  # finish rewrites it as read: the rest is freed
        handle.truncate(0)
        handle.write(b"the report\n")
    assert os.stat(report).st_blocks * 512 < wanted


def test_an_unwritten_verdict_is_scored_and_a_planted_file_changes_nothing():
    from nemo_gym.data.tasks.harbor.reports import UNWRITTEN, UNWRITTEN_NOTE, Report, judge_report

    reports = (Report(UNWRITTEN, '{"reward": 0.25}'),)
    outcome, note = judge_report(reports, {}, timed_out=False)
    assert (outcome.reward, outcome.failure_kind, outcome.detail, note) == (0.25, None, UNWRITTEN_NOTE, None)
    outcome, note = judge_report(reports, {"reward.json": b'{"reward": 1}'}, timed_out=False)
    assert outcome.reward == 0.25 and note is not None and note in outcome.detail
