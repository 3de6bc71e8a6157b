"""One training step of a workload on a topology, in one call."""

from __future__ import annotations

from collsim.engine.costs import CostModel
from collsim.errors import InputError
from collsim.hardware.topology import Topology
from collsim.workloads.alone import run_alone
from collsim.workloads.executor import run_plan
from collsim.workloads.model import Workload
from collsim.workloads.plan import build_plan
from collsim.workloads.results import StepResult
from collsim.workloads.service import ServiceFactory
from collsim.workloads.shared import shared


def run_workload(workload: Workload, topology: Topology, gpus: int | None = None,
                 service: ServiceFactory | None = None, costs: CostModel | None = None,
                 exact: bool = False) -> StepResult:
    """Plan and run one step on ``gpus`` GPUs of ``topology`` (default: the data degree the
    workload names, else every GPU). ``service`` times the calls; by default every call runs
    on one shared simulation of the topology, those that run alone on their links timed
    alone (:mod:`collsim.workloads.alone`) unless ``exact``."""
    if gpus is None and workload.parallelism.data is None:
        gpus = topology.gpus
    plan = build_plan(workload, gpus)
    if plan.world > topology.gpus:
        raise InputError(f"the workload needs {plan.world} GPUs; topology "
                         f"'{topology.name}' has {topology.gpus}", file=workload.file,
                         key="parallelism", line=workload.lines.get(("parallelism",)))
    if service is not None:
        return run_plan(plan, service)
    if exact:
        return run_plan(plan, shared(topology, costs))
    return run_alone(plan, topology, costs)
