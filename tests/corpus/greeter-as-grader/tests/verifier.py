import os
import subprocess
import sys

from nemo_gym.verifiers import exact_match
from nemo_gym.verifiers.files import file_exists


def _run(workspace, *args):
    return subprocess.run(
        [sys.executable, str(workspace / "greet.py"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        timeout=10,
        cwd=str(workspace),
    )


def verify(workspace, task_data):
    if os.geteuid() == 0:
        raise RuntimeError("this verifier runs the agent's program: give it [verifier].user, not root")
    if not file_exists(workspace, "greet.py"):
        return 0.0
    for name in task_data["names"]:
        run = _run(workspace, name)
        if run.returncode != 0 or not exact_match(run.stdout.decode("utf-8", "replace"), f"Hello, {name}!"):
            return 0.0
    usage = _run(workspace)
    return float(usage.returncode == 2 and usage.stdout == b"" and usage.stderr.strip() != b"")
