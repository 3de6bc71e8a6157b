"""The flow-level fabric: transfers over routes of directed links, sharing bandwidth max-min fairly.

A transfer pays its route's latency once: its bytes leave at the rate the fabric grants it,
and it is delivered ``latency`` after its last byte has left. While bytes are moving, every
directed link it crosses is shared max-min fairly with the other transfers moving bytes
over it. Alone on its route a transfer therefore takes exactly
``sum(latency) + bytes / min(bandwidth)``.

Rates are recomputed only for the transfers connected (through shared links) to one that
started or stopped moving, and all changes at one instant are settled together. SimPy
cannot cancel a scheduled event, so each transfer keeps a reference to its one valid event
and a superseded event is ignored when it fires.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

import simpy
from simpy.core import NORMAL

from collsim.hardware.topology import Topology

SAME_RATE = 1e-12  # relative difference below which two fair shares are one rate


class Channel:
    """The engine's view of one directed link: its bandwidth and the transfers on it."""

    __slots__ = ("bandwidth", "flows")

    def __init__(self, bandwidth: float) -> None:
        self.bandwidth = bandwidth
        self.flows: dict[Flow, None] = {}  # an insertion-ordered set, for determinism


class Flow(simpy.Event):
    """One transfer's bytes in motion: a route, a rate, and when its last byte leaves.

    A flow is itself the SimPy event of its next milestone (last byte out, or delivery),
    scheduled again whenever its rate changes. SimPy cannot cancel a scheduled event, so an
    entry that fires at a time other than the flow's ``due`` time is a superseded one.
    """

    # Defaults live on the class: a flow is created per transfer, so every attribute set in
    # __init__ costs. ``_ok`` and ``_value`` make it a successful event to SimPy.
    _ok = True
    _value = None
    rate = 0.0
    drain_at = -1.0   # set when a rate is first granted
    due = -1.0        # when the one valid scheduled entry fires; -1 when none
    shared = False    # True while another moving transfer shares a link with it
    attached = True   # still counted on its links

    def __init__(self, env: simpy.Environment, channels: tuple[Channel, ...], size: float,
                 latency: float, on_done: Callable[[object], None], token: object) -> None:
        self.env = env
        self.channels = channels
        self.size = size
        self.latency = latency
        self.on_done = on_done
        self.token = token


class Fabric:
    """Moves bytes between GPUs of a topology on a SimPy environment."""

    def __init__(self, env: simpy.Environment, topology: Topology) -> None:
        self.env = env
        self.topology = topology
        self.channels = [Channel(link.bandwidth) for link in topology.links]
        self._latency = [link.latency for link in topology.links]
        self._routes: dict[tuple[int, int], tuple[tuple[Channel, ...], float, float]] = {}
        self._started: list[Flow] = []
        self._freed: list[Channel] = []
        self._settle_pending = False
        self.transfers = 0
        self._flow_callbacks = [self._flow_event]

    def route(self, src: int, dst: int) -> tuple[tuple[Channel, ...], float, float]:
        """(channels, total latency, bottleneck bandwidth) from GPU ``src`` to GPU ``dst``."""
        key = (src, dst)
        cached = self._routes.get(key)
        if cached is None:
            hops = self.topology.route(src, dst)
            channels = tuple(self.channels[i] for i in hops)
            cached = (channels, sum(self._latency[i] for i in hops),
                      min((c.bandwidth for c in channels), default=float("inf")))
            self._routes[key] = cached
        return cached

    def transfer(self, src: int, dst: int, size: float, on_done: Callable[[object], None],
                 token: object = None) -> None:
        """Move ``size`` bytes from GPU ``src`` to GPU ``dst``; call ``on_done(token)`` on
        delivery."""
        route = self._routes.get((src, dst))
        channels, latency, bottleneck = route if route else self.route(src, dst)
        self.transfers += 1
        if size <= 0 or not channels:
            self._call_at(latency, on_done, token)
            return
        flow = Flow(self.env, channels, size, latency, on_done, token)
        idle = True
        for channel in channels:
            if channel.flows:
                idle = False
            channel.flows[flow] = None
        if idle:
            # The common case: nothing else on the route, so the bottleneck link's full
            # bandwidth, granted now. A transfer joining later, even at this same instant,
            # finds this one on its links and the two are shared from then on.
            now = self.env._now
            flow.rate = bottleneck
            flow.drain_at = now + size / bottleneck
            self._schedule_flow(flow, now)
        else:
            self._started.append(flow)
            self._request_settle()

    # -- scheduling -------------------------------------------------------------------------

    def _call_at(self, delay: float, callback: Callable[[object], None], token: object
                 ) -> None:
        if delay <= 0:
            callback(token)
            return
        event = simpy.Event(self.env)
        event._ok = True
        event._value = None
        event.callbacks.append(lambda _: callback(token))
        self.env.schedule(event, NORMAL, delay)

    def _request_settle(self) -> None:
        if not self._settle_pending:
            self._settle_pending = True
            event = simpy.Event(self.env)
            event._ok = True
            event._value = None
            event.callbacks.append(self._settle)
            self.env.schedule(event, NORMAL, 0)

    def _schedule_flow(self, flow: Flow, now: float) -> None:
        """Schedule ``flow``'s next milestone: when its last byte leaves if it shares a link
        (the others speed up then), or directly its delivery if it is alone."""
        delay = flow.drain_at - now if flow.shared else flow.drain_at + flow.latency - now
        flow.due = now + delay  # the very sum SimPy's schedule() computes
        flow.callbacks = self._flow_callbacks
        self.env.schedule(flow, NORMAL, delay)

    def _flow_event(self, flow: Flow) -> None:
        flow.callbacks = self._flow_callbacks  # SimPy cleared them; a later entry may be valid
        if flow.due != self.env._now:
            return  # superseded by a later rate change
        flow.due = -1.0
        if flow.shared:
            if flow.attached:
                self._detach(flow)
            self._call_at(flow.latency, flow.on_done, flow.token)
            return
        if flow.attached:
            # Alone on its links since it was last scheduled: leaving frees nobody.
            flow.attached = False
            for channel in flow.channels:
                del channel.flows[flow]
        flow.on_done(flow.token)

    def _detach(self, flow: Flow) -> None:
        """Stop counting ``flow`` on its links; the others there may now go faster."""
        flow.attached = False
        for channel in flow.channels:
            del channel.flows[flow]
            if channel.flows:
                self._freed.append(channel)
        if self._freed:
            self._request_settle()

    # -- rates ------------------------------------------------------------------------------

    def _settle(self, _event: simpy.Event) -> None:
        """Grant rates to transfers that started, and to those next to ones that stopped."""
        self._settle_pending = False
        now = self.env.now
        seeds = self._started
        self._started = []
        freed, self._freed = self._freed, []
        for channel in freed:
            seeds.extend(channel.flows)
        done: set[int] = set()
        for flow in seeds:
            if id(flow) in done or not flow.attached:
                continue
            component = self._component(flow, now)
            done.update(map(id, component))
            if component:
                self._share(component, now)

    def _component(self, start: Flow, now: float) -> list[Flow]:
        """The moving transfers connected to ``start`` through shared links.

        Transfers whose last byte has already left are detached on the way: they no longer
        take bandwidth, though their delivery is still pending.
        """
        component: dict[Flow, None] = {}
        stack = [start]
        seen_channels: set[int] = set()
        while stack:
            flow = stack.pop()
            if flow in component or not flow.attached:
                continue
            if 0 <= flow.drain_at <= now:
                flow.attached = False
                for channel in flow.channels:
                    del channel.flows[flow]
                continue
            component[flow] = None
            for channel in flow.channels:
                if id(channel) not in seen_channels:
                    seen_channels.add(id(channel))
                    stack.extend(channel.flows)
        return list(component)

    def _share(self, flows: list[Flow], now: float) -> None:
        """Max-min fair rates for a connected set of transfers (progressive filling).

        Links wait in a heap by fair share (capacity left / transfers left). Freezing the
        transfers of the tightest link at its share can only raise the others' shares, so a
        popped entry whose share has since risen is pushed back with its new value.
        """
        remaining = {}
        for flow in flows:
            remaining[flow] = flow.size if flow.drain_at < 0 else \
                (flow.drain_at - now) * flow.rate
        capacity: dict[Channel, float] = {}
        users: dict[Channel, int] = {}
        for flow in flows:
            for channel in flow.channels:
                if channel in users:
                    users[channel] += 1
                else:
                    capacity[channel] = channel.bandwidth
                    users[channel] = 1
        order = {channel: index for index, channel in enumerate(users)}
        heap = [(capacity[c] / users[c], order[c], c) for c in users]
        heapq.heapify(heap)
        shared = len(flows) > 1
        rates: dict[Flow, float] = {}
        level = 0.0
        while heap:
            share, index, bottleneck = heapq.heappop(heap)
            left = users[bottleneck]
            if not left:
                continue
            current = capacity[bottleneck] / left
            if current > share:
                heapq.heappush(heap, (current, index, bottleneck))
                continue
            # Shares equal but for rounding become one rate, so that transfers which should
            # finish together do (else each would be an instant of its own, each recomputing
            # every rate: all-to-all at 256 ranks went from minutes to seconds).
            if current <= level * (1 + SAME_RATE):
                current = level
            level = share = current
            for flow in bottleneck.flows:
                if flow in rates:
                    continue
                rates[flow] = share
                for channel in flow.channels:
                    capacity[channel] -= share
                    users[channel] -= 1
        for flow in flows:
            rate = rates[flow]
            if flow.drain_at >= 0 and rate == flow.rate and shared == flow.shared:
                continue  # same rate, same kind of event: the scheduled one still holds
            flow.rate = rate
            flow.drain_at = now + remaining[flow] / rate
            flow.shared = shared
            self._schedule_flow(flow, now)
