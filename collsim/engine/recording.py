"""Recording a simulation for traces and link reports, without changing how it runs.

- :class:`RecordingFabric` is a :class:`~collsim.engine.fabric.Fabric` whose flows remember
  every rate they are given and when, so each directed link's load over time is exact.
- :class:`Recorder` wraps a call's programs so that each rank's steps are timed (a step runs
  from when the rank posts it until the rank resumes), and is the simulation's observer of
  combines. Steps of ``Parallel`` sub-programs count in the step that forked them.

Used as ``Simulation(topology, fabric=RecordingFabric, observer=recorder)`` and
``sim.call(job, gpus, recorder.programs(program, label), ...)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import simpy

from collsim.engine.buffers import Posted
from collsim.engine.costs import IDEAL, CostModel
from collsim.engine.fabric import Fabric, Flow
from collsim.engine.policy import DEFAULT_POLICY, FabricPolicy
from collsim.hardware.topology import Topology
from collsim.program import Copy, Job, Parallel, Pause, ProgramFactory, Recv, Reduce, Send

_RATE = Flow.rate  # the slot descriptor a recording flow's property reads and writes


def _flow_class(env: simpy.Environment, flows: list) -> type[Flow]:
    """A Flow subclass that logs itself and every rate it is set to, with the time."""

    class RecordingFlow(Flow):
        __slots__ = ("history", "created")

        def __init__(self, *args: object) -> None:
            self.history: list[tuple[float, float]] = []
            self.created = env.now
            super().__init__(*args)
            flows.append(self)

        @property
        def rate(self) -> float:
            return _RATE.__get__(self, Flow)

        @rate.setter
        def rate(self, value: float) -> None:
            _RATE.__set__(self, value)
            self.history.append((env.now, value))

    return RecordingFlow


class RecordingFabric(Fabric):
    """A fabric that keeps every flow it creates (:attr:`flows`), each with its rate
    history; otherwise the same fabric, giving the same rates and times."""

    def __init__(self, env: simpy.Environment, topology: Topology, costs: CostModel = IDEAL,
                 policy: FabricPolicy = DEFAULT_POLICY) -> None:
        self.flows: list[Flow] = []
        self.flow_class = _flow_class(env, self.flows)
        super().__init__(env, topology, costs, policy)


def segments(flow: Flow) -> list[tuple[float, float, float]]:
    """The flow's (start, end, rate) pieces while its bytes moved: from each rate it was
    given (the last one at an instant counts) to the next, the last one to its drain."""
    history = flow.history  # type: ignore[attr-defined]
    pieces: list[tuple[float, float]] = []
    for time, rate in history:
        if pieces and pieces[-1][0] == time:
            pieces[-1] = (time, rate)
        else:
            pieces.append((time, rate))
    out = []
    end_all = flow.drain_at
    for i, (time, rate) in enumerate(pieces):
        end = pieces[i + 1][0] if i + 1 < len(pieces) else end_all
        end = min(end, end_all)
        if end > time and rate > 0:
            out.append((time, end, rate))
    return out


@dataclass
class StepRecord:
    """One step of one rank of one call: when it was posted and when the rank resumed."""

    label: object
    rank: int
    index: int
    start: float
    end: float
    name: str


class Traced:
    """A program factory whose programs record their steps in a :class:`Recorder`."""

    def __init__(self, recorder: Recorder, programs: ProgramFactory, label: object) -> None:
        self.recorder, self.inner, self.label = recorder, programs, label

    def __call__(self, rank: int, job: Job):
        return self.recorder._wrap(self.inner(rank, job), self.label, rank)


def describe(step: object) -> str:
    """A short name of a step: 'send>3 recv<2+', 'parallel x4', 'reduce'."""
    if type(step) is Parallel:
        return f"parallel x{len(step.programs)}"
    ops = step if isinstance(step, tuple | list) else (step,)
    parts = []
    for op in ops:
        kind = type(op)
        if kind is Send:
            parts.append(f"send>{op.peer}")
        elif kind is Recv:
            parts.append(f"recv<{op.peer}" + ("+" if op.reduce else ""))
        elif kind is Reduce:
            parts.append("reduce")
        elif kind is Copy:
            parts.append("copy")
        elif kind is Pause:
            parts.append("pause")
    return " ".join(parts) or "step"


class Recorder:
    """Each rank's steps (:attr:`steps`) and combines (:attr:`combines`: label, rank,
    start, end) of the calls whose programs it wraps."""

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.steps: list[StepRecord] = []
        self.combines: list[tuple[object, int, float, float]] = []
        self.owners: dict[object, tuple[object, int]] = {}  # main-thread generator: owner

    def programs(self, programs: ProgramFactory, label: object) -> Traced:
        """``programs`` recording every step under ``label`` (a call's name)."""
        return Traced(self, programs, label)

    def _wrap(self, program, label: object, rank: int):
        env, steps = self.env, self.steps

        def wrapped():
            for index, step in enumerate(program):
                start = env.now
                yield step
                steps.append(StepRecord(label, rank, index, start, env.now, describe(step)))

        generator = wrapped()
        self.owners[generator] = (label, rank)
        return generator

    def owner(self, state: object) -> tuple[object, int] | None:
        """(label, rank) of an engine thread (a RankState), through its forking parents."""
        while getattr(state, "parent", None) is not None:
            state = state.parent
        return self.owners.get(getattr(state, "program", None))

    def combine(self, call: object, state: object, start: float, end: float) -> None:
        owner = self.owner(state)
        if owner is not None:
            self.combines.append((owner[0], owner[1], start, end))

    def transfers(self, flows: list[Flow]) -> list[tuple[object, int, int, float, float]]:
        """(label, sender rank, receiver rank, start, delivered) of every recorded flow of
        a traced call."""
        out = []
        for flow in flows:
            token = flow.token
            if isinstance(token, Posted):  # a buffered send: its receiver, once posted
                ends = (token.sender, token.receiver)
            elif isinstance(token, tuple) and len(token) == 3:
                ends = token[:2]
            else:
                continue
            sender, receiver = self.owner(ends[0]), self.owner(ends[1])
            if sender is None or receiver is None:
                continue
            out.append((sender[0], sender[1], receiver[1], flow.created,  # type: ignore
                        flow.drain_at + flow.latency))
        return out

