"""``collsim run``, ``plot``, ``crossover`` and ``compare`` end to end through the command
line: tables, resumes, executors, bad input and the example scenarios."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collsim.cli import main
from collsim.output.table import read_table
from collsim.scenarios.loader import load_scenario
from collsim.scenarios.sweep import expand

ROOT = Path(__file__).resolve().parents[1]
SWITCH = ROOT / "topologies" / "switch-64.yaml"

SMALL = f"""\
name: small
topologies: [{SWITCH}]
collectives: [allreduce, allgather]
algorithms: [ring, binomial]
sweep:
  size: {{from: 1KiB, to: 16MiB, factor: 16}}
  ranks: [3, 8]
  set: {{link.bandwidth: [100GB/s, 200GB/s]}}
figures: [time_vs_size]
"""


def write(tmp_path: Path, text: str, name: str = "scenario.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def run(*args: str) -> int:
    return main([str(a) for a in args])


def test_run_writes_table_run_record_and_figures(tmp_path, capsys):
    scenario = write(tmp_path, SMALL)
    out = tmp_path / "out"
    assert run("run", scenario, "--out", out) == 0
    columns, rows = read_table(out / "results.csv")
    assert columns == ["scenario", "topology", "collective", "algorithm", "ranks", "size_bytes",
                       "time_s", "algbw_GBps", "busbw_GBps", "analytic_time_s",
                       "protocol", "channels", "selected", "path", "link.bandwidth"]
    assert len(rows) == 2 * 2 * 2 * 2 * 4
    assert {r["link.bandwidth"] for r in rows} == {"100GB/s", "200GB/s"}
    fast = {(r["collective"], r["algorithm"], r["ranks"], r["size_bytes"]): r["time_s"]
            for r in rows if r["link.bandwidth"] == "200GB/s"}
    slow = [r for r in rows if r["link.bandwidth"] == "100GB/s" and r["size_bytes"] > 2**20]
    assert all(r["time_s"] > fast[r["collective"], r["algorithm"], r["ranks"],
                                  r["size_bytes"]] for r in slow)
    info = json.loads((out / "run.json").read_text())
    assert info["status"] == "complete" and info["points"] == {"total": 64, "done": 64}
    assert info["collsim_version"] and len(info["scenario_sha256"]) == 64
    assert {"time_vs_size.png", "time_vs_size.svg"} <= set(os.listdir(out))
    assert "ran 64 points" in capsys.readouterr().out


def test_jobs_do_not_change_a_byte(tmp_path):
    scenario = write(tmp_path, SMALL)
    assert run("run", scenario, "--out", tmp_path / "one", "--no-figures") == 0
    assert run("run", scenario, "--out", tmp_path / "two", "--no-figures", "--jobs", "2") == 0
    assert (tmp_path / "one" / "results.csv").read_bytes() == \
        (tmp_path / "two" / "results.csv").read_bytes()


def test_an_existing_table_needs_resume_or_force(tmp_path, capsys):
    scenario = write(tmp_path, SMALL)
    out = tmp_path / "out"
    assert run("run", scenario, "--out", out, "--no-figures") == 0
    before = (out / "results.csv").read_bytes()
    assert run("run", scenario, "--out", out, "--no-figures") == 2
    assert "--resume" in capsys.readouterr().err
    assert run("run", scenario, "--out", out, "--no-figures", "--resume") == 0
    assert "ran 0 points (64 were already done)" in capsys.readouterr().out
    assert (out / "results.csv").read_bytes() == before
    changed = write(tmp_path, SMALL.replace("16MiB", "64MiB"))
    assert run("run", changed, "--out", out, "--no-figures", "--resume") == 2
    assert "another scenario" in capsys.readouterr().err
    assert run("run", changed, "--out", out, "--no-figures", "--force") == 0


BAD = [
    ("typo", SMALL.replace("  ranks:", "  rank:"), 7, "sweep.rank"),
    ("negative", SMALL.replace("{from: 1KiB,", "{from: -1KB,"), 6, "sweep.size.from"),
    ("topology", SMALL.replace(str(SWITCH), "missing.yaml"), 2, "topologies[0]"),
    ("range", SMALL.replace("{from: 1KiB, to: 16MiB", "{from: 16MiB, to: 1KiB"), 6,
     "sweep.size.from"),
    ("empty", SMALL.replace("[3, 8]", "[]"), 7, "sweep.ranks"),
    ("filtered", SMALL + "where: ranks > 64\n", 10, "where"),
]


@pytest.mark.parametrize(("name", "text", "line", "key"), BAD, ids=[b[0] for b in BAD])
def test_bad_scenarios_exit_2_naming_file_line_and_key(tmp_path, capsys, name, text, line,
                                                       key):
    scenario = write(tmp_path, text)
    out = tmp_path / "out"
    assert run("run", scenario, "--out", out) == 2
    err = capsys.readouterr().err
    assert f"{scenario}:{line}, key '{key}'" in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def _interruptible() -> None:
    """A child started from a background shell inherits SIGINT ignored, and Python then keeps
    it ignored: give the child the default disposition so that Ctrl-C reaches collsim."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_sigint_then_resume_gives_the_uninterrupted_table(tmp_path):
    # Enough points that the run is still going when the signal lands, even on a busy machine.
    text = SMALL.replace("[3, 8]", "[16, 24, 32, 48, 64]").replace("factor: 16", "factor: 2")
    scenario = write(tmp_path, text)
    total = len(expand(load_scenario(scenario)).points)
    out = tmp_path / "out"
    child = subprocess.Popen(
        [sys.executable, "-m", "collsim", "run", str(scenario), "--out", str(out),
         "--no-figures"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=_interruptible)
    table = out / "results.csv"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if table.exists() and table.read_text().count("\n") > 10:
            break
        time.sleep(0.05)
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 130, err
    assert "--resume" in err and "Traceback" not in err
    _, partial = read_table(table)
    assert 10 <= len(partial) < total
    assert json.loads((out / "run.json").read_text())["status"] == "interrupted"
    assert run("run", scenario, "--out", out, "--no-figures", "--resume") == 0
    assert run("run", scenario, "--out", tmp_path / "whole", "--no-figures") == 0
    assert table.read_bytes() == (tmp_path / "whole" / "results.csv").read_bytes()


def test_dask_local_cluster_gives_the_same_table(tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    scenario = write(tmp_path, SMALL)
    assert run("run", scenario, "--out", tmp_path / "one", "--no-figures") == 0
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        assert run("run", scenario, "--out", tmp_path / "dask", "--no-figures",
                   "--executor", "dask", "--scheduler", cluster.scheduler_address) == 0
    assert (tmp_path / "one" / "results.csv").read_bytes() == \
        (tmp_path / "dask" / "results.csv").read_bytes()


def test_dask_needs_a_reachable_scheduler(tmp_path, capsys):
    pytest.importorskip("dask.distributed")
    scenario = write(tmp_path, SMALL)
    assert run("run", scenario, "--out", tmp_path / "o", "--executor", "dask") == 2
    assert "--scheduler" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


EXAMPLES = sorted((ROOT / "scenarios").glob("*.yaml"))


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_scenarios_run_quick(tmp_path, example):
    out = tmp_path / "out"
    assert run("run", example, "--quick", "--out", out) == 0
    scenario = load_scenario(example, quick=True)
    _, rows = read_table(out / "results.csv")
    assert len(rows) == len(expand(scenario).points)
    assert all(r["time_s"] > 0 and r["scenario"] == scenario.name for r in rows)
    for figure in scenario.figures:
        for fmt in scenario.formats:
            assert (out / f"{figure['name']}.{fmt}").stat().st_size > 1000


def without_path(table: Path) -> None:
    """Rewrite ``table`` as collsim wrote it before ``path`` was a column."""
    lines = [line.split(",") for line in table.read_text().splitlines()]
    at = lines[0].index("path")
    table.write_text("".join(",".join(cells[:at] + cells[at + 1:]) + "\n" for cells in lines))


def test_a_table_without_the_path_column_plots_compares_and_refuses_to_resume(tmp_path,
                                                                             capsys):
    scenario = write(tmp_path, SMALL)
    out = tmp_path / "out"
    assert run("run", scenario, "--out", out, "--no-figures") == 0
    _, rows = read_table(out / "results.csv")
    assert {r["path"] for r in rows} == {"lockstep", "full"}  # rings step; binomial trees don't
    new = tmp_path / "new.csv"
    new.write_bytes((out / "results.csv").read_bytes())
    without_path(out / "results.csv")
    assert run("plot", out / "results.csv", "--out", tmp_path / "figs", "--format", "svg") == 0
    assert (tmp_path / "figs" / "time_vs_size.svg").exists()
    capsys.readouterr()
    assert run("compare", out / "results.csv", new) == 0
    assert "64 points matched" in capsys.readouterr().err  # path is an outcome, not a key
    before = (out / "results.csv").read_bytes()
    assert run("run", scenario, "--out", out, "--no-figures", "--resume") == 2
    err = capsys.readouterr().err
    assert f"{out / 'results.csv'} has no path column" in err and "--force" in err
    assert "Traceback" not in err and (out / "results.csv").read_bytes() == before


def test_plot_redraws_from_the_table(tmp_path, capsys):
    scenario = write(tmp_path, SMALL)
    out = tmp_path / "out"
    assert run("run", scenario, "--out", out, "--no-figures") == 0
    assert run("plot", out / "results.csv", "--out", tmp_path / "figs", "--figure",
               "crossover_map", "--select", "collective=allreduce",
               "--select", "link.bandwidth=100GB/s", "--format", "png") == 0
    assert (tmp_path / "figs" / "crossover_map.png").exists()
    assert run("plot", out / "results.csv", "--figure", "speedup") == 2
    assert "--baseline" in capsys.readouterr().err


def test_compare_reports_the_ratio(tmp_path, capsys):
    one = write(tmp_path, SMALL.replace("[100GB/s, 200GB/s]", "100GB/s"), "a.yaml")
    two = write(tmp_path, SMALL.replace("[100GB/s, 200GB/s]", "200GB/s"), "b.yaml")
    assert run("run", one, "--out", tmp_path / "a", "--no-figures") == 0
    assert run("run", two, "--out", tmp_path / "b", "--no-figures") == 0
    capsys.readouterr()
    assert run("compare", tmp_path / "a" / "results.csv", tmp_path / "b" / "results.csv",
               "--csv", tmp_path / "ratio.csv") == 0
    captured = capsys.readouterr()
    assert "32 points matched" in captured.err and "link.bandwidth" in captured.err
    lines = (tmp_path / "ratio.csv").read_text().splitlines()
    assert lines[0].endswith("time_s_a,time_s_b,ratio") and len(lines) == 33
    assert all(0.4 < float(line.rsplit(",", 1)[1]) < 1.0 for line in lines[1:])


def test_crossover_bisects_in_simulation(tmp_path, capsys):
    assert run("crossover", "--topology", SWITCH, "--algorithms", "ring", "binomial",
               "--ranks", "4,8", "--max-size", "64MiB", "--csv",
               "--plot", tmp_path / "cross.png") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "topology,collective,ranks,below,above,crossover_bytes," \
                       "bracket_low_bytes,time_s"
    found = [line.split(",") for line in lines[1:]]
    assert [(f[2], f[3], f[4]) for f in found] == [("4", "binomial", "ring"),
                                                   ("8", "binomial", "ring")]
    for f in found:
        high, low = int(f[5]), int(f[6])
        assert low < high <= low * 1.01 + 4
    assert (tmp_path / "cross.png").stat().st_size > 1000
