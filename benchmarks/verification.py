"""One verification end to end, on LocalSandbox and on Docker, of two tasks (a trivial ``verify()``,
which shows grading's own cost, and ``examples/answer-file``, whose verify also imports pathlib
and the SDK and reads its task_data), against two references:

- the floor: a bare interpreter start in the same sandbox (``python3 -c pass``, one exec); the
  target (issue 14) is at most 1.5x of it;
- a naive run: the same files uploaded one call each (then chmod, run, and one download per file),
  as a server that copies ``tests/`` file by file would; the sources only, without the shim's
  shipped bytecode (a hundred more uploads would only make it slower).

The sandbox is reused across rounds (the server verifies in the agent's running sandbox), as is the
image's Python, which the server learns from the first run on an image (its bytecode alone is staged
after). The floor and gym alternate, then gym and the naive run; the table reports medians and the
median of per-round ratios.

    python benchmarks/verification.py [--rounds N] [--skip-docker]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, Dict, List

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the suite's image builder

from nemo_gym.data.tasks.harbor.sandboxes import LocalSandbox  # noqa: E402
from nemo_gym.data.tasks.harbor.staging import shim_files  # noqa: E402
from nemo_gym.data.tasks.harbor.task import load_task  # noqa: E402
from nemo_gym.data.tasks.harbor.verification import (  # noqa: E402
    VerificationPlan,
    plan_verification,
    run_verification,
)

TASK = ROOT / "examples" / "answer-file"
TRIVIAL = "def verify():\n    return 1.0\n"


def trivial_task(folder: Path) -> Path:
    """A copy of the example task whose verifier is a trivial ``verify()``."""
    task = folder / "trivial"
    shutil.copytree(TASK, task)
    (task / "tests" / "verifier.py").write_text(TRIVIAL)
    return task


async def naive(sandbox: Any, plan: VerificationPlan, task_dir: Path, scratch: Path) -> None:
    """Per-file uploads of the same shim files (but their bytecode), then chmod, run, and per-file downloads."""
    task = load_task(task_dir)
    files = shim_files((task_dir / "tests" / "verifier.py").read_bytes(), task.task_data)
    files = [file for file in files if "__pycache__/" not in file.name]
    folders = sorted({str(Path(file.name).parent) for file in files} - {"."})
    await sandbox.exec(
        f"mkdir -p {sandbox.logs_dir} " + " ".join(f"{sandbox.tests_dir}/{f}" for f in folders),
        cwd="/",
        user=sandbox.admin_user,
    )
    for file in files:
        local = scratch / "upload"
        local.write_bytes(file.data)
        await sandbox.upload_file(str(local), f"{sandbox.tests_dir}/{file.name}")
    await sandbox.exec(f"chmod +x {sandbox.tests_dir}/test.sh", cwd="/", user=sandbox.admin_user)
    env = {} if sandbox.logs_dir == "/logs/verifier" else {"VERIFIER_LOGS_DIR": sandbox.logs_dir}
    run = (
        f"timeout -k 5 {plan.timeout_sec:g} bash {sandbox.tests_dir}/test.sh > {sandbox.logs_dir}/test-stdout.txt 2>&1"
    )
    await sandbox.exec(run, env=env)
    for name in ("reward.json", "test-stdout.txt"):
        await sandbox.download_file(f"{sandbox.logs_dir}/{name}", str(scratch / name))
    assert json.loads((scratch / "reward.json").read_text()) == {"reward": 1}


async def measure(sandbox: Any, task_dir: Path, rounds: int) -> Dict[str, float]:
    """The floor and gym alternated for ``rounds`` rounds, then gym and the naive run for a third as many
    (the naive run's hundred engine calls a round would otherwise disturb the pairs the target is read from)."""
    plan = plan_verification(load_task(task_dir))
    with tempfile.TemporaryDirectory() as scratch:

        async def floor() -> None:
            assert (await sandbox.exec("python3 -c pass")).return_code == 0

        async def gym() -> None:
            outcome = await run_verification(plan, sandbox)
            assert outcome.reward == 1.0, outcome

        async def per_file() -> None:
            await naive(sandbox, plan, task_dir, Path(scratch))

        for command in (floor, gym, per_file):  # warm up (gym twice: the image's Python is learned)
            await command()
        await gym()
        target = await _alternate({"floor": floor, "gym": gym}, rounds)
        against_naive = await _alternate({"gym": gym, "naive": per_file}, max(3, rounds // 3))
    result = {"floor": statistics.median(target["floor"]), "gym": statistics.median(target["gym"])}
    result["naive"] = statistics.median(against_naive["naive"])
    result["gym/floor"] = statistics.median(g / f for g, f in zip(target["gym"], target["floor"]))
    result["gym/naive"] = statistics.median(g / n for g, n in zip(against_naive["gym"], against_naive["naive"]))
    return result


async def _alternate(commands: Dict[str, Callable[[], Awaitable[None]]], rounds: int) -> Dict[str, List[float]]:
    times: Dict[str, List[float]] = {name: [] for name in commands}
    for _ in range(rounds):
        for name, command in commands.items():
            start = time.perf_counter()
            await command()
            times[name].append(time.perf_counter() - start)
    return times


def row(name: str, r: Dict[str, float]) -> str:
    cells = [name, f"{r['floor'] * 1e3:.1f} ms", f"{r['gym'] * 1e3:.1f} ms", f"{r['gym/floor']:.2f}x"]
    cells += [f"{r['naive'] * 1e3:.1f} ms", f"{r['gym/naive']:.2f}x"]
    return "| " + " | ".join(cells) + " |"


async def main_async(rounds: int, docker: bool) -> None:
    print(f"One verification, median of {rounds} alternated rounds (target: gym / floor <= 1.5x)\n")
    gym = "gym: one exec, the files on its stdin and stdout"
    print(f"| sandbox, task | floor: `python3 -c pass` | {gym} | gym / floor | naive per-file | gym / naive |")
    print("|---|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as scratch:
        tasks = {"`verify()`": trivial_task(Path(scratch)), "`examples/answer-file`": TASK}
        await _rows(tasks, rounds, docker)


async def _rows(tasks: Dict[str, Path], rounds: int, docker: bool) -> None:
    for name, task_dir in tasks.items():
        async with LocalSandbox(TASK / "workspace") as local:
            print(row(f"LocalSandbox, {name}", await measure(local, task_dir, rounds)), flush=True)
    if docker:
        from images import LABEL, engine, python_image

        from nemo_gym.data.tasks.harbor.sandboxes.docker import DockerSandbox

        client = engine()
        if client is None:
            print("| Docker | (no engine reachable) | | | | |")
            return
        image, volumes = python_image(client, "3.12")
        for name, task_dir in tasks.items():
            sandbox = DockerSandbox(image, workspace=TASK / "workspace", volumes=volumes, labels=LABEL, client=client)
            async with sandbox:
                print(row(f"Docker (python 3.12), {name}", await measure(sandbox, task_dir, rounds)), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--skip-docker", action="store_true")
    args = parser.parse_args()
    asyncio.run(main_async(args.rounds, not args.skip_docker))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
