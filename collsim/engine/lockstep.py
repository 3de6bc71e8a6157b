"""The lockstep path: a regular algorithm's whole steps timed at once, without events.

An algorithm whose every step is an *exchange* (each rank posts one send and one receive
together and resumes when both are done, the senders sending along a fixed pattern of
pairs, as a ring does) may hand the engine those steps whole (:class:`Exchange`), beside its
per-rank programs. When no two pairs of the pattern share a directed link, no transfer ever
shares bandwidth: each pair's next transfer starts only after its previous one was
delivered (both ranks wait for their own transfers), so every transfer takes exactly
``latency + bytes / bottleneck`` and the whole run is a recurrence over the ranks' ready
times, computed with numpy one step of every rank at a time. The floating-point operations
are the event-driven engine's own, in its order (SimPy's ``now + delay`` included), so the
times are identical to the bit; where the pattern shares a link, :func:`run_lockstep` says
so (None) and the engine simulates the programs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from collsim.engine.costs import caps
from collsim.engine.fabric import Fabric
from collsim.program import Job


@dataclass(frozen=True)
class Exchange:
    """One step of every rank: rank ``senders[i]`` sends ``counts[i]`` elements to rank
    ``receivers[i]`` (combining them there if ``reduce``) on ``lane``; every rank is one
    sender and one receiver, and posts its send and its receive together.

    ``senders`` and ``receivers`` are the *pattern*: steps of one algorithm share the same
    two arrays (the same objects), which is how the engine knows it checked them once.
    ``counts`` is an array in the order of ``senders`` or one count for all.
    """

    senders: np.ndarray
    receivers: np.ndarray
    counts: np.ndarray | int
    reduce: bool = False
    lane: int = 0


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
                 exchanges: Iterable[Exchange], start: float, gamma: float
                 ) -> LockstepResult | None:
    """Time ``exchanges`` for ``job`` with rank r on GPU ``gpus[r]``, every rank starting at
    ``start`` (launch included) and combining at ``gamma`` seconds per byte; None when
    the steps do not fit the lockstep path (a pattern that shares a link, helper ranks,
    an exchange whose ranks are not each one sender and one receiver)."""
    p = job.nranks
    if job.helpers or len(gpus) != p:
        return None
    ready = np.full(p, start, dtype=np.float64)
    # When each GPU's reduction unit (of a lane) is free, as the engine's reduce_free_at.
    free: dict[int, np.ndarray] = {}
    lanes_total = sum(job.lanes)
    channel_cap, gpu_cap = caps(fabric.costs)
    itemsize = job.itemsize
    checked: tuple | None = None
    transfers = 0
    for exchange in exchanges:
        senders, receivers = exchange.senders, exchange.receivers
        if checked is None or checked[0] is not senders or checked[1] is not receivers \
                or checked[2] != exchange.lane:
            routes = _routes(fabric, gpus, job, senders, receivers, exchange.lane,
                             channel_cap, gpu_cap)
            if routes is None or (checked is not None):
                # A second pattern may overlap the first's last transfers on a link.
                return None
            latency, bottleneck, empty = routes
            checked = (senders, receivers, exchange.lane)
        transfers += p
        # A transfer starts once both its send and its receive are posted.
        now = np.maximum(ready[senders], ready[receivers])
        size = np.asarray(exchange.counts, dtype=np.int64) * itemsize
        # Fabric.transfer: drain = now + size/bottleneck; SimPy fires at now + delay with
        # delay = drain + latency - now.
        delivered = now + (now + size / bottleneck + latency - now)
        if np.any(size <= 0) or empty.any():
            # Fabric._call_at: no bytes (or no links) cost the latency alone.
            quiet = (size <= 0) | empty
            delivered = np.where(quiet, np.where(latency > 0, now + latency, now), delivered)
        done = np.empty(p, dtype=np.float64)
        done[senders] = delivered   # sends complete on delivery
        received = delivered
        if exchange.reduce and gamma:
            lane = exchange.lane
            share = job.lanes[lane] / lanes_total if 0 <= lane < len(job.lanes) else 1.0
            cost = size * gamma / share
            unit = free.get(lane)
            if unit is None:
                unit = free[lane] = np.zeros(p, dtype=np.float64)  # by sender index
            # Simulation._combine: the receiver's unit, after its queued combines.
            queued = unit[receivers]
            begin = np.where(queued > delivered, queued, delivered)
            finished = begin + cost
            combining = cost > 0
            received = np.where(combining, delivered + (finished - delivered), delivered)
            unit[receivers] = np.where(combining, finished, queued)
        done = np.maximum(done, _scatter(received, receivers, p))
        ready = done
    return LockstepResult(ready.tolist(), transfers)


def _scatter(values: np.ndarray, index: np.ndarray, p: int) -> np.ndarray:
    out = np.empty(p, dtype=np.float64)
    out[index] = values
    return out


def _routes(fabric: Fabric, gpus: Sequence[int], job: Job, senders: np.ndarray,
            receivers: np.ndarray, lane: int, channel_cap: float | None,
            gpu_cap: float | None) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(latency, bottleneck, no links) per pair of the pattern, or None when the pattern
    is not a permutation step or two pairs share a directed link."""
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
    used: set[int] = set()
    weight = job.lanes[lane] if lane < len(job.lanes) else 1.0
    for i, (s, r) in enumerate(zip(senders.tolist(), receivers.tolist(), strict=True)):
        channels, lat, neck = fabric.route(gpus[s], gpus[r])
        # Simulation._capped_route: a GPU's lane and total caps are links of its own, and
        # each GPU sends once per step, so they are never shared either.
        if channel_cap is not None:
            neck = min(neck, weight * channel_cap)
        if gpu_cap is not None:
            neck = min(neck, gpu_cap)
        for channel in channels:
            key = id(channel)
            if key in used:
                return None
            used.add(key)
        latency[i], bottleneck[i], empty[i] = lat, neck, not channels
    return latency, bottleneck, empty
