"""Several jobs on one fabric: each job (a workload's step, or a collective repeated back to
back) runs on its own GPUs from its own start time, and all of them share the topology's
links through one :class:`~collsim.workloads.shared.SharedFabric`. Each job's time is
compared with the same job run alone on the same topology (its slowdown)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import simpy

from collsim.engine.fabric import Fabric
from collsim.errors import InputError
from collsim.hardware.topology import Topology
from collsim.units import format_time
from collsim.workloads.executor import launch
from collsim.workloads.model import Workload
from collsim.workloads.plan import build_plan
from collsim.workloads.results import summarize
from collsim.workloads.service import Call, CollectiveService, Done
from collsim.workloads.shared import SharedFabric


@dataclass(frozen=True)
class WorkloadJob:
    """One training step of ``workload``."""

    workload: Workload


@dataclass(frozen=True)
class CollectiveJob:
    """``repeat`` calls of one collective, each rank starting the next when its part of the
    last one ends (as a benchmark loop does)."""

    collective: str
    algorithm: str
    size: int
    repeat: int = 1
    dtype: str = "float32"


@dataclass(frozen=True)
class JobSpec:
    """A job, the GPUs its ranks run on (rank r on ``gpus[r]``) and when it starts."""

    name: str
    gpus: tuple[int, ...]
    start: float
    what: WorkloadJob | CollectiveJob


@dataclass(frozen=True)
class JobsFile:
    name: str
    jobs: tuple[JobSpec, ...]
    file: str = "<jobs>"


@dataclass(frozen=True)
class JobResult:
    """A job's time (its step, or its calls from start to last finish) sharing the fabric
    with the others, and alone."""

    name: str
    kind: str
    gpus: int
    start_s: float
    time_s: float
    solo_s: float

    @property
    def slowdown(self) -> float:
        return self.time_s / self.solo_s if self.solo_s > 0 else 1.0


class Placed:
    """A job's view of the shared service: its ranks are placed on its GPUs and its call
    keys made unique among the jobs."""

    def __init__(self, service: CollectiveService, name: str, gpus: tuple[int, ...]) -> None:
        self.service, self.name, self.gpus = service, name, gpus
        self.placed: dict[Hashable, Call] = {}

    def arrive(self, call: Call, rank: int, done: Done) -> None:
        placed = self.placed.get(call.key)
        if placed is None:
            placed = self.placed[call.key] = dataclasses.replace(
                call, key=(self.name, call.key), group=tuple(self.gpus[r] for r in call.group))
        self.service.arrive(placed, self.gpus[rank], done)


def _start_collective(env: simpy.Environment, service: CollectiveService, job: JobSpec,
                      finish: dict[str, float]) -> None:
    """Start ``job``'s repeated calls: each GPU arrives at call i + 1 when its part of call
    i ends; the job's finish is its last GPU's."""
    what = job.what
    assert isinstance(what, CollectiveJob)
    calls = [Call((job.name, i), "job", what.collective, job.gpus, what.size,
                  what.algorithm, what.dtype) for i in range(what.repeat)]

    def arrive(gpu: int, index: int) -> None:
        if index == len(calls):
            finish[job.name] = max(finish.get(job.name, 0.0), env.now)
            return
        service.arrive(calls[index], gpu, lambda: arrive(gpu, index + 1))

    def begin(_event: object) -> None:
        for gpu in job.gpus:
            arrive(gpu, 0)

    env.timeout(job.start).callbacks.append(begin)


def _run(jobs: tuple[JobSpec, ...], topology: Topology, fabric: type[Fabric] = Fabric,
         observe: Callable[[Any], Any] | None = None
         ) -> tuple[dict[str, float], SharedFabric]:
    """Every job of ``jobs`` on one shared fabric; each one's time from its start, and the
    service (whose simulation's fabric a link report reads). ``observe``, if given, is
    called with the simulation before it runs."""
    env = simpy.Environment()
    service = SharedFabric(env, topology, fabric=fabric)
    if observe is not None:
        observe(service.simulation)
    launched = {}
    finish: dict[str, float] = {}
    for job in jobs:
        if isinstance(job.what, WorkloadJob):
            plan = build_plan(job.what.workload, len(job.gpus))
            if plan.world != len(job.gpus):
                raise InputError(f"job '{job.name}' gives {len(job.gpus)} GPUs; its workload "
                                 f"needs {plan.world}", key="gpus")
            launched[job.name] = launch(plan, env, Placed(service, job.name, job.gpus),
                                        at=job.start)
        else:
            _start_collective(env, service, job, finish)
    env.run()
    service.simulation.check()
    times = {}
    for job in jobs:
        if job.name in launched:
            times[job.name] = summarize(launched[job.name].plan,
                                        launched[job.name].timeline()).step_s
        else:
            times[job.name] = finish[job.name] - job.start
    return times, service


def run_jobs(jobs: JobsFile, topology: Topology, fabric: type[Fabric] = Fabric,
             shared: list[SharedFabric] | None = None,
             observe: Callable[[Any, str], Any] | None = None) -> list[JobResult]:
    """Each job's time sharing the fabric and alone, in file order. ``fabric`` is the
    Fabric class of the shared run (a RecordingFabric for a link report); its service is
    appended to ``shared`` if given. ``observe``, if given, is called with each simulation
    before it runs and what it simulates (a progress line)."""

    def watched(what: str) -> Callable[[Any], Any] | None:
        return None if observe is None else lambda simulation: observe(simulation, what)

    runs = len(jobs.jobs) + 1
    for job in jobs.jobs:
        bad = [g for g in job.gpus if g >= topology.gpus]
        if bad:
            raise InputError(f"job '{job.name}' uses GPU {bad[0]}; topology '{topology.name}' "
                             f"has {topology.gpus} GPUs", file=jobs.file, key="gpus")
    together, service = _run(jobs.jobs, topology, fabric,
                             watched(f"jobs sharing the fabric (run 1 of {runs})"))
    if shared is not None:
        shared.append(service)
    results = []
    for number, job in enumerate(jobs.jobs, 2):
        solo = _run((dataclasses.replace(job, start=0.0),), topology, Fabric,
                    watched(f"job {job.name} alone (run {number} of {runs})"))[0][job.name]
        kind = job.what.workload.name if isinstance(job.what, WorkloadJob) else \
            f"{job.what.collective}/{job.what.algorithm} x{job.what.repeat}"
        results.append(JobResult(job.name, kind, len(job.gpus), job.start, together[job.name],
                                 solo))
    return results


def format_jobs(results: list[JobResult], topology: str) -> str:
    """One line per job: its time together, alone, and the slowdown."""
    lines = [f"jobs on {topology}",
             f"{'job':<16}{'what':<30}{'GPUs':>6}{'start':>11}{'time':>12}{'alone':>12}"
             f"{'slowdown':>10}"]
    for r in results:
        lines.append(f"{r.name:<16}{r.kind:<30}{r.gpus:>6}{format_time(r.start_s):>11}"
                     f"{format_time(r.time_s):>12}{format_time(r.solo_s):>12}"
                     f"{r.slowdown:>9.3f}x")
    return "\n".join(lines)
