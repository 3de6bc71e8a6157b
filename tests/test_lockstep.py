"""The lockstep path (whole ring steps timed at once) against the event-driven engine: the
same finish time for every rank, to the bit, and a fallback wherever ring pairs share a
link."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from collsim.engine.costs import MessageCosts, buffered
from collsim.engine.lockstep import Exchange, run_lockstep
from collsim.engine.timing import TimingEngine
from collsim.hardware.loader import load_topology
from collsim.hardware.topology import switch
from collsim.nccl.protocols import cost_model
from collsim.program import Job, Recv, Send
from collsim.simulate import get_algorithm, make_job, simulate

CLUSTER = Path(__file__).resolve().parent.parent / "topologies" / "h100-cluster.yaml"


def both(topology, collective, p, size, params=None, costs=None, name="ring"):
    """(lockstep run, event-driven run) of ``name`` (NCCL's ring by default)."""
    algorithm = get_algorithm(collective, name)
    job, gpus = make_job(topology, algorithm, p, size, dict(params or {}))
    extra = {} if costs is None else {"costs": costs}
    quick = TimingEngine(topology, gpus, job, algorithm.program, steps=algorithm.lockstep,
                         **extra).run()
    full = TimingEngine(topology, gpus, job, algorithm.program, lockstep=False, **extra).run()
    return quick, full


def same(quick, full):
    assert full.path == "full"
    assert quick.finish == full.finish  # every rank, to the bit
    assert quick.time == full.time and quick.transfers == full.transfers


@settings(max_examples=60, deadline=None)
@given(p=st.integers(1, 24), elements=st.integers(0, 5000),
       collective=st.sampled_from(["allreduce", "allgather", "reducescatter"]),
       reduce_bandwidth=st.sampled_from([None, 37e9]),
       launch=st.sampled_from([0.0, 4.2e-6]), per_message=st.sampled_from([0.0, 1.3e-6]),
       channel_cap=st.sampled_from([None, 23e9]), channels=st.integers(1, 4),
       buffered=st.booleans())
def test_lockstep_equals_events_on_a_switch(p, elements, collective, reduce_bandwidth,
                                            launch, per_message, channel_cap, channels,
                                            buffered):
    """Uneven blocks, empty blocks, combines, launch and per-message costs, channel caps,
    merged channels and buffered sends: the lockstep path is taken on a switch and agrees
    to the bit."""
    if collective != "allreduce":
        elements -= elements % p
    topology = switch("s", p, 0.7e-6, 90e9, reduce_bandwidth or float("inf"))
    costs = MessageCosts(launch=launch, per_message=per_message, channel_cap=channel_cap,
                         send_buffer=math.inf if buffered else 0.0)
    quick, full = both(topology, collective, p, 4 * elements, {"channels": channels}, costs)
    assert quick.path == "lockstep"
    same(quick, full)


@settings(max_examples=30, deadline=None)
@given(p=st.integers(2, 20), per_rank=st.integers(0, 300),
       collective=st.sampled_from(["alltoall", "reducescatter"]),
       reduce_bandwidth=st.sampled_from([None, 37e9]), launch=st.sampled_from([0.0, 4.2e-6]),
       buffered=st.booleans())
def test_pairwise_steps_change_pattern_every_step_and_stay_exact(p, per_rank, collective,
                                                                 reduce_bandwidth, launch,
                                                                 buffered):
    """Pairwise exchange: a new pattern at every step, each port still its own rank's."""
    topology = switch("s", p, 0.7e-6, 90e9, reduce_bandwidth or float("inf"))
    quick, full = both(topology, collective, p, 4 * per_rank * p, {},
                       MessageCosts(launch=launch, send_buffer=math.inf if buffered else 0.0),
                       "pairwise")
    assert quick.path == "lockstep"
    same(quick, full)


def test_lockstep_on_a_cluster_and_the_fallback_with_several_lanes():
    """One channel on the rail cluster: the ring's pairs cross disjoint links (NVLink in a
    node, one rail between nodes), so lockstep; four channels are four lanes sharing
    NVLink, so the events run."""
    topology = load_topology(CLUSTER, {"nodes": 3})
    quick, full = both(topology, "allreduce", 24, 3 << 20, {"channels": 1})
    assert quick.path == "lockstep"
    same(quick, full)
    # Buffered sends, hops of unequal latency (NVLink in a node, the NIC between): still
    # to the bit. NCCL's bounded buffers (a send waits for room) take the events.
    costs = MessageCosts(per_hop={"nvlink": 0.6e-6, "nic": 7.1e-6}, send_buffer=math.inf)
    quick, full = both(topology, "allreduce", 24, 3 << 20, {"channels": 1}, costs)
    assert quick.path == "lockstep"
    same(quick, full)
    # NCCL's costs: 4 MiB of slots a connection, each step's message fits.
    nccl = cost_model(topology, "ring", "Simple")
    assert 0 < buffered(nccl) < math.inf
    quick, full = both(topology, "allreduce", 24, 3 << 20, {"channels": 1}, nccl)
    assert quick.path == "lockstep"
    same(quick, full)
    quick, full = both(topology, "allreduce", 24, 3 << 20, {"channels": 4})
    assert quick.path == "full"
    same(quick, full)


def test_a_network_channel_cap_binds_only_routes_that_cross_the_network():
    """NCCL's p2p figure per channel across nodes (``net_channel_cap``): a sendrecv on 2
    nodes of 8 (1 MiB a rank, within a connection's slots) moves its two sends between the
    nodes at 2 x 3 GB/s on 2 channels, the lockstep path and the events to the bit; the
    same call inside one node of that machine takes as long as without the cap."""
    topology = load_topology(CLUSTER, {"nodes": 2})
    plain = cost_model(topology, "ring", "Simple")
    capped = replace(plain, net_channel_cap=3e9)
    size = 1 << 20
    quick, full = both(topology, "sendrecv", 16, size, {"channels": 2}, capped, "nccl_p2p")
    assert quick.path == "lockstep"
    same(quick, full)
    assert quick.time >= size / (2 * 3e9)
    free, _ = both(topology, "sendrecv", 16, size, {"channels": 2}, plain, "nccl_p2p")
    assert free.time < quick.time / 2
    inside = {"channels": 2, "placement": list(range(8))}
    quick, full = both(topology, "sendrecv", 8, size, inside, capped, "nccl_p2p")
    same(quick, full)
    assert quick.time == both(topology, "sendrecv", 8, size, inside, plain, "nccl_p2p")[0].time


@settings(max_examples=30, deadline=None)
@given(nodes=st.integers(2, 3), kib=st.integers(1, 2048), room=st.integers(1, 40),
       collective=st.sampled_from(["allreduce", "allgather"]))
def test_bounded_buffers_take_the_lockstep_path_only_where_every_send_finds_room(
        nodes, kib, room, collective):
    """A slow network hop lets the rank before it run ahead of its receiver; with room for
    a few messages the lockstep path runs only where it can show every send found room,
    and then agrees with the events to the bit; with less room than one message it
    declines."""
    topology = load_topology(CLUSTER, {"nodes": nodes})
    p = 8 * nodes
    size = p * 1024 * kib
    block = size // p
    costs = MessageCosts(per_hop={"nvlink": 0.6e-6, "nic": 25e-6}, send_buffer=room * block / 8)
    quick, full = both(topology, collective, p, size, {"channels": 1}, costs)
    same_times = quick.finish == full.finish and quick.transfers == full.transfers
    assert same_times
    if room < 8:
        assert quick.path == "full"  # a message is larger than the whole buffer


def test_bounded_buffers_with_room_to_spare_stay_on_the_lockstep_path():
    """2 MiB a step, room for five: bandwidth-bound steps never let a sender run two
    messages ahead, so the path shows every send found room, and agrees to the bit."""
    topology = load_topology(CLUSTER, {"nodes": 2})
    costs = MessageCosts(per_hop={"nvlink": 0.6e-6, "nic": 25e-6}, send_buffer=5 * 2**21)
    quick, full = both(topology, "allreduce", 16, 16 * 2**21, {"channels": 1}, costs)
    assert quick.path == "lockstep"
    same(quick, full)


def test_a_pattern_whose_pairs_share_a_link_falls_back():
    """Every GPU of a one-NIC node sending to the other node shares that NIC: None."""
    topology = load_topology(CLUSTER, {"nodes": 2, "node.nics.count": 1})
    algorithm = get_algorithm("allreduce", "ring")
    job, gpus = make_job(topology, algorithm, 16, 1 << 20, {})
    senders = np.arange(16)
    receivers = (senders + 8) % 16
    engine = TimingEngine(topology, gpus, job, algorithm.program)
    steps = [Exchange(senders, receivers, 100)]
    assert run_lockstep(engine.fabric, gpus, job, steps, 0.0, 0.0) is None
    ring = np.arange(16)
    steps = [Exchange(ring, np.roll(ring, -1), 100)] * 2 + [Exchange(senders, receivers, 1)]
    assert run_lockstep(engine.fabric, gpus, job, steps, 0.0, 0.0) is None  # a new pattern


def test_exchange_counts_are_the_programs_counts():
    """Each whole step sends what the per-rank programs send, rank by rank (uneven blocks,
    non-powers of two)."""
    for p, elements in ((5, 23), (7, 7), (12, 100), (3, 2)):
        for collective in ("allreduce", "allgather", "reducescatter"):
            count = elements if collective == "allreduce" else elements * p
            topology = switch("s", p, 1e-6, 1e9)
            algorithm = get_algorithm(collective, "ring")
            job, _ = make_job(topology, algorithm, p, 4 * count, {})
            sends = {}
            for rank in range(p):
                for step, ops in enumerate(algorithm.program(rank, job)):
                    send = next(op for op in ops if type(op) is Send)
                    recv = next(op for op in ops if type(op) is Recv)
                    sends[step, rank] = (send.peer, send.count, recv.reduce)
            exchanges = list(algorithm.lockstep(job))
            assert len(exchanges) == len(sends) // p
            for step, exchange in enumerate(exchanges):
                counts = np.broadcast_to(exchange.counts, (p,))
                for sender, receiver, count in zip(exchange.senders, exchange.receivers,
                                                   counts, strict=True):
                    assert sends[step, int(sender)] == (int(receiver), int(count),
                                                        exchange.reduce)


def test_simulate_at_scale_takes_the_lockstep_path_and_meets_the_closed_form():
    """2048 ranks on a switch in well under a second of work: the closed form to 1e-9."""
    result = simulate(switch("s", 2048, 1e-6, 100e9, reduce_bandwidth=50e9), "allreduce",
                      "ring", 2048, 1 << 24)
    assert abs(result.time_s - result.analytic_time_s) <= 1e-9 * result.analytic_time_s


def programs_of(steps):
    """Per-rank programs doing ``steps`` (Exchanges); their lockstep form is the steps."""

    def program(rank, job):
        for tag, step in enumerate(steps):
            counts = np.broadcast_to(step.counts, (job.nranks,))
            out = int(np.flatnonzero(step.senders == rank)[0])
            into = int(np.flatnonzero(step.receivers == rank)[0])
            yield (Send(int(step.receivers[out]), tag, 0, int(counts[out]), lane=step.lane),
                   Recv(int(step.senders[into]), tag, 0, int(counts[into]), reduce=step.reduce,
                        lane=step.lane))

    return program


@st.composite
def exchanges(draw, p):
    """A few steps, each a random permutation without fixed points (a pattern drawn from a
    small pool, so patterns repeat and change), random counts, some combining."""
    pool = []
    for _ in range(draw(st.integers(1, 3))):
        order = draw(st.permutations(range(p)))
        shift = draw(st.integers(1, p - 1))
        senders = np.asarray(order)
        pool.append((senders, np.roll(senders, -shift)))
    steps = []
    for _ in range(draw(st.integers(1, 6))):
        senders, receivers = pool[draw(st.integers(0, len(pool) - 1))]
        counts = np.asarray(draw(st.lists(st.integers(0, 3000), min_size=p, max_size=p)))
        steps.append(Exchange(senders, receivers, counts, draw(st.booleans())))
    return steps


@settings(max_examples=40, deadline=None)
@given(data=st.data(), nics=st.sampled_from([1, 2, 8]), nodes=st.integers(1, 3))
def test_any_pattern_is_exact_or_falls_back(data, nics, nodes):
    """Random permutation steps on a cluster whose nodes have 1, 2 or 8 NICs: wherever the
    lockstep path takes them (pairs that never meet on a link) every rank finishes at the
    events' very instant; where transfers could meet it declines. On a switch it never
    declines (each port carries its own rank's transfers)."""
    topology = load_topology(CLUSTER, {"nodes": nodes, "node.nics.count": nics})
    p = topology.gpus
    steps = data.draw(exchanges(p))
    program, form = programs_of(steps), lambda job: steps
    job = Job("allreduce", p, 3000)
    gpus = list(range(p))
    full = TimingEngine(topology, gpus, job, program, lockstep=False).run()
    quick = TimingEngine(topology, gpus, job, program, steps=form).run()
    same(quick, full)  # lockstep or not, the same finish times
    flat = switch("s", p, 1e-6, 50e9, 20e9)
    full = TimingEngine(flat, gpus, job, program, lockstep=False).run()
    quick = TimingEngine(flat, gpus, job, program, steps=form).run()
    assert quick.path == "lockstep"
    same(quick, full)


def test_a_transfer_still_on_a_link_when_the_pattern_changes_falls_back():
    """Two nodes of one NIC each: step 1 sends a large message 0 -> 8 over the NICs while
    the other ranks pass small ones in their node. If step 2 sends 1 -> 9 (and back), it
    would start while 0 -> 8 is still on the NIC's link: the lockstep path declines. If it
    sends 0 -> 9 and 9 -> 0, each starts only once the transfer before it on those links
    (its own rank's) was delivered: the path holds, to the bit."""
    topology = load_topology(CLUSTER, {"nodes": 2, "node.nics.count": 1})
    first = np.array([0, 8, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15])
    into_first = np.array([8, 0, 2, 3, 4, 5, 6, 7, 1, 10, 11, 12, 13, 14, 15, 9])
    meets = (np.array([1, 9, 0, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15]),
             np.array([9, 1, 2, 3, 4, 5, 6, 7, 0, 10, 11, 12, 13, 14, 15, 8]))
    follows = (np.array([0, 9, 1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15]),
               np.array([9, 0, 2, 3, 4, 5, 6, 7, 1, 10, 11, 12, 13, 14, 15, 8]))
    job = Job("allreduce", 16, 1 << 20)
    gpus = list(range(16))
    counts = np.full(16, 10)
    counts[0] = 1 << 20
    for (senders, receivers), declined in ((meets, True), (follows, False)):
        steps = [Exchange(first, into_first, counts), Exchange(senders, receivers, 10)]
        engine = TimingEngine(topology, gpus, job, programs_of(steps),
                              steps=lambda job, steps=steps: steps)
        assert (run_lockstep(engine.fabric, gpus, job, steps, 0.0, 0.0) is None) == declined
        quick = engine.run()
        assert quick.path == ("full" if declined else "lockstep")
        same(quick, TimingEngine(topology, gpus, job, programs_of(steps), lockstep=False).run())


def test_run_json_counts_the_paths(tmp_path):
    """A scenario's run.json says how many points each path timed."""
    import json

    from collsim.cli import main

    scenario = Path(__file__).resolve().parent.parent / "scenarios" / "ring-vs-tree.yaml"
    assert main(["run", str(scenario), "--quick", "--out", str(tmp_path / "out")]) == 0
    info = json.loads((tmp_path / "out" / "run.json").read_text())
    # The quick grid: 2 sizes x 2 rank counts x 3 algorithms; only the ring is lockstep.
    assert info["paths"] == {"lockstep": 4, "full": 8}


@settings(max_examples=25, deadline=None)
@given(data=st.data(), nics=st.sampled_from([1, 8]), nodes=st.integers(1, 2))
def test_traced_programs_are_exact_or_fall_back(data, nics, nodes):
    """Programs without a lockstep form are traced round by round into exchanges: random
    permutation steps give the events' finish times, taken or declined."""
    topology = load_topology(CLUSTER, {"nodes": nodes, "node.nics.count": nics})
    p = topology.gpus
    program = programs_of(data.draw(exchanges(p)))  # no lockstep form: traced
    job = Job("allreduce", p, 3000)
    gpus = list(range(p))
    same(TimingEngine(topology, gpus, job, program).run(),
         TimingEngine(topology, gpus, job, program, lockstep=False).run())
    flat = switch("s", p, 1e-6, 50e9, 20e9)
    quick = TimingEngine(flat, gpus, job, program).run()
    assert quick.path == "lockstep"
    same(quick, TimingEngine(flat, gpus, job, program, lockstep=False).run())


def test_every_shipped_algorithm_is_exact_on_either_path():
    """Every registered algorithm on a switch (reductions timed, p not a power of two) and
    on a D-mod-k 2:1 cluster: the default engine (lockstep where a form is given or traced)
    finishes every rank at the events' very instant; the regular ones take the lockstep
    path, trees and pipelines the events."""
    from collsim.algorithms.registry import algorithms_for
    from collsim.collectives import COLLECTIVES

    cluster = load_topology(CLUSTER.with_name("h100-cluster-2to1.yaml"),
                            {"nodes": 2, "fabric.routing": "dmodk"})
    taken = set()
    for topology in (switch("s", 12, 1e-6, 100e9, 40e9), cluster):
        p = topology.gpus
        for collective in COLLECTIVES:
            for algorithm in algorithms_for(collective):
                try:
                    job, gpus = make_job(topology, algorithm, p, 4 * p * 257, {})
                except Exception:  # noqa: BLE001 - not defined at this p (powers of two)
                    continue
                quick = TimingEngine(topology, gpus, job, algorithm.program,
                                     steps=algorithm.lockstep).run()
                same(quick, TimingEngine(topology, gpus, job, algorithm.program,
                                         lockstep=False).run())
                if quick.path == "lockstep":
                    taken.add((collective, algorithm.name))
    assert {("allreduce", "ring"), ("allreduce", "hierarchical"), ("alltoall", "pairwise"),
            ("alltoall", "bruck"), ("barrier", "dissemination")} <= taken
    assert ("allreduce", "double_binary_tree") not in taken
    assert ("broadcast", "binomial") not in taken


@dataclass(frozen=True)
class SlotCosts(MessageCosts):
    """MessageCosts that count a connection's slots across the network (costs.slot_credit)."""

    slot_credit: float | None = None
    slots: int = 8


@settings(max_examples=20, deadline=None)
@given(nodes=st.integers(2, 3), kib=st.integers(1, 1024),
       credit=st.sampled_from([1e-6, 25e-6, 200e-6]),
       collective=st.sampled_from(["allreduce", "allgather"]))
def test_slots_counted_across_the_network_stay_exact_or_fall_back(nodes, kib, credit,
                                                                   collective):
    """NCCL_STEPS slots across the network, freed a credit after their message was taken:
    the lockstep path runs only where it shows every send found a slot, and then agrees
    with the events to the bit."""
    topology = load_topology(CLUSTER, {"nodes": nodes})
    p = 8 * nodes
    costs = SlotCosts(per_hop={"nvlink": 0.6e-6, "nic": 25e-6}, send_buffer=64 * 2**20,
                      slot_credit=credit)
    quick, full = both(topology, collective, p, p * 1024 * kib, {"channels": 1}, costs)
    assert quick.finish == full.finish and quick.transfers == full.transfers


def test_a_slot_that_binds_sends_the_ring_to_the_events_and_one_that_does_not_stays():
    """16 MiB on 2 nodes, one channel: a 1 us credit never holds a sender (lockstep), a
    2 ms one does (the events), each equal to the events' times."""
    topology = load_topology(CLUSTER, {"nodes": 2})
    paths = []
    for credit in (1e-6, 2e-3):
        costs = SlotCosts(per_hop={"nvlink": 0.6e-6, "nic": 25e-6}, send_buffer=64 * 2**20,
                          slot_credit=credit)
        quick, full = both(topology, "allreduce", 16, 16 * 2**20, {"channels": 1}, costs)
        same(quick, full)
        paths.append(quick.path)
    assert paths == ["lockstep", "full"]


@settings(max_examples=12, deadline=None)
@given(nodes=st.integers(2, 3), mib=st.integers(1, 96),
       collective=st.sampled_from(["allreduce", "allgather", "reducescatter"]))
def test_a_simple_rings_chunk_slots_stay_exact_or_fall_back(nodes, mib, collective):
    """NCCL's Simple ring on H100 nodes as planned (2 chunks of 2 slices a connection across
    the network, a passed-on chunk's slot back after its last slice's copy and the credit):
    the lockstep path runs only where every send found a slot, then to the bit."""
    from collsim.callspec import CallSpec
    from collsim.simulate import make_call
    topology = load_topology(CLUSTER, {"nodes": nodes})
    algorithm = get_algorithm(collective, "ring")
    job, gpus, planned = make_call(CallSpec(topology, collective, "ring", 8 * nodes,
                                            mib * 2**20, {"protocol": "Simple"}), algorithm)
    assert planned.costs.slots == 2 and planned.costs.slices == 2
    quick = TimingEngine(topology, gpus, job, algorithm.program, planned.costs,
                         steps=algorithm.lockstep).run()
    full = TimingEngine(topology, gpus, job, algorithm.program, planned.costs,
                        lockstep=False).run()
    assert quick.finish == full.finish and quick.transfers == full.transfers
