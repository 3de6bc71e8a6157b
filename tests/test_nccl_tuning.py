"""NCCL's cost tables and time per call, against hand arithmetic from the constants of
docs/nccl.md#tuning-constants and the graphs of docs/nccl.md#topology-graphs (test_nccl_search.py
checks those graphs)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collsim.hardware.nccl_names import ALGORITHMS, MODELLED_COLLECTIVES, PROTOCOLS
from collsim.nccl.system import NcclSystem
from collsim.nccl.tuning import call_terms, call_time, call_time_us, log2i, model, steps
from tests.nccl_machines import DGX_A100, DGX_H100, h100_cluster, system_strategy

MiB = 1 << 20


def cell(system, collective, algorithm, protocol):
    entry = model(system).entry(collective, algorithm, protocol)
    return entry.bandwidth, entry.latency


@pytest.mark.parametrize("algorithm, protocol, bandwidth, latency", [
    # 8 ranks: ring ratio 8/14; ring 12 x 20 = 240 per GPU; Ampere llMaxBw 87.7.
    ("ring", "LL", min(87.7, 0.5 * 240) * 8 / 14, 6.6 + 14 * 0.6),
    ("ring", "LL128", min(0.92 * 240, 12 * 20) * 8 / 14, 14 + 14 * 1.9),
    ("ring", "Simple", 240 * 8 / 14, 8.4 + 14 * 3.4),
    # Tree 12 x 20: min(0.92 x 240, 12 x 24 perChMaxTreeBw) = 220.8, then the protocol, x 0.5.
    ("nccl_tree", "LL", min(220.8 / 3.8, 87.7) * 0.5, 6.8 + 2 * 7 * 0.6),
    ("nccl_tree", "LL128", min(220.8 * 7 / 9, 12 * 20) * 0.5, 14 + 2 * 7 * 1.25),
    ("nccl_tree", "Simple", 220.8 * 0.5, 8.4 + 2 * 7 * 4.0),
])
def test_dgx_a100_allreduce_table(algorithm, protocol, bandwidth, latency):
    # docs/nccl.md#tuning-worked: Ring LL 15.0/50.1, LL128 40.6/126.2, Simple 56.0/137.1;
    # Tree LL 15.2/29.1, LL128 31.5/85.9, Simple 64.4/110.4.
    assert cell(DGX_A100, "allreduce", algorithm, protocol) == pytest.approx(
        (bandwidth, latency), rel=1e-12)


def test_dgx_h100_nvls_cells():
    # NVLS 8 x 40/60: min(40 x 0.85 x 7/8 x 2, 60) = 59.5 per channel, bus 476, x 8/14 = 272.
    # Latency = hwLat NVLINK NVLS Simple 25 (replaces the base). Allgather: x (ppn-1)/ppn
    # instead of x 2, and no bus-to-algorithm conversion.
    assert cell(DGX_H100, "allreduce", "nvls", "Simple") == pytest.approx((272.0, 25.0))
    assert cell(DGX_H100, "allgather", "nvls", "Simple") == pytest.approx(
        (8 * 40 * 0.85 * 7 / 8 * 7 / 8, 25.0))


def test_broadcast_ring_latency_depends_on_same_channels():
    # One node: every channel the same ring -> one step: LL 6.6 + 0.6; ratio 8/8.
    assert cell(DGX_H100, "broadcast", "ring", "LL") == pytest.approx((141.0, 7.2))
    # 2 nodes, channels on different NICs: 16 steps of NET Ring LL 2.7, Simple uses NET Tree 14.
    assert cell(h100_cluster(2), "broadcast", "ring", "LL")[1] == pytest.approx(6.6 + 16 * 2.7)
    assert cell(h100_cluster(2), "broadcast", "ring", "Simple")[1] == pytest.approx(8.4 + 16 * 14)


@pytest.mark.parametrize("nodes, ring_simple, nvls_tree", [
    # Ring Simple: 8.4 + (nsteps - 2(nodes-1)) x max(3.4, 3 x 1 net overhead) + 2(nodes-1) x 14
    (2, 8.4 + 28 * 3.4 + 2 * 14, 25 + 2 * 1 * 20.9),
    (4, 8.4 + 56 * 3.4 + 6 * 14, 25 + 2 * 2 * 20.9),
    (16, 8.4 + 224 * 3.4 + 30 * 14, 25 + 2 * 4 * 20.9),
])
def test_h100_cluster_latencies(nodes, ring_simple, nvls_tree):
    # docs/nccl.md#tuning-worked: Ring Simple 131.6 / 282.8 / 1190; NVLSTree 66.8 / 108.6 / 192.2.
    system = h100_cluster(nodes)
    assert cell(system, "allreduce", "ring", "Simple")[1] == pytest.approx(ring_simple)
    assert cell(system, "allreduce", "nvls_tree", "Simple")[1] == pytest.approx(nvls_tree)


def test_h100_cluster_bandwidths():
    # 2 nodes (16 ranks): NVLSTree min(40 x .85 x 7/8 x 2 = 59.5, 48 x 2, cap 57.7) x 8 = 461.6,
    # x 16/30. Tree 8 x 48 (bwIntra, <= 2 nodes): min(.92 x 384, 8 x 41.4) = 331.2; LL: /3.8 vs
    # Intel llMaxBw N2 39.0 -> 39.0; plain TREE x .85; x .5.
    two = h100_cluster(2)
    assert cell(two, "allreduce", "nvls_tree", "Simple")[0] == pytest.approx(461.6 * 16 / 30)
    assert cell(two, "allreduce", "nccl_tree", "LL")[0] == pytest.approx(39.0 * 0.85 * 0.5)
    # 4 nodes: NVLSTree cap N4+ 45.5 -> 364 bus; ring 8 x 48 (bwInter) = 384.
    four = h100_cluster(4)
    assert cell(four, "allreduce", "nvls_tree", "Simple")[0] == pytest.approx(364 * 32 / 62)
    assert cell(four, "allreduce", "ring", "Simple")[0] == pytest.approx(384 * 32 / 62)


def test_amd_cpu_changes_net_overhead_and_ll_cap():
    amd = NcclSystem(arch=90, nodes=2, gpus_per_node=8, nvlink_links=18, pcie_bandwidth=48,
                     nics_per_node=8, nic_bandwidth=50, cpu="amd")
    # Ring Simple: per intra step max(3.4, 3 x 2) = 6.
    assert cell(amd, "allreduce", "ring", "Simple")[1] == pytest.approx(8.4 + 28 * 6 + 2 * 14)
    # Tree LL: AMD llMaxBw row, N2 = 22.5 (< 331.2/3.8); x .85 x .5.
    assert cell(amd, "allreduce", "nccl_tree", "LL")[0] == pytest.approx(22.5 * 0.85 * 0.5)


def test_nic_latency_is_charged_per_inter_step_and_twice_for_simple():
    slow = NcclSystem(arch=90, nodes=2, gpus_per_node=8, nvlink_links=18, pcie_bandwidth=48,
                      nics_per_node=8, nic_bandwidth=50, nic_latency_us=2.0)
    assert cell(slow, "allreduce", "ring", "Simple")[1] == pytest.approx(
        8.4 + 28 * 3.4 + 2 * (14 + 2 * 2))
    assert cell(slow, "allreduce", "ring", "LL")[1] == pytest.approx(6.6 + 28 * 1.0 + 2 * (2.7 + 2))


def test_tree_correction_by_size():
    bw, lat = 220.8 * 0.5, 8.4 + 2 * 7 * 4.0  # DGX A100 Tree Simple
    m = model(DGX_A100)
    # 8 B: 8 >> 6 = 0, log2i(0) = -1: no correction.
    assert call_time_us(m, "allreduce", "nccl_tree", "Simple", 8) == pytest.approx(
        lat + 8 / (1000 * bw))
    # 64 B: k = 0 -> 0.9; 1 MiB: k = 14 -> 0.5; 512 MiB: k = 23, beyond the table: none.
    assert call_time_us(m, "allreduce", "nccl_tree", "Simple", 64) == pytest.approx(
        lat + 64 / (1000 * bw * 0.9))
    assert call_time_us(m, "allreduce", "nccl_tree", "Simple", MiB) == pytest.approx(
        lat + MiB / (1000 * bw * 0.5))
    assert call_time_us(m, "allreduce", "nccl_tree", "Simple", 512 * MiB) == pytest.approx(
        lat + 512 * MiB / (1000 * bw))


def test_tree_time_is_not_monotone_in_size():
    # NCCL's correction rises from 0.4 (k = 13) to 0.5 (k = 14) at 1 MiB, so on 2 H100 nodes
    # Tree LL (bw 39 x .85 x .5 = 16.575) is faster for 1 MiB than for 1 MiB - 1 byte.
    m = model(h100_cluster(2))
    below = call_time_us(m, "allreduce", "nccl_tree", "LL", MiB - 1)
    at = call_time_us(m, "allreduce", "nccl_tree", "LL", MiB)
    assert below == pytest.approx(25.2 + (MiB - 1) / (1000 * 16.575 * 0.4))
    assert at == pytest.approx(25.2 + MiB / (1000 * 16.575 * 0.5))
    assert at < below


def test_ring_plateau_on_several_nodes():
    # 2 H100 nodes: 16 channels x 16 ranks; latency x 1.4 once size // 256 >= 64.
    m = model(h100_cluster(2))
    lat = 8.4 + 28 * 3.4 + 2 * 14
    assert call_terms(m, "allreduce", "ring", "Simple", 16383)[0] == pytest.approx(lat)
    assert call_terms(m, "allreduce", "ring", "Simple", 16384)[0] == pytest.approx(1.4 * lat)
    # Not on one node, not for LL.
    assert call_terms(model(DGX_H100), "allreduce", "ring", "Simple", MiB)[0] == pytest.approx(56)
    assert call_terms(m, "allreduce", "ring", "LL", MiB)[0] == pytest.approx(6.6 + 28 + 5.4)


def test_nvls_tree_correction_only_on_blackwell_x86():
    # B200 nodes, 8 x 400G: NVLS graph 8 x 48/48; per channel min(48 x .74 x 7/8 x 2 = 62.16,
    # 48 x 2, cap 96) -> bus 497.28 -> x 16/30. 1 MiB: k = 14, Simple factor 0.5 on x86 only.
    def b200(cpu):
        return NcclSystem(arch=100, nodes=2, gpus_per_node=8, nvlink_links=18, nvls=True,
                          pcie_bandwidth=48, nics_per_node=8, nic_bandwidth=50, cpu=cpu)
    bw = 8 * 48 * 0.74 * 7 / 8 * 2 * 16 / 30
    lat = 25 + 2 * 20.9
    assert call_time_us(model(b200("intel")), "allreduce", "nvls_tree", "Simple", MiB) == \
        pytest.approx(lat + MiB / (1000 * bw * 0.5))
    assert call_time_us(model(b200("arm")), "allreduce", "nvls_tree", "Simple", MiB) == \
        pytest.approx(lat + MiB / (1000 * bw))


def test_unmodelled_calls_have_no_time():
    m = model(DGX_H100)
    assert call_time(m, "alltoall", "ring", "Simple", MiB) is None
    assert call_time(m, "broadcast", "nccl_tree", "LL", MiB) is None   # Ring only
    assert call_time(m, "allreduce", "pat", "Simple", MiB) is None     # PAT: AG/RS only
    assert call_time(m, "allreduce", "nvls", "LL", MiB) is None        # NVLS: Simple only
    assert call_time(model(DGX_A100), "allreduce", "nvls", "Simple", MiB) is None  # no graph
    assert not model(NcclSystem(arch=90, gpus_per_node=1, nvlink_links=18)).entries


def test_seconds_are_microseconds_over_a_million():
    m = model(DGX_H100)
    assert call_time(m, "allreduce", "nvls", "Simple", 256 * MiB) == pytest.approx(
        (25 + 256 * MiB / (1000 * 272.0)) * 1e-6)


def test_log2i_and_steps():
    assert [log2i(v) for v in (0, 1, 2, 3, 1023, 1024)] == [-1, 0, 1, 1, 9, 10]
    assert [steps(c, 8) for c in ("allreduce", "allgather", "reducescatter", "broadcast",
                                  "reduce")] == [14, 7, 7, 8, 8]


sizes = st.integers(0, 1 << 34)


@settings(max_examples=60, deadline=None)
@given(system_strategy(), sizes, sizes)
def test_time_grows_with_size(system, a, b):
    """For a fixed (collective, algorithm, protocol) a bigger call never takes less time,
    except across the tree corrections' power-of-two bands (Tree, and NVLSTree on SM100)."""
    small, large = sorted((a, b))
    m = model(system)
    same_band = (small >> 6).bit_length() == (large >> 6).bit_length()
    for collective in MODELLED_COLLECTIVES:
        for algorithm in ALGORITHMS:
            for protocol in PROTOCOLS:
                t_small = call_time_us(m, collective, algorithm, protocol, small)
                if t_small is None:
                    continue
                t_large = call_time_us(m, collective, algorithm, protocol, large)
                if algorithm in ("nccl_tree", "nvls_tree") and not same_band:
                    continue
                assert t_small <= t_large * (1 + 1e-12)
                assert t_small > 0
