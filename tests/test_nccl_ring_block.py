"""The cap of one thread block of NCCL's Simple ring on one node: the primitives of a loop
(hand-counted from NCCL's runRing), the block's rate (NCCL's per-channel Simple figure halved
for the two blocks of a graph channel), and where it binds (a ring of two GPUs) and where not
(eight GPUs, several nodes, other protocols)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from collsim.hardware.loader import load_topology
from collsim.hardware.shipped import find_topology
from collsim.nccl.protocols import cost_model
from collsim.nccl.ring_block import (
    block_rate,
    primitives_and_sends,
    ring_block_cap,
    with_ring_block_cap,
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


def test_block_rate_is_half_nccls_per_channel_simple_figure():
    assert block_rate(100) == pytest.approx(35.0 * GB)     # Blackwell: 70 / 2
    assert block_rate(90) == pytest.approx(19.35 * GB)     # Hopper: 38.7 / 2
    assert block_rate(80) == pytest.approx(12.0 * GB)      # Ampere: 24 / 2


def test_two_gpus_send_half_the_time_and_more_gpus_approach_the_block_rate():
    assert ring_block_cap("allgather", 2, 100) == pytest.approx(17.5 * GB)
    caps = [ring_block_cap("allgather", p, 100) for p in range(2, 10)]
    assert caps == sorted(caps)
    assert caps[-1] < block_rate(100)


def test_cap_applies_to_simple_rings_on_one_node_only():
    gpus = range(2)
    simple = cost_model(B200, "ring", "Simple", gpus)
    assert simple.channel_cap is None
    capped = with_ring_block_cap(simple, "allgather", 2, 100)
    assert capped.channel_cap == pytest.approx(17.5 * GB)
    across = replace(simple, nodes=2)
    assert with_ring_block_cap(across, "allgather", 2, 100) is across
    ll128 = cost_model(B200, "ring", "LL128", gpus)
    assert with_ring_block_cap(ll128, "allgather", 2, 100) is ll128
    tree = cost_model(B200, "nccl_tree", "Simple", gpus)
    assert with_ring_block_cap(tree, "allreduce", 2, 100) is tree
    assert with_ring_block_cap(simple, "broadcast", 2, 100) is simple


def test_two_b200_allgather_is_held_by_its_blocks_and_eight_by_nvlink():
    params = {"protocol": "Simple"}
    two = simulate(B200, "allgather", "ring", 2, 8 * 2**30, params)
    assert two.channels == 32
    bound = 32 * 17.5                      # GB/s: 32 blocks sending half the time
    assert 0.9 * bound < two.busbw_GBps <= bound
    eight = simulate(B200, "allgather", "ring", 8, 8 * 2**30, params).busbw_GBps
    assert eight > 680                     # NVLink's 721.8 binds, not 32 x 35 x 7/8
