"""The expected side of a match: one value or a collection of alternatives (the author's input)."""

from __future__ import annotations

TYPE_CHECKING = False  # typing is imported for the type checker only: it costs start-up time
if TYPE_CHECKING:
    from typing import Any, List, Tuple


# Collections whose items are alternatives. A str is one value, never a collection of characters,
# and a dict is refused: its keys as alternatives would be a silent surprise.
COLLECTIONS = (list, tuple, set, frozenset)


def alternatives(expected: Any, kinds: Tuple[type, ...], function: str, hint: str) -> List[Any]:
    """``expected`` as a list of alternatives, each of ``kinds`` (never ``bool``).

    Raises ``TypeError``/``ValueError`` naming ``function``: a wrong ``expected`` is the author's
    bug and must fail loudly, not score 0.
    """
    items = list(expected) if isinstance(expected, COLLECTIONS) else [expected]
    if not items:
        raise ValueError(f"{function}(): expected is an empty collection; give at least one alternative")
    for item in items:
        if isinstance(item, bool) or not isinstance(item, kinds):
            raise TypeError(
                f"{function}(): expected must be {hint} or a list/tuple/set of them, got {type(item).__name__} {item!r}"
            )
    return items
