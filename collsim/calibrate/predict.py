"""The one place calibration asks the simulator for a time: NCCL's pick (algorithm, protocol,
channels) for a call, simulated as ``collsim estimate --algorithm auto`` runs it
(:mod:`collsim.calls.plan`: the machine's cost model for that protocol).

The pick is made once per call and kept (:class:`Pick`), so a fit can change the machine's
figures and simulate the same algorithm, protocol and channels again: NCCL chooses from its
own constants, not from what the machine really reaches. A named algorithm keeps NCCL's
choice of protocol and channels within it. ``figures`` replaces the topology's NCCL
declarations without reloading the file (the fit evaluates many)."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from collsim.algorithms.registry import REGISTRY
from collsim.calls.plan import (
    POINT_TO_POINT,
    auto_choice,
    environment_allows,
    is_nccl,
    nccl_defaults,
    plan,
    registered_nccl,
    takes_channels,
    textbook_channels,
)
from collsim.callspec import CallSpec
from collsim.collectives import COLLECTIVES
from collsim.engine.costs import CostModel
from collsim.errors import InputError
from collsim.hardware.machine import NcclFigures
from collsim.hardware.nccl_names import MODELLED_COLLECTIVES, PROTOCOLS
from collsim.hardware.topology import Topology
from collsim.nccl.adapter import nccl_system
from collsim.nccl.choice import choose
from collsim.params import PLANNED_ONLY
from collsim.simulate import simulate

P2P = ("nccl_p2p", "direct")  # what runs a collective NCCL has no algorithm for, in order


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
    return tuple(registered_nccl(collective))


def calibrated() -> tuple[str, ...]:
    """The collectives :func:`pick` can choose a program for."""
    return tuple(c for c in COLLECTIVES if runnable(c)
                 or any((c, name) in REGISTRY for name in P2P))


def pick(topology: Topology, collective: str, size: int, gpus: Sequence[int],
         algorithm: str = "auto", protocol: str | None = None) -> Pick:
    """NCCL's pick for the call on ``gpus``; ``algorithm``/``protocol`` restrict it as
    NCCL_ALGO/NCCL_PROTO do. Bad names are InputErrors naming ``algorithm``/``protocol``."""
    algorithms = runnable(collective)
    if algorithm != "auto" and algorithm not in algorithms:
        raise InputError(f"collsim has no NCCL algorithm {algorithm!r} for {collective}; "
                         f"choose auto or one of {', '.join(algorithms)}", key="algorithm")
    if protocol is not None and protocol not in PROTOCOLS:
        raise InputError(f"unknown protocol {protocol!r}; choose one of {', '.join(PROTOCOLS)}",
                         key="protocol")
    if len(gpus) > 1 and collective in MODELLED_COLLECTIVES:
        system = nccl_system(topology, gpus)
        allowed = environment_allows(system, collective, algorithms) if algorithm == "auto" \
            else {algorithm}  # as NCCL_ALGO: the machine's own, or the one asked for
        choice = choose(system, collective, size, algorithms=allowed,
                        protocols=None if protocol is None else {protocol})
        if choice is not None:
            return Pick(choice.algorithm, choice.protocol, choice.channels, choice.time)
    if not algorithms:  # alltoall: NCCL's grouped send/receive, under Simple's costs
        fallback = next((name for name in P2P if (collective, name) in REGISTRY), None)
        if fallback is None:
            raise InputError(f"collsim has no program for what NCCL runs as {collective}; "
                             f"measured logs may be of {', '.join(calibrated())}",
                             key="collective")
        channels = None  # alltoall's program: NCCL's p2p channels, from its own plan
        if fallback == POINT_TO_POINT.get(collective) and collective == "sendrecv":
            call = CallSpec(topology, collective, fallback, len(gpus), size, {})
            channels = textbook_channels(call, gpus)  # NCCL's p2p channels of the size
        return Pick(fallback, "Simple", channels)
    if algorithm == "auto" and protocol is None:
        chosen = auto_choice(topology, collective, gpus, size)
        return Pick(chosen.algorithm, chosen.protocol, chosen.channels)
    named = algorithms[0] if algorithm == "auto" else algorithm
    picked, channels = nccl_defaults(topology, collective, named, gpus, size, protocol)
    return Pick(named, picked, channels)


def with_figures(topology: Topology, figures: NcclFigures | None) -> Topology:
    """A shallow copy of ``topology`` whose NCCL declarations are ``figures`` (None: as is)."""
    if figures is None:
        return topology
    copied = copy.copy(topology)
    copied.machine = dataclasses.replace(topology.machine, nccl=figures)
    return copied


def _params(collective: str, gpus: Sequence[int], chosen: Pick) -> dict:
    """The call's parameters that make it run ``chosen`` on ``gpus``."""
    params: dict = {"placement": list(gpus)}
    if is_nccl(chosen.algorithm):
        params["protocol"] = chosen.protocol
    if chosen.channels is not None and takes_channels(collective, chosen.algorithm):
        params["channels"] = chosen.channels
    return params


def pick_costs(topology: Topology, collective: str, size: int, gpus: Sequence[int],
               chosen: Pick) -> CostModel:
    """The cost model :func:`simulate_pick` runs ``chosen`` under: all that its simulated
    time takes from the machine's NCCL figures (a fit caches simulations by it)."""
    return pick_plan(topology, collective, size, gpus, chosen)[1]


def pick_plan(topology: Topology, collective: str, size: int, gpus: Sequence[int],
              chosen: Pick) -> tuple[dict, CostModel]:
    """The call's parameters as planned (``chosen``'s, with what its protocol implies: the
    chunk) and its cost model: a run of these parameters at another size keeps its loops."""
    params = _params(collective, gpus, chosen)
    planned = plan(topology, collective, chosen.algorithm, list(gpus), size, params)
    given = {name: value for name, value in planned.params.items() if name not in PLANNED_ONLY}
    return {**given, **params}, planned.costs  # the plan sets PLANNED_ONLY again


def simulate_pick(topology: Topology, collective: str, size: int, gpus: Sequence[int],
                  chosen: Pick, params: dict | None = None) -> Prediction:
    """Simulate ``chosen`` for the call on ``gpus`` under the machine's cost model;
    ``params``, if given, are the call's (:func:`pick_plan`'s, for a run at another size)."""
    result = simulate(topology, collective, chosen.algorithm, len(gpus), size,
                      _params(collective, gpus, chosen) if params is None else params)
    return Prediction(collective, len(gpus), size, result.time_s, result.algbw_GBps,
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
