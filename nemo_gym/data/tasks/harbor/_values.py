"""Plain value checks, and a parsing guard, shared by the readers of task files and reward files."""

from __future__ import annotations

import gc
import math
from contextlib import contextmanager
from typing import Any, Iterator, Optional


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


@contextmanager
def no_collection() -> Iterator[None]:
    """No garbage collection while a parser may recurse to the interpreter's limit (a deeply nested
    file): a finalizer run there fails too, and Python prints "Exception ignored ..." on stderr, past
    any error handling."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
