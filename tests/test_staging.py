"""The staged archive: deterministic bytes, safe members, the wheel's own shim."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path
from typing import Any

import pytest

from nemo_gym.data.tasks.harbor import staging
from nemo_gym.data.tasks.harbor.staging import (
    ShimFile,
    StagingError,
    shim_files,
    stage_archive,
    task_test_files,
)

VERIFIER = b"def verify(task_data):\n    return task_data['x']\n"


def members(archive: bytes) -> dict:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        return {member.name: member for member in tar.getmembers()}


def test_identical_inputs_give_identical_bytes(tmp_path):
    tests = tmp_path / "tests"
    (tests / "data").mkdir(parents=True)
    (tests / "data" / "a.txt").write_text("a")
    (tests / "helper.py").write_text("x = 1\n")
    first = stage_archive(shim_files(VERIFIER, {"x": 1}, {"output": []}, task_test_files(tests)))
    os.utime(tests / "helper.py", (0, 0))  # times and owners never reach the archive
    second = stage_archive(shim_files(VERIFIER, {"x": 1}, {"output": []}, task_test_files(tests)))
    assert first == second
    assert stage_archive(shim_files(VERIFIER, {"x": 2})) != stage_archive(shim_files(VERIFIER, {"x": 1}))


def test_identical_bytes_across_processes(tmp_path):
    script = textwrap.dedent(
        """
        import sys
        from nemo_gym.data.tasks.harbor.staging import shim_files, stage_archive
        sys.stdout.buffer.write(stage_archive(shim_files(b"def verify():\\n    return 1\\n", {"x": 1})))
        """
    )
    outputs = [
        subprocess.run([sys.executable, "-c", script], stdout=subprocess.PIPE, check=True, cwd=tmp_path).stdout
        for _ in range(2)
    ]
    assert outputs[0] == outputs[1] == stage_archive(shim_files(b"def verify():\n    return 1\n", {"x": 1}))


def test_archive_members_are_sorted_and_fixed(tmp_path):
    archive = members(stage_archive(shim_files(VERIFIER, {"x": 1}, {"output": []})))
    names = list(archive)
    assert names == sorted(names)
    for name in (
        "test.sh",
        "gym_runner.py",
        "_gym_runner.py",
        "verifier.py",
        "task_data.json",
        "response.json",
        "nemo_gym/__init__.py",
        "nemo_gym/verifiers/__init__.py",
        "nemo_gym/verifiers/files.py",
    ):
        assert name in archive, name
    assert archive["test.sh"].mode == 0o755
    assert all(m.mtime == 0 and m.uid == 0 and m.gid == 0 and (m.isfile() or m.isdir()) for m in archive.values())
    assert not any(m.name.startswith("/") or ".." in m.name.split("/") for m in archive.values())


def test_no_response_file_without_a_response():
    assert "response.json" not in members(stage_archive(shim_files(VERIFIER, {})))


@pytest.mark.parametrize("name", ["../x", "/etc/passwd", "a/../../x", "", "a//b", "./x", "a\\b"])
def test_unsafe_member_names_are_refused(name):
    with pytest.raises(StagingError, match="refusing to stage"):
        stage_archive([ShimFile(name, b"x")])


def test_symlinks_leaving_the_task_folder_are_refused(tmp_path):
    task = tmp_path / "task"
    (task / "tests").mkdir(parents=True)
    (tmp_path / "secret").write_text("s")
    (task / "tests" / "leak").symlink_to(tmp_path / "secret")
    with pytest.raises(StagingError, match="/tests/leak is a symlink leading out of the task folder"):
        task_test_files(task / "tests")
    (task / "tests" / "leak").unlink()
    (task / "tests" / "dir").symlink_to(tmp_path)
    with pytest.raises(StagingError, match="tests/dir"):
        task_test_files(task / "tests")


def test_symlinks_inside_the_task_folder_are_staged_as_files(tmp_path):
    task = tmp_path / "task"
    (task / "tests").mkdir(parents=True)
    (task / "shared.txt").write_text("shared")
    (task / "tests" / "data.txt").symlink_to(task / "shared.txt")
    assert task_test_files(task / "tests") == [ShimFile("data.txt", b"shared")]


def test_a_fifo_in_tests_is_refused(tmp_path):
    (tmp_path / "tests").mkdir()
    os.mkfifo(tmp_path / "tests" / "pipe")
    with pytest.raises(StagingError, match="/tests/pipe is not a regular file"):
        task_test_files(tmp_path / "tests")


def test_task_data_that_is_not_json_is_refused():
    with pytest.raises(StagingError, match="task_data cannot be written as JSON"):
        shim_files(VERIFIER, {"x": float("nan")})
    with pytest.raises(StagingError, match="task_data must be a JSON object"):
        shim_files(VERIFIER, [1])  # type: ignore[arg-type]
    deep: Any = 0
    for _ in range(100_000):  # past the encoder's depth on every Python (about 990 before 3.12)
        deep = [deep]
    with pytest.raises(StagingError, match="the response cannot be written as JSON: it nests too deep"):
        shim_files(VERIFIER, {}, {"output": deep})


def test_static_part_is_built_once():
    assert staging.static_files() is staging.static_files()


def test_an_installed_wheel_stages_the_shim(tmp_path):
    """Build a wheel, install it into a folder of its own, and stage from there: no checkout needed."""
    root = Path(__file__).resolve().parent.parent
    wheels, target = tmp_path / "wheels", tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(wheels), str(root)],
        check=True,
    )
    [wheel] = list(wheels.glob("*.whl"))
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
    )
    script = textwrap.dedent(
        """
        import pathlib, sys
        from nemo_gym.data.tasks.harbor import _resources, staging
        assert str(_resources.shim_dir()).startswith(sys.argv[1]), _resources.shim_dir()
        staging.lay_out(pathlib.Path(sys.argv[2]), staging.shim_files(b"def verify():\\n    return 0.5\\n", {}))
        """
    )
    laid = tmp_path / "laid"
    env = {"PYTHONPATH": str(target), "PATH": os.environ["PATH"]}
    subprocess.run([sys.executable, "-c", script, str(target), str(laid)], check=True, cwd=tmp_path, env=env)
    logs = tmp_path / "logs"
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python3").symlink_to(sys.executable)
    (tmp_path / "workspace").mkdir()
    subprocess.run(
        ["/bin/bash", str(laid / "test.sh")],
        check=True,
        cwd=tmp_path / "workspace",
        env={"PATH": str(tmp_path / "bin"), "VERIFIER_LOGS_DIR": str(logs)},
    )
    assert (logs / "reward.json").read_text().strip() == '{"reward": 0.5}'


def test_each_run_archive_holds_its_own_secrets_and_nothing_else():
    """The files' blocks are built once per plan; the run's key never is: two runs of one plan each
    carry their own key, in their own out folder, readable by root alone, and every file lands in
    place with its run mode."""
    files = tuple(shim_files(VERIFIER, {"x": 1}))
    archives = [
        staging.run_archive(files, top="tests", stage="unused", private={"key": key}, out=out)
        for key, out in ((b"first-key", ".gym-out-1"), (b"second-key", ".gym-out-2"))
    ]
    for archive, key, out in zip(archives, (b"first-key", b"second-key"), (".gym-out-1", ".gym-out-2")):
        assert len(archive) % tarfile.RECORDSIZE == 0
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            found = {member.name: member for member in tar.getmembers()}
            assert tar.extractfile(found[f"tests/{out}/key"]).read() == key
            assert [name for name in found if ".gym-out" in name] == [f"tests/{out}", f"tests/{out}/key"]
            assert found[f"tests/{out}/key"].mode == 0o400
            assert found["tests"].mode == found[f"tests/{out}"].mode == 0o700
            assert found["tests/verifier.py"].mode == 0o600 and found["tests/test.sh"].mode == 0o755
            for file in files:
                assert tar.extractfile(found[f"tests/{file.name}"]).read() == file.data
            assert sorted(found) == sorted({"tests", f"tests/{out}", f"tests/{out}/key"} | _with_folders(files))
            assert b"first-key" not in archive or key == b"first-key"


def _with_folders(files) -> set:
    names = set()
    for file in files:
        parts = f"tests/{file.name}".split("/")
        names.update("/".join(parts[: index + 1]) for index in range(1, len(parts)))
    return names


def test_a_run_archive_names_each_member_once_with_the_tasks_files_in_the_shims_folders():
    # The static part's blocks are built once, the task's part each run: folders they share (the
    # task's own __pycache__, say) appear once, and a task's files are never taken for the shim's.
    own = [ShimFile("__pycache__/checker.cpython-312.pyc", b"own"), ShimFile("nemo_gym/data.txt", b"d")]
    files = tuple(shim_files(VERIFIER, {"x": 1}, None, own))
    archive = staging.run_archive(files, top="tests", stage="unused", private={"key": b"k"}, out=".gym-out-1")
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        names = tar.getnames()
        assert len(names) == len(set(names)), sorted(name for name in names if names.count(name) > 1)
        assert tar.extractfile("tests/__pycache__/checker.cpython-312.pyc").read() == b"own"
        assert tar.extractfile("tests/nemo_gym/data.txt").read() == b"d"
        assert sorted(names) == sorted({"tests", "tests/.gym-out-1", "tests/.gym-out-1/key"} | _with_folders(files))
