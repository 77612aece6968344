"""Deciding that a failed grading was the container's own exhaustion (``sandboxes.docker.exhaustion``)
and scoring it 0 rather than masking it (``verification``); the attacks themselves are in
``test_docker_attacks_exhaustion.py``."""

from __future__ import annotations

import asyncio
from typing import Any, Dict, Optional

import pytest

from nemo_gym.data.tasks.harbor.sandboxes.docker import GRADING_MEMORY_BYTES, GRADING_PIDS, exhaustion
from nemo_gym.data.tasks.harbor.verification import (
    DISK_FULL,
    RESOURCES_EXHAUSTED,
    VerificationOutcome,
    _unless_exhausted,
    masked,
)

MIB = 1 << 20
LIMIT = 256 * MIB


def stats(
    *, pids: Optional[Dict[str, int]] = None, usage: int = 0, inactive: int = 0, v2: bool = False
) -> Dict[str, Any]:
    detail = {"inactive_file" if v2 else "total_inactive_file": inactive}
    return {"pids_stats": pids or {"current": 3}, "memory_stats": {"usage": usage, "stats": detail, "limit": LIMIT}}


@pytest.mark.parametrize(
    ("given", "memory_limit", "expected"),
    [
        (stats(usage=LIMIT - 8 * MIB), LIMIT, "248 MiB of its 256 MiB of memory cannot be reclaimed"),
        (stats(usage=LIMIT - 8 * MIB, v2=True), LIMIT, "248 MiB of its 256 MiB of memory cannot be reclaimed"),
        # Page cache the kernel can drop is room: a container full of cached reads is not exhausted.
        (stats(usage=LIMIT - 8 * MIB, inactive=100 * MIB), LIMIT, None),
        (stats(usage=LIMIT - GRADING_MEMORY_BYTES), LIMIT, None),
        (stats(usage=LIMIT - GRADING_MEMORY_BYTES + 1), LIMIT, "192 MiB of its 256 MiB of memory cannot be reclaimed"),
        # No memory limit: the engine reports the host's memory as the limit, which is no container's own.
        (stats(usage=LIMIT - 8 * MIB), 0, None),
        (stats(pids={"current": 60, "limit": 64}), LIMIT, "60 of its 64 processes are in use"),
        (stats(pids={"current": 64 - GRADING_PIDS, "limit": 64}), LIMIT, None),
        (stats(pids={"current": 60}), LIMIT, None),  # no pids limit
        (stats(pids={"current": 60, "limit": 0}), LIMIT, None),
        ({}, LIMIT, None),
    ],
)
def test_exhaustion(given, memory_limit, expected):
    assert exhaustion(given, memory_limit) == expected


class Exhausted:
    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.asked = 0

    async def exhausted(self) -> Optional[str]:
        self.asked += 1
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer  # type: ignore[no-any-return]


def decide(outcome: VerificationOutcome, sandbox: Any) -> VerificationOutcome:
    return asyncio.run(_unless_exhausted(outcome, sandbox))


def test_a_sandbox_error_in_an_exhausted_sandbox_scores_0():
    sandbox = Exhausted("60 of its 64 processes are in use")
    outcome = decide(masked("sandbox_error", "grading failed in the sandbox (exit 254): fork"), sandbox)
    assert (outcome.reward, outcome.masked, outcome.failure_kind) == (0.0, False, RESOURCES_EXHAUSTED)
    assert outcome.detail == (
        "the sandbox had no room left for grading: 60 of its 64 processes are in use; "
        "grading failed in the sandbox (exit 254): fork"
    )


@pytest.mark.parametrize(
    ("outcome", "sandbox", "asked"),
    [
        (masked("sandbox_error", "lost"), Exhausted(None), 1),  # room left: a fault of the sandbox
        (masked("sandbox_error", "lost"), Exhausted(RuntimeError("gone")), 1),  # cannot say
        (masked("sandbox_error", "lost"), object(), 0),  # a sandbox that cannot be asked
        (masked(DISK_FULL, "full"), Exhausted("full"), 0),  # a full disk stays its own mask
        (masked("verifier_error", "no bash"), Exhausted("full"), 0),
        (VerificationOutcome(reward=1.0), Exhausted("full"), 0),
    ],
)
def test_anything_else_stands(outcome, sandbox, asked):
    assert decide(outcome, sandbox) == outcome
    assert getattr(sandbox, "asked", 0) == asked
