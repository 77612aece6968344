"""load_task and load_dataset: good and bad task.toml files, datasets, parameterized rows."""

from __future__ import annotations

import asyncio
import json
import re
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
    ("user-uid-zero", "[verifier]\nuser = 0\n", {"user": 0}),
    ("user-uid-max", "[verifier]\nuser = 2147483647\n", {"user": 2147483647}),
    ("user-name-group", '[verifier]\nuser = "www-data:1000"\n', {"user": "www-data:1000"}),
    ("user-dotted", '[verifier]\nuser = "_a.b-c"\n', {"user": "_a.b-c"}),
    ("user-digits", '[verifier]\nuser = "2147483647"\n', {"user": "2147483647"}),
    ("timeout-tiny", "[verifier]\ntimeout_sec = 1e-3\n", {"timeout_sec": 0.001}),
    ("nested-100", "a = " + "[" * 99 + "]" * 99 + "\n", {"user": None}),
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
    ("timeout-string", '[verifier]\ntimeout_sec = "60"\n', "verifier.timeout_sec must be a finite positive number"),
    ("timeout-zero", "[verifier]\ntimeout_sec = 0\n", "verifier.timeout_sec must be a finite positive number"),
    ("timeout-bool", "[verifier]\ntimeout_sec = true\n", "verifier.timeout_sec must be a finite positive number"),
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
    # Red team 57: grading makes /tests and /logs/verifier afresh every run; an agent's working directory
    # there (or above them) lost the agent's work, and `verify --in-place` the task folder itself.
    ("workdir-tests", '[environment]\nworkdir = "/tests"\n', "environment.workdir = '/tests' is under /tests, which belongs"),
    ("workdir-under-tests", '[environment]\nworkdir = "/tests/app"\n', "'/tests/app' is under /tests"),
    ("workdir-logs", '[environment]\nworkdir = "/logs"\n', "'/logs' holds /logs/verifier"),
    ("workdir-verifier-logs", '[environment]\nworkdir = "/logs/verifier/"\n', "is under /logs/verifier"),
    ("workdir-root", '[environment]\nworkdir = "/"\n', "environment.workdir = '/' holds /tests"),
    ("workdir-dotted", '[environment]\nworkdir = "/app/../tests"\n', "is under /tests"),
    ("image-int", "[environment]\ndocker_image = 3\n", "environment.docker_image must be a string"),
    ("environment-env-int", "[environment]\nenv = { A = 1 }\n", "environment.env.A must be a string"),
    ("collect-not-array", '[verifier]\ncollect = "x"\n', "verifier.collect must be an array of tables"),
    ("collect-no-command", "[[verifier.collect]]\ntimeout_sec = 1\n", "verifier.collect[0].command must be a non-empty string"),
    ("collect-sidecar", '[[verifier.collect]]\ncommand = "x"\nservice = "db"\n', "verifier.collect[0] is on the Compose service 'db'"),
    ("collect-negative-timeout", '[[verifier.collect]]\ncommand = "x"\ntimeout_sec = -1\n', "timeout_sec must be a finite number >= 0"),
    ("steps-not-array", 'steps = "x"\n', "steps must be an array of tables"),
    ("step-bad-name", '[[steps]]\nname = "../x"\n', "steps[0].name must be a folder name"),
    ("step-missing-folder", '[[steps]]\nname = "nowhere"\n', "is not a folder"),
    ("agent-user-list", "[agent]\nuser = [1]\n", "agent.user must be a user name"),
    # Odd values: a uid out of range would run as root; an endless timeout is no timeout.
    ("user-minus-one", "[verifier]\nuser = -1\n", "verifier.user = -1 is not a uid (0 to 2147483647)"),
    ("user-2-32-minus-1", "[verifier]\nuser = 4294967295\n", "verifier.user = 4294967295 is not a uid"),
    ("user-2-31", "[verifier]\nuser = 2147483648\n", "verifier.user = 2147483648 is not a uid"),
    ("user-huge", "[verifier]\nuser = 9223372036854775807\n", "verifier.user = 9223372036854775807 is not a uid"),
    ("user-space", '[verifier]\nuser = "a b"\n', "verifier.user = 'a b' is not a user name"),
    ("user-newline", '[verifier]\nuser = "a\\nb"\n', "verifier.user = 'a\\nb' is not a user name"),
    ("user-nul", '[verifier]\nuser = "a\\u0000"\n', "verifier.user = 'a\\x00' is not a user name"),
    ("user-dash", '[verifier]\nuser = "-x"\n', "verifier.user = '-x' is not a user name"),
    ("user-string-uid-out-of-range", '[verifier]\nuser = "4294967295"\n', "is not a user name"),
    ("user-group-out-of-range", '[verifier]\nuser = "app:4294967295"\n', "is not a user name"),
    ("user-two-groups", '[verifier]\nuser = "a:b:c"\n', "is not a user name"),
    ("user-long-digits", '[verifier]\nuser = "' + "1" * 5000 + '"\n', "is not a user name"),
    ("agent-user-minus-one", "[agent]\nuser = -1\n", "agent.user = -1 is not a uid"),
    ("step-user-minus-one", '[[steps]]\nname = "a"\n[steps.verifier]\nuser = -1\n', "steps[0].verifier.user = -1 is not a uid"),
    ("collect-user-minus-one", '[[verifier.collect]]\ncommand = "x"\nuser = -1\n', "verifier.collect[0].user = -1 is not a uid"),
    ("timeout-inf", "[verifier]\ntimeout_sec = inf\n", "verifier.timeout_sec must be a finite positive number, not inf"),
    ("timeout-nan", "[verifier]\ntimeout_sec = nan\n", "verifier.timeout_sec must be a finite positive number, not nan"),
    ("timeout-1e999", "[verifier]\ntimeout_sec = 1e999\n", "verifier.timeout_sec must be a finite positive number, not inf"),
    ("timeout-huge-int", "[verifier]\ntimeout_sec = " + "9" * 400 + "\n", "verifier.timeout_sec must be a finite positive number"),
    ("timeout-negative", "[verifier]\ntimeout_sec = -1\n", "verifier.timeout_sec must be a finite positive number"),
    ("step-timeout-inf", '[[steps]]\nname = "a"\n[steps.verifier]\ntimeout_sec = inf\n', "steps[0].verifier.timeout_sec must be a finite"),
    ("collect-timeout-inf", '[[verifier.collect]]\ncommand = "x"\ntimeout_sec = inf\n', "verifier.collect[0].timeout_sec must be a finite number >= 0"),
    ("collect-timeout-nan", '[[verifier.collect]]\ncommand = "x"\ntimeout_sec = nan\n', "verifier.collect[0].timeout_sec must be a finite number >= 0"),
    ("collect-command-nul", '[[verifier.collect]]\ncommand = "a\\u0000b"\n', "verifier.collect[0].command holds a NUL character"),
    # Env tables a process environment cannot hold.
    ("env-nul-value", '[verifier]\nenv = { A = "x\\u0000y" }\n', "verifier.env.A holds a NUL character"),
    ("env-equals-key", '[verifier]\nenv = { "A=B" = "x" }\n', "verifier.env has the name 'A=B'"),
    ("env-empty-key", '[verifier]\nenv = { "" = "x" }\n', "verifier.env has the name ''"),
    ("env-nul-key", '[verifier]\nenv = { "A\\u0000" = "x" }\n', "verifier.env has the name 'A\\x00'"),
    ("env-newline-key-int", '[verifier]\nenv = { "A\\nB" = 1 }\n', "verifier.env.'A\\nB' must be a string"),
    ("environment-env-nul", '[environment]\nenv = { A = "\\u0000" }\n', "environment.env.A holds a NUL character"),
    ("step-env-nul", '[[steps]]\nname = "a"\n[steps.verifier]\nenv = { A = "\\u0000" }\n', "steps[0].verifier.env.A holds a NUL"),
    ("solution-env-nul", '[solution]\nenv = { A = "\\u0000" }\n', "solution.env.A holds a NUL character"),
    ("solution-env-equals", '[solution]\nenv = { "=" = "x" }\n', "solution.env has the name '='"),
    ("solution-env-int", "[solution]\nenv = { A = 1 }\n", "solution.env.A must be a string"),
    ("workdir-nul", '[environment]\nworkdir = "/a\\u0000"\n', "environment.workdir holds a NUL character"),
    # Hostile files.
    ("deep-array", "a = " + "[" * 3000 + "]" * 3000 + "\n", "not valid TOML (nested more than 100 levels deep)"),
    ("deep-table", "a = " + "{ b = " * 150 + "1" + " }" * 150 + "\n", "not valid TOML (nested more than 100 levels deep)"),
    ("huge-int", "a = " + "1" * 5000 + "\n", "not valid TOML"),
    ("nul-byte", "a = 1\0\n", "not valid TOML"),
]  # fmt: skip


@pytest.mark.parametrize("toml, message", [case[1:] for case in BAD], ids=[case[0] for case in BAD])
def test_bad_task_toml_names_the_file_and_key(tmp_path, toml, message):
    task = write(tmp_path / "task", {"task.toml": toml, **VERIFIER, "steps/a/instruction.md": ""})
    with pytest.raises(TaskError) as raised:
        load_task(task)
    text = str(raised.value)
    assert message in text and str(task / "task.toml") in text
    assert "\n" not in text


SIDECAR_HOOK = '[[verifier.collect]]\ncommand = "pg_dump > /logs/artifacts/db.sql"\nservice = "db"\n'


def test_a_sidecar_hook_loads_for_inspection_and_is_refused_at_run_time(tmp_path):
    from nemo_gym.data.tasks.harbor.sandboxes import LocalSandbox
    from nemo_gym.data.tasks.harbor.verification import plan_verification, run_verification

    task = write(
        tmp_path / "task", {"task.toml": SIDECAR_HOOK, "tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n"}
    )
    loaded = load_task(task, check_runnable=False)
    assert loaded.verifier.collect[0].service == "db"
    workspace = write(tmp_path / "ws", {"a": ""})
    with pytest.raises(TaskError) as raised:
        asyncio.run(run_verification(plan_verification(loaded), LocalSandbox(workspace)))
    assert "Compose service 'db'" in str(raised.value) and "\n" not in str(raised.value)
    assert not (workspace / "db.sql").exists()


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
        ('"a\\nb.jsonl"', "is not a plain top-level file name"),  # grading reads names a line each
        ('"a\\u0000b"', "is not a plain top-level file name"),
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
        ("timeout_multiplier = 0\n", "timeout_multiplier must be a finite positive number"),
        ('timeout_multiplier = "2"\n', "timeout_multiplier must be a finite positive number"),
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
    with pytest.raises(
        TaskError, match=r"3 parameterized rows; name a row \(--row ID, run_verify's row=: paris, row-2, row-4\)$"
    ):
        load_task(root)
    with pytest.raises(TaskError, match=r"no row with id 'london' \(its ids: paris, row-2, row-4\)$"):
        load_task(root, row="london")
    write(root, {"solo/task.toml": "", "solo/tests/verifier.py": "def verify():\n    return 1\n"})
    with pytest.raises(TaskError, match=r"row-4\), or one of its task folders \(solo\)$"):
        load_task(root)  # a dataset that holds task folders beside its rows names them too


def test_a_tasks_tests_folder_given_for_the_task_is_named(tmp_path):
    task = write(tmp_path / "t", {"task.toml": "", "tests/verifier.py": "def verify():\n    return 1\n"})
    with pytest.raises(TaskError, match=f"the tests/ folder of a task; give the task folder, {task}$"):
        load_task(task / "tests")


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


def test_every_bad_row_is_named_in_one_error(tmp_path):
    """An author fixes a rows.jsonl in one pass: each bad line is named, up to ten of them."""
    rows = '{"id": "a"}\n[1]\n{"id": "a"}\n{oops\n{"id": "b"}\n'
    root = write(tmp_path / "rows", {"verifier.py": "def verify():\n    return 1\n", "rows.jsonl": rows})
    with pytest.raises(TaskError) as raised:
        load_dataset(root)
    message = str(raised.value)
    assert message.startswith(f"{root / 'rows.jsonl'}: line 2 must be a JSON object; line 3: the id 'a' is already ")
    assert "; line 4 is not valid JSON (" in message and "line 5" not in message and "more" not in message
    write(root, {"rows.jsonl": "[1]\n" * 12})
    with pytest.raises(TaskError, match=r"; line 10 must be a JSON object; and 2 more bad line\(s\)$"):
        load_dataset(root)


def test_rows_need_a_root_verifier(tmp_path):
    with pytest.raises(TaskError, match="graded by the dataset's verifier.py, which is missing"):
        load_dataset(write(tmp_path / "rows", {"rows.jsonl": "{}\n"}))


DEEP_JSON = "[" * 5000 + "]" * 5000


@pytest.mark.parametrize(
    "data, message",
    [
        ('{"a": ' + DEEP_JSON + "}", "nested more than 100 levels deep"),
        ('{"a": ' + "[" * 100 + "]" * 100 + "}", "nested more than 100 levels deep"),  # 101 levels
        ('{"a": NaN}', "NaN is not a JSON number"),
        ('{"a": -Infinity}', "-Infinity is not a JSON number"),
        ('{"a": 1e999}', "the number 1e999 is out of range"),
        ('{"a": ' + "1" * 5000 + "}", "integer string conversion"),
        # Red team 57: json keeps the last of a key given twice; the author meant one of them.
        ('{"answer": "paris", "answer": "lyon"}', "the key 'answer' is given twice in one object"),
        ('{"a": [{"b": 1, "b": 1}]}', "the key 'b' is given twice in one object"),
    ],
)
def test_hostile_task_data_is_refused_naming_the_file(tmp_path, data, message):
    task = write(tmp_path / "task", {"task_data.json": data, **VERIFIER})
    with pytest.raises(TaskError) as raised:
        load_task(task)
    assert message in str(raised.value) and str(task / "task_data.json") in str(raised.value)


def test_task_data_at_the_nesting_limit_loads(tmp_path):
    data = '{"a": ' + "[" * 99 + "]" * 99 + "}"  # 100 levels
    task = write(tmp_path / "task", {"task_data.json": data, **VERIFIER})
    assert load_task(task).task_data["a"] == json.loads("[" * 99 + "]" * 99)


def test_invalid_utf8_task_data(tmp_path):
    task = write(tmp_path / "task", VERIFIER)
    (task / "task_data.json").write_bytes(b'{"a": "\xff"}')
    with pytest.raises(TaskError, match="task_data.json: cannot read task_data .*codec can't decode"):
        load_task(task)


@pytest.mark.parametrize(
    "rows, message",
    [
        ('{"a": ' + DEEP_JSON + "}\n", "line 1 is not valid JSON (nested more than 100 levels deep)"),
        ('{}\n{"a": NaN}\n', "line 2 is not valid JSON (NaN is not a JSON number)"),
        ('{"id": "."}\n', "line 1: id must be a non-empty string"),
        ('{"id": ".."}\n', "line 1: id must be a non-empty string"),
        ('{"id": "a\\u0000"}\n', "line 1: id must be a non-empty string"),
    ],
)
def test_hostile_rows(tmp_path, rows, message):
    root = write(tmp_path / "rows", {"verifier.py": "def verify():\n    return 1\n", "rows.jsonl": rows})
    with pytest.raises(TaskError) as raised:
        load_dataset(root)
    assert message in str(raised.value) and str(root / "rows.jsonl") in str(raised.value)


def test_a_row_may_hold_unicode_line_separators(tmp_path):
    # JSON strings may hold U+2028 and U+0085 raw; JSON Lines split on "\n" only.
    rows = '{"id": "a", "q": "x\u2028y\x85z"}\n{"id": "b"}\n'
    root = write(tmp_path / "rows", {"verifier.py": "def verify():\n    return 1\n", "rows.jsonl": rows})
    dataset = load_dataset(root)
    assert dataset.task_ids == ("a", "b") and dataset.rows["a"]["q"] == "x\u2028y\x85z"


@pytest.mark.parametrize(
    "toml, message",
    [
        ("timeout_multiplier = inf\n", "timeout_multiplier must be a finite positive number, not inf"),
        ("timeout_multiplier = nan\n", "timeout_multiplier must be a finite positive number, not nan"),
        ("timeout_multiplier = " + "9" * 400 + "\n", "timeout_multiplier must be a finite positive number"),
        ("x = " + "[" * 3000 + "]" * 3000 + "\n", "not valid TOML (nested more than 100 levels deep)"),
    ],
)
def test_hostile_dataset_toml(tmp_path, toml, message):
    root = make_dataset(tmp_path / "ds", toml=toml)
    with pytest.raises(TaskError) as raised:
        load_dataset(root)
    assert message in str(raised.value) and str(root / "dataset.toml") in str(raised.value)


def test_a_timeout_times_the_multiplier_must_stay_finite(tmp_path):
    root = make_dataset(tmp_path / "ds", toml="timeout_multiplier = 1e300\n")
    write(root, {"a/task.toml": "[verifier]\ntimeout_sec = 1e300\n"})
    with pytest.raises(TaskError) as raised:
        load_dataset(root).task("a")
    text = str(raised.value)
    assert str(root / "a" / "task.toml") in text and "verifier.timeout_sec = 1e+300 times the dataset's" in text
    assert load_dataset(root).task("b").timeout_sec == 600.0 * 1e300  # large but finite


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("s.json", '{"K": "a\\u0000b"}', "secrets.K holds a NUL character"),
        ("s.json", '{"A=B": "x"}', "secrets has the name 'A=B'"),
        ("s.json", '{"": "x"}', "secrets has the name ''"),
        ("s.json", '{"K": "\\ud800"}', "secrets.K is not valid text"),
        ("s.json", '{"K": 1}', "secrets.K must be a string, not int"),
        ("s.json", '{"K": ' + DEEP_JSON + "}", "nested more than 100 levels deep"),
        ("s.json", '{"K": NaN}', "NaN is not a JSON number"),
        ("s.toml", 'K = "a\\u0000b"\n', "secrets.K holds a NUL character"),
        ("s.toml", '"A=B" = "x"\n', "secrets has the name 'A=B'"),
        ("s.toml", "K = " + "[" * 3000 + "]" * 3000 + "\n", "nested more than 100 levels deep"),
        ("s.toml", "K = [1]\n", "secrets.K must be a string"),
    ],
)
def test_hostile_secrets(tmp_path, name, text, message):
    from nemo_gym.data.tasks.harbor.task import read_secrets

    (tmp_path / name).write_text(text)
    with pytest.raises(TaskError) as raised:
        read_secrets(tmp_path / name)
    assert message in str(raised.value) and str(tmp_path / name) in str(raised.value)


def test_good_secrets(tmp_path):
    from nemo_gym.data.tasks.harbor.task import read_secrets

    (tmp_path / "s.toml").write_text('K = "v=1"\nL = ""\n')
    assert read_secrets(tmp_path / "s.toml") == {"K": "v=1", "L": ""}


SEPARATE_TOML = '[verifier]\nenvironment_mode = "separate"\n[verifier.environment]\ndocker_image = "g:1"\n'


@pytest.mark.parametrize(
    "compose, message",
    [
        ("services: " + "[" * 3000 + "]" * 3000 + "\n", "not valid YAML (nested more than 100 levels deep)"),
        ("services: &a\n  main: *a\n", "not valid YAML"),  # an alias used before it is complete
        ("services: &a [*a]\n", "not valid YAML (nested more than 100 levels deep)"),  # holds itself
        ("services: " + "1" * 5000 + "\n", "not valid YAML"),
    ],
)
def test_hostile_compose_files(tmp_path, compose, message):
    task = write(tmp_path / "task", {"task.toml": SEPARATE_TOML, **VERIFIER, "tests/docker-compose.yaml": compose})
    with pytest.raises(TaskError) as raised:
        load_task(task)
    assert message in str(raised.value) and "docker-compose.yaml" in str(raised.value)


def test_yaml_aliases_that_share_are_cheap(tmp_path):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    compose = "x-laughs:\n" + "".join(f"  {line}\n" for line in lines) + "services: {}\n"
    task = write(tmp_path / "task", {"task.toml": SEPARATE_TOML, **VERIFIER, "tests/docker-compose.yaml": compose})
    assert load_task(task).verifier.environment_mode == "separate"  # 10**9 leaves, walked once each level


@pytest.mark.parametrize(
    "layout, hint",
    [
        ({"step/a/instruction.md": ""}, "did you mean to name {task}/step steps/?"),
        ({"Steps/a/instruction.md": ""}, "did you mean to name {task}/Steps steps/?"),
        ({"a/instruction.md": ""}, "{task}/a is a folder, but a step's folder goes under steps/"),
        ({"steps/ab/instruction.md": ""}, "did you mean 'ab'?"),
    ],
)
def test_a_missing_step_folder_says_where_it_may_be(tmp_path, layout, hint):
    # A new author's slips: the folder named step/ or Steps/, the step beside task.toml, a typo.
    toml = '[[steps]]\nname = "a"\n' if "ab" not in str(layout) else '[[steps]]\nname = "abc"\n'
    task = write(tmp_path / "task", {"task.toml": toml, **VERIFIER, **layout})
    with pytest.raises(TaskError, match="is not a folder") as raised:
        load_task(task)
    assert str(raised.value).endswith(hint.format(task=task))


def test_a_missing_step_folder_with_nothing_near_has_no_hint(tmp_path):
    task = write(tmp_path / "task", {"task.toml": '[[steps]]\nname = "grade"\n', **VERIFIER, "steps/x/i.md": ""})
    with pytest.raises(TaskError) as raised:
        load_task(task)
    assert str(raised.value).endswith("is not a folder")


def test_a_new_authors_step_and_row_slips_are_each_named(tmp_path):
    """Walkthrough (2026-12-05): each message said less than the author needed."""
    steps = {"steps/a/x": "", "steps/b/x": "", **VERIFIER}
    nameless = write(tmp_path / "nameless", {"task.toml": '[[steps]]\nnmae = "a"\n', **steps})
    with pytest.raises(TaskError, match=r"steps\[0\] has no name, which names its folder under steps/$"):
        load_task(nameless)
    twice = write(tmp_path / "twice", {"task.toml": '[[steps]]\nname = "a"\n[[steps]]\nname = "a"\n', **steps})
    with pytest.raises(TaskError, match="two \\[\\[steps\\]\\] share the name 'a'$"):
        load_task(twice)
    plain = load_task(write(tmp_path / "plain", {"task.toml": '[[step]]\nname = "a"\n', **steps}))
    with pytest.raises(TaskError, match=r"no step named 'a' \(steps: none: task.toml declares no \[\[steps\]\]\)$"):
        plain.step("a")
    rows = write(
        tmp_path / "rows", {"tests/verifier.py": "def verify():\n    return 1\n", "rows.jsonl": '{"id": "a"}\n'}
    )
    with pytest.raises(TaskError, match="a dataset's verifier.py sits beside rows.jsonl\\)$") as raised:
        load_dataset(rows)
    assert f"({rows / 'tests' / 'verifier.py'} is there:" in str(raised.value)
    write(rows, {"verifier.py": "def verify():\n    return 1\n", "rows.jsonl": '{"id": "a"}\n{"id": "b",}\n'})
    with pytest.raises(json.JSONDecodeError) as wrong:  # the interpreter's words: 3.13 has its own
        json.loads('{"id": "b",}')
    expected = f"line 2 is not valid JSON ({wrong.value.msg} at column {wrong.value.colno})"
    with pytest.raises(TaskError, match=re.escape(expected) + "$"):
        load_dataset(rows)


def test_a_folder_of_task_folders_is_named_a_dataset_with_its_tasks(tmp_path):
    """``gym-harbor verify DATASET``: said to be a dataset of tasks, naming them, not a task without tests/."""
    write(
        tmp_path,
        {
            "set/alpha/task.toml": "",
            "set/alpha/tests/verifier.py": "def verify():\n    return 1\n",
            "set/beta/task.toml": "",
            "set/beta/tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n",
            "set/notes/README.md": "not a task\n",
        },
    )
    with pytest.raises(
        TaskError, match=r"set: a dataset of 2 task folder\(s\), not a task; give one of them \(alpha, beta\)"
    ):
        load_task(tmp_path / "set")
    write(tmp_path, {"set/verifier.py": "def verify():\n    return 1\n"})  # a dataset's root verifier
    with pytest.raises(TaskError, match=r"`gym-harbor dataset validate .*set`$"):
        load_task(tmp_path / "set")
    assert load_task(tmp_path / "set" / "alpha").id == "alpha"
    with pytest.raises(TaskError, match=r"has no tests/ folder and no dataset verifier.py beside it"):
        choose_verifier(tmp_path / "set" / "notes")  # a folder holding no task is still said as before
