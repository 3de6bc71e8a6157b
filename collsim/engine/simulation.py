"""The timing interpreter: a simulation (SimPy environment, fabric, cost model, the GPUs'
reduction units) hosting any number of collective calls, each running its per-rank programs
on the shared fabric.

A :class:`Call` is one collective: its job, programs, ranks and its own rendezvous (tags of
different calls never meet). It starts at a given simulated time or when code calls
:meth:`Call.start` (from another call's completion callback, say), pays the cost model's
launch cost, and reports its per-rank finish times through ``on_done``. Calls share the
fabric's links max-min fairly and each GPU's reduction unit in turn.

A message starts moving when its send and its receive have both been posted (the rendezvous
rule, :mod:`collsim.engine.rendezvous`), and its send completes on delivery. Under a cost
model with send buffers (:func:`collsim.engine.costs.buffered`, NCCL's slots) a send that
fits in its connection's buffer starts when posted and completes when its last byte has
left; the message waits at the receiver until its receive is posted, which frees its room
(:mod:`collsim.engine.buffers`). A send that does not fit waits for room or for its receive.
Combining received data occupies the receiving GPU (or switch, for a helper rank) for
``bytes * gamma``. A ``Parallel`` step forks one
thread per sub-program; the rank resumes when all have finished.

Each lane of a job combines on its own share of the GPU's reduce bandwidth: lane k of
weight w_k gets ``w_k / sum(w)`` of it (a receive's ``lane`` says which), as NCCL's channels
each reduce on their own SM. Combines on one share run one after another, whichever call
they belong to. So a lane of C identical channels combines exactly as fast as the C
channels side by side, and a job without lanes has the GPU's whole reduce bandwidth.

Where the cost model caps bandwidth (:func:`collsim.engine.costs.caps`), a send from GPU g on
lane k also crosses a virtual link (call, g, k) of ``weight_k x channel_cap`` and a virtual
link (call, g) of ``gpu_cap``, created when first used, and a send across the network one
of ``weight_k x net_channel_cap`` (:func:`collsim.engine.costs.network_cap`); without caps
routes are the fabric's own and nothing is added on the hot path.

:class:`Call` here posts, matches and resumes; its buffered sends, its combines and its
capped routes are mixins of their own (:mod:`collsim.engine.buffers`,
:mod:`collsim.engine.combines`, :mod:`collsim.engine.caplinks`).
"""

from __future__ import annotations

import gc
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import simpy

from collsim.engine.buffers import BufferedSends, Connection, Posted
from collsim.engine.caplinks import CapLinks, Route
from collsim.engine.combines import Combines
from collsim.engine.costs import (
    IDEAL,
    CostModel,
    buffered,
    caps,
    group_cap,
    network_cap,
    slot_credit,
)
from collsim.engine.fabric import Fabric
from collsim.engine.loop import call_later, clock
from collsim.engine.maxmin import Channel
from collsim.engine.policy import DEFAULT_POLICY, FabricPolicy
from collsim.engine.rendezvous import Rendezvous, bad_count, bad_peer, deadlock_message
from collsim.engine.staging import Staging
from collsim.errors import SimulationError
from collsim.hardware.topology import Topology
from collsim.program import Copy, Job, Parallel, Pause, ProgramFactory, Recv, Reduce, Send


class RankState:
    """One thread of a rank: its program, the operations of its current step still running,
    and when it finished. A rank's main thread has no ``parent``; the threads of a
    ``Parallel`` step name the thread that forked them."""

    __slots__ = ("rank", "gpu", "program", "pending", "posting", "finished_at", "parent",
                 "gamma")

    def __init__(self, rank: int, gpu: int, program: Iterator, gamma: float,
                 parent: RankState | None = None) -> None:
        self.rank = rank
        self.gpu = gpu            # the endpoint it runs on: a GPU, or a switch for a helper
        self.program = program
        self.pending = 0
        self.posting = False
        self.finished_at: float | None = None
        self.parent = parent
        self.gamma = gamma        # seconds per byte combined where it runs




@dataclass
class CallResult:
    """What one call measured: when it started, how long its slowest GPU rank took from
    then, each GPU rank's finish time (absolute), and the messages it moved."""

    start: float
    time: float
    finish: list[float]
    transfers: int


class Simulation:
    """A machine under a cost model, on which calls run (see the module docstring).

    ``fabric`` is the :class:`Fabric` class (or a subclass) to move bytes with, ``policy``
    its rate-update policy. ``observer``, if given, has ``combine(call, state, start, end)``
    and is told of every combine (a trace records them). ``env``, if given, is a SimPy
    environment shared with other processes (a training step's compute); whoever runs it
    calls :meth:`attach` first.
    """

    def __init__(self, topology: Topology, costs: CostModel = IDEAL,
                 policy: FabricPolicy = DEFAULT_POLICY, fabric: type[Fabric] = Fabric,
                 env: simpy.Environment | None = None, observer: object | None = None
                 ) -> None:
        self.env = simpy.Environment() if env is None else env
        self.observer = observer
        self.topology = topology
        self.costs = costs
        self.fabric = fabric(self.env, topology, costs, policy)
        # When each (endpoint, lane) share of a reduction unit is free: combines on one
        # share run in turn, whichever call they belong to.
        self.reduce_free_at: dict[tuple[int, int], float] = {}
        self.calls: list[Call] = []
        self.running = False
        self._starting: list[Call] = []  # started at the present instant before run()

    def call(self, job: Job, gpus: Sequence[int], programs: ProgramFactory,
             start: float | None = 0.0, on_done: Callable[[Call], None] | None = None
             ) -> Call:
        """A call of ``job`` with rank r on GPU ``gpus[r]``; it starts at simulated time
        ``start`` (None: when :meth:`Call.start` is called) and calls ``on_done(call)``
        when its last rank has finished."""
        call = Call(self, job, gpus, programs, on_done)
        self.calls.append(call)
        if start is not None:
            call.start(at=start)
        return call

    def attach(self) -> None:
        """Mark the simulation as running on an environment someone else runs: calls
        started from then on begin at once (after their launch cost)."""
        self.running = True

    def check(self) -> None:
        """A SimulationError for the first call that did not finish (or never started)."""
        for index, call in enumerate(self.calls):
            if call.result is None:
                prefix = f"call {index}: " if len(self.calls) > 1 else ""
                raise SimulationError(prefix + call.stuck_message())

    def run(self) -> None:
        """Simulate until nothing is left to do; a call that cannot finish (or was never
        started) is a SimulationError."""
        # The hot path creates no reference cycles, so the cyclic collector only costs time
        # here (40% of it at 256 ranks); it is paused for the run and restored after.
        collecting = gc.isenabled()
        gc.disable()
        self.running = True
        try:
            starting, self._starting = self._starting, []
            for call in starting:
                call._begin(None)
            self.env.run()
        finally:
            self.running = False
            if collecting:
                gc.enable()
        self.check()


class Call(BufferedSends, Combines, CapLinks):
    """One collective call on a :class:`Simulation` (made by :meth:`Simulation.call`)."""

    def __init__(self, simulation: Simulation, job: Job, gpus: Sequence[int],
                 programs: ProgramFactory, on_done: Callable[[Call], None] | None) -> None:
        topology = simulation.topology
        if len(gpus) != job.nranks:
            raise SimulationError(f"{len(gpus)} GPUs given for {job.nranks} ranks")
        if len(set(gpus)) != len(gpus) or not all(0 <= g < topology.gpus for g in gpus):
            raise SimulationError(f"ranks must sit on distinct GPUs of '{topology.name}': "
                                  f"{list(gpus)[:16]}")
        self.simulation = simulation
        self.env = simulation.env
        self.fabric = simulation.fabric
        self.job = job
        self.itemsize = job.itemsize
        self.programs = programs
        self.on_done = on_done
        self.on_rank_done: Callable[[Call, int], None] | None = None  # (call, GPU rank)
        self.ranks = self._rank_states(topology, gpus)
        self.nranks = len(self.ranks)
        total = sum(job.lanes)
        self._lane_share = [weight / total for weight in job.lanes]  # of reduce bandwidth
        self._unfinished = self.nranks
        self._ready: deque[RankState] = deque()
        self._resuming = False
        # Posted sends and receives waiting for their partner, as (thread, operation).
        self._rendezvous = Rendezvous()
        self.transfers = 0
        self.started_at: float | None = None
        self._admitted: list[bool] | None = None  # ranks started one by one (admit)
        self.result: CallResult | None = None
        self.channel_cap, self.gpu_cap = caps(simulation.costs)
        self.net_channel_cap = network_cap(simulation.costs)
        self.group_cap = group_cap(simulation.costs)  # of a channel's thread group
        # Bytes a connection buffers ahead of its receive (0: the rendezvous), and the
        # connections of buffered sends by (sender, receiver, lane).
        self.send_buffer = buffered(simulation.costs)
        self._connections: dict[tuple, Connection] = {}
        # Slots counted across the network and their credit's latency (None: bytes only).
        self._slot_credit = slot_credit(simulation.costs) if self.send_buffer > 0 else None
        self.capped = self.channel_cap is not None or self.gpu_cap is not None \
            or self.net_channel_cap is not None or self.group_cap is not None
        # The delay of a message crossing the network for the GPU's copies of its slices.
        self._staging = Staging.of(simulation.costs, topology)
        self._routes: dict[tuple[int, int, int, int | None], Route] = {}
        self._virtual: dict[tuple[int, int, bool, int | None], Channel] = {}
        # Peers a rank may name, and, when only representatives of orbits run, how their
        # sends and receives meet (collsim.engine.symmetry.OrbitKeys); None: rank to rank.
        self._peer_bound = self.nranks
        self._orbits = None

    def _rank_states(self, topology: Topology, gpus: Sequence[int]) -> list[RankState]:
        """The states of the ranks this call runs: every GPU rank, then the helper ranks."""
        job, programs, gamma = self.job, self.programs, topology.gamma
        ranks = [RankState(r, g, programs(r, job), gamma) for r, g in enumerate(gpus)]
        for h, helper in enumerate(job.helpers):
            try:
                where = topology.endpoint(helper.endpoint)
            except ValueError as exc:
                raise SimulationError(f"helper rank {job.nranks + h}: {exc}") from None
            ranks.append(RankState(job.nranks + h, where, programs(job.nranks + h, job),
                                   1.0 / helper.reduce_bandwidth))
        return ranks

    def _finish_times(self) -> list[float]:
        """Each GPU rank's finish time, once every rank has finished."""
        return [s.finished_at for s in self.ranks[:self.job.nranks]]

    def start(self, at: float | None = None) -> None:
        """Start the call now, or at simulated time ``at``; its ranks begin after the cost
        model's launch cost."""
        if self.started_at is not None:
            raise SimulationError("a call can be started only once")
        now = clock(self.env)
        delay = 0.0 if at is None else at - now
        if delay < 0:
            raise SimulationError(f"cannot start a call at t={at} s, before now ({now} s)")
        self.started_at = now if at is None else at
        wait = delay + self.simulation.costs.launch
        if wait > 0:
            call_later(self.env, wait, self._begin)
        elif self.simulation.running:
            self._begin(None)
        else:
            self.simulation._starting.append(self)  # begun by run(), collector paused

    def _begin(self, _: object) -> None:
        self._ready.extend(self.ranks)
        self._resume_ready()

    def admit(self, rank: int) -> None:
        """Start GPU rank ``rank`` alone, now plus the launch cost: for callers whose ranks
        reach the call at different times (its messages wait for their partners). The first
        admission is the call's start and also starts its helper ranks."""
        if self.started_at is None:
            self.started_at = clock(self.env)
            self._admitted = [False] * self.job.nranks
            states = [self.ranks[rank], *self.ranks[self.job.nranks:]]
        elif self._admitted is None or self._admitted[rank]:
            raise SimulationError(f"rank {rank} of the call was already started")
        else:
            states = [self.ranks[rank]]
        self._admitted[rank] = True
        launch = self.simulation.costs.launch
        if launch > 0:
            call_later(self.env, launch, self._begin_states, states)
        else:
            self._begin_states(states)

    def _begin_states(self, states: list[RankState]) -> None:
        self._ready.extend(states)
        if not self._resuming:
            self._resume_ready()

    @property
    def done(self) -> bool:
        return self.result is not None

    def stuck_message(self) -> str:
        """Why the call has not finished: never started, or which ranks are blocked."""
        if self.started_at is None:
            return "the call was never started"
        waits: dict[int, list] = {}
        for rank, item in self._rendezvous.waiting():
            if type(item) is not Posted:
                waits.setdefault(rank, []).append(item[1])
            elif not item.started:  # a buffered send moving blocks nobody
                waits.setdefault(rank, []).append(item.send)
        stuck = [s.rank for s in self.ranks if s.finished_at is None]
        return f"at t={self.env.now:.9g} s, " + deadlock_message(stuck, waits)

    # -- the rank process -------------------------------------------------------------------

    def _resume_ready(self) -> None:
        """Run every ready thread's program until each waits on an unfinished operation.

        A thread resumes in the callback of the event that completed its step, not through
        a ``simpy.Process``, which would cost one more event per step; the queue keeps
        threads that complete each other's operations at the same instant from recursing.
        """
        if self._resuming:
            return
        self._resuming = True
        ready = self._ready
        fabric, nranks, itemsize, capped = self.fabric, self._peer_bound, self.itemsize, self.capped
        transfer, delivered = fabric.transfer, self._delivered
        meet_send, meet_recv = self._rendezvous.send, self._rendezvous.recv
        orbits, buffering = self._orbits, self.send_buffer > 0
        moved = 0
        while ready:
            state = ready.popleft()
            rank = state.rank
            for step in state.program:
                kind = type(step)
                if kind is Parallel:
                    self._fork(state, step)
                    if state.pending:
                        break
                    continue
                state.posting = True
                ops = step if kind is tuple or kind is list else (step,)
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
                        key = (rank, peer, op.tag) if orbits is None else \
                            orbits.send_key(rank, peer, op.tag)
                        if buffering:
                            self._send_buffered(state, op, key)
                            continue
                        partner = meet_send(key, (state, op))
                        if partner is None:
                            continue
                        sender, send = state, op
                        receiver, recv = partner
                    else:
                        key = (peer, rank, op.tag) if orbits is None else \
                            orbits.recv_key(peer, rank, op.tag)
                        partner = meet_recv(key, (state, op))
                        if partner is None:
                            continue
                        if buffering:
                            self._recv_buffered(partner, state, op)
                            continue
                        sender, send = partner
                        receiver, recv = state, op
                    if send.count != recv.count:
                        raise bad_count(sender.rank, receiver.rank, recv, send.count)
                    moved += 1
                    target = receiver.gpu if orbits is None else \
                        orbits.target(receiver.rank, key)
                    route = self._capped_route(sender.gpu, target, send.lane, send.group) \
                        if capped else None
                    if self._staging is not None:
                        route = self._staging.route(
                            sender.gpu, target, send.count * itemsize,
                            self.job.lane_weight(send.lane), send,
                            route or fabric.route(sender.gpu, target))
                    # An ordered send goes in order on its connection, one line per call.
                    line = (self, sender.gpu, target, send.lane) if send.ordered else None
                    transfer(sender.gpu, target, send.count * itemsize, delivered,
                             (sender, receiver, recv), route, line)
                if batch:
                    fabric.release()
                state.posting = False
                if state.pending:
                    break
            else:
                self.transfers += moved
                moved = 0
                self._thread_done(state)
        self.transfers += moved
        self._resuming = False

    def _fork(self, state: RankState, step: Parallel) -> None:
        """Start one thread per sub-program of ``step``; ``state`` waits for them all."""
        threads = [RankState(state.rank, state.gpu, iter(program), state.gamma, state)
                   for program in step.programs]
        state.pending += len(threads)
        self._ready.extend(threads)

    def _thread_done(self, state: RankState) -> None:
        parent = state.parent
        if parent is not None:
            parent.pending -= 1
            if parent.pending == 0 and not parent.posting:
                self._ready.append(parent)
            return
        state.finished_at = clock(self.env)
        if self.on_rank_done is not None and state.rank < self.job.nranks:
            self.on_rank_done(self, state.rank)
        self._unfinished -= 1
        if self._unfinished == 0:
            if self._rendezvous.sends:
                raise SimulationError(self._unreceived())
            finish = self._finish_times()
            start = self.started_at
            self.result = CallResult(start, max(finish, default=start) - start, finish,
                                     self.transfers)
            if self.on_done is not None:
                self.on_done(self)

    def _op_done(self, state: RankState) -> None:
        state.pending -= 1
        if state.pending == 0 and not state.posting:
            self._ready.append(state)
            if not self._resuming:
                self._resume_ready()

    def _post_local(self, state: RankState, op: object) -> None:
        """Local operations: a reduction occupies the GPU; a pause takes its time; a copy
        is free."""
        kind = type(op)
        if kind is Reduce:
            state.pending += 1
            self._combine(state, op.count)
        elif kind is Pause:
            if op.seconds > 0:
                state.pending += 1
                call_later(self.env, op.seconds, self._op_done, state)
        elif kind is Parallel:
            raise SimulationError(f"rank {state.rank}: a Parallel step must be a step by "
                                  "itself, not part of a tuple of operations")
        elif kind is not Copy:
            raise SimulationError(f"rank {state.rank}: the program yielded {op!r}, "
                                  "not an operation")

    def _delivered(self, token: tuple[RankState, RankState, Recv]) -> None:
        sender, receiver, recv = token
        sender.pending -= 1
        if sender.pending == 0 and not sender.posting:
            self._ready.append(sender)
        if recv.reduce and receiver.gamma:
            self._combine(receiver, recv.count, recv.lane)
        else:
            receiver.pending -= 1
            if receiver.pending == 0 and not receiver.posting:
                self._ready.append(receiver)
        if not self._resuming:
            self._resume_ready()

