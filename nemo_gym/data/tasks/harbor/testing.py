"""Testing a verifier without a sandbox: ``run_verify`` calls ``verify`` exactly as the runner does.

The runner's own code does the work: the shim's ``_gym_runner.py`` and ``_gym_runner_rare.py`` (the
files staged into every sandbox) are loaded from ``shim_dir()`` by file path, as private copies, and
their ``load_verify``, ``call_verify`` and ``reward_json`` import verifier.py, bind its arguments,
await its result and check it. So a verify that raises, or returns ``"yes"``, NaN or a dict without
``reward``, gives the very message the runner prints in a sandbox, and a result it accepts gives the
very ``reward.json``, read as the host reads it (``parse_reward_json``).

What it does not do: start a sandbox, enforce ``[verifier].timeout_sec``, switch to
``[verifier].user``, set ``[verifier].env`` or ``VERIFIER_LOGS_DIR``, or pick the sandbox's
interpreter: ``verify`` runs in the calling process, with its Python and its site-packages. The
inputs (verifier.py, task_data.json, response.json) reach the runner as bytes in ``PRELOADED``, the
way NeMo Gym's server hands them over, so nothing is written to disk.

Not thread-safe: for the call it changes the process's working directory (to the workspace, as
``test.sh`` runs from it), ``sys.stdout``/``sys.stderr``, ``sys.path`` and ``sys.modules``, and puts
each back afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import io
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Dict, Iterator, Mapping, Optional, Sequence, Tuple, Union

from nemo_gym.data.tasks.harbor import responses as _responses
from nemo_gym.data.tasks.harbor._resources import shim_dir
from nemo_gym.data.tasks.harbor.responses import (
    OutputItem,
    function_call,
    function_call_output,
    message,
    reasoning,
    response,
)
from nemo_gym.data.tasks.harbor.rewards import MISSING_REWARD, parse_reward_json
from nemo_gym.data.tasks.harbor.staging import json_bytes, lay_out, merged_test_files, response_bytes
from nemo_gym.data.tasks.harbor.task import load_task
from nemo_gym.data.tasks.harbor.verification import PYTHON, task_verifier

# What ``run_verify`` grades: a task folder or a verifier.py (a path), or ``verify`` itself.
Verifier = Union[str, "os.PathLike[str]", Callable[..., Any]]

# The runner's modules, by the names under which they import each other.
_RUNNER = "_gym_runner"
_RUNNER_RARE = "_gym_runner_rare"


@dataclass(frozen=True)
class VerifyResult:
    """What one run of ``verify`` gave; a failed run is a result too, never an exception.

    - ``reward``, ``metrics``: ``reward.json`` as the host reads it (``gym-harbor verify --json``'s
      ``reward`` and ``metrics``); ``reward`` is 0.0 when the run failed.
    - ``rewards``: the object ``reward.json`` holds (``{"reward": 1, "recall": 0.5}``), integers kept
      as integers; ``{}`` when the run failed. ``reward_json`` is its text, ``None`` then.
    - ``error``: why the run failed, in the runner's own words (``verify raised KeyError: 'answer'``,
      ``verify returned str 'yes'; it must return ...``), else ``None``; ``failure_kind`` is then
      ``harbor:missing_reward``, as the server scores such a run.
    - ``exception``: what verify (or importing verifier.py) raised, else ``None``.
    - ``stdout``, ``stderr``: what verify printed through ``sys.stdout`` and ``sys.stderr`` (a process
      it starts writes to the test's own output instead).
    - ``log``: what the runner adds to ``test-stdout.txt`` after that: ``reward.json: {...}``, or the
      error, the traceback of the verifier's own frames and ``no reward written: ...``.
    """

    reward: float = 0.0
    metrics: Dict[str, float] = field(default_factory=dict)
    rewards: Dict[str, Any] = field(default_factory=dict)
    reward_json: Optional[str] = None
    error: Optional[str] = None
    exception: Optional[BaseException] = None
    failure_kind: Optional[str] = None
    stdout: str = ""
    stderr: str = ""
    log: str = ""

    @property
    def ok(self) -> bool:
        """Whether the runner would have written ``reward.json``."""
        return self.error is None


_loaded: Optional[Tuple[ModuleType, ModuleType]] = None


@contextlib.contextmanager
def _in_sys_modules(entries: Mapping[str, ModuleType]) -> Iterator[None]:
    """``sys.modules`` holding ``entries`` for the duration, then as it was."""
    saved = {name: sys.modules.get(name) for name in entries}
    sys.modules.update(entries)
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None:  # pragma: no cover - a .py path always has a spec
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    # Compiled here rather than by the loader, so that no __pycache__ appears beside the shim.
    exec(compile(path.read_bytes(), str(path), "exec", dont_inherit=True), module.__dict__)
    return module


def _runner_modules() -> Tuple[ModuleType, ModuleType]:
    """``_gym_runner`` and ``_gym_runner_rare`` from the shim's own files, loaded once. They import
    each other by name, so they are in ``sys.modules`` only while they run. The shim's
    ``_gym_await`` (an async verify awaited without asyncio) is never needed here: this module
    imports asyncio, so ``wait`` always takes ``asyncio.run``, with the same outcome."""
    global _loaded
    if _loaded is None:
        folder = shim_dir()
        runner = _load(_RUNNER, folder / "_gym_runner.py")
        with _in_sys_modules({_RUNNER: runner}):
            rare = _load(_RUNNER_RARE, folder / "_gym_runner_rare.py")
        _loaded = runner, rare
    return _loaded


@dataclass(frozen=True)
class _Chosen:
    """The verifier.py a run would import, the folders ``/tests`` would merge (their modules import,
    the first wins) and, for a task, its ``task_data``."""

    path: Path
    folders: Tuple[str, ...]
    task_data: Optional[Mapping[str, Any]] = None


def _choose(verifier: Union[str, os.PathLike[str]], step: Optional[str], row: Optional[str]) -> _Chosen:
    """A task folder (or a dataset with ``rows.jsonl``) is graded by the verifier.py a run of it, or of
    its ``step`` or ``row``, would choose (``verification.choose_verifier``); a file is graded as it is,
    its own folder beside it."""
    path = Path(os.path.abspath(verifier))
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such task folder or verifier.py")
    if not path.is_dir():
        if step is not None or row is not None:
            raise ValueError(f"{path}: step= and row= name the step or row of a task folder; give the folder")
        if path.name != "verifier.py":
            raise ValueError(f"{path}: the runner imports a file named verifier.py; give that, or verify itself")
        return _Chosen(path, (str(path.parent),))
    task = load_task(path, row=row, check_runnable=False)
    choice = task_verifier(task, step)
    if choice.kind != PYTHON or choice.verifier_path is None:
        test_sh = next(folder / "test.sh" for folder in choice.tests_dirs if (folder / "test.sh").is_file())
        raise ValueError(
            f"{test_sh}: runs instead of verifier.py in a sandbox; run_verify grades a Python verifier "
            "(give a verifier.py to test it alone)"
        )
    # A dataset's verifier.py is staged alone (no folder): nothing beside it is there in the sandbox.
    return _Chosen(choice.verifier_path, tuple(str(folder) for folder in reversed(choice.tests_dirs)), task.task_data)


@contextlib.contextmanager
def _merged(chosen: _Chosen) -> Iterator[_Chosen]:
    """``chosen`` as ``/tests`` holds it: a step's ``tests/`` and the task's are one folder there, so
    a verify that reads a file beside itself (``Path(__file__).parent / "key.json"``) finds either's;
    a dataset's ``verifier.py`` (no folder: it is staged alone) finds nothing beside it. Two folders
    are copied, merged as staging merges them, and a dataset's verifier.py alone, into a temporary
    folder for the call; one folder is used where it is (its tracebacks name the author's file)."""
    if len(chosen.folders) == 1:
        yield chosen
        return
    with tempfile.TemporaryDirectory(prefix="run_verify-tests-") as scratch:
        if chosen.folders:
            lay_out(Path(scratch), merged_test_files(Path(folder) for folder in reversed(chosen.folders)))
        else:
            shutil.copyfile(chosen.path, Path(scratch) / chosen.path.name)
        yield replace(chosen, path=Path(scratch) / chosen.path.name, folders=(scratch,))


@contextlib.contextmanager
def _as_in_the_sandbox(workspace: Path, folders: Sequence[str]) -> Iterator[None]:
    """The working directory is the workspace, and ``sys.path`` is what the runner leaves it: the
    folders ``/tests`` merges first (their modules import), the workspace never. Afterwards the
    directory, ``sys.path``, ``sys.modules["verifier"]`` are as they were, and modules imported
    from those folders are forgotten (another task's ``helpers.py`` must not find them)."""
    cwd = os.getcwd()
    saved_path = list(sys.path)
    saved_verifier = sys.modules.get("verifier")
    before = set(sys.modules)
    # A relative entry ("" included) names a folder of the caller's directory, never of the workspace.
    entries = [os.path.normpath(os.path.join(cwd, entry)) if isinstance(entry, str) else entry for entry in saved_path]
    sys.path[:] = [*folders, *(entry for entry in entries if entry != str(workspace))]
    os.chdir(workspace)
    try:
        yield
    finally:
        os.chdir(cwd)
        sys.path[:] = saved_path
        if saved_verifier is None:
            sys.modules.pop("verifier", None)
        else:
            sys.modules["verifier"] = saved_verifier
        prefixes = tuple(os.path.join(folder, "") for folder in folders)
        for name in set(sys.modules) - before:
            module = sys.modules.get(name)
            if prefixes and (getattr(module, "__file__", None) or "").startswith(prefixes):
                del sys.modules[name]


def run_verify(
    verifier: Verifier,
    *,
    workspace: Union[str, os.PathLike[str]],
    task_data: Optional[Mapping[str, Any]] = None,
    response: Union[str, Mapping[str, Any], None] = None,
    step: Optional[str] = None,
    row: Optional[str] = None,
) -> VerifyResult:
    """Runs ``verify`` as the runner in the sandbox does, in this process, and returns the outcome.

    ``verifier`` is a task folder (the verifier.py a run of it would import, with the rest of
    ``tests/`` importable beside it, and its ``task_data`` unless ``task_data`` is given; ``step``
    names a multi-step task's step, ``row`` a ``rows.jsonl`` dataset's row), the path of a
    ``verifier.py``, or ``verify`` itself (any callable).
    ``workspace`` is the folder ``verify`` grades: its ``workspace`` argument, and the working
    directory during the call. ``task_data`` is the task's fields (``{}`` by default). ``response``
    is the agent's final Responses API response, or its text (``response(text)``); without one,
    ``verify`` gets none, as under stock Harbor. Both go through JSON, as they would to the sandbox.

    A verify that fails (raises, returns an invalid result, declares an argument the run cannot
    supply) gives a ``VerifyResult`` with ``error`` set and ``reward`` 0.0; only a mistake in the
    call itself raises (no such folder or file, a task a run would refuse: ``TaskError``, a
    ``task_data`` that is not JSON, a running event
    loop: an ``async def`` verify gets one of its own, as in the runner, so call this from a plain
    test). Not thread-safe (see the module's docstring).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError(
            "run_verify runs verify on an event loop of its own, as the runner does: call it from a "
            "plain (not async) test, or in a thread (loop.run_in_executor)"
        )
    folder = Path(os.path.realpath(workspace))
    if not folder.is_dir():
        raise NotADirectoryError(f"the workspace {workspace} is not a folder")
    files: Dict[str, bytes] = {}
    verify: Optional[Callable[..., Any]] = None
    here = ""  # the runner's folder (``/tests`` in the sandbox): the verifier's own, or none
    folders: Tuple[str, ...] = ()
    chosen: Optional[_Chosen] = None
    if isinstance(verifier, (str, os.PathLike)):
        chosen = _choose(verifier, step, row)
        files["verifier.py"] = chosen.path.read_bytes()  # FileNotFoundError names a missing file
        task_data = chosen.task_data if task_data is None else task_data
    elif step is not None or row is not None:
        raise ValueError("step= and row= name the step or row of a task folder; give the folder, not verify")
    elif callable(verifier):
        verify = verifier
    else:
        raise TypeError(f"verifier must be a task folder, a verifier.py or a callable, not {type(verifier).__name__}")
    files["task_data.json"] = json_bytes(task_data if task_data is not None else {}, "task_data")
    if response is not None:
        value = _responses.response(response) if isinstance(response, str) else response
        files["response.json"] = response_bytes(value)

    runner, rare = _runner_modules()
    stdout, stderr, log = io.StringIO(), io.StringIO(), io.StringIO()
    text: Optional[str] = None
    failure: Optional[Any] = None  # the runner's VerifierError
    with contextlib.ExitStack() as stack:
        if chosen is not None:
            chosen = stack.enter_context(_merged(chosen))
            here, folders = str(chosen.path.parent), chosen.folders
        stack.enter_context(_in_sys_modules({_RUNNER: runner, _RUNNER_RARE: rare}))
        with _as_in_the_sandbox(folder, folders):
            runner.PRELOADED.update(files)
            try:
                with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                    function = runner.load_verify(here) if verify is None else verify
                    text = runner.reward_json(runner.call_verify(function, here))
            except runner.VerifierError as error:
                failure = error
            finally:
                runner.PRELOADED.clear()
        with contextlib.redirect_stdout(log):
            if failure is None:
                print(f"reward.json: {text}")
            else:
                rare.print_error(failure, here or None)
    out, err, said = stdout.getvalue(), stderr.getvalue(), log.getvalue()
    if failure is not None or text is None:
        cause = getattr(failure, "error", None)
        return VerifyResult(
            error=str(failure), exception=cause, failure_kind=MISSING_REWARD, stdout=out, stderr=err, log=said
        )
    outcome = parse_reward_json(text.encode("utf-8"))
    if outcome.failure_kind is not None:  # pragma: no cover - the runner writes only what the host accepts
        return VerifyResult(error=outcome.detail, failure_kind=outcome.failure_kind, stdout=out, stderr=err, log=said)
    rewards: Dict[str, Any] = json.loads(text)
    return VerifyResult(
        reward=outcome.reward,
        metrics=dict(outcome.metrics),
        rewards=rewards,
        reward_json=text,
        stdout=out,
        stderr=err,
        log=said,
    )


__all__ = [
    "OutputItem",
    "Verifier",
    "VerifyResult",
    "function_call",
    "function_call_output",
    "message",
    "reasoning",
    "response",
    "run_verify",
]
