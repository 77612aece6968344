"""The runner through the real test.sh: every verify shape it accepts and every one it refuses."""

from __future__ import annotations

import importlib.util
import json
import marshal
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.every_python  # the in-sandbox part: proven on every Python (noxfile)

RESPONSE = {"id": "resp_1", "output": [{"type": "message", "role": "assistant", "content": "42"}]}

# (id, verifier source, task_data, response, expected reward.json content)
ACCEPTED = [
    (
        "workspace-alone",
        """
        import pathlib
        def verify(workspace):
            assert isinstance(workspace, pathlib.Path) and workspace == pathlib.Path.cwd()
            return float((workspace / "answer.txt").read_text() == "42")
        """,
        None,
        None,
        {"reward": 1.0},
    ),
    (
        "task-data-alone",
        "def verify(task_data):\n    return task_data['points']\n",
        {"points": 3},
        None,
        {"reward": 3},
    ),
    (
        "response-alone",
        "def verify(response):\n    return 1 if response['id'] == 'resp_1' else 0\n",
        None,
        RESPONSE,
        {"reward": 1},
    ),
    (
        "state-alone",
        """
        import pathlib
        def verify(state):
            return float(set(state) == {"workspace"} and state["workspace"] == pathlib.Path.cwd())
        """,
        None,
        None,
        {"reward": 1.0},
    ),
    (
        "all-four",
        """
        def verify(workspace, task_data, response, state):
            return float(state["workspace"] == workspace and task_data["a"] == 1 and response["id"] == "resp_1")
        """,
        {"a": 1},
        RESPONSE,
        {"reward": 1.0},
    ),
    (
        "kwargs-with-response",
        "def verify(**kw):\n    return {'reward': 1, 'n': len(kw), 'r': 'response' in kw}\n",
        None,
        RESPONSE,
        {"reward": 1, "n": 4, "r": 1},
    ),
    (
        "kwargs-without-response",
        "def verify(**kw):\n    return {'reward': 1, 'n': len(kw), 'r': 'response' in kw}\n",
        None,
        None,
        {"reward": 1, "n": 3, "r": 0},
    ),
    (
        "kwargs-beside-named",
        "def verify(task_data, **rest):\n    return {'reward': 1, 'n': len(rest), 't': 'task_data' in rest}\n",
        None,
        None,
        {"reward": 1, "n": 2, "t": 0},
    ),
    (
        "response-default-without-response",
        "def verify(task_data, response=None):\n    return 0.5 if response is None else 1.0\n",
        None,
        None,
        {"reward": 0.5},
    ),
    (
        "response-default-with-response",
        "def verify(task_data, response=None):\n    return 0.5 if response is None else 1.0\n",
        None,
        RESPONSE,
        {"reward": 1.0},
    ),
    (
        "unknown-with-default",
        "def verify(task_data, scale=2):\n    return scale\n",
        None,
        None,
        {"reward": 2},
    ),
    (
        "keyword-only",
        "def verify(*, task_data):\n    return task_data['x']\n",
        {"x": 0.25},
        None,
        {"reward": 0.25},
    ),
    ("var-positional", "def verify(*args, task_data):\n    return len(args)\n", None, None, {"reward": 0}),
    (
        "positional-only",
        "def verify(workspace, task_data, /):\n    return task_data['x']\n",
        {"x": 7},
        None,
        {"reward": 7},
    ),
    (
        "positional-only-skipped-default",
        "def verify(scale=3, task_data=None, /):\n    return scale * task_data['x']\n",
        {"x": 2},
        None,
        {"reward": 6},
    ),
    (
        "functools-partial",
        """
        import functools
        def grade(scale, task_data):
            return scale * task_data["x"]
        verify = functools.partial(grade, 10)
        """,
        {"x": 0.5},
        None,
        {"reward": 5.0},
    ),
    (
        "functools-wraps",
        """
        import functools
        def doubled(function):
            @functools.wraps(function)
            def wrapper(*args, **kwargs):
                return 2 * function(*args, **kwargs)
            return wrapper
        @doubled
        def verify(task_data):
            return task_data["x"]
        """,
        {"x": 0.25},
        None,
        {"reward": 0.5},
    ),
    (
        "callable-object",
        """
        class Grader:
            def __call__(self, workspace, task_data):
                return task_data["x"]
        verify = Grader()
        """,
        {"x": 1},
        None,
        {"reward": 1},
    ),
    (
        "bound-method",
        """
        class Grader:
            def grade(self, task_data):
                return task_data["x"]
        verify = Grader().grade
        """,
        {"x": 0.75},
        None,
        {"reward": 0.75},
    ),
    (
        "async-def",
        """
        import asyncio
        async def verify(task_data):
            await asyncio.sleep(0)
            return {"reward": 1, "latency": 0.5}
        """,
        None,
        None,
        {"reward": 1, "latency": 0.5},
    ),
    (
        "sync-returning-coroutine",
        """
        async def _grade(x):
            return x
        def verify(task_data):
            return _grade(task_data["x"])
        """,
        {"x": 0.5},
        None,
        {"reward": 0.5},
    ),
    ("bool-result", "def verify():\n    return True\n", None, None, {"reward": 1}),
    ("one-key-dict", "def verify():\n    return {'score': 0.5}\n", None, None, {"score": 0.5}),
    (
        "reward-and-metrics",
        "def verify():\n    return {'reward': 0, 'tokens': 12, 'ok': False}\n",
        None,
        None,
        {"reward": 0, "tokens": 12, "ok": 0},
    ),
    (
        "fraction-result",
        "import fractions\ndef verify():\n    return fractions.Fraction(1, 4)\n",
        None,
        None,
        {"reward": 0.25},
    ),
    ("huge-int-that-fits-a-float", "def verify():\n    return 10**300\n", None, None, {"reward": 10**300}),
    # Subclasses of the built-in numbers, with and without the numbers module loaded.
    (
        "float-and-int-subclasses",
        "class F(float):\n    pass\nclass I(int):\n    pass\ndef verify():\n    return {'reward': F(0.5), 'n': I(3)}\n",
        None,
        None,
        {"reward": 0.5, "n": 3},
    ),
    (
        "registered-real",
        "import numbers\nclass R:\n    def __float__(self):\n        return 0.75\nnumbers.Real.register(R)\n"
        "def verify():\n    return R()\n",
        None,
        None,
        {"reward": 0.75},
    ),
    (
        "registered-integral",
        "import numbers\nclass N:\n    def __int__(self):\n        return 2\n    def __float__(self):\n        return 2.0\n"
        "numbers.Integral.register(N)\ndef verify():\n    return {'reward': 1, 'n': N()}\n",
        None,
        None,
        {"reward": 1, "n": 2},
    ),
    ("negative", "def verify():\n    return -1.5\n", None, None, {"reward": -1.5}),
    (
        # NumPy's bool as it names itself (numpy.bool in NumPy 2, numpy.bool_ before): (a == b).all()
        "numpy-bool",
        "class bool_:\n    __module__ = 'numpy'\n    def __init__(self, value):\n        self.value = value\n"
        "    def __bool__(self):\n        return self.value\nclass Bool(bool_):\n    pass\nBool.__name__, Bool.__module__ = 'bool', 'numpy'\n"
        "def verify():\n    return {'reward': bool_(True), 'same': Bool(False)}\n",
        None,
        None,
        {"reward": 1, "same": 0},
    ),
]


@pytest.mark.parametrize(
    "verifier, task_data, response, expected",
    [case[1:] for case in ACCEPTED],
    ids=[case[0] for case in ACCEPTED],
)
def test_accepted_shapes_write_exact_reward(run_shim, verifier, task_data, response, expected):
    run = run_shim(verifier, task_data, response, workspace_files={"answer.txt": "42"})
    assert run.returncode == 0, run.output
    assert run.reward == expected
    assert run.files == ["reward.json"]  # atomically renamed: no temporary file left behind
    assert f"reward.json: {json.dumps(expected)}" in run.output


# (id, verifier source, response, text that the output must contain)
REFUSED = [
    ("unknown-parameter", "def verify(task_data, answer):\n    return 1\n", None, "declares `answer`"),
    (
        "required-response-missing",
        "def verify(response):\n    return 1\n",
        None,
        "verify requires `response`",
    ),
    ("exception", "def verify():\n    raise ValueError('boom')\n", None, "verify raised ValueError: boom"),
    ("system-exit", "import sys\ndef verify():\n    sys.exit(0)\n", None, "verify raised SystemExit(0)"),
    (
        "system-exit-on-import",
        "import sys\nsys.exit(3)\n",
        None,
        "importing verifier.py failed: SystemExit(3)",
    ),
    (
        "import-error",
        "import no_such_module_xyz\n",
        None,
        "importing verifier.py failed: ModuleNotFoundError",
    ),
    ("syntax-error", "def verify(:\n", None, "importing verifier.py failed: SyntaxError"),
    ("no-verify", "def grade():\n    return 1\n", None, "verifier.py defines no `verify`"),
    ("not-callable", "verify = 3\n", None, "`verify` in verifier.py is a int, not a callable"),
    (
        "async-exception",
        "async def verify():\n    raise KeyError('k')\n",
        None,
        "verify raised KeyError: 'k'",
    ),
    (
        "none",
        "def verify():\n    return None\n",
        None,
        "verify returned NoneType None; it must return a finite number or a dict of finite numbers (did a path "
        "through verify end without a `return`?)",
    ),
    ("str", "def verify():\n    return '1.0'\n", None, "verify returned str '1.0'"),
    ("nan", "def verify():\n    return float('nan')\n", None, "verify returned float nan"),
    ("inf", "def verify():\n    return float('inf')\n", None, "verify returned float inf"),
    ("too-large-int", "def verify():\n    return 10**400\n", None, "verify returned int"),
    (
        "float-subclass-inf",
        "class F(float):\n    def __sub__(self, other):\n        return 0.0\ndef verify():\n    return F('inf')\n",
        None,
        "verify returned F inf",
    ),
    (
        "float-like-not-registered",
        "class R:\n    def __float__(self):\n        return 0.5\ndef verify():\n    return R()\n",
        None,
        "verify returned R",
    ),
    ("list", "def verify():\n    return [1]\n", None, "verify returned list [1]"),
    (
        "decimal",
        "import decimal\ndef verify():\n    return decimal.Decimal(1)\n",
        None,
        "verify returned Decimal Decimal('1'); it must return a finite number or a dict of finite numbers "
        "(a Decimal is not one: return float() of it)",
    ),
    (
        "numpy-named-not-bool",
        "class int8:\n    __module__ = 'numpy'\ndef verify():\n    return int8()\n",
        None,
        "verify returned int8",
    ),
    ("empty-dict", "def verify():\n    return {}\n", None, "verify returned an empty dict"),
    (
        "several-keys",
        "def verify():\n    return {'a': 1, 'b': 0}\n",
        None,
        "several keys (a, b) but no `reward`",
    ),
    (
        "str-value",
        "def verify():\n    return {'reward': '1'}\n",
        None,
        "verify returned str '1' for 'reward'",
    ),
    (
        "none-value",
        "def verify():\n    return {'reward': None}\n",
        None,
        "verify returned NoneType None for 'reward'; it must return a finite number or a dict of finite numbers\n",
    ),
    ("nested-value", "def verify():\n    return {'reward': {'x': 1}}\n", None, "for 'reward'"),
    ("nan-metric", "def verify():\n    return {'reward': 1, 'm': float('nan')}\n", None, "float nan for 'm'"),
    ("non-string-key", "def verify():\n    return {1: 1.0}\n", None, "non-string key 1"),
    (
        "awaitable-returning-awaitable",
        "async def _a():\n    return 1\nasync def verify():\n    return _a()\n",
        None,
        "verify returned coroutine",
    ),
]


@pytest.mark.parametrize(
    "verifier, response, message", [case[1:] for case in REFUSED], ids=[case[0] for case in REFUSED]
)
def test_refused_shapes_write_no_reward(run_shim, verifier, response, message):
    run = run_shim(verifier, None, response)
    assert run.returncode == 1, run.output
    assert run.reward is None
    assert message in run.output
    assert "no reward written: the run scores 0 (harbor:missing_reward)" in run.output
    assert not run.logs.exists() or run.files == []


def test_unknown_parameter_message_names_the_four_arguments(run_shim):
    run = run_shim("def verify(answer):\n    return 1\n")
    assert "workspace, task_data, response and state" in run.output


def test_exception_shows_the_verifiers_own_traceback(run_shim):
    run = run_shim(
        """
        def helper(x):
            raise ValueError("bad %s" % x)
        def verify(task_data):
            helper(task_data["x"])
        """,
        {"x": 5},
    )
    assert "line 3, in helper" in run.output and "line 5, in verify" in run.output
    assert "_gym_runner.py" not in run.output  # the runner's own frames are noise to the author


def test_async_exception_traceback_hides_asyncio(run_shim):
    run = run_shim("async def verify():\n    raise KeyError('k')\n")
    assert "in verify" in run.output
    assert "asyncio" not in run.output


def test_invalid_task_data_json_is_reported(run_shim, tmp_path: Path):
    run = run_shim("def verify(task_data):\n    return 1\n")
    (tmp_path / "tests" / "task_data.json").write_text("{not json")
    (run.logs / "reward.json").unlink()
    run = run.again()
    assert run.returncode == 1
    assert "cannot read task_data.json" in run.output
    assert run.reward is None


def test_task_data_is_not_read_when_not_declared(run_shim, tmp_path: Path):
    run = run_shim("def verify(workspace):\n    return 1\n")
    (tmp_path / "tests" / "task_data.json").write_text("[1, 2]")  # invalid, but never needed
    assert run.again().reward == {"reward": 1}


def test_verifier_py_keeps_its_own_future_flags(run_shim):
    # verifier.py runs as Python would run it: the runner's `from __future__ import annotations`
    # must not turn its annotations into strings.
    run = run_shim("def verify() -> float:\n    return 1.0 if verify.__annotations__['return'] is float else 0.0\n")
    assert run.reward == {"reward": 1.0}, run.output


def test_task_data_defaults_to_empty_dict_without_file(run_shim):
    run = run_shim("def verify(task_data):\n    return 1.0 if task_data == {} else 0.0\n", drop_task_data=True)
    assert run.reward == {"reward": 1.0}


def test_a_planted_reward_is_removed_when_verify_fails(run_shim, tmp_path: Path):
    logs = tmp_path / "logs" / "verifier"
    logs.mkdir(parents=True)
    (logs / "reward.txt").write_text("1")
    (logs / "reward.json").write_text('{"reward": 1}')
    (logs / "actions.jsonl").write_text("{}\n")  # a sidecar input: kept
    run = run_shim("def verify():\n    raise RuntimeError('no')\n")
    assert run.returncode == 1
    assert run.files == ["actions.jsonl"]


@pytest.mark.parametrize("written", ["reward.txt", "reward.json"])
@pytest.mark.parametrize("ending", ["return None", "raise RuntimeError('no')", "return 'yes'"])
def test_a_reward_file_verify_wrote_itself_is_removed_when_the_run_fails(run_shim, tmp_path: Path, written, ending):
    """A new author's trial: a verify that wrote reward.txt itself (stock Harbor's habit) and returned
    nothing scored 0 under NeMo Gym and 1 under stock Harbor, which reads the file the runner left."""
    logs = tmp_path / "logs" / "verifier"
    logs.mkdir(parents=True)
    source = (
        "import os\ndef verify():\n"
        f"    open(os.path.join(os.environ['VERIFIER_LOGS_DIR'], {written!r}), 'w').write('1')\n"
        f"    {ending}\n"
    )
    run = run_shim(source)
    assert run.returncode == 1
    assert run.files == [], run.output
    assert (
        f"verifier note: removed the {written} that verify (or a program it ran) wrote: only verify's return value is the score"
        in run.output
    )


def test_a_reward_txt_verify_wrote_is_removed_when_the_run_succeeds_too(run_shim, python_bin: Path, tmp_path: Path):
    """Red team 68: a coding task's verify ran the agent's program, which wrote ``reward.txt``, and
    returned a dict with no ``reward`` key: stock Harbor adds a ``reward.txt`` to such a ``reward.json``
    as its ``reward``, so the agent's 1 stood beside its accuracy of 0. A successful run removes it too."""
    logs = tmp_path / "logs" / "verifier"
    logs.mkdir(parents=True)
    source = (
        "import os, subprocess\ndef verify():\n"
        "    subprocess.run(['sh', '-c', 'echo 1 > \"$VERIFIER_LOGS_DIR/reward.txt\"'], check=True)\n"
        "    return {'accuracy': 0.0}\n"
    )
    run = run_shim(source, path=f"{python_bin}:/usr/bin:/bin")
    assert run.returncode == 0 and run.reward == {"accuracy": 0.0}, run.output
    assert sorted(path.name for path in logs.iterdir()) == ["reward.json"], run.output
    assert "verifier note: removed the reward.txt that verify (or a program it ran) wrote" in run.output


def test_a_planted_temporary_file_does_not_block_the_write(run_shim, tmp_path: Path):
    logs = tmp_path / "logs" / "verifier"
    logs.mkdir(parents=True)
    run = run_shim(
        "import os\ndef verify():\n    open(os.environ['VERIFIER_LOGS_DIR'] + f'/.reward.json.{os.getpid()}.tmp', 'w').close()\n    return 1\n"
    )
    assert run.reward == {"reward": 1}


def test_modules_planted_in_the_workspace_change_nothing(run_shim):
    planted = "raise SystemExit('planted module imported')\n"
    verifier = """
    import json
    from nemo_gym.verifiers import exact_match
    from nemo_gym.verifiers.files import read_text
    def verify(workspace, task_data):
        return exact_match(read_text(workspace, "answer.txt"), task_data["answer"])
    """
    workspace = {
        "answer.txt": "42\n",
        "json.py": planted,
        "verifier.py": planted,
        "_gym_runner.py": planted,
        "nemo_gym/__init__.py": planted,
        "nemo_gym/verifiers/__init__.py": planted,
    }
    # Bytecode too, which Python loads without its source (json.pyc) or trusts without checking it
    # (unchecked-hash __pycache__ files), had the workspace been on sys.path.
    tag = sys.implementation.cache_tag
    unchecked = importlib.util.MAGIC_NUMBER + (0b01).to_bytes(4, "little") + bytes(8)
    code = marshal.dumps(compile(planted, "planted", "exec"))
    bytecode = {"json.pyc": unchecked + code, f"__pycache__/json.{tag}.pyc": unchecked + code}
    bytecode[f"__pycache__/_gym_runner.{tag}.pyc"] = unchecked + code
    for pythonpath in (None, ".", ":", "./"):
        env = {} if pythonpath is None else {"PYTHONPATH": pythonpath}
        run = run_shim(verifier, {"answer": "42"}, workspace_files=workspace, env=env)
        for name, data in bytecode.items():
            (run.workspace / name).parent.mkdir(exist_ok=True)
            (run.workspace / name).write_bytes(data)
        run = run.again()
        assert run.reward == {"reward": True}, (pythonpath, run.output)
        assert "planted" not in run.output


def test_task_helper_modules_import_from_tests(run_shim):
    run = run_shim(
        "from helpers import expected\ndef verify():\n    return expected()\n",
        extra_files={"helpers.py": "def expected():\n    return 0.75\n"},
    )
    assert run.reward == {"reward": 0.75}


def test_shim_files_win_over_task_files_of_the_same_name(run_shim):
    run = run_shim(
        "def verify(task_data):\n    return task_data['x']\n",
        {"x": 1},
        extra_files={"task_data.json": '{"x": 0}', "test.sh": "echo hijacked; exit 0"},
    )
    assert run.reward == {"reward": 1}


def test_test_sh_works_when_run_directly_and_relative(run_shim, tmp_path: Path):
    """Harbor runs (/tests/test.sh) directly, honouring the shebang; the runner finds its siblings."""
    import subprocess

    run = run_shim("def verify():\n    return 1\n")
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "VERIFIER_LOGS_DIR": str(run.logs)}
    (run.logs / "reward.json").unlink()
    completed = subprocess.run([str(tmp_path / "tests" / "test.sh")], cwd=run.workspace, env=env)
    assert completed.returncode == 0 and json.loads((run.logs / "reward.json").read_text()) == {"reward": 1}
    (run.logs / "reward.json").unlink()
    completed = subprocess.run(["bash", "test.sh"], cwd=tmp_path / "tests", env=env)
    assert completed.returncode == 0 and (run.logs / "reward.json").exists()
