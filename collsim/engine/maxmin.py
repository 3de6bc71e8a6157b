"""Max-min fair sharing of links by the flows crossing them: the solver alone, with no time.

A flow is anything hashable with ``channels`` (the links it crosses) and ``rate``; a link is
a :class:`Channel`, which lists the flows on it. Rates are max-min fair when every flow has
a bottleneck: a full link on which no flow goes faster. Progressive filling finds them:
raise every unfrozen rate together until a link is full, freeze the flows on it, repeat.

The solver fills in two ways, a heap of link shares (:meth:`MaxMin.fill`, any size, with or
without other flows' rates held as background load) and a scan for the tightest link
(:meth:`MaxMin.fill_small`, cheaper for a few flows), and tests a set of rates for the
bottleneck property (:meth:`MaxMin.bottleneck_test`). Both fills round by one rule,
:func:`same_rate`.
"""

from __future__ import annotations

import heapq
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

# Relative difference below which two fair shares are one rate.
SAME_RATE = 1e-12
# The relative rounding of one float operation, at most: a link's capacity is rounded by
# up to one ulp of its bandwidth for every share subtracted from it.
EPSILON = sys.float_info.epsilon
# Relative slack of "full" and "fastest" when testing rates for bottlenecks.
TOLERANCE = 1e-10
FULL = 1 - TOLERANCE  # the share of a link (or of the fastest rate) that counts as all of it


class Channel:
    """One directed link as the solver sees it: its bandwidth and the flows on it.

    ``flows`` is an insertion-ordered set (a dict of None), for determinism. The other
    fields are scratch of one fill, valid while ``fill`` is that fill's mark: capacity not
    yet shared out, flows still to be given a share, how many there were at the start, and
    (for the fabric) the latest drain time on the link.
    """

    __slots__ = ("bandwidth", "flows", "fill", "capacity", "users", "initial", "latest")

    def __init__(self, bandwidth: float) -> None:
        self.bandwidth = bandwidth
        self.flows: dict[Member, None] = {}
        self.fill = 0
        self.capacity = 0.0
        self.users = 0
        self.initial = 0
        self.latest = 0.0


class Member(Protocol):
    """A flow as the solver sees it: the links it crosses and its current rate."""

    channels: tuple[Channel, ...]
    rate: float


def same_rate(share: float, level: float, given_up: int, left: int, bandwidth: float) -> bool:
    """Whether a link's fair ``share`` is the current ``level`` but for rounding.

    Shares equal but for rounding must become one rate, so that flows meant to finish
    together do (else each would be an instant of its own). The bound is SAME_RATE of the
    level plus one ulp of the link's ``bandwidth`` for every share it has ``given_up``,
    spread over the ``left`` flows still to share it (a port of all-to-all at 1024 ranks
    gives up a thousand shares).
    """
    return abs(share - level) <= level * SAME_RATE + given_up * bandwidth * EPSILON / left


class MaxMin:
    """The max-min solver: fills and the bottleneck test over :class:`Channel` scratch.

    It owns the fill marks, so that channels met by one fill (or by a search that marks
    them with :meth:`mark`) are told apart from those of earlier fills without clearing.
    """

    __slots__ = ("marks",)

    def __init__(self) -> None:
        self.marks = 0

    def mark(self) -> int:
        """A fresh mark for channels' ``fill`` field, never used before by this solver."""
        self.marks += 1
        return self.marks

    def fill(self, flows: Sequence[Member], background: bool = False) -> dict[Member, float]:
        """Max-min fair rates for ``flows`` by progressive filling; with ``background`` the
        other flows on their links keep their rates and only what is left is shared.

        Links wait in a heap by fair share (capacity left / flows left). Freezing the flows
        of the tightest link at its share can only raise the others' shares, so a popped
        entry whose share has since risen is pushed back with its new value. The links left
        once every flow is frozen are not looked at.
        """
        members = dict.fromkeys(flows)
        fill = self.mark()
        links: list[Channel] = []
        for flow in flows:
            for channel in flow.channels:
                if channel.fill == fill:
                    channel.users += 1
                else:
                    channel.fill = fill
                    channel.users = 1
                    links.append(channel)
        for channel in links:
            left = channel.bandwidth
            if background:
                for other in channel.flows:
                    if other not in members:
                        left -= other.rate
            channel.capacity = left if left > 0 else 0.0
            channel.initial = channel.users
        return self._progress(flows, links, len(members), members)

    def fill_component(self, flows: Sequence[Member], links: Sequence[Channel]
                       ) -> dict[Member, float]:
        """The rates :meth:`fill` gives a whole component: ``flows`` (each once) are all the
        flows on ``links``, which are their links listed as ``fill`` meets them (by flow,
        then along its route), each once and with ``users`` counted as ``fill`` counts
        them. A search that finds the component lists its links on the way, so no flow is
        looked up as a member."""
        for channel in links:
            left = channel.bandwidth
            channel.capacity = left if left > 0 else 0.0
            channel.initial = channel.users
        return self._progress(flows, links, len(flows), None)

    @staticmethod
    def _progress(flows: Sequence[Member], links: list[Channel], count: int,
                  members: dict[Member, None] | None) -> dict[Member, float]:
        """Progressive filling of ``count`` flows over ``links`` whose scratch is set; a
        flow on them that is not one of ``members`` (when given) is left out."""
        shares = [c.capacity / c.users for c in links]
        if min(shares) == max(shares):
            # Every link offers the same fair share, so filling freezes every flow at it
            # (freezing one link's flows leaves the others' shares as they were): an
            # all-to-all's million flows need no heap.
            return dict.fromkeys(flows, shares[0])
        heap = list(zip(shares, range(len(links)), links, strict=True))  # (share, index, link)
        heapq.heapify(heap)
        rates: dict[Member, float] = {}
        level = 0.0
        # Once every flow is frozen, every link left in the heap has no flow left: stop.
        while heap and len(rates) < count:
            share, index, bottleneck = heapq.heappop(heap)
            left = bottleneck.users
            if not left:
                continue
            current = bottleneck.capacity / left
            if current > share:
                heapq.heappush(heap, (current, index, bottleneck))
                continue
            if same_rate(current, level, bottleneck.initial - left, left,
                         bottleneck.bandwidth):
                current = level
            level = share = current
            for flow in bottleneck.flows:
                if flow in rates or members is not None and flow not in members:
                    continue
                rates[flow] = share
                for channel in flow.channels:
                    channel.capacity -= share
                    channel.users -= 1
        return rates

    @staticmethod
    def fill_small(flows: Sequence[Member], channels: Sequence[Channel]
                   ) -> dict[Member, float]:
        """Max-min fair rates of a whole component, ``flows`` and every link they cross
        (``channels``, each listed once, carrying only these flows), by scanning for the
        tightest link: for a few flows cheaper than :meth:`fill`'s heap. The rates come in
        the order the flows were frozen."""
        for channel in channels:
            channel.capacity = channel.bandwidth
            channel.users = channel.initial = len(channel.flows)
        frozen: dict[Member, float] = {}
        level = 0.0
        count = len(flows)
        while len(frozen) < count:
            share = float("inf")
            tightest = channels[0]
            for channel in channels:
                left = channel.users
                if left and channel.capacity < share * left:
                    share = channel.capacity / left
                    tightest = channel
            left = tightest.users
            if same_rate(share, level, tightest.initial - left, left, tightest.bandwidth):
                share = level
            level = share
            for flow in tightest.flows:
                if flow in frozen:
                    continue
                frozen[flow] = share
                for channel in flow.channels:
                    channel.capacity -= share
                    channel.users -= 1
        return frozen

    @staticmethod
    def bottleneck_test(rates: dict[Member, float]) -> Callable[[Member, float], bool]:
        """``has_bottleneck(flow, rate)``: whether ``flow`` at ``rate`` has a full link on
        which no flow goes faster, every other flow at its rate in ``rates`` or else its
        own (each link's load is summed once)."""
        # Per link met: whether it is full, and the rate a flow needs to be among its fastest.
        load: dict[Channel, tuple[bool, float]] = {}

        def has_bottleneck(flow: Member, rate: float) -> bool:
            for channel in flow.channels:
                state = load.get(channel)
                if state is None:
                    total = fastest = 0.0
                    for other in channel.flows:
                        other_rate = rates.get(other, other.rate)
                        total += other_rate
                        if other_rate > fastest:
                            fastest = other_rate
                    state = load[channel] = (total >= channel.bandwidth * FULL,
                                             fastest * FULL)
                if state[0] and rate >= state[1]:
                    return True
            return False

        return has_bottleneck

    def all_bottlenecked(self, flows: Iterable[Member]) -> bool:
        """Whether every flow of ``flows`` has a bottleneck at its current rate."""
        has_bottleneck = self.bottleneck_test({})
        return all(has_bottleneck(flow, flow.rate) for flow in flows)

    def without_bottleneck(self, group: dict[Member, None], rates: dict[Member, float]
                           ) -> dict[Member, None]:
        """Flows beside ``group`` that break max-min fairness when ``group`` takes
        ``rates`` and every other flow keeps its own: those faster than a member left
        without a bottleneck on a link they share, and neighbours left without one."""
        has_bottleneck = self.bottleneck_test(rates)
        joining: dict[Member, None] = {}
        for flow in group:
            rate = rates[flow]
            if not has_bottleneck(flow, rate):
                for channel in flow.channels:
                    for other in channel.flows:
                        if other not in group and other.rate > rate:
                            joining[other] = None
        # A neighbour met again is tested again to the same answer: test each one once, and
        # look at each link once.
        tested: set[Member] = set()
        scanned = self.mark()
        for flow in group:
            for channel in flow.channels:
                if channel.fill == scanned:
                    continue
                channel.fill = scanned
                for other in channel.flows:
                    if other in tested or other in group or other in joining:
                        continue
                    tested.add(other)
                    if not has_bottleneck(other, other.rate):
                        joining[other] = None
        return joining
