"""One collective call, simulated alone: the convenience over :mod:`collsim.engine.simulation`
that ``simulate()`` and the benchmarks use."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from collsim.engine.costs import IDEAL, CostModel
from collsim.engine.fabric import Fabric
from collsim.engine.lanes import LanesForm, run_lanes
from collsim.engine.lockstep import LockstepForm, run_lockstep, traced_exchanges
from collsim.engine.policy import DEFAULT_POLICY, FabricPolicy
from collsim.engine.simulation import RankState, Simulation
from collsim.engine.symmetry import Asymmetric, Declaration, choose_shift, symmetric_call
from collsim.hardware.topology import Topology
from collsim.program import Job, ProgramFactory

__all__ = ["RankState", "TimingEngine", "TimingRun"]


@dataclass
class TimingRun:
    """What one simulation measured."""

    time: float               # completion of the slowest rank, seconds
    finish: list[float]       # completion of each rank
    transfers: int            # point-to-point messages moved
    path: str = "full"        # "lockstep" (whole steps at once), "lanes" (each lane's whole
    # steps at its share of shared links), "symmetric" (one rank per
    # orbit of a rank shift), "pipeline" (from two small runs; finish is the time for every
    # rank) or "full" (every rank's events)
    fallback: str = ""        # why a job with a quicker path declared ran in full




class PipelineDecline(Exception):
    """The pipeline path does not apply to this call; the message says why."""


class FullRunRefused(Exception):
    """Every quicker path declined a call of more ranks than its caller lets run in full;
    the message says why each declined."""


# The pipeline path's run: given what to tell of each reference engine, the call's time and
# transfers, or PipelineDecline (collsim.calls.pipelined.pipeline_for).
PipelineRun = Callable[[Callable[["TimingEngine"], Any]], tuple[float, int]]


class TimingEngine:
    """Runs ``programs`` for ``job`` with rank r on GPU ``gpus[r]`` of ``topology``, under
    the cost model ``costs`` (its launch cost is charged once: every rank starts
    ``costs.launch`` seconds in), on a ``fabric`` (a :class:`Fabric` or subclass) with the
    given ``policy``: one call, starting at time 0, on a simulation of its own.

    The shortcuts below apply only when the policy allows them (``policy.shortcuts``) and
    the fabric class does (:meth:`Fabric.shortcuts_allowed`: a subclass may watch the
    events). The programs are timed on the lockstep path (:mod:`collsim.engine.lockstep`)
    when their steps fit it and ``lockstep`` is true; the results are the same to the bit.
    ``steps``, the algorithm's lockstep form (the registry's ``lockstep``), gives the whole
    steps; without it the engine traces the programs into them.

    ``symmetric``, the algorithm's declaration (the registry's ``symmetric``), lets the
    events run one representative rank per orbit of a rank shift
    (:mod:`collsim.engine.symmetry`) when the lockstep path declines; where the machine
    breaks the symmetry every rank runs, and ``fallback`` says why.

    ``pipeline`` (:func:`collsim.calls.pipelined.pipeline_for`) times a chunked tree pipeline
    on many nodes from full runs on a few (:mod:`collsim.calls.pipeline`, within a measured
    error, not exact) when the exact paths decline; ``exact`` turns it off. A call of more
    ranks than ``largest_full`` that no quicker path takes raises :class:`FullRunRefused`
    instead of running every rank's events."""

    def __init__(self, topology: Topology, gpus: Sequence[int], job: Job,
                 programs: ProgramFactory, costs: CostModel = IDEAL,
                 policy: FabricPolicy = DEFAULT_POLICY, fabric: type[Fabric] = Fabric,
                 lockstep: bool = True, symmetric: Declaration | None = None,
                 steps: LockstepForm | None = None, lanes: LanesForm | None = None,
                 pipeline: PipelineRun | None = None,
                 exact: bool = False, largest_full: int | None = None) -> None:
        self.topology, self.costs, self.policy = topology, costs, policy
        shortcuts = policy.shortcuts and fabric.shortcuts_allowed()
        self.symmetric = symmetric if shortcuts else None
        self.pipeline = pipeline if shortcuts and not exact else None
        self.largest_full = largest_full
        self.simulation = Simulation(topology, costs, policy, fabric)
        self.env = self.simulation.env
        self.fabric = self.simulation.fabric
        self.job = job
        self.gpus = list(gpus)
        self.programs = programs
        self.lockstep = lockstep and shortcuts
        self.steps = steps
        self.lanes = lanes
        self.call = self.simulation.call(job, gpus, programs, start=None)
        self.ranks = self.call.ranks

    def run(self) -> TimingRun:
        """Simulate to the end; a rank that can never finish is a SimulationError."""
        exchanges = None
        if self.lockstep:
            exchanges = self.steps(self.job) if self.steps is not None else \
                traced_exchanges(self.programs, self.job)
        if exchanges is not None:
            launch = self.simulation.costs.launch
            start = 0.0 + launch if launch > 0 else 0.0  # Call.start's wait, from t = 0
            quick = run_lockstep(self.fabric, self.gpus, self.job, exchanges, start,
                                 self.simulation.topology.gamma)
            if quick is not None:
                self.fabric.transfers = quick.transfers
                return TimingRun(max(quick.finish, default=0.0) - 0.0, quick.finish,
                                 quick.transfers, "lockstep")
        if self.lockstep and self.lanes is not None:
            quick_run = self._run_lanes(self.lanes)
            if quick_run is not None:
                return quick_run
        fallback = ""
        if self.symmetric is not None:
            quick_run, fallback = self._run_symmetric(self.symmetric)
            if quick_run is not None:
                return quick_run
        if self.pipeline is not None:
            quick_run, why = self._run_pipeline(self.pipeline)
            if quick_run is not None:
                return quick_run
            fallback = "; ".join(part for part in (fallback, why) if part)
        if self.largest_full is not None and self.job.nranks > self.largest_full:
            raise FullRunRefused(fallback or "no quicker path applies to this call")
        self.call.start()
        self.simulation.run()
        result = self.call.result
        return TimingRun(result.time, result.finish, result.transfers, fallback=fallback)

    def _run_lanes(self, form: LanesForm) -> TimingRun | None:
        """The shared-lanes path's run, or None where it does not apply."""
        lanes = form(self.job)
        if lanes is None:
            return None
        launch = self.simulation.costs.launch
        start = 0.0 + launch if launch > 0 else 0.0  # Call.start's wait, from t = 0
        quick = run_lanes(self.fabric, self.gpus, self.job, lanes[0], lanes[1], start,
                          self.simulation.topology.gamma)
        if quick is None:
            return None
        self.fabric.transfers = quick.transfers
        return TimingRun(max(quick.finish, default=0.0) - 0.0, quick.finish, quick.transfers,
                         "lanes")

    def _run_symmetric(self, declared: Declaration) -> tuple[TimingRun | None, str]:
        """The symmetric path's run, or None and why it does not apply."""
        shift, why = choose_shift(self.topology, self.fabric, self.gpus, self.job, declared)
        if shift is None:
            return None, why
        call = symmetric_call(self.topology, self.gpus, self.job, self.programs, self.costs,
                              self.policy, shift)
        # A progress display reads the clock and transfers of the simulation that runs.
        self.env, self.fabric = call.simulation.env, call.simulation.fabric
        try:
            call.simulation.run()
        except Asymmetric as exc:
            self.env, self.fabric = self.simulation.env, self.simulation.fabric
            return None, str(exc)
        result = call.result
        return TimingRun(result.time, result.finish, result.transfers * shift.order,
                         "symmetric"), ""

    def _run_pipeline(self, pipeline: PipelineRun) -> tuple[TimingRun | None, str]:
        """The pipeline path's run, or None and why it does not apply."""
        def follow(engine: TimingEngine) -> None:
            # A progress display reads the clock and transfers of the reference that runs.
            self.env, self.fabric = engine.env, engine.fabric

        try:
            time, transfers = pipeline(follow)
        except PipelineDecline as exc:
            return None, f"pipeline: {exc}"
        finally:
            self.env, self.fabric = self.simulation.env, self.simulation.fabric
        return TimingRun(time, [time] * self.job.nranks, transfers, "pipeline"), ""
