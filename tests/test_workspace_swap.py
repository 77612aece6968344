"""The ``workspace`` the runner hands ``verify`` is the working directory's name, and a name can be
swapped: an agent that may write the folder above its working directory exchanges it with a folder or
a link of root's that holds what the verifier reads and it may not (red team 99 forged 1.0 in 6 of 20
runs, racing ``rename(2)`` with ``RENAME_EXCHANGE``). ``nemo_gym.verifiers.files`` reads only the
folder the runner handed over. Here ``verify`` makes the swap itself, where the agent's leftover
process would, so that each run meets it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from support import make_bin

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


def test_workspace_and_state_hold_one_name(run_shim):
    # Red team 100: each was made by its own look at the working directory's name, and an exchange
    # between the two looks handed verify a name files did not know as the runner's.
    run = run_shim(
        """
        import sys

        def verify(workspace, state):
            return float(state["workspace"] is workspace and sys.modules["_gym_runner"].WORKSPACE[0] == str(workspace))
        """
    )
    assert run.reward == {"reward": 1.0}, run.output


# The agent's leftover exchanging the working directory's name with root's folder as fast as it can,
# as red teams 99 and 100 did, while verify reads the working directory by every name it has.
FLIPPING = """
import ctypes, os, sys, threading
from nemo_gym.verifiers.files import read_text

def verify(NAMES):
    libc = ctypes.CDLL(None, use_errno=True)
    home = os.path.dirname(os.getcwd())
    names = [os.path.join(home, name).encode() for name in ("workspace", "reference")]
    done = threading.Event()

    def flip():
        while not done.is_set():
            libc.renameat2(-100, names[0], -100, names[1], 2)  # RENAME_EXCHANGE

    sys.setswitchinterval(1e-5)
    flipper = threading.Thread(target=flip)
    flipper.start()
    seen = set()
    try:
        for _ in range(300):
            for where in WHERE:
                seen.add(read_text(where, "answer.txt"))
    finally:
        done.set()
        flipper.join()
    return {"reward": float("Paris" in seen), "wrong": float("wrong" in seen)}
"""


@pytest.mark.parametrize(
    "names, where",
    [
        ("workspace", "(workspace, str(workspace))"),
        ("workspace, state", "(workspace, state['workspace'])"),
        ("task_data", "('.', os.getcwd(), '')"),
    ],
    ids=["workspace", "state", "relative"],
)
def test_a_working_directory_exchanged_while_verify_reads_it_never_reads_roots_folder(
    run_shim, tmp_path: Path, tmp_path_factory, names, where
):
    if os.geteuid() != 0:
        pytest.skip("giving a folder to another user needs root (CI runs as root)")
    # The agent's home holds its working directory and a folder of root's it may not read; the
    # interpreter lies elsewhere (test.sh refuses one in a folder another user may change).
    (tmp_path / "reference").mkdir(mode=0o700)
    (tmp_path / "reference" / "answer.txt").write_text("Paris\n")
    os.chown(tmp_path, 1000, 1000)
    python = make_bin(tmp_path_factory.mktemp("bin"), python3=sys.executable, rm="/bin/rm")
    source = FLIPPING.replace("NAMES", names).replace("WHERE", where)
    run = run_shim(source, workspace_files={"answer.txt": "wrong\n"}, path=str(python))
    assert run.reward == {"reward": 0.0, "wrong": 1.0}, run.output


@pytest.mark.parametrize("mode, above", [(0o700, 0o755), (0o755, 0o755), (0o700, 0o555)])
def test_a_working_directory_the_agent_may_have_moved_in_and_not_read_is_not_graded(
    run_shim, tmp_path: Path, tmp_path_factory, mode, above
):
    # Red team 100: grading entered the working directory by name while the agent exchanged it for a
    # folder of root's beside it, so the runner stood in root's folder, and a verify reading
    # "answer.txt" read root's. Whatever the name: the agent may write the folder above, so the
    # folder the runner stands in must be one it could read.
    if os.geteuid() != 0:
        pytest.skip("giving a folder to another user needs root (CI runs as root)")
    python = make_bin(tmp_path_factory.mktemp("bin"), python3=sys.executable, rm="/bin/rm")
    (tmp_path / "workspace").mkdir(mode=mode)
    os.chmod(tmp_path / "workspace", mode)
    (tmp_path / "workspace" / "answer.txt").write_text("Paris")
    os.chown(tmp_path, 1000, 1000)
    os.chmod(tmp_path, above)  # red team 101: the agent closed the folder again after the exchange
    source = "def verify():\n    return float(open('answer.txt').read() == 'Paris')\n"
    run = run_shim(source, path=str(python))
    if mode == 0o755:  # one the agent may read: it could have copied what is in it anyway
        assert run.reward == {"reward": 1.0}, run.output
        return
    assert run.reward is None and run.returncode == 1, run.output
    assert "could have been put in its place by a user who may not read it" in run.output, run.output


def test_the_runner_and_files_judge_who_may_have_moved_what_alike():
    # The runner checks the working directory's folders, files what verify reads, by one rule twice:
    # the runner may not import the SDK (its start-up time), nor the SDK the runner.
    import importlib.util
    import itertools
    from types import SimpleNamespace

    from nemo_gym.data.tasks.harbor.bytecode import shim_dir
    from nemo_gym.verifiers import files

    spec = importlib.util.spec_from_file_location("_gym_runner_rule_under_test", shim_dir() / "_gym_runner.py")
    assert spec is not None and spec.loader is not None
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    modes = [0o40755, 0o40700, 0o40775, 0o40777, 0o41777, 0o41770, 0o40711, 0o40570, 0o100644, 0o100600, 0o100640]
    users, trusted = (0, 1000, 1001), (0, 1001)
    count = 0
    for folder_mode, entry_mode, folder_uid, entry_uid, gid in itertools.product(modes, modes, users, users, (0, 1000)):
        folder = SimpleNamespace(st_mode=folder_mode, st_uid=folder_uid, st_gid=gid)
        entry = SimpleNamespace(st_mode=entry_mode, st_uid=entry_uid, st_gid=1000 - gid)
        found = runner.movers(folder, entry, trusted)
        assert found == files._movers(folder, entry, trusted)
        for mover in found:
            assert runner.readable_by(entry, mover) == files._readable_by(entry, mover)
            count += 1
    assert count > 1000
