"""The per-message cost models of NCCL's protocols on a machine: launch = machine launch + NCCL's
base latency, per-step latency by the slowest link class a route crosses (replacing the links'),
wire ratio, reachable bandwidth per link, NCCL's per-channel and per-GPU caps; the ideal model
where a machine declares nothing."""

from __future__ import annotations

import pytest

from collsim.engine.costs import IDEAL, channel_bandwidth, path_costs
from collsim.errors import InputError
from collsim.hardware.loader import load_topology, topology_from_text
from collsim.hardware.shipped import find_topology
from collsim.nccl import constants as C
from collsim.nccl.adapter import nccl_system
from collsim.nccl.protocols import cost_model
from collsim.nccl.search import search
from collsim.simulate import simulate


def preset(name, **overrides):
    return load_topology(find_topology(name), overrides)


def route(topology, src, dst):
    return [topology.links[i] for i in topology.route(src, dst)]


H100 = preset("dgx-h100")
CLUSTER = preset("h100-cluster", nodes=2)
L40S = preset("l40s-pcie")
US = 1e-6


@pytest.mark.parametrize("topology", [
    load_topology(find_topology("switch-64")), load_topology(find_topology("mesh-16")),
    load_topology(find_topology("pcie-8gpu")),
    topology_from_text("base: h100-cluster\nname: bare\ngpu: ~\nnccl: ~\n", {"nodes": 2}),
])
def test_machines_without_nccl_figures_get_the_ideal_model(topology):
    for protocol in ("LL", "LL128", "Simple"):
        assert cost_model(topology, "ring", protocol) is IDEAL


@pytest.mark.parametrize("protocol, base, nvlink, pcie, network, wire", [
    # NCCL's baseLat and hwLat for Ring (docs/nccl.md#tuning-constants), LL 8/16, LL128 120/128
    # bytes
    ("LL", 6.6, 0.6, 1.0, 2.7, 2.0),
    ("LL128", 14.0, 1.9, 2.5, 4.0, 128 / 120),
    ("Simple", 8.4, 3.4, 5.7, 14.0, 1.0),
])
def test_ring_figures_by_protocol_and_link_class(protocol, base, nvlink, pcie, network, wire):
    model = cost_model(CLUSTER, "ring", protocol)
    assert model.launch == pytest.approx((4.2 + base) * US)   # h100-cluster's launch + base
    assert model.wire_ratio == pytest.approx(wire)
    # inside a node over NVLink; across nodes through PCIe, NIC and fabric: the slowest class
    assert model.latency(route(CLUSTER, 0, 1)) == pytest.approx(nvlink * US)
    assert model.latency(route(CLUSTER, 0, 8)) == pytest.approx(network * US)
    assert cost_model(L40S, "ring", protocol).latency(route(L40S, 0, 7)) == \
        pytest.approx(pcie * US)
    # the links' own latencies are not added: a GPU-NVSwitch-GPU route has two 0.5 us hops
    assert sum(link.latency for link in route(CLUSTER, 0, 1)) == pytest.approx(1 * US)


def test_reachable_bandwidth_scales_every_link_of_a_class():
    cluster = preset("h100-cluster", nodes=8)   # two leaves: spine links too
    model = cost_model(cluster, "ring", "Simple")
    by_kind = {link.kind: model.bandwidth(link) / link.bandwidth for link in cluster.links}
    assert by_kind["nvlink"] == pytest.approx(370.8 / 450)
    for kind in ("pcie", "pcie_uplink", "inter_socket"):
        assert by_kind[kind] == pytest.approx(48 / 63)
    for kind in ("nic", "fabric"):
        assert by_kind[kind] == pytest.approx(0.96)
    nvlink = next(link for link in CLUSTER.links if link.kind == "nvlink")
    assert model.bandwidth(nvlink) == pytest.approx(370.8e9)
    ll = cost_model(CLUSTER, "ring", "LL")
    assert channel_bandwidth(ll, nvlink) == pytest.approx(370.8e9 / 2)  # 8 data bytes per 16


def test_an_ll128_rings_channels_together_reach_nccls_graph_figure():
    """NCCL's model caps Ring LL128 at its graph's channels x perChMaxRingLL128Bw and runs
    twice its graph's channels: the channels collsim runs reach NCCL's total, not twice it."""
    for topology in (H100, CLUSTER, preset("h100-cluster", nodes=4),
                     preset("a100-cluster", nodes=2)):
        graphs = search(nccl_system(topology))
        assert graphs.channels == C.RUN_CHANNELS_PER_GRAPH_CHANNEL * graphs.ring.channels
        figure = C.PER_CHANNEL_MAX_RING_LL128_BW[C.arch_row(nccl_system(topology).arch)][0]
        model = cost_model(topology, "ring", "LL128")
        assert graphs.channels * model.channel_cap == pytest.approx(
            graphs.ring.channels * figure * 1e9)


@pytest.mark.parametrize("topology, family, protocol, channel_cap, gpu_cap", [
    # NCCL's per-arch tables (docs/nccl.md#tuning-constants), column by node count; GB/s of
    # payload
    (H100, "ring", "LL", None, 141.0),           # llMaxBw Hopper, one node
    (CLUSTER, "ring", "LL", None, 39.0),         # two nodes: the CPU's row (Intel), N2
    (preset("a100-cluster", nodes=2), "ring", "LL", None, 22.5),   # AMD CPUs, N2
    (preset("h100-cluster", nodes=4), "ring", "LL", None, 20.4),   # Intel, N4+
    # perChMaxRingLL128Bw is a graph channel's, which NCCL runs as two channels
    (H100, "ring", "LL128", 36.7 / 2, None),      # Hopper
    (preset("dgx-b200"), "ring", "LL128", 40.0 / 2, None),
    (H100, "ring", "Simple", None, None),
    (H100, "nccl_tree", "Simple", 38.7, None),   # perChMaxTreeBw Hopper N1
    (CLUSTER, "Tree", "Simple", 41.4, None),      # NCCL's spelling, N2
    (CLUSTER, "nccl_tree", "LL128", 36.7, None),  # min(perChMaxTreeBw 41.4, LL128 36.7)
    (preset("h100-cluster", nodes=4), "nccl_tree", "LL128", 29.0, None),
    (H100, "nccl_tree", "LL", 38.7, 141.0),
    (CLUSTER, "nvls_tree", "Simple", 57.7, None),  # perChMaxNVLSTreeBw Hopper N2
    (H100, "nvls", "Simple", None, None),
])
def test_caps_come_from_nccls_tables(topology, family, protocol, channel_cap, gpu_cap):
    model = cost_model(topology, family, protocol)
    assert model.channel_cap == (None if channel_cap is None else pytest.approx(channel_cap * 1e9))
    assert model.gpu_cap == (None if gpu_cap is None else pytest.approx(gpu_cap * 1e9))


def test_the_node_column_follows_the_gpus_of_the_call():
    cluster = preset("h100-cluster", nodes=16)
    assert cost_model(cluster, "ring", "LL").gpu_cap == pytest.approx(20.4e9)
    assert cost_model(cluster, "ring", "LL", gpus=range(16)).gpu_cap == pytest.approx(39e9)
    assert cost_model(cluster, "ring", "LL", gpus=range(8)).gpu_cap == pytest.approx(141e9)


def test_nvls_pays_nccls_nvlink_figure_once_a_call_and_reaches_less_of_nvlink():
    nvls = cost_model(CLUSTER, "nvls", "Simple")
    nvlink = next(link for link in CLUSTER.links if link.kind == "nvlink")
    assert nvls.bandwidth(nvlink) == pytest.approx(370.8e9 * 0.85)   # nvlsEfficiency Hopper
    inside = route(CLUSTER, 0, 1)                                     # GPU -> NVSwitch -> GPU
    assert nvls.latency(inside) == pytest.approx(sum(link.latency for link in inside))
    assert nvls.launch == pytest.approx((4.2 + 25) * US)  # NVLS base 0, NVLink figure per call
    tree = cost_model(CLUSTER, "nvls_tree", "Simple")
    assert tree.latency(inside) == pytest.approx(sum(link.latency for link in inside))
    between = route(CLUSTER, 0, 8)
    assert tree.latency(between) == pytest.approx(sum(link.latency for link in between))
    assert tree.launch == pytest.approx((4.2 + 25 + 2 * 20.9) * US)  # NVLink + 2 x log2(2) x NET
    assert cost_model(CLUSTER, "nvls", "Simple", gpus=range(16)).latency(route(CLUSTER, 0, 8)) \
        == pytest.approx(9 * US)              # across nodes (SHARP): half of NET's 18 us
    b200 = preset("dgx-b200")
    nvlink = next(link for link in b200.links if link.kind == "nvlink")
    assert cost_model(b200, "nvls", "Simple").bandwidth(nvlink) == \
        pytest.approx(721.8e9 * 0.74)                                     # Blackwell


def test_nvlstree_across_nodes_reaches_nvls_bus_bandwidth_not_its_algorithm_bandwidth():
    # NCCL's model gives NVLSTree NVLS's per-channel NVLink term and divides by 2(n-1)/n of
    # all n ranks: on 2 nodes of 8 the in-node part gets 7/8 x 16/15 of NVLS's reach
    nvlink = next(link for link in CLUSTER.links if link.kind == "nvlink")
    nvls = cost_model(CLUSTER, "nvls", "Simple", gpus=range(8)).bandwidth(nvlink)
    tree = cost_model(CLUSTER, "nvls_tree", "Simple")
    assert tree.bandwidth(nvlink) == pytest.approx(nvls * 7 / 8 * 16 / 15)
    assert cost_model(CLUSTER, "nvls_tree", "Simple", gpus=range(8)).bandwidth(nvlink) \
        == pytest.approx(nvls)                                   # one node: NVLS's reach
    share = [cost_model(preset("h100-cluster", nodes=n), "nvls_tree", "Simple").bandwidth(nvlink)
             / nvls for n in (2, 4, 8, 16)]
    assert share == sorted(share, reverse=True) and share[-1] > 7 / 8   # -> (p-1)/p


def test_nvlstree_on_two_nodes_takes_as_long_per_bus_byte_as_nvls_on_one():
    # at a size where NVLink binds (1 GiB), NVLSTree's busbw on 2 DGX H100 is NVLS's on one
    one = simulate(H100, "allreduce", "nvls", 8, 2**30).busbw_GBps
    two = simulate(CLUSTER, "allreduce", "nvls_tree", 16, 2**30).busbw_GBps
    assert two == pytest.approx(one, rel=0.02)
    assert two < one * 30 / 16 / (14 / 8)                     # not the algbw of one node


def test_an_override_replaces_nccls_round_trip_figure():
    t = preset("dgx-h100", **{"nccl.protocols.Simple.nvls.latency.nvlink": "20us",
                              "nccl.protocols.Simple.latency.nvlink": "5us"})
    assert cost_model(t, "nvls", "Simple").launch == \
        pytest.approx(cost_model(t, "nvls", "Simple").machine_launch + 20 * US)
    assert cost_model(t, "ring", "Simple").latency(route(t, 0, 1)) == pytest.approx(5 * US)


def test_collnet_pays_half_the_network_round_trip_per_message():
    sharp = preset("h100-cluster", nodes=2, **{"nccl.sharp": True})
    direct = cost_model(sharp, "collnet_direct", "Simple")
    assert direct.latency(route(sharp, 0, 8)) == pytest.approx(31.0 / 2 * US)
    assert direct.latency(route(sharp, 0, 1)) == pytest.approx(3.7 * US)
    chain = cost_model(sharp, "collnet_chain", "Simple")
    between = route(sharp, 0, 8)
    assert chain.latency(between) == pytest.approx(sum(link.latency for link in between))
    # CollNetChain: base 0 + 2 x 7 hops x NVLink 2.8 + NET 30 once a call
    assert chain.launch == pytest.approx((4.2 + 2 * 7 * 2.8 + 30) * US)


def test_overrides_replace_nccls_figures_family_first():
    t = preset("h100-cluster", nodes=2, **{
        "nccl.protocols.LL128.latency.nvlink": "3us", "nccl.protocols.LL128.base": "10us",
        "nccl.protocols.LL128.ring.base": "12us", "nccl.protocols.LL128.channel_cap": "20GB/s",
        "nccl.protocols.LL.gpu_cap": "50GB/s", "nccl.launch": "1us"})
    ring, tree = cost_model(t, "ring", "LL128"), cost_model(t, "nccl_tree", "LL128")
    # Tree LL128 per call: 2 x (7 x the overridden NVLink 3 + 1 x NET 8.5)
    assert ring.launch == pytest.approx(13 * US)
    assert tree.launch == pytest.approx((11 + 2 * (7 * 3 + 8.5)) * US)
    assert ring.latency(route(t, 0, 1)) == pytest.approx(3 * US)
    inside = route(t, 0, 1)
    assert tree.latency(inside) == pytest.approx(sum(link.latency for link in inside))
    assert ring.latency(route(t, 0, 8)) == pytest.approx(4 * US)   # not overridden
    assert ring.channel_cap == tree.channel_cap == pytest.approx(20e9)
    assert cost_model(t, "ring", "LL").gpu_cap == pytest.approx(50e9)
    assert cost_model(t, "ring", "Simple").launch == pytest.approx(9.4 * US)


@pytest.mark.parametrize("family", ["nvls", "nvls_tree", "collnet_direct", "collnet_chain",
                                    "pat"])
def test_simple_only_families_refuse_other_protocols(family):
    with pytest.raises(InputError, match="Simple protocol only"):
        cost_model(H100, family, "LL128")
    with pytest.raises(InputError, match="unknown NCCL protocol"):
        cost_model(H100, "ring", "LL64")


def test_the_engine_charges_the_model_ring_simple_on_a_dgx_h100():
    # Every ring step moves n/8 over each GPU's NVLink port at 370.8 GB/s and pays Ring
    # Simple's NVLink latency (3.4 us) instead of the links' 1 us; the call pays launch + base.
    model = cost_model(H100, "ring", "Simple")
    n = 2**30
    result = simulate(H100, "allreduce", "ring", 8, n, costs=model)
    expected = (14.9 + 8.4) * US + 14 * (3.4 * US + n / 8 / 370.8e9)
    assert result.time_s == pytest.approx(expected, rel=1e-9)
    assert result.analytic_time_s == pytest.approx(expected, rel=1e-9)
    assert path_costs(H100, model) == pytest.approx((3.4 * US, 1 / 370.8e9))


def test_a_file_with_its_own_nccl_section_builds_a_model():
    text = ("kind: pcie\ngpus: 2\npcie: {switches: 1, link: {latency: 1us, bandwidth: 31GB/s},"
            " uplink: {latency: 1us, bandwidth: 31GB/s}}\ngpu: {arch: 89}\n"
            "nccl: {launch: 2us, cpu: amd, reachable: {pcie: 50%}}\n")
    t = topology_from_text(text)
    model = cost_model(t, "ring", "LL")
    assert model.launch == pytest.approx(8.6 * US)
    assert model.bandwidth(t.links[0]) == pytest.approx(15.5e9)
    assert model.latency(route(t, 0, 1)) == pytest.approx(1.0 * US)
    assert model.gpu_cap == pytest.approx(87.7e9)   # SM89 takes the Ampere row


# NCCL's tree latencies worked by hand on the h100-cluster (8 GPUs a node, launch 4.2 us):
# Tree Simple base 8.4, NVLink 4.0, NET 14.0; NVLSTree Simple base 0, NVLink 25, NET 20.9.
@pytest.mark.parametrize(("nodes", "tree_us", "nvls_tree_us"), [
    (1, 8.4 + 2 * (7 * 4.0), 25.0),
    (2, 8.4 + 2 * (7 * 4.0 + 1 * 14.0), 25 + 2 * 1 * 20.9),
    (4, 8.4 + 2 * (7 * 4.0 + 2 * 14.0), 25 + 2 * 2 * 20.9),
    (16, 8.4 + 2 * (7 * 4.0 + 4 * 14.0), 25 + 2 * 4 * 20.9),
])
def test_a_tree_family_pays_nccls_tree_latency_once_a_call(nodes, tree_us, nvls_tree_us):
    cluster = preset("h100-cluster", nodes=nodes)
    assert cost_model(cluster, "nccl_tree", "Simple").launch == pytest.approx((4.2 + tree_us) * US)
    assert cost_model(cluster, "nvls_tree", "Simple").launch == \
        pytest.approx((4.2 + nvls_tree_us) * US)


def test_the_tree_latency_follows_the_calls_nodes_and_gpus_per_node():
    cluster = preset("h100-cluster", nodes=16)
    # 2 nodes of 8, then one GPU on each of 2 nodes (no NVLink hop), then 4 GPUs on one node
    assert cost_model(cluster, "nccl_tree", "LL", gpus=range(16)).launch == \
        pytest.approx((4.2 + 6.8 + 2 * (7 * 0.6 + 5.0)) * US)
    assert cost_model(cluster, "nccl_tree", "LL", gpus=[0, 8]).launch == \
        pytest.approx((4.2 + 6.8 + 2 * 5.0) * US)
    assert cost_model(cluster, "nccl_tree", "LL", gpus=range(4)).launch == \
        pytest.approx((4.2 + 6.8 + 2 * 3 * 0.6) * US)


def test_a_pcie_server_takes_nccls_pci_figure_for_its_tree_hops():
    # l40s-pcie: one node of GPUs over PCIe; Tree LL128 base 14, PCI 1.9 per hop
    gpus = L40S.gpus
    tree = cost_model(L40S, "nccl_tree", "LL128")
    assert tree.launch == pytest.approx(tree.machine_launch + (14 + 2 * (gpus - 1) * 1.9) * US)


@pytest.mark.parametrize("family", ["nccl_tree", "nvls_tree"])
def test_tree_messages_between_nodes_pay_their_links_own_latency(family):
    cluster = preset("h100-cluster", nodes=4)
    model = cost_model(cluster, family, "Simple")
    for src, dst in ((0, 8), (0, 31), (5, 1)):
        path = route(cluster, src, dst)
        own = sum(link.latency for link in path)
        assert model.latency(path) == pytest.approx(own)
        assert own < 14.0 * US                      # not NCCL's per-step network figure


def test_the_ring_still_pays_nccls_figure_per_step_between_nodes():
    ring = cost_model(CLUSTER, "ring", "Simple")
    assert ring.latency(route(CLUSTER, 0, 8)) == pytest.approx(14.0 * US)
    assert ring.launch == pytest.approx((4.2 + 8.4) * US)


@pytest.mark.parametrize("family", ["nccl_tree", "nvls_tree", "collnet_chain"])
def test_canonical_kinds_keep_the_ideal_model_for_the_trees(family):
    topology = load_topology(find_topology("switch-64"))
    assert cost_model(topology, family, "Simple") is IDEAL


@pytest.mark.parametrize("force, extra_us", [(0, 0.0), (1, 75.0)])
def test_a_forced_flush_adds_the_plugins_latency_to_each_simple_step_on_hopper(force, extra_us):
    """p5 (Hopper, EFA): a Ring Simple step across nodes costs AWS's 23 us (the file's figure);
    with NCCL_NET_FORCE_FLUSH=1 (NCCL's default before 2.19.1) each receive is flushed too,
    one more of the 75 us the plugin reports. LL and LL128 are never flushed."""
    p5 = preset("p5-efa-cluster", **{"nccl.environment.NCCL_NET_FORCE_FLUSH": force})
    across = route(p5, 0, 8)
    assert cost_model(p5, "ring", "Simple").latency(across) == pytest.approx((23 + extra_us) * US)
    assert cost_model(p5, "ring", "LL128").latency(across) == pytest.approx(20 * US)
    assert cost_model(p5, "ring", "LL").latency(across) == pytest.approx(20 * US)


def test_before_hopper_every_simple_receive_is_flushed():
    """p4d (A100): NCCL flushes whatever the environment says, so a Ring Simple step across
    nodes pays NCCL's 14 us and the plugin's 75 us twice, as NCCL's own model charges it."""
    for force in (0, 1):
        p4d = preset("p4d-efa-cluster", **{"nccl.environment.NCCL_NET_FORCE_FLUSH": force})
        simple = cost_model(p4d, "ring", "Simple").latency(route(p4d, 0, 8))
        assert simple == pytest.approx((14 + 2 * 75) * US)


def test_a_hopper_cluster_that_reports_a_latency_flushes_only_when_forced():
    """An H100 cluster on EFA's figures and no file override: NCCL's 14 us and the plugin's
    75 us a Simple step, and 75 us more when NCCL_NET_FORCE_FLUSH=1."""
    efa = preset("h100-cluster", nodes=2, **{"node.nics.transport": "efa"})
    forced = preset("h100-cluster", nodes=2, **{"node.nics.transport": "efa",
                                                 "nccl.environment.NCCL_NET_FORCE_FLUSH": 1})
    across = route(efa, 0, 8)
    assert cost_model(efa, "ring", "Simple").latency(across) == pytest.approx(89 * US)
    assert cost_model(forced, "ring", "Simple").latency(across) == pytest.approx(164 * US)


@pytest.mark.parametrize("nodes", [1, 2, 4])
def test_a_simple_tree_channels_halves_each_move_half_its_one_node_figure(nodes):
    """runTreeSplit gives the tree's reduce up and broadcast down thread groups of their own;
    NCCL's model gives each direction half the channel's figure, and a channel's copy rate is
    perChMaxTreeBw's one-node column (Hopper 38.7 GB/s), whatever the call's node count."""
    topology = preset("h100-cluster", nodes=max(2, nodes))
    gpus = list(range(8 * nodes))
    tree = cost_model(topology, "nccl_tree", "Simple", gpus)
    assert tree.group_cap == pytest.approx(38.7e9 / 2)
    assert tree.channel_cap == pytest.approx(C.PER_CHANNEL_MAX_TREE_BW[2][min(nodes, 3) - 1]
                                             * 1e9)
    for family, protocol in (("nccl_tree", "LL128"), ("nccl_tree", "LL"), ("ring", "Simple"),
                             ("nvls_tree", "Simple"), ("collnet_chain", "Simple")):
        assert cost_model(topology, family, protocol, gpus).group_cap is None


@pytest.mark.parametrize(("name", "per_channel"), [("dgx-h100", 10.3e9), ("dgx-a100", 10e9),
                                                   ("gb300-nvl72", 20.05e9)])
def test_an_alltoall_channel_on_one_node_carries_half_nccls_nvlink_figure(name, per_channel):
    """ncclTopoGetNchannels gives a peer over NVLink two channels per NVLink (20.6 GB/s on
    Hopper, 20.0 on Ampere, 40.1 on Blackwell); across nodes the model is left as it is."""
    from collsim.nccl.protocols import p2p_nvlink_cap

    topology = preset(name)
    one = p2p_nvlink_cap(cost_model(topology, "ring", "Simple", [0, 1]),
                         topology.machine.gpu.arch)
    assert one.channel_cap == pytest.approx(per_channel)
    assert p2p_nvlink_cap(cost_model(CLUSTER, "ring", "Simple"), 90) == \
        cost_model(CLUSTER, "ring", "Simple")
