"""``gym-harbor check``: what can be known without a sandbox, one line per finding with its file and
key; exit 1 for errors, 3 for warnings only; ``--json``; run first by validate and publish."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest
from support import EXAMPLES, write_files

from nemo_gym.data.tasks.harbor.check import ERROR, WARNING, Finding, check, exit_status

GYM = str(Path(sys.executable).parent / "gym-harbor")
CORPUS = Path(__file__).resolve().parent / "corpus"

TASK_TOML = """\
[verifier]
timeout_sec = 60.0

[environment]
workdir = "/workspace"
"""
VERIFIER = """\
from nemo_gym.verifiers import exact_match
from nemo_gym.verifiers.files import read_text


def verify(workspace, task_data):
    return exact_match(read_text(workspace, "answer.txt"), task_data["answer"])
"""


def _task(root: Path, toml: str = TASK_TOML, verifier: str = VERIFIER, **files: str) -> Path:
    return write_files(
        root,
        {
            "task.toml": toml,
            "instruction.md": "Write the answer to answer.txt.\n",
            "task_data.json": '{"answer": "42"}',
            "solution/solve.sh": "#!/bin/bash\necho 42 > answer.txt\n",
            "tests/verifier.py": verifier,
            **files,
        },
    )


def _keys(findings: List[Finding]) -> List[tuple]:
    return [(finding.severity, finding.key) for finding in findings]


def test_a_clean_task_has_no_findings(tmp_path):
    assert check(_task(tmp_path / "t")) == []
    assert exit_status([]) == 0


def test_the_shipped_examples_and_the_corpus_raise_nothing_but_what_cannot_publish():
    findings = check(EXAMPLES)
    assert {finding.key for finding in findings} == {"publish --harbor"}, findings
    assert all("numeric-response" in finding.message for finding in findings)
    assert check(CORPUS) == []


def test_typos_are_warnings_with_a_did_you_mean(tmp_path):
    toml = '[verifer]\ntimeout_sec = 60\n[verifier]\ntimeout_secs = 30\n[environment]\nworkdr = "/app"\n[metadata]\nfree = 1\n'
    findings = check(_task(tmp_path / "t", toml))
    assert _keys(findings) == [
        (WARNING, "verifer"),
        (WARNING, "verifier.timeout_secs"),
        (WARNING, "environment.workdr"),
    ]
    assert findings[0].message.endswith(
        "ignored (as Harbor ignores it), and with it timeout_sec; did you mean verifier?"
    )
    assert "did you mean verifier.timeout_sec?" in findings[1].message
    assert "did you mean environment.workdir?" in findings[2].message
    assert findings[0].path == str(tmp_path / "t" / "task.toml")
    assert exit_status(findings) == 3


def test_typos_inside_arrays_of_tables_and_steps_are_found(tmp_path):
    toml = (
        TASK_TOML
        + '[[verifier.collect]]\ncommand = "true"\ntimeout = 5\n'
        + '[[steps]]\nname = "one"\n[steps.verifier]\ntimeout_sec = 5\nusr = "x"\n'
    )
    findings = check(_task(tmp_path / "t", toml, **{"steps/one/instruction.md": "x\n"}))
    keys = _keys(findings)
    assert (WARNING, "verifier.collect[0].timeout") in keys
    assert (WARNING, "steps[0].verifier.usr") in keys


@pytest.mark.parametrize(
    ("value", "severity", "says"),
    [
        ("${GRADING_MODE:-lenient", ERROR, "never closes it"),
        ("$JUDGE_API_KEY", WARNING, "write ${JUDGE_API_KEY}"),
        ("pre${A}", WARNING, "only a whole value"),
    ],
)
def test_values_that_look_like_templates_but_are_not(tmp_path, value, severity, says):
    toml = TASK_TOML + f'[verifier.env]\nMODE = {json.dumps(value)}\nFINE = "${{B:-x}}"\nPLAIN = "a$"\n'
    findings = check(_task(tmp_path / "t", toml))
    assert _keys(findings) == [(severity, "verifier.env.MODE")], findings
    assert says in findings[0].message


def test_a_verify_the_runner_cannot_call(tmp_path):
    cases = {
        "no-verify": (
            "def grade(workspace):\n    return 1\n",
            "defines no `verify` at the top level: the runner calls",
        ),
        "misnamed": ("def Verify(workspace):\n    return 1\n", "did you mean to name `Verify` verify?"),
        "misspelt": ("async def verfy(workspace):\n    return 1\n", "did you mean to name `verfy` verify?"),
        "unknown-argument": ("def verify(workspace, grader):\n    return 1\n", "declares `grader`"),
        "keyword-only": ("def verify(*, rubric):\n    return 1\n", "declares `rubric`"),
        "syntax": ("def verify(:\n", "is not valid Python"),
    }
    for name, (source, says) in cases.items():
        findings = check(_task(tmp_path / name, verifier=source))
        assert [finding.severity for finding in findings] == [ERROR], (name, findings)
        assert says in findings[0].message, (name, findings)
        assert name in ("misnamed", "misspelt") or "did you mean" not in findings[0].message, findings
    # What the runner can call raises nothing: defaults, **kwargs, response, a partial.
    fine = [
        "def verify(workspace, grader=None):\n    return 1\n",
        "def verify(**kwargs):\n    return 1\n",
        "async def verify(state):\n    return 1\n",
        "import functools\ndef _grade(task_data, scale):\n    return scale\nverify = functools.partial(_grade, scale=1)\n",
    ]
    for index, source in enumerate(fine):
        assert [f for f in check(_task(tmp_path / f"fine{index}", verifier=source)) if f.severity == ERROR] == []


def test_a_defaulted_argument_named_close_to_one_the_runner_gives_is_a_warning(tmp_path):
    """``def verify(workspace, data=None)`` keeps its default in every run: a misspelt task_data
    grades every sample from nothing, silently. A setting of the author's own is left alone."""
    cases = {
        "data": ("def verify(workspace, data=None):\n    return 1\n", "data", "task_data"),
        "kw": ("def verify(*, taskdata={}, respone=None):\n    return 1\n", "taskdata", "task_data"),
        "space": ("def verify(work_space=None):\n    return 1\n", "work_space", "workspace"),
    }
    for name, (source, argument, meant) in cases.items():
        findings = [f for f in check(_task(tmp_path / name, verifier=source)) if f.key.startswith("verify(")]
        assert findings and all(f.severity == WARNING for f in findings), (name, findings)
        assert findings[0].key == f"verify({argument})" and f"did you mean `{meant}`?" in findings[0].message
    assert [f.key for f in check(_task(tmp_path / "two", verifier=cases["kw"][0]))] == [
        "verify(taskdata)",
        "verify(respone)",
    ]
    own = "def verify(workspace, task_data, threshold=0.5, *, strict=True):\n    return 1\n"
    assert check(_task(tmp_path / "own", verifier=own)) == []


def test_imports_the_sandbox_lacks(tmp_path):
    source = "import json\nimport numpy as np\nfrom nemo_gym.data.tasks.harbor import task\nimport helpers\n" + VERIFIER
    findings = check(_task(tmp_path / "t", verifier=source, **{"tests/helpers.py": "X = 1\n"}))
    assert _keys(findings) == [(WARNING, "line 2"), (ERROR, "line 3")], findings
    assert "numpy" in findings[0].message and "image must provide it" in findings[0].message
    assert "only nemo_gym.verifiers is staged there" in findings[1].message


def test_a_name_the_sdk_does_not_have_is_an_error_naming_the_nearest(tmp_path):
    """``from nemo_gym.verifiers import extract_answers`` fails with ImportError in the sandbox only."""
    source = (
        "from nemo_gym.verifiers import exact_match, extract_answers, files, _lazy\n"
        "from nemo_gym.verifiers.files import read_text, MAX_READ_BYTES, read_json\n"
        "import nemo_gym.verifiers.file\n"
        "import nemo_gym.verifiers._numbers\n"
        "from nemo_gym.verifiers import *\n" + VERIFIER
    )
    findings = check(_task(tmp_path / "t", verifier=source))
    assert _keys(findings) == [(ERROR, "line 1"), (ERROR, "line 2"), (ERROR, "line 3")], findings
    assert "imports extract_answers from nemo_gym.verifiers, which has no such name; did you mean extract_answer?" in (
        findings[0].message
    )
    assert "read_json from nemo_gym.verifiers.files" in findings[1].message
    assert findings[1].message.endswith("; it has MAX_READ_BYTES, file_exists, read_text, text_file_equals")
    assert "imports nemo_gym.verifiers.file, which the SDK does not have (did you mean nemo_gym.verifiers.files?)" in (
        findings[2].message
    )
    every = "from nemo_gym.verifiers import " + ", ".join(__import__("nemo_gym.verifiers").verifiers.__all__)
    assert check(_task(tmp_path / "all", verifier=every + "\n" + VERIFIER)) == []


def test_a_sibling_imported_as_tests_x_or_relatively_is_an_error(tmp_path):
    """A new author's two ways to import tests/helpers.py, both failing in the sandbox: the runner
    imports verifier.py as the top-level module ``verifier``, with /tests on sys.path."""
    source = "from tests.helpers import X\nimport tests.helpers\nfrom .helpers import X\nfrom . import helpers\n"
    findings = check(_task(tmp_path / "t", verifier=source + VERIFIER, **{"tests/helpers.py": "X = 1\n"}))
    assert _keys(findings) == [(ERROR, "line 1"), (ERROR, "line 3"), (ERROR, "line 4")], findings
    assert findings[0].message.endswith("tests/ is on sys.path there; import helpers"), findings
    assert "`from .helpers import ...` fails" in findings[1].message and findings[1].message.endswith(
        "; import helpers"
    )
    assert findings[2].message.endswith("; import the module by its name"), findings


def test_a_verify_that_reads_task_data_the_task_lacks_is_a_warning(tmp_path):
    """A forgotten task_data.json reads as {} in the sandbox: verify's KeyError came only at run time."""
    source = "def verify(workspace, task_data):\n    return float(task_data['answer'] == 'x')\n"
    assert check(_task(tmp_path / "given", verifier=source)) == []
    for name, verifier in (("forgot", source), ("unread", "def verify(workspace):\n    return 1\n")):
        (_task(tmp_path / name, verifier=verifier) / "task_data.json").unlink()
    findings = check(tmp_path / "forgot")
    assert _keys(findings) == [(WARNING, "verify(task_data)")], findings
    assert findings[0].message.endswith("task_data.json does not exist: it gets {}"), findings
    assert check(tmp_path / "unread") == []
    # A new author's trial: tests/task_data.json is replaced by the staged one, and the warning says so;
    # a published task (the shim's test.sh beside verifier.py) reads it, and is not warned about.
    write_files(tmp_path / "forgot", {"tests/task_data.json": '{"answer": "x"}'})
    (finding,) = check(tmp_path / "forgot")
    assert finding.message.endswith(
        f"it gets {{}} ({tmp_path / 'forgot' / 'tests' / 'task_data.json'} is replaced by it: move that file beside task.toml)"
    ), finding
    write_files(tmp_path / "forgot", {"tests/test.sh": "python3 /tests/gym_runner.py  # runs verifier.py\n"})
    assert [f for f in check(tmp_path / "forgot") if f.key == "verify(task_data)"] == []


def test_a_dockerfile_beside_a_docker_image_is_a_warning(tmp_path):
    """Harbor runs [environment].docker_image and ignores environment/Dockerfile: files it would COPY never arrive."""
    task = _task(
        tmp_path / "t", '[environment]\ndocker_image = "python:3.12-slim"\n', **{"environment/Dockerfile": "FROM x\n"}
    )
    findings = check(task)
    assert [(f.severity, f.path) for f in findings] == [(WARNING, str(task / "environment" / "Dockerfile"))], findings
    assert "is never built: [environment].docker_image 'python:3.12-slim' is set" in findings[0].message
    (task / "task.toml").write_text("")
    assert check(task) == []


def test_a_task_without_an_oracle_is_a_warning(tmp_path):
    """dataset validate runs each task's oracle; check says which have none before it runs."""
    task = _task(tmp_path / "t")
    assert check(task) == []
    (task / "solution" / "solve.sh").rename(task / "solution" / "solve")
    findings = check(task)
    assert [(f.severity, f.path) for f in findings] == [(WARNING, str(task / "solution"))], findings
    assert (
        findings[0].message
        == "holds neither answer.md nor solve.sh: dataset validate has no oracle to run for the task"
    )
    (task / "solution" / "solve").unlink()
    (task / "solution").rmdir()
    findings = check(task)
    assert [(f.severity, f.path) for f in findings] == [(WARNING, str(task))], findings
    assert findings[0].message.startswith("has no solution/ folder")


def test_newer_syntax_is_a_warning(tmp_path):
    source = "def verify(task_data):\n    match task_data:\n        case _:\n            return 1\n"
    findings = check(_task(tmp_path / "t", verifier=source))
    assert len(findings) == 1 and findings[0].key.startswith("line "), findings
    if sys.version_info >= (3, 10):  # valid here, but not on the Python 3.8 an image may have
        assert findings[0].severity == WARNING and "newer than Python 3.8" in findings[0].message
    else:  # this interpreter cannot read it at all
        assert findings[0].severity == ERROR and "is not valid Python" in findings[0].message


def test_check_never_runs_the_verifier(tmp_path):
    marker = tmp_path / "ran"
    source = f"open({str(marker)!r}, 'w').write('x')\n" + VERIFIER
    check(_task(tmp_path / "t", verifier=source))
    assert not marker.exists()


def test_a_task_that_does_not_load_is_an_error_naming_the_file(tmp_path):
    task = _task(tmp_path / "t", "[verifier]\ntimeout_sec = -1\n")
    findings = check(task)
    assert [finding.severity for finding in findings] == [ERROR]
    assert "timeout_sec" in findings[0].message
    broken = _task(tmp_path / "b", "[verifier\n")
    assert "not valid TOML" in check(broken)[0].message
    # Under the file at fault, named once: a task_data.json error is not task.toml's.
    data = _task(tmp_path / "d", **{"task_data.json": '{"answer": 42,'})
    (finding,) = check(data)
    assert finding.path == str(data / "task_data.json") and finding.message.startswith("cannot read task_data (")
    assert str(data) not in finding.message and str(data) not in check(broken)[0].message


def test_a_task_with_no_verifier_is_an_error_that_says_where_the_verifier_goes(tmp_path):
    # A new author's slip (walkthrough, 2026-12-05): verifier.py beside task.toml. check said only that
    # the task could not publish, and nothing at all for it in a dataset with errors elsewhere, while
    # verify and validate refused it.
    dataset = tmp_path / "ds"
    task = _task(dataset / "beside")
    (task / "tests" / "verifier.py").rename(task / "verifier.py")
    (task / "tests").rmdir()
    _task(dataset / "broken", "[verifier\n")
    findings = [finding for finding in check(dataset) if finding.path == str(task)]
    assert [(finding.severity, finding.message) for finding in findings] == [
        (
            ERROR,
            "has no tests/ folder and no dataset verifier.py beside it (its verifier.py belongs in tests/: move it "
            f"to {task / 'tests' / 'verifier.py'})",
        )
    ]
    assert check(task) == findings
    # The same slips where tests/ holds other files (its data, a helper): the hint still comes.
    kept = _task(tmp_path / "kept", **{"tests/expected.json": "{}"})
    (kept / "tests" / "verifier.py").rename(kept / "verifier.py")
    (finding,) = [finding for finding in check(kept) if finding.severity == ERROR]
    assert finding.path == str(kept / "tests") and finding.message == (
        "holds neither test.sh nor verifier.py (its verifier.py belongs in tests/: move it to "
        f"{kept / 'tests' / 'verifier.py'})"
    )
    (kept / "verifier.py").rename(kept / "tests" / "verify.py")
    (finding,) = [finding for finding in check(kept) if finding.severity == ERROR]
    assert finding.message.endswith(f"(did you mean to name {kept / 'tests' / 'verify.py'} verifier.py?)")
    (kept / "tests" / "verify.py").rename(kept / "tests" / "test_verifier.py")  # an author's pytest is no slip
    (finding,) = [finding for finding in check(kept) if finding.severity == ERROR]
    assert finding.message == "holds neither test.sh nor verifier.py"
    # A step's verifier beside its instruction.md, with the task's shared tests/ there: the step is named.
    shared = _task(tmp_path / "shared", '[[steps]]\nname = "create"\n', **{"steps/create/instruction.md": "x\n"})
    (shared / "tests" / "verifier.py").rename(shared / "steps" / "create" / "verifier.py")
    (shared / "tests" / "helper.py").write_text("X = 1\n")
    (finding,) = [finding for finding in check(shared) if finding.severity == ERROR]
    step_tests = shared / "steps" / "create" / "tests"
    assert finding.message == (
        f"holds neither test.sh nor verifier.py for step 'create' (its verifier.py belongs in tests/: move it to "
        f"{step_tests / 'verifier.py'})"
    ), finding
    # A step with no verifier of its own and none beneath it: the step is named.
    steps = _task(tmp_path / "steps", '[[steps]]\nname = "one"\n', **{"steps/one/instruction.md": "x\n"})
    shutil.rmtree(steps / "tests")
    (finding,) = [finding for finding in check(steps) if finding.severity == ERROR]
    assert finding.path == str(steps / "steps" / "one") and "has no tests/ folder" in finding.message


def test_a_dataset_checks_its_settings_every_task_and_what_cannot_publish(tmp_path):
    dataset = tmp_path / "ds"
    _task(dataset / "good")
    _task(dataset / "typo", "[verifier]\ntimeout_sec = 60\ntimout = 1\n")
    write_files(dataset, {"dataset.toml": "timeout_multiplier = 2\n[gym.tasks.good.verifier]\ninputs = []\nfoo = 1\n"})
    findings = check(dataset)
    assert _keys(findings) == [(WARNING, "gym.tasks.good.verifier.foo"), (WARNING, "verifier.timout")], findings


def test_the_command_prints_one_line_per_finding_and_exits_by_severity(tmp_path):
    clean = subprocess.run([GYM, "check", str(_task(tmp_path / "a"))], capture_output=True, text=True)
    assert clean.returncode == 0 and clean.stdout.endswith("nothing found\n"), clean
    warned = subprocess.run(
        [GYM, "check", str(_task(tmp_path / "b", TASK_TOML + "x = 1\n"))], capture_output=True, text=True
    )
    assert warned.returncode == 3 and warned.stdout.splitlines()[0].endswith(
        "x: warning: unknown key, ignored (as Harbor ignores it)"
    )
    broken = _task(tmp_path / "c", verifier="def verify(grader):\n    return 1\n")
    failed = subprocess.run([GYM, "check", str(broken), "--json"], capture_output=True, text=True)
    assert failed.returncode == 1
    report = json.loads(failed.stdout)
    assert report["findings"][0]["severity"] == "error" and report["findings"][0]["key"] == "verify(grader)"


def test_paths_are_said_as_given(tmp_path):
    """A new author's walkthrough (2026-12-04): ``check ds`` named some files ``ds/...`` and others by
    their absolute path (loading a task resolves its folder). Every path, in the finding's place and
    in its text, is now said as the folder was given."""
    dataset = tmp_path / "ds"
    _task(dataset / "a", '[verifier]\ntimeout_sec = "x"\n')
    (_task(dataset / "b", verifier="def verify(task_data):\n    return 1\n") / "task_data.json").unlink()
    for given, cwd in (("ds", tmp_path), (".", dataset)):
        ran = subprocess.run([GYM, "check", given], capture_output=True, text=True, cwd=cwd)
        lines = ran.stdout.splitlines()
        assert ran.returncode == 1 and str(tmp_path) not in ran.stdout, ran.stdout
        assert lines[0].startswith(f"{given}/a/task.toml: error: verifier.timeout_sec"), lines
        assert f"{given}/b/tests/verifier.py: verify(task_data): warning:" in ran.stdout, lines
        assert f"but {given}/b/task_data.json does not exist" in ran.stdout, lines
    assert all(found.path.startswith(str(dataset)) for found in check(dataset))


def test_validate_prints_the_findings_first_and_publish_refuses_on_errors(tmp_path):
    dataset = tmp_path / "ds"
    shutil.copytree(EXAMPLES / "answer-file", dataset / "answer-file")
    (dataset / "answer-file" / "task.toml").write_text(
        (EXAMPLES / "answer-file" / "task.toml").read_text() + '[verifier.env]\nK = "${K"\n'
    )
    validated = subprocess.run([GYM, "dataset", "validate", str(dataset)], capture_output=True, text=True)
    assert validated.stdout.splitlines()[0].endswith(
        "verifier.env.K: error: '${K' opens ${ and never closes it: it reaches the verifier as literal text"
    )
    published = subprocess.run(
        [GYM, "dataset", "publish", "--harbor", str(dataset), str(tmp_path / "out")], capture_output=True, text=True
    )
    assert published.returncode == 1 and "1 error(s) found by check, nothing written" in published.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("steps", [False, True])
def test_a_verifier_py_a_test_sh_keeps_from_running_is_a_warning(tmp_path, steps):
    # A new author's walkthrough (2026-12-02): tests/test.sh added beside tests/verifier.py silently
    # graded instead of it (run_verify, the author's unit tests, still graded verifier.py).
    verifier = "def verify():\n    return 1.0\n"
    files = {"task.toml": "", "tests/test.sh": "echo 0 > /logs/verifier/reward.txt\n"}
    if steps:
        files["task.toml"] = "[[steps]]\nname = 'a'\n"
        files.update({"steps/a/instruction.md": "", "steps/a/tests/verifier.py": verifier})
        unused = "steps/a/tests/verifier.py"
    else:
        files["tests/verifier.py"] = verifier
        unused = "tests/verifier.py"
    task = write_files(tmp_path / "task", files)
    warnings = [finding for finding in check(task) if "is never run" in finding.message]
    assert [(finding.severity, finding.path) for finding in warnings] == [("warning", str(task / unused))]
    assert str(task / "tests" / "test.sh") in warnings[0].message


def test_a_verifier_py_the_test_sh_runs_itself_is_no_warning(tmp_path):
    files = {"task.toml": "", "tests/verifier.py": "print(1)\n", "tests/test.sh": "python3 /tests/verifier.py\n"}
    task = write_files(tmp_path / "task", files)
    assert not [finding for finding in check(task) if "is never run" in finding.message]


def test_a_steps_verifier_may_import_the_tasks_tests(tmp_path):
    """A step's ``tests/`` lies over the task's in ``/tests``: either's modules import there."""
    toml = '[[steps]]\nname = "one"\n\n[[steps]]\nname = "two"\n'
    task = write_files(
        tmp_path / "task",
        {
            "task.toml": toml,
            "tests/shared_xyz.py": "VALUE = 1\n",
            "steps/one/tests/verifier.py": "import shared_xyz, own_xyz\ndef verify():\n    return shared_xyz.VALUE\n",
            "steps/one/tests/own_xyz.py": "\n",
            "steps/two/tests/verifier.py": "import own_xyz\ndef verify():\n    return 1\n",
        },
    )
    said = [(Path(f.path).parts[-3], f.severity, f.message) for f in check(task) if "imports" in f.message]
    # Step one's module is not two's: an error naming where it is (a new author's trial was told it
    # was no standard library module, as if the image had to provide it).
    assert said == [
        (
            "two",
            ERROR,
            f"imports own_xyz, which is in {task / 'steps' / 'one' / 'tests'} only: a step's tests/ is staged for "
            "that step alone; move it to the task's tests/ to share it",
        )
    ]


def test_rows_without_a_string_solution_are_one_warning_naming_them(tmp_path):
    """A row's oracle is its `solution` field: check says which rows validate cannot run, as it does
    for a task folder with no solution/ (publish would copy them without an oracle)."""
    rows = [{"id": "ok", "solution": "Paris"}, {"id": "none"}, {"id": "number", "solution": 42}]
    rows += [{"id": f"r{index}"} for index in range(5)]
    dataset = write_files(
        tmp_path / "ds",
        {"verifier.py": "def verify():\n    return 1\n", "rows.jsonl": "".join(json.dumps(row) + "\n" for row in rows)},
    )
    (finding,) = [finding for finding in check(dataset) if finding.key == "solution"]
    assert (finding.severity, finding.path) == (WARNING, str(dataset / "rows.jsonl"))
    assert finding.message.startswith("7 row(s) have no `solution` field (the answer, a string), so dataset validate")
    assert finding.message.endswith(": none, number, r0, r1, r2 and 2 more")
    # A new author's trial: a misspelt field read as a missing one; the misspelling is named.
    rows = [{"id": "ok", "solution": "Paris"}, {"id": "typo", "soluton": "Rome"}]
    write_files(dataset, {"rows.jsonl": "".join(json.dumps(row) + "\n" for row in rows)})
    (finding,) = [finding for finding in check(dataset) if finding.key == "solution"]
    assert finding.message.endswith(": typo (row 'typo' has `soluton`: did you mean `solution`?)"), finding
    write_files(dataset, {"solution/solve.sh": "#!/bin/bash\necho Paris > answer.md\n"})  # the dataset's own oracle
    assert [finding for finding in check(dataset) if finding.key == "solution"] == []


def test_a_dataset_setting_for_a_task_it_does_not_hold_is_a_warning(tmp_path):
    """A misspelt task name in dataset.toml kept its inputs for no task, silently."""
    dataset = tmp_path / "ds"
    _task(dataset / "france")
    _task(dataset / "italy")
    write_files(dataset, {"dataset.toml": '[gym.tasks."frnace".verifier]\ninputs = ["a.jsonl"]\n'})
    (finding,) = [finding for finding in check(dataset) if finding.path == str(dataset / "dataset.toml")]
    assert (finding.severity, finding.key) == (WARNING, 'gym.tasks."frnace"')
    assert finding.message == "names no task of the dataset, so its inputs are kept for none; did you mean 'france'?"
    write_files(dataset, {"dataset.toml": '[gym.tasks."zz".verifier]\ninputs = ["a.jsonl"]\n'})
    (finding,) = [finding for finding in check(dataset) if finding.path == str(dataset / "dataset.toml")]
    assert finding.message.endswith("kept for none (its tasks: france, italy)")
    write_files(dataset, {"dataset.toml": '[gym.tasks."italy".verifier]\ninputs = ["a.jsonl"]\n'})
    assert [finding for finding in check(dataset) if finding.path == str(dataset / "dataset.toml")] == []


def test_a_verify_without_a_return_is_a_warning(tmp_path):
    """A verify that computes its score and never returns it scores 0 in every run."""
    forgot = "def verify(workspace):\n    score = 1.0\n    def inner():\n        return score\n"
    (finding,) = [f for f in check(_task(tmp_path / "forgot", verifier=forgot)) if f.key == "verify"]
    assert (finding.severity, finding.message) == (
        WARNING,
        "has no `return` with a value: it returns None, which the runner refuses (every run scores 0)",
    )
    nested = "async def verify(workspace):\n    for x in [1]:\n        if x:\n            return x\n"
    assert [f for f in check(_task(tmp_path / "nested", verifier=nested)) if f.key == "verify"] == []


@pytest.mark.parametrize("name", ["reward.txt", "reward.json"])
def test_a_verifier_that_names_a_reward_file_is_told_its_return_value_is_the_score(tmp_path, name):
    """A new author's trial: stock Harbor's habit, writing /logs/verifier/reward.txt from verify,
    scores nothing here (the runner removes the file, or the server ignores it)."""
    writes = f"from pathlib import Path\ndef verify(workspace):\n    Path('/logs/verifier/{name}').write_text('1')\n    return 1\n"
    (finding,) = [f for f in check(_task(tmp_path / "writes", verifier=writes)) if f.key == name]
    assert (finding.severity, finding.message) == (
        WARNING,
        "names a reward file: verify's return value is the score, and a reward file verify writes is removed "
        "(a failed run) or ignored; return the score instead",
    )
    reads = "def verify(workspace):\n    return 1\n"
    assert [f for f in check(_task(tmp_path / "plain", verifier=reads)) if f.key in ("reward.txt", "reward.json")] == []


def test_a_misnamed_task_toml_and_a_dataset_inside_a_dataset_are_named(tmp_path):
    """A new author's trial: a task.tml's settings, and a rows dataset in a subfolder of a dataset,
    were passed over without a word (validate graded the task on defaults, and never the rows)."""
    dataset = tmp_path / "ds"
    _task(dataset / "typo")
    (dataset / "typo" / "task.toml").rename(dataset / "typo" / "task.tml")
    write_files(dataset / "trains", {"verifier.py": "def verify():\n    return 1\n", "rows.jsonl": '{"id": "a"}\n'})
    findings = check(dataset)
    (misnamed,) = [finding for finding in findings if finding.path == str(dataset / "typo" / "task.tml")]
    assert (misnamed.severity, misnamed.message) == (
        WARNING,
        "is not read (a task's settings are in task.toml): did you mean task.toml?",
    )
    (nested,) = [finding for finding in findings if finding.path == str(dataset / "trains")]
    assert (nested.severity, nested.message) == (
        WARNING,
        "holds rows.jsonl, a dataset of its own, which this dataset does not read: check, validate and publish it "
        "on its own",
    )


def test_a_workdir_away_from_where_the_dockerfile_copies_is_a_warning(tmp_path):
    """A new author's trial: `WORKDIR /app` and `COPY sales.csv /app/` in the Dockerfile, with
    `workdir = "/workspace"` in task.toml: the oracle started in /workspace and never found the file."""
    dockerfile = "FROM python:3.12-slim\nWORKDIR /app\nCOPY sales.csv /app/\n"
    toml = '[environment]\nworkdir = "/workspace"\n'
    files = {"environment/Dockerfile": dockerfile, "environment/sales.csv": "a,b\n"}
    findings = [f for f in check(_task(tmp_path / "away", toml, **files)) if f.key == "WORKDIR"]
    assert [(f.severity, Path(f.path).name) for f in findings] == [(WARNING, "Dockerfile")]
    assert findings[0].message == (
        "copies files into its WORKDIR /app, but [environment].workdir is '/workspace', where the agent, the "
        "oracle and the verifier start (as Harbor runs them): set workdir = '/app', or copy there"
    )
    same = _task(tmp_path / "same", '[environment]\nworkdir = "/app/"\n', **files)
    unset = _task(tmp_path / "unset", "", **files)
    elsewhere = _task(
        tmp_path / "data", toml, **{**files, "environment/Dockerfile": dockerfile.replace("/app/", "/data/")}
    )
    for task in (same, unset, elsewhere):
        assert not [f for f in check(task) if f.key == "WORKDIR"], task


RUNS_AGENT_CODE = (
    "import subprocess, sys\n"
    "def verify(workspace):\n"
    "    ran = subprocess.run([sys.executable, str(workspace / 'solution.py')], capture_output=True, text=True)\n"
    "    return float(ran.stdout.strip() == '42')\n"
)


def test_a_root_verify_that_starts_programs_beside_an_agent_of_its_own_is_a_warning(tmp_path):
    """The agent's program a root verify runs gets root, and with it this grade and later ones (red
    team 43, B2): said where the agent has a user of its own and the verifier has none (or root)."""
    agent = '[agent]\nuser = "agent"\n'
    findings = [f for f in check(_task(tmp_path / "t", agent, RUNS_AGENT_CODE)) if "starts programs" in f.message]
    assert [(f.severity, Path(f.path).name) for f in findings] == [(WARNING, "verifier.py")]
    assert "set [verifier].user to a user of the image other than the agent's" in findings[0].message
    root = agent + '[verifier]\nuser = "0"\n'
    assert [f for f in check(_task(tmp_path / "root", root, RUNS_AGENT_CODE)) if "starts programs" in f.message]
    quiet = {
        "own-user": (agent + '[verifier]\nuser = "grader"\n', RUNS_AGENT_CODE),
        "root-agent": ("", RUNS_AGENT_CODE),  # the agent is root already
        "no-programs": (agent, VERIFIER),
        "sqlite": (
            agent,
            "import sqlite3\ndef verify():\n    sqlite3.connect(':memory:').execute('select 1')\n    return 1\n",
        ),
    }
    for name, (toml, source) in quiet.items():
        assert not [f for f in check(_task(tmp_path / name, toml, source)) if "starts programs" in f.message], name


def test_data_files_the_programs_verify_starts_can_read_are_a_warning(tmp_path):
    """A coding task's verify runs the agent's program as `grader`, who may read /tests: an expected
    output kept in tests/ is the program's to print (`cat /tests/expected.txt` scores 1). Said where the
    agent has a user of its own and verify starts programs as another user, naming the files."""
    toml = '[agent]\nuser = "agent"\n[verifier]\nuser = "grader"\n'
    data = {"tests/expected.txt": "42\n", "tests/cases/in1.txt": "6 7\n", "tests/helpers.py": "X = 1\n"}
    findings = [f for f in check(_task(tmp_path / "t", toml, RUNS_AGENT_CODE, **data)) if "can read" in f.message]
    assert [(f.severity, Path(f.path).name) for f in findings] == [(WARNING, "verifier.py")]
    assert findings[0].message == (
        "verify starts programs, which run as 'grader' and can read every file staged in /tests but verifier.py "
        "(/tests/cases/in1.txt, /tests/expected.txt): a program of the agent's it runs can print an answer it "
        "finds there; keep answers in task_data.json, which only the runner reads"
    )
    many = {f"tests/case{n}.txt": "x" for n in range(7)}
    [finding] = [f for f in check(_task(tmp_path / "many", toml, RUNS_AGENT_CODE, **many)) if "can read" in f.message]
    assert "/tests/case4.txt and 2 more)" in finding.message
    steps = '[agent]\nuser = "agent"\n[verifier]\nuser = "grader"\n[[steps]]\nname = "one"\n[[steps]]\nname = "two"\n'
    stepped = _task(
        tmp_path / "steps",
        steps,
        RUNS_AGENT_CODE,
        **{"steps/one/instruction.md": "x", "steps/two/instruction.md": "y", "steps/two/tests/answer.txt": "42"},
    )
    [finding] = [f for f in check(stepped) if "can read" in f.message]
    assert "(/tests/answer.txt)" in finding.message  # a step's tests/ lies over the task's
    quiet = {
        "modules-only": (toml, RUNS_AGENT_CODE, {"tests/helpers.py": "X = 1\n"}),
        "no-programs": (toml, VERIFIER, data),
        "root-agent": ('[verifier]\nuser = "grader"\n', RUNS_AGENT_CODE, data),
    }
    for name, (text, source, files) in quiet.items():
        assert not [f for f in check(_task(tmp_path / name, text, source, **files)) if "can read" in f.message], name
    # As root, the louder finding says it all.
    root = [f.message for f in check(_task(tmp_path / "root", '[agent]\nuser = "agent"\n', RUNS_AGENT_CODE, **data))]
    assert [m for m in root if "starts programs" in m] == [m for m in root if "runs as root" in m] != []


@pytest.mark.parametrize(
    ("source", "starts"),
    [
        ("import subprocess", True),
        ("from subprocess import run", True),
        ("import pty", True),
        ("import os\nos.system('x')", True),
        ("import os\nos.execvp('x', ['x'])", True),
        ("from os import popen", True),
        ("import asyncio\nasyncio.create_subprocess_exec('x')", True),
        ("import os\nos.fork()", True),
        ("import os\nos.path.exists('x')", False),
        ("import sqlite3\nsqlite3.connect('x').execute('y')", False),
        ("def verify():\n    return 1", False),
    ],
)
def test_starts_programs(source, starts):
    import ast

    from nemo_gym.data.tasks.harbor.check import starts_programs

    assert starts_programs(ast.parse(source)) is starts
