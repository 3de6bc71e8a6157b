"""The lockstep path: a regular algorithm's whole steps timed at once, without events.

An algorithm whose every step is an *exchange* (each rank posts one send and one receive
together and resumes when both are done, as in a ring or a pairwise exchange) may hand the
engine those steps whole (:class:`Exchange`), beside its per-rank programs. When no
transfer can ever meet another on a link (the pairs of a step cross disjoint links, and a
step's transfer starts on a link only after the link's last transfer was delivered, or had
drained under buffered sends; see :class:`Links`), every transfer takes exactly
``latency + bytes / bottleneck`` and the whole
run is a recurrence over the ranks' ready times, computed with numpy one step of every rank
at a time. The floating-point operations are the event-driven engine's own, in its order
(SimPy's ``now + delay`` included), so the times are identical to the bit; where transfers
could meet, :func:`run_lockstep` says so (None) and the engine simulates the programs.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from collsim.engine.costs import buffered, caps, network_cap, slot_credit
from collsim.engine.fabric import Fabric
from collsim.engine.staging import Staging, route_crosses_network
from collsim.program import Copy, Job, ProgramFactory, Recv, Send


@dataclass(frozen=True)
class Exchange:
    """One step of every rank: rank ``senders[i]`` sends ``counts[i]`` elements to rank
    ``receivers[i]`` (combining them there if ``reduce``) on ``lane``; every rank is one
    sender and one receiver, and posts its send and its receive together.

    ``senders`` and ``receivers`` are the *pattern*: steps that repeat one pattern share the
    same two arrays (the same objects), which is how the engine knows it checked them.
    ``counts`` is an array in the order of ``senders`` or one count for all.
    """

    senders: np.ndarray
    receivers: np.ndarray
    counts: np.ndarray | int
    reduce: bool = False
    lane: int = 0
    forwarded: bool = False   # every send passes on the previous step's receive (Send's)
    forwarding: bool = False  # every receiver passes its receive on next step (Send's)


# An algorithm's lockstep form: a job -> its programs' steps as whole steps of every rank
# (None where it has none for this job). Declared on the algorithm's registry record.
LockstepForm = Callable[[Job], Iterable[Exchange] | None]


def ring_pattern(ring: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """(senders, receivers) of a ring: position i sends to position i+1."""
    senders = np.asarray(ring, dtype=np.int64)
    return senders, np.roll(senders, -1)


@dataclass
class LockstepResult:
    """Each rank's finish time (absolute) and the transfers moved."""

    finish: list[float]
    transfers: int


def run_lockstep(fabric: Fabric, gpus: Sequence[int], job: Job,
                 exchanges: Iterable[Exchange], start: float, gamma: float,
                 shares: Shares | None = None, record: Any = None
                 ) -> LockstepResult | None:
    """Time ``exchanges`` for ``job`` with rank r on GPU ``gpus[r]``, every rank starting at
    ``start`` (launch included) and combining at ``gamma`` seconds per byte; None when
    the steps do not fit the lockstep path (two pairs of a pattern on one link, a transfer
    that would meet an earlier one still on a link, helper ranks, an exchange whose ranks
    are not each one sender and one receiver, a buffered send that may find its buffer full:
    :class:`Room`). ``shares`` gives links that other lanes also cross a share of their
    bandwidth (the shared-lanes path, :mod:`collsim.engine.lanes`); ``record``, if given,
    is sent each step's (pattern, start, end on the links) by its ``append``."""
    p = job.nranks
    if job.helpers or len(gpus) != p:
        return None
    ready = np.full(p, start, dtype=np.float64)
    # When each GPU's reduction unit (of a lane) is free, as the engine's reduce_free_at.
    free: dict[int, np.ndarray] = {}
    lanes_total = sum(job.lanes)
    channel_cap, gpu_cap = caps(fabric.costs)
    buffer = buffered(fabric.costs)
    buffering = buffer > 0
    counted = slot_credit(fabric.costs) if buffering else None
    room = Room(buffer, counted) if 0 < buffer < math.inf or counted is not None else None
    itemsize = job.itemsize
    links = Links(fabric)
    staging = Staging.of(fabric.costs, fabric.topology)
    patterns: dict[tuple[int, int, int], Pattern] = {}
    pattern: Pattern | None = None
    transfers = 0
    try:
        steps = iter(exchanges)
        exchange = next(steps, None)
    except Irregular:
        return None
    while exchange is not None:
        senders, receivers = exchange.senders, exchange.receivers
        if pattern is None or pattern.senders is not senders \
                or pattern.receivers is not receivers or pattern.lane != exchange.lane:
            key = (id(senders), id(receivers), exchange.lane)
            following = patterns.get(key)
            if following is None:
                following = _pattern(fabric, gpus, job, senders, receivers, exchange.lane,
                                     channel_cap, gpu_cap, links, shares)
                if following is None:
                    return None
                patterns[key] = following
            if pattern is not None:
                links.leave(pattern)
            pattern = following
            links.enter(pattern)
        latency, bottleneck = pattern.latency, pattern.bottleneck
        transfers += p
        size = np.asarray(exchange.counts, dtype=np.int64) * itemsize
        consumed = 0.0  # Staging.consumed: from a take to its slot's last slice copied out
        if staging is not None and pattern.crossing.any():
            # Staging.route: the slice delay, less what a passed-on message's slices hide,
            # on the pairs whose route crosses the network
            seconds = staging.seconds(exchange.forwarded, exchange.forwarding)
            if seconds > 0 or exchange.forwarding:
                weight = job.lane_weight(exchange.lane)
                staged = latency
                piece = np.minimum(size / weight / staging.slices, staging.slice_bytes)
                if exchange.forwarding:
                    hidden = np.minimum(latency, np.maximum(
                        0.0, (size - weight * piece) / bottleneck))
                    staged = latency - hidden
                    if counted is not None:
                        consumed = np.where(pattern.crossing & (size > 0),
                                            hidden + piece * staging.read_seconds, 0.0)
                delay = piece * seconds
                latency = np.where(pattern.crossing & (size > 0), staged + delay, latency)
        if buffering:
            # A buffered send starts when posted; Fabric.transfer: drain = now + size/
            # bottleneck, an event at now + (drain - now); delivery ``latency`` after it.
            now = ready[senders]
            if room is not None and not room.fits(size, now, senders,
                                                  job.lane_weight(exchange.lane)):
                return None
            drained = now + (now + size / bottleneck - now)
            delivered = drained + latency
        else:
            # A transfer starts once both its send and its receive are posted; SimPy fires
            # at now + delay with delay = drain + latency - now.
            now = np.maximum(ready[senders], ready[receivers])
            delivered = now + (now + size / bottleneck + latency - now)
        quiet = None
        if np.any(size <= 0) or pattern.empty.any():
            # Fabric._call_at: no bytes (or no links) cost the latency alone.
            quiet = (size <= 0) | pattern.empty
            delivered = np.where(quiet, np.where(latency > 0, now + latency, now), delivered)
            if buffering:
                drained = np.where(quiet, now, drained)
        # A link is free again when its transfer's last byte has left (buffered: the drain
        # event detaches it) or when it was delivered.
        if not links.clear(pattern, now, quiet, drained if buffering else delivered):
            return None
        if record is not None:
            record.append((pattern, now, drained if buffering else delivered))
        done = np.empty(p, dtype=np.float64)
        # Sends complete on delivery, buffered ones when their bytes have left; a receive
        # completes on delivery, or when posted if its message was there before.
        done[senders] = drained if buffering else delivered
        received = np.maximum(delivered, ready[receivers]) if buffering else delivered
        if room is not None:  # taken by its receiver then; across the network, its slot
            # is free a credit later (Call._take's call_later: taken + consumed + credit)
            room.sent(received if counted is None or not pattern.crossing.any() else
                      np.where(pattern.crossing, received + consumed + counted[1], received),
                      senders, p)
        if exchange.reduce and gamma:
            lane = exchange.lane
            share = job.lane_weight(lane) / lanes_total if 0 <= lane < len(job.lanes) else 1.0
            cost = size * gamma / share
            unit = free.get(lane)
            if unit is None:
                unit = free[lane] = np.zeros(p, dtype=np.float64)  # by rank
            # Simulation._combine: the receiver's unit, after its queued combines.
            queued = unit[receivers]
            begin = np.where(queued > received, queued, received)
            finished = begin + cost
            combining = cost > 0
            received = np.where(combining, received + (finished - received), received)
            unit[receivers] = np.where(combining, finished, queued)
        done = np.maximum(done, _scatter(received, receivers, p))
        ready = done
        try:
            exchange = next(steps, None)
        except Irregular:
            return None
    return LockstepResult(ready.tolist(), transfers)


class Room:
    """Whether every buffered send of a step finds room in its connection's buffer
    (``capacity`` bytes a channel, and where ``counted`` gives (slots, credit) at most that
    many messages), so that it starts when posted, as the recurrence assumes.

    Each rank sends one message a step. If the messages a rank sent k steps ago and earlier
    have all been taken by their receivers when it posts, at most k-1 are held anywhere, so
    at most (k-1) x the largest message so far; k is the largest count for which that still
    leaves room. ``taken`` keeps, per step, the latest take time of each rank's messages up
    to that step (a running maximum: receivers take messages of different patterns in any
    order); when a rank's earlier messages may still fill the buffer the steps go back to
    the events, which hold the send until there is room. Under a slot count k is at most the
    slots, and a message across the network counts as taken a credit after its receiver took
    it (and, if passed on, copied its last slice out; :meth:`sent` is given those times): the
    slot count is applied to every pair, which only errs to the events.
    """

    DEPTH = 64  # steps of take times kept: k is capped here, which only errs to the events

    def __init__(self, capacity: float, counted: tuple[int, float] | None = None) -> None:
        self.capacity = capacity
        self.slots = None if counted is None else counted[0]
        self.largest = 0
        self.steps = 0
        self.taken: deque[np.ndarray] = deque(maxlen=self.DEPTH)

    def fits(self, size: np.ndarray, now: np.ndarray, senders: np.ndarray,
             weight: float) -> bool:
        capacity = self.capacity * weight
        biggest = int(np.max(size))
        self.largest = max(self.largest, biggest)
        if biggest > capacity:
            return False  # it waits for its receive
        if self.largest == 0 or capacity == math.inf:
            if self.slots is None:
                return True
            k = self.slots  # empty messages hold a slot too
        else:
            k = int((capacity - biggest) // self.largest) + 1
            if self.slots is not None:
                k = min(k, self.slots)
        if self.steps < k:
            return True  # fewer messages sent than could fill the buffer
        back = self.taken[-min(k, len(self.taken))]
        return bool(np.all(back[senders] <= now))

    def sent(self, taken: np.ndarray, senders: np.ndarray, p: int) -> None:
        latest = _scatter(taken, senders, p)
        if self.taken:
            latest = np.maximum(latest, self.taken[-1])
        self.taken.append(latest)
        self.steps += 1


@dataclass
class Pattern:
    """One pattern's pairs: routes, and the links each pair's transfers occupy (flattened:
    ``hops[j]`` is a link index, ``pair_of[j]`` the pair crossing it)."""

    senders: np.ndarray
    receivers: np.ndarray
    lane: int
    latency: np.ndarray
    bottleneck: np.ndarray
    empty: np.ndarray
    hops: np.ndarray
    pair_of: np.ndarray
    crossing: np.ndarray  # per pair: its route crosses the network (slice delay, slot credit)


class Links:
    """Which transfer each link carried last, and until when (its delivery: the fabric
    counts an uncontended transfer on its links until then; under buffered sends its last
    byte out, when the drain event detaches it).

    While one pattern repeats, a link carries one pair's transfers only, and that pair's
    next transfer starts once both its ranks resumed, after its previous one was delivered:
    nothing to check. When the pattern changes, a transfer must start after the link's last
    one was delivered, or at that very instant if it shares a rank with it (whose delivery
    event then fired before that rank resumed); otherwise the two might share the link and
    the steps go back to the events.
    """

    def __init__(self, fabric: Fabric) -> None:
        self.index = {id(channel): i for i, channel in enumerate(fabric.channels)}
        count = len(fabric.channels)
        self.until = np.full(count, -np.inf)
        self.sender = np.full(count, -1, dtype=np.int64)
        self.receiver = np.full(count, -1, dtype=np.int64)
        self.last: np.ndarray | None = None   # per pair of the current pattern
        self.fresh = True  # the pattern has just been entered: check its first step

    def enter(self, pattern: Pattern) -> None:
        self.last = np.full(len(pattern.senders), -np.inf)
        self.fresh = True

    def leave(self, pattern: Pattern) -> None:
        """Write the pattern's last transfers onto its links."""
        attached = self.last[pattern.pair_of] > -np.inf
        hops, pairs = pattern.hops[attached], pattern.pair_of[attached]
        self.until[hops] = self.last[pairs]
        self.sender[hops] = pattern.senders[pairs]
        self.receiver[hops] = pattern.receivers[pairs]

    def clear(self, pattern: Pattern, now: np.ndarray, quiet: np.ndarray | None,
              delivered: np.ndarray) -> bool:
        """Whether this step's transfers find their links free; remember their deliveries."""
        if self.fresh:
            self.fresh = False
            moving = np.ones(len(now), dtype=bool) if quiet is None else ~quiet
            entry = moving[pattern.pair_of]
            hops, pairs = pattern.hops[entry], pattern.pair_of[entry]
            begin, until = now[pairs], self.until[hops]
            early = begin <= until
            if early.any():
                hops, pairs, begin, until = hops[early], pairs[early], begin[early], until[early]
                s, r = pattern.senders[pairs], pattern.receivers[pairs]
                a, b = self.sender[hops], self.receiver[hops]
                shared = (a == s) | (a == r) | (b == s) | (b == r)
                if not np.all((begin == until) & shared):
                    return False
        self.last = delivered if quiet is None else np.where(quiet, self.last, delivered)
        return True


def _scatter(values: np.ndarray, index: np.ndarray, p: int) -> np.ndarray:
    out = np.empty(p, dtype=np.float64)
    out[index] = values
    return out


# Where lanes share links: (link index, lane) -> the lane's share of the link's bandwidth,
# and (GPU, lane) -> its share of the GPU's cap; missing: the whole (the shared-lanes path).
Shares = tuple[Callable[[int, int], float], Callable[[int, int], float]]


def _pattern(fabric: Fabric, gpus: Sequence[int], job: Job, senders: np.ndarray,
             receivers: np.ndarray, lane: int, channel_cap: float | None,
             gpu_cap: float | None, links: Links, shares: Shares | None = None
             ) -> Pattern | None:
    """The pattern's routes, or None when it is not a permutation step or two of its pairs
    share a directed link."""
    p = job.nranks
    if len(senders) != p or len(receivers) != p or lane < 0:
        return None
    if len(set(senders.tolist())) != p or len(set(receivers.tolist())) != p:
        return None
    if np.any(senders == receivers):
        return None
    latency = np.empty(p, dtype=np.float64)
    bottleneck = np.empty(p, dtype=np.float64)
    empty = np.zeros(p, dtype=bool)
    crossing = np.zeros(p, dtype=bool)
    hops: list[int] = []
    pair_of: list[int] = []
    used: set[int] = set()
    weight = job.lane_weight(lane)
    index = links.index
    net_cap, topology = network_cap(fabric.costs), fabric.topology
    for i, (s, r) in enumerate(zip(senders.tolist(), receivers.tolist(), strict=True)):
        channels, lat, neck = fabric.route(gpus[s], gpus[r])
        if shares is not None:  # each link at this lane's share of it
            neck = min((channel.bandwidth * shares[0](index[id(channel)], lane)
                        for channel in channels), default=neck)
        # Simulation._capped_route: a GPU's lane and total caps are links of its own, and
        # each GPU sends once per step, so they are never shared either.
        if channel_cap is not None:
            neck = min(neck, weight * channel_cap)
        crossing[i] = route_crosses_network(topology, gpus[s], gpus[r])
        if net_cap is not None and crossing[i]:
            neck = min(neck, weight * net_cap)
        if gpu_cap is not None:
            neck = min(neck, gpu_cap * (1.0 if shares is None else shares[1](gpus[s], lane)))
        for channel in channels:
            link = index[id(channel)]
            if link in used:
                return None
            used.add(link)
            hops.append(link)
            pair_of.append(i)
        latency[i], bottleneck[i], empty[i] = lat, neck, not channels
    return Pattern(senders, receivers, lane, latency, bottleneck, empty,
                   np.asarray(hops, dtype=np.int64), np.asarray(pair_of, dtype=np.int64),
                   crossing)


class Irregular(Exception):
    """A program step that is not one send and one receive meeting their partners' in the
    same step of every rank (raised by :func:`traced_exchanges`)."""


def traced_exchanges(programs: ProgramFactory, job: Job) -> Iterator[Exchange]:
    """The lockstep form of any per-rank programs, found by running them side by side: each
    round takes every rank's next step (free copies aside), and it is an :class:`Exchange`
    when every rank posts one send and one receive (with copies) whose partners are in the
    same round, same tags and counts, one lane and one combining rule for all. Anything else
    raises :class:`Irregular` (the engine then runs the events on programs of its own)."""
    p = job.nranks
    if job.helpers:
        raise Irregular
    ranks = [iter(programs(r, job)) for r in range(p)]
    senders = np.arange(p)
    patterns: dict[bytes, np.ndarray] = {}
    to = np.empty(p, dtype=np.int64)
    counts = np.empty(p, dtype=np.int64)
    tags = np.empty(p, dtype=np.int64)
    frm = np.empty(p, dtype=np.int64)
    expect = np.empty(p, dtype=np.int64)
    expect_tag = np.empty(p, dtype=np.int64)
    while True:
        finished = 0
        reduce = lane = flags = None
        for r, program in enumerate(ranks):
            step = next(program, None)
            while type(step) is Copy or (type(step) is tuple and step
                                         and all(type(op) is Copy for op in step)):
                step = next(program, None)  # free, and no message: the rank goes on
            if step is None:
                finished += 1
                continue
            if type(step) is not tuple and type(step) is not list:
                raise Irregular
            send = recv = None
            for op in step:
                kind = type(op)
                if kind is Send and send is None:
                    send = op
                elif kind is Recv and recv is None:
                    recv = op
                elif kind is not Copy:
                    raise Irregular
            if send is None or recv is None or send.parts != 1:  # parts: slots are shared
                raise Irregular
            if reduce is None:
                reduce, lane = recv.reduce, recv.lane
            if recv.reduce != reduce or recv.lane != lane or send.lane != lane \
                    or send.group is not None:  # a thread group's cap: the event engine's
                raise Irregular
            if flags is None:
                flags = (send.forwarded, send.forwarding)
            elif flags != (send.forwarded, send.forwarding):
                raise Irregular
            if not (0 <= send.peer < p and 0 <= recv.peer < p) or send.peer == r \
                    or recv.peer == r:
                raise Irregular
            to[r], counts[r], tags[r] = send.peer, send.count, send.tag
            frm[r], expect[r], expect_tag[r] = recv.peer, recv.count, recv.tag
        if finished == p:
            return
        if finished:
            raise Irregular
        # Each send meets its receiver's receive: from this rank, same tag and count.
        if not (np.array_equal(frm[to], senders) and np.array_equal(expect_tag[to], tags)
                and np.array_equal(expect[to], counts)):
            raise Irregular
        key = to.tobytes()
        receivers = patterns.get(key)
        if receivers is None:
            receivers = patterns[key] = to.copy()
        yield Exchange(senders, receivers, counts.copy(), bool(reduce), int(lane), *flags)
