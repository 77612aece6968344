"""Artifacts: parsing at load (every refusal), the pure decisions (names, exclusions as GNU tar makes
them, links, limits), and collect/deliver round trips between two local sandboxes, through the
archive calls and through the tar fallback. The container round trip is in test_artifacts_docker.py."""

from __future__ import annotations

import asyncio
import io
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import nested_folders, write_files

from nemo_gym.data.tasks.harbor.artifacts import (
    CONVENTION,
    FILE,
    FOLDER,
    LINK,
    MAX_ARTIFACT_BYTES,
    MAX_ARTIFACT_DEPTH,
    MAX_ARTIFACT_FILES,
    MAX_ARTIFACT_PATH,
    MAX_LINK_WORK,
    OTHER,
    CollectedArtifact,
    CollectedArtifacts,
    Entry,
    _Collection,
    claim_refusal,
    collect_artifacts,
    collection_set,
    complete_members,
    covers,
    deliver_artifacts,
    delivery_order,
    delivery_refusal,
    delivery_script,
    is_excluded,
    plan_copy,
    resolve_link,
    source_missing,
    transfer_limit,
    vetted_links,
)
from nemo_gym.data.tasks.harbor.sandboxes import LocalSandbox
from nemo_gym.data.tasks.harbor.sandboxes.base import ArchiveSandbox, CopyStalled, ExecResult, SandboxError
from nemo_gym.data.tasks.harbor.sandboxes.local import namespaces_available
from nemo_gym.data.tasks.harbor.task import Artifact, TaskError, load_task

# --- parsing -------------------------------------------------------------------------------------

VERIFIER = {"tests/verifier.py": "def verify():\n    return 1\n", "steps/a/instruction.md": ""}


def load(tmp_path: Path, toml: str, check_runnable: bool = True) -> Any:
    return load_task(write_files(tmp_path / "task", {"task.toml": toml, **VERIFIER}), check_runnable=check_runnable)


def test_entries_parse_as_harbor_names_them(tmp_path):
    task = load(
        tmp_path,
        """
artifacts = [
  "/app/out.json",
  "/var//log/./api/",
  { source = "/srv/data", destination = "data/", exclude = ["*.tmp", "cache"] },
  { source = "/var/lib/db", service = "postgres" },
  { source = "/opt/x", destination = "" },
]
[[steps]]
name = "a"
artifacts = ["/tmp/step.txt", "/app/out.json"]
""",
        check_runnable=False,
    )
    assert task.artifacts == (
        Artifact("/app/out.json", "app/out.json", "main", ()),
        Artifact("/var/log/api", "var/log/api", "main", ()),
        Artifact("/srv/data", "data", "main", ("*.tmp", "cache")),
        Artifact("/var/lib/db", "var/lib/db", "postgres", ()),  # a sidecar loads; the run refuses it
        Artifact("/opt/x", "opt/x", "main", ()),  # Harbor reads an empty destination as none
    )
    # A step may name the task's own entry again: it is the same entry, not a second claim.
    assert task.step("a").artifacts == (
        Artifact("/tmp/step.txt", "tmp/step.txt"),
        Artifact("/app/out.json", "app/out.json"),
    )


def test_no_artifacts_is_an_empty_tuple(tmp_path):
    task = load(tmp_path, '[[steps]]\nname = "a"\n')
    assert task.artifacts == () and task.step("a").artifacts == ()


def test_an_explicit_convention_entry_frees_its_destination(tmp_path):
    # /logs/artifacts named with a destination of its own: logs/artifacts is then free for another.
    task = load(
        tmp_path,
        'artifacts = [{ source = "/logs/artifacts", destination = "published" },'
        ' { source = "/var/log", destination = "logs/artifacts" }]\n',
    )
    assert [item.destination for item in task.artifacts] == ["published", "logs/artifacts"]


BAD = [
    ("root", 'artifacts = ["/"]\n', "artifacts[0] = '/' is refused: an artifact cannot be the whole file system"),
    ("root-doubled", 'artifacts = ["//."]\n', "artifacts[0] = '//.' is refused: an artifact cannot be the whole"),
    ("tests", 'artifacts = ["/tests"]\n', "artifacts[0] = '/tests' is refused: it is under /tests"),
    ("under-tests", 'artifacts = [{ source = "/tests/expected.txt" }]\n', "artifacts[0].source = '/tests/expected.txt' is refused: it is under /tests"),
    ("tests-slash", 'artifacts = ["/tests/"]\n', "artifacts[0] = '/tests/' is refused: it is under /tests"),
    ("under-logs-verifier", 'artifacts = ["/logs/verifier/reward.txt"]\n', "artifacts[0] = '/logs/verifier/reward.txt' is refused: it is under /logs/verifier"),
    ("holds-logs-verifier", 'artifacts = ["/logs"]\n', "artifacts[0] = '/logs' is refused: it holds /logs/verifier"),
    ("relative", 'artifacts = ["out.json"]\n', "artifacts[0] must be an absolute path, not 'out.json'"),
    ("relative-table", 'artifacts = [{ source = "./out" }]\n', "artifacts[0].source must be an absolute path, not './out'"),
    ("dotdot", 'artifacts = ["/app/../tests"]\n', "artifacts[0] = '/app/../tests' must not contain '..'"),
    ("dotdot-trailing", 'artifacts = ["/app/.."]\n', "artifacts[0] = '/app/..' must not contain '..'"),
    ("nul", 'artifacts = ["/app/\\u0000"]\n', "artifacts[0] holds a NUL character"),
    ("no-source", 'artifacts = [{ destination = "x" }]\n', "artifacts[0].source must be an absolute path, not None"),
    ("source-int", "artifacts = [{ source = 3 }]\n", "artifacts[0].source must be an absolute path, not 3"),
    ("entry-int", "artifacts = [3]\n", "artifacts[0] must be a path or a table with a source, not 3"),
    ("not-array", 'artifacts = "/app"\n', "artifacts must be an array of paths and tables"),
    ("destination-absolute", 'artifacts = [{ source = "/a", destination = "/x" }]\n', "artifacts[0].destination = '/x' must be a relative path"),
    ("destination-dotdot", 'artifacts = [{ source = "/a", destination = "x/../../y" }]\n', "artifacts[0].destination = 'x/../../y' must not contain '..'"),
    ("destination-backslash", 'artifacts = [{ source = "/a", destination = "x\\\\y" }]\n', "artifacts[0].destination = 'x\\\\y' must use '/' as its separator"),
    ("destination-manifest", 'artifacts = [{ source = "/a", destination = "manifest.json" }]\n', "artifacts[0].destination = 'manifest.json' is refused"),
    ("destination-manifest-dotted", 'artifacts = [{ source = "/a", destination = "./manifest.json/" }]\n', "artifacts[0].destination = './manifest.json/' is refused"),
    ("destination-dot", 'artifacts = [{ source = "/a", destination = "./" }]\n', "artifacts[0].destination = './' must name a file or folder"),
    ("destination-int", 'artifacts = [{ source = "/a", destination = 1 }]\n', "artifacts[0].destination must be a relative path, not 1"),
    ("destination-nul", 'artifacts = [{ source = "/a", destination = "x\\u0000" }]\n', "artifacts[0].destination holds a NUL character"),
    ("service-int", 'artifacts = [{ source = "/a", service = 1 }]\n', "artifacts[0].service must be a Compose service name"),
    ("service-dash", 'artifacts = [{ source = "/a", service = "-db" }]\n', "artifacts[0].service must be a Compose service name"),
    ("exclude-string", 'artifacts = [{ source = "/a", exclude = "*.tmp" }]\n', "artifacts[0].exclude must be an array of patterns"),
    ("exclude-int", 'artifacts = [{ source = "/a", exclude = [1] }]\n', "artifacts[0].exclude must be an array of patterns"),
    ("exclude-nul", 'artifacts = [{ source = "/a", exclude = ["\\u0000"] }]\n', "artifacts[0].exclude holds a NUL character"),
    ("same-destination", 'artifacts = ["/a/x", { source = "/b", destination = "a/x" }]\n',
     "artifacts[1] lands on the destination 'a/x', as artifacts[0] does"),
    ("same-destination-normalised", 'artifacts = [{ source = "/b", destination = "out" }, { source = "/c", destination = "./out/" }]\n',
     "artifacts[1] lands on the destination 'out', as artifacts[0] does"),
    ("same-source-other-exclude", 'artifacts = ["/a", { source = "/a", exclude = ["x"] }]\n',
     "artifacts[1] lands on the destination 'a', as artifacts[0] does"),
    ("convention-destination", 'artifacts = [{ source = "/var/log", destination = "logs/artifacts" }]\n',
     "artifacts[0] lands on the destination 'logs/artifacts', as /logs/artifacts (always collected) does"),
    ("step-under-tests", '[[steps]]\nname = "a"\nartifacts = ["/tests/x"]\n', "steps[0].artifacts[0] = '/tests/x' is refused"),
    ("step-not-array", '[[steps]]\nname = "a"\nartifacts = 1\n', "steps[0].artifacts must be an array of paths and tables"),
    ("step-same-destination", 'artifacts = ["/a"]\n[[steps]]\nname = "a"\nartifacts = [{ source = "/b", destination = "a" }]\n',
     "steps[0].artifacts[0] lands on the destination 'a', as artifacts[0] does"),
]  # fmt: skip


@pytest.mark.parametrize("toml, message", [case[1:] for case in BAD], ids=[case[0] for case in BAD])
def test_bad_artifacts_are_refused_naming_the_file_and_key(tmp_path, toml, message):
    with pytest.raises(TaskError) as raised:
        load(tmp_path, toml)
    text = str(raised.value)
    assert message in text and str(tmp_path / "task" / "task.toml") in text
    assert "\n" not in text


def test_a_sidecar_artifact_loads_for_inspection_without_the_runnable_check(tmp_path):
    toml = 'artifacts = [{ source = "/d", service = "db" }]\n'
    assert load(tmp_path / "a", toml, check_runnable=False).artifacts[0].service == "db"
    with pytest.raises(TaskError, match="the artifact /d is on the Compose service 'db', which this server"):
        load(tmp_path / "b", toml)


# --- the pure decisions --------------------------------------------------------------------------


def test_the_convention_folder_comes_first_unless_an_entry_names_it():
    app = Artifact("/app", "app")
    assert collection_set([app]) == (CONVENTION, app)
    assert collection_set([app], [app, Artifact("/x", "x")]) == (CONVENTION, app, Artifact("/x", "x"))
    named = Artifact("/logs/artifacts", "published", exclude=("*.log",))
    assert collection_set([app, named]) == (app, named)
    # On a sidecar it is another folder: the main one is still collected.
    sidecar = Artifact("/logs/artifacts", "db-artifacts", service="db")
    assert collection_set([sidecar])[0] == CONVENTION


def test_claims_follow_harbor():
    app = Artifact("/app", "app")
    assert covers(app, Artifact("/app/out.json", "app/out.json"))
    assert not covers(app, Artifact("/app/out.json", "result.json"))
    assert not covers(Artifact("/app", "app", exclude=("*.json",)), Artifact("/app/out.json", "app/out.json"))
    assert not covers(app, Artifact("/app/x", "app/x", service="db"))
    assert not covers(app, Artifact("/application", "application"))
    assert claim_refusal([app], Artifact("/app/out.json", "app/out.json")) == "already copied with /app"
    assert claim_refusal([app], Artifact("/app/out.json", "result.json")) is None
    assert "overlaps that of /app" in (claim_refusal([app], Artifact("/srv", "app/srv")) or "")
    assert "overlaps that of /srv" in (claim_refusal([Artifact("/srv", "app/srv")], app) or "")
    assert claim_refusal([app], Artifact("/apps", "apps")) is None  # a prefix of the name is not a folder


# Measured with GNU tar 1.34 (tar -C SRC --exclude=P .) over this tree; see also the property below.
TREE = [
    "a",
    "a/b",
    "a/b/f.tmp",
    "a/b/g",
    "a/keep",
    "build",
    "build/x",
    "build/x/y",
    "c",
    "c/build",
    "c/build/z",
    "top.tmp",
]
EXCLUDED_BY_TAR = {
    "*.tmp": {"a/b/f.tmp", "top.tmp"},
    "build": {"build", "build/x", "build/x/y", "c/build", "c/build/z"},
    "a/b": {"a/b", "a/b/f.tmp", "a/b/g"},
    "./a": {"a", "a/b", "a/b/f.tmp", "a/b/g", "a/keep"},
    "build/": set(),
    "/a": set(),
    "b/*": {"a/b/f.tmp", "a/b/g"},
    "x/y": {"build/x/y"},
    "*/build": {"build", "build/x", "build/x/y", "c/build", "c/build/z"},
    "[ab]": {"a", "a/b", "a/b/f.tmp", "a/b/g", "a/keep"},
    "a\\/b": {"a/b", "a/b/f.tmp", "a/b/g"},
    "A": set(),
    "*": set(TREE) | {""},
    ".": set(TREE) | {""},
}


@pytest.mark.parametrize("pattern", sorted(EXCLUDED_BY_TAR))
def test_exclusions_are_gnu_tars(pattern):
    got = {path for path in ["", *TREE] if is_excluded(path, [pattern])}
    assert got == EXCLUDED_BY_TAR[pattern]


@pytest.fixture(scope="module")
def tar_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("tar") is None:
        pytest.fail("GNU tar is part of this machine kind")
    root = tmp_path_factory.mktemp("tree")
    for path in ["a/b/f.tmp", "a/b/g", "a/keep", "build/x/y", "c/build/z", "top.tmp", ".h/a.b", "b/a", "ab/ba"]:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("x")
    return root


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.sampled_from(["a", "b", "*", "?", "/", ".", "[ab]", "[!a]", "tmp", "build"]), min_size=1, max_size=5)
)
def test_exclusions_match_gnu_tar_on_generated_patterns(tar_tree, parts):
    pattern = "".join(parts)
    listed = subprocess.run(
        ["tar", "-c", "-f", "-", f"--exclude={pattern}", "-C", str(tar_tree), "."], check=True, stdout=subprocess.PIPE
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(listed)) as archive:
        kept_by_tar = {"" if member.name == "." else member.name[2:] for member in archive}
    everything = {"", *(str(path.relative_to(tar_tree)) for path in tar_tree.rglob("*"))}
    assert {path for path in everything if not is_excluded(path, [pattern])} == kept_by_tar, pattern


def test_a_file_artifact_ignores_exclusions_as_harbors_does():
    plan = plan_copy([Entry("", FILE, 5)], ["*"], bytes_left=10, files_left=10)
    assert plan.keep == ("",) and plan.excluded == 0


FOLDERS = {"", "sub", "sub/deep"}
FILES = {"sub/f.txt", "secret", "sub/deep/g"}


@pytest.mark.parametrize(
    "link, target, links, expected",
    [
        ("good", "sub/f.txt", {}, "sub/f.txt"),
        ("sub/up", "../secret", {}, "secret"),
        ("sub/deep/top", "../..", {}, ""),
        ("sub/self", ".", {}, "sub"),
        ("out", "../etc/passwd", {}, None),
        ("sub/out", "../../x", {}, None),
        ("abs", "/etc/passwd", {}, None),
        ("abs-inside", "/app/secret", {}, None),  # absolute: never resolved against the copy
        ("empty", "", {}, None),
        ("dangling", "sub/nothing", {}, None),
        ("through-file", "secret/x", {}, None),
        ("file-slash", "secret/", {}, None),
        # "dot" -> "." is the root, so dot/../secret climbs out of it, though the text reads as inside.
        ("trick", "dot/../secret", {"dot": "."}, None),
        ("via-link", "s/f.txt", {"s": "sub"}, "sub/f.txt"),
        ("via-chain", "l1", {"l1": "l2", "l2": "sub/deep/g"}, "sub/deep/g"),
        ("via-out", "o/x", {"o": "/etc"}, None),
        ("loop", "l1", {"l1": "l2", "l2": "l1"}, None),
    ],
)
def test_links_resolve_as_the_kernel_would_inside_the_copy(link, target, links, expected):
    assert resolve_link(link, target, {**links, link: target}, FOLDERS, FILES) == expected


def test_a_link_through_a_link_left_out_is_left_out_too():
    links = {"a": "b/f.txt", "b": "../outside"}
    assert vetted_links(links, {""}, {"f.txt"}) == {}
    assert vetted_links({"a": "b", "b": "f.txt"}, {""}, {"f.txt"}) == {"a": "b", "b": "f.txt"}


def test_links_made_to_cost_the_checker_are_left_out_cheaply():
    # Red team 30: y's 4 KB target walks "." parts around y itself; resolving each link to y took
    # some 150 ms of the event loop (the pending parts grew by a thousand a hop, each taken from the
    # front of a list), so 20,000 of them (the file limit) would have frozen the server for an hour.
    # "../" pairs cost real steps each. A budget of parts per artifact bounds both.
    spin = "./" * 1020 + "y/" + "./" * 1020
    climb = "d/../" * 800 + "f.txt"
    entries = tree(
        Entry("d", FOLDER),
        Entry("f.txt", FILE, 1),
        Entry("ok", LINK, target="f.txt"),
        Entry("z", LINK, target=climb),
        *(Entry(f"l{index}", LINK, target="y") for index in range(2000)),  # before y: y is still there
        Entry("y", LINK, target=spin.rstrip("/")),
        *(Entry(f"m{index}", LINK, target="z") for index in range(2000)),
    )
    plan = plan_copy(entries, **ROOMY)
    assert plan.keep == ("", "d", "f.txt", "ok", "z")  # checked before the budget was spent
    reasons = dict(plan.skipped)
    assert reasons["l0"] == "a symbolic link that leads out of the artifact, or to nothing it holds"  # y loops
    unchecked = f"a symbolic link left unchecked: the artifact's links took {MAX_LINK_WORK} steps"
    assert reasons["l1999"] == reasons["y"] == reasons["m0"] == reasons["m1999"] == unchecked


def tree(*entries: Entry) -> List[Entry]:
    return [Entry("", FOLDER), *entries]


def test_the_plan_keeps_folders_files_and_inner_links_and_says_what_it_left_out():
    plan = plan_copy(
        tree(
            Entry("sub", FOLDER),
            Entry("sub/f.txt", FILE, 4),
            Entry("sub/junk.tmp", FILE, 4),
            Entry("cache", FOLDER),
            Entry("cache/x", FILE, 4),
            Entry("link", LINK, target="sub/f.txt"),
            Entry("passwd", LINK, target="/etc/passwd"),
            Entry("fifo", OTHER),
            Entry("sub/f.txt", FILE, 4),
        ),
        ["*.tmp", "cache"],
        bytes_left=100,
        files_left=100,
    )
    assert plan.keep == ("", "sub", "sub/f.txt", "link")
    assert (plan.bytes, plan.files, plan.excluded, plan.limited) == (4, 6, 3, 0)
    assert plan.placeholders == ("fifo", "passwd")  # their names stay, as empty files (red team 85)
    reasons = dict(plan.skipped)
    assert set(reasons) == {"passwd", "fifo", "sub/f.txt"}
    assert "leads out" in reasons["passwd"] and "FIFO" in reasons["fifo"] and "twice" in reasons["sub/f.txt"]


def test_the_plan_stays_within_the_bytes_and_files_left():
    entries = tree(
        Entry("a", FILE, 10), Entry("b", FILE, 10), Entry("c", FILE, 5), Entry("d", FOLDER), Entry("d/e", FILE, 1)
    )
    by_bytes = plan_copy(entries, bytes_left=16, files_left=100)
    assert by_bytes.keep == ("", "a", "c", "d", "d/e") and by_bytes.bytes == 16 and by_bytes.limited == 1
    assert dict(by_bytes.skipped) == {"b": "over the limit of 16 bytes"}
    by_files = plan_copy(entries, bytes_left=100, files_left=3)
    assert by_files.keep == ("", "a", "b") and by_files.files == 3 and by_files.limited == 3
    assert "d/e" in dict(by_files.skipped)  # inside a folder left out
    # A link counts as an entry; one that would pass the limit is left out, and so is one through it.
    linked = plan_copy(
        tree(Entry("f", FILE, 1), Entry("l1", LINK, target="f"), Entry("l2", LINK, target="l1")),
        bytes_left=9,
        files_left=3,
    )
    assert linked.keep == ("", "f", "l1") and linked.limited == 1


def test_the_plan_of_a_whole_artifact_over_the_limits_keeps_nothing():
    assert plan_copy([Entry("", FILE, 11)], bytes_left=10, files_left=5).keep == ()
    assert plan_copy([Entry("", FILE, 1)], bytes_left=10, files_left=0).keep == ()
    assert plan_copy(tree(Entry("x", FILE, 1)), bytes_left=10, files_left=0).keep == ()
    link = plan_copy([Entry("", LINK, target="/etc/passwd")], bytes_left=10, files_left=10)
    assert link.keep == () and "never followed" in link.skipped[0][1]
    everything = plan_copy(tree(Entry("x", FILE, 1)), ["*"], bytes_left=10, files_left=10)
    assert everything.keep == ("",) and everything.excluded == 1  # tar: an empty folder


def test_the_plan_leaves_out_what_nests_too_deep_or_too_long():
    # Every host copy and every delivery must be able to make each path it keeps: Linux refuses a
    # path of 4096 bytes or more, and Python walks a tree once per folder level on 3.8-3.11.
    chain = [Entry("/".join(["d"] * depth), FOLDER) for depth in range(1, MAX_ARTIFACT_DEPTH + 3)]
    deepest_kept = "/".join(["d"] * MAX_ARTIFACT_DEPTH)
    plan = plan_copy(tree(*chain, Entry(deepest_kept + "/f", FILE, 1), Entry("top.txt", FILE, 1)), **ROOMY)
    assert plan.keep == ("", *(entry.relative for entry in chain[:MAX_ARTIFACT_DEPTH]), "top.txt")
    assert plan.limited == 3  # the next folder, the one inside it, and the file beside it
    reasons = dict(plan.skipped)
    assert reasons[deepest_kept + "/d"] == f"nested deeper than {MAX_ARTIFACT_DEPTH} folders"
    assert reasons[deepest_kept + "/f"] == f"nested deeper than {MAX_ARTIFACT_DEPTH} folders"
    assert reasons[deepest_kept + "/d/d"] == "inside a folder left out for the limits"
    # Bytes, not characters: a name of two-byte characters counts twice.
    fits = "é" * ((MAX_ARTIFACT_PATH - 2) // 2) + "x" * ((MAX_ARTIFACT_PATH - 2) % 2)
    assert len(("d/" + fits).encode()) == MAX_ARTIFACT_PATH
    long = plan_copy(tree(Entry("d", FOLDER), Entry("d/" + fits, FILE, 1), Entry("d/" + fits + "y", FILE, 1)), **ROOMY)
    assert long.keep == ("", "d", "d/" + fits) and long.limited == 1
    assert dict(long.skipped) == {"d/" + fits + "y": f"a path longer than {MAX_ARTIFACT_PATH} bytes"}


ROOMY = {"bytes_left": 1 << 20, "files_left": 1 << 20}


def test_transfer_limit_leaves_room_for_every_header():
    assert transfer_limit(100, 10) >= 100 + 10 * 1024
    assert transfer_limit(0, 0) > 0


class DockerNotFound(Exception):
    status_code = 404
    explanation = "Could not find the file /nope in container 4af4"


class DockerLost(Exception):
    status_code = 404
    explanation = "No such container: 4af4"


class DockerNotADirectory(Exception):
    status_code = 500
    explanation = "lstat /var/lib/docker/overlay2/x/merged/app/f/x: not a directory"


def wrapped(cause: BaseException) -> SandboxError:
    try:
        raise SandboxError("download of /x failed") from cause
    except SandboxError as error:
        return error


def test_a_missing_source_is_told_from_a_lost_sandbox():
    assert source_missing(wrapped(FileNotFoundError(2, "No such file")))
    assert source_missing(wrapped(NotADirectoryError(20, "Not a directory")))
    assert source_missing(wrapped(DockerNotFound()))
    assert source_missing(wrapped(DockerNotADirectory()))
    assert not source_missing(wrapped(DockerLost()))
    assert not source_missing(SandboxError("the container is not running"))
    assert not source_missing(wrapped(PermissionError(13, "Permission denied")))


def stream_of(files: Dict[str, bytes]) -> bytes:
    """A tar of the folder ``out`` holding ``files``, a long name among them (a GNU/PAX extra header)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as archive:
        folder = tarfile.TarInfo("out")
        folder.type = tarfile.DIRTYPE
        archive.addfile(folder)
        for name, data in files.items():
            member = tarfile.TarInfo(f"out/{name}")
            member.size = len(data)
            archive.addfile(member, io.BytesIO(data))
    return buffer.getvalue()


STALLED_FILES = {"a.txt": b"x" * 700, "empty": b"", "b" * 150: b"y" * 10, "c.txt": b"z" * 2000}


@given(st.integers(min_value=0, max_value=len(stream_of(STALLED_FILES))))
def test_a_stream_cut_anywhere_keeps_exactly_the_members_that_came_whole(cut):
    whole = stream_of(STALLED_FILES)
    with tarfile.open(fileobj=io.BytesIO(whole)) as archive:
        ends = []  # (name, where its data ends) in stream order
        for member in archive:
            ends.append((member.name, member.offset_data + member.size))
    kept = complete_members(whole[:cut])
    names = []
    if kept:
        with tarfile.open(fileobj=io.BytesIO(kept)) as archive:
            for member in archive:
                names.append(member.name)
                if member.isreg():
                    extracted = archive.extractfile(member)
                    assert extracted is not None
                    assert extracted.read() == STALLED_FILES[member.name[len("out/") :]]
    # A member is kept when its data came whole, with the padding to its last block.
    assert names == [name for name, end in ends if -(-end // tarfile.BLOCKSIZE) * tarfile.BLOCKSIZE <= cut]


class ArchiveOf:
    """An archive sandbox whose archive of a path is what ``answer(path)`` returns (or raises)."""

    def __init__(self, answer: Callable[[str], bytes]) -> None:
        self.answer = answer
        self.admin_user = "root"

    async def exec(self, command: str, **options: Any) -> ExecResult:
        return ExecResult("", "", 0)  # no parent folder of any artifact is a link (linked_parents_script)

    async def put_archive(self, folder: str, data: bytes) -> None:
        raise AssertionError("not used")

    async def get_archive(self, path: str, *, limit: int) -> bytes:
        return self.answer(path)


def stalling(partial: bytes) -> ArchiveOf:
    """An archive sandbox whose copy of ``/logs/artifacts`` stalls after ``partial``."""

    def answer(path: str) -> bytes:
        if path == "/logs/artifacts":
            raise CopyStalled("the copy of /logs/artifacts stalled: nothing came for 60 s", partial)
        raise SandboxError(f"download of {path} failed: Could not find the file") from FileNotFoundError(2, path)

    return ArchiveOf(answer)


def test_a_stalled_copy_is_cut_short_only_while_the_agents_processes_are_frozen(tmp_path):
    whole = stream_of(STALLED_FILES)
    cut = whole.index(b"z" * 100)  # inside c.txt's data
    sandbox = stalling(whole[:cut])
    assert isinstance(sandbox, ArchiveSandbox)
    # Nothing of the agent's could hold the copy up (its processes are gone, or never paused): a fault.
    with pytest.raises(CopyStalled):
        run(collect_artifacts(sandbox, (), tmp_path / "out"))
    collected = run(collect_artifacts(sandbox, (), tmp_path / "out", frozen=True))
    [item] = collected.artifacts
    assert item.truncated and (item.files, item.bytes) == (4, 710)  # the folder, three files
    assert sorted(os.listdir(item.path)) == sorted(["a.txt", "empty", "b" * 150])
    assert [(skip.path, skip.reason) for skip in collected.skipped] == [
        (
            "/logs/artifacts",
            "the copy of /logs/artifacts stalled: nothing came for 60 s"
            " (a paused process of the agent's holds a lease on a file in it?)",
        )
    ]
    # A stall before anything came whole leaves the artifact out, reported.
    nothing = run(collect_artifacts(stalling(whole[:300]), (), tmp_path / "none", frozen=True))
    assert nothing.artifacts == () and [skip.path for skip in nothing.skipped] == ["/logs/artifacts"]


def collected_at(folder: Path, *items: tuple) -> CollectedArtifacts:
    return CollectedArtifacts(
        folder,
        tuple(
            CollectedArtifact(Artifact(src, src.lstrip("/")), folder / src.lstrip("/"), kind, 1, 0)
            for src, kind in items
        ),
    )


def test_delivery_goes_parents_first_and_never_into_the_verifiers_folders():
    items = collected_at(Path("/h"), ("/app/out.json", FILE), ("/logs/artifacts", FOLDER), ("/app", FOLDER)).artifacts
    assert [item.artifact.source for item in delivery_order(items)] == ["/app", "/app/out.json", "/logs/artifacts"]
    assert delivery_refusal("/tests/x") is not None and delivery_refusal("/logs/verifier") is not None
    assert delivery_refusal("/logs") is not None and delivery_refusal("/") is not None
    assert delivery_refusal("/app", ["/app/tests"]) is not None  # a sandbox's own tests folder
    assert delivery_refusal("/logs/artifacts") is None
    script = delivery_script(delivery_order(items))
    assert "rm -rf -- /app/*" in script and "rm -rf -- /app/out.json && mkdir -p -- /app" in script


# --- round trips on the local sandbox ------------------------------------------------------------


@pytest.fixture
def local() -> None:
    """Placing folders at sandbox paths (the workspace at /app, /logs/artifacts) needs bubblewrap."""
    if not namespaces_available():
        pytest.fail("this machine kind provides bubblewrap (installed by .ci/run); placing folders needs it")


class TarOnly:
    """A local sandbox seen through the protocol's three calls only: no archive calls, so artifacts
    move by ``tar`` in the sandbox and ``download_file``/``upload_file``."""

    def __init__(self, inner: LocalSandbox, admin: Optional[str] = None) -> None:
        """``admin``: its admin written otherwise (as a provider's sandbox may write root: ``root:root``)."""
        self.inner = inner
        self.admin_user, self.workdir = admin or inner.admin_user, inner.workdir
        self.tests_dir, self.logs_dir, self.tmp_dir = inner.tests_dir, inner.logs_dir, inner.tmp_dir
        self.commands: List[str] = []

    async def exec(self, command: str, **options: Any) -> ExecResult:
        self.commands.append(command)
        if options.get("user") == self.admin_user:
            options["user"] = self.inner.admin_user
        return await self.inner.exec(command, **options)

    async def upload_file(self, local_path: str, sandbox_path: str) -> None:
        await self.inner.upload_file(local_path, sandbox_path)

    async def download_file(self, sandbox_path: str, local_path: str) -> None:
        await self.inner.download_file(sandbox_path, local_path)


MODES = ["archive", "tar"]


def agent_state(root: Path) -> Dict[str, Path]:
    workspace = write_files(
        root / "agent",
        {
            "out.json": '{"answer": 42}',
            "src/main.py": "#!/bin/sh\necho hi\n",
            "src/pkg/__init__.py": "",
            "src/build.tmp": "scratch",
            "secret": "not a link's business",
            "node_modules/left-pad/index.js": "module.exports = 1\n",
        },
    )
    (workspace / "src" / "main.py").chmod(0o755)
    os.symlink("/etc/passwd", workspace / "passwd")  # leads out: never followed
    os.symlink("../../etc/shadow", workspace / "src" / "shadow")
    os.symlink("src/main.py", workspace / "main")  # inside: kept as a link
    os.symlink(".", workspace / "dot")
    os.symlink("dot/../secret", workspace / "trick")  # reads as inside, climbs out through "dot"
    os.symlink("/etc/passwd", workspace / "link-source")
    published = write_files(root / "published", {"notes.txt": "published by the agent"})
    return {"workspace": workspace, "published": published}


ARTIFACTS = (
    Artifact("/app", "app", exclude=("*.tmp", "node_modules")),
    Artifact("/app/out.json", "result.json"),
    Artifact("/app/missing.txt", "missing.txt"),
    Artifact("/app/link-source", "link-source"),
)


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


COMMANDS: List[str] = []  # what the last TarOnly sandbox ran


def collect_locally(
    root: Path, mode: str, artifacts=ARTIFACTS, mounts: Optional[Dict[str, Path]] = None, **limits: int
) -> CollectedArtifacts:
    state = agent_state(root)

    async def go() -> CollectedArtifacts:
        placed = {"/logs/artifacts": state["published"], **(mounts or {})}
        async with LocalSandbox(state["workspace"], workdir="/app", mounts=placed) as agent:
            sandbox: Any = agent if mode == "archive" else TarOnly(agent)
            COMMANDS[:] = []
            try:
                return await collect_artifacts(sandbox, artifacts, root / "collected", **limits)
            finally:
                COMMANDS.extend(getattr(sandbox, "commands", []))

    return run(go())


def deliver_locally(
    root: Path,
    mode: str,
    collected: CollectedArtifacts,
    *,
    after: Optional[Callable] = None,
    admin: Optional[str] = None,
    **options: Any,
) -> Path:
    """``collected`` delivered into a fresh local sandbox, seen as ``TarOnly(sandbox, admin)`` in mode "tar"."""
    verifier = write_files(root / "verifier", {"stale.txt": "the image's own file", "keep/me": "x"})

    async def go() -> None:
        async with LocalSandbox(verifier, workdir="/app") as local:
            sandbox: Any = local if mode == "archive" else TarOnly(local, admin)
            await deliver_artifacts(sandbox, collected, **options)
            COMMANDS[:] = getattr(sandbox, "commands", [])
            if after is not None:
                await after(local)

    run(go())
    return verifier


def listing(folder: Path) -> Dict[str, str]:
    """Every path under ``folder``: a file's text, a link's target (``-> ...``), ``/`` for a folder."""
    found = {}
    for path in sorted(folder.rglob("*")):
        relative = str(path.relative_to(folder))
        if path.is_symlink():
            found[relative] = "-> " + os.readlink(path)
        elif path.is_dir():
            found[relative] = "/"
        else:
            found[relative] = path.read_text()
    return found


APP_COPY = {
    "dot": "-> .",
    "link-source": "",  # a link out of the copy, its name kept by an empty file (red team 85)
    "main": "-> src/main.py",
    "out.json": '{"answer": 42}',
    "passwd": "",
    "secret": "not a link's business",
    "src": "/",
    "src/main.py": "#!/bin/sh\necho hi\n",
    "src/pkg": "/",
    "src/pkg/__init__.py": "",
    "src/shadow": "",
    "trick": "",
}


@pytest.mark.parametrize("mode", MODES)
def test_a_round_trip_copies_files_and_folders_and_never_follows_a_link_out(tmp_path, mode, local):
    collected = collect_locally(tmp_path, mode)
    # The fallback archives in the sandbox with tar (and cleans up after); the archive calls need no exec.
    assert [command.count("tar -c") for command in COMMANDS] == ([5, 0] if mode == "tar" else [])
    folder = tmp_path / "collected"
    assert listing(folder / "app") == APP_COPY
    assert (folder / "result.json").read_text() == '{"answer": 42}'
    assert (folder / "logs/artifacts/notes.txt").read_text() == "published by the agent"
    assert listing(folder / "link-source") == {} and (folder / "link-source").read_text() == ""  # its name kept
    assert not os.path.lexists(folder / "missing.txt")
    assert "root:" not in "".join(listing(folder).values())  # /etc/passwd was never read
    assert collected.missing == ("/app/missing.txt",)
    assert collected.describe().startswith(
        "4 artifact(s), 17 file(s), 89 bytes, missing: /app/missing.txt, 5 left out:"
    )
    reasons = {item.path: item.reason for item in collected.skipped}
    assert set(reasons) == {"/app/passwd", "/app/src/shadow", "/app/trick", "/app/link-source"}
    assert "never followed" in reasons["/app/link-source"] and "leads out" in reasons["/app/trick"]
    assert collected.excluded == 4 and collected.truncated == ()  # node_modules (3 entries), build.tmp
    assert [(item.artifact.source, item.kind) for item in collected.artifacts] == [
        ("/logs/artifacts", FOLDER),
        ("/app", FOLDER),
        ("/app/out.json", FILE),
        ("/app/link-source", FILE),
    ]
    assert (folder / "app/src/main.py").stat().st_mode & 0o777 == 0o755

    seen: Dict[str, Any] = {}

    async def look(sandbox: LocalSandbox) -> None:
        seen["logs"] = (await sandbox.exec("cat /logs/artifacts/notes.txt; ls -A /logs/verifier", cwd="/")).stdout
        seen["main"] = (await sandbox.exec("./main", cwd="/app")).stdout

    verifier = deliver_locally(tmp_path / "v", mode, collected, after=look)
    assert [command.count("tar -x") for command in COMMANDS] == ([4] if mode == "tar" else [])
    # The folder's place was emptied (the image's stale.txt is gone), then filled; links kept inside.
    assert listing(verifier) == APP_COPY
    assert seen == {"logs": "published by the agent", "main": "hi\n"}
    assert (verifier / "src/main.py").stat().st_mode & 0o777 == 0o755


@pytest.mark.parametrize("mode", MODES)
def test_the_limits_cut_a_collection_short_and_say_so(tmp_path, mode, local):
    artifacts = (Artifact("/app/src", "src"), Artifact("/app/out.json", "out.json"))
    # The files: /logs/artifacts (a folder and a file), src (a folder, main.py, build.tmp, shadow,
    # pkg, pkg/__init__.py); 4 entries leave src with its folder and one more.
    collected = collect_locally(tmp_path, mode, artifacts, limit_files=4)
    assert collected.truncated == ("/app/src",)
    assert collected.files == 4
    assert not (tmp_path / "collected/out.json").exists()  # no entry left for it
    assert any(item.path == "/app/out.json" and "over the limit" in item.reason for item in collected.skipped)

    by_bytes = collect_locally(
        tmp_path / "b", mode, (Artifact("/app/out.json", "out.json"), Artifact("/app/secret", "s")), limit_bytes=25
    )
    # notes.txt (22 bytes) is collected first; out.json (14) would pass 25, secret (21) too.
    assert [item.artifact.source for item in by_bytes.artifacts] == ["/logs/artifacts"]
    assert {item.path for item in by_bytes.skipped} == {"/app/out.json", "/app/secret"}
    assert by_bytes.bytes == 22


@pytest.mark.parametrize("mode", MODES)
def test_an_archive_past_the_transfer_limit_is_skipped_whole(tmp_path, mode, local):
    state_root = tmp_path / "big"
    big = write_files(state_root, {"big.bin": b"\0" * (3 << 20), "small": "x"})
    collected = collect_locally(
        tmp_path, mode, (Artifact("/data", "data"),), mounts={"/data": big}, limit_bytes=1 << 10, limit_files=10
    )
    assert not (tmp_path / "collected/data").exists()
    [skipped] = [item for item in collected.skipped if item.path == "/data"]
    assert "larger than" in skipped.reason


DEEP_TREES = {
    # Past Python's recursion limit and Linux's PATH_MAX (2 bytes a level): the local sandbox's own
    # archive and the host copy failed, and the sample was masked.
    "deep": ["a"] * 2100,
    # Shallow, but past PATH_MAX within 17 levels: the host copy could not be made.
    "long": ["n" * 250] * 20,
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", sorted(DEEP_TREES))
def test_a_tree_too_deep_to_copy_is_cut_short_never_a_sandbox_fault(tmp_path, mode, shape, local):
    # The agent nests folders until no path can be made on the host (or walked by Python); the copy
    # leaves that part out, says so, and the verifier gets the rest: the agent's doing scores, never masks.
    published = write_files(tmp_path / "published", {"answer.txt": "42"})
    with nested_folders(published, DEEP_TREES[shape], scratch=tmp_path) as deepest:
        collected = collect_locally(tmp_path, mode, (), mounts={"/logs/artifacts": published})
        copy = tmp_path / "collected" / "logs" / "artifacts"
        assert (copy / "answer.txt").read_text() == "42"
        assert collected.truncated == ("/logs/artifacts",)
        kept = deepest.split("/")
        while len(kept) > MAX_ARTIFACT_DEPTH or len("/".join(kept).encode()) > MAX_ARTIFACT_PATH:
            kept.pop()
        assert copy.joinpath(*kept).is_dir() and not os.path.lexists(copy.joinpath(*kept, DEEP_TREES[shape][0]))
        why = f"nested deeper than {MAX_ARTIFACT_DEPTH} folders" if shape == "deep" else "a path longer than"
        assert any(why in item.reason for item in collected.skipped), collected.skipped

        seen: Dict[str, str] = {}

        async def look(sandbox: LocalSandbox) -> None:
            seen["answer"] = (await sandbox.exec("cat /logs/artifacts/answer.txt", cwd="/")).stdout
            seen["folders"] = (await sandbox.exec("find /logs/artifacts -type d | wc -l", cwd="/")).stdout.strip()

        deliver_locally(tmp_path / "v", mode, collected, after=look)
        assert seen == {"answer": "42", "folders": str(len(kept) + 1)}


@pytest.mark.parametrize("mode", MODES)
def test_a_socket_where_an_artifact_should_be_is_left_out_never_a_sandbox_fault(tmp_path, mode, local):
    # The agent binds a Unix socket at the task's output path: no archive can hold one (tar skips it),
    # and the empty archive read as a damaged transfer, masking the sample.
    data = write_files(tmp_path / "data", {"answer.txt": "42"})
    bound = socket.socket(socket.AF_UNIX)
    try:
        bound.bind(str(data / "out.json"))
        artifacts = (Artifact("/data/out.json", "out.json"), Artifact("/data", "data"))
        collected = collect_locally(tmp_path, mode, artifacts, mounts={"/data": data})
    finally:
        bound.close()
    assert [item.artifact.source for item in collected.artifacts] == ["/logs/artifacts", "/data"]
    assert listing(tmp_path / "collected" / "data") == {"answer.txt": "42"}
    reasons = {item.path: item.reason for item in collected.skipped}
    assert reasons == {"/data/out.json": "not a file, folder or symbolic link (a socket, which no archive holds)"}


@pytest.mark.parametrize("mode", MODES)
def test_a_link_loop_among_an_artifacts_parents_is_left_out_never_a_sandbox_fault(tmp_path, mode, local):
    # Red team 30: the agent makes a parent folder of an artifact a link to itself (res -> res). The
    # path cannot be resolved (ELOOP), which the archive calls read as a fault: masked.
    data = write_files(tmp_path / "data", {"answer.txt": "42"})
    os.symlink("res", data / "res")
    os.symlink("b", data / "a")
    os.symlink("a", data / "b")
    artifacts = (Artifact("/data/res/out.json", "out.json"), Artifact("/data/a/x", "x"), Artifact("/data", "data"))
    collected = collect_locally(tmp_path, mode, artifacts, mounts={"/data": data})
    assert collected.missing == () and collected.cut == ("/data/res/out.json", "/data/a/x")  # never followed
    # The links lead nowhere it holds: their names stay, as empty files (red team 85).
    assert listing(tmp_path / "collected" / "data") == {"a": "", "answer.txt": "42", "b": "", "res": ""}


@pytest.mark.parametrize("mode", MODES)
def test_an_artifact_inside_another_through_the_agents_link_is_delivered_as_the_agent_left_it(tmp_path, mode, local):
    # Red team 30: the task collects a folder and a file inside it; the agent made the file's parent
    # a link (sub -> d). Delivery made sub a real folder for the file, then could not make the link
    # there ("rm -f" of a folder): the sample was masked.
    published = write_files(tmp_path / "published", {"d/x.txt": "hi"})
    os.symlink("d", published / "sub")
    collected = collect_locally(
        tmp_path, mode, (Artifact("/logs/artifacts/sub/x.txt", "x.txt"),), mounts={"/logs/artifacts": published}
    )
    assert [item.artifact.source for item in collected.artifacts] == ["/logs/artifacts"]
    # The file through the link is the agent's to place elsewhere: never followed (red team 86), but its
    # folder's copy holds the link and the file as the agent left them.
    assert collected.cut == ("/logs/artifacts/sub/x.txt",)
    seen: Dict[str, str] = {}

    async def look(sandbox: LocalSandbox) -> None:
        seen["shown"] = (await sandbox.exec("readlink sub; cat sub/x.txt d/x.txt", cwd="/logs/artifacts")).stdout

    deliver_locally(tmp_path / "v", mode, collected, after=look)
    assert seen == {"shown": "d\nhihi"}


def test_collecting_again_replaces_the_copy_and_skips_overlapping_destinations(tmp_path, local):
    folder = tmp_path / "collected"
    write_files(folder, {"app/stale": "from an earlier collection"})
    artifacts = (
        Artifact("/app", "app", exclude=("*",)),
        Artifact("/app/out.json", "app/out.json"),  # inside app's copy, which excluded it: skipped
        Artifact("/app/src", "app/src"),  # inside too, with the same layout, but app excludes: skipped
        Artifact("/app/src/main.py", "main.py"),
    )
    collected = collect_locally(tmp_path, "archive", artifacts)
    assert listing(folder / "app") == {}
    assert (folder / "main.py").read_text() == "#!/bin/sh\necho hi\n"
    assert {item.path for item in collected.skipped if "overlaps" in item.reason} == {"/app/out.json", "/app/src"}


def test_an_artifact_already_in_an_earlier_copy_is_copied_once(tmp_path, local):
    artifacts = (Artifact("/app/src", "app/src"), Artifact("/app", "app"), Artifact("/app/src", "app/src"))
    collected = collect_locally(tmp_path, "archive", artifacts)
    assert [item.artifact.source for item in collected.artifacts] == ["/logs/artifacts", "/app/src"]
    assert {item.path for item in collected.skipped if "overlaps" in item.reason} == {"/app"}


@pytest.mark.parametrize("mode", MODES)
def test_a_link_among_the_parents_never_leads_a_copy_to_the_hosts_files(tmp_path, mode, local):
    # The agent links /app/host to a host folder the sandbox never shows it (its /root is a
    # tmpfs of each command): a host-side copy of /app/host/secret must not read the host's file.
    hidden = write_files(tmp_path / "host-only", {"secret": "the host's own file"})
    artifacts = (Artifact("/app/host/secret", "secret"), Artifact("/app/out.json", "out.json"))

    async def go() -> CollectedArtifacts:
        workspace = write_files(tmp_path / "agent", {"out.json": "1"})
        os.symlink(str(hidden), workspace / "host")
        async with LocalSandbox(workspace, workdir="/app") as agent:
            sandbox: Any = agent if mode == "archive" else TarOnly(agent)
            collected = await collect_artifacts(sandbox, artifacts, tmp_path / "out")
            with pytest.raises(SandboxError, match="through a symbolic link"):
                await agent.upload_file(str(hidden / "secret"), "/app/host/planted")
            return collected

    collected = run(go())
    assert not (hidden / "planted").exists()
    assert "the host's own file" not in "".join(listing(tmp_path / "out").values())
    assert (tmp_path / "out/out.json").read_text() == "1"
    assert [item.path for item in collected.skipped] == ["/app/host/secret"]  # a link above it: never followed
    assert collected.cut == ("/app/host/secret",)


def test_the_convention_folder_is_never_reported_missing(tmp_path, local):
    workspace = write_files(tmp_path / "agent", {"out.json": "1"})

    async def go() -> CollectedArtifacts:
        async with LocalSandbox(workspace, workdir="/app") as agent:
            return await collect_artifacts(agent, [Artifact("/app/nope", "nope")], tmp_path / "out")

    collected = run(go())
    assert collected.missing == ("/app/nope",) and collected.artifacts == ()


def test_a_sidecars_artifact_or_a_bad_path_is_the_callers_mistake(tmp_path, local):
    workspace = write_files(tmp_path / "agent", {"out.json": "1"})

    async def go(artifact: Artifact) -> None:
        async with LocalSandbox(workspace, workdir="/app") as agent:
            await collect_artifacts(agent, [artifact], tmp_path / "out")

    with pytest.raises(ValueError, match="Compose service 'db'"):
        run(go(Artifact("/var/lib/db", "db", service="db")))
    with pytest.raises(ValueError, match="under /tests"):
        run(go(Artifact("/tests/answers", "answers")))
    with pytest.raises(ValueError, match="must not contain '..'"):
        run(go(Artifact("/app/x", "../../etc/x")))
    assert not (tmp_path / "etc").exists()


class Faulty:
    """A sandbox whose calls fail as a provider's do (lost, unreachable): plain exceptions."""

    admin_user = "root"
    tests_dir, logs_dir, tmp_dir, workdir = "/tests", "/logs/verifier", "/tmp", "/app"

    def __init__(self, *, archive: Optional[bytes] = None) -> None:
        self.archive = archive
        self.calls: List[str] = []

    async def exec(self, command: str, **options: Any) -> ExecResult:
        self.calls.append(command)
        raise ConnectionError("the provider hung up")

    async def upload_file(self, local_path: str, sandbox_path: str) -> None:
        raise ConnectionError("the provider hung up")

    async def download_file(self, sandbox_path: str, local_path: str) -> None:
        raise ConnectionError("the provider hung up")


class FaultyArchives(Faulty):
    async def exec(self, command: str, **options: Any) -> ExecResult:
        if self.archive is not None:  # a working sandbox, whose archives are hostile
            return ExecResult("", "", 0)
        return await super().exec(command, **options)

    async def get_archive(self, path: str, *, limit: int) -> bytes:
        if self.archive is not None:
            return self.archive
        raise ConnectionError("the provider hung up")

    async def put_archive(self, folder: str, data: bytes) -> None:
        raise ConnectionError("the provider hung up")


@pytest.mark.parametrize("sandbox", [Faulty(), FaultyArchives()], ids=["tar", "archive"])
def test_a_fault_of_the_sandbox_is_a_sandbox_error(tmp_path, sandbox):
    with pytest.raises(SandboxError, match="ConnectionError: the provider hung up"):
        run(collect_artifacts(sandbox, [Artifact("/app", "app")], tmp_path / "out"))
    write_files(tmp_path / "copy", {"app/x": "1"})
    collected = collected_at(tmp_path / "copy", ("/app", FOLDER))
    with pytest.raises(SandboxError, match="ConnectionError: the provider hung up"):
        run(deliver_artifacts(sandbox, collected))


def hostile_archive(*names: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name in names:
            info = tarfile.TarInfo(name)
            info.size = 4
            archive.addfile(info, io.BytesIO(b"evil"))
    return buffer.getvalue()


@pytest.mark.parametrize("names", [("app", "app/../../escaped"), ("app", "other/escaped"), ("../escaped",), ("app/x",)])
def test_an_archive_with_names_outside_the_artifact_is_refused(tmp_path, names):
    sandbox = FaultyArchives(archive=hostile_archive(*names))
    assert isinstance(sandbox, ArchiveSandbox)
    with pytest.raises(SandboxError, match="the archive of"):
        run(collect_artifacts(sandbox, [], tmp_path / "deep" / "out"))
    assert sorted(str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*")) == ["deep", "deep/out"]


def amplifying_archive(size: int, links: int) -> bytes:
    """``app/a`` twice (empty, then ``size`` bytes), then ``links`` hard links to ``app/a``: what a
    root agent's own ``tar`` could print (a provider sandbox collects through the image's tar)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as archive:
        top = tarfile.TarInfo("app")
        top.type, top.mode = tarfile.DIRTYPE, 0o755
        archive.addfile(top)
        archive.addfile(tarfile.TarInfo("app/a"), io.BytesIO(b""))
        large = tarfile.TarInfo("app/a")
        large.size = size
        archive.addfile(large, io.BytesIO(b"x" * size))
        for index in range(links):
            link = tarfile.TarInfo(f"app/b{index}")
            link.type, link.linkname = tarfile.LNKTYPE, "app/a"
            archive.addfile(link)
    return buffer.getvalue()


class ForgedTar(Faulty):
    """A sandbox without archive calls whose ``tar`` printed ``archive`` for /app."""

    async def exec(self, command: str, **options: Any) -> ExecResult:
        return ExecResult(stdout="0 missing\n1 ok /tmp/x\n", stderr="", return_code=0)  # collect_script's answer

    async def download_file(self, sandbox_path: str, local_path: str) -> None:
        assert self.archive is not None
        Path(local_path).write_bytes(self.archive)


@pytest.mark.parametrize("sandbox_type", [ForgedTar, FaultyArchives], ids=["tar", "archive"])
def test_a_name_held_twice_is_left_out_never_written_past_the_limit(tmp_path, sandbox_type):
    """Red team 39: the plan sized each hard link by the first ``app/a`` (empty) while tarfile's
    extraction followed the last (1 MiB): 40 MiB written on the host for a 4 KiB limit."""
    sandbox = sandbox_type(archive=amplifying_archive(1 << 20, 40))
    result = run(collect_artifacts(sandbox, [Artifact("/app", "app")], tmp_path / "out", limit_bytes=4096))
    skipped = {(item.path, item.reason) for item in result.skipped}  # (the convention folder gets it too here)
    assert result.artifacts == () and ("/app", "the archive holds 'app/a' twice") in skipped, skipped
    assert {reason for _, reason in skipped} == {"the archive holds 'app/a' twice"}
    assert [path for path in (tmp_path / "out").rglob("*")] == []


@pytest.mark.parametrize("source", ["/tests/expected.txt", "/logs/verifier", "/logs", "/tests"])
def test_delivery_never_lands_in_the_verifiers_folders(tmp_path, source):
    write_files(tmp_path / "copy", {"x": "planted"})
    collected = CollectedArtifacts(
        tmp_path, (CollectedArtifact(Artifact(source, "x"), tmp_path / "copy" / "x", FILE, 1, 7),)
    )
    sandbox = FaultyArchives()
    with pytest.raises(ValueError, match="may not land there"):
        run(deliver_artifacts(sandbox, collected))
    assert sandbox.calls == []  # refused before anything reached the sandbox


def test_delivery_refuses_a_copy_outside_the_collection(tmp_path):
    write_files(tmp_path / "elsewhere", {"x": "1"})
    collected = CollectedArtifacts(
        tmp_path / "copy", (CollectedArtifact(Artifact("/app/x", "x"), tmp_path / "elsewhere" / "x", FILE, 1, 1),)
    )
    with pytest.raises(ValueError, match="is not a file or folder in"):
        run(deliver_artifacts(FaultyArchives(), collected))


def test_delivery_refuses_a_sandbox_without_paths_of_its_own(tmp_path):
    write_files(tmp_path / "copy", {"app/x": "1"})
    workspace = write_files(tmp_path / "verifier", {"keep": "the host's"})

    async def go() -> None:
        async with LocalSandbox(workspace, isolate=False) as sandbox:
            await deliver_artifacts(sandbox, collected_at(tmp_path / "copy", ("/app", FOLDER)))

    with pytest.raises(SandboxError, match="no paths of its own"):
        run(go())
    assert (workspace / "keep").read_text() == "the host's"


@pytest.mark.parametrize("admin", [None, "root:root", "0"])
def test_delivery_hands_the_artifacts_to_the_owner(tmp_path, local, admin):
    """Whatever way the admin root is written (a provider's sandbox may say ``root:root``)."""
    if os.getuid() != 0:
        pytest.skip("handing files to another user needs root (CI runs as root)")
    collected = collect_locally(tmp_path, "archive", (Artifact("/app/src", "src"),))
    seen: Dict[str, str] = {}

    async def look(sandbox: LocalSandbox) -> None:
        seen["owners"] = (await sandbox.exec("stat -c '%U %n' /app/src /app/src/main.py /app", cwd="/")).stdout

    mode = "archive" if admin is None else "tar"
    deliver_locally(tmp_path / "v", mode, collected, owner="nobody", after=look, admin=admin)
    assert seen["owners"].split("\n")[:2] == ["nobody /app/src", "nobody /app/src/main.py"]
    assert seen["owners"].split("\n")[2] != "nobody /app"  # a parent made for it stays the admin's


@pytest.mark.parametrize("mode", MODES)
def test_delivery_leaves_out_a_link_planted_in_the_host_copy(tmp_path, mode, local):
    copy = write_files(tmp_path / "copy" / "app", {"answer.txt": "42"})
    os.symlink("/tests/expected.txt", copy / "expected")  # would read the verifier's own answers
    os.symlink("answer.txt", copy / "same")
    (copy / "answer.txt").chmod(0o6755)  # set-id bits never travel
    collected = collected_at(tmp_path / "copy", ("/app", FOLDER))
    verifier = deliver_locally(tmp_path / "v", mode, collected)
    assert listing(verifier) == {"answer.txt": "42", "same": "-> answer.txt"}
    assert (verifier / "answer.txt").stat().st_mode & 0o7777 == 0o755


# A process holding write leases (F_SETLEASE, F_WRLCK) on its own files and ignoring SIGIO: an open of
# each for reading waits for it, 45 s (Linux's lease-break-time). It prints "held" once they are taken.
LEASE_HOLDER = """
import fcntl, glob, signal, sys, time
signal.signal(signal.SIGIO, signal.SIG_IGN)
held = []
for path in sorted(glob.glob(sys.argv[1] + "/f*")):
    handle = open(path)
    fcntl.fcntl(handle, 1024, fcntl.F_WRLCK)
    held.append(handle)
print("held", flush=True)
time.sleep(600)
"""


def test_leases_the_agent_holds_never_stall_the_tar_fallback(tmp_path, local):
    # A provider's sandbox cannot pause the agent's processes while tar archives its artifacts. GNU tar
    # opens each file with O_NONBLOCK, so a leased one fails at once (EWOULDBLOCK) and is left out,
    # where the engine's open waits 45 s a file (Linux's lease-break-time), which masked a sample.
    published = write_files(tmp_path / "published", {f"f{index}": "x" * 100 for index in range(3)})
    (tmp_path / "published" / "notes.txt").write_text("not leased")
    holder = subprocess.Popen([sys.executable, "-c", LEASE_HOLDER, str(published)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"

        async def go() -> CollectedArtifacts:
            async with LocalSandbox(tmp_path / "agent", workdir="/app", mounts={"/logs/artifacts": published}) as agent:
                return await collect_artifacts(TarOnly(agent), (), tmp_path / "out")

        (tmp_path / "agent").mkdir()
        started = time.monotonic()
        collected = run(go())
        assert time.monotonic() - started < 30  # not 45 s a leased file
        assert "LEASE" in Path("/proc/locks").read_text()  # still held: nothing broke them
    finally:
        holder.kill()
        holder.wait()
    [item] = collected.artifacts
    assert sorted(os.listdir(item.path)) == ["notes.txt"]


def looping_tar() -> bytes:
    """A file, then a header whose size is -512 (base-256): tarfile reads that header again and again,
    forever, growing its member list (red team 33; CVE-2025-8194 in most releases)."""
    first = tarfile.TarInfo("out/a.txt")
    first.size = 1
    second = bytearray(tarfile.TarInfo("out/b.txt").tobuf(tarfile.GNU_FORMAT))
    second[124:136] = b"\xff" + (-512).to_bytes(12, "big", signed=True)[1:]
    second[148:156] = b" " * 8
    second[148:156] = b"%06o\0 " % sum(second[:512])
    return first.tobuf(tarfile.GNU_FORMAT) + b"x".ljust(512, b"\0") + bytes(second) + bytes(1024)


def test_an_archive_whose_member_goes_back_is_damaged_never_read_forever(tmp_path):
    # The tar fallback reads an archive the sandbox's own tar made, which a root agent can replace.
    kept = complete_members(looping_tar())
    with tarfile.open(fileobj=io.BytesIO(kept)) as archive:
        assert archive.getnames() == ["out/a.txt"]
    with pytest.raises(SandboxError, match="is damaged: the member 'out/b.txt' does not move the archive on"):
        run(asyncio.wait_for(collect_artifacts(ArchiveOf(lambda path: looping_tar()), (), tmp_path / "out"), 30))


@pytest.mark.parametrize("options", [["--format=gnu"], ["--format=posix", "--sparse-version=1.0"]])
def test_a_sparse_member_whole_or_cut_is_never_read(tmp_path, options):
    # tarfile raised IndexError (GNU) or ValueError (PAX 1.0) on a sparse map cut short (red team 33),
    # and reads a whole one with a Python loop per entry (red team 38: 4 s and 440 MB for 16 MB). No
    # tar of a sandbox's files holds one (tar runs without -S there): what comes before it is kept.
    with open(tmp_path / "s.bin", "wb") as sparse:
        for index in range(60):  # 60 extents: the map needs extension headers
            sparse.seek(index * 65536)
            sparse.write(b"D" * 100)
    (tmp_path / "a.txt").write_text("hello\n")
    whole = subprocess.run(
        ["tar", *options, "--sparse", "-cf", "-", "-C", str(tmp_path), "a.txt", "s.bin"],
        stdout=subprocess.PIPE,
        check=True,
    ).stdout
    names = set()
    for cut in range(512, len(whole) + 1, 512):
        kept = complete_members(whole[:cut])
        if kept:
            with tarfile.open(fileobj=io.BytesIO(kept)) as archive:
                names.add(tuple(archive.getnames()))
    assert names == {("a.txt",)}
    tally = _Collection(tmp_path / "out", MAX_ARTIFACT_BYTES, MAX_ARTIFACT_FILES)
    tally.take(Artifact("/app", "app"), io.BytesIO(whole))
    assert [(item.path, "sparse" in item.reason) for item in tally.result().skipped] == [("/app", True)]


@pytest.mark.parametrize(
    "owner, verifier_user, given",
    [
        (65534, None, 65534),
        (65534, "root", 65534),
        (65534, "1001:1001", 65534),
        (65534, "nobody", 65533),  # uid 65534 on this machine, as in Debian's images
        (65534, "065534", 65533),  # the same uid spelled otherwise (red team 74)
        (65534, "65534:65534", 65533),
        (65534, "no-such-user", 65534),  # no such user runs anything
    ],
)
def test_the_artifacts_owner_is_never_the_verifiers_uid(owner, verifier_user, given):
    from nemo_gym.data.tasks.harbor.artifacts import hand_over_script

    if subprocess.run(["id", "-u", "nobody"], stdout=subprocess.PIPE, text=True).stdout.strip() != "65534":
        pytest.skip("this machine's nobody is not uid 65534")
    stubs = 'fail() { echo "failed: $*"; exit 1; }\nchown() { echo "chown $*"; }\n'
    script = stubs + hand_over_script(["/app", "/logs/artifacts"], owner, verifier_user)
    ran = subprocess.run(["bash", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert ran.stdout == f"chown -hR -- {given} /app /logs/artifacts\n", ran.stdout


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "roots_link, agents_link, artifact",
    [
        # Red team 85: the artifact /app/out/answer.txt, and the agent (nobody) made /app/out a link to a
        # root-only folder of the image's holding an answer.txt: the copy, made as root, followed it, and
        # the verifier read the hidden answer (1.0).
        (None, "/app/out", "/app/out/answer.txt"),
        # Red team 86: only links of anyone's but root's were refused, by the path as written: the image's
        # /app/data -> shared passed, and the agent made /app/shared -> a folder it cannot read.
        ("data", "/app/shared", "/app/data/answer.txt"),
    ],
    ids=["the-agents-link", "a-roots-link-through-the-agents"],
)
def test_a_link_above_an_artifact_is_never_followed_as_root(tmp_path, mode, local, roots_link, agents_link, artifact):
    # Any link among an artifact's parent folders, whoever made it, leaves the artifact out whole
    # (which a separate verification scores 0).
    from test_attacks import needs_root

    needs_root()
    hidden = write_files(tmp_path / "hidden", {"secret/answer.txt": "42"})
    (hidden / "secret").chmod(0o700)
    workspace = write_files(tmp_path / "agent", {})
    if roots_link:
        os.symlink("shared", workspace / roots_link)  # the image's own link, root's
    workspace.chmod(0o777)

    async def go() -> CollectedArtifacts:
        async with LocalSandbox(workspace, workdir="/app", mounts={"/srv": hidden}) as agent:
            made = await agent.exec(f"ln -s /srv/secret {agents_link} && cat {artifact}", user="nobody")
            assert made.return_code != 0 and "Permission denied" in made.stderr, made  # the agent cannot read it
            sandbox: Any = agent if mode == "archive" else TarOnly(agent)
            return await collect_artifacts(sandbox, [Artifact(artifact, "answer.txt")], tmp_path / "collected")

    collected = run(go())
    assert not os.path.lexists(tmp_path / "collected" / "answer.txt")
    assert collected.cut == (artifact,), collected
