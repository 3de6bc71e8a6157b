"""The timing engine against closed forms and hand-computed schedules."""

import math

import pytest

from collsim.engine.timing import TimingEngine
from collsim.errors import InputError, SimulationError
from collsim.hardware.topology import fully_connected, switch
from collsim.program import Job, Recv, Send
from collsim.simulate import simulate

LATENCY, BANDWIDTH, REDUCE = 1.3e-6, 80e9, 700e9
ALPHA, BETA, GAMMA = 2 * LATENCY, 1 / BANDWIDTH, 1 / REDUCE


def close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * abs(b)


@pytest.fixture(scope="module")
def machine():
    return switch("ideal", 64, LATENCY, BANDWIDTH, REDUCE)


@pytest.mark.parametrize("p", range(2, 65))
def test_ring_allreduce_equals_its_closed_form_for_every_p(machine, p):
    n = p * 4 * 1024  # divides evenly into p chunks of whole float32 elements
    want = 2 * (p - 1) * ALPHA + 2 * (p - 1) / p * n * BETA + (p - 1) / p * n * GAMMA
    result = simulate(machine, "allreduce", "ring", p, n)
    assert close(result.time_s, want), (result.time_s, want)
    assert close(result.analytic_time_s, want)
    assert result.transfers == 2 * p * (p - 1)


@pytest.mark.parametrize("p", [2, 3, 5, 8, 12, 17, 31, 32, 33, 48, 63, 64])
@pytest.mark.parametrize("root", [0, "last"])
def test_binomial_broadcast_and_reduce_equal_their_closed_forms(machine, p, root):
    n = 3 * 1024 * 4
    rounds = math.ceil(math.log2(p))
    params = {"root": p - 1 if root == "last" else 0}
    bcast = simulate(machine, "broadcast", "binomial", p, n, params).time_s
    reduce = simulate(machine, "reduce", "binomial", p, n, params).time_s
    assert close(bcast, rounds * (ALPHA + n * BETA))
    assert close(reduce, rounds * (ALPHA + n * BETA + n * GAMMA))


@pytest.mark.parametrize("p", [2, 6, 16, 29, 64])
def test_tree_allreduce_is_reduce_then_broadcast(machine, p):
    n = 4096
    rounds = math.ceil(math.log2(p))
    got = simulate(machine, "allreduce", "binomial", p, n).time_s
    assert close(got, 2 * rounds * ALPHA + rounds * n * (2 * BETA + GAMMA))


def test_fully_connected_path_is_one_hop():
    mesh = fully_connected("mesh", 16, 2e-6, 50e9)
    p, n = 16, 16 * 4 * 100
    want = 2 * (p - 1) * 2e-6 + 2 * (p - 1) / p * n / 50e9
    assert close(simulate(mesh, "allreduce", "ring", p, n).time_s, want)


def test_reductions_on_one_gpu_run_one_after_another():
    # Rank 0 receives and combines from ranks 1 and 2 in one step, over separate links:
    # both arrive at alpha + n*beta, then the GPU combines one message after the other.
    mesh = fully_connected("mesh", 3, 1e-6, 10e9, reduce_bandwidth=5e9)
    n_elems = 1000

    def program(rank, job):
        if rank == 0:
            yield (Recv(1, 0, 0, n_elems, reduce=True), Recv(2, 0, 0, n_elems, reduce=True))
        else:
            yield Send(0, 0, 0, n_elems)

    run = TimingEngine(mesh, [0, 1, 2], Job("reduce", 3, n_elems), program).run()
    n = n_elems * 4
    assert close(run.finish[0], 1e-6 + n / 10e9 + 2 * n / 5e9)
    assert close(run.finish[1], 1e-6 + n / 10e9)


def test_a_message_moves_only_when_both_sides_are_posted():
    # Rank 1 posts its receive late (after another exchange), so the send waits for it.
    mesh = fully_connected("mesh", 3, 1e-6, 10e9)

    def program(rank, job):
        if rank == 0:
            yield Send(1, 7, 0, 250)
        elif rank == 1:
            yield Recv(2, 0, 0, 250)
            yield Recv(0, 7, 0, 250)
        else:
            yield Send(1, 0, 0, 250)

    run = TimingEngine(mesh, [0, 1, 2], Job("broadcast", 3, 250), program).run()
    one = 1e-6 + 1000 / 10e9
    assert close(run.finish[0], 2 * one)
    assert close(run.time, 2 * one)


def test_deadlock_names_the_stuck_ranks_and_what_they_wait_on():
    def program(rank, job):
        if rank == 1:
            yield Recv(0, 5, 0, 10)

    with pytest.raises(SimulationError, match=r"rank 1 is blocked .*Recv\(peer=0, tag=5"):
        TimingEngine(switch("s", 4, 1e-6, 1e9), [0, 1, 2, 3], Job("broadcast", 4, 10),
                     program).run()


def test_sends_to_each_other_in_separate_steps_deadlock_rather_than_hang():
    def program(rank, job):
        yield Send(1 - rank, 0, 0, 4)
        yield Recv(1 - rank, 0, 0, 4)

    with pytest.raises(SimulationError, match="2 ranks cannot finish"):
        TimingEngine(switch("s", 2, 1e-6, 1e9), [0, 1], Job("allreduce", 2, 4), program).run()


def test_mismatched_message_sizes_are_an_error():
    def program(rank, job):
        yield Send(1, 0, 0, 4) if rank == 0 else Recv(0, 0, 0, 5)

    with pytest.raises(SimulationError, match="expects 5 elements"):
        TimingEngine(switch("s", 2, 1e-6, 1e9), [0, 1], Job("broadcast", 2, 5), program).run()


def test_bad_requests_are_input_errors(machine):
    with pytest.raises(InputError, match="do not fit"):
        simulate(machine, "allreduce", "ring", 65, 1024)
    with pytest.raises(InputError, match="no allreduce algorithm named 'rign'"):
        simulate(machine, "allreduce", "rign", 8, 1024)
    with pytest.raises(InputError, match="unknown collective"):
        simulate(machine, "allreduse", "ring", 8, 1024)
    with pytest.raises(InputError, match="whole number of float32"):
        simulate(machine, "allreduce", "ring", 8, 1023)
    with pytest.raises(InputError, match="root must be a rank"):
        simulate(machine, "broadcast", "binomial", 8, 1024, {"root": 8})
    with pytest.raises(InputError, match="takes no parameter 'chunk'"):
        simulate(machine, "allreduce", "ring", 8, 1024, {"chunk": 4})


def test_one_rank_and_zero_bytes(machine):
    assert simulate(machine, "allreduce", "ring", 1, 4096).time_s == 0
    zero = simulate(machine, "allreduce", "ring", 4, 0)
    assert close(zero.time_s, 2 * 3 * ALPHA)
    assert zero.algbw_GBps == 0


def test_a_send_carries_its_region_as_the_step_began_whatever_the_order_of_ops():
    # Ranks 0 and 1 swap element 0 in one step, each listing its receive first: both must
    # send their original value, in the data interpreter as in a real exchange.
    import numpy as np

    from collsim.engine.data import run_data

    def program(rank, job):
        yield (Recv(1 - rank, 0, 0, 1), Send(1 - rank, 0, 0, 1))

    buffers = [{"buf": np.array([10.0])}, {"buf": np.array([20.0])}]
    run_data(program, Job("allreduce", 2, 1), "sum", buffers)
    assert buffers[0]["buf"][0] == 20.0 and buffers[1]["buf"][0] == 10.0


def test_chunk_size_must_be_whole_elements(machine):
    with pytest.raises(InputError, match="not a whole number of float32 elements"):
        simulate(machine, "broadcast", "chain", 4, 4096, {"chunk_size": 1022})
