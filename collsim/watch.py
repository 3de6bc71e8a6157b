"""Progress lines for long commands, drawn on stderr only when it is a terminal: one
mechanism for every command that can run past two seconds.

:class:`StatusLine` is a thread that wakes twice a second and redraws one line from what it
reads: plain attribute reads, so the work runs exactly as it would unwatched (no hook in the
engine's loop, nothing to slow it). A command that ends within a second shows nothing, and
the line is erased when the work ends. :class:`Watch` reads a simulation (the engine's
simulated clock and count of transfers; the closed form, where the machine has one, says
roughly how far the clock has to go): ``collsim estimate``, ``workload`` and ``jobs``.
:class:`FitWatch` reads a calibration's iteration and error so far: ``collsim calibrate``.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from types import TracebackType
from typing import Any, TextIO

from collsim.units import format_time

INTERVAL = 0.5  # seconds between redraws
QUIET = 1.0  # work shorter than this shows no line at all


class StatusLine:
    """A line redrawn from :meth:`text` while the ``with`` block runs, once :meth:`start`
    has been called; erased at the end of the block."""

    def __init__(self, stream: TextIO | None = None, enabled: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._drawn = False
        self._start = time.monotonic()

    def text(self) -> str | None:
        """The line to draw now, or None to leave the last one as it is."""
        raise NotImplementedError

    def elapsed(self) -> str:
        """``0:42 elapsed`` since :meth:`start`."""
        seconds = int(time.monotonic() - self._start)
        return f"{seconds // 60}:{seconds % 60:02d} elapsed"

    def start(self) -> None:
        """Start the clock, and the thread that draws the line (on a terminal only)."""
        if self._thread is not None:
            return
        self._start = time.monotonic()
        if self.enabled:
            self._thread = threading.Thread(target=self._loop, name="collsim-watch",
                                            daemon=True)
            self._thread.start()

    def __enter__(self) -> StatusLine:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()

    def _loop(self) -> None:
        if self._stop.wait(QUIET):
            return
        while True:
            line = self.text()
            if line is not None:
                self.stream.write("\r" + line + "\x1b[K")
                self.stream.flush()
                self._drawn = True
            if self._stop.wait(INTERVAL):
                return


class Watch(StatusLine):
    """Call the instance with the engine (``simulate(..., observe=watch)``), then leave the
    ``with`` block when the simulation is over. A command that runs several simulations
    (a workload with noise, each job alone) calls :meth:`follow` with each in turn."""

    def __init__(self, expected_s: float | None = None, stream: TextIO | None = None,
                 enabled: bool | None = None, label: str = "simulating") -> None:
        super().__init__(stream, enabled)
        self.expected = expected_s
        self.label = label
        self._engine: Any = None

    def __call__(self, engine: Any) -> None:
        self.follow(engine)

    def follow(self, engine: Any, label: str | None = None,
               expected_s: float | None = None) -> None:
        """Read ``engine`` (anything with ``env.now``, and ``fabric.transfers`` if it has a
        fabric) from now on, under ``label``."""
        self._engine = engine
        if label is not None:
            self.label, self.expected = label, expected_s
        self.start()

    def text(self) -> str | None:
        return self.line() if self._engine is not None else None

    def line(self) -> str:
        """``simulating: 1.2 ms simulated of about 3.4 ms (35%), 120,345 transfers, 0:42
        elapsed``."""
        engine = self._engine
        now = float(getattr(getattr(engine, "env", None), "now", 0.0))
        transfers = getattr(getattr(engine, "fabric", None), "transfers", None)
        text = f"{self.label}: {format_time(now)} simulated"
        if self.expected:
            text += (f" of about {format_time(self.expected)} "
                     f"({min(99, int(100 * now / self.expected))}%)")
        if isinstance(transfers, int):
            text += f", {transfers:,} transfers"
        return text + ", " + self.elapsed()


class FitWatch(StatusLine):
    """The line of a calibration: which fit, its iteration, and the error so far, read from
    the :class:`~collsim.calibrate.fit.FitProgress` the fit updates."""

    def __init__(self, progress: Any, stream: TextIO | None = None,
                 enabled: bool | None = None) -> None:
        super().__init__(stream, enabled)
        self.progress = progress

    def text(self) -> str | None:
        p = self.progress
        if not p.fit:
            return None
        error = f", rms error {_percent(p.cost, p.points)}" if p.cost is not None else ""
        start = f" (preset {_percent(p.start_cost, p.points)})" \
            if p.start_cost is not None else ""
        return (f"calibrating: fit {p.fit}, iteration {p.iteration}{error}{start}, "
                f"{p.simulations:,} simulations, " + self.elapsed())


def _percent(cost: float, points: int) -> str:
    """A least-squares cost of log times as the rms relative error it stands for."""
    return f"{100 * (math.exp(math.sqrt(cost / max(points, 1))) - 1):.1f}%"
