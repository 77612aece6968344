"""How the host scores a Python verifier: by the runner's own report, held against ``reward.json``.

The runner writes one line to a descriptor no other process holds (``shim/_gym_channel.py``):
``nemo-gym-report/2 <hmac> reward <the reward.json text it wrote>``, or ``... error <why none>``,
or ``... refused <why it would not grade here>``. The HMAC is under the run's one-time key, which
never leaves the runner, so a line that someone else wrote or changed does not count, and reading
the runner's line teaches nothing that would forge another. The score is what the report says: a
``reward.json`` that differs was changed after the runner wrote it (by a process the agent left,
or one ``verify`` started) and is ignored; without a report there is no reward, whatever files lie
in ``/logs/verifier``. Stock Harbor, which has no channel, reads ``reward.json`` as written, so an
honest run grades the same under both.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, replace
from typing import Mapping, Optional, Tuple

from nemo_gym.data.tasks.harbor.rewards import MISSING_REWARD, RewardOutcome, parse_reward_json, reward_from_files

REPORT_PREFIX = "nemo-gym-report/2"  # the runner's line format (shim/_gym_channel.py; keep in sync)
REWARD, ERROR, REFUSED = "reward", "error", "refused"
# The runner's verdict, whose reward.json could not be written (a disk the run filled): scored.
UNWRITTEN = "unwritten"
UNWRITTEN_NOTE = "the runner could not write reward.json (a full disk?): the verdict it reported is scored"


@dataclass(frozen=True)
class Report:
    """What the runner said: ``kind`` is ``reward`` (``text`` is reward.json's), ``unwritten`` (the text
    reward.json could not be written with), ``error`` or ``refused``."""

    kind: str
    text: str


def find_reports(data: bytes, key: bytes) -> Tuple[Report, ...]:
    """The distinct reports in ``data`` whose HMAC under ``key`` holds; any other line is not the runner's."""
    found = []
    for line in data.split(b"\n"):
        parts = line.split(b" ", 2)
        if len(parts) != 3 or parts[0] != REPORT_PREFIX.encode("ascii"):
            continue
        expected = hmac.new(key, parts[2], hashlib.sha256).hexdigest().encode("ascii")
        if not hmac.compare_digest(parts[1], expected):
            continue
        kind, _, text = parts[2].decode("utf-8", "replace").partition(" ")
        report = Report(kind, text)
        if kind in (REWARD, UNWRITTEN, ERROR, REFUSED) and report not in found:
            found.append(report)
    return tuple(found)


def judge_report(
    reports: Tuple[Report, ...], files: Mapping[str, Optional[bytes]], *, timed_out: bool
) -> Tuple[RewardOutcome, Optional[str]]:
    """The outcome of a Python verifier's run, and a note when something else touched its result.

    ``files`` are the reward files as ``reward_from_files`` takes them. One report of a reward
    scores that reward; ``reward.json`` must hold the same text, or the note says it was changed. An
    ``unwritten`` report scores its reward too: the verdict stands when the disk (or a program verify
    ran) kept reward.json from being written. An error report, no report (the runner crashed, was
    killed or timed out) or several reports (the key was not the runner's alone) score no reward. A
    ``refused`` report is the caller's to mask (``judge_report`` scores it as no reward).
    """
    if len(reports) > 1:
        note = "several reports carried this run's key: the channel was not private, so nothing is scored"
        return RewardOutcome(failure_kind=MISSING_REWARD, detail=note), note
    planted: Optional[str] = None
    if files:
        planted = f"{' and '.join(sorted(files))} in /logs/verifier not written by the runner: ignored"
    if not reports:
        outcome = reward_from_files({}, timed_out=timed_out)
        detail = "the runner sent no report" if outcome.failure_kind == MISSING_REWARD else outcome.detail
        return replace(outcome, detail=f"{detail}; {planted}" if planted else detail), planted
    [report] = reports
    if report.kind == UNWRITTEN:
        outcome = parse_reward_json(report.text.encode("utf-8"))
        notes = [note for note in (outcome.detail, UNWRITTEN_NOTE, planted) if note]
        return replace(outcome, detail="; ".join(notes)), planted
    if report.kind != REWARD:
        detail = f"the verifier wrote no reward ({report.text})"
        return RewardOutcome(failure_kind=MISSING_REWARD, detail=detail), planted
    written = files.get("reward.json")
    outcome = parse_reward_json(report.text.encode("utf-8"))
    if written is None or written.rstrip(b"\n") != report.text.encode("utf-8"):
        note = "reward.json was changed after the runner wrote it: the runner's report is scored"
        return replace(outcome, detail=f"{outcome.detail}; {note}" if outcome.detail else note), note
    return outcome, None


__all__ = [
    "ERROR",
    "REFUSED",
    "REPORT_PREFIX",
    "REWARD",
    "UNWRITTEN",
    "UNWRITTEN_NOTE",
    "Report",
    "find_reports",
    "judge_report",
]
