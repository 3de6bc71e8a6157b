"""Sweep expansion: the cartesian product of a scenario's axes, in a fixed order, minus the
points its ``where:`` filter drops and those the machine or the algorithm cannot serve."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import collsim.algorithms  # noqa: F401  (every program registered before REGISTRY is read)
from collsim.algorithms.registry import REGISTRY, Algorithm, get_algorithm
from collsim.calls.plan import SELECTORS, selector
from collsim.errors import InputError
from collsim.hardware.topology import Topology
from collsim.nccl.protocols import nccl_figures
from collsim.params import DTYPES, dtype_name
from collsim.scenarios.axes import quantity_value
from collsim.scenarios.model import Point, Scenario
from collsim.simulate import accepted_params, check_params

MAX_POINTS = 1_000_000


@dataclass
class Sweep:
    """The points of a scenario in sweep order, and why others were left out."""

    points: list[Point]
    skipped: Counter[str] = field(default_factory=Counter)
    filtered: int = 0

    def notes(self, limit: int = 6) -> list[str]:
        """One line per reason points were skipped, most frequent first."""
        lines = [f"skipped {count} point{'s' if count > 1 else ''}: {reason}"
                 for reason, count in self.skipped.most_common(limit)]
        if len(self.skipped) > limit:
            shown = sum(count for _, count in self.skipped.most_common(limit))
            lines.append(f"... and {sum(self.skipped.values()) - shown} more for other reasons")
        return lines


def count_points(scenario: Scenario) -> int:
    """The size of the full product before filtering (ranks counted once when omitted)."""
    per_topology = math.prod(len(v) for v in scenario.settings.values())
    algorithms = sum(len(scenario.algorithms[c]) for c in scenario.collectives)
    return (len(scenario.topologies) * per_topology * algorithms
            * math.prod(len(v) for v in scenario.params.values())
            * len(scenario.ranks or [0]) * len(scenario.sizes))


def expand(scenario: Scenario) -> Sweep:
    """Every point of the sweep, in order: topology, set values, collective, algorithm,
    parameter values, ranks, size (the last varies fastest)."""
    doc = scenario.doc
    total = count_points(scenario)
    if total > MAX_POINTS:
        raise doc.error(("sweep",), f"the sweep has {total:,} points, more than {MAX_POINTS:,}; "
                                    f"split it into several scenarios or use coarser ranges")
    sweep = Sweep([])
    set_keys = list(scenario.settings)
    set_combos = list(itertools.product(*scenario.settings.values()))
    for t in range(len(scenario.topologies)):
        for set_values in set_combos:
            settings = tuple(zip(set_keys, set_values, strict=True))
            topology = _build(scenario, t, dict(settings))
            for collective in scenario.collectives:
                for name in scenario.algorithms[collective]:
                    # One of NCCL's algorithms without a program yet (the loader lets only
                    # those through) stands as a record whose points are skipped with a note.
                    missing = None if name in SELECTORS or (collective, name) in REGISTRY \
                        else f"NCCL's {name} for {collective}, which has no program yet"
                    algorithm = selector(collective, name) if name in SELECTORS or missing \
                        else get_algorithm(collective, name)
                    for params in _param_combos(scenario, algorithm):
                        for ranks in scenario.ranks or [topology.gpus]:
                            reason = missing or _unservable(topology, algorithm, ranks)
                            itemsize = 1 if reason else _itemsize(scenario, algorithm, ranks,
                                                                  params)
                            for size in scenario.sizes:
                                values = _names(topology, collective, name, ranks, size,
                                                settings + params, scenario.params)
                                if not all(keep(values) for keep in scenario.where):
                                    sweep.filtered += 1
                                    continue
                                why = reason or _misfit(size, itemsize, params)
                                if why:
                                    sweep.skipped[why] += 1
                                    continue
                                sweep.points.append(Point(
                                    len(sweep.points), t, topology.name, collective, name,
                                    ranks, size, settings, params))
    if not sweep.points:
        why = "; ".join(sweep.notes()) or "the where filter drops every point"
        raise doc.error(scenario.paths.get("where") if sweep.filtered and not sweep.skipped
                        else ("sweep",), f"the sweep is empty: {why}")
    return sweep


def _build(scenario: Scenario, index: int, settings: dict[str, Any]) -> Topology:
    """The topology with ``set`` values applied; a rejected value is reported at its key."""
    try:
        return scenario.topologies[index].build(settings)
    except InputError as exc:
        if not settings:
            raise
        keys = ", ".join(f"{k}={v!r}" for k, v in settings.items())
        path = scenario.paths["set"]
        bad = exc.key if exc.key in settings else next(iter(settings))
        raise scenario.doc.error(path + (bad,), f"topology {scenario.topology_names[index]!r} "
                                                f"with {keys}: {exc}") from None


def _param_combos(scenario: Scenario, algorithm: Algorithm
                  ) -> list[tuple[tuple[str, Any], ...]]:
    """The combinations of the swept parameters this algorithm takes; the others do not
    apply to it, so its points leave them empty instead of repeating identical runs."""
    keys = [k for k in scenario.params if k in accepted_params(algorithm)]
    return [tuple(zip(keys, values, strict=True))
            for values in itertools.product(*(scenario.params[k] for k in keys))]


def _itemsize(scenario: Scenario, algorithm: Algorithm, ranks: int,
              params: tuple[tuple[str, Any], ...]) -> int:
    """Bytes per element under the point's dtype, once its parameters have been checked."""
    try:
        checked = check_params(algorithm, ranks, dict(params))
    except InputError as exc:
        name = (exc.key or "").removeprefix("param.")
        path = scenario.paths["param"] + ((name,) if name in scenario.params else ())
        raise scenario.doc.error(path, f"{exc.message} ({algorithm.collective} "
                                       f"{algorithm.name} on {ranks} ranks; a where: condition "
                                       f"can leave such points out)") from None
    return DTYPES[dtype_name(checked)]


def _misfit(size: int, itemsize: int, params: tuple[tuple[str, Any], ...]) -> str | None:
    if size % itemsize:
        dtype = dtype_name(dict(params))
        return f"sizes that are not a whole number of {dtype} elements ({itemsize} B each)"
    return None


def _unservable(topology: Topology, algorithm: Any, ranks: int) -> str | None:
    if ranks > topology.gpus:
        return f"{topology.name!r} has {topology.gpus} GPUs, fewer than {ranks} ranks"
    if algorithm.name in SELECTORS and nccl_figures(topology) is None:
        return (f"{algorithm.name} on {topology.name!r}, which declares no NCCL figures "
                f"(auto and best choose among NCCL's algorithms)")
    try:
        algorithm.check_ranks(ranks)
    except InputError as exc:
        return exc.message
    return None


def _names(topology: Topology, collective: str, algorithm: str, ranks: int, size: int,
           swept: tuple[tuple[str, Any], ...], params: dict[str, Any]) -> dict[str, Any]:
    """What a ``where`` condition can name for one point; quantities become numbers, and
    parameters the algorithm does not take are None."""
    values: dict[str, Any] = {
        "size": size, "ranks": ranks, "collective": collective, "algorithm": algorithm,
        "topology": topology.name, "gpus": topology.gpus, "nodes": topology.nodes,
        **dict.fromkeys(params),
    }
    for key, value in swept:
        number = quantity_value(value) if isinstance(value, str) else None
        values[key] = value if number is None else number
    return values
