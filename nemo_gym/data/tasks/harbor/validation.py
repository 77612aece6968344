"""``gym dataset validate``: run each task's oracle, verify, and check for full marks.

The oracle of a task with ``solution/answer.md`` writes that file byte for byte to ``answer.md`` in
the working directory, as the task's user, through ``base64`` (so the image needs that tool), and
submits its text as the response; with ``solution/solve.sh`` it runs that, as Harbor's oracle does.
A multi-step task runs each step's oracle (``steps/<name>/solution/``, else ``solution/``) and
verifies that step, in order, in one sandbox.
"""

from __future__ import annotations

import base64
import os
import shlex
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from nemo_gym.data.tasks.harbor.env_templates import resolve_env
from nemo_gym.data.tasks.harbor.sandboxes.base import Sandbox, SandboxError
from nemo_gym.data.tasks.harbor.staging import ShimFile, stage_archive
from nemo_gym.data.tasks.harbor.task import Task, TaskError, env_table
from nemo_gym.data.tasks.harbor.verification import VerificationOutcome, plan_verification, run_verification

FULL_MARKS = 1.0
ORACLE_TIMEOUT_SEC = 600


def answer_response(text: str) -> Dict[str, Any]:
    """A Responses API response whose ``final_text`` is exactly ``text``."""
    message = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
    return {"object": "response", "status": "completed", "output": [message]}


@dataclass
class StepResult:
    step: Optional[str]
    oracle: str
    outcome: Optional[VerificationOutcome] = None
    error: str = ""

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
        rewards = [step.outcome.reward for step in self.steps if step.outcome is not None]
        return sum(rewards) / len(rewards) if rewards else None


def _solution_dir(task: Task, step: Optional[str]) -> Optional[Path]:
    if step is not None and (task.path / "steps" / step / "solution").is_dir():
        return task.path / "steps" / step / "solution"
    folder = task.path / "solution"
    return folder if folder.is_dir() else None


async def run_oracle(task: Task, step: Optional[str], sandbox: Sandbox) -> Tuple[str, Optional[Dict[str, Any]]]:
    """Runs the oracle; returns ``(what ran, the response to submit or None)``."""
    folder = _solution_dir(task, step)
    row_answer = task.task_data.get("solution") if task.path == task.dataset_root else None
    if folder is None and not isinstance(row_answer, str):
        raise TaskError(f"{task.path}: no solution/ folder: the oracle of {task.id!r} has nothing to run")
    user = task.agent_user
    scratch = f"{sandbox.tmp_dir}/nemo-gym-oracle-{uuid.uuid4().hex}"
    # A parameterized row's "solution" field is its answer.md.
    answer_file = folder / "answer.md" if folder is not None else None
    answer: Optional[bytes] = row_answer.encode("utf-8") if isinstance(row_answer, str) else None
    if answer is None and answer_file is not None and answer_file.is_file():
        answer = answer_file.read_bytes()
    with tempfile.TemporaryDirectory(prefix="nemo-gym-oracle-") as local:
        if answer is not None:
            encoded = Path(local) / "answer.b64"
            encoded.write_bytes(base64.b64encode(answer))
            await sandbox.upload_file(str(encoded), f"{scratch}.b64")
            encoded_path = shlex.quote(scratch + ".b64")
            wrote = await sandbox.exec(
                f"base64 -d {encoded_path} > answer.md; status=$?; rm -f {encoded_path}; exit $status",
                cwd=sandbox.workdir,
                user=user,
                timeout_s=ORACLE_TIMEOUT_SEC,
            )
            if wrote.return_code != 0:
                raise SandboxError(f"the oracle could not write answer.md: {(wrote.stdout + wrote.stderr).strip()}")
            return "answer.md", answer_response(answer.decode("utf-8", errors="replace"))
        assert folder is not None
        if not (folder / "solve.sh").is_file():
            raise TaskError(f"{folder}: holds neither answer.md nor solve.sh")
        files = [
            ShimFile(path.relative_to(folder).as_posix(), path.read_bytes(), 0o755)
            for path in sorted(folder.rglob("*"))
            if path.is_file()
        ]
        archive = Path(local) / "solution.tgz"
        archive.write_bytes(stage_archive(files))
        await sandbox.upload_file(str(archive), f"{scratch}.tgz")
        unpacked = await sandbox.exec(
            f"mkdir -p {shlex.quote(scratch)} && tar -xzf {shlex.quote(scratch + '.tgz')} -C {shlex.quote(scratch)} "
            f"--no-same-owner && rm -f {shlex.quote(scratch + '.tgz')} && chmod -R a+rX {shlex.quote(scratch)}",
            cwd="/",
            user=sandbox.admin_user,
            timeout_s=ORACLE_TIMEOUT_SEC,
        )
        if unpacked.return_code != 0:
            raise SandboxError(f"the oracle's solution could not be staged: {unpacked.stderr.strip()}")
        env = {"DEBIAN_FRONTEND": "noninteractive", **_solution_env(task)}
        await sandbox.exec(
            f"{shlex.quote(scratch + '/solve.sh')} > /dev/null 2>&1; rm -rf {shlex.quote(scratch)}",
            cwd=sandbox.workdir,
            env=env,
            user=user,
            timeout_s=ORACLE_TIMEOUT_SEC,
        )
        return "solve.sh", None


def _solution_env(task: Task) -> Dict[str, str]:
    solution = task.config.get("solution")
    where = str(task.path / "task.toml")
    env = env_table(solution.get("env") if isinstance(solution, dict) else None, where, "solution.env")
    return resolve_env(env, os.environ, where=f"{where} [solution].env")


async def validate_task(task: Task, open_sandbox: Callable[[Task, Path], Any]) -> TaskResult:
    """Oracle then verification, for the task or each of its steps, in one sandbox.

    ``open_sandbox(task, workspace)`` returns an async context manager giving the sandbox. The
    workspace starts empty: the oracle, not a solved ``workspace/`` folder, must earn the marks
    (files a task starts with come from its image, so such tasks validate on ``--sandbox docker``).
    """
    result = TaskResult(task.id)
    steps: List[Optional[str]] = [step.name for step in task.steps] or [None]
    with tempfile.TemporaryDirectory(prefix="nemo-gym-validate-") as scratch:
        workspace = Path(scratch) / "workspace"
        workspace.mkdir()
        try:
            async with open_sandbox(task, workspace) as sandbox:
                for step in steps:
                    oracle, response = await run_oracle(task, step, sandbox)
                    plan = plan_verification(task, step=step, response=response)
                    outcome = await run_verification(plan, sandbox)
                    result.steps.append(StepResult(step, oracle, outcome))
                    if not result.steps[-1].passed:
                        break
        except (TaskError, SandboxError) as error:
            result.error = str(error)
    return result
