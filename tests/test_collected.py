"""Reading a run's results back: whole, or not at all."""

from __future__ import annotations

from typing import Dict

import pytest
from support import pack_results

from nemo_gym.data.tasks.harbor.collected import CollectError, read_collected

META = b"status 0\nelapsed_cs 3\nkinds reward.json=file \nskipped 0\n"


def results(files: Dict[str, bytes], *, sums: bool = True) -> bytes:
    return pack_results(files, sums)


FILES = {"reward.json": b'{"reward": 1}\n', "meta": META, "report": b"line\n", "cache_tag": b"cpython-312"}


def test_whole_results_are_read():
    collected = read_collected(results(FILES))
    assert collected.files == {name: data for name, data in FILES.items() if name != "meta"}
    assert (collected.status, collected.elapsed_sec, collected.kinds) == (0, 0.03, {"reward.json": "file"})


def test_results_without_sums_or_meta_are_never_read():
    with pytest.raises(CollectError, match="incomplete"):
        read_collected(results(FILES, sums=False))
    with pytest.raises(CollectError, match="incomplete"):
        read_collected(results({"reward.json": b"1"}))


def test_damage_the_sums_see_is_never_read():
    data = results(FILES).replace(b'{"reward": 1}', b'{"reward": 9}')
    with pytest.raises(CollectError, match="does not match its checksum"):
        read_collected(data)


def test_anything_ahead_of_the_results_is_damage():
    # Red team, round 20: tarfile reads up to the first end of archive, so results written into the
    # pipe ahead of the real ones (by code that reaches it) were read, and the real ones were not.
    forged = results({**FILES, "reward.json": b'{"reward": 9}\n'})
    with pytest.raises(CollectError, match="more than one tar"):
        read_collected(forged + results(FILES))
    assert read_collected(results(FILES) + b"\0" * 20480).files["reward.json"] == FILES["reward.json"]


def test_a_cache_tag_over_its_cap_is_damage():
    with pytest.raises(CollectError, match="cache_tag in the results is 65 bytes"):
        read_collected(results({**FILES, "cache_tag": b"x" * 65}))
