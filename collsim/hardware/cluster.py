"""A cluster: ``nodes`` copies of one node graph joined by a fabric graph at their NICs.

Link indices: node n's links come first, as a block of the node's link count each, in node
order; the fabric's links follow. A route inside a node is the node's own route shifted to
its block, so it is computed once per pair of local GPUs for all nodes alike. A route
between nodes is: source GPU to its NIC (node route), NIC to NIC across the fabric (shortest
path, among equal ones by the fabric's routing, hash ECMP or D-mod-k, computed per source NIC
when first needed), NIC to destination GPU.
"""

from __future__ import annotations

import math

from collsim.hardware.fabrics import nic_vertex
from collsim.hardware.graph import LinkGraph, Router
from collsim.hardware.grid import gray_order
from collsim.hardware.nodes import NodeGraph
from collsim.hardware.topology import Endpoint, Link, Topology

SWITCH_KINDS = ("switch", "leaf", "spine")  # fabric vertices a helper rank may sit on


class ClusterTopology(Topology):
    """``nodes`` identical nodes (GPU ``n * gpus_per_node + i`` is GPU i of node n)."""

    routing: str | None = None      # a fat-tree's or rails' choice among spines; None: no choice
    routing_declared: bool = False  # named by the file (fabric.routing), not the transport

    def __init__(self, name: str, kind: str, node: NodeGraph, nodes: int,
                 fabric: LinkGraph | None, reduce_bandwidth: float = math.inf,
                 source: str = "", torus_dims: tuple[int, ...] = ()) -> None:
        per_node = len(node.graph.links)
        links = [Link(f"n{n}.{link.src}", f"n{n}.{link.dst}", link.latency, link.bandwidth,
                      link.kind) for n in range(nodes) for link in node.graph.links]
        self.fabric_offset = len(links)
        if fabric is not None:
            links.extend(fabric.links)
        gpn = len(node.gpus)
        super().__init__(name, kind, nodes * gpn, links, reduce_bandwidth,
                         [g // gpn for g in range(nodes * gpn)], source)
        self.node = node
        self.node_count = nodes
        self.gpus_per_node = gpn
        self.links_per_node = per_node
        self.fabric = fabric
        self.fabric_router = Router(fabric) if fabric is not None and nodes > 1 else None
        self.torus_dims = torus_dims

    def route(self, src: int, dst: int) -> tuple[int, ...]:
        if src >= self.gpus or dst >= self.gpus:
            return self._endpoint_route(src, dst)
        ns, ls = divmod(src, self.gpus_per_node)
        nd, ld = divmod(dst, self.gpus_per_node)
        if ns == nd:
            shift = ns * self.links_per_node
            return tuple(i + shift for i in self.node.gpu_route(ls, ld))
        if self.fabric_router is None:
            raise ValueError(f"{self.name}: nodes {ns} and {nd} have no network between them")
        up, down = ns * self.links_per_node, nd * self.links_per_node
        nic_s, nic_d = self.node.nic_of_gpu[ls], self.node.nic_of_gpu[ld]
        middle = self.fabric_router.path(nic_vertex(ns, nic_s), nic_vertex(nd, nic_d))
        return (tuple(i + up for i in self.node.to_nic(ls))
                + tuple(i + self.fabric_offset for i in middle)
                + tuple(i + down for i in self.node.from_nic(ld)))

    def path_parameters(self) -> tuple[float, float] | None:
        return self.node.uniform if self.node_count == 1 else None

    def ring_hint(self, gpus: list[int]) -> list[int] | None:
        """One node's GPUs in local ring order: node 0's order for the same local GPUs,
        shifted (every node is the same node, so the search runs once, not per node)."""
        gpn = self.gpus_per_node
        node = gpus[0] // gpn if gpus else 0
        if node == 0 or any(g // gpn != node for g in gpus):
            return None  # node 0's own search (placement.local_ring), or not one node
        shift = node * gpn
        local = tuple(g - shift for g in gpus)
        rings = self.__dict__.setdefault("_local_rings", {})
        ring = rings.get(local)
        if ring is None:
            from collsim.hardware.placement import local_ring  # placement imports topologies
            ring = rings[local] = tuple(local_ring(self, list(local)))
        return [g + shift for g in ring]

    def nic_of(self, gpu: int) -> int | None:
        nics = self.node.nic_of_gpu
        return nics[gpu % self.gpus_per_node] if nics else None

    def endpoints(self) -> tuple[Endpoint, ...]:
        """Each node's NVSwitch (``n<k>.nvswitch``, on nvswitch nodes), then the network's
        switches by their fabric names (``switch``, ``leaf0``, ``rail3``, ``spine0``)."""
        found = self.__dict__.get("_endpoints")
        if found is None:
            names: list[tuple[str, str, int | None]] = []
            if "nvswitch" in self.node.graph.vertices:
                names += [(f"n{n}.nvswitch", "nvswitch", n) for n in range(self.node_count)]
            if self.fabric is not None:
                names += [(v.name, v.kind, None) for v in self.fabric.vertices.values()
                          if v.kind in SWITCH_KINDS]
            found = tuple(Endpoint(name, self.gpus + i, kind, node)
                          for i, (name, kind, node) in enumerate(names))
            self._endpoints = found
        return found

    def _endpoint_route(self, src: int, dst: int) -> tuple[int, ...]:
        """Routes to and from switch endpoints: a GPU reaches its node's NVSwitch by its
        NVLink, and a network switch through its NIC and the fabric's shortest path."""
        if src == dst:
            return ()
        a, b = self._place(src), self._place(dst)
        if a[0] == "gpu" and b[0] == "nvswitch" and a[1] == b[1]:
            return self._in_node(a[1], self.node.router.path(self.node.gpus[a[2]], "nvswitch"))
        if a[0] == "nvswitch" and b[0] == "gpu" and a[1] == b[1]:
            return self._in_node(b[1], self.node.router.path("nvswitch", self.node.gpus[b[2]]))
        if self.fabric is not None and "nvswitch" not in (a[0], b[0]):
            router = self.fabric_router or Router(self.fabric)
            self.fabric_router = router
            net = self.fabric_offset
            if a[0] == "gpu":
                _, node, local = a
                nic = nic_vertex(node, self.node.nic_of_gpu[local])
                return (self._in_node(node, self.node.to_nic(local))
                        + tuple(i + net for i in router.path(nic, b[1])))
            if b[0] == "gpu":
                _, node, local = b
                nic = nic_vertex(node, self.node.nic_of_gpu[local])
                return (tuple(i + net for i in router.path(a[1], nic))
                        + self._in_node(node, self.node.from_nic(local)))
            return tuple(i + net for i in router.path(a[1], b[1]))
        raise ValueError(f"{self.name}: no route from {self._name(src)} to {self._name(dst)}")

    def _place(self, index: int) -> tuple:
        """("gpu", node, local index), ("nvswitch", node) or ("fabric", vertex name)."""
        if index < self.gpus:
            return ("gpu", *divmod(index, self.gpus_per_node))
        endpoint = self.endpoints()[index - self.gpus]
        if endpoint.kind == "nvswitch":
            return ("nvswitch", endpoint.node)
        return ("fabric", endpoint.name)

    def _name(self, index: int) -> str:
        return f"GPU {index}" if index < self.gpus else self.endpoints()[index - self.gpus].name

    def _in_node(self, node: int, route: tuple[int, ...]) -> tuple[int, ...]:
        shift = node * self.links_per_node
        return tuple(i + shift for i in route)

    def node_order(self) -> list[int]:
        """Nodes in the order a ring should visit them (a torus is walked in Gray order)."""
        if self.torus_dims:
            return gray_order(self.torus_dims)
        return list(range(self.node_count))

    def link_graph(self) -> LinkGraph:
        """The whole machine as one LinkGraph, links in the same order as :attr:`links`.

        NICs pass traffic here (PCIe side to network port), unlike in routing, where the
        node part and the fabric part of a route meet at them."""
        whole = LinkGraph()
        for n in range(self.node_count):
            whole.extend(self.node.graph, prefix=f"n{n}.")
        if self.fabric is not None:
            whole.extend(self.fabric)
        for vertex in whole.vertices.values():
            if vertex.kind == "nic":
                vertex.transit = True  # joins its PCIe link to its network port
        return whole
