"""Fabric kinds: the network a cluster's nodes join at their NICs (its ``fabric`` section).

- ``switch``: one non-blocking switch for every NIC.
- ``fat_tree``: two tiers. NICs fill leaves in order, ``leaf_ports`` per leaf, a multiple of
  the NICs per node so that every leaf holds whole nodes; every leaf has one uplink to each
  of ``spines`` spines (default ``leaf_ports / oversubscription``), each of bandwidth
  ``leaf_ports * nic_bandwidth / (oversubscription * spines)``, so a leaf's uplinks carry
  1/oversubscription of what its NICs can inject.
- ``rail``: rail-optimized: NIC k of every node plugs into leaf (rail) k; rails are joined by
  ``spines`` spines (default 1) with the same oversubscription rule (a rail leaf has one
  port per node).
- ``torus``: one router per node, each joined to its neighbours (with wrap-around) in a
  ``dims`` grid of ``link`` links; the product of ``dims`` is the number of nodes.

Spine-leaf latency is ``latency`` (one hop). With one leaf there is no spine at all.
``routing`` (fat_tree and rail) says how a route picks among equal-cost spines: ``ecmp`` (a
stable hash per pair, so flows collide now and then, as Ethernet switches' ECMP does) or
``dmodk`` (the destination NIC's number modulo the spines, as an InfiniBand subnet manager's
fat-tree tables do). Without the key the nodes' network transport decides (``ib``: ``dmodk``;
collsim.hardware.transports, docs/hardware.md#fabrics).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from collsim.hardware.fabrics import LAYER_LEAF, join_spines, nic_endpoints, plug
from collsim.hardware.graph import LinkGraph
from collsim.hardware.grid import (
    torus_coordinates,
    torus_link_count,
    torus_neighbours,
    torus_position,
)
from collsim.hardware.kinds.keys import COUNT, DIMS_SCHEMA, LINK_SCHEMA, RATIO, count, link, ratio
from collsim.hardware.kinds.registry import Cabling, FabricKind, register_fabric_kind
from collsim.hardware.limits import count_text
from collsim.hardware.nodes import LinkSpec
from collsim.hardware.transports import transport
from collsim.schema import QUANTITY, at, quantity
from collsim.units import UnitError, check_bandwidth, parse_time
from collsim.yamlfile import Document, KeyPath


@dataclass(frozen=True)
class Switch:
    """Every NIC on one non-blocking switch."""

    nodes: int
    nics: int
    dims: tuple[int, ...] = ()

    @property
    def links(self) -> int:
        return 2 * self.nodes * self.nics

    def build(self, port: LinkSpec) -> LinkGraph:
        g = nic_endpoints(self.nodes, self.nics)
        g.vertex("switch", "switch", layer=LAYER_LEAF)
        for n, k in itertools.product(range(self.nodes), range(self.nics)):
            plug(g, n, k, "switch", port)
        return g


@dataclass(frozen=True)
class TwoTier:
    """Leaves joined by spines: a fat-tree (``rails`` False: NICs fill leaves in order) or a
    rail-optimized fabric (``rails``: NIC k of every node on leaf k)."""

    nodes: int
    nics: int
    ports: int            # NIC ports per leaf
    spines: int
    latency: float        # leaf <-> spine
    uplink: float         # bandwidth of one leaf <-> spine link
    rails: bool
    dims: tuple[int, ...] = ()
    routing: str = "ecmp"  # among equal-cost spines: "ecmp" (hash) or "dmodk"
    routing_declared: bool = False  # the file's fabric.routing, not the transport's

    @property
    def leaves(self) -> int:
        return self.nics if self.rails else -(-self.nodes * self.nics // self.ports)

    @property
    def links(self) -> int:
        uplinks = self.leaves * self.spines if self.leaves > 1 else 0
        return 2 * (self.nodes * self.nics + uplinks)

    def build(self, port: LinkSpec) -> LinkGraph:
        g = nic_endpoints(self.nodes, self.nics)
        if self.rails:
            names = [f"rail{k}" for k in range(self.nics)]
            for n, k in itertools.product(range(self.nodes), range(self.nics)):
                plug(g, n, k, g.vertex(names[k], "leaf", layer=LAYER_LEAF), port)
        else:
            names = [f"leaf{i}" for i in range(self.leaves)]
            for i in range(self.nodes * self.nics):
                leaf = g.vertex(names[i // self.ports], "leaf", layer=LAYER_LEAF)
                plug(g, *divmod(i, self.nics), leaf, port)
        join_spines(g, names, self.spines, self.latency, self.uplink)
        g.routing = self.routing
        return g


@dataclass(frozen=True)
class Torus:
    """A router per node on a ``dims`` torus of ``link`` links; a node's NICs on its router."""

    nodes: int
    nics: int
    dims: tuple[int, ...]
    link: LinkSpec

    @property
    def links(self) -> int:
        return 2 * (self.nodes * self.nics + torus_link_count(self.dims))

    def build(self, port: LinkSpec) -> LinkGraph:
        g = nic_endpoints(self.nodes, self.nics)
        for n, coord in enumerate(torus_coordinates(self.dims)):
            router = g.vertex(f"router{n}", "router", layer=LAYER_LEAF,
                              pos=torus_position(coord))
            for k in range(self.nics):
                plug(g, n, k, router, port)
        for a, b in torus_neighbours(self.dims):
            g.connect(f"router{a}", f"router{b}", self.link.latency, self.link.bandwidth,
                      "torus")
        return g


def _switch(doc: Document, prefix: KeyPath, cabling: Cabling) -> Switch:
    return Switch(cabling.nodes, cabling.nics)


def _two_tier(doc: Document, prefix: KeyPath, cabling: Cabling, rails: bool) -> TwoTier:
    nodes, nics = cabling.nodes, cabling.nics
    oversubscription = ratio(doc, prefix + ("oversubscription",))
    latency = quantity(doc, prefix + ("latency",), parse_time)
    if rails:
        ports, default = nodes, 1
    else:
        ports = count(doc, prefix + ("leaf_ports",))
        if nics and ports % nics:
            raise doc.error(prefix + ("leaf_ports",), f"{ports} ports per leaf do not hold "
                            f"whole nodes of {nics} NICs each: NICs fill leaves node by node, "
                            f"so give a multiple of {nics}")
        default = max(1, round(ports / oversubscription))
    spines = count(doc, prefix + ("spines",)) if "spines" in at(doc.data, prefix) else default
    uplink = ports * cabling.port.bandwidth / (oversubscription * spines) \
        if cabling.port else math.inf
    declared = at(doc.data, prefix).get("routing")
    routing = declared or transport(cabling.transport).routing.value
    fabric = TwoTier(nodes, nics, ports, spines, latency, uplink, rails, routing=str(routing),
                     routing_declared=declared is not None)
    if cabling.port and fabric.leaves > 1:
        try:
            check_bandwidth(uplink)
        except UnitError as exc:
            key = "spines" if "spines" in at(doc.data, prefix) else "oversubscription"
            raise doc.error(prefix + (key,), f"with {count_text(spines)} spine"
                            f"{'s' if spines != 1 else ''} at oversubscription "
                            f"{oversubscription:g}, each leaf uplink would carry "
                            f"{uplink:.3g} B/s: {exc}; change 'spines' or "
                            f"'oversubscription'") from None
    return fabric


def _fat_tree(doc: Document, prefix: KeyPath, cabling: Cabling) -> TwoTier:
    return _two_tier(doc, prefix, cabling, rails=False)


def _rail(doc: Document, prefix: KeyPath, cabling: Cabling) -> TwoTier:
    return _two_tier(doc, prefix, cabling, rails=True)


def _torus(doc: Document, prefix: KeyPath, cabling: Cabling) -> Torus:
    dims = tuple(count(doc, prefix + ("dims", i)) for i in range(len(at(doc.data, prefix +
                                                                          ("dims",)))))
    if math.prod(dims) != cabling.nodes:
        shown = ", ".join(str(d) if d.bit_length() <= 64 else count_text(d) for d in dims)
        raise doc.error(prefix + ("dims",), f"[{shown}] holds {count_text(math.prod(dims))} "
                        f"nodes but 'nodes' is {cabling.nodes}; change both")
    return Torus(cabling.nodes, cabling.nics, dims, link(doc, prefix + ("link",)))


# Among equal-cost spines: a stable hash per flow (ECMP, collisions and all) or the
# destination NIC's number modulo the spines (D-mod-k); absent, the transport's.
ROUTING = {"enum": ["ecmp", "dmodk"]}

register_fabric_kind(FabricKind("switch", {}, (), _switch, "one non-blocking switch"))
register_fabric_kind(FabricKind(
    "fat_tree", {"leaf_ports": COUNT, "oversubscription": RATIO, "spines": COUNT,
                 "latency": QUANTITY, "routing": ROUTING}, ("leaf_ports", "latency"), _fat_tree,
    "two tiers: NICs fill leaves of leaf_ports, every leaf up to every spine"))
register_fabric_kind(FabricKind(
    "rail", {"spines": COUNT, "oversubscription": RATIO, "latency": QUANTITY,
             "routing": ROUTING}, ("latency",),
    _rail, "rail-optimized: NIC k of every node on leaf k, rails joined by spines"))
register_fabric_kind(FabricKind(
    "torus", {"dims": DIMS_SCHEMA, "link": LINK_SCHEMA}, ("dims", "link"), _torus,
    "a router per node on a 1D/2D/3D torus"))
