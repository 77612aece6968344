"""The grading script as it is sent: its files without comment and blank lines (``grading._text``).

Dropping a line is safe only where bash would never have read it as part of a word: a ``#`` line or a
blank line inside a quoted string spanning lines would change that string. Bash decides: each file,
wrapped in a function, must print the same under ``declare -f`` (bash's own rendering of what it
parsed, comments gone) before and after.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from nemo_gym.data.tasks.harbor import grading

FILES = ("_strays.sh", "_grading.sh")


def parsed(text: str) -> str:
    """What bash parsed of ``text``, as ``declare -f`` prints it."""
    script = "wrapped() {\n" + text + "\n}\ndeclare -f wrapped\n"
    return subprocess.run(
        ["bash", "--norc", "-p", "-c", script], stdout=subprocess.PIPE, env={}, check=True, text=True
    ).stdout


@pytest.mark.parametrize("name", FILES)
def test_the_sent_script_parses_as_its_file(name):
    source = (Path(grading.__file__).parent / name).read_text(encoding="utf-8")
    sent = grading._text(name)
    assert len(sent) < len(source) * 0.8  # the comments are gone
    assert parsed(sent) == parsed(source)


def test_a_comment_line_inside_a_string_would_be_caught():
    """The check above can fail: a ``#`` line inside a quoted string is text, and dropping it shows."""
    source = 'x="one\n# two\nthree"\n'
    stripped = "".join(line + "\n" for line in source.splitlines() if not line.startswith("#"))
    assert parsed(stripped) != parsed(source)


def test_the_command_ends_with_the_steps():
    steps = grading.GradingSteps(
        steps=("prepare", "run", "finish"),
        kind="python",
        tests_dir="/tests",
        logs_dir="/logs/verifier",
        stage=".gym-stage-0",
        out_dir="/tests/.gym-out-0",
        timeout_sec=60,
        kill_after_sec=5,
        tail_bytes=1000,
        max_reward_bytes=1000,
        max_report_chars=1000,
    )
    command = grading.grading_command(steps)
    assert "\n#" not in command and "\n\n" not in command
    assert command.rstrip().endswith("exit 0")
