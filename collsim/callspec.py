"""One collective call as asked for: the machine, the collective, the algorithm, how many
ranks, how many bytes, the parameters, and the cost model if the caller replaces the
machine's. Planning, simulating and recording a call all take one of these instead of the
seven values apart."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from collsim.engine.costs import CostModel
from collsim.hardware.topology import Topology
from collsim.params import CallParams


@dataclass(frozen=True)
class CallSpec:
    """A call before it is planned. ``params`` are the call's parameters (unchecked as asked
    for, or checked once :func:`collsim.simulate.check_params` has run); ``costs`` None means
    the machine's own cost model (:mod:`collsim.calls.plan`)."""

    topology: Topology
    collective: str
    algorithm: str
    ranks: int
    size_bytes: int
    params: CallParams = field(default_factory=dict)
    costs: CostModel | None = None


def gpus_per_node(topology: Topology, gpus: Sequence[int]) -> Counter:
    """How many of ``gpus`` each node holds (one node when the machine names none)."""
    return Counter(topology.node_of[g] for g in gpus) if topology.node_of \
        else Counter({0: len(gpus)})
