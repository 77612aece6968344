"""Variables bash, and the tools grading runs, take from the environment (red team rounds 24 and 25).

A task's [verifier.env] and the sandbox's own environment reach grading's root shell and test.sh;
a task may point variables into the workspace. Each test sets one variable there and asserts that
nothing of the agent's runs as root and the honest score stands, or (the sweep) that an honest run
is scored right or masked, never scored wrongly. Holes these found: BASH_ARGV0 (bash sets $BASH from
it, which grading ran as root), BASH_SOURCE (test.sh found its runner by it), a PATH or PWD naming the
workspace another way (test.sh compared text), BASHOPTS (grading's options reached test.sh), LANGUAGE
(a translated stat hid every interpreter reached through a link) and TMOUT (a read of a here-string
timed out): each now fails without its fix.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Dict

import pytest
from test_attacks import needs_root, task, verify


def _table(env: Dict[str, str]) -> str:
    return "[verifier.env]\n" + "".join(f"{json.dumps(key)} = {json.dumps(value)}\n" for key, value in env.items())


SHIM_SOURCE = "def verify(workspace):\n    return 0.5\n"


# --- BASH_SOURCE: shim/test.sh finds gym_runner.py from ${BASH_SOURCE[0]} -------------------------


@pytest.mark.parametrize("where", ["sandbox", "verifier.env"])
def test_a_bash_source_variable_never_names_the_runner_root_starts(tmp_path, where):
    """bash takes BASH_SOURCE from its environment for a plain variable (as BASH_CMDS): shim/test.sh's
    ``here="${BASH_SOURCE[0]%/*}"`` is then the variable's folder, and root runs its gym_runner.py."""
    workspace = tmp_path / "ws"
    evil = f"import os\nopen({str(workspace)!r} + '/hijacked', 'w').write(str(os.getuid()))\n"
    task(workspace, {"gym_runner.py": evil, "test.sh": "", "answer.txt": "42"})
    env = {"BASH_SOURCE": f"{workspace}/test.sh"}
    task_dir = task(
        tmp_path / "task",
        {"tests/verifier.py": SHIM_SOURCE, "task.toml": _table(env) if where == "verifier.env" else ""},
    )
    outcome = verify(task_dir, workspace, sandbox_env=env if where == "sandbox" else None)
    assert not (workspace / "hijacked").exists(), (
        "root ran the agent's gym_runner.py, uid " + (workspace / "hijacked").read_text()
    )
    assert (outcome.reward, outcome.masked) == (0.5, False), outcome


# --- PWD / the spelling of the workspace: shim/test.sh's "inside the working directory" check ----


@pytest.mark.parametrize("how", ["PATH spelled //workspace", "PWD spelled //workspace"])
def test_the_working_directory_check_survives_another_spelling_of_the_workspace(tmp_path, how):
    """shim/test.sh refuses, for root, an interpreter whose PATH entry starts with "${PWD%/}/": a text
    comparison. bash keeps an imported PWD that names the working directory (//ws, or a link's path),
    and a PATH entry may name the workspace another way: the agent's python3 then runs as root (its
    files are root's where the agent ran as root, or the workspace was copied in by root)."""
    workspace = tmp_path / "ws"
    files = {
        f"bin/{tool}": f"#!/bin/sh\necho {tool} >> {workspace}/hijacked\necho 'verifier error: planted'\n"
        for tool in ("python3", "python")
    }
    task(workspace, files)
    if how.startswith("PATH"):
        env = {"PATH": f"/{workspace}/bin:{os.environ['PATH']}"}
    else:
        env = {"PATH": f"{workspace}/bin:{os.environ['PATH']}", "PWD": f"/{workspace}"}
    task_dir = task(tmp_path / "task", {"tests/verifier.py": SHIM_SOURCE, "task.toml": _table(env)})
    outcome = verify(task_dir, workspace, sandbox_env=env)
    assert not (workspace / "hijacked").exists(), (workspace / "hijacked").read_text()
    assert (outcome.reward, outcome.masked) == (0.5, False), outcome


def test_grading_shell_options_never_leak_into_test_sh(tmp_path):
    """With BASHOPTS in the environment (any value) bash exports its own: _grading.sh's dotglob and
    nullglob reach the task's test.sh, whose globs then mean something else."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    test_sh = "shopt -q nullglob || shopt -q dotglob && echo 0 > /logs/verifier/reward.txt || echo 1 > /logs/verifier/reward.txt\n"
    task_dir = task(tmp_path / "task", {"tests/test.sh": test_sh, "task.toml": _table({"BASHOPTS": "checkwinsize"})})
    outcome = verify(task_dir, workspace)
    assert outcome.reward == 1.0, outcome


# --- Honest runs under variables that change bash's or the tools' behaviour ------------------------

DETAILS = json.dumps({"k": "x" * 5000})
SMALL = "small output\n"
TEST_SH = (
    "printf '%s' " + repr(DETAILS) + " > /logs/verifier/details.json\n"
    "mkdir -p /logs/verifier/sub && printf 'small output\\n' > /logs/verifier/sub/small.txt\n"
    "echo 0.75 > /logs/verifier/reward.txt\n"
)
SHIM_WITH_OUTPUT = (
    "import os\n"
    "def verify(workspace):\n"
    "    logs = os.environ.get('VERIFIER_LOGS_DIR') or '/logs/verifier'\n"
    f"    open(logs + '/details.json', 'w').write({DETAILS!r})\n"
    "    return 0.5\n"
)

SWEEP = {
    "POSIXLY_CORRECT": "1",
    "BASH_COMPAT31": ("BASH_COMPAT", "31"),
    "BASH_COMPAT32": ("BASH_COMPAT", "32"),
    "BASH_COMPAT40": ("BASH_COMPAT", "40"),
    "BASH_COMPAT41": ("BASH_COMPAT", "41"),
    "BASH_COMPAT42": ("BASH_COMPAT", "42"),
    "BASH_COMPAT43": ("BASH_COMPAT", "43"),
    "BASH_COMPAT44": ("BASH_COMPAT", "44"),
    "BASH_COMPAT50": ("BASH_COMPAT", "50"),
    "BASH_COMPAT51": ("BASH_COMPAT", "51"),
    "TMOUT": "0.000001",
    "LANGUAGE": "de",
    "LC_ALL": "de_DE.UTF-8",
    "FUNCNEST": "1",
    "EXECIGNORE": "*/env:*/timeout",
    "HOME": "{ws}",
    "TMPDIR": "{ws}",
    "PS4": "$(touch {ws}/ps4)",
    "SHELL": "{ws}/evil",
    "BASH_XTRACEFD": "6",
    "BASH_ARGV0": "{ws}/x",
    "OLDPWD": "{ws}",
    "BASH_LOADABLES_PATH": "{ws}",
    "GLOBSORT": "-name",
    "IFS": "/",
    "SHELLOPTS": "xtrace:noexec",
    "BASHOPTS": "failglob",
    "TAPE": "{ws}/tape",
    "TIME_STYLE": "+%s",
    "QUOTING_STYLE": "c",
    "_POSIX2_VERSION": "199209",
    "VERSION_CONTROL": "numbered",
    "SIMPLE_BACKUP_SUFFIX": "~x",
    "HOSTNAME": "{ws}",
    "MAIL": "{ws}/m",
    "OPTIND": "5",
    "SECONDS": "999999999",
    "COLUMNS": "1",
    "TERM": "dumb",
    "PWD": "/{ws}",
}


@pytest.mark.parametrize("kind", ["shim", "test.sh"])
@pytest.mark.parametrize("label", sorted(SWEEP))
def test_an_honest_run_is_scored_right_or_masked(tmp_path, label, kind):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    spec = SWEEP[label]
    name, value = spec if isinstance(spec, tuple) else (label, spec)
    env = {name: value.replace("{ws}", str(workspace))}
    if kind == "shim":
        files = {"tests/verifier.py": SHIM_WITH_OUTPUT, "task.toml": _table(env)}
        expected = 0.5
    else:
        files = {"tests/test.sh": TEST_SH, "task.toml": _table(env)}
        expected = 0.75
    task_dir = task(tmp_path / "task", files)
    outcome = verify(task_dir, workspace, sandbox_env=env)
    assert not (workspace / "ps4").exists()
    if outcome.masked:
        return  # loud: acceptable
    assert outcome.reward == expected, outcome
    assert outcome.files.get("details.json") == DETAILS.encode(), {k: len(v) for k, v in outcome.files.items()}
    if kind == "test.sh":
        assert outcome.files.get("sub/small.txt") == SMALL.encode(), outcome.files.keys()


# --- BASH_ARGV0: bash sets $BASH (and $0) from it; _grading.sh runs "$BASH" test.sh as root ----------


@pytest.mark.parametrize("kind", ["test.sh", "shim"])
@pytest.mark.parametrize("where", ["sandbox", "verifier.env"])
def test_a_bash_argv0_variable_never_names_the_shell_grading_runs_as_root(tmp_path, kind, where):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    evil = workspace / "evil"
    evil.write_text(f"#!/bin/sh\nid -u > {workspace}/ran-as\necho 1 > /logs/verifier/reward.txt\n")
    evil.chmod(0o755)
    env = {"BASH_ARGV0": str(evil)}
    tests = (
        {"tests/test.sh": "echo 0 > /logs/verifier/reward.txt\n"}
        if kind == "test.sh"
        else {"tests/verifier.py": "def verify():\n    return 0.0\n"}
    )
    task_dir = task(tmp_path / "task", {**tests, "task.toml": _table(env) if where == "verifier.env" else ""})
    outcome = verify(task_dir, workspace, sandbox_env=env if where == "sandbox" else None)
    assert not (workspace / "ran-as").exists(), (
        "grading ran the agent's program as uid " + (workspace / "ran-as").read_text()
    )
    assert (outcome.reward, outcome.masked) == (0.0, False), outcome


# --- A translated stat: shim/test.sh parses `stat -c %F`, which gettext translates --------------------


def test_a_task_language_does_not_hide_the_interpreter(tmp_path):
    """LANGUAGE=de (with any non-C locale, e.g. LANG=C.UTF-8 as most images set) turns stat's
    "symbolic link" into "symbolische Verknüpfung": may_run rejects every interpreter reached
    through a link (/usr/bin/python3 -> python3.11) and an honest run scores 0, unmasked."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    if not Path("/usr/share/locale/de/LC_MESSAGES/coreutils.mo").exists():
        pytest.skip("coreutils' German messages are not installed")
    env = {"LANG": "C.UTF-8", "LANGUAGE": "de", "PATH": "/usr/bin:/bin"}  # python3 -> python3.11, as in most images
    task_dir = task(tmp_path / "task", {"tests/verifier.py": SHIM_SOURCE, "task.toml": _table(env)})
    outcome = verify(task_dir, workspace, sandbox_env=env)
    assert outcome.masked or outcome.reward == 0.5, outcome


# --- PWD: bubblewrap sets PWD itself on LocalSandbox, so shim/test.sh is run here as Docker would ----


def test_an_imported_pwd_does_not_defeat_the_working_directory_check(tmp_path):
    """docker exec leaves PWD as the environment gives it; bash keeps an imported PWD naming the
    working directory (//app), and shim/test.sh compares PATH entries with "${PWD%/}/" as text."""
    import shutil
    import subprocess

    tests = tmp_path / "tests"
    tests.mkdir()
    shutil.copy(Path(__file__).resolve().parents[1] / "shim" / "test.sh", tests / "test.sh")
    (tests / "gym_runner.py").write_text("import sys\nsys.exit(0)\n")
    workspace = tmp_path / "ws"
    task(workspace, {"bin/python3": f"#!/bin/sh\nid -u > {workspace}/hijacked\n"})
    env = {"PATH": f"{workspace}/bin:/usr/bin:/bin", "PWD": f"/{workspace}"}
    needs_root()
    subprocess.run(["/bin/bash", str(tests / "test.sh")], cwd=workspace, env=env, check=False, timeout=60)
    assert not (workspace / "hijacked").exists(), "root ran the workspace's python3"
