"""Shim overhead: ``bash test.sh`` with a trivial sync verify vs the bare interpreter start.

For each Python 3.8-3.13 (the real pyenv binaries, not pyenv's shims), the laid-out shim and
``python3 -c pass`` (same binary) run alternately; the table reports the median of the per-round
ratios, which cancels most of the machine's noise. Target (SPEC section 11): at most 1.5x.

    python benchmarks/shim_startup.py [--rounds N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _pythons import pyenv_pythons

from nemo_gym.data.tasks.harbor.staging import lay_out, shim_files

TRIVIAL = b"def verify():\n    return 1.0\n"
TYPICAL = b"def verify(workspace, task_data):\n    return 1.0\n"
TARGET = 1.5


def _time(command: list, cwd: Path, env: dict) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def measure(python: Path, rounds: int) -> dict:
    """Median times (s) of each command and median per-round ratios, the commands alternated."""
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        workspace, bin_dir = root / "workspace", root / "bin"
        for folder in (workspace, bin_dir):
            folder.mkdir()
        (bin_dir / "python3").symlink_to(python)
        lay_out(root / "trivial", shim_files(TRIVIAL, {"answer": "42"}))
        lay_out(root / "typical", shim_files(TYPICAL, {"answer": "42"}))
        env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "VERIFIER_LOGS_DIR": str(root / "logs")}
        commands = {
            "bare": [str(bin_dir / "python3"), "-c", "pass"],
            "floor": [str(bin_dir / "python3"), "-c", "import json, pathlib"],
            "trivial": ["bash", str(root / "trivial" / "test.sh")],
            "typical": ["bash", str(root / "typical" / "test.sh")],
        }
        for _ in range(3):  # warm the page cache
            for command in commands.values():
                _time(command, workspace, env)
        assert (root / "logs" / "reward.json").read_text().strip() == '{"reward": 1.0}'
        times: dict = {name: [] for name in commands}
        for _ in range(rounds):
            for name, command in commands.items():
                times[name].append(_time(command, workspace, env))
    result = {name: statistics.median(values) for name, values in times.items()}
    for shim, base in (("trivial", "bare"), ("typical", "bare"), ("typical", "floor")):
        result[f"{shim}/{base}"] = statistics.median(s / b for s, b in zip(times[shim], times[base]))
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    print(f"Shim start-up, median of {args.rounds} alternated rounds per Python (target: <= {TARGET}x)\n")
    print(
        "| Python | bare `-c pass` | `bash test.sh`, `verify()` | ratio | target | "
        "`verify(workspace, task_data)` | ratio to bare | ratio to `-c 'import json, pathlib'` |"
    )
    print("|---|---:|---:|---:|---|---:|---:|---:|")
    worst = 0.0
    for version, python in pyenv_pythons().items():
        r = measure(python, args.rounds)
        worst = max(worst, r["trivial/bare"])
        verdict = "ok" if r["trivial/bare"] <= TARGET else "MISSED"
        cells = [
            version,
            f"{r['bare'] * 1e3:.1f} ms",
            f"{r['trivial'] * 1e3:.1f} ms",
            f"{r['trivial/bare']:.2f}x",
        ]
        cells += [
            verdict,
            f"{r['typical'] * 1e3:.1f} ms",
            f"{r['typical/bare']:.2f}x",
            f"{r['typical/floor']:.2f}x",
        ]
        print("| " + " | ".join(cells) + " |")
    return 0 if worst <= TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
