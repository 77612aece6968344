"""Verifications per second against the number of jobs (``batch.verify_rollouts``), on LocalSandbox
and on Docker, with the memory each setting takes.

Each (sandbox, jobs) setting runs in a child process of its own, so that its peak memory is its
own: the child opens ``--rollouts`` sandboxes of ``examples/answer-file`` (not timed: a server
verifies in sandboxes its rollouts already have), then verifies all of them ``--rounds`` times
with ``verify_rollouts(jobs=N)``; the rate is the median round's. Memory is the peak resident set
of the child: the host side's cost. (What runs in a sandbox is not counted: a container's memory is
the engine's, and a forked child's peak reads as its parent's, whatever the child itself uses.)

    python benchmarks/batch.py [--rollouts N] [--rounds N] [--jobs 1,2,4,8] [--skip-docker]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, Dict, List

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the suite's image builder

from nemo_gym.data.tasks.harbor.batch import Rollout, verify_rollouts  # noqa: E402
from nemo_gym.data.tasks.harbor.sandboxes import LocalSandbox  # noqa: E402
from nemo_gym.data.tasks.harbor.task import load_task  # noqa: E402
from nemo_gym.data.tasks.harbor.verification import plan_verification  # noqa: E402

TASK = ROOT / "examples" / "answer-file"


async def _one_setting(kind: str, jobs: int, rollouts: int, rounds: int) -> Dict[str, Any]:
    plan = plan_verification(load_task(TASK))
    async with AsyncExitStack() as stack:
        sandboxes: List[Any] = []
        if kind == "docker":
            from images import LABEL, engine, python_image

            from nemo_gym.data.tasks.harbor.sandboxes.docker import DockerSandbox

            client = engine()
            if client is None:
                return {"error": "no Docker engine is reachable"}
            image, volumes = python_image(client, "3.12")
            for _ in range(rollouts):
                sandbox = DockerSandbox(
                    image, workspace=TASK / "workspace", volumes=volumes, labels=LABEL, client=client
                )
                sandboxes.append(await stack.enter_async_context(sandbox))
        else:
            for _ in range(rollouts):
                sandboxes.append(await stack.enter_async_context(LocalSandbox(TASK / "workspace")))
        batch = [Rollout(plan, sandbox) for sandbox in sandboxes]
        seconds = []
        for _ in range(rounds):
            started = time.perf_counter()
            outcomes = await verify_rollouts(batch, jobs=jobs)
            seconds.append(time.perf_counter() - started)
            assert all(outcome.reward == 1.0 for outcome in outcomes), outcomes
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"rate": rollouts / statistics.median(seconds), "rss_mb": own}


def _child(kind: str, jobs: int, rollouts: int, rounds: int) -> Dict[str, Any]:
    ran = subprocess.run(
        [sys.executable, __file__, "--child", kind, str(jobs), "--rollouts", str(rollouts), "--rounds", str(rounds)],
        capture_output=True,
        text=True,
    )
    if ran.returncode != 0:
        return {"error": ran.stderr.strip().splitlines()[-1] if ran.stderr.strip() else f"exit {ran.returncode}"}
    result: Dict[str, Any] = json.loads(ran.stdout.splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", default="1,2,4,8")
    parser.add_argument("--skip-docker", action="store_true")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "JOBS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, jobs = args.child
        print(json.dumps(asyncio.run(_one_setting(kind, int(jobs), args.rollouts, args.rounds))))
        return 0
    settings = [int(jobs) for jobs in args.jobs.split(",")]
    kinds = ["local"] + ([] if args.skip_docker else ["docker"])
    print(
        f"verify_rollouts over {args.rollouts} rollouts of examples/answer-file, median of {args.rounds} rounds; "
        f"this machine has {len(os.sched_getaffinity(0))} cores\n"
    )
    print("| sandbox | jobs | verifications / s | vs jobs=1 | host process RSS peak |")
    print("|---|---:|---:|---:|---:|")
    for kind in kinds:
        base = None
        for jobs in settings:
            result = _child(kind, jobs, args.rollouts, args.rounds)
            if "error" in result:
                print(f"| {kind} | {jobs} | ({result['error']}) | | |", flush=True)
                continue
            base = base or result["rate"]
            cells = [kind, str(jobs), f"{result['rate']:.1f}", f"{result['rate'] / base:.2f}x"]
            cells.append(f"{result['rss_mb']:.0f} MB")
            print("| " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
