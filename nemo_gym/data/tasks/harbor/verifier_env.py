"""nemo_gym.data.tasks.harbor.verifier_env

Harbor's separate verifier environment, resolved the way Harbor resolves it (``verifier_mode.py``,
``trial.py`` and ``docker.py`` at v0.22.0), so that a task grades here as it grades there, or is
refused when it cannot. Every function is pure over the task folder: it takes a loaded ``Task`` or
the folder's path, and returns copies, never aliases of the loaded configuration.

Where Harbor's own code departs from seed 004, the seed decides, and the function says so in one
line. Seed 004's ``root`` docstring (the dataset folder whose ``built-images.json`` the loader read,
``_build_required``) has no function here: the record of an image built here is its labels, on
the engine (``image_build.image_record``), not a file beside the dataset.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import yaml

from nemo_gym.data.tasks.harbor.network import network_refusal
from nemo_gym.data.tasks.harbor.task import (
    MAX_NESTING,
    EnvironmentConfig,
    Task,
    VerifierConfig,
    brackets_nest_too_deep,
    load_task,
    nested_too_deep,
    read_text_file,
    sidecar_refusal,
)

TaskLike = Union[str, Path, Task]

SHARED, SEPARATE = "shared", "separate"

# The keys of a compose file's main service that this server reads for a verifier it builds: its
# image name, its build section and pull_policy. Everything else on main is a runtime setting that
# Harbor's `compose up` would apply to the verifier's container and this server would not.
VERIFIER_MAIN_KEYS = ("image", "build", "pull_policy")
# For a prebuilt verifier image nothing builds, so only a pull_policy (other than build) is inert.
PREBUILT_VERIFIER_MAIN_KEYS = ("pull_policy",)
# Top-level compose keys that cannot shape the verifier's container (besides x- extension fields):
# Harbor always passes --project-name, so `name` is inert, and `version` is ignored by Compose.
VERIFIER_COMPOSE_TOP_LEVEL_KEYS = ("services", "name", "version")
COMPOSE_FILE = "docker-compose.yaml"


def _task(task: TaskLike) -> Task:
    return task if isinstance(task, Task) else load_task(task)


def _mode(verifier: VerifierConfig) -> Optional[str]:
    if verifier.environment_mode is not None:
        return verifier.environment_mode
    return SEPARATE if verifier.environment is not None else None


def _table(environment: EnvironmentConfig) -> Dict[str, Any]:
    return copy.deepcopy(environment.table)


# --- modes -----------------------------------------------------------------------------------------


def verifier_mode(task: TaskLike) -> str:
    """Harbor's ``resolve_task_verifier_mode``: the explicit ``[verifier].environment_mode``, else
    separate when ``[verifier.environment]`` is declared, else shared."""
    return _mode(_task(task).verifier) or SHARED


def step_verifier_mode(task: TaskLike, step_name: str) -> str:
    """Harbor's ``resolve_step_verifier_mode``: the step's explicit mode, else separate when the
    step declares ``[steps.verifier.environment]``, else the task's own mode (steps may differ)."""
    loaded = _task(task)
    return _mode(loaded.step(step_name).verifier) or verifier_mode(loaded)


def _separate_steps(task: Task) -> List[str]:
    return [step.name for step in task.steps if step_verifier_mode(task, step.name) == SEPARATE]


# --- environments ----------------------------------------------------------------------------------


def effective_verifier_environment(task: TaskLike) -> Optional[Dict[str, Any]]:
    """Harbor's ``resolve_effective_verifier_env_config`` for the task: ``[verifier.environment]``
    when declared (an empty table inherits nothing), else a copy of ``[environment]``, docker_image
    included; ``None`` in shared mode."""
    loaded = _task(task)
    if verifier_mode(loaded) == SHARED:
        return None
    declared = loaded.verifier.environment
    return _table(declared if declared is not None else loaded.environment)


def step_verifier_environment(task: TaskLike, step_name: str) -> Optional[Dict[str, Any]]:
    """Harbor's ``resolve_effective_verifier_env_config`` with a step: ``[steps.verifier.environment]``,
    else ``[verifier.environment]``, else a copy of ``[environment]``; ``None`` when the step is shared.
    The step's table does not inherit from the task's ``[verifier.environment]``."""
    loaded = _task(task)
    if step_verifier_mode(loaded, step_name) == SHARED:
        return None
    for declared in (loaded.step(step_name).verifier.environment, loaded.verifier.environment):
        if declared is not None:
            return _table(declared)
    return _table(loaded.environment)


# --- build contexts --------------------------------------------------------------------------------


def step_verifier_build_context(task: TaskLike, step_name: str) -> Path:
    """Harbor's ``_verifier_env_build_context`` with a step: ``steps/<name>/tests/`` when that folder
    exists (a folder, not a script, decides), else the task's ``tests/``."""
    loaded = _task(task)
    loaded.step(step_name)
    own = loaded.path / "steps" / step_name / "tests"
    return own if own.is_dir() else loaded.path / "tests"


def _builds_from_tests(task: Task, environment: Optional[Dict[str, Any]]) -> bool:
    """Harbor builds ``tests/Dockerfile`` when a separate verifier declares or inherits no image
    (``should_use_prebuilt_docker_image``), whatever that Dockerfile holds."""
    return (
        environment is not None
        and not environment.get("docker_image")
        and (task.path / "tests" / "Dockerfile").is_file()
    )


def _building_steps(task: Task) -> List[str]:
    """Separate steps that start from ``tests/`` and declare no image: they build ``tests/Dockerfile``."""
    return [
        name
        for name in _separate_steps(task)
        if step_verifier_build_context(task, name) == task.path / "tests"
        and _builds_from_tests(task, step_verifier_environment(task, name))
    ]


def verifier_build_context(task: TaskLike) -> Optional[Path]:
    """The ``tests/`` folder when Harbor builds the separate verifier's image from it, else ``None``.

    Shared mode, a declared or inherited docker_image, or no ``tests/Dockerfile`` means no build. A
    multi-step task builds ``tests/`` for its separate steps that start from it and declare no
    image, whatever the task's own mode.
    """
    loaded = _task(task)
    if loaded.steps:
        builds = bool(_building_steps(loaded))
    else:
        builds = _builds_from_tests(loaded, effective_verifier_environment(loaded))
    return loaded.path / "tests" if builds else None


def verifier_build_environment(task: TaskLike) -> Optional[Dict[str, Any]]:
    """The environment whose settings the build of ``tests/Dockerfile`` sees, ``None`` when nothing
    builds: the task's own when it declares no docker_image, else the first building step's.

    Harbor builds once per step, each with its own settings; here steps share the first one's. A
    multi-step task whose own mode is separate but whose steps build nothing gives ``None``: nothing
    builds, whatever the task's own environment says.
    """
    loaded = _task(task)
    if verifier_build_context(loaded) is None:
        return None
    own = effective_verifier_environment(loaded)
    if own is not None and not own.get("docker_image"):
        return own
    return step_verifier_environment(loaded, _building_steps(loaded)[0])


# --- the verifier's compose file -------------------------------------------------------------------


_FLOW_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|\'[^\']*\'|#[^\n]*|[\[\]{}]')
_BLOCK_PREFIX = re.compile(r"[ \t]*(?:[-?:][ \t]+)*")


def _yaml_nests_too_deep(text: str) -> bool:
    """Whether YAML text may nest more than ``MAX_NESTING`` levels: flow brackets outside quotes,
    or a line indented (spaces and ``- `` markers) past that many columns."""
    if brackets_nest_too_deep(text, _FLOW_TOKENS):
        return True
    return any(len(_BLOCK_PREFIX.match(line).group()) > MAX_NESTING for line in text.splitlines())  # type: ignore[union-attr]


def _compose(task: Task) -> Tuple[Optional[Any], Optional[str]]:
    """``(parsed file, None)``, or ``(None, why it does not parse)``; ``({}, None)`` without a file."""
    path = task.path / "tests" / COMPOSE_FILE
    if not path.is_file():
        return {}, None
    too_deep = f"{path}: not valid YAML (nested more than {MAX_NESTING} levels deep)"
    try:
        text = read_text_file(path)
        if _yaml_nests_too_deep(text):  # before PyYAML recurses near the interpreter's limit
            return None, too_deep
        parsed = yaml.safe_load(text)
    except RecursionError:
        return None, too_deep
    except (OSError, ValueError, yaml.YAMLError) as error:  # ValueError: UnicodeDecodeError, huge integers
        return None, f"{path}: not valid YAML ({(str(error).splitlines() or [type(error).__name__])[0]})"
    if nested_too_deep(parsed):  # also an alias that holds itself
        return None, too_deep
    return ({} if parsed is None else parsed), None


def verifier_compose_refusal(task: TaskLike) -> Optional[str]:
    """Why ``tests/docker-compose.yaml`` is not a file the readers below can trust, as the loader's
    message; ``None`` when it is, or when there is none.

    Harbor stacks the whole file on its verifier template, and ``compose up`` applies every top-level
    key: ``include`` merges services the readers never see, ``networks`` reshapes the default
    network, ``volumes``/``configs``/``secrets`` are project settings. Only ``services``, ``name``,
    ``version`` and ``x-`` fields pass. Invalid YAML, or a file or ``services`` that is not a mapping,
    fails Harbor's ``compose up``; an empty file is an empty mapping, as it is there.
    """
    loaded = _task(task)
    path = loaded.path / "tests" / COMPOSE_FILE
    parsed, error = _compose(loaded)
    if error is not None:
        return error
    if not isinstance(parsed, dict):
        return f"{path}: must be a mapping, not a {type(parsed).__name__}"
    refused = [
        str(key) for key in parsed if key not in VERIFIER_COMPOSE_TOP_LEVEL_KEYS and not str(key).startswith("x-")
    ]
    if refused:
        return (
            f"{path}: top-level {', '.join(refused)} would shape Harbor's verifier project but not this server's "
            "single sandbox; only services, name, version and x- fields are allowed"
        )
    if "services" in parsed and not isinstance(parsed["services"], dict):
        return f"{path}: services must be a mapping, not {type(parsed['services']).__name__}"
    return None


def verifier_compose_services(task: TaskLike) -> Dict[str, Any]:
    """The ``services`` mapping of ``tests/docker-compose.yaml`` (a copy); ``{}`` without the file, or
    for one that does not parse or has no services mapping (``verifier_compose_refusal`` names it)."""
    parsed, _ = _compose(_task(task))
    services = parsed.get("services") if isinstance(parsed, dict) else None
    return copy.deepcopy(services) if isinstance(services, dict) else {}


def verifier_compose_sidecars(task: TaskLike) -> List[str]:
    """The services other than ``main``, in file order. Harbor's separate verifier is a whole Compose
    project that builds and starts them all; this server starts a single sandbox, so any is refused."""
    return [str(name) for name in verifier_compose_services(task) if name != "main"]


def verifier_compose_main_overrides(task: TaskLike) -> List[str]:
    """The keys of ``main`` beyond ``VERIFIER_MAIN_KEYS`` (beyond ``PREBUILT_VERIFIER_MAIN_KEYS``, with
    ``pull_policy: build`` counting too, when the effective environment names a docker_image), in
    file order; ``[]`` without the file or a ``main`` mapping.

    Harbor stacks the file on its verifier template for build and up, so ``environment``,
    ``volumes``, ``command`` and every other runtime key reach its verifier container; this server
    reads main only for the build section and image of a verifier it builds.
    """
    loaded = _task(task)
    main = verifier_compose_services(loaded).get("main")
    if not isinstance(main, dict):
        return []
    environment = effective_verifier_environment(loaded)
    if environment is not None and environment.get("docker_image"):
        return [
            str(key)
            for key, value in main.items()
            if key not in PREBUILT_VERIFIER_MAIN_KEYS or (key == "pull_policy" and value == "build")
        ]
    return [str(key) for key in main if key not in VERIFIER_MAIN_KEYS]


# --- what the loader refuses -----------------------------------------------------------------------


def verifier_definition_refusal(task: TaskLike) -> Optional[str]:
    """Harbor's refusal of a separate verifier with nothing to run (``require_agent_environment_definition``
    on its environment dir), as the loader's message; ``None`` when every separate verifier can start.

    The seed decides two departures from Harbor: a ``tests/docker-compose.yaml`` alone does not count
    as a definition, and the refusal comes at load, not after the agent has run. A separate step with
    a ``tests/`` folder of its own and no image is refused too: this server builds only ``tests/``.
    """
    loaded = _task(task)
    toml = loaded.path / "task.toml"
    dockerfile = (loaded.path / "tests" / "Dockerfile").is_file()
    if not loaded.steps and verifier_mode(loaded) == SEPARATE:
        environment = effective_verifier_environment(loaded) or {}
        if not environment.get("docker_image") and not dockerfile:
            return (
                f"{toml}: the separate verifier has nothing to run: no docker_image in its environment and no "
                f"{loaded.path / 'tests' / 'Dockerfile'}"
            )
    for name in _separate_steps(loaded):
        environment = step_verifier_environment(loaded, name) or {}
        if environment.get("docker_image"):
            continue
        context = step_verifier_build_context(loaded, name)
        if context != loaded.path / "tests":
            return (
                f"{toml}: step {name!r} verifies separately from {context}, which this server does not build; "
                "give the step a docker_image"
            )
        if not dockerfile:
            return (
                f"{toml}: step {name!r} verifies separately with nothing to run: no docker_image and no "
                f"{context / 'Dockerfile'}"
            )
    return None


def load_refusal(task: Task) -> Optional[str]:
    """What ``load_task`` refuses, or ``None``: a hook or artifact on a Compose sidecar
    (``task.sidecar_refusal``), a network restriction the task cannot have
    (``network.network_refusal``), a separate verifier that cannot run here."""
    sidecar = sidecar_refusal(task)
    if sidecar is not None:
        return sidecar
    separate_steps = _separate_steps(task)
    separate = {"[verifier]": verifier_mode(task) == SEPARATE or bool(separate_steps)}
    separate.update((f"steps[{index}].verifier", step.name in separate_steps) for index, step in enumerate(task.steps))
    network = network_refusal(task.config, separate)
    if network is not None:
        return f"{task.path / 'task.toml'}: {network}"
    if verifier_mode(task) == SHARED and not separate_steps:
        return None
    refusal = verifier_definition_refusal(task) or verifier_compose_refusal(task)
    if refusal is not None:
        return refusal
    compose = task.path / "tests" / COMPOSE_FILE
    sidecars = verifier_compose_sidecars(task)
    if sidecars:
        return (
            f"{compose}: the separate verifier declares services besides main ({', '.join(sidecars)}); "
            "Harbor would start them all, this server starts the verifier as a single sandbox"
        )
    overrides = verifier_compose_main_overrides(task)
    if overrides:
        return (
            f"{compose}: services.main sets {', '.join(overrides)}, which would reach Harbor's verifier "
            "container but not this server's, so the task would grade differently"
        )
    return None


__all__ = [
    "COMPOSE_FILE",
    "PREBUILT_VERIFIER_MAIN_KEYS",
    "SEPARATE",
    "SHARED",
    "VERIFIER_COMPOSE_TOP_LEVEL_KEYS",
    "VERIFIER_MAIN_KEYS",
    "TaskLike",
    "effective_verifier_environment",
    "load_refusal",
    "step_verifier_build_context",
    "step_verifier_environment",
    "step_verifier_mode",
    "verifier_build_context",
    "verifier_build_environment",
    "verifier_compose_main_overrides",
    "verifier_compose_refusal",
    "verifier_compose_services",
    "verifier_compose_sidecars",
    "verifier_definition_refusal",
    "verifier_mode",
]
