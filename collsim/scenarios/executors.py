"""Where points run: in this process, in a pool of local processes, or on a Dask cluster.

Each executor yields :class:`BatchResult` objects in any order, one per point where it can
(here and on local processes, so each row reaches the table as its point ends) or one per
batch (Dask); the runner writes rows as they come and sorts the table at the end, so results
never depend on the executor. Batches grow from one point to about ``TARGET_SECONDS`` of work,
measured as the run goes, but stay small enough near the end that every worker keeps busy.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

from collsim.errors import InputError
from collsim.scenarios.model import Point, TopologySource
from collsim.scenarios.pool import run_local
from collsim.scenarios.worker import Batch, BatchResult, run_batch, run_point

__all__ = ["Batcher", "run_dask", "run_here", "run_local"]

TARGET_SECONDS = 0.5


class Batcher:
    """Cuts the pending points into batches sized from the measured time per point."""

    def __init__(self, points: Sequence[Point], workers: int, scenario: str,
                 sources: tuple[TopologySource, ...], target: float = TARGET_SECONDS,
                 exact: bool = False) -> None:
        self._points = list(points)
        self._next = 0
        self.workers = max(1, workers)
        self._scenario, self._sources = scenario, sources
        self._target = target
        self._exact = exact  # every batch on the full simulation's times
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
        return Batch(self._scenario, self._sources, points, self._exact)


def run_here(batcher: Batcher) -> Iterator[BatchResult]:
    """Run every point in this process, one after the other, yielding each as it ends."""
    while (batch := batcher.take()) is not None:
        for point in batch.points:
            start = time.perf_counter()
            row, error = run_point(batch, point)
            result = BatchResult([] if error else [(point.index, row)],
                                 time.perf_counter() - start, error)
            batcher.record(result)
            yield result
            if error:
                return


def run_dask(batcher: Batcher, scheduler: str) -> Iterator[BatchResult]:
    """Run batches on an existing Dask cluster at ``scheduler`` (host:port)."""
    try:  # dask is an optional extra, needed only by this executor
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
