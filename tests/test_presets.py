"""The presets of real machines (docs/design.md#real-machines): each loads, declares its GPU and
NCCL figures with a source or an assumption beside every figure, takes the overrides the contract
promises (clusters: nodes, NIC count, NIC speed; the L40S server: GPU count), and keeps the
physical figures of its sources."""

from __future__ import annotations

import re
import statistics

import pytest

from collsim.hardware.loader import load_topology
from collsim.hardware.shipped import find_topology, shipped_names
from collsim.nccl.adapter import nccl_system
from collsim.nccl.protocols import cost_model

SINGLE = ["dgx-a100", "dgx-h100", "dgx-h200", "dgx-b200", "gb200-nvl72", "l40s-pcie"]
CLUSTERS = ["a100-cluster", "h100-cluster", "b200-cluster", "gb200-nvl72-cluster"]
# Cloud networks and GB300 (tests/test_network_presets.py checks their figures).
NETWORKS = ["p4d-efa-cluster", "p5-efa-cluster", "a3-mega-cluster", "a3-high-cluster",
            "gb300-nvl72",
            "gb300-nvl72-cluster"]
PRESETS = SINGLE + CLUSTERS
FIGURE = re.compile(r"\d")
SECTIONS = ("gpu:", "nccl:")


def preset(name, **overrides):
    return load_topology(find_topology(name), overrides)


def test_every_preset_of_design_md_is_shipped():
    assert set(PRESETS) <= set(shipped_names())


@pytest.mark.parametrize("name", PRESETS + NETWORKS)
def test_every_figure_has_its_source_or_assumption_beside_it(name):
    """A line that gives a figure (a digit in its value) carries a comment, or follows a
    comment block that explains it; so does every line of the gpu and nccl sections."""
    lines = find_topology(name).read_text().splitlines()
    assert lines[0].startswith("#")
    section = None
    for i, line in enumerate(lines):
        code = line.split("#")[0].rstrip()
        if not code.strip():
            continue
        if not code.startswith(" "):
            section = code.split(":")[0]
        key, _, value = code.partition(":")
        gives = FIGURE.search(value) or (section in ("gpu", "nccl") and value.strip())
        if gives and key.strip() not in ("name", "kind"):
            explained = "#" in line or lines[i - 1].lstrip().startswith("#")
            assert explained, f"{name}:{i + 1}: figure without a source: {line}"


@pytest.mark.parametrize("name", PRESETS + NETWORKS)
def test_every_preset_declares_gpu_and_nccl(name):
    machine = preset(name).machine
    assert machine.gpu.model and machine.gpu.arch in (80, 89, 90, 100, 103)
    nccl = machine.nccl
    assert 0 < nccl.launch < 100e-6
    for link_class, line in nccl.line.items():
        assert 0.5 < nccl.reached(link_class) / line <= 1, (link_class, nccl.reached(link_class))


@pytest.mark.parametrize("name, arch, nvlink, reachable, nvls, cpu", [
    # Per-GPU NVLink per direction (docs/hardware.md#nvlink); NCCL's links x per-link figure
    # (docs/nccl.md#topology-figures)
    ("dgx-a100", 80, 300e9, 240e9, False, "amd"),
    ("dgx-h100", 90, 450e9, 370.8e9, True, "intel"),
    ("dgx-h200", 90, 450e9, 370.8e9, True, "intel"),
    ("dgx-b200", 100, 900e9, 721.8e9, True, "intel"),
    ("gb200-nvl72", 100, 900e9, 721.8e9, True, "arm"),
])
def test_nvlink_nodes_keep_their_sources_figures(name, arch, nvlink, reachable, nvls, cpu):
    t = preset(name)
    assert t.machine.gpu.arch == arch
    assert {link.bandwidth for link in t.links if link.kind == "nvlink"} == {nvlink}
    nccl = t.machine.nccl
    assert nccl.reached("nvlink") == pytest.approx(reachable)
    assert (nccl.nvls, nccl.cpu) == (nvls, cpu)


def test_gb200_nvl72_is_one_node_of_72_gpus_with_72_nics_at_400g():
    t = preset("gb200-nvl72")
    assert (t.gpus, t.nodes) == (72, 1)
    assert len(t.node.nics) == 72 and t.node.spec.nics.link.bandwidth == 50e9
    cluster = preset("gb200-nvl72-cluster", nodes=3)
    assert (cluster.gpus, cluster.nodes, nccl_system(cluster).gpus_per_node) == (216, 3, 72)


@pytest.mark.parametrize("name, nics, gbps", [
    ("a100-cluster", 8, 200), ("h100-cluster", 8, 400), ("b200-cluster", 8, 400),
    ("gb200-nvl72-cluster", 72, 400)])
def test_clusters_declare_their_nics(name, nics, gbps):
    spec = preset(name).node.spec.nics
    assert (spec.count, spec.link.bandwidth) == (nics, gbps * 1e9 / 8)


@pytest.mark.parametrize("name", CLUSTERS)
@pytest.mark.parametrize("nodes, nics, speed", [(1, 1, "100Gbps"), (2, 4, "400Gbps"),
                                                (3, 2, "200Gbps")])
def test_clusters_take_nodes_nic_count_and_nic_speed(name, nodes, nics, speed):
    t = preset(name, nodes=nodes, **{"node.nics.count": nics, "node.nics.link.bandwidth": speed})
    per_node = t.gpus // nodes
    assert t.nodes == nodes and len(t.node.nics) == nics
    system = nccl_system(t)
    assert (system.nodes, system.gpus_per_node) == (nodes, per_node)
    assert system.nic_bandwidth == pytest.approx(float(speed[:-4]) / 8)
    # a percentage of the line rate follows the NIC's speed
    assert t.machine.nccl.reached("network") == pytest.approx(0.96 * float(speed[:-4]) / 8e-9)
    assert cost_model(t, "ring", "Simple").launch > 0


@pytest.mark.parametrize("gpus", range(1, 9))
def test_the_l40s_server_takes_any_gpu_count(gpus):
    t = preset("l40s-pcie", gpus=gpus)
    assert t.gpus == gpus and not any(link.kind == "nvlink" for link in t.links)
    assert {link.bandwidth for link in t.links if link.kind == "pcie"} == {31e9}
    assert t.machine.nccl.reached("pcie") == 24e9


def test_the_launch_costs_are_the_derived_ones():
    """benchmarks/launch_costs.py derives them from validation/measurements.csv; presets
    without a measurement take another preset's, as their files say."""
    from benchmarks.launch_costs import RUNS, derive

    for name, runs in RUNS.items():
        derived = statistics.median(derive(name, run)[1] for run in runs)
        assert preset(name).machine.nccl.launch == pytest.approx(derived * 1e-6, abs=0.05e-6)
    assert preset("dgx-b200").machine.nccl.launch == preset("dgx-h100").machine.nccl.launch
    assert preset("gb200-nvl72-cluster").machine.nccl.launch == \
        preset("gb200-nvl72").machine.nccl.launch
