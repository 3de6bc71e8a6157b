"""What a GPU of NCCL's Simple ring sends at most on one node: the primitives of a loop
(hand-counted from NCCL's runRing), the blocks' rate (the graph's channels x NCCL's
per-channel Simple figure), and where it binds (a ring of two GPUs) and where not (eight GPUs,
several nodes, other protocols)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from collsim.hardware.loader import load_topology
from collsim.hardware.shipped import find_topology
from collsim.nccl.protocols import cost_model
from collsim.nccl.ring_block import (
    blocks_rate,
    primitives_and_sends,
    ring_send_cap,
    with_ring_send_cap,
)
from collsim.simulate import simulate

B200 = load_topology(find_topology("dgx-b200"))
GB = 1e9


@pytest.mark.parametrize(("collective", "ranks", "expected"), [
    ("allgather", 2, (2, 1)),        # directCopySend, directRecv
    ("allgather", 8, (8, 7)),        # + 6 directRecvCopyDirectSend
    ("reducescatter", 4, (4, 3)),    # send, 2 recvReduceSend, recvReduceCopy
    ("allreduce", 2, (3, 2)),        # send, recvReduceCopySend, recv
    ("allreduce", 8, (15, 14)),
])
def test_primitives_of_a_loop_are_counted_by_hand(collective, ranks, expected):
    assert primitives_and_sends(collective, ranks) == expected


def test_collectives_without_a_fixed_loop_are_refused():
    with pytest.raises(ValueError, match="broadcast"):
        primitives_and_sends("broadcast", 4)
    with pytest.raises(ValueError, match="at least 2"):
        primitives_and_sends("allgather", 1)


def test_blocks_rate_is_nccls_cap_form_for_simple():
    assert blocks_rate(100, 16) == pytest.approx(1120 * GB)   # B200 node: 16 x 70
    assert blocks_rate(90, 12) == pytest.approx(464.4 * GB)   # H100 node: 12 x 38.7
    assert blocks_rate(80, 12) == pytest.approx(288 * GB)     # A100 node: 12 x 24
    with pytest.raises(ValueError, match="at least 1 channel"):
        blocks_rate(100, 0)


def test_two_gpus_send_half_the_time_and_more_gpus_approach_the_blocks_rate():
    assert ring_send_cap("allgather", 2, 100, 16) == pytest.approx(560 * GB)
    assert ring_send_cap("allreduce", 2, 100, 16) == pytest.approx(1120 * GB * 2 / 3)
    caps = [ring_send_cap("allgather", p, 100, 16) for p in range(2, 10)]
    assert caps == sorted(caps)
    assert caps[-1] < blocks_rate(100, 16)


def test_cap_applies_to_simple_rings_on_one_node_only():
    gpus = range(2)
    simple = cost_model(B200, "ring", "Simple", gpus)
    assert simple.gpu_cap is None
    capped = with_ring_send_cap(simple, "allgather", 2, 100, 16, 45.0)
    assert capped.gpu_cap == pytest.approx(560 * GB)
    assert capped.channel_cap == simple.channel_cap
    across = replace(simple, nodes=2)
    assert with_ring_send_cap(across, "allgather", 2, 100, 16, 45.0) is across
    ll128 = cost_model(B200, "ring", "LL128", gpus)
    assert with_ring_send_cap(ll128, "allgather", 2, 100, 16, 45.0) is ll128
    # NVLink's total in NCCL's graph (16 x 45 = 720) is below 1120 x 2/3: no cap, no cost
    assert with_ring_send_cap(simple, "allreduce", 2, 100, 16, 45.0) is simple
    tree = cost_model(B200, "nccl_tree", "Simple", gpus)
    assert with_ring_send_cap(tree, "allreduce", 2, 100, 16, 45.0) is tree
    assert with_ring_send_cap(simple, "broadcast", 2, 100, 16, 45.0) is simple


def test_two_b200_allgather_is_held_by_its_blocks_and_eight_by_nvlink():
    params = {"protocol": "Simple"}
    two = simulate(B200, "allgather", "ring", 2, 8 * 2**30, params)
    assert two.channels == 32              # 16 graph channels, doubled at run time
    bound = 16 * 70 / 2                    # GB/s: the blocks send half the time
    assert 0.9 * bound < two.busbw_GBps <= bound
    eight = simulate(B200, "allgather", "ring", 8, 8 * 2**30, params).busbw_GBps
    assert eight > 680                     # NVLink's 721.8 binds, not 1120 x 7/8
