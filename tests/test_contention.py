"""Algorithms that share ports: parameter server and the direct algorithms against times
worked out by hand from max-min sharing, the double binary tree against its model, and the
ring-vs-tree crossovers of simulated times against those of the closed forms."""

from __future__ import annotations

import math
import os

import pytest

from collsim.algorithms import REGISTRY
from collsim.algorithms.registry import Cost
from collsim.hardware.topology import switch
from collsim.program import block
from collsim.simulate import simulate

LATENCY, BANDWIDTH, REDUCE = 1.5e-6, 40e9, 250e9
ALPHA, BETA, GAMMA = 2 * LATENCY, 1 / BANDWIDTH, 1 / REDUCE


@pytest.fixture(scope="module")
def machine():
    return switch("ideal", 64, LATENCY, BANDWIDTH, REDUCE)


def time_of(machine, collective, algorithm, p, size, **params):
    return simulate(machine, collective, algorithm, p, size, params).time_s


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9)


@pytest.mark.parametrize("p", [2, 5, 12])
def test_parameter_server(machine, p):
    """The server's downlink carries p-1 buffers at once, each at bandwidth/(p-1), so all
    arrive after α + (p-1)·n·β; it combines them one after another, (p-1)·n·γ; then its
    uplink carries p-1 buffers back the same way."""
    n = 3 * 2**20
    gather = ALPHA + (p - 1) * n * BETA
    combine = (p - 1) * n * GAMMA
    scatter = ALPHA + (p - 1) * n * BETA
    assert close(time_of(machine, "allreduce", "parameter_server", p, n),
                 gather + combine + scatter)


@pytest.mark.parametrize("p", [3, 8, 13])
def test_direct_allreduce(machine, p):
    """Each port carries p-1 blocks of n/p at once in each phase; the owner combines p-1
    blocks between the phases."""
    n = 4 * p * 1000
    b = n / p
    phase = ALPHA + (p - 1) * b * BETA
    assert close(time_of(machine, "allreduce", "direct", p, n), phase + (p - 1) * b * GAMMA
                 + phase)


@pytest.mark.parametrize("p", [3, 8, 13])
def test_direct_allgather_reducescatter_alltoall(machine, p):
    n = 4 * p * 1000
    b = n / p
    one_phase = ALPHA + (p - 1) * b * BETA
    assert close(time_of(machine, "allgather", "direct", p, n), one_phase)
    assert close(time_of(machine, "reducescatter", "direct", p, n),
                 one_phase + (p - 1) * b * GAMMA)
    assert close(time_of(machine, "alltoall", "direct", p, n), one_phase)


def test_linear_gather_with_uneven_blocks(machine):
    """Blocks of 334, 333 and 333 elements to root 1: its downlink carries two blocks that
    start together; the shorter finishes first and the longer then gets the whole link, so
    the last byte leaves when both blocks' bytes have passed at full bandwidth."""
    count = 1000
    first, second = block(count, 3, 0)[1], block(count, 3, 2)[1]
    want = ALPHA + (first + second) * 4 * BETA
    assert close(time_of(machine, "gather", "linear", 3, 4 * count, root=1), want)
    assert close(time_of(machine, "scatter", "linear", 3, 4 * count, root=1), want)


def test_direct_alltoall_with_uneven_blocks(machine):
    """p = 3, 7000 elements: blocks of 2334, 2333, 2333. Rank 0's downlink carries two
    blocks of 2334 elements (from ranks 1 and 2), more than any other link; max-min keeps it
    busy at full bandwidth until both have passed."""
    lengths = [block(7000, 3, r)[1] for r in range(3)]
    want = ALPHA + 2 * lengths[0] * 4 * BETA
    assert close(time_of(machine, "alltoall", "direct", 3, 4 * 7000), want)


@pytest.mark.parametrize("p", [2, 5, 8, 13, 32])
def test_double_binary_tree_model_is_a_close_upper_bound(machine, p):
    """The model counts every tick as loaded as its busiest port; ranks whose ports carry
    less run ahead, so the simulation is a little faster, never slower."""
    chunk = 64 * 1024
    for chunks in (1, 3, 12):
        size = 2 * chunks * chunk
        result = simulate(machine, "allreduce", "double_binary_tree", p, size,
                          {"chunk_size": chunk})
        ratio = result.time_s / result.analytic_time_s
        assert 0.8 <= ratio <= 1 + 1e-9, (p, chunks, ratio)


# -- crossovers: allreduce on a switch with 5 us links of 25 GB/s -------------------------

CROSS_LATENCY, CROSS_BANDWIDTH = 5e-6, 25e9
GRID = [2**i for i in range(12, 34)]  # 4 KiB .. 8 GiB, a 2x grid


def closed_form(algorithm: str, p: int, size: int) -> float:
    cost = Cost(p, size, 2 * CROSS_LATENCY, 1 / CROSS_BANDWIDTH)
    return REGISTRY["allreduce", algorithm].cost(cost)


def first_ring_win(faster, start: int = 0, stop: int = len(GRID)) -> int | None:
    """Index of the first grid size in [start, stop) at which ring is faster, if any."""
    return next((i for i in range(start, stop) if faster(GRID[i])), None)


def check_crossover(p: int, other: str) -> tuple[int, int]:
    """The grid index where ring starts to beat ``other``, from closed forms and from
    simulations; the simulations run only around the closed-form crossover (where they
    decide whether it is within one grid step)."""
    machine = switch("cross", p, CROSS_LATENCY, CROSS_BANDWIDTH)

    def formula_says_ring(size: int) -> bool:
        return closed_form("ring", p, size) < closed_form(other, p, size)

    def simulation_says_ring(size: int) -> bool:
        return simulate(machine, "allreduce", "ring", p, size).time_s < \
            simulate(machine, "allreduce", other, p, size).time_s

    formula = first_ring_win(formula_says_ring)
    assert formula is not None and 2 <= formula < len(GRID) - 1
    # Below the window the other algorithm must still win in simulation too ...
    assert not simulation_says_ring(GRID[formula - 2]), (p, other, GRID[formula - 2])
    # ... and ring must start winning no later than one step after the closed form says.
    simulated = first_ring_win(simulation_says_ring, formula - 1, formula + 2)
    assert simulated is not None, (p, other, "ring never wins near", GRID[formula])
    return formula, simulated


SLOW = pytest.mark.skipif(not os.environ.get("COLLSIM_SLOW_TESTS"),
                          reason="the tree at p = 512 and 1 GiB takes minutes; "
                                 "set COLLSIM_SLOW_TESTS=1")


@pytest.mark.parametrize("p, other", [
    (8, "binomial"), (8, "double_binary_tree"),
    (64, "binomial"), (64, "double_binary_tree"),
    (512, "binomial"),
    pytest.param(512, "double_binary_tree", marks=SLOW),
])
def test_crossover_of_simulation_matches_closed_forms(p, other):
    formula, simulated = check_crossover(p, other)
    assert abs(simulated - formula) <= 1
