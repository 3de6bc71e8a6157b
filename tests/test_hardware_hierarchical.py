"""Hierarchical (2D) algorithms: right answers on every layout (data interpreter against
numpy), the ring on one node, and faster than the flat ring on 16 nodes of 8 GPUs."""

from __future__ import annotations

from pathlib import Path

import pytest

from collsim.algorithms import get_algorithm
from collsim.engine.costs import IDEAL
from collsim.engine.data import check_algorithm
from collsim.errors import InputError
from collsim.hardware.loader import load_topology
from collsim.hardware.topology import switch
from collsim.program import Job
from collsim.simulate import simulate

TOPOLOGIES = Path(__file__).resolve().parent.parent / "topologies"
LAYOUTS = [(1, 1), (1, 5), (2, 4), (3, 3), (4, 2), (5, 1), (2, 8), (3, 5)]


def snake_ring(nodes: tuple[int, ...]) -> tuple[int, ...]:
    """Each node's ranks together, every other node backwards (as placement.ring_order)."""
    ring: list[int] = []
    for k in sorted(set(nodes)):
        ranks = [r for r in range(len(nodes)) if nodes[r] == k]
        ring += ranks[::-1] if k % 2 else ranks
    return tuple(ring)


@pytest.mark.parametrize("collective", ["allreduce", "allgather", "reducescatter"])
@pytest.mark.parametrize("n_nodes,per_node", LAYOUTS)
@pytest.mark.parametrize("placement", ["packed", "spread"])
def test_hierarchical_matches_numpy(collective, n_nodes, per_node, placement):
    p = n_nodes * per_node
    nodes = tuple(r // per_node if placement == "packed" else r % n_nodes for r in range(p))
    program = get_algorithm(collective, "hierarchical").program
    inters = ["ring", "tree"] if collective == "allreduce" else ["ring"]
    for count in (0, 1, p + 3, 5 * p):
        for inter in inters:
            job = Job(collective, p, count, ring=snake_ring(nodes), nodes=nodes,
                      params={"inter": inter})
            check_algorithm(program, job, dtype="int64", seed=count)


@pytest.mark.parametrize("collective", ["allreduce", "allgather", "reducescatter"])
def test_uneven_nodes_fall_back_to_the_flat_ring(collective):
    program = get_algorithm(collective, "hierarchical").program
    for nodes in [(0, 0, 0, 1, 1), (0, 1, 1, 1), (0, 0, 1)]:
        check_algorithm(program, Job(collective, len(nodes), 17, ring=snake_ring(nodes),
                                     nodes=nodes))


@pytest.mark.parametrize("collective", ["allreduce", "allgather", "reducescatter"])
def test_a_ring_that_interleaves_nodes_still_gives_the_right_answer(collective):
    nodes = tuple(r % 3 for r in range(12))
    check_algorithm(get_algorithm(collective, "hierarchical").program,
                    Job(collective, 12, 41, ring=tuple(range(12)), nodes=nodes))


def test_on_one_node_it_is_the_ring_and_its_closed_form():
    t = switch("s", 6, 1e-6, 100e9, reduce_bandwidth=1e12)
    for collective in ("allreduce", "allgather", "reducescatter"):
        ring = simulate(t, collective, "ring", 6, 6 * 2**20)
        hier = simulate(t, collective, "hierarchical", 6, 6 * 2**20)
        assert hier.time_s == pytest.approx(ring.time_s, rel=1e-12)
        assert hier.time_s == pytest.approx(hier.analytic_time_s, rel=1e-9)


def test_unknown_inter_phase_is_an_input_error():
    t = switch("s", 4, 1e-6, 100e9)
    with pytest.raises(InputError, match="inter must be ring or tree"):
        simulate(t, "allreduce", "hierarchical", 4, 1024, {"inter": "star"})


def test_hierarchical_beats_flat_ring_on_16_nodes_of_8_gpus_for_large_sizes():
    # h100-cluster under the links' own figures (the ideal model), the ring on one channel:
    # 450 GB/s NVLink (1 us per GPU-NVSwitch-GPU path), 50 GB/s NICs, 5 us
    # GPU-to-GPU across the spine. Hierarchical: 2 x 7 NVLink steps of n/8, and 8 rails in
    # parallel each run a 16-node ring allreduce of n/8: 2 x 15 steps of n/128 over a NIC.
    # The flat ring's 2 x 127 steps of n/128 each wait for a 50 GB/s NIC hop.
    t = load_topology(TOPOLOGIES / "h100-cluster.yaml", {"nodes": 16})
    speedups = {}
    for n in (64 * 2**20, 2**30):
        ring = simulate(t, "allreduce", "ring", 128, n, {"channels": 1}, IDEAL).time_s
        hier = simulate(t, "allreduce", "hierarchical", 128, n, costs=IDEAL).time_s
        assert hier == pytest.approx(14 * (1e-6 + n / 8 / 450e9)
                                     + 30 * (5e-6 + n / 128 / 50e9), rel=1e-9)
        assert ring == pytest.approx(254 * (5e-6 + n / 128 / 50e9), rel=1e-9)
        speedups[n] = ring / hier
    assert speedups[2**30] > 4.5 and speedups[64 * 2**20] > 5
