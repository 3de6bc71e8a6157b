"""``collsim topo show`` on machines with NCCL figures: line rate and reachable bandwidth per
class, launch, each protocol's figures, and NCCL's graphs; nothing of it on other machines."""

from __future__ import annotations

import re

from collsim.cli import main


def show(capsys, *argv):
    assert main(["topo", "show", *argv, "--no-bisection"]) == 0
    return capsys.readouterr().out


def row(out, *cells):
    """The output line whose whitespace-separated cells start with ``cells``."""
    for line in out.splitlines():
        if line.split()[:len(cells)] == list(cells):
            return line.split()
    raise AssertionError(f"no line starting with {cells} in:\n{out}")


def test_a_dgx_h100(capsys):
    out = show(capsys, "dgx-h100")
    assert "gpu             H100-SXM5-80GB (arch 90)" in out
    assert "NCCL            launch 14.9us per call, cpu intel, NVLS yes, SHARP no" in out
    assert row(out, "nvlink", "450") == ["nvlink", "450", "GB/s", "370.8", "GB/s", "(82.4%)"]
    assert row(out, "pcie", "63")[3:] == ["48", "GB/s", "(76.2%)"]
    assert row(out, "network", "50")[3:] == ["48", "GB/s", "(96%)"]
    # family, protocol, base, nvlink, pcie, network, wire, channel cap, GPU cap
    assert row(out, "ring", "LL") == ["ring", "LL", "6.6us", "0.6us", "1us", "2.7us", "2", "-",
                                      "141", "GB/s"]
    # perChMaxRingLL128Bw 36.7 is a graph channel's; NCCL runs each as two channels
    assert row(out, "ring", "LL128")[2:9] == ["14us", "1.9us", "2.5us", "4us", "1.067", "18.35",
                                              "GB/s"]
    assert row(out, "nccl_tree", "Simple")[-3:] == ["38.7", "GB/s", "-"]
    # Tree Simple: base 8.4 + 2 x 7 hops x NVLink 4.0 once a call; messages pay the links'
    assert row(out, "nccl_tree", "Simple")[2:6] == ["64.4us", "links", "links", "links"]
    assert row(out, "nvls", "Simple")[2:4] == ["25us", "links"]   # NVLink figure once a call
    assert "nvls: x0.85 of NVLink's reachable" in out
    assert row(out, "ring", "RING,") == ["ring", "RING,", "12", "x", "30,", "paths", "NVL", "/",
                                         "PIX"]
    assert "nvls          8 heads, 40 intra / 60 inter" in out
    assert "channels      24 at run time, NVLS 16" in out
    assert "  release       2.30.7 (the release collsim models; nccl.version unset)" in out
    assert not re.search(r"nvls_tree|collnet", out)


def test_the_nccl_release_and_its_copy_up_of_ring_channels(capsys):
    # one NIC a node: the ring's 4 channels at run time, raised to NVLS's 16 on NCCL 2.27
    one_nic = ("h100-cluster", "--set", "nodes=2", "--set", "node.nics.count=1")
    out = show(capsys, *one_nic, "--set", "nccl.version=2.27.3")
    assert "  release       2.27.3 (nccl.version; the rest follows 2.30.7)" in out
    assert ("channels      16 at run time, NVLS 16 (ring and tree raised to NVLS's, as NCCL "
            "2.20.3 to 2.27 do)") in out
    assert "raised" not in show(capsys, "h100-cluster", "--set", "nodes=2",
                                "--set", "nccl.version=2.27.3")  # 16 already: nothing raised
    out = show(capsys, *one_nic, "--set", "nccl.version=2.29.2")
    assert "channels      4 at run time, NVLS 16\n" in out + "\n"


def test_a_cluster_shows_its_cross_node_figures(capsys):
    out = show(capsys, "h100-cluster", "--set", "nodes=2", "--set", "nccl.launch=12us")
    assert "launch 12us per call" in out and "(16 ranks on 2 nodes; NCCL's search" in out
    assert row(out, "ring", "LL")[-2:] == ["39", "GB/s"]            # llMaxBw, Intel, 2 nodes
    # NVLSTree: NVLink 25 + 2 x log2(2) x NET 20.9 once a call; 57.7 GB/s is the N2 cap
    assert row(out, "nvls_tree", "Simple")[2:9] == ["66.8us", "links", "links", "links", "1",
                                                    "57.7", "GB/s"]
    # Tree: 8.4 + 2 x (7 x NVLink 4.0 + 1 x NET 14.0)
    assert row(out, "nccl_tree", "Simple")[2] == "92.4us"
    assert "nccl_tree, nvls_tree: base includes NCCL's tree latency" in out
    assert row(out, "tree", "TREE,")[:4] == ["tree", "TREE,", "8", "x"]
    assert "channels      16 at run time, NVLS 16" in out
    # the p2p path's reach of a NIC: the rings' unless the file gives its own
    assert row(out, "p2p")[1:4] == ["48", "GB/s", "(96%):"] and out.count("as the network's")
    declared = show(capsys, "h100-cluster", "--set", "nccl.reachable.p2p=40GB/s")
    assert row(declared, "p2p")[1:4] == ["40", "GB/s", "(80%):"]
    assert "the file's reachable.p2p" in declared


def test_sharp_shows_collnet_and_a_pcie_server_shows_only_its_classes(capsys):
    out = show(capsys, "h100-cluster", "--set", "nodes=2", "--set", "nccl.sharp=true")
    assert row(out, "collnet_direct", "Simple")[5] == "15.5us"     # half of 31 us
    out = show(capsys, "l40s-pcie")
    assert "\n  nvlink " not in out and row(out, "pcie", "31")[3:5] == ["24", "GB/s"]
    assert row(out, "ring", "LL")[2:7] == ["6.6us", "-", "1us", "-", "2"]
    assert "RING, 1 x 20, paths PHB / PIX" in out


def test_machines_without_nccl_figures_show_none(capsys, tmp_path):
    bare = tmp_path / "bare-cluster.yaml"
    bare.write_text("base: h100-cluster\nname: bare\nnodes: 2\ngpu: ~\nnccl: ~\n")
    for name in ("switch-64", "pcie-8gpu", str(bare)):
        out = show(capsys, name)
        assert "\nNCCL " not in out and "\ngpu " not in out


def test_the_simple_trees_halves_show_their_own_cap(capsys):
    """Each half of a Simple tree channel (runTreeSplit's thread groups) moves at most half a
    Hopper channel's one-node figure, 38.7 GB/s; the note names it once, for Simple only."""
    out = show(capsys, "a3-mega-cluster")
    notes = [line for line in out.splitlines() if "each half of a channel" in line]
    assert notes == ["  nccl_tree Simple: each half of a channel (reduce up, broadcast down) "
                     "moves at most 19.35 GB/s"]
