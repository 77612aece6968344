"""Tars from a sandbox are refused before ``tarfile`` reads them when their PAX headers would take it
quadratic time (CVE-2024-6232 and the record walk, on most interpreters a host runs): red team 36's
results tar of one long run of digits froze a server for 16 s at 150 KB, and an agent's links to
4 KB runs of digits cost 18 ms each through the engine's own archive."""

from __future__ import annotations

import io
import subprocess
import tarfile
import time
from typing import List, Optional

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nemo_gym.data.tasks.harbor.artifacts import MAX_ARTIFACT_BYTES, MAX_ARTIFACT_FILES, _Collection, complete_members
from nemo_gym.data.tasks.harbor.collected import CollectError, read_collected
from nemo_gym.data.tasks.harbor.tar_guard import LONG_RUN, MAX_PAX_WORK, UnsafeTar, open_tar
from nemo_gym.data.tasks.harbor.task import Artifact


def header(name: bytes, size: int, kind: bytes, size_field: Optional[bytes] = None, **extra: bytes) -> bytes:
    block = bytearray(512)
    block[0 : len(name)] = name
    block[100:108] = b"0000644\0"
    block[108:116] = block[116:124] = b"0000000\0"
    block[124:136] = b"%011o\0" % size if size_field is None else size_field
    block[136:148] = b"00000000000\0"
    block[156:157] = kind
    block[257:265] = b"ustar\x0000"
    for offset, value in extra.items():
        block[int(offset[1:]) : int(offset[1:]) + len(value)] = value
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block)
    return bytes(block)


def pad(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % 512)


END = b"\0" * 1024


def pax_tar(body: bytes, kind: bytes = b"x") -> bytes:
    """A tar that opens with a PAX header holding ``body``, then one empty file."""
    return header(b"./PaxHeaders/x", len(body), kind) + pad(body) + header(b"x", 0, b"0") + END


def read_all(data: bytes) -> List[str]:
    with open_tar(io.BytesIO(data)) as archive:
        return [member.name for member in archive]


def record(keyword: str, value: str) -> bytes:
    text = f" {keyword}={value}\n".encode()
    length = len(text) + len(str(len(text)))
    length += len(str(length)) - len(str(len(text)))
    return str(length).encode() + text


def links(targets: List[str]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        folder = tarfile.TarInfo("top")
        folder.type = tarfile.DIRTYPE
        archive.addfile(folder)
        for index, target in enumerate(targets):
            link = tarfile.TarInfo(f"top/l{index}")
            link.type, link.linkname = tarfile.SYMTYPE, target
            archive.addfile(link)
    return buffer.getvalue()


DIGITS = b"1" * 60_000
EVIL = header(b"./PaxHeaders/x", len(DIGITS), b"x") + pad(DIGITS) + header(b"victim", 0, b"0")
ZERO = record("size", "0")
COMMENT = record("comment", "x")
GLOBAL = b"".join(record(f"k{index}", "") for index in range(20))
SPARSE_EXTENSION = bytes(124) + b"%011o\0" % len(EVIL) + bytes(20) + b"0" + bytes(355)
SPARSE_1_0 = b"".join(
    record(key, value)
    for key, value in (("GNU.sparse.major", "1"), ("GNU.sparse.minor", "0"), ("GNU.sparse.name", "f"))
)
MAP = b"100000\n" + b"0\n0\n" * 100_000
HOSTILE = {
    # red team 36's: one long run of digits, which \d+ hdrcharset= searches in quadratic time
    "one run of digits": pax_tar(b"1" * 150_000),
    "a global header of digits": pax_tar(b"1" * 150_000, b"g"),
    # each record's length moves on by 2, and ([^=]+)= scans to the far end every time
    "short lengths before one far '='": pax_tar(b"2 " * 75_000 + b"x=\n"),
    "a record past the header's end": pax_tar(b"99 path=x\n"),
    "a record without a keyword": pax_tar(b"9 =value\n"),
    "a record without a newline": pax_tar(b"10 path=xy"),
    "a well-formed record of digits": pax_tar(record("comment", "7" * 150_000)),
    # red team 37: each hid red team 36's header from a walk of its own, which tarfile then read
    "behind a link with a size": header(b"l", len(EVIL), b"2", _157=b"t") + EVIL + END,
    "behind a folder with a size": header(b"d/", len(EVIL), b"5") + EVIL + END,
    "behind a plain file named as a folder": header(b"d/", len(EVIL), b"\0") + EVIL + END,
    "a negative size, the rest read as the header": header(b"./PaxHeaders/x", 0, b"x", b"\xff" * 10 + b"\xfc\0")
    + DIGITS
    + END,
    "behind a size field only tarfile reads": header(b"f", 0, b"0", b"\x1c0000000000\0") + EVIL + END,
    "behind a PAX size record": header(b"./PaxHeaders/f", len(ZERO), b"x")
    + pad(ZERO)
    + header(b"f", len(EVIL), b"0")
    + EVIL
    + END,
    "behind a GNU sparse extension block": header(b"s", 0, b"S", _482=b"\x01", _483=b"00000000000\0")
    + SPARSE_EXTENSION
    + EVIL
    + END,
    "digits in the padding of its last block": header(b"./PaxHeaders/x", 10, b"x")
    + b"10 path=x\n"
    + b"1" * 502
    + header(b"x", 0, b"0")
    + END,
    "a global header copied into every member": header(b"./PaxHeaders/g", len(GLOBAL), b"g")
    + pad(GLOBAL)
    + header(b"x", 0, b"0")
    + END,
    "headers that extend the next 400 times": (header(b"./PaxHeaders/x", len(COMMENT), b"x") + pad(COMMENT)) * 400
    + header(b"x", 0, b"0")
    + END,
    # red team 38: sparse maps, read with a Python loop per entry on every interpreter
    "a GNU sparse 1.0 map": header(b"./PaxHeaders/f", len(SPARSE_1_0), b"x")
    + pad(SPARSE_1_0)
    + header(b"./GNUSparseFile.0/f", len(MAP), b"0")
    + pad(MAP)
    + END,
    "a GNU sparse 0.1 map": pax_tar(record("GNU.sparse.map", "0," * 100_000 + "0") + record("GNU.sparse.size", "0")),
    "an old GNU sparse member": header(b"s", 0, b"S") + END,
}


@pytest.mark.parametrize("data", HOSTILE.values(), ids=list(HOSTILE))
def test_a_hostile_header_is_refused_at_once(data, tmp_path):
    started = time.perf_counter()
    with pytest.raises(UnsafeTar):
        read_all(data)
    (tmp_path / "a.tar").write_bytes(data)
    with open(tmp_path / "a.tar", "rb") as file, pytest.raises(UnsafeTar):  # as the tar fallback passes it
        list(open_tar(file))
    with pytest.raises(CollectError):  # unreadable, or refused sooner (a member results never hold)
        read_collected(data)
    whole = complete_members(data)  # the members before the refused header, which read safely
    assert whole == b"" or read_all(whole)
    assert time.perf_counter() - started < 2  # tarfile alone: 16 s for the first, hours at the cap


def test_what_tarfile_writes_passes():
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name in ("plain", "café ✓/" * 3 + "x", "d/" * 60 + "deep", "1234567890" * 6):
            info = tarfile.TarInfo(name)
            info.size, info.uid, info.mtime = 3, 1 << 40, 1796229052.322616
            info.pax_headers = {"SCHILY.xattr.user.note": "a=b\nc", "comment": "9" * (LONG_RUN - 1)}
            archive.addfile(info, io.BytesIO(b"abc"))
    assert len(read_all(buffer.getvalue())) == 4
    # red team 37: 300 files named by 255-digit numbers were refused by a budget of 2^24
    assert len(read_all(links([str(10**254 + index) for index in range(300)]))) == 301


def test_long_runs_are_counted_against_the_budget():
    side = int(MAX_PAX_WORK**0.5)
    read_all(links(["7" * side]))
    with pytest.raises(UnsafeTar, match="runs of digits"):  # a target past 100 bytes: a PAX record
        read_all(links(["7" * side, "7" * LONG_RUN + "/" + "x" * 100]))
    read_all(links(["7" * (LONG_RUN - 1) + "/"] * 2000))  # short runs cost little


def test_an_artifact_of_links_to_runs_of_digits_is_skipped_not_read(tmp_path):
    # An agent's links, archived by the engine's own tar writer: the artifact is left out (the agent's
    # doing, never a mask), and nothing waits on tarfile meanwhile.
    tally = _Collection(tmp_path, MAX_ARTIFACT_BYTES, MAX_ARTIFACT_FILES)
    started = time.perf_counter()
    tally.take(Artifact("/workspace/top", "top"), io.BytesIO(links(["1" * 4095] * 20)))
    assert time.perf_counter() - started < 1  # tarfile: 0.35 s for these 20, 6 minutes for 20,000
    result = tally.result()
    assert not result.artifacts
    assert [(skipped.path, "runs of digits" in skipped.reason) for skipped in result.skipped] == [
        ("/workspace/top", True)
    ]


def test_a_cut_archive_keeps_its_whole_members():
    data = links(["/usr/lib/" + "x" * 200] * 3)
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        last = archive.getmembers()[-1].offset
    assert data[last + 156 : last + 157] == b"x"
    cut = data[: last + 512 + 100]  # into the last member's PAX header
    whole = complete_members(cut)
    with tarfile.open(fileobj=io.BytesIO(whole)) as archive:
        assert [member.name for member in archive] == ["top", "top/l0", "top/l1"]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0/"), min_size=1, max_size=40),
            st.dictionaries(
                st.text("abcdefgh.", min_size=1, max_size=8),
                st.text(st.characters(blacklist_categories=("Cs",)), max_size=80),
                max_size=3,
            ),
        ),
        max_size=6,
    ),
    st.integers(0, 4000),
)
def test_no_tar_tarfile_writes_is_refused_whole_or_cut_short(members, cut):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for index, (name, headers) in enumerate(members):
            info = tarfile.TarInfo(f"{index}{name}")
            info.pax_headers = headers
            archive.addfile(info)
    data = buffer.getvalue()
    assert len(read_all(data)) == len(members)
    try:
        read_all(data[: max(0, len(data) - cut)])
    except UnsafeTar:
        raise
    except (tarfile.TarError, EOFError, ValueError):
        pass  # cut short: damaged, as tarfile says


def test_what_gnu_tar_writes_without_sparse_passes(tmp_path):
    # The artifact fallback's and grading's own tar (no -S): long, non-ASCII and linked names, in both formats.
    folder = tmp_path / "top"
    (folder / ("d" * 120)).mkdir(parents=True)
    (folder / ("d" * 120) / ("café ✓ " * 20)).write_text("x")
    (folder / "l").symlink_to("/" + "t" * 200)
    for form in ("--format=posix", "--format=gnu"):
        data = subprocess.run(["tar", form, "-cf", "-", "-C", str(tmp_path), "top"], stdout=subprocess.PIPE, check=True)
        assert len(read_all(data.stdout)) == 4


HUGE = b"\x80" + (1 << 40).to_bytes(11, "big")


@pytest.mark.parametrize(
    "data",
    [
        header(b"./PaxHeaders/x", 0, b"x", HUGE) + pad(COMMENT) + header(b"x", 0, b"0") + END,
        header(b"././@LongLink", 0, b"L", HUGE) + pad(b"x") + header(b"x", 0, b"0") + END,
    ],
    ids=["PAX", "GNU long name"],
)
def test_an_extending_header_larger_than_the_file_is_a_cut(tmp_path, data):
    # red team 38: tarfile reads one whole, 2**40 bytes from a real file (as the tar fallback passes
    # it): a MemoryError escaped the artifact copy.
    (tmp_path / "a.tar").write_bytes(data)
    with open(tmp_path / "a.tar", "rb") as file, pytest.raises(tarfile.ReadError, match="bytes follow"):
        list(open_tar(file))
    with pytest.raises(CollectError, match="not a readable tar"):
        read_collected(data)
