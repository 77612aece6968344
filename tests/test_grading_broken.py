"""Deciding that a failed grading was the agent's doing because it changed what grading runs
(``grading.broken_for_grading``), and scoring it 0 rather than masking it (``verification``); the
attacks themselves are in ``test_docker_attacks_grading.py``.

Red team 91: a root agent (Docker's default) deleted `timeout`, replaced `tar` or removed the
verifier's user, and grading failed as it fails in an image without them: a mask, which the agent
chose for its wrong answer. An image without them still masks: its changes show nothing."""

from __future__ import annotations

import asyncio
from typing import Any, Dict, List

import pytest

from nemo_gym.data.tasks.harbor.grading import broken_for_grading, system_folders
from nemo_gym.data.tasks.harbor.verification import (
    DISK_FULL,
    GRADING_BROKEN,
    VerificationOutcome,
    _unless_broken,
    masked,
)

CHANGED, ADDED, DELETED = 0, 1, 2


def change(path: str, kind: int = CHANGED) -> Dict[str, Any]:
    return {"Path": path, "Kind": kind}


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ([change("/usr/bin/timeout", DELETED)], "the sandbox's /usr/bin/timeout (deleted) since its image"),
        ([change("/usr/bin/tar")], "the sandbox's /usr/bin/tar (changed) since its image"),
        # First on grading's PATH (/usr/sbin comes before /usr/bin): the agent's own tar would run.
        ([change("/usr/sbin/tar", ADDED)], "the sandbox's /usr/sbin/tar (added) since its image"),
        ([change("/etc/passwd")], "the sandbox's /etc/passwd (changed) since its image"),
        ([change("/etc/ld.so.preload", ADDED)], "the sandbox's /etc/ld.so.preload (added) since its image"),
        (
            [change("/lib/x86_64-linux-gnu/libc.so.6"), change("/usr/lib64/ld-linux-x86-64.so.2", DELETED)],
            "the sandbox's /lib/x86_64-linux-gnu/libc.so.6 (changed), /usr/lib64/ld-linux-x86-64.so.2 (deleted) "
            "since its image",
        ),
        (
            [change(f"/usr/bin/{name}", DELETED) for name in ("rm", "mv", "cp", "id", "dd", "env", "stat")],
            "the sandbox's /usr/bin/cp (deleted), /usr/bin/dd (deleted), /usr/bin/env (deleted), /usr/bin/id "
            "(deleted), /usr/bin/mv (deleted) and 2 more since its image",
        ),
        # What grading does not run, or not from there, or a folder whose content changed: nothing.
        ([change("/usr/bin"), change("/usr/bin/python3.11", DELETED), change("/usr/bin/git", ADDED)], None),
        ([change("/usr/local/bin/tar", ADDED), change("/workspace/bin/timeout", ADDED)], None),
        ([change("/workspace/chroot/lib/libc.so.6", ADDED), change("/etc/hosts"), change("/etc/shadow")], None),
        # A shared library deleted (bash's own): no package install does that. Changed, a package's upgrade does.
        (
            [change("/lib/x86_64-linux-gnu/libtinfo.so.6.4", DELETED)],
            "the sandbox's /lib/x86_64-linux-gnu/libtinfo.so.6.4 (deleted) since its image",
        ),
        (
            [change("/usr/lib/x86_64-linux-gnu/libtinfo.so.6.4"), change("/usr/lib/x86_64-linux-gnu/libnew.so", ADDED)],
            None,
        ),
        ([change("/etc/nsswitch.conf")], "the sandbox's /etc/nsswitch.conf (changed) since its image"),  # red team 92
        # Red team 92: not libraries, or modules a package's upgrade may remove, deeper than the loader's folders.
        (
            [
                change("/usr/lib/systemd/system/ssh.socket", DELETED),
                change("/usr/lib/README.solaris", DELETED),
                change("/library/app/data.sorted", DELETED),
                change("/usr/lib/x86_64-linux-gnu/perl-base/auto/re/re.so", DELETED),
                change("/usr/lib/python3/dist-packages/yaml/_yaml.cpython-311-x86_64-linux-gnu.so", DELETED),
            ],
            None,
        ),
        # Red team 93: musl's loader and C library, and BusyBox, which is every tool on Alpine.
        (
            [change("/lib/ld-musl-x86_64.so.1"), change("/bin/busybox", DELETED)],
            "the sandbox's /bin/busybox (deleted), /lib/ld-musl-x86_64.so.1 (changed) since its image",
        ),
        (
            [change("/lib64/ld-linux-x86-64.so.2", DELETED)],
            "the sandbox's /lib64/ld-linux-x86-64.so.2 (deleted) since its image",
        ),
        (
            [{"Kind": DELETED}, {"Path": None}, change("/usr/bin/bash", 7)],
            "the sandbox's /usr/bin/bash (changed) since its image",
        ),
        ([], None),
    ],
)
def test_what_grading_runs_changed_since_the_image(changes, expected):
    assert broken_for_grading(changes) == expected


def test_a_system_folder_swapped_for_a_link_or_deleted_is_broken():
    # Red team 92: /usr/bin swapped for a link to a copy without timeout; the engine's record shows only the
    # folder, changed, as any package installed there changes it. Whether it is a link now tells them apart.
    changes = [
        change("/usr/bin"),
        change("/usr/lib/x86_64-linux-gnu"),
        change("/usr/lib/python3"),
        change("/opt/b", ADDED),
    ]
    assert system_folders(changes) == ["/usr/bin", "/usr/lib/x86_64-linux-gnu"]
    assert broken_for_grading(changes) is None  # no folder a link: content changed
    assert broken_for_grading(changes, ["/usr/bin"]) == "the sandbox's /usr/bin (changed: a link now) since its image"
    assert broken_for_grading([change("/lib64", DELETED)]) == "the sandbox's /lib64 (deleted) since its image"
    assert system_folders([change("/bin"), change("/usr"), change("/sbin", DELETED), change("/usr/local/bin")]) == [
        "/bin",
        "/usr",
    ]


class Changes:
    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.asked = 0

    async def changes(self) -> List[Dict[str, Any]]:
        self.asked += 1
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer  # type: ignore[no-any-return]


class Linked(Changes):
    async def links(self, paths: List[str]) -> List[str]:
        self.linked = list(paths)
        return [path for path in paths if path == "/usr/bin"]


def test_the_sandbox_is_asked_which_changed_system_folders_are_links_now():
    sandbox = Linked([change("/usr/bin"), change("/usr/lib")])
    outcome = decide(masked("verifier_error", "test.sh cannot start: the image has no timeout"), sandbox)
    assert (outcome.reward, outcome.masked, outcome.failure_kind) == (0.0, False, GRADING_BROKEN), outcome
    assert "/usr/bin (changed: a link now)" in outcome.detail and sandbox.linked == ["/usr/bin", "/usr/lib"]


def decide(outcome: VerificationOutcome, sandbox: Any) -> VerificationOutcome:
    return asyncio.run(_unless_broken(outcome, sandbox))


# A full disk too: a replaced program can print grading's count of it (red team 93).
@pytest.mark.parametrize("reason", ["verifier_error", "provider_unavailable", "sandbox_error", DISK_FULL])
def test_a_mask_where_the_agent_changed_what_grading_runs_scores_0(reason):
    sandbox = Changes([change("/usr/bin/timeout", DELETED)])
    outcome = decide(masked(reason, "test.sh cannot start: the image has no timeout", "out"), sandbox)
    assert (outcome.reward, outcome.masked, outcome.failure_kind) == (0.0, False, GRADING_BROKEN)
    assert outcome.detail == (
        "grading failed where the agent had changed what it runs: the sandbox's /usr/bin/timeout (deleted) since "
        "its image; test.sh cannot start: the image has no timeout"
    )
    assert (outcome.stdout, sandbox.asked) == ("out", 1)


@pytest.mark.parametrize(
    ("outcome", "sandbox", "asked"),
    [
        (masked("verifier_error", "no timeout"), Changes([change("/usr/bin")]), 1),  # the image's own lack
        (masked("verifier_error", "no timeout"), Changes(RuntimeError("gone")), 1),  # cannot say
        # Red team 92: a container lost in grading (it no longer runs): nothing it changed speaks for the failure.
        (masked("sandbox_error", "grading failed in the sandbox (exit 137): "), Changes(None), 1),
        (masked("verifier_error", "no timeout"), object(), 0),  # a sandbox that cannot be asked
        (masked("harbor:entrypoint_failed", "died"), Changes([change("/usr/bin/tar")]), 0),
        # A full disk, counted by grading: a mask, unless a program of grading's changed (next test).
        (masked(DISK_FULL, "the disk: 0 of 10 blocks free to users"), Changes([change("/usr/lib/libz.so.1")]), 1),
        # An upload or a download the engine failed: a call's, never the agent's programs' doing (red team 93).
        (
            masked("sandbox_error", "grading failed: staging /tests failed: SandboxError: 500"),
            Changes([change("/usr/bin/tar")]),
            0,
        ),
        # The engine's call failed (a lost container): never the agent's programs' doing.
        (
            masked("sandbox_error", "grading failed: SandboxError: 409 not running"),
            Changes([change("/usr/bin/tar")]),
            0,
        ),
        (VerificationOutcome(reward=0.0, failure_kind="harbor:missing_reward"), Changes([change("/etc/passwd")]), 0),
    ],
)
def test_anything_else_stands(outcome, sandbox, asked):
    assert decide(outcome, sandbox) == outcome
    assert getattr(sandbox, "asked", 0) == asked


def test_output_too_large_is_the_sandboxs_own_doing():
    # Red team 93: a replaced tar printed more than the results may hold; that read as a failed call.
    sandbox = Changes([change("/usr/bin/tar")])
    outcome = decide(masked("sandbox_error", "grading's output was too large: OutputTooLarge: ..."), sandbox)
    assert (outcome.failure_kind, sandbox.asked) == (GRADING_BROKEN, 1), outcome
