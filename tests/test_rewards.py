"""read_reward: every row of the contract's table and its edges, and any bytes give an outcome."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nemo_gym.data.tasks.harbor.rewards import (
    INVALID_REWARD,
    MISSING_REWARD,
    VERIFIER_TIMEOUT,
    RewardOutcome,
    read_reward,
)

OK = None
# (id, reward.json bytes or None, reward.txt bytes or None, reward, metrics, components, failure_kind)
TABLE = [
    ("json-reward", b'{"reward": 0.5}', None, 0.5, {}, None, OK),
    (
        "json-reward-and-metrics",
        b'{"reward": 1, "tokens": 12, "ok": true}',
        None,
        1.0,
        {"tokens": 12.0, "ok": 1.0},
        None,
        OK,
    ),
    ("json-bool-reward", b'{"reward": true}', None, 1.0, {}, None, OK),
    ("json-components-summed", b'{"a": 0.25, "b": 0.5}', None, 0.75, {"a": 0.25, "b": 0.5}, ["a", "b"], OK),
    ("json-one-component", b'{"score": 0.5}', None, 0.5, {"score": 0.5}, ["score"], OK),
    (
        "json-bool-components",
        b'{"a": true, "b": false, "c": true}',
        None,
        2.0,
        {"a": 1.0, "b": 0.0, "c": 1.0},
        ["a", "b", "c"],
        OK,
    ),
    ("json-wins-over-txt", b'{"reward": 0.25}', b"1", 0.25, {}, None, OK),
    ("json-wins-even-malformed", b"{not json", b"1", 0.0, {}, None, INVALID_REWARD),
    ("json-empty-file", b"", b"1", 0.0, {}, None, INVALID_REWARD),
    ("json-white-space-only", b" \n\t ", None, 0.0, {}, None, INVALID_REWARD),
    ("json-empty-object", b"{}", b"1", 0.0, {}, None, INVALID_REWARD),
    ("json-nan-literal", b'{"reward": NaN}', None, 0.0, {}, None, INVALID_REWARD),
    ("json-infinity-literal", b'{"reward": Infinity}', None, 0.0, {}, None, INVALID_REWARD),
    ("json-minus-infinity", b'{"reward": -Infinity}', None, 0.0, {}, None, INVALID_REWARD),
    ("json-1e999", b'{"reward": 1e999}', None, 0.0, {}, None, INVALID_REWARD),
    ("json-huge-int", b'{"reward": 1' + b"0" * 400 + b"}", None, 0.0, {}, None, INVALID_REWARD),
    ("json-nested", b'{"reward": {"x": 1}}', None, 0.0, {}, None, INVALID_REWARD),
    ("json-null", b'{"reward": null}', None, 0.0, {}, None, INVALID_REWARD),
    ("json-string-value", b'{"reward": "1"}', None, 0.0, {}, None, INVALID_REWARD),
    ("json-bad-metric", b'{"reward": 1, "m": "x"}', None, 0.0, {}, None, INVALID_REWARD),
    ("json-array", b"[1]", None, 0.0, {}, None, INVALID_REWARD),
    ("json-number", b"1", None, 0.0, {}, None, INVALID_REWARD),
    ("json-null-document", b"null", None, 0.0, {}, None, INVALID_REWARD),
    ("json-overflowing-sum", b'{"a": 1e308, "b": 1e308}', None, 0.0, {}, None, INVALID_REWARD),
    ("json-not-utf8", b'{"reward": 1}\xff', None, 0.0, {}, None, INVALID_REWARD),
    ("json-negative", b'{"reward": -2.5}', None, -2.5, {}, None, OK),
    ("json-duplicate-key-last-wins", b'{"reward": 0, "reward": 1}', None, 1.0, {}, None, OK),
    ("txt-number", None, b"0.5", 0.5, {}, None, OK),
    ("txt-white-space-around", None, b"  1\n", 1.0, {}, None, OK),
    ("txt-integer", None, b"3", 3.0, {}, None, OK),
    ("txt-exponent", None, b"1e-3", 0.001, {}, None, OK),
    ("txt-empty", None, b"", 0.0, {}, None, INVALID_REWARD),
    ("txt-white-space-only", None, b"  \n", 0.0, {}, None, INVALID_REWARD),
    ("txt-nan", None, b"nan", 0.0, {}, None, INVALID_REWARD),
    ("txt-inf", None, b"inf", 0.0, {}, None, INVALID_REWARD),
    ("txt-1e999", None, b"1e999", 0.0, {}, None, INVALID_REWARD),
    ("txt-two-numbers", None, b"1 2", 0.0, {}, None, INVALID_REWARD),
    ("txt-percent", None, b"50%", 0.0, {}, None, INVALID_REWARD),
    ("txt-bool", None, b"true", 0.0, {}, None, INVALID_REWARD),
    ("txt-json", None, b'{"reward": 1}', 0.0, {}, None, INVALID_REWARD),
    ("no-file", None, None, 0.0, {}, None, MISSING_REWARD),
]


def write(logs: Path, json_bytes, txt_bytes) -> None:
    logs.mkdir(parents=True, exist_ok=True)
    if json_bytes is not None:
        (logs / "reward.json").write_bytes(json_bytes)
    if txt_bytes is not None:
        (logs / "reward.txt").write_bytes(txt_bytes)


@pytest.mark.parametrize(
    "json_bytes, txt_bytes, reward, metrics, components, failure",
    [c[1:] for c in TABLE],
    ids=[c[0] for c in TABLE],
)
def test_reward_table(tmp_path, json_bytes, txt_bytes, reward, metrics, components, failure):
    write(tmp_path, json_bytes, txt_bytes)
    outcome = read_reward(tmp_path)
    assert (outcome.reward, outcome.metrics, outcome.reward_components, outcome.failure_kind) == (
        reward,
        metrics,
        components,
        failure,
    )
    if failure is not None:
        assert outcome.detail


def test_timeout_without_reward(tmp_path):
    assert read_reward(tmp_path, timed_out=True).failure_kind == VERIFIER_TIMEOUT
    assert read_reward(tmp_path / "missing-folder", timed_out=True).failure_kind == VERIFIER_TIMEOUT


def test_a_reward_written_before_the_timeout_stands(tmp_path):
    write(tmp_path, None, b"0.75")
    assert read_reward(tmp_path, timed_out=True) == RewardOutcome(reward=0.75)


def test_reward_json_directory_is_malformed(tmp_path):
    (tmp_path / "reward.json").mkdir()
    (tmp_path / "reward.txt").write_text("1")
    assert read_reward(tmp_path).failure_kind == INVALID_REWARD


def test_dangling_reward_json_symlink_still_wins(tmp_path):
    (tmp_path / "reward.json").symlink_to(tmp_path / "nowhere")
    (tmp_path / "reward.txt").write_text("1")
    assert read_reward(tmp_path).failure_kind == INVALID_REWARD


def test_oversized_reward_file(tmp_path):
    write(tmp_path, None, b" " * (2 << 20) + b"1")
    assert read_reward(tmp_path).failure_kind == INVALID_REWARD


def test_components_keep_file_order(tmp_path):
    write(tmp_path, b'{"z": 1, "a": 0}', None)
    assert read_reward(tmp_path).reward_components == ["z", "a"]


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.none(), st.binary(max_size=64)), st.one_of(st.none(), st.binary(max_size=64)))
def test_any_bytes_give_an_outcome(tmp_path_factory, json_bytes, txt_bytes):
    logs = tmp_path_factory.mktemp("logs")
    write(logs, json_bytes, txt_bytes)
    outcome = read_reward(logs)
    assert isinstance(outcome.reward, float)
    assert outcome.failure_kind in (None, MISSING_REWARD, INVALID_REWARD)
    assert (outcome.failure_kind is None) or outcome.reward == 0.0


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=3),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
        max_leaves=10,
    )
)
def test_any_json_value_gives_an_outcome(tmp_path_factory, value):
    import json

    logs = tmp_path_factory.mktemp("logs")
    write(logs, json.dumps(value).encode(), None)
    outcome = read_reward(logs)
    assert outcome.failure_kind in (None, INVALID_REWARD)
