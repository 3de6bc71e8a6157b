"""A training step run with recording: its Chrome trace (a process per GPU; a thread for
compute and one per communication stream, each call's algorithm steps nested in the call,
its sends, receives and combines beside; link utilisation counters) and its link loads."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import simpy

from collsim.engine.recording import Recorder, RecordingFabric
from collsim.hardware.topology import Topology
from collsim.output.linkload import LinkLoad, link_loads
from collsim.output.trace import Trace, add_links, add_steps
from collsim.workloads.executor import Timeline, launch
from collsim.workloads.model import Workload
from collsim.workloads.plan import Plan, build_plan
from collsim.workloads.results import StepResult, summarize
from collsim.workloads.shared import SharedFabric


@dataclass
class RecordedStep:
    plan: Plan
    timeline: Timeline
    result: StepResult
    service: SharedFabric

    def loads(self) -> list[LinkLoad]:
        return link_loads(self.service.simulation.fabric)  # type: ignore[arg-type]


def record_step(workload: Workload, topology: Topology, gpus: int | None = None,
                observe: Callable[[Any], Any] | None = None) -> RecordedStep:
    """Plan and run one step on a shared, recording simulation of ``topology``; ``observe``,
    if given, is called with the simulation before it runs (a progress line)."""
    if gpus is None and workload.parallelism.data is None:
        gpus = topology.gpus
    plan = build_plan(workload, gpus)
    env = simpy.Environment()
    service = SharedFabric(env, topology, fabric=RecordingFabric, recorder=Recorder(env))
    if observe is not None:
        observe(service.simulation)
    launched = launch(plan, env, service)
    env.run()
    service.simulation.check()
    timeline = launched.timeline()
    return RecordedStep(plan, timeline, summarize(plan, timeline), service)


def step_trace(step: RecordedStep) -> Trace:
    """The step's trace; pre-posted receives (pipeline) are async spans, without steps."""
    trace = Trace()
    plan, timeline = step.plan, step.timeline
    tids: dict[str, int] = {"compute": 1}
    streams: dict[object, tuple[int, ...]] = {}   # call key -> group
    stream_of: dict[object, int] = {}             # call key -> tid of its stream
    ident = 0
    for rank, tasks in enumerate(plan.tasks):
        pid = rank + 1
        trace.process(pid, f"GPU {rank}")
        for index, task in enumerate(tasks):
            start, end = timeline.start[rank][index], timeline.end[rank][index]
            if task.call is None:
                trace.thread(pid, 1, "compute")
                trace.span(pid, 1, task.category, start, end, "compute",
                           {"task": task.name})
                continue
            name = f"{task.call.kind} {task.call.size} B"
            if task.stream is None or task.preposted:
                ident += 1
                trace.thread(pid, 2, "posted receives")
                trace.async_span(pid, 2, name, start, end, "call", ident)
                continue
            tid = tids.setdefault(task.stream, 10 * len(tids))
            trace.thread(pid, tid, task.stream)
            trace.span(pid, tid, name, start, end, "call", {"algorithm": task.call.algorithm})
            streams[task.call.key] = task.call.group
            stream_of[task.call.key] = tid

    def place(label: object, rank: int):
        group = streams.get(label)
        if group is None or rank >= len(group):
            return None
        tid = stream_of[label]
        return group[rank] + 1, tid, tid + 1

    add_steps(trace, step.service.recorder, step.service.simulation.fabric, place)
    add_links(trace, step.loads())
    return trace
