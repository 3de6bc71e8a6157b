"""The layer-periodic path: a ZeRO-3 step of many identical layers from three runs of a few
layers per stage, checked by the growth per layer, against the shared simulation."""

from __future__ import annotations

import pytest

from collsim.api import load_topology
from collsim.workloads import periodic
from collsim.workloads.loader import load_workload
from collsim.workloads.results import KindStats, RankTimes, StepResult, format_result
from collsim.workloads.step import run_workload
from tests.test_workloads_alone import fields

ZERO3 = "workloads/llama-7b-zero3.yaml"
SMALL = {"model.layers": 12, "model.parameters": "1.2B", "parallelism.micro_batches": 2}


def result(step: float, rank: float, kind: float) -> StepResult:
    """A step result whose times are ``step``, ``rank`` (one GPU's) and ``kind``."""
    return StepResult("w", 1, {}, step, rank, 0.0, step - rank, None,
                      {"data allgather": KindStats(kind, kind, kind, 0.0)},
                      [RankTimes(rank, 0.0, step - rank, 0.0, step)])


def test_times_growing_by_the_same_amount_per_layer_extend_exactly():
    """Three runs growing by 2, 1 and 3 a layer: ten layers more add ten growths, and
    nothing moved."""
    runs = [result(10.0 + 2 * k, 4.0 + k, 5.0 + 3 * k) for k in range(3)]
    extended, moved = periodic.extend(*runs, extra=10)
    assert (extended.step_s, extended.compute_s, extended.bubble_s) == (34.0, 16.0, 18.0)
    assert extended.kinds["data allgather"].time_s == 41.0
    assert extended.ranks[0].end_s == 34.0
    assert moved == 0.0


def test_a_growth_still_changing_is_measured():
    """The step grows by 2 then 3: over 10 more layers the extension could be off by 10."""
    runs = [result(s, 1.0, 1.0) for s in (10.0, 12.0, 15.0)]
    extended, moved = periodic.extend(*runs, extra=10)
    assert extended.step_s == 45.0
    assert moved == pytest.approx(10 / 45)


@pytest.mark.parametrize("changes, why", [
    ({"parallelism.zero": 0}, "ZeRO-3"),
    ({"noise.jitter": 0.05}, "noise"),
    ({"model.layers": 8}, "layers per stage"),
])
def test_the_path_declines_steps_whose_layers_differ_or_are_few(changes, why):
    assert why in periodic.declines(load_workload(ZERO3, changes), 8)


def test_the_periodic_step_agrees_with_the_shared_simulation():
    """12 layers of ZeRO-3 on 16 GPUs over two nodes: every time within 1e-6 of the step
    of the shared simulation's (docs/engine.md#step-paths), the MFU within 1e-6 of itself."""
    machine = load_topology("h100-cluster", {"nodes": 2})
    workload = load_workload(ZERO3, SMALL)
    fast = run_workload(workload, machine, 16)
    exact = run_workload(workload, machine, 16, exact=True)
    assert fast.path == "periodic" and exact.path == "shared"
    assert "calls timed: periodic (a few layers per stage" in format_result(fast)
    got, want = fields(fast), fields(exact)
    assert got.keys() == want.keys()
    for key, value in want.items():
        if key == ".mfu":
            assert got[key] == pytest.approx(value, rel=1e-6)
        else:
            assert got[key] == pytest.approx(value, abs=1e-6 * exact.step_s), key


def test_a_growth_that_changes_sends_the_step_down_the_alone_path(monkeypatch):
    """With no change allowed, the check fails and the whole step runs; ``fallback`` says
    why."""
    monkeypatch.setattr(periodic, "CHECK", -1.0)
    machine = load_topology("switch-64")
    fast = run_workload(load_workload(ZERO3, SMALL), machine, 8)
    assert fast.path == "alone"
    assert fast.fallback.startswith("periodic: the growth per layer")
