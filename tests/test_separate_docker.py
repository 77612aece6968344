"""Separate mode and the image lifecycle on Docker, through ``gym-harbor``: each source of the verifier's
image (declared, inherited, built from ``tests/``), artifacts, the network, the env, a hostile agent,
and the image's ENTRYPOINT (runs, dies, disabled, no record). Images are built ``FROM`` the suite's
local Debian; those built from a task folder are named by content and reused from run to run."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Set

import pytest
from support import EXAMPLES, write_files

pytestmark = pytest.mark.docker

GYM = str(Path(sys.executable).parent / "gym-harbor")


def gym(*args: str, env: Any = None) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    return subprocess.run([GYM, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, timeout=600)


def verify_json(*args: str) -> Dict[str, Any]:
    ran = gym("verify", "--sandbox", "docker", "--json", *args)
    assert ran.returncode == 0, ran.stderr
    return json.loads(ran.stdout.splitlines()[-1])


def _sandboxes(client: Any) -> Set[str]:
    return {container.id for container in client.containers.list(all=True, filters={"label": "nemo-gym.sandbox=1"})}


@pytest.fixture
def left(docker_client: Any) -> Callable[[], Set[str]]:
    """The sandboxes the test left behind: those on the engine now that were not there before it."""
    before = _sandboxes(docker_client)
    return lambda: _sandboxes(docker_client) - before


@pytest.fixture(scope="module")
def base(docker_client: Any) -> str:
    from images import base_image

    return base_image(docker_client)


def test_the_example_validates_and_verifies_in_a_sandbox_of_its_own(docker_client, left, base, tmp_path):
    dataset = tmp_path / "ds"
    shutil.copytree(EXAMPLES / "separate-verifier", dataset / "separate-verifier")
    # The example names debian:bookworm-slim; no registry is reachable here, so the suite's Debian stands in.
    images = ("--image", base, "--verifier-image", base)
    validated = gym("dataset", "validate", str(dataset), "--sandbox", "docker", *images)
    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert "separate-verifier: ok (reward 1, oracle solve.sh)" in validated.stdout
    assert "warning" not in validated.stdout  # it publishes for Harbor as it is
    outcome = verify_json(str(EXAMPLES / "separate-verifier"), *images)
    assert (outcome["reward"], outcome["masked"]) == (1.0, False)
    assert "ok: 40 + 2 = 42" in outcome["stdout"]
    assert left() == set()


INHERITED_TEST = """\
set -e
check() { if ! eval "$1"; then echo "failed: $1"; echo 0 > /logs/verifier/reward.txt; exit 0; fi; }
check '[ "$PWD" = /app ]'
check '[ "$(cat /app/out.txt)" = 42 ]'
check '[ ! -e /app/debug.log ]'                       # excluded
check '[ "$(cat /srv/results/r.txt)" = result ]'      # an artifact beyond the workspace
check '[ ! -e /opt/agent-only ]'                      # the agent's, never an artifact
check '[ "$(cat /logs/artifacts/note.txt)" = published ]'
check 'grep -q eth0 /logs/artifacts/agent-net.txt'   # the agent's sandbox had a network...
check '[ "$(ls /sys/class/net)" = lo ]'               # ...the verifier's has none
check '[ "$FROM_ENVIRONMENT" = yes ]'
echo 1 > /logs/verifier/reward.txt
"""


def test_an_inherited_image_grades_only_the_artifacts_and_without_network(docker_client, left, base, tmp_path):
    toml = f"""
artifacts = [{{ source = "/app", exclude = ["*.log"] }}, "/srv/results"]
[verifier]
environment_mode = "separate"
network_mode = "no-network"
[[verifier.collect]]
command = "ls /sys/class/net > /logs/artifacts/agent-net.txt"
[environment]
docker_image = "{base}"
workdir = "/app"
env = {{ FROM_ENVIRONMENT = "yes" }}
"""
    task = write_files(tmp_path / "task", {"task.toml": toml, "tests/test.sh": INHERITED_TEST})
    workspace = write_files(tmp_path / "ws", {"out.txt": "42", "debug.log": "noise"})
    results = write_files(tmp_path / "results", {"r.txt": "result"})
    agent_only = write_files(tmp_path / "agent-only", {"x": "the agent's"})
    published = write_files(tmp_path / "published", {"note.txt": "published"})
    outcome = verify_json(
        str(task),
        "--workspace", str(workspace),
        "--mount", f"{results}:/srv/results",
        "--mount", f"{agent_only}:/opt/agent-only",
        "--artifacts", str(published),
    )  # fmt: skip
    assert (outcome["reward"], outcome["masked"]) == (1.0, False), outcome["stdout"]
    assert left() == set()


def test_a_declared_verifier_image_is_the_one_that_grades(docker_client, left, base, tmp_path):
    import io

    from images import LABEL

    grader = "nemo-gym-test/separate-grader:1"
    dockerfile = f"FROM {base}\nRUN echo 42 > /opt/expected.txt\n"
    docker_client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=grader, labels=LABEL, rm=True)
    toml = (
        f'artifacts = ["/app"]\n[verifier.environment]\ndocker_image = "{grader}"\nworkdir = "/app"\n'
        f'[environment]\ndocker_image = "{base}"\nworkdir = "/app"\n'
    )
    test_sh = '[ "$(cat out.txt)" = "$(cat /opt/expected.txt)" ] && echo 1 > /logs/verifier/reward.txt\n'
    task = write_files(tmp_path / "task", {"task.toml": toml, "tests/test.sh": test_sh})
    outcome = verify_json(str(task), "--workspace", str(write_files(tmp_path / "ws", {"out.txt": "42"})))
    assert (outcome["reward"], outcome["masked"]) == (1.0, False), outcome
    # The agent's image has no /opt/expected.txt: graded there, the same workspace scores nothing.
    outcome = verify_json(str(task), "--workspace", str(tmp_path / "ws"), "--verifier-image", base)
    assert (outcome["reward"], outcome["masked"]) == (0.0, False), outcome
    assert left() == set()


def test_an_allowlist_is_refused_in_one_sentence(docker_client, left, base, tmp_path):
    toml = (
        '[verifier]\nenvironment_mode = "separate"\nnetwork_mode = "allowlist"\nallowed_hosts = ["pypi.org"]\n'
        f'[environment]\ndocker_image = "{base}"\n'
    )
    task = write_files(tmp_path / "task", {"task.toml": toml, "tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n"})
    ran = gym("verify", "--sandbox", "docker", str(task))
    assert ran.returncode == 1
    assert "cannot enforce an allowlist" in ran.stderr and len(ran.stderr.strip().splitlines()) == 1
    assert left() == set()


BUILT_TEST = """\
reward=1
[ "$(cat /app/out.txt)" = "$(cat /opt/expected.txt)" ] || { echo "wrong answer"; reward=0; }
[ "$GRADER" = fallback ] || { echo "GRADER=$GRADER"; reward=0; }
[ "$OMP_NUM_THREADS" = 1 ] || { echo "OMP_NUM_THREADS=$OMP_NUM_THREADS"; reward=0; }
[ "$MKL_NUM_THREADS" = 3 ] || { echo "MKL_NUM_THREADS=$MKL_NUM_THREADS"; reward=0; }
[ "$PWD" = /grade ] || { echo "PWD=$PWD"; reward=0; }
echo $reward > /logs/verifier/reward.txt
"""


def test_a_verifier_image_built_from_tests_runs_its_entrypoint_and_is_reused(docker_client, left, base, tmp_path):
    toml = f"""
artifacts = ["/app"]
[verifier.environment]
workdir = "/grade"
cpus = 1
env = {{ GRADER = "${{GRADER_NAME:-fallback}}", MKL_NUM_THREADS = "3" }}
[environment]
docker_image = "{base}"
workdir = "/app"
"""
    files = {
        "task.toml": toml,
        "tests/test.sh": BUILT_TEST,
        "tests/expected.txt": "42",
        "tests/ep.sh": '#!/bin/sh\necho "grader entrypoint up"\nexec "$@"\n',
        "tests/Dockerfile": f'FROM {base}\nCOPY expected.txt /opt/expected.txt\nCOPY ep.sh /opt/ep.sh\nENTRYPOINT ["/opt/ep.sh"]\n',
    }
    task = write_files(tmp_path / "task", files)
    workspace = write_files(tmp_path / "ws", {"out.txt": "42"})
    logs = tmp_path / "logs"
    args = ("verify", "--sandbox", "docker", "--json", str(task), "--workspace", str(workspace))
    first = gym(*args, "--logs-out", str(logs))
    assert first.returncode == 0, first.stderr
    outcome = json.loads(first.stdout.splitlines()[-1])
    assert (outcome["reward"], outcome["masked"]) == (1.0, False), outcome["stdout"]
    assert "verifier-entrypoint-stdout.txt" in outcome["files"]
    assert "grader entrypoint up" in (logs / "verifier-entrypoint-stdout.txt").read_text()
    assert "build verifier hb__" in first.stderr and "-verifier" in first.stderr
    again = gym(*args)
    assert again.returncode == 0 and "(built from" in again.stderr and "unchanged)" in again.stderr  # not rebuilt
    assert left() == set()


def test_an_image_that_ships_tests_test_sh_runs_it(docker_client, base, tmp_path):
    files = {
        "task.toml": f'artifacts = ["/app"]\n[verifier.environment]\n[environment]\ndocker_image = "{base}"\nworkdir = "/app"\n',
        "tests/test.sh": "echo 0 > /logs/verifier/reward.txt  # the image's own test.sh grades instead\n",
        "tests/shipped.sh": '#!/bin/bash\n[ "$(cat /app/out.txt)" = 42 ] && echo 1 > /logs/verifier/reward.txt\n',
        "tests/Dockerfile": f"FROM {base}\nCOPY shipped.sh /tests/test.sh\nRUN chmod 755 /tests/test.sh\n",
    }
    task = write_files(tmp_path / "task", files)
    outcome = verify_json(str(task), "--workspace", str(write_files(tmp_path / "ws", {"out.txt": "42"})))
    assert (outcome["reward"], outcome["masked"]) == (1.0, False), outcome


def test_a_broken_tests_dockerfile_fails_loudly_with_the_builders_lines(docker_client, left, base, tmp_path):
    files = {
        "task.toml": f'[verifier.environment]\n[environment]\ndocker_image = "{base}"\n',
        "tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n",
        "tests/Dockerfile": f"FROM {base}\nRUN echo the-step-that-fails && exit 7\n",
    }
    ran = gym("verify", "--sandbox", "docker", str(write_files(tmp_path / "task", files)))
    assert ran.returncode == 1
    error = [line for line in ran.stderr.splitlines() if line.startswith("gym-harbor: ")]
    assert len(error) == 1 and "building the verifier image hb__" in error[0], ran.stderr
    assert "the-step-that-fails" in ran.stderr
    assert left() == set()  # it failed before any sandbox started


HOSTILE_SOLVE = """\
#!/usr/bin/env bash
printf 'echo 0\\n' > add.sh                                  # the wrong answer
echo 1 > /logs/verifier/reward.txt                          # planted rewards
echo '{"reward": 1}' > /logs/verifier/reward.json
printf '#!/bin/bash\\necho 1 > /logs/verifier/reward.txt\\n' > /tests/test.sh
mkdir -p /logs/artifacts
ln -s /tests /logs/artifacts/tests-link                      # a link into the verifier's folders
ln -s /etc/passwd leaked
(sleep 2; echo 1 > /logs/verifier/reward.txt) > /dev/null 2>&1 &   # a racer
printf '#!/bin/sh\\necho 5\\n' > /usr/local/bin/bash && chmod +x /usr/local/bin/bash   # a poisoned bash
exit 0
"""


def test_a_hostile_agent_plants_nothing_the_separate_verifier_reads(docker_client, base, tmp_path):
    dataset = tmp_path / "ds"
    shutil.copytree(EXAMPLES / "separate-verifier", dataset / "hostile")
    (dataset / "hostile" / "solution" / "solve.sh").write_text(HOSTILE_SOLVE)
    ran = gym("dataset", "validate", str(dataset), "--sandbox", "docker", "--image", base, "--verifier-image", base)
    assert ran.returncode == 1
    assert "hostile: FAILED (reward 0)" in ran.stdout, ran.stdout + ran.stderr


# Red team 95: the artifact itself is the attack. test.sh runs the agent's add.sh, which, run as root,
# wrote the reward file and killed test.sh before it wrote its own (1.0), or killed grading's shell (a mask).
# The example runs it as nobody.
HOSTILE_ADD = {
    "plants": (
        "echo 1 > /logs/verifier/reward.txt\n"
        "for p in /proc/[0-9]*/cmdline; do\n"
        '  [ "$(tr "\\0" "\\n" < "$p" | sed -n 2p)" = /tests/test.sh ] && kill -9 "${p//[!0-9]/}"\n'
        "done\n"
    ),
    "masks": 'for p in /proc/[0-9]*/cmdline; do grep -qa -- --norc "$p" && kill -9 "${p//[!0-9]/}"; done\n',
}


@pytest.mark.parametrize("how", sorted(HOSTILE_ADD))
def test_the_agents_program_run_by_the_separate_verifier_plants_nothing(docker_client, base, tmp_path, how):
    dataset = tmp_path / "ds"
    shutil.copytree(EXAMPLES / "separate-verifier", dataset / "hostile")
    script = f"#!/usr/bin/env bash\ncat > add.sh <<'SCRIPT'\n{HOSTILE_ADD[how]}echo 0\nSCRIPT\n"
    (dataset / "hostile" / "solution" / "solve.sh").write_text(script)
    ran = gym("dataset", "validate", str(dataset), "--sandbox", "docker", "--image", base, "--verifier-image", base)
    assert ran.returncode == 1
    assert "hostile: FAILED (reward 0)" in ran.stdout, ran.stdout + ran.stderr


# --- the image's ENTRYPOINT -------------------------------------------------------------------------

EP_RAN_TEST = "if [ -e /var/tmp/ep-ran ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n"


@pytest.fixture(scope="module")
def entrypoint_task(tmp_path_factory: Any, base: str) -> Path:
    """A shared-mode task whose agent image is built from environment/: its ENTRYPOINT leaves a mark."""
    return write_files(
        tmp_path_factory.mktemp("entrypoint") / "task",
        {
            "task.toml": '[environment]\nworkdir = "/app"\n',
            "tests/test.sh": EP_RAN_TEST,
            "environment/ep.sh": '#!/bin/sh\necho "entrypoint up"\ndate > /var/tmp/ep-ran\nexec "$@"\n',
            "environment/Dockerfile": f'FROM {base}\nCOPY ep.sh /opt/ep.sh\nENTRYPOINT ["/opt/ep.sh"]\n',
        },
    )


def test_an_entrypoint_on_record_runs_and_its_output_is_kept(docker_client, entrypoint_task):
    outcome = verify_json(str(entrypoint_task))
    assert outcome["reward"] == 1.0, outcome
    assert "entrypoint-stdout.txt" in outcome["files"]


def test_entrypoint_empty_turns_it_off(docker_client, entrypoint_task, tmp_path):
    from nemo_gym.data.tasks.harbor.image_build import AGENT, content_tag

    verify_json(str(entrypoint_task))  # builds the image the next one starts FROM
    built = content_tag(entrypoint_task / "environment", AGENT)
    task = write_files(
        tmp_path / "task",
        {
            "task.toml": '[environment]\nworkdir = "/app"\n',
            "tests/test.sh": EP_RAN_TEST,
            "environment/Dockerfile": f"FROM {built}\nENTRYPOINT []\n",
        },
    )
    outcome = verify_json(str(task))
    assert outcome["reward"] == 0.0 and "entrypoint-stdout.txt" not in outcome["files"], outcome


def test_an_image_without_a_record_runs_no_entrypoint(docker_client, entrypoint_task):
    from nemo_gym.data.tasks.harbor.image_build import AGENT, content_tag

    verify_json(str(entrypoint_task))
    built = content_tag(entrypoint_task / "environment", AGENT)
    docker_client.images.get(built).tag("nemo-gym-test/entrypoint-foreign", "1")
    outcome = verify_json(str(entrypoint_task), "--image", "nemo-gym-test/entrypoint-foreign:1")
    assert outcome["reward"] == 0.0 and "entrypoint-stdout.txt" not in outcome["files"], outcome


def test_an_entrypoint_that_dies_during_the_rollout_masks_the_sample(docker_client, left, base, tmp_path):
    watcher = "#!/bin/sh\necho watching\nwhile [ ! -e /var/tmp/die ]; do sleep 0.1; done\necho dying\nexit 3\n"
    dataset = write_files(
        tmp_path / "ds",
        {
            "dies/task.toml": '[environment]\nworkdir = "/app"\n',
            "dies/tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n",
            "dies/solution/solve.sh": "#!/bin/bash\ntouch /var/tmp/die\nsleep 1\n",
            "dies/environment/ep.sh": watcher,
            "dies/environment/Dockerfile": f'FROM {base}\nCOPY ep.sh /opt/ep.sh\nENTRYPOINT ["/opt/ep.sh"]\n',
        },
    )
    ran = gym("dataset", "validate", str(dataset), "--sandbox", "docker")
    assert ran.returncode == 1
    assert "dies: FAILED (masked: harbor:entrypoint_failed:" in ran.stdout, ran.stdout + ran.stderr
    assert left() == set()


def test_a_verifier_image_missing_from_the_engine_fails_loudly_before_the_agents_sandbox_stops(
    docker_client, left, base, tmp_path
):
    """An operator's trial: a declared verifier image the engine does not hold (nothing is pulled here)
    masked every rollout of the task, each after its agent's sandbox had stopped. A configuration
    error, it now raises before the stop, the agent's sandbox still there to verify another way."""
    import asyncio

    from images import LABEL

    from nemo_gym.data.tasks.harbor.sandboxes.docker import DockerSandbox
    from nemo_gym.data.tasks.harbor.sandboxes.for_task import verifier_sandbox_opener
    from nemo_gym.data.tasks.harbor.separate import run_separate_verification
    from nemo_gym.data.tasks.harbor.task import TaskError, load_task
    from nemo_gym.data.tasks.harbor.verification import plan_verification

    missing = "nemo-gym-test/never-built-verifier:1"
    toml = (
        f'artifacts = ["/app"]\n[verifier.environment]\ndocker_image = "{missing}"\n[environment]\nworkdir = "/app"\n'
    )
    task = load_task(
        write_files(tmp_path / "task", {"task.toml": toml, "tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n"})
    )

    async def run() -> str:
        agent = DockerSandbox(
            base,
            workspace=write_files(tmp_path / "ws", {"out.txt": "42"}),
            workdir="/app",
            labels=LABEL,
            client=docker_client,
        )
        async with agent:
            with pytest.raises(
                TaskError, match=f"the separate verifier's image {missing!r} is not on the Docker engine"
            ):
                await run_separate_verification(task, plan_verification(task), agent, verifier_sandbox_opener(task))
            return (await agent.exec("cat /app/out.txt")).stdout

    assert asyncio.run(run()) == "42"  # the agent's sandbox ran on
    assert left() == set()


AGENTS_SITECUSTOMIZE = """set -e
echo wrong > /app/answer.txt
mkdir -p /app/lib
printf '%s\\n' 'import sys' 'runner = sys.modules.get("_gym_runner")' \\
  'print("the agent ran in the runner")' 'if runner is not None: runner.call_verify = lambda *a, **k: 1.0' \\
  > /app/lib/sitecustomize.py
"""


@pytest.mark.parametrize("image_user, owner", [(None, 65534), ("nobody", 65533)])
def test_delivered_artifacts_are_never_roots_files_to_the_runner(docker_client, tmp_path, image_user, owner):
    """Red team 72: delivery made every artifact root's in the verifier's sandbox, so the runner's owner
    rules took the agent's folder on the image's PYTHONPATH (/app/lib) for the image's own, and imported
    the agent's sitecustomize.py inside the runner (a wrong answer scored 1.0, where shared mode dropped
    the entry). Delivered files belong to nobody (65534) now, another user's as in the agent's sandbox.
    Red team 74: where no user is named and the verifier's image says ``USER nobody``, the verifier runs
    as nobody, and the artifacts must then be another uid's (65533)."""
    import asyncio
    from contextlib import asynccontextmanager

    from images import LABEL, _built, users_image

    from nemo_gym.data.tasks.harbor.sandboxes.docker import DockerSandbox
    from nemo_gym.data.tasks.harbor.separate import run_separate_verification
    from nemo_gym.data.tasks.harbor.task import load_task
    from nemo_gym.data.tasks.harbor.verification import plan_verification

    users, volumes = users_image(docker_client)
    dockerfile = f"FROM {users}\nENV PYTHONPATH=/app/lib\nRUN mkdir -p /app && chown agent /app\n"
    image = _built(docker_client, "nemo-gym-test/users-pythonpath:1", dockerfile)
    agent_image = verifier_image = image
    users_named = '[agent]\nuser = "agent"\n'
    if image_user is not None:  # each image says who runs in it; the task names nobody
        agent_image = _built(docker_client, "nemo-gym-test/users-pythonpath-agent:1", f"FROM {image}\nUSER agent\n")
        verifier_image = _built(
            docker_client, f"nemo-gym-test/users-pythonpath-{image_user}:1", f"FROM {image}\nUSER {image_user}\n"
        )
        users_named = ""
    toml = (
        f'artifacts = ["/app"]\n{users_named}'
        f'[verifier.environment]\ndocker_image = "{verifier_image}"\nworkdir = "/grade"\n'
        f'[environment]\ndocker_image = "{agent_image}"\nworkdir = "/app"\n'
    )
    verifier = (
        "from nemo_gym.verifiers.files import read_text\n"
        "def verify(task_data):\n"
        "    return float(read_text('/app', 'answer.txt') == task_data['answer'])\n"
    )
    files = {"task.toml": toml, "task_data.json": '{"answer": "42"}', "tests/verifier.py": verifier}
    task = load_task(write_files(tmp_path / "task", files))

    @asynccontextmanager
    async def open_verifier(spec: Any) -> Any:  # the suite's image needs its interpreter's volume
        async with DockerSandbox(
            verifier_image, volumes=volumes, workdir=spec.workdir, env=spec.env, labels=LABEL, client=docker_client
        ) as sandbox:
            yield sandbox

    async def run() -> Any:
        async with DockerSandbox(
            agent_image, volumes=volumes, workdir="/app", labels=LABEL, client=docker_client
        ) as agent:
            planted = await agent.exec(AGENTS_SITECUSTOMIZE, user="agent")
            assert planted.return_code == 0, planted
            return await run_separate_verification(task, plan_verification(task), agent, open_verifier)

    outcome = asyncio.run(run())
    assert "the agent ran in the runner" not in outcome.stdout, outcome.stdout
    assert (outcome.reward, outcome.failure_kind, outcome.masked) == (0.0, None, False), outcome
    assert f"PYTHONPATH entry '/app/lib' belongs to uid {owner}: not added to sys.path" in outcome.stdout, (
        outcome.stdout
    )
