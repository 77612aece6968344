"""``gym-harbor dataset publish --harbor``: a copy of a dataset that stock Harbor starts and grades as Gym does.

Every task, a parameterized row included, becomes a whole Harbor task folder. Only what Harbor
reads is written (its packager's list: ``task.toml``, ``instruction.md``, ``README.md``,
``trajectory.json``, ``environment/``, ``tests/``, ``solution/``, and for each declared step
``steps/<name>/`` with ``instruction.md``, ``trajectory.json``, ``tests/``, ``solution/`` and
``workdir/``):
- ``task.toml``: the author's text, with the smallest line edits (``_toml_edit``): without a
  Dockerfile of its own, ``[environment].docker_image`` goes (Harbor would ignore the Dockerfile
  written instead) and ``[environment].workdir`` is set when missing; with a dataset
  ``timeout_multiplier``, ``[verifier].timeout_sec`` (each step's ``[steps.verifier].timeout_sec``
  for a multi-step task) is multiplied, as Gym grades it. A row, or a folder without one, gets a
  file holding just those keys.
- ``instruction.md``: the task's own; a row's ``instruction`` field.
- ``tests/``: the task's own files. A Python verifier gets the shim (``test.sh`` with its shebang
  and run bit, because Harbor runs ``(/tests/test.sh)`` directly, the runner, the SDK copy,
  ``verifier.py`` and ``task_data.json``) in the folder ``choose_verifier`` reads last: a step's
  ``steps/<name>/tests/`` when it has one (Harbor uploads it over ``tests/``, so its files win, as
  in Gym), else ``tests/``. A dataset-root ``verifier.py`` is laid out in ``tests/`` of each task it
  grades.
- ``solution/``: the task's own, and for each step's; an ``answer.md`` becomes a ``solve.sh`` that
  writes it byte for byte (Harbor has no ``answer.md`` oracle), as does a row's ``solution`` field.
- ``environment/``: Harbor runs every command in ``[environment].workdir`` and builds
  ``environment/Dockerfile`` unless ``docker_image`` is set. A task with its own
  ``environment/Dockerfile`` or ``docker-compose.yaml`` keeps ``environment/`` unchanged. Any
  other task gets ``environment/Dockerfile``: ``FROM`` its ``docker_image`` (else the base image),
  ``WORKDIR`` its working directory (``workdir.working_directory``), and, for a task that names
  its users, those users (made when the image lacks them) with the working directory its
  ``[agent].user``'s, as ``gym-harbor dataset validate`` gives it.

Not written, because Harbor never reads them: ``workspace/`` (Gym's sample of the agent's end
state, which ``gym-harbor verify`` grades by default: never the agent's starting state, which a task's
image holds), ``task_data.json`` at the
task's root (the shim's copy is in ``tests/``), ``response.json``, ``solution/answer.md``, the
dataset's own files (``dataset.toml``, ``rows.jsonl``, ``verifier.py``; Harbor's ``dataset.toml``
is another format), undeclared ``steps/`` folders, and anything else in a task folder.

Refused, naming the task (``publish_problems`` lists them all, grouped by reason, writing nothing): a
Python verifier in separate mode (Harbor uploads no ``tests/`` to a separate verifier); a ``verify``
that declares ``response``, even with a default (Harbor never passes one, so the task would grade
differently); a task or step without an instruction;
``environment/`` files with no Dockerfile or compose file (Harbor uploads such files only for a
prebuilt image, which publishing replaces); a separate verifier that inherits the ``[environment]``
publishing rewrites; and a ``task.toml`` a line edit cannot change safely. Any refusal writes
nothing: the output appears whole or not at all, and the same input gives the same bytes. No task's
code runs on the host: ``response`` is found by reading the source.
"""

from __future__ import annotations

import ast
import base64
import os
import re
import secrets
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

from nemo_gym.data.tasks.harbor._toml_edit import Edit, TomlEditError, edit_toml
from nemo_gym.data.tasks.harbor.staging import (
    ShimFile,
    StagingError,
    lay_out,
    merged_test_files,
    shim_files,
)
from nemo_gym.data.tasks.harbor.task import (
    Dataset,
    Task,
    TaskError,
    holding_dataset,
    is_single_task,
    load_dataset,
    no_task_reason,
)
from nemo_gym.data.tasks.harbor.verification import PYTHON, choose_verifier
from nemo_gym.data.tasks.harbor.verifier_env import SEPARATE, step_verifier_mode, verifier_mode
from nemo_gym.data.tasks.harbor.workdir import working_directory

# The image a task without one starts from (``--base-image``): it has the python3 the shim needs.
DEFAULT_BASE_IMAGE = "python:3.12-slim"
# The heredoc delimiter of a generated solve.sh: underscores never occur in base64 text.
_DELIMITER = "NEMO_GYM_ANSWER"
_EXECUTABLE, _REGULAR = 0o755, 0o644
# What Harbor reads of a task folder (its packager's list) and of each step's folder.
_TASK_FILES = ("task.toml", "instruction.md", "README.md", "trajectory.json")
_TASK_FOLDERS = ("tests", "solution")
_STEP_FILES = ("instruction.md", "trajectory.json")
_STEP_FOLDERS = ("tests", "solution", "workdir")
_DEFINITIONS = ("Dockerfile", "docker-compose.yaml")
# What a generated Dockerfile may hold: no quotes, spaces, `$` (build variables) or line breaks.
_USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*(?::[A-Za-z0-9_][A-Za-z0-9_.-]*)?")
_IMAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]*")
_PATH = re.compile(r"/[A-Za-z0-9._/+@:=,~-]*")
# How many task ids a grouped refusal names before "and N more".
_NAMED = 5


class PublishError(ValueError):
    """The dataset cannot be published; the message names every refused task and why, a line per
    reason, and ``problems`` holds them."""

    def __init__(self, message: str, problems: Sequence[PublishProblem] = ()) -> None:
        super().__init__(message)
        self.problems = tuple(problems)


@dataclass(frozen=True)
class Refusal:
    task_id: str
    reason: str


class PublishProblem(NamedTuple):
    """Tasks that cannot be published for one reason; ``str()`` gives the line that says so."""

    task_ids: Tuple[str, ...]
    reason: str
    noun: str = "tasks"  # "rows" when every one is a parameterized row

    def __str__(self) -> str:
        if len(self.task_ids) == 1:
            return f"{self.task_ids[0]}: {self.reason}"
        named = ", ".join(self.task_ids[:_NAMED])
        more = len(self.task_ids) - _NAMED
        listed = f"{named} and {more} more" if more > 0 else named
        return f"{len(self.task_ids)} {self.noun} ({listed}): {self.reason}"


class _Refused(Exception):
    """This task cannot be published; the reason does not name it (the grouped line does)."""


def solve_script(answer: bytes, source: str = "solution/answer.md") -> bytes:
    """A ``solve.sh`` that writes ``answer`` byte for byte to ``answer.md`` in the working directory;
    its comment says where the answer came from (``source``).

    The bytes travel as base64 in a quoted heredoc, so CRLF, a missing final newline, shell
    metacharacters, a line ``EOF`` and invalid UTF-8 all arrive unchanged.
    """
    encoded = base64.b64encode(answer).decode("ascii")
    lines = [encoded[index : index + 76] for index in range(0, len(encoded), 76)]
    return (
        "#!/usr/bin/env bash\n"
        f"# The reference answer ({source}), written byte for byte to answer.md.\n"
        "set -e\n"
        f"base64 -d > answer.md <<'{_DELIMITER}'\n" + "".join(line + "\n" for line in lines) + f"{_DELIMITER}\n"
    ).encode("ascii")


def dockerfile(image: str, workdir: str, users: Sequence[str] = (), agent: Optional[str] = None) -> bytes:
    """The ``environment/Dockerfile`` of a task that brings none: its image, its working directory
    (which Harbor runs every command in, so it must exist), the users the task names (made when the
    image lacks them) and, with an ``agent``, the working directory that user's."""
    lines = [
        "# Written by gym-harbor dataset publish --harbor: the task's image, working directory and users.",
        f"FROM {image}",
        f"WORKDIR {workdir}",
    ]
    made = [f"(id -u {user} >/dev/null 2>&1 || useradd --create-home {user})" for user in users if not user.isdigit()]
    if agent is not None:
        made.append(f"chown {agent} {workdir}")
    if made:
        lines.append("RUN " + " && ".join(made))
    return ("\n".join(lines) + "\n").encode("utf-8")


def declares_response(source: bytes, filename: str) -> Optional[bool]:
    """Whether ``verify`` declares a ``response`` parameter, read from the source alone. A ``**``
    parameter counts: the runner passes ``response`` in it (red team 70).

    ``True``/``False`` for a module-level ``def``/``async def verify`` or ``verify = lambda``; ``None``
    for a ``verify`` imported from another module; for one bound another way (``functools.partial``,
    an object), ``False`` when no function of the module has a ``response`` parameter, else ``None``:
    it cannot be told without running the author's code.
    """
    try:
        tree = ast.parse(source, filename)
    except SyntaxError as error:
        raise TaskError(f"{filename}: does not parse ({error.msg}, line {error.lineno})") from None
    except (ValueError, RecursionError, MemoryError) as error:  # NUL bytes (3.8-3.11), deep nesting
        raise TaskError(f"{filename}: does not parse ({str(error) or type(error).__name__})") from None

    def has_response(node: Union[ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda]) -> bool:
        arguments = node.args
        names = [a.arg for a in (*getattr(arguments, "posonlyargs", []), *arguments.args, *arguments.kwonlyargs)]
        return "response" in names or arguments.kwarg is not None

    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "verify":
            return has_response(node)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda) and _binds_verify(node):
            return has_response(node.value)
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
            (alias.asname or alias.name) == "verify" for alias in node.names
        ):
            return None
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
    functions = [node for node in ast.walk(tree) if isinstance(node, kinds)]
    return None if any(has_response(function) for function in functions) else False


def _binds_verify(node: ast.Assign) -> bool:
    return any(isinstance(target, ast.Name) and target.id == "verify" for target in node.targets)


# --- reading the task's files ----------------------------------------------------------------------


def _regular(task_dir: Path, path: Path) -> ShimFile:
    """The file at ``path`` under its task-relative name; a symlink is followed inside the task folder."""
    relative = path.relative_to(task_dir).as_posix()
    task_root = os.path.realpath(task_dir)
    resolved = os.path.realpath(path)
    if os.path.commonpath([task_root, resolved]) != task_root:
        raise StagingError(f"{relative} is a symlink leading out of the task folder")
    if not os.path.isfile(resolved):
        raise StagingError(f"{relative} is not a regular file")
    mode = _EXECUTABLE if os.access(resolved, os.X_OK) else _REGULAR
    return ShimFile(relative, Path(resolved).read_bytes(), mode)


def _file(task_dir: Path, relative: str) -> Dict[str, ShimFile]:
    path = task_dir / relative
    return {relative: _regular(task_dir, path)} if path.exists() or path.is_symlink() else {}


def _tree(task_dir: Path, relative: str) -> Dict[str, ShimFile]:
    """The regular files under ``task_dir/relative``, by task-relative name; a symlinked folder, or a
    symlink leading out of the task folder, is refused."""
    root = task_dir / relative
    if root.is_symlink():
        raise StagingError(f"{relative}/ is a symlinked folder; publish real folders only")
    if not root.is_dir():
        return {}
    files: Dict[str, ShimFile] = {}
    for folder, subfolders, names in os.walk(root):
        subfolders.sort()
        for name in subfolders:
            if (Path(folder) / name).is_symlink():
                where = (Path(folder) / name).relative_to(task_dir).as_posix()
                raise StagingError(f"{where}/ is a symlinked folder; publish real folders only")
        for name in sorted(names):
            file = _regular(task_dir, Path(folder) / name)
            files[file.name] = file
    return files


# --- one task --------------------------------------------------------------------------------------


def _instructions(task: Task, row: bool, files: Dict[str, ShimFile]) -> None:
    if row:
        instruction = task.task_data.get("instruction")
        if not isinstance(instruction, str):
            raise _Refused("has no `instruction` text field, which becomes instruction.md (Harbor requires one)")
        files["instruction.md"] = ShimFile("instruction.md", instruction.encode("utf-8"))
        return
    if not task.steps and "instruction.md" not in files:
        raise _Refused("has no instruction.md, which Harbor requires")
    missing = [step.name for step in task.steps if f"steps/{step.name}/instruction.md" not in files]
    if missing:
        raise _Refused(f"steps/{missing[0]}/ has no instruction.md, which Harbor requires of every step")


def _answers(task: Task, row: bool, files: Dict[str, ShimFile]) -> None:
    """``answer.md`` (a row's ``solution`` field) as a ``solve.sh`` that writes it; it wins over a
    ``solve.sh`` beside it, as it does in ``gym-harbor dataset validate``."""
    if row:
        answer = task.task_data.get("solution")
        if isinstance(answer, str):
            files["solution/solve.sh"] = ShimFile(
                "solution/solve.sh", solve_script(answer.encode("utf-8"), "the row's solution field"), _EXECUTABLE
            )
        return
    for folder in ["solution"] + [f"steps/{step.name}/solution" for step in task.steps]:
        written = files.pop(f"{folder}/answer.md", None)
        if written is not None:
            script = solve_script(written.data, f"{folder}/answer.md")
            files[f"{folder}/solve.sh"] = ShimFile(f"{folder}/solve.sh", script, _EXECUTABLE)


def _verifiers(task: Task, row: bool, files: Dict[str, ShimFile]) -> None:
    """The shim, for each Python verifier, where ``choose_verifier`` reads last."""
    steps: List[Optional[str]] = [step.name for step in task.steps] or [None]
    for step in steps:
        choice = choose_verifier(task.path, task.dataset_root, step)
        where = f"step {step}: " if step else ""
        if row:  # a row's folder is the dataset's: its tests/ (rarely any) go into the row's tests/
            task_files = merged_test_files(choice.tests_dirs)
            if choice.kind != PYTHON:
                files.update(
                    (f"tests/{file.name}", ShimFile(f"tests/{file.name}", file.data, file.mode)) for file in task_files
                )
                continue
        elif choice.kind != PYTHON:
            continue
        else:
            task_files = []  # already copied with the task's folders
        mode = verifier_mode(task) if step is None else step_verifier_mode(task, step)
        if mode == SEPARATE:
            raise _Refused(f"{where}a Python verifier in separate mode: Harbor uploads no tests/ to separate verifiers")
        assert choice.verifier_path is not None
        source = choice.verifier_path.read_bytes()
        declared = declares_response(source, str(choice.verifier_path))
        if declared is None:
            raise _Refused(
                f"{where}{choice.verifier_path}: cannot tell from the source whether verify declares `response`; "
                "define verify with def"
            )
        if declared:
            raise _Refused(
                f"{where}verify declares `response`, which stock Harbor never passes (even with a default it grades "
                "differently); write the answer to answer.md in the working directory and read it from `workspace`"
            )
        top = choice.tests_dirs[-1] if choice.tests_dirs and not row else task.path / "tests"
        folder = top.relative_to(task.path).as_posix()
        for file in shim_files(source, task.task_data, None, task_files):
            files[f"{folder}/{file.name}"] = ShimFile(f"{folder}/{file.name}", file.data, file.mode)


def _inherits_environment(task: Task) -> bool:
    """Whether a separate verifier runs in a copy of ``[environment]`` (no environment table of its own)."""
    if task.steps:
        return task.verifier.environment is None and any(
            step.verifier.environment is None and step_verifier_mode(task, step.name) == SEPARATE for step in task.steps
        )
    return task.verifier.environment is None and verifier_mode(task) == SEPARATE


def _environment(task: Task, row: bool, base_image: str, files: Dict[str, ShimFile]) -> List[Edit]:
    """The task's ``environment/``, and the ``task.toml`` edits it needs."""
    if not row and any((task.path / "environment" / name).is_file() for name in _DEFINITIONS):
        files.update(_tree(task.path, "environment"))
        return []
    if not row and _tree(task.path, "environment"):
        raise _Refused(
            "environment/ holds files but no Dockerfile or docker-compose.yaml: Harbor uploads such files only for a "
            "prebuilt image, which publishing replaces with a Dockerfile; add an environment/Dockerfile that COPYs them"
        )
    workdir = working_directory(task)
    if not _PATH.fullmatch(workdir):
        raise _Refused(f"the working directory {workdir!r} has characters publishing does not write into a Dockerfile")
    image = task.environment.docker_image or base_image
    if not _IMAGE.fullmatch(image):
        raise _Refused(f"[environment].docker_image = {image!r} is not an image name publishing writes in a Dockerfile")
    edits = []
    if "docker_image" in task.environment.table:
        edits.append(Edit(("environment", "docker_image")))
    if "workdir" not in task.environment.table:
        edits.append(Edit(("environment", "workdir"), workdir))
    if edits and _inherits_environment(task):
        raise _Refused(
            "a separate verifier inherits [environment], which publishing rewrites (it drops docker_image and sets "
            "workdir); give the verifier its own [verifier.environment], or the task its own environment/Dockerfile"
        )
    users = sorted({str(user).partition(":")[0] for user in task.named_users()} - {"root", "0"})
    if any(not _USER.fullmatch(user) for user in users):
        raise _Refused(f"a user name in task.toml ({', '.join(users)}) is not one publishing writes in a Dockerfile")
    owner = task.workdir_owner()
    agent = None if owner in (None, "root", 0) else str(owner)
    files["environment/Dockerfile"] = ShimFile("environment/Dockerfile", dockerfile(image, workdir, users, agent))
    return edits


def _timeouts(task: Task) -> List[Edit]:
    """The dataset's ``timeout_multiplier``, as Gym applies it, written into ``task.toml``."""
    if task.timeout_multiplier == 1.0:
        return []
    if task.steps:
        return [
            Edit(("steps", index, "verifier", "timeout_sec"), step.verifier.timeout_sec * task.timeout_multiplier)
            for index, step in enumerate(task.steps)
        ]
    return [Edit(("verifier", "timeout_sec"), task.timeout_sec)]


def _publish_task(dataset: Dataset, task_id: str, base_image: str) -> Dict[str, ShimFile]:
    """The published folder of one task, by task-relative name; ``_Refused`` or ``TaskError`` when it
    cannot be published."""
    # What this server cannot run (a hook on a Compose sidecar, say) Harbor may: a plain test.sh
    # task passes through; a Python verifier's own refusals follow.
    task = dataset.task(task_id, check_runnable=False)
    row = task_id in dataset.rows
    files: Dict[str, ShimFile] = {}
    if not row:
        for name in _TASK_FILES:
            files.update(_file(task.path, name))
        for name in _TASK_FOLDERS:
            files.update(_tree(task.path, name))
        for step in task.steps:
            for name in _STEP_FILES:
                files.update(_file(task.path, f"steps/{step.name}/{name}"))
            for name in _STEP_FOLDERS:
                files.update(_tree(task.path, f"steps/{step.name}/{name}"))
    _verifiers(task, row, files)
    _instructions(task, row, files)
    _answers(task, row, files)
    edits = _environment(task, row, base_image, files) + _timeouts(task)
    written = files.get("task.toml")
    if edits or written is None:
        text = written.data.decode("utf-8") if written is not None else ""  # load_task read it as UTF-8
        try:
            text = edit_toml(text, edits)
        except TomlEditError as error:
            raise _Refused(f"task.toml: {error}") from None
        files["task.toml"] = ShimFile("task.toml", text.encode("utf-8"))
    return files


# --- the dataset -----------------------------------------------------------------------------------


def publication(
    dataset_root: Union[str, Path], base_image: str = DEFAULT_BASE_IMAGE
) -> Tuple[Dict[str, ShimFile], List[Refusal]]:
    """Every file of the published dataset (by relative path ``<task id>/...``), and every task
    refused. A ``TaskError`` when the dataset itself cannot be read."""
    return _publication(load_dataset(dataset_root), base_image)


def _publication(dataset: Dataset, base_image: str) -> Tuple[Dict[str, ShimFile], List[Refusal]]:
    files: Dict[str, ShimFile] = {}
    refusals: List[Refusal] = []
    for task_id in dataset.task_ids:
        try:
            own = _publish_task(dataset, task_id, base_image)
        except _Refused as refused:
            refusals.append(Refusal(task_id, str(refused)))
            continue
        except (TaskError, StagingError) as error:
            refusals.append(Refusal(task_id, str(error)))
            continue
        files.update(
            (f"{task_id}/{name}", ShimFile(f"{task_id}/{name}", file.data, file.mode)) for name, file in own.items()
        )
    return files, refusals


def group_refusals(refusals: Sequence[Refusal], rows: Sequence[str] = ()) -> List[PublishProblem]:
    """One problem per distinct reason, in the order of the first task refused for it."""
    grouped: Dict[str, List[str]] = {}
    for refusal in refusals:
        grouped.setdefault(refusal.reason, []).append(refusal.task_id)
    row_ids = set(rows)
    return [
        PublishProblem(tuple(ids), reason, "rows" if all(task_id in row_ids for task_id in ids) else "tasks")
        for reason, ids in grouped.items()
    ]


def publish_problems(dataset_root: Union[str, Path]) -> List[PublishProblem]:
    """The tasks of the dataset that ``publish --harbor`` would refuse, grouped by reason, writing
    nothing (``gym-harbor dataset validate`` warns with them). Each is ``(task_ids, reason, noun)``, and
    ``str()`` of it is one line. A ``TaskError`` when the dataset itself cannot be read."""
    dataset = load_dataset(dataset_root)
    _, refusals = _publication(dataset, DEFAULT_BASE_IMAGE)
    return group_refusals(refusals, tuple(dataset.rows))


def _alone(task_dir: Path) -> Dataset:
    """One task folder as the only task of a dataset: with what its dataset adds (``dataset.toml``, a
    dataset's ``verifier.py``) where the folder holding it is one, as ``load_task`` loads it."""
    folder = Path(task_dir).resolve()
    holder = holding_dataset(folder)
    return (
        replace(holder, folders=(folder.name,), rows={}) if holder else Dataset(folder.parent, folders=(folder.name,))
    )


def task_publish_problems(task_dir: Union[str, Path]) -> List[PublishProblem]:
    """``publish_problems`` of one task folder, as the only task of a dataset."""
    _, refusals = _publication(_alone(Path(task_dir)), DEFAULT_BASE_IMAGE)
    return group_refusals(refusals, ())


def publish_for_harbor(
    dataset_root: Union[str, Path],
    out: Union[str, Path],
    *,
    base_image: Optional[str] = None,
    skip_refused: bool = False,
) -> List[str]:
    """Writes the Harbor copy of the dataset into ``out`` (which must not exist yet, or be empty);
    returns the published task ids. ``dataset_root`` may be one task folder (``task.is_single_task``):
    it is published alone, as ``out/<its name>/``, with what its dataset adds. ``base_image``
    (default ``DEFAULT_BASE_IMAGE``) is the image a task without ``[environment].docker_image``
    starts from. ``PublishError`` naming every refused task, a line per reason, writing nothing;
    with ``skip_refused``, the other tasks are written (``publish_problems`` names the ones left
    out), and only a dataset refused whole is an error."""
    image = DEFAULT_BASE_IMAGE if base_image is None else base_image
    if not _IMAGE.fullmatch(image):
        raise PublishError(f"the base image {image!r} is not an image name publishing writes into a Dockerfile")
    target = Path(out)
    if target.is_symlink():  # replaced by the copy, a link would be lost; followed, it writes elsewhere
        raise PublishError(f"{out}: is a link; publish into a new folder")
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise PublishError(f"{out}: already exists and is not an empty folder; publish into a new one")
    source, place = os.path.realpath(dataset_root), Path(os.path.realpath(target))
    if os.path.commonpath([source, str(place)]) == source:
        # A copy inside a task's tests/ would be staged with it, every run after.
        raise PublishError(f"{out}: is inside the dataset {dataset_root}; publish outside it")
    holder = next((folder for folder in place.parents if _holds_a_task(folder)), None)
    if holder is not None:  # another task's folder (beside a task published alone, say)
        raise PublishError(f"{out}: is inside the task folder {holder}; publish outside it")
    dataset = _alone(Path(dataset_root)) if is_single_task(dataset_root) else load_dataset(dataset_root)
    if not dataset.task_ids:
        raise PublishError(no_task_reason(dataset_root))
    files, refusals = _publication(dataset, image)
    if refusals and (not skip_refused or not files):
        problems = group_refusals(refusals, tuple(dataset.rows))
        lines = "".join(f"\n  {problem}" for problem in problems)
        whole = " (every task)" if skip_refused else ""
        raise PublishError(f"refused {len(refusals)} task(s){whole}, nothing written:{lines}", problems)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        scratch = _scratch_beside(target)
    except OSError as error:
        raise PublishError(f"{out}: cannot write there ({error.strerror or error}: {error.filename})") from None
    try:
        lay_out(scratch, files.values())
        if target.exists():
            scratch.chmod(target.stat().st_mode & 0o7777)  # the empty folder given keeps its mode
            target.rmdir()
        os.rename(scratch, target)  # whole or not at all
    except OSError as error:  # OUT filled or made meanwhile, a full disk: nothing of it was touched
        shutil.rmtree(scratch, ignore_errors=True)
        raise PublishError(f"{out}: cannot write there ({error.strerror or error})") from None
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return sorted({name.split("/")[0] for name in files})


def _holds_a_task(folder: Path) -> bool:
    """Whether ``folder`` is a task's (its ``task.toml``), or the ``tests/`` of one (an ``instruction.md``
    beside it): a copy published there would be staged with that task."""
    if (folder / "task.toml").is_file():
        return True
    return folder.name == "tests" and (folder.parent / "instruction.md").is_file()


def _scratch_beside(target: Path) -> Path:
    """A new folder beside ``target``, to be renamed into it, made with the umask's mode as the
    folder itself would be (``tempfile.mkdtemp``'s 0700 left the copy unreadable to other users)."""
    while True:
        scratch = target.parent / f".nemo-gym-publish-{secrets.token_hex(8)}"
        try:
            scratch.mkdir()
            return scratch
        except FileExistsError:
            continue


__all__ = [
    "DEFAULT_BASE_IMAGE",
    "PublishError",
    "PublishProblem",
    "Refusal",
    "declares_response",
    "dockerfile",
    "group_refusals",
    "publication",
    "publish_for_harbor",
    "publish_problems",
    "solve_script",
    "task_publish_problems",
]
