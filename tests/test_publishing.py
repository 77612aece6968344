"""gym-harbor dataset publish --harbor and gym-harbor dataset validate: refusals, determinism, the round trip."""

from __future__ import annotations

import asyncio
import io
import json
import re
import shutil
import subprocess
import sys
import tarfile
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Dict, List

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.8-3.10 by the nox matrix
    import tomli as tomllib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import EXAMPLES, make_bin

from nemo_gym.data.tasks.harbor._toml_edit import Edit, TomlEditError, edit_toml
from nemo_gym.data.tasks.harbor.publishing import (
    DEFAULT_BASE_IMAGE,
    PublishError,
    PublishProblem,
    declares_response,
    publication,
    publish_for_harbor,
    publish_problems,
    solve_script,
)
from nemo_gym.data.tasks.harbor.rewards import read_reward
from nemo_gym.data.tasks.harbor.sandboxes import LocalSandbox
from nemo_gym.data.tasks.harbor.task import Task, load_dataset
from nemo_gym.data.tasks.harbor.validation import validate_task
from nemo_gym.data.tasks.harbor.verification import PYTHON, choose_verifier

GYM = str(Path(sys.executable).parent / "gym-harbor")

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
    ("def verify(**kwargs):\n    pass\n", True),  # the runner passes response in it (red team 70)
    ("def verify(task_data, **extra):\n    return extra.get('response')\n", True),
    ("verify = lambda task_data, response=None: 1.0\n", True),
    ("verify = lambda task_data: 1.0\n", False),
    ("from grading import verify\n", None),  # another module's: the source here cannot tell
    ("import grading as verify\n", None),
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
    assert message.splitlines()[0] == "refused 2 task(s), nothing written:"
    assert "\n  separate: a Python verifier in separate mode" in message
    assert "\n  responder: verify declares `response`" in message
    assert len(message.splitlines()) == 3  # a line per reason
    assert [problem.task_ids for problem in raised.value.problems] == [("responder",), ("separate",)]
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


def test_publishing_into_a_link_or_under_a_file_is_one_sentence_and_writes_nothing(tmp_path):
    # Red team 57: a link as OUT (dangling, or to an empty folder) and OUT under a file each ended in
    # a bare traceback (NotADirectoryError, FileExistsError).
    dataset = write(tmp_path / "ds", GOOD)
    (tmp_path / "empty").mkdir()
    (tmp_path / "to-empty").symlink_to("empty")
    (tmp_path / "dangling").symlink_to("nowhere")
    (tmp_path / "a-file").write_text("x")
    for out, message in (
        ("to-empty", "is a link; publish into a new folder"),
        ("dangling", "is a link; publish into a new folder"),
        ("a-file/out", "cannot write there (File exists"),
    ):
        with pytest.raises(PublishError, match=re.escape(f"{tmp_path / out}: {message}")):
            publish_for_harbor(dataset, tmp_path / out)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a-file", "dangling", "ds", "empty", "to-empty"]
    assert not any((tmp_path / "empty").iterdir())


def test_publishing_inside_the_dataset_is_refused(tmp_path):
    # Red team 57: a copy published into a task's tests/ was staged with that task on every later run.
    dataset = write(tmp_path / "ds", GOOD)
    with pytest.raises(PublishError, match="is inside the dataset .*; publish outside it"):
        publish_for_harbor(dataset, dataset / "good" / "tests" / "pub")
    with pytest.raises(PublishError, match="is inside the dataset"):
        publish_for_harbor(dataset / "good", dataset / "good" / "pub")
    assert not (dataset / "good" / "tests" / "pub").exists() and not (dataset / "good" / "pub").exists()
    # Red team 59: a task published alone into another task's tests/, beside it.
    with pytest.raises(PublishError, match="is inside the task folder .*shell/tests; publish outside it"):
        publish_for_harbor(dataset / "good", dataset / "shell" / "tests" / "pub")
    assert not (dataset / "shell" / "tests" / "pub").exists()


def test_a_published_folder_has_the_umasks_mode_or_the_given_empty_folders(tmp_path):
    # Red team 57: mkdtemp's 0700 made the copy unreadable to any other user (Harbor run as another).
    import os

    dataset = write(tmp_path / "ds", GOOD)
    old = os.umask(0o022)
    try:
        publish_for_harbor(dataset, tmp_path / "new")
    finally:
        os.umask(old)
    assert (tmp_path / "new").stat().st_mode & 0o7777 == 0o755
    (tmp_path / "given").mkdir(mode=0o750)
    (tmp_path / "given").chmod(0o750)
    publish_for_harbor(dataset, tmp_path / "given")
    assert (tmp_path / "given").stat().st_mode & 0o7777 == 0o750


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
    # The author's text, with the working directory the generated Dockerfile makes added.
    assert (
        out / "good" / "task.toml"
    ).read_text() == '[verifier]\ntimeout_sec = 30\n\n[environment]\nworkdir = "/workspace"\n'
    assert (out / "good" / "environment" / "Dockerfile").read_text().splitlines()[1:] == [
        f"FROM {DEFAULT_BASE_IMAGE}",
        "WORKDIR /workspace",
    ]


def test_a_root_verifier_is_copied_into_each_task_and_rows_become_tasks(tmp_path):
    dataset = write(
        tmp_path / "ds",
        {
            "verifier.py": "def verify(task_data, workspace):\n    return 1\n",
            "a/task_data.json": '{"x": 1}',
            "a/instruction.md": "A.",
            "b/task_data.json": '{"x": 2}',
            "b/instruction.md": "B.",
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
            "rows.jsonl": '{"id": "paris", "instruction": "Capital of France?", "answer": "Paris"}\n'
            '{"instruction": "Capital of Italy?", "answer": "Rome"}\n',
        },
    )
    files, refusals = publication(rows)
    assert refusals == [] and "rows.jsonl" not in files
    assert json.loads(files["paris/tests/task_data.json"].data)["answer"] == "Paris"
    assert files["paris/instruction.md"].data == b"Capital of France?"
    assert json.loads(files["row-2/tests/task_data.json"].data) == {
        "instruction": "Capital of Italy?",
        "answer": "Rome",
    }
    assert not any(name.startswith(("a/task_data.json", "b/task_data.json")) for name in files)  # Gym's own


# --- what a published task holds: a whole folder stock Harbor starts -------------------------------


def published_files(out: Path, task_id: str) -> List[str]:
    """The published task's files, the SDK folder of the shim counted once, and the shim's shipped
    bytecode as one ``tests/__pycache__`` entry (it is checked where staging is)."""
    folder = out / task_id
    names = set()
    for path in folder.rglob("*"):
        parts = path.relative_to(folder).parts
        if path.is_file() and "nemo_gym" not in parts:
            names.add("/".join(parts[: parts.index("__pycache__") + 1]) if "__pycache__" in parts else "/".join(parts))
    return sorted(names)


SHIM_NAMES = [
    "__pycache__",
    "_gym_await.py",
    "_gym_channel.py",
    "_gym_runner.py",
    "_gym_runner_rare.py",
    "gym_runner.py",
    "task_data.json",
    "test.sh",
]


def test_a_task_without_its_own_environment_gets_a_dockerfile(tmp_path):
    dataset = write(
        tmp_path / "ds",
        {
            "t/task.toml": (
                '# the author\'s comment\nschema_version = "1.3"\n\n[environment]\n'
                'docker_image = "registry.example:5000/team/image:1.2"  # the image\ncpus = 2\n'
            ),
            "t/instruction.md": "Do it.",
            "t/tests/verifier.py": "def verify(workspace):\n    return 1\n",
            "t/workspace/start.txt": "begin\n",
            "t/workspace/bin/run.sh": "#!/bin/sh\necho run\n",
            "t/workspace/deep/er/data.bin": b"\x00\xff",
        },
    )
    out = tmp_path / "out"
    publish_for_harbor(dataset, out, base_image="never/used:1")
    task = out / "t"
    assert (task / "environment" / "Dockerfile").read_text() == (
        "# Written by gym-harbor dataset publish --harbor: the task's image, working directory and users.\n"
        "FROM registry.example:5000/team/image:1.2\n"
        "WORKDIR /workspace\n"
    )
    # The docker_image line goes (Harbor would run the image and ignore the Dockerfile); the rest stays.
    assert (task / "task.toml").read_text() == (
        '# the author\'s comment\nschema_version = "1.3"\n\n[environment]\nworkdir = "/workspace"\ncpus = 2\n'
    )
    # workspace/ is Gym's sample of the agent's end state (what gym-harbor verify grades): never published,
    # or every published task would start solved.
    assert not (task / "workspace").exists() and not (task / "environment" / "workspace").exists()
    assert published_files(out, "t") == sorted(
        [
            "environment/Dockerfile",
            "instruction.md",
            "task.toml",
            "tests/verifier.py",
            *(f"tests/{name}" for name in SHIM_NAMES),
        ]
    )


def test_the_working_directory_is_the_tasks_and_the_base_image_the_default(tmp_path):
    dataset = write(
        tmp_path / "ds",
        {
            "app/task.toml": '[environment]\nworkdir = "/app"\n',
            "app/instruction.md": "Do it.",
            "app/tests/test.sh": "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n",
            "app/workspace/a.txt": "a",
            "bare/instruction.md": "Do it.",
            "bare/tests/test.sh": "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n",
        },
    )
    publish_for_harbor(dataset, tmp_path / "default")
    publish_for_harbor(dataset, tmp_path / "based", base_image="nemo-gym-test/base@sha256:" + "ab" * 32)
    app = tmp_path / "default" / "app"
    assert (app / "environment" / "Dockerfile").read_text().splitlines()[1:] == [
        f"FROM {DEFAULT_BASE_IMAGE}",
        "WORKDIR /app",
    ]
    assert (app / "task.toml").read_bytes() == (dataset / "app" / "task.toml").read_bytes()  # workdir kept
    bare = tmp_path / "based" / "bare"
    assert (bare / "environment" / "Dockerfile").read_text().splitlines()[1:] == [
        "FROM nemo-gym-test/base@sha256:" + "ab" * 32,
        "WORKDIR /workspace",
    ]
    assert (bare / "task.toml").read_text() == '[environment]\nworkdir = "/workspace"\n'  # a folder without one
    assert (bare / "tests" / "test.sh").read_bytes() == (dataset / "bare" / "tests" / "test.sh").read_bytes()
    with pytest.raises(PublishError, match="base image"):
        publish_for_harbor(dataset, tmp_path / "bad", base_image="python:3.12 AS evil")
    assert not (tmp_path / "bad").exists()


def test_a_task_with_its_own_environment_keeps_it(tmp_path):
    own = {
        "own/task.toml": '[environment]\ndocker_image = "prebuilt:1"\n',
        "own/instruction.md": "Do it.",
        "own/tests/test.sh": "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n",
        "own/environment/Dockerfile": "FROM python:3.12-slim\nWORKDIR /app\nCOPY start.txt /app/\n",
        "own/environment/start.txt": "begin",
        "own/workspace/solved.txt": "a sample of the agent's end state",
    }
    dataset = write(tmp_path / "ds", own)
    out = tmp_path / "out"
    publish_for_harbor(dataset, out)
    for name in ("task.toml", "environment/Dockerfile", "environment/start.txt"):  # all unchanged
        assert (out / "own" / name).read_bytes() == (dataset / "own" / name).read_bytes()
    assert not (out / "own" / "workspace").exists()


def test_a_plain_test_sh_task_on_a_sidecar_passes_through_unchanged(tmp_path):
    # This server cannot run a collect hook on a Compose sidecar; Harbor can, so publishing keeps it.
    toml = '[environment]\ndocker_image = "prebuilt:1"\n[[verifier.collect]]\ncommand = "pg_dump"\nservice = "db"\n'
    files = {
        "db/task.toml": toml,
        "db/instruction.md": "Do it.",
        "db/tests/test.sh": "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n",
        "db/environment/docker-compose.yaml": "services:\n  db:\n    image: postgres:16\n",
    }
    dataset = write(tmp_path / "ds", files)
    publish_for_harbor(dataset, tmp_path / "out")
    for name in files:
        assert (tmp_path / "out" / name).read_bytes() == (dataset / name).read_bytes()


def test_the_users_a_task_names_are_made_and_its_agent_owns_the_workdir(tmp_path):
    dataset = write(
        tmp_path / "ds",
        {
            "t/task.toml": '[agent]\nuser = "agent"\n[verifier]\nuser = "grader"\n[environment]\nworkdir = "/app"\n',
            "t/instruction.md": "Do it.",
            "t/tests/test.sh": "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n",
            "u/task.toml": "[agent]\nuser = 1000\n",
            "u/instruction.md": "Do it.",
            "u/tests/test.sh": "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n",
        },
    )
    publish_for_harbor(dataset, tmp_path / "out", base_image="base:1")
    assert (tmp_path / "out" / "t" / "environment" / "Dockerfile").read_text().splitlines()[1:] == [
        "FROM base:1",
        "WORKDIR /app",
        "RUN (id -u agent >/dev/null 2>&1 || useradd --create-home agent) && "
        "(id -u grader >/dev/null 2>&1 || useradd --create-home grader) && chown agent /app",
    ]
    assert (tmp_path / "out" / "u" / "environment" / "Dockerfile").read_text().splitlines()[-1] == (
        "RUN chown 1000 /workspace"
    )


def test_environments_publishing_cannot_map_are_refused(tmp_path):
    sh = "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n"
    dataset = write(
        tmp_path / "ds",
        {
            # Files for Harbor to upload into a prebuilt image's working directory: the image goes.
            "loose/task.toml": '[environment]\ndocker_image = "prebuilt:1"\n',
            "loose/instruction.md": "Do it.",
            "loose/tests/test.sh": sh,
            "loose/environment/start.txt": "begin",
            # A separate verifier running in a copy of the [environment] publishing rewrites.
            "inherits/task.toml": '[verifier]\nenvironment_mode = "separate"\n[environment]\ndocker_image = "prebuilt:1"\n',
            "inherits/instruction.md": "Do it.",
            "inherits/tests/test.sh": sh,
            # ... but with its own [verifier.environment] it publishes.
            "declares/task.toml": '[verifier.environment]\ndocker_image = "grader:1"\n[environment]\ndocker_image = "prebuilt:1"\n',
            "declares/instruction.md": "Do it.",
            "declares/tests/test.sh": sh,
            # A table a line edit cannot reach.
            "inline/task.toml": 'environment = { docker_image = "prebuilt:1" }\n',
            "inline/instruction.md": "Do it.",
            "inline/tests/test.sh": sh,
            # A working directory a Dockerfile line cannot carry as written.
            "spaced/task.toml": '[environment]\nworkdir = "/my work"\n',
            "spaced/instruction.md": "Do it.",
            "spaced/tests/test.sh": sh,
        },
    )
    problems = {problem.task_ids: problem.reason for problem in publish_problems(dataset)}
    assert problems.keys() == {("inherits",), ("inline",), ("loose",), ("spaced",)}
    assert problems[("loose",)].startswith("environment/ holds files but no Dockerfile or docker-compose.yaml")
    assert problems[("inherits",)].startswith("a separate verifier inherits [environment]")
    assert problems[("inline",)].startswith("task.toml: ")
    assert (
        problems[("spaced",)]
        == "the working directory '/my work' has characters publishing does not write into a Dockerfile"
    )
    files, _ = publication(dataset)
    assert files["declares/task.toml"].data == (
        b'[verifier.environment]\ndocker_image = "grader:1"\n[environment]\nworkdir = "/workspace"\n'
    )


def test_nothing_harbor_does_not_read_is_copied(tmp_path):
    dataset = write(
        tmp_path / "ds",
        {
            "dataset.toml": "timeout_multiplier = 1.0\n",
            "README.md": "The dataset.",
            "t/task.toml": '[environment]\nworkdir = "/workspace"\n[[steps]]\nname = "one"\n',
            "t/instruction.md": "Ignored by Harbor for a multi-step task, but its packager keeps it.",
            "t/README.md": "About the task.",
            "t/trajectory.json": "{}",
            "t/task_data.json": '{"x": 1}',
            "t/response.json": '{"output": []}',
            "t/notes.txt": "the author's notes",
            "t/workspace/a.txt": "a",
            "t/tests/test.sh": "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n",
            "t/steps/one/instruction.md": "Step one.",
            "t/steps/one/trajectory.json": "{}",
            "t/steps/one/workdir/setup.sh": "#!/bin/bash\ntrue\n",
            "t/steps/one/solution/answer.md": "one",
            "t/steps/one/notes.txt": "the author's notes",
            "t/steps/undeclared/instruction.md": "Not a step.",
        },
    )
    out = tmp_path / "out"
    publish_for_harbor(dataset, out)
    assert sorted(path.name for path in out.iterdir()) == ["t"]  # no dataset.toml, README.md
    assert published_files(out, "t") == [
        "README.md",
        "environment/Dockerfile",
        "instruction.md",
        "steps/one/instruction.md",
        "steps/one/solution/solve.sh",
        "steps/one/trajectory.json",
        "steps/one/workdir/setup.sh",
        "task.toml",
        "tests/test.sh",
        "trajectory.json",
    ]
    solve = (out / "t" / "steps" / "one" / "solution" / "solve.sh").read_text()
    assert "# The reference answer (steps/one/solution/answer.md), written byte for byte" in solve


def test_rows_become_complete_harbor_tasks(tmp_path):
    dataset = write(
        tmp_path / "ds",
        {
            "dataset.toml": "timeout_multiplier = 2.5\n",
            "verifier.py": (
                "from nemo_gym.verifiers.files import read_text\n"
                "def verify(workspace, task_data):\n"
                "    return float(read_text(workspace, 'answer.md').strip() == task_data['answer'])\n"
            ),
            "rows.jsonl": (
                '{"id": "paris", "instruction": "Capital of France? Write it to answer.md.", "answer": "Paris", '
                '"solution": "Paris\\n"}\n'
                '{"instruction": "Capital of Italy?", "answer": "Rome"}\n'
            ),
        },
    )
    out = tmp_path / "out"
    assert publish_for_harbor(dataset, out) == ["paris", "row-2"]
    paris = out / "paris"
    assert published_files(out, "paris") == sorted(
        [
            "environment/Dockerfile",
            "instruction.md",
            "solution/solve.sh",
            "task.toml",
            "tests/verifier.py",
            *(f"tests/{name}" for name in SHIM_NAMES),
        ]
    )
    assert (
        paris / "task.toml"
    ).read_text() == '[environment]\nworkdir = "/workspace"\n\n[verifier]\ntimeout_sec = 1500.0\n'
    assert (paris / "instruction.md").read_text() == "Capital of France? Write it to answer.md."
    assert (paris / "environment" / "Dockerfile").read_text().splitlines()[1:] == [
        f"FROM {DEFAULT_BASE_IMAGE}",
        "WORKDIR /workspace",
    ]
    assert (paris / "tests" / "verifier.py").read_bytes() == (dataset / "verifier.py").read_bytes()
    assert json.loads((paris / "tests" / "task_data.json").read_text())["answer"] == "Paris"
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run([str(paris / "solution" / "solve.sh")], cwd=work, check=True)  # the row's solution field
    assert (work / "answer.md").read_bytes() == b"Paris\n"
    assert "# The reference answer (the row's solution field)," in (paris / "solution" / "solve.sh").read_text()
    assert not (out / "row-2" / "solution").exists()  # no solution field: no oracle, still a task


def test_timeouts_carry_the_datasets_multiplier(tmp_path):
    dataset = write(
        tmp_path / "ds",
        {
            "dataset.toml": "timeout_multiplier = 2.0\n",
            "single/task.toml": '[verifier]\ntimeout_sec = 30  # half a minute\n[environment]\nworkdir = "/w"\n',
            "single/instruction.md": "Do it.",
            "single/tests/test.sh": "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n",
            "multi/task.toml": (
                '[environment]\nworkdir = "/w"\n[verifier]\ntimeout_sec = 5.0\n\n'
                '[[steps]]\nname = "a"\n[steps.verifier]\ntimeout_sec = 40\nenv = { A = "1" }\n\n'
                '[[steps]]\nname = "b"\n'
            ),
            "multi/tests/test.sh": "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n",
            "multi/steps/a/instruction.md": "A.",
            "multi/steps/b/instruction.md": "B.",
        },
    )
    files, refusals = publication(dataset)
    assert refusals == []
    assert files["single/task.toml"].data.decode() == '[verifier]\ntimeout_sec = 60.0\n[environment]\nworkdir = "/w"\n'
    # Harbor never uses [verifier].timeout_sec for a step (and neither does Gym): each step's is set,
    # its default being 600.
    assert files["multi/task.toml"].data.decode() == (
        '[environment]\nworkdir = "/w"\n[verifier]\ntimeout_sec = 5.0\n\n'
        '[[steps]]\nname = "a"\n[steps.verifier]\ntimeout_sec = 80.0\nenv = { A = "1" }\n\n'
        '[[steps]]\nname = "b"\n\n[steps.verifier]\ntimeout_sec = 1200.0\n'
    )


MULTI_STEP = {
    "m/task.toml": '[environment]\nworkdir = "/w"\n'
    + "".join(f'[[steps]]\nname = "{name}"\n' for name in ("shared", "own", "helpers", "bash")),
    "m/task_data.json": '{"expected": {"shared": "s", "own": "o", "helpers": "h"}}',
    # Steps without tests/ of their own use the task's verifier.py ...
    "m/tests/verifier.py": (
        "import common\ndef verify(workspace, task_data):\n    return common.score(workspace, task_data, 'shared')\n"
    ),
    "m/tests/common.py": (
        "def score(workspace, task_data, key):\n"
        "    return float((workspace / 'answer.md').read_text() == task_data['expected'][key])\n"
    ),
    # ... a step's own verifier.py lies over it ...
    "m/steps/own/tests/verifier.py": (
        "import common\ndef verify(workspace, task_data):\n    return common.score(workspace, task_data, 'own')\n"
    ),
    # ... a step's tests/ without a verifier.py still gets the shim (its files win in Harbor too) ...
    "m/steps/helpers/tests/common.py": (
        "def score(workspace, task_data, key):\n"
        "    return float((workspace / 'answer.md').read_text() == task_data['expected']['helpers'])\n"
    ),
    # ... and a step's own test.sh wins over any verifier.py.
    "m/steps/bash/tests/test.sh": "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n",
    **{f"m/steps/{name}/instruction.md": f"Step {name}." for name in ("shared", "own", "helpers", "bash")},
}


def harbor_tests(task: Path, step: str) -> Dict[str, Path]:
    """What Harbor uploads to /tests for a step: tests/, then steps/<step>/tests/ over it."""
    staged: Dict[str, Path] = {}
    for folder in (task / "tests", task / "steps" / step / "tests"):
        if folder.is_dir():
            staged.update((path.relative_to(folder).as_posix(), path) for path in folder.rglob("*") if path.is_file())
    return staged


@pytest.mark.parametrize("step", ["shared", "own", "helpers"])
def test_each_python_step_gets_the_shim_where_choose_verifier_reads(tmp_path, step):
    dataset = write(tmp_path / "ds", MULTI_STEP)
    out = tmp_path / "out"
    publish_for_harbor(dataset, out)
    choice = choose_verifier(dataset / "m", dataset, step)
    assert choice.kind == PYTHON and choice.verifier_path is not None
    top = choice.tests_dirs[-1].relative_to(dataset / "m").as_posix()
    assert top == ("tests" if step == "shared" else f"steps/{step}/tests")
    assert (out / "m" / top / "test.sh").stat().st_mode & 0o111
    staged = harbor_tests(out / "m", step)
    assert staged["verifier.py"].read_bytes() == choice.verifier_path.read_bytes()
    assert {"test.sh", "gym_runner.py", "task_data.json", "nemo_gym/verifiers/__init__.py"} <= set(staged)
    # Graded as Harbor grades the step: the merged /tests, (test.sh) run directly from the workspace.
    tests = tmp_path / "tests"
    for name, path in staged.items():
        (tests / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, tests / name)
    tools = make_bin(tmp_path / "bin", python3=sys.executable, bash="/bin/bash")  # test.sh runs env bash
    rewards = []
    for answer in ({"shared": "s", "own": "o", "helpers": "h"}[step], "wrong"):
        workspace = tmp_path / f"workspace-{answer}"
        workspace.mkdir()
        (workspace / "answer.md").write_text(answer)
        logs = tmp_path / f"logs-{answer}"
        env = {"PATH": str(tools), "VERIFIER_LOGS_DIR": str(logs)}
        subprocess.run([str(tests / "test.sh")], cwd=workspace, env=env, check=True, stdout=subprocess.PIPE)
        rewards.append(json.loads((logs / "reward.json").read_text())["reward"])
    assert rewards == [1.0, 0.0]


def test_a_bash_step_keeps_its_test_sh(tmp_path):
    dataset = write(tmp_path / "ds", MULTI_STEP)
    out = tmp_path / "out"
    publish_for_harbor(dataset, out)
    assert (out / "m" / "steps" / "bash" / "tests").is_dir()
    assert sorted(path.name for path in (out / "m" / "steps" / "bash" / "tests").iterdir()) == ["test.sh"]
    assert harbor_tests(out / "m", "bash")["test.sh"].read_bytes() == MULTI_STEP["m/steps/bash/tests/test.sh"].encode()


def test_a_separate_python_step_and_a_step_without_instruction_are_refused(tmp_path):
    dataset = write(
        tmp_path / "ds",
        {
            "sep/task.toml": '[[steps]]\nname = "a"\n[steps.verifier]\nenvironment_mode = "separate"\n'
            '[steps.verifier.environment]\ndocker_image = "g:1"\n',
            "sep/steps/a/instruction.md": "A.",
            "sep/steps/a/tests/verifier.py": "def verify():\n    return 1\n",
            "mute/task.toml": '[[steps]]\nname = "a"\n',
            "mute/steps/a/tests/verifier.py": "def verify():\n    return 1\n",
            "flat/tests/verifier.py": "def verify():\n    return 1\n",
        },
    )
    assert [str(problem) for problem in publish_problems(dataset)] == [
        "flat: has no instruction.md, which Harbor requires",
        "mute: steps/a/ has no instruction.md, which Harbor requires of every step",
        "sep: step a: a Python verifier in separate mode: Harbor uploads no tests/ to separate verifiers",
    ]


def test_refusals_are_grouped_by_reason(tmp_path):
    rows = "".join(json.dumps({"instruction": f"Question {n}?", "answer": str(n)}) + "\n" for n in range(1, 51))
    files = {
        "verifier.py": "from nemo_gym.verifiers import final_text\ndef verify(response, task_data):\n    return 1\n",
        "rows.jsonl": rows,
        "mute/tests/test.sh": "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n",
    }
    dataset = write(tmp_path / "ds", files)
    problems = publish_problems(dataset)
    assert [(len(problem.task_ids), problem.noun) for problem in problems] == [(1, "tasks"), (50, "rows")]
    assert problems[0] == PublishProblem(("mute",), "has no instruction.md, which Harbor requires", "tasks")
    response = problems[1].reason
    assert response.startswith("verify declares `response`, which stock Harbor never passes")
    assert problems[1].task_ids == tuple(f"row-{n}" for n in range(1, 51))
    assert str(problems[1]) == f"50 rows (row-1, row-2, row-3, row-4, row-5 and 45 more): {response}"
    with pytest.raises(PublishError) as raised:
        publish_for_harbor(dataset, tmp_path / "out")
    assert str(raised.value).splitlines() == [
        "refused 51 task(s), nothing written:",
        "  mute: has no instruction.md, which Harbor requires",
        f"  50 rows (row-1, row-2, row-3, row-4, row-5 and 45 more): {response}",
    ]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["ds"]  # publish_problems wrote nothing either
    # A task folder the same root verifier.py grades shares the line, which then counts tasks.
    mixed = write(tmp_path / "mixed", {**files, "folder/task_data.json": "{}", "folder/instruction.md": "A."})
    assert [str(problem).split(":")[0] for problem in publish_problems(mixed)] == [
        "51 tasks (folder, row-1, row-2, row-3, row-4 and 46 more)",
        "mute",
    ]
    assert publish_problems(write(tmp_path / "fine", GOOD)) == []


def test_the_portable_pattern_for_a_response_graded_row_publishes(tmp_path):
    """The README's pattern: the answer goes to answer.md in the working directory, and verify reads
    it from the workspace instead of declaring `response`."""
    dataset = write(
        tmp_path / "capitals",
        {
            "verifier.py": (
                "from nemo_gym.verifiers import exact_match\nfrom nemo_gym.verifiers.files import read_text\n\n"
                "def verify(workspace, task_data):\n"
                "    return exact_match(read_text(workspace, 'answer.md'), task_data['answer'])\n"
            ),
            "rows.jsonl": '{"id": "france", "instruction": "The capital of France? Write it to answer.md.", '
            '"answer": "Paris", "solution": "Paris"}\n',
        },
    )
    assert publish_problems(dataset) == []
    assert publish_for_harbor(dataset, tmp_path / "out") == ["france"]


@pytest.mark.parametrize("base_image", [None, "nemo-gym-test/python:3.12"])
def test_publishing_a_varied_dataset_twice_gives_identical_bytes(tmp_path, base_image):
    dataset = write(tmp_path / "ds", {**GOOD, **MULTI_STEP, "good/workspace/start.txt": "s"})
    first, second = tmp_path / "one", tmp_path / "two"
    publish_for_harbor(dataset, first, base_image=base_image)
    publish_for_harbor(dataset, second, base_image=base_image)
    names = sorted(path.relative_to(first) for path in first.rglob("*"))
    assert names == sorted(path.relative_to(second) for path in second.rglob("*"))
    for name in names:
        if (first / name).is_file():
            assert (first / name).read_bytes() == (second / name).read_bytes(), name
            assert (first / name).stat().st_mode == (second / name).stat().st_mode, name


# --- task.toml edits -------------------------------------------------------------------------------

TOML_EDITS = [
    # (text, edits, expected text)
    ("", [Edit(("environment", "workdir"), "/w")], '[environment]\nworkdir = "/w"\n'),
    ("a = 1", [Edit(("environment", "workdir"), "/w")], 'a = 1\n\n[environment]\nworkdir = "/w"\n'),
    ("[environment]", [Edit(("environment", "workdir"), "/w")], '[environment]\nworkdir = "/w"\n'),
    (
        '[environment] # env\n  docker_image = "x"   # gone\n\tcpus = 1\n',
        [Edit(("environment", "docker_image")), Edit(("environment", "workdir"), "/w")],
        '[environment] # env\nworkdir = "/w"\n\tcpus = 1\n',
    ),
    (
        '[environment]\r\ndocker_image = "x"\r\n[verifier]\r\ntimeout_sec = 3\r\n',
        [Edit(("environment", "docker_image")), Edit(("verifier", "timeout_sec"), 6.0)],
        "[environment]\r\n[verifier]\r\ntimeout_sec = 6.0\r\n",
    ),
    (  # a header inside a multi-line string is not a header
        'notes = """\n[environment]\ndocker_image = "y"\n"""\n[environment]\ndocker_image = "z"\n',
        [Edit(("environment", "docker_image"))],
        'notes = """\n[environment]\ndocker_image = "y"\n"""\n[environment]\n',
    ),
    (  # a multi-line array with brackets in strings and comments
        "tags = [\n  \"[x]\", # ]\n  '{',\n]\n[verifier]\ntimeout_sec = 3\n",
        [Edit(("verifier", "timeout_sec"), 4.5)],
        "tags = [\n  \"[x]\", # ]\n  '{',\n]\n[verifier]\ntimeout_sec = 4.5\n",
    ),
    (  # a quoted key, the table's keys in another order, a dotted key beside
        '[ "environment" ]\nenv.A = "1"\n"docker_image" = "x"\n',
        [Edit(("environment", "docker_image"))],
        '[ "environment" ]\nenv.A = "1"\n',
    ),
    (  # a sub-table first: the table's own header comes after it
        '[environment.env]\nA = "1"\n',
        [Edit(("environment", "workdir"), '/w "q" \\')],
        '[environment.env]\nA = "1"\n\n[environment]\nworkdir = "/w \\"q\\" \\\\"\n',
    ),
    (  # array-of-tables elements: an element's own table is found, a missing one added before the next
        '[[steps]]\nname = "a"\n[steps.verifier]\nuser = "x"\n[[steps]]\nname = "b"\n[[steps.verifier.collect]]\ncommand = "true"\n',
        [Edit(("steps", 0, "verifier", "timeout_sec"), 2.0), Edit(("steps", 1, "verifier", "timeout_sec"), 3.0)],
        '[[steps]]\nname = "a"\n[steps.verifier]\ntimeout_sec = 2.0\nuser = "x"\n[[steps]]\nname = "b"\n'
        '[steps.verifier]\ntimeout_sec = 3.0\n\n[[steps.verifier.collect]]\ncommand = "true"\n',
    ),
]


@pytest.mark.parametrize("text, edits, expected", TOML_EDITS)
def test_task_toml_edits_change_only_their_lines(text, edits, expected):
    assert edit_toml(text, edits) == expected


@pytest.mark.parametrize(
    "text, edit",
    [
        ('environment = { docker_image = "x", cpus = 1 }\n', Edit(("environment", "docker_image"))),
        ('environment.docker_image = "x"\n[environment.env]\nA = "1"\n', Edit(("environment", "workdir"), "/w")),
        ('steps = [{ name = "a" }]\n', Edit(("steps", 0, "verifier", "timeout_sec"), 1.0)),
    ],
)
def test_task_toml_edits_a_line_cannot_make_are_refused(text, edit):
    with pytest.raises(TomlEditError):
        edit_toml(text, [edit])


# --- validate -------------------------------------------------------------------------------------


def test_validate_a_passing_dataset(tmp_path):
    result = subprocess.run(
        [GYM, "dataset", "validate", str(EXAMPLES)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    names = ("answer-file", "answer-md", "async-metrics", "bash-test", "numeric-response", "separate-verifier")
    for name in names:
        assert f"{name}: ok (reward 1" in result.stdout
    assert "| answer-md | answer.md | 1 | ok |" in result.stdout
    assert "6 of 6 task(s) scored full marks" in result.stdout


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
                "instruction.md": "Write the answer to answer.md.",
            },
        )
    write(dataset / "partial", {
        "tests/verifier.py": "def verify(workspace):\n    lines = (workspace / 'answer.md').read_text().splitlines()\n"
                             "    return sum(line == 'yes' for line in lines) / len(lines)\n",
        "solution/answer.md": "yes\nno\nyes\nno\n",
        "instruction.md": "Answer four questions in answer.md.",
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


_TOML_VALUES = st.one_of(
    st.integers(-5, 5).map(str),
    st.text(alphabet="ab[]{}#=\"\\ '", max_size=6).map(lambda text: json.dumps(text)),
    st.lists(st.text(alphabet='b[]#"=', max_size=4), max_size=3).map(  # a multi-line string's lines
        lambda parts: "'''" + "\n".join("a" + part for part in parts) + "'''"
    ),
    st.lists(st.integers(0, 3).map(str), max_size=3).map(lambda items: "[\n  " + ",\n  ".join(items) + "\n]"),
)
_TOML_SECTIONS = st.dictionaries(
    st.sampled_from(["environment", "verifier", "agent", "environment.env", "metadata"]),
    st.dictionaries(st.sampled_from(["docker_image", "workdir", "cpus", "timeout_sec", "x"]), _TOML_VALUES, max_size=4),
    max_size=5,
)


@given(sections=_TOML_SECTIONS, comments=st.booleans(), crlf=st.booleans())
@settings(max_examples=200, deadline=None)
def test_task_toml_edits_keep_every_other_line_of_a_document_of_tables(sections, comments, crlf):
    lines: List[str] = []
    for header, keys in sections.items():
        lines.append(f"[{header}]" + ("  # a comment [x]" if comments else ""))
        for key, value in keys.items():
            lines.append(f"{key} = {value}" + (" # = ]" if comments and not value.endswith("'''") else ""))
        lines.append("")
    newline = "\r\n" if crlf else "\n"
    text = newline.join(lines)
    tomllib.loads(text)  # a document
    edits = [
        Edit(("environment", "docker_image")),
        Edit(("environment", "workdir"), "/w"),
        Edit(("verifier", "timeout_sec"), 7.5),
    ]
    edited = edit_toml(text, edits)  # never a TomlEditError for tables written as tables
    parsed = tomllib.loads(edited)
    assert parsed["environment"]["workdir"] == "/w" and "docker_image" not in parsed["environment"]
    assert parsed["verifier"]["timeout_sec"] == 7.5
    touched = {("environment", "docker_image"), ("environment", "workdir"), ("verifier", "timeout_sec")}
    remaining = iter(edited.split(newline))
    table = ""
    for line in text.split(newline):  # every line of an untouched key or header is still there, in its order
        if line.startswith("["):
            table = line.split("]")[0][1:]
        key = line.split(" = ")[0] if " = " in line and not line.startswith((" ", "]")) else None
        if key is not None and (table, key) in touched:
            continue
        if line.strip() and line == line.lstrip() and (key is not None or line.startswith("[")):
            assert any(candidate == line for candidate in remaining), line
