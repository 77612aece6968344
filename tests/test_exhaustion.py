"""Deciding that a failed grading was the container's own exhaustion (``sandboxes.docker.exhaustion``)
and scoring it 0 rather than masking it (``verification``); the attacks themselves are in
``test_docker_attacks_exhaustion.py``."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Dict, List, Optional, Tuple

import pytest

from nemo_gym.data.tasks.harbor.sandboxes.docker import (
    DEFAULT_PIDS_LIMIT,
    GRADING_MEMORY_BYTES,
    GRADING_PIDS,
    DockerSandbox,
    engine_seconds,
    exhaustion,
    killed_for_memory,
)
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
    *, pids: Optional[Dict[str, int]] = None, usage: int = 0, inactive: int = 0, active: int = 0, v2: bool = False
) -> Dict[str, Any]:
    prefix = "" if v2 else "total_"
    detail = {f"{prefix}inactive_file": inactive, f"{prefix}active_file": active}
    return {"pids_stats": pids or {"current": 3}, "memory_stats": {"usage": usage, "stats": detail, "limit": LIMIT}}


@pytest.mark.parametrize(
    ("given", "memory_limit", "expected"),
    [
        (stats(usage=LIMIT - 8 * MIB), LIMIT, "248 MiB of its 256 MiB of memory cannot be reclaimed"),
        (stats(usage=LIMIT - 8 * MIB, v2=True), LIMIT, "248 MiB of its 256 MiB of memory cannot be reclaimed"),
        # Page cache the kernel can drop is room: a container full of cached reads is not exhausted.
        (stats(usage=LIMIT - 8 * MIB, inactive=100 * MIB), LIMIT, None),
        # Active page cache too (red team 35: a file read a few times is active, and the kernel drops it).
        (stats(usage=LIMIT - 8 * MIB, active=100 * MIB), LIMIT, None),
        (stats(usage=LIMIT - 8 * MIB, active=100 * MIB, v2=True), LIMIT, None),
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


@pytest.mark.parametrize(
    ("given", "memory_limit", "events", "expected"),
    [
        # What the agent frees the moment grading failed does not hide what happened during it: an
        # OOM kill under the memory limit, a fork that failed under the pids limit.
        (
            stats(usage=MIB),
            LIMIT,
            {"oom_kills": 2},
            "the kernel killed 2 process(es) for want of memory under its 256 MiB limit",
        ),
        (stats(usage=MIB), 0, {"oom_kills": 2}, None),  # no limit of its own: the host's OOM, a neighbour's doing
        (
            stats(pids={"current": 5, "limit": 64}),
            LIMIT,
            {"fork_failed": True},
            "grading could not start a process under its pids limit of 64",
        ),
        (stats(pids={"current": 5}), LIMIT, {"fork_failed": True}, None),  # no pids limit: the host's pids
        # Red team 91: the agent's fill made the container's init the OOM killer's choice before grading,
        # and the container stopped: its own limit, the agent's doing (a stopped container has no stats).
        (
            {},
            LIMIT,
            {"stopped_by_oom": True},
            "the kernel killed the container for want of memory under its 256 MiB limit",
        ),
        ({}, 0, {"stopped_by_oom": True}, None),  # no limit of its own: the host's OOM, a neighbour's doing
    ],
)
def test_exhaustion_during_grading(given, memory_limit, events, expected):
    assert exhaustion(given, memory_limit, **events) == expected


@pytest.mark.parametrize(
    ("events", "killed"),
    [
        ([("oom", 10.0), ("oom", 10.1), ("die", 10.2)], True),  # the kernel took the container's init (red team 91)
        # Red team 92: an OOM kill the container lived through, then the engine's kill.
        ([("oom", 10.0), ("kill", 50.0), ("die", 50.1)], False),
        ([("oom", 10.0), ("stop", 10.5), ("die", 10.6)], False),
        # Red team 93: an OOM kill long before an end of no engine's doing (the host's kill -9, a crashed shim).
        ([("oom", 10.0), ("die", 500.0)], False),
        ([("kill", 5.0), ("die", 5.1), ("oom", 10.0), ("die", 10.5)], True),  # the last end is the one
        ([("oom", 10.0)], False),  # no end recorded
        ([], False),
    ],
)
def test_a_stopped_container_was_killed_for_memory_only_by_an_oom_kill_just_before_its_end(events, killed):
    assert killed_for_memory(events) is killed


class Exhausted:
    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.asked = 0
        self.questions: List[Tuple[float, bool]] = []

    async def exhausted(self, *, since: float, fork_failed: bool = False) -> Optional[str]:
        self.asked += 1
        self.questions.append((since, fork_failed))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer  # type: ignore[no-any-return]


def decide(outcome: VerificationOutcome, sandbox: Any) -> VerificationOutcome:
    return asyncio.run(_unless_exhausted(outcome, sandbox, 1234.5))


def test_a_sandbox_error_in_an_exhausted_sandbox_scores_0():
    sandbox = Exhausted("60 of its 64 processes are in use")
    outcome = decide(masked("sandbox_error", "grading failed in the sandbox (exit 137): "), sandbox)
    assert (outcome.reward, outcome.masked, outcome.failure_kind) == (0.0, False, RESOURCES_EXHAUSTED)
    assert outcome.detail == (
        "the sandbox had no room left for grading: 60 of its 64 processes are in use; "
        "grading failed in the sandbox (exit 137): "
    )
    assert sandbox.questions == [(1234.5, False)]


@pytest.mark.parametrize(
    ("detail", "fork_failed"),
    [
        ("grading failed in the sandbox (exit 254): environment: fork: retry: Resource temporarily unavailable", True),
        (
            "exec in the container failed: OCI runtime exec failed: fork/exec /bin/bash: resource temporarily unavailable",
            True,
        ),
        ("exec in the container failed: [Errno 11] Resource temporarily unavailable", False),  # a socket's EAGAIN
        ("grading failed in the sandbox (exit 1): fork", False),
    ],
)
def test_the_sandbox_hears_whether_grading_could_not_fork(detail, fork_failed):
    sandbox = Exhausted(None)
    decide(masked("sandbox_error", detail), sandbox)
    assert sandbox.questions == [(1234.5, fork_failed)]


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


# --- the engine's clock ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1970-01-01T00:00:00Z", 0.0),
        ("2026-12-02T16:30:52.322616465Z", 1796229052.322616465),
        ("2026-12-02T17:30:52.5+01:00", 1796229052.5),
        ("2026-12-02t16:30:52z", 1796229052.0),
        ("2026-13-02T16:30:52Z", None),  # no such month
        ("2026-12-02 16:30:52Z", None),
        ("", None),
        (None, None),
        (1796229052, None),
    ],
)
def test_engine_seconds(text, seconds):
    found = engine_seconds(text)
    assert found == seconds if seconds is None else found == pytest.approx(seconds, abs=1e-6)


class SkewedEngine:
    """An engine an hour ahead of this host, holding an OOM kill of the agent's own time (before
    grading began) and one during grading, by its own clock."""

    SKEW = 3600.0

    def __init__(self, graded_at: float) -> None:
        self.kills = [graded_at - 30 + self.SKEW, graded_at + 0.2 + self.SKEW]
        self.asked: List[Tuple[float, float]] = []
        self.api = self
        self.id = "c0ffee"
        self.attrs = {"HostConfig": {"Memory": LIMIT}}

    def reload(self) -> None:
        pass

    def info(self) -> Dict[str, Any]:
        moment = time.gmtime(time.time() + self.SKEW)
        return {"SystemTime": time.strftime("%Y-%m-%dT%H:%M:%S.000000000Z", moment)}

    def stats(self, container: str, **_: Any) -> Dict[str, Any]:
        return stats(usage=MIB)

    def events(self, *, since: str, until: str, filters: Dict[str, Any]) -> List[Dict[str, Any]]:
        assert filters == {"container": self.id, "event": "oom"}
        self.asked.append((float(since), float(until)))
        return [{"time": kill} for kill in self.kills if float(since) <= kill <= float(until)]


def test_the_oom_kills_are_asked_for_by_the_engines_clock():
    graded_at = time.time() - 1
    engine = SkewedEngine(graded_at)
    sandbox = DockerSandbox("image", client=engine)
    sandbox._container = engine
    reason = asyncio.run(sandbox.exhausted(since=graded_at))
    # The kill during grading counts, the agent's own does not: by this host's clock, neither would be
    # in the window, and an engine behind it would hold the events call for the difference.
    assert reason == "the kernel killed 1 process(es) for want of memory under its 256 MiB limit"
    [(since, until)] = engine.asked
    assert since == pytest.approx(graded_at + SkewedEngine.SKEW, abs=1.5)
    assert time.time() + SkewedEngine.SKEW < until < time.time() + SkewedEngine.SKEW + 2


@pytest.mark.parametrize(
    ("given", "expected"), [({}, DEFAULT_PIDS_LIMIT), ({"pids_limit": 64}, 64), ({"pids_limit": None}, None)]
)
def test_a_container_gets_the_default_pids_limit_unless_told_otherwise(given, expected):
    options = DockerSandbox("image", client=object(), **given)._run_options({}, None)
    assert options.get("pids_limit") == expected


@pytest.mark.parametrize(
    ("user", "entrypoint", "expected"),
    [
        ("", False, (None, ["no-new-privileges"])),
        ("0:0", False, (None, ["no-new-privileges"])),
        ("agent", False, ("0:0", ["no-new-privileges"])),  # root's container, the USER's commands
        ("1000:1000", False, ("0:0", ["no-new-privileges"])),
        ("agent", True, (None, [])),  # its ENTRYPOINT runs as its USER: root's execs need their capabilities
    ],
)
def test_a_container_runs_as_root_unless_its_images_own_entrypoint_runs_as_its_user(
    user, entrypoint, expected, caplog, monkeypatch
):
    """Red team 40: Docker gives a non-root container's execs no capabilities, and under
    no-new-privileges ``exec -u root`` cannot gain them (grading's handover failed). A container left
    the USER's has a keep-alive that user can kill (a mask): that is logged, once for the image."""
    from nemo_gym.data.tasks.harbor.image_build import ImageRecord
    from nemo_gym.data.tasks.harbor.sandboxes import base
    from nemo_gym.data.tasks.harbor.sandboxes.docker import _default_user

    monkeypatch.setattr(base, "_KEEP_ALIVE_WARNED", set())
    record = ImageRecord("image", ["/entry"], None, None, user, "", {}) if entrypoint else None
    for _ in range(2):
        sandbox = DockerSandbox("image", client=object(), record=record)
        sandbox.default_user = _default_user(user)  # as start sets it from the image
        options = sandbox._run_options({}, None)
        assert (options.get("user"), options["security_opt"]) == expected
    warned = [record.getMessage() for record in caplog.records if "first process runs as" in record.getMessage()]
    assert len(warned) == (1 if entrypoint else 0), warned
    assert all(text.startswith("image: the sandbox's first process runs as agent, not root,") for text in warned)


def test_an_engine_that_does_not_answer_an_exec_in_time_is_a_timeout_not_a_fault():
    """The agent's thousands of spinners starved the exec's own start in the container, and the
    client's read timeout masked a wrong answer as a fault of the sandbox (red team 45). It reads
    as a command that outlived the host's wait: grading scores it a verifier timeout."""
    import requests
    from urllib3.exceptions import ReadTimeoutError

    from nemo_gym.data.tasks.harbor.sandboxes.base import ExecTimeout, SandboxError

    sandbox = DockerSandbox("image", client=object())
    sandbox._container = object()

    def starved() -> None:
        try:
            raise ReadTimeoutError(None, "/exec/1/json", "Read timed out. (read timeout=60)")  # type: ignore[arg-type]
        except ReadTimeoutError as error:
            raise requests.exceptions.ReadTimeout("UnixHTTPConnectionPool: Read timed out.") from error

    def broken() -> None:
        raise requests.exceptions.ConnectionError("Connection refused")

    with pytest.raises(ExecTimeout, match="the engine did not answer in time"):
        asyncio.run(sandbox._in_time(starved, 30))
    with pytest.raises(SandboxError, match="exec in the container failed: Connection refused") as raised:
        asyncio.run(sandbox._in_time(broken, 30))
    assert not isinstance(raised.value, ExecTimeout)  # a lost engine is still the sandbox's fault
