"""Rank placement (packed, spread, explicit) and the topology-aware ring inside a node;
``collsim topo show`` prints the figures and draws the machine."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from collsim.errors import InputError
from collsim.hardware.loader import topology_from_text
from collsim.hardware.placement import local_ring, place_ranks, ring_order
from collsim.hardware.topology import switch
from tests.helpers import THREE_NODES

ROOT = Path(__file__).resolve().parents[1]

CLUSTER = THREE_NODES


def test_packed_spread_and_explicit_placements():
    t = topology_from_text(CLUSTER)
    assert place_ranks(t, 5, {}) == [0, 1, 2, 3, 4]
    assert place_ranks(t, 5, {"placement": "spread"}) == [0, 4, 8, 1, 5]
    assert place_ranks(t, 2, {"placement": [11, 3]}) == [11, 3]


@pytest.mark.parametrize("placement,message", [
    ([1, 1], "two ranks on the same GPU"), ([0, 12], "not a GPU"), ([0], "lists 1 GPUs"),
    ("scattered", "unknown placement")])
def test_bad_placements_are_input_errors(placement, message):
    with pytest.raises(InputError, match=message):
        place_ranks(topology_from_text(CLUSTER), 2, {"placement": placement})


def test_ring_keeps_nodes_together_whatever_the_placement():
    t = topology_from_text(CLUSTER)
    gpus = place_ranks(t, 7, {"placement": "spread"})      # nodes 0,1,2,0,1,2,0
    ring = ring_order(t, gpus)
    assert sorted(ring) == list(range(7))
    assert [t.node_of[gpus[r]] for r in ring] == [0, 0, 0, 1, 1, 2, 2]


def test_ring_inside_an_nvlink_node_follows_the_nvlink_wiring():
    # DGX-1-like: no NVLink between GPUs 0 and 1; the ring must avoid that PCIe hop.
    t = topology_from_text("""
kind: nvlink
gpus: 4
nvlink: {latency: 1us, bandwidth: 25GB/s}
pairs: [[0, 2, 1], [0, 3, 1], [1, 2, 1], [1, 3, 1]]
pcie: {switches: 1, link: {latency: 1us, bandwidth: 16GB/s},
       uplink: {latency: 1us, bandwidth: 16GB/s}}
""")
    ring = local_ring(t, [0, 1, 2, 3])
    hops = [(ring[i], ring[(i + 1) % 4]) for i in range(4)]
    assert all(t.path_bandwidth(a, b) == 25e9 for a, b in hops), ring


def test_ring_of_a_pcie_node_crosses_sockets_twice():
    t = topology_from_text("""
kind: pcie
gpus: 8
pcie: {switches: 4, sockets: 2, link: {latency: 1us, bandwidth: 30GB/s},
       uplink: {latency: 1us, bandwidth: 30GB/s},
       inter_socket: {latency: 1us, bandwidth: 20GB/s}}
""")
    ring = ring_order(t, list(range(8)))
    sockets = [g // 4 for g in ring]
    assert sum(sockets[i] != sockets[(i + 1) % 8] for i in range(8)) == 2


def test_torus_ring_moves_one_link_per_hop():
    t = topology_from_text("kind: torus\ndims: [4, 3]\nlink: {latency: 1us, bandwidth: 1GB/s}")
    ring = ring_order(t, list(range(12)))
    assert sorted(ring) == list(range(12))
    assert all(len(t.route(ring[i], ring[i + 1])) == 1 for i in range(11))


def test_uniform_machines_keep_rank_order():
    assert ring_order(switch("s", 5, 1e-6, 1e9), [0, 1, 2, 3, 4]) == (0, 1, 2, 3, 4)


def test_topo_show_prints_figures_and_draws(tmp_path, capsys):
    from collsim.cli import topo

    path = tmp_path / "cluster.yaml"
    path.write_text(CLUSTER)
    parser = argparse.ArgumentParser()
    topo.add_parser(parser.add_subparsers())
    image = tmp_path / "cluster.png"
    args = parser.parse_args(["topo", "show", str(path), "--set", "nodes=2",
                              "--image", str(image)])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "8 on 2 nodes" in out and "nvlink" in out and "100 GB/s to its node" in out
    assert "25 GB/s into the network" in out and "bisection       100 GB/s" in out
    assert image.stat().st_size > 10_000


def _node_crossings(program, job) -> int:
    """Messages a program sends from one node to another (its steps, not its timing)."""
    from collsim.program import Send

    crossings = 0
    for rank in range(job.nranks):
        for step in program(rank, job):
            for op in step if isinstance(step, tuple) else (step,):
                if isinstance(op, Send) and job.node_of(rank) != job.node_of(op.peer):
                    crossings += 1
    return crossings


def test_binomial_trees_follow_the_machine_whatever_the_placement():
    """Spread placement alternates nodes rank by rank. The tree numbers ranks along the
    topology-aware ring, so only its top level crosses the network (one message between two
    nodes), as with packed ranks; numbered by rank id, half its messages would cross."""
    from dataclasses import replace

    from collsim.algorithms import get_algorithm
    from collsim.hardware.loader import load_topology
    from collsim.simulate import make_job, simulate

    cluster = load_topology(ROOT / "topologies" / "h100-cluster.yaml", {"nodes": 2})
    for collective in ("broadcast", "reduce"):
        algorithm = get_algorithm(collective, "binomial")
        for placement in ("packed", "spread"):
            job, _ = make_job(cluster, algorithm, 16, 2**20, {"placement": placement})
            assert _node_crossings(algorithm.program, job) == 1
        assert _node_crossings(algorithm.program, replace(job, ring=())) == 8
        packed = simulate(cluster, collective, "binomial", 16, 2**20).time_s
        spread = simulate(cluster, collective, "binomial", 16, 2**20,
                          {"placement": "spread"}).time_s
        assert spread == pytest.approx(packed, rel=1e-12)
