"""Calibration (issue 13): logs printed by --format nccl-tests read back to the same figures;
published logs become cases on presets; compare --measured and calibrate on malformed logs
fail with file:line and exit 2; and calibration recovers the figures a preset was perturbed
by, from collsim's own output plus seeded noise, leaving the undetermined ones untouched."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from collsim.calibrate.cases import case_from_run
from collsim.calibrate.figures import FIGURES, apply, step_latency
from collsim.calibrate.fit import Calibration, calibrate
from collsim.calibrate.predict import predict, with_figures
from collsim.calibrate.writer import calibrated_yaml
from collsim.cli import main
from collsim.collectives import COLLECTIVES
from collsim.hardware.loader import load_topology, topology_from_text
from collsim.hardware.shipped import resolve_topology
from collsim.nccltests import format_runs, read_logs, run_from_results

VALIDATION = Path(__file__).resolve().parents[1] / "validation"
DGX = resolve_topology("dgx-h100")
# Published logs of three sources (Voltage Park, a GCP A3 Mega fork, Red Hat's image README)
# and the preset each is simulated on.
PUBLISHED = [("vp-h100-1n-ar.txt", "dgx-h100", 1, 8, "allreduce"),
             ("vp-h100-4n-ag.txt", "h100-cluster", 4, 8, "allgather"),
             ("gcp-a3mega-h100-2n-ar.txt", "h100-cluster", 2, 8, "allreduce"),
             ("gcp-h200-2x1-ar.txt", "h100-cluster", 2, 1, "allreduce"),
             ("ocp-h200-2x8-socket-ring-ar.txt", "h100-cluster", 2, 8, "allreduce")]


def _rows(topology, collective, ranks, sizes, noise=None, gpus=None, protocol=None):
    """Simulated rows (collsim's own output); ``noise`` a seeded generator of log-normal
    noise on the time, busbw and algbw recomputed from it as nccl-tests does."""
    rows = []
    for size in sizes:
        p = predict(topology, collective, ranks, size, gpus=gpus, protocol=protocol)
        time = p.time_s * (math.exp(noise.normal(0, 0.01)) if noise is not None else 1.0)
        algbw = size / time / 1e9
        rows.append({"collective": collective, "ranks": ranks, "size_bytes": size,
                     "time_s": time, "algbw_GBps": algbw,
                     "busbw_GBps": algbw * COLLECTIVES[collective].busbw_factor(ranks)})
    return rows


def _log(runs_rows, gpus_per_node=8):
    runs = [run_from_results(rows, topology="dgx-h100", gpu_name="NVIDIA H100 80GB HBM3",
                             gpus_per_node=min(gpus_per_node, rows[0]["ranks"]))
            for rows in runs_rows]
    return format_runs(runs)


def test_a_printed_log_reads_back_to_the_estimate(capsys):
    assert main(["estimate", "-t", "dgx-h100", "-c", "allgather", "-a", "ring", "-p", "8",
                 "-s", "64MiB", "--json"]) == 0
    expected = json.loads(capsys.readouterr().out)
    assert main(["estimate", "-t", "dgx-h100", "-c", "allgather", "-a", "ring", "-p", "8",
                 "-s", "64MiB", "--format", "nccl-tests"]) == 0
    (run,) = read_logs(capsys.readouterr().out)
    assert (run.collective, run.ranks, run.nodes) == ("allgather", 8, 1)
    (row,) = run.rows
    assert row.size_bytes == 64 * 2**20 and row.count == 64 * 2**20 // 4 // 8  # per rank
    assert row.out_of_place.time_us == pytest.approx(expected["time_s"] * 1e6, rel=1e-3)
    assert row.out_of_place.busbw_GBps == pytest.approx(expected["busbw_GBps"], abs=0.006)


def test_run_writes_nccl_tests_tables_that_read_back(tmp_path):
    out = tmp_path / "out"
    assert main(["run", "scenarios/dgx-h100-busbw.yaml", "--quick", "--out", str(out),
                 "--no-figures", "--format", "nccl-tests"]) == 0
    runs = read_logs(out / "results.nccl-tests.txt")
    table = (out / "results.csv").read_text().splitlines()[1:]
    assert [r.collective for r in runs] == ["allreduce", "allgather", "reducescatter"]
    assert sum(len(r.rows) for r in runs) == len(table)
    for run in runs:
        mine = [line.split(",") for line in table if f",{run.collective}," in line]
        for row, line in zip(run.rows, mine, strict=True):
            assert row.size_bytes == int(line[5])
            assert row.out_of_place.busbw_GBps == pytest.approx(float(line[8]), abs=0.006)


@pytest.mark.parametrize(("name", "preset", "nodes", "per_node", "collective"), PUBLISHED)
def test_published_logs_become_cases_on_presets(name, preset, nodes, per_node, collective):
    (run,) = read_logs(VALIDATION / "logs" / name)
    case = case_from_run(run, resolve_topology(preset))
    assert (case.nodes, case.gpus_per_node, case.collective) == (nodes, per_node, collective)
    assert len({case.topology.node_of[g] for g in case.gpus}) == nodes
    assert len(case.sizes) >= 20 and all(t > 0 for t in case.measured)
    busbw = {r.size_bytes: r.out_of_place.busbw_GBps for r in run.rows}
    largest = case.sizes[-1]
    factor = COLLECTIVES[collective].busbw_factor(nodes * per_node)
    assert largest / case.measured[-1] / 1e9 * factor == pytest.approx(busbw[largest], rel=0.01)


def test_compare_measured_prints_every_size_and_the_summary(tmp_path, capsys):
    log = VALIDATION / "logs" / "vp-h100-1n-ar.txt"
    plot, table = tmp_path / "cmp.png", tmp_path / "cmp.csv"
    assert main(["compare", "--measured", str(log), "--topology", "dgx-h100", "--plot",
                 str(plot), "--csv", str(table)]) == 0
    out = capsys.readouterr().out
    assert "ring/LL/1ch" in out and "median" in out and "p90" in out
    lines = table.read_text().splitlines()
    assert len(lines) == 1 + 31 and plot.stat().st_size > 10_000
    header = lines[0].split(",")
    for line in lines[1:]:
        cells = dict(zip(header, line.split(","), strict=True))
        measured, simulated = float(cells["measured_time_s"]), float(cells["simulated_time_s"])
        assert float(cells["error"]) == pytest.approx(measured / simulated - 1)


@pytest.mark.parametrize("command", ["compare", "calibrate"])
def test_a_malformed_log_fails_with_its_line_and_exit_2(tmp_path, capsys, command):
    text = (VALIDATION / "logs" / "vp-h100-1n-ar.txt").read_text().splitlines()
    at = next(i for i, line in enumerate(text) if line.strip().startswith("1048576 "))
    text[at] = text[at].replace("float", "float 12", 1)
    log = tmp_path / "bad.txt"
    log.write_text("\n".join(text) + "\n")
    argv = [command, "--measured", str(log), "--topology", "dgx-h100"]
    if command == "calibrate":
        argv += ["--out", str(tmp_path / "c.yaml")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{log}:{at + 1}" in err and "Traceback" not in err
    assert not (tmp_path / "c.yaml").exists()


def test_a_multi_node_log_on_a_one_node_preset_is_bad_input(capsys):
    log = VALIDATION / "logs" / "gcp-a3mega-h100-2n-ar.txt"
    assert main(["compare", "--measured", str(log), "--topology", "dgx-h100"]) == 2
    assert "h100-cluster" in capsys.readouterr().err


TRUTH = {"launch": 1.4, "latency.LL": 0.7, "latency.LL128": 1.3, "reachable.nvlink": 0.85,
         "latency.network": 1.5, "reachable.network": 0.5, "efficiency.LL128": 0.85}
# The perturbed preset declares no NVLS reach of its own: NVLS follows NVLink's 0.85.
RECOVERED = {**TRUTH, "reachable.nvls": 0.85}


def test_calibration_recovers_perturbed_figures(tmp_path, capsys):
    preset = load_topology(DGX)
    perturbed = with_figures(preset, apply(preset.machine.nccl, TRUTH))
    noise = np.random.default_rng(13)
    sizes = [4**k for k in range(2, 16)]  # 16 B .. 1 GiB
    runs = [_rows(perturbed, c, ranks, sizes, noise) for ranks in (2, 4, 8)
            for c in ("allreduce", "allgather")]
    # NCCL picks LL128 at two of these sizes; a run with NCCL_PROTO=LL128 (16 B .. 16 MiB)
    # tells its latency from its bandwidth, which two sizes under 1% of noise cannot
    forced = _rows(perturbed, "allreduce", 8, sizes[:11], noise, protocol="LL128")
    log, forced_log = tmp_path / "perturbed.txt", tmp_path / "ll128.txt"
    log.write_text(_log(runs))
    forced_log.write_text(_log([forced]))
    out = tmp_path / "cal.yaml"
    assert main(["calibrate", "--topology", "dgx-h100", "--measured", str(log),
                 "--out", str(out), "--fixed-picks"]) == 0
    assert "Fitted" in capsys.readouterr().out
    cases = [case_from_run(run, DGX) for run in read_logs(log)]
    cases += [case_from_run(run, DGX, protocol="LL128") for run in read_logs(forced_log)]
    result = calibrate(cases, pick_scales=())  # NCCL switches where its model says here
    determined = {f.name: f.factor for f in result.figures if f.determined}
    assert {"launch", "latency.LL", "latency.LL128", "reachable.nvlink", "reachable.nvls",
            "efficiency.LL128"} <= set(determined)
    for name, factor in determined.items():
        assert factor == pytest.approx(RECOVERED.get(name, 1.0), rel=0.05), name
    undetermined = {f.name for f in result.figures if not f.determined}
    assert {"latency.network", "reachable.network", "reachable.pcie"} <= undetermined
    written = load_topology(out).machine.nccl  # fitted by the CLI on the auto runs alone
    original = preset.machine.nccl
    assert written.reached("network") == original.reached("network")
    assert written.launch == pytest.approx(original.launch * TRUTH["launch"], rel=0.05)
    for p in ("LL", "LL128", "Simple"):  # one node moves no network latency
        assert step_latency(written, p, "ring", "network") == pytest.approx(
            step_latency(original, p, "ring", "network"), rel=1e-4)
    scale = determined["latency.LL"]
    for c in ("nvlink", "pcie"):  # the LL scale on both classes inside a node
        assert step_latency(written, "LL", "ring", c) == pytest.approx(
            step_latency(original, "LL", "ring", c) * scale, rel=0.05)
    assert all(e.after_median < 0.02 for e in result.errors)


def test_the_calibrated_file_loads_in_estimate_and_scenarios(tmp_path, capsys):
    preset = load_topology(DGX)
    log = tmp_path / "exact.txt"
    log.write_text(_log([_rows(preset, "allreduce", 8, [4**k for k in range(2, 16, 2)])]))
    out = tmp_path / "mine.yaml"
    assert main(["calibrate", "--topology", "dgx-h100", "--measured", str(log),
                 "--out", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("# Calibrated by collsim") and "name: mine" in text
    assert str(log) in text and "median 0.0% -> 0.0%" in text
    assert load_topology(out).machine.nccl.launch == pytest.approx(
        preset.machine.nccl.launch, rel=1e-3)
    assert main(["estimate", "--topology", str(out), "-c", "allreduce", "-a", "ring",
                 "-p", "8", "-s", "1MiB"]) == 0
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"name: s\ntopologies: [{out}]\ncollectives: [allreduce]\n"
                        "algorithms: [ring]\nsweep:\n  size: [1MiB]\n")
    assert main(["run", str(scenario), "--out", str(tmp_path / "r"), "--no-figures"]) == 0


def test_every_figure_has_bounds_around_the_preset():
    figures = load_topology(DGX).machine.nccl
    for figure in FIGURES:
        low, high = figure.bounds(figures)
        assert 0 < low <= 1.0 <= high, figure.name


def test_what_the_log_says_ran_is_what_is_simulated():
    """NCCL_ALGO on the log's command line forces the algorithm; an NCCL_DEBUG=INFO line
    naming the algorithm and protocol of one size forces that size's pick."""
    *_, run = read_logs(VALIDATION / "sources" / "nccl-tests-issue309-h100-ib-2n-4n-8n.txt")
    assert run.hints.env["NCCL_ALGO"] == "Ring"
    case = case_from_run(run, resolve_topology("h100-cluster"))
    assert {p.algorithm for p in case.picks} == {"ring"}
    preset = load_topology(DGX)
    sizes = [2**20, 2**24]
    text = _log([_rows(preset, "allreduce", 8, sizes)]).splitlines()
    table = next(i for i, line in enumerate(text) if line.lstrip().startswith("1048576"))
    text.insert(table, "node0:1:1 [0] NCCL INFO AllReduce: 16777216 Bytes -> Algo Tree "
                       "proto LL128 nchannels 8")
    (logged,) = read_logs("\n".join(text) + "\n")
    free = case_from_run(read_logs(_log([_rows(preset, "allreduce", 8, sizes)]))[0], DGX)
    forced = case_from_run(logged, DGX)
    assert forced.picks[0] == free.picks[0]
    assert (forced.picks[1].algorithm, forced.picks[1].protocol) == ("nccl_tree", "LL128")
    assert (free.picks[1].algorithm, free.picks[1].protocol) != ("nccl_tree", "LL128")


@pytest.mark.parametrize("preset, warned", [("dgx-h100", False), ("l40s-pcie", True)])
def test_a_log_from_another_gpu_family_than_the_preset_is_warned_about(capsys, preset, warned):
    run = read_logs(VALIDATION / "logs" / "vp-h100-1n-ar.txt")[0]
    case_from_run(run, resolve_topology(preset))
    err = capsys.readouterr().err
    assert ("the log ran on NVIDIA H100" in err) is warned


def test_a_calibrated_file_keeps_the_machines_nccl_release():
    preset = resolve_topology("h100-cluster")
    figures = load_topology(preset, {"nccl.version": "2.27.3"}).machine.nccl
    text = calibrated_yaml(preset.read_text(), "h100-cluster", "cal",
                           Calibration((), figures, (), 0), [])
    assert '  version: "2.27.3"' in text.splitlines()
    assert topology_from_text(text).machine.nccl.version == (2, 27, 3)
