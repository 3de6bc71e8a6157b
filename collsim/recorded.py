"""One collective call simulated with recording (for ``--trace`` and ``--link-report``) and
with per-rank start offsets (stragglers: ``--skew``, ``--late``).

Each rank starts its program at its own offset (the engine's ``Call.admit``); its messages
wait for partners that have not started. The call's time runs from the first rank's start
to the last rank's finish; its *stretch* is that time over the same call with every rank
starting together.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import simpy

from collsim.algorithms.registry import get_algorithm
from collsim.callspec import CallSpec
from collsim.engine.costs import CostModel
from collsim.engine.recording import Recorder, RecordingFabric
from collsim.engine.simulation import Call, Simulation
from collsim.errors import InputError
from collsim.hardware.topology import Topology
from collsim.params import CallParams
from collsim.simulate import make_call


@dataclass
class Recorded:
    """A finished recorded call: its simulation, engine call, recorder, GPUs and offsets."""

    simulation: Simulation
    call: Call
    recorder: Recorder
    gpus: list[int]
    offsets: list[float]

    @property
    def fabric(self) -> RecordingFabric:
        return self.simulation.fabric  # type: ignore[return-value]

    @property
    def time_s(self) -> float:
        """From the first rank's start to the last rank's finish."""
        return max(self.call.result.finish) - min(self.offsets)


def draw_offsets(ranks: int, spread: float = 0.0, late: Sequence[tuple[int, float]] = (),
                 seed: int = 0) -> list[float]:
    """Start offsets: uniform in [0, spread] from numpy's Generator at ``seed``, plus each
    ``(rank, delay)`` of ``late``."""
    rng = np.random.default_rng(seed)
    offsets = [float(o) for o in rng.uniform(0.0, spread, ranks)] if spread else [0.0] * ranks
    for rank, delay in late:
        if not 0 <= rank < ranks:
            raise InputError(f"rank {rank} is not one of the call's ranks 0..{ranks - 1}",
                             key="--late")
        offsets[rank] += delay
    return offsets


def record_call(topology: Topology, collective: str, algorithm: str, ranks: int,
                size_bytes: int, params: CallParams | None = None,
                offsets: Sequence[float] | None = None, costs: CostModel | None = None,
                record: bool = True, observe: Callable[[Any], Any] | None = None) -> Recorded:
    """:func:`run_recorded` of the call given apart."""
    return run_recorded(CallSpec(topology, collective, algorithm, ranks, size_bytes,
                                 dict(params or {}), costs),
                        offsets, record, observe)


def run_recorded(call: CallSpec, offsets: Sequence[float] | None = None,
                 record: bool = True, observe: Callable[[Any], Any] | None = None) -> Recorded:
    """Simulate one call, rank r starting at ``offsets[r]`` (default all 0), recording
    its steps and every flow's rates unless ``record`` is False. The call runs under the
    machine's cost model (:mod:`collsim.calls.plan`) unless ``call.costs`` replaces it.
    ``observe``, if given, is called with the simulation before it runs (a progress line)."""
    topology, ranks = call.topology, call.ranks
    chosen = get_algorithm(call.collective, call.algorithm)
    job, gpus, plan = make_call(call, chosen)
    costs = plan.costs
    offsets = list(offsets) if offsets is not None else [0.0] * ranks
    env = simpy.Environment()
    recorder = Recorder(env)
    if record:
        simulation = Simulation(topology, costs, fabric=RecordingFabric, observer=recorder,
                                env=env)
        programs = recorder.programs(chosen.program, "call")
    else:
        simulation = Simulation(topology, costs, env=env)
        programs = chosen.program
    call = simulation.call(job, gpus, programs, start=None)
    simulation.attach()
    if observe is not None:
        observe(simulation)
    for rank in sorted(range(ranks), key=lambda r: (offsets[r], r)):
        env.timeout(offsets[rank]).callbacks.append(lambda _e, r=rank: call.admit(r))
    env.run()
    simulation.check()
    return Recorded(simulation, call, recorder, list(gpus), offsets)
