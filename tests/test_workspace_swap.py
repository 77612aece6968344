"""The ``workspace`` the runner hands ``verify`` is the working directory's name, and a name can be
swapped: an agent that may write the folder above its working directory exchanges it with a folder or
a link of root's that holds what the verifier reads and it may not (red team 99 forged 1.0 in 6 of 20
runs, racing ``rename(2)`` with ``RENAME_EXCHANGE``). ``nemo_gym.verifiers.files`` reads only the
folder the runner handed over. Here ``verify`` makes the swap itself, where the agent's leftover
process would, so that each run meets it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.every_python  # the in-sandbox part: proven on every Python (noxfile)

SWAPPING = """
import os
from nemo_gym.verifiers.files import file_exists, read_text

def verify(workspace):
    before = read_text(workspace, "answer.txt")
    home = workspace.parent
    os.rename(workspace, home / "real")  # the agent's exchange, as two renames
    os.rename(home / "reference", workspace)
    by_name = (workspace / "answer.txt").read_text()
    return {
        "reward": float(read_text(workspace, "answer.txt") == "Paris"),
        "exists": float(file_exists(workspace, "answer.txt")),
        "under": float(read_text(workspace / "sub", "answer.txt") is not None),
        "before": float(before == "wrong"),
        "swapped": float(by_name == "Paris\\n"),  # a plain open by name reads the swapped-in folder
    }
"""


@pytest.mark.parametrize("kind", ["link", "folder"])
def test_a_working_directory_swapped_for_roots_folder_reads_as_no_answer(run_shim, tmp_path: Path, kind):
    reference = tmp_path / "golden" if kind == "link" else tmp_path / "reference"
    (reference / "sub").mkdir(parents=True)
    for folder in (reference, reference / "sub"):
        (folder / "answer.txt").write_text("Paris\n")
    if kind == "link":
        (tmp_path / "reference").symlink_to(reference)
    run = run_shim(SWAPPING, workspace_files={"answer.txt": "wrong\n"})
    assert run.reward == {"reward": 0.0, "exists": 0.0, "under": 0.0, "before": 1.0, "swapped": 1.0}, run.output


def test_the_handed_workspace_reads_from_anywhere_verify_stands(run_shim):
    run = run_shim(
        """
        import os
        from nemo_gym.verifiers.files import read_text

        def verify(workspace, state):
            os.chdir("/")
            inside = read_text(workspace / "sub", "nested.txt")
            return float(read_text(workspace, "answer.txt") == "42" and inside == "nested"
                         and read_text(state["workspace"], "answer.txt") == "42")
        """,
        workspace_files={"answer.txt": "42", "sub/nested.txt": "nested"},
    )
    assert run.reward == {"reward": 1.0}, run.output


def test_a_workspace_verify_does_not_declare_is_not_pinned(run_shim, tmp_path: Path):
    # Without ``workspace`` the runner hands no folder: a verify that reads a folder of its own choosing
    # (the working directory it finds itself in, say) reads it by name, as before.
    run = run_shim(
        """
        import os
        from nemo_gym.verifiers.files import read_text

        def verify(task_data):
            return float(read_text(os.getcwd(), "answer.txt") == "42")
        """,
        workspace_files={"answer.txt": "42"},
    )
    assert run.reward == {"reward": 1.0}, run.output
    assert os.path.isdir(tmp_path / "workspace")
