"""``gym dataset publish --harbor``: a copy of a dataset that stock Harbor grades as Gym does.

A Python verifier becomes a ``tests/`` folder holding the shim (``test.sh`` with its shebang and run
bit, the runner, the SDK copy, ``verifier.py`` and ``task_data.json``) beside the task's own test
files; a dataset-root ``verifier.py`` is copied into each task it grades; parameterized rows become
task folders. ``solution/answer.md`` becomes a ``solution/solve.sh`` that writes it byte for byte.
Plain ``test.sh`` tasks are copied unchanged.

Refused, naming the task: a Python verifier in separate mode (Harbor uploads no tests/ to a separate
verifier), and a ``verify`` that declares ``response`` even with a default (Harbor has no response,
so the task would grade differently). Any refusal writes nothing: the output appears whole or not
at all. No verifier code runs on the host: ``response`` is found by reading the source.
"""

from __future__ import annotations

import ast
import base64
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple, Union

from nemo_gym.data.tasks.harbor.staging import (
    ShimFile,
    StagingError,
    json_bytes,
    lay_out,
    shim_files,
    task_test_files,
)
from nemo_gym.data.tasks.harbor.task import ROWS_FILE, Task, TaskError, load_dataset
from nemo_gym.data.tasks.harbor.verification import PYTHON, choose_verifier
from nemo_gym.data.tasks.harbor.verifier_env import SEPARATE, step_verifier_mode, verifier_mode

# The heredoc delimiter of a generated solve.sh: underscores never occur in base64 text.
_DELIMITER = "NEMO_GYM_ANSWER"
_EXECUTABLE, _REGULAR = 0o755, 0o644


class PublishError(ValueError):
    """The dataset cannot be published; the message names every refused task and why."""


@dataclass(frozen=True)
class Refusal:
    task_id: str
    reason: str


def solve_script(answer: bytes) -> bytes:
    """A ``solve.sh`` that writes ``answer`` byte for byte to ``answer.md`` in the working directory.

    The bytes travel as base64 in a quoted heredoc, so CRLF, a missing final newline, shell
    metacharacters, a line ``EOF`` and invalid UTF-8 all arrive unchanged.
    """
    encoded = base64.b64encode(answer).decode("ascii")
    lines = [encoded[index : index + 76] for index in range(0, len(encoded), 76)]
    return (
        "#!/usr/bin/env bash\n"
        "# The reference answer (solution/answer.md), written byte for byte to answer.md.\n"
        "set -e\n"
        f"base64 -d > answer.md <<'{_DELIMITER}'\n" + "".join(line + "\n" for line in lines) + f"{_DELIMITER}\n"
    ).encode("ascii")


def declares_response(source: bytes, filename: str) -> Optional[bool]:
    """Whether ``verify`` declares a ``response`` parameter, read from the source alone.

    ``True``/``False`` for a module-level ``def``/``async def verify``; for a ``verify`` bound another
    way (``functools.partial``, an object), ``False`` when no function of the module has a
    ``response`` parameter, else ``None``: it cannot be told without running the author's code.
    """
    try:
        tree = ast.parse(source, filename)
    except SyntaxError as error:
        raise TaskError(f"{filename}: does not parse ({error.msg}, line {error.lineno})") from None
    except (ValueError, RecursionError, MemoryError) as error:  # NUL bytes (3.8-3.11), deep nesting
        raise TaskError(f"{filename}: does not parse ({str(error) or type(error).__name__})") from None

    def has_response(node: Union[ast.FunctionDef, ast.AsyncFunctionDef]) -> bool:
        arguments = node.args
        names = [a.arg for a in (*getattr(arguments, "posonlyargs", []), *arguments.args, *arguments.kwonlyargs)]
        return "response" in names

    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "verify":
            return has_response(node)
    functions = [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return None if any(has_response(function) for function in functions) else False


def _copy_tree(source: Path, skip: Tuple[str, ...] = ()) -> Dict[str, ShimFile]:
    """The regular files under ``source`` (symlinks inside it followed, leaving it refused)."""
    files: Dict[str, ShimFile] = {}
    for folder, subfolders, names in os.walk(source):
        subfolders.sort()
        for name in sorted(names):
            path = Path(folder) / name
            relative = path.relative_to(source).as_posix()
            if relative in skip or relative.split("/")[0] in skip:
                continue
            resolved = Path(os.path.realpath(path))
            if os.path.commonpath([str(source.resolve()), str(resolved)]) != str(source.resolve()):
                raise StagingError(f"{path} is a symlink leading out of the task folder")
            if not resolved.is_file():
                raise StagingError(f"{path} is not a regular file")
            mode = _EXECUTABLE if os.access(resolved, os.X_OK) else _REGULAR
            files[relative] = ShimFile(relative, resolved.read_bytes(), mode)
    return files


def _task_refusal(task: Task, source: bytes, verifier: Path) -> Optional[str]:
    if verifier_mode(task) == SEPARATE or any(step_verifier_mode(task, s.name) == SEPARATE for s in task.steps):
        return "a Python verifier in separate mode: Harbor uploads no tests/ to a separate verifier"
    declared = declares_response(source, str(verifier))
    if declared is None:
        return f"{verifier}: cannot tell from the source whether verify declares `response`; define verify with def"
    if declared:
        return "verify declares `response`, which stock Harbor never passes (even with a default it grades differently)"
    return None


def publication(dataset_root: Union[str, Path]) -> Tuple[Dict[str, ShimFile], List[Refusal]]:
    """Every file of the published dataset (by relative path), and every task refused."""
    dataset = load_dataset(dataset_root)
    root = dataset.root
    files: Dict[str, ShimFile] = {}
    refusals: List[Refusal] = []
    for entry in sorted(root.iterdir()):
        if entry.is_file() and entry.name not in (ROWS_FILE, "verifier.py") and not entry.name.startswith("."):
            files[entry.name] = ShimFile(entry.name, entry.read_bytes())
    for task_id in dataset.task_ids:
        try:
            task = dataset.task(task_id)
            own = {} if task_id in dataset.rows else _copy_tree(task.path, skip=("solution/answer.md",))
            answer = task.path / "solution" / "answer.md"
            if task_id not in dataset.rows and answer.is_file():
                own["solution/solve.sh"] = ShimFile("solution/solve.sh", solve_script(answer.read_bytes()), _EXECUTABLE)
            if task_id in dataset.rows:
                own["task_data.json"] = ShimFile("task_data.json", json_bytes(task.task_data, "task_data"))
                instruction = task.task_data.get("instruction")
                if isinstance(instruction, str):
                    own["instruction.md"] = ShimFile("instruction.md", instruction.encode("utf-8"))
            choice = choose_verifier(task.path, task.dataset_root) if not task.steps else None
            if choice is not None and choice.kind == PYTHON:
                assert choice.verifier_path is not None
                source = choice.verifier_path.read_bytes()
                refusal = _task_refusal(task, source, choice.verifier_path)
                if refusal is not None:
                    refusals.append(Refusal(task_id, refusal))
                    continue
                tests = (
                    []
                    if task_id in dataset.rows or not (task.path / "tests").is_dir()
                    else task_test_files(task.path / "tests")
                )
                for file in shim_files(source, task.task_data, None, tests):
                    own[f"tests/{file.name}"] = ShimFile(f"tests/{file.name}", file.data, file.mode)
        except (TaskError, StagingError) as error:
            refusals.append(Refusal(task_id, str(error)))
            continue
        files.update(
            (f"{task_id}/{name}", ShimFile(f"{task_id}/{name}", file.data, file.mode)) for name, file in own.items()
        )
    return files, refusals


def publish_for_harbor(dataset_root: Union[str, Path], out: Union[str, Path]) -> List[str]:
    """Writes the Harbor copy of the dataset into ``out`` (which must not exist yet, or be empty);
    returns the published task ids. ``PublishError`` naming every refused task, writing nothing."""
    target = Path(out)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise PublishError(f"{out}: already exists and is not an empty folder; publish into a new one")
    files, refusals = publication(dataset_root)
    if refusals:
        lines = "; ".join(f"{refusal.task_id}: {refusal.reason}" for refusal in refusals)
        raise PublishError(f"refused {len(refusals)} task(s), nothing written: {lines}")
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".nemo-gym-publish-", dir=target.parent))
    try:
        lay_out(scratch, files.values())
        if target.exists():
            target.rmdir()
        os.rename(scratch, target)  # whole or not at all
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return sorted({name.split("/")[0] for name in files if "/" in name})
