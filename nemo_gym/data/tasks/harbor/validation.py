"""``gym-harbor dataset validate``: run each task's oracle, verify, and check for full marks.

The oracle runs as Harbor's does (``agents/oracle.py``): ``solution/`` is copied to ``/solution``
and ``(/solution/solve.sh) > /logs/agent/oracle.txt 2>&1`` runs from the task's working directory,
as the agent (``[agent].user``; a step's ``[steps.agent].user`` first), with
``DEBIAN_FRONTEND=noninteractive`` and ``[solution].env``. A task with ``solution/answer.md`` (or a
row with a ``solution`` field) instead has that file written byte for byte to ``answer.md`` in the
working directory, as the task's user, through ``base64`` (so the image needs that tool), and its
text submitted as the response. A multi-step task runs, for each step in order and in one sandbox,
what Harbor runs before the agent (``steps/<name>/workdir/`` copied into the working directory, then
its ``setup.sh``, then its ``[steps.healthcheck]``, as the step's agent), the step's oracle
(``steps/<name>/solution/``, else ``solution/``), and the step's verification.

The workspace starts empty and belongs to the agent (``Task.workdir_owner``: ``[agent].user``, else
the first step's ``[steps.agent].user``), as the Dockerfile publishing writes gives it (a task's own
Dockerfile gives its agent its working directory; a sandbox that does not build it must do the
same): the oracle, not a solved ``workspace/`` folder, must earn the marks.
"""

from __future__ import annotations

import base64
import os
import shlex
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional

from nemo_gym.data.tasks.harbor.env_templates import resolve_env
from nemo_gym.data.tasks.harbor.healthchecks import run_healthcheck
from nemo_gym.data.tasks.harbor.redaction import redact
from nemo_gym.data.tasks.harbor.responses import response
from nemo_gym.data.tasks.harbor.sandboxes.base import Sandbox, SandboxError, User, sandbox_option
from nemo_gym.data.tasks.harbor.separate import VerifierSandboxSpec, run_separate_verification
from nemo_gym.data.tasks.harbor.staging import ShimFile, stage_archive
from nemo_gym.data.tasks.harbor.task import Task, TaskError, env_table
from nemo_gym.data.tasks.harbor.verification import VerificationOutcome, plan_verification, run_verification

FULL_MARKS = 1.0
ORACLE_TIMEOUT_SEC = 600  # Harbor's oracle takes the agent's timeout; [agent].timeout_sec is unset by default
SOLUTION_DIR = "/solution"
ORACLE_LOG = "/logs/agent/oracle.txt"
OUTPUT_TAIL_CHARS = 2000  # of the oracle's output, in a failed validation's report


@dataclass(frozen=True)
class OracleRun:
    """What the oracle did: ``answer.md`` (with the response it submits) or ``solve.sh`` (its exit
    status and the tail of its output)."""

    kind: str
    response: Optional[Dict[str, Any]] = None
    status: Optional[int] = None
    output: str = ""


@dataclass
class StepResult:
    step: Optional[str]
    oracle: str
    outcome: Optional[VerificationOutcome] = None
    error: str = ""
    oracle_status: Optional[int] = None
    oracle_output: str = ""

    @property
    def passed(self) -> bool:
        return self.outcome is not None and not self.outcome.masked and self.outcome.reward >= FULL_MARKS


@dataclass
class TaskResult:
    task_id: str
    steps: List[StepResult] = field(default_factory=list)
    error: str = ""

    @property
    def passed(self) -> bool:
        return not self.error and bool(self.steps) and all(step.passed for step in self.steps)

    @property
    def reward(self) -> Optional[float]:
        """The task's reward, a multi-step task's mean as Harbor's trial scores it; ``None`` when a step
        could not run (``error``): the steps before it are no reward of the task's."""
        if self.error:
            return None
        rewards = [step.outcome.reward for step in self.steps if step.outcome is not None]
        return sum(rewards) / len(rewards) if rewards else None

    @property
    def notes(self) -> List[str]:
        """What full marks should not hide: an oracle that exited non-zero (Harbor's oracle ignores its
        status, so the task still passes) and a reward above full marks (a scale the server may not expect)."""
        notes = []
        for step in self.steps:
            where = f" at step {step.step}" if step.step else ""
            if step.oracle_status:
                notes.append(f"the oracle ({step.oracle}) exited with {step.oracle_status}{where}")
            if step.outcome is not None and step.outcome.reward > FULL_MARKS:
                notes.append(f"reward {step.outcome.reward:g}{where} is above full marks ({FULL_MARKS:g})")
        return notes


def solution_dir(task: Task, step: Optional[str]) -> Optional[Path]:
    """The oracle's folder: the step's ``solution/``, else the task's; ``None`` when neither is there."""
    if step is not None and (task.path / "steps" / step / "solution").is_dir():
        return task.path / "steps" / step / "solution"
    folder = task.path / "solution"
    return folder if folder.is_dir() else None


def _folder_files(folder: Path) -> List[ShimFile]:
    """The folder's files; ``solve.sh`` and ``setup.sh`` executable (Harbor runs ``chmod +x`` on them)."""
    return [
        ShimFile(
            path.relative_to(folder).as_posix(),
            path.read_bytes(),
            0o755 if path.name in ("solve.sh", "setup.sh") or os.access(path, os.X_OK) else 0o644,
        )
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    ]


async def _stage_folder(sandbox: Sandbox, folder: Path, target: str, owner: Optional[User], *, replace: bool) -> None:
    """Copies ``folder``'s files to ``target`` in the sandbox (emptied first with ``replace``),
    readable by everyone and owned by ``owner`` when one is given."""
    scratch = f"{sandbox.tmp_dir}/nemo-gym-stage-{uuid.uuid4().hex}.tgz"
    with tempfile.TemporaryDirectory(prefix="nemo-gym-stage-") as local:
        archive = Path(local) / "files.tgz"
        archive.write_bytes(stage_archive(_folder_files(folder)))
        await sandbox.upload_file(str(archive), scratch)
    quoted, archive_path = shlex.quote(target), shlex.quote(scratch)
    steps = [f"mkdir -p {quoted}", f"shopt -s dotglob nullglob; rm -rf -- {quoted}/*" if replace else ":"]
    steps.append(f"tar -xzf {archive_path} -C {quoted} --no-same-owner && rm -f {archive_path}")
    steps.append(f"chmod -R a+rX {quoted}")
    if owner is not None:
        steps.append(f"chown -R {shlex.quote(str(owner))} {quoted}")
    staged = await sandbox.exec(" && ".join(steps), cwd="/", user=sandbox.admin_user, timeout_s=ORACLE_TIMEOUT_SEC)
    if staged.return_code != 0:
        raise SandboxError(f"copying {folder} to {target} failed: {(staged.stdout + staged.stderr).strip()[-500:]}")


async def prepare_step(task: Task, step: str, sandbox: Sandbox) -> None:
    """What Harbor runs before a step's agent: ``steps/<step>/workdir/`` copied into the working
    directory, then ``bash <workdir>/setup.sh``, then the step's ``[steps.healthcheck]``, all as the
    step's agent; a failing setup or healthcheck fails the step."""
    folder = task.path / "steps" / step / "workdir"
    if folder.is_dir():
        await _setup(task, folder, sandbox, task.agent_user_of(step))
    for index, config in enumerate(task.steps):
        if config.name == step and config.healthcheck is not None:
            key = f"{task.path / 'task.toml'}: steps[{index}].healthcheck"
            await run_healthcheck(sandbox, config.healthcheck, user=task.agent_user_of(step), key=key)


async def _setup(task: Task, folder: Path, sandbox: Sandbox, user: Optional[User]) -> None:
    await _stage_folder(sandbox, folder, sandbox.workdir, user, replace=False)
    if (folder / "setup.sh").is_file():
        setup = shlex.quote(f"{sandbox.workdir.rstrip('/')}/setup.sh")
        ran = await sandbox.exec(f"bash {setup}", cwd=sandbox.workdir, user=user, timeout_s=ORACLE_TIMEOUT_SEC)
        if ran.return_code != 0:
            raise TaskError(
                f"{folder / 'setup.sh'}: exited with {ran.return_code}: {(ran.stdout + ran.stderr).strip()[-500:]}"
            )


async def run_oracle(task: Task, step: Optional[str], sandbox: Sandbox) -> OracleRun:
    """Runs the oracle of the task (or of one step), as Harbor's oracle agent does."""
    folder = solution_dir(task, step)
    row_answer = task.task_data.get("solution") if task.path == task.dataset_root else None
    if folder is None and not isinstance(row_answer, str):
        if task.path == task.dataset_root:
            field_is = "is not a string" if "solution" in task.task_data else "is missing"
            raise TaskError(
                f"{task.path / 'rows.jsonl'}: row {task.id!r}: its `solution` field (the answer, a string) {field_is}, "
                "and the dataset has no solution/ folder: its oracle has nothing to run"
            )
        if step is not None:
            raise TaskError(
                f"{task.path / 'steps' / step}: no solution/ folder, and the task has none: the oracle of step "
                f"{step!r} has nothing to run"
            )
        raise TaskError(f"{task.path}: no solution/ folder: the oracle of {task.id!r} has nothing to run")
    user = task.agent_user_of(step)
    # A parameterized row's "solution" field is its answer.md.
    answer_file = folder / "answer.md" if folder is not None else None
    answer: Optional[bytes] = row_answer.encode("utf-8") if isinstance(row_answer, str) else None
    if answer is None and answer_file is not None and answer_file.is_file():
        answer = answer_file.read_bytes()
    if answer is not None:
        scratch = f"{sandbox.tmp_dir}/nemo-gym-oracle-{uuid.uuid4().hex}.b64"
        with tempfile.TemporaryDirectory(prefix="nemo-gym-oracle-") as local:
            encoded = Path(local) / "answer.b64"
            encoded.write_bytes(base64.b64encode(answer))
            await sandbox.upload_file(str(encoded), scratch)
        wrote = await sandbox.exec(
            f"base64 -d {shlex.quote(scratch)} > answer.md; status=$?; rm -f {shlex.quote(scratch)}; exit $status",
            cwd=sandbox.workdir,
            user=user,
            timeout_s=ORACLE_TIMEOUT_SEC,
        )
        if wrote.return_code != 0:
            raise SandboxError(f"the oracle could not write answer.md: {(wrote.stdout + wrote.stderr).strip()}")
        return OracleRun("answer.md", response(answer.decode("utf-8", errors="replace")))
    assert folder is not None
    if not (folder / "solve.sh").is_file():
        raise TaskError(f"{folder}: holds neither answer.md nor solve.sh")
    await _stage_folder(sandbox, folder, SOLUTION_DIR, None, replace=True)
    logs = shlex.quote(ORACLE_LOG.rsplit("/", 1)[0])
    log = shlex.quote(ORACLE_LOG)
    # The step before may have left its log, as another user (Harbor empties /logs/agent per step).
    made = await sandbox.exec(
        f"mkdir -p {logs} && chmod 777 {logs} && rm -f {log}", cwd="/", user=sandbox.admin_user, timeout_s=60
    )
    if made.return_code != 0:
        raise SandboxError(f"the oracle's log folder could not be made: {made.stderr.strip()}")
    env = {"DEBIAN_FRONTEND": "noninteractive", **_solution_env(task)}
    ran = await sandbox.exec(
        f"({SOLUTION_DIR}/solve.sh) > {log} 2>&1; status=$?; tail -c {OUTPUT_TAIL_CHARS} {log}; exit $status",
        cwd=sandbox.workdir,
        env=env,
        user=user,
        timeout_s=ORACLE_TIMEOUT_SEC,
    )
    return OracleRun("solve.sh", None, ran.return_code, ran.stdout)


def _solution_env(task: Task) -> Dict[str, str]:
    solution = task.config.get("solution")
    where = str(task.path / "task.toml")
    env = env_table(solution.get("env") if isinstance(solution, dict) else None, where, "solution.env")
    return resolve_env(env, os.environ, where=f"{where} [solution].env")


async def _hand_workdir(sandbox: Sandbox, owner: User, key: str) -> None:
    """Make ``owner`` (an agent's user, named by ``key`` of task.toml) the working directory's owner,
    as a task's Dockerfile would."""
    if sandbox_option(sandbox, "single_user", False):
        return
    name = shlex.quote(str(owner))
    handed = await sandbox.exec(
        f"chown {name} {shlex.quote(sandbox.workdir)}", cwd="/", user=sandbox.admin_user, timeout_s=60
    )
    if handed.return_code != 0:
        raise SandboxError(
            f"the working directory could not be handed to {name}, the agent's user ({key}): the image must "
            f"create it ({(handed.stdout + handed.stderr).strip()[-300:]})"
        )


async def validate_task(
    task: Task,
    open_sandbox: Callable[[Task, Path], Any],
    open_verifier: Optional[Callable[[Task], Callable[[VerifierSandboxSpec], Any]]] = None,
    *,
    secrets: Optional[Mapping[str, str]] = None,
) -> TaskResult:
    """Oracle then verification, for the task or each of its steps, in one sandbox.

    ``open_sandbox(task, workspace)`` returns an async context manager giving the sandbox, ready
    (``for_task.open_task_sandbox`` has awaited ``[environment.healthcheck]``). The workspace starts
    empty and is the agent's (``Task.workdir_owner``, see the module's docstring). A separate
    verifier runs where ``open_verifier(task)`` opens it (``separate.run_separate_verification``;
    without one, such a task fails validation); the agent's sandbox is stopped after the last step.
    ``secrets`` fill ``${NAME}`` in the verifier's env, as ``plan_verification``'s do.
    """
    result = TaskResult(task.id)
    steps: List[Optional[str]] = [step.name for step in task.steps] or [None]
    with tempfile.TemporaryDirectory(prefix="nemo-gym-validate-") as scratch:
        workspace = Path(scratch) / "workspace"
        workspace.mkdir()
        try:
            async with open_sandbox(task, workspace) as sandbox:
                owner = task.workdir_owner()
                if owner is not None:
                    key = "[agent].user" if task.agent_user is not None else "[steps.agent].user"
                    await _hand_workdir(sandbox, owner, key)
                for step in steps:
                    if step is not None:
                        await prepare_step(task, step, sandbox)
                    oracle = await run_oracle(task, step, sandbox)
                    plan = plan_verification(task, step=step, response=oracle.response, secrets=secrets)
                    if plan.mode != "separate":
                        outcome = await run_verification(plan, sandbox)
                    elif open_verifier is None:
                        raise TaskError(
                            f"{task.path / 'task.toml'}: the verifier is separate, and no sandbox for it was given"
                        )
                    else:
                        last = step == steps[-1]
                        opener = open_verifier(task)
                        outcome = await run_separate_verification(task, plan, sandbox, opener, stop_agent=last)
                    # The oracle's output is redacted too: a step before it may have left a secret behind.
                    output = redact(oracle.output, tuple(value for value in (secrets or {}).values() if value))
                    result.steps.append(StepResult(step, oracle.kind, outcome, "", oracle.status, output))
                    if not result.steps[-1].passed:
                        break
        except (TaskError, SandboxError) as error:
            result.error = str(error)
    return result


__all__ = [
    "FULL_MARKS",
    "ORACLE_LOG",
    "ORACLE_TIMEOUT_SEC",
    "OUTPUT_TAIL_CHARS",
    "SOLUTION_DIR",
    "OracleRun",
    "StepResult",
    "TaskResult",
    "prepare_step",
    "run_oracle",
    "solution_dir",
    "validate_task",
]
