"""Runs a step plan on SimPy: every rank's streams as processes, compute tasks as GPU busy
spans, collective calls handed to a :class:`~collsim.workloads.service.CollectiveService`.

A stream starts at its rank's start offset and runs its tasks in plan order, each once the
tasks it depends on have ended. A collective task *arrives* at its call when it starts and
ends when the service says the rank's part is done. Noise is drawn before the run, rank by
rank in plan order, from one numpy Generator, so the same seed gives the same step whatever
order events happen in.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np
import simpy

from collsim.errors import SimulationError
from collsim.workloads.model import Noise
from collsim.workloads.plan import Plan
from collsim.workloads.results import StepResult, summarize
from collsim.workloads.service import CollectiveService, ServiceFactory


@dataclass
class Timeline:
    """When each task ran: ``start[r][i]``/``end[r][i]`` for task ``i`` of rank ``r`` (a
    collective task starts when the rank arrives), ``call_start[key]`` when a call's last
    member arrived, and each rank's start offset."""

    start: list[list[float]]
    end: list[list[float]]
    call_start: dict[Hashable, float]
    offsets: list[float]


def draw_noise(plan: Plan, noise: Noise) -> tuple[list[float], list[list[float]]]:
    """Per-rank start offsets and per-task compute factors (1 for communication)."""
    rng = np.random.default_rng(noise.seed)
    world = plan.world
    offsets = rng.uniform(0.0, noise.spread, world) if noise.spread else np.zeros(world)
    offsets = [float(o) for o in offsets]
    for rank, extra in noise.offsets:
        offsets[rank] += extra
    factors = []
    sigma = math.sqrt(math.log1p(noise.jitter ** 2))
    for tasks in plan.tasks:
        if noise.jitter:
            # Log-normal with mean one and coefficient of variation `jitter`.
            draws = rng.lognormal(-sigma * sigma / 2, sigma, len(tasks))
        else:
            draws = np.ones(len(tasks))
        factors.append([float(f) for f in draws])
    return offsets, factors


class Launched:
    """A plan started on an environment someone else runs: :meth:`timeline` after the run."""

    def __init__(self, plan: Plan, start: list[list[float]], end: list[list[float]],
                 call_start: dict[Hashable, float], offsets: list[float], at: float) -> None:
        self.plan, self.start, self.end = plan, start, end
        self.call_start, self.offsets, self.at = call_start, offsets, at

    def timeline(self) -> Timeline:
        """When each task ran, from the plan's own start; a SimulationError if a task never
        ran."""
        plan = self.plan
        stuck = [(r, plan.tasks[r][i].name) for r in range(plan.world)
                 for i, t in enumerate(self.end[r]) if math.isnan(t)]
        if stuck:
            rank, name = stuck[0]
            raise SimulationError(f"the step cannot finish: {len(stuck)} tasks never ran, "
                                  f"the first on rank {rank}: {name}")
        at = self.at
        if not at:
            return Timeline(self.start, self.end, self.call_start, self.offsets)
        return Timeline([[t - at for t in row] for row in self.start],
                        [[t - at for t in row] for row in self.end],
                        {key: t - at for key, t in self.call_start.items()}, self.offsets)


def launch(plan: Plan, env: simpy.Environment, calls: CollectiveService,
           noise: Noise | None = None, at: float = 0.0) -> Launched:
    """Start ``plan``'s streams on ``env`` at simulated time ``at`` (plus each rank's
    offset), its calls handed to ``calls``; run the environment, then read the timeline."""
    noise = plan.workload.noise if noise is None else noise
    offsets, factors = draw_noise(plan, noise)
    nan = math.nan
    start = [[nan] * len(tasks) for tasks in plan.tasks]
    end = [[nan] * len(tasks) for tasks in plan.tasks]
    done = [[env.event() for _ in tasks] for tasks in plan.tasks]
    arrived: dict[Hashable, int] = {}
    call_start: dict[Hashable, float] = {}

    def begin(rank: int, index: int):
        """Start task ``index`` of ``rank`` now; returns the event of its end."""
        task = plan.tasks[rank][index]
        start[rank][index] = env.now
        if task.call is None:
            return env.timeout(task.seconds * factors[rank][index])
        key = task.call.key
        arrived[key] = arrived.get(key, 0) + 1
        if arrived[key] == len(task.call.group):
            call_start[key] = env.now
        calls.arrive(task.call, rank, done[rank][index].succeed)
        return done[rank][index]

    def run(rank: int, indices: list[int]):
        if offsets[rank] + at:
            yield env.timeout(offsets[rank] + at)
        for index in indices:
            waiting = [done[rank][d] for d in plan.tasks[rank][index].deps
                       if not done[rank][d].processed]
            if waiting:
                yield env.all_of(waiting)
            finished = begin(rank, index)
            yield finished
            end[rank][index] = env.now
            if not done[rank][index].triggered:
                done[rank][index].succeed()

    for rank, tasks in enumerate(plan.tasks):
        streams: dict[str, list[int]] = {}
        for index, task in enumerate(tasks):
            if task.stream is None:
                env.process(run(rank, [index]))
            else:
                streams.setdefault(task.stream, []).append(index)
        for indices in streams.values():
            env.process(run(rank, indices))
    return Launched(plan, start, end, call_start, offsets, at)


def execute(plan: Plan, service: ServiceFactory, noise: Noise | None = None) -> Timeline:
    """Run ``plan`` once and return when every task ran."""
    env = simpy.Environment()
    launched = launch(plan, env, service(env), noise)
    env.run()
    return launched.timeline()


def run_plan(plan: Plan, service: ServiceFactory, noise: Noise | None = None) -> StepResult:
    """Execute ``plan`` with calls timed by ``service`` and summarize the step; ``noise``
    replaces the workload's own."""
    return summarize(plan, execute(plan, service, noise))
