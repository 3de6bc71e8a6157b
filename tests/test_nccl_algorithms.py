"""NCCL's ring (with channels) and nccl_tree: data against numpy on many rank counts, channel
counts and uneven nodes; the textbook ring on one channel; closed forms on the switch for
any channel count; a cluster's channels crossing on their own NICs; the tree's chunk cap."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from collsim.algorithms import REGISTRY, get_algorithm
from collsim.algorithms.nccl import tree as nccl_tree
from collsim.algorithms.ring import ring_allgather_steps, ring_allreduce, ring_reducescatter_steps
from collsim.collectives import COLLECTIVES
from collsim.engine.costs import IDEAL
from collsim.engine.data import check_algorithm
from collsim.engine.timing import TimingEngine
from collsim.errors import InputError
from collsim.hardware.loader import load_topology, topology_from_text
from collsim.hardware.topology import switch
from collsim.nccl.layout import machine_layout
from collsim.program import Job
from collsim.simulate import make_job, simulate
from tests.helpers import uneven_nodes

NCCL = sorted(key for key, algorithm in REGISTRY.items()
              if key[1] in ("ring", "nccl_tree"))
DTYPES = ["int32", "int64", "float32", "float64", "uint8"]
OPS = ["sum", "prod", "max", "min"]


def test_the_registry_iteration_covers_ncclss_algorithms():
    assert NCCL == [("allgather", "ring"), ("allreduce", "nccl_tree"), ("allreduce", "ring"),
                    ("broadcast", "ring"), ("reduce", "ring"), ("reducescatter", "ring")]
    assert all("channels" in REGISTRY[key].params for key in NCCL)


@pytest.mark.parametrize("key", NCCL, ids="/".join)
def test_data_for_1_to_40_ranks_with_channels_and_uneven_nodes(key):
    algorithm = REGISTRY[key]
    for p in range(1, 41):
        channels = (1, 2, 3, 5, 8, 13)[p % 6]
        dtype, op = DTYPES[p % len(DTYPES)], OPS[p % len(OPS)]
        itemsize = np.dtype(dtype).itemsize
        count = (0, 1, p // 2 + 1, p * channels + 5, 37)[p % 5]
        job = Job(key[0], p, count, itemsize, root=(3 * p) // 4 if COLLECTIVES[key[0]].rooted
                  else 0, params={"channels": channels, "chunk_size": itemsize * (1 + p % 4)},
                  nodes=uneven_nodes(p, p))
        check_algorithm(algorithm.program, job, op, dtype, seed=p)


CLUSTER = """
kind: cluster
nodes: 4
node:
  kind: nvswitch
  gpus: 8
  nvlink: {latency: 1us, bandwidth: 100GB/s}
  pcie: {switches: 4, link: {latency: 0.5us, bandwidth: 32GB/s},
         uplink: {latency: 0.5us, bandwidth: 32GB/s}}
  nics: {count: 4, link: {latency: 2us, bandwidth: 25GB/s}}
fabric: {kind: fat_tree, leaf_ports: 8, oversubscription: 2, latency: 1us}
"""


@pytest.mark.parametrize("key", NCCL, ids="/".join)
def test_data_with_machine_layouts_placement_lists_and_set_overrides(key):
    algorithm = REGISTRY[key]
    rng = np.random.default_rng(len(key[0]))
    for nodes, nics in ((2, 1), (3, 2), (4, 4)):
        topology = topology_from_text(CLUSTER, {"nodes": nodes, "node.nics.count": nics})
        for p in sorted({1, 2, 5, 9, 15, nodes * 8}):
            gpus = sorted(int(g) for g in rng.choice(topology.gpus, p, replace=False))
            channels = int(rng.integers(1, 13))
            params = {"placement": gpus, "channels": channels}
            if "chunk_size" in algorithm.params:
                params["chunk_size"] = 8
            if COLLECTIVES[key[0]].rooted:
                params["root"] = p - 1
            job, _ = make_job(topology, algorithm, p, 4 * (7 * p + 3), params)
            assert job.layout is not None and sum(job.lanes) == channels
            check_algorithm(algorithm.program, job, "sum", "int32", seed=p)


def ops_of(program) -> list:
    return [step if isinstance(step, tuple) else (step,) for step in program]


def test_one_channel_is_exactly_the_textbook_ring():
    topology = load_topology("topologies/h100-cluster.yaml", {"nodes": 3})
    for collective, textbook in (
            ("allreduce", ring_allreduce),
            ("allgather", ring_allgather_steps),
            ("reducescatter", ring_reducescatter_steps)):
        job, _ = make_job(topology, get_algorithm(collective, "ring"), 24, 4 * 1000,
                          {"channels": 1})
        for rank in (0, 7, 13, 23):
            assert ops_of(get_algorithm(collective, "ring").program(rank, job)) == \
                ops_of(textbook(rank, job))
    broadcast = get_algorithm("broadcast", "ring")
    chain = get_algorithm("broadcast", "chain")
    # One chunk in flight per hop (window 1): exactly the textbook chain.
    job, _ = make_job(topology, broadcast, 24, 4 * 10**6,
                      {"root": 5, "channels": 1, "window": 1})
    for rank in (0, 5, 6, 23):
        assert ops_of(broadcast.program(rank, job)) == ops_of(chain.program(rank, job))


def test_on_one_node_every_channel_count_is_the_textbook_ring():
    machine = switch("s", 16, 1e-6, 10e9)
    job, _ = make_job(machine, get_algorithm("allreduce", "ring"), 16, 4 * 1600,
                      {"channels": 7})
    assert job.lanes == (7,)
    assert ops_of(get_algorithm("allreduce", "ring").program(3, job)) == \
        ops_of(ring_allreduce(3, job))


LATENCY, BANDWIDTH, REDUCE = 0.7e-6, 50e9, 400e9


@pytest.mark.parametrize("key", [k for k in NCCL if k[1] == "ring"], ids="/".join)
@pytest.mark.parametrize("channels", [1, 2, 3, 4, 8])
def test_closed_forms_hold_on_the_switch_for_any_channel_count(key, channels):
    """Merged into one lane (one node) and as separate channels sharing every port."""
    machine = switch("ideal", 16, LATENCY, BANDWIDTH, REDUCE)
    algorithm = REGISTRY[key]
    for p in (2, 3, 8, 16):
        chunk = 4 * 64 * p  # 24 chunks: whole chunks and blocks for every channel count
        size = 24 * chunk
        params = {"channels": channels}
        if COLLECTIVES[key[0]].rooted:
            params.update(root=p // 2, chunk_size=chunk)
        result = simulate(machine, key[0], "ring", p, size, params)
        assert result.time_s == pytest.approx(result.analytic_time_s, rel=1e-9)
        job, gpus = make_job(machine, algorithm, p, size, params)
        layout = machine_layout(machine, gpus, channels, merge=False)
        separate = replace(job, layout=layout, lanes=layout.ring_lanes.weights)
        time = TimingEngine(machine, gpus, separate, algorithm.program).run().time
        assert time == pytest.approx(result.analytic_time_s, rel=1e-9)


def test_channels_on_a_cluster_cross_nodes_on_their_own_nics():
    # 2 nodes of 8 GPUs, one 50 GB/s NIC per GPU: with C channels each ring step moves
    # n/(C·p) through every crossing, one channel per NIC, so 2(p-1) steps of the network
    # hop (4 us) at 50 GB/s, C times the bandwidth of one channel up to C = 8 NICs (the
    # links' own figures: the ideal model).
    topology = load_topology("topologies/h100-cluster.yaml", {"nodes": 2})
    n, p = 2**30, 16
    for channels in (1, 2, 8, 16):
        result = simulate(topology, "allreduce", "ring", p, n, {"channels": channels}, IDEAL)
        per_step = 4e-6 + n / (min(channels, 8) * p) / 50e9
        assert result.time_s == pytest.approx(2 * (p - 1) * per_step, rel=1e-9)


def test_the_tree_model_bounds_the_simulation_on_the_switch_within_a_fifth():
    machine = switch("ideal", 64, LATENCY, BANDWIDTH, REDUCE)
    for p in (2, 3, 8, 33):
        for size in (4096, 2**21, 2**25):
            for channels in (1, 4):
                result = simulate(machine, "allreduce", "nccl_tree", p, size,
                                  {"channels": channels})
                ratio = result.analytic_time_s / result.time_s
                assert 1 - 1e-9 <= ratio <= 1.2, (p, size, channels, ratio)


def test_the_tree_chunk_cap_and_its_fill_error_bound(monkeypatch):
    """A 2-rank chain is 1 hop deep: at most 16 chunks per lane. Against the uncapped
    pipeline, the capped one is at most 1/16 of the streaming time slower and at most the
    latencies of the merged chunks faster."""
    assert nccl_tree.chunk_cap(1) == 16 and nccl_tree.chunk_cap(4) == 112
    assert nccl_tree.lane_chunks(10**6, 2, 1000, 1) == 16
    assert nccl_tree.lane_chunks(10_000, 2, 1000, 1) == 5
    machine = switch("s", 8, LATENCY, BANDWIDTH)
    for p in (2, 5, 8):
        chunk, size = 4 * 1024, 4 * 1024 * 50 * p
        params = {"chunk_size": chunk}
        capped = simulate(machine, "allreduce", "nccl_tree", p, size, params).time_s
        k = math.ceil(size / chunk)
        with monkeypatch.context() as patch:
            patch.setattr(nccl_tree, "MAX_FILL_ERROR", 1e-9)
            free = simulate(machine, "allreduce", "nccl_tree", p, size, params).time_s
        cap = nccl_tree.chunk_cap(p - 1)
        assert cap < k
        streaming = size / BANDWIDTH
        assert capped - free <= streaming / 16
        assert free - capped <= (k - cap) * 2 * LATENCY
        assert capped != free


def test_the_tree_on_two_nodes_sends_each_byte_over_the_network_once_each_way():
    # Per channel the two nodes' heads exchange the lane's bytes once up and once down; with
    # 8 channels on 8 NICs the tree beats the ring, which sends 2(p-1)/p of them each way
    # (the links' own figures: NCCL's per-step latencies would favour the ring here).
    topology = load_topology("topologies/h100-cluster.yaml", {"nodes": 2})
    size = 2**27
    ring = simulate(topology, "allreduce", "ring", 16, size, {"channels": 8}, IDEAL).time_s
    tree = simulate(topology, "allreduce", "nccl_tree", 16, size, {"channels": 8},
                    IDEAL).time_s
    assert tree < ring
    assert tree > size / 8 / 50e9   # at least each NIC's share at line rate


@pytest.mark.parametrize("value", [0, 65, True, "8", 2.5])
def test_channels_must_be_a_whole_number_from_1_to_64(value):
    machine = switch("s", 4, LATENCY, BANDWIDTH)
    with pytest.raises(InputError, match="channels must be a whole number from 1 to 64") \
            as raised:
        simulate(machine, "allreduce", "ring", 4, 4096, {"channels": value})
    assert raised.value.key == "param.channels"
    with pytest.raises(InputError, match="takes no parameter 'channels'"):
        simulate(machine, "allreduce", "binomial", 4, 4096, {"channels": 2})
