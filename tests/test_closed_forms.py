"""Simulated time on the canonical switch equals each algorithm's registered closed form
(relative error below 1e-9) for p from 2 to 64, and the registry describes every algorithm."""

from __future__ import annotations

import math

import pytest

from collsim.algorithms import REGISTRY
from collsim.algorithms.registry import Cost, power_of_two
from collsim.collectives import COLLECTIVES
from collsim.errors import InputError
from collsim.hardware.topology import switch
from collsim.simulate import simulate

LATENCY, BANDWIDTH, REDUCE = 0.7e-6, 50e9, 400e9
ALPHA, BETA, GAMMA = 2 * LATENCY, 1 / BANDWIDTH, 1 / REDUCE
SPREAD = [2, 3, 4, 5, 7, 8, 12, 16, 17, 24, 31, 32, 33, 48, 64]
OURS = sorted(key for key in REGISTRY if key[1] != "hierarchical")
EXACT = [key for key in OURS if REGISTRY[key].exact in ("any", "pow2")]


@pytest.fixture(scope="module")
def machine():
    return switch("ideal", 64, LATENCY, BANDWIDTH, REDUCE)


def even_sizes(p: int) -> tuple[int, list[int]]:
    """(chunk size, sizes) that divide evenly: blocks of p ranks and of any power of two up to
    64 ranks are whole float32 elements, and sizes are whole numbers of chunks."""
    unit = 4 * 64 * p
    return unit, [0, 3 * unit]


@pytest.mark.parametrize("key", EXACT, ids="/".join)
def test_simulation_equals_closed_form(machine, key):
    collective, name = key
    algorithm = REGISTRY[key]
    ranks = [p for p in SPREAD if algorithm.exact == "any" or p & (p - 1) == 0]
    for p in ranks:
        chunk, sizes = even_sizes(p)
        for size in sizes:
            params = {"chunk_size": chunk} if "chunk_size" in algorithm.params else {}
            if COLLECTIVES[collective].rooted and size:
                params["root"] = (p * 5) // 7
            result = simulate(machine, collective, name, p, size, params)
            want = result.analytic_time_s
            assert want is not None
            assert math.isclose(result.time_s, want, rel_tol=1e-9, abs_tol=1e-18), \
                (key, p, size, result.time_s, want)


def test_textbook_minimum_spanning_tree_and_ring_table():
    """The seven collectives' MST and ring rows, as Chan et al. and the course notes write
    them, are the registered closed forms (p = 2^k, so ⌈log p⌉ = log p)."""
    c = Cost(p=16, n=3.0e6, alpha=5e-6, beta=1 / 25e9, gamma=1 / 200e9)
    log, p, n, a, b, g = 4, c.p, c.n, c.alpha, c.beta, c.gamma
    spread = (p - 1) / p * n
    table = {
        ("broadcast", "binomial"): log * (a + n * b),
        ("reduce", "binomial"): log * (a + n * b + n * g),
        ("scatter", "binomial"): log * a + spread * b,
        ("gather", "binomial"): log * a + spread * b,
        ("allgather", "binomial"): 2 * log * a + log * n * b + spread * b,
        ("reducescatter", "binomial"): 2 * log * a + log * n * (b + g) + spread * b,
        ("allreduce", "binomial"): 2 * log * a + log * n * (2 * b + g),
        ("allgather", "ring"): (p - 1) * a + spread * b,
        ("reducescatter", "ring"): (p - 1) * a + spread * (b + g),
        ("allreduce", "ring"): 2 * (p - 1) * a + 2 * spread * b + spread * g,
        ("broadcast", "scatter_allgather"): (log + p - 1) * a + 2 * spread * b,
        ("reduce", "reducescatter_gather"): (p - 1 + log) * a + 2 * spread * b + spread * g,
        ("allreduce", "parameter_server"): 2 * a + 2 * (p - 1) * n * b + (p - 1) * n * g,
    }
    for key, want in table.items():
        assert math.isclose(REGISTRY[key].cost(c), want, rel_tol=1e-12), key


@pytest.mark.parametrize("key", OURS, ids="/".join)
def test_registry_entry_is_complete(key):
    algorithm = REGISTRY[key]
    assert algorithm.formula and algorithm.source and algorithm.summary
    assert algorithm.exact in ("any", "pow2", "contention")
    assert algorithm.cost is not None
    assert algorithm.cost(Cost(1, 1000.0, 1e-6, 1e-9, 1e-10)) == 0.0
    for p in (1, 2, 3, 64, 1000):
        algorithm.check_ranks(p)
    with pytest.raises(InputError, match=f"'{key[1]}' cannot run on 0 ranks"):
        algorithm.check_ranks(0)


def test_a_rank_restriction_is_a_clear_input_error():
    from dataclasses import replace

    restricted = replace(REGISTRY["allreduce", "recursive_doubling"], accepts=power_of_two,
                         ranks_text="powers of two")
    restricted.check_ranks(64)
    with pytest.raises(InputError) as raised:
        restricted.check_ranks(12)
    message = str(raised.value)
    assert "recursive_doubling" in message and "12 ranks" in message
    assert "power-of-two" in message and raised.value.key == "ranks"
