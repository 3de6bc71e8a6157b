"""The lockstep path (whole ring steps timed at once) against the event-driven engine: the
same finish time for every rank, to the bit, and a fallback wherever ring pairs share a
link."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from collsim.engine.costs import MessageCosts
from collsim.engine.lockstep import Exchange, run_lockstep
from collsim.engine.timing import TimingEngine
from collsim.hardware.loader import load_topology
from collsim.hardware.topology import switch
from collsim.program import Recv, Send
from collsim.simulate import get_algorithm, make_job, simulate

CLUSTER = Path(__file__).resolve().parent.parent / "topologies" / "h100-cluster.yaml"


def both(topology, collective, p, size, params=None, costs=None):
    """(lockstep run, event-driven run) of NCCL's ring."""
    algorithm = get_algorithm(collective, "ring")
    job, gpus = make_job(topology, algorithm, p, size, dict(params or {}))
    extra = {} if costs is None else {"costs": costs}
    quick = TimingEngine(topology, gpus, job, algorithm.program, **extra).run()
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
       channel_cap=st.sampled_from([None, 23e9]), channels=st.integers(1, 4))
def test_lockstep_equals_events_on_a_switch(p, elements, collective, reduce_bandwidth,
                                            launch, per_message, channel_cap, channels):
    """Uneven blocks, empty blocks, combines, launch and per-message costs, channel caps and
    merged channels: the lockstep path is taken on a switch and agrees to the bit."""
    if collective != "allreduce":
        elements -= elements % p
    topology = switch("s", p, 0.7e-6, 90e9, reduce_bandwidth or float("inf"))
    costs = MessageCosts(launch=launch, per_message=per_message, channel_cap=channel_cap)
    quick, full = both(topology, collective, p, 4 * elements, {"channels": channels}, costs)
    assert quick.path == "lockstep"
    same(quick, full)


def test_lockstep_on_a_cluster_and_the_fallback_with_several_lanes():
    """One channel on the rail cluster: the ring's pairs cross disjoint links (NVLink in a
    node, one rail between nodes), so lockstep; four channels are four lanes sharing
    NVLink, so the events run."""
    topology = load_topology(CLUSTER, {"nodes": 3})
    quick, full = both(topology, "allreduce", 24, 3 << 20)
    assert quick.path == "lockstep"
    same(quick, full)
    quick, full = both(topology, "allreduce", 24, 3 << 20, {"channels": 4})
    assert quick.path == "full"
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
            exchanges = list(algorithm.program.lockstep(job))
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
