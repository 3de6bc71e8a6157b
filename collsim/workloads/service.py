"""The seam between a training step and the timing of its communication.

The executor hands every collective call to a :class:`CollectiveService`: each member GPU
*arrives* at the call when its stream reaches it, and the service calls that member's
``done`` at the simulated time its part of the call ends. A service is built on the
executor's SimPy environment (``factory(env)``), so a service that simulates every call on
one shared fabric, with contention between concurrent calls, plugs in unchanged.

:class:`IsolatedCalls` is the stand-in: a call starts when its last member arrives and every
member finishes ``duration(call)`` later, each call alone (no contention between calls).
:func:`simulated` times a call by simulating it alone on a topology with
:func:`collsim.simulate.simulate`; :func:`alpha_beta` by a closed form.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Protocol

import simpy

from collsim.engine.costs import CostModel
from collsim.hardware.topology import Topology
from collsim.simulate import simulate


@dataclass(frozen=True)
class Call:
    """One collective call of a step, the same object for every member.

    ``group`` lists the member GPUs (global ranks) in the call's rank order; ``size`` is in
    bytes with nccl-tests' convention (the gathered buffer for allgather and reducescatter);
    ``root`` is an index into ``group`` (a pipeline send is a broadcast from member 0 to
    member 1). ``label`` is the process-group kind that issues it (``tensor``, ``data``,
    ``pipeline``, ``expert``, ``expert_data``) and ``key`` what makes it unique in the step.
    """

    key: Hashable
    label: str
    collective: str
    group: tuple[int, ...]
    size: int
    algorithm: str
    dtype: str
    root: int = 0

    @property
    def kind(self) -> str:
        """The row of the results table it counts in: ``data allreduce``, ``pipeline send``."""
        name = "send" if self.label == "pipeline" else self.collective
        return f"{self.label} {name}"


Done = Callable[[], None]


class CollectiveService(Protocol):
    """Times collective calls on the executor's environment."""

    def arrive(self, call: Call, gpu: int, done: Done) -> None:
        """GPU ``gpu`` (a member of ``call.group``) reaches ``call`` now; call ``done()`` at
        the simulated time its part of the call ends."""


ServiceFactory = Callable[[simpy.Environment], CollectiveService]


class IsolatedCalls:
    """The stand-in service: a call starts when its last member arrives and lasts
    ``duration(call)`` seconds for every member; calls do not slow each other down."""

    def __init__(self, env: simpy.Environment, duration: Callable[[Call], float]) -> None:
        self.env = env
        self.duration = duration
        self.waiting: dict[Hashable, list[Done]] = {}

    def arrive(self, call: Call, gpu: int, done: Done) -> None:
        members = self.waiting.setdefault(call.key, [])
        members.append(done)
        if len(members) < len(call.group):
            return
        del self.waiting[call.key]
        finish = self.env.timeout(self.duration(call))
        finish.callbacks.append(lambda _event: [member() for member in members])


def isolated(duration: Callable[[Call], float]) -> ServiceFactory:
    """A factory of :class:`IsolatedCalls` timing calls with ``duration``."""
    return lambda env: IsolatedCalls(env, duration)


def simulated(topology: Topology, costs: CostModel | None = None) -> Callable[[Call], float]:
    """Each call's time simulated alone on ``topology`` (its members on their GPUs), cached
    per distinct call shape, under ``costs`` (default: the shared fabric's model)."""
    from collsim.workloads.shared import fabric_costs  # shared imports this module

    costs = fabric_costs(topology) if costs is None else costs

    cache: dict[tuple, float] = {}

    def duration(call: Call) -> float:
        key = (call.collective, call.group, call.size, call.algorithm, call.dtype, call.root)
        if key not in cache:
            params = {"placement": list(call.group), "dtype": call.dtype}
            if call.root:
                params["root"] = call.root
            cache[key] = simulate(topology, call.collective, call.algorithm, len(call.group),
                                  call.size, params, costs).time_s
        return cache[key]

    return duration


def alpha_beta(alpha: float, beta: float) -> Callable[[Call], float]:
    """A closed form for tests and sketches: every call costs ``alpha + size * beta``."""
    return lambda call: alpha + call.size * beta
