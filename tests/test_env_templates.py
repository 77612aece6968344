"""${VAR} and ${VAR:-default}: whole-value templates, filled as Harbor fills them."""

from __future__ import annotations

import pytest

from nemo_gym.data.tasks.harbor.env_templates import resolve_env
from nemo_gym.data.tasks.harbor.task import TaskError

HOST = {"SET": "value", "EMPTY": ""}

CASES = [
    ("${SET}", "value"),
    ("${UNSET:-fallback}", "fallback"),
    ("${SET:-fallback}", "value"),
    ("${EMPTY}", ""),  # set but empty: empty, never the default
    ("${EMPTY:-fallback}", ""),  # unlike the shell's :-, the default applies only when unset
    ("${UNSET:-}", ""),
    ("pre${SET}", "pre${SET}"),  # a template must be the whole value
    ("${SET}post", "${SET}post"),
    ("$SET", "$SET"),
    ("${SET:=x}", "${SET:=x}"),
    ("${A:-x}y}", "x}y"),  # the default runs to the last brace
    ("${UNSET:-${SET}}", "${SET}"),  # defaults are not expanded again
    ("plain", "plain"),
]


@pytest.mark.parametrize("value, expected", CASES)
def test_templates(value, expected):
    assert resolve_env({"K": value}, HOST, where="task.toml [verifier].env") == {"K": expected}


def test_a_missing_variable_names_it():
    with pytest.raises(
        TaskError, match=r"task.toml \[verifier\].env: K = '\$\{NOPE\}' needs the environment variable NOPE"
    ):
        resolve_env({"K": "${NOPE}"}, HOST, where="task.toml [verifier].env")
