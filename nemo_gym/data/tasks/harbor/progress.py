"""Progress of a batch on a stream: a bar on a terminal, plain lines anywhere else.

On a terminal one line is redrawn in place (done, ok, failed); a failure is printed above it in
full, with its details, so that nothing is lost when the bar moves on. Anywhere else (a pipe, a
log file, CI) each item is one line as it ends, ``[done/total] verdict``, then its details.
"""

from __future__ import annotations

from typing import Any, Callable, List, TextIO, Tuple

BAR_WIDTH = 30
_CLEAR = "\r\x1b[K"  # back to the line's start, and erase it


class ProgressReport:
    """Reports items as they end; ``verdict(result)`` gives ``(passed, line, detail_lines)``."""

    def __init__(self, total: int, stream: TextIO, *, verdict: Callable[[Any], Tuple[bool, str, List[str]]]) -> None:
        self.total, self.stream, self.verdict = total, stream, verdict
        self.passed = self.failed = 0
        isatty = getattr(stream, "isatty", None)
        self.bar = bool(isatty and isatty())
        if self.bar and total:
            self._draw(0)

    def update(self, done: int, total: int, index: int, result: Any) -> None:
        """``map_bounded``'s progress callback."""
        passed, line, details = self.verdict(result)
        if passed:
            self.passed += 1
        else:
            self.failed += 1
        if not self.bar:
            self._write(f"[{done}/{total}] {line}\n" + "".join(f"{detail}\n" for detail in details))
            return
        if not passed:
            self._write(_CLEAR + line + "\n" + "".join(f"{detail}\n" for detail in details))
        self._draw(done)

    def close(self) -> None:
        """Takes the bar away (the summary that follows replaces it)."""
        if self.bar and self.total:
            self._write(_CLEAR)

    def _draw(self, done: int) -> None:
        filled = BAR_WIDTH * done // self.total
        bar = "#" * filled + "." * (BAR_WIDTH - filled)
        self._write(f"{_CLEAR}[{bar}] {done}/{self.total}  ok {self.passed}  failed {self.failed}")

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()


__all__ = ["ProgressReport"]
