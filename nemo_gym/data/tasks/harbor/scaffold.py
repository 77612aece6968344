"""``gym-harbor init``: a new task folder that passes ``gym-harbor check`` and ``gym-harbor dataset
validate`` as written, to edit into a real one.

Three kinds: ``file`` (the agent writes a file, a Python ``verify`` reads it), ``answer`` (the agent
writes its final answer to ``answer.md``, the portable way to grade an answer: stock Harbor has no
response to pass), ``test-sh`` (a plain ``tests/test.sh`` that writes ``reward.txt``, as Harbor's own
tasks do). Each comes with its oracle, a solved ``workspace/`` (what ``gym-harbor verify`` grades by
default), and, for the Python kinds, ``test_verifier.py``: unit tests of ``verify`` that need no
sandbox (``testing.run_verify``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict

KINDS = ("file", "answer", "test-sh")

_TASK_TOML = """\
schema_version = "1.4"

[verifier]
timeout_sec = 60.0

[environment]
# The agent's image: a published task gets an environment/Dockerfile FROM it; the verifier needs
# bash, and python3 3.8+ for a Python verify.
docker_image = "python:3.12-slim"
workdir = "/workspace"
"""

_FILE = {
    "instruction.md": "What is six times seven? Write the number to answer.txt in your working directory.\n",
    "task_data.json": '{"answer": "42"}\n',
    "tests/verifier.py": '''\
from nemo_gym.verifiers import numeric_match
from nemo_gym.verifiers.files import read_text


def verify(workspace, task_data):
    """1.0 when answer.txt holds the expected number, else 0.0."""
    return numeric_match(read_text(workspace, "answer.txt"), task_data["answer"])
''',
    "solution/solve.sh": "#!/bin/bash\necho 42 > answer.txt\n",
    "workspace/answer.txt": "42\n",
    "test_verifier.py": '''\
"""Unit tests of this task's verify, without a sandbox: python -m pytest test_verifier.py

Every task's file has this name: test a dataset with python -m pytest --import-mode=importlib DATASET.
"""

from pathlib import Path

from nemo_gym.data.tasks.harbor.testing import run_verify

TASK = Path(__file__).resolve().parent


def test_the_right_answer_scores_1(tmp_path):
    (tmp_path / "answer.txt").write_text("42\\n")
    result = run_verify(TASK, workspace=tmp_path)
    assert result.reward == 1.0, result.log  # the log: the runner's error and traceback, if verify failed


def test_a_wrong_answer_scores_0(tmp_path):
    (tmp_path / "answer.txt").write_text("41\\n")
    result = run_verify(TASK, workspace=tmp_path)
    assert result.ok and result.reward == 0.0


def test_no_answer_scores_0(tmp_path):
    result = run_verify(TASK, workspace=tmp_path)
    assert result.ok and result.reward == 0.0, result.log  # ok: a 0 that verify returned, not an error of it
''',
}

_ANSWER = {
    "instruction.md": "What is the capital of France? Write your final answer to answer.md in your working "
    "directory.\n",
    "task_data.json": '{"answer": "Paris"}\n',
    "tests/verifier.py": '''\
from nemo_gym.verifiers import exact_match, extract_answer
from nemo_gym.verifiers.files import read_text


def verify(workspace, task_data):
    """1.0 when answer.md's answer (its last "Answer:" line, else all of it) is the expected one."""
    text = read_text(workspace, "answer.md")
    if text is None:
        return 0.0
    answer = extract_answer(text) or text
    return exact_match(answer, task_data["answer"], ignore_case=True)
''',
    "solution/answer.md": "Answer: Paris\n",
    "workspace/answer.md": "The capital of France is Paris.\n\nAnswer: Paris\n",
    "test_verifier.py": '''\
"""Unit tests of this task's verify, without a sandbox: python -m pytest test_verifier.py

Every task's file has this name: test a dataset with python -m pytest --import-mode=importlib DATASET.
"""

from pathlib import Path

from nemo_gym.data.tasks.harbor.testing import run_verify

TASK = Path(__file__).resolve().parent


def test_the_answer_line_is_graded(tmp_path):
    (tmp_path / "answer.md").write_text("Some reasoning.\\n\\nAnswer: paris\\n")
    result = run_verify(TASK, workspace=tmp_path)
    assert result.reward == 1.0, result.log  # the log: the runner's error and traceback, if verify failed


def test_a_wrong_answer_scores_0(tmp_path):
    (tmp_path / "answer.md").write_text("Answer: Lyon\\n")
    result = run_verify(TASK, workspace=tmp_path)
    assert result.ok and result.reward == 0.0, result.log  # ok: a 0 that verify returned, not an error of it


def test_no_answer_file_scores_0(tmp_path):
    result = run_verify(TASK, workspace=tmp_path)
    assert result.ok and result.reward == 0.0
''',
}

_TEST_SH = {
    "instruction.md": "Write a script hello.sh in your working directory that prints: Hello, world!\n",
    "tests/test.sh": """\
#!/bin/bash
# Harbor runs this from the task's working directory; the reward goes to /logs/verifier.
if [ "$(bash hello.sh 2>/dev/null)" = "Hello, world!" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
""",
    "solution/solve.sh": "#!/bin/bash\nprintf '%s\\n' '#!/bin/bash' 'echo \"Hello, world!\"' > hello.sh\n",
    "workspace/hello.sh": '#!/bin/bash\necho "Hello, world!"\n',
}

_FILES: Dict[str, Dict[str, str]] = {"file": _FILE, "answer": _ANSWER, "test-sh": _TEST_SH}


def init_task(folder: Path, kind: str = "file") -> Dict[str, Path]:
    """Writes a new task of ``kind`` into ``folder`` (new, or empty) and returns its files by name.
    ``ValueError`` for an unknown kind; ``FileExistsError`` when ``folder`` holds anything already,
    so nothing of the author's is ever overwritten."""
    if kind not in _FILES:
        raise ValueError(f"unknown task kind {kind!r}: choose one of {', '.join(KINDS)}")
    folder = Path(folder)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise FileExistsError(f"{folder}: already exists and is not an empty folder; give a new one")
    written = {}
    for name, text in {"task.toml": _TASK_TOML, **_FILES[kind]}.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        if name.endswith(".sh"):
            path.chmod(0o755)
        written[name] = path
    return written


__all__ = ["KINDS", "init_task"]
