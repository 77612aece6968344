"""Shim start-up: every shipped example's verifier, as published and run as ``bash tests/test.sh``,
against a bare interpreter start (``python3 -c pass``, the same real binary).

For each Python 3.8-3.13 (the real pyenv binaries, not pyenv's shims) the commands run alternately
and each cell is the median of the per-round ratios to the bare start, which cancels most of the
machine's noise. Rows:

- each ``examples/*`` task with a ``verifier.py``, laid out as publishing lays out its ``tests/``
  (the shim, ``task_data.json``, ``response.json``) and run from a copy of its workspace; the run
  must score what the example's oracle scores, or the benchmark stops;
- ``verify()`` and ``async def verify()`` returning 1.0: the shim's own cost, and an async verify
  that never waits on the event loop (run without importing asyncio);
- ``verify(response, task_data)`` comparing the response's final text with a field: the cost of
  reading both files (without the json package) and of an SDK helper that needs no ``re``;
- ``-c "import pathlib"``: the floor of any verify that declares ``workspace``, a ``pathlib.Path``
  by the contract (the interpreter's own import of pathlib, nothing of the shim's).

Targets (issue 14): 1.5x for a verifier, 1.6x for an async one; the pathlib row is reported, not
judged. Exit status 1 when a judged row misses its target on any Python.

    python benchmarks/shim_startup.py [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _pythons import pyenv_pythons

from nemo_gym.data.tasks.harbor.responses import response
from nemo_gym.data.tasks.harbor.staging import lay_out, shim_files
from nemo_gym.data.tasks.harbor.task import load_task

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
TARGET, ASYNC_TARGET = 1.5, 1.6
TRIVIAL = b"def verify():\n    return 1.0\n"
TRIVIAL_ASYNC = b"async def verify():\n    return 1.0\n"
# A response-graded verifier that reads its task's fields and needs no regular expression: the
# runner reads both files without the json package.
FIELDS = (
    b"from nemo_gym.verifiers import exact_match, final_text\n\n\n"
    b"def verify(response, task_data):\n"
    b'    return exact_match(final_text(response), task_data["answer"])\n'
)


def _time(command: List[str], cwd: Path, env: Dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def _example_rows() -> List[Tuple[str, Path, bytes, dict, Optional[str]]]:
    """(name, example folder, verifier.py, task_data, the oracle's answer.md) of every example with a
    verifier.py."""
    rows = []
    for folder in sorted(EXAMPLES.iterdir()):
        verifier = folder / "tests" / "verifier.py"
        if not verifier.is_file():
            continue
        answer = folder / "solution" / "answer.md"
        text = answer.read_text() if answer.is_file() else None
        rows.append((f"`examples/{folder.name}`", folder, verifier.read_bytes(), load_task(folder).task_data, text))
    return rows


def measure(python: Path, rounds: int) -> Dict[str, Tuple[float, float]]:
    """Each row's (median time in s, median per-round ratio to the bare start)."""
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        bin_dir = root / "bin"
        bin_dir.mkdir()
        (bin_dir / "python3").symlink_to(python)
        env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "VERIFIER_LOGS_DIR": str(root / "logs")}
        empty = root / "empty"
        empty.mkdir()
        commands: Dict[str, Tuple[List[str], Path]] = {
            "bare `python3 -c pass`": ([str(bin_dir / "python3"), "-c", "pass"], empty),
            "`python3 -c 'import pathlib'` (floor with `workspace`)": (
                [str(bin_dir / "python3"), "-c", "import pathlib"],
                empty,
            ),
        }
        expected: Dict[str, float] = {}
        for name, source in (("`verify()`", TRIVIAL), ("`async def verify()`, never waits", TRIVIAL_ASYNC)):
            folder = root / f"shim-{len(commands)}"
            lay_out(folder, shim_files(source, {}))
            commands[name] = (["bash", str(folder / "test.sh")], empty)
            expected[name] = 1.0
        name = "`verify(response, task_data)`: `exact_match(final_text(response), ...)`"
        folder = root / f"shim-{len(commands)}"
        lay_out(folder, shim_files(FIELDS, {"answer": "Paris"}, response("Paris")))
        commands[name] = (["bash", str(folder / "test.sh")], empty)
        for name, example, verifier, task_data, answer in _example_rows():
            # The oracle's answer, as `gym-harbor dataset validate` gives it: a real, passing run.
            folder = root / f"example-{len(commands)}"
            workspace = folder / "workspace"
            shutil.copytree(example / "workspace", workspace)
            if answer is None:
                subprocess.run(["bash", str(example / "solution" / "solve.sh")], cwd=workspace, env=env, check=True)
            else:
                (workspace / "answer.md").write_text(answer)
            lay_out(folder / "tests", shim_files(verifier, task_data, None if answer is None else response(answer)))
            commands[name] = (["bash", str(folder / "tests" / "test.sh")], workspace)
        logs = root / "logs" / "reward.json"
        for name, (command, cwd) in commands.items():  # warm the page cache, and check each run scores
            for _ in range(3):
                _time(command, cwd, env)
            if command[0] == "bash":
                reward = json.loads(logs.read_text())["reward"]
                if reward != expected.get(name, 1.0):
                    raise SystemExit(f"{name} on {python} scored {reward}: the benchmark must time passing runs")
                logs.unlink()
        times: Dict[str, List[float]] = {name: [] for name in commands}
        for _ in range(rounds):
            for name, (command, cwd) in commands.items():
                times[name].append(_time(command, cwd, env))
    bare = times["bare `python3 -c pass`"]
    return {
        name: (statistics.median(values), statistics.median(v / b for v, b in zip(values, bare)))
        for name, values in times.items()
    }


def _target(name: str) -> Optional[float]:
    if name.startswith("bare") or "floor" in name:
        return None
    return ASYNC_TARGET if "async" in name else TARGET


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    pythons = pyenv_pythons()
    results = {version: measure(python, args.rounds) for version, python in pythons.items()}
    rows = list(next(iter(results.values())))
    print(f"Shim start-up: median of {args.rounds} alternated rounds, ratio to the bare start of the same Python\n")
    print("| verifier, `bash tests/test.sh` | " + " | ".join(pythons) + " | target |")
    print("|---|" + "---:|" * len(pythons) + "---|")
    missed = False
    for name in rows:
        target = _target(name)
        cells = []
        for version in pythons:
            seconds, ratio = results[version][name]
            if name.startswith("bare"):
                cells.append(f"{seconds * 1e3:.1f} ms")
                continue
            late = target is not None and ratio > target
            missed = missed or late
            cells.append(f"**{ratio:.2f}x**" if late else f"{ratio:.2f}x")
        verdict = "" if target is None else f"<= {target}x"
        print(f"| {name} | " + " | ".join(cells) + f" | {verdict} |")
    print("\nBold: over the target.")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
