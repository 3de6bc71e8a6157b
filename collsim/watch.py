"""A progress line for one long simulation (``collsim estimate`` of a 4096-rank ring takes
minutes), drawn on stderr only when it is a terminal.

A thread wakes twice a second and reads the engine's simulated clock and its count of
transfers: plain attribute reads, so the engine runs exactly as it would unwatched (no hook
in its loop, nothing to slow it). The closed form, where the machine has one, says roughly
how far the simulated clock has to go."""

from __future__ import annotations

import sys
import threading
import time
from types import TracebackType
from typing import Any, TextIO

from collsim.units import format_time

INTERVAL = 0.5  # seconds between redraws
QUIET = 1.0  # a simulation shorter than this shows no line at all


class Watch:
    """Call the instance with the engine (``simulate(..., observe=watch)``), then leave the
    ``with`` block when the simulation is over; the line is erased."""

    def __init__(self, expected_s: float | None = None, stream: TextIO | None = None,
                 enabled: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.expected = expected_s
        self._engine: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._drawn = False

    def __call__(self, engine: Any) -> None:
        self._engine = engine
        if self.enabled:
            self._start = time.monotonic()
            self._thread = threading.Thread(target=self._loop, name="collsim-watch",
                                            daemon=True)
            self._thread.start()

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()

    def line(self) -> str:
        """``simulated 1.2 ms of about 3.4 ms (35%), 120,345 transfers, 0:42 elapsed``."""
        engine = self._engine
        now = float(getattr(getattr(engine, "env", None), "now", 0.0))
        transfers = getattr(getattr(engine, "fabric", None), "transfers", None)
        text = f"simulating: {format_time(now)} simulated"
        if self.expected:
            text += (f" of about {format_time(self.expected)} "
                     f"({min(99, int(100 * now / self.expected))}%)")
        if isinstance(transfers, int):
            text += f", {transfers:,} transfers"
        elapsed = int(time.monotonic() - self._start)
        return text + f", {elapsed // 60}:{elapsed % 60:02d} elapsed"

    def _loop(self) -> None:
        if self._stop.wait(QUIET):
            return
        while True:
            self.stream.write("\r" + self.line() + "\x1b[K")
            self.stream.flush()
            self._drawn = True
            if self._stop.wait(INTERVAL):
                return
