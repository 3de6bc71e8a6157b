"""Topology -> NcclSystem: what NCCL sees of a preset, and NCCL's graphs for it (the table of
docs/nccl.md#topology-graphs, worked by hand in tests/test_nccl_search.py on hand-built
systems, reproduced here from the shipped files)."""

from __future__ import annotations

import pytest

from collsim.errors import InputError
from collsim.hardware.loader import load_topology
from collsim.hardware.shipped import find_topology
from collsim.nccl.adapter import nccl_system
from collsim.nccl.search import search
from tests.nccl_machines import DGX_A100, DGX_B200, DGX_H100, L40S_PAIR, a100_cluster, h100_cluster


def preset(name, **overrides):
    return load_topology(find_topology(name), overrides)


def figures(graph):
    return graph.pattern, graph.channels, graph.bw_intra, graph.bw_inter


@pytest.mark.parametrize("name, overrides, ring, tree, nvls, channels", [
    # docs/nccl.md#topology-graphs: DGX A100 12 x 20; DGX H100 12 x 30, NVLS 8 heads 40 / 60;
    # DGX B200 16 x 45, NVLS 80 / 90; an H100 node with 8 x 400G NICs 8 x 48 (TREE), NVLS
    # 40 / 48; an A100 node with 8 x 200G 8 x 24; 2 L40S on PCIe Gen4, each on its own root
    # port (through the Intel root complex: one ring at 20 costs 20 x 1.2 = 24), 1 x 20.
    ("dgx-a100", {}, ("RING", 12, 20, 20), ("BALANCED_TREE", 12, 20, 20), None, 24),
    ("dgx-h100", {}, ("RING", 12, 30, 30), ("BALANCED_TREE", 12, 30, 30),
     ("NVLS", 8, 40, 60), 24),
    ("dgx-h200", {}, ("RING", 12, 30, 30), ("BALANCED_TREE", 12, 30, 30),
     ("NVLS", 8, 40, 60), 24),
    ("dgx-b200", {}, ("RING", 16, 45, 45), ("BALANCED_TREE", 16, 45, 45),
     ("NVLS", 8, 80, 90), 32),
    ("h100-cluster", {"nodes": 2}, ("RING", 8, 48, 48), ("TREE", 8, 48, 48),
     ("NVLS", 8, 40, 48), 16),
    ("a100-cluster", {"nodes": 2}, ("RING", 8, 24, 24), ("BALANCED_TREE", 8, 30, 24), None, 16),
    ("l40s-pcie", {"gpus": 2}, ("RING", 1, 20, 20), ("BALANCED_TREE", 1, 20, 20), None, 2),
    ("gb200-nvl72", {}, ("RING", 16, 45, 45), ("BALANCED_TREE", 16, 45, 45),
     ("NVLS", 32, 20, 40), 32),
])
def test_presets_give_the_graphs_of_the_notes(name, overrides, ring, tree, nvls, channels):
    graphs = search(nccl_system(preset(name, **overrides)))
    assert figures(graphs.ring) == ring and figures(graphs.tree) == tree
    assert (figures(graphs.nvls) if graphs.nvls else None) == nvls
    assert graphs.channels == channels


def test_clusters_beyond_the_notes_table():
    # b200-cluster, 2 nodes: GPU-NIC path min(PCIe 48, NIC 50) = 48, the first SM100 inter
    # speed <= 48; one channel per NIC -> 8 x 48 = 384 < 721.8 (not perfect); 45.1 ... 24 give
    # no more than 384 (24: 16 x 24), 22/48 < 0.49 stops; no duplication (SM100, 48 < 50, 8 > 4).
    # TREE (one GPU per NIC switch), 8 channels at 48; pass 2 raises bwIntra to 80 (721.8 / 80 =
    # 9 chains x 8/7 >= 8) and 96 (7 x 8/7 = 8).
    graphs = search(nccl_system(preset("b200-cluster", nodes=2)))
    assert figures(graphs.ring) == ("RING", 8, 48, 48)
    assert figures(graphs.tree) == ("TREE", 8, 96, 48)
    # gb200-nvl72-cluster, 2 racks: 72 NICs carry 72 channels at 48, but the NVLink budget
    # carries floor(721.8 / 48) = 15 (x 72/71, still 15) -> 720; 45.1 fits 16 (721.6, better);
    # 42 ... 24 give no more than 720; 22/45.1 < 0.49 stops; no duplication (45.1 < 50, 16 > 4).
    graphs = search(nccl_system(preset("gb200-nvl72-cluster", nodes=2)))
    assert figures(graphs.ring) == ("RING", 16, 45.1, 45.1)


@pytest.mark.parametrize("name, overrides, expected", [
    ("dgx-a100", {}, DGX_A100),
    ("dgx-h100", {}, DGX_H100),
    ("dgx-b200", {}, DGX_B200),
    ("l40s-pcie", {"gpus": 2, "pcie.gpus_per_switch": 2}, L40S_PAIR),  # a pair under a switch
    ("h100-cluster", {"nodes": 2}, h100_cluster(2)),
    ("a100-cluster", {"nodes": 4}, a100_cluster(4)),
])
def test_presets_are_the_hand_built_systems_of_the_nccl_tests(name, overrides, expected):
    # Same figures as the systems tests/test_nccl_search.py works by hand, except those the
    # search does not read there (PCIe and NICs on one NVLink node; the CPU).
    got = nccl_system(preset(name, **overrides))
    keys = ("arch", "nodes", "gpus_per_node", "gpu_link", "nvlink_links", "nvls")
    if expected.nodes > 1 or expected.gpu_link == "pcie":
        keys += ("pcie_bandwidth",)
    if expected.nodes > 1:
        keys += ("nics_per_node", "nic_bandwidth", "nic_path", "gpus_per_nic_switch")
    assert {k: getattr(got, k) for k in keys} == {k: getattr(expected, k) for k in keys}
    assert search(got) == search(expected)


def test_a_call_on_some_gpus_is_a_smaller_node_to_nccl():
    h100 = preset("dgx-h100")
    four = nccl_system(h100, [0, 1, 2, 3])
    assert (four.nodes, four.gpus_per_node, four.nics_per_node) == (1, 4, 4)
    assert figures(search(four).nvls) == ("NVLS", 4, 60, 60)
    two = nccl_system(h100, [2, 5])
    assert two.gpus_per_node == 2 and search(two).nvls is None   # NVLS needs > 2 GPUs
    cluster = preset("h100-cluster", nodes=4)
    system = nccl_system(cluster, [0, 1, 8, 9, 16, 17])
    assert (system.nodes, system.gpus_per_node, system.nics_per_node) == (3, 2, 2)
    assert nccl_system(cluster, range(8)).nodes == 1


def test_clusters_take_nodes_nics_and_nic_speed():
    system = nccl_system(preset("b200-cluster", nodes=4, **{
        "node.nics.count": 4, "node.nics.link.bandwidth": "200Gbps"}))
    assert (system.nodes, system.nics_per_node, system.nic_bandwidth) == (4, 4, 25.0)
    assert system.gpus_per_nic_switch == 1 and system.nic_path == "pix"
    # 4 NICs on 8 switches: NIC k under switch 2k, with GPU 2k; GPU 2k+1 reaches it via the CPU
    system = nccl_system(preset("h100-cluster", nodes=2, **{"node.nics.count": 4}))
    assert system.nics_per_node == 4 and system.nic_path == "pix"


def test_nic_paths_follow_the_pcie_tree():
    h100 = preset("h100-cluster", nodes=2, **{"node.nics.gpudirect": False})
    assert nccl_system(h100).nic_path == "phb"
    a100 = preset("a100-cluster", nodes=2)
    assert nccl_system(a100).nic_path == "pxb"                       # declared
    assert nccl_system(preset("a100-cluster", nodes=2, **{"nccl.nic_path": "sys"})
                       ).nic_path == "sys"
    # 8 NICs on GPU 0's socket's switches only? No: spread; a NIC on the other socket -> sys
    one_nic = preset("h100-cluster", nodes=2, **{"node.nics.count": 1})
    assert nccl_system(one_nic, [4, 12]).nic_path == "sys"           # GPU 4: socket 1, NIC: 0


@pytest.mark.parametrize("gpus", range(1, 9))
def test_the_l40s_server_for_any_gpu_count(gpus):
    system = nccl_system(preset("l40s-pcie", gpus=gpus))
    assert (system.gpu_link, system.gpus_per_node, system.pcie_bandwidth) == ("pcie", gpus, 24)
    assert system.pcie_via_cpu == (gpus > 1)   # each GPU on its own root port
    assert search(system).ring.channels >= 1


def test_nvlink_count_from_the_line_rate_or_declared():
    assert nccl_system(preset("dgx-h100")).nvlink_links == 18            # 450 / 25
    assert nccl_system(preset("dgx-a100")).nvlink_links == 12            # 300 / 25
    assert nccl_system(preset("dgx-b200")).nvlink_links == 18            # 900 / 50
    declared = preset("dgx-h100", **{"nvlink.links": 16})
    assert nccl_system(declared).nvlink_links == 16
    uneven = preset("dgx-h100", **{"nvlink.bandwidth": "440GB/s",
                                   "nccl.reachable.nvlink": "80%"})
    with pytest.raises(InputError, match="declare nvlink.links"):
        nccl_system(uneven)
    unknown = preset("dgx-h100", **{"gpu.arch": 70})
    with pytest.raises(InputError, match="arch 70"):
        nccl_system(unknown)


def test_settings_pass_through_and_machines_without_figures_are_refused():
    sharp = preset("h100-cluster", nodes=2, **{"nccl.sharp": True})
    system = nccl_system(sharp, collnet_enable=True, max_channels=8)
    assert system.sharp and system.collnet_enable and system.max_channels == 8
    assert search(system).collnet_direct is not None
    for name in ("switch-64", "pcie-8gpu"):
        with pytest.raises(InputError, match="declares no NCCL figures"):
            nccl_system(preset(name))
