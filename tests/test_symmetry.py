"""The symmetric path (one representative rank per orbit of a rank shift): the algorithms'
declarations against their programs, finish times against the full simulation on a switch
and on symmetric clusters, and the fallback wherever one thing breaks the symmetry."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collsim.algorithms.registry import REGISTRY
from collsim.engine.costs import MessageCosts, buffered
from collsim.engine.recording import RecordingFabric
from collsim.engine.symmetry import OrbitFabric, Shift, choose_shift, equivariant, signature
from collsim.engine.timing import TimingEngine
from collsim.hardware.loader import load_topology
from collsim.hardware.topology import switch
from collsim.nccl.protocols import cost_model
from collsim.program import Job, Pause, Recv, Send
from collsim.simulate import get_algorithm, make_job

TOPOLOGIES = Path(__file__).resolve().parent.parent / "topologies"
DECLARED = sorted(key for key, algorithm in REGISTRY.items() if algorithm.symmetric)
LATENCY, BANDWIDTH = 0.7e-6, 90e9


def runs(topology, collective, name, p, size, params=None, costs=None):
    """(symmetric-or-fallback run, full run) with the lockstep path off in both."""
    algorithm = get_algorithm(collective, name)
    job, gpus = make_job(topology, algorithm, p, size, dict(params or {}))
    extra = {} if costs is None else {"costs": costs}
    quick = TimingEngine(topology, gpus, job, algorithm.program, lockstep=False,
                         symmetric=algorithm.symmetric, **extra).run()
    full = TimingEngine(topology, gpus, job, algorithm.program, lockstep=False, **extra).run()
    assert full.path == "full"
    return quick, full


def agree(quick, full):
    assert len(quick.finish) == len(full.finish)
    for a, b in zip(quick.finish, full.finish, strict=True):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-15)
    assert quick.transfers == full.transfers


def test_declarations_are_shipped():
    """The algorithms the path is for declare it; trees and rooted ones do not."""
    names = {name for _, name in DECLARED}
    assert {("allreduce", "ring"), ("allgather", "ring"), ("reducescatter", "ring"),
            ("allreduce", "direct"), ("alltoall", "pairwise")} <= set(DECLARED)
    assert "nccl_tree" not in names and "double_binary_tree" not in names
    assert ("broadcast", "ring") not in DECLARED


@settings(max_examples=80, deadline=None)
@given(key=st.sampled_from(DECLARED), p=st.integers(2, 13), blocks=st.integers(0, 6),
       extra=st.integers(0, 12), channels=st.integers(1, 4))
def test_declarations_hold_for_the_programs(key, p, blocks, extra, channels):
    """Whatever an algorithm declares symmetric is: every rank's program is its
    predecessor's moved by the shift (checked by running every program); an uneven count
    is never declared (the recursive ones excepted, which move whole buffers)."""
    algorithm = REGISTRY[key]
    params = {"channels": channels} if "channels" in algorithm.params else {}
    count = blocks * p * channels + extra
    job = Job(key[0], p, count, params=params)
    declared = [s for s in range(1, p) if p % s == 0 and algorithm.symmetric(job, s) is None]
    for shift in declared:
        assert equivariant(algorithm.program, job, shift), (key, p, count, shift)
    # sendrecv moves the whole buffer, so no count is uneven for it
    if count % p and key[1] not in ("recursive_doubling",) and key[0] != "sendrecv":
        assert not declared
    if count % (p * channels) == 0 and "recursive" not in key[1] \
            and "halving" not in key[1]:
        assert 1 in declared  # on a flat job every shift is a symmetry


@pytest.mark.parametrize("nodes", [2, 4, 8])
@pytest.mark.parametrize("channels", [1, 3, 16])
def test_ring_declaration_on_a_snaked_cluster(nodes, channels):
    """NCCL's channels on a cluster walk every other node backwards: the ring maps onto
    itself under a shift by two nodes, not by one (checked against the programs)."""
    topology = load_topology(TOPOLOGIES / "h100-cluster.yaml", {"nodes": nodes})
    algorithm = get_algorithm("allreduce", "ring")
    job, _ = make_job(topology, algorithm, topology.gpus, 4 * 64 * channels * topology.gpus,
                      {"channels": channels})
    for shift in (8, 16, 32):
        if topology.gpus % shift or shift == topology.gpus:
            continue
        declared = algorithm.symmetric(job, shift) is None
        assert declared == (shift % 16 == 0)
        assert equivariant(algorithm.program, job, shift) == declared


@settings(max_examples=25, deadline=None)
@given(key=st.sampled_from(DECLARED), p=st.integers(2, 12), blocks=st.integers(1, 400),
       channels=st.integers(1, 4), reduce_bandwidth=st.sampled_from([None, 37e9]),
       costs=st.sampled_from([None, MessageCosts(launch=4.2e-6, per_message=1.3e-6),
                              MessageCosts(channel_cap=23e9),
                              MessageCosts(per_message=1.3e-6, send_buffer=math.inf)]))
def test_symmetric_equals_full_on_a_switch(key, p, blocks, channels, reduce_bandwidth,
                                          costs):
    """Every declared algorithm on a switch: one rank simulated (the shift by 1, or by p/2
    for partners r xor 2^k), every finish time as the full simulation's to 1e-9."""
    algorithm = REGISTRY[key]
    if "recursive" in key[1] or "halving" in key[1]:
        p = 1 << max(1, p.bit_length() - 1)
    params = {"channels": channels} if "channels" in algorithm.params else {}
    topology = switch("s", p, LATENCY, BANDWIDTH, reduce_bandwidth or float("inf"))
    count = blocks * p * channels
    quick, full = runs(topology, key[0], key[1], p, 4 * count, params, costs)
    assert quick.path == "symmetric", quick.fallback
    agree(quick, full)


@pytest.mark.parametrize("file, settings_, channels, collective", [
    ("h100-cluster.yaml", {"nodes": 4}, 16, "allreduce"),          # one leaf: shift 2 nodes
    ("h100-cluster.yaml", {"nodes": 8, "fabric.routing": "dmodk"}, 16, "allreduce"),
    ("h100-cluster.yaml", {"nodes": 8, "fabric.routing": "dmodk"}, 4, "allgather"),
    ("a100-cluster.yaml", {"nodes": 4}, 8, "reducescatter"),       # rails
])
def test_symmetric_equals_full_on_clusters(file, settings_, channels, collective):
    """NCCL's multi-channel ring (lanes sharing NVLink: no lockstep path) on symmetric
    clusters: the symmetric path runs and agrees with the full simulation."""
    topology = load_topology(TOPOLOGIES / file, settings_)
    p = topology.gpus
    quick, full = runs(topology, collective, "ring", p, 4 * p * 16 * 1024,
                       {"channels": channels})
    assert quick.path == "symmetric", quick.fallback
    agree(quick, full)
    # NCCL's costs: buffered sends, a network step slower than an NVLink one.
    costs = cost_model(topology, "ring", "LL128")
    quick, full = runs(topology, collective, "ring", p, 4 * p * 16 * 1024,
                       {"channels": channels, "protocol": "LL128"}, costs)
    assert quick.path == "symmetric" and buffered(costs), quick.fallback
    agree(quick, full)


@settings(max_examples=6, deadline=None)
@given(machine=st.sampled_from([("h100-cluster.yaml", {"fabric.routing": "dmodk"}),
                                ("a100-cluster.yaml", {})]),
       nodes=st.sampled_from([4, 8]), channels=st.integers(1, 16),
       collective=st.sampled_from(["allreduce", "allgather", "reducescatter"]),
       blocks=st.integers(1, 64))
def test_symmetric_equals_full_on_clusters_for_any_channels(machine, nodes, channels,
                                                           collective, blocks):
    """NCCL's ring on a fat-tree with D-mod-k routing and on rails, any channel count and
    size that cuts evenly: symmetric, and equal to the full simulation."""
    file, settings_ = machine
    topology = load_topology(TOPOLOGIES / file, {**settings_, "nodes": nodes})
    p = topology.gpus
    quick, full = runs(topology, collective, "ring", p, 4 * p * channels * blocks,
                       {"channels": channels})
    assert quick.path == "symmetric", quick.fallback
    agree(quick, full)


def test_orbit_fabric_routes_cross_orbit_representatives():
    """On a switch under the shift by one every up-port is one orbit (GPU 0's) and every
    down-port another (GPU 0's), so any route is GPU 0's up-port then GPU 0's down-port."""
    topology = switch("s", 4, LATENCY, BANDWIDTH)
    env = __import__("simpy").Environment()
    fabric = OrbitFabric(env, topology)
    fabric.configure(Shift((0, 1, 2, 3), 1))
    for src, dst in ((0, 1), (2, 3), (3, 1), (1, 0)):
        channels, latency, bottleneck = fabric.route(src, dst)
        assert channels == (fabric.channels[0], fabric.channels[1])
        assert latency == 2 * LATENCY and bottleneck == BANDWIDTH
    # Under the shift by two, GPU 1's ports are orbits of their own.
    fabric = OrbitFabric(env, topology)
    fabric.configure(Shift((0, 1, 2, 3), 2))
    assert fabric.route(3, 0)[0] == (fabric.channels[2], fabric.channels[1])


def slowed(p: int, gpu: int, factor: float):
    topology = switch("s", p, LATENCY, BANDWIDTH)
    topology.links[2 * gpu].bandwidth *= factor
    return topology


@settings(max_examples=12, deadline=None)
@given(breaker=st.sampled_from(["uneven", "slow link", "placement"]), p=st.integers(3, 9),
       which=st.integers(0, 1000))
def test_one_broken_symmetry_falls_back_to_the_full_simulation(breaker, p, which):
    """One thing that breaks the symmetry (an uneven count, one slower link, one rank alone
    on its node): the run falls back, says why, and is the full simulation."""
    params: dict = {}
    count = 16 * p
    if breaker == "uneven":
        topology = switch("s", p, LATENCY, BANDWIDTH)
        count += 1 + which % (p - 1)
    elif breaker == "slow link":
        topology = slowed(p, which % p, 0.5)
    else:
        topology = load_topology(TOPOLOGIES / "h100-cluster.yaml", {"nodes": 2})
        params = {"placement": [which % 8] + [8 + k for k in range(p - 1)]}
    quick, full = runs(topology, "allreduce", "direct", p, 4 * count, params)
    assert quick.path == "full" and quick.fallback
    assert quick.finish == full.finish


def test_hash_ecmp_falls_back_to_the_full_simulation():
    """Hash ECMP on a fat-tree of four leaves sends the images of a route over other spines:
    the run falls back, says why, and is the full simulation."""
    topology = load_topology(TOPOLOGIES / "h100-cluster.yaml",
                             {"nodes": 16, "fabric.routing": "ecmp"})
    p = topology.gpus
    quick, full = runs(topology, "allreduce", "ring", p, 4 * 16 * p, {"channels": 2})
    assert quick.path == "full" and "differ" in quick.fallback
    assert quick.finish == full.finish


def test_watching_fabrics_and_undeclared_algorithms_run_in_full():
    """A recording fabric watches every event, and an algorithm that declares nothing (a
    tree) is never reduced: both run every rank."""
    topology = switch("s", 8, LATENCY, BANDWIDTH)
    algorithm = get_algorithm("allreduce", "direct")
    job, gpus = make_job(topology, algorithm, 8, 4 * 64, {})
    recorded = TimingEngine(topology, gpus, job, algorithm.program, fabric=RecordingFabric,
                            symmetric=algorithm.symmetric).run()
    assert recorded.path == "full" and not recorded.fallback
    tree = get_algorithm("allreduce", "double_binary_tree")
    job, gpus = make_job(topology, tree, 8, 4 * 64, {})
    assert tree.symmetric is None
    assert TimingEngine(topology, gpus, job, tree.program).run().path == "full"


def test_choose_shift_says_why_not():
    """An uneven count is the algorithm's objection; a slow port is the machine's."""
    algorithm = get_algorithm("allreduce", "direct")
    topology = switch("s", 6, LATENCY, BANDWIDTH)
    job, gpus = make_job(topology, algorithm, 6, 4 * 7, {})
    fabric = TimingEngine(topology, gpus, job, algorithm.program).fabric
    shift, why = choose_shift(topology, fabric, gpus, job, algorithm.symmetric)
    assert shift is None and "uneven" in why
    topology = slowed(6, 2, 0.5)
    job, gpus = make_job(topology, algorithm, 6, 4 * 6, {})
    fabric = TimingEngine(topology, gpus, job, algorithm.program).fabric
    shift, why = choose_shift(topology, fabric, gpus, job, algorithm.symmetric)
    assert shift is None and "differ" in why


def test_a_route_that_breaks_the_symmetry_mid_run_falls_back():
    """A slow port the prefilter does not look at (GPU 199 of 200) is found when the first
    route whose images cross it is used: the run falls back and is the full simulation."""
    topology = slowed(200, 199, 0.5)
    algorithm = get_algorithm("alltoall", "pairwise")
    job, gpus = make_job(topology, algorithm, 200, 4 * 200 * 3, {})
    engine = TimingEngine(topology, gpus, job, algorithm.program, lockstep=False,
                          symmetric=algorithm.symmetric)
    fabric = engine.fabric
    shift, _ = choose_shift(topology, fabric, gpus, job, algorithm.symmetric)
    assert shift is not None and shift.shift == 1  # the prefilter saw nothing wrong
    quick = engine.run()
    assert quick.path == "full" and "bandwidth" in quick.fallback
    full = TimingEngine(topology, gpus, job, algorithm.program, lockstep=False).run()
    assert quick.finish == full.finish


@pytest.mark.parametrize("late", [0.0, 3e-6])
def test_stragglers_run_every_rank(late):
    """A call whose ranks start at their own times (``--skew``/``--late``) is not a shift of
    itself, so it runs every rank: with no delay it takes what the symmetric path takes; with
    one late rank it takes longer by at most the delay, which replicating a representative
    would hide."""
    from collsim.recorded import draw_offsets, record_call
    from collsim.simulate import simulate

    topology = switch("s16", 16, LATENCY, BANDWIDTH)
    alone = simulate(topology, "allreduce", "direct", 16, 16 * 2**20)
    assert alone.path == "symmetric"
    offsets = draw_offsets(16, late=[(5, late)])
    skewed = record_call(topology, "allreduce", "direct", 16, 16 * 2**20, offsets=offsets,
                         record=False)
    if late == 0:
        assert skewed.time_s == pytest.approx(alone.time_s, rel=1e-9)
    else:
        assert alone.time_s < skewed.time_s <= alone.time_s + late + 1e-12


def test_signature_tells_pauses_of_different_lengths_apart():
    """A rank that pauses longer than its image is not its image: the signature carries a
    pause's seconds, as it carries a message's count."""
    def program(seconds):
        return iter([(Send(1, 0, 0, 4), Recv(3, 0, 0, 4), Pause(seconds))])

    assert signature(program(1e-6), 0, 4) == signature(program(1e-6), 0, 4)
    assert signature(program(1e-6), 0, 4) != signature(program(2e-6), 0, 4)
