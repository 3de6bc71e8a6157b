"""The timing interpreter: every rank is a process of the SimPy simulation running its
per-rank program on the fabric. A message starts moving when its send and its receive have
both been posted (the rendezvous rule, :mod:`collsim.engine.rendezvous`); combining received
data occupies the receiving GPU for ``bytes * gamma``."""

from __future__ import annotations

import gc
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import simpy

from collsim.engine.costs import IDEAL, CostModel
from collsim.engine.fabric import Fabric
from collsim.engine.loop import call_later, clock
from collsim.engine.policy import DEFAULT_POLICY, FabricPolicy
from collsim.engine.rendezvous import Rendezvous, bad_count, bad_peer, deadlock_message
from collsim.errors import SimulationError
from collsim.hardware.topology import Topology
from collsim.program import Copy, Job, ProgramFactory, Recv, Reduce, Send


class RankState:
    """One rank as a process of the simulation: its program, the operations of its current
    step still running, when its GPU's reduction unit is free, and when it finished."""

    __slots__ = ("rank", "gpu", "program", "pending", "posting", "finished_at",
                 "reduce_free_at")

    def __init__(self, rank: int, gpu: int, program: Iterator) -> None:
        self.rank = rank
        self.gpu = gpu
        self.program = program
        self.pending = 0
        self.posting = False
        self.finished_at: float | None = None
        self.reduce_free_at = 0.0


@dataclass
class TimingRun:
    """What one simulation measured."""

    time: float               # completion of the slowest rank, seconds
    finish: list[float]       # completion of each rank
    transfers: int            # point-to-point messages moved


class TimingEngine:
    """Runs ``programs`` for ``job`` with rank r on GPU ``gpus[r]`` of ``topology``, under
    the cost model ``costs`` (its launch cost is charged here, once: every rank starts
    ``costs.launch`` seconds in), on a ``fabric`` (a :class:`Fabric` or subclass) with the
    given ``policy``."""

    def __init__(self, topology: Topology, gpus: Sequence[int], job: Job,
                 programs: ProgramFactory, costs: CostModel = IDEAL,
                 policy: FabricPolicy = DEFAULT_POLICY, fabric: type[Fabric] = Fabric) -> None:
        self.env = simpy.Environment()
        self.launch = costs.launch
        self.fabric = fabric(self.env, topology, costs, policy)
        self.job = job
        self.itemsize = job.itemsize
        self.gamma = topology.gamma
        self.programs = programs
        self.ranks = [RankState(r, g, programs(r, job)) for r, g in enumerate(gpus)]
        self.nranks = len(self.ranks)
        self._ready: deque[RankState] = deque()
        self._resuming = False
        # Posted sends and receives waiting for their partner (the operations; the rank
        # that posted one is in its key).
        self._rendezvous = Rendezvous()

    def run(self) -> TimingRun:
        """Simulate to the end; a rank that can never finish is a SimulationError."""
        # The hot path creates no reference cycles, so the cyclic collector only costs time
        # here (40% of it at 256 ranks); it is paused for the run and restored after.
        collecting = gc.isenabled()
        gc.disable()
        try:
            self._ready.extend(self.ranks)
            if self.launch > 0:
                call_later(self.env, self.launch, lambda _: self._resume_ready())
            else:
                self._resume_ready()
            self.env.run()
        finally:
            if collecting:
                gc.enable()
        stuck = [s for s in self.ranks if s.finished_at is None]
        if stuck:
            raise SimulationError(self._deadlock_message(stuck))
        finish = [s.finished_at for s in self.ranks]
        return TimingRun(max(finish, default=0.0), finish, self.fabric.transfers)

    def _deadlock_message(self, stuck: list[RankState]) -> str:
        waits: dict[int, list] = {}
        for rank, op in self._rendezvous.waiting():
            waits.setdefault(rank, []).append(op)
        return f"at t={self.env.now:.9g} s, " + deadlock_message([s.rank for s in stuck], waits)

    # -- the rank process -------------------------------------------------------------------

    def _resume_ready(self) -> None:
        """Run every ready rank's program until each waits on an unfinished operation.

        A rank resumes in the callback of the event that completed its step, not through a
        ``simpy.Process``, which would cost one more event per step; the queue keeps ranks
        that complete each other's operations at the same instant from recursing.
        """
        if self._resuming:
            return
        self._resuming = True
        ready = self._ready
        fabric, ranks, nranks, itemsize = self.fabric, self.ranks, self.nranks, self.itemsize
        transfer, delivered = fabric.transfer, self._delivered
        meet_send, meet_recv = self._rendezvous.send, self._rendezvous.recv
        while ready:
            state = ready.popleft()
            rank = state.rank
            for step in state.program:
                state.posting = True
                ops = step if type(step) is tuple or type(step) is list else (step,)
                # A step of several transfers (a tree node feeding its children) holds
                # them so that those sharing a link share it from the start.
                batch = len(ops) > 2
                if batch:
                    fabric.holding = True  # until release()
                for op in ops:
                    kind = type(op)
                    if kind is not Send and kind is not Recv:
                        self._post_local(state, op)
                        continue
                    peer = op.peer
                    if peer == rank or not 0 <= peer < nranks:
                        raise bad_peer(rank, op)
                    state.pending += 1
                    # Once both sides are posted the bytes move; the send and the receive
                    # complete on delivery.
                    if kind is Send:
                        recv = meet_send((rank, peer, op.tag), op)
                        if recv is None:
                            continue
                        sender, send, receiver = state, op, ranks[peer]
                    else:
                        send = meet_recv((peer, rank, op.tag), op)
                        if send is None:
                            continue
                        sender, receiver, recv = ranks[peer], state, op
                    if send.count != recv.count:
                        raise bad_count(sender.rank, receiver.rank, recv, send.count)
                    transfer(sender.gpu, receiver.gpu, send.count * itemsize, delivered,
                             (sender, receiver, recv))
                if batch:
                    fabric.release()
                state.posting = False
                if state.pending:
                    break
            else:
                state.finished_at = clock(self.env)
        self._resuming = False

    def _op_done(self, state: RankState) -> None:
        state.pending -= 1
        if state.pending == 0 and not state.posting:
            self._ready.append(state)
            if not self._resuming:
                self._resume_ready()

    def _post_local(self, state: RankState, op: object) -> None:
        """Local operations: a reduction occupies the GPU; a copy is free."""
        kind = type(op)
        if kind is Reduce:
            state.pending += 1
            self._combine(state, op.count)
        elif kind is not Copy:
            raise SimulationError(f"rank {state.rank}: the program yielded {op!r}, "
                                  "not an operation")

    def _delivered(self, token: tuple[RankState, RankState, Recv]) -> None:
        sender, receiver, recv = token
        sender.pending -= 1
        if sender.pending == 0 and not sender.posting:
            self._ready.append(sender)
        if recv.reduce and self.gamma:
            self._combine(receiver, recv.count)
        else:
            receiver.pending -= 1
            if receiver.pending == 0 and not receiver.posting:
                self._ready.append(receiver)
        if not self._resuming:
            self._resume_ready()

    def _combine(self, state: RankState, count: int) -> None:
        """Occupy ``state``'s GPU for combining ``count`` elements, after earlier combines."""
        cost = count * self.itemsize * self.gamma
        if cost <= 0:
            self._op_done(state)
            return
        now = self.env.now
        start = state.reduce_free_at if state.reduce_free_at > now else now
        state.reduce_free_at = start + cost
        call_later(self.env, state.reduce_free_at - now, self._op_done, state)
