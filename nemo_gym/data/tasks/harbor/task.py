"""Loading Harbor task folders and datasets into plain typed values.

A task folder holds ``task.toml`` (optional), ``task_data.json`` (optional), ``tests/``,
``environment/``, ``solution/`` and, for multi-step tasks, ``steps/<name>/``. A dataset is a folder of
task folders with an optional ``dataset.toml`` and an optional root ``verifier.py``; it may also hold
parameterized rows (``rows.jsonl``: each line one task, graded by the root ``verifier.py``).

Unknown keys are ignored, as Harbor's models ignore them; a known key of the wrong type, or a file
that does not parse, is a ``TaskError`` whose one sentence names the file and the key.
"""

from __future__ import annotations

import errno
import json
import math
import os
import posixpath
import re
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple, Union

from nemo_gym.data.tasks.harbor._values import finite_float

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.8-3.10 by the nox matrix
    import tomli as tomllib

User = Union[str, int]

# Harbor's VerifierConfig.timeout_sec and VerifierCollectConfig.timeout_sec defaults.
DEFAULT_VERIFIER_TIMEOUT_SEC = 600.0
DEFAULT_COLLECT_TIMEOUT_SEC = 60.0
ENVIRONMENT_MODES = ("shared", "separate")
# Files the verifier writes into /logs/verifier: never a sidecar input, or a planted one would stand.
GRADER_OUTPUTS = ("reward.json", "reward.txt", "test-stdout.txt")
ROWS_FILE = "rows.jsonl"
# The deepest nesting of tables and arrays a task's files may hold. Real ones hold a handful of
# levels; the limit keeps every later copy, dump and check of a loaded value far from the
# interpreter's recursion limit.
MAX_NESTING = 100
# The longest a healthcheck's seconds may be: a day. Past it a check waits for ever in all but name
# (Harbor loads start_period_sec = 1e308 and then hangs; red team 35).
MAX_HEALTHCHECK_SEC = 86400.0
# The largest uid or gid a user key may name: Linux's ids are signed 32-bit (-1 means "unchanged").
MAX_ID = 2**31 - 1
# The verifier's own folders: no artifact may come from, hold or land in them (seed 000: "A source of
# /, or under /tests or /logs/verifier, is refused"; one that holds them, /logs, would carry the
# agent's /logs/verifier into the verifier's).
PROTECTED_PATHS = ("/tests", "/logs/verifier")
# Where the agent publishes files for the verifier; collected always, as Harbor does.
CONVENTION_ARTIFACTS = "/logs/artifacts"
# The host copy's name Harbor keeps for its manifest of what was collected.
ARTIFACT_MANIFEST = "manifest.json"
# Harbor's compose service names (models/task/config.py, _COMPOSE_SERVICE_NAME_PATTERN).
_SERVICE = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]*")
_USER_PART = r"[A-Za-z0-9._][A-Za-z0-9._-]*"
_USER = re.compile(rf"({_USER_PART})(?::({_USER_PART}))?")


class TaskError(ValueError):
    """A task folder the server cannot use; the message names the file and the key at fault."""


@dataclass(frozen=True)
class CollectHook:
    """One ``[[verifier.collect]]`` hook: run before the verifier's folders are emptied, best effort."""

    command: str
    service: str = "main"
    timeout_sec: float = DEFAULT_COLLECT_TIMEOUT_SEC
    user: Optional[User] = None


@dataclass(frozen=True)
class Healthcheck:
    """``[environment.healthcheck]`` or a step's ``[steps.healthcheck]``: a shell command run until
    it exits 0 (``healthchecks.run_healthcheck``). The defaults are Harbor's ``HealthcheckConfig``'s."""

    command: str
    interval_sec: float = 5.0
    timeout_sec: float = 30.0
    start_period_sec: float = 0.0
    start_interval_sec: float = 5.0
    retries: int = 3


@dataclass(frozen=True)
class EnvironmentConfig:
    """An environment table (``[environment]`` or ``[verifier.environment]``); ``table`` is all of it."""

    docker_image: Optional[str] = None
    workdir: Optional[str] = None
    env: Dict[str, str] = field(default_factory=dict)
    table: Dict[str, Any] = field(default_factory=dict)
    # The sandbox's limits, only as declared: Harbor's defaults (1 CPU, 2 GiB) are a cluster's
    # budget, and would slow a task on a workstation that declared nothing.
    cpus: Optional[float] = None
    memory_mb: Optional[int] = None
    # Run once the sandbox has started (the agent's environment only: as in Harbor, a separate
    # verifier's [verifier.environment].healthcheck is read and never run).
    healthcheck: Optional[Healthcheck] = None


@dataclass(frozen=True)
class VerifierConfig:
    """``[verifier]`` (or a step's ``[steps.verifier]``)."""

    timeout_sec: float = DEFAULT_VERIFIER_TIMEOUT_SEC
    env: Dict[str, str] = field(default_factory=dict)
    user: Optional[User] = None
    environment_mode: Optional[str] = None
    environment: Optional[EnvironmentConfig] = None
    collect: Tuple[CollectHook, ...] = ()


@dataclass(frozen=True)
class Artifact:
    """One ``artifacts`` entry: what a separate verifier receives from the agent's sandbox.

    ``source`` is the absolute path in the agent's sandbox (normalised: no ``.``, no doubled or
    trailing ``/``), and the path the verifier receives it at. ``destination`` is where the host
    copy lands, relative to the collection folder: by default the source without its leading ``/``,
    as Harbor names it (``/var/log/x`` -> ``var/log/x``). ``service`` is a Compose service (parsed,
    refused at run time unless ``main``); ``exclude`` holds GNU tar ``--exclude`` patterns for a
    folder (``artifacts.is_excluded``).
    """

    source: str
    destination: str
    service: str = "main"
    exclude: Tuple[str, ...] = ()


@dataclass(frozen=True)
class StepConfig:
    """One ``[[steps]]`` entry of a multi-step task; ``artifacts`` are collected beside the task's."""

    name: str
    verifier: VerifierConfig = field(default_factory=VerifierConfig)
    artifacts: Tuple[Artifact, ...] = ()
    healthcheck: Optional[Healthcheck] = None  # run after the step's setup, before its agent
    agent_user: Optional[User] = None  # [steps.agent].user (``Task.agent_user_of``)


@dataclass(frozen=True)
class Task:
    """A loaded task: its folder, settings, fields and what its dataset adds."""

    id: str
    path: Path
    verifier: VerifierConfig = field(default_factory=VerifierConfig)
    environment: EnvironmentConfig = field(default_factory=EnvironmentConfig)
    agent_user: Optional[User] = None
    steps: Tuple[StepConfig, ...] = ()
    task_data: Dict[str, Any] = field(default_factory=dict)
    dataset_root: Optional[Path] = None
    timeout_multiplier: float = 1.0
    inputs: Tuple[str, ...] = ()
    config: Dict[str, Any] = field(default_factory=dict)
    artifacts: Tuple[Artifact, ...] = ()

    @property
    def timeout_sec(self) -> float:
        """The verifier's timeout: ``[verifier].timeout_sec`` times the dataset's multiplier."""
        return self.verifier.timeout_sec * self.timeout_multiplier

    def step(self, name: str) -> StepConfig:
        for step in self.steps:
            if step.name == name:
                return step
        known = ", ".join(step.name for step in self.steps) or "none: task.toml declares no [[steps]]"
        raise TaskError(f"{self.path / 'task.toml'}: no step named {name!r} (steps: {known})")

    def agent_user_of(self, step: Optional[str]) -> Optional[User]:
        """Who the agent of ``step`` (``None``: of the task) runs as: the step's ``[steps.agent].user``,
        else ``[agent].user`` (Harbor's ``_step_agent_user``)."""
        own = self.step(step).agent_user if step is not None else None
        return own if own is not None else self.agent_user

    def verifier_user_of(self, step: Optional[str]) -> Optional[User]:
        """Who the verifier of ``step`` (``None``: of the task) runs as: the step's
        ``[steps.verifier].user``, else ``[verifier].user``, else root where that run's agent has a
        user (the seed's rule: the image's user is not known then), else ``None``: the image's user."""
        own = self.step(step).verifier.user if step is not None else None
        user = own if own is not None else self.verifier.user
        return "root" if user is None and self.agent_user_of(step) is not None else user

    def agent_users(self) -> Tuple[Optional[User], ...]:
        """The user each run of an agent of this task runs as (``agent_user_of`` each step, else of the
        task), once each: ``None`` for one that names none, which runs as the image's ``USER``."""
        runs = [self.agent_user_of(step.name) for step in self.steps] or [self.agent_user]
        return tuple(dict.fromkeys(runs))

    def workdir_owner(self) -> Optional[User]:
        """Whom the working directory is given to, once, as a published Dockerfile gives it:
        ``[agent].user``, else the first step's ``[steps.agent].user`` (a later step's other agent
        finds it as Harbor would, not its own)."""
        owners = [self.agent_user] + [step.agent_user for step in self.steps]
        return next((user for user in owners if user is not None), None)

    def named_users(self) -> List[User]:
        """Every user ``task.toml`` names, agents' and verifiers', the task's and its steps'."""
        named = [self.agent_user, self.verifier.user]
        for step in self.steps:
            named += [step.agent_user, step.verifier.user]
        return [user for user in named if user is not None]


# --- reading TOML tables -------------------------------------------------------------------------


def nested_too_deep(value: Any, limit: int = MAX_NESTING) -> bool:
    """Whether ``value`` holds dicts or lists nested more than ``limit`` levels deep.

    Iterative, so it cannot overflow the stack itself; a container reached again is walked again
    only when reached deeper, so shared parts (YAML aliases) cost little and a cycle counts as too deep.
    """
    deepest: Dict[int, int] = {}
    stack: List[Tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth > limit:
            return True
        if deepest.get(id(item), 0) >= depth:
            continue
        deepest[id(item)] = depth
        stack.extend((child, depth + 1) for child in children)
    return False


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"the number {text[:40]} is out of range")
    return number


# Strings (and, in TOML, comments) and the brackets outside them: counted in one pass before a
# recursive parser runs, so that no file can take json or tomllib near the interpreter's recursion
# limit (Python 3.8 aborts the process if it overflows again while handling that error).
_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.S)
_TOML_TOKENS = re.compile(
    r'"""(?:[^\\]|\\.)*?"""|\'\'\'.*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#[^\n]*|[\[\]{}]', re.S
)


def brackets_nest_too_deep(text: str, tokens: Any) -> bool:
    """Whether brackets outside strings and comments nest more than ``MAX_NESTING`` levels."""
    depth = 0
    for match in tokens.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > MAX_NESTING:
                return True
        elif token in "]}":
            depth -= 1
    return False


def _no_key_twice(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):  # json keeps the last silently: {"answer": "paris", "answer": "lyon"}
        seen: Set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"the key {key[:200]!r} is given twice in one object")
            seen.add(key)
    return value


def loads_json(text: str) -> Any:
    """``json.loads`` for files a person wrote: ``ValueError`` with the reason for anything that is not
    plain JSON (``NaN``, ``Infinity``, a number beyond a float's range, an integer of more digits than
    the interpreter converts, a key given twice in one object, as TOML refuses) or that nests more
    than ``MAX_NESTING`` levels deep."""
    if brackets_nest_too_deep(text, _JSON_TOKENS):
        raise ValueError(f"nested more than {MAX_NESTING} levels deep")
    try:
        value = json.loads(
            text, parse_constant=_refuse_constant, parse_float=_finite_float, object_pairs_hook=_no_key_twice
        )
    except RecursionError:
        raise ValueError(f"nested more than {MAX_NESTING} levels deep") from None
    except MemoryError:
        raise ValueError("too large to read") from None
    if nested_too_deep(value):
        raise ValueError(f"nested more than {MAX_NESTING} levels deep")
    return value


def read_text_file(path: Path, *, errors: str = "strict", given: bool = False) -> str:
    """The UTF-8 text of the regular file ``path`` (a task's own file); ``OSError`` for anything else:
    a FIFO would block the read forever and a device never end, so the file is opened without
    blocking and checked before it is read. A path the operator ``given`` on the command line is read
    as it comes, a pipe included (``--task-data <(...)``)."""
    if given:
        return Path(path).read_text(encoding="utf-8", errors=errors)
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with open(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        return handle.read().decode("utf-8", errors)


def read_toml(path: Path, *, given: bool = False) -> Dict[str, Any]:
    """The table in the TOML file ``path`` (``given``: see ``read_text_file``); ``TaskError`` naming it."""
    try:
        text = read_text_file(path, given=given)
        if text.startswith("\ufeff"):
            raise ValueError("it starts with a byte order mark: save it as UTF-8 without one")
        if brackets_nest_too_deep(text, _TOML_TOKENS):
            raise TaskError(f"{path}: not valid TOML (nested more than {MAX_NESTING} levels deep)")
        config: Dict[str, Any] = tomllib.loads(text)
    except RecursionError:
        raise TaskError(f"{path}: not valid TOML (nested more than {MAX_NESTING} levels deep)") from None
    except MemoryError:
        raise TaskError(f"{path}: not valid TOML (too large to read)") from None
    except (OSError, ValueError) as error:  # ValueError: TOMLDecodeError, UnicodeDecodeError, huge integers
        raise TaskError(f"{path}: not valid TOML ({error})") from None
    if nested_too_deep(config):
        raise TaskError(f"{path}: not valid TOML (nested more than {MAX_NESTING} levels deep)")
    return config


def _table(parent: Mapping[str, Any], key: str, where: str, name: str) -> Optional[Dict[str, Any]]:
    value = parent.get(key)
    if value is not None and not isinstance(value, dict):
        raise TaskError(f"{where}: {name} must be a table")
    return value


def _key(key: str) -> str:
    """A key as a message shows it: plain keys bare, anything else quoted, so a message stays one line."""
    return key if re.fullmatch(r"[A-Za-z0-9_.-]+", key) else repr(key)


def env_table(value: Any, where: str, name: str) -> Dict[str, str]:
    """An env table (``[environment].env``, ``[verifier].env``, a step's, ``[solution].env``, secrets):
    names to strings that a process environment can hold. A name must be non-empty without ``=``
    or NUL, a value without NUL, both valid text; ``where`` is the file, ``name`` the table's key."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TaskError(f"{where}: {name} must be a table of strings")
    for key, item in value.items():
        if not isinstance(item, str):
            # The type alone: the value may be a secret.
            raise TaskError(f"{where}: {name}.{_key(key)} must be a string, not {type(item).__name__}")
        if not key or "=" in key or "\0" in key:
            raise TaskError(f"{where}: {name} has the name {key!r}, which no environment variable can have")
        if "\0" in item:
            raise TaskError(f"{where}: {name}.{_key(key)} holds a NUL character, which no environment variable can")
        try:
            os.fsencode(key), os.fsencode(item)
        except UnicodeError:
            raise TaskError(f"{where}: {name}.{_key(key)} is not valid text (a lone surrogate)") from None
    return dict(value)


def _optional_string(value: Any, where: str, name: str) -> Optional[str]:
    if value is not None and not isinstance(value, str):
        raise TaskError(f"{where}: {name} must be a string, not {value!r}")
    if value is not None and "\0" in value:
        raise TaskError(f"{where}: {name} holds a NUL character")
    return value


def _number(value: Any, where: str, name: str) -> float:
    number = finite_float(value)
    if number is None or not number > 0:
        raise TaskError(f"{where}: {name} must be a finite positive number, not {value!r}")
    return number


def _is_id(part: str) -> bool:
    """Whether ``part`` of a user is a name, or a number that is a valid id."""
    return not part.isdigit() or (len(part) <= len(str(MAX_ID)) and int(part) <= MAX_ID)


def _user(value: Any, where: str, name: str) -> Optional[User]:
    """A user key: a TOML integer uid in 0..2**31-1, or a name (``name:group`` too) of letters,
    digits, ``.``, ``_`` and ``-``, not starting with ``-`` (all-digit parts are ids, in range)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TaskError(f"{where}: {name} must be a user name or a TOML integer uid, not {value!r}")
    if isinstance(value, int):
        if not 0 <= value <= MAX_ID:
            raise TaskError(f"{where}: {name} = {value} is not a uid (0 to {MAX_ID})")
        return value
    if not value:
        raise TaskError(f"{where}: {name} must not be empty")
    match = _USER.fullmatch(value)
    if match is None or not all(_is_id(part) for part in match.groups() if part is not None):
        raise TaskError(
            f"{where}: {name} = {value[:100]!r} is not a user name (letters, digits, '.', '_' and '-', "
            f"optionally name:group) or a uid from 0 to {MAX_ID}"
        )
    return value


def healthcheck_config(value: Any, where: str, name: str) -> Optional[Healthcheck]:
    """A healthcheck table (``None`` when absent): a non-empty ``command``, seconds from 0 to
    ``MAX_HEALTHCHECK_SEC``, and a whole number of ``retries`` from 0 up."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise TaskError(f"{where}: [{name}] must be a table")
    command = value.get("command")
    if not isinstance(command, str) or not command.strip():
        raise TaskError(f"{where}: {name}.command must be a non-empty shell command (exit 0 means healthy)")
    if "\0" in command:
        raise TaskError(f"{where}: {name}.command holds a NUL character")
    seconds: Dict[str, float] = {}
    for key in ("interval_sec", "timeout_sec", "start_period_sec", "start_interval_sec"):
        given = value.get(key, getattr(Healthcheck, key))
        number = finite_float(given)
        if number is None or not 0 <= number <= MAX_HEALTHCHECK_SEC:
            bound = f"from 0 to {MAX_HEALTHCHECK_SEC:g} (a day)"
            raise TaskError(f"{where}: {name}.{key} must be a number of seconds {bound}, not {given!r}")
        seconds[key] = number
    retries = value.get("retries", Healthcheck.retries)
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise TaskError(f"{where}: {name}.retries must be a whole number >= 0, not {retries!r}")
    return Healthcheck(command, retries=retries, **seconds)


def environment_config(
    table: Optional[Mapping[str, Any]], where: str, name: str, *, agents: bool = False
) -> EnvironmentConfig:
    """``[environment]`` (``agents``: the agent's) or a separate verifier's environment, checked."""
    table = dict(table or {})
    workdir = _optional_string(table.get("workdir"), where, f"{name}.workdir")
    if workdir is not None and not workdir.startswith("/"):
        raise TaskError(f"{where}: {name}.workdir must be an absolute path, not {workdir!r}")
    clash = protected_clash(workdir) if agents and workdir is not None else None
    if clash is not None:  # a separate verifier's may be in /tests, which its sandbox keeps
        raise TaskError(
            f"{where}: {name}.workdir = {workdir!r} {clash}: grading makes that folder afresh for every run, "
            "and the agent's files in it would be lost"
        )
    cpus, memory = table.get("cpus"), table.get("memory_mb")
    if cpus is not None and (finite_float(cpus) is None or cpus <= 0):
        raise TaskError(f"{where}: {name}.cpus must be a number above 0, not {cpus!r}")
    if memory is not None and (isinstance(memory, bool) or not isinstance(memory, int) or memory <= 0):
        raise TaskError(f"{where}: {name}.memory_mb must be a whole number above 0, not {memory!r}")
    return EnvironmentConfig(
        docker_image=_optional_string(table.get("docker_image"), where, f"{name}.docker_image"),
        workdir=workdir,
        env=env_table(table.get("env"), where, f"{name}.env"),
        table=table,
        cpus=None if cpus is None else float(cpus),
        memory_mb=memory,
        healthcheck=healthcheck_config(table.get("healthcheck"), where, f"{name}.healthcheck"),
    )


def _array_of_tables(value: Any, where: str, name: str) -> List[Dict[str, Any]]:
    """A TOML ``[[name]]`` array (``[]`` when absent)."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise TaskError(f"{where}: {name} must be an array of tables ([[{name}]])")
    return value


def _service(table: Mapping[str, Any], where: str, key: str) -> str:
    """The Compose service a collect hook or an artifact names (``main`` by default). Another one
    loads (tools can inspect the task) and is refused as unrunnable (``sidecar_refusal``)."""
    service = table.get("service", "main")
    service = "main" if service is None else service
    if not isinstance(service, str) or not _SERVICE.fullmatch(service.strip()):
        raise TaskError(
            f"{where}: {key}.service must be a Compose service name (letters, digits, '_', '.' and '-'), "
            f"not {service!r}"
        )
    return service.strip()


def sidecar_refusal(task: Task) -> Optional[str]:
    """Why the task cannot run here when a collect hook or an artifact is on a Compose service
    other than ``main`` (this server runs one sandbox, never a Compose project), else ``None``."""
    named: List[Tuple[str, str]] = [(f"verifier.collect[{i}]", h.service) for i, h in enumerate(task.verifier.collect)]
    for index, step in enumerate(task.steps):
        named += [(f"steps[{index}].verifier.collect[{i}]", h.service) for i, h in enumerate(step.verifier.collect)]
    named += [(f"the artifact {artifact.source}", artifact.service) for artifact in task.artifacts]
    for step in task.steps:
        named += [
            (f"the artifact {artifact.source} of step {step.name!r}", artifact.service) for artifact in step.artifacts
        ]
    for what, service in named:
        if service != "main":
            return (
                f"{task.path / 'task.toml'}: {what} is on the Compose service {service!r}, which this server "
                "does not start (it runs the task's main sandbox alone)"
            )
    return None


def _collect(value: Any, where: str, name: str) -> Tuple[CollectHook, ...]:
    hooks = []
    for index, item in enumerate(_array_of_tables(value, where, name)):
        key = f"{name}[{index}]"
        command = item.get("command")
        if not isinstance(command, str) or not command.strip():
            raise TaskError(f"{where}: {key}.command must be a non-empty string")
        if "\0" in command:
            raise TaskError(f"{where}: {key}.command holds a NUL character")
        service = _service(item, where, key)
        timeout = item.get("timeout_sec", DEFAULT_COLLECT_TIMEOUT_SEC)
        seconds = finite_float(timeout)
        if seconds is None or seconds < 0:
            raise TaskError(f"{where}: {key}.timeout_sec must be a finite number >= 0, not {timeout!r}")
        hooks.append(CollectHook(command, service, seconds, _user(item.get("user"), where, f"{key}.user")))
    return tuple(hooks)


def verifier_config(table: Optional[Mapping[str, Any]], where: str, name: str) -> VerifierConfig:
    """A ``[verifier]``-shaped table; ``shared`` beside an environment table is refused, as Harbor does."""
    table = table or {}
    mode = table.get("environment_mode")
    if mode is not None and mode not in ENVIRONMENT_MODES:
        raise TaskError(f"{where}: {name}.environment_mode must be 'shared' or 'separate', not {mode!r}")
    environment_table = _table(table, "environment", where, f"[{name}.environment]")
    if mode == "shared" and environment_table is not None:
        raise TaskError(
            f"{where}: {name}.environment_mode = 'shared' beside a [{name}.environment] table: "
            "a verifier environment is only for separate mode"
        )
    return VerifierConfig(
        timeout_sec=_number(table.get("timeout_sec", DEFAULT_VERIFIER_TIMEOUT_SEC), where, f"{name}.timeout_sec"),
        env=env_table(table.get("env"), where, f"{name}.env"),
        user=_user(table.get("user"), where, f"{name}.user"),
        environment_mode=mode,
        environment=None
        if environment_table is None
        else environment_config(environment_table, where, f"{name}.environment"),
        collect=_collect(table.get("collect"), where, f"{name}.collect"),
    )


# --- artifacts -----------------------------------------------------------------------------------


def path_parts(path: str) -> List[str]:
    """The names in ``path``, leaving out empty ones (repeated slashes) and ``.``."""
    return [part for part in path.split("/") if part not in ("", ".")]


def _inside(path: str, folder: str) -> bool:
    """Whether the normalised absolute ``path`` is ``folder`` or below it."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def normal_path(path: str) -> str:
    """The absolute ``path`` with ``.``, ``..`` and repeated or trailing slashes resolved as text
    (``//tests/`` and ``/app/../tests`` are ``/tests``)."""
    return "/" + "/".join(path_parts(posixpath.normpath(path)))


def path_within(path: str, folder: str) -> bool:
    """Whether the absolute ``path`` is ``folder`` or lies below it, both read as ``normal_path``."""
    return _inside(normal_path(path), normal_path(folder))


def artifact_source_refusal(source: str, protected: Tuple[str, ...] = PROTECTED_PATHS) -> Optional[str]:
    """Why ``source`` (an absolute path) can be no artifact's source or landing place, or ``None``:
    it is ``/``, holds a ``..`` or NUL, or is, lies under or holds one of the ``protected`` folders."""
    if not source.startswith("/"):
        return f"must be an absolute path, not {source[:200]!r}"
    if "\0" in source:
        return "holds a NUL character"
    if ".." in source.split("/"):
        return f"= {source[:200]!r} must not contain '..'"
    if normal_path(source) == "/":
        return f"= {source!r} is refused: an artifact cannot be the whole file system"
    clash = protected_clash(source, protected)
    return None if clash is None else f"= {source[:200]!r} is refused: it {clash}"


def protected_clash(path: str, protected: Tuple[str, ...] = PROTECTED_PATHS, *, holding: bool = True) -> Optional[str]:
    """How the absolute ``path`` (read as ``normal_path``) meets one of the ``protected`` folders, which
    grading makes afresh for every run (``"is under /tests, which belongs to the verifier"``, and with
    ``holding`` ``"holds ..."`` for one above them), or ``None``."""
    normal = normal_path(path)
    for folder in protected:
        if _inside(normal, folder):
            return f"is under {folder}, which belongs to the verifier"
        if holding and _inside(folder, normal):
            return f"holds {folder}, which belongs to the verifier"
    return None


def artifact_destination_refusal(destination: str) -> Optional[str]:
    """Why ``destination`` cannot name a host copy, or ``None``: Harbor's rules (relative, ``/`` as
    the separator, no ``..``, not its ``manifest.json``), and no NUL."""
    if "\0" in destination:
        return "holds a NUL character"
    if "\\" in destination:
        return f"= {destination[:200]!r} must use '/' as its separator"
    if destination.startswith("/"):
        return f"= {destination[:200]!r} must be a relative path"
    if ".." in destination.split("/"):
        return f"= {destination[:200]!r} must not contain '..'"
    parts = path_parts(destination)
    if not parts:
        return f"= {destination!r} must name a file or folder"
    if parts == [ARTIFACT_MANIFEST]:
        return f"= {destination!r} is refused: {ARTIFACT_MANIFEST} is the name of Harbor's collection manifest"
    return None


def default_destination(source: str) -> str:
    """Where Harbor puts the host copy of ``source`` without a ``destination``: the source's path
    without its root (``models/task/artifacts.py: source_relative_path``)."""
    return "/".join(path_parts(source))


def _artifact(item: Any, where: str, key: str) -> Artifact:
    table = {"source": item} if isinstance(item, str) else item
    if not isinstance(table, dict):
        raise TaskError(f"{where}: {key} must be a path or a table with a source, not {item!r}")
    source_key = key if isinstance(item, str) else f"{key}.source"
    source = table.get("source")
    if not isinstance(source, str):
        raise TaskError(f"{where}: {source_key} must be an absolute path, not {source!r}")
    refusal = artifact_source_refusal(source)
    if refusal is not None:
        raise TaskError(f"{where}: {source_key} {refusal}")
    source = "/" + "/".join(path_parts(source))
    destination = table.get("destination")
    if destination is not None and not isinstance(destination, str):
        raise TaskError(f"{where}: {key}.destination must be a relative path, not {destination!r}")
    if destination:  # Harbor reads an empty destination as none
        refusal = artifact_destination_refusal(destination)
        if refusal is not None:
            raise TaskError(f"{where}: {key}.destination {refusal}")
        destination = "/".join(path_parts(destination))
    service = _service(table, where, key)
    exclude = table.get("exclude", [])
    if not isinstance(exclude, list) or not all(isinstance(pattern, str) for pattern in exclude):
        raise TaskError(f"{where}: {key}.exclude must be an array of patterns (strings)")
    if any("\0" in pattern for pattern in exclude):
        raise TaskError(f"{where}: {key}.exclude holds a NUL character")
    return Artifact(source, destination or default_destination(source), service, tuple(exclude))


def _artifacts(value: Any, where: str, name: str) -> List[Tuple[str, Artifact]]:
    """An ``artifacts`` array: each entry with the key a message names it by."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise TaskError(f"{where}: {name} must be an array of paths and tables")
    return [(f"{name}[{index}]", _artifact(item, where, f"{name}[{index}]")) for index, item in enumerate(value)]


def _check_destinations(entries: Sequence[Tuple[str, Artifact]], where: str) -> None:
    """Refuses two different entries of one collection set (the task's, or the task's and a step's)
    that land on the same host copy, the always-collected /logs/artifacts included. An entry
    repeated as it is (a step naming the task's own) is one entry."""
    convention = Artifact(CONVENTION_ARTIFACTS, default_destination(CONVENTION_ARTIFACTS))
    explicit = any(a.source == CONVENTION_ARTIFACTS and a.service == "main" for _, a in entries)
    claims: Dict[str, Tuple[str, Artifact]] = {}
    if not explicit:
        claims[convention.destination] = (f"{CONVENTION_ARTIFACTS} (always collected)", convention)
    for key, artifact in entries:
        prior = claims.setdefault(artifact.destination, (key, artifact))
        if prior[1] != artifact:
            raise TaskError(
                f"{where}: {key} lands on the destination {artifact.destination!r}, as {prior[0]} does; "
                "give one of them a destination of its own"
            )


def _step_folder_hint(path: Path, name: str) -> str:
    """A hint for a step whose folder is missing: the folder of that name outside ``steps/`` (in
    ``step/``, or in the task's own folder), else the nearest name among ``steps/``'s folders; ``""``
    when nothing is near (or the folder cannot be listed: the error stands without a hint)."""
    import difflib

    try:
        folders = sorted(entry for entry in path.iterdir() if entry.is_dir() and entry.name != "steps")
        for other in folders:
            if (other / name).is_dir() and difflib.get_close_matches(other.name.lower(), ["steps"], cutoff=0.6):
                return f"; did you mean to name {other} steps/?"
        if (path / name).is_dir():
            return f"; {path / name} is a folder, but a step's folder goes under steps/"
        steps = path / "steps"
        names = sorted(entry.name for entry in steps.iterdir() if entry.is_dir()) if steps.is_dir() else []
    except OSError:
        return ""
    near = difflib.get_close_matches(name, names, n=1)
    return f"; did you mean {near[0]!r}?" if near else ""


def _steps(
    value: Any, path: Path, where: str, artifacts: Sequence[Tuple[str, Artifact]] = ()
) -> Tuple[StepConfig, ...]:
    """``[[steps]]``; ``artifacts`` are the task's, which each step's own are checked beside."""
    steps = []
    for index, item in enumerate(_array_of_tables(value, where, "steps")):
        name = item.get("name")
        if name is None:
            raise TaskError(f"{where}: steps[{index}] has no name, which names its folder under steps/")
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
            raise TaskError(f"{where}: steps[{index}].name must be a folder name under steps/, not {name!r}")
        if not (path / "steps" / name).is_dir():
            raise TaskError(
                f"{where}: steps[{index}].name = {name!r} but {path / 'steps' / name} is not a folder"
                + _step_folder_hint(path, name)
            )
        table = _table(item, "verifier", where, f"steps[{index}].verifier")
        own = _artifacts(item.get("artifacts"), where, f"steps[{index}].artifacts")
        _check_destinations([*artifacts, *own], where)
        verifier = verifier_config(table, where, f"steps[{index}].verifier")
        healthcheck = healthcheck_config(item.get("healthcheck"), where, f"steps[{index}].healthcheck")
        agent = _table(item, "agent", where, f"[steps[{index}].agent]") or {}
        agent_user = _user(agent.get("user"), where, f"steps[{index}].agent.user")
        steps.append(StepConfig(name, verifier, tuple(artifact for _, artifact in own), healthcheck, agent_user))
    names = [step.name for step in steps]
    shared = next((name for index, name in enumerate(names) if name in names[:index]), None)
    if shared is not None:
        raise TaskError(f"{where}: two [[steps]] share the name {shared!r}")
    return tuple(steps)


# --- task_data and sidecar inputs ----------------------------------------------------------------


def read_json_object(path: Path, what: str, *, given: bool = False) -> Dict[str, Any]:
    """The JSON object in ``path`` (plain JSON, as ``loads_json`` reads it; ``given``: see
    ``read_text_file``); a ``TaskError`` naming the file otherwise."""
    try:
        value = loads_json(read_text_file(path, given=given))
    except (OSError, ValueError) as error:  # ValueError: bad JSON, UnicodeDecodeError, huge integers
        raise TaskError(f"{path}: cannot read {what} ({error})") from None
    if not isinstance(value, dict):
        raise TaskError(f"{path}: {what} must be a JSON object, not {type(value).__name__}")
    return value


def read_secrets(path: Path) -> Dict[str, str]:
    """A secrets table from a ``.json`` object or a ``.toml`` file: names to string values that an
    environment variable can hold (``env_table``)."""
    if path.suffix == ".json":
        table: Dict[str, Any] = read_json_object(path, "secrets", given=True)
    else:
        table = read_toml(path, given=True)
    return env_table(table, str(path), "secrets")


def validate_inputs(entries: Any, where: str, name: str) -> Tuple[str, ...]:
    """Declared sidecar inputs: plain top-level file names, never a grader output (nor one with a
    control character: grading reads their names a line each, red team 71)."""
    if not isinstance(entries, list):
        raise TaskError(f"{where}: {name} must be an array of file names")
    for entry in entries:
        plain = (
            isinstance(entry, str)
            and entry not in ("", ".", "..")
            and not any(char in entry for char in "/\\*?[")
            and all(char.isprintable() for char in entry)
        )
        if not plain:
            raise TaskError(f"{where}: {name} entry {entry!r} is not a plain top-level file name")
        if entry in GRADER_OUTPUTS:
            raise TaskError(f"{where}: {name} entry {entry!r} is a grader output, not an input")
    return tuple(entries)


# --- datasets ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Dataset:
    """A folder of tasks: ``dataset.toml`` settings, task folders, parameterized rows."""

    root: Path
    timeout_multiplier: float = 1.0
    inputs: Dict[str, Tuple[str, ...]] = field(default_factory=dict)
    folders: Tuple[str, ...] = ()
    rows: Dict[str, Dict[str, Any]] = field(default_factory=dict)

    @property
    def task_ids(self) -> Tuple[str, ...]:
        return (*self.folders, *self.rows)

    def task(self, task_id: str, *, check_runnable: bool = True) -> Task:
        """The task ``task_id``: a task folder, or a parameterized row (``check_runnable`` as in
        ``load_task``)."""
        if task_id in self.rows:
            return _load(self.root, task_id, self, self.rows[task_id], check_runnable)
        if task_id in self.folders:
            return _load(self.root / task_id, task_id, self, None, check_runnable)
        raise TaskError(f"{self.root}: no task or row named {task_id!r}")


def is_task_folder(path: Path) -> bool:
    return path.is_dir() and any((path / name).exists() for name in ("task.toml", "tests", "task_data.json"))


def is_single_task(path: Union[str, Path]) -> bool:
    """Whether ``path``, given where a dataset is expected, is one task folder instead (``task.toml``,
    and no ``rows.jsonl`` that would make it a dataset of rows): commands that take a dataset then
    work on that task alone, with what the folder holding it adds."""
    return (Path(path) / "task.toml").is_file() and not (Path(path) / ROWS_FILE).exists()


def no_task_reason(root: Union[str, Path]) -> str:
    """Why ``root``, given where a dataset is expected, holds no task: one sentence naming it (a
    command that validates or publishes nothing must say so, not report success)."""
    if (Path(root) / "task.toml").is_file():
        return f"{root}: is a task folder, not a dataset; give the folder that holds it"
    marks = [name for name in ("tests/", "task_data.json") if (Path(root) / name).exists()]
    if marks:  # a dataset's task given alone: only task.toml makes a folder one task by itself
        return (
            f"{root}: holds no task folder and no rows.jsonl; it has {' and '.join(marks)} as a task has, but no "
            "task.toml, which a task given alone needs (an empty one will do)"
        )
    return f"{root}: holds no task folder (one with task.toml, tests/ or task_data.json) and no rows.jsonl"


# Of a rows.jsonl's bad lines, the most one error names: all of them, so an author fixes them in one
# pass, up to a count that keeps the error readable when a whole file is in the wrong format.
ROW_PROBLEMS_SHOWN = 10


def _rows(path: Path) -> Dict[str, Dict[str, Any]]:
    """The rows of ``path`` by id; every bad line is named in the one ``TaskError`` it raises."""
    rows: Dict[str, Dict[str, Any]] = {}
    try:
        lines = read_text_file(path).split("\n")
    except (OSError, ValueError) as error:  # ValueError: UnicodeDecodeError
        raise TaskError(f"{path}: cannot read it ({error})") from None
    problems: List[str] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = loads_json(line)
        except json.JSONDecodeError as error:  # its own "line 1 column 125" would clash with the file's line
            problems.append(f"line {number} is not valid JSON ({error.msg} at column {error.colno})")
            continue
        except ValueError as error:
            problems.append(f"line {number} is not valid JSON ({error})")
            continue
        if not isinstance(row, dict):
            problems.append(f"line {number} must be a JSON object")
            continue
        row_id = row.get("id", f"row-{number}")
        if not isinstance(row_id, str) or row_id in ("", ".", "..") or "/" in row_id or "\0" in row_id:
            problems.append(
                f"line {number}: id must be a non-empty string without '/' or NUL, other than "
                f"'.' and '..' (it names a folder), not {row_id!r}"
            )
        elif row_id in rows:
            problems.append(f"line {number}: the id {row_id!r} is already taken")
        else:
            rows[row_id] = row
    if problems:
        more = len(problems) - ROW_PROBLEMS_SHOWN
        shown = "; ".join(problems[:ROW_PROBLEMS_SHOWN]) + (f"; and {more} more bad line(s)" if more > 0 else "")
        raise TaskError(f"{path}: {shown}")
    return rows


def load_dataset(root: Union[str, Path]) -> Dataset:
    """The dataset in ``root``: its ``dataset.toml``, task folders and ``rows.jsonl`` rows."""
    path = Path(root).resolve()
    if not path.is_dir():
        raise TaskError(f"{root}: not a dataset folder")
    multiplier, inputs = 1.0, {}
    settings_path = path / "dataset.toml"
    if settings_path.exists():
        settings = read_toml(settings_path)
        where = str(settings_path)
        multiplier = _number(settings.get("timeout_multiplier", 1.0), where, "timeout_multiplier")
        gym = _table(settings, "gym", where, "[gym]") or {}
        tasks = _table(gym, "tasks", where, "[gym.tasks]") or {}
        for task_id, table in tasks.items():
            if not isinstance(table, dict):
                raise TaskError(f'{where}: gym.tasks."{task_id}" must be a table')
            verifier = _table(table, "verifier", where, f'[gym.tasks."{task_id}".verifier]') or {}
            if "inputs" in verifier:
                inputs[task_id] = validate_inputs(verifier["inputs"], where, f'gym.tasks."{task_id}".verifier.inputs')
    folders = tuple(sorted(p.name for p in path.iterdir() if not p.name.startswith(".") and is_task_folder(p)))
    rows = _rows(path / ROWS_FILE) if (path / ROWS_FILE).exists() else {}
    if rows and not (path / "verifier.py").is_file():
        misplaced = (
            f" ({path / 'tests' / 'verifier.py'} is there: a dataset's verifier.py sits beside rows.jsonl)"
            if (path / "tests" / "verifier.py").is_file()
            else ""
        )
        raise TaskError(
            f"{path / ROWS_FILE}: rows are graded by the dataset's verifier.py, which is missing{misplaced}"
        )
    clash = set(rows) & set(folders)
    if clash:
        raise TaskError(f"{path / ROWS_FILE}: the row id {sorted(clash)[0]!r} is also a task folder")
    return Dataset(path, multiplier, inputs, folders, rows)


# --- tasks ---------------------------------------------------------------------------------------


def _load(
    path: Path, task_id: str, dataset: Optional[Dataset], row: Optional[Dict[str, Any]], check: bool = True
) -> Task:
    config: Dict[str, Any] = {}
    toml_path = path / "task.toml"
    if row is None and toml_path.exists():
        config = read_toml(toml_path)
    where = str(toml_path)
    if row is not None:
        task_data = dict(row)
    elif (path / "task_data.json").exists():
        task_data = read_json_object(path / "task_data.json", "task_data")
    else:
        task_data = {}
    agent = _table(config, "agent", where, "[agent]") or {}
    solution = _table(config, "solution", where, "[solution]") or {}
    artifacts = _artifacts(config.get("artifacts"), where, "artifacts")
    _check_destinations(artifacts, where)
    env_table(solution.get("env"), where, "solution.env")  # the oracle's env (gym-harbor dataset validate)
    task = Task(
        id=task_id,
        path=path,
        verifier=verifier_config(_table(config, "verifier", where, "[verifier]"), where, "verifier"),
        environment=environment_config(
            _table(config, "environment", where, "[environment]"), where, "environment", agents=True
        ),
        agent_user=_user(agent.get("user"), where, "agent.user"),
        steps=_steps(config.get("steps"), path, where, artifacts),
        task_data=task_data,
        dataset_root=dataset.root if dataset is not None else None,
        timeout_multiplier=dataset.timeout_multiplier if dataset is not None else 1.0,
        inputs=dataset.inputs.get(task_id, ()) if dataset is not None else (),
        config=config,
        artifacts=tuple(artifact for _, artifact in artifacts),
    )
    verifiers = [("verifier", task.verifier)] + [(f"steps[{i}].verifier", s.verifier) for i, s in enumerate(task.steps)]
    for name, verifier in verifiers:
        if not math.isfinite(verifier.timeout_sec * task.timeout_multiplier):
            raise TaskError(
                f"{where}: {name}.timeout_sec = {verifier.timeout_sec:g} times the dataset's timeout_multiplier = "
                f"{task.timeout_multiplier:g} is not a finite number of seconds"
            )
    from nemo_gym.data.tasks.harbor.verifier_env import load_refusal  # it reads tasks: import late

    refusal = load_refusal(task) if check else None
    if refusal is not None:
        raise TaskError(refusal)
    return task


def _some(names: Sequence[str], shown: int = 5) -> str:
    """The first ``shown`` of ``names`` for a message, and how many more."""
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def as_task(task: Union[Task, str, os.PathLike[str]], where: str) -> Task:
    """``task``, or the task in the folder given for it; ``TypeError`` naming ``where`` for anything else."""
    if isinstance(task, (str, os.PathLike)):
        return load_task(Path(task))
    if not isinstance(task, Task):
        raise TypeError(f"{where}: task must be a Task (load_task's) or a task folder, not {type(task).__name__}")
    return task


def load_task(task_dir: Union[str, Path], *, row: Optional[str] = None, check_runnable: bool = True) -> Task:
    """The task in ``task_dir``, with what its dataset (the folder holding it) adds.

    ``task_dir`` may also be a dataset with ``rows.jsonl``: ``row`` then names the row. A task whose
    separate verifier cannot run here is refused (``verifier_env.load_refusal``) unless
    ``check_runnable`` is false, which inspecting tools use to see why.
    """
    path = Path(task_dir).resolve()
    if not path.is_dir():
        raise TaskError(f"{task_dir}: not a task folder")
    if path.name == "tests" and (path.parent / "task.toml").is_file():
        raise TaskError(f"{task_dir}: the tests/ folder of a task; give the task folder, {path.parent}")
    if (path / ROWS_FILE).exists():
        rows = load_dataset(path)
        if row is None:
            folders = sorted(entry.name for entry in path.iterdir() if (entry / "task.toml").is_file())
            beside = f", or one of its task folders ({_some(folders)})" if folders else ""
            raise TaskError(
                f"{path}: a dataset of {len(rows.rows)} parameterized rows; name a row "
                f"(--row ID, run_verify's row=: {_some(list(rows.rows))}){beside}"
            )
        if row not in rows.rows:
            raise TaskError(f"{path / ROWS_FILE}: no row with id {row!r} (its ids: {_some(list(rows.rows))})")
        return rows.task(row)
    if row is not None:
        raise TaskError(f"{path}: has no {ROWS_FILE}, so there is no row {row!r}")
    if not (path / "task.toml").exists() and not (path / "tests").is_dir():
        folders = sorted(entry.name for entry in path.iterdir() if (entry / "task.toml").is_file())
        if folders:
            raise TaskError(
                f"{path}: a dataset of {len(folders)} task folder(s), not a task; give one of them "
                f"({_some(folders)}), or check them all with `gym-harbor dataset validate {path}`"
            )
    return _load(path, path.name, holding_dataset(path), None, check_runnable)


def holding_dataset(task_dir: Path) -> Optional[Dataset]:
    """The dataset the folder holding ``task_dir`` is (it has ``dataset.toml`` or a dataset's
    ``verifier.py``), whose settings the task takes; ``None`` when it is no dataset."""
    parent = Path(task_dir).resolve().parent
    if (parent / "dataset.toml").exists() or (parent / "verifier.py").is_file():
        return load_dataset(parent)
    return None


def task_ids(root: Union[str, Path]) -> List[str]:
    """The ids of a dataset's tasks (folders, then rows)."""
    return list(load_dataset(root).task_ids)


__all__ = [
    "ARTIFACT_MANIFEST",
    "CONVENTION_ARTIFACTS",
    "DEFAULT_COLLECT_TIMEOUT_SEC",
    "DEFAULT_VERIFIER_TIMEOUT_SEC",
    "ENVIRONMENT_MODES",
    "GRADER_OUTPUTS",
    "MAX_HEALTHCHECK_SEC",
    "MAX_ID",
    "MAX_NESTING",
    "PROTECTED_PATHS",
    "ROWS_FILE",
    "Artifact",
    "CollectHook",
    "Dataset",
    "EnvironmentConfig",
    "Healthcheck",
    "StepConfig",
    "Task",
    "TaskError",
    "User",
    "VerifierConfig",
    "artifact_destination_refusal",
    "artifact_source_refusal",
    "as_task",
    "brackets_nest_too_deep",
    "default_destination",
    "env_table",
    "environment_config",
    "healthcheck_config",
    "holding_dataset",
    "is_single_task",
    "is_task_folder",
    "load_dataset",
    "load_task",
    "loads_json",
    "nested_too_deep",
    "no_task_reason",
    "normal_path",
    "path_within",
    "protected_clash",
    "read_json_object",
    "read_secrets",
    "read_toml",
    "sidecar_refusal",
    "task_ids",
    "validate_inputs",
    "verifier_config",
]
