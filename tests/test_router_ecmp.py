"""The router's routes against networkx's own Dijkstra: on random graphs with parallel
equal-cost paths, every route is a shortest path, and its hop at each vertex is the one the
stable hash picks among *all* equal-cost predecessors (as networkx lists them)."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collsim.errors import InputError
from collsim.hardware.graph import LinkGraph, NoRoute, Router, stable_hash
from collsim.hardware.loader import load_topology


@st.composite
def graphs(draw):
    """Endpoints e0.. hung on switches s0.. joined at random, a few bandwidths (ties)."""
    switches = draw(st.integers(2, 7))
    endpoints = draw(st.integers(2, 6))
    graph = LinkGraph()
    for s in range(switches):
        graph.vertex(f"s{s}", "switch")
    for e in range(endpoints):
        graph.vertex(f"e{e}", "gpu", transit=False)
        graph.connect(f"e{e}", f"s{draw(st.integers(0, switches - 1))}", 1e-6, 100e9, "port")
    pairs = draw(st.lists(st.tuples(st.integers(0, switches - 1),
                                    st.integers(0, switches - 1)), max_size=18))
    for a, b in pairs:
        if a != b:
            bandwidth = draw(st.sampled_from([50e9, 100e9, 200e9]))
            graph.connect(f"s{a}", f"s{b}", 1e-6, bandwidth, "fabric")
    return graph, endpoints


@settings(max_examples=60, deadline=None)
@given(graphs())
def test_routes_are_shortest_and_hash_over_every_equal_cost_predecessor(case):
    graph, endpoints = case
    router = Router(graph, keep=2)  # a small cache: sources are evicted and recomputed
    net = router.net
    for a in range(endpoints):
        for b in range(endpoints):
            src, dst = f"e{a}", f"e{b}"
            start, end = (src, "out"), (dst, "in")
            preds, dist = nx.dijkstra_predecessor_and_distance(net, start, weight="cost")
            if a == b:
                assert router.path(src, dst) == ()
                continue
            if end not in dist:
                try:
                    router.path(src, dst)
                except NoRoute:
                    continue
                raise AssertionError("a route where networkx finds none")
            hops = router.path(src, dst)
            # Walk networkx's predecessors back with the same hash: the same links.
            expected, here = [], end
            while here != start:
                choices = sorted(preds[here], key=str)
                previous = choices[stable_hash(src, dst, here) % len(choices)] \
                    if len(choices) > 1 else choices[0]
                expected.append(net[previous][here]["link"])
                here = previous
            assert hops == tuple(reversed(expected))


def test_dmodk_takes_the_spine_of_the_destination_nic_and_ecmp_does_not():
    """On a 2:1 fat-tree of 16 spines, D-mod-k sends every cross-leaf route through spine
    (destination NIC mod 16); the default hash does not, for some pairs."""
    file = Path(__file__).resolve().parent.parent / "topologies" / "h100-cluster-2to1.yaml"
    for routing, expect_all in (("dmodk", True), ("ecmp", False)):
        topology = load_topology(file, {"nodes": 8, "fabric.routing": routing})
        spines = []
        for src in range(0, topology.gpus, 3):
            for dst in range(topology.gpus):
                names = [topology.links[i].dst for i in topology.route(src, dst)]
                spine = [int(n[5:]) for n in names if n.startswith("spine")]
                if spine:
                    nic = 8 * (dst // 8) + topology.nic_of(dst)  # the NIC's number
                    spines.append(spine[0] == nic % 16)
        assert spines and all(spines) == expect_all
    with pytest.raises(InputError, match="fabric.routing"):
        load_topology(file, {"nodes": 8, "fabric.routing": "random"})


def test_dmodk_routes_to_a_switch_endpoint():
    """A helper rank on a leaf (NVLS across nodes with SHARP) is a destination D-mod-k
    numbers too, and the NICs keep their spines."""
    file = Path(__file__).resolve().parent.parent / "topologies" / "h100-cluster.yaml"
    topology = load_topology(file, {"nodes": 8, "fabric.routing": "dmodk"})
    leaf = topology.endpoint("leaf1")
    route = topology.route(0, leaf)  # GPU 0 on leaf 0, up a spine, down to leaf 1
    assert topology.links[route[-1]].dst == "leaf1"
    assert any(topology.links[i].dst.startswith("spine") for i in route)
