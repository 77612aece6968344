"""Separate-mode verification: the verifier in a fresh sandbox of its own (seed 000, "Shared and
separate verification").

The run, in order: the collect hooks run in the agent's sandbox; ``/logs/artifacts``, the task's
``artifacts`` and the transcript are copied out of it; it is stopped; a fresh sandbox starts from
the effective verifier environment (``verifier_env``: its image, env, working directory, network);
it receives the artifacts at their own paths and the transcript, and ``/tests`` (the task's
``tests/``, unless its image ships ``/tests/test.sh``); ``test.sh`` runs there and the reward is
read as in shared mode. ``verifier_sandbox_spec`` decides the sandbox (pure);
``run_separate_verification`` carries the run out over any sandboxes the caller opens.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import AsyncContextManager, Awaitable, Callable, Dict, Mapping, Optional, Sequence, Tuple, Union

from nemo_gym.data.tasks.harbor.artifacts import Artifact, CollectedArtifacts, collect_artifacts, deliver_artifacts
from nemo_gym.data.tasks.harbor.env_templates import resolve_env
from nemo_gym.data.tasks.harbor.image_build import ImageBuildError
from nemo_gym.data.tasks.harbor.network import verifier_network
from nemo_gym.data.tasks.harbor.sandboxes.base import Sandbox, require_started, sandbox_option
from nemo_gym.data.tasks.harbor.task import Task, TaskError, as_task, env_table, path_within, sidecar_refusal
from nemo_gym.data.tasks.harbor.verification import (
    ENTRYPOINT_FAILED,
    ENTRYPOINT_LOG,
    LOGGER,
    VerificationOutcome,
    VerificationPlan,
    check_arguments,
    count_mask,
    entrypoint_state,
    masked,
    run_collect_hooks,
    run_verification,
    task_key,
    verifier_user,
)
from nemo_gym.data.tasks.harbor.verifier_env import (
    effective_verifier_environment,
    step_verifier_build_context,
    step_verifier_environment,
    verifier_build_context,
)

# Who owns the delivered artifacts in the verifier's sandbox. They are the agent's files: root's, they
# passed the runner's and test.sh's owner checks as the image's own (red team 72: the agent's
# sitecustomize.py, in a folder on the image's PYTHONPATH, ran inside the runner). nobody's uid, named
# by the image or not, makes them another user's, as in the agent's sandbox; their modes still let the
# verifier read them. Never the verifier's own uid, which the runner trusts as its own: a verifier whose
# user is this uid in its image gets them owned by the uid below it (red team 73, deliver_artifacts).
ARTIFACTS_OWNER = 65534


# Where Harbor's agents leave their transcript (ATIF), which a separate verifier gets too.
TRANSCRIPT = "/logs/agent/trajectory.json"


@dataclass(frozen=True)
class VerifierSandboxSpec:
    """The fresh sandbox a separate verifier runs in.

    ``image`` is the declared ``docker_image`` (the verifier environment's own, or the one it
    inherits from ``[environment]``); without one, ``build_context`` is the ``tests/`` folder to
    build it from (``image_build``). ``env`` is the environment's ``env``, templates filled;
    ``network`` is ``no-network``, ``allowlist`` or ``None``.
    """

    image: Optional[str]
    build_context: Optional[Path]
    env: Dict[str, str] = field(default_factory=dict)
    workdir: Optional[str] = None
    network: Optional[str] = None
    allowed_hosts: Tuple[str, ...] = ()
    cpus: Optional[float] = None
    memory_mb: Optional[int] = None
    # No [verifier.environment] (the task's or the step's): a declared ``image`` is the task's own, so an
    # override of the task's image (``gym-harbor verify --image``) is this one's too.
    inherits_image: bool = False
    # The artifacts collected for this run, as (source, "file" or "folder"), once they are out of
    # the agent's sandbox: a sandbox that maps paths to host folders (the local one) places them.
    landing: Tuple[Tuple[str, str], ...] = ()


def verifier_sandbox_spec(
    task: Task, step: Optional[str] = None, host_env: Optional[Mapping[str, str]] = None
) -> VerifierSandboxSpec:
    """The sandbox the task's (or the step's) separate verifier runs in; ``TaskError`` when the
    verifier is not separate or a template of its env cannot be filled."""
    if step is None:
        environment = effective_verifier_environment(task)
        context = verifier_build_context(task)
    else:
        environment = step_verifier_environment(task, step)
        context = step_verifier_build_context(task, step) if environment is not None else None
    where = str(task.path / "task.toml")
    if environment is None:
        raise TaskError(f"{where}: {'step ' + repr(step) if step else 'the task'} verifies in the agent's sandbox")
    image = environment.get("docker_image") or None
    if image is None and (context is None or not (context / "Dockerfile").is_file()):
        raise TaskError(f"{where}: the separate verifier has no docker_image and no {context or 'tests'}/Dockerfile")
    env = resolve_env(
        env_table(environment.get("env"), where, "the verifier environment's env"),
        os.environ if host_env is None else host_env,
        where=f"{where} (the separate verifier's environment)",
    )
    index = None if step is None else [item.name for item in task.steps].index(step)
    verifier_table = task.config.get("verifier") if isinstance(task.config.get("verifier"), dict) else {}
    hosts = tuple(verifier_table.get("allowed_hosts") or ()) if isinstance(verifier_table, dict) else ()
    cpus = environment.get("cpus")
    memory = environment.get("memory_mb")
    return VerifierSandboxSpec(
        image=image,
        build_context=None if image is not None else context,
        env=env,
        workdir=environment.get("workdir") or None,
        network=verifier_network(task.config, index),
        allowed_hosts=hosts,
        cpus=float(cpus) if isinstance(cpus, (int, float)) and not isinstance(cpus, bool) else None,
        memory_mb=int(memory) if isinstance(memory, int) and not isinstance(memory, bool) else None,
        inherits_image=task.verifier.environment is None
        and (step is None or task.step(step).verifier.environment is None),
    )


def _artifacts(task: Task, step: Optional[str]) -> Sequence[Artifact]:
    refusal = sidecar_refusal(task)  # a task loaded with check_runnable=False reaches here
    if refusal is not None:
        raise TaskError(refusal)
    own = tuple(task.artifacts)
    if step is not None:
        own += tuple(task.step(step).artifacts)
    return own


async def run_separate_verification(
    task: Union[Task, str, os.PathLike[str]],
    plan: VerificationPlan,
    agent: Sandbox,
    open_verifier: Callable[[VerifierSandboxSpec], AsyncContextManager[Sandbox]],
    *,
    host_env: Optional[Mapping[str, str]] = None,
    stop_agent: bool = True,
) -> VerificationOutcome:
    """The separate run (see the module's docstring): ``agent`` is the agent's sandbox, which this
    stops (``stop()`` when it has one) once its artifacts are out, unless ``stop_agent`` is false
    (a step with more steps after it); ``open_verifier(spec)`` opens the fresh sandbox. Faults of
    either sandbox mask the sample, as in shared mode; a task the sandbox cannot honour
    (``TaskError``) and an image that does not build (``ImageBuildError``) are the author's, and
    raise."""
    task = as_task(task, "run_separate_verification()")
    check_arguments(plan, agent, "run_separate_verification()")
    if not callable(open_verifier):
        raise TypeError(
            "run_separate_verification(): open_verifier must be what opens the verifier's sandbox "
            f"(verifier_sandbox_opener's, provider_verifier_opener's), not {type(open_verifier).__name__}"
        )
    if plan.task_key is not None and plan.task_key != task_key(task):
        raise TaskError(
            f"run_separate_verification(): the plan was made for the task {plan.task_key[1]!r} "
            f"({plan.task_key[0]}), not for {task.id!r} ({task.path}): plan each task's rollouts from that task"
        )
    if plan.mode != "separate":
        raise TaskError(f"{task.path / 'task.toml'}: this verifier runs in the agent's sandbox: use run_verification")
    require_started(agent)
    spec = verifier_sandbox_spec(task, plan.step, host_env)
    artifacts = _artifacts(task, plan.step)
    await run_collect_hooks(plan.collect, agent)
    alive, entrypoint_output = await entrypoint_state(agent)  # before the agent's sandbox stops
    if alive is False:
        outcome = _mask(
            plan, ENTRYPOINT_FAILED, "the agent's image's ENTRYPOINT died during the rollout", entrypoint_output
        )
    else:
        outcome = await _apart(plan, spec, agent, artifacts, open_verifier, stop_agent)
    if entrypoint_output:
        outcome = replace(
            outcome, files={ENTRYPOINT_LOG: entrypoint_output.encode("utf-8", "replace"), **outcome.files}
        )
    return outcome


async def _apart(
    plan: VerificationPlan,
    spec: VerifierSandboxSpec,
    agent: Sandbox,
    artifacts: Sequence[Artifact],
    open_verifier: Callable[[VerifierSandboxSpec], AsyncContextManager[Sandbox]],
    stop_agent: bool,
) -> VerificationOutcome:
    """Artifacts out, the agent's sandbox stopped, the verifier's started, artifacts in, graded."""
    with tempfile.TemporaryDirectory(prefix="nemo-gym-artifacts-") as scratch:
        # The opener's own look (its image on the engine, say) before anything of the agent's is
        # halted or stopped: a configuration error raises with the agent's sandbox as it was.
        prepare = getattr(open_verifier, "prepare", None)
        if prepare is not None:
            try:
                await prepare(spec)
            except (TaskError, ImageBuildError, KeyboardInterrupt):
                raise
            except Exception as error:  # the engine's fault: masked, as when the sandbox fails to start
                return _mask(plan, "sandbox_error", f"the separate verifier's sandbox failed: {_describe(error)}")
        transcript = Artifact(source=TRANSCRIPT, destination="agent/trajectory.json", service="main", exclude=())
        try:
            collected = await _collect_quietly(agent, (*artifacts, transcript), Path(scratch), stop_agent)
        except Exception as error:  # any fault of the sandbox or its provider
            return _mask(
                plan, "sandbox_error", f"the artifacts could not be copied out of the agent's sandbox: {error}"
            )
        for missing in collected.missing:
            if missing != TRANSCRIPT:  # an agent that keeps no ATIF transcript is common
                LOGGER.warning("artifact %s was not in the agent's sandbox", missing)
        spec = replace(spec, landing=tuple(sorted({(item.artifact.source, item.kind) for item in collected.artifacts})))
        # Asked for before the agent's sandbox stops: an opener that refuses the spec (a network it
        # cannot enforce) raises here, with the agent's sandbox still there (its files; its processes
        # ended when this is its last step) to verify another way.
        opening = open_verifier(spec)
        stop = sandbox_option(agent, "stop", None) if stop_agent else None
        if stop is not None:
            try:
                await stop()
            except Exception as error:  # the agent's sandbox is done with either way
                LOGGER.warning("stopping the agent's sandbox failed: %s", error)
        cut = incomplete_artifacts(collected, artifacts)
        if cut:
            return VerificationOutcome(
                reward=0.0,
                failure_kind=ARTIFACTS_CUT_SHORT,
                detail=plan.redact(cut, pieces=True),
            )
        try:
            async with opening as verifier:
                # the user the verifier will run as there: with no user named, its image's USER (red team 74)
                who = verifier_user(plan, verifier)
                await deliver_artifacts(verifier, collected, owner=ARTIFACTS_OWNER, verifier_user=who)
                ships = await verifier.exec(
                    "test -f /tests/test.sh", cwd="/", user=verifier.admin_user, timeout_s=60, clean_shell=True
                )
                shared = replace(
                    plan,
                    mode="shared",
                    collect=(),
                    inputs=(),
                    in_verifier_sandbox=True,
                    keep_tests=ships.return_code == 0,
                )
                if shared.keep_tests:
                    shared = replace(shared, kind="test.sh", files=())
                return await run_verification(shared, verifier)
        except (TaskError, ImageBuildError, KeyboardInterrupt):
            raise
        except Exception as error:  # the verifier's sandbox could not start or was lost
            return _mask(plan, "sandbox_error", f"the separate verifier's sandbox failed: {_describe(error)}")


# The failure kind of a sample whose artifacts did not come out whole for what the agent left in them.
ARTIFACTS_CUT_SHORT = "artifacts_cut_short"


def incomplete_artifacts(collected: CollectedArtifacts, artifacts: Sequence[Artifact]) -> str:
    """Why the verifier cannot be given the task's ``artifacts`` whole, or "": one was cut short or
    left out whole for what the agent left in it (more than the limits, a socket, a stall). The limits
    leave out what passes them and go on, so the agent would choose what the verifier does not see
    (red team 85: told to delete secret.txt, it kept it behind 20,000 entries, and a verifier that
    checks it is gone gave 1.0); so such a sample scores 0, whatever the rest holds. The convention
    folder and the transcript, the agent's logs, are not the task's, unless they hold one of its artifacts."""
    sources = [artifact.source for artifact in artifacts]
    # By path, either way: a task's artifact inside the convention folder is copied with it (red team 86).
    cut = [
        source
        for source in dict.fromkeys(collected.incomplete)
        if any(path_within(source, declared) or path_within(declared, source) for declared in sources)
    ]
    if not cut:
        return ""
    within = [item for item in collected.skipped if any(path_within(item.path, source) for source in cut)]
    shown = "; ".join(f"{item.path!r} ({item.reason})" for item in within[:3])
    return (
        f"the artifact(s) {', '.join(cut)} could not be copied whole for what the agent left in them "
        f"({shown or 'cut short by the limits'}): the agent's doing, scored 0"
    )


async def _collect_quietly(
    agent: Sandbox, artifacts: Sequence[Artifact], folder: Path, done_with_agent: bool
) -> CollectedArtifacts:
    """``collect_artifacts`` with nothing of the agent's running, where its sandbox allows: a file the
    agent keeps rewriting as it is archived ends the engine's stream mid-file, and a lease it holds on
    one makes the engine's open of it wait until the client gives up; either masked the sample. When
    the agent's sandbox is done with, its processes are killed (``halt``); else they are frozen
    (``pause``, then ``unpause``), and a lease still stalls the copy: the artifact is then cut short
    where it stalled (``frozen``). A sandbox that can do neither (the agent stopped it: nothing runs)
    is copied as it is."""
    halt = sandbox_option(agent, "halt", None)
    if done_with_agent and halt is not None:
        await _best_effort(halt, "stopping the agent's processes")
        return await collect_artifacts(agent, artifacts, folder)
    pause, unpause = sandbox_option(agent, "pause", None), sandbox_option(agent, "unpause", None)
    if pause is None or unpause is None or not await _best_effort(pause, "pausing the agent's sandbox"):
        return await collect_artifacts(agent, artifacts, folder)
    try:
        return await collect_artifacts(agent, artifacts, folder, frozen=True)
    finally:
        await _best_effort(unpause, "unpausing the agent's sandbox")


async def _best_effort(call: Callable[[], Awaitable[None]], what: str) -> bool:
    """Whether ``call`` succeeded; its failure is logged (the copy goes on without it)."""
    try:
        await call()
    except Exception as error:  # a sandbox that stopped, or cannot do this
        LOGGER.warning("%s failed: %s", what, error)
        return False
    return True


def _mask(plan: VerificationPlan, reason: str, detail: str, stdout: str = "") -> VerificationOutcome:
    """A mask of this run, its detail redacted before it is counted and logged."""
    return count_mask(masked(reason, plan.redact(detail, pieces=True), plan.redact(stdout)))


def _describe(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


__all__ = [
    "ARTIFACTS_CUT_SHORT",
    "TRANSCRIPT",
    "VerifierSandboxSpec",
    "incomplete_artifacts",
    "run_separate_verification",
    "verifier_sandbox_spec",
]
