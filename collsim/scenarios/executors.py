"""Where points run: in this process, in a pool of local processes, or on a Dask cluster.

Each executor yields :class:`BatchResult` objects as batches finish, in any order; the runner
writes rows as they come and sorts the table at the end, so results never depend on the
executor. Batches grow from one point to about ``TARGET_SECONDS`` of work, measured as the run
goes, but stay small enough near the end that every worker keeps busy.
"""

from __future__ import annotations

import multiprocessing
import queue
import signal
from collections.abc import Iterator, Sequence
from typing import Any

from collsim.errors import InputError
from collsim.scenarios.model import Point, TopologySource
from collsim.scenarios.worker import Batch, BatchResult, run_batch

TARGET_SECONDS = 0.5


class Batcher:
    """Cuts the pending points into batches sized from the measured time per point."""

    def __init__(self, points: Sequence[Point], workers: int, scenario: str,
                 sources: tuple[TopologySource, ...], target: float = TARGET_SECONDS) -> None:
        self._points = list(points)
        self._next = 0
        self.workers = max(1, workers)
        self._scenario, self._sources = scenario, sources
        self._target = target
        self._seconds = 0.0
        self._measured = 0

    def record(self, result: BatchResult) -> None:
        self._seconds += result.seconds
        self._measured += len(result.rows)

    def size(self) -> int:
        """Points in the next batch."""
        if not self._measured:
            return 1
        per_point = max(self._seconds / self._measured, 1e-6)
        remaining = len(self._points) - self._next
        spread = max(1, remaining // (2 * self.workers))
        return max(1, min(int(self._target / per_point), spread))

    def take(self) -> Batch | None:
        if self._next >= len(self._points):
            return None
        size = self.size()
        points = tuple(self._points[self._next:self._next + size])
        self._next += len(points)
        return Batch(self._scenario, self._sources, points)


def run_here(batcher: Batcher) -> Iterator[BatchResult]:
    """Run every batch in this process, one after the other."""
    while (batch := batcher.take()) is not None:
        result = run_batch(batch)
        batcher.record(result)
        yield result


def _ignore_interrupts() -> None:
    # Ctrl-C reaches every process of the terminal's group; only the main process handles it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def run_local(batcher: Batcher, jobs: int) -> Iterator[BatchResult]:
    """Run batches on ``jobs`` local processes, two batches in flight per process."""
    done: queue.Queue[Any] = queue.Queue()
    pool = multiprocessing.get_context().Pool(jobs, initializer=_ignore_interrupts)
    try:
        in_flight = 0

        def submit() -> bool:
            batch = batcher.take()
            if batch is None:
                return False
            pool.apply_async(run_batch, (batch,), callback=done.put, error_callback=done.put)
            return True

        for _ in range(2 * jobs):
            in_flight += submit()
        while in_flight:
            result = done.get()
            in_flight -= 1
            if isinstance(result, BaseException):
                raise RuntimeError(f"a worker process failed: {result!r}") from result
            batcher.record(result)
            yield result
            if result.error is None:
                in_flight += submit()
        pool.close()
        pool.join()
    finally:
        pool.terminate()


def run_dask(batcher: Batcher, scheduler: str) -> Iterator[BatchResult]:
    """Run batches on an existing Dask cluster at ``scheduler`` (host:port)."""
    try:
        from dask.distributed import Client, as_completed
    except ImportError:
        raise InputError("the dask executor needs the dask extra: pip install 'collsim[dask]'",
                         key="--executor") from None
    try:
        client = Client(scheduler, timeout=10)
    except (OSError, TimeoutError, ValueError) as exc:
        raise InputError(f"cannot reach a Dask scheduler at {scheduler!r}: {exc}",
                         key="--scheduler") from None
    futures: Any = None
    try:
        workers = max(1, sum(client.nthreads().values()))
        batcher.workers = workers
        futures = as_completed()
        for _ in range(2 * workers):
            batch = batcher.take()
            if batch is None:
                break
            futures.add(client.submit(run_batch, batch, pure=False))
        for future in futures:
            result = future.result()
            batcher.record(result)
            yield result
            if result.error is None and (batch := batcher.take()) is not None:
                futures.add(client.submit(run_batch, batch, pure=False))
    finally:
        if futures is not None:
            client.cancel(list(futures.futures))
        client.close()
