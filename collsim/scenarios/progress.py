"""A one-line progress bar on stderr (points done, to go, time left), drawn only on a terminal
so that logs and pipes stay clean."""

from __future__ import annotations

import sys
import time
from typing import TextIO


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class Progress:
    """Counts points as they finish; ``done`` may start above zero when a run resumes."""

    def __init__(self, total: int, done: int = 0, stream: TextIO | None = None,
                 enabled: bool | None = None, width: int = 28) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.total, self.done, self.width = total, done, width
        self._start_done = done
        self._start = time.monotonic()
        self._drawn = 0.0

    def advance(self, count: int) -> None:
        self.done += count
        now = time.monotonic()
        if self.enabled and (now - self._drawn > 0.1 or self.done >= self.total):
            self._drawn = now
            self.stream.write("\r" + self.line(now) + "\x1b[K")
            self.stream.flush()

    def line(self, now: float | None = None) -> str:
        """The bar's text: ``[#####.....] 120/400 points, 280 to go, 0:42 left``."""
        now = time.monotonic() if now is None else now
        fraction = self.done / self.total if self.total else 1.0
        filled = int(self.width * fraction)
        bar = "#" * filled + "." * (self.width - filled)
        rate_done = self.done - self._start_done
        remaining = self.total - self.done
        if rate_done > 0 and remaining > 0:
            left = f", {_clock((now - self._start) / rate_done * remaining)} left"
        else:
            left = ""
        return f"[{bar}] {self.done}/{self.total} points, {remaining} to go{left}"

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()
