"""`gym verify`: the human summary, --json, exit statuses and one-sentence errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest
from conftest import EXAMPLES

GYM = str(Path(sys.executable).parent / "gym")


def gym(*args: str, cwd: Path = EXAMPLES.parent) -> subprocess.CompletedProcess:
    return subprocess.run([GYM, *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)


@pytest.mark.parametrize("example", ["answer-file", "async-metrics", "bash-test"])
def test_verify_an_example(example):
    result = gym("verify", f"examples/{example}")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"reward 1 [examples/{example}]")


def test_verify_with_a_response_file_json_or_text(tmp_path):
    result = gym("verify", "examples/numeric-response", "--response", "examples/numeric-response/response.json")
    assert result.stdout.startswith("reward 1 ")
    (tmp_path / "answer.md").write_text("The total is\n\n**Answer:** 4.2\n")
    result = gym("verify", "examples/numeric-response", "--response", str(tmp_path / "answer.md"))
    assert result.stdout.startswith("reward 1 ")


def test_json_output_is_one_object_on_the_last_line():
    result = gym("verify", "examples/async-metrics", "--json")
    outcome = json.loads(result.stdout.splitlines()[-1])
    assert set(outcome) >= {"reward", "metrics", "reward_components", "failure_kind", "masked", "stdout"}
    assert outcome["reward"] == 1.0 and outcome["metrics"]["recall"] == 1.0 and outcome["masked"] is False


def test_a_failed_verifier_shows_its_output(tmp_path):
    (tmp_path / "answer.txt").write_text("Lyon")
    result = gym("verify", "examples/answer-file", "--workspace", str(tmp_path))
    assert result.returncode == 0 and result.stdout.startswith("reward 0 ")
    assert "test-stdout.txt" not in result.stdout  # a score of 0 is not a failure of the verifier
    result = gym("verify", "examples/numeric-response")
    assert result.returncode == 0
    assert "failure: harbor:missing_reward" in result.stdout
    assert "--- test-stdout.txt ---" in result.stdout and "verify requires `response`" in result.stdout


def test_task_data_and_timeout_options(tmp_path):
    (tmp_path / "data.json").write_text('{"answer": "Lyon"}')
    result = gym("verify", "examples/answer-file", "--task-data", str(tmp_path / "data.json"), "--json")
    assert json.loads(result.stdout.splitlines()[-1])["reward"] == 0.0
    task = tmp_path / "slow"
    (task / "tests").mkdir(parents=True)
    (task / "tests" / "verifier.py").write_text("import time\ndef verify():\n    time.sleep(30)\n")
    result = gym("verify", str(task), "--timeout", "1", "--json")
    assert json.loads(result.stdout.splitlines()[-1])["failure_kind"] == "harbor:verifier_timeout"


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "the following arguments are required"),
        (["examples/answer-file", "--sandbox", "cloud"], "invalid choice"),
        (["examples/answer-file", "--response", "missing.json"], "--response missing.json: cannot read it"),
        (["examples/answer-file", "--workspace", "missing"], "--workspace missing: not a folder"),
        (["examples/answer-file", "--timeout", "0"], "--timeout must be a positive number"),
    ],
)
def test_usage_errors_exit_2(args: List[str], message):
    result = gym("verify", *args)
    assert result.returncode == 2 and message in result.stderr


def _bad_task(tmp_path: Path, toml: str) -> Path:
    (tmp_path / "tests").mkdir(exist_ok=True)
    (tmp_path / "tests" / "verifier.py").write_text("def verify():\n    return 1\n")
    (tmp_path / "task.toml").write_text(toml)
    return tmp_path


@pytest.mark.parametrize(
    "toml, message",
    [
        ("[verifier\n", "task.toml: not valid TOML"),
        ('[verifier]\ntimeout_sec = "soon"\n', "verifier.timeout_sec must be a positive number"),
        (
            '[verifier]\nenv = { K = "${NEMO_GYM_SURELY_UNSET}" }\n',
            "needs the environment variable NEMO_GYM_SURELY_UNSET",
        ),
        ("[environment]\nworkdir = 3\n", "environment.workdir must be a string"),
    ],
)
def test_task_errors_are_one_sentence(tmp_path, toml, message):
    result = gym("verify", str(_bad_task(tmp_path, toml)))
    assert result.returncode == 1
    assert message in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_task_without_a_verifier(tmp_path):
    result = gym("verify", str(tmp_path))
    assert result.returncode == 1 and "no tests/ folder and no dataset verifier.py" in result.stderr


def test_docker_needs_an_image(tmp_path):
    result = gym("verify", str(_bad_task(tmp_path, "")), "--sandbox", "docker")
    assert result.returncode == 1 and "no Docker image" in result.stderr


@pytest.mark.docker
def test_verify_on_docker(docker_client):
    from images import base_image

    result = gym("verify", "examples/bash-test", "--sandbox", "docker", "--image", base_image(docker_client), "--json")
    outcome = json.loads(result.stdout.splitlines()[-1])
    assert (outcome["reward"], outcome["failure_kind"], outcome["masked"]) == (1.0, None, False)


@pytest.mark.docker
def test_a_sandbox_that_cannot_start_is_an_error_not_a_score(docker_client):
    result = gym("verify", "examples/bash-test", "--sandbox", "docker", "--image", "nemo-gym-test/no-such-image:0")
    assert result.returncode == 1 and "cannot start a container" in result.stderr
