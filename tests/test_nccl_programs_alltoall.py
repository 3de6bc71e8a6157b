"""NCCL's alltoall (grouped send/recv over channels): data against numpy for p = 1..40 and
channel counts, the closed form on the ideal switch for channel counts that divide p-1 and
that do not, and its two ends: one channel is the pairwise exchange, p-1 channels direct."""

from __future__ import annotations

import numpy as np
import pytest

from collsim.algorithms import REGISTRY
from collsim.engine.data import check_algorithm
from collsim.hardware.topology import switch
from collsim.program import Job
from collsim.simulate import make_job, simulate
from tests.test_nccl_algorithms import DTYPES


def test_data_for_1_to_40_ranks_and_channel_counts():
    program = REGISTRY["alltoall", "nccl_p2p"].program
    for p in range(1, 41):
        for channels in (1, 2, 3, 7, 64):
            dtype = DTYPES[(p + channels) % len(DTYPES)]
            count = (0, 1, p, 3 * p + 2, 5 * p)[(p + channels) % 5]
            job = Job("alltoall", p, count, np.dtype(dtype).itemsize,
                      params={"channels": channels})
            check_algorithm(program, job, "sum", dtype, seed=p + channels)


def test_closed_form_on_the_switch_and_the_two_ends():
    machine = switch("ideal", 16, 0.7e-6, 50e9)
    for p in (2, 5, 9, 16):
        size = 4 * p * 64 * 5
        for channels in (1, 2, 3, 4, 15, 64):
            result = simulate(machine, "alltoall", "nccl_p2p", p, size, {"channels": channels})
            assert result.time_s == pytest.approx(result.analytic_time_s, rel=1e-9)
            rounds = -(-(p - 1) // min(channels, p - 1))
            assert result.analytic_time_s == pytest.approx(
                rounds * 1.4e-6 + (p - 1) / p * size / 50e9, rel=1e-12)
        one = simulate(machine, "alltoall", "nccl_p2p", p, size, {"channels": 1}).time_s
        assert one == pytest.approx(simulate(machine, "alltoall", "pairwise", p, size).time_s,
                                    rel=1e-12)
        every = simulate(machine, "alltoall", "nccl_p2p", p, size, {"channels": p - 1}).time_s
        assert every == pytest.approx(simulate(machine, "alltoall", "direct", p, size).time_s,
                                      rel=1e-12)


def test_each_channel_is_a_lane_of_its_own():
    machine = switch("ideal", 16, 0.7e-6, 50e9)
    algorithm = REGISTRY["alltoall", "nccl_p2p"]
    assert make_job(machine, algorithm, 16, 4096, {"channels": 4})[0].lanes == (1,) * 4
    assert make_job(machine, algorithm, 3, 4096, {"channels": 8})[0].lanes == (1, 1)
