"""The progress line of ``collsim estimate``: on a terminal only, and read from the engine
without slowing it."""

from __future__ import annotations

import io
import os
import select
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from collsim.watch import Watch

ROOT = Path(__file__).resolve().parents[1]
# About 1-4 s of simulation. The child draws from the first moment and every 20 ms, so
# the line is redrawn many times however fast the machine is (the delays are the
# module's own knobs, set before the command runs).
LONG = [sys.executable, "-c", "import sys, collsim.watch as w; w.QUIET = 0.0; "
        "w.INTERVAL = 0.02; from collsim.cli import main; sys.exit(main(sys.argv[1:]))",
        "estimate", "-t", str(ROOT / "topologies" / "switch-64.yaml"), "-c", "allreduce",
        "-a", "double_binary_tree", "-p", "64", "-s", "192MiB"]


def test_the_line_reads_the_clock_against_the_closed_form():
    watch = Watch(expected_s=4e-3, enabled=False)
    watch(SimpleNamespace(env=SimpleNamespace(now=1e-3), fabric=SimpleNamespace(
        transfers=12345)))
    watch._start = 0.0  # elapsed is then the monotonic clock: only its format is checked
    line = watch.line()
    assert line.startswith("simulating: 1 ms simulated of about 4 ms (25%), 12,345 transfers")
    assert line.rsplit(", ", 1)[1].endswith(" elapsed")


def test_nothing_is_drawn_off_a_terminal():
    stream = io.StringIO()
    with Watch(expected_s=1.0, stream=stream) as watch:  # StringIO is not a TTY
        watch(SimpleNamespace(env=SimpleNamespace(now=0.5)))
    assert stream.getvalue() == "" and watch._thread is None


def test_estimate_shows_progress_on_a_terminal_and_erases_it():
    controller, terminal = os.openpty()
    child = subprocess.Popen(LONG, stdout=subprocess.PIPE, stderr=terminal)
    os.close(terminal)
    shown = b""
    while True:
        ready, _, _ = select.select([controller], [], [], 0.1)
        if ready:
            try:
                data = os.read(controller, 4096)
            except OSError:  # the terminal's other end closed
                break
            if not data:
                break
            shown += data
        elif child.poll() is not None:
            break
    os.close(controller)
    out = child.stdout.read().decode()
    assert child.wait() == 0 and "double_binary_tree" in out
    lines = [part for part in shown.decode().split("\r") if part.startswith("simulating")]
    assert len(lines) >= 2, shown
    percents = [int(line.split("(")[1].split("%")[0]) for line in lines]
    assert percents == sorted(percents) and percents[-1] > percents[0]
    assert shown.endswith(b"\r\x1b[K")  # erased before the result is printed

