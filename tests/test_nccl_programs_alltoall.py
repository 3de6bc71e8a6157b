"""NCCL's alltoall (grouped send/recv over channels): data against numpy for p = 1..40 and
channel counts, the closed form on the ideal switch for channel counts that divide p-1 and
that do not, and its two ends: one channel is the pairwise exchange, p-1 channels direct."""

from __future__ import annotations

import numpy as np
import pytest

from collsim.algorithms import REGISTRY
from collsim.engine.data import check_algorithm
from collsim.hardware.topology import switch
from collsim.program import Job
from collsim.simulate import make_job, simulate
from tests.test_nccl_algorithms import DTYPES


def test_data_for_1_to_40_ranks_and_channel_counts():
    program = REGISTRY["alltoall", "nccl_p2p"].program
    for p in range(1, 41):
        for channels in (1, 2, 3, 7, 64):
            dtype = DTYPES[(p + channels) % len(DTYPES)]
            count = (0, 1, p, 3 * p + 2, 5 * p)[(p + channels) % 5]
            job = Job("alltoall", p, count, np.dtype(dtype).itemsize,
                      params={"channels": channels})
            check_algorithm(program, job, "sum", dtype, seed=p + channels)


def test_closed_form_on_the_switch_and_the_two_ends():
    machine = switch("ideal", 16, 0.7e-6, 50e9)
    for p in (2, 5, 9, 16):
        size = 4 * p * 64 * 5
        for channels in (1, 2, 3, 4, 15, 64):
            result = simulate(machine, "alltoall", "nccl_p2p", p, size, {"channels": channels})
            assert result.time_s == pytest.approx(result.analytic_time_s, rel=1e-9)
            rounds = -(-(p - 1) // min(channels, p - 1))
            assert result.analytic_time_s == pytest.approx(
                rounds * 1.4e-6 + (p - 1) / p * size / 50e9, rel=1e-12)
        one = simulate(machine, "alltoall", "nccl_p2p", p, size, {"channels": 1}).time_s
        assert one == pytest.approx(simulate(machine, "alltoall", "pairwise", p, size).time_s,
                                    rel=1e-12)
        every = simulate(machine, "alltoall", "nccl_p2p", p, size, {"channels": p - 1}).time_s
        assert every == pytest.approx(simulate(machine, "alltoall", "direct", p, size).time_s,
                                      rel=1e-12)


def test_each_channel_is_a_lane_of_its_own():
    machine = switch("ideal", 16, 0.7e-6, 50e9)
    algorithm = REGISTRY["alltoall", "nccl_p2p"]
    assert make_job(machine, algorithm, 16, 4096, {"channels": 4})[0].lanes == (1,) * 4
    assert make_job(machine, algorithm, 3, 4096, {"channels": 8})[0].lanes == (1, 1)


# NCCL's layout (collsim.nccl.p2p_schedule): the schedule, the channels, the batches.

def test_every_pair_meets_in_one_round_on_both_sides():
    from collsim.nccl.p2p_schedule import round_peers

    for nodes in ([0] * 8 + [1] * 8, [r // 8 for r in range(80)], [0] * 5, [0, 0, 1, 1, 1, 1],
                  list(range(10)), [r // 64 for r in range(128)]):
        p = len(nodes)
        peers = [round_peers(nodes, rank) for rank in range(p)]
        for rank in range(p):
            assert sorted(to for to, _ in peers[rank]) == list(range(p))
            assert peers[rank][0] == (rank, rank)
            for round_, (to, _) in enumerate(peers[rank]):
                assert peers[to][round_][1] == rank


def test_group_deltas_follow_ncclp2pschedules_quadratic_order():
    """NCCL's own example for 16 (src/init.cc): 0, 1, 3, 6, 10, 15, 5, 12, 4, 13, 7, 2, 14,
    11, 9, 8; for 10 groups the same order without the deltas of 10 and more."""
    from collsim.nccl.p2p_schedule import _group_deltas

    sixteen = [0, 1, 3, 6, 10, 15, 5, 12, 4, 13, 7, 2, 14, 11, 9, 8]
    assert _group_deltas(16) == sixteen
    assert _group_deltas(10) == [d for d in sixteen if d < 10]


def test_two_nodes_of_eight_run_every_peer_at_once():
    """2 x 8 ranks on 16 p2p channels, 4 parts per operation: the own node's rounds 1-7 on
    channels 0-3 and the other node's 8-15 on channels 8-11 (base 1 reversed over 4 bits),
    each one batch: two lanes of 4 channels, one wave."""
    from collsim.nccl.p2p_schedule import p2p_plan

    nodes = [0] * 8 + [1] * 8
    plan = p2p_plan(nodes, 16, 4, 8)
    assert [(lane.channels, lane.batches) for lane in plan.lanes] == [
        ((0, 1, 2, 3), ((1, 2, 3, 4, 5, 6, 7),)),
        ((8, 9, 10, 11), ((8, 9, 10, 11, 12, 13, 14, 15),))]
    assert plan.weights == (4, 4) and plan.waves == 1
    assert plan.runs[9] == ((1, 0, 4),)
    # One operation per batch (batch=1): the 15 rounds queue on their channels.
    assert p2p_plan(nodes, 16, 4, 1).waves == 8


def test_a_channel_runs_rounds_of_one_group_of_eight_together():
    """On one node of 64 ranks and 32 channels, rounds r and r + 32 share a channel but not a
    group of 8: two batches one after another."""
    from collsim.nccl.p2p_schedule import p2p_plan

    plan = p2p_plan([0] * 64, 32, 1, 8)
    assert plan.waves == 2
    assert all(len(batch) == 1 for lane in plan.lanes for batch in lane.batches)


def test_data_with_nccls_layout_across_nodes():
    program = REGISTRY["alltoall", "nccl_p2p"].program
    for nodes, params in (([0] * 8 + [1] * 8, {"channels": 16, "peer_channels": 4, "batch": 8}),
                          ([0] * 3 + [1] * 3 + [2] * 3, {"channels": 4, "peer_channels": 2,
                                                          "batch": 8}),
                          ([0] * 6, {"channels": 32, "peer_channels": 8, "batch": 8})):
        p = len(nodes)
        for count in (0, 5, 3 * 1024 * p + 7):
            job = Job("alltoall", p, count, 4, params=params, nodes=tuple(nodes))
            check_algorithm(program, job, "sum", "float32", seed=count)


def test_two_h100_nodes_keep_every_nic_busy_the_whole_call():
    """2 x 8 H100, 1 GiB: each GPU's 8 remote blocks (S/16 each) leave through its own NIC
    and 8 arrive there, S/2 each way on every NIC, all peers at once, so the call takes
    S/2 over one NIC's reach plus the launch and one network latency (µs): the node's own
    rounds run beside the network's, not before them."""
    from collsim.api import load_topology
    from collsim.calls.plan import plan
    from collsim.output.linkload import link_loads
    from collsim.recorded import record_call

    size = 1 << 30
    topology = load_topology("h100-cluster", set={"nodes": 2})
    recorded = record_call(topology, "alltoall", "nccl_p2p", 16, size, {})   # NCCL's layout
    nics = [load for load in link_loads(recorded.fabric) if load.link.kind == "nic"]
    assert len(nics) == 32     # 16 NICs, both directions
    for load in nics:
        assert load.bytes == pytest.approx(size / 2, rel=1e-9)
    costs = plan(topology, "alltoall", "nccl_p2p", list(range(16)), size, {}).costs
    reach = costs.bandwidth(nics[0].link)
    overhead = recorded.time_s - size / 2 / reach
    assert 0 < overhead < 100e-6
    # One round at a time in NCCL's order: the 7 rounds inside the node over NVLink, then the
    # 8 across over the NIC (the order alone keeps the NIC out of the node's rounds).
    nvlink = next(load.link for load in link_loads(recorded.fabric) if load.link.kind == "nvlink")
    one_at_a_time = simulate(topology, "alltoall", "nccl_p2p", 16, size,
                             {"channels": 1, "batch": 1}).time_s
    by_hand = 8 * size / 16 / reach + 7 * size / 16 / costs.bandwidth(nvlink)
    assert 0 < one_at_a_time - by_hand < 15 * 20e-6    # and 15 rounds' latencies
    assert one_at_a_time - recorded.time_s > 7 * size / 16 / costs.bandwidth(nvlink) * 0.9


def test_closed_form_with_nccls_batches_on_the_switch():
    """Batches of 8 rounds, operations cut into parts (whole 4 KiB parts): one α per batch
    on the busiest channel, every byte through the port. 16 ranks have rounds in 2 groups of
    8, 33 ranks in 5 (round 32 alone), and on 4 channels each channel holds a round of each
    group; 8 ranks are one group, one batch on every channel."""
    machine = switch("ideal", 64, 0.7e-6, 50e9)
    for p, params, waves in ((16, {"channels": 1, "batch": 8}, 2),
                             (33, {"channels": 4, "peer_channels": 2, "batch": 8}, 5),
                             (8, {"channels": 32, "peer_channels": 4, "batch": 8}, 1),
                             (16, {"channels": 32, "peer_channels": 4, "batch": 8}, 2)):
        size = 4096 * 4 * p * 64
        result = simulate(machine, "alltoall", "nccl_p2p", p, size, params)
        assert result.time_s == pytest.approx(result.analytic_time_s, rel=1e-9)
        assert result.analytic_time_s == pytest.approx(
            waves * 1.4e-6 + (p - 1) / p * size / 50e9, rel=1e-12), (p, params)


def test_one_h100_node_moves_at_nccls_per_channel_figure():
    """One DGX H100, 256 MiB: NCCL's layout gives each of the 7 peers 4 of the 32 p2p
    channels, 28 channels holding one operation each (bit-reversed bases 16, 8, 24, 4, 20, 12,
    28), and each channel moves half of NCCL's NVLink figure (20.6 / 2 = 10.3 GB/s), so a GPU
    sends 7/8 of its buffer at 28 x 10.3 = 288.4 GB/s, below its NVLink reach: the call takes
    that plus the launch and a step's latency."""
    from collsim.api import load_topology
    from collsim.calls.plan import plan

    size, p = 256 << 20, 8
    topology = load_topology("dgx-h100")
    result = simulate(topology, "alltoall", "auto", p, size)
    assert result.channels == 32
    costs = plan(topology, "alltoall", "nccl_p2p", list(range(p)), size, {}).costs
    assert costs.channel_cap == pytest.approx(10.3e9)
    overhead = result.time_s - (p - 1) / p * size / (28 * 10.3e9)
    assert 0 < overhead < 40e-6


def test_a_channels_figure_is_shared_by_the_operations_it_runs_at_once():
    """One channel running all 7 peers of a DGX H100 in one batch moves 10.3 GB/s in all
    (each operation a seventh), not 10.3 each: 1 GiB takes 7/8 GiB at 10.3 GB/s."""
    from collsim.api import load_topology

    size, p = 1 << 30, 8
    topology = load_topology("dgx-h100")
    one = simulate(topology, "alltoall", "nccl_p2p", p, size,
                   {"channels": 1, "peer_channels": 1, "batch": 8})
    assert one.time_s == pytest.approx((p - 1) / p * size / 10.3e9, rel=0.01)
    four = simulate(topology, "alltoall", "nccl_p2p", p, size,
                    {"channels": 4, "peer_channels": 4, "batch": 8})
    assert four.time_s == pytest.approx(one.time_s / 4, rel=0.01)


def test_across_nodes_no_channel_is_held_to_the_nvlink_figure():
    """The per-channel NVLink figure is a one-node rule: across nodes the network's p2p
    figure and the links bound the call, as before."""
    from collsim.api import load_topology
    from collsim.calls.plan import plan

    topology = load_topology("h100-cluster", set={"nodes": 2})
    costs = plan(topology, "alltoall", "nccl_p2p", list(range(16)), 1 << 30, {}).costs
    assert costs.channel_cap is None
