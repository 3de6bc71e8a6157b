"""Machines as graphs: named vertices (GPUs, switches, CPUs, NICs) joined by directed links,
with shortest-path routes and deterministic ECMP, computed lazily and cached.

Routes minimise the sum of a link's integer cost, ``round(1e15 / bandwidth)`` (femtoseconds
per byte): fewer hops win among equal links and fast links win over slow ones, and equal
paths tie exactly, because the sums are of integers. Among equal-cost paths the route is
picked hop by hop, walking back from the destination, by a stable hash of (source,
destination, vertex): the same pair always takes the same path, and different pairs spread
over parallel uplinks as ECMP switches spread flows, colliding now and then. (CRC-32, not
Python's salted ``hash``.) A graph whose ``routing`` is ``dmodk`` picks instead the
destination endpoint's number modulo the choices (switches in the order they were added),
as InfiniBand's D-mod-k tables do: on a two-tier tree, the spine is destination mod spines.

GPUs and NICs are endpoints, not routers: a route never passes through one. In the routing
graph every such vertex is split into an outgoing half and an incoming half.
"""

from __future__ import annotations

import zlib
from collections import OrderedDict
from dataclasses import dataclass, field
from heapq import heappop, heappush

import networkx as nx

from collsim.hardware.topology import Link, Topology

COST_SCALE = 1e15


def link_cost(bandwidth: float) -> int:
    """Integer routing cost of a link: femtoseconds per byte, at least 1."""
    return max(1, round(COST_SCALE / bandwidth))


def stable_hash(*parts: object) -> int:
    """A hash that is the same in every Python process (unlike the built-in ``hash``)."""
    return zlib.crc32("\x1f".join(map(str, parts)).encode())


@dataclass
class Vertex:
    """A named point of the machine; ``transit`` says whether routes may pass through it."""

    name: str
    kind: str
    transit: bool = True
    layer: int = 0                       # drawing row: 0 at the bottom
    pos: tuple[float, float] | None = None


@dataclass
class LinkGraph:
    """Vertices and directed links under construction; :meth:`connect` adds both directions."""

    vertices: dict[str, Vertex] = field(default_factory=dict)
    links: list[Link] = field(default_factory=list)
    # How a route picks among equal-cost paths: "ecmp" (a stable hash per flow) or "dmodk"
    # (the destination endpoint's number modulo their count, switches in the order added).
    routing: str = "ecmp"

    def vertex(self, name: str, kind: str, transit: bool = True, layer: int = 0,
               pos: tuple[float, float] | None = None) -> str:
        """Add a vertex (once) and return its name."""
        self.vertices.setdefault(name, Vertex(name, kind, transit, layer, pos))
        return name

    def connect(self, a: str, b: str, latency: float, bandwidth: float, kind: str
                ) -> tuple[int, int]:
        """A full-duplex link: two directed links, a->b then b->a; returns their indices."""
        self.links.append(Link(a, b, latency, bandwidth, kind))
        self.links.append(Link(b, a, latency, bandwidth, kind))
        return len(self.links) - 2, len(self.links) - 1

    def extend(self, other: LinkGraph, prefix: str = "") -> int:
        """Copy ``other``'s vertices and links, names prefixed; returns the first link index."""
        first = len(self.links)
        for v in other.vertices.values():
            self.vertex(prefix + v.name, v.kind, v.transit, v.layer, v.pos)
        for link in other.links:
            self.links.append(Link(prefix + link.src, prefix + link.dst, link.latency,
                                   link.bandwidth, link.kind))
        return first


def tail(vertex: Vertex) -> object:
    """The routing-graph vertex that ``vertex``'s outgoing links leave from."""
    return vertex.name if vertex.transit else (vertex.name, "out")


def head(vertex: Vertex) -> object:
    """The routing-graph vertex that ``vertex``'s incoming links arrive at."""
    return vertex.name if vertex.transit else (vertex.name, "in")


def routing_graph(graph: LinkGraph) -> nx.DiGraph:
    """A networkx DiGraph with endpoints split, each edge carrying ``cost`` and ``link``.

    Of parallel links between the same two vertices only the cheapest (first) is routed.
    """
    g = nx.DiGraph()
    for index, link in enumerate(graph.links):
        u, v = tail(graph.vertices[link.src]), head(graph.vertices[link.dst])
        cost = link_cost(link.bandwidth)
        if not g.has_edge(u, v) or g[u][v]["cost"] > cost:
            g.add_edge(u, v, cost=cost, link=index)
    return g


def _name(vertex: object) -> str:
    """The LinkGraph vertex a routing-graph vertex stands for (endpoints are split)."""
    return vertex[0] if isinstance(vertex, tuple) else vertex  # type: ignore[return-value]


class NoRoute(ValueError):
    """Two vertices that no path joins."""


class Router:
    """Routes between vertices of a LinkGraph: shortest by cost, ECMP by stable hash.

    An endpoint with one link out and one link in (a NIC on its leaf, a GPU on its switch)
    is a *stub*: its routes are that link plus a route between the vertices at the other
    end, so Dijkstra runs on the core graph without stubs. One Dijkstra per source (its
    distances kept, from which a route's equal-cost predecessors are read), cached for the
    ``keep`` most recent sources, so nothing is computed all-pairs up front.
    """

    def __init__(self, graph: LinkGraph, keep: int = 256) -> None:
        self.graph = graph
        self.net = routing_graph(graph)
        self.keep = keep
        self._preds: OrderedDict[object, dict] = OrderedDict()  # distances by source
        self._succ: dict | None = None  # adjacency of the core graph, made on first use
        self._dmodk: dict[str, int] | None = None
        if graph.routing == "dmodk":  # endpoints numbered, vertices ordered, as added
            # Switches are numbered after the endpoints: a helper rank on one (SHARP) is a
            # destination too, and the endpoints keep their numbers.
            vertices = graph.vertices.values()
            self._dmodk = {name: i for i, name in enumerate(
                [v.name for v in vertices if not v.transit]
                + [v.name for v in vertices if v.transit])}
            self._order = {name: i for i, name in enumerate(graph.vertices)}
        self._pred: dict = {}
        self._out: dict[str, tuple[object, int]] = {}
        self._in: dict[str, tuple[object, int]] = {}
        for name, vertex in graph.vertices.items():
            out, into = tail(vertex), head(vertex)
            if vertex.transit or out not in self.net or into not in self.net:
                continue
            if self.net.out_degree(out) == 1 and self.net.in_degree(into) == 1:
                (hop, data), = self.net[out].items()
                (back, data_in), = self.net.pred[into].items()
                self._out[name], self._in[name] = (hop, data["link"]), (back, data_in["link"])
        self.core = self.net.subgraph(
            v for v in self.net if not (isinstance(v, tuple) and v[0] in self._out)).copy()

    def _distances(self, start: object) -> dict:
        """Each reachable vertex's cost from ``start`` (Dijkstra on integer costs, so
        equal paths tie exactly); the equal-cost predecessors are read off these along the
        one route walked back, not kept for every vertex."""
        dist = self._preds.get(start)
        if dist is None:
            if self._succ is None:
                core = self.core
                self._succ = {v: [(u, d["cost"]) for u, d in core[v].items()] for v in core}
                self._pred = {v: [(u, d["cost"], d["link"]) for u, d in core.pred[v].items()]
                              for v in core}
            succ = self._succ
            dist = {}
            if start in succ:
                tentative = {start: 0}
                heap = [(0, 0, start)]
                order = 1  # ties broken by push order: vertices need not be comparable
                while heap:
                    d, _, v = heappop(heap)
                    if v in dist:
                        continue
                    dist[v] = d
                    for u, cost in succ[v]:
                        du = d + cost
                        if u not in dist and du < tentative.get(u, du + 1):
                            tentative[u] = du
                            heappush(heap, (du, order, u))
                            order += 1
            else:
                dist[start] = 0
            self._preds[start] = dist
            if len(self._preds) > self.keep:
                self._preds.popitem(last=False)
        else:
            self._preds.move_to_end(start)
        return dist

    def path(self, src: str, dst: str) -> tuple[int, ...]:
        """Link indices of the route from vertex ``src`` to vertex ``dst`` (empty if equal)."""
        if src == dst:
            return ()
        start, end = tail(self.graph.vertices[src]), head(self.graph.vertices[dst])
        first: tuple[int, ...] = ()
        last: tuple[int, ...] = ()
        if src in self._out:
            start, link = self._out[src]
            first = (link,)
            if start == end:
                return first
        if dst in self._in:
            end, link = self._in[dst]
            last = (link,)
        dist = self._distances(start)
        if end not in dist:
            raise NoRoute(f"no path from {src} to {dst}")
        hops = []
        here = end
        while here != start:
            # The predecessors on a shortest path: those a shortest path reaches ``here`` from.
            at = dist[here]
            choices = [(u, link) for u, cost, link in self._pred[here]
                       if u in dist and dist[u] + cost == at]
            if len(choices) > 1:
                if self._dmodk is not None:
                    order = self._order
                    choices.sort(key=lambda choice: order[_name(choice[0])])
                    previous, link = choices[self._dmodk[dst] % len(choices)]
                else:
                    choices.sort(key=lambda choice: str(choice[0]))
                    previous, link = choices[stable_hash(src, dst, here) % len(choices)]
            else:
                previous, link = choices[0]
            hops.append(link)
            here = previous
        return first + tuple(reversed(hops)) + last


class GraphTopology(Topology):
    """A machine given as a LinkGraph whose GPU vertices are listed in GPU order."""

    def __init__(self, name: str, kind: str, graph: LinkGraph, gpu_vertices: list[str],
                 reduce_bandwidth: float = float("inf"), node_of: list[int] | None = None,
                 source: str = "", uniform: tuple[float, float] | None = None) -> None:
        super().__init__(name, kind, len(gpu_vertices), graph.links, reduce_bandwidth,
                         list(node_of or []), source)
        self.graph = graph
        self.gpu_vertices = gpu_vertices
        self.router = Router(graph)
        self.uniform = uniform

    def route(self, src: int, dst: int) -> tuple[int, ...]:
        return self.router.path(self.gpu_vertices[src], self.gpu_vertices[dst])

    def path_parameters(self) -> tuple[float, float] | None:
        return self.uniform

    def link_graph(self) -> LinkGraph:
        """The whole machine as one LinkGraph (for drawing and bisection)."""
        return self.graph
