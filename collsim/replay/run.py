"""Run a replay plan on one shared simulation of a machine, as a workload step runs: the
workload executor starts every rank's streams, the shared fabric times every call with the
others in flight."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import simpy

from collsim.errors import InputError
from collsim.hardware.topology import Topology
from collsim.replay.plan import ReplayPlan
from collsim.workloads.executor import Timeline, launch
from collsim.workloads.model import Noise
from collsim.workloads.shared import SharedFabric


@dataclass
class Replayed:
    """A plan after its run: when every task ran, and the simulation that ran its calls."""

    plan: ReplayPlan
    timeline: Timeline
    service: SharedFabric
    topology: Topology


def replay(plan: ReplayPlan, topology: Topology,
           observe: Callable[[Any], None] | None = None) -> Replayed:
    """Run ``plan`` with rank r on GPU r of ``topology``; ``observe(simulation)`` is called
    before the run (a progress line reads its clock)."""
    if plan.world > topology.gpus:
        raise InputError(f"the trace has {plan.world} ranks; topology '{topology.name}' has "
                         f"{topology.gpus} GPUs (a cluster takes --set nodes=N)",
                         key="--topology")
    env = simpy.Environment()
    service = SharedFabric(env, topology)
    if observe is not None:
        observe(service.simulation)
    starts = Noise(offsets=tuple((rank, plan.offset(rank)) for rank in range(plan.world)
                                 if plan.offset(rank) > 0))
    launched = launch(plan, env, service, starts)  # type: ignore[arg-type]
    env.run()
    service.simulation.check()
    return Replayed(plan, launched.timeline(), service, topology)
