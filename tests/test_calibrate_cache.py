"""The fit's simulations (collsim/calibrate/fit.py ``Model``): a point is simulated again only
when a figure changes its cost model after the launch, and the times it gives are the ones a
fresh simulation of the moved machine gives."""

from __future__ import annotations

import math

import numpy as np
import pytest

from collsim.calibrate.cases import Case, case_from_run, shape
from collsim.calibrate.figures import apply, resolved
from collsim.calibrate.fit import FitProgress, Model
from collsim.calibrate.predict import pick, simulate_pick, with_figures
from collsim.hardware.loader import load_topology
from collsim.hardware.shipped import resolve_topology
from collsim.nccltests import run_from_results
from tests.test_calibrate import DGX, _rows

NAMES = ["launch", "latency.LL", "latency.Simple", "latency.network", "reachable.nvlink",
         "reachable.network", "reachable.nvls", "efficiency.LL", "efficiency.LL128"]
MOVES = [{}, {"launch": 2.0}, {"latency.Simple": 0.6}, {"latency.LL": 1.7},
         {"reachable.nvls": 0.9, "efficiency.LL": 1.5},
         {"launch": 0.5, "latency.network": 3.0, "reachable.network": 0.8,
          "reachable.nvlink": 0.9, "efficiency.LL128": 0.7}]


def _node_case() -> Case:
    """One DGX H100: ring LL below 2 MiB, NVLS from there."""
    rows = _rows(load_topology(DGX), "allreduce", 8, [2**k for k in range(10, 27, 2)])
    run = run_from_results(rows, topology="dgx-h100", gpu_name="NVIDIA H100 80GB HBM3",
                           gpus_per_node=8)
    return case_from_run(run, DGX)


def _two_node_case() -> Case:
    """Two H100 nodes: NCCL's tree and its NVLS tree as NCCL picks them, and its ring under
    LL and Simple, measured as the preset simulates them."""
    topology, gpus = shape(resolve_topology("h100-cluster"), 2, 8, {}, "toy")
    sizes = [2**12, 2**16, 2**20, 2**24, 2**28, 2**14, 2**22]
    picks = [pick(topology, "allreduce", s, gpus) for s in sizes[:5]]
    picks += [pick(topology, "allreduce", 2**14, gpus, "ring", "LL"),
              pick(topology, "allreduce", 2**22, gpus, "ring", "Simple")]
    times = [simulate_pick(topology, "allreduce", s, gpus, p).time_s
             for s, p in zip(sizes, picks, strict=True)]
    return Case("toy", topology, gpus, "allreduce", sizes, times, picks, 2, 8)


def _fresh(case: Case, factors: dict[str, float]) -> list[float]:
    """Each size simulated afresh on the machine the factors describe."""
    machine = case.topology.machine
    topology = with_figures(case.topology, apply(resolved(machine.nccl, machine.gpu.arch),
                                                 factors))
    return [simulate_pick(topology, case.collective, s, case.gpus, p).time_s
            for s, p in zip(case.sizes, case.picks, strict=True)]


@pytest.mark.parametrize("make", [_node_case, _two_node_case])
def test_cached_times_are_those_of_a_fresh_simulation(make):
    case = make()
    model = Model([case], NAMES)
    for factors in MOVES:
        u = np.array([math.log(factors.get(n, 1.0)) for n in NAMES])
        assert model.times(u) == pytest.approx(_fresh(case, factors), rel=1e-9), factors


def test_a_figure_simulates_again_only_the_points_whose_costs_it_changes():
    """On one node NVLS pays Simple's NVLink latency once per call, before any rank starts:
    moving it simulates nothing; LL's efficiency moves the LL sizes only, NVLS's reach the
    NVLS sizes only; and a second fit over the same points simulates nothing new."""
    case = _node_case()
    protocols = [p.protocol for p in case.picks]
    assert "LL" in protocols and "Simple" in protocols
    progress = FitProgress()
    model = Model([case], NAMES, progress)
    u = np.zeros(len(NAMES))
    model.times(u)
    assert progress.simulations == len(case.sizes)

    def moved(name: str, factor: float) -> int:
        before = progress.simulations
        v = u.copy()
        v[NAMES.index(name)] = math.log(factor)
        model.times(v)
        return progress.simulations - before

    assert moved("launch", 3.0) == 0
    assert moved("latency.Simple", 0.5) == 0
    assert moved("efficiency.LL", 1.5) == protocols.count("LL")
    nvls = sum(p.algorithm == "nvls" for p in case.picks)
    assert nvls > 0 and moved("reachable.nvls", 0.9) == nvls
    again = Model([case], NAMES[:3], progress, model.points)
    before = progress.simulations
    again.times(np.array([0.0, 0.0, math.log(0.5)]))
    assert progress.simulations == before


def test_tree_latencies_are_paid_per_call_and_not_simulated_again():
    """NCCL's trees pay their hops' latencies once per call (their per-call term), so a
    protocol's latency scale moves their times without simulating them again; the ring pays
    them per step, and is simulated again under its own protocol's scale."""
    case = _two_node_case()
    trees = [p.algorithm in ("nccl_tree", "nvls_tree") for p in case.picks]
    assert any(trees) and not all(trees)
    progress = FitProgress()
    model = Model([case], NAMES, progress)
    base = model.times(np.zeros(len(NAMES)))
    for name in ("latency.LL", "latency.Simple", "latency.network"):
        u = np.zeros(len(NAMES))
        u[NAMES.index(name)] = math.log(2.0)
        before = progress.simulations
        times = model.times(u)
        rings = [not tree and (name in (f"latency.{p.protocol}", "latency.network"))
                 for tree, p in zip(trees, case.picks, strict=True)]
        assert progress.simulations - before == sum(rings), name
        assert any(t != b for t, b, tree in zip(times, base, trees, strict=True) if tree)
