"""The shipped topology files load, carry their figures, and give what their hardware
allows; bad node/fabric sections are reported with file, key and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from collsim.engine.costs import IDEAL
from collsim.errors import InputError
from collsim.hardware.loader import load_topology, topology_from_text
from collsim.hardware.summary import summarize
from collsim.simulate import simulate

TOPOLOGIES = Path(__file__).resolve().parent.parent / "topologies"
SHIPPED = ["dgx-h100", "dgx-a100", "pcie-8gpu", "h100-cluster", "h100-cluster-2to1",
           "switch-64", "mesh-16"]


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_file_loads_and_every_figure_has_a_comment(name):
    path = TOPOLOGIES / f"{name}.yaml"
    assert load_topology(path).gpus >= 8
    text = path.read_text()
    assert text.startswith("#")                       # what the machine is, and sources
    if name in ("switch-64", "mesh-16"):
        return                                # round figures of docs/design.md#kinds
    for line in text.splitlines():
        code = line.split("#")[0]
        if "GB/s" in code or "Gbps" in code:
            assert "#" in line, f"{name}: figure without a source comment: {line}"


ONE_CHANNEL = {"channels": 1}


def test_dgx_h100_ring_allreduce_busbw_at_1GiB_is_within_nvlink_bandwidth():
    # Each of the 14 steps moves n/8 over one 450 GB/s NVLink port per GPU (plus 1 us), so
    # busbw = 2(p-1)/p * n / time tends to 450 GB/s and cannot exceed it (the links' own
    # figures: the ideal model, one channel).
    t = load_topology(TOPOLOGIES / "dgx-h100.yaml")
    result = simulate(t, "allreduce", "ring", 8, 2**30, ONE_CHANNEL, IDEAL)
    assert 0.99 * 450 < result.busbw_GBps < 450
    assert result.time_s == pytest.approx(14 * (1e-6 + 2**30 / 8 / 450e9), rel=1e-9)


def test_dgx_a100_and_pcie_server_busbw():
    a100 = simulate(load_topology(TOPOLOGIES / "dgx-a100.yaml"), "allreduce", "ring", 8, 2**30,
                    ONE_CHANNEL, IDEAL)
    assert 0.99 * 300 < a100.busbw_GBps < 300
    pcie = simulate(load_topology(TOPOLOGIES / "pcie-8gpu.yaml"), "allreduce", "ring", 8, 2**30,
                    ONE_CHANNEL, IDEAL)
    assert 0.99 * 31 < pcie.busbw_GBps < 31          # a GPU's x16 link binds, not the UPI


def test_cluster_nodes_is_a_top_level_override():
    for nodes in (1, 4, 16):
        t = load_topology(TOPOLOGIES / "h100-cluster.yaml", {"nodes": nodes})
        assert (t.gpus, t.nodes) == (8 * nodes, nodes)


@pytest.mark.parametrize("name,ratio", [("h100-cluster", 1), ("h100-cluster-2to1", 2)])
def test_cluster_summary_figures(name, ratio):
    s = summarize(load_topology(TOPOLOGIES / f"{name}.yaml", {"nodes": 8}))
    assert s.intra_injection == 450e9 and s.network_injection == 50e9
    assert s.gpus_per_nic == 1
    assert s.bisection == pytest.approx(32 * 50e9 / ratio)   # leaves 0 vs 1, 4 nodes each


def test_summary_of_a_shared_nic_and_of_the_pcie_server():
    s = summarize(load_topology(TOPOLOGIES / "h100-cluster.yaml",
                                {"nodes": 2, "node.nics.count": 2}))
    assert s.gpus_per_nic == 4 and s.network_injection == pytest.approx(50e9 / 4)
    pcie = summarize(load_topology(TOPOLOGIES / "pcie-8gpu.yaml"))
    assert pcie.bisection == pytest.approx(41.6e9)   # the inter-socket link


BAD = [
    ("kind: cluster\nnodes: 2\nnode: {kind: nvswich, gpus: 8}\nfabric: {kind: switch}",
     "node.kind", "nvswich"),
    ("kind: cluster\nnodes: 2\nnode: {kind: pcie, gpus: 8, pcie: {switches: 1, "
     "link: {latency: 1us, bandwidth: 1GB/s}, uplink: {latency: 1us, bandwidth: 1GB/s}}, "
     "nics: {count: 1, link: {latency: 1us, bandwidth: 1GB/s}}}\n"
     "fabric: {kind: fat_tree, leaf_port: 4, latency: 1us}", "fabric.leaf_port",
     "did you mean 'leaf_ports'"),
    ("kind: cluster\nnodes: 2\nnode: {kind: nvswitch, gpus: 8, "
     "nvlink: {latency: 1us, bandwidth: 1GB/s}}\nfabric: {kind: switch}", "node.nics",
     "required"),
    ("kind: nvswitch\ngpus: 8\nnvlink: {latency: 1us, bandwidth: 1GB/s}\n"
     "nics: {count: 1, link: {latency: 1us, bandwidth: 1GB/s}}", "pcie", "required"),
    ("kind: pcie\ngpus: 8\npcie: {switches: 2, sockets: 2, link: {latency: 1us, "
     "bandwidth: 1GB/s}, uplink: {latency: 1us, bandwidth: 1GB/s}}", "pcie.inter_socket",
     "required"),
    ("kind: nvlink\ngpus: 4\nnvlink: {latency: 1us, bandwidth: 1GB/s}\n"
     "pairs: [[0, 1, 1], [1, 0, 2]]", "pairs[1]", "listed twice"),
    ("kind: cluster\nnodes: 6\nnode: {kind: pcie, gpus: 1, pcie: {switches: 1, "
     "link: {latency: 1us, bandwidth: 1GB/s}, uplink: {latency: 1us, bandwidth: 1GB/s}}, "
     "nics: {count: 1, link: {latency: 1us, bandwidth: 1GB/s}}}\n"
     "fabric: {kind: torus, dims: [2, 2], link: {latency: 1us, bandwidth: 1GB/s}}",
     "fabric.dims", "holds 4 nodes but 'nodes' is 6"),
    ("kind: nvswitch\ngpus: 8\nnvlink: {latency: 1us, bandwidth: fast}", "nvlink.bandwidth",
     "bandwidth"),
]


@pytest.mark.parametrize("text,key,message", BAD)
def test_bad_sections_name_the_key(text, key, message):
    with pytest.raises(InputError) as caught:
        topology_from_text(text, file="bad.yaml")
    assert f"key '{key}'" in str(caught.value) and message in str(caught.value)
    assert "bad.yaml:" in str(caught.value)


def test_torus_fabric_and_rail_fabric_build():
    rail = topology_from_text(
        "kind: cluster\nnodes: 4\nnode: {kind: nvswitch, gpus: 2, nvlink: {latency: 1us, "
        "bandwidth: 100GB/s}, pcie: {switches: 1, link: {latency: 1us, bandwidth: 30GB/s}, "
        "uplink: {latency: 1us, bandwidth: 30GB/s}}, nics: {count: 2, link: {latency: 1us, "
        "bandwidth: 25GB/s}}}\nfabric: {kind: rail, spines: 2, latency: 1us}")
    same_rail = [rail.links[i].name for i in rail.route(0, 2)]
    assert "n0.nic0->rail0" in same_rail and not any("spine" in n for n in same_rail)
    cross = [rail.links[i].name for i in rail.route(0, 3)]
    assert any("spine" in n for n in cross)
    torus = topology_from_text(
        "kind: cluster\nnodes: 9\nnode: {kind: pcie, gpus: 1, pcie: {switches: 1, "
        "link: {latency: 1us, bandwidth: 30GB/s}, uplink: {latency: 1us, bandwidth: 30GB/s}}, "
        "nics: {count: 1, link: {latency: 1us, bandwidth: 25GB/s}}}\n"
        "fabric: {kind: torus, dims: [3, 3], link: {latency: 1us, bandwidth: 25GB/s}}")
    hops = [torus.links[i].kind for i in torus.route(0, 8)]
    assert hops.count("torus") == 2          # (0,0) -> (2,2): one wrap in each dimension
