"""Several collective calls on one simulation: they share links max-min fairly, each has
its own rendezvous and start, and reports its finish times when it completes."""

from __future__ import annotations

import pytest

from collsim.algorithms import get_algorithm
from collsim.engine.costs import MessageCosts
from collsim.engine.simulation import Simulation
from collsim.engine.timing import TimingEngine
from collsim.errors import SimulationError
from collsim.hardware.topology import switch
from collsim.program import Job, Recv, Send
from collsim.simulate import make_job

LATENCY, BANDWIDTH = 1e-6, 10e9
RING = get_algorithm("allreduce", "ring")


def ring_job(machine, p: int, size: int) -> Job:
    job, _ = make_job(machine, RING, p, size, {})
    return job


def solo_time(p: int, size: int) -> float:
    machine = switch("solo", p, LATENCY, BANDWIDTH)
    job, gpus = make_job(machine, RING, p, size, {})
    return TimingEngine(machine, gpus, job, RING.program).run().time


def one_message(n_bytes: int):
    """A program in which rank 0 sends ``n_bytes`` (float32) to rank 1 with tag 0."""
    def program(rank: int, job: Job):
        if rank == 0:
            yield Send(1, 0, 0, n_bytes // 4)
        else:
            yield Recv(0, 0, 0, n_bytes // 4)
    return program


def test_two_calls_on_disjoint_halves_of_a_switch_each_take_their_solo_time():
    p, size = 8, 8 * 4 * 1000
    machine = switch("s", 2 * p, LATENCY, BANDWIDTH)
    sim = Simulation(machine)
    job = ring_job(machine, p, size)
    first = sim.call(job, list(range(p)), RING.program)
    second = sim.call(job, list(range(p, 2 * p)), RING.program)
    sim.run()
    assert first.result.time == second.result.time == solo_time(p, size)
    assert first.result.transfers == second.result.transfers == 2 * p * (p - 1)


def test_two_rings_on_the_same_gpus_share_every_port_in_half():
    # Both rings post the same transfers at the same instants: every port carries two of
    # them at once, so each step takes alpha + 2 (n/p) beta, 2(p-1) steps.
    p, size = 4, 4 * 4 * 1000
    machine = switch("s", p, LATENCY, BANDWIDTH)
    sim = Simulation(machine)
    job = ring_job(machine, p, size)
    calls = [sim.call(job, list(range(p)), RING.program) for _ in range(2)]
    sim.run()
    want = 2 * (p - 1) * (2 * LATENCY + 2 * (size / p) / BANDWIDTH)
    for call in calls:
        assert call.result.time == pytest.approx(want, rel=1e-12)


def test_a_late_call_slows_an_early_one_as_max_min_predicts():
    # A sends n from GPU 0 to GPU 1 from t = 0; B sends n from GPU 0 to GPU 2 from t0. They
    # share GPU 0's port in half from t0: A's last byte leaves at 2n/B - t0, then B has
    # B·t0 bytes left alone: B's last byte leaves at 2n/B.
    n, t0 = 4_000_000, 100e-6
    machine = switch("s", 3, LATENCY, BANDWIDTH)
    sim = Simulation(machine)
    job = Job("broadcast", 2, n // 4)
    a = sim.call(job, [0, 1], one_message(n))
    b = sim.call(job, [0, 2], one_message(n), start=t0)
    sim.run()
    assert a.result.finish[1] == pytest.approx(2 * n / BANDWIDTH - t0 + 2 * LATENCY, rel=1e-12)
    assert b.result.start == t0
    assert b.result.time == pytest.approx(2 * n / BANDWIDTH - t0 + 2 * LATENCY, rel=1e-12)
    assert b.result.finish[1] == pytest.approx(2 * n / BANDWIDTH + 2 * LATENCY, rel=1e-12)


def test_a_call_started_by_another_calls_completion_takes_its_solo_time_after_it():
    p, size = 4, 4 * 4 * 512
    machine = switch("s", p, LATENCY, BANDWIDTH)
    sim = Simulation(machine)
    job = ring_job(machine, p, size)
    second = sim.call(job, list(range(p)), RING.program, start=None)
    ends: list[float] = []

    def then(call):
        ends.append(max(call.result.finish))
        second.start()

    first = sim.call(job, list(range(p)), RING.program, on_done=then)
    sim.run()
    assert [second.result.start] == ends == [first.result.time]
    assert second.result.time == pytest.approx(solo_time(p, size), rel=1e-12)


def test_each_call_pays_the_launch_cost_from_its_own_start():
    n, launch = 4000, 5e-6
    machine = switch("s", 4, LATENCY, BANDWIDTH)
    sim = Simulation(machine, MessageCosts(launch=launch))
    job = Job("broadcast", 2, n // 4)
    a = sim.call(job, [0, 1], one_message(n))
    b = sim.call(job, [2, 3], one_message(n), start=1e-3)
    sim.run()
    alone = launch + 2 * LATENCY + n / BANDWIDTH
    assert a.result.time == pytest.approx(alone, rel=1e-12)
    assert b.result.time == pytest.approx(alone, rel=1e-12)
    assert b.result.finish[1] == pytest.approx(1e-3 + alone, rel=1e-12)


def test_calls_have_their_own_rendezvous():
    # Same ranks, same tag, different sizes: across calls they would meet and mismatch.
    machine = switch("s", 2, LATENCY, BANDWIDTH)
    sim = Simulation(machine)
    small, large = sim.call(Job("broadcast", 2, 10), [0, 1], one_message(40)), \
        sim.call(Job("broadcast", 2, 20), [0, 1], one_message(80))
    sim.run()
    assert small.result.transfers == large.result.transfers == 1


def test_calls_combine_in_turn_on_a_shared_gpu():
    # Two calls each send n bytes into GPU 1, combining at 1/gamma: the transfers share
    # GPU 1's port (both arrive at 2n/B + 2L), then the combines run one after the other.
    n, reduce = 8000, 2e9
    machine = switch("s", 3, LATENCY, BANDWIDTH, reduce_bandwidth=reduce)

    def combine(rank, job):
        if rank == 0:
            yield Send(1, 0, 0, n // 4)
        else:
            yield Recv(0, 0, 0, n // 4, reduce=True)

    sim = Simulation(machine)
    a = sim.call(Job("reduce", 2, n // 4), [0, 1], combine)
    b = sim.call(Job("reduce", 2, n // 4), [2, 1], combine)
    sim.run()
    arrive = 2 * n / BANDWIDTH + 2 * LATENCY
    assert sorted([a.result.finish[1], b.result.finish[1]]) == pytest.approx(
        [arrive + n / reduce, arrive + 2 * n / reduce], rel=1e-12)


def test_a_call_never_started_or_stuck_is_an_error_naming_the_call():
    machine = switch("s", 4, LATENCY, BANDWIDTH)
    sim = Simulation(machine)
    sim.call(Job("broadcast", 2, 10), [0, 1], one_message(40))
    sim.call(Job("broadcast", 2, 10), [2, 3], one_message(40), start=None)
    with pytest.raises(SimulationError, match="call 1: the call was never started"):
        sim.run()

    def stuck(rank, job):
        if rank == 1:
            yield Recv(0, 7, 0, 1)

    sim = Simulation(machine)
    sim.call(Job("broadcast", 2, 10), [0, 1], one_message(40))
    sim.call(Job("broadcast", 2, 10), [2, 3], stuck)
    with pytest.raises(SimulationError, match=r"call 1: at t=.*rank 1 is blocked .*tag=7"):
        sim.run()


def test_calls_check_their_gpus_and_start_time():
    machine = switch("s", 4, LATENCY, BANDWIDTH)
    sim = Simulation(machine)
    with pytest.raises(SimulationError, match="2 GPUs given for 3 ranks"):
        sim.call(Job("broadcast", 3, 10), [0, 1], one_message(40))
    with pytest.raises(SimulationError, match="distinct GPUs"):
        sim.call(Job("broadcast", 2, 10), [1, 1], one_message(40))
    call = sim.call(Job("broadcast", 2, 10), [0, 1], one_message(40), start=None)
    call.start(at=2e-6)
    with pytest.raises(SimulationError, match="only once"):
        call.start()
    sim.run()
    late = sim.call(Job("broadcast", 2, 10), [0, 1], one_message(40), start=None)
    with pytest.raises(SimulationError, match="before now"):
        late.start(at=0.0)


def test_ranks_admitted_one_by_one_meet_and_report_their_own_finish():
    """Rank 1 is admitted 3 ms after rank 0 on a simulation whose environment someone else
    runs: the message moves from 3 ms on; each rank's finish reaches on_rank_done, and the
    launch cost is charged from each rank's own admission."""
    import simpy

    machine = switch("pair", 2, LATENCY, BANDWIDTH)
    n = 4000
    env = simpy.Environment()
    sim = Simulation(machine, MessageCosts(launch=2e-6), env=env)
    sim.attach()
    job = Job("sendrecv", 2, n // 4, 4)
    call = sim.call(job, [0, 1], one_message(n), start=None)
    finished = {}
    call.on_rank_done = lambda c, rank: finished.__setitem__(rank, env.now)

    def later():
        call.admit(0)
        yield env.timeout(3e-3)
        call.admit(1)
        with pytest.raises(SimulationError):
            call.admit(1)

    env.process(later())
    env.run()
    sim.check()
    expected = 3e-3 + 2e-6 + 2 * LATENCY + n / BANDWIDTH
    assert finished[1] == pytest.approx(expected, rel=1e-12)
    assert finished[0] == pytest.approx(expected, rel=1e-12)
    assert call.result.start == 0.0
    assert call.result.time == pytest.approx(expected, rel=1e-12)
