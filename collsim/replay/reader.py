"""Read Kineto traces (one JSON per rank, plain or gzipped) into a Trace."""

from __future__ import annotations

from pathlib import Path

from collsim.replay.model import Trace


def read_trace(path: str | Path) -> Trace:
    """The job in ``path``: a folder of per-rank traces, one trace file, or a glob pattern.

    Raises collsim.errors.InputError naming the file, event and field for bad input."""
    raise NotImplementedError("the reader is being written (issue 31)")
