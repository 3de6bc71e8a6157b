"""What a collective call and its messages cost beyond the links' own figures: the cost
model, chosen per simulated call and used by both the timing engine and the closed forms.

A model says four things (SimGrid's network-model factors are the pattern: a latency and a
bandwidth factor per message, as callbacks of its route):

- ``launch``: seconds charged once per call before any rank starts (a kernel launch);
- ``latency(links)``: the latency a message pays over a route, given the route's links in
  order (so a model may charge per message, per hop by link kind, or by which kinds of link
  the route crosses);
- ``bandwidth(link)``: the bandwidth a library can reach on one link (line rate times an
  efficiency, a protocol's cap, ...);
- ``wire_ratio``: bytes on the wire per payload byte (a protocol's flags and headers).

It may also cap what NCCL's kernels can move, with two fields read by :func:`caps`:
``channel_cap``, the payload bytes/s one NCCL channel moves at most (LL128's per-channel
maxima), and ``gpu_cap``, the payload bytes/s one GPU's channels move at most together in
one call (LL's total). The fabric charges them as virtual links on the sending side (see
:mod:`collsim.engine.simulation`); None caps nothing and costs nothing. An optional
``net_channel_cap`` (read by :func:`network_cap`) caps one channel's payload bytes/s on
routes that cross the network only: NCCL's figure for a point-to-point channel driving a
NIC (docs/nccl.md#algorithms-p2p). An optional ``group_cap`` (read by :func:`group_cap`)
caps what one thread group of a channel moves, for a send that names its ``group``, whether
or not the channel's other groups are busy (NCCL's tree runs its reduce up and its broadcast
down on threads of their own, docs/nccl.md#tree-split); the channel's cap still bounds the
groups together.

A third field, ``send_buffer`` (read by :func:`buffered`), is the payload bytes a
connection's receiver buffers ahead of its receive, as NCCL's slots do: a send that fits
starts when it is posted, without waiting for its receive, and completes when its last byte
has left. 0 (MessageCosts' default) is the rendezvous of the closed forms: a message moves
once both sides are posted and its send completes on delivery. Two optional fields, read by
:func:`slot_credit`, count a buffer across the network in slots as well: ``slots`` messages
at most on a connection whose route crosses the network, and a message its receiver has
taken frees its slot ``slot_credit`` seconds later (the receiver's clear-to-send crossing
back); None (or no field) counts bytes only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from collsim.hardware.topology import Link, Topology

CHECKED_PAIRS = 64  # machines up to this many GPUs have every route checked for uniformity


class CostModel(Protocol):
    """What the engine asks of a cost model (see the module docstring)."""

    launch: float
    wire_ratio: float
    channel_cap: float | None   # payload bytes/s one NCCL channel moves at most; None: no cap
    gpu_cap: float | None       # payload bytes/s a GPU's channels move together; None: no cap
    send_buffer: float          # payload bytes a connection buffers ahead of its receive

    def latency(self, links: Sequence[Link]) -> float:
        """Seconds a message pays once over a route of these links, in order."""
        ...

    def bandwidth(self, link: Link) -> float:
        """Bytes per second (on the wire) reachable on ``link``."""
        ...


@dataclass(frozen=True)
class MessageCosts:
    """A cost model linear in its parts; every field's default charges nothing.

    A message over links ``l1 .. lk`` pays ``per_message + Σ (latency(li) + per_hop[kind])``
    and moves at most ``bandwidth(li) · efficiency[kind] / wire_ratio`` payload bytes per
    second on each; kinds missing from ``per_hop`` and ``efficiency`` pay 0 and reach 1.
    """

    launch: float = 0.0        # seconds before any rank starts (once per call)
    per_message: float = 0.0   # seconds every message pays once, beside its links' latency
    per_hop: Mapping[str, float] = field(default_factory=dict)     # seconds per link, by kind
    efficiency: Mapping[str, float] = field(default_factory=dict)  # of line rate, by kind
    wire_ratio: float = 1.0    # bytes on the wire per payload byte
    channel_cap: float | None = None  # payload bytes/s one NCCL channel moves at most
    gpu_cap: float | None = None      # payload bytes/s a GPU's channels move together at most
    send_buffer: float = 0.0  # payload bytes a connection buffers ahead of its receive

    def latency(self, links: Sequence[Link]) -> float:
        total, per_hop = self.per_message, self.per_hop
        if per_hop:
            for link in links:
                total += link.latency + per_hop.get(link.kind, 0.0)
        else:  # every route of an all-to-all is built once: spare the lookups
            for link in links:
                total += link.latency
        return total

    def bandwidth(self, link: Link) -> float:
        return link.bandwidth * self.efficiency.get(link.kind, 1.0)


IDEAL = MessageCosts()  # the links' own figures, no launch cost: today's canonical model


def caps(model: CostModel) -> tuple[float | None, float | None]:
    """(channel_cap, gpu_cap) of ``model`` in payload bytes/s, None where it caps nothing."""
    return model.channel_cap, model.gpu_cap


def network_cap(model: CostModel) -> float | None:
    """The payload bytes/s one channel moves at most on a route across the network (the
    model's optional ``net_channel_cap``), None where it caps nothing."""
    return getattr(model, "net_channel_cap", None)


def group_cap(model: CostModel) -> float | None:
    """The payload bytes/s one thread group of a channel moves at most (a ``Send`` of a
    ``group``), None where groups are not capped."""
    return getattr(model, "group_cap", None)


def buffered(model: CostModel) -> float:
    """The payload bytes ``model``'s connections buffer ahead of their receives (module
    docstring); 0 when sends wait for their receives."""
    return float(model.send_buffer)


def slot_credit(model: CostModel) -> tuple[int, float] | None:
    """(slots, seconds) of ``model``'s connections across the network: the messages one
    holds at most, and how long after its receiver took a message its slot is free again;
    None where connections count bytes only (module docstring)."""
    credit = getattr(model, "slot_credit", None)
    if credit is None:
        return None
    return int(model.slots), float(credit)  # type: ignore[attr-defined]


def channel_bandwidth(model: CostModel, link: Link) -> float:
    """Payload bytes per second ``link`` carries under ``model``."""
    return model.bandwidth(link) / model.wire_ratio


def route_alpha_beta(model: CostModel, links: Sequence[Link]) -> tuple[float, float]:
    """(alpha, beta) of one route of ``links`` under ``model``: the latency it charges and
    ``wire_ratio`` over the bottleneck's reachable bandwidth (seconds per payload byte)."""
    return (model.latency(links),
            model.wire_ratio / min(model.bandwidth(link) for link in links))


def path_costs(topology: Topology, model: CostModel) -> tuple[float, float] | None:
    """(alpha, beta) that every pair of GPUs of ``topology`` sees under ``model``, or None
    when routes differ.

    The topology vouches that its routes have the same latency and bottleneck bandwidth
    (:meth:`Topology.path_parameters`); a model other than :data:`IDEAL` may also charge by
    link kind, so then every route is checked too (on machines of more than CHECKED_PAIRS
    GPUs, the routes from and to GPU 0). On one GPU nothing moves and the topology's
    figures stand. A model with caps (:func:`caps`) has no closed form.
    """
    figures = topology.path_parameters()
    if any(cap is not None for cap in (*caps(model), network_cap(model))):
        return None  # a capped channel or GPU is a bottleneck no closed form knows
    if figures is None or topology.gpus < 2:
        return figures
    links = topology.links

    def costs(src: int, dst: int) -> tuple[float, float]:
        return route_alpha_beta(model, [links[i] for i in topology.route(src, dst)])

    alpha_beta = costs(0, 1)
    if model != IDEAL:
        g = topology.gpus
        pairs = ((a, b) for a in range(g) for b in range(g) if a != b) \
            if g <= CHECKED_PAIRS else \
            ((a, b) for other in range(1, g) for a, b in ((0, other), (other, 0)))
        if any(costs(a, b) != alpha_beta for a, b in pairs):
            return None
    return alpha_beta
