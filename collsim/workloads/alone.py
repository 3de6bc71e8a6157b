"""The fast path of a training step: calls that run alone on their links timed once, alone.

Most calls of a step have the fabric to themselves while they run: a data-parallel step's
gradient buckets follow one another on one stream, every member arriving at one instant. A
call alone on its links and GPUs evolves as it would on a simulation of its own (max-min
rates depend only on the transfers that share links), so :class:`AloneCalls` times such a
call with :class:`~collsim.engine.timing.TimingEngine`, whose lockstep and symmetric paths
apply, once per shape (collective, members, size, algorithm, dtype, root), and hands each
member its finish time. A call whose members do not all arrive within WAIT of its time
alone runs on the shared simulation as before (:class:`~collsim.workloads.shared.SharedFabric`).

Whether the calls timed alone really were alone is checked after the step: each call holds
its *resources* (every link of a route between two of its endpoints, and its GPUs' reduction
units) from its start to its last member's end; calls timed alone that overlap in time a
call holding one of their resources run shared in a new attempt (:func:`run_alone`), and
after ATTEMPTS the whole step runs shared. The result's ``path`` says which ran. What is
left of the difference from the shared simulation is rounding and WAIT
(docs/engine.md#step-paths gives the bound and the measured error).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import simpy

from collsim.algorithms.registry import Algorithm, get_algorithm
from collsim.engine.costs import CostModel
from collsim.engine.loop import call_later, clock
from collsim.engine.timing import TimingEngine
from collsim.hardware.topology import Topology
from collsim.program import Job
from collsim.simulate import make_job
from collsim.workloads.executor import execute, run_plan
from collsim.workloads.plan import Plan
from collsim.workloads.results import StepResult, summarize
from collsim.workloads.service import Call, CollectiveService, Done, ServiceFactory
from collsim.workloads.shared import SharedFabric, fabric_costs, shared

WAIT = 1e-4
"""How long, as a fraction of a call's time alone, its first member waits for the others to
be timed alone together (they start at the last arrival): members a few nanoseconds apart,
as rounding leaves them after a call whose members finish apart, would otherwise run the
call on the shared simulation. docs/engine.md#step-paths bounds the error it adds."""


ATTEMPTS = 4
"""Runs of a step on the fast path before it runs all shared: each shares the calls found
overlapping in the ones before, the last every call of their kinds (``data allreduce``)."""


@dataclass(frozen=True)
class Window:
    """A call's hold on its resources: from ``start`` to ``end`` (simulated seconds), and
    whether it was timed alone (else on the shared simulation)."""

    start: float
    end: float
    resources: frozenset[int]
    alone: bool
    key: Hashable
    kind: str


@dataclass(frozen=True)
class AloneTiming:
    """A call timed on a simulation of its own: each member's finish after its start (the
    launch cost included), and the engine path that timed it."""

    finish: tuple[float, ...]
    path: str


class AloneCalls:
    """A :class:`~collsim.workloads.service.CollectiveService`: calls whose members all
    arrive within WAIT of the call's time alone are timed alone (cached per shape) from the
    last arrival, unless ``forced`` names their key or ``forced_kinds`` their kind; the
    others run on a
    :class:`SharedFabric` of the same environment. :meth:`conflicts` says afterwards whether
    a call timed alone shared a resource with another call running at the same time."""

    def __init__(self, env: simpy.Environment, topology: Topology,
                 costs: CostModel | None = None,
                 timings: dict[tuple, AloneTiming] | None = None,
                 forced: frozenset[Hashable] = frozenset(),
                 forced_kinds: frozenset[str] = frozenset()) -> None:
        self.env = env
        self.topology = topology
        self.costs = fabric_costs(topology) if costs is None else costs
        self.shared = SharedFabric(env, topology, self.costs)
        self.timings = {} if timings is None else timings  # by call shape, across runs
        # The keys, and the kinds, of the calls to run shared whatever their arrivals.
        self.forced, self.forced_kinds = forced, forced_kinds
        self._resources: dict[tuple, frozenset[int]] = {}
        self._jobs: dict[tuple, tuple[Algorithm, Job, list[int]]] = {}
        self._gathering: dict[Hashable, tuple[float, list[tuple[int, Done]]]] = {}
        self._full: dict[Hashable, list[float]] = {}  # shared calls: [first arrival, ends]
        self.windows: list[Window] = []
        self.fabric = self.shared.simulation.fabric  # for a progress line: its transfers
        self.alone = 0  # calls timed alone
        # The most any member was started after its arrival (waiting for the others), in
        # seconds: at most WAIT of its call's time alone.
        self.shifted = 0.0

    def arrive(self, call: Call, gpu: int, done: Done) -> None:
        key = call.key
        if key in self._full:
            self._arrive_shared(call, gpu, done)
            return
        if key in self.forced or call.kind in self.forced_kinds:
            self._full[key] = [clock(self.env), 0]
            self._arrive_shared(call, gpu, done)
            return
        entry = self._gathering.get(key)
        if entry is None:
            entry = self._gathering[key] = (clock(self.env), [])
            # Members coming within WAIT of the call's time alone are started together at
            # the last one's arrival; a call still missing members then runs shared.
            wait = WAIT * max(self.timing(call).finish, default=0.0)
            call_later(self.env, wait, self._settle_gathering, call)
        entry[1].append((gpu, done))
        if len(entry[1]) == len(call.group):
            del self._gathering[key]
            self._run_alone(call, entry[0], entry[1])

    def _settle_gathering(self, call: Call) -> None:
        entry = self._gathering.pop(call.key, None)
        if entry is None:
            return  # every member came in time: timed alone
        self._full[call.key] = [entry[0], 0]
        self.shifted = max(self.shifted, clock(self.env) - entry[0])
        for gpu, done in entry[1]:
            self._arrive_shared(call, gpu, done)

    def _arrive_shared(self, call: Call, gpu: int, done: Done) -> None:
        held = self._full[call.key]

        def finished() -> None:
            held[1] += 1
            if held[1] == len(call.group):
                self.windows.append(Window(held[0], clock(self.env), self.resources(call),
                                           False, call.key, call.kind))
            done()

        self.shared.arrive(call, gpu, finished)

    def _run_alone(self, call: Call, first: float, members: list[tuple[int, Done]]) -> None:
        """Time ``call`` alone from now, the last member's arrival (the first's: ``first``)."""
        timing = self.timing(call)
        self.alone += 1
        env, group = self.env, call.group
        now = clock(env)
        self.shifted = max(self.shifted, now - first)
        for gpu, done in members:
            call_later(env, timing.finish[group.index(gpu)], _call, done)
        end = now + max(timing.finish, default=0.0)
        self.windows.append(Window(now, end, self.resources(call), True, call.key,
                                   call.kind))

    def timing(self, call: Call) -> AloneTiming:
        """``call`` simulated alone from time 0, as the shared simulation would run it."""
        shape = _shape(call)
        cached = self.timings.get(shape)
        if cached is None:
            algorithm, job, gpus = self._job(call)
            run = TimingEngine(self.topology, gpus, job, algorithm.program, self.costs,
                               symmetric=algorithm.symmetric).run()
            cached = self.timings[shape] = AloneTiming(tuple(run.finish), run.path)
        return cached

    def _job(self, call: Call) -> tuple[Algorithm, Job, list[int]]:
        """The algorithm, job and GPUs of ``call``, as the shared simulation builds them."""
        shape = _shape(call)
        made = self._jobs.get(shape)
        if made is None:
            algorithm = get_algorithm(call.collective, call.algorithm)
            job, gpus = make_job(self.topology, algorithm, len(call.group), call.size,
                                 _params(call))
            made = self._jobs[shape] = (algorithm, job, gpus)
        return made

    def resources(self, call: Call) -> frozenset[int]:
        """What ``call`` may hold: every link of a route between two of its GPUs, or between
        one of them and a switch its algorithm's helper ranks sit on, and its GPUs'
        reduction units (as ``-1 - gpu``)."""
        topology = self.topology
        helpers = tuple(topology.endpoint(h.endpoint) for h in self._job(call)[1].helpers)
        cached = self._resources.get((call.group, helpers))
        if cached is None:
            links: set[int] = set()
            route = topology.route
            for src in call.group:
                for dst in call.group:
                    if src != dst:
                        links.update(route(src, dst))
                for helper in helpers:
                    links.update(route(src, helper))
                    links.update(route(helper, src))
            links.update(-1 - gpu for gpu in call.group)
            cached = self._resources[call.group, helpers] = frozenset(links)
        return cached

    def conflicts(self) -> set[Hashable]:
        """The keys of the calls that overlapped in time another call holding one of their
        resources, where one of the two was timed alone (none: every call timed alone was
        alone, and the step's times are the shared simulation's but for rounding)."""
        windows = sorted(self.windows, key=lambda w: (w.start, w.end))
        active: list[Window] = []
        clashing: set[Hashable] = set()
        for window in windows:
            active = [w for w in active if w.end > window.start]
            for other in active:
                if (window.alone or other.alone) and \
                        not window.resources.isdisjoint(other.resources):
                    clashing.update((window.key, other.key))
            active.append(window)
        return clashing


def _service(made: list[AloneCalls], topology: Topology, costs: CostModel | None,
             timings: dict[tuple, AloneTiming], forced: frozenset[Hashable],
             kinds: frozenset[str], seen: Callable[[object], None] | None,
             env: simpy.Environment) -> AloneCalls:
    """An :class:`AloneCalls` on ``env``, kept in ``made``: the executor's service factory."""
    made.append(AloneCalls(env, topology, costs, timings, forced, kinds))
    if seen is not None:
        seen(made[-1])
    return made[-1]


def watched(factory: ServiceFactory, seen: Callable[[object], None] | None) -> ServiceFactory:
    """``factory``, telling ``seen`` (if given) of each service it makes."""
    if seen is None:
        return factory

    def make(env: simpy.Environment) -> CollectiveService:
        service = factory(env)
        seen(service)
        return service

    return make


def _call(done: Done) -> None:
    done()


def _shape(call: Call) -> tuple:
    """What a call's timing alone depends on."""
    return (call.collective, call.group, call.size, call.algorithm, call.dtype, call.root)


def _params(call: Call) -> dict[str, Any]:
    """The call's algorithm parameters as the shared simulation builds them."""
    params: dict[str, Any] = {"placement": list(call.group), "dtype": call.dtype}
    if call.root:
        params["root"] = call.root
    return params


def run_alone(plan: Plan, topology: Topology, costs: CostModel | None = None,
              seen: Callable[[object], None] | None = None,
              timings: dict[tuple, AloneTiming] | None = None) -> StepResult:
    """Run ``plan`` with every call that runs alone timed alone, the others on the shared
    simulation. Calls found overlapping one timed alone on its resources run shared in the
    next attempt, in the last every call of their kinds (ATTEMPTS); then the whole step runs
    shared. The result's ``path`` says which ran (``fallback``: why not alone). ``seen``, if
    given, is told of each service made (a progress line reads its clock and transfers).
    ``timings``, if given, holds the calls timed alone by shape, kept across steps of one
    topology and cost model."""
    timings = {} if timings is None else timings
    forced: frozenset[Hashable] = frozenset()
    kinds: frozenset[str] = frozenset()
    for attempt in range(ATTEMPTS):
        services: list[AloneCalls] = []
        timeline = execute(plan, functools.partial(_service, services, topology, costs,
                                                   timings, forced, kinds, seen))
        service = services[0]
        clashing = service.conflicts()
        if not clashing:
            result = summarize(plan, timeline)
            return dataclasses.replace(result, path="alone" if service.alone else "shared")
        forced = forced | clashing
        if attempt == ATTEMPTS - 2:  # sharing those calls was not enough: their kinds
            kinds = kinds | {w.kind for w in service.windows if w.key in clashing}
    result = run_plan(plan, watched(shared(topology, costs), seen))
    return dataclasses.replace(
        result, path="shared",
        fallback=f"after {ATTEMPTS} attempts calls timed alone still overlapped others on "
                 "their links: every call ran on the shared simulation")
