"""Large calls timed from three short runs of their loops (collsim/calibrate/loops.py): the
carried time is the full simulation's, on the 4-node shape of the walkthrough's log, also
with its figures moved; calls too short to gain, or whose runs are not steady, run in full."""

from __future__ import annotations

import numpy as np
import pytest

from collsim.calibrate.cases import Case, shape
from collsim.calibrate.figures import apply, resolved
from collsim.calibrate.fit import FitProgress, Model
from collsim.calibrate.loops import Loops, carried, plan_loops
from collsim.calibrate.predict import pick, pick_plan, simulate_pick, with_figures
from collsim.hardware.shipped import resolve_topology

GIB = 2**30


@pytest.fixture(scope="module")
def four_nodes():
    """h100-cluster shaped as the walkthrough's 4-node log: 4 nodes of 8 H100s."""
    return shape(resolve_topology("h100-cluster"), 4, 8, {}, "toy")


@pytest.mark.parametrize("size, algorithm, factors", [
    (4 * GIB, "ring", {}),  # 4 loops, from runs of 1, 2 and 3
    (256 * 2**20, "nvls_tree", {}),  # 32 chunks, from runs of 12, 14 and 16
    (256 * 2**20, "nvls_tree", {"reachable.network": 0.5, "reachable.nvls": 0.8}),
])
def test_a_long_call_is_its_short_runs_carried_on(four_nodes, size, algorithm, factors):
    topology, gpus = four_nodes
    machine = topology.machine
    topology = with_figures(topology, apply(resolved(machine.nccl, machine.gpu.arch), factors))
    chosen = pick(topology, "allreduce", size, gpus)
    assert chosen.algorithm == algorithm
    params, _ = pick_plan(topology, "allreduce", size, gpus, chosen)
    plan = plan_loops(topology, "allreduce", algorithm, gpus, size, params)
    assert plan is not None and plan.sizes[-1] < size
    runs = [simulate_pick(topology, "allreduce", s, gpus, chosen, params).time_s
            for s in plan.sizes]
    full = simulate_pick(topology, "allreduce", size, gpus, chosen).time_s
    assert carried(plan, runs) == pytest.approx(full, rel=1e-12)


def test_calls_too_short_to_gain_run_in_full(four_nodes):
    topology, gpus = four_nodes
    for size, algorithm in ((2 * GIB, "ring"), (128 * 2**20, "nvls_tree"),
                            (4 * GIB + 2**20, "ring"), (2**20, "nccl_tree")):
        chosen = pick(topology, "allreduce", size, gpus, algorithm)
        params, _ = pick_plan(topology, "allreduce", size, gpus, chosen)
        assert plan_loops(topology, "allreduce", algorithm, gpus, size, params) is None, size


def test_runs_whose_periods_differ_are_not_carried():
    plan = Loops(64, (12, 14, 16), (12, 14, 16))
    assert carried(plan, [1.0, 1.2, 1.4]) == pytest.approx(1.4 + 0.1 * 48)
    assert carried(plan, [1.0, 1.2, 1.41]) is None


def test_the_model_times_a_long_call_from_its_runs(four_nodes):
    """1, 2 and 4 GiB: the 4 GiB point is carried from the 1 and 2 GiB points and a 3 GiB
    run, three simulations, and every time is the full simulation's."""
    topology, gpus = four_nodes
    sizes = [GIB, 2 * GIB, 4 * GIB]
    picks = [pick(topology, "allreduce", s, gpus, "ring", "Simple") for s in sizes]
    full = [simulate_pick(topology, "allreduce", s, gpus, p).time_s
            for s, p in zip(sizes, picks, strict=True)]
    case = Case("toy", topology, gpus, "allreduce", sizes, full, picks, 4, 8)
    progress = FitProgress()
    times = Model([case], ["launch", "reachable.network"], progress).times(np.zeros(2))
    assert progress.simulations == 3
    np.testing.assert_allclose(times, full, rtol=1e-12)
