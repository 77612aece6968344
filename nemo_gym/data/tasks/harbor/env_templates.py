"""``${VAR}`` and ``${VAR:-default}`` values in a task's env tables, resolved as Harbor resolves them.

Harbor's ``resolve_env_vars`` (HARBOR-NOTES E): a template must be the *whole* value (``pre${A}``
stays literal), and the default applies only when the variable is unset (a set-but-empty variable
gives ``""``). A missing required variable is an error that names it, raised before any sandbox starts.
"""

from __future__ import annotations

import re
from typing import Dict, Mapping, Optional

from nemo_gym.data.tasks.harbor.task import TaskError

_TEMPLATE = re.compile(r"\$\{([^}:]+)(?::-(.*))?\}")


def template_name(value: str) -> Optional[str]:
    """The variable a whole-value template names, ``None`` for a literal value."""
    match = _TEMPLATE.fullmatch(value)
    return None if match is None else match.group(1)


def resolve_env(
    env: Mapping[str, str], source: Mapping[str, str], *, where: str, secrets: bool = False
) -> Dict[str, str]:
    """``env`` with every whole-value template filled from ``source``; ``where`` names the table, and
    ``secrets`` says that secrets fill it too (so a missing variable's error says how to give one)."""
    resolved: Dict[str, str] = {}
    for key, value in env.items():
        match = _TEMPLATE.fullmatch(value)
        if match is None:
            resolved[key] = value
        elif match.group(1) in source:
            resolved[key] = source[match.group(1)]
        elif match.group(2) is not None:
            resolved[key] = match.group(2)
        else:
            how = " (set it, or give it as a secret: gym-harbor's --secrets FILE)" if secrets else ""
            raise TaskError(
                f"{where}: {key} = {value!r} needs the environment variable {match.group(1)}, which is not set{how}"
            )
    return resolved


__all__ = [
    "resolve_env",
    "template_name",
]
