"""The flow-level fabric: transfers over routes of directed links, sharing bandwidth max-min fairly.

A transfer pays its route's latency once: its bytes leave at the rate the fabric grants it,
and it is delivered ``latency`` after its last byte has left. While bytes are moving, every
directed link it crosses is shared max-min fairly with the other transfers moving bytes
over it. Alone on its route a transfer therefore takes exactly
``latency + bytes / min(bandwidth)``. Latency and bandwidths are the cost model's
(:mod:`collsim.engine.costs`), applied once per link and per route: under the ideal model,
the sum of the links' latencies and their line rates.

Rates are recomputed only for the transfers connected (through shared links) to one that
started or stopped moving, and all changes at one instant are settled together; the rates
themselves come from the max-min solver (:mod:`collsim.engine.maxmin`), and how far the
fabric looks for them from its policy (:mod:`collsim.engine.policy`). A transfer's last byte
out is an event only when another transfer on its links is still moving then; otherwise it
is scheduled straight for delivery. SimPy cannot cancel a scheduled event, so each transfer
keeps a reference to its one valid event and a superseded event is ignored when it fires.

Transfers given a ``line`` (a connection: sender, receiver and lane) go in order on it: one
at a time moves bytes, the next starting the instant the previous one's last byte has left,
so each one's latency tail overlaps the next one's bytes (NCCL's buffer slots on a
connection). The last byte of a transfer with a line is always an event.

A transfer given ``on_drained`` calls it when its last byte has left, before its delivery
(a buffered sender goes on then); its last byte is then always an event too.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable

import simpy

from collsim.engine.costs import IDEAL, CostModel, channel_bandwidth
from collsim.engine.loop import BareEvent, call_later, clock
from collsim.engine.maxmin import Channel
from collsim.engine.policy import DEFAULT_POLICY, FabricPolicy
from collsim.engine.solver import RateSolver
from collsim.hardware.topology import Topology


class Flow(BareEvent):
    """One transfer's bytes in motion: a route, a rate, and when its last byte leaves.

    A flow is itself the SimPy event of its next milestone, scheduled again whenever its
    rate changes: when its last byte leaves if another transfer on its links is still
    moving then (that one speeds up), else directly its delivery. SimPy cannot cancel a
    scheduled event, so an entry that fires at a time other than ``due`` is a superseded one.
    """

    # A bare event with slots rather than a ``simpy.Event`` with a dict: a million flows in
    # flight (all-to-all at 1024 ranks) take a third of the memory.
    __slots__ = ("channels", "size", "latency", "on_done", "token", "rate", "drain_at", "due",
                 "outlasted", "attached", "since", "left", "line", "on_drained")

    def __init__(self, channels: tuple[Channel, ...], size: float, latency: float,
                 on_done: Callable[[object], None], token: object, now: float) -> None:
        self.channels = channels
        self.size = size
        self.since = now       # when the rate was last set, and the bytes left then: a
        self.left = size       # rate changed twice at one instant keeps its bytes exactly
        self.latency = latency
        self.on_done = on_done
        self.token = token
        self.rate = 0.0
        self.drain_at = -1.0   # set when a rate is first granted
        self.due = -1.0        # when the one valid scheduled entry fires; -1 when none
        self.outlasted = False  # another transfer on its links is still moving when its
        # last byte leaves, so the scheduled milestone is that instant, not delivery
        self.attached = True   # still counted on its links (a drained transfer that frees
        # nobody stays counted until its delivery or the next settle on its links)
        self.line: Line | None = None  # the connection it goes in order on, while moving
        self.on_drained: Callable[[object], None] | None = None  # called at its last byte


class Line:
    """A connection whose transfers go in order: the ones waiting for the moving one's
    last byte to leave, as (src, dst, size, on_done, token, route, on_drained)."""

    __slots__ = ("key", "waiting")

    def __init__(self, key: object) -> None:
        self.key = key
        self.waiting: deque[tuple] = deque()


class Milestones(BareEvent):
    """The milestones of several flows due at one instant, as one SimPy event."""

    __slots__ = ("flows",)

    def __init__(self, flows: list[Flow], callbacks: list[Callable[[Milestones], None]]
                 ) -> None:
        self.flows = flows
        self.callbacks = callbacks


class Fabric:
    """Moves bytes between GPUs of a topology on a SimPy environment.

    Extension points, for subclasses that watch or replace the rate computation
    (``benchmarks/rate_floor.py`` records and replays it): :attr:`flow_class`, and the
    methods :meth:`settle`, :meth:`take_changes`, :meth:`unlink` and :meth:`schedule`.
    The rate solver is the policy's (``policy.solver``, :mod:`collsim.engine.solver`).
    """

    flow_class: type[Flow] = Flow  # the class of the flows that transfers create
    # Whether the lockstep and symmetric paths may stand in for this class's events (they
    # give the same times but call none of its methods): only a class that says so in its
    # own body, so that a subclass watching the events is never bypassed by inheritance.
    replaceable = True

    @classmethod
    def shortcuts_allowed(cls) -> bool:
        """Whether a call on this fabric class may skip its events (``replaceable`` set in
        the class's own body)."""
        return vars(cls).get("replaceable", False) is True

    def __init__(self, env: simpy.Environment, topology: Topology, costs: CostModel = IDEAL,
                 policy: FabricPolicy = DEFAULT_POLICY) -> None:
        self.env = env
        self.topology = topology
        self.costs = costs
        self.policy = policy
        self.solver: RateSolver = policy.solver()
        self._new_flow = self.flow_class  # an instance attribute: the faster lookup
        # The cost model is applied here and where routes are built, never per transfer.
        self.channels = [Channel(channel_bandwidth(costs, link)) for link in topology.links]
        # Routes by src * endpoints + dst: an int key needs no tuple built per transfer.
        # Endpoints are the GPUs, then the switches helper ranks may sit on.
        self._stride = topology.endpoint_count
        self._routes: dict[int, tuple[tuple[Channel, ...], float, float]] = {}
        self._started: list[Flow] = []
        self._freed: list[Channel] = []
        self._settle_pending = False
        self.holding = False  # hold transfers on idle routes until release()
        self.held: list[Flow] = []
        self.transfers = 0
        self._settles = 0
        self._crowded_settles = 0  # settles in a row whose searches found only large ones
        self._flow_callbacks = [self._flow_event]  # shared: SimPy only reads the list
        self._milestone_callbacks = [self._milestones]
        self._lines: dict[object, Line] = {}  # connections with a transfer moving bytes

    def route(self, src: int, dst: int) -> tuple[tuple[Channel, ...], float, float]:
        """(channels, latency, bottleneck payload bandwidth) from endpoint ``src`` to
        endpoint ``dst`` (GPUs, or the switches of :meth:`Topology.endpoints`), under the
        cost model."""
        key = src * self._stride + dst
        cached = self._routes.get(key)
        if cached is None:
            hops = self.topology.route(src, dst)
            channels = self.channels
            route = tuple([channels[i] for i in hops])
            links = self.topology.links
            latency = self.costs.latency([links[i] for i in hops])
            bottleneck = float("inf")
            for channel in route:
                if channel.bandwidth < bottleneck:
                    bottleneck = channel.bandwidth
            cached = (route, latency, bottleneck)
            self._routes[key] = cached
        return cached

    def transfer(self, src: int, dst: int, size: float, on_done: Callable[[object], None],
                 token: object = None,
                 route: tuple[tuple[Channel, ...], float, float] | None = None,
                 line: object = None,
                 on_drained: Callable[[object], None] | None = None) -> None:
        """Move ``size`` bytes from endpoint ``src`` to endpoint ``dst``; call
        ``on_done(token)`` on delivery, and ``on_drained(token)``, if given, when the last
        byte has left (at once when nothing moves). ``route``, if given, is the (channels, latency,
        bottleneck) to use instead of the cached route (a route through virtual links).
        ``line``, if given, names the connection the transfer goes in order on (module
        docstring): it waits while another transfer of that line moves bytes. (Given a
        :class:`Line` itself, the line's next transfer starts now.)"""
        if line is not None and type(line) is not Line:
            queue = self._lines.get(line)
            if queue is not None:
                queue.waiting.append((src, dst, size, on_done, token, route, on_drained))
                return
            queue = Line(line)
            self._lines[line] = queue
            line = queue
        if route is None:
            route = self._routes.get(src * self._stride + dst)
        channels, latency, bottleneck = route if route else self.route(src, dst)
        self.transfers += 1
        if size <= 0 or not channels:
            if line is not None:
                self._next_in_line(line)
            if on_drained is not None:
                on_drained(token)
            self._call_at(latency, on_done, token)
            return
        env = self.env
        now = clock(env)
        flow = self._new_flow(channels, size, latency, on_done, token, now)
        flow.line = line
        flow.on_drained = on_drained
        idle = True
        for channel in channels:
            if channel.flows:
                idle = False
            channel.flows[flow] = None
        if idle and not self.holding:
            # The common case: nothing else on the route, so the bottleneck link's full
            # bandwidth, granted now. A transfer joining later, even at this same instant,
            # finds this one on its links and the two are shared from then on.
            flow.rate = bottleneck
            flow.drain_at = drain = now + size / bottleneck
            # as schedule(), inlined: the hot path
            delay = drain - now if line is not None or on_drained is not None else \
                drain + latency - now
            flow.due = now + delay
            flow.callbacks = self._flow_callbacks
            env.schedule(flow, delay=delay)
        elif idle:
            flow.rate = bottleneck  # granted at release() if still alone then
            self.held.append(flow)
        else:
            self._started.append(flow)
            self._request_settle()

    def release(self) -> None:
        """Grant the transfers held while ``holding``: still alone on their routes, at once;
        else shared. Holding lets a batch started at one instant (a rank posting a step of
        several transfers) share links from the start, instead of the first being granted
        a whole link and then regranted."""
        self.holding = False
        now = clock(self.env)
        alone: list[Flow] = []
        for flow in self.held:
            for channel in flow.channels:
                if len(channel.flows) > 1:
                    flow.rate = 0.0
                    self._started.append(flow)
                    self._request_settle()
                    break
            else:  # alone: the bottleneck link's full bandwidth, as in transfer()
                flow.drain_at = now + flow.size / flow.rate
                alone.append(flow)
        self.held.clear()
        self.schedule(alone, now)

    # -- scheduling -------------------------------------------------------------------------

    def _call_at(self, delay: float, callback: Callable[[object], None], token: object
                 ) -> None:
        if delay <= 0:
            callback(token)
        else:
            call_later(self.env, delay, callback, token)

    def _request_settle(self) -> None:
        if not self._settle_pending:
            self._settle_pending = True
            call_later(self.env, 0, self._settle_now)

    def _settle_now(self, _: object) -> None:
        self.settle()

    def schedule(self, flows: Iterable[Flow], now: float) -> None:
        """Schedule each flow's next milestone: when its last byte leaves if it is outlasted
        (the others speed up then), else directly its delivery.

        Flows due at one instant share one SimPy event (a million transfers of an
        all-to-all that finish together cost one entry in SimPy's queue, not a million);
        they fire in the same order as separate entries would: together, in the order
        scheduled.
        """
        instants: dict[float, tuple[float, list[Flow]]] = {}
        for flow in flows:
            delay = flow.drain_at - now \
                if flow.outlasted or flow.line is not None or flow.on_drained is not None \
                else flow.drain_at + flow.latency - now
            due = flow.due = now + delay  # the very sum SimPy's schedule() computes
            entry = instants.get(due)
            if entry is None:
                instants[due] = (delay, [flow])
            else:
                entry[1].append(flow)
        env, callbacks = self.env, self._flow_callbacks
        for delay, due_then in instants.values():
            if len(due_then) == 1:
                flow = due_then[0]
                flow.callbacks = callbacks
                env.schedule(flow, delay=delay)
            else:
                env.schedule(Milestones(due_then, self._milestone_callbacks), delay=delay)

    def _milestones(self, milestones: Milestones) -> None:
        flow_event = self._flow_event
        for flow in milestones.flows:
            flow_event(flow)

    def _flow_event(self, flow: Flow) -> None:
        flow.callbacks = self._flow_callbacks  # SimPy cleared them; a later entry may be valid
        env = self.env
        now = clock(env)
        if flow.due != now:
            return  # superseded by a later rate change
        line, drained = flow.line, flow.on_drained
        if flow.outlasted or line is not None or drained is not None:
            # The last byte has left: others on its links speed up, the next transfer of
            # its line starts and a buffered sender goes on; the flow itself is the event
            # of its delivery, ``latency`` later.
            flow.outlasted = False
            if flow.attached:
                self._detach(flow)
            if line is not None:
                flow.line = None
                self._next_in_line(line)
            if drained is not None:
                flow.on_drained = None
                drained(flow.token)
            if flow.latency > 0:
                flow.due = now + flow.latency
                env.schedule(flow, delay=flow.latency)
                return
        elif flow.attached:
            # Nobody on its links outlasts it: leaving frees nobody.
            flow.attached = False
            for channel in flow.channels:
                del channel.flows[flow]
        flow.due = -1.0
        flow.on_done(flow.token)

    def _next_in_line(self, line: Line) -> None:
        """The transfer moving on ``line`` has sent its last byte: start the next waiting
        one, or close the line."""
        if line.waiting:
            src, dst, size, on_done, token, route, on_drained = line.waiting.popleft()
            self.transfer(src, dst, size, on_done, token, route, line, on_drained)
        else:
            del self._lines[line.key]

    def unlink(self, flow: Flow) -> None:
        """Stop counting ``flow`` on its links during a settle (its last byte has left)."""
        flow.attached = False
        for channel in flow.channels:
            del channel.flows[flow]

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

    def take_changes(self) -> tuple[list[Flow], list[Channel]]:
        """The transfers that started sharing and the links that freed up since the last
        settle, handed over once: a settle must grant their rates."""
        self._settle_pending = False
        started, self._started = self._started, []
        freed, self._freed = self._freed, []
        return started, freed

    def settle(self) -> None:
        """Grant rates to transfers that started, and to those next to ones that stopped
        (once per instant with changes, after everything else at that instant)."""
        started, freed = self.take_changes()
        now = clock(self.env)
        group: dict[Flow, None] = dict.fromkeys(f for f in started if f.attached)
        for channel in freed:
            group.update(channel.flows)
        if not group:
            return
        if self.policy.local_updates:
            self._regrant(group, now)
        else:
            self._regrant_components(group, now)

    def _regrant_components(self, group: dict[Flow, None], now: float) -> None:
        """Max-min rates recomputed over every transfer connected to ``group``."""
        done: set[Flow] = set()
        for flow in group:
            if flow not in done and flow.attached:
                component, links = self._component(flow, now)
                done.update(component)
                if component:
                    self._apply(component, self.solver.fill_component(component, links),
                                now, closed=True)

    def _regrant(self, group: dict[Flow, None], now: float) -> None:
        """Max-min rates after a change: small components whole, the rest locally."""
        large: dict[Flow, None] = {}
        done: set[Flow] = set()      # refilled with their whole component
        crowded: set[Flow] = set()   # met while finding a component too large to refill
        # After settles that found only large components (a full pipeline, where every
        # port is shared), most searches would fail too: skip them, trying again now and
        # then. Either way the rates are the same; only the cost differs.
        policy = self.policy
        self._settles += 1
        search = self._crowded_settles < policy.large_searches \
            or not self._settles % policy.retry_search
        failures = searched = refills = 0
        for flow in group:
            if not flow.attached or flow in done:
                continue
            if not search or flow in crowded or failures >= policy.large_searches:
                large[flow] = None
                continue
            searched += 1
            refilled, seen = self._regrant_small(flow, now)
            if refilled:
                done.update(seen)
                refills += 1
            else:
                large[flow] = None
                crowded.update(seen)
                failures += 1
        if searched:
            self._crowded_settles = 0 if refills else self._crowded_settles + 1
        if large:
            self._regrant_local(large, now)

    def _regrant_small(self, start: Flow, now: float) -> tuple[bool, set[Flow]]:
        """Refill the whole component of ``start`` if it has at most the policy's
        ``small_component`` moving transfers, else change nothing; whether it did, and the
        transfers it met.

        Drained transfers met on the way are detached only once the component is known to
        be small, since its refill is what speeds up their neighbours. The channels met are
        marked with a fresh mark, so that each is listed once.
        """
        fill = self.solver.mark()
        small = self.policy.small_component
        flows = [start]
        seen = {start}
        drained: list[Flow] = []
        channels: list[Channel] = []
        for flow in flows:
            for channel in flow.channels:
                if channel.fill == fill:
                    continue
                members = channel.flows
                if len(members) > small:
                    seen.update(members)  # all of them are in this large component
                    return False, seen
                channel.fill = fill
                channel.latest = 0.0
                channels.append(channel)
                if len(members) == 1:
                    continue  # only ``flow`` itself
                for other in members:
                    if other not in seen:
                        seen.add(other)
                        if 0 <= other.drain_at <= now:
                            drained.append(other)
                        else:
                            flows.append(other)
            if len(flows) > small:
                return False, seen
        if 0 <= start.drain_at <= now:
            drained.append(flows.pop(0))
        for flow in drained:
            self.unlink(flow)
        if len(flows) == 1:
            self._grant_alone(flows[0], now)
        elif flows:
            self._fill_component(flows, channels, now)
        return True, seen

    @staticmethod
    def _left(flow: Flow, now: float) -> float:
        """Bytes ``flow`` has still to send at ``now``, its rate about to change. Counted from
        its drain time, except at the instant its rate was last set, where the count of then
        is kept: a rate set twice at one instant must not lose bytes to rounding (or
        transfers meant to drain together would not)."""
        if flow.since != now and flow.drain_at >= 0:
            flow.left = (flow.drain_at - now) * flow.rate
            flow.since = now
        return flow.left

    def _grant_alone(self, flow: Flow, now: float) -> None:
        """A transfer alone on its links moves at its route's bottleneck bandwidth."""
        rate = min(channel.bandwidth for channel in flow.channels)
        if flow.drain_at >= 0 and rate == flow.rate and not flow.outlasted:
            return
        flow.drain_at = now + self._left(flow, now) / rate
        flow.rate = rate
        flow.outlasted = False
        self.schedule((flow,), now)

    def _fill_component(self, flows: list[Flow], channels: list[Channel], now: float) -> None:
        """Max-min rates for a whole small component (``channels``: its links, each once);
        a transfer's new drain time is set in the order the solver froze them."""
        left = self._left
        changed: list[Flow] = []
        for flow, share in self.solver.fill_small(flows, channels).items():
            if flow.drain_at < 0 or share != flow.rate:
                flow.drain_at = now + left(flow, now) / share
                flow.rate = share
                changed.append(flow)
        # A transfer is outlasted if another on one of its links drains later (each
        # channel's ``latest`` was reset when the component was found).
        first = last = flows[0].drain_at
        for flow in flows:
            drain = flow.drain_at
            if drain < first:
                first = drain
            elif drain > last:
                last = drain
            for channel in flow.channels:
                if drain > channel.latest:
                    channel.latest = drain
        together = last == first
        for flow in flows:
            outlasted = False
            if not together:
                drain = flow.drain_at
                for channel in flow.channels:
                    if channel.latest > drain:
                        outlasted = True
                        break
            if outlasted != flow.outlasted:
                flow.outlasted = outlasted
                if flow not in changed:
                    changed.append(flow)
        self.schedule(changed, now)

    def _regrant_local(self, group: dict[Flow, None], now: float) -> None:
        """Max-min rates after a change, recomputed only as far as they change.

        The transfers next to the change are filled again with everyone else's rates held
        as background load; the result is max-min fair exactly when every transfer, inside
        the group or beside it, still has a bottleneck: a full link on which no transfer
        goes faster. Transfers failing that join the group and it is filled again.
        """
        policy, solver = self.policy, self.solver
        departures_only = all(flow.drain_at >= 0 for flow in group)
        for _ in range(policy.local_rounds):
            if len(group) > policy.local_group or self._crowded(group):
                break
            self._drop_drained(group, now)
            if departures_only:
                # Often every transfer beside a departure is held back elsewhere: then,
                # after departures only, no rate changes (the transfers not beside them
                # see the same links as before).
                departures_only = False
                if all(flow.drain_at >= 0 for flow in group) and solver.all_bottlenecked(group):
                    return
            if not group:
                return
            rates = solver.fill(list(group), background=True)
            joining = solver.without_bottleneck(group, rates)
            if not joining:
                self._apply(group, rates, now)
                return
            group.update(joining)
        # The change reaches far, or crosses crowded links (all-to-all): one pass over
        # everything connected is cheaper than checking a large group transfer by transfer.
        self._regrant_components(group, now)

    def _crowded(self, group: dict[Flow, None]) -> bool:
        """Whether a transfer of ``group`` crosses a link carrying more than the policy's
        ``crowded_link`` transfers."""
        crowded = self.policy.crowded_link
        for flow in group:
            for channel in flow.channels:
                if len(channel.flows) > crowded:
                    return True
        return False

    def _drop_drained(self, group: dict[Flow, None], now: float) -> None:
        """Detach transfers whose last byte has left (they take no bandwidth any more); the
        transfers beside them join the group, since they may now go faster."""
        stack = list(group)
        while stack:
            flow = stack.pop()
            if not flow.attached:
                group.pop(flow, None)
            elif 0 <= flow.drain_at <= now:
                group.pop(flow, None)
                self.unlink(flow)
                for channel in flow.channels:
                    for other in channel.flows:
                        if other not in group:
                            group[other] = None
                            stack.append(other)
            for channel in flow.channels if flow.attached else ():
                for other in channel.flows:
                    if 0 <= other.drain_at <= now and other not in group:
                        stack.append(other)

    def _component(self, start: Flow, now: float) -> tuple[list[Flow], list[Channel]]:
        """The moving transfers connected to ``start`` through shared links, and those links
        in the order and with the ``users`` :meth:`MaxMin.fill_component` takes (the
        reference computation, and the one used when ``local_updates`` is off)."""
        component: dict[Flow, None] = {}
        links: list[Channel] = []
        stack = [start]
        seen = self.solver.mark()  # links met carry it
        while stack:
            flow = stack.pop()
            if flow in component or not flow.attached:
                continue
            if 0 <= flow.drain_at <= now:
                self.unlink(flow)
                continue
            component[flow] = None
            for channel in flow.channels:
                if channel.fill == seen:
                    channel.users += 1
                else:
                    channel.fill = seen
                    channel.users = 1
                    links.append(channel)
                    stack.extend(channel.flows)
        return list(component), links

    def _apply(self, group: Iterable[Flow], rates: dict[Flow, float], now: float,
               closed: bool = False) -> None:
        """Give ``group`` its new rates and reschedule every transfer whose rate, or whether
        another transfer on its links outlasts it, changed (a superseded event is ignored).
        Unless the group is ``closed`` (a whole component), its neighbours are looked at too.
        """
        affected: Iterable[Flow] = group
        if not closed:
            neighbourhood = dict.fromkeys(group)
            merged = self.solver.mark()  # links whose transfers joined it
            for member in group:
                for channel in member.channels:
                    if channel.fill != merged:
                        channel.fill = merged
                        neighbourhood.update(channel.flows)  # its values are None too
            affected = neighbourhood
        changed: dict[Flow, None] = {}
        for flow in affected:
            rate = rates.get(flow, flow.rate)
            if flow.drain_at >= 0 and rate == flow.rate:
                continue
            flow.drain_at = now + self._left(flow, now) / rate
            flow.rate = rate
            changed[flow] = None
        # A transfer needs an event when its last byte leaves only if another on its links
        # is still moving then; the latest last byte per link decides (kept in the link's
        # ``latest`` under a fresh mark). In a whole component every transfer on its links
        # is one of ``affected``, so one pass over them finds every link's latest; in a
        # component whose transfers all drain at one instant (an all-to-all) none is
        # outlasted.
        mark = self.solver.mark()
        together = False
        if closed:
            drains = [flow.drain_at for flow in affected]
            together = min(drains) == max(drains)
            for flow in () if together else affected:
                drain = flow.drain_at
                for channel in flow.channels:
                    if channel.fill != mark:
                        channel.fill = mark
                        channel.latest = drain
                    elif drain > channel.latest:
                        channel.latest = drain
        for flow in affected:
            outlasted = False
            drain = flow.drain_at
            for channel in () if together else flow.channels:
                if channel.fill != mark:
                    channel.fill = mark
                    latest = -1.0
                    for other in channel.flows:
                        if other.drain_at > latest:
                            latest = other.drain_at
                    channel.latest = latest
                if channel.latest > drain:
                    outlasted = True
                    break
            if outlasted != flow.outlasted:
                flow.outlasted = outlasted
                changed[flow] = None
        self.schedule(changed, now)
