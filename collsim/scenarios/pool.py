"""Local worker processes for ``collsim run --jobs N``.

Each worker simulates one batch of points at a time and sends every row back the moment its
point finishes, so rows reach the table as points end, not as batches do. The main process
waits on the workers' pipes and on their process sentinels together: a worker that dies (the
out-of-memory killer's SIGKILL, say) is noticed at once and named with the point it was
computing, instead of being waited for forever. Workers are ended when the run ends, however
it ends, and die with the main process if it is killed outright.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING, NoReturn

from collsim.errors import WorkerLost
from collsim.scenarios.model import Point
from collsim.scenarios.worker import Batch, BatchResult, describe, run_point

if TYPE_CHECKING:
    from collsim.scenarios.executors import Batcher

PR_SET_PDEATHSIG = 1  # linux/prctl.h
HELD = {signal.SIGINT, signal.SIGTERM}


@dataclass
class _Worker:
    process: BaseProcess
    conn: Connection
    left: list[Point] = field(default_factory=list)  # the batch's points not reported yet


def run_local(batcher: Batcher, jobs: int) -> Iterator[BatchResult]:
    """Run the batcher's points on ``jobs`` worker processes; yield one result per point."""
    context = multiprocessing.get_context()
    workers: list[_Worker] = []
    try:
        for _ in range(jobs):
            ours, theirs = context.Pipe()
            process = context.Process(target=_serve, args=(theirs, os.getpid()), daemon=True,
                                      name="collsim-worker")
            # A signal between the fork and the worker's own handlers would run the main
            # process's handler in the worker: hold them until the worker has set its own.
            signal.pthread_sigmask(signal.SIG_BLOCK, HELD)
            try:
                process.start()
                workers.append(_Worker(process, ours))
            finally:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, HELD)
                theirs.close()
        for worker in workers:
            _give(worker, batcher)
        while busy := [w for w in workers if w.left]:
            wait([w.conn for w in busy] + [w.process.sentinel for w in busy])
            for worker in busy:
                yield from _collect(worker, batcher)
    finally:
        _stop(workers)


def _give(worker: _Worker, batcher: Batcher) -> None:
    batch = batcher.take()
    if batch is not None:
        worker.left = list(batch.points)
        try:
            worker.conn.send(batch)
        except OSError:  # it died while idle
            _lost(worker)


def _collect(worker: _Worker, batcher: Batcher) -> Iterator[BatchResult]:
    """Everything the worker has sent so far; raise WorkerLost if it died mid-batch."""
    while worker.left:
        try:
            if not worker.conn.poll():
                break
            message = worker.conn.recv()
        except (EOFError, OSError):
            _lost(worker)
        if message[0] == "row":
            _, index, row, seconds = message
            worker.left.pop(0)
            result = BatchResult([(index, row)], seconds)
            batcher.record(result)
            yield result
            if not worker.left:
                _give(worker, batcher)
        else:  # ("error", (kind, text)): the batch stopped at a point that failed
            worker.left = []
            yield BatchResult([], 0.0, message[1])
            return
    if worker.left and not worker.process.is_alive():
        _lost(worker)


def _lost(worker: _Worker) -> NoReturn:
    worker.process.join(timeout=5)
    code = worker.process.exitcode
    if code is not None and code < 0:
        how = f"was killed by {signal.Signals(-code).name}"
        if -code == signal.SIGKILL:
            how += " (as the out-of-memory killer does)"
    else:
        how = f"exited with status {code}"
    raise WorkerLost(f"worker process {worker.process.pid} {how} while computing "
                     f"{describe(worker.left[0])}")


def _stop(workers: list[_Worker]) -> None:
    """End every worker: idle ones are asked to leave, busy ones are terminated."""
    for worker in workers:
        try:
            if worker.left or not worker.process.is_alive():
                worker.process.terminate()
            else:
                worker.conn.send(None)
        except OSError:
            worker.process.terminate()
    deadline = time.monotonic() + 2
    for worker in workers:
        worker.process.join(timeout=max(0.0, deadline - time.monotonic()))
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join()
        worker.conn.close()


def _serve(conn: Connection, parent: int) -> None:
    """A worker's loop: batches in, one message per finished point out, until told to stop."""
    _die_with(parent)
    # Ctrl-C reaches every process of the terminal's group; only the main process handles it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, HELD)
    try:
        while (batch := conn.recv()) is not None:
            _serve_batch(conn, batch)
    except (EOFError, OSError):  # the main process is gone: nobody to report to
        pass


def _serve_batch(conn: Connection, batch: Batch) -> None:
    for point in batch.points:
        start = time.perf_counter()
        row, error = run_point(batch, point)
        if error:
            conn.send(("error", error))
            return
        conn.send(("row", point.index, row, time.perf_counter() - start))


def _die_with(parent: int) -> None:
    """Ask Linux to kill this worker when the main process dies, even by SIGKILL, so that no
    orphan keeps computing; elsewhere a worker stops when its next send finds no reader."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes  # Linux's prctl only

            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(0)
