"""Fat-tree oversubscription 1:1, 2:1, 4:1: traffic that crosses the spine slows down by the
ratio, traffic that does not is untouched.

Two nodes of 4 GPUs, one 25 GB/s NIC per GPU, one node per leaf (leaf_ports 4), one spine:
the leaf's uplink carries 4 x 25 / ratio GB/s. Latencies are zero so the times are pure
bandwidth terms.
"""

from __future__ import annotations

import pytest

from collsim.hardware.loader import topology_from_text
from collsim.simulate import simulate
from tests.helpers import SMALL_FAT_TREE

FAT_TREE = SMALL_FAT_TREE
NVLINK, NIC = 400e9, 25e9
SIZE = 8 * 2**20
RATIOS = (1, 2, 4)


def fat_tree(ratio: float):
    return topology_from_text(FAT_TREE, {"fabric.oversubscription": ratio})


def test_uplink_bandwidth_follows_the_ratio():
    for ratio in RATIOS:
        t = fat_tree(ratio)
        uplinks = {link.bandwidth for link in t.links if link.kind == "fabric"}
        assert uplinks == {4 * NIC / ratio}


def test_alltoall_crossing_the_spine_slows_by_the_ratio():
    # Every rank sends n/8 to each of the 4 ranks of the other node: 16 transfers share the
    # leaf's uplink (4 x 25 / r GB/s), each NIC carries 4 (25/4 GB/s each): the uplink binds,
    # 25 / (4r) GB/s per transfer. Inside the node 3 transfers per NVLink port finish first.
    block = SIZE / 8
    times = [simulate(fat_tree(r), "alltoall", "direct", 8, SIZE).time_s for r in RATIOS]
    for ratio, time in zip(RATIOS, times, strict=True):
        assert time == pytest.approx(block / (NIC / (4 * ratio)), rel=1e-9)
    assert times[1] / times[0] == pytest.approx(2, rel=1e-9)
    assert times[2] / times[0] == pytest.approx(4, rel=1e-9)


def test_hierarchical_allreduce_inter_node_phase_slows_by_the_ratio():
    # Intra-node reduce-scatter and allgather: 2 x 3 steps of n/4 at 400 GB/s. Between the
    # nodes 4 rails each exchange n/8 twice, 4 transfers per direction on the uplink:
    # 25 / r GB/s each.
    intra = 6 * (SIZE / 4) / NVLINK
    for ratio in RATIOS:
        time = simulate(fat_tree(ratio), "allreduce", "hierarchical", 8, SIZE).time_s
        assert time == pytest.approx(intra + 2 * (SIZE / 8) / (NIC / ratio), rel=1e-9)


def test_topology_aware_ring_allreduce_sends_one_transfer_over_the_spine():
    # One transfer per direction crosses: the uplink (100/r GB/s >= 25) never binds at r <= 4.
    times = {r: simulate(fat_tree(r), "allreduce", "ring", 8, SIZE).time_s for r in RATIOS}
    assert times[1] == pytest.approx(2 * 7 * (SIZE / 8) / NIC, rel=1e-9)
    assert times[4] == pytest.approx(times[1], rel=1e-12)
    slower = simulate(fat_tree(8), "allreduce", "ring", 8, SIZE).time_s
    assert slower == pytest.approx(2 * times[1], rel=1e-9)   # 100/8 = 12.5 GB/s < 25


def test_traffic_inside_one_leaf_never_sees_the_ratio():
    text = FAT_TREE.replace("leaf_ports: 4", "leaf_ports: 8")   # both nodes on one leaf
    for ratio in RATIOS:
        t = topology_from_text(text, {"fabric.oversubscription": ratio})
        assert not [link for link in t.links if link.kind == "fabric"]
        time = simulate(t, "alltoall", "direct", 8, SIZE).time_s
        assert time == pytest.approx((SIZE / 8) / (NIC / 4), rel=1e-9)
