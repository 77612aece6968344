"""Hostile host-side input: every reader either loads it or refuses it with a TaskError, and the
CLI answers it with one ``gym-harbor: ...`` line and exit status 1, never a traceback.

The inputs: deep nesting (up to a few thousand levels), NUL characters, odd numbers (inf, nan,
1e999, huge integers, -1, 2**32), invalid UTF-8, random bytes and wrong types, in ``task.toml``,
``task_data.json``, ``rows.jsonl``, ``dataset.toml``, secrets files, ``tests/docker-compose.yaml``,
a dataset's ``verifier.py`` (read by the publisher), ``--response`` and ``--task-data``.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator, List, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import EXAMPLES

from nemo_gym.data.tasks.harbor.cli import main
from nemo_gym.data.tasks.harbor.publishing import declares_response
from nemo_gym.data.tasks.harbor.task import (
    Task,
    TaskError,
    load_dataset,
    load_task,
    nested_too_deep,
    read_json_object,
    read_secrets,
)

FUZZ = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
MAX_ID = 2**31 - 1
VERIFIER = b"def verify():\n    return 1\n"


# --- strategies ----------------------------------------------------------------------------------


@st.composite
def deep_json(draw: Any, min_depth: int = 1, max_depth: int = 3000) -> str:
    """Arrays and objects nested ``min_depth``..``max_depth`` levels, as text."""
    depth = draw(st.integers(min_depth, max_depth))
    pattern = draw(st.lists(st.sampled_from(["[", '{"a": ']), min_size=1, max_size=4))
    openers = (pattern * depth)[:depth]
    closers = "".join("]" if opener == "[" else "}" for opener in reversed(openers))
    return "".join(openers) + draw(st.sampled_from(["1", "[]", "{}", '"x"'])) + closers


def deep_toml(min_depth: int = 1, max_depth: int = 3000) -> st.SearchStrategy[str]:
    """A TOML value nested ``min_depth``..``max_depth`` levels (arrays and inline tables)."""
    return deep_json(min_depth, max_depth).map(lambda text: text.replace('{"a": ', "{ a = "))


ODD_NUMBERS = ["NaN", "Infinity", "-Infinity", "1e999", "-1e999"]
ODD_JSON_NUMBERS = [*ODD_NUMBERS, "1" * 5000, "-1", "4294967296", "1e-999", "-0", "2147483648"]
json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text()
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@st.composite
def json_with_odd_number(draw: Any) -> str:
    value = {"v": draw(json_values), "odd": "\0placeholder"}
    return json.dumps(value).replace('"\\u0000placeholder"', draw(st.sampled_from(ODD_NUMBERS)))


@st.composite
def invalid_utf8(draw: Any, text: st.SearchStrategy[str]) -> bytes:
    data = draw(text).encode("utf-8")
    at = draw(st.integers(0, len(data)))
    return (
        data[:at]
        + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80\x80", b"\xf8\x88\x80\x80\x80"]))
        + data[at:]
    )


# JSON files that no reader may take: each is refused, whatever the Python version.
bad_json_objects = st.one_of(
    deep_json(101, 3000).map(lambda text: ('{"a": ' + text + "}").encode()),
    json_with_odd_number().map(str.encode),
    invalid_utf8(json_values.map(lambda value: json.dumps({"v": value}))),
    st.one_of(json_scalars, st.lists(json_values, max_size=3)).map(lambda value: json.dumps(value).encode()),
    st.binary().map(lambda data: b"\xff" + data),
)
# Anything at all: loading it may succeed.
any_json_objects = st.one_of(
    bad_json_objects,
    deep_json(1, 3000).map(lambda text: ('{"a": ' + text + "}").encode()),
    st.sampled_from(ODD_JSON_NUMBERS).map(lambda odd: ('{"a": ' + odd + "}").encode()),
    st.dictionaries(st.text(), json_values, max_size=5).map(lambda value: json.dumps(value).encode()),
    st.dictionaries(st.text(), json_values, max_size=5).map(
        lambda value: json.dumps(value, ensure_ascii=False).encode()
    ),
    st.binary(max_size=200),
)

BAD_USERS = ["-1", "4294967295", "2147483648", "-9223372036854775808", '"a b"', '"-x"', '"a\\u0000"', '"a\\nb"',
             '"x:4294967295"', '"a:b:c"', '""', "1.5", "true", "[0]", '"' + "1" * 5000 + '"', '"root\\t"']  # fmt: skip
BAD_TIMEOUTS = ["inf", "-inf", "nan", "+nan", "1e999", "0", "-1", "9" * 400, "true", '"60"']
BAD_ENVS = ['{ A = "x\\u0000y" }', '{ "A=B" = "x" }', '{ "" = "x" }', '{ "A\\u0000" = "x" }', "{ A = 1 }", '"x"',
            "{ A = { B = \"c\" } }"]  # fmt: skip
ODD_TOML_VALUES = [
    *BAD_USERS, *BAD_TIMEOUTS, *BAD_ENVS, "1" * 5000, "0", "1", "1e-320", "2147483647", '"root"', '"1000:1000"',
    '"www-data"', '{ A = "x" }', "{}", "[]", '"\\u0000"', '"/app"', '"app"', '"shared"', '"separate"', '"isolated"',
]  # fmt: skip
toml_values = st.one_of(
    st.sampled_from(ODD_TOML_VALUES), deep_toml(1, 3000), st.text(max_size=20).map(json.dumps), st.integers().map(str)
)
TABLE_KEYS = {
    "verifier": ["user", "timeout_sec", "env", "environment_mode"],
    "environment": ["env", "workdir", "docker_image"],
    "agent": ["user"],
    "solution": ["env"],
}


@st.composite
def task_tomls(draw: Any) -> bytes:
    """A task.toml of known keys with odd values, sometimes with bytes spliced in."""
    lines: List[str] = []
    for table in draw(st.lists(st.sampled_from(sorted(TABLE_KEYS)), unique=True)):
        lines.append(f"[{table}]")
        for key in draw(st.lists(st.sampled_from(TABLE_KEYS[table]), unique=True, max_size=3)):
            lines.append(f"{key} = {draw(toml_values)}")
    if draw(st.booleans()):
        command = draw(st.sampled_from(['"true"', '"a\\u0000b"', '""', "1"]))
        lines += ["[[verifier.collect]]", f"command = {command}"]
        lines += [
            f"{key} = {draw(toml_values)}"
            for key in draw(st.lists(st.sampled_from(["timeout_sec", "user"]), unique=True))
        ]
    if draw(st.booleans()):
        lines += ["[[steps]]", 'name = "a"', "[steps.verifier]"]
        lines += [
            f"{key} = {draw(toml_values)}"
            for key in draw(st.lists(st.sampled_from(["timeout_sec", "user", "env"]), unique=True))
        ]
    data = ("\n".join(lines) + "\n").encode("utf-8")
    splice = draw(st.sampled_from([b"", b"", b"\0", b"\xff", b"\r", b"\x7f", b"\xef\xbb\xbf"]))
    at = draw(st.integers(0, len(data)))
    return data[:at] + splice + data[at:]


@st.composite
def bad_task_tomls(draw: Any) -> bytes:
    """A task.toml that must be refused."""
    table, key, values = draw(
        st.sampled_from(
            [
                ("verifier", "user", BAD_USERS),
                ("agent", "user", BAD_USERS),
                ("verifier", "timeout_sec", BAD_TIMEOUTS),
                ("verifier", "env", BAD_ENVS),
                ("environment", "env", BAD_ENVS),
                ("solution", "env", BAD_ENVS),
            ]
        )
    )
    value = draw(st.one_of(st.sampled_from(values), deep_toml(101, 3000)))
    data = f"[{table}]\n{key} = {value}\n".encode()
    if draw(st.booleans()):
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.sampled_from([b"\0", b"\xff"])) + data[at:]
    return data


# --- what a loaded value must satisfy --------------------------------------------------------------


def _valid_user(user: Any) -> bool:
    if user is None:
        return True
    if isinstance(user, int) and not isinstance(user, bool):
        return 0 <= user <= MAX_ID
    parts = user.split(":") if isinstance(user, str) else []
    return 1 <= len(parts) <= 2 and all(
        re.fullmatch(r"[A-Za-z0-9._][A-Za-z0-9._-]*", part) and (not part.isdigit() or int(part) <= MAX_ID)
        for part in parts
    )


def _valid_env(env: Any) -> bool:
    return isinstance(env, dict) and all(
        isinstance(key, str) and key and "=" not in key and "\0" not in key and isinstance(value, str)
        and "\0" not in value
        for key, value in env.items()
    )  # fmt: skip


def _finite_positive(number: Any) -> bool:
    return isinstance(number, float) and math.isfinite(number) and number > 0


def _numbers(value: Any) -> Iterator[float]:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, float):
            yield item


def check_task(task: Task) -> None:
    """A task that loaded holds only values a run can use."""
    verifiers = [task.verifier, *(step.verifier for step in task.steps)]
    hooks = [hook for verifier in verifiers for hook in verifier.collect]
    assert all(_valid_user(user) for user in [task.agent_user, *(v.user for v in verifiers), *(h.user for h in hooks)])
    solution = task.config.get("solution", {})
    assert all(_valid_env(env) for env in [task.environment.env, *(v.env for v in verifiers), solution.get("env", {})])
    assert all(
        _finite_positive(v.timeout_sec) and _finite_positive(v.timeout_sec * task.timeout_multiplier) for v in verifiers
    )
    assert all(isinstance(h.timeout_sec, float) and math.isfinite(h.timeout_sec) and h.timeout_sec >= 0 for h in hooks)
    assert all("\0" not in h.command for h in hooks)
    assert _finite_positive(task.timeout_sec)
    assert isinstance(task.task_data, dict) and not nested_too_deep(task.task_data) and not nested_too_deep(task.config)
    assert all(math.isfinite(number) for number in _numbers(task.task_data))
    json.dumps(task.task_data, allow_nan=False)  # staging writes it so: it must not fail


def load_or_refuse(load: Any) -> Optional[Any]:
    """``load()``, or ``None`` when it refuses with a one-line TaskError; anything else fails the test."""
    try:
        return load()
    except TaskError as error:
        assert str(error) and "\n" not in str(error)
        return None


def write(root: Path, files: dict) -> Path:
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


# --- the loaders -------------------------------------------------------------------------------------


@FUZZ
@given(toml=task_tomls())
def test_task_toml(toml):
    with tempfile.TemporaryDirectory() as scratch:
        task = write(Path(scratch) / "task", {"task.toml": toml, "tests/verifier.py": VERIFIER, "steps/a/x": b""})
        loaded = load_or_refuse(lambda: load_task(task))
        if loaded is not None:
            check_task(loaded)


@FUZZ
@given(toml=bad_task_tomls())
def test_bad_task_toml_is_always_refused(toml):
    with tempfile.TemporaryDirectory() as scratch:
        task = write(Path(scratch) / "task", {"task.toml": toml, "tests/verifier.py": VERIFIER})
        with pytest.raises(TaskError, match=re.escape(str(task / "task.toml"))):
            load_task(task)


@FUZZ
@given(data=any_json_objects)
def test_task_data_json(data):
    with tempfile.TemporaryDirectory() as scratch:
        task = write(Path(scratch) / "task", {"task_data.json": data, "tests/verifier.py": VERIFIER})
        loaded = load_or_refuse(lambda: load_task(task))
        if loaded is not None:
            check_task(loaded)
            assert loaded.task_data == read_json_object(task / "task_data.json", "task_data")


@FUZZ
@given(data=bad_json_objects)
def test_bad_task_data_json_is_always_refused(data):
    with tempfile.TemporaryDirectory() as scratch:
        task = write(Path(scratch) / "task", {"task_data.json": data, "tests/verifier.py": VERIFIER})
        with pytest.raises(TaskError, match=re.escape(str(task / "task_data.json"))):
            load_task(task)


@FUZZ
@given(lines=st.lists(st.one_of(any_json_objects, st.just(b'{"id": "x"}'), st.just(b'{"id": ".."}')), max_size=4))
def test_rows_jsonl(lines):
    with tempfile.TemporaryDirectory() as scratch:
        root = write(Path(scratch) / "rows", {"rows.jsonl": b"\n".join(lines), "verifier.py": VERIFIER})
        dataset = load_or_refuse(lambda: load_dataset(root))
        if dataset is not None:
            for row_id in dataset.rows:
                assert row_id not in ("", ".", "..") and "/" not in row_id and "\0" not in row_id
                check_task(dataset.task(row_id))


@FUZZ
@given(
    multiplier=toml_values,
    inputs=st.one_of(
        toml_values, st.lists(st.text(max_size=5).map(json.dumps), max_size=3).map(lambda x: f"[{', '.join(x)}]")
    ),
    task_toml=task_tomls(),
    splice=st.sampled_from([b"", b"\0", b"\xff"]),
)
def test_dataset_toml(multiplier, inputs, task_toml, splice):
    toml = f'timeout_multiplier = {multiplier}\n[gym.tasks."a".verifier]\ninputs = {inputs}\n'.encode() + splice
    with tempfile.TemporaryDirectory() as scratch:
        root = write(
            Path(scratch) / "ds", {"dataset.toml": toml, "a/task.toml": task_toml, "a/tests/verifier.py": VERIFIER}
        )
        dataset = load_or_refuse(lambda: load_dataset(root))
        if dataset is not None:
            assert _finite_positive(dataset.timeout_multiplier)
            task = load_or_refuse(lambda: load_task(root / "a"))
            if task is not None:
                check_task(task)


secret_tomls = st.lists(
    st.tuples(
        st.one_of(st.sampled_from(["K", '"A=B"', '""', '"A\\u0000"']), st.text(max_size=5).map(json.dumps)), toml_values
    ),
    max_size=3,
).map(lambda pairs: "".join(f"{key} = {value}\n" for key, value in pairs).encode())
secret_jsons = st.one_of(
    any_json_objects,
    st.dictionaries(
        st.sampled_from(["K", "A=B", "", "A\0", "\ud800"]), st.sampled_from(["v", "a\0b", "\udc80", "", 1])
    ).map(lambda value: json.dumps(value).encode()),
)


@FUZZ
@given(data=st.one_of(secret_tomls.map(lambda data: ("s.toml", data)), secret_jsons.map(lambda data: ("s.json", data))))
def test_secrets_files(data):
    name, content = data
    with tempfile.TemporaryDirectory() as scratch:
        path = write(Path(scratch), {name: content}) / name
        secrets = load_or_refuse(lambda: read_secrets(path))
        if secrets is not None:
            assert _valid_env(secrets)
            for key, value in secrets.items():  # a process environment can hold them
                key.encode("utf-8", "surrogateescape"), value.encode("utf-8", "surrogateescape")


YAML_ODDITIES = ["!!int " + "1" * 5000, "!!binary xx", "!!timestamp 2001-13-45", "&a [*a]", "? [a]\n: b", "*nowhere",
                 "!!python/object/apply:os.system [true]", "!!float nan", "{main: &m {image: x, build: *m}}", "\0"]  # fmt: skip


@FUZZ
@given(
    compose=st.one_of(
        st.sampled_from(YAML_ODDITIES).map(lambda odd: f"services: {odd}\n".encode()),
        deep_json(1, 3000).map(lambda text: f"services: {text}\n".encode()),
        st.binary(max_size=100),
        invalid_utf8(st.just("services: {}\n")),
        st.text(max_size=60).map(str.encode),
    )
)
def test_compose_file_of_a_separate_verifier(compose):
    toml = b'[verifier]\nenvironment_mode = "separate"\n[verifier.environment]\ndocker_image = "g:1"\n'
    with tempfile.TemporaryDirectory() as scratch:
        task = write(
            Path(scratch) / "task",
            {"task.toml": toml, "tests/verifier.py": VERIFIER, "tests/docker-compose.yaml": compose},
        )
        loaded = load_or_refuse(lambda: load_task(task))
        if loaded is not None:
            check_task(loaded)


@FUZZ
@given(
    source=st.one_of(
        st.binary(max_size=100),
        st.integers(1, 3000).map(lambda depth: b"x = " + b"(" * depth + b")" * depth + b"\n"),
        st.integers(1, 3000).map(lambda depth: b"x = " + b"-" * depth + b"1\n"),
        st.just(b"def verify(response):\0\n    return 1\n"),
        invalid_utf8(st.just("def verify():\n    return 1\n")),
    )
)
def test_a_verifier_read_by_the_publisher(source):
    answer = load_or_refuse(lambda: declares_response(source, "verifier.py"))
    assert answer in (None, True, False)


# --- the CLI, in process ---------------------------------------------------------------------------


def assert_one_line_error(capsys: Any, status: int, *names: str) -> str:
    out, err = capsys.readouterr()
    assert status == 1, err
    assert out == "" and err.startswith("gym-harbor: ") and err.endswith("\n") and err.count("\n") == 1, err
    assert "Traceback" not in err and all(name in err for name in names)
    return err


@FUZZ
@given(toml=bad_task_tomls())
def test_cli_refuses_a_bad_task_toml(capsys, toml):
    capsys.readouterr()
    with tempfile.TemporaryDirectory() as scratch:
        task = write(Path(scratch) / "task", {"task.toml": toml, "tests/verifier.py": VERIFIER})
        assert_one_line_error(capsys, main(["verify", str(task)]), str(task / "task.toml"))


@FUZZ
@given(data=bad_json_objects, option=st.sampled_from(["--response", "--task-data", "--secrets"]))
def test_cli_refuses_a_bad_option_file(capsys, data, option):
    capsys.readouterr()
    with tempfile.TemporaryDirectory() as scratch:
        path = write(Path(scratch), {"file.json": data}) / "file.json"
        status = main(["verify", str(EXAMPLES / "answer-file"), option, str(path)])
        assert_one_line_error(capsys, status, str(path))


@FUZZ
@given(data=invalid_utf8(st.text(max_size=50)))
def test_cli_refuses_a_text_response_that_is_not_utf8(capsys, data):
    capsys.readouterr()
    with tempfile.TemporaryDirectory() as scratch:
        path = write(Path(scratch), {"answer.md": data}) / "answer.md"
        status = main(["verify", str(EXAMPLES / "answer-file"), "--response", str(path)])
        assert "not UTF-8 text" in assert_one_line_error(capsys, status, f"--response {path}")


@FUZZ
@given(data=st.one_of(secret_tomls, bad_task_tomls()).filter(lambda data: load_or_refuse_bytes(data) is None))
def test_cli_refuses_bad_toml_secrets(capsys, data):
    capsys.readouterr()
    with tempfile.TemporaryDirectory() as scratch:
        path = write(Path(scratch), {"s.toml": data}) / "s.toml"
        status = main(["verify", str(EXAMPLES / "answer-file"), "--secrets", str(path)])
        assert_one_line_error(capsys, status, str(path))


def load_or_refuse_bytes(data: bytes) -> Optional[Any]:
    with tempfile.TemporaryDirectory() as scratch:
        path = write(Path(scratch), {"s.toml": data}) / "s.toml"
        return load_or_refuse(lambda: read_secrets(path))


# --- the CLI, as a process -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "files, option",
    [
        ({"task.toml": b"a = " + b"[" * 3000 + b"]" * 3000 + b"\n"}, None),
        ({"task.toml": b"[verifier]\nuser = -1\n", "task_data.json": b"{}"}, None),
        ({"task_data.json": b'{"a": ' * 3000 + b"1" + b"}" * 3000}, None),
        ({}, ("--response", "r.json", b'{"output": ' + b"[" * 5000 + b"]" * 5000 + b"}")),
        ({}, ("--task-data", "d.json", b'{"a": NaN}')),
    ],
)
def test_cli_process_answers_hostile_input_in_one_line(tmp_path, files, option):
    task = write(tmp_path / "task", {"tests/verifier.py": VERIFIER, **files})
    argv = [sys.executable, "-m", "nemo_gym.data.tasks.harbor.cli", "verify", str(task)]
    if option is not None:
        flag, name, content = option
        argv += [flag, str(write(tmp_path, {name: content}) / name)]
    result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    assert (result.returncode, result.stdout) == (1, "")
    assert (
        result.stderr.startswith("gym-harbor: ") and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    )
    assert str(tmp_path) in result.stderr  # it names the file
