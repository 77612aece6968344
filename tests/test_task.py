"""load_task and load_dataset: good and bad task.toml files, datasets, parameterized rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict

import pytest

from nemo_gym.data.tasks.harbor.task import TaskError, load_dataset, load_task
from nemo_gym.data.tasks.harbor.verification import PYTHON, TEST_SH, choose_verifier


def write(root: Path, files: Dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


VERIFIER = {"tests/verifier.py": "def verify():\n    return 1\n"}

GOOD = [
    ("empty", "", {"timeout_sec": 600.0, "user": None, "env": {}, "mode": None}),
    ("harbor-example", """
schema_version = "1.3"
[task]
name = "org/x"
[agent]
user = "agent"
[verifier]
timeout_sec = 30
user = 1000
env = { KEY = "${KEY}", MODE = "${MODE:-strict}" }
environment_mode = "separate"
[[verifier.collect]]
command = "pg_dump > /tmp/d.sql"
timeout_sec = 5
[environment]
docker_image = "ubuntu:24.04"
workdir = "/app"
cpus = 2
env = { FOO = "bar" }
unknown_key = "ignored, as Harbor ignores it"
""", {"timeout_sec": 30.0, "user": 1000, "env": {"KEY": "${KEY}", "MODE": "${MODE:-strict}"}, "mode": "separate"}),
    ("user-name", '[verifier]\nuser = "grader"\n', {"user": "grader"}),
    ("separate-with-environment", '[verifier]\nenvironment_mode = "separate"\n[verifier.environment]\ndocker_image = "g:1"\n', {"mode": "separate"}),
]  # fmt: skip


@pytest.mark.parametrize("toml, expected", [case[1:] for case in GOOD], ids=[case[0] for case in GOOD])
def test_good_task_toml(tmp_path, toml, expected):
    task = load_task(write(tmp_path / "task", {"task.toml": toml, **VERIFIER}))
    got = {
        "timeout_sec": task.verifier.timeout_sec,
        "user": task.verifier.user,
        "env": task.verifier.env,
        "mode": task.verifier.environment_mode,
    }
    assert {key: got[key] for key in expected} == expected


def test_harbor_example_fields(tmp_path):
    task = load_task(write(tmp_path / "task", {"task.toml": GOOD[1][1], **VERIFIER}))
    assert task.agent_user == "agent"
    assert task.environment.docker_image == "ubuntu:24.04" and task.environment.workdir == "/app"
    assert task.environment.env == {"FOO": "bar"} and task.environment.table["cpus"] == 2
    [hook] = task.verifier.collect
    assert (hook.command, hook.service, hook.timeout_sec, hook.user) == ("pg_dump > /tmp/d.sql", "main", 5.0, None)


BAD = [
    ("syntax-error", "[verifier\n", "not valid TOML"),
    ("duplicate-key", "[verifier]\ntimeout_sec = 1\ntimeout_sec = 2\n", "not valid TOML"),
    ("verifier-not-table", 'verifier = "x"\n', "[verifier] must be a table"),
    ("timeout-string", '[verifier]\ntimeout_sec = "60"\n', "verifier.timeout_sec must be a positive number"),
    ("timeout-zero", "[verifier]\ntimeout_sec = 0\n", "verifier.timeout_sec must be a positive number"),
    ("timeout-bool", "[verifier]\ntimeout_sec = true\n", "verifier.timeout_sec must be a positive number"),
    ("env-not-table", '[verifier]\nenv = "x"\n', "verifier.env must be a table of strings"),
    ("env-int-value", "[verifier]\nenv = { A = 1 }\n", "verifier.env.A must be a string"),
    ("user-float", "[verifier]\nuser = 1.5\n", "verifier.user must be a user name or a TOML integer uid"),
    ("user-bool", "[verifier]\nuser = true\n", "verifier.user must be a user name or a TOML integer uid"),
    ("user-empty", '[verifier]\nuser = ""\n', "verifier.user must not be empty"),
    ("unknown-mode", '[verifier]\nenvironment_mode = "isolated"\n', "environment_mode must be 'shared' or 'separate'"),
    ("shared-beside-environment", '[verifier]\nenvironment_mode = "shared"\n[verifier.environment]\ndocker_image = "x"\n',
     "environment_mode = 'shared' beside a [verifier.environment] table"),
    ("step-shared-beside-environment", '[[steps]]\nname = "a"\n[steps.verifier]\nenvironment_mode = "shared"\n'
     '[steps.verifier.environment]\ndocker_image = "x"\n', "steps[0].verifier.environment_mode = 'shared' beside"),
    ("workdir-relative", '[environment]\nworkdir = "app"\n', "environment.workdir must be an absolute path"),
    ("workdir-int", "[environment]\nworkdir = 3\n", "environment.workdir must be a string"),
    ("image-int", "[environment]\ndocker_image = 3\n", "environment.docker_image must be a string"),
    ("environment-env-int", "[environment]\nenv = { A = 1 }\n", "environment.env.A must be a string"),
    ("collect-not-array", '[verifier]\ncollect = "x"\n', "verifier.collect must be an array of tables"),
    ("collect-no-command", "[[verifier.collect]]\ntimeout_sec = 1\n", "verifier.collect[0].command must be a non-empty string"),
    ("collect-sidecar", '[[verifier.collect]]\ncommand = "x"\nservice = "db"\n', "verifier.collect[0].service = 'db'"),
    ("collect-negative-timeout", '[[verifier.collect]]\ncommand = "x"\ntimeout_sec = -1\n', "timeout_sec must be a number >= 0"),
    ("steps-not-array", 'steps = "x"\n', "steps must be an array of tables"),
    ("step-bad-name", '[[steps]]\nname = "../x"\n', "steps[0].name must be a folder name"),
    ("step-missing-folder", '[[steps]]\nname = "nowhere"\n', "is not a folder"),
    ("agent-user-list", "[agent]\nuser = [1]\n", "agent.user must be a user name"),
]  # fmt: skip


@pytest.mark.parametrize("toml, message", [case[1:] for case in BAD], ids=[case[0] for case in BAD])
def test_bad_task_toml_names_the_file_and_key(tmp_path, toml, message):
    task = write(tmp_path / "task", {"task.toml": toml, **VERIFIER, "steps/a/instruction.md": ""})
    with pytest.raises(TaskError) as raised:
        load_task(task)
    text = str(raised.value)
    assert message in text and str(task / "task.toml") in text
    assert "\n" not in text


def test_bad_task_data(tmp_path):
    task = write(tmp_path / "task", {"task_data.json": "[1, 2]", **VERIFIER})
    with pytest.raises(TaskError, match="task_data must be a JSON object"):
        load_task(task)
    write(task, {"task_data.json": "{oops"})
    with pytest.raises(TaskError, match=r"task_data.json: cannot read task_data"):
        load_task(task)


def test_steps_are_loaded(tmp_path):
    toml = '[verifier]\nuser = "u"\nenv = { A = "1" }\n[[steps]]\nname = "build"\n[steps.verifier]\ntimeout_sec = 30\n[[steps]]\nname = "grade"\n'
    task = load_task(
        write(tmp_path / "task", {"task.toml": toml, "steps/build/x": "", "steps/grade/x": "", **VERIFIER})
    )
    assert [step.name for step in task.steps] == ["build", "grade"]
    assert task.step("build").verifier.timeout_sec == 30.0
    assert task.step("grade").verifier.timeout_sec == 600.0  # Harbor: never the task's timeout
    with pytest.raises(TaskError, match="no step named 'deploy'"):
        task.step("deploy")


def make_dataset(root: Path, *, toml: str = "", root_verifier: bool = True) -> Path:
    files = {
        "a/task.toml": "[verifier]\ntimeout_sec = 10\n",
        "a/tests/verifier.py": "def verify():\n    return 1\n",
        "b/task_data.json": '{"x": 2}',  # no tests/: graded by the root verifier.py
        "c/tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n",
        "c/tests/verifier.py": "def helper():\n    pass\n",
        "not-a-task/readme.md": "",
    }
    if root_verifier:
        files["verifier.py"] = "def verify(task_data):\n    return task_data.get('x', 0)\n"
    if toml:
        files["dataset.toml"] = toml
    return write(root, files)


def test_dataset_with_root_verifier(tmp_path):
    root = make_dataset(
        tmp_path / "ds", toml='timeout_multiplier = 2.5\n[gym.tasks."a".verifier]\ninputs = ["actions.jsonl"]\n'
    )
    dataset = load_dataset(root)
    assert dataset.task_ids == ("a", "b", "c") and dataset.timeout_multiplier == 2.5
    a, b, c = (dataset.task(task_id) for task_id in dataset.task_ids)
    assert a.timeout_sec == 25.0 and a.inputs == ("actions.jsonl",) and b.inputs == ()
    assert load_task(root / "a").timeout_sec == 25.0  # a task folder knows its dataset
    assert choose_verifier(a.path, a.dataset_root).verifier_path == root / "a" / "tests" / "verifier.py"
    assert choose_verifier(b.path, b.dataset_root).verifier_path == root / "verifier.py"
    assert choose_verifier(c.path, c.dataset_root).kind == TEST_SH  # test.sh wins over verifier.py
    assert b.task_data == {"x": 2}


def test_dataset_without_root_verifier(tmp_path):
    root = make_dataset(tmp_path / "ds", root_verifier=False)
    b = load_dataset(root).task("b")
    with pytest.raises(TaskError, match="no tests/ folder and no dataset verifier.py"):
        choose_verifier(b.path, b.dataset_root)


@pytest.mark.parametrize(
    "entry, message",
    [
        ('"sub/a.jsonl"', "is not a plain top-level file name"),
        ('"*.jsonl"', "is not a plain top-level file name"),
        ('"a?.txt"', "is not a plain top-level file name"),
        ('"[ab].txt"', "is not a plain top-level file name"),
        ('".."', "is not a plain top-level file name"),
        ('""', "is not a plain top-level file name"),
        ("3", "is not a plain top-level file name"),
        ('"reward.json"', "'reward.json' is a grader output"),
        ('"reward.txt"', "'reward.txt' is a grader output"),
        ('"test-stdout.txt"', "'test-stdout.txt' is a grader output"),
    ],
)
def test_invalid_inputs_are_refused_naming_the_entry(tmp_path, entry, message):
    root = make_dataset(tmp_path / "ds", toml=f'[gym.tasks."a".verifier]\ninputs = ["ok.jsonl", {entry}]\n')
    with pytest.raises(TaskError) as raised:
        load_dataset(root)
    assert message in str(raised.value) and 'gym.tasks."a".verifier.inputs' in str(raised.value)
    assert str(root / "dataset.toml") in str(raised.value)


@pytest.mark.parametrize(
    "toml, message",
    [
        ("timeout_multiplier = 0\n", "timeout_multiplier must be a positive number"),
        ('timeout_multiplier = "2"\n', "timeout_multiplier must be a positive number"),
        ('[gym.tasks."a".verifier]\ninputs = "a.jsonl"\n', "must be an array of file names"),
        ("[gym]\ntasks = 3\n", "[gym.tasks] must be a table"),
    ],
)
def test_bad_dataset_toml(tmp_path, toml, message):
    with pytest.raises(TaskError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_dataset(make_dataset(tmp_path / "ds", toml=toml))


def test_parameterized_rows(tmp_path):
    rows = [{"id": "paris", "question": "Capital of France?", "answer": "Paris"}, {"answer": "Rome"}, {}]
    root = write(
        tmp_path / "rows",
        {
            "verifier.py": "def verify(task_data, response):\n    return 1\n",
            "rows.jsonl": "\n".join(json.dumps(row) for row in rows[:2]) + "\n\n" + json.dumps(rows[2]) + "\n",
            "dataset.toml": 'timeout_multiplier = 2\n[gym.tasks."paris".verifier]\ninputs = ["a.jsonl"]\n',
        },
    )
    dataset = load_dataset(root)
    assert dataset.task_ids == ("paris", "row-2", "row-4")  # the line number names a row without an id
    paris = load_task(root, row="paris")
    assert paris.task_data == rows[0] and paris.id == "paris" and paris.inputs == ("a.jsonl",)
    assert paris.timeout_sec == 1200.0
    assert load_task(root, row="row-2").task_data == {"answer": "Rome"}
    assert choose_verifier(paris.path, paris.dataset_root).kind == PYTHON
    with pytest.raises(TaskError, match="3 parameterized rows; name one"):
        load_task(root)
    with pytest.raises(TaskError, match="no row with id 'london'"):
        load_task(root, row="london")


@pytest.mark.parametrize(
    "rows, message",
    [
        ('{"id": "a"}\n{"id": "a"}\n', "line 2: the id 'a' is already taken"),
        ("[1]\n", "line 1 must be a JSON object"),
        ("{oops\n", "line 1 is not valid JSON"),
        ('{"id": 3}\n', "line 1: id must be a non-empty string"),
    ],
)
def test_bad_rows(tmp_path, rows, message):
    root = write(tmp_path / "rows", {"verifier.py": "def verify():\n    return 1\n", "rows.jsonl": rows})
    with pytest.raises(TaskError, match=message):
        load_dataset(root)


def test_rows_need_a_root_verifier(tmp_path):
    with pytest.raises(TaskError, match="graded by the dataset's verifier.py, which is missing"):
        load_dataset(write(tmp_path / "rows", {"rows.jsonl": "{}\n"}))
