"""Task healthchecks against Harbor's own code: ``TaskConfig`` reads ``[environment.healthcheck]``,
``[steps.healthcheck]`` and a step's agent user as ``load_task`` does, and
``BaseEnvironment.run_healthcheck`` waits, counts and gives up as ``healthchecks.run_healthcheck``
does, on the same scripted attempts and clock. A timed-out attempt is where the two differ, as
decided (``healthchecks``' docstring)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import asdict
from types import SimpleNamespace
from typing import Any, Optional

import harbor.environments.base as harbor_base
import pytest
from harbor.models.task.config import HealthcheckConfig, TaskConfig
from healthcheck_cases import CASES, CHECK, TIMEOUT, Scripted

from nemo_gym.data.tasks.harbor.task import Healthcheck, load_task

pytestmark = pytest.mark.harbor

TABLES = [
    '[environment.healthcheck]\ncommand = "pg_isready"\n',
    '[environment.healthcheck]\ncommand = "curl -f localhost"\ninterval_sec = 0.5\ntimeout_sec = 2\n'
    "start_period_sec = 30\nstart_interval_sec = 0.25\nretries = 0\n",
    '[[steps]]\nname = "one"\n[steps.healthcheck]\ncommand = "true"\nretries = 7\n',
    '[agent]\nuser = "agent"\n[[steps]]\nname = "one"\n[steps.agent]\nuser = 1001\n',
    '[agent]\nuser = "agent"\n[[steps]]\nname = "one"\n',
]


def _fields(config: Optional[HealthcheckConfig]) -> Optional[dict]:
    return None if config is None else config.model_dump()


@pytest.mark.parametrize("toml", TABLES)
def test_harbor_reads_the_tables_as_load_task_does(tmp_path, toml):
    task = tmp_path / "task"
    (task / "tests").mkdir(parents=True)
    (task / "steps" / "one").mkdir(parents=True)
    (task / "task.toml").write_text(toml)
    ours = load_task(task)
    theirs = TaskConfig.model_validate_toml(toml)

    def as_dict(check: Optional[Healthcheck]) -> Optional[dict]:
        return None if check is None else asdict(check)

    assert as_dict(ours.environment.healthcheck) == _fields(theirs.environment.healthcheck)
    assert [as_dict(step.healthcheck) for step in ours.steps] == [_fields(s.healthcheck) for s in theirs.steps or []]
    # Who a step's agent (and its healthcheck) runs as: Harbor's Trial._step_agent_user.
    assert [ours.agent_user_of(step.name) for step in ours.steps] == [
        s.agent.user if s.agent.user is not None else theirs.agent.user for s in theirs.steps or []
    ]


class HarborScripted(Scripted):
    """The scripted attempts as Harbor's exec gives them: a timeout raises, as its Docker exec's does."""

    async def harbor_exec(self, command: str, timeout_sec: Optional[int] = None, **_: Any) -> Any:
        try:
            return await self.exec(command, timeout_s=timeout_sec)
        except Exception as error:
            raise RuntimeError(f"Command timed out after {timeout_sec} seconds") from error


def harbor_run(check: Healthcheck, sandbox: HarborScripted, monkeypatch: pytest.MonkeyPatch) -> None:
    """Harbor's loop, with its clock and sleep the sandbox's (its module's names, not the real ones)."""
    monkeypatch.setattr(harbor_base, "time", SimpleNamespace(monotonic=sandbox.clock))
    monkeypatch.setattr(harbor_base, "asyncio", SimpleNamespace(sleep=sandbox.sleep))
    environment = SimpleNamespace(exec=sandbox.harbor_exec, logger=logging.getLogger("harbor-parity"))
    asyncio.run(harbor_base.BaseEnvironment.run_healthcheck(environment, HealthcheckConfig(**asdict(check))))


@pytest.mark.parametrize(("script", "cost", "passes", "sleeps"), CASES)
def test_harbors_loop_waits_and_counts_as_ours(monkeypatch, script, cost, passes, sleeps):
    sandbox = HarborScripted(script, cost)
    if passes:
        harbor_run(CHECK, sandbox, monkeypatch)
    else:
        with pytest.raises(harbor_base.HealthcheckError):
            harbor_run(CHECK, sandbox, monkeypatch)
    assert sandbox.sleeps == sleeps  # the same table test_healthchecks holds ours to
    assert not sandbox.script


def test_harbor_gives_up_at_the_first_timed_out_attempt_where_we_count_it(monkeypatch):
    sandbox = HarborScripted([TIMEOUT, 0])
    with pytest.raises(RuntimeError, match="timed out"):
        harbor_run(CHECK, sandbox, monkeypatch)
    assert sandbox.script == [0]  # ours tries again (test_healthchecks: TIMEOUT_CASES)


def test_harbor_truncates_the_timeout_to_whole_seconds(monkeypatch):
    sandbox = HarborScripted([0])
    harbor_run(Healthcheck("probe", timeout_sec=2.75), sandbox, monkeypatch)
    assert sandbox.calls[0][1] == 2  # ours passes 2.75 (test_healthchecks)


def test_a_published_task_keeps_its_healthchecks_for_harbor(tmp_path):
    from harbor.models.task.task import Task as HarborTask

    from nemo_gym.data.tasks.harbor.publishing import publish_for_harbor

    source = tmp_path / "source" / "t"
    (source / "tests").mkdir(parents=True)
    (source / "tests" / "verifier.py").write_text("def verify():\n    return 1.0\n")
    (source / "instruction.md").write_text("Nothing to do.")
    (source / "task.toml").write_text(TABLES[1])
    publish_for_harbor(tmp_path / "source", tmp_path / "out")
    published = HarborTask(tmp_path / "out" / "t").config.environment.healthcheck
    assert _fields(published) == asdict(load_task(source).environment.healthcheck or Healthcheck("missing"))
