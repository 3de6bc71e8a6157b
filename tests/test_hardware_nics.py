"""Two nodes of 8 GPUs, one NIC shared by the 8 GPUs versus one NIC per GPU (rails).

A flat ring in rank order with ranks dealt round-robin over the nodes crosses the network
on every hop: each step, 8 transfers leave each node at once. Behind one shared NIC they
split its 10 GB/s max-min fairly (1.25 GB/s each); with rails each has a NIC to itself. The
topology-aware ring keeps each node's ranks together and crosses the network twice (once
each way), so the shared NIC costs it nothing.
"""

from __future__ import annotations

import pytest

from collsim.algorithms import get_algorithm
from collsim.engine.timing import TimingEngine
from collsim.hardware.loader import topology_from_text
from collsim.hardware.placement import place_ranks, ring_order
from collsim.program import Job
from collsim.simulate import simulate

TWO_NODES = """
kind: cluster
nodes: {nodes}
node:
  kind: nvswitch
  gpus: 8
  nvlink: {{latency: 1us, bandwidth: 100GB/s}}
  pcie: {{switches: 1, link: {{latency: 0.5us, bandwidth: 50GB/s}},
         uplink: {{latency: 0.5us, bandwidth: 50GB/s}}}}
  nics: {{count: {nics}, link: {{latency: 2us, bandwidth: 10GB/s}}}}
fabric: {{kind: switch}}
"""
SIZE = 16 * 2**20                      # bytes per rank; n/p = 1 MiB per ring step
P = 16
NET_LATENCY = 0.5e-6 * 4 + 2e-6 * 2    # GPU-PCIe-NIC, NIC-switch-NIC, NIC-PCIe-GPU
NVLINK_LATENCY = 2e-6


def cluster(nics: int, nodes: int = 2):
    return topology_from_text(TWO_NODES.format(nics=nics, nodes=nodes))


def flat_ring_time(topology) -> float:
    """Ring allreduce with ranks spread over the nodes and the ring in rank order."""
    gpus = place_ranks(topology, P, {"placement": "spread"})
    job = Job("allreduce", P, SIZE // 4, 4, ring=tuple(range(P)),
              nodes=tuple(topology.node_of[g] for g in gpus))
    assert all(job.node_of(r) != job.node_of((r + 1) % P) for r in range(P))
    return TimingEngine(topology, gpus, job, get_algorithm("allreduce", "ring").program) \
        .run().time


def test_flat_ring_is_limited_by_the_shared_nic_as_max_min_predicts():
    step = SIZE / P
    shared, rails = flat_ring_time(cluster(nics=1)), flat_ring_time(cluster(nics=8))
    # 2(p-1) steps; in each, 8 transfers per direction share the one NIC port: 10/8 GB/s.
    assert shared == pytest.approx(2 * (P - 1) * (NET_LATENCY + step / (10e9 / 8)), rel=1e-9)
    assert rails == pytest.approx(2 * (P - 1) * (NET_LATENCY + step / 10e9), rel=1e-9)


def test_topology_aware_ring_crosses_each_node_boundary_once_and_ignores_nic_sharing():
    step = SIZE / P
    expected = 2 * (P - 1) * (NET_LATENCY + step / 10e9)  # the slowest hop sets every step
    for nics in (1, 8):
        result = simulate(cluster(nics), "allreduce", "ring", P, SIZE)
        assert result.time_s == pytest.approx(expected, rel=1e-9)
    assert NVLINK_LATENCY + step / 100e9 < NET_LATENCY + step / 10e9


@pytest.mark.parametrize("nodes", [2, 3, 4])
@pytest.mark.parametrize("placement", ["packed", "spread"])
def test_ring_enters_and_leaves_every_node_once_on_the_same_rail(nodes, placement):
    t = cluster(nics=8, nodes=nodes)
    gpus = place_ranks(t, t.gpus, {"placement": placement})
    ring = ring_order(t, gpus)
    hops = [(gpus[ring[i]], gpus[ring[(i + 1) % len(ring)]]) for i in range(len(ring))]
    crossings = [(a, b) for a, b in hops if t.node_of[a] != t.node_of[b]]
    assert len(crossings) == nodes             # one into and one out of every node
    same_rail = [a % 8 == b % 8 for a, b in crossings]
    assert all(same_rail[:-1]) and (same_rail[-1] or nodes % 2)  # snake: the closing
    #                                          hop of an odd node count changes rail
