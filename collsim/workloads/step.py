"""One training step of a workload on a topology, in one call."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from collsim.engine.costs import CostModel
from collsim.errors import InputError
from collsim.hardware.topology import Topology
from collsim.workloads.alone import run_alone, watched
from collsim.workloads.executor import run_plan
from collsim.workloads.model import Workload
from collsim.workloads.periodic import declines, run_periodic
from collsim.workloads.plan import build_plan
from collsim.workloads.results import StepResult
from collsim.workloads.service import ServiceFactory
from collsim.workloads.shared import shared


def run_workload(workload: Workload, topology: Topology, gpus: int | None = None,
                 service: ServiceFactory | None = None, costs: CostModel | None = None,
                 exact: bool = False, observe: Callable[[object], None] | None = None
                 ) -> StepResult:
    """Plan and run one step on ``gpus`` GPUs of ``topology`` (default: the data degree the
    workload names, else every GPU). ``service`` times the calls; by default every call runs
    on one shared simulation of the topology, those that run alone on their links timed
    alone (:mod:`collsim.workloads.alone`), and a ZeRO-3 step of many identical layers
    from a few of them (:mod:`collsim.workloads.periodic`), unless ``exact``. ``observe``,
    if given, is called once with an object whose ``env`` and ``fabric`` are those of the
    run in progress (a progress line reads the clock and the transfers)."""
    if gpus is None and workload.parallelism.data is None:
        gpus = topology.gpus
    plan = build_plan(workload, gpus)
    if plan.world > topology.gpus:
        raise InputError(f"the workload needs {plan.world} GPUs; topology "
                         f"'{topology.name}' has {topology.gpus}", file=workload.file,
                         key="parallelism", line=workload.lines.get(("parallelism",)))
    seen = None
    if observe is not None:
        current = Current()
        observe(current)
        seen = current.follow
    if service is not None:
        return run_plan(plan, watched(service, seen))
    if exact:
        return run_plan(plan, watched(shared(topology, costs), seen))
    if declines(workload, gpus) is None:
        timings: dict = {}  # the runs share their calls' shapes: each is timed alone once
        result = run_periodic(workload, lambda reduced: run_alone(
            build_plan(reduced, gpus), topology, costs, seen, timings))
        if not isinstance(result, str):
            return result
        step = run_alone(plan, topology, costs, seen, timings)
        return dataclasses.replace(step, fallback="; ".join(
            why for why in (result, step.fallback) if why))
    return run_alone(plan, topology, costs, seen)


class Current:
    """The service of the run in progress, as a progress line reads it: its ``env`` and
    ``fabric`` (None for a service without one)."""

    def __init__(self) -> None:
        self.env: object = None
        self.fabric: object = None

    def follow(self, service: object) -> None:
        self.env = getattr(service, "env", None)
        self.fabric = getattr(service, "fabric", None)
