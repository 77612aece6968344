"""Reading a run's results back: whole, or not at all."""

from __future__ import annotations

import hashlib
import io
import tarfile
from typing import Dict

import pytest

from nemo_gym.data.tasks.harbor.collected import CollectError, read_collected

META = b"status 0\nelapsed_cs 3\nkinds reward.json=file \nskipped 0\n"


def results(files: Dict[str, bytes], *, sums: bool) -> bytes:
    files = dict(files)
    if sums:
        files[".sums"] = "".join(
            f"{hashlib.sha256(data).hexdigest()}  {name}\n" for name, data in files.items()
        ).encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo("./" + name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


FILES = {"reward.json": b'{"reward": 1}\n', "meta": META, "report": b"line\n", "cache_tag": b"cpython-312"}


@pytest.mark.parametrize("whole", [False, True])
def test_results_with_their_sums_are_read_either_way(whole):
    collected = read_collected(results(FILES, sums=True), whole=whole)
    assert collected.files == {name: data for name, data in FILES.items() if name != "meta"}
    assert (collected.status, collected.elapsed_sec, collected.kinds) == (0, 0.03, {"reward.json": "file"})


def test_results_without_sums_are_read_only_when_the_caller_vouches_they_came_whole():
    # A piped run prints its done marker after the results instead of checksumming them.
    assert read_collected(results(FILES, sums=False), whole=True).files["reward.json"] == b'{"reward": 1}\n'
    with pytest.raises(CollectError, match="incomplete"):
        read_collected(results(FILES, sums=False))


@pytest.mark.parametrize("whole", [False, True])
def test_damage_the_sums_see_is_never_read(whole):
    data = results(FILES, sums=True).replace(b'{"reward": 1}', b'{"reward": 9}')
    with pytest.raises(CollectError, match="does not match its checksum"):
        read_collected(data, whole=whole)


@pytest.mark.parametrize("whole", [False, True])
def test_a_missing_meta_file_or_reward_file_is_never_read(whole):
    with pytest.raises(CollectError, match="incomplete"):
        read_collected(results({"reward.json": b"1"}, sums=True), whole=whole)
    with pytest.raises(CollectError, match="disagree about reward.json"):
        read_collected(results({"meta": META}, sums=False), whole=True)


def test_a_cache_tag_over_its_cap_is_damage():
    with pytest.raises(CollectError, match="cache_tag in the results is 65 bytes"):
        read_collected(results({**FILES, "cache_tag": b"x" * 65}, sums=True))
