"""Every long command shows a progress line on a terminal and nothing when piped: workload,
jobs, calibrate (iteration and error so far) and estimate's recording run, all through
collsim/watch.py. The commands run in-process on small inputs with the line's delays
shortened, stderr a stand-in terminal; tests/test_cli_watch.py runs estimate on a real
pseudo-terminal."""

from __future__ import annotations

import io
import sys
from types import SimpleNamespace

import pytest

from collsim import watch
from collsim.calibrate.fit import FitProgress, calibrate
from collsim.cli import main
from collsim.watch import FitWatch

WORKLOAD = """\
name: small-dp
model: {layers: 4, parameters: 400M, hidden: 1024, sequence: 1024, micro_batch: 1}
parallelism: {tensor: 1, pipeline: 1, micro_batches: 1}
compute: {forward: 2ms}
gradients: {bucket: 25MiB, overlap: true}
"""
JOBS = """\
name: two
jobs:
  - {name: a, collective: allreduce, algorithm: ring, size: 64MiB, gpus: "0-7", repeat: 4}
  - {name: b, collective: alltoall, algorithm: direct, size: 16MiB, gpus: "8-15"}
"""


class Terminal(io.StringIO):
    """stderr as a terminal: the progress line is drawn on it."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def fast(monkeypatch):
    """The line drawn at once and redrawn every few milliseconds."""
    monkeypatch.setattr(watch, "QUIET", 0.0)
    monkeypatch.setattr(watch, "INTERVAL", 0.002)


def drawn(monkeypatch, argv: list[str], terminal: bool) -> tuple[str, list[str]]:
    """Run a command with stderr a terminal or a pipe: what stderr got, and the progress
    lines drawn on it."""
    stream = Terminal() if terminal else io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    try:
        status = main(argv)
    finally:
        monkeypatch.setattr(sys, "stderr", sys.__stderr__)
    text = stream.getvalue()
    assert status == 0, text
    return text, [part.removesuffix("\x1b[K") for part in text.split("\r") if part.strip()]


def commands(tmp_path) -> dict[str, tuple[list[str], str]]:
    (tmp_path / "w.yaml").write_text(WORKLOAD)
    (tmp_path / "j.yaml").write_text(JOBS)
    return {
        "workload": (["workload", str(tmp_path / "w.yaml"), "-t", "switch-64", "--gpus", "16"],
                     "simulating the step: "),
        "workload --trace": (["workload", str(tmp_path / "w.yaml"), "-t", "switch-64",
                              "--gpus", "16", "--trace", str(tmp_path / "t.json")],
                             "simulating the step: "),
        "jobs": (["jobs", str(tmp_path / "j.yaml"), "-t", "switch-64"],
                 "jobs sharing the fabric (run 1 of 3): "),
        "estimate --link-report": (["estimate", "-t", "switch-64", "-c", "allreduce", "-a",
                                    "binomial", "-p", "32", "-s", "64MiB", "--link-report"],
                                   "recording: "),
    }


@pytest.mark.parametrize("name", ["workload", "workload --trace", "jobs",
                                  "estimate --link-report"])
def test_a_long_command_shows_progress_on_a_terminal(tmp_path, monkeypatch, fast, name):
    argv, label = commands(tmp_path)[name]
    text, lines = drawn(monkeypatch, argv, terminal=True)
    shown = [line for line in lines if line.startswith(label)]
    assert shown, text
    assert all(" simulated" in line and line.endswith(" elapsed") for line in shown)
    erased = text.rpartition("\r\x1b[K")  # the line erased, then only messages follow
    assert erased[1] and "simulated" not in erased[2]


@pytest.mark.parametrize("name", ["workload", "jobs", "estimate --link-report"])
def test_nothing_is_drawn_when_piped(tmp_path, monkeypatch, fast, name):
    argv, _ = commands(tmp_path)[name]
    text, _ = drawn(monkeypatch, argv, terminal=False)
    assert "\r" not in text and "simulated" not in text


def test_jobs_names_each_run_in_turn(tmp_path, monkeypatch, fast):
    argv, _ = commands(tmp_path)["jobs"]
    _, lines = drawn(monkeypatch, argv, terminal=True)
    labels = {line.split(":")[0] for line in lines if "simulated" in line}
    assert "jobs sharing the fabric (run 1 of 3)" in labels
    assert labels <= {"jobs sharing the fabric (run 1 of 3)", "job a alone (run 2 of 3)",
                      "job b alone (run 3 of 3)"}


def test_the_calibration_line_shows_the_iteration_and_the_error_so_far():
    progress = SimpleNamespace(fit=2, iteration=7, cost=0.04 * 0.04 * 25, start_cost=0.25,
                               points=25, simulations=1234)
    line = FitWatch(progress, enabled=False).text()
    # rms of the log error 0.04 -> e^0.04 - 1 = 4.1%; at the preset 0.1 -> 10.5%
    assert line.startswith("calibrating: fit 2, iteration 7, rms error 4.1% (preset 10.5%), "
                           "1,234 simulations, ")
    assert FitWatch(FitProgress(), enabled=False).text() is None  # nothing before a fit


def test_calibrate_keeps_its_progress_up_to_date():
    """A real fit writes what the line reads: its fit, iterations, the cost falling from the
    preset's, the simulations run."""
    from collsim.calibrate.cases import case_from_run
    from collsim.calibrate.figures import apply
    from collsim.calibrate.predict import with_figures
    from collsim.hardware.loader import load_topology
    from collsim.nccltests import run_from_results
    from tests.test_calibrate import DGX, _rows

    preset = load_topology(DGX)
    slower = with_figures(preset, apply(preset.machine.nccl, {"launch": 1.5}))
    rows = _rows(slower, "allreduce", 8, [4**k for k in range(2, 12, 3)])
    run = run_from_results(rows, topology="dgx-h100", gpu_name="NVIDIA H100 80GB HBM3",
                           gpus_per_node=8)
    progress = FitProgress()
    calibrate([case_from_run(run, DGX)], ["launch"], pick_scales=(), progress=progress)
    assert progress.fit == 1 and progress.iteration >= 1 and progress.points == 4
    assert progress.simulations >= 4
    assert progress.cost < progress.start_cost


def test_calibrate_on_a_terminal_draws_the_fit(tmp_path, monkeypatch, fast):
    from collsim.hardware.loader import load_topology
    from tests.test_calibrate import DGX, _log, _rows

    preset = load_topology(DGX)
    log = tmp_path / "exact.txt"
    log.write_text(_log([_rows(preset, "allreduce", 8, [4**k for k in range(2, 12, 3)])]))
    argv = ["calibrate", "-t", "dgx-h100", "--measured", str(log), "--out",
            str(tmp_path / "c.yaml"), "--fixed-picks"]
    text, lines = drawn(monkeypatch, argv, terminal=True)
    assert any(line.startswith("calibrating: fit 1, iteration ") for line in lines), text
    assert text.endswith("\r\x1b[K")
    text, _ = drawn(monkeypatch, argv, terminal=False)
    assert "calibrating" not in text
