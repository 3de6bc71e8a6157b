"""``auto``: NCCL's pick of algorithm, protocol and channels, against cases worked by hand from
the constants (docs/nccl.md#tuning-constants), the graphs (docs/nccl.md#topology-graphs, checked
in test_nccl_search.py) and the formulas (docs/nccl.md#tuning). Times in µs in the comments; the
code returns seconds."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collsim.hardware.nccl_names import ALGORITHMS, MODELLED_COLLECTIVES, PROTOCOLS
from collsim.nccl.choice import Candidate, choose, fastest, refusal
from collsim.nccl.search import search
from collsim.nccl.system import NcclSystem
from collsim.nccl.tuning import model
from tests.nccl_machines import (
    DGX_A100,
    DGX_B200,
    DGX_H100,
    L40S_PAIR,
    h100_cluster,
    h100_one_per_node,
    system_strategy,
)

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


def us(choice):
    return choice.time * 1e6


def time_of(choice, algorithm, protocol):
    return next(c.time for c in choice.candidates
                if (c.algorithm, c.protocol) == (algorithm, protocol)) * 1e6


# --- Hand-worked cases ------------------------------------------------------------------------

def test_nvls_on_an_h100_node_at_large_sizes():
    # NVLS 8 x 40/60: min(40 x .85 x 7/8 x 2 = 59.5, 60) x 8 = 476 bus, x 8/14 = 272 GB/s,
    # latency 25: 25 + 268435456 / 272000 = 1011.9 µs. Ring Simple: 12 x 30 = 360 x 8/14,
    # 56 µs: 56 + 1304.9 = 1360.9. Channels: NVLS channels on SM90 = 16.
    c = choose(DGX_H100, "allreduce", 256 * MiB)
    assert (c.algorithm, c.protocol, c.channels, c.threads) == ("nvls", "Simple", 16, 640)
    assert us(c) == pytest.approx(25 + 256 * MiB / (1000 * 272.0))
    assert time_of(c, "ring", "Simple") == pytest.approx(56 + 256 * MiB / (1000 * 360 * 8 / 14))


def test_ll_at_small_sizes_on_an_h100_node():
    # Ring LL: 6.6 + 14 x .6 = 15.0 µs, bw min(141, 360/2) x 8/14 = 80.57; Tree LL 6.8 +
    # 2 x 7 x .6 = 15.2. Channels: Ring LL threshold 8 x 8 ranks = 64 B/thread: 8 B < nc x
    # 512 x 64 down to 1 channel; threads 512 -> 256 -> 128 -> 64 (not a multiple of 128),
    # raised to 3 warps = 96.
    c = choose(DGX_H100, "allreduce", 8)
    assert (c.algorithm, c.protocol, c.channels, c.threads) == ("ring", "LL", 1, 96)
    assert us(c) == pytest.approx(15.0 + 8 / (1000 * 141 * 8 / 14))
    assert time_of(c, "nccl_tree", "LL") == pytest.approx(15.2 + 8 / (1000 * 331.2 / 3.8 / 2))


def test_h100_node_switches_from_ring_ll_to_nvls_between_1_and_2_mib():
    # 1 MiB: Ring LL 15 + 1048576/80571 = 28.01 < NVLS 25 + 1048576/272000 = 28.86.
    # 2 MiB: NVLS 25 + 7.71 = 32.71 < Ring LL 15 + 26.03 = 41.03 (docs/nccl.md#tuning-worked;
    # nccl-tests #309 reports Ring LL up to 1 MB and NVLS from 2 MB on such a node).
    one = choose(DGX_H100, "allreduce", MiB)
    assert (one.algorithm, one.protocol) == ("ring", "LL")
    assert us(one) == pytest.approx(15.0 + MiB / (1000 * 141 * 8 / 14))
    two = choose(DGX_H100, "allreduce", 2 * MiB)
    assert (two.algorithm, two.protocol) == ("nvls", "Simple")
    assert us(two) == pytest.approx(25 + 2 * MiB / (1000 * 272.0))


def test_ll128_on_an_a100_node_at_mid_sizes():
    # Ring LL128: 14 + 14 x 1.9 = 40.6 µs, bw min(.92 x 240, 12 x 20) x 8/14 = 126.17:
    # 40.6 + 33.24 = 73.84. Ring LL 15 + 4194304/50114 = 98.7; Ring Simple 56 + 30.6 = 86.6.
    # Channels: 24 x 640 x 8 B < 4 MiB: all 24.
    c = choose(DGX_A100, "allreduce", 4 * MiB)
    assert (c.algorithm, c.protocol, c.channels) == ("ring", "LL128", 24)
    assert us(c) == pytest.approx(40.6 + 4 * MiB / (1000 * 220.8 * 8 / 14))


def test_an_a100_node_runs_every_allreduce_from_1_mib_on_all_24_ring_channels():
    # topoGetAlgoInfo sheds channels only while bytes < nc x nt x threshold: Ring LL 512 x 64 B
    # (8 B x 8 ranks), LL128 640 x 8 B, Simple 512 x 64 B; with 24 channels the largest is
    # 786,432 B < 1 MiB. So no channel or thread count changes with the size from 1 MiB on
    # (docs/misses.md#a100-node: the measured mid-size miss is not a channel count).
    for size in (MiB << k for k in range(14)):
        c = choose(DGX_A100, "allreduce", size)
        assert (c.algorithm, c.channels) == ("ring", 24), size
        assert c.threads == {"LL": 512, "LL128": 640, "Simple": 544}[c.protocol]


def test_simple_ring_on_an_a100_node_at_1_gib():
    # 56 + 2^30 / (240 x 8/14 x 1000) = 56 + 7829.4 = 7885.4 µs (docs/nccl.md#tuning-worked).
    # Threads: Ring Simple 512 (ring 12 x 20 = 240 > PCI_BW 12) + a sync warp = 544.
    c = choose(DGX_A100, "allreduce", GiB)
    assert (c.algorithm, c.protocol, c.channels, c.threads) == ("ring", "Simple", 24, 544)
    assert us(c) == pytest.approx(56 + GiB / (1000 * 240 * 8 / 14))


def test_tree_ll_at_8_bytes_on_2_h100_nodes():
    # Tree LL: 6.8 + 2 x (7 x .6 + log2(2) x 5.0) = 25.2 µs; bw: Intel llMaxBw N2 39.0
    # (< 331.2/3.8), plain TREE x .85, x .5 = 16.575; 8 B: no correction.
    # Ring LL: 6.6 + 28 x max(.6, 1 net overhead) + 2 x 2.7 = 40.0; NVLSTree 66.8.
    c = choose(h100_cluster(2), "allreduce", 8)
    assert (c.algorithm, c.protocol, c.channels, c.threads) == ("nccl_tree", "LL", 1, 640)
    assert us(c) == pytest.approx(25.2 + 8 / (1000 * 39.0 * 0.85 * 0.5))
    assert time_of(c, "ring", "LL") == pytest.approx(40.0 + 8 / (1000 * 20.8))


def test_tree_ll128_at_1_mib_on_2_h100_nodes():
    # Tree LL128: 14 + 2 x (7 x 1.25 + 8.5) = 48.5 µs; bw min(331.2 x 120/128, 8 x 36.7) =
    # 293.6, x .85, x .5 = 124.78, k = log2(16384) = 14 -> x .6: 48.5 + 14.0 = 62.5.
    # NVLSTree: 66.8 + 1048576 / (461.6 x 16/30) = 71.06. Ring LL128 75.2 + 6.7 = 81.9.
    c = choose(h100_cluster(2), "allreduce", MiB)
    assert (c.algorithm, c.protocol, c.channels) == ("nccl_tree", "LL128", 16)
    assert us(c) == pytest.approx(48.5 + MiB / (1000 * 293.6 * 0.85 * 0.5 * 0.6))
    assert time_of(c, "nvls_tree", "Simple") == pytest.approx(66.8 + MiB / (1000 * 461.6 * 16 / 30))


def test_nvls_tree_at_64_mib_on_4_h100_nodes():
    # NVLSTree: 25 + 2 x 2 x 20.9 = 108.6 µs; bw min(59.5, 48, 45.5) x 8 = 364 x 32/62:
    # 108.6 + 357.2 = 465.8. Ring Simple: 282.8 x 1.4 + 67108864/(384 x 32/62) = 734.5.
    c = choose(h100_cluster(4), "allreduce", 64 * MiB)
    assert (c.algorithm, c.protocol, c.channels) == ("nvls_tree", "Simple", 16)
    assert us(c) == pytest.approx(108.6 + 64 * MiB / (1000 * 364 * 32 / 62))


def test_ring_simple_at_8_gib_on_16_h100_nodes():
    # Ring Simple: (8.4 + 224 x 3.4 + 30 x 14) x 1.4 = 1666.0 µs, bw 384 x 128/254:
    # 1666 + 44389.6 = 46055.6. NVLSTree: 192.2 + 8 GiB/(364 x 128/254) = 47020.9.
    c = choose(h100_cluster(16), "allreduce", 8 * GiB)
    assert (c.algorithm, c.protocol) == ("ring", "Simple")
    assert us(c) == pytest.approx(1.4 * 1190.0 + 8 * GiB / (1000 * 384 * 128 / 254))
    assert time_of(c, "nvls_tree", "Simple") == pytest.approx(
        192.2 + 8 * GiB / (1000 * 364 * 128 / 254))


def test_l40s_pair_on_pcie_has_no_ll128():
    # PCIe paths: hardware row PCI, LL128 off. 128 MiB: Ring Simple 8.4 + 2 x 5.7 = 19.8 µs,
    # bw 2 x 12 x 2/2 = 24: 19.8 + 5592.4. Tree Simple: .92 x 24 x .5 = 11.04, k = 21 -> .9.
    # 4 channels (2 x 2), 512 threads + 32 (ring 24 > 12 GB/s).
    c = choose(L40S_PAIR, "allreduce", 128 * MiB)
    assert (c.algorithm, c.protocol, c.channels, c.threads) == ("ring", "Simple", 4, 544)
    assert us(c) == pytest.approx(19.8 + 128 * MiB / (1000 * 24.0))
    refused = {(r.algorithm, r.protocol): r.reason for r in c.refused}
    assert "LL128 is off by default" in refused["ring", "LL128"]
    assert "LL128 is off by default" in refused["nccl_tree", "LL128"]
    # 8 B: Ring LL 6.6 + 2 x 1.0 = 8.6, bw min(87.7, 24/2) = 12; Tree LL 6.8 + 2 x 1.0 = 8.8.
    small = choose(L40S_PAIR, "allreduce", 8)
    assert (small.algorithm, small.protocol) == ("ring", "LL")
    assert us(small) == pytest.approx(8.6 + 8 / (1000 * 12.0))


def test_pat_at_one_gpu_per_node():
    # 16 nodes x 1 H100: tree graph 2 x 48/24 -> PAT bus 2 x 24 (bwInter, > 2 nodes) x .75 = 36,
    # no conversion for allgather; latency 8 + log2(16) x 14/3.5 + 2.8 x 16 = 68.8 (one rank
    # per node: NET Tree Simple 14): 68.8 + 1048576/36000 = 97.93 µs.
    # Ring (2 x 24, every step crosses nodes, tree NET latencies): LL 6.6 + 15 x 5.0 = 81.6,
    # bw min(20.4, 24) x 16/15 -> 129.8; LL128 141.5 + 22.3; Simple 218.4 + 20.5.
    # Channels: 4 (2 x 2); 1 MiB >= 4 x 640 x 64; 64 cells of 16 KiB traffic.
    c = choose(h100_one_per_node(16), "allgather", MiB)
    assert (c.algorithm, c.protocol, c.channels, c.threads) == ("pat", "Simple", 4, 640)
    assert us(c) == pytest.approx(68.8 + MiB / (1000 * 36.0))
    assert time_of(c, "ring", "LL") == pytest.approx(81.6 + MiB / (1000 * 20.4 * 16 / 15))
    # 1 GiB: Ring Simple 218.4 + 2^30/(48 x 16/15 x 1000) = 21189.9 < PAT 68.8 + 29826.2.
    big = choose(h100_one_per_node(16), "allgather", GiB)
    assert (big.algorithm, big.protocol) == ("ring", "Simple")
    assert us(big) == pytest.approx(218.4 + GiB / (1000 * 48 * 16 / 15))


def test_ring_beats_nvls_for_allgather_on_an_h100_node():
    # NVLS allgather: 8 x min(40 x .85 x 7/8 x 7/8, 60) = 208.25, latency 25: 5181 µs at 1 GiB.
    # Ring Simple: 360 x 8/7, latency 8.4 + 7 x 3.4 = 32.2: 32.2 + 2609.8 = 2642.0.
    c = choose(DGX_H100, "allgather", GiB)
    assert (c.algorithm, c.protocol) == ("ring", "Simple")
    assert us(c) == pytest.approx(32.2 + GiB / (1000 * 360 * 8 / 7))
    assert time_of(c, "nvls", "Simple") == pytest.approx(25 + GiB / (1000 * 208.25))


def test_broadcast_is_a_ring_with_one_step_of_latency():
    # Same channels on one node: 6.6 + .6 = 7.2 µs; bw min(141, 180) x 8/8.
    c = choose(DGX_H100, "broadcast", 8)
    assert (c.algorithm, c.protocol) == ("ring", "LL")
    assert us(c) == pytest.approx(7.2 + 8 / (1000 * 141.0))
    assert {x.algorithm for x in c.candidates} == {"ring"}


def test_b200_node_uses_nvls_from_4_mib_on_24_channels():
    # NVLS 8 x 80/90: min(80 x .74 x 7/8 x 2 = 103.6, 90) x 8 = 720 x 8/14: 25 + 10.2 = 35.2.
    # Ring LL: min(282, 720/2) x 8/14: 15 + 26.0; Ring LL128 min(662.4, 16 x 40) x 8/14: 52.1.
    c = choose(DGX_B200, "allreduce", 4 * MiB)
    # One NVLink domain on SM100 runs 24 NVLS channels (nvls.cc NVLS_NCHANNELS_SM100_NVL).
    assert (c.algorithm, c.protocol, c.channels) == ("nvls", "Simple", 24)
    assert us(c) == pytest.approx(25 + 4 * MiB / (1000 * 720 * 8 / 14))


# --- docs/nccl.md#tuning-worked ---------------------------------------------------------------

@pytest.mark.parametrize("size, algorithm, protocol, time_us", [
    (8, "ring", "LL", 15.0), (64 * KiB, "ring", "LL", 16.3), (MiB, "ring", "LL", 35.9),
    (4 * MiB, "ring", "LL128", 73.8), (16 * MiB, "ring", "LL128", 173.6),
    (64 * MiB, "ring", "Simple", 545.3), (GiB, "ring", "Simple", 7885),
    (8 * GiB, "ring", "Simple", 62691),
])
def test_worked_dgx_a100_row(size, algorithm, protocol, time_us):
    # The page prints one decimal below 1000 µs, whole µs above.
    c = choose(DGX_A100, "allreduce", size)
    assert (c.algorithm, c.protocol) == (algorithm, protocol)
    assert us(c) == pytest.approx(time_us, abs=0.05 if time_us < 1000 else 0.5)


@pytest.mark.parametrize("nodes, size, algorithm, protocol", [
    (2, 64 * KiB, "nccl_tree", "LL"), (2, 4 * MiB, "nvls_tree", "Simple"),
    (4, 64 * KiB, "nccl_tree", "LL"), (4, 4 * MiB, "nccl_tree", "LL128"),
    (4, 16 * MiB, "nvls_tree", "Simple"), (4, 256 * MiB, "nvls_tree", "Simple"),
    (4, GiB, "ring", "Simple"), (16, 8, "nccl_tree", "LL"), (16, MiB, "nccl_tree", "LL128"),
    (16, 16 * MiB, "nvls_tree", "Simple"), (16, GiB, "nvls_tree", "Simple"),
])
def test_worked_h100_cluster_picks(nodes, size, algorithm, protocol):
    c = choose(h100_cluster(nodes), "allreduce", size)
    assert (c.algorithm, c.protocol) == (algorithm, protocol)


# --- Gating -----------------------------------------------------------------------------------

def reason(system, collective, algorithm, protocol="Simple"):
    return refusal(model(system), collective, algorithm, protocol)


def test_nvls_refused_below_sm90_even_if_declared():
    a100 = NcclSystem(arch=80, gpus_per_node=8, nvlink_links=12, nvls=True)
    assert "SM90" in reason(a100, "allreduce", "nvls")
    assert choose(a100, "allreduce", GiB).algorithm == "ring"


def test_nvls_refused_on_two_gpu_nodes_and_without_nvswitch():
    two = NcclSystem(arch=90, gpus_per_node=2, nvlink_links=18, nvls=True)
    assert "more than 2 GPUs" in reason(two, "allreduce", "nvls")
    assert choose(two, "allreduce", GiB).algorithm == "ring"
    mesh = NcclSystem(arch=90, gpus_per_node=4, gpu_link="nvlink", nvlink_links=6, nvls=True)
    assert "NVSwitch" in reason(mesh, "allreduce", "nvls")


def test_nvls_refused_for_broadcast_and_reduce():
    assert "no NVLS for broadcast" in reason(DGX_H100, "broadcast", "nvls")
    assert "no NVLS for reduce" in reason(DGX_H100, "reduce", "nvls")


def test_nvls_tree_only_across_nodes_and_nvls_across_nodes_only_with_collnet():
    assert "only across nodes" in reason(DGX_H100, "allreduce", "nvls_tree")
    assert "CollNet" in reason(h100_cluster(2), "allreduce", "nvls")
    sharp = NcclSystem(arch=90, nodes=2, gpus_per_node=8, nvlink_links=18, nvls=True,
                       pcie_bandwidth=48, nics_per_node=8, nic_bandwidth=50, sharp=True,
                       collnet_enable=True)
    assert reason(sharp, "allreduce", "nvls") is None
    assert "one node" in reason(sharp, "allgather", "nvls")


def test_nvls_allgather_serves_at_most_32_ranks():
    nvl72 = NcclSystem(arch=100, gpus_per_node=72, nvlink_links=18, nvls=True)
    assert "at most 32" in reason(nvl72, "allgather", "nvls")
    assert reason(nvl72, "allreduce", "nvls") is None


def test_collnet_gating():
    assert "CollNet needs" in reason(h100_cluster(2), "allreduce", "collnet_direct")
    pcie = NcclSystem(arch=90, nodes=2, gpus_per_node=4, gpu_link="pcie", pcie_bandwidth=48,
                      nics_per_node=4, nic_bandwidth=50, sharp=True, collnet_enable=True)
    assert "NVSwitch" in reason(pcie, "allreduce", "collnet_direct")
    assert reason(pcie, "allreduce", "collnet_chain") is None
    assert "only with Simple" in reason(pcie, "allreduce", "collnet_chain", "LL")


def test_pat_only_at_one_gpu_per_node_and_only_for_allgather_reducescatter():
    assert "one GPU per node" in reason(h100_cluster(2), "allgather", "pat")
    assert reason(h100_one_per_node(4), "reducescatter", "pat") is None
    assert "no PAT for allreduce" in reason(h100_one_per_node(4), "allreduce", "pat")


def test_no_pat_before_nccl_2_23_4():
    # 16 nodes x 1 H100 at 1 MiB: PAT on 2.23.4 and later (above), the ring before
    older = replace(h100_one_per_node(16), version=(2, 22, 3))
    assert "has no PAT (it came with 2.23.4)" in reason(older, "allgather", "pat")
    assert choose(older, "allgather", MiB).algorithm == "ring"
    assert choose(replace(older, version=(2, 23, 4)), "allgather", MiB).algorithm == "pat"


def test_naming_ll128_lifts_its_default_rule():
    forced = choose(L40S_PAIR, "allreduce", 4 * MiB, protocols={"LL128"})
    assert (forced.algorithm, forced.protocol) == ("ring", "LL128")
    # Ring LL128 on PCIe: 14 + 2 x 2.5 = 19.0 µs, bw min(.92 x 24, 2 x 20) x 2/2 = 22.08.
    assert us(forced) == pytest.approx(19.0 + 4 * MiB / (1000 * 22.08))


def test_restricting_algorithms_like_nccl_algo():
    c = choose(DGX_H100, "allreduce", 256 * MiB, algorithms={"ring"})
    assert (c.algorithm, c.protocol) == ("ring", "Simple")
    refused = {(r.algorithm, r.protocol): r.reason for r in c.refused}
    assert "NCCL_ALGO" in refused["nvls", "Simple"]


def test_nothing_to_choose():
    assert choose(DGX_H100, "alltoall", MiB) is None
    assert choose(NcclSystem(arch=90, gpus_per_node=1, nvlink_links=18), "allreduce", MiB) is None
    assert choose(DGX_H100, "broadcast", MiB, algorithms={"nvls"}) is None


def test_tie_break_follows_nccl_index_order():
    # Equal times: the lower algorithm index wins (Tree before Ring before ... PAT), then the
    # lower protocol index (LL before LL128 before Simple), as NCCL's strict '<' scan does.
    def cand(algorithm, protocol, time):
        return Candidate(algorithm, protocol, time, 0.0, 1.0)
    assert fastest([cand("ring", "LL", 1.0), cand("nccl_tree", "Simple", 1.0)]).algorithm \
        == "nccl_tree"
    assert fastest([cand("nvls", "Simple", 2.0), cand("ring", "Simple", 2.0)]).algorithm == "ring"
    assert fastest([cand("ring", "Simple", 1.0), cand("ring", "LL128", 1.0)]).protocol == "LL128"
    assert fastest([cand("ring", "Simple", 0.5), cand("nccl_tree", "LL", 1.0)]).algorithm \
        == "ring"
    assert fastest([]) is None


# --- Channels ---------------------------------------------------------------------------------

def test_channels_shrink_with_small_calls():
    # Ring LL, 64 KiB on an H100 node: 65536 < nc x 512 x 64 until nc = 2; 8 cells of 8 KiB.
    c = choose(DGX_H100, "allreduce", 64 * KiB)
    assert (c.algorithm, c.protocol, c.channels, c.threads) == ("ring", "LL", 2, 512)
    # Tree LL on 2 nodes, 64 KiB: 65536 >= 16 x 512 x 8 keeps 16, but 16 KiB of traffic per
    # channel allows 8 (65536 x 2 / 16384).
    t = choose(h100_cluster(2), "allreduce", 64 * KiB)
    assert (t.algorithm, t.protocol, t.channels) == ("nccl_tree", "LL", 8)


def test_ring_simple_uses_256_threads_on_a_slow_ring():
    # Two GPUs on PCIe Gen3 (12): one ring of 12 GB/s (perfect) <= PCI_BW 12 -> 256 + 32.
    slow = NcclSystem(arch=70, gpus_per_node=2, gpu_link="pcie", pcie_bandwidth=12)
    c = choose(slow, "allreduce", GiB)
    assert (c.algorithm, c.protocol, c.threads) == ("ring", "Simple", 288)


# --- Any machine ------------------------------------------------------------------------------

@settings(max_examples=80, deadline=None)
@given(system_strategy(), st.sampled_from(MODELLED_COLLECTIVES), st.integers(0, 1 << 34))
def test_choice_is_the_minimum_of_the_eligible(system, collective, size):
    c = choose(system, collective, size)
    pairs = {(a, p) for a in ALGORITHMS for p in PROTOCOLS}
    if c is None:
        assert system.ranks == 1
        return
    times = [x.time for x in c.candidates]
    assert c.time == min(times)
    assert all(c.time <= t for t in times)
    seen = [(x.algorithm, x.protocol) for x in c.candidates] + \
        [(r.algorithm, r.protocol) for r in c.refused]
    assert sorted(seen) == sorted(pairs)
    if c.algorithm in ("nvls", "nvls_tree"):  # their own count, above the rings' on 2.28.3+
        assert c.channels == search(system).nvls_channels
    else:
        assert 1 <= c.channels <= search(system).channels
    assert c.threads % 32 == 0 and 96 <= c.threads <= 640
