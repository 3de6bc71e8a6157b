"""What runs in a worker (a local process, a Dask worker, or the main process): simulate a
batch of points and return their table rows. Topologies are rebuilt from their source here
and cached, because sending sources is cheaper than sending machines."""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass
from typing import Any

from collsim.errors import InputError, SimulationError
from collsim.hardware.topology import Topology
from collsim.scenarios.model import Point, TopologySource
from collsim.simulate import simulate

_CACHE: dict[tuple[Any, ...], Topology] = {}
_CACHE_LIMIT = 64


@dataclass(frozen=True)
class Batch:
    """Points to simulate together, with what a worker needs to rebuild their topologies."""

    scenario: str
    sources: tuple[TopologySource, ...]
    points: tuple[Point, ...]
    exact: bool = False  # the full simulation's times: no pipeline path


def topology_for(sources: tuple[TopologySource, ...], point: Point) -> Topology:
    """The point's machine, built once per worker for each (topology, set values)."""
    source = sources[point.topology]
    key = (source.label, source.file, repr(source.data), point.settings)
    topology = _CACHE.get(key)
    if topology is None:
        if len(_CACHE) >= _CACHE_LIMIT:
            _CACHE.clear()
        topology = _CACHE[key] = source.build(dict(point.settings))
    return topology


def simulate_point(scenario: str, sources: tuple[TopologySource, ...], point: Point,
                   exact: bool = False) -> dict[str, Any]:
    """One row of the results table for ``point`` (``exact``: no pipeline path)."""
    result = simulate(topology_for(sources, point), point.collective, point.algorithm,
                      point.ranks, point.size, dict(point.params) or None, exact=exact)
    row = dict(result.row())
    row["scenario"] = scenario
    row.update(point.settings)
    row.update(point.params)
    return row


@dataclass
class BatchResult:
    """Rows of the points done, in batch order, the seconds they took, and the error (its kind
    and text) that stopped the batch, if any: errors travel as text because not every
    exception survives pickling between processes."""

    rows: list[tuple[int, dict[str, Any]]]
    seconds: float
    error: tuple[str, str] | None = None


def run_point(batch: Batch, point: Point) -> tuple[dict[str, Any] | None, tuple[str, str] | None]:
    """The row of one point of ``batch``, or the error (kind, text) that stopped it."""
    try:
        return simulate_point(batch.scenario, batch.sources, point, batch.exact), None
    except InputError as exc:
        return None, ("input", f"{describe(point)}: {exc}")
    except SimulationError as exc:
        return None, ("simulation", f"{describe(point)}: {exc}")
    except Exception:  # noqa: BLE001 - a bug: carry its traceback to the main process
        return None, ("bug", f"{describe(point)}:\n{traceback.format_exc()}")


def run_batch(batch: Batch) -> BatchResult:
    """Simulate every point of ``batch`` in order, stopping at the first that fails."""
    start = time.perf_counter()
    result = BatchResult([], 0.0)
    for point in batch.points:
        row, result.error = run_point(batch, point)
        if result.error:
            break
        result.rows.append((point.index, row))
    result.seconds = time.perf_counter() - start
    return result


def raise_error(error: tuple[str, str]) -> None:
    """Raise, in the main process, the error a worker reported."""
    kind, text = error
    if kind == "input":
        raise InputError(text)
    if kind == "simulation":
        raise SimulationError(text)
    raise RuntimeError(f"a worker failed on {text}")


def describe(point: Point) -> str:
    """The point as an error message names it."""
    settings = "".join(f", {k}={v}" for k, v in point.settings + point.params)
    return (f"point {point.index} ({point.topology_name}, {point.collective}, {point.algorithm}, "
            f"{point.ranks} ranks, {point.size} bytes{settings})")
