"""collsim/nccl/layout.py: NCCL's trees (against trees.cc's illustration and hand-drawn
cases), rings that are Hamiltonian cycles crossing nodes on the NIC the layout says (checked
with the topology's routes), chains, and lanes of identical channels."""

from __future__ import annotations

import pytest

from collsim.hardware.loader import topology_from_text
from collsim.hardware.placement import ring_order
from collsim.nccl.layout import (
    binary_tree,
    double_tree,
    group_lanes,
    job_layout,
    machine_layout,
)
from collsim.program import Job


def edges(tree) -> dict[int, tuple[int, ...]]:
    return {node: kids for node, kids in enumerate(tree.children) if kids}


def test_binary_tree_of_14_nodes_is_the_one_trees_cc_draws():
    # docs/nccl.md#topology-trees: root 0 -> 8; 8 -> 4, 12; 4 -> 2, 6; 12 -> 10, 13; then the
    # leaves.
    tree = binary_tree(14)
    assert tree.root == 0
    assert edges(tree) == {0: (8,), 8: (4, 12), 4: (2, 6), 12: (10, 13), 2: (1, 3),
                           6: (5, 7), 10: (9, 11)}


@pytest.mark.parametrize("n, drawn", [
    (1, {}),
    (2, {0: (1,)}),
    (3, {0: (2,), 2: (1,)}),
    (4, {0: (2,), 2: (1, 3)}),
    (5, {0: (4,), 4: (2,), 2: (1, 3)}),
    (6, {0: (4,), 4: (2, 5), 2: (1, 3)}),
    (8, {0: (4,), 4: (2, 6), 2: (1, 3), 6: (5, 7)}),
])
def test_small_binary_trees_drawn_by_hand(n, drawn):
    assert edges(binary_tree(n)) == drawn


def test_the_second_tree_is_mirrored_for_even_and_shifted_for_odd_node_counts():
    first, second = double_tree(4)       # mirror: r plays 3 - r
    assert second.root == 3 and edges(second) == {3: (1,), 1: (0, 2)}
    first, second = double_tree(5)       # shift: r plays r - 1
    assert second.root == 1 and edges(second) == {1: (0,), 0: (3,), 3: (2, 4)}
    first, second = double_tree(14)
    assert second.root == 13 and edges(second)[13] == (5,)


@pytest.mark.parametrize("n", range(1, 65))
def test_both_trees_span_every_node_and_even_counts_balance_inner_nodes(n):
    for tree in double_tree(n):
        assert sum(len(kids) for kids in tree.children) == n - 1
        assert all(len(kids) <= 2 for kids in tree.children)
        for node in range(n):  # every node reaches the root
            hops = 0
            while tree.parent[node] is not None and hops <= n:
                node, hops = tree.parent[node], hops + 1
            assert node == tree.root
    if n % 2 == 0:  # mirrored: a node with children in one tree is a leaf in the other
        first, second = double_tree(n)
        assert not any(first.children[r] and second.children[r] for r in range(n))


CLUSTER = """
kind: cluster
nodes: {nodes}
node:
  kind: nvswitch
  gpus: 8
  nvlink: {{latency: 1us, bandwidth: 100GB/s}}
  pcie: {{switches: {switches}, link: {{latency: 0.5us, bandwidth: 32GB/s}},
         uplink: {{latency: 0.5us, bandwidth: 32GB/s}}}}
  nics: {{count: {nics}, link: {{latency: 2us, bandwidth: 25GB/s}}}}
fabric: {{kind: rail, latency: 1us}}
"""


def cluster(nodes: int, nics: int):
    return topology_from_text(CLUSTER.format(nodes=nodes, nics=nics, switches=min(nics, 4)))


def nic_hops(topology, sender_gpu: int, receiver_gpu: int) -> tuple[str, str]:
    """The NIC vertices a route leaves and enters the network by."""
    names = [topology.links[i] for i in topology.route(sender_gpu, receiver_gpu)]
    out = next(link.dst for link in names if link.dst.split(".")[-1].startswith("nic"))
    into = next(link.src for link in reversed(names)
                if link.src.split(".")[-1].startswith("nic"))
    return out, into


@pytest.mark.parametrize("nodes", [2, 3, 4])
@pytest.mark.parametrize("nics", [1, 2, 4, 8])
def test_each_channels_ring_is_a_cycle_crossing_nodes_on_its_nic(nodes, nics):
    topology = cluster(nodes, nics)
    gpus = list(range(topology.gpus))
    channels = 2 * nics + 1
    layout = machine_layout(topology, gpus, channels)
    for c, channel in enumerate(layout.channels):
        assert sorted(channel.ring) == gpus                    # every rank once
        assert len(channel.crossings) == nodes
        ring = channel.ring
        for k, crossing in enumerate(channel.crossings):       # the ring's own hops
            assert ring[(ring.index(crossing.sender) + 1) % len(ring)] == crossing.receiver
            assert topology.node_of[crossing.sender] != topology.node_of[crossing.receiver]
            out, into = nic_hops(topology, crossing.sender, crossing.receiver)
            assert out == f"n{topology.node_of[crossing.sender]}.nic{crossing.nic_out}"
            assert into == f"n{topology.node_of[crossing.receiver]}.nic{crossing.nic_in}"
            # Consecutive nodes meet on one rail, but for the ring's way back from the last
            # node when an odd number of nodes has one GPU per NIC (the snake ends reversed).
            if nics < 8 or nodes % 2 == 0 or k < nodes - 1:
                assert crossing.nic_out == crossing.nic_in
        # Every node is entered or left through NIC c mod nics; with two GPUs or more per
        # NIC, both (NCCL's inter[2c] = inter[2c+1]).
        for k in range(nodes):
            entering = channel.crossings[k - 1].nic_in
            leaving = channel.crossings[k].nic_out
            assert c % nics in (entering, leaving)
            if nics < 8:
                assert entering == leaving == c % nics
        # The chain of each node starts at the head on NIC c mod nics.
        for k, chain in enumerate(channel.chains):
            assert sorted(chain) == list(range(8 * k, 8 * k + 8))
            assert topology.nic_of(chain[0]) == c % nics


def test_channel_0_is_the_ring_every_algorithm_uses_on_rails_and_on_one_node():
    topology = cluster(4, 8)
    gpus = list(range(32))
    assert machine_layout(topology, gpus, 1).channels[0].ring == ring_order(topology, gpus)
    one = cluster(1, 8)
    layout = machine_layout(one, list(range(8)), 5)
    assert {channel.ring for channel in layout.channels} == {ring_order(one, list(range(8)))}
    assert layout.ring_lanes.weights == (5,) and layout.tree_lanes.weights == (5,)
    assert all(channel.crossings == () for channel in layout.channels)


def test_lanes_group_channels_with_the_same_links():
    layout = machine_layout(cluster(3, 8), list(range(24)), 16)
    assert layout.ring_lanes.channels == tuple((c, c + 8) for c in range(8))
    assert layout.ring_lanes.weights == (2,) * 8
    # c and c+8 share a NIC but climb different trees (NCCL's duplicated channels)
    assert layout.tree_lanes.channels == tuple((c,) for c in range(16))
    layout = machine_layout(cluster(2, 2), list(range(16)), 4)
    assert layout.ring_lanes.channels == ((0, 2), (1, 3))
    assert layout.tree_lanes.channels == ((0,), (1,), (2,), (3,))
    assert [layout.ring_lanes.first_block(lane) for lane in range(2)] == [0, 2]
    layout = machine_layout(cluster(2, 1), list(range(16)), 4)   # one NIC: one ring
    assert layout.ring_lanes.channels == ((0, 1, 2, 3),)
    assert layout.tree_lanes.channels == ((0, 1), (2, 3))          # first half tree 0


@pytest.mark.parametrize("nics, channels", [(8, 16), (4, 8), (2, 4), (1, 2), (8, 32)])
def test_every_nic_carries_both_trees(nics, channels):
    """NCCL's channel c + C/2 copies channel c's NIC and takes the other tree, so the node
    inner in one tree is a leaf in the other on every NIC, not inner on half of them."""
    layout = machine_layout(cluster(4, nics), list(range(32)), channels)
    trees_on_nic: dict[int, list[int]] = {}
    for c, channel in enumerate(layout.channels):
        trees_on_nic.setdefault(c % nics, []).append(channel.tree)
    for trees in trees_on_nic.values():
        assert sorted(trees).count(0) == sorted(trees).count(1) >= 1
    assert group_lanes(["a", "b", "a"]).channels == ((0, 2), (1,))
    assert group_lanes(["a", "b", "a"], merge=False).weights == (1, 1, 1)


def test_uneven_nodes_from_a_placement_list():
    topology = cluster(3, 4)
    gpus = [0, 1, 2, 9, 10, 16, 17, 18, 19, 20]       # 3, 2 and 5 ranks per node
    layout = machine_layout(topology, gpus, 6)
    assert [len(ranks) for ranks in layout.nodes] == [3, 2, 5]
    for channel in layout.channels:
        assert sorted(channel.ring) == list(range(10))
        for crossing in channel.crossings:
            out, into = nic_hops(topology, gpus[crossing.sender], gpus[crossing.receiver])
            assert out.endswith(f"nic{crossing.nic_out}")
            assert into.endswith(f"nic{crossing.nic_in}")


def test_tree_roles_hang_chains_below_heads():
    layout = machine_layout(cluster(3, 8), list(range(24)), 2)
    # Channel 0: tree 0 over nodes 0 -> 2 -> 1; node heads on NIC 0 (local GPU 0).
    assert layout.tree_role(0, 0) == (None, (1, 16))        # root: chain child, node 2's head
    assert layout.tree_role(0, 16) == (0, (17, 8))          # node 2's head: node 1 below it
    assert layout.tree_role(0, 8) == (16, (9,))
    assert layout.tree_role(0, 7) == (6, ())
    assert layout.tree_depth(0) == 2 + 7
    # Channel 1 uses tree 1 (shifted: node 1 is the root) with heads on NIC 1.
    assert layout.tree_role(1, 9)[0] is None


def test_a_layout_from_the_job_alone_keeps_the_jobs_ring_as_channel_0():
    job = Job("allreduce", 7, 70, ring=(3, 1, 0, 2, 6, 4, 5), nodes=(0, 0, 1, 0, 2, 2, 1))
    layout = job_layout(job, 3)
    assert layout.channels[0].ring == job.ring_order()
    assert [sorted(ranks) for ranks in layout.nodes] == [[0, 1, 3], [2, 6], [4, 5]]
    assert layout.channels[1].ring == (1, 0, 3, 6, 2, 5, 4)
    spread = Job("allreduce", 4, 8, ring=(0, 1, 2, 3), nodes=(0, 1, 0, 1))
    assert job_layout(spread, 2).nodes == ((0, 1, 2, 3),)   # nodes not contiguous: one
