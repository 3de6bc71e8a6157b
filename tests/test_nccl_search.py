"""NCCL's topology search reduced to arithmetic: the graphs of docs/nccl.md#topology-graphs,
worked by hand from the speed arrays and link figures, and other machine shapes."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings

from collsim.errors import InputError
from collsim.nccl.search import search, tree_pattern
from collsim.nccl.system import NcclSystem
from tests.nccl_machines import (
    DGX_A100,
    DGX_B200,
    DGX_H100,
    L40S_PAIR,
    a100_cluster,
    h100_cluster,
    h100_one_per_node,
    system_strategy,
)


def figures(graph):
    return graph.pattern, graph.channels, graph.bw_intra, graph.bw_inter


def test_dgx_a100():
    # 240 GB/s per GPU; intra speeds 40, 30, ...: 40 fits 240/40 = 6 rings = 240 = totalBw
    # (perfect); duplicated (40 >= 25, SM80) -> 12 x 20. The tree needs the ring's 12
    # channels: first speed with 12 s <= 240 * 8/7 = 274 is 20 -> 12 x 20 at once.
    g = search(DGX_A100)
    assert figures(g.ring) == ("RING", 12, 20.0, 20.0)
    assert figures(g.tree) == ("BALANCED_TREE", 12, 20.0, 20.0)
    assert g.nvls is None
    assert g.ring.type_intra == "NVL" and g.ring.same_channels
    assert g.channels == 24  # postset doubling; a DGX A100 log shows "Channel 23/24"


def test_dgx_h100():
    # 370.8 per GPU. Ring: 60 fits 6 (360 < 370.8, not perfect); 50: 7 x 50 = 350, 40: 9 x 40,
    # 30: 12 x 30 (360, not better); 24/60 < 0.49 stops -> 6 x 60, duplicated (60 >= 50)
    # -> 12 x 30. NVLS: 8 heads, a head moves 2 units, others 1: 9 bw <= 370.8 -> 40
    # (start 50: 8 x 50 = 400 <= 370.8 * 8/7); pass 2 raises bwInter 50, 60 (< 2 x 40).
    # Tree: the ring's 12 channels fit at the first speed (12 x 30 <= 370.8 * 8/7), so the
    # search stops before its SM90 fallback to the plain TREE pattern: BALANCED_TREE, no x0.85
    # (TREE here would change no pick on one node either).
    g = search(DGX_H100)
    assert figures(g.ring) == ("RING", 12, 30.0, 30.0)
    assert figures(g.tree) == ("BALANCED_TREE", 12, 30.0, 30.0)
    assert figures(g.nvls) == ("NVLS", 8, 40.0, 60.0)
    assert g.channels == 24 and g.nvls_channels == 16


def test_dgx_b200():
    # 721.8 per GPU. Ring: 90 fits 8 (720); lower speeds give no more than 720 until
    # 40/90 < 0.49 -> 8 x 90, duplicated -> 16 x 45. NVLS: 9 bw <= 721.8 -> 80; bwInter -> 90.
    # Runtime: 2 x 16 = 32; NVLS 24 channels on one SM100 NVLink domain (32 across nodes).
    g = search(DGX_B200)
    assert figures(g.ring) == ("RING", 16, 45.0, 45.0)
    assert figures(g.tree) == ("BALANCED_TREE", 16, 45.0, 45.0)
    assert figures(g.nvls) == ("NVLS", 8, 80.0, 90.0)
    assert g.channels == 32 and g.nvls_channels == 24


def test_h100_nodes_with_eight_400g_nics():
    # GPU -> NIC path min(PCIe Gen5 48, NIC 50) = 48 = first SM90 inter speed; one channel per
    # NIC -> 8 x 48 = 384 >= 370.8 (perfect); no duplication (SM90, 48 < 50, 8 > 4).
    # Tree: the balanced tree needs a second GPU on the NIC's switch -> plain TREE, 8 x 48.
    # NVLS: heads = the 8 NIC GPUs; 9 x 48 > 370.8, 9 x 45 > 370.8, 9 x 40 = 360 -> 40;
    # bwInter raised 42, 45, 48 (the NIC path). Runtime: 16 (SM90 rule: 16 is not < 16).
    g = search(h100_cluster(2))
    assert figures(g.ring) == ("RING", 8, 48.0, 48.0)
    assert figures(g.tree) == ("TREE", 8, 48.0, 48.0)
    assert figures(g.nvls) == ("NVLS", 8, 40.0, 48.0)
    assert not g.ring.same_channels  # every channel on its own NIC
    assert g.channels == 16 and g.nvls_channels == 16


def test_a100_nodes_with_eight_200g_nics():
    # Path min(Gen4 24, HDR 25) = 24 -> 8 x 24 = 192 (a DGX A100 cluster's published busbw);
    # 12: 16 x 12, not better; 10/24 < 0.49 stops; 24 < 25: no duplication. Tree: balanced
    # (2 GPUs per NIC switch); pass 2 raises bwIntra 28, 30 (a GPU carries 240/30 = 8
    # chains), not 48 (240/48 = 5 x 8/7 < 8 chains).
    g = search(a100_cluster(2))
    assert figures(g.ring) == ("RING", 8, 24.0, 24.0)
    assert figures(g.tree) == ("BALANCED_TREE", 8, 30.0, 24.0)
    assert g.ring.type_inter == "PXB"
    assert g.channels == 16


def test_l40s_pair_on_pcie():
    # maxBw = totalBw = 24: 20 fits one ring (20 < 24); 18, 15 one; 12 fits two = 24 (perfect).
    # 12 < 25: no duplication. Paths are PCIe (PIX).
    g = search(L40S_PAIR)
    assert figures(g.ring) == ("RING", 2, 12.0, 12.0)
    assert figures(g.tree) == ("BALANCED_TREE", 2, 12.0, 12.0)
    assert g.ring.type_intra == "PIX" and not g.ring.over_nvlink
    assert g.channels == 4


def test_pcie_through_an_intel_root_complex_costs_a_fifth_more():
    # Two rings at 12 would cost 2 x 12 x 1.2 = 28.8 > 24; one at 20 costs 24; at 10 two
    # rings cost 24 but give 20, not better; 9/20 < 0.49 stops -> 1 x 20, no duplication.
    g = search(NcclSystem(arch=89, gpus_per_node=2, gpu_link="pcie", pcie_bandwidth=24,
                          pcie_via_cpu=True, cpu="intel"))
    assert figures(g.ring) == ("RING", 1, 20.0, 20.0)
    assert g.ring.type_intra == "PHB"


def test_four_and_two_gpus_of_an_h100_node():
    # 4 GPUs: NVLS heads move 2 units, others 1: 5 x 60 = 300 <= 370.8 -> 4 x 60 at the top
    # speed; no higher speed to raise bwInter to. 2 GPUs: NCCL builds no NVLS graph.
    four = NcclSystem(arch=90, gpus_per_node=4, nvlink_links=18, nvls=True)
    assert figures(search(four).nvls) == ("NVLS", 4, 60.0, 60.0)
    assert figures(search(four).ring) == ("RING", 12, 30.0, 30.0)
    two = NcclSystem(arch=90, gpus_per_node=2, nvlink_links=18, nvls=True)
    assert search(two).nvls is None and search(two).nvls_channels == 0
    assert figures(search(two).ring) == ("RING", 12, 30.0, 30.0)


def test_a_72_gpu_nvlink_domain_is_one_node():
    # NVLS: 32 heads (NVLS arity); heads move 33 units: 33 x 20 = 660 <= 721.8 < 33 x 24.
    # Start: 32 s <= 721.8 x 72/71 = 732 -> 20. bwInter raised 24, 30, 40 (= 2 x 20, stop).
    g = search(NcclSystem(arch=100, gpus_per_node=72, nvlink_links=18, nvls=True))
    assert figures(g.nvls) == ("NVLS", 32, 20.0, 40.0)
    assert figures(g.ring) == ("RING", 16, 45.0, 45.0)
    assert g.nvls_channels == 24  # one SM100 NVLink domain (NVLS_NCHANNELS_SM100_NVL)


def test_sm100_runs_24_nvls_channels_on_one_domain_and_32_across_nodes():
    # nvls.cc ncclNvlsTuning: NVLS_NCHANNELS_SM100_NVL on one node, NVLS_NCHANNELS_SM100 on
    # several (before 2.30's NVLSTree tuning); SM90 16 either way.
    rack = NcclSystem(arch=100, gpus_per_node=72, nvlink_links=18, nvls=True)
    racks = NcclSystem(arch=100, nodes=2, gpus_per_node=72, nvlink_links=18, nvls=True,
                       nics_per_node=72, nic_bandwidth=50)
    hopper = NcclSystem(arch=90, nodes=2, gpus_per_node=8, nvlink_links=18, nvls=True,
                        nics_per_node=8, nic_bandwidth=50)
    assert search(rack).nvls_channels == 24
    assert search(racks).nvls_channels == 32
    assert search(hopper).nvls_channels == 16
    assert search(NcclSystem(arch=100, gpus_per_node=72, nvlink_links=18, nvls=True,
                             nvls_channels=12)).nvls_channels == 12


def test_four_nics_per_node():
    # 48: one channel per NIC -> 4 x 48 = 192; 24 (24/48 = 0.5): 8 x 24 = 192, not better;
    # 22/48 < 0.49 stops. 4 channels are not > 4, so they are duplicated -> 8 x 24.
    # NVLS: 4 NIC heads at 48 (5 x 48 <= 370.8).
    g = search(h100_cluster(4, nics=4))
    assert figures(g.ring) == ("RING", 8, 24.0, 24.0)
    assert figures(g.nvls) == ("NVLS", 4, 48.0, 48.0)
    assert g.channels == 16


def test_100g_nics():
    # Path min(48, 12.5): first SM90 inter speed <= 12.5 is 12 -> one channel per NIC = 96;
    # 6/12 = 0.5: 16 x 6 = 96, not better; 3/12 stops; 12 < 25: no duplication. The tree's
    # pass 2 raises bwIntra up to 2 x 12 = 24.
    g = search(h100_cluster(4, nic_bandwidth=12.5))
    assert figures(g.ring) == ("RING", 8, 12.0, 12.0)
    assert figures(g.tree) == ("TREE", 8, 24.0, 12.0)


def test_sm90_clusters_with_few_fast_channels_double_again():
    # 6 NICs: 6 x 48, not duplicated (6 > 4); postset 12 < 16 with ring bwIntra 48 > 45 -> 24.
    assert search(h100_cluster(2, nics=6)).channels == 24
    # The same on A100 (SM80): 6 x 24 -> 12 only.
    a100 = NcclSystem(arch=80, nodes=2, gpus_per_node=8, nvlink_links=12, pcie_bandwidth=24,
                      nics_per_node=6, nic_bandwidth=25)
    assert search(a100).channels == 12


def test_an_unpack_network_doubles_the_channels_across_nodes_below_16():
    """GPUDirect-TCPX (NCCL_NET_DEVICE_UNPACK): connect.cc doubles comm.nChannels from 2 nodes
    on while it is under 16. A3 High without NVLS: 4 NICs of 25 GB/s give 4 ring channels of
    24, postset 8 (ring bwIntra 24 < 45: no SM90 doubling), unpack 16; one node, or 8 already
    doubled past 16, stay."""
    a3 = dict(arch=90, gpus_per_node=8, nvlink_links=18, pcie_bandwidth=48, nics_per_node=4,
              nic_bandwidth=25)
    assert search(NcclSystem(nodes=2, **a3)).channels == 8
    assert search(NcclSystem(nodes=2, net_unpack=True, **a3)).channels == 16
    assert search(NcclSystem(nodes=1, net_unpack=True, **a3)).channels == \
        search(NcclSystem(nodes=1, **a3)).channels
    wide = h100_cluster(2, nics=6)  # 24 channels already (the SM90 doubling)
    assert search(NcclSystem(**{**wide.__dict__, "net_unpack": True})).channels == 24
    assert search(NcclSystem(nodes=2, net_unpack=True, max_channels=8, **a3)).channels == 8


def test_one_gpu_per_node():
    # Ring: 48 fits one channel (one NIC); 24 fits 2 = 48, not better -> 1 x 48, duplicated
    # (1 channel is not > 4) -> 2 x 24. Tree (TREE with one GPU): 2 channels first fit at 24;
    # pass 2 raises bwIntra to 48 (no GPU-to-GPU traffic). Paths: LOC inside the node.
    g = search(h100_one_per_node(16))
    assert figures(g.ring) == ("RING", 2, 24.0, 24.0)
    assert figures(g.tree) == ("TREE", 2, 48.0, 24.0)
    assert g.ring.type_intra == "LOC"
    assert g.channels == 4


def test_one_gpu_per_node_on_a100_and_b200():
    # A100 with one 200 Gb/s NIC: the GPU's PCIe Gen4 x16 is 24 in NCCL's units (16 x 120 /
    # 80), under the NIC's 25. SM80 network speeds 48, 30, 28 do not fit; 24 fits one channel,
    # and 24 < 25 is not duplicated -> 1 x 24, run as 2 (postset).
    a100 = NcclSystem(arch=80, nodes=2, gpus_per_node=1, nvlink_links=12, pcie_bandwidth=24,
                      nics_per_node=1, nic_bandwidth=25)
    g = search(a100)
    assert figures(g.ring) == ("RING", 1, 24.0, 24.0)
    assert g.channels == 2
    # B200 with one 400 Gb/s NIC: SM100 speeds 96, 86, 80 exceed PCIe Gen5's 48; 48 fits one
    # channel, duplicated (48 >= 25, and 1 channel is not > 4) -> 2 x 24, run as 4, as on H100.
    b200 = NcclSystem(arch=100, nodes=2, gpus_per_node=1, nvlink_links=18, pcie_bandwidth=48,
                      nics_per_node=1, nic_bandwidth=50)
    g = search(b200)
    assert figures(g.ring) == ("RING", 2, 24.0, 24.0)
    assert g.channels == 4


def test_nvlink_mesh_of_four_a100():
    # HGX A100 4-GPU: 4 NVLinks per pair (80). 40 fits 3 pair links x 2 = 6 rings = 240
    # (perfect) -> duplicated 12 x 20, as on the NVSwitch node.
    g = search(NcclSystem(arch=80, gpus_per_node=4, gpu_link="nvlink", nvlink_links=4))
    assert figures(g.ring) == ("RING", 12, 20.0, 20.0)
    assert figures(g.tree) == ("BALANCED_TREE", 12, 20.0, 20.0)


def test_no_graph_falls_back_to_one_slow_channel():
    # A NIC slower than the lowest search speed (0.12): nothing fits.
    g = search(h100_cluster(2, nic_bandwidth=0.05))
    assert figures(g.ring) == ("RING", 1, 0.1, 0.1)
    assert g.ring.type_intra == "SYS"


def test_tree_patterns():
    assert tree_pattern(DGX_H100) == "BALANCED_TREE"
    assert tree_pattern(h100_cluster(2)) == "TREE"
    assert tree_pattern(a100_cluster(2)) == "BALANCED_TREE"
    assert tree_pattern(h100_one_per_node(4)) == "TREE"
    assert tree_pattern(NcclSystem(arch=70, gpus_per_node=8, nvlink_links=6)) == "SPLIT_TREE"


def test_nvls_copies_ring_and_tree_channels_up_on_nccl_2_20_to_2_27_only():
    # 2 nodes x 4 H100 on an NVSwitch, one 400 Gb/s NIC a node: the ring shares the NIC's
    # path of 48 GB/s as 2 x 24; postset doubles to 4, and no SM90 x2 (bwIntra 24 <= 45).
    # NVLS (4 GPUs > 2): 16 channels on SM90. NCCL 2.20.3-2.27.7 copy ring/tree up to 16
    # (ncclTopoPostset's copyChannels); 2.19.4, 2.28.3 on and the modelled 2.30.7 keep 4.
    four = NcclSystem(arch=90, nodes=2, gpus_per_node=4, nvlink_links=18, nvls=True,
                      pcie_bandwidth=48, nics_per_node=1, nic_bandwidth=50)
    assert (search(four).ring.channels, search(four).nvls_channels) == (2, 16)
    channels = {v: search(replace(four, version=v)).channels
                for v in ((2, 19, 4), (2, 20, 3), (2, 27, 3), (2, 27, 7), (2, 28, 3), (2, 29, 2))}
    assert channels == {(2, 19, 4): 4, (2, 20, 3): 16, (2, 27, 3): 16, (2, 27, 7): 16,
                        (2, 28, 3): 4, (2, 29, 2): 4}
    assert search(four).channels == 4  # unset: the modelled release, 2.30.7
    assert search(replace(four, version=(2, 27, 3))).raised_to_nvls
    assert not search(four).raised_to_nvls
    # 2 x 2 GPUs: NVLS needs more than 2 GPUs a node, so no release copies anything: 4 on each
    two = replace(four, gpus_per_node=2)
    for version in ((2, 27, 3), (2, 29, 2)):
        assert search(replace(two, version=version)).channels == search(two).channels == 4
        assert search(replace(two, version=version)).nvls_channels == 0


def test_the_sm90_doubling_across_nodes_follows_the_release():
    # 2 x 8 H100, 8 NICs: ring 8 x 48, postset 16. The SM90 rule (ring bwIntra 48 > 45) doubles
    # while 2 x 16 <= MAXCHANNELS (32) on 2.18.1-2.19.4 -> 32; from 2.20.3 only below 16 -> 16;
    # 2.17.1 has no such rule -> 16.
    cluster = h100_cluster(2)
    channels = {v: search(replace(cluster, version=v)).channels
                for v in ((2, 17, 1), (2, 18, 5), (2, 19, 4), (2, 20, 3), (2, 27, 3))}
    assert channels == {(2, 17, 1): 16, (2, 18, 5): 32, (2, 19, 4): 32, (2, 20, 3): 16,
                        (2, 27, 3): 16}


def test_a_nic_carries_two_ring_channels_on_8_gpu_nodes_and_four_on_smaller_ones():
    # docs/misses.md#ring-eight-nics: H100 nodes, one 400 Gb/s NIC per GPU. 8 GPUs: 8 x 48,
    # not duplicated, postset 16 -> 2 a NIC. 4, 2, 1 GPUs: 4, 2, 1 x 48, duplicated to 24 (<= 4
    # channels), postset 16, 8, 4 (24 <= 45: no SM90 doubling) -> 4 a NIC. The node count
    # changes none of it.
    def per_nic(gpus: int, nodes: int) -> float:
        system = NcclSystem(arch=90, nodes=nodes, gpus_per_node=gpus, nvlink_links=18,
                            nvls=gpus > 2, pcie_bandwidth=48, nics_per_node=gpus,
                            nic_bandwidth=50)
        return search(system).channels / gpus

    for nodes in (2, 4, 10):
        assert [per_nic(gpus, nodes) for gpus in (8, 4, 2, 1)] == [2, 4, 4, 4]


def test_sm100_nvls_channels_follow_the_release():
    # DGX B200, one NVLink domain: NCCL_NVLS_NCHANNELS 16 up to 2.24, 32 on SM100 in 2.25-2.26,
    # 24 on one domain from 2.27.3; ring/tree stay 2 x 16 = 32 (never below NVLS's).
    nvls = {v: search(replace(DGX_B200, version=v)).nvls_channels
            for v in ((2, 24, 3), (2, 25, 1), (2, 26, 6), (2, 27, 3), (2, 30, 7))}
    assert nvls == {(2, 24, 3): 16, (2, 25, 1): 32, (2, 26, 6): 32, (2, 27, 3): 24,
                    (2, 30, 7): 24}
    assert {search(replace(DGX_B200, version=v)).channels for v in nvls} == {32}


def test_maxchannels_was_32_before_2_25():
    a100 = NcclSystem(arch=80, gpus_per_node=8, nvlink_links=12, min_channels=40)
    assert search(replace(a100, version=(2, 24, 3))).channels == 32
    assert search(replace(a100, version=(2, 25, 1))).channels == 40


def test_an_unpack_network_doubles_its_channels_from_2_22_3():
    # 2 x 8 H100, 2 NICs of 200 Gb/s: ring 2 x 24 -> postset 4 (no SM90 x2: 24 <= 45); the
    # unpack step (GPUDirect-TCPX) doubles below 16 from 2.22.3 only.
    tcpx = replace(h100_cluster(2, nics=2, nic_bandwidth=25), net_unpack=True, nvls=False)
    assert search(replace(tcpx, version=(2, 21, 5))).channels == 4
    assert search(replace(tcpx, version=(2, 22, 3))).channels == 8


def test_channel_settings_clamp_the_runtime_channels():
    assert search(NcclSystem(arch=80, gpus_per_node=8, nvlink_links=12,
                             max_channels=8)).channels == 8
    assert search(NcclSystem(arch=80, gpus_per_node=8, nvlink_links=12,
                             min_channels=40)).channels == 40


@pytest.mark.parametrize("changes, key", [
    ({"nodes": 2}, "nics_per_node"),
    ({"gpu_link": "infiniband"}, "gpu_link"),
    ({"nvlink_links": 0}, "nvlink_links"),
    ({"cpu": "power"}, "cpu"),
    ({"arch": 35}, "arch"),
])
def test_bad_systems_name_the_field(changes, key):
    fields = {"arch": 90, "gpus_per_node": 8, "nvlink_links": 18} | changes
    with pytest.raises(InputError) as caught:
        NcclSystem(**fields)
    assert caught.value.key == key


@settings(max_examples=150, deadline=None)
@given(system_strategy())
def test_graphs_are_consistent_on_any_machine(system):
    g = search(system)
    assert 1 <= g.ring.channels <= 32
    assert g.tree.channels == g.ring.channels  # the tree search must match the ring's count
    assert 1 <= g.channels <= 64
    # 2.27 differs from 2.30.7 only by copying ring/tree channels up to NVLS's
    copied = search(replace(system, version=(2, 27, 3)))
    assert copied.channels == max(g.channels, g.nvls_channels)
    assert search(replace(system, version=(2, 28, 3))) == g  # as the modelled 2.30.7
    assert (g.nvls is not None) <= system.nvls_capable
    if g.nvls is not None:
        assert 1 <= g.nvls.channels <= min(32, system.gpus_per_node)
    for graph in (g.ring, g.tree, g.nvls, g.collnet_direct, g.collnet_chain):
        if graph is not None:
            assert graph.bw_intra > 0 and graph.bw_inter > 0
