"""The shared-lanes path: several lanes (NCCL's channels on rings of their own) that share
links, each timed alone on the lockstep path at its share of every link it shares.

Lanes run side by side, so a link may carry one transfer of each of several lanes. A shared
link whose transfers all fit at once, each at its own caps and unshared links, never holds
one back, whatever moves when: it is timed as if unshared. On every other shared link, when
each lane's own steps fit the lockstep path and every transfer on the link starts and ends
together with the other lanes' transfers on it, step after step, the set of transfers on
each link never changes while they move; and when every transfer's tightest share is on a
link (or cap) whose transfers all have that very share, that link is full and the shares
are the max-min fair rates. The event engine then grants each lane exactly ``capacity x
weight / weight of the lanes on the link`` of its tightest link all along, which is what
each lane is timed with here. Both conditions are checked (the first after the run, from
every step's start and end on the links); when either fails :func:`run_lanes` says so
(None) and the engine runs the events. The times are the full simulation's up to the
rounding of the rates (a share is computed here as ``capacity * weight / total``, by the
max-min solver as a sum of shares).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from collsim.engine.costs import caps, network_cap
from collsim.engine.fabric import Fabric
from collsim.engine.lockstep import Exchange, LockstepResult, run_lockstep
from collsim.engine.staging import route_crosses_network
from collsim.program import Job

# An algorithm's lanes as lockstep forms: a job -> (each lane's ring, each lane's steps on
# its own lane), or None where it has no such form for this job. On the registry record.
LanesForm = Callable[[Job], tuple[Sequence[Sequence[int]], Sequence[Iterable[Exchange]]] | None]

# A resource the lanes may share: ("link", index) of the fabric or ("gpu", g), a GPU's cap.
Resource = tuple[str, int]


def run_lanes(fabric: Fabric, gpus: Sequence[int], job: Job,
              rings: Sequence[Sequence[int]], lanes: Sequence[Iterable[Exchange]],
              start: float, gamma: float) -> LockstepResult | None:
    """Time every lane's ``lanes[k]`` (each a lockstep form on lane k, whose pairs are
    ``rings[k]``'s neighbours: position i sends to i+1) side by side; None when the shares
    are not the max-min rates or some shared link's transfers do not move together."""
    if job.helpers or len(rings) != len(lanes) or len(lanes) < 2:
        return None
    index = {id(channel): i for i, channel in enumerate(fabric.channels)}
    channel_cap, gpu_cap = caps(fabric.costs)
    net_cap, topology = network_cap(fabric.costs), fabric.topology
    # Which lane's pair crosses which resource, and the lanes' weight on each resource.
    crossing: dict[Resource, list[tuple[int, int]]] = defaultdict(list)
    load: dict[Resource, int] = defaultdict(int)
    capacity: dict[Resource, float] = {}
    own: list[list[float]] = []  # per lane and pair: its caps of its own (not shared)
    for lane, ring in enumerate(rings):
        weight = job.lane_weight(lane)
        limits = []
        for i, s in enumerate(ring):
            a, b = gpus[s], gpus[ring[(i + 1) % len(ring)]]
            channels, _, _ = fabric.route(a, b)
            used: list[Resource] = [("link", index[id(c)]) for c in channels]
            for c, resource in zip(channels, used, strict=True):
                capacity[resource] = c.bandwidth
            if gpu_cap is not None:
                used.append(("gpu", a))
                capacity[("gpu", a)] = gpu_cap
            for resource in used:
                crossing[resource].append((lane, i))
                load[resource] += weight
            limit = np.inf
            if channel_cap is not None:
                limit = weight * channel_cap
            if net_cap is not None and route_crosses_network(topology, a, b):
                limit = min(limit, weight * net_cap)
            limits.append(limit)
        own.append(limits)
    # A resource whose pairs all fit at once, each at its own caps and unshared links, never
    # holds any of them back, whatever moves when: it is left out (no share, no check).
    bound: dict[tuple[int, int], float] = {}
    for resource, pairs in crossing.items():
        for lane, i in pairs:
            alone = capacity[resource] if load[resource] == job.lane_weight(lane) else np.inf
            bound[(lane, i)] = min(bound.get((lane, i), own[lane][i]), alone)
    for resource in [r for r, pairs in crossing.items()
                     if load[r] > job.lane_weight(pairs[0][0])
                     and sum(bound[pair] for pair in pairs) <= capacity[r]]:
        del crossing[resource], load[resource]
    if not _max_min(job, crossing, load, capacity, own):
        return None

    def link_share(link: int, lane: int) -> float:
        total = load.get(("link", link), 0)
        weight = job.lane_weight(lane)
        return weight / total if total > weight else 1.0

    def gpu_share(gpu: int, lane: int) -> float:
        total = load.get(("gpu", gpu), 0)
        weight = job.lane_weight(lane)
        return weight / total if total > weight else 1.0

    finish = np.full(job.nranks, -np.inf)
    digests: list[Digest] = []
    transfers = 0
    for ring, steps in zip(rings, lanes, strict=True):
        digest = Digest(ring)
        result = run_lockstep(fabric, gpus, job, steps, start, gamma,
                              (link_share, gpu_share), digest)
        if result is None:
            return None
        finish = np.maximum(finish, result.finish)
        transfers += result.transfers
        digests.append(digest)
    if not _together(crossing, load, job, digests):
        return None
    return LockstepResult(finish.tolist(), transfers)


def _rate(job: Job, lane: int, i: int, resources: dict[tuple[int, int], list[Resource]],
          load: dict[Resource, int], capacity: dict[Resource, float],
          own: list[list[float]]) -> float:
    """A lane's pair's rate per unit of weight under the shares."""
    weight = job.lane_weight(lane)
    rate = own[lane][i] / weight
    for resource in resources[(lane, i)]:
        rate = min(rate, capacity[resource] / load[resource])
    return rate


def _max_min(job: Job, crossing: dict[Resource, list[tuple[int, int]]],
             load: dict[Resource, int], capacity: dict[Resource, float],
             own: list[list[float]]) -> bool:
    """Whether the shares are the max-min fair rates: every pair's tightest share is on a
    cap of its own or on a resource whose every pair has that same share (so it is full)."""
    resources: dict[tuple[int, int], list[Resource]] = defaultdict(list)
    for resource, pairs in crossing.items():
        for pair in pairs:
            resources[pair].append(resource)
    rate = {pair: _rate(job, *pair, resources, load, capacity, own) for pair in resources}
    for (lane, i), mine in rate.items():
        if own[lane][i] / job.lane_weight(lane) <= mine:
            continue  # its own cap binds
        if not any(capacity[r] / load[r] == mine
                   and all(rate[other] == mine for other in crossing[r])
                   for r in resources[(lane, i)]):
            return False
    return True


class Digest:
    """Each pair's starts and ends on the links, step after step, folded into one 64-bit
    digest per pair (as a list's ``append``, for :func:`run_lockstep`'s ``record``): equal
    sequences give equal digests, and unequal ones collide with odds of about 2^-64, so
    keeping a digest instead of every step's times costs nothing in memory."""

    MULTIPLIER = np.uint64(0x100000001B3)  # FNV-1a's 64-bit prime

    def __init__(self, ring: Sequence[int]) -> None:
        self.ring = np.asarray(ring, dtype=np.int64)
        self.starts = np.zeros(len(ring), dtype=np.uint64)
        self.ends = np.zeros(len(ring), dtype=np.uint64)
        self.steps = 0
        self.checked: set[int] = set()
        self.regular = True  # every step's pairs are the ring's neighbours, in ring order

    def append(self, item: tuple) -> None:
        pattern, now, end = item
        if id(pattern) not in self.checked:
            self.checked.add(id(pattern))
            self.regular = self.regular and np.array_equal(pattern.senders, self.ring)
        self.starts = (self.starts * self.MULTIPLIER) ^ np.asarray(now, np.float64).view(np.uint64)
        self.ends = (self.ends * self.MULTIPLIER) ^ np.asarray(end, np.float64).view(np.uint64)
        self.steps += 1


def _together(crossing: dict[Resource, list[tuple[int, int]]], load: dict[Resource, int],
              job: Job, digests: list[Digest]) -> bool:
    """Whether every shared resource's transfers start and end together, step by step (a
    lane's pair i is position i of its ring)."""
    if not all(digest.regular for digest in digests):
        return False
    for resource, pairs in crossing.items():
        first, column = pairs[0]
        if load[resource] == job.lane_weight(first):
            continue  # one lane's alone
        reference = digests[first]
        for lane, i in pairs[1:]:
            digest = digests[lane]
            if digest.steps != reference.steps or \
                    digest.starts[i] != reference.starts[column] or \
                    digest.ends[i] != reference.ends[column]:
                return False
    return True
