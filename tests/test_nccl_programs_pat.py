"""PAT allgather and reduce-scatter: the schedule's trees (every block reaches every rank
once, ⌈log p⌉ steps, farthest first), data against numpy on p = 1..40 (beyond the registry-
wide data tests), timing by hand at one GPU per node, and refusal with several GPUs a node."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from collsim.algorithms import REGISTRY
from collsim.algorithms.nccl.pat import schedule
from collsim.engine.costs import IDEAL
from collsim.engine.data import check_algorithm
from collsim.errors import InputError
from collsim.hardware.loader import load_topology
from collsim.program import Job
from collsim.simulate import make_job, simulate
from tests.test_nccl_algorithms import DTYPES, OPS


@given(st.integers(1, 300))
def test_every_block_reaches_every_rank_exactly_once_in_log_steps(p):
    steps = schedule(p)
    assert len(steps) == (math.ceil(math.log2(p)) if p > 1 else 0)
    distances = [d for d, _ in steps]
    assert distances == sorted(distances, reverse=True) and len(set(distances)) == len(steps)
    # Rank 0's view (every rank's is the same, shifted): offsets it holds, one arrival each.
    held = {0}
    for distance, sent in steps:
        assert set(sent) <= held
        arriving = {s + distance for s in sent}
        assert not arriving & held and max(arriving) < p
        held |= arriving
    assert held == set(range(p))
    assert sum(len(sent) for _, sent in steps) == p - 1  # (p-1)/p·n per rank, no more


@pytest.mark.parametrize("collective", ["allgather", "reducescatter"])
def test_data_for_1_to_40_ranks_on_every_size_shape(collective):
    algorithm = REGISTRY[collective, "pat"]
    for p in range(1, 41):
        for shape, count in enumerate((0, 1, p - 1, 3 * p + 2, 5 * p)):
            dtype, op = DTYPES[(p + shape) % len(DTYPES)], OPS[(p + shape) % len(OPS)]
            job = Job(collective, p, count, np.dtype(dtype).itemsize, params={"channels": 3})
            check_algorithm(algorithm.program, job, op, dtype, seed=p + shape,
                            scratch=algorithm.scratch(job))


def test_timing_at_one_gpu_per_node_by_hand():
    # 4 nodes under one leaf, rank r on GPU 0 of node r: every step is one message over the
    # same kind of route (PCIe, NIC, leaf, NIC, PCIe); 2 steps carrying 1 and 2 blocks of n/4.
    topology = load_topology("topologies/h100-cluster.yaml", {"nodes": 4})
    n = 8 * 2**20
    params = {"placement": "spread", "channels": 4}
    job, gpus = make_job(topology, REGISTRY["allgather", "pat"], 4, n, params)
    assert len({topology.node_of[g] for g in gpus}) == 4 and job.lanes == (4,)
    route = topology.route(gpus[0], gpus[1])
    latency = sum(topology.links[i].latency for i in route)
    bandwidth = min(topology.links[i].bandwidth for i in route)
    want = 2 * latency + 3 * n / 4 / bandwidth
    for collective in ("allgather", "reducescatter"):
        result = simulate(topology, collective, "pat", 4, n, params, IDEAL)
        assert result.time_s == pytest.approx(want, rel=1e-12)
    ring = simulate(topology, "allgather", "ring", 4, 4096, {"placement": "spread"}, IDEAL)
    pat = simulate(topology, "allgather", "pat", 4, 4096, {"placement": "spread"}, IDEAL)
    assert pat.time_s < ring.time_s  # 2 steps instead of 3 where latency dominates


def test_several_gpus_per_node_are_refused():
    topology = load_topology("topologies/h100-cluster.yaml", {"nodes": 2})
    with pytest.raises(InputError, match="one GPU per node") as raised:
        simulate(topology, "allgather", "pat", 4, 4096)
    assert raised.value.key == "ranks"
