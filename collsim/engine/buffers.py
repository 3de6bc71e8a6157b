"""Buffered sends, as NCCL's slots: under a cost model with send buffers
(:func:`collsim.engine.costs.buffered`) a send that fits in its :class:`Connection`'s buffer
starts when posted and completes when its last byte has left; the message waits at the
receiver (a :class:`Posted`) until its receive is posted, which frees its room. A send that
does not fit waits for room or for its receive. Where the model counts slots across the
network (:func:`collsim.engine.costs.slot_credit`), such a connection also holds at most its
slots' count of messages, and a taken message frees its room and slot a credit's latency
later (NCCL's clear-to-send crossing back), one its receiver passes on only after the
receiver has copied its last slice out as well (:meth:`Staging.consumed
<collsim.engine.staging.Staging.consumed>`); a send whose receive is posted then still waits
for a slot while one is on its way back. A message that is one of a step's parts
(:attr:`~collsim.program.Send.parts`) holds that share of a slot. :class:`BufferedSends`
is the part of :class:`collsim.engine.simulation.Call` that does this."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from collsim.engine.caplinks import Route
from collsim.engine.fabric import Fabric
from collsim.engine.loop import call_later
from collsim.engine.rendezvous import Rendezvous, bad_count
from collsim.engine.staging import Staging, route_crosses_network
from collsim.program import Job, Recv, Send

if TYPE_CHECKING:
    from collsim.engine.simulation import RankState

SLOT_SLACK = 1e-9  # slots are counted in shares of a step's parts: rounding is not a slot


class Posted:
    """A buffered message: its sender and send, its size in bytes, and, once posted, its
    receiver and receive; whether it has started moving and been delivered."""

    __slots__ = ("sender", "send", "size", "receiver", "recv", "started", "delivered",
                 "connection", "key", "consumed")

    def __init__(self, sender: RankState, send: Send, size: int, key: tuple) -> None:
        self.sender = sender
        self.send = send
        self.size = size
        self.receiver: RankState | None = None
        self.recv: Recv | None = None
        self.started = False
        self.delivered = False
        self.connection: Connection | None = None
        self.key = key  # its rendezvous key: which receiver (orbit image) it goes to
        self.consumed = 0.0  # seconds from its take to its last slice copied out of the slot


class Connection:
    """A sender's buffer at one receiver (NCCL's slots of one channel, or of a lane's
    channels together): how many bytes it may hold ahead of their receives, how many it
    holds, and the messages waiting, in order, for room or for their receive. Across the
    network under a slot count, also how many messages it may hold (``slots``; None: no
    count), how many it holds (``count``, until their credit is back: a step's part counts
    as its share), how many of those were taken and wait for their credit (``returning``)
    and the credit's latency."""

    __slots__ = ("capacity", "held", "waiting", "slots", "count", "returning", "credit")

    def __init__(self, capacity: float, slots: int | None = None, credit: float = 0.0
                 ) -> None:
        self.capacity = capacity
        self.held = 0
        self.waiting: deque[Posted] = deque()
        self.slots = slots
        self.count = 0.0
        self.returning = 0
        self.credit = credit

    def fits(self, size: int, share: float = 1.0) -> bool:
        """Whether a message of ``size`` bytes holding ``share`` of a slot has room and a
        slot now."""
        return self.held + size <= self.capacity and \
            (self.slots is None or self.count + share <= self.slots + SLOT_SLACK)

    def slot_coming(self, share: float = 1.0) -> bool:
        """Whether the slots cannot take ``share`` of one more and one is on its way back: a
        send whose receive is posted waits for it (else it meets its receive, as when its
        bytes do not fit)."""
        return self.slots is not None and self.count + share > self.slots + SLOT_SLACK \
            and self.returning > 0


class BufferedSends:
    """Posting, starting, delivering and taking buffered messages (a mixin of
    :class:`~collsim.engine.simulation.Call`, which holds the state named below)."""

    job: Job
    itemsize: int
    fabric: Fabric
    ranks: list[RankState]
    transfers: int
    send_buffer: float
    capped: bool
    _rendezvous: Rendezvous
    _connections: dict[tuple, Connection]
    _staging: Staging | None
    _orbits: object
    _slot_credit: tuple[int, float] | None               # costs.slot_credit's
    env: object
    _op_done: Callable[[RankState], None]                 # the call's
    _combine: Callable[[RankState, int, int], None]       # Combines'
    _capped_route: Callable[..., Route]                   # CapLinks'

    def _send_buffered(self, state: RankState, send: Send, key: tuple) -> None:
        """Post a buffered send: it starts now if its receive is posted or its connection's
        buffer has room behind the messages already in it, else it waits for either."""
        message = Posted(state, send, send.count * self.itemsize, key)
        partner = self._rendezvous.send(key, message)
        connection = self._connection(key, send.lane)
        message.connection = connection
        if partner is not None:
            receiver, recv = partner
            if send.count != recv.count:
                raise bad_count(state.rank, receiver.rank, recv, send.count)
            message.receiver, message.recv = receiver, recv
            if connection.slot_coming(1 / send.parts):
                connection.waiting.append(message)
            else:
                self._start(message)
        elif not connection.waiting and connection.fits(message.size, 1 / send.parts):
            self._start(message)
        else:
            connection.waiting.append(message)

    def _connection(self, key: tuple, lane: int) -> Connection:
        """The connection a send of ``key`` goes on: sender, receiver (the orbit and its
        image on the symmetric path) and lane; its buffer holds the lane's channels' slots."""
        name = (key[0], key[1], lane) if len(key) == 3 else (key[0], key[1], key[3], lane)
        connection = self._connections.get(name)
        if connection is None:
            capacity = self.send_buffer * self.job.lane_weight(lane)
            counted = self._slot_credit
            if counted is not None and route_crosses_network(
                    self.fabric.topology, self.ranks[key[0]].gpu, self._target(key[1], key)):
                connection = Connection(capacity, *counted)
            else:
                connection = Connection(capacity)
            self._connections[name] = connection
        return connection

    def _target(self, rank: int, key: tuple) -> int:
        """The GPU a message of ``key`` to ``rank`` goes to (on the symmetric path, that of
        the image of the orbit the key names)."""
        orbits = self._orbits
        return self.ranks[rank].gpu if orbits is None else orbits.target(rank, key)

    def _start(self, message: Posted) -> None:
        """Move a buffered message's bytes: to its receiver, or to the GPU its receiver
        will post on (on the symmetric path, the image of the orbit the key names)."""
        message.started = True
        connection = message.connection
        connection.held += message.size
        connection.count += 1 / message.send.parts
        receiver, key = message.receiver, message.key
        rank = key[1] if receiver is None else receiver.rank
        target = self._target(rank, key)
        sender, send = message.sender, message.send
        self.transfers += 1
        route = self._capped_route(sender.gpu, target, send.lane, send.group) \
            if self.capped else None
        staging = self._staging
        if staging is not None:  # the GPU's copies of a slice on a network hop
            weight = self.job.lane_weight(send.lane)
            route = route or self.fabric.route(sender.gpu, target)
            if connection.slots is not None:
                message.consumed = staging.consumed(sender.gpu, target, message.size, weight,
                                                    send, route)
            route = staging.route(sender.gpu, target, message.size, weight, send, route)
        line = (self, sender.gpu, target, send.lane) if send.ordered else None
        self.fabric.transfer(sender.gpu, target, message.size, self._arrived, message,
                             route, line, self._drained)

    def _recv_buffered(self, message: Posted, state: RankState, recv: Recv) -> None:
        """A receive posted for a buffered message: take it if its bytes are there, else
        wait for them (starting the message now if it was waiting for its receive)."""
        if message.send.count != recv.count:
            raise bad_count(message.sender.rank, state.rank, recv, message.send.count)
        message.receiver, message.recv = state, recv
        if message.delivered:
            self._take(message)
        elif not message.started:
            connection = message.connection
            if connection.slot_coming(1 / message.send.parts):
                return  # it starts when a slot is back (_admit_waiting)
            connection.waiting.remove(message)
            self._start(message)
            self._admit_waiting(connection)

    def _drained(self, message: Posted) -> None:
        self._op_done(message.sender)

    def _arrived(self, message: Posted) -> None:
        message.delivered = True
        if message.receiver is not None:
            self._take(message)  # else it waits in the buffer for its receive

    def _take(self, message: Posted) -> None:
        """The receiver takes a delivered message: its slots free up for the next ones (a
        credit's latency later where slots are counted)."""
        connection = message.connection
        if connection.slots is None:
            self._free(message)
        else:
            connection.returning += 1
            call_later(self.env, message.consumed + connection.credit, self._free, message)
        receiver, recv = message.receiver, message.recv
        if recv.reduce and receiver.gamma:
            self._combine(receiver, recv.count, recv.lane)
        else:
            self._op_done(receiver)

    def _free(self, message: Posted) -> None:
        """A taken message's room and slot are free for the connection's next messages."""
        connection = message.connection
        connection.held -= message.size
        connection.count -= 1 / message.send.parts
        if connection.slots is not None:
            connection.returning -= 1
        if connection.waiting:
            self._admit_waiting(connection)

    def _admit_waiting(self, connection: Connection) -> None:
        """Start the connection's waiting messages, in order, while the buffer has room;
        under a slot count, then those whose receive is posted while no slot is coming."""
        waiting = connection.waiting
        while waiting and connection.fits(waiting[0].size, 1 / waiting[0].send.parts):
            message = waiting.popleft()
            self._start(message)
        if connection.slots is not None and waiting:
            for message in [m for m in waiting if m.recv is not None]:
                if connection.slot_coming(1 / message.send.parts):
                    break
                waiting.remove(message)
                self._start(message)

    def _unreceived(self) -> str:
        """The error of buffered sends that no receive ever took."""
        unreceived = [(src, item.send) for src, item in self._rendezvous.waiting()
                      if type(item) is Posted]
        parts = [f"rank {src}'s {send}" for src, send in unreceived[:6]]
        more = f" and {len(unreceived) - 6} more" if len(unreceived) > 6 else ""
        return (f"every rank finished with {len(unreceived)} sends never received: "
                f"{'; '.join(parts)}{more}")
