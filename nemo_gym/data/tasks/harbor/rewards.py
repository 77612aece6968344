"""Reading the reward files a verifier leaves in ``/logs/verifier``.

The contract (seed "Reward files"): ``reward.json`` wins whenever it exists, even malformed; else
``reward.txt``; else no reward. Where Harbor's own parser differs (it drops booleans, accepts ``{}``,
NaN and infinities, and never sums components; HARBOR-NOTES B), this module follows the seed.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from nemo_gym.data.tasks.harbor._values import finite_float

MISSING_REWARD = "harbor:missing_reward"
INVALID_REWARD = "harbor:invalid_reward"
VERIFIER_TIMEOUT = "harbor:verifier_timeout"
TIMEOUT_DETAIL = "the verifier ran past its timeout"  # a run adds the seconds (verification._outcome)

# A reward file is a handful of bytes; anything past this is garbage that must not cost memory.
MAX_REWARD_BYTES = 1 << 20


@dataclass(frozen=True)
class RewardOutcome:
    """What the reward files say: the score, per-row metrics, component names, or a failure."""

    reward: float = 0.0
    metrics: Dict[str, float] = field(default_factory=dict)
    reward_components: Optional[List[str]] = None
    failure_kind: Optional[str] = None
    detail: str = ""


def _invalid(detail: str) -> RewardOutcome:
    return RewardOutcome(failure_kind=INVALID_REWARD, detail=detail)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")


def parse_reward_json(data: bytes) -> RewardOutcome:
    """The outcome of a ``reward.json`` holding ``data``."""
    try:
        value = json.loads(data.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        return _invalid(f"reward.json is not valid JSON ({error})")
    if not isinstance(value, dict) or not value:
        return _invalid("reward.json must hold a non-empty JSON object of numbers")
    numbers: Dict[str, float] = {}
    for key, item in value.items():
        number = finite_float(item, booleans=True)
        if number is None:
            return _invalid(f"reward.json: {key!r} is {json.dumps(item)[:40]}, not a finite number")
        numbers[key] = number
    if "reward" in numbers:
        reward = numbers.pop("reward")
        return RewardOutcome(reward=reward, metrics=numbers)
    total = sum(numbers.values())
    if not math.isfinite(total):
        return _invalid("reward.json: the components have no finite sum")
    return RewardOutcome(reward=total, metrics=dict(numbers), reward_components=list(numbers))


def parse_reward_txt(data: bytes) -> RewardOutcome:
    """The outcome of a ``reward.txt`` holding ``data``: one finite number, white space around it."""
    try:
        number = float(data.decode("utf-8").strip())
    except (UnicodeDecodeError, ValueError):
        return _invalid("reward.txt must hold one number")
    if not math.isfinite(number):
        return _invalid("reward.txt must hold a finite number")
    return RewardOutcome(reward=number)


# What a reward file turned out to be: its bytes, or ``UNREADABLE`` for an entry that is not a
# readable regular file (a folder, a symlink, a FIFO).
UNREADABLE = None


def _read(path: Path) -> Tuple[bool, Optional[bytes]]:
    """``(exists, bytes)``; bytes is ``None`` for something that exists but is not a readable file."""
    if not (path.exists() or path.is_symlink()):
        return False, None
    try:
        if path.is_symlink() or not path.is_file():
            return True, None
        with path.open("rb") as handle:
            return True, handle.read(MAX_REWARD_BYTES + 1)
    except OSError:
        return True, None


def reward_from_files(files: Mapping[str, Optional[bytes]], *, timed_out: bool = False) -> RewardOutcome:
    """The outcome of the reward files in ``files`` (a name present maps to its bytes, or to
    ``UNREADABLE``; an absent name is no file).

    ``reward.json`` wins whenever it exists, even malformed; else ``reward.txt``. With neither:
    ``harbor:verifier_timeout`` when ``timed_out``, else ``harbor:missing_reward``. A reward
    written before a timeout stands. Never raises on what the files hold.
    """
    for name, parse in (("reward.json", parse_reward_json), ("reward.txt", parse_reward_txt)):
        if name not in files:
            continue
        data = files[name]
        if data is None:
            return _invalid(f"{name} is not a readable regular file")
        if len(data) > MAX_REWARD_BYTES:
            return _invalid(f"{name} is larger than {MAX_REWARD_BYTES} bytes")
        if not data.strip():
            return _invalid(f"{name} is empty")
        return parse(data)
    if timed_out:
        return RewardOutcome(failure_kind=VERIFIER_TIMEOUT, detail=TIMEOUT_DETAIL)
    return RewardOutcome(failure_kind=MISSING_REWARD, detail="the verifier wrote no reward file")


def read_reward(logs_dir: Path, *, timed_out: bool = False) -> RewardOutcome:
    """The outcome of the reward files in ``logs_dir`` (``reward_from_files`` on what is there)."""
    files: Dict[str, Optional[bytes]] = {}
    for name in ("reward.json", "reward.txt"):
        exists, data = _read(Path(logs_dir) / name)
        if exists:
            files[name] = data
    return reward_from_files(files, timed_out=timed_out)


__all__ = [
    "INVALID_REWARD",
    "MAX_REWARD_BYTES",
    "MISSING_REWARD",
    "TIMEOUT_DETAIL",
    "UNREADABLE",
    "VERIFIER_TIMEOUT",
    "RewardOutcome",
    "parse_reward_json",
    "parse_reward_txt",
    "read_reward",
    "reward_from_files",
]
