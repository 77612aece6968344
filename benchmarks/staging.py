"""Staging throughput and memory: one task's shim archive, built again and again on one core.

A typical task (SPEC section 11): 1 KB of task_data and a 100 KB response; then the same task
with more and more of its own ``tests/`` bytes, to show the cost is linear in them. The static part
(test.sh, runner, SDK) is built once per process, before the clock starts.

    python benchmarks/staging.py [--seconds S]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
import tracemalloc
from typing import Any, Dict, List

from nemo_gym.data.tasks.harbor.staging import TASK_LEVEL, ShimFile, stage_shim, static_files

VERIFIER = b"from nemo_gym.verifiers import final_text\n\ndef verify(response, task_data):\n    return 1.0\n"
TARGET_PER_SECOND = 1000
random.seed(0)
# Words for a varied 100 KB response: repeated text would flatter compression.
WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "for",
    "it",
    "as",
    "was",
    "with",
    "be",
    "by",
    "on",
    "not",
    "he",
    "this",
    "are",
    "or",
    "his",
    "from",
    "at",
    "which",
    "but",
    "have",
    "derivation",
    "answer",
    "number",
    "therefore",
    "compute",
    "result",
    "value",
    "step",
    "first",
    "second",
    "total",
    "sum",
    "product",
]


def typical_inputs() -> Dict[str, Any]:
    task_data = {"question": "q" * 900, "answer": "42", "tags": ["math", "arithmetic"]}
    words = [f"{random.choice(WORDS)}{random.randrange(100) if random.random() < 0.1 else ''}" for _ in range(25000)]
    text = " ".join(words)[: 100 * 1024]  # varied prose: repeated text would flatter compression
    response = {
        "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}]
    }
    return {"task_data": task_data, "response": response}


def task_files(total_bytes: int) -> List[ShimFile]:
    """Task helper files adding up to ``total_bytes``, in 10 KB files (incompressible, like real data)."""
    files, index = [], 0
    while total_bytes > 0:
        size = min(10 * 1024, total_bytes)
        files.append(ShimFile(f"data/{index:05}.bin", os.urandom(size)))
        total_bytes, index = total_bytes - size, index + 1
    return files


def rate(own_bytes: int, seconds: float, level: int = TASK_LEVEL) -> Dict[str, float]:
    inputs = typical_inputs()
    files = task_files(own_bytes)
    stage_shim(VERIFIER, inputs["task_data"], inputs["response"], files, compresslevel=level)  # warm up
    durations: List[float] = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline or len(durations) < 5:
        start = time.perf_counter()
        archive = stage_shim(VERIFIER, inputs["task_data"], inputs["response"], files, compresslevel=level)
        durations.append(time.perf_counter() - start)
    tracemalloc.start()
    stage_shim(VERIFIER, inputs["task_data"], inputs["response"], files, compresslevel=level)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    median = statistics.median(durations)
    return {"median": median, "per_second": 1 / median, "peak": peak, "archive": len(archive)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="time spent per row")
    args = parser.parse_args()
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core
    static_files()
    print("Staging one task on one core (1 KB task_data, 100 KB response, plus the task's own tests/ bytes)\n")
    print(
        "| task's own bytes | task part level | median per staging | stagings/s | peak memory | archive "
        "| time per own MB |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    typical_rate = 0.0
    base = None
    rows = [(0, TASK_LEVEL), (0, 1), (0, 6)] + [
        (own, TASK_LEVEL) for own in (100 * 1024, 1024 * 1024, 10 * 1024 * 1024)
    ]
    for own, level in rows:
        result = rate(own, args.seconds, level)
        if own == 0 and level == TASK_LEVEL:
            typical_rate, base = result["per_second"], result["median"]
        assert base is not None
        per_mb = "" if own == 0 else f"{(result['median'] - base) / (own / 2**20) * 1e3:.1f} ms"
        cells = [
            f"{own // 1024} KB",
            str(level),
            f"{result['median'] * 1e3:.2f} ms",
            f"{result['per_second']:,.0f}",
        ]
        cells += [f"{result['peak'] / 2**20:.1f} MB", f"{result['archive'] / 1024:.0f} KB", per_mb]
        print("| " + " | ".join(cells) + " |")
    verdict = "ok" if typical_rate > TARGET_PER_SECOND else "MISSED"
    print(
        f"\ntypical task: {typical_rate:,.0f} stagings/s on one core (target: well over {TARGET_PER_SECOND}) {verdict}"
    )
    return 0 if typical_rate > TARGET_PER_SECOND else 1


if __name__ == "__main__":
    raise SystemExit(main())
