"""nemo_gym.verifiers.files against hostile workspaces: nothing outside, nothing that blocks."""

from __future__ import annotations

import errno
import os
import socket
import threading
from pathlib import Path
from typing import Optional

import pytest

from nemo_gym.verifiers.files import file_exists, read_text, text_file_equals

pytestmark = pytest.mark.every_python  # the in-sandbox part: proven on every Python (noxfile)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    (root / "sub").mkdir(parents=True)
    (root / "answer.txt").write_text("42\n")
    (root / "sub" / "nested.txt").write_text("nested")
    (root / "crlf.txt").write_bytes(b"42\r\n")
    (root / "two-newlines.txt").write_bytes(b"42\n\n")
    (root / "inner-crlf.txt").write_bytes(b"a\r\nb\r\n")
    (root / "bad-utf8.txt").write_bytes(b"\xff\xfe4")
    (root / "empty.txt").write_bytes(b"")
    (tmp_path / "secret.txt").write_text("outside")
    (root / "link-out").symlink_to(tmp_path / "secret.txt")
    (root / "link-abs").symlink_to("/etc/passwd")
    (root / "dir-out").symlink_to(tmp_path)
    (root / "link-in").symlink_to("answer.txt")
    (root / "sub" / "link-up").symlink_to("../answer.txt")
    (root / "zero").symlink_to("/dev/zero")
    (root / "null").symlink_to("/dev/null")
    (root / "dangling").symlink_to("missing.txt")
    os.mkfifo(root / "fifo")
    return root


@pytest.fixture
def golden(tmp_path: Path) -> Path:
    """A folder outside the workspace holding the task's answer, where the agent's links point."""
    folder = tmp_path / "golden"
    folder.mkdir()
    (folder / "answer.txt").write_text("golden")
    return folder


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A folder above the workspace, the agent's to change."""
    folder = tmp_path / "home"
    folder.mkdir()
    return folder


READS = [
    ("answer.txt", "42"),
    ("sub/nested.txt", "nested"),
    ("./answer.txt", "42"),
    ("sub//nested.txt", "nested"),
    ("crlf.txt", "42"),
    ("two-newlines.txt", "42\n"),  # only one newline is dropped
    ("inner-crlf.txt", "a\r\nb"),  # no newline translation
    ("empty.txt", ""),
    ("link-in", "42"),  # a symlink that stays inside is followed
    ("sub/link-up", "42"),
    ("bad-utf8.txt", None),
    ("link-out", None),
    ("link-abs", None),
    ("dir-out/secret.txt", None),
    ("zero", None),  # /dev/zero behind a symlink: never read
    ("null", None),
    ("fifo", None),  # a FIFO: must not block
    ("sub", None),  # a directory
    ("dangling", None),
    ("missing.txt", None),
    ("answer.txt/x", None),
]


@pytest.mark.parametrize("path, expected", READS)
def test_read_text(workspace, path, expected):
    assert read_text(workspace, path) == expected
    assert read_text(str(workspace), Path(path)) == expected
    assert file_exists(workspace, path) is (expected is not None or path == "bad-utf8.txt")


def test_keep_trailing_newline(workspace):
    assert read_text(workspace, "answer.txt", strip_trailing_newline=False) == "42\n"
    assert read_text(workspace, "crlf.txt", strip_trailing_newline=False) == "42\r\n"


def test_a_socket_is_not_a_file(workspace, tmp_path):
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    os.chdir(workspace)  # AF_UNIX paths are short: bind by a relative name
    try:
        server.bind("sock")
        assert read_text(workspace, "sock") is None
        assert not file_exists(workspace, "sock")
    finally:
        server.close()
        os.chdir(tmp_path)


def test_a_fifo_never_blocks(workspace):
    results = []
    thread = threading.Thread(target=lambda: results.append(read_text(workspace, "fifo")), daemon=True)
    thread.start()
    thread.join(timeout=10)
    assert results == [None], "read_text blocked on a FIFO"


def test_a_workspace_that_is_a_symlink_is_followed(workspace, tmp_path):
    (tmp_path / "alias").symlink_to(workspace)
    assert read_text(tmp_path / "alias", "answer.txt") == "42"
    assert read_text(tmp_path / "alias", "link-out") is None


@pytest.mark.parametrize("path", ["/etc/passwd", "../secret.txt", "sub/../../secret.txt", "a/../answer.txt", "", "/"])
def test_absolute_and_climbing_paths_are_the_authors_bug(workspace, path):
    for function in (read_text, file_exists):
        with pytest.raises(ValueError, match=function.__name__):
            function(workspace, path)


def test_text_file_equals(workspace):
    assert text_file_equals(workspace, "answer.txt", "42")
    assert text_file_equals(workspace, "answer.txt", "42\n")
    assert text_file_equals(workspace, "answer.txt", "42\n", strip_trailing_newline=False)
    assert not text_file_equals(workspace, "answer.txt", "42", strip_trailing_newline=False)
    assert not text_file_equals(workspace, "answer.txt", "43")
    assert not text_file_equals(workspace, "link-out", "outside")
    assert not text_file_equals(workspace, "missing.txt", "")
    with pytest.raises(TypeError, match="text_file_equals"):
        text_file_equals(workspace, "answer.txt", 42)  # type: ignore[arg-type]


def test_reads_are_capped(workspace):
    (workspace / "big.txt").write_text("x" * 100)
    assert read_text(workspace, "big.txt", max_bytes=100) == "x" * 100
    assert read_text(workspace, "big.txt", max_bytes=99) is None
    assert not text_file_equals(workspace, "big.txt", "x" * 100, max_bytes=99)
    with pytest.raises(ValueError, match="max_bytes"):
        read_text(workspace, "big.txt", max_bytes=-1)


def test_a_huge_sparse_file_costs_no_memory(workspace):
    import subprocess
    import sys

    with open(workspace / "sparse.txt", "wb") as handle:
        handle.truncate(2 << 30)  # 2 GiB of holes: reading it whole would take 2 GiB (4 with decoding)
    # VmHWM is this process's own peak (ru_maxrss would carry the forking pytest's over exec).
    script = (
        "import sys\n"
        "from nemo_gym.verifiers.files import read_text\n"
        "assert read_text(sys.argv[1], 'sparse.txt') is None\n"
        "print([line.split()[1] for line in open('/proc/self/status') if line.startswith('VmHWM')][0])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(workspace)], stdout=subprocess.PIPE, check=True, timeout=60
    )
    assert int(result.stdout) < 200 * 1024, f"peak memory {int(result.stdout)} KiB"


def _kernel_read(path: Path) -> str:
    """``path.read_text()``, asked again on ELOOP: a lookup the kernel retries (its lock-free walk
    disturbed by other writes to the file system, as a busy CI machine has) counted the links of both
    attempts, and refused the 40th link once (seen in CI, on 3.8)."""
    for _ in range(4):
        try:
            return path.read_text()
        except OSError as error:
            if error.errno != errno.ELOOP:
                raise
    return path.read_text()


@pytest.mark.parametrize("links, readable", [(1, True), (40, True), (41, False), (1200, False)])
def test_a_chain_of_links_reads_as_far_as_the_kernel_follows_one(tmp_path, links, readable):
    # Red team 32: a chain of a thousand links made os.path.realpath (recursive before 3.13) raise
    # RecursionError out of every helper; 3.13 read it. Now every version stops where Linux does.
    (tmp_path / "real.txt").write_text("42\n")
    previous = "real.txt"
    for index in range(links - 1):
        os.symlink(previous, tmp_path / f"link{index}")
        previous = f"link{index}"
    os.symlink(previous, tmp_path / "answer.txt")
    assert read_text(tmp_path, "answer.txt") == ("42" if readable else None)
    assert file_exists(tmp_path, "answer.txt") is readable
    assert text_file_equals(tmp_path, "answer.txt", "42") is readable
    if readable:  # what the kernel says
        assert _kernel_read(tmp_path / "answer.txt") == "42\n"
    else:
        with pytest.raises(OSError):
            (tmp_path / "answer.txt").read_text()


def test_links_through_folders_resolve_as_the_kernel_resolves_them(tmp_path):
    # A link inside a linked folder, relative to where it lies, and ".." after a link: the folder it leads to.
    (tmp_path / "data" / "deep").mkdir(parents=True)
    (tmp_path / "data" / "answer.txt").write_text("7")
    os.symlink("data/deep", tmp_path / "d")
    os.symlink("../answer.txt", tmp_path / "data" / "deep" / "up")
    assert read_text(tmp_path, "d/up") == "7"
    os.symlink("/etc", tmp_path / "out")
    assert read_text(tmp_path, "out/hostname") is None


@pytest.mark.parametrize(
    "target",
    ["real.txt/", "real.txt/.", "real.txt/../real.txt", "nowhere/../real.txt", "sub/../real.txt", "./sub/../real.txt"],
)
def test_a_link_reads_where_the_kernel_reads_it(tmp_path, target):
    # Red team 33: a link through a file ("real.txt/") or a missing folder read, where every program
    # gets ENOTDIR or ENOENT; the helpers now stop where the kernel does.
    (tmp_path / "real.txt").write_text("42")
    (tmp_path / "sub").mkdir()
    os.symlink(target, tmp_path / "answer.txt")
    try:
        expected: Optional[str] = (tmp_path / "answer.txt").read_text()
    except OSError:
        expected = None
    assert read_text(tmp_path, "answer.txt") == expected


def test_links_built_to_cost_the_resolution_stop_where_the_kernel_stops(tmp_path):
    # Forty links of 4 KB targets through a missing folder (the most of each the kernel takes) were
    # walked to their end, 82,000 parts on a growing path: 1.5-2.6 s a read (red team 33).
    (tmp_path / "real.txt").write_text("42")
    for index in range(40):
        following = f"L{index + 1}" if index < 39 else "real.txt"
        os.symlink((following + "/" + "x/" * 2000)[:4095].rstrip("/"), tmp_path / f"L{index}")
    assert read_text(tmp_path, "L0") is None
    os.symlink(".", tmp_path / "d")  # a link to its own folder: each pass through it is a link
    assert read_text(tmp_path, "d/" * 41 + "real.txt") is None  # as the kernel: ELOOP past 40
    assert read_text(tmp_path, "d/" * 40 + "real.txt") == "42"


def test_an_absolute_path_inside_the_workspace_is_told_its_relative_form(workspace):
    """A new author's trial: read_text(workspace, "/app/report.csv") said only that the path must be
    relative; it now says which relative path was meant."""
    with pytest.raises(ValueError) as raised:
        read_text(workspace, str(workspace / "sub" / "report.csv"))
    assert str(raised.value) == (
        f"read_text(): path must be relative to the workspace, got {str(workspace / 'sub' / 'report.csv')!r} "
        f"(the workspace is {str(workspace)!r} here: give 'sub/report.csv')"
    )
    with pytest.raises(ValueError, match=r"got '/etc/passwd' \(the workspace is .*\)$"):
        file_exists(workspace, "/etc/passwd")


def test_a_folder_of_the_working_directory_linked_out_of_it_is_no_workspace(workspace, golden, tmp_path, monkeypatch):
    # Red team 52: `read_text(workspace / "out", "answer.txt")` with the agent's `out -> /tests/expected` read
    # the task's own golden file as the answer. As the runner's workspace is the working directory, a
    # folder within it must stay within it, whoever owns the link (a root agent's too).
    (workspace / "out").symlink_to(golden)
    (workspace / "alias").symlink_to(workspace / "sub")
    monkeypatch.chdir(workspace)
    assert read_text(workspace / "out", "answer.txt") is None
    assert read_text("out", "answer.txt") is None
    assert not file_exists(workspace / "out", "answer.txt")
    assert read_text(workspace / "alias", "nested.txt") == "nested"  # a link that stays inside is followed
    monkeypatch.chdir(tmp_path)  # a workspace outside the working directory is the author's to choose
    assert read_text(workspace / "out", "answer.txt") == "golden"


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="giving a link to another user needs root")
def test_a_workspace_reached_through_another_users_link_is_not_followed(golden, home, monkeypatch):
    # Red team 52: an agent that owns the folder above the workspace swaps the workspace for its own link.
    (home / "project").symlink_to(golden)
    os.lchown(home / "project", 1000, 1000)
    assert read_text(home / "project", "answer.txt") is None
    assert not file_exists(home / "project", "answer.txt")
    (home / "via").symlink_to(home / "project")  # root's link to the agent's: the agent's still decides
    assert read_text(home / "via", "answer.txt") is None
    os.lchown(home / "project", 0, 0)
    assert read_text(home / "project", "answer.txt") == "golden"  # root's own (an image's /app -> /srv/app)
    os.lchown(home / "project", 1000, 1000)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)  # the verifier's own user: its files are its own anyway
    assert read_text(home / "project", "answer.txt") == "golden"


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="giving a folder to another user needs root"
)
@pytest.mark.parametrize(
    "owner, mode", [(1000, 0o755), (0, 0o775), (0, 0o757), (0, 0o1777)], ids=["agents", "group", "others", "sticky"]
)
def test_roots_link_in_a_folder_another_user_may_write_is_not_followed(golden, home, owner, mode):
    # Red team 99: an agent that may write the folder above its working directory moves a link the image
    # left there, root's own, onto the working directory's name: a rename needs no right on the link.
    (home / "reference").symlink_to(golden)
    os.chown(home, owner, owner)
    os.chmod(home, mode)
    assert read_text(home / "reference", "answer.txt") is None
    assert not file_exists(home / "reference", "answer.txt")
    os.chown(home, 0, 0)
    os.chmod(home, 0o755)
    assert read_text(home / "reference", "answer.txt") == "golden"  # root's link in root's folder (/app -> /srv/app)


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="giving a folder to another user needs root"
)
@pytest.mark.parametrize(
    "owner, group, mode, readable",
    [
        (1000, 1000, 0o755, {"agents": "agent", "roots-open": "open"}),  # the agent's own folder
        (0, 0, 0o775, {"roots-open": "open", "group-readable": "group"}),  # g=u (OpenShift): its group's
        (0, 0, 0o777, {"agents": None, "roots-open": "open"}),  # anyone may have moved anything in
        (0, 0, 0o1777, {"agents": "agent", "roots-open": "open", "roots-own": "root", "group-readable": "group"}),
    ],
    ids=["agents", "group-writable", "anyones", "sticky"],
)
def test_what_another_user_may_have_moved_in_is_read_only_if_it_could_read_it(tmp_path, owner, group, mode, readable):
    # Red teams 99 and 100: whoever may write a folder may exchange any name in it (rename(2)) for a
    # folder or file of root's there that it may not read; the verifier, reading as root, took that
    # for its work. In a folder another user may write, what the walk enters must be readable by them.
    workspace = tmp_path / "ws"
    workspace.mkdir()
    files = {
        "agents": (1000, 1000, 0o600),
        "roots-open": (0, 0, 0o644),
        "roots-own": (0, 0, 0o600),
        "group-readable": (0, 0, 0o640),
    }
    for name, (uid, gid, bits) in files.items():
        (workspace / name).write_text(readable.get(name) or name)
        os.chown(workspace / name, uid, gid)
        os.chmod(workspace / name, bits)
    os.chown(workspace, owner, group)
    os.chmod(workspace, mode)
    if mode == 0o777:  # agent's own file too: another user may have exchanged it for its own
        os.chown(workspace / "agents", 1001, 1001)
    seen = {name: read_text(workspace, name) for name in files}
    assert seen == {name: readable.get(name) for name in files}
    (workspace / "inner").mkdir(mode=0o755)  # a folder of root's any user may pass: what is in it is vetted too
    (workspace / "inner" / "secret.txt").write_text("secret")
    os.chmod(workspace / "inner" / "secret.txt", 0o600)
    assert read_text(workspace, "inner/secret.txt") == ("secret" if mode == 0o1777 else None)
    if owner == 1000:  # red team 101: its owner closed it after moving root's file in: still its to move
        os.chmod(workspace, 0o555)
        assert read_text(workspace, "roots-own") is None


def test_a_workspace_swapped_while_it_is_read_reads_as_it_was_or_not_at_all(workspace, golden, home, monkeypatch):
    # Red team 52: the name was resolved, then opened; a swap in between read outside, or raised from realpath.
    # The agent owns the folder above the workspace, here the working directory, so its link never counts.
    project, aside, link = home / "project", home / "aside", home / "link"
    workspace.rename(project)
    link.symlink_to(golden)
    monkeypatch.chdir(home)
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            os.rename(project, aside)
            os.rename(link, project)
            os.rename(project, link)
            os.rename(aside, project)

    swapper = threading.Thread(target=swap)
    swapper.start()
    seen = set()
    try:
        for _ in range(3000):
            seen.add(read_text(project, "answer.txt"))
    finally:
        stop.set()
        swapper.join()
    assert seen <= {"42", None}


def test_chains_of_long_links_down_and_back_up_read_as_the_kernel_reads_them(tmp_path):
    # Red team 53: 39 links of 4 KB targets, each 800 folders down and back up, cost seconds a call when
    # every step re-read the whole path (1.8-12 s, by the machine's load); the walk from descriptors takes
    # one step a part (0.3 s). Each ".." must reach the folder the walk came from. The chain stays a
    # link short of the red team's 39: at the kernel's limit (40) its own reading, the oracle, once
    # failed with ELOOP in CI.
    workspace = tmp_path / "ws"
    deep = "/".join(["a"] * 800)
    (workspace / deep).mkdir(parents=True)
    (workspace / "answer.txt").write_text("42")
    (tmp_path / "secret.txt").write_text("outside")
    up = "/".join([".."] * 800)
    previous = "answer.txt"
    for index in range(38):
        os.symlink(f"{deep}/{up}/{previous}", workspace / f"link{index}")
        previous = f"link{index}"
    assert _kernel_read(workspace / previous) == "42"
    assert read_text(workspace, previous) == "42"
    os.symlink(f"{deep}/{up}/../secret.txt", workspace / "climbs")  # one ".." too many: outside
    assert _kernel_read(workspace / "climbs") == "outside"
    assert read_text(workspace, "climbs") is None


def test_a_working_directory_removed_reads_as_no_answer(tmp_path, monkeypatch):
    # Red team 53: os.path.abspath of a relative workspace asks the removed directory for its name.
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    assert read_text(".", "answer.txt") is None
    assert file_exists("workspace", "answer.txt") is False


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="acting as another user needs root")
def test_a_link_swapped_with_roots_file_while_it_is_checked_is_not_followed(golden):
    # Red team 53: the agent, owning the folder above the workspace, exchanges its own link to the
    # answers with a file of root's (renameat2): the link was read, then root's file's owner checked.
    import ctypes
    import shutil
    import signal
    import subprocess
    import sys
    import tempfile
    import textwrap

    home = Path(tempfile.mkdtemp(dir="/tmp"))  # the agent must reach it: a test's own tmp_path is 0700
    workspace = home / "ws"
    workspace.mkdir()
    (workspace / "answer.txt").write_text("agent")
    (home / "roots").write_text("")
    os.chmod(home, 0o755)
    os.chown(home, 1000, 1000)
    try:
        ctypes.CDLL(None).renameat2  # noqa: B018 (glibc 2.28 and newer)
    except AttributeError:
        pytest.skip("this C library has no renameat2")
    swapper = textwrap.dedent(
        f"""
        import ctypes, os
        os.setgroups([]); os.setgid(1000); os.setuid(1000)
        os.rename({str(workspace)!r}, {str(workspace)!r} + ".old")
        os.symlink({str(golden)!r}, {str(workspace)!r})
        libc = ctypes.CDLL(None)
        a, b = {str(workspace)!r}.encode(), {str(home / "roots")!r}.encode()
        print("ready", flush=True)
        while True:
            libc.renameat2(-100, a, -100, b, 2)
        """
    )
    agent = subprocess.Popen([sys.executable, "-c", swapper], stdout=subprocess.PIPE)
    try:
        assert agent.stdout is not None and agent.stdout.readline() == b"ready\n"
        seen = {read_text(workspace, "answer.txt") for _ in range(20000)}
    finally:
        agent.send_signal(signal.SIGKILL)
        agent.wait()
        shutil.rmtree(home)
    assert seen == {None}, seen


def test_a_link_that_leaves_and_comes_back_learns_nothing_of_the_folders_outside(workspace, golden):
    # Red team 54: the walk searched folders with the verifier's rights, so `probe -> <golden>/C/../../ws/x`
    # read x exactly when the answers held a folder C, which the agent itself may not look for.
    (golden / "C").mkdir()
    (workspace / "x.txt").write_text("x")
    for choice in "CD":
        os.symlink(f"{golden}/{choice}/../../{workspace.name}/x.txt", workspace / f"probe{choice}")
    assert _kernel_read(workspace / "probeC") == "x"  # the kernel's answer: C is there, D is not
    assert read_text(workspace, "probeC") is None
    assert read_text(workspace, "probeD") is None
    os.symlink(f"{workspace}/sub/../x.txt", workspace / "back")  # out to the workspace's own path and in: fine
    assert read_text(workspace, "back") == "x"


def test_a_file_whose_read_fails_reads_as_no_answer(tmp_path):
    # Red team 54: the open was guarded, the read was not: /proc/self/mem is a regular file whose read fails.
    assert read_text("/proc/self", "mem") is None
    assert file_exists("/proc/self", "mem")  # it is one; it cannot be read


def test_a_large_max_bytes_costs_nothing_on_a_small_file(workspace):
    # Red team 54: the whole cap was asked for at once: 2**40 raised MemoryError, 2**64 OverflowError.
    assert read_text(workspace, "answer.txt", max_bytes=2**40) == "42"
    assert read_text(workspace, "answer.txt", max_bytes=2**64) == "42"


def test_an_absolute_path_under_a_bytes_workspace_is_the_authors_value_error(workspace):
    with pytest.raises(ValueError, match="path must be relative to the workspace"):
        read_text(os.fsencode(workspace), "/etc/passwd")
    assert read_text(os.fsencode(workspace), "answer.txt") == "42"


def test_without_o_path_links_are_looked_at_by_name_and_nothing_blocks(workspace, monkeypatch):
    """Where the system has no O_PATH (not Linux), a step opens each part plainly, without waiting on a
    FIFO, and a link (which that open refuses) is read by its name: the same answers, here on Linux."""
    from nemo_gym.verifiers import files

    monkeypatch.setattr(files, "_O_PATH", 0)
    monkeypatch.setattr(files, "_STEP_FLAGS", os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    assert read_text(workspace, "sub/link-up") == "42"
    assert read_text(workspace, "link-in") == "42"
    assert read_text(workspace, "link-out") is None
    assert read_text(workspace, "dir-out/secret.txt") is None
    assert read_text(workspace, "fifo") is None
    assert read_text(workspace, "dangling") is None
