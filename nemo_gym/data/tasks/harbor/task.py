"""Loading a Harbor task folder: ``task.toml`` into plain typed values, and the task's fields.

Unknown keys are ignored, as Harbor's models ignore them; a known key of the wrong type, or a file
that does not parse, is a ``TaskError`` whose one sentence names the file and the key.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Union

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.8-3.10 by the nox matrix
    import tomli as tomllib

# Harbor's VerifierConfig.timeout_sec default.
DEFAULT_VERIFIER_TIMEOUT_SEC = 600.0


class TaskError(ValueError):
    """A task folder the server cannot use; the message names the file and the key at fault."""


@dataclass(frozen=True)
class VerifierConfig:
    """``[verifier]``: how long, as whom and with what environment ``test.sh`` runs."""

    timeout_sec: float = DEFAULT_VERIFIER_TIMEOUT_SEC
    env: Dict[str, str] = field(default_factory=dict)
    user: Optional[Union[str, int]] = None


@dataclass(frozen=True)
class EnvironmentConfig:
    """``[environment]``: the sandbox's image, working directory and environment."""

    docker_image: Optional[str] = None
    workdir: Optional[str] = None
    env: Dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Task:
    """A loaded task folder."""

    path: Path
    verifier: VerifierConfig
    environment: EnvironmentConfig
    task_data: Dict[str, Any]
    dataset_root: Optional[Path] = None


def _table(config: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = config.get(key, {})
    if not isinstance(value, dict):
        raise TaskError(f"{where}: [{key}] must be a table")
    return value


def _string_map(value: Any, where: str, key: str) -> Dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(item, str) for item in value.values()):
        raise TaskError(f"{where}: {key} must be a table of strings")
    return dict(value)


def _optional_string(value: Any, where: str, key: str) -> Optional[str]:
    if value is not None and not isinstance(value, str):
        raise TaskError(f"{where}: {key} must be a string")
    return value


def _verifier(table: Mapping[str, Any], where: str) -> VerifierConfig:
    timeout = table.get("timeout_sec", DEFAULT_VERIFIER_TIMEOUT_SEC)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise TaskError(f"{where}: verifier.timeout_sec must be a positive number, not {timeout!r}")
    user = table.get("user")
    if user is not None and (isinstance(user, bool) or not isinstance(user, (str, int))):
        raise TaskError(f"{where}: verifier.user must be a name or a TOML integer uid, not {user!r}")
    return VerifierConfig(float(timeout), _string_map(table.get("env"), where, "verifier.env"), user)


def _environment(table: Mapping[str, Any], where: str) -> EnvironmentConfig:
    workdir = _optional_string(table.get("workdir"), where, "environment.workdir")
    if workdir is not None and not workdir.startswith("/"):
        raise TaskError(f"{where}: environment.workdir must be an absolute path, not {workdir!r}")
    return EnvironmentConfig(
        _optional_string(table.get("docker_image"), where, "environment.docker_image"),
        workdir,
        _string_map(table.get("env"), where, "environment.env"),
    )


def read_json_object(path: Path, what: str) -> Dict[str, Any]:
    """The JSON object in ``path``; a ``TaskError`` naming the file otherwise."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise TaskError(f"{path}: cannot read {what} ({error})") from None
    if not isinstance(value, dict):
        raise TaskError(f"{path}: {what} must be a JSON object, not {type(value).__name__}")
    return value


def load_task(task_dir: Union[str, Path], *, dataset_root: Optional[Path] = None) -> Task:
    """The task in ``task_dir``: its ``task.toml`` (optional) and ``task_data.json`` (optional).

    ``dataset_root`` defaults to the folder holding the task when that folder has a ``verifier.py``.
    """
    path = Path(task_dir).resolve()
    if not path.is_dir():
        raise TaskError(f"{task_dir}: not a task folder")
    config: Dict[str, Any] = {}
    toml_path = path / "task.toml"
    if toml_path.exists():
        try:
            config = tomllib.loads(toml_path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
            raise TaskError(f"{toml_path}: not valid TOML ({error})") from None
    where = str(toml_path)
    data_path = path / "task_data.json"
    task_data = read_json_object(data_path, "task_data") if data_path.exists() else {}
    if dataset_root is None and (path.parent / "verifier.py").is_file():
        dataset_root = path.parent
    return Task(
        path=path,
        verifier=_verifier(_table(config, "verifier", where), where),
        environment=_environment(_table(config, "environment", where), where),
        task_data=task_data,
        dataset_root=dataset_root,
    )
