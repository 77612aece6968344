"""gym dataset publish --harbor and gym dataset validate: refusals, determinism, the round trip."""

from __future__ import annotations

import asyncio
import io
import json
import shutil
import subprocess
import sys
import tarfile
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Dict, List

import pytest
from conftest import EXAMPLES

from nemo_gym.data.tasks.harbor.publishing import (
    PublishError,
    declares_response,
    publication,
    publish_for_harbor,
    solve_script,
)
from nemo_gym.data.tasks.harbor.rewards import read_reward
from nemo_gym.data.tasks.harbor.sandboxes import LocalSandbox
from nemo_gym.data.tasks.harbor.task import Task, load_dataset
from nemo_gym.data.tasks.harbor.validation import validate_task

GYM = str(Path(sys.executable).parent / "gym")

HOSTILE_ANSWERS = {
    "crlf": b"line one\r\nline two\r\n",
    "no-final-newline": b"42",
    "shell": b"$(touch pwned) `touch pwned` ${HOME} 'quote' \"dq\" \\ ; rm -rf / #\n",
    "heredoc-end": b"EOF\nNEMO_GYM_ANSWER\n'NEMO_GYM_ANSWER'\nEOF",
    "not-utf8": b"\xff\xfe\x00caf\xe9\n",
    "empty": b"",
    "large": bytes(range(256)) * 800,
}


def write(root: Path, files: Dict[str, Any]) -> Path:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        if name.endswith(".sh"):
            path.chmod(0o755)
    return root


@pytest.mark.parametrize("name", list(HOSTILE_ANSWERS))
def test_solve_sh_writes_any_answer_byte_for_byte(tmp_path, name):
    answer = HOSTILE_ANSWERS[name]
    (tmp_path / "solve.sh").write_bytes(solve_script(answer))
    (tmp_path / "solve.sh").chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run([str(tmp_path / "solve.sh")], cwd=work, check=True)  # directly, as Harbor runs it
    assert (work / "answer.md").read_bytes() == answer
    assert sorted(path.name for path in work.iterdir()) == ["answer.md"]  # nothing ran: no "pwned"


RESPONSE_CASES = [
    ("def verify(response):\n    pass\n", True),
    ("def verify(task_data, response=None):\n    pass\n", True),
    ("async def verify(*, response):\n    pass\n", True),
    ("def verify(response, /):\n    pass\n", True),
    ("def verify(workspace, task_data):\n    pass\n", False),
    ("def verify(**kwargs):\n    pass\n", False),
    ("import functools\ndef deco(f):\n    return f\n@deco\ndef verify(task_data):\n    pass\n", False),
    ("import functools\ndef grade(response, x):\n    pass\nverify = functools.partial(grade, x=1)\n", None),
    ("class Grader:\n    def __call__(self, task_data):\n        pass\nverify = Grader()\n", False),
]


@pytest.mark.parametrize("source, expected", RESPONSE_CASES)
def test_declares_response_reads_the_source(source, expected):
    assert declares_response(source.encode(), "verifier.py") is expected


GOOD = {
    "good/tests/verifier.py": "from nemo_gym.verifiers.files import read_text\ndef verify(workspace):\n    return float(read_text(workspace, 'answer.md') == 'ok')\n",
    "good/tests/helper.txt": "data",
    "good/solution/answer.md": "ok\n",
    "good/task.toml": "[verifier]\ntimeout_sec = 30\n",
    "good/instruction.md": "Write ok.",
    "shell/tests/test.sh": "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n",
    "shell/solution/solve.sh": "#!/bin/bash\ntrue\n",
    "shell/instruction.md": "Nothing.",
}


def test_a_mixed_dataset_is_refused_whole(tmp_path):
    dataset = write(
        tmp_path / "ds",
        {
            **GOOD,
            "separate/task.toml": '[verifier]\nenvironment_mode = "separate"\n[environment]\ndocker_image = "g:1"\n',
            "separate/tests/verifier.py": "def verify():\n    return 1\n",
            "responder/tests/verifier.py": "def verify(task_data, response=None):\n    return 1\n",
        },
    )
    out = tmp_path / "out"
    with pytest.raises(PublishError) as raised:
        publish_for_harbor(dataset, out)
    message = str(raised.value)
    assert "refused 2 task(s), nothing written" in message
    assert "separate: a Python verifier in separate mode" in message
    assert "responder: verify declares `response`" in message
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == ["ds"]  # nothing half-written
    result = subprocess.run(
        [GYM, "dataset", "publish", "--harbor", str(dataset), str(out)], stderr=subprocess.PIPE, text=True
    )
    assert result.returncode == 1 and "separate:" in result.stderr and "responder:" in result.stderr
    assert not out.exists()


def test_publishing_twice_gives_identical_bytes(tmp_path):
    dataset = write(tmp_path / "ds", GOOD)
    first, second = tmp_path / "one", tmp_path / "two"
    assert publish_for_harbor(dataset, first) == ["good", "shell"]
    publish_for_harbor(dataset, second)
    files = sorted(path.relative_to(first) for path in first.rglob("*") if path.is_file())
    assert files == sorted(path.relative_to(second) for path in second.rglob("*") if path.is_file())
    for name in files:
        assert (first / name).read_bytes() == (second / name).read_bytes()
        assert (first / name).stat().st_mode == (second / name).stat().st_mode
    with pytest.raises(PublishError, match="already exists"):
        publish_for_harbor(dataset, first)


def test_what_a_published_task_holds(tmp_path):
    dataset = write(tmp_path / "ds", GOOD)
    out = tmp_path / "out"
    publish_for_harbor(dataset, out)
    tests = out / "good" / "tests"
    for name in (
        "test.sh",
        "gym_runner.py",
        "_gym_runner.py",
        "verifier.py",
        "task_data.json",
        "helper.txt",
        "nemo_gym/__init__.py",
        "nemo_gym/verifiers/files.py",
    ):
        assert (tests / name).is_file(), name
    assert (tests / "test.sh").read_text().startswith("#!/usr/bin/env bash")
    assert (tests / "test.sh").stat().st_mode & 0o111
    assert not (tests / "response.json").exists()
    assert not (out / "good" / "solution" / "answer.md").exists()
    assert (out / "good" / "solution" / "solve.sh").stat().st_mode & 0o111
    for name in ("tests/test.sh", "solution/solve.sh", "instruction.md"):  # a plain test.sh task: unchanged
        assert (out / "shell" / name).read_bytes() == (dataset / "shell" / name).read_bytes()
    assert (out / "good" / "task.toml").read_bytes() == (dataset / "good" / "task.toml").read_bytes()


def test_a_root_verifier_is_copied_into_each_task_and_rows_become_tasks(tmp_path):
    dataset = write(
        tmp_path / "ds",
        {
            "verifier.py": "def verify(task_data, workspace):\n    return 1\n",
            "a/task_data.json": '{"x": 1}',
            "b/task_data.json": '{"x": 2}',
        },
    )
    files, refusals = publication(dataset)
    assert refusals == []
    for task_id in ("a", "b"):
        assert files[f"{task_id}/tests/verifier.py"].data == (dataset / "verifier.py").read_bytes()
    assert json.loads(files["b/tests/task_data.json"].data) == {"x": 2}
    assert "verifier.py" not in files
    rows = write(
        tmp_path / "rows",
        {
            "verifier.py": "def verify(task_data):\n    return 1\n",
            "rows.jsonl": '{"id": "paris", "instruction": "Capital of France?", "answer": "Paris"}\n{"answer": "Rome"}\n',
        },
    )
    files, refusals = publication(rows)
    assert refusals == [] and "rows.jsonl" not in files
    assert json.loads(files["paris/tests/task_data.json"].data)["answer"] == "Paris"
    assert files["paris/instruction.md"].data == b"Capital of France?"
    assert json.loads(files["row-2/tests/task_data.json"].data) == {"answer": "Rome"}


# --- validate -------------------------------------------------------------------------------------


def test_validate_a_passing_dataset(tmp_path):
    result = subprocess.run(
        [GYM, "dataset", "validate", str(EXAMPLES)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for name in ("answer-file", "answer-md", "async-metrics", "bash-test", "numeric-response"):
        assert f"{name}: ok (reward 1" in result.stdout
    assert "| answer-md | answer.md | 1 | ok |" in result.stdout
    assert "5 of 5 task(s) scored full marks" in result.stdout


FAILING = {
    "wrong/tests/verifier.py": "from nemo_gym.verifiers.files import read_text\ndef verify(workspace):\n    return float(read_text(workspace, 'answer.md') == 'right')\n",
    "wrong/solution/answer.md": "wrong",
    "no-oracle/tests/verifier.py": "def verify():\n    return 1\n",
    "raises/tests/verifier.py": "def verify():\n    raise ValueError('x')\n",
    "raises/solution/solve.sh": "#!/bin/bash\ntrue\n",
}


def test_validate_a_failing_dataset(tmp_path):
    dataset = write(tmp_path / "ds", {**GOOD, **FAILING})
    result = subprocess.run(
        [GYM, "dataset", "validate", str(dataset)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert result.returncode == 1
    assert "good: ok" in result.stdout and "shell: ok" in result.stdout
    assert "wrong: FAILED (reward 0)" in result.stdout
    assert "raises: FAILED (reward 0, harbor:missing_reward)" in result.stdout
    assert "no-oracle: FAILED (" in result.stdout and "nothing to run" in result.stdout
    assert "2 of 5 task(s) scored full marks" in result.stdout
    assert "validation failed for 3 task(s): no-oracle, raises, wrong" in result.stderr


def test_the_answer_md_oracle_writes_bytes_and_submits_text(tmp_path):
    answer = HOSTILE_ANSWERS["crlf"]
    dataset = write(
        tmp_path / "ds",
        {
            "t/tests/verifier.py": (
                "from nemo_gym.verifiers import final_text\n"
                "def verify(workspace, response):\n"
                f"    return float((workspace / 'answer.md').read_bytes() == {answer!r} and final_text(response) == {answer.decode()!r})\n"
            ),
            "t/solution/answer.md": answer,
        },
    )

    @asynccontextmanager
    async def local(task: Task, workspace: Path) -> AsyncIterator[Any]:
        async with LocalSandbox(workspace) as sandbox:
            yield sandbox

    result = asyncio.run(validate_task(load_dataset(dataset).task("t"), local))
    assert result.passed, result


# --- the round trip: publish, then grade as stock Harbor does -------------------------------------


def docker_opener(client: Any, version: str) -> Callable[[Task, Path], Any]:
    """validate_task's sandbox opener: a container of the suite's Python image, per task."""
    from images import LABEL, python_image

    from nemo_gym.data.tasks.harbor.sandboxes.docker import DockerSandbox

    image, volumes = python_image(client, version)

    @asynccontextmanager
    async def docker(task: Task, workspace: Path) -> AsyncIterator[Any]:
        sandbox = DockerSandbox(
            image, workspace=workspace, workdir=task.environment.workdir, volumes=volumes, labels=LABEL, client=client
        )
        async with sandbox:
            yield sandbox

    return docker


def round_trip_dataset(tmp_path: Path) -> Path:
    """The publishable examples, plus tasks with hostile answers and a partial score."""
    dataset = tmp_path / "ds"
    for name in ("answer-file", "answer-md", "async-metrics", "bash-test"):
        shutil.copytree(EXAMPLES / name, dataset / name, ignore=shutil.ignore_patterns("workspace"))
    exact = (
        "def verify(workspace, task_data):\n"
        "    return float((workspace / 'answer.md').read_bytes().hex() == task_data['hex'])\n"
    )
    for name, answer in HOSTILE_ANSWERS.items():
        write(
            dataset / f"hostile-{name}",
            {
                "tests/verifier.py": exact,
                "solution/answer.md": answer,
                "task_data.json": json.dumps({"hex": answer.hex()}),
            },
        )
    write(dataset / "partial", {
        "tests/verifier.py": "def verify(workspace):\n    lines = (workspace / 'answer.md').read_text().splitlines()\n"
                             "    return sum(line == 'yes' for line in lines) / len(lines)\n",
        "solution/answer.md": "yes\nno\nyes\nno\n",
    })  # fmt: skip
    return dataset


async def harbor_reward(task_dir: Path, image: str, volumes: Dict[str, Any], client: Any) -> float:
    """Grades a published task as stock Harbor does: /solution/solve.sh then (/tests/test.sh), run
    directly, with no response file and /logs/verifier as the only link."""
    from images import LABEL

    from nemo_gym.data.tasks.harbor.sandboxes.docker import DockerSandbox
    from nemo_gym.data.tasks.harbor.task import load_task

    task = load_task(task_dir)

    def tar_of(folder: Path) -> bytes:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            archive.add(str(folder), arcname=".")
        return buffer.getvalue()

    sandbox = DockerSandbox(image, workdir=task.environment.workdir, volumes=volumes, labels=LABEL, client=client)
    async with sandbox:
        await sandbox.exec("mkdir -p /tests /solution /logs/verifier /logs/agent", cwd="/", user="root")
        container = sandbox._require()
        container.put_archive("/tests", tar_of(task_dir / "tests"))
        container.put_archive("/solution", tar_of(task_dir / "solution"))
        await sandbox.exec("chmod +x /tests/test.sh /solution/solve.sh", cwd="/", user="root")
        await sandbox.exec("(/solution/solve.sh) > /logs/agent/oracle.txt 2>&1")
        await sandbox.exec("(/tests/test.sh) > /logs/verifier/test-stdout.txt 2>&1")
        logs = task_dir.parent.parent / "logs" / task_dir.name
        logs.mkdir(parents=True)
        for name in ("reward.json", "reward.txt"):
            probe = await sandbox.exec(f"test -f /logs/verifier/{name}", cwd="/")
            if probe.return_code == 0:
                await sandbox.download_file(f"/logs/verifier/{name}", str(logs / name))
    return read_reward(logs).reward


@pytest.mark.docker
def test_round_trip_grades_the_same_under_gym_and_harbor(docker_client, tmp_path):
    from images import python_image

    dataset = round_trip_dataset(tmp_path)
    out = tmp_path / "published"
    published = publish_for_harbor(dataset, out)
    image, volumes = python_image(docker_client, "3.12")
    loaded = load_dataset(dataset)

    docker = docker_opener(docker_client, "3.12")

    async def compare() -> List[tuple]:
        rows = []
        for task_id in published:
            gym = await validate_task(loaded.task(task_id), docker)
            harbor = await harbor_reward(out / task_id, image, volumes, docker_client)
            rows.append((task_id, gym.reward, harbor))
        return rows

    rows = asyncio.run(compare())
    assert len(rows) == 4 + len(HOSTILE_ANSWERS) + 1
    for task_id, gym, harbor in rows:
        assert gym == harbor, (task_id, gym, harbor)
        assert gym == (0.5 if task_id == "partial" else 1.0), (task_id, gym)


@pytest.mark.docker
def test_validate_on_docker(docker_client, tmp_path):
    dataset = write(tmp_path / "ds", {**GOOD, **FAILING})
    shutil.copytree(EXAMPLES / "numeric-response", dataset / "numeric-response")

    docker = docker_opener(docker_client, "3.12")

    loaded = load_dataset(dataset)

    async def run() -> Dict[str, bool]:
        return {task_id: (await validate_task(loaded.task(task_id), docker)).passed for task_id in loaded.task_ids}

    assert asyncio.run(run()) == {
        "good": True, "no-oracle": False, "numeric-response": True, "raises": False, "shell": True, "wrong": False,
    }  # fmt: skip


@pytest.mark.docker
def test_validate_on_docker_from_the_command_line(docker_client, tmp_path):
    from images import base_image

    dataset = write(
        tmp_path / "ds",
        {
            "shell/tests/test.sh": GOOD["shell/tests/test.sh"],
            "shell/solution/solve.sh": GOOD["shell/solution/solve.sh"],
            "empty/tests/test.sh": "#!/bin/bash\n[ -s answer.md ] && echo 1 > /logs/verifier/reward.txt\n",
            "empty/solution/answer.md": "",
        },
    )
    result = subprocess.run(
        [GYM, "dataset", "validate", str(dataset), "--sandbox", "docker", "--image", base_image(docker_client)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert result.returncode == 1
    assert "shell: ok (reward 1, oracle solve.sh)" in result.stdout
    assert "empty: FAILED (reward 0, harbor:missing_reward)" in result.stdout
    assert "validation failed for 1 task(s): empty" in result.stderr
