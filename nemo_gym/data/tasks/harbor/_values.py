"""Plain value checks shared by the readers of task files and reward files."""

from __future__ import annotations

import math
from typing import Any, Optional


def finite_float(value: Any, *, booleans: bool = False) -> Optional[float]:
    """``value`` as a float when it is an int or float (a bool only with ``booleans``) with a finite
    value; ``None`` otherwise (inf, nan, an int too large for a float, a string)."""
    if (isinstance(value, bool) and not booleans) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None
