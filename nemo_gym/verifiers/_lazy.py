"""Regular expressions compiled on first use: importing ``re`` costs start-up time.

``re`` brings ``enum``, ``functools`` and ``collections`` with it, several milliseconds on a bare
interpreter start of about ten, so a module of the SDK names its patterns here and ``re`` is
imported when one is first matched, not when the module is imported. Flags are written inline at
the start of a pattern (``(?i)``, ``(?a)``, ``(?s)``): ``re.IGNORECASE`` would need ``re``.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is imported for the type checker only: it costs start-up time
if TYPE_CHECKING:
    from re import Pattern


class Patterns:
    """Patterns by name, given as source text; each is compiled on its first access, then kept."""

    def __init__(self, **sources: str) -> None:
        self._sources = sources

    def __getattr__(self, name: str) -> Pattern[str]:
        # Reached only while ``name`` is not yet an attribute: compiled once, then a plain attribute.
        source = self.__dict__.get("_sources", {}).get(name)
        if source is None:
            raise AttributeError(name)
        import re

        pattern = re.compile(source)
        setattr(self, name, pattern)
        return pattern
