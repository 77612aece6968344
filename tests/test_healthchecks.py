"""Task healthchecks: ``[environment.healthcheck]`` and ``[steps.healthcheck]`` are read as Harbor
reads them, run as Harbor's loop runs them, and never run with more rights than the agent once an
agent has acted (``tests/harbor/test_harbor_healthchecks.py`` holds both to Harbor's own code)."""

from __future__ import annotations

import asyncio
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from healthcheck_cases import CASES, CHECK, TIMEOUT, TIMEOUT_CASES, Scripted
from support import write_files

from nemo_gym.data.tasks.harbor.bounded import BOUND_KILL_AFTER_SEC, HOST_MARGIN_SEC
from nemo_gym.data.tasks.harbor.healthchecks import HealthcheckError, run_healthcheck
from nemo_gym.data.tasks.harbor.publishing import publication
from nemo_gym.data.tasks.harbor.sandboxes.for_task import open_task_sandbox
from nemo_gym.data.tasks.harbor.task import Healthcheck, TaskError, load_task
from nemo_gym.data.tasks.harbor.validation import validate_task
from nemo_gym.data.tasks.harbor.verification import plan_verification


def run(check: Healthcheck, sandbox: Scripted, **options: Any) -> None:
    asyncio.run(run_healthcheck(sandbox, check, clock=sandbox.clock, sleep=sandbox.sleep, **options))


@pytest.mark.parametrize(("script", "cost", "passes", "sleeps"), CASES + TIMEOUT_CASES)
def test_the_loop_waits_and_counts_as_harbor_and_docker_do(script, cost, passes, sleeps):
    sandbox = Scripted(script, cost)
    if passes:
        run(CHECK, sandbox)
    else:
        with pytest.raises(HealthcheckError):
            run(CHECK, sandbox)
    assert sandbox.sleeps == sleeps
    assert not sandbox.script  # every scripted attempt ran, and no more
    # The host waits past the attempt's own bound (3 s, then its grace) for the sandbox to stop it.
    assert {(timeout, user) for _, timeout, user in sandbox.calls} == {
        (3.0 + BOUND_KILL_AFTER_SEC + HOST_MARGIN_SEC, None)
    }
    assert all(" 3 /bin/bash -c " in command.replace("$shell", "/bin/bash") for command, _, _ in sandbox.calls)
    # A timed-out attempt (its bound defeated) has what started since it reaped, from the clock read before it.
    reaps = [command for command in sandbox.housekeeping if "kill_strays" in command]
    assert len(reaps) == sum(step == TIMEOUT for step in script[: len(sandbox.calls)])
    assert all(command.startswith("started=7\n") for command in reaps)


def test_no_retries_fails_at_the_first_failure_after_the_start_period():
    sandbox = Scripted([1])
    with pytest.raises(HealthcheckError, match=r"failed 1 time\(s\) in a row"):
        run(Healthcheck("probe", retries=0), sandbox)


def test_the_error_names_the_key_the_command_and_the_last_attempt():
    sandbox = Scripted([1, 1, 7])
    with pytest.raises(HealthcheckError) as raised:
        run(Healthcheck("curl -f localhost:8080"), sandbox, key="task.toml: steps[1].healthcheck", user="agent")
    message = str(raised.value)
    assert message.startswith("task.toml: steps[1].healthcheck failed 3 time(s) in a row")
    assert "'curl -f localhost:8080'" in message and message.endswith("exited with 7: not yet")
    assert {user for _, _, user in sandbox.calls} == {"agent"}


def test_the_timeout_is_used_as_written_and_0_sets_none():
    sandbox = Scripted([0, 0])
    run(Healthcheck("probe", timeout_sec=2.75), sandbox)
    run(Healthcheck("probe", timeout_sec=0), sandbox)
    # Harbor's: 2 and None. The bound is the sandbox's timeout; the host waits past it and its grace.
    assert [timeout for _, timeout, _ in sandbox.calls] == [2.75 + BOUND_KILL_AFTER_SEC + HOST_MARGIN_SEC, None]
    assert " 2.75 $shell -c probe" in sandbox.calls[0][0] and sandbox.calls[1][0] == "probe"


# --- reading task.toml -----------------------------------------------------------------------------


def test_the_tables_are_read_with_harbors_defaults(tmp_path):
    task = write_files(
        tmp_path / "task",
        {
            "task.toml": (
                '[environment.healthcheck]\ncommand = "pg_isready"\n'
                '[[steps]]\nname = "one"\n'
                '[[steps]]\nname = "two"\n[steps.healthcheck]\ncommand = "true"\nretries = 0\ninterval_sec = 0.5\n'
                '[verifier.environment]\ndocker_image = "verifier"\n'
                '[verifier.environment.healthcheck]\ncommand = "read, never run (as in Harbor)"\n'
            ),
            "tests/test.sh": "",
            "steps/one/instruction.md": "",
            "steps/two/instruction.md": "",
        },
    )
    loaded = load_task(task)
    assert loaded.environment.healthcheck == Healthcheck("pg_isready", 5.0, 30.0, 0.0, 5.0, 3)
    assert [step.healthcheck for step in loaded.steps] == [None, Healthcheck("true", interval_sec=0.5, retries=0)]
    assert loaded.verifier.environment is not None
    assert loaded.verifier.environment.healthcheck == Healthcheck("read, never run (as in Harbor)")


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ("[environment]\nhealthcheck = 'pg_isready'", r"\[environment.healthcheck\] must be a table"),
        ("[environment.healthcheck]\ninterval_sec = 1", r"environment.healthcheck.command must be a non-empty"),
        ("[environment.healthcheck]\ncommand = '  '", r"environment.healthcheck.command must be a non-empty"),
        ('[environment.healthcheck]\ncommand = "a\\u0000b"', r"environment.healthcheck.command holds a NUL"),
        ("[environment.healthcheck]\ncommand = 'x'\ninterval_sec = -1", r"environment.healthcheck.interval_sec must"),
        ("[environment.healthcheck]\ncommand = 'x'\ntimeout_sec = nan", r"environment.healthcheck.timeout_sec must"),
        ("[environment.healthcheck]\ncommand = 'x'\nstart_period_sec = '5'", r"start_period_sec must be a number"),
        (
            "[environment.healthcheck]\ncommand = 'x'\nstart_period_sec = 1e308",
            r"from 0 to 86400 \(a day\), not 1e\+308",
        ),
        ("[environment.healthcheck]\ncommand = 'x'\ninterval_sec = 86401", r"interval_sec must be a number of seconds"),
        (
            "[environment.healthcheck]\ncommand = 'x'\nretries = true",
            r"environment.healthcheck.retries must be a whole",
        ),
        ("[environment.healthcheck]\ncommand = 'x'\nretries = 2.5", r"environment.healthcheck.retries must be a whole"),
        ("[environment.healthcheck]\ncommand = 'x'\nretries = -1", r"environment.healthcheck.retries must be a whole"),
        ("[[steps]]\nname = 's'\nhealthcheck = 3", r"\[steps\[0\].healthcheck\] must be a table"),
    ],
)
def test_a_bad_table_names_its_key(tmp_path, table, key):
    task = write_files(tmp_path / "task", {"task.toml": table, "tests/test.sh": "", "steps/s/instruction.md": ""})
    with pytest.raises(TaskError, match=key) as raised:
        load_task(task)
    assert str(raised.value).startswith(str(task / "task.toml"))


# --- in a sandbox ----------------------------------------------------------------------------------

# A task of two steps whose oracle, as the agent, plants a program named as step two's healthcheck
# command in a PATH folder of its own: what the healthcheck runs is the agent's, and must run with the
# agent's rights alone. Step two's verify scores the uid the planted program ran as.
PLANTED = {
    "task.toml": (
        "[agent]\nuser = 'agent'\n"
        "[environment]\nenv = { PATH = '/workspace/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' }\n"
        "[environment.healthcheck]\ncommand = 'test ! -e /workspace/bin'\nretries = 1\n"
        "[[steps]]\nname = 'one'\n"
        "[[steps]]\nname = 'two'\n[steps.healthcheck]\ncommand = 'probe'\nretries = 1\n"
    ),
    "steps/one/instruction.md": "Plant.",
    "steps/two/instruction.md": "Profit.",
    "solution/solve.sh": (
        "#!/bin/bash\nmkdir -p bin\n"
        "printf '#!/bin/sh\\nid -u > /workspace/probe-uid\\n' > bin/probe\nchmod +x bin/probe\n"
    ),
    "tests/verifier.py": (
        "def verify(workspace):\n"
        "    ran = workspace / 'probe-uid'\n"
        "    return float(not ran.exists() or ran.read_text().strip() not in ('', '0'))\n"
    ),
}


def validate(task_dir: Path) -> Any:
    return asyncio.run(validate_task(load_task(task_dir), partial(open_task_sandbox, kind="local")))


def test_a_step_healthcheck_runs_the_agents_program_as_the_agent(tmp_path):
    result = validate(write_files(tmp_path / "task", PLANTED))
    assert result.passed, result
    assert [step.outcome.reward for step in result.steps if step.outcome] == [1.0, 1.0]


def test_a_failing_healthcheck_fails_validation_naming_it(tmp_path):
    files = dict(PLANTED)
    files["task.toml"] = files["task.toml"].replace("command = 'probe'", "command = 'echo down; false'")
    result = validate(write_files(tmp_path / "task", files))
    assert not result.passed and len(result.steps) == 1  # step one graded, step two never started
    assert "steps[1].healthcheck failed 1 time(s) in a row" in result.error
    assert result.error.endswith("exited with 1: down")


def test_the_environment_healthcheck_runs_as_the_sandbox_starts(tmp_path):
    files = dict(PLANTED)
    files["task.toml"] = files["task.toml"].replace("test ! -e /workspace/bin", "test -e /workspace/ready")
    result = validate(write_files(tmp_path / "task", files))
    assert not result.passed and not result.steps
    assert "[environment.healthcheck] failed 1 time(s) in a row" in result.error


@pytest.mark.docker
def test_an_attempt_that_outlives_its_timeout_is_stopped_in_the_container(docker_client, tmp_path):
    """The engine cannot stop an exec the host gave up on: an attempt (a check on a socket the agent
    holds, say) ran on, and the sandbox's next grading waited for its exec until masked (red team 43).
    It is bounded where it runs now, as Docker's own healthcheck kills a timed-out probe."""
    import time

    from images import LABEL, base_image

    from nemo_gym.data.tasks.harbor.sandboxes.docker import DockerSandbox

    check = Healthcheck("exec -a gym-hc-probe sleep 100", timeout_sec=1, retries=1)

    async def attempt() -> Any:
        image = base_image(docker_client)
        async with DockerSandbox(image, workspace=tmp_path, labels=LABEL, client=docker_client) as sandbox:
            with pytest.raises(HealthcheckError, match=r"its last attempt outlived its timeout_sec \(1 s\)$"):
                await run_healthcheck(sandbox, check)
            started = time.monotonic()
            await asyncio.wait_for(sandbox.settled(), 30)
            took = time.monotonic() - started
            probes = "for p in /proc/[0-9]*; do IFS= read -r -d '' a < $p/cmdline; [ \"$a\" = gym-hc-probe ] && echo $p; done"
            return took, (await sandbox.exec(probes + " 2>/dev/null; true", user="root")).stdout.strip()

    took, left = asyncio.run(attempt())
    assert left == "", f"the attempt still runs: {left}"
    assert took < 10, f"its exec ran on for {took:.0f} s"


# --- a step's own agent ------------------------------------------------------------------------------

STEP_USERS = {
    "task.toml": (
        "[agent]\nuser = 'agent'\n"
        # As the sandbox starts, as its own user: a file every step's agent can add to.
        "[environment.healthcheck]\ncommand = 'install -m 0666 /dev/null /tmp/ran-as'\n"
        "[[steps]]\nname = 'one'\n"
        "[[steps]]\nname = 'two'\n[steps.agent]\nuser = 'grader'\n"
        "[steps.healthcheck]\ncommand = 'id -un >> /tmp/ran-as'\n"
    ),
    "steps/one/instruction.md": "",
    "steps/two/instruction.md": "",
    "solution/solve.sh": "#!/bin/bash\nid -un >> /tmp/ran-as\n",
    "steps/one/tests/verifier.py": (
        "def verify():\n    return float(open('/tmp/ran-as').read().split() == ['agent'])\n"
    ),
    "steps/two/tests/verifier.py": (
        "def verify():\n    return float(open('/tmp/ran-as').read().split() == ['agent', 'grader', 'grader'])\n"
    ),
}


def test_a_steps_agent_runs_its_healthcheck_and_oracle_as_harbor_has_it(tmp_path):
    task_dir = write_files(tmp_path / "task", STEP_USERS)
    task = load_task(task_dir)
    assert [task.agent_user_of(step) for step in (None, "one", "two")] == ["agent", "agent", "grader"]
    # No [verifier].user, and an agent user for the step: its verifier runs as root (the seed's rule).
    assert plan_verification(task, step="two").user == "root"
    result = validate(task_dir)
    assert result.passed, result


# No [agent].user: the working directory is the first step's agent's, as the Dockerfile publishing
# writes makes it (red team 35: it stayed root's, and the first step's oracle could not write its
# answer). A later step's other agent finds it as it would under Harbor: not its own.
STEP_OWNERS = {
    "task.toml": (
        "[[steps]]\nname = 'one'\n[steps.agent]\nuser = 'agent'\n"
        "[[steps]]\nname = 'two'\n[steps.agent]\nuser = 'grader'\n"
    ),
    "steps/one/instruction.md": "",
    "steps/two/instruction.md": "",
    "solution/solve.sh": '#!/bin/bash\ntouch "$(id -un).txt" || true\n',
    "steps/one/tests/verifier.py": (
        "def verify(workspace):\n    return float(sorted(p.name for p in workspace.iterdir()) == ['agent.txt'])\n"
    ),
}
STEP_OWNERS["steps/two/tests/verifier.py"] = STEP_OWNERS["steps/one/tests/verifier.py"]


def test_the_first_steps_agent_is_handed_the_working_directory(tmp_path):
    task_dir = write_files(tmp_path / "dataset" / "task", STEP_OWNERS)
    assert load_task(task_dir).workdir_owner() == "agent"
    result = validate(task_dir)
    assert result.passed, result
    assert [step.outcome.reward for step in result.steps if step.outcome] == [1.0, 1.0]
    assert "Permission denied" in result.steps[1].oracle_output  # grader's touch, as under Harbor
    files, refused = publication(tmp_path / "dataset")
    assert not refused
    dockerfile = files["task/environment/Dockerfile"].data
    assert dockerfile.decode().splitlines()[-1].endswith("&& chown agent /workspace")


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ("[steps.agent]\nuser = '-x'\n", r"steps\[0\].agent.user = '-x' is not a user name"),
        ("agent = 'x'\n", r"\[steps\[0\].agent\] must be a table"),
    ],
)
def test_a_bad_step_agent_names_its_key(tmp_path, table, key):
    task = write_files(
        tmp_path / "task", {"task.toml": f"[[steps]]\nname = 's'\n{table}", "steps/s/instruction.md": ""}
    )
    with pytest.raises(TaskError, match=key):
        load_task(task)


def test_the_environment_healthcheck_meets_the_agents_files_as_the_agent(tmp_path):
    # gym-harbor verify starts the sandbox with the agent's workspace inside (red team 35): a healthcheck
    # run there as root would run the agent's code as root (python3 -c puts the working directory first
    # on sys.path), which could then forge the reward during grading. With the agent's files inside, it
    # runs as [agent].user, as a step's healthcheck does.
    task = write_files(
        tmp_path / "task",
        {
            "task.toml": "[agent]\nuser = 'agent'\n[environment.healthcheck]\ncommand = \"python3 -c 'import socket'\"\nretries = 0\n",
            "tests/test.sh": "",
        },
    )
    workspace = write_files(
        tmp_path / "workspace", {"socket.py": "import os\nprint('ran as', os.getuid())\nraise SystemExit(3)\n"}
    )

    async def start() -> None:
        async with open_task_sandbox(load_task(task), workspace, kind="local"):
            pass

    with pytest.raises(HealthcheckError, match=r"exited with 3: ran as \d+") as raised:
        asyncio.run(start())
    assert "ran as 0" not in str(raised.value)


# --- bounded: where a hook or a check stops -----------------------------------------------------------


def test_bounded_stops_the_command_where_it_runs_with_the_systems_timeout(tmp_path):
    """The command runs as ``bash -c`` would run it, is stopped at its bound (status 124), and the
    ``timeout`` is the system's: one the agent put in a PATH folder of its own never runs (a hook
    runs as root)."""
    import subprocess
    import time

    from nemo_gym.data.tasks.harbor.bounded import BOUND_FIRED, bounded

    (tmp_path / "bin").mkdir()
    for name in ("timeout", "bash"):  # bash: the local sandbox's hook used to be the host's by path (red team 44)
        planted = tmp_path / "bin" / name
        planted.write_text(f"#!/bin/sh\ntouch {tmp_path / 'planted-ran'}\n")
        planted.chmod(0o755)
    env = {"PATH": f"{planted.parent}:/usr/bin:/bin", "X": "it's $HOME"}

    def run(command: str, seconds: float) -> subprocess.CompletedProcess:
        script = bounded(command, seconds)
        return subprocess.run(["/bin/bash", "-c", script], env=env, capture_output=True, text=True, timeout=30)

    said = run('printf \'%s|%s\\n\' "$X" "$0"; exit 3', 5)
    assert (said.returncode, said.stdout) == (3, "it's $HOME|/bin/bash\n")
    started = time.monotonic()
    stopped = run("sleep 20 & sleep 20; echo never", 0.5)
    assert stopped.returncode == BOUND_FIRED and stopped.stdout == ""
    assert time.monotonic() - started < 10
    assert not (tmp_path / "planted-ran").exists()


def test_no_reaping_where_the_sandboxs_processes_are_not_its_own():
    """Killing by the clock where processes are not the sandbox's own (the local sandbox without
    bubblewrap, a provider that does not say) could reach the host's: the bound alone stops them."""
    sandbox = Scripted([TIMEOUT, 0])
    sandbox.private_pids = False  # type: ignore[misc]
    run(CHECK, sandbox)
    assert sandbox.housekeeping == [] and len(sandbox.calls) == 2


def test_an_attempt_whose_clock_cannot_be_read_is_not_run_and_fails():
    """Unreaped, a command of the agent's user could hold the sandbox (red team 45: the agent starved
    the root exec that reads the clock): it is not run, and the attempt counts as timed out."""
    sandbox = Scripted([0])
    sandbox.clock_stalls = True
    with pytest.raises(HealthcheckError, match=r"its last attempt outlived its timeout_sec \(3 s\)$"):
        run(CHECK, sandbox)
    assert sandbox.calls == [] and sandbox.script == [0] and len(sandbox.housekeeping) == 13  # 10 + 3
