"""Runs /app/wc.py on a few sample files; exits 0 when every count is right."""

import subprocess
import sys
import tempfile
from pathlib import Path

PROGRAM = Path("/app/wc.py")

CASES = {
    "empty": ("", "0 0 0"),
    "one-line": ("hello world\n", "1 2 12"),
    "no-final-newline": ("a b\nc", "2 3 5"),
    "unicode": ("café au lait\n", "1 3 13"),
    "blank-lines": ("\n\n  x  \n", "3 1 8"),
}


def main():
    if not PROGRAM.is_file():
        print(f"FAIL: {PROGRAM} does not exist")
        return 1
    failures = 0
    with tempfile.TemporaryDirectory() as scratch:
        for name, (text, expected) in CASES.items():
            sample = Path(scratch) / name
            sample.write_bytes(text.encode("utf-8"))
            run = subprocess.run(
                [sys.executable, str(PROGRAM), str(sample)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                timeout=10,
            )
            got = run.stdout.decode("utf-8", "replace").strip()
            if run.returncode == 0 and got == expected:
                print(f"PASS {name}: {got}")
            else:
                failures += 1
                print(f"FAIL {name}: expected {expected!r}, got {got!r} (exit {run.returncode})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
