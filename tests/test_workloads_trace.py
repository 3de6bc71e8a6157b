"""A training step's trace and link report: well-formed, nested, per-GPU compute spans
adding up to the step's compute, call spans to the time in calls; noise reports its stretch."""

from __future__ import annotations

import json

import pytest

from collsim.api import load_topology
from collsim.cli import main
from collsim.workloads.loader import workload_from_text
from collsim.workloads.tracing import record_step, step_trace
from tests.test_trace import assert_nested

THREE_D = """
name: tiny-3d
model: {layers: 4, parameters_per_layer: 2M, activation: 256KiB}
parallelism: {tensor: 2, pipeline: 2, micro_batches: 4, schedule: 1f1b}
compute: {forward: 200us, backward: 2x, optimizer: 1ms}
gradients: {bucket: 2MiB, overlap: true}
"""


@pytest.fixture(scope="module")
def recorded():
    return record_step(workload_from_text(THREE_D), load_topology("switch-64"), 8)


def test_compute_and_call_spans_match_the_step_result(recorded, tmp_path):
    path = tmp_path / "step.json"
    step_trace(recorded).write(path)
    events = json.loads(path.read_text())["traceEvents"]
    assert all({"ph", "ts", "pid", "tid"} <= set(e) for e in events)
    assert_nested(events)
    compute = [0.0] * 8
    for e in events:
        if e["ph"] == "X" and e["cat"] == "compute":
            compute[e["pid"] - 1] += e["dur"] / 1e6
    for rank, times in enumerate(recorded.result.ranks):
        assert compute[rank] == pytest.approx(times.compute_s, rel=1e-9)
    cats = {e.get("cat") for e in events}
    assert {"compute", "call", "step", "send", "recv"} <= cats
    assert any(e["ph"] == "b" for e in events)  # pipeline receives, posted at the start


def test_algorithm_steps_nest_in_their_call(recorded, tmp_path):
    path = tmp_path / "step.json"
    step_trace(recorded).write(path)
    events = [e for e in json.loads(path.read_text())["traceEvents"] if e["ph"] == "X"]
    calls: dict = {}
    for e in events:
        if e["cat"] == "call":
            calls.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    steps = [e for e in events if e["cat"] == "step"]
    assert steps
    for e in steps:
        assert any(s - 1e-6 <= e["ts"] and e["ts"] + e["dur"] <= t + 1e-6
                   for s, t in calls[e["pid"], e["tid"]])


def test_the_step_matches_the_unrecorded_shared_run(recorded):
    from collsim.workloads.step import run_workload
    plain = run_workload(workload_from_text(THREE_D), load_topology("switch-64"), 8)
    assert recorded.result.step_s == pytest.approx(plain.step_s, rel=1e-12)
    loads = recorded.loads()
    assert loads and all(0 < load.peak_utilisation <= 1 + 1e-9 for load in loads)


def test_workload_cli_trace_link_report_and_stretch(tmp_path, capsys):
    workload = tmp_path / "w.yaml"
    workload.write_text(THREE_D + "noise: {seed: 1, offsets: {0: 2ms}}\n")
    trace = tmp_path / "t.json"
    assert main(["workload", str(workload), "-t", "switch-64", "--gpus", "8", "--trace",
                 str(trace), "--link-report", "--json"]) == 0
    out = capsys.readouterr().out.splitlines()
    data = json.loads(out[0])
    assert data["stretch"] == pytest.approx(data["step_s"] / data["quiet_step_s"])
    assert data["stretch"] > 1
    assert any("switch port" in line for line in out)
    assert trace.stat().st_size > 0
    assert main(["workload", str(workload), "-t", "switch-64", "--gpus", "8", "--isolated",
                 "--trace", str(trace)]) == 2
