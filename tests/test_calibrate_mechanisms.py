"""The calibration figures that stand for one mechanism each (collsim/calibrate/figures.py):
NCCL's choice made as for a multiple of the size (``nccl.pick_scale``), recovered from logs
that switch elsewhere than NCCL's model; the Jacobian columns skipped from the picks alone
are the ones that are zero; a one-node fit moves no network figure."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collsim.calibrate import fit as fit_module
from collsim.calibrate.cases import Case, case_from_run, repicked, shape
from collsim.calibrate.figures import FIGURES, apply, calibrated, step_latency
from collsim.calibrate.fit import Model, _levenberg_marquardt, calibrate, unseen
from collsim.calibrate.predict import Pick, with_figures
from collsim.calibrate.writer import calibrated_yaml
from collsim.hardware.loader import load_topology, topology_from_text
from collsim.hardware.machine import ProtocolOverride
from collsim.hardware.shipped import resolve_topology
from collsim.nccl.choice import channels, choose
from collsim.nccl.system import NcclSystem
from collsim.nccl.tuning import model
from collsim.nccltests import read_logs
from tests.test_calibrate import DGX, _log, _rows
from tests.test_machine_declarations import NODE


@settings(max_examples=30, deadline=None)
@given(st.integers(min_value=3, max_value=33), st.sampled_from([0.25, 0.5, 2.0, 4.0]),
       st.sampled_from(["allreduce", "allgather", "reducescatter"]),
       st.sampled_from([(1, 8), (2, 8), (4, 8), (2, 1)]))
def test_pick_scale_chooses_as_for_a_multiple_of_the_size(log2, scale, collective, shape):
    nodes, per_node = shape
    plain = NcclSystem(arch=90, nodes=nodes, gpus_per_node=per_node, nvlink_links=18,
                       nics_per_node=8 if nodes > 1 else 0,
                       nic_bandwidth=50.0 if nodes > 1 else 0.0, nvls=True)
    scaled = dataclasses.replace(plain, pick_scale=scale)
    size = 2**log2
    picked = choose(scaled, collective, size)
    judged = choose(plain, collective, round(size * scale))
    assert (picked.algorithm, picked.protocol) == (judged.algorithm, judged.protocol)
    assert (picked.channels, picked.threads) == channels(
        model(plain), collective, picked.algorithm, picked.protocol, size)
    assert picked.size == size


@pytest.mark.parametrize("name, value", [("pick_scale", 2.0), ("tree_rating", 1.5)])
def test_a_choice_figure_is_read_and_refused_outside_its_range(name, value):
    """nccl.pick_scale and nccl.tree_rating: read as given, absent as None, refused at their
    key outside 1/16..16 or when not a number."""
    key = f"nccl.{name}"
    assert getattr(topology_from_text(NODE, {key: value}).machine.nccl, name) == value
    assert getattr(topology_from_text(NODE).machine.nccl, name) is None
    for bad in (0, 20, "twice", True):
        with pytest.raises(Exception, match=name) as info:
            topology_from_text(NODE, {key: bad})
        assert getattr(info.value, "key", key) == key


def test_a_calibration_finds_where_nccl_switches_and_writes_it(tmp_path):
    preset = load_topology(DGX)
    truth = dataclasses.replace(apply(preset.machine.nccl, {"launch": 1.3}), pick_scale=4.0)
    machine = with_figures(preset, truth)
    noise = np.random.default_rng(7)
    sizes = [2**k for k in range(10, 27)]  # 1 KiB .. 64 MiB: LL, LL128, Simple, NVLS
    log = tmp_path / "switching.txt"
    log.write_text(_log([_rows(machine, "allreduce", 8, sizes, noise),
                         _rows(machine, "allreduce", 4, sizes, noise)]))
    cases = [case_from_run(run, DGX) for run in read_logs(log)]
    assert any(repicked(c, 4.0).picks != c.picks for c in cases)
    result = calibrate(cases, names=["launch", "latency.LL", "reachable.nvlink"])
    fitted = {f.name: f for f in result.figures}
    assert fitted["pick_scale"].determined and fitted["pick_scale"].value == 4.0
    assert fitted["launch"].factor == pytest.approx(1.3, rel=0.05)
    assert all(e.after_median < 0.02 for e in result.errors)
    assert max(e.before_p90 for e in result.errors) > 0.1  # the model's switch sizes miss
    out = tmp_path / "cal.yaml"
    out.write_text(calibrated_yaml(DGX.read_text(), "dgx-h100", "cal", result, cases))
    assert "pick_scale: 4  # fitted" in out.read_text()
    written = load_topology(out)
    assert written.machine.nccl.pick_scale == 4.0
    assert [p.protocol for p in case_from_run(read_logs(log)[0], out).picks] == \
        [p.protocol for p in repicked(cases[0], 4.0).picks]


def test_no_switch_in_the_logs_leaves_pick_scale_undetermined():
    preset = load_topology(DGX)
    rows = _rows(preset, "allreduce", 8, [2**k for k in range(28, 31)])  # NVLS throughout
    from collsim.nccltests import run_from_results
    run = run_from_results(rows, topology="dgx-h100", gpu_name="NVIDIA H100 80GB HBM3",
                           gpus_per_node=8)
    case = case_from_run(run, DGX)
    result = calibrate([case], names=["launch"])
    pick = next(f for f in result.figures if f.name == "pick_scale")
    assert not pick.determined and "near a switch" in pick.why
    assert result.nccl.pick_scale is None


def test_the_columns_skipped_from_the_picks_are_the_zero_ones():
    preset = load_topology(DGX)
    rows = _rows(preset, "allreduce", 8, [4**k for k in range(4, 11)])  # ring, no NVLS
    from collsim.nccltests import run_from_results
    run = run_from_results(rows, topology="dgx-h100", gpu_name="NVIDIA H100 80GB HBM3",
                           gpus_per_node=8)
    case = case_from_run(run, DGX)
    names = [f.name for f in FIGURES if f.kind != "pick"]
    skipped = unseen([case], names)
    assert {names[j] for j in skipped} >= {"latency.network", "reachable.network",
                                             "reachable.nvls"}
    m = Model([case], names)
    wide = np.full(len(names), 3.0)
    jacobian = m.jacobian(np.zeros(len(names)), -wide, wide)
    for j in skipped:
        assert np.abs(jacobian[:, j]).max() < 1e-9, names[j]
    assert any(np.abs(jacobian[:, j]).max() > 0.05 for j in range(len(names))
               if j not in skipped)


class _MisleadingSlopes:
    """Residuals u - target, but a Jacobian of the wrong sign: what a difference quotient
    across a jump in the simulated times (a figure that changes NCCL's channel count) gives
    Gauss-Newton. Every damped step then climbs."""

    def __init__(self, target):
        self.target = np.asarray(target, dtype=float)

    def residuals(self, u):
        return np.asarray(u, dtype=float) - self.target

    def jacobian(self, u, low, high, unseen=()):
        return -np.eye(len(self.target))


def test_the_fit_moves_one_figure_at_a_time_when_gauss_newton_steps_fail():
    """With slopes that point the wrong way no Gauss-Newton step lowers the cost; the fit
    falls back on moving one figure at a time, and so gets near the optimum within bounds
    (x0.61 and x1.65 steps, then x0.86 and x1.16), where it used to stop at the start."""
    model = _MisleadingSlopes([1.0, -0.6])
    low, high = np.full(2, -3.0), np.full(2, 3.0)
    u, _ = _levenberg_marquardt(model, low, high, max_iterations=12)
    assert np.abs(u - model.target).max() <= 0.15 / 2 + 1e-12
    # A bound is respected: the first figure may not rise above 0.4.
    u, _ = _levenberg_marquardt(model, low, np.array([0.4, 3.0]), max_iterations=12)
    assert u[0] == pytest.approx(0.4)
    assert abs(u[1] - model.target[1]) <= 0.15 / 2 + 1e-12


class _Coupled:
    """Residuals (u0 - 3, u1 - u0) with their exact Jacobian: the second figure follows the
    first, which wants to rise past its bound."""

    def __init__(self):
        self.calls = 0

    def residuals(self, u):
        self.calls += 1
        return np.array([u[0] - 3.0, u[1] - u[0]])

    def jacobian(self, u, low, high, unseen=()):
        return np.array([[1.0, 0.0], [-1.0, 1.0]])


def test_a_figure_at_its_bound_is_held_while_the_others_move():
    """With the first figure capped at 1 the optimum is (1, 1). A step that counts on the
    first figure rising, clipped at its bound, leaves the second behind; held at its bound
    the first makes the second's step exact, and the fit gets there in two iterations."""
    model = _Coupled()
    u, iterations = _levenberg_marquardt(model, np.array([-3.0, -3.0]), np.array([1.0, 3.0]),
                                         max_iterations=2)
    assert u == pytest.approx([1.0, 1.0], abs=1e-3)
    assert model.calls <= 6


class _Timed:
    def __init__(self, time_s):
        self.time_s = time_s


def _capped_times(topology, collective, size, gpus, pick):
    """A machine whose LL128 sizes run at the protocol's share of a tenth of NVLink's reach
    and whose Simple sizes at the lesser of NVLink's reach and six NICs: at the preset the
    network binds Simple, so lowering NVLink's reach and lowering LL128's efficiency slow the
    same sizes by the same share (their Jacobian columns are one), until NVLink falls below
    the network."""
    figures = topology.machine.nccl
    share = (figures.overrides.get(("LL128", None)) or ProtocolOverride()).efficiency or 1.0
    nvlink, network = figures.reached("nvlink"), figures.reached("network")
    rate = share * 0.1 * nvlink if pick.protocol == "LL128" else min(nvlink, 6 * network)
    return _Timed(10e-6 + size / rate)


@pytest.mark.parametrize("looks", [1, 2])
def test_a_second_look_frees_a_cap_the_preset_hid(monkeypatch, looks):
    """Measured: LL128 at half the preset's efficiency, NVLink as the preset has it. At the
    preset NVLink's reach (first in the registry) is kept and LL128's efficiency taken for a
    copy of it; the fit then lowers NVLink, which slows the Simple sizes too, and misses them.
    Read again at that point, the two columns differ, and a second fit matches every size."""
    monkeypatch.setattr(fit_module, "simulate_pick", _capped_times)
    monkeypatch.setattr(fit_module, "LOOKS", looks)
    topology, gpus = shape(resolve_topology("h100-cluster"), 2, 8, {}, "toy")
    sizes = [2**k for k in range(20, 31)]
    picks = [Pick("ring", "LL128" if s < 2**26 else "Simple", 16) for s in sizes]
    truth = with_figures(topology, apply(topology.machine.nccl, {"efficiency.LL128": 0.5}))
    measured = [_capped_times(truth, "allgather", s, gpus, p).time_s
                for s, p in zip(sizes, picks, strict=True)]
    case = Case("toy", topology, gpus, "allgather", sizes, measured, picks, 2, 8)
    names = ["reachable.nvlink", "reachable.network", "efficiency.LL128"]
    result = calibrate([case], names=names, pick_scales=())
    fitted = {f.name: f for f in result.figures}
    if looks == 1:
        assert not fitted["efficiency.LL128"].determined
        assert result.errors[0].after_p90 > 0.1
    else:  # the LL128 sizes fix the product; the Simple ones that NVLink stays above six NICs
        nvlink, share = fitted["reachable.nvlink"].factor, fitted["efficiency.LL128"].factor
        assert fitted["efficiency.LL128"].determined and share < 1.0
        assert nvlink * share == pytest.approx(0.5, rel=0.01)
        assert result.errors[0].after_p90 < 0.01


def _latency_and_bandwidth(topology, collective, size, gpus, pick):
    """A call across nodes that pays 20 of the network's per-step latencies and then moves
    its bytes at the rings' reach of the NICs, and 1/4 of them over PCIe: three figures, each
    seen by every size, the latency mostly by the small ones."""
    figures = topology.machine.nccl
    latency = step_latency(figures, "Simple", "ring", "network")
    return _Timed(20 * latency + size / figures.reached("network")
                  + size / (4 * figures.reached("pcie")))


@pytest.mark.parametrize("capped", [False, True])
def test_two_sizes_do_not_send_a_figure_to_explain_their_scatter(monkeypatch, capped):
    """Measured: the preset's machine, its 2 sizes off by +6% and -3% (a log's scatter). Three
    figures free on two sizes (two told apart, the third a copy) pass through both: the rings'
    reach of the NICs runs away (x0.74) with the latency the other way to absorb the
    scatter, and the largest held-out size comes out 23% slow, where the preset is exact.
    With one size to spare (``SPARE_SIZES``) the fit frees one figure, the one that explains
    the errors best (here the latency), which stays within 6% of the preset, and every other
    size is predicted within the scatter."""
    monkeypatch.setattr(fit_module, "simulate_pick", _latency_and_bandwidth)
    if not capped:  # every figure the Jacobian tells apart is free, as many as the sizes
        monkeypatch.setattr(fit_module, "figure_budget", lambda sizes: sizes)
    topology, gpus = shape(resolve_topology("h100-cluster"), 2, 1, {}, "toy")
    pick = Pick("ring", "Simple", 4)

    def times(top, sizes):
        return [_latency_and_bandwidth(top, "allreduce", s, gpus, pick).time_s for s in sizes]

    fitted_on, held = [2**18, 2**22], [2**16, 2**20, 2**24, 2**26]
    measured = [t * k for t, k in zip(times(topology, fitted_on), (0.94, 1.03), strict=True)]
    case = Case("toy", topology, gpus, "allreduce", fitted_on, measured, [pick] * 2, 2, 1)
    names = ["latency.network", "reachable.network", "reachable.pcie"]
    result = calibrate([case], names=names, pick_scales=())
    moved = with_figures(topology, calibrated(topology.machine, result.factors))
    errors = np.abs(np.array(times(moved, held)) / np.array(times(topology, held)) - 1)
    determined = [f for f in result.figures if f.determined]
    if not capped:
        assert len(determined) >= 2
        assert max(abs(np.log(f.factor)) for f in determined) > np.log(1.25)
        assert errors.max() > 0.06
    else:
        assert len(determined) == 1
        assert [f.name for f in determined] == ["latency.network"]
        why = {f.name: f.why for f in result.figures}
        assert why["reachable.network"] == fit_module.FEW  # PCIe's is a copy of it (ALIKE)
        assert abs(np.log(determined[0].factor)) < np.log(1.06)
        assert errors.max() <= 0.06


def test_the_figures_freed_on_few_sizes_are_those_that_explain_the_errors():
    """Three sizes, errors of -10% at each (a bandwidth the preset puts 10% high): a latency
    column that moves the small size most (norm 1.0) and a bandwidth column that moves every
    size alike (norm 0.9). Two figures fit the budget of three sizes, so both stay free; with
    a third, a copy of neither, one must go. The one kept first is the bandwidth, which explains
    the errors, not the latency, which the sizes move most; then, nothing left to explain,
    the latency, which moves the times more than the third once the bandwidth is projected
    out."""
    latency = np.array([0.9, 0.4, 0.1])
    bandwidth = np.array([0.52, 0.52, 0.52])
    third = np.array([0.0, 0.3, -0.3])
    residual = np.full(3, np.log(0.9))
    names = ["latency.network", "reachable.network", "efficiency.LL128"]
    two = np.column_stack([latency, bandwidth])
    assert fit_module.identifiable(two, names[:2], residual) == {}
    three = np.column_stack([latency, bandwidth, third])
    assert fit_module.figure_budget(3) == 2
    assert fit_module.most_telling(three, residual, [0, 1, 2], 1) == [1]
    assert fit_module.identifiable(three, names, residual) == {
        "efficiency.LL128": fit_module.FEW}
