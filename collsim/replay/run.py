"""Run a replay plan on one shared simulation of a machine, as a workload step runs: the
workload executor starts every rank's streams, the shared fabric times every call with the
others in flight (or, isolated, each call alone: faster at scale, without contention)."""

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
from collsim.workloads.service import CollectiveService, IsolatedCalls, simulated
from collsim.workloads.shared import SharedFabric


@dataclass
class Replayed:
    """A plan after its run: when every task ran, and the simulation that ran its calls."""

    plan: ReplayPlan
    timeline: Timeline
    service: CollectiveService
    topology: Topology


def replay(plan: ReplayPlan, topology: Topology, isolated: bool = False,
           observe: Callable[[Any], None] | None = None) -> Replayed:
    """Run ``plan`` with rank r on GPU r of ``topology``; ``isolated``: each call timed
    alone (no contention between calls; distinct calls simulated once). ``observe`` is
    called with what holds the simulated clock before the run (a progress line reads it)."""
    if plan.world > topology.gpus:
        raise InputError(f"the trace has {plan.world} ranks; topology '{topology.name}' has "
                         f"{topology.gpus} GPUs (a cluster takes --set nodes=N)",
                         key="--topology")
    env = simpy.Environment()
    service: CollectiveService = (IsolatedCalls(env, simulated(topology)) if isolated
                                  else SharedFabric(env, topology))
    if observe is not None:
        observe(getattr(service, "simulation", service))
    starts = Noise(offsets=tuple((rank, plan.offset(rank)) for rank in range(plan.world)
                                 if plan.offset(rank) > 0))
    launched = launch(plan, env, service, starts)  # type: ignore[arg-type]
    env.run()
    if isinstance(service, SharedFabric):
        service.simulation.check()
    return Replayed(plan, launched.timeline(), service, topology)
