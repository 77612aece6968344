"""Network restrictions a task asks for, read as the seed reads them.

``[verifier].network_mode`` (``no-network``, or ``allowlist`` with ``allowed_hosts``) restricts the
separate verifier's sandbox; a step's ``[steps.verifier].network_mode`` its own. A restriction on
any other table (``[environment]``, ``[agent]``, ``[verifier.environment]``, a step's agent), and
any restriction on a verifier that runs in the agent's sandbox, is refused at load: this server
would not apply it, and the task would grade differently from what its author meant. ``public``
(and no ``network_mode``) is no restriction.
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping, Optional, Tuple

PUBLIC, NO_NETWORK, ALLOWLIST = "public", "no-network", "allowlist"
MODES = (PUBLIC, NO_NETWORK, ALLOWLIST)


def _restriction(table: Mapping[str, Any], where: str) -> Optional[str]:
    """The restriction ``table`` asks for (``no-network``, ``allowlist``), or ``None``; a
    ``TaskError``-worthy message as ``ValueError`` for a malformed one."""
    mode = table.get("network_mode")
    if mode is not None and mode not in MODES:
        raise ValueError(f"{where}.network_mode must be one of {', '.join(MODES)}, not {mode!r}")
    hosts = table.get("allowed_hosts")
    if hosts is not None:
        if mode != ALLOWLIST:
            raise ValueError(f"{where}.allowed_hosts is only for network_mode = {ALLOWLIST!r}")
        if not isinstance(hosts, list) or not all(isinstance(host, str) and host for host in hosts):
            raise ValueError(f"{where}.allowed_hosts must be a list of host names")
    if mode is None and table.get("allow_internet") is False:
        return NO_NETWORK  # Harbor's legacy spelling
    return None if mode in (None, PUBLIC) else str(mode)


def _tables(config: Mapping[str, Any]) -> Iterator[Tuple[str, Mapping[str, Any], bool]]:
    """``(name, table, is_a_verifier_table)`` for every table that may carry a network mode."""

    def table(parent: Any, key: str) -> Mapping[str, Any]:
        value = parent.get(key) if isinstance(parent, Mapping) else None
        return value if isinstance(value, Mapping) else {}

    verifier = table(config, "verifier")
    yield "[verifier]", verifier, True
    yield "[verifier.environment]", table(verifier, "environment"), False
    yield "[environment]", table(config, "environment"), False
    yield "[agent]", table(config, "agent"), False
    steps = config.get("steps")
    for index, step in enumerate(steps if isinstance(steps, list) else []):
        step_verifier = table(step, "verifier")
        yield f"steps[{index}].verifier", step_verifier, True
        yield f"steps[{index}].verifier.environment", table(step_verifier, "environment"), False
        yield f"steps[{index}].agent", table(step, "agent"), False


def network_refusal(config: Mapping[str, Any], separate: Mapping[str, bool]) -> Optional[str]:
    """Why a task's network settings cannot be honoured here (one sentence, without the file's
    name), or ``None``. ``separate`` says, per verifier table name (``[verifier]``,
    ``steps[0].verifier``, ...), whether that verifier runs in a sandbox of its own."""
    for name, table, is_verifier in _tables(config):
        try:
            restriction = _restriction(table, name)
        except ValueError as error:
            return str(error)
        if restriction is None:
            continue
        if not is_verifier:
            return (
                f"{name}.network_mode = {restriction!r}: only [verifier].network_mode restricts a network here "
                "(the separate verifier's); set it there"
            )
        if not separate.get(name, False):
            return (
                f"{name}.network_mode = {restriction!r} with a verifier that runs in the agent's sandbox: it can "
                "restrict only a separate verifier's (environment_mode = 'separate')"
            )
    return None


def verifier_network(config: Mapping[str, Any], step_index: Optional[int] = None) -> Optional[str]:
    """The restriction the (step's) separate verifier runs under: ``no-network``, ``allowlist`` or
    ``None``; a step without one of its own takes ``[verifier]``'s."""
    tables = {name: table for name, table, _ in _tables(config)}
    if step_index is not None:
        own = _restriction(tables.get(f"steps[{step_index}].verifier", {}), f"steps[{step_index}].verifier")
        if own is not None:
            return own
    return _restriction(tables["[verifier]"], "[verifier]")


__all__ = [
    "ALLOWLIST",
    "MODES",
    "NO_NETWORK",
    "PUBLIC",
    "network_refusal",
    "verifier_network",
]
