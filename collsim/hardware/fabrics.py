"""What every network between nodes is built from: a NIC endpoint per NIC of every node,
each NIC's port (one full-duplex link of ``nics.link`` to its first switch), and the
spines that join a two-tier fabric's leaves. The fabric kinds themselves are in
:mod:`collsim.hardware.kinds.fabrics`."""

from __future__ import annotations

import itertools

from collsim.hardware.graph import LinkGraph
from collsim.hardware.nodes import LAYER_NIC, LinkSpec

LAYER_LEAF, LAYER_SPINE = 6, 7


def nic_vertex(node: int, nic: int) -> str:
    """The fabric's name of NIC ``nic`` of node ``node``."""
    return f"n{node}.nic{nic}"


def nic_endpoints(nodes: int, nics: int) -> LinkGraph:
    """A fabric graph holding only the NICs of ``nodes`` nodes of ``nics`` NICs each."""
    g = LinkGraph()
    for n, k in itertools.product(range(nodes), range(nics)):
        g.vertex(nic_vertex(n, k), "nic", transit=False, layer=LAYER_NIC)
    return g


def plug(g: LinkGraph, node: int, nic: int, switch: str, port: LinkSpec) -> None:
    """NIC ``nic`` of node ``node`` into ``switch`` by its port."""
    g.connect(nic_vertex(node, nic), switch, port.latency, port.bandwidth, "nic")


def join_spines(g: LinkGraph, leaves: list[str], spines: int, latency: float,
                bandwidth: float) -> None:
    """Every leaf to each of ``spines`` spines by one uplink (none with a single leaf)."""
    if len(leaves) < 2:
        return
    for s in range(spines):
        spine = g.vertex(f"spine{s}", "spine", layer=LAYER_SPINE)
        for leaf in leaves:
            g.connect(leaf, spine, latency, bandwidth, "fabric")
