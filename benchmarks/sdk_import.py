"""SDK import cost: ``from nemo_gym.verifiers import <helper>`` vs the bare interpreter start.

For each Python 3.8-3.13 (the real pyenv binaries, not pyenv's shims), ``python3 -c pass`` and
``python3 -c "from nemo_gym.verifiers import <helper>"`` (same binary, same folder) run alternately;
the table reports each command's median and the median of the per-round ratios, which cancels most
of the machine's noise. Target (SPEC section 11): at most 1.3x.

The SDK is imported from a copy laid out as staging lays it out in a sandbox (an empty
``nemo_gym/__init__.py`` beside ``nemo_gym/verifiers/``). The main columns import it with its
``.pyc`` cached, as an installed package is and as a sandbox has it from the shim's shipped
bytecode; the last two import it with ``-B`` from a copy that has no ``__pycache__``, so its source
is compiled on every run, as in a sandbox whose Python has no shipped bytecode (the interpreter's
own start still reads the standard library's cached bytecode). The "+ call" column
also calls the helper once, which loads what the call needs (``re``, ``fractions``...): for
information, not held to the target.

    python benchmarks/sdk_import.py [--rounds N] [--helper NAME]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _pythons import pyenv_pythons

import nemo_gym.verifiers
from nemo_gym.data.tasks.harbor._resources import sdk_files

TARGET = 1.3
# One typical call per helper, for the "+ call" column.
CALLS = {
    "exact_match": "exact_match('Paris', 'paris', ignore_case=True)",
    "extract_answer": "extract_answer('so.\\nAnswer: 42')",
    "extract_boxed": "extract_boxed('so \\\\boxed{42}')",
    "extract_tag": "extract_tag('<answer>42</answer>')",
    "final_text": "final_text({'output': []})",
    "numeric_match": "numeric_match('42.0', 42)",
    "parse_number": "parse_number('1,234.5')",
}


def _lay_out(root: Path) -> Path:
    for name, content in sdk_files():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return root


def _time(command: List[str], cwd: Path, env: Dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def measure(python: Path, helper: str, rounds: int) -> Dict[str, float]:
    """Median times (s) of each command and median per-round ratios to the bare start, alternated."""
    env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"}
    with tempfile.TemporaryDirectory() as scratch:
        cached, fresh = _lay_out(Path(scratch) / "cached"), _lay_out(Path(scratch) / "fresh")
        importing = f"from nemo_gym.verifiers import {helper}"
        commands = {
            "bare": ([str(python), "-c", "pass"], cached),
            "import": ([str(python), "-c", importing], cached),
            "call": ([str(python), "-c", f"{importing}; {CALLS[helper]}"], cached),
            "sandbox": ([str(python), "-B", "-c", importing], fresh),
        }
        where = subprocess.run(
            [str(python), "-B", "-c", "import nemo_gym.verifiers as v; print(v.__file__)"],
            cwd=fresh,
            env=env,
            stdout=subprocess.PIPE,
            check=True,
        )
        assert where.stdout.decode().strip() == str(fresh / "nemo_gym" / "verifiers" / "__init__.py"), where.stdout
        for _ in range(3):  # warm the page cache and write the cached copy's .pyc
            for command, cwd in commands.values():
                _time(command, cwd, env)
        assert list((cached / "nemo_gym" / "verifiers").glob("__pycache__/*.pyc")), "no .pyc was written"
        times: Dict[str, List[float]] = {name: [] for name in commands}
        for _ in range(rounds):
            for name, (command, cwd) in commands.items():
                times[name].append(_time(command, cwd, env))
        assert not list(fresh.rglob("__pycache__")), "the sandbox copy must compile its source every run"
    result = {name: statistics.median(values) for name, values in times.items()}
    for name in ("import", "call", "sandbox"):
        result[f"{name}/bare"] = statistics.median(t / b for t, b in zip(times[name], times["bare"]))
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument(
        "--helper", default="numeric_match", choices=nemo_gym.verifiers.__all__, help="default: the largest module's"
    )
    args = parser.parse_args()
    print(
        f"`from nemo_gym.verifiers import {args.helper}`, median of {args.rounds} alternated rounds per Python "
        f"(target: <= {TARGET}x)\n"
    )
    print(
        "| Python | bare `-c pass` | import | ratio | target | import + call | ratio | "
        "`-B`, no `.pyc` (no shipped bytecode) | ratio |"
    )
    print("|---|---:|---:|---:|---|---:|---:|---:|---:|")
    worst = 0.0
    for version, python in pyenv_pythons().items():
        r = measure(python, args.helper, args.rounds)
        worst = max(worst, r["import/bare"])
        cells = [
            version,
            f"{r['bare'] * 1e3:.1f} ms",
            f"{r['import'] * 1e3:.1f} ms",
            f"{r['import/bare']:.2f}x",
            "ok" if r["import/bare"] <= TARGET else "MISSED",
            f"{r['call'] * 1e3:.1f} ms",
            f"{r['call/bare']:.2f}x",
            f"{r['sandbox'] * 1e3:.1f} ms",
            f"{r['sandbox/bare']:.2f}x",
        ]
        print("| " + " | ".join(cells) + " |", flush=True)
    return 0 if worst <= TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
