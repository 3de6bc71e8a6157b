"""Every algorithm's data movement against numpy: p = 1..40, sizes from empty to uneven,
five dtypes, the four operators, and roots other than 0 for rooted collectives."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collsim.algorithms import REGISTRY
from collsim.algorithms.nccl.switches import SWITCH_ALGORITHMS
from collsim.collectives import COLLECTIVES, REDUCE_OPS
from collsim.engine.data import check_algorithm
from collsim.program import Job

DTYPES = ["int32", "int64", "float32", "float64", "uint8"]
OPS = list(REDUCE_OPS)
# hierarchical.py belongs to the hierarchical algorithms' own tests, and the in-switch NCCL
# algorithms (whose jobs declare helper ranks) to tests/test_nccl_programs_*.py.
ALGORITHMS = sorted(key for key in REGISTRY
                    if key[1] != "hierarchical" and key[1] not in SWITCH_ALGORITHMS)


def run_case(key: tuple[str, str], p: int, count: int, dtype: str, op: str, root: int,
             chunk_elements: int, seed: int, ring: tuple[int, ...] = ()) -> None:
    algorithm = REGISTRY[key]
    itemsize = np.dtype(dtype).itemsize
    job = Job(key[0], p, count, itemsize=itemsize,
              root=root % p if COLLECTIVES[key[0]].rooted else 0,
              params={"chunk_size": chunk_elements * itemsize}, ring=ring)
    check_algorithm(algorithm.program, job, op, dtype, seed=seed,
                    scratch=algorithm.scratch(job))


def sizes_for(p: int) -> list[int]:
    """Empty, fewer elements than ranks, uneven blocks, even blocks."""
    return [0, max(1, p // 2), 3 * p + 1, 4 * p, 37]


@pytest.mark.parametrize("key", ALGORITHMS, ids="/".join)
def test_every_rank_count_from_1_to_40(key):
    """One size per p, cycling sizes, dtypes, operators, roots and chunkings over p."""
    for p in range(1, 41):
        sizes = sizes_for(p)
        run_case(key, p, count=sizes[p % len(sizes)], dtype=DTYPES[p % len(DTYPES)],
                 op=OPS[p % len(OPS)], root=(p * 7) // 3, chunk_elements=1 + p % 5, seed=p)


@pytest.mark.parametrize("key", ALGORITHMS, ids="/".join)
@settings(max_examples=6, deadline=None)
@given(p=st.integers(1, 40), count=st.integers(0, 200), dtype=st.sampled_from(DTYPES),
       op=st.sampled_from(OPS), root=st.integers(0, 39), chunk=st.integers(1, 64),
       seed=st.integers(0, 2**16))
def test_random_cases(key, p, count, dtype, op, root, chunk, seed):
    run_case(key, p, count, dtype, op, root, chunk, seed)


@pytest.mark.parametrize("collective", ["broadcast", "reduce", "gather", "scatter"])
def test_every_root_of_a_rooted_collective(collective):
    """Every root of p = 7 and 8 (wrap-around of subtree blocks, chains and trees)."""
    for key in (k for k in ALGORITHMS if k[0] == collective):
        for p in (7, 8):
            for root in range(p):
                run_case(key, p, 5 * p + 3, "int64", "sum", root, chunk_elements=4,
                         seed=root)


def test_double_binary_tree_many_chunks_and_ranks():
    """Deep trees with long pipelines, where ticks of up and down traffic overlap."""
    for p in (33, 64, 100):
        run_case(("allreduce", "double_binary_tree"), p, 997, "float64", "max", 0,
                 chunk_elements=16, seed=p)


@pytest.mark.parametrize("key", ALGORITHMS, ids="/".join)
def test_topology_aware_ring_order(key):
    """Ring, chain and tree algorithms follow ``job.ring_order()``; any order must work."""
    for p in (6, 13):
        ring = tuple(int(r) for r in np.random.default_rng(p).permutation(p))
        run_case(key, p, 7 * p + 2, "float32", "sum", root=p - 2, chunk_elements=3, seed=p,
                 ring=ring)
