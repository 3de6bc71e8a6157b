"""The tree pipelines' window (``relay_steps(..., window)``): chunk i goes to slot
i mod window; data stays exact for every tree program with NCCL's window of 8; and on a
switch with free bandwidth the window pays a hop's latency once per window of chunks,
a closed form derived by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from collsim.algorithms import REGISTRY
from collsim.algorithms.nccl import collnet, nvls_tree
from collsim.algorithms.nccl import tree as nccl_tree
from collsim.algorithms.nccl.collnet import collnet_chain_job
from collsim.algorithms.nccl.nvls_tree import nvls_tree_job
from collsim.engine.data import check_algorithm
from collsim.hardware.topology import switch
from collsim.program import Job, Parallel, Recv, Send
from collsim.simulate import simulate
from collsim.tags import Tags
from tests.helpers import uneven_nodes
from tests.test_nccl_algorithms import DTYPES, OPS

MODULES = (nccl_tree, nvls_tree, collnet)
DECLARE = {"nccl_tree": lambda job: job, "nvls_tree": nvls_tree_job,
           "collnet_chain": collnet_chain_job}


def windowed(monkeypatch: pytest.MonkeyPatch, window: int) -> None:
    """Every tree program relays with ``window`` chunks in flight per connection."""
    for module in MODULES:
        monkeypatch.setattr(module, "WINDOW", window)


def test_chunks_are_dealt_to_slots_round_robin():
    regions = [(10 * i, 10) for i in range(11)]
    tags = Tags(7)
    (step,) = nccl_tree.relay_steps(regions, [(1, tags, True)], [(2, tags)], 0, 4)
    assert isinstance(step, Parallel) and len(step.programs) == 4
    for slot, program in enumerate(step.programs):
        chunks = list(range(slot, 11, 4))
        steps = list(program)
        assert len(steps) == len(chunks) + 1
        received = [op.offset // 10 for s in steps for op in s if isinstance(op, Recv)]
        sent = [op.offset // 10 for s in steps for op in s if isinstance(op, Send)]
        assert received == chunks and sent == chunks
        # Each step receives the slot's next chunk while it sends the one before.
        for j in range(1, len(chunks)):
            assert [type(op) for op in steps[j]] == [Recv, Send]
            assert steps[j][0].offset // 10 == chunks[j]
            assert steps[j][1].offset // 10 == chunks[j - 1]
    # Fewer chunks than the window: one slot per chunk; one chunk: no Parallel at all.
    (step,) = nccl_tree.relay_steps(regions[:3], [], [(2, tags)], 0, 8)
    assert len(step.programs) == 3
    assert not any(isinstance(s, Parallel)
                   for s in nccl_tree.relay_steps(regions[:1], [], [(2, tags)], 0, 8))


@pytest.mark.parametrize("name", list(DECLARE))
def test_data_with_nccls_window_for_many_ranks_and_uneven_nodes(name, monkeypatch):
    windowed(monkeypatch, nccl_tree.NCCL_WINDOW)
    program = REGISTRY["allreduce", name].program
    for p in range(2, 26):
        dtype = DTYPES[p % len(DTYPES)]
        itemsize = np.dtype(dtype).itemsize
        for shape, nodes in enumerate((uneven_nodes(p, 3 * p), tuple(range(p)))):
            count = (5 * p + 3, 40 + p)[shape]  # one element a chunk: 12 to 80 chunks
            job = Job("allreduce", p, count, itemsize, nodes=nodes,
                      params={"channels": 1 + (p + shape) % 3, "chunk_size": itemsize})
            check_algorithm(program, DECLARE[name](job), OPS[(p + shape) % len(OPS)], dtype,
                            seed=p + shape)


@pytest.mark.parametrize("window", [1, 3, 8])
def test_a_chain_on_a_switch_with_free_bandwidth_pays_latency_once_per_window(
        window, monkeypatch):
    """One node's chain of p ranks, k chunks, no bytes cost: a chunk crosses 2(p-1) hops
    of alpha, and the slot holding the most chunks, ⌈k/window⌉, finishes last, each
    further chunk of it one alpha behind: (2(p-1) + ⌈k/window⌉ - 1)·alpha. With window 1
    this is the tree's own closed form with beta = gamma = 0 (k capped as the tree caps it)."""
    windowed(monkeypatch, window)
    latency = 1e-6
    machine = switch("free", 8, latency, 1e30)
    for p in (2, 3, 5, 8):
        for k in (1, 5, 20, 37):
            chunk = 4 * 16
            result = simulate(machine, "allreduce", "nccl_tree", p, k * chunk,
                              {"channels": 1, "chunk_size": chunk})
            chunks = min(k, nccl_tree.chunk_cap(p - 1))  # 16 at p = 2: merged chunks
            expected = (2 * (p - 1) + math.ceil(chunks / window) - 1) * 2 * latency
            assert result.time_s == pytest.approx(expected, rel=1e-9), (p, k, window)
