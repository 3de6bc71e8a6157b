"""The network between nodes: which switches the NICs plug into and how those switches connect.

Every NIC's port is one full-duplex link of ``nics.link`` to the first switch. Kinds:

- ``switch``: one non-blocking switch for every NIC.
- ``fat_tree``: two tiers. NICs fill leaves in order, ``leaf_ports`` per leaf; every leaf has
  one uplink to each of ``spines`` spines (default ``leaf_ports / oversubscription``), each
  of bandwidth ``leaf_ports * nic_bandwidth / (oversubscription * spines)``, so a leaf's
  uplinks carry 1/oversubscription of what its NICs can inject.
- ``rail``: rail-optimized: NIC k of every node plugs into leaf (rail) k; rails are joined by
  ``spines`` spines (default 1) with the same oversubscription rule (a rail leaf has one
  port per node).
- ``torus``: one router per node, each joined to its neighbours (with wrap-around) in a
  ``dims`` grid of ``link`` links; the product of ``dims`` is the number of nodes.

Spine-leaf latency is ``latency`` (one hop). With one leaf there is no spine at all.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from collsim.hardware.graph import LinkGraph
from collsim.hardware.nodes import LinkSpec

FABRIC_KINDS = ("switch", "fat_tree", "rail", "torus")
LAYER_LEAF, LAYER_SPINE = 6, 7


@dataclass(frozen=True)
class FabricSpec:
    """What a fabric kind is built from; unused fields stay at their defaults."""

    kind: str
    latency: float = 0.0
    leaf_ports: int = 0
    oversubscription: float = 1.0
    spines: int | None = None
    dims: tuple[int, ...] = ()
    link: LinkSpec | None = None


def nic_vertex(node: int, nic: int) -> str:
    """The fabric's name of NIC ``nic`` of node ``node``."""
    return f"n{node}.nic{nic}"


def build_fabric(spec: FabricSpec, nodes: int, nics: int, port: LinkSpec) -> LinkGraph:
    """The fabric's graph: NIC endpoints (``nic_vertex``), switches, and their links."""
    g = LinkGraph()
    for n, k in itertools.product(range(nodes), range(nics)):
        g.vertex(nic_vertex(n, k), "nic", transit=False, layer=4)
    if spec.kind == "switch":
        g.vertex("switch", "switch", layer=LAYER_LEAF)
        for n, k in itertools.product(range(nodes), range(nics)):
            g.connect(nic_vertex(n, k), "switch", port.latency, port.bandwidth, "nic")
    elif spec.kind == "fat_tree":
        total = nodes * nics
        leaves = math.ceil(total / spec.leaf_ports)
        for i in range(total):
            leaf = g.vertex(f"leaf{i // spec.leaf_ports}", "leaf", layer=LAYER_LEAF)
            g.connect(nic_vertex(*divmod(i, nics)), leaf, port.latency, port.bandwidth, "nic")
        _spines(g, spec, [f"leaf{i}" for i in range(leaves)], spec.leaf_ports, port,
                default=max(1, round(spec.leaf_ports / spec.oversubscription)))
    elif spec.kind == "rail":
        for n, k in itertools.product(range(nodes), range(nics)):
            leaf = g.vertex(f"rail{k}", "leaf", layer=LAYER_LEAF)
            g.connect(nic_vertex(n, k), leaf, port.latency, port.bandwidth, "nic")
        _spines(g, spec, [f"rail{k}" for k in range(nics)], nodes, port, default=1)
    elif spec.kind == "torus":
        _torus(g, spec, nodes, nics, port)
    else:
        raise ValueError(f"unknown fabric kind {spec.kind!r}")
    return g


def spine_count(spec: FabricSpec, default: int) -> int:
    """Spines of a two-tier fabric: given, or ``default``."""
    return spec.spines if spec.spines else default


def _spines(g: LinkGraph, spec: FabricSpec, leaves: list[str], ports: int, port: LinkSpec,
            default: int) -> None:
    """Join every leaf to every spine, uplinks sized by the oversubscription ratio."""
    if len(leaves) < 2:
        return
    spines = spine_count(spec, default)
    bandwidth = ports * port.bandwidth / (spec.oversubscription * spines)
    for s in range(spines):
        spine = g.vertex(f"spine{s}", "spine", layer=LAYER_SPINE)
        for leaf in leaves:
            g.connect(leaf, spine, spec.latency, bandwidth, "fabric")


def torus_coordinates(dims: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Coordinates of every position of a ``dims`` grid, index = row-major order."""
    return list(itertools.product(*(range(d) for d in dims)))


def torus_neighbours(dims: tuple[int, ...]) -> list[tuple[int, int]]:
    """Index pairs joined by a torus link (+1 along each dimension, wrapping; no duplicates)."""
    coords = torus_coordinates(dims)
    index = {c: i for i, c in enumerate(coords)}
    pairs = set()
    for c in coords:
        for axis, size in enumerate(dims):
            if size < 2:
                continue
            other = list(c)
            other[axis] = (c[axis] + 1) % size
            a, b = index[c], index[tuple(other)]
            pairs.add((min(a, b), max(a, b)))
    return sorted(pairs)


def torus_position(coord: tuple[int, ...]) -> tuple[float, float]:
    """Where to draw a grid position: x = first axis, y = second (third offsets both)."""
    x = coord[0] if coord else 0
    y = coord[1] if len(coord) > 1 else 0
    z = coord[2] if len(coord) > 2 else 0
    return (x + 0.3 * z, y + 0.3 * z)


def _torus(g: LinkGraph, spec: FabricSpec, nodes: int, nics: int, port: LinkSpec) -> None:
    coords = torus_coordinates(spec.dims)
    for n, coord in enumerate(coords):
        router = g.vertex(f"router{n}", "router", layer=LAYER_LEAF, pos=torus_position(coord))
        for k in range(nics):
            g.connect(nic_vertex(n, k), router, port.latency, port.bandwidth, "nic")
    for a, b in torus_neighbours(spec.dims):
        g.connect(f"router{a}", f"router{b}", spec.link.latency, spec.link.bandwidth, "torus")


def gray_order(dims: tuple[int, ...]) -> list[int]:
    """Row-major indices of a ``dims`` grid in boustrophedon (reflected Gray) order: each
    step moves one position along one axis, so consecutive entries are torus neighbours."""
    if not dims:
        return [0]
    order: list[tuple[int, ...]] = [()]
    for size in dims:
        grown = []
        for i, prefix in enumerate(order):
            steps = range(size) if i % 2 == 0 else range(size - 1, -1, -1)
            grown.extend(prefix + (s,) for s in steps)
        order = grown
    index = {c: i for i, c in enumerate(torus_coordinates(dims))}
    return [index[c] for c in order]
