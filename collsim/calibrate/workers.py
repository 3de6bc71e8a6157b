"""Simulations of a fit side by side: the points one evaluation of the model needs are
independent, so on a machine of several cores they run in worker processes, one a core.
Each point is the same deterministic simulation wherever it runs, so the times, the fit and
the written file are those of a run on one core (``tests/test_calibrate_workers.py``).

Workers are forked from the fit (spawned where the system cannot fork), write to nothing
and die with it; ``COLLSIM_JOBS`` sets how many (default: the cores this process may use; 1
runs every point in the fit's own process)."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor

from collsim.calibrate.predict import Pick, Prediction, simulate_pick
from collsim.errors import InputError
from collsim.hardware.topology import Topology

# topology, collective, size, gpus, pick, and the call's parameters where they are given
Task = (tuple[Topology, str, int, Sequence[int], Pick]
        | tuple[Topology, str, int, Sequence[int], Pick, dict])
MIN_TASKS = 2  # fewer points than this run in the fit's own process

_pool: ProcessPoolExecutor | None = None


def jobs() -> int:
    """Worker processes a fit uses: ``COLLSIM_JOBS``, else the cores this process may use."""
    text = os.environ.get("COLLSIM_JOBS", "")
    if text:
        try:
            count = int(text)
        except ValueError:
            raise InputError(f"COLLSIM_JOBS is {text!r}; expected a whole number of "
                             f"processes, 1 or more", key="COLLSIM_JOBS") from None
        if count < 1:
            raise InputError(f"COLLSIM_JOBS is {count}; expected 1 or more",
                             key="COLLSIM_JOBS")
        return count
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
        (os.cpu_count() or 1)


def _time(task: Task) -> float | None:
    """Seconds of one point, or None when it fails (the fit's process then runs it again
    and raises the error itself, with its file and key)."""
    try:
        return simulate_pick(*task).time_s
    except Exception:  # noqa: BLE001 (reported where the point is run again)
        return None


def simulate_times(tasks: Sequence[Task],
                   simulate: Callable[..., Prediction] = simulate_pick) -> list[float]:
    """Seconds of every task's point, in order: in worker processes when there are several
    tasks and several jobs, else here (always here with a ``simulate`` of the caller's own:
    the workers run collsim's)."""
    count = jobs()
    if count < 2 or len(tasks) < MIN_TASKS or simulate is not simulate_pick:
        return [simulate(*task).time_s for task in tasks]
    # the largest calls first, so that no worker is left with one long point at the end
    order = sorted(range(len(tasks)), key=lambda i: -tasks[i][2])
    times = dict(zip(order, _executor(count).map(_time, [tasks[i] for i in order]),
                     strict=True))
    return [times[i] if times[i] is not None else simulate_pick(*tasks[i]).time_s
            for i in range(len(tasks))]


def _executor(count: int) -> ProcessPoolExecutor:
    global _pool
    if _pool is None or _pool._max_workers != count:  # noqa: SLF001 (its only record)
        if _pool is not None:
            _pool.shutdown()
        context = multiprocessing.get_context(
            "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
        _pool = ProcessPoolExecutor(count, mp_context=context, initializer=_detach)
        atexit.register(_pool.shutdown)
    return _pool


def _detach() -> None:
    """A worker writes nothing to the fit's terminal or pipes, and dies with its parent (on
    Linux), so that a fit killed mid-way leaves no process holding its output open."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (1, 2):
        os.dup2(devnull, stream)
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
