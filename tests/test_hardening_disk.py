"""Writers on a full disk, figure names matplotlib cannot write, integers of thousands of
digits and calls larger than collsim simulates: one exit-2 line naming the file (standard
output included) or key, nothing half-written, never a traceback."""

from __future__ import annotations

import errno
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collsim.cli import main
from collsim.hardware.limits import MAX_CALL_RANKS, MAX_SELECTED_RANKS
from collsim.output import files
from tests.exits import fails_cleanly

ROOT = Path(__file__).resolve().parents[1]
SWITCH = ROOT / "topologies" / "switch-64.yaml"
ESTIMATE = ["estimate", "--topology", str(SWITCH), "-c", "allreduce", "-a", "ring", "-p", "4",
            "-s", "4KiB"]
JOBS = """\
jobs:
  - {name: a, collective: allreduce, size: 1MiB, gpus: 0-3}
  - {name: b, collective: allgather, size: 1MiB, gpus: 4-7}
"""
DIGITS = "9" * 5000



def to_full_disk(*argv: object) -> subprocess.CompletedProcess:
    """The command line with its standard output on /dev/full (every write: ENOSPC)."""
    with open("/dev/full", "w") as full:
        return subprocess.run([sys.executable, "-m", "collsim", *map(str, argv)], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=120)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
@pytest.mark.parametrize("what", ["estimate", "link-report", "nccl-tests", "trace", "workload",
                                  "jobs"])
def test_standard_output_on_a_full_disk(tmp_path, what):
    trace = tmp_path / "trace.json"
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(JOBS)
    argv = {"estimate": ESTIMATE, "link-report": [*ESTIMATE, "--link-report"],
            "nccl-tests": [*ESTIMATE, "--format", "nccl-tests"],
            "trace": [*ESTIMATE, "--trace", trace],
            "workload": ["workload", ROOT / "workloads" / "llama-7b-dp.yaml", "--topology",
                         SWITCH, "--gpus", "8", "--isolated"],
            "jobs": ["jobs", jobs, "--topology", SWITCH]}[what]
    done = to_full_disk(*argv)
    assert done.returncode == 2, done.stderr
    # Files written before standard output failed are reported first (--trace says what it
    # wrote); the error is the last line.
    assert done.stderr.splitlines()[-1] == (
        "collsim: error: cannot write standard output (/dev/full): No space left on device; "
        "what it shows is cut short (files collsim wrote are whole)")
    assert "Traceback" not in done.stderr
    if what == "trace":  # written before the line that failed, and whole
        assert json.loads(trace.read_text())["metadata"]["generator"] == "collsim"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_a_file_on_a_full_disk_keeps_the_old_one(tmp_path, capsys, monkeypatch):
    trace = tmp_path / "trace.json"
    trace.write_text("the previous trace")

    def no_room(descriptor: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", no_room)
    err = fails_cleanly(capsys, *ESTIMATE, "--trace", trace)
    assert f"cannot write {trace}: No space left on device; nothing half-written is left" in err
    assert trace.read_text() == "the previous trace"
    assert [p.name for p in tmp_path.iterdir()] == ["trace.json"]


@pytest.mark.parametrize("name", ["out.txt", "out", ".png", "out.png.json"])
@pytest.mark.parametrize("command", ["estimate", "workload", "jobs"])
def test_a_link_figure_name_is_checked_before_the_simulation(tmp_path, capsys, name, command):
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(JOBS)
    figure = tmp_path / name
    argv = {"estimate": ESTIMATE,
            "workload": ["workload", ROOT / "workloads" / "llama-7b-dp.yaml", "--topology",
                         SWITCH, "--gpus", "8"],
            "jobs": ["jobs", jobs, "--topology", SWITCH]}[command]
    started = time.monotonic()
    err = fails_cleanly(capsys, *argv, "--link-figure", figure)
    assert time.monotonic() - started < 5
    assert f"key '--link-figure': cannot tell the figure format of {figure}" in err
    assert ".png, .svg, .pdf" in err and not figure.exists()


def test_compare_plot_name_is_checked_first(tmp_path, capsys):
    log = ROOT / "validation" / "logs" / "vp-h100-1n-ar.txt"
    err = fails_cleanly(capsys, "compare", "--measured", log, "--topology", "dgx-h100",
                        "--plot", tmp_path / "plot.txt")
    assert "key '--plot'" in err and not (tmp_path / "plot.txt").exists()


def test_integers_of_thousands_of_digits(tmp_path, capsys):
    err = fails_cleanly(capsys, "crossover", "-t", SWITCH, "--algorithms", "ring", "binomial",
                        "--ranks", DIGITS)
    assert "key '--ranks'" in err and "5,000 digits" in err
    with pytest.raises(SystemExit) as exited:  # argparse's own exit 2, its message shortened
        main([*ESTIMATE[:-4], "-p", DIGITS, "-s", "1KiB"])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and len(err.splitlines()[-1]) < 200
    assert "argument --ranks/-p: invalid int value: '999" in err and "Traceback" not in err
    topology = tmp_path / "switch.yaml"
    text = SWITCH.read_text()
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("gpus:"))
    lines[at] = f"gpus: {DIGITS}"
    topology.write_text("\n".join(lines) + "\n")
    err = fails_cleanly(capsys, "estimate", "--topology", topology, *ESTIMATE[3:])
    assert f"{topology}:{at + 1}, key 'gpus': an integer of 5,000 digits" in err
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(f"name: s\ntopologies: [{SWITCH}]\ncollectives: [allreduce]\n"
                        f"algorithms: [ring]\nsweep:\n  size: [1KiB]\n  ranks: [2, {DIGITS}]\n")
    err = fails_cleanly(capsys, "run", scenario, "--out", tmp_path / "out")
    assert f"{scenario}:7, key 'sweep.ranks[1]'" in err and not (tmp_path / "out").exists()


@pytest.mark.parametrize("algorithm", ["ring", "auto", "best"])
def test_a_call_larger_than_collsim_simulates_is_refused_up_front(capsys, algorithm):
    limit = MAX_SELECTED_RANKS if algorithm == "best" else MAX_CALL_RANKS
    ranks = 2 * limit
    started = time.monotonic()
    err = fails_cleanly(capsys, "estimate", "--topology", SWITCH, "--set", f"gpus={ranks}",
                        "-c", "allreduce", "-a", algorithm, "-p", ranks, "-s", "1MiB")
    assert time.monotonic() - started < 20
    assert f"{ranks:,} ranks in one call" in err and f"at most {limit:,} ranks" in err
