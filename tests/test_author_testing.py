"""``nemo_gym.data.tasks.harbor.testing``: ``run_verify`` grades as the real runner does, without a sandbox.

Every verifier shape below is graded twice: by ``gym-harbor verify --json`` (test.sh and the runner
in the local sandbox) and by ``run_verify`` in this process; reward, metrics, the ``reward.json``
text, the failure and the runner's output must agree.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Optional

import pytest
from support import write_files

from nemo_gym.data.tasks.harbor._resources import shim_dir
from nemo_gym.data.tasks.harbor.check import unusable_verify
from nemo_gym.data.tasks.harbor.task import TaskError
from nemo_gym.data.tasks.harbor.testing import (
    function_call,
    function_call_output,
    message,
    reasoning,
    response,
    run_verify,
)
from nemo_gym.verifiers import final_text

pytestmark = pytest.mark.every_python  # the in-sandbox part: proven on every Python (noxfile)


def _same_lines(real: str, ours: str) -> bool:
    """The same output, line for line: test.sh sends stderr into stdout's file, and how the two
    interleave there depends on the interpreter's buffering, so the order is not compared."""
    return sorted(real.splitlines()) == sorted(ours.splitlines())


# --- The README's example ("Testing a verifier without a sandbox"): a task author's tests ---

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_answer_file(tmp_path):
    (tmp_path / "answer.txt").write_text("paris\n")
    result = run_verify(EXAMPLES / "answer-file", workspace=tmp_path)
    assert result.reward == 1.0, result.log
    (tmp_path / "answer.txt").write_text("Lyon\n")
    assert run_verify(EXAMPLES / "answer-file", workspace=tmp_path).reward == 0.0


def test_numeric_response(tmp_path):
    task = EXAMPLES / "numeric-response"
    final = response(reasoning("12 x 0.35 = 4.2"), message("Twelve pencils cost\n\nAnswer: $4.20"))
    assert run_verify(task, workspace=tmp_path, response=final).reward == 1.0
    assert run_verify(task, workspace=tmp_path, response="Answer: 4.3").reward == 0.0
    # Only the last assistant message counts, never an earlier one.
    assert run_verify(task, workspace=tmp_path, response=response("Answer: 4.2", "Let me check.")).reward == 0.0
    # Stock Harbor passes no response: this verify cannot run there, and says so.
    result = run_verify(task, workspace=tmp_path)
    assert result.reward == 0.0 and result.error.startswith("verify requires `response`")


# --- Parity with the real runner ---


@pytest.mark.parametrize(
    "example, response_file",
    [("answer-file", None), ("async-metrics", None), ("numeric-response", "response.json"), ("numeric-response", None)],
)
def test_the_examples_grade_as_gym_harbor_verify_grades_them(example, response_file, tmp_path):
    task = EXAMPLES / example
    if response_file is None and (task / "response.json").exists():  # verify would read it by default
        task = Path(shutil.copytree(task, tmp_path / example))
        (task / "response.json").unlink()
    command = [sys.executable, "-m", "nemo_gym.data.tasks.harbor", "verify", str(task), "--json"]
    given = None
    if response_file:
        command += ["--response", str(task / response_file)]
        given = json.loads((task / response_file).read_text())
    completed = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    real = json.loads(completed.stdout.splitlines()[-1])
    result = run_verify(task, workspace=task / "workspace", response=given)
    assert (result.reward, result.metrics, result.failure_kind) == (
        real["reward"],
        real["metrics"],
        real["failure_kind"],
    )
    assert _same_lines(real["stdout"], result.stdout + result.stderr + result.log)


TASK_TOML = 'schema_version = "1.3"\n\n[verifier]\ntimeout_sec = 60.0\n'


@dataclass
class Case:
    id: str
    verifier: str
    task_data: Optional[Dict[str, Any]] = None
    response: Optional[Dict[str, Any]] = None
    workspace: Dict[str, str] = field(default_factory=dict)
    tests: Dict[str, str] = field(default_factory=dict)  # other files of tests/, beside verifier.py


CASES = [
    Case(
        "sync",
        "def verify(workspace, task_data):\n"
        "    return float((workspace / 'answer.txt').read_text().strip() == task_data['answer'])\n",
        {"answer": "42"},
        workspace={"answer.txt": "42\n"},
    ),
    Case(
        "sync-wrong-answer",
        "def verify(workspace, task_data):\n"
        "    return float((workspace / 'answer.txt').read_text().strip() == task_data['answer'])\n",
        {"answer": "42"},
        workspace={"answer.txt": "41\n"},
    ),
    Case(
        "async-def-metrics",
        "import asyncio\n"
        "async def verify(task_data):\n"
        "    await asyncio.sleep(0)\n"
        "    return {'reward': 0.5, 'correct': 3, 'total': task_data['total']}\n",
        {"total": 6},
    ),
    Case(
        "declares-response",
        "from nemo_gym.verifiers import final_text, numeric_match\n"
        "def verify(response, task_data):\n"
        "    return numeric_match(final_text(response), task_data['answer'])\n",
        {"answer": "4.2"},
        response(reasoning("12 x 0.35"), message("4.20")),
    ),
    Case(
        "declares-response-none-given",
        "def verify(response, task_data):\n    return 1\n",
    ),
    Case(
        "response-with-default",
        "def verify(response=None):\n    return 0.5 if response is None else 1.0\n",
    ),
    Case(
        "kwargs-with-response",
        "def verify(**kwargs):\n    return {'reward': 1, 'n': len(kwargs), 'response': 'response' in kwargs}\n",
        response=response("42"),
    ),
    Case(
        "kwargs-without-response",
        "def verify(task_data, **rest):\n    return {'reward': 1, 'n': len(rest), 'task_data': 'task_data' in rest}\n",
    ),
    Case(
        "state",
        "import pathlib\n"
        "def verify(state):\n"
        "    return float(set(state) == {'workspace'} and state['workspace'] == pathlib.Path.cwd())\n",
    ),
    Case(
        "positional-only",
        "def verify(scale=3, task_data=None, /):\n    return scale * task_data['x']\n",
        {"x": 2},
    ),
    Case(
        "partial",
        "import functools\n"
        "def grade(scale, task_data):\n"
        "    return scale * task_data['x']\n"
        "verify = functools.partial(grade, 2)\n",
        {"x": 0.25},
    ),
    Case(
        "dataclass-callable-object",
        "import dataclasses\n"
        "@dataclasses.dataclass\n"
        "class Grader:\n"
        "    expected: str\n"
        "    def __call__(self, workspace):\n"
        "        return (workspace / 'answer.txt').read_text() == self.expected\n"
        "verify = Grader('42')\n",
        workspace={"answer.txt": "42"},
    ),
    Case(
        "decorated-and-printing",
        "import functools, sys\n"
        "def logged(function):\n"
        "    @functools.wraps(function)\n"
        "    def wrapper(*args, **kwargs):\n"
        "        print('grading')\n"
        "        print('to stderr', file=sys.stderr)\n"
        "        return function(*args, **kwargs)\n"
        "    return wrapper\n"
        "@logged\n"
        "def verify(task_data):\n"
        "    return task_data['x']\n",
        {"x": 7},
    ),
    Case(
        "sync-returning-a-coroutine",
        "async def _grade(x):\n    return x\ndef verify(task_data):\n    return _grade(task_data['x'])\n",
        {"x": 0.75},
    ),
    Case(
        "sibling-module-and-file",
        "from pathlib import Path\n"
        "from helpers import normalise\n"
        "EXPECTED = Path(__file__).with_name('expected.txt').read_text()\n"
        "def verify(workspace):\n"
        "    return normalise((workspace / 'answer.txt').read_text()) == normalise(EXPECTED)\n",
        workspace={"answer.txt": "  PARIS "},
        tests={"helpers.py": "def normalise(text):\n    return text.strip().lower()\n", "expected.txt": "Paris\n"},
    ),
    Case("bool", "def verify():\n    return True\n"),
    Case("one-key-dict", "def verify():\n    return {'score': 0.5}\n"),
    Case("metrics-with-bool", "def verify():\n    return {'reward': 0, 'tokens': 12, 'ok': False}\n"),
    Case("fraction", "import fractions\ndef verify():\n    return fractions.Fraction(1, 4)\n"),
    Case("huge-int", "def verify():\n    return 10**300\n"),
    # Invalid results: no reward, the runner's message.
    Case("returns-yes", "def verify():\n    return 'yes'\n"),
    Case("returns-nan", "def verify():\n    return float('nan')\n"),
    Case("returns-none", "def verify():\n    return None\n"),
    Case("dict-without-numbers", "def verify():\n    return {'verdict': 'pass'}\n"),
    Case("dict-without-reward", "def verify():\n    return {'a': 1, 'b': 0}\n"),
    Case("empty-dict", "def verify():\n    return {}\n"),
    Case("nan-metric", "def verify():\n    return {'reward': 1, 'm': float('nan')}\n"),
    Case("too-large-int", "def verify():\n    return 10**400\n"),
    # A verify that cannot run, or raises.
    Case("raises", "def verify(task_data):\n    return task_data['answer']\n"),
    Case("raises-in-async", "async def verify():\n    raise ValueError('boom')\n"),
    Case(
        "opens-its-data-relatively",  # the working directory is the workspace: tests/ is not there
        "import json\ndef verify(task_data):\n    return json.load(open('expected.json'))['a'] == 1\n",
        tests={"expected.json": '{"a": 1}'},
    ),
    Case(
        "opens-tests-relatively",  # the path as the author's checkout has it: the note drops the tests/
        "from pathlib import Path\ndef verify():\n    return Path('tests/expected.json').exists()\n"
        "def _():\n    pass\nverify = lambda: open('tests/expected.json').read() and 1\n",
        tests={"expected.json": '{"a": 1}'},
    ),
    Case("system-exit", "import sys\ndef verify():\n    sys.exit(0)\n"),
    Case("unknown-parameter", "def verify(task_data, answer):\n    return 1\n"),
    Case("import-error", "import no_such_module_xyz\ndef verify():\n    return 1\n"),
    Case("syntax-error", "def verify(:\n"),
    Case("no-verify", "def grade():\n    return 1\n"),
]


def _task(root: Path, case: Case) -> Path:
    files: Dict[str, str] = {"task.toml": TASK_TOML, "tests/verifier.py": case.verifier}
    files.update({f"tests/{name}": text for name, text in case.tests.items()})
    files.update({f"workspace/{name}": text for name, text in case.workspace.items()})
    if case.task_data is not None:
        files["task_data.json"] = json.dumps(case.task_data)
    if case.response is not None:
        files["response.json"] = json.dumps(case.response)
    task = write_files(root / case.id, files)
    (task / "workspace").mkdir(exist_ok=True)
    return task


async def _real_run(path: Path) -> Dict[str, Any]:
    """What ``gym-harbor verify --json`` does, in this process (its imports cost more than the run):
    the task's verification through test.sh and the runner, in the local sandbox."""
    from nemo_gym.data.tasks.harbor.sandboxes.for_task import open_task_sandbox
    from nemo_gym.data.tasks.harbor.task import load_task, read_json_object
    from nemo_gym.data.tasks.harbor.verification import plan_verification, run_verification

    task = load_task(path)
    given = path / "response.json"
    try:
        plan = plan_verification(task, response=read_json_object(given, "response") if given.exists() else None)
    except TaskError as error:  # a verify no run could call: the author's mistake, before any sandbox
        return {"refused": str(error)}
    async with open_task_sandbox(task, path / "workspace", kind="local") as sandbox:
        outcome = await run_verification(plan, sandbox)
    real = outcome.as_dict()
    real["reward.json"] = outcome.files["reward.json"].decode() if "reward.json" in outcome.files else None
    return real


@pytest.fixture(scope="module")
def real_runs(tmp_path_factory):
    """Every case's task folder and its real outcome, eight runs at a time."""
    from nemo_gym.data.tasks.harbor.batch import map_bounded

    root = tmp_path_factory.mktemp("tasks")
    tasks = [_task(root, case) for case in CASES]
    outcomes = asyncio.run(map_bounded(tasks, _real_run, jobs=8))
    return {task.name: (task, outcome) for task, outcome in zip(tasks, outcomes)}


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_same_outcome_as_the_real_runner(case, real_runs):
    task, real = real_runs[case.id]
    result = run_verify(task, workspace=task / "workspace", response=case.response)
    if "refused" in real:  # run_verify reports it as a failed verify, the author's test fails on it
        assert real["refused"].endswith(str(unusable_verify(case.verifier.encode())))
        assert not result.ok and result.error and result.reward == 0.0, result
        return
    assert (result.reward, result.metrics, result.failure_kind) == (
        real["reward"],
        real["metrics"],
        real["failure_kind"],
    ), result.log
    if real["reward_components"] is not None:
        assert list(result.rewards) == real["reward_components"]
    if result.error is None:
        assert real["reward.json"] == result.reward_json + "\n"
        assert json.loads(real["reward.json"]) == result.rewards
        # test.sh sends stderr to stdout; here each is kept apart.
        assert _same_lines(real["stdout"], result.stdout + result.stderr + result.log)
    else:
        assert real["reward.json"] is None and result.reward_json is None and result.rewards == {}
        lines = real["stdout"].splitlines()
        assert f"verifier error: {result.error}" in lines
        assert result.log.splitlines()[0] == f"verifier error: {result.error}"
        assert result.log.splitlines()[-1] == lines[-1] == "no reward written: the run scores 0 (harbor:missing_reward)"
        if result.exception is None:
            assert _same_lines(real["stdout"], result.stdout + result.stderr + result.log)
        else:  # a traceback: the same frames (its folder, and its markers with Python's version, differ)
            frames = [line.rsplit("/", 1)[-1] for line in result.log.splitlines() if line.startswith('  File "')]
            assert frames == [line.rsplit("/", 1)[-1] for line in lines if line.startswith('  File "')]
            assert frames or isinstance(result.exception, SystemExit)


@pytest.mark.parametrize(
    "case_id, message",
    [
        ("returns-yes", "verify returned str 'yes'; it must return a finite number or a dict of finite numbers"),
        ("returns-nan", "verify returned float nan; it must return a finite number or a dict of finite numbers"),
        ("dict-without-numbers", "verify returned str 'pass' for 'verdict'; it must return a finite number"),
        ("dict-without-reward", "verify returned several keys (a, b) but no `reward`"),
        ("raises", "verify raised KeyError: 'answer'"),
        ("syntax-error", "importing verifier.py failed: SyntaxError"),
    ],
)
def test_invalid_results_give_the_runners_message(case_id, message, real_runs):
    task, _ = real_runs[case_id]
    result = run_verify(task, workspace=task / "workspace")
    assert result.error.startswith(message) and not result.ok and result.reward == 0.0


def test_a_relative_open_that_misses_says_where_it_looked_and_where_the_tests_are(real_runs):
    task, real = real_runs["opens-its-data-relatively"]
    result = run_verify(task, workspace=task / "workspace")
    note = (
        "note: 'expected.json' was looked for in the working directory, the agent's workspace; "
        "a file of the task's tests/ is Path(__file__).parent / 'expected.json'"
    )
    assert isinstance(result.exception, FileNotFoundError)
    assert note in result.log.splitlines() and note in real["stdout"].splitlines(), real["stdout"]
    # Not for an absolute path, nor for another error.
    assert "note:" not in real_runs["raises"][1]["stdout"]
    # A path written as the checkout has it is told the one that works, without its tests/.
    task, real = real_runs["opens-tests-relatively"]
    note = "a file of the task's tests/ is Path(__file__).parent / 'expected.json'"
    assert any(line.endswith(note) for line in real["stdout"].splitlines()), real["stdout"]
    assert any(line.endswith(note) for line in run_verify(task, workspace=task / "workspace").log.splitlines())


def test_a_datasets_verifier_finds_nothing_beside_it_under_run_verify_as_in_the_sandbox(tmp_path):
    """A dataset's verifier.py is staged alone: a file beside it in the checkout is not in /tests, so a
    verify that reads one fails in every sandbox, and under run_verify too (it passed there)."""
    from nemo_gym.data.tasks.harbor.check import check

    verifier = (
        "import json\nfrom pathlib import Path\n"
        "ALIASES = json.loads((Path(__file__).parent / 'aliases.json').read_text())\n"
        "def verify(workspace, task_data):\n"
        "    return float((workspace / 'answer.md').read_text().strip() in ALIASES[task_data['answer']])\n"
    )
    rows = json.dumps({"id": "italy", "instruction": "Capital?", "answer": "Rome", "solution": "Roma"}) + "\n"
    dataset = write_files(
        tmp_path / "ds", {"verifier.py": verifier, "aliases.json": '{"Rome": ["Rome", "Roma"]}', "rows.jsonl": rows}
    )
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "answer.md").write_text("Roma\n")
    result = run_verify(dataset, workspace=tmp_path / "ws", row="italy")
    assert isinstance(result.exception, FileNotFoundError) and result.reward == 0.0, result.log
    note = "is not beside verifier.py in the sandbox: a task's tests/ is staged there whole, a dataset root's"
    assert note in result.log
    real = subprocess.run(
        [
            str(Path(sys.executable).parent / "gym-harbor"),
            "verify",
            str(dataset),
            "--row",
            "italy",
            "--workspace",
            str(tmp_path / "ws"),
        ],
        capture_output=True,
        text=True,
    )
    assert real.stdout.startswith("reward 0 ") and "/tests/aliases.json' is not beside verifier.py" in real.stdout
    found = [str(finding) for finding in check(dataset)]
    assert any("names aliases.json, which is beside it here and not in the sandbox" in text for text in found), found
    # A module beside it: an error of check's, as the import fails in the sandbox.
    write_files(dataset, {"helper.py": "X = 1\n", "verifier.py": "import helper\ndef verify():\n    return helper.X\n"})
    found = [str(finding) for finding in check(dataset)]
    assert any("error: imports helper, which is beside it here and not in the sandbox" in text for text in found), found
    assert not any("not in the standard library" in text for text in found), found


def test_a_raising_verify_keeps_its_exception_and_traceback(tmp_path):
    write_files(tmp_path / "task", {"tests/verifier.py": "def verify(task_data):\n    return task_data['answer']\n"})
    result = run_verify(tmp_path / "task", workspace=tmp_path)
    assert isinstance(result.exception, KeyError)
    assert str(tmp_path / "task" / "tests" / "verifier.py") in result.log
    assert "return task_data['answer']" in result.log  # the source line, read from the real file
    assert "_gym_runner" not in result.log and "testing.py" not in result.log  # only the verifier's frames


# --- The three ways to name a verifier, and the inputs ---


def test_a_callable_a_verifier_file_and_task_data(tmp_path):
    def verify(workspace, task_data, response=None):
        return {"reward": float((workspace / "a.txt").read_text() == task_data["a"]), "r": response is not None}

    (tmp_path / "a.txt").write_text("x")
    assert run_verify(verify, workspace=tmp_path, task_data={"a": "x"}).rewards == {"reward": 1.0, "r": 0}
    assert run_verify(verify, workspace=tmp_path, task_data={"a": "y"}, response="hi").rewards == {
        "reward": 0.0,
        "r": 1,
    }
    assert run_verify(verify, workspace=tmp_path).error == "verify raised KeyError: 'a'"

    write_files(tmp_path / "dataset", {"verifier.py": "def verify(task_data):\n    return len(task_data)\n"})
    assert run_verify(tmp_path / "dataset" / "verifier.py", workspace=tmp_path).reward == 0.0  # task_data {}
    assert run_verify(str(tmp_path / "dataset" / "verifier.py"), workspace=tmp_path, task_data={"a": 1}).reward == 1.0


def test_task_data_given_wins_over_the_task_folders(tmp_path):
    task = EXAMPLES / "answer-file"
    (tmp_path / "answer.txt").write_text("Lyon")
    assert run_verify(task, workspace=tmp_path).reward == 0.0
    assert run_verify(task, workspace=tmp_path, task_data={"answer": "lyon"}).reward == 1.0


def test_inputs_reach_verify_through_json(tmp_path):
    seen = {}

    def verify(task_data, response):
        seen.update(task_data=task_data, response=response)
        return 1

    data = {"points": (1, 2)}
    built = response("42", id="resp_1")
    run_verify(verify, workspace=tmp_path, task_data=data, response=built)
    assert seen["task_data"] == {"points": [1, 2]} and seen["task_data"] is not data  # a tuple is a JSON array
    assert seen["response"] == built and seen["response"] is not built


def test_the_working_directory_is_the_workspace(tmp_path):
    def verify(workspace, state):
        return float(Path.cwd() == workspace == state["workspace"] == Path(os.path.realpath(tmp_path)))

    assert run_verify(verify, workspace=tmp_path).reward == 1.0


def test_a_workspace_handed_over_in_one_call_pins_nothing_in_the_next(tmp_path):
    # files reads the runner's workspace only in the folder the runner handed over (red team 99); a
    # later call, in a folder made again under the same name, is read where it stands.
    from nemo_gym.verifiers.files import read_text

    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "answer.txt").write_text("42")
    assert run_verify(lambda workspace: float(read_text(workspace, "answer.txt") == "42"), workspace=folder).reward == 1
    folder.rename(tmp_path / "before")  # kept: the new folder cannot take its inode
    folder.mkdir()
    (folder / "answer.txt").write_text("42")
    here = os.path.realpath(folder)
    assert run_verify(lambda: float(read_text(os.getcwd(), "answer.txt") == "42"), workspace=here).reward == 1
    assert run_verify(lambda workspace: float(read_text(workspace, "answer.txt") == "42"), workspace=here).reward == 1


def test_mistakes_in_the_call_raise(tmp_path):
    with pytest.raises(TaskError, match="has no tests/ folder and no dataset verifier.py"):
        run_verify(tmp_path, workspace=tmp_path)
    with pytest.raises(FileNotFoundError):
        run_verify(tmp_path / "verifier.py", workspace=tmp_path)
    (tmp_path / "grader.py").write_text("def verify():\n    return 1\n")
    with pytest.raises(ValueError, match="named verifier.py"):
        run_verify(tmp_path / "grader.py", workspace=tmp_path)
    with pytest.raises(NotADirectoryError):
        run_verify(lambda: 1, workspace=tmp_path / "missing")
    with pytest.raises(ValueError, match="task_data cannot be written as JSON"):
        run_verify(lambda: 1, workspace=tmp_path, task_data={"x": float("nan")})
    with pytest.raises(TypeError, match="not int"):
        run_verify(3, workspace=tmp_path)  # type: ignore[arg-type]


def test_refused_inside_a_running_event_loop(tmp_path):
    async def main():
        run_verify(lambda: 1, workspace=tmp_path)

    with pytest.raises(RuntimeError, match="plain"):
        asyncio.run(main())


def test_the_process_is_left_as_it_was(tmp_path):
    write_files(
        tmp_path / "task",
        {
            "tests/verifier.py": "import helpers_xyz\ndef verify():\n    print('x')\n    return helpers_xyz.VALUE\n",
            "tests/helpers_xyz.py": "VALUE = 1\n",
        },
    )
    path, cwd, stdout = list(sys.path), os.getcwd(), sys.stdout
    modules = {name: sys.modules.get(name) for name in ("verifier", "_gym_runner", "_gym_runner_rare")}
    cache = shim_dir() / "__pycache__"  # an installed wheel has one already (pip compiles at install)
    cached = sorted(cache.iterdir()) if cache.exists() else []
    result = run_verify(tmp_path / "task", workspace=tmp_path)
    assert result.reward == 1.0 and result.stdout == "x\n"
    assert (sys.path, os.getcwd(), sys.stdout) == (path, cwd, stdout)
    assert {name: sys.modules.get(name) for name in modules} == modules
    assert "helpers_xyz" not in sys.modules  # another task's helpers_xyz.py must be its own
    assert (sorted(cache.iterdir()) if cache.exists() else []) == cached  # nothing written beside the shim


def test_the_workspace_is_not_on_sys_path(tmp_path):
    (tmp_path / "planted_xyz.py").write_text("VALUE = 'planted'\n")
    sys.path.insert(0, str(tmp_path))
    try:

        def verify():
            try:
                import planted_xyz  # noqa: F401
            except ImportError:
                return 1
            return 0

        assert run_verify(verify, workspace=tmp_path).reward == 1.0
    finally:
        sys.path.remove(str(tmp_path))


# --- The response builder ---


def test_response_shapes_as_final_text_reads_them():
    assert response("42") == {
        "object": "response",
        "status": "completed",
        "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "42"}]}],
    }
    assert final_text(response("41", "42")) == "42"  # the last message counts
    assert final_text(response(message("4", "2"))) == "42"  # its parts are joined
    assert final_text(response("41", message(refusal="I cannot say"))) == ""  # no fall-back
    assert final_text(response(message("42", refusal="but"))) == "42"
    phased = response(message("42", phase="final_answer"), message("one more thing", phase="commentary"))
    assert final_text(phased) == "42"
    tools = response(
        reasoning("think"), message("let me check"), function_call("bash", {"cmd": "ls"}), function_call_output("a")
    )
    assert final_text(tools) == "let me check"
    assert tools["output"][2] == {
        "type": "function_call",
        "name": "bash",
        "arguments": '{"cmd": "ls"}',
        "call_id": "call_1",
    }
    assert final_text(response(message("hi", role="user"))) == ""
    assert response(status=None, id="resp_1") == {"object": "response", "output": [], "id": "resp_1"}


def test_the_cli_and_the_oracle_build_the_same_responses_as_before(tmp_path):
    from nemo_gym.data.tasks.harbor.cli import _parser, _read_response

    part = {"type": "output_text", "text": "Answer: 4.2\n"}
    (tmp_path / "answer.md").write_text("Answer: 4.2\n")
    assert _read_response(tmp_path / "answer.md", _parser()) == {
        "object": "response",
        "output": [{"type": "message", "role": "assistant", "content": [part]}],
    }
    # gym-harbor dataset validate submits an answer.md as this response.
    assert response("Answer: 4.2\n") == {
        "object": "response",
        "status": "completed",
        "output": [{"type": "message", "role": "assistant", "content": [part]}],
    }


def test_the_readme_shows_this_files_example():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Testing a verifier without a sandbox\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```python\n", 1)[1].split("```", 1)[0]
    source = Path(__file__).read_text(encoding="utf-8")
    body = block.split('EXAMPLES = Path(__file__).resolve().parents[1] / "examples"\n', 1)[1]
    assert body.strip() and body in source  # both tests, verbatim
    assert "from nemo_gym.data.tasks.harbor.testing import message, reasoning, response, run_verify" in block


# --- A task folder is graded by the verifier a run would choose ---

MULTI_STEP_TOML = (
    'schema_version = "1.3"\n\n[[steps]]\nname = "draft"\n\n[[steps]]\nname = "final"\n\n[[steps]]\nname = "bare"\n'
)


def _multi_step_task(root: Path) -> Path:
    """``draft`` has a verifier.py of its own that imports the task's shared helper; ``final`` has
    only a helper that overrides the task's, graded by the task's verifier.py; ``bare`` has neither."""
    return write_files(
        root / "task",
        {
            "task.toml": MULTI_STEP_TOML,
            "task_data.json": '{"answer": "42"}',
            "tests/verifier.py": "import shared_xyz, level_xyz\n"
            "def verify(workspace):\n"
            "    return {'reward': shared_xyz.grade(workspace), 'level': level_xyz.LEVEL}\n",
            "tests/shared_xyz.py": "def grade(workspace):\n    return float((workspace / 'a.txt').read_text() == '42')\n",
            "tests/level_xyz.py": "LEVEL = 0\n",
            "steps/draft/tests/verifier.py": "import shared_xyz\n"
            "def verify(workspace, task_data):\n"
            "    return {'reward': shared_xyz.grade(workspace), 'draft': 1, 'n': len(task_data)}\n",
            "steps/final/tests/level_xyz.py": "LEVEL = 2\n",
            "steps/bare/instruction.md": "nothing to grade here\n",
        },
    )


def test_a_steps_verifier_finds_the_tasks_tests_beneath_its_own(tmp_path):
    task = _multi_step_task(tmp_path)
    (tmp_path / "a.txt").write_text("42")
    draft = run_verify(task, workspace=tmp_path, step="draft")
    assert draft.rewards == {"reward": 1.0, "draft": 1, "n": 1}, draft.log
    final = run_verify(task, workspace=tmp_path, step="final")  # the task's verifier, the step's helper
    assert final.rewards == {"reward": 1.0, "level": 2}, final.log
    assert run_verify(task, workspace=tmp_path, step="bare").rewards == {"reward": 1.0, "level": 0}
    (tmp_path / "a.txt").write_text("41")
    assert run_verify(task, workspace=tmp_path, step="draft").reward == 0.0
    assert not {"shared_xyz", "level_xyz"} & set(sys.modules)  # forgotten, as one folder's are


def test_a_multi_step_task_needs_its_step_and_a_step_needs_a_task_folder(tmp_path):
    task = _multi_step_task(tmp_path)
    with pytest.raises(TaskError, match="multi-step task; name the step .*draft, final, bare"):
        run_verify(task, workspace=tmp_path)
    with pytest.raises(TaskError, match="no step named 'later'"):
        run_verify(task, workspace=tmp_path, step="later")
    with pytest.raises(ValueError, match="step= and row= name .* of a task folder"):
        run_verify(task / "tests" / "verifier.py", workspace=tmp_path, step="draft")
    with pytest.raises(ValueError, match="step= and row= name .* of a task folder"):
        run_verify(lambda: 1, workspace=tmp_path, row="r1")
    with pytest.raises(TaskError, match="no step named 'draft'"):
        run_verify(EXAMPLES / "answer-file", workspace=tmp_path, step="draft")


def test_a_dataset_verifier_grades_its_tasks_and_rows_as_in_the_sandbox(tmp_path):
    dataset = write_files(
        tmp_path / "dataset",
        {
            "verifier.py": "def verify(workspace, task_data):\n"
            "    try:\n"
            "        import beside_xyz  # noqa: F401  (not staged: /tests holds the shim and verifier.py)\n"
            "    except ImportError:\n"
            "        return float((workspace / 'a.txt').read_text() == task_data['answer'])\n"
            "    return 0.5\n",
            "beside_xyz.py": "\n",
            "t1/task_data.json": '{"answer": "paris"}',
            "t1/instruction.md": "The capital of France, in a.txt\n",
        },
    )
    (tmp_path / "a.txt").write_text("paris")
    assert run_verify(dataset / "t1", workspace=tmp_path).reward == 1.0
    rows = write_files(
        tmp_path / "rows",
        {
            "verifier.py": (dataset / "verifier.py").read_text(),
            "rows.jsonl": '{"id": "q1", "answer": "paris"}\n{"id": "q2", "answer": "rome"}\n',
        },
    )
    assert run_verify(rows, workspace=tmp_path, row="q1").reward == 1.0
    assert run_verify(rows, workspace=tmp_path, row="q2").reward == 0.0
    assert run_verify(rows, workspace=tmp_path, row="q2", task_data={"answer": "paris"}).reward == 1.0
    with pytest.raises(TaskError, match="no row with id 'q3'"):
        run_verify(rows, workspace=tmp_path, row="q3")
    with pytest.raises(TaskError, match="has no rows.jsonl, so there is no row 'q1'"):
        run_verify(dataset / "t1", workspace=tmp_path, row="q1")
    with pytest.raises(FileNotFoundError, match="t2: no such task folder or verifier.py$"):
        run_verify(dataset / "t2", workspace=tmp_path)  # a typo, named as one


def test_a_task_graded_by_test_sh_is_refused_by_name(tmp_path):
    task = write_files(
        tmp_path / "task",
        {"tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n", "tests/verifier.py": "def verify():\n    return 1\n"},
    )
    with pytest.raises(ValueError, match=r"tests/test\.sh.* runs instead of verifier\.py"):
        run_verify(task, workspace=tmp_path)


@pytest.mark.parametrize("step", ["draft", "final"])
def test_a_step_grades_as_gym_harbor_verify_step_grades_it(tmp_path, step):
    task = _multi_step_task(tmp_path)
    workspace = write_files(tmp_path / "ws", {"a.txt": "42"})
    command = [sys.executable, "-m", "nemo_gym.data.tasks.harbor", "verify", str(task), "--step", step]
    command += ["--workspace", str(workspace), "--json"]
    completed = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    real = json.loads(completed.stdout.splitlines()[-1])
    result = run_verify(task, workspace=workspace, step=step)
    assert real["reward"] == 1.0, completed.stdout + completed.stderr
    assert (result.reward, result.metrics) == (real["reward"], real["metrics"])


def _task_reading_beside_itself(root: Path) -> Path:
    """Verifiers that read data files through ``Path(__file__)``: ``key`` has a verifier.py of its
    own that reads the task's answer key; ``strict`` has only a threshold file that overrides the
    task's, read by the task's verifier.py. In ``/tests`` both lie in one folder."""
    return write_files(
        root / "task",
        {
            "task.toml": 'schema_version = "1.3"\n\n[[steps]]\nname = "key"\n\n[[steps]]\nname = "strict"\n',
            "tests/verifier.py": "from pathlib import Path\n"
            "def verify(workspace):\n"
            "    need = int((Path(__file__).parent / 'threshold.txt').read_text())\n"
            "    return float(len((workspace / 'a.txt').read_text()) >= need)\n",
            "tests/threshold.txt": "2\n",
            "tests/data/key.txt": "42",
            "steps/key/tests/verifier.py": "from pathlib import Path\n"
            "def verify(workspace):\n"
            "    key = Path(__file__).resolve().parent / 'data' / 'key.txt'\n"
            "    return float((workspace / 'a.txt').read_text() == key.read_text())\n",
            "steps/strict/tests/threshold.txt": "3\n",
        },
    )


@pytest.mark.parametrize(("step", "reward"), [("key", 1.0), ("strict", 0.0)])
def test_a_steps_verifier_reads_the_merged_tests_folder_as_in_the_sandbox(tmp_path, monkeypatch, step, reward):
    task = _task_reading_beside_itself(tmp_path)
    workspace = write_files(tmp_path / "ws", {"a.txt": "42"})
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    result = run_verify(task, workspace=workspace, step=step)
    assert (result.reward, result.error) == (reward, None), result.log
    assert not any(scratch.iterdir())  # the merged copy is gone
    command = [sys.executable, "-m", "nemo_gym.data.tasks.harbor", "verify", str(task), "--step", step]
    command += ["--workspace", str(workspace), "--json"]
    completed = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    real = json.loads(completed.stdout.splitlines()[-1])
    assert (real["reward"], real["failure_kind"]) == (reward, None), completed.stdout + completed.stderr
