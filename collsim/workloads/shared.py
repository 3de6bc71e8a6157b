"""The real collective service: every call of a step runs on ONE simulation of the topology,
so the tensor, data, pipeline and expert groups contend for the links they share.

Each member of a call starts its part of the algorithm when its stream reaches the call (the
engine's :meth:`~collsim.engine.simulation.Call.admit`): its messages wait for partners that
have not arrived yet, as NCCL's kernels do, and it is done at its own finish time. The cost
model of the whole simulation comes from one function, :func:`fabric_costs`, the one place
to change to charge by protocol or link kind.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import simpy

from collsim.algorithms.registry import get_algorithm
from collsim.calls.plan import TEXTBOOK_FAMILY, TEXTBOOK_PROTOCOL
from collsim.engine.costs import IDEAL, CostModel
from collsim.engine.fabric import Fabric
from collsim.engine.recording import Recorder
from collsim.engine.simulation import Call as EngineCall
from collsim.engine.simulation import Simulation
from collsim.hardware.topology import Topology
from collsim.nccl.protocols import cost_model, nccl_figures
from collsim.simulate import make_job
from collsim.workloads.service import Call, Done, ServiceFactory


def fabric_costs(topology: Topology) -> CostModel:
    """The cost model every call of a step runs under. One simulation holds one model, so a
    machine that declares NCCL figures charges NCCL's Simple protocol of the ring family (the
    protocol NCCL runs gradient buckets of megabytes with: :mod:`collsim.calls.plan`); the
    canonical kinds charge the links' own figures."""
    if nccl_figures(topology) is None:
        return IDEAL
    return cost_model(topology, TEXTBOOK_FAMILY, TEXTBOOK_PROTOCOL, range(topology.gpus))


class SharedFabric:
    """A :class:`~collsim.workloads.service.CollectiveService` running every call on one
    :class:`~collsim.engine.simulation.Simulation` over ``topology`` on the executor's
    environment; ``fabric`` is the Fabric class (a recording one for traces)."""

    def __init__(self, env: simpy.Environment, topology: Topology,
                 costs: CostModel | None = None, fabric: type[Fabric] = Fabric,
                 recorder: Recorder | None = None) -> None:
        self.env = env
        self.topology = topology
        self.recorder = recorder  # records every call's steps (label: the call's key)
        self.simulation = Simulation(topology, fabric_costs(topology) if costs is None
                                     else costs, fabric=fabric, env=env, observer=recorder)
        self.simulation.attach()
        self.fabric = self.simulation.fabric  # for a progress line: its transfers
        self.calls: dict[Hashable, tuple[EngineCall, dict[int, Done]]] = {}
        self.labels: list[Call] = []   # the step's call of each engine call, in order

    def arrive(self, call: Call, gpu: int, done: Done) -> None:
        entry = self.calls.get(call.key)
        if entry is None:
            entry = self.calls[call.key] = (self._start(call), {})
        engine_call, dones = entry
        rank = call.group.index(gpu)
        dones[rank] = done
        engine_call.admit(rank)

    def _start(self, call: Call) -> EngineCall:
        """The engine call of ``call``, its members placed on their GPUs."""
        algorithm = get_algorithm(call.collective, call.algorithm)
        params: dict[str, Any] = {"placement": list(call.group), "dtype": call.dtype}
        if call.root:
            params["root"] = call.root
        job, gpus = make_job(self.topology, algorithm, len(call.group), call.size, params)
        programs = algorithm.program if self.recorder is None else \
            self.recorder.programs(algorithm.program, call.key)
        engine_call = self.simulation.call(job, gpus, programs, start=None)
        engine_call.on_rank_done = lambda c, rank: self.calls[call.key][1][rank]()
        self.labels.append(call)
        return engine_call


def shared(topology: Topology, costs: CostModel | None = None,
           fabric: type[Fabric] = Fabric) -> ServiceFactory:
    """A factory of :class:`SharedFabric` for :func:`~collsim.workloads.executor.run_plan`."""
    return lambda env: SharedFabric(env, topology, costs, fabric)
