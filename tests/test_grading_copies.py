"""The capped copies grading makes of the reward files and of the verifier's output.

A small file with no NUL byte is copied by bash itself (``quick_copy`` in ``_grading.sh``), the rest
by ``head -c`` or ``tail -c``: whichever way, the copy must be byte for byte what the tool prints, or
a reward could read differently than it was written (``1`` and a NUL byte is no reward; with the NUL
dropped it would be a 1).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_attacks import needs_root, task, verify
from test_attacks_review import NOBODY

from nemo_gym.data.tasks.harbor.grading import _script

# Where the workspace sits in the sandbox: the verifier's user enters it, which a test's tmp_path, under
# root's 0700 pytest folder, would not let it do.
WORKDIR = "/workspace"

# The script's definitions (everything before its steps run), and no tool check that could exit.
DEFINITIONS = _script().split("\nfor step in $STEPS")[0]


def bash_copy(tmp_path: Path, data: bytes, tool: str, cap: int, quick: Optional[int] = None) -> bytes:
    """What ``quick_copy`` leaves of ``data`` with ``tool`` (head or tail) and ``cap``, run as grading's
    finish runs it (LC_ALL=C, the file open twice)."""
    source, copy = tmp_path / "source", tmp_path / "copy"
    source.write_bytes(data)
    copy.unlink(missing_ok=True)
    limit = "" if quick is None else f"QUICK_BYTES={quick}\n"
    script = f'{DEFINITIONS}\n{limit}LC_ALL=C\nquick_copy {tool} {cap} "$COPY" 7<"$SOURCE" 8<"$SOURCE" || exit 3\n'
    env = {"PATH": "/usr/bin:/bin", "SOURCE": str(source), "COPY": str(copy)}
    subprocess.run(["bash", "--norc", "-p", "-c", script], env=env, check=True)
    return copy.read_bytes()


def tool_copy(data: bytes, tool: str, cap: int) -> bytes:
    return subprocess.run([tool, "-c", str(cap)], input=data, stdout=subprocess.PIPE, check=True).stdout


# Bytes bash treats specially somewhere (NUL, its own CTLESC and CTLNUL, backslash, newline, IFS).
SPECIAL = st.sampled_from([b"\x00", b"\x01", b"\x7f", b"\\", b"\n", b"\r", b" ", b"\t", b"\xff", b"\xc3\xa9", b"1"])
DATA = st.lists(st.one_of(SPECIAL, st.binary(max_size=40)), max_size=60).map(b"".join)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=DATA, tool=st.sampled_from(["head", "tail"]), cap=st.integers(0, 300), quick=st.integers(1, 300))
def test_the_copy_is_what_head_or_tail_prints_byte_for_byte(tmp_path, data, tool, cap, quick):
    assert bash_copy(tmp_path, data, tool, cap, quick) == tool_copy(data, tool, cap)


@pytest.mark.parametrize("size", [0, 1, 4095, 4096, 4097, 70_000])
@pytest.mark.parametrize("tool", ["head", "tail"])
def test_sizes_around_the_quick_limit_copy_exactly(tmp_path, tool, size):
    data = bytes((index % 255) + 1 for index in range(size))  # no NUL: the quick path when small
    assert bash_copy(tmp_path, data, tool, 65_536) == tool_copy(data, tool, 65_536)


@pytest.mark.parametrize(
    "written",
    [b"1\x00", b"\x001", b"1\x00\n", b'{"reward": 1}\x00'],
    ids=["one-nul", "nul-one", "one-nul-newline", "json-nul"],
)
def test_a_reward_file_with_a_nul_byte_is_not_read_without_it(tmp_path, written):
    """The reward file reaches the host as written: a NUL byte bash would drop keeps it from parsing."""
    name = "reward.json" if written.startswith(b"{") else "reward.txt"
    octal = "".join(f"\\{byte:03o}" for byte in written)
    script = f"#!/bin/bash\nprintf '{octal}' > /logs/verifier/{name}\n"
    folder = task(tmp_path / "task", {"tests/test.sh": script})
    workspace = tmp_path / "ws"
    workspace.mkdir()
    outcome = verify(folder, workspace)
    assert outcome.reward != 1.0, outcome
    assert not outcome.masked, outcome


@pytest.mark.parametrize("output", ["", "graded\n", "x" * 5000], ids=["silent", "short", "long"])
def test_the_output_copied_is_the_one_test_sh_wrote_not_a_replacement(tmp_path, output):
    """A task's own test.sh run as another user owns ``/logs/verifier`` and swaps ``test-stdout.txt`` for
    a file of its own: the output kept is what it printed, read through the file grading opened."""
    needs_root()
    script = (
        f"#!/bin/bash\nprintf '%s' '{output}'\n"
        "rm -f /logs/verifier/test-stdout.txt\nprintf 'swapped' > /logs/verifier/test-stdout.txt\n"
        "echo 1 > /logs/verifier/reward.txt\n"
    )
    folder = task(tmp_path / "task", {"tests/test.sh": script, "task.toml": NOBODY})
    workspace = tmp_path / "ws"
    workspace.mkdir()
    outcome = verify(folder, workspace, workdir=WORKDIR)
    assert (outcome.reward, outcome.masked) == (1.0, False), outcome
    assert outcome.stdout == output


def test_a_folder_swapped_in_for_a_reward_file_is_left_to_the_tool(tmp_path):
    """Found by red team round 22: bash's read fails on a folder with status 1, as at the end of a
    file, so a folder swapped in after grading looked copied as an empty reward; ``head`` fails there
    and the sample is masked, as before (``test -f`` on the open descriptor decides)."""
    entry, copy = tmp_path / "entry", tmp_path / "copy"
    entry.mkdir()
    script = f'{DEFINITIONS}\nLC_ALL=C\nquick_copy head 100 "$COPY" 7<"$ENTRY" 8<"$ENTRY" && echo copied\n'
    env = {"PATH": "/usr/bin:/bin", "ENTRY": str(entry), "COPY": str(copy)}
    ran = subprocess.run(["bash", "--norc", "-p", "-c", script], env=env, capture_output=True, timeout=5)
    assert b"copied" not in ran.stdout, ran
    assert b"head:" in ran.stderr and b"read error" not in ran.stderr, ran


# A listing of the descriptors of test.sh's shell and of a program it starts. The shell's goes
# through a file (in /logs/verifier, which the verifier's user may write): in `ls | sed` the shell
# holds the pipe's read end until it has started sed, and ls, already running, could list it (a
# flake under load).
FD_PROBE = r"""#!/bin/bash
ls -l /proc/$$/fd > /logs/verifier/fds.txt
sed -n 's/.* \([0-9]*\) -> \(.*\)/sh \1 \2/p' /logs/verifier/fds.txt
bash -c 'ls -l /proc/$$/fd; :' | sed -n 's/.* \([0-9]*\) -> \(.*\)/child \1 \2/p'
echo 1 > /logs/verifier/reward.txt
"""


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_no_descriptor_grading_holds_reaches_test_sh_or_its_programs(tmp_path, user):
    """Grading holds test-stdout.txt open three times (writing it, and twice for ``quick_copy``), the
    results pipe and more: test.sh, and what it starts, get their output on 1 and 2 and no other."""
    if user == "nobody":
        needs_root()
    files = {"tests/test.sh": FD_PROBE, **({"task.toml": NOBODY} if user == "nobody" else {})}
    workspace = tmp_path / "ws"
    workspace.mkdir()
    outcome = verify(task(tmp_path / "task", files), workspace, workdir=WORKDIR)
    assert (outcome.reward, outcome.masked) == (1.0, False), outcome
    listed = [line.split(" ", 2) for line in outcome.stdout.splitlines() if line.startswith(("sh ", "child "))]
    assert {who for who, _, _ in listed} == {"sh", "child"}, outcome.stdout
    for who, fd, target in listed:
        assert fd in ("0", "1", "2", "255"), (who, fd, target)  # 255: bash's own, on test.sh


def test_an_output_swapped_for_a_folder_under_its_copy_counts_as_skipped(tmp_path):
    """Red team 39, where nothing is stopped (a provider without ``private_pids``): a process with the
    verifier's uid swaps an output file for a folder between copy_outputs's look and ``head``. That
    output is skipped and its partial copy removed; the others are copied, and grading goes on (a
    ``fail 92`` was a mask on the agent's demand)."""
    logs, out = tmp_path / "logs", tmp_path / "out"
    (logs / "sub").mkdir(parents=True)
    (logs / "sub" / "swapped").write_text("x")
    (logs / "kept.txt").write_text("kept")
    out.mkdir()
    # `head` as the race's loser sees it: the file became a folder just before it opened it.
    swap = 'head() { case "${4-}" in */swapped) rm -- "$4" && mkdir -- "$4" ;; esac; command head "$@"; }\n'
    limits = "MAX_OUTPUT_NAME=100 MAX_OUTPUT_DEPTH=5 MAX_OUTPUT_FILES=10 MAX_OUTPUT_BYTES=1000 INPUTS=()\n"
    script = f'{DEFINITIONS}\n{limits}{swap}LC_ALL=C\ncopy_outputs\necho "skipped $skipped"\n'
    env = {"PATH": "/usr/bin:/bin", "LOGS": str(logs), "OUT": str(out)}
    ran = subprocess.run(["bash", "--norc", "-p", "-c", script], env=env, capture_output=True, timeout=10)
    assert ran.returncode == 0 and ran.stdout.decode().strip() == "skipped 1", ran
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) == ["files/kept.txt"], ran
    assert not (out / "files" / "sub" / "swapped").exists()


@pytest.mark.parametrize(
    "forged",
    [
        "9223372036854775807",  # a sparse file on tmpfs may be 2^63-1 bytes: the sum wrapped negative
        "x[$(touch $MARK)]",  # bash evaluates a variable's text as an expression, as root in finish
    ],
    ids=["overflow", "expression"],
)
def test_a_size_stat_prints_is_digits_and_cannot_lift_the_cap(tmp_path, forged):
    """Red team 40: one output's size, as ``stat`` printed it, once wrapped the running total below
    zero, after which every later output was copied whole (a huge one overflowed the host's results
    limit: a mask on demand); and the text of a size was an arithmetic expression, a command run as
    root when an agent could swap the here-string's file. A size that is not plain digits (at most
    18) is skipped; the cap holds for what follows."""
    logs, out, mark = tmp_path / "logs", tmp_path / "out", tmp_path / "mark"
    files = {"a.txt": "a", "b.txt": "b", "c.txt": "c" * 2000}
    for name, text in files.items():
        (logs / name).parent.mkdir(parents=True, exist_ok=True)
        (logs / name).write_text(text)
    out.mkdir()
    # stat as the agent's live process makes it read: b.txt's size is the forged text.
    fake = f'stat() {{ local n; for n in "${{@:4}}"; do [ "$n" = b.txt ] && echo \'{forged}\' || command stat -c %s -- "$n"; done; }}\n'
    limits = "MAX_OUTPUT_NAME=100 MAX_OUTPUT_DEPTH=5 MAX_OUTPUT_FILES=10 MAX_OUTPUT_BYTES=1000 INPUTS=()\n"
    script = f'{DEFINITIONS}\n{limits}{fake}LC_ALL=C\ncopy_outputs\necho "skipped $skipped"\n'
    env = {"PATH": "/usr/bin:/bin", "LOGS": str(logs), "OUT": str(out), "MARK": str(mark)}
    ran = subprocess.run(["bash", "--norc", "-p", "-c", script], env=env, capture_output=True, timeout=10)
    assert ran.returncode == 0 and ran.stdout.decode().strip() == "skipped 2", ran
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) == ["files/a.txt"], ran
    assert not mark.exists()


def test_no_root_shell_of_grading_reads_a_here_string():
    """bash writes a here-string or here-document to a file in $TMPDIR (before 5.1 always, after it
    past a pipe's size) and opens it again by name: where the verifier's env names a folder the
    agent may rename in, the agent's lines replace grading's own (red team 40). Both scripts split
    their text in memory (split_lines)."""
    shim = Path(__file__).resolve().parents[1] / "shim" / "test.sh"
    for name, text in (("_grading.sh", DEFINITIONS), ("test.sh", shim.read_text())):
        code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
        assert "<<" not in code, name


def test_kill_strays_leaves_the_ancestors_of_grading_running(tmp_path):
    """Red team 40: every other process stays stopped until finish has read /logs/verifier, but a
    provider's exec daemon that is grading's ancestor carries the exec's output and status, and must
    not stop with them. In a PID namespace of its own (kill -1 reaches all of it): init, then the
    ancestor, then grading's shell, beside a stray that must stay stopped (a stray with the stop
    pending reads R until it is next scheduled, and runs none of its own code before it stops)."""
    needs_root()
    script = (
        f"{DEFINITIONS}\nsleep 30 & stray=$!\nstarted=999999999999\nkill_strays\n"
        'IFS= read -r line < /proc/$PPID/stat; set -- ${line##*) }; echo "ancestor $1"\n'
        # A stop is delivered when the stray next runs: on a loaded machine it may read R a moment first.
        'for _ in $(seq 100); do IFS= read -r line < /proc/$stray/stat; set -- ${line##*) }; [ "$1" = T ] && break; '
        'sleep 0.05; done; echo "stray $1"\n'
    )
    ancestor = 'bash --norc -p -c "$GRADING"; :'
    ran = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", "bash", "--norc", "-c", f"bash --norc -c '{ancestor}'; :"],
        env={"PATH": "/usr/bin:/bin", "GRADING": script}, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    ancestor, stray = ran.stdout.split("\n")[:2]
    assert ancestor[:9] == "ancestor " and ancestor[9:] not in ("T", "t") and stray == "stray T", ran  # T: stopped


def test_a_filled_logs_folder_is_looked_at_only_so_far(tmp_path):
    """Red team 42: the program verify ran, as the verifier's user, put 300,000 files under a chain
    of 1,900 folders in /logs/verifier; globstar walked all of it and did pattern work on every long
    name, past the host's limit. Finish now looks level by level, MAX_OUTPUT_DEPTH folders deep at
    most, and at most MAX_OUTPUT_SCAN entries in all."""
    import os
    import time

    logs, out = tmp_path / "logs", tmp_path / "out"
    (logs / "kept").mkdir(parents=True)
    (logs / "kept" / "ctrf.json").write_text("{}")
    out.mkdir()
    deep = os.open(logs, os.O_RDONLY)
    for _ in range(300):  # a chain of 300 folders, 5,000 files at its end (shallow enough for rmtree)
        os.mkdir("a", dir_fd=deep)
        deeper = os.open("a", os.O_RDONLY, dir_fd=deep)
        os.close(deep)
        deep = deeper
    for index in range(5000):
        os.close(os.open(f"f{index}", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=deep))
    os.close(deep)
    limits = "MAX_OUTPUT_NAME=255 MAX_OUTPUT_DEPTH=8 MAX_OUTPUT_FILES=100 MAX_OUTPUT_BYTES=1000 MAX_OUTPUT_SCAN=1000 INPUTS=()\n"
    script = f'{DEFINITIONS}\n{limits}LC_ALL=C\ncopy_outputs\necho "skipped $skipped"\n'
    env = {"PATH": "/usr/bin:/bin", "LOGS": str(logs), "OUT": str(out)}
    started = time.monotonic()
    ran = subprocess.run(["bash", "--norc", "-p", "-c", script], env=env, capture_output=True, timeout=60)
    took = time.monotonic() - started
    assert ran.returncode == 0 and ran.stdout.decode().strip() == "skipped 0", ran
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) == ["files/kept/ctrf.json"]
    assert took < 5, f"finish walked the whole tree ({took:.1f} s)"
    wide = tmp_path / "wide"
    wide.mkdir()
    for index in range(1500):
        (wide / f"f{index:04d}.txt").write_text("x")
    ran = subprocess.run(
        ["bash", "--norc", "-p", "-c", script], env={**env, "LOGS": str(wide)}, capture_output=True, timeout=60
    )
    assert ran.returncode == 0, ran
    assert ran.stdout.decode().strip() == "skipped 901", ran  # 1,000 looked at: 100 kept, 899 over the cap, +1


@pytest.mark.parametrize(
    "made, named, refused",
    [
        ("folder", "/ws", ""),
        ("link into tests", "/ws", "leads into"),
        ("link into logs", "/ws", "leads into"),
        ("link to a link into tests", "/ws", "leads into"),
        ("missing", "/ws", "is gone"),
        ("link to nowhere", "/ws", "is gone"),
        ("folder", "/tests/work", ""),  # the task names it there: the task's choice
        ("link of another user's", "/ws", "through a link of another user's"),
        ("folder below a link of another user's", "/up/ws", "through a link of another user's"),
        ("root's link to another user's link", "/ws", "through a link of another user's"),
        ("root's link", "/ws", ""),
        ("root's relative link through ..", "/ws", ""),
        ("folder, named through ..", "/hop/../ws", ""),
        ("root's link in a folder another user owns", "/up/ws", "through a link of another user's"),
        ("root's link in a folder anyone may write", "/up/ws", "through a link of another user's"),
        # Red team 98: root walks for a Python verifier of another user, which may be the agent's own.
        ("the verifier's user's link, walked by root", "/up/ws", "through a link of another user's"),
        # Red team 98: each step copied what was left of the path, which a chain of long links made slow.
        ("root's link past PATH_MAX", "/ws", "through a link of another user's"),
    ],
)
def test_grading_enters_the_working_directory_and_refuses_one_leading_into_its_folders(tmp_path, made, named, refused):
    """Red teams 53 and 55, grading's decision alone: the agent's link from its working directory into
    /tests or /logs/verifier (made afresh by prepare: the answers) is refused, one that is gone too.
    Red team 95: a link the agent made on the way (its own folder above the working directory) is refused
    wherever it leads, since a root verifier would grade a folder the agent may not read; root's are followed."""
    tests, logs = tmp_path / "tests", tmp_path / "logs" / "verifier"
    (tests / "expected").mkdir(parents=True)
    (tests / "work").mkdir()
    (logs / "sub").mkdir(parents=True)
    workdir = tmp_path / named.lstrip("/")
    if ".." in named:
        workdir = Path(str(tmp_path) + named)
    if made == "folder":
        workdir.mkdir(exist_ok=True)
    elif made == "link into tests":
        workdir.symlink_to(tests / "expected")
    elif made == "link into logs":
        workdir.symlink_to(logs / "sub")
    elif made == "link to a link into tests":
        (tmp_path / "hop").symlink_to(tests)
        workdir.symlink_to(tmp_path / "hop" / "expected")
    elif made == "link to nowhere":
        workdir.symlink_to(tmp_path / "nowhere")
    elif made in ("link of another user's", "root's link"):
        (tmp_path / "hidden").mkdir()
        workdir.symlink_to(tmp_path / "hidden")
    elif made == "folder below a link of another user's":
        (tmp_path / "hidden" / "ws").mkdir(parents=True)
        (tmp_path / "up").symlink_to(tmp_path / "hidden")
    elif made == "root's link to another user's link":
        (tmp_path / "hidden").mkdir()
        (tmp_path / "hop").symlink_to(tmp_path / "hidden")
        workdir.symlink_to("hop")
    elif made == "root's relative link through ..":
        (tmp_path / "a" / "b").mkdir(parents=True)
        (tmp_path / "a" / "real").mkdir()
        workdir.symlink_to("a/b/../real")
    elif made == "folder, named through ..":
        (tmp_path / "hop").mkdir()
        (tmp_path / "ws").mkdir()
    elif made == "the verifier's user's link, walked by root":
        needs_root()
        (tmp_path / "hidden").mkdir()
        (tmp_path / "up").mkdir()
        (tmp_path / "up" / "ws").symlink_to(tmp_path / "hidden")
        os.chown(tmp_path / "up", 4321, 4321)
        os.chmod(tmp_path / "up", 0o755)
        os.lchown(tmp_path / "up" / "ws", 4321, 4321)
    elif made == "root's link past PATH_MAX":
        (tmp_path / "hidden").mkdir()
        (tmp_path / "l2").symlink_to("./" * 1200 + ".")  # each link below the kernel's 4,095, the rest past it
        workdir.symlink_to("./" * 1000 + "l2/" + "./" * 1000 + "hidden")
    elif made.startswith("root's link in a folder"):  # red team 96: the folder's owner may swap the link
        needs_root()
        (tmp_path / "hidden").mkdir()
        (tmp_path / "up").mkdir()
        (tmp_path / "up" / "ws").symlink_to(tmp_path / "hidden")
        if "owns" in made:
            os.chown(tmp_path / "up", 4321, 4321)
        else:
            (tmp_path / "up").chmod(0o1777)
    for link in ("ws", "up", "hop"):  # what "another user" made: an agent's uid
        if (
            "another user's" in made
            and (tmp_path / link).is_symlink()
            and not (made.startswith("root's") and link == "ws")
        ):
            needs_root()
            os.lchown(tmp_path / link, 4321, 4321)
    script = f'{DEFINITIONS}\nenter_workdir; printf "%s|%s" "$REPLY" "$(pwd -P)"\n'
    env = {"PATH": "/usr/bin:/bin", "TESTS": str(tests), "LOGS": str(logs), "WORKDIR": str(workdir), "RUN_AS": "4321"}
    ran = subprocess.run(
        ["bash", "--norc", "-p", "-c", script], env=env, cwd="/", capture_output=True, text=True, timeout=10
    )
    reply, where = ran.stdout.split("|")
    if refused:
        assert refused in reply and str(workdir) in reply, ran
    else:
        assert reply == "" and where == os.path.realpath(workdir), ran
        assert ran.stderr == "", ran


def test_a_part_swapped_for_a_link_while_grading_enters_it_is_refused(tmp_path):
    """Red team 96: a process of the agent's swapped its folders while grading looked at the path and then
    entered it, and a root verifier graded root's folder. Grading enters one part at a time where it stands;
    here the agent's folder becomes a link just before grading enters it (a cd that swaps first), and the
    folder grading lands in is not a child of the one it stood in."""
    home, hidden = tmp_path / "home", tmp_path / "hidden"
    (home / "ws").mkdir(parents=True)
    hidden.mkdir()
    swap = 'cd() { [ "$3" = ./ws ] && mv "$HOME_DIR/ws" "$HOME_DIR/ws.real" && ln -s "$HIDDEN" "$HOME_DIR/ws"; builtin cd "$@"; }'
    script = f'{DEFINITIONS}\n{swap}\nenter_workdir; printf "%s|%s" "$REPLY" "$(pwd -P)"\n'
    env = {"PATH": "/usr/bin:/bin", "TESTS": "/nonexistent/tests", "LOGS": "/nonexistent/logs"}
    env.update(WORKDIR=str(home / "ws"), HOME_DIR=str(home), HIDDEN=str(hidden))
    ran = subprocess.run(["bash", "--norc", "-p", "-c", script], env=env, cwd="/", capture_output=True, text=True)
    assert (home / "ws").is_symlink(), ran  # the swap happened
    reply, _ = ran.stdout.split("|")
    assert reply == f"the working directory {home / 'ws'} changed while grading entered it", ran


@pytest.mark.parametrize("swapped", [False, True])
def test_a_folder_the_verifier_may_pass_through_but_not_read_is_walked_through(swapped):
    """Red team 97: the walk held each folder open, which takes the right to read it; a verifier's user that
    may only pass through one (a 0711 home) scored 0 where one cd had entered it. Such a folder is known by
    device and inode instead, and a part swapped for a link meanwhile is still refused."""
    needs_root()
    base = Path(tempfile.mkdtemp(prefix="gym-walk-", dir="/tmp"))
    try:
        home, hidden = base / "home", base / "hidden"
        (home / "ws").mkdir(parents=True)
        hidden.mkdir()
        base.chmod(0o755)
        os.chown(home, 4321, 4321)  # the agent's, which others may pass through (and here rename in) but not read
        home.chmod(0o733 if swapped else 0o711)
        swap = 'cd() { [ "$3" = ./ws ] && mv "$HOME_DIR/ws" "$HOME_DIR/ws.real" && ln -s "$HIDDEN" "$HOME_DIR/ws"; builtin cd "$@"; }'
        script = f'{DEFINITIONS}\n{swap if swapped else ""}\nenter_workdir; printf "%s|%s" "$REPLY" "$(pwd -P)"\n'
        env = {"PATH": "/usr/bin:/bin", "TESTS": "/nonexistent/tests", "LOGS": "/nonexistent/logs"}
        env.update(WORKDIR=str(home / "ws"), HOME_DIR=str(home), HIDDEN=str(hidden))
        nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        ran = subprocess.run(
            [*nobody, "bash", "--norc", "-p", "-c", script], env=env, cwd="/", capture_output=True, text=True
        )
        reply, where = ran.stdout.split("|")
        if swapped:
            assert (home / "ws").is_symlink(), ran
            assert reply == f"the working directory {home / 'ws'} changed while grading entered it", ran
        else:
            assert (reply, where, ran.stderr) == ("", str(home / "ws"), ""), ran
    finally:
        shutil.rmtree(base)


def _chain_look(script: str, ws_owner: int) -> tuple[subprocess.CompletedProcess, Path]:
    """enter_workdir, as root, after ``script``, into ``home/ws``: a folder of ``ws_owner``'s (mode 700) in
    the agent's home (uid 4321), whose owner may have put anything in it."""
    needs_root()
    base = Path(tempfile.mkdtemp(prefix="gym-chain-", dir="/tmp"))
    try:
        home = base / "home"
        (home / "ws").mkdir(parents=True)
        base.chmod(0o755)
        os.chown(home, 4321, 4321)
        home.chmod(0o755)
        os.chown(home / "ws", ws_owner, ws_owner)
        (home / "ws").chmod(0o700)
        env = {"PATH": "/usr/bin:/bin", "TESTS": "/nonexistent/tests", "LOGS": "/nonexistent/logs"}
        env.update(WORKDIR=str(home / "ws"))
        script = f'{DEFINITIONS}\n{script}\nenter_workdir; printf "%s|%s" "$REPLY" "$PWD"\n'
        ran = subprocess.run(["bash", "--norc", "-p", "-c", script], env=env, cwd="/", capture_output=True, text=True)
        return ran, home / "ws"
    finally:
        shutil.rmtree(base)


def _refused_as_moved_in(reply: str, workdir: Path) -> bool:
    return reply == f"the working directory {workdir} could have been put in its place by a user who may not read it"


@pytest.mark.parametrize("pwd", ["as bash made it", "/ (red team 103's flip)"])
@pytest.mark.parametrize("hidden", [False, True])
def test_the_chain_look_finds_the_folders_from_the_kernel_not_from_pwd(hidden, pwd):
    """Red team 103: an agent flipping its working directory's name between a link to / and a folder of
    another user's it may not read left bash's PWD at / while grading stood in that folder, and the chain
    look (moved_in), which counted its folders from PWD, looked at none. Here the flip's outcome is made
    directly: the folder entered, then PWD set to /. The look must refuse the other user's folder either
    way, and still grade the agent's own."""
    flip = 'cd() { builtin cd "$@" || return; [ "$3" != ./ws ] || PWD=/; }' if pwd.startswith("/") else ""
    ran, workdir = _chain_look(flip, 5432 if hidden else 4321)
    reply, where = ran.stdout.split("|")
    assert where == ("/" if flip else str(workdir)), ran  # the flip's outcome was made
    if hidden:
        assert _refused_as_moved_in(reply, workdir), ran
    else:
        assert (reply, ran.stderr) == ("", ""), ran


def test_the_chain_look_refuses_when_its_stat_cannot_run():
    """Red team 104: a chain look whose stat could not start (E2BIG: a large environment over a small stack
    limit, the chain's arguments added) read as "nothing here can be looked at" and passed another user's
    folder. Only a `.` this user cannot look at passes now."""
    big = "export BIG1=$(printf '%*s' 100000 '') BIG2=$(printf '%*s' 100000 ''); ulimit -s 256"
    probe = "(exec /bin/true) 2>/dev/null && echo exec-ran"
    ran, workdir = _chain_look(f"{big}\n{probe}", 5432)
    assert "exec-ran" not in ran.stdout, ran  # no program can start here: the stat cannot either
    reply, _ = ran.stdout.split("|")
    assert _refused_as_moved_in(reply, workdir), ran
