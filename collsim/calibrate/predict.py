"""The one place calibration asks the simulator for a time: NCCL's pick (algorithm, protocol,
channels) for a call, simulated under that protocol's cost model.

``auto`` is NCCL's choice among the NCCL algorithms collsim can run for the collective; a
named algorithm keeps NCCL's choice of protocol and channels among that algorithm's. A
collective NCCL's tuner does not model (alltoall) runs as all-pairs sends (``direct``) under
the ring family's Simple costs, as NCCL runs it. ``figures`` replaces the topology's NCCL
declarations without reloading the file (the fit evaluates many)."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from collsim.algorithms.registry import REGISTRY
from collsim.collectives import COLLECTIVES
from collsim.errors import InputError
from collsim.hardware.machine import NcclFigures
from collsim.hardware.topology import Topology
from collsim.nccl.adapter import nccl_system
from collsim.nccl.choice import choose
from collsim.nccl.names import ALGORITHMS, PROTOCOLS
from collsim.nccl.protocols import cost_model
from collsim.simulate import simulate

UNMODELLED = {"alltoall": "direct"}  # NCCL's all-pairs send/receive


@dataclass(frozen=True)
class Pick:
    """What runs for one call: collsim's algorithm name, NCCL's protocol, channels (None when
    NCCL's tuner has no say), and NCCL's own model time of it (s, None likewise)."""

    algorithm: str
    protocol: str
    channels: int | None
    model_time: float | None = None


@dataclass(frozen=True)
class Prediction:
    """One simulated call: its time (s), bandwidths (GB/s) and what ran."""

    collective: str
    ranks: int
    size_bytes: int
    time_s: float
    algbw_GBps: float
    busbw_GBps: float
    pick: Pick


def runnable(collective: str) -> tuple[str, ...]:
    """NCCL's algorithms collsim has a program for, for ``collective``."""
    return tuple(a for a in ALGORITHMS if (collective, a) in REGISTRY)


def pick(topology: Topology, collective: str, size: int, gpus: Sequence[int],
         algorithm: str = "auto", protocol: str | None = None) -> Pick:
    """NCCL's pick for the call on ``gpus``; ``algorithm``/``protocol`` restrict it as
    NCCL_ALGO/NCCL_PROTO do. Bad names are InputErrors naming ``algorithm``/``protocol``."""
    if collective in UNMODELLED:
        return Pick(UNMODELLED[collective], "Simple", None)
    algorithms = runnable(collective)
    if algorithm != "auto":
        if algorithm not in algorithms:
            raise InputError(f"collsim has no NCCL algorithm {algorithm!r} for {collective}; "
                             f"choose auto or one of {', '.join(algorithms)}", key="algorithm")
        algorithms = (algorithm,)
    if protocol is not None and protocol not in PROTOCOLS:
        raise InputError(f"unknown protocol {protocol!r}; choose one of {', '.join(PROTOCOLS)}",
                         key="protocol")
    if len(gpus) == 1:
        return Pick(algorithms[0] if algorithms else "ring", "Simple", 1)
    system = nccl_system(topology, gpus)
    choice = choose(system, collective, size, algorithms=algorithms,
                    protocols=(protocol,) if protocol else None)
    if choice is None:
        raise InputError(f"NCCL's model has no eligible algorithm for {collective} among "
                         f"{', '.join(algorithms) or 'none'}", key="algorithm")
    return Pick(choice.algorithm, choice.protocol, choice.channels, choice.time)


def with_figures(topology: Topology, figures: NcclFigures | None) -> Topology:
    """A shallow copy of ``topology`` whose NCCL declarations are ``figures`` (None: as is)."""
    if figures is None:
        return topology
    copied = copy.copy(topology)
    copied.machine = dataclasses.replace(topology.machine, nccl=figures)
    return copied


def simulate_pick(topology: Topology, collective: str, size: int, gpus: Sequence[int],
                  chosen: Pick) -> Prediction:
    """Simulate ``chosen`` for the call on ``gpus`` under its protocol's cost model."""
    ranks = len(gpus)
    family = "ring" if chosen.algorithm in UNMODELLED.values() else chosen.algorithm
    costs = cost_model(topology, family, chosen.protocol, gpus)
    params: dict = {"placement": list(gpus)}
    if chosen.channels is not None:
        params["channels"] = chosen.channels
    result = simulate(topology, collective, chosen.algorithm, ranks, size, params, costs=costs)
    return Prediction(collective, ranks, size, result.time_s, result.algbw_GBps,
                      result.busbw_GBps, chosen)


def predict(topology: Topology, collective: str, ranks: int, size: int,
            algorithm: str = "auto", *, protocol: str | None = None,
            gpus: Sequence[int] | None = None) -> Prediction:
    """What nccl-tests would print for one call on ``topology``: NCCL's pick (``auto``, or
    restricted to ``algorithm``/``protocol``), simulated. ``gpus`` places the ranks (default:
    the first ``ranks`` GPUs)."""
    if collective not in COLLECTIVES:
        raise InputError(f"unknown collective {collective!r}", key="collective")
    placed = list(range(ranks)) if gpus is None else list(gpus)
    chosen = pick(topology, collective, size, placed, algorithm, protocol)
    return simulate_pick(topology, collective, size, placed, chosen)
