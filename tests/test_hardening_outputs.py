"""Outputs that cannot be written, corrupted run records, closed pipes and tables with bad rows:
one line naming the path and the reason, nothing half-written, nothing silently dropped."""

from __future__ import annotations

import errno
import json
import subprocess
import sys
from pathlib import Path

import pytest

from collsim.cli import main
from collsim.output import table as table_module
from collsim.output.runinfo import RUN_FILE
from collsim.output.table import read_table

ROOT = Path(__file__).resolve().parents[1]
SWITCH = ROOT / "topologies" / "switch-64.yaml"

SCENARIO = f"""\
name: small
topologies: [{SWITCH}]
collectives: [allreduce]
algorithms: [ring, binomial]
sweep:
  size: {{from: 1KiB, to: 1MiB, factor: 4}}
  ranks: [2, 4, 8]
figures: [time_vs_size]
"""


def run(*argv: object) -> int:
    return main([str(a) for a in argv])


def error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def leftovers(folder: Path) -> list[str]:
    """Temporary files a write left behind."""
    return [p.name for p in folder.rglob("*") if p.name.endswith(".tmp")]


@pytest.fixture
def made(tmp_path) -> tuple[Path, Path]:
    """A scenario and the finished run of it."""
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(SCENARIO)
    out = tmp_path / "out"
    assert run("run", scenario, "--out", out) == 0
    return scenario, out


@pytest.mark.parametrize("where", ["under-a-file", "a-file", "proc"])
def test_an_out_folder_that_cannot_be_made(tmp_path, capsys, made, where):
    scenario, _ = made
    blocker = tmp_path / "file.txt"
    blocker.write_text("not a folder")
    out = {"under-a-file": blocker / "out", "a-file": blocker, "proc": Path("/proc/collsim")}
    assert run("run", scenario, "--out", out[where]) == 2
    err = error_line(capsys)
    assert err.count("\n") == 1 and str(out[where]) in err
    assert {"under-a-file": "is a file, not a folder", "a-file": "is not a directory",
            "proc": "No such file"}[where] in err
    assert blocker.read_text() == "not a folder"


@pytest.mark.parametrize("target", ["folder", "under-a-file", "missing-folder", "device"])
def test_compare_csv_to_a_path_that_cannot_be_written(tmp_path, capsys, made, target):
    _, out = made
    table = out / "results.csv"
    path = {"folder": tmp_path, "under-a-file": table / "ratio.csv",
            "missing-folder": tmp_path / "nowhere" / "ratio.csv", "device": Path("/dev/full")
            }[target]
    assert run("compare", table, table, "--csv", path) == 2
    err = error_line(capsys)
    assert f"cannot write {path}: " in err and err.count("\n") == 1
    assert leftovers(tmp_path) == []
    assert Path("/dev/full").is_char_device()


def test_a_full_disk_mid_run_keeps_whole_rows_and_resume_completes(tmp_path, capsys,
                                                                    monkeypatch):
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(SCENARIO)
    assert run("run", scenario, "--out", tmp_path / "whole", "--no-figures") == 0
    out = tmp_path / "out"

    real_open = open
    room = [900]  # the header and a few rows, then half a row

    class FullDisk:
        def __init__(self, file):
            self._file = file

        def write(self, data):
            if room[0] <= 0:
                raise OSError(errno.ENOSPC, "No space left on device")
            taken = min(len(data), room[0])
            room[0] -= taken
            return self._file.write(bytes(data[:taken]))

        def __getattr__(self, name):
            return getattr(self._file, name)

    def opener(path, mode="r", *args, **kwargs):
        handle = real_open(path, mode, *args, **kwargs)
        return FullDisk(handle) if "a" in mode else handle

    monkeypatch.setattr(table_module, "open", opener, raising=False)
    capsys.readouterr()
    assert run("run", scenario, "--out", out, "--no-figures") == 2
    err = error_line(capsys)
    assert f"cannot write {out / 'results.csv'}: No space left on device" in err
    assert "--resume" in err
    text = (out / "results.csv").read_text()
    assert text.endswith("\n") and 2 < text.count("\n") < 19  # whole rows only
    assert json.loads((out / RUN_FILE).read_text())["status"] == "failed"
    assert leftovers(tmp_path) == []
    monkeypatch.undo()
    assert run("run", scenario, "--out", out, "--no-figures", "--resume") == 0
    assert (out / "results.csv").read_bytes() == (tmp_path / "whole" / "results.csv").read_bytes()
    assert json.loads((out / RUN_FILE).read_text())["status"] == "complete"


def test_a_corrupted_run_record_is_named_and_force_replaces_it(tmp_path, capsys, made):
    scenario, out = made
    (out / RUN_FILE).write_text('{"status": "complete", "scenario_sha')
    assert run("run", scenario, "--out", out, "--resume") == 2
    err = error_line(capsys)
    assert f"{out / RUN_FILE}:1" in err and "corrupted" in err and "--force" in err
    assert run("plot", out / "results.csv") == 2
    assert "--figure" in error_line(capsys)
    assert run("run", scenario, "--out", out, "--force") == 0
    assert json.loads((out / RUN_FILE).read_text())["status"] == "complete"


def test_figure_names_from_a_run_record_never_leave_the_folder(tmp_path, capsys, made):
    scenario, out = made
    victim = tmp_path / "victim.png"
    victim.write_text("keep me")
    info = json.loads((out / RUN_FILE).read_text())
    info["figure_files"] = ["../victim.png", str(victim), "time_vs_size.png"]
    info["figures"] = [{"kind": "time_vs_size", "name": "../victim"}]
    (out / RUN_FILE).write_text(json.dumps(info))
    assert run("plot", out / "results.csv") == 2
    err = error_line(capsys)
    assert "figures[0].name" in err and "'../victim'" in err
    assert run("run", scenario, "--out", out, "--force") == 0
    assert victim.read_text() == "keep me"


@pytest.mark.parametrize("argv", [
    ["list"],
    ["list", "--markdown"],
    ["estimate", "-t", str(SWITCH), "-c", "allreduce", "-a", "ring", "-p", "8", "-s", "1MiB"],
    ["crossover", "-t", str(SWITCH), "--algorithms", "ring", "binomial", "--ranks", "4",
     "--max-size", "1MiB", "--csv"],
], ids=["list", "markdown", "estimate", "crossover"])
def test_a_closed_pipe_ends_quietly(argv):
    """``collsim list | head`` when head has already gone: no traceback, the SIGPIPE status."""
    child = subprocess.Popen([sys.executable, "-m", "collsim", *argv], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    child.stdout.close()  # the reader is gone before anything is written
    err = child.stderr.read().decode()
    assert child.wait(timeout=60) == 141, err
    assert err == ""


def test_compare_and_plot_warn_about_rows_they_leave_out(tmp_path, capsys, made):
    _, out = made
    lines = (out / "results.csv").read_text().splitlines(keepends=True)
    header, rows = lines[0], lines[1:]
    cells = rows[2].rstrip("\n").split(",")
    nan_row = ",".join(cells[:6] + ["nan"] + cells[7:]) + "\n"
    cells = rows[3].rstrip("\n").split(",")
    negative = ",".join(cells[:8] + ["-3.5"] + cells[9:]) + "\n"
    ragged = rows[4].rstrip("\n") + ",extra\n"
    bad = tmp_path / "bad.csv"
    bad.write_text(header + rows[0] + rows[1] + nan_row + negative + ragged + "".join(rows[5:])
                   + "small,torn")
    notes: list[str] = []
    _, kept = read_table(bad, notes)
    assert len(kept) == len(rows) - 3
    where = sorted(notes, key=lambda n: int(n.split(": left out")[0].rsplit(":", 1)[1]))
    assert [n.split(": left out")[0] for n in where] == [f"{bad}:4", f"{bad}:5", f"{bad}:6",
                                                        f"{bad}:{len(rows) + 2}"]
    assert "time_s=nan" in where[0] and "busbw_GBps=-3.5" in where[1]
    assert "cells" in where[2] and "cut short" in where[3]
    assert run("compare", out / "results.csv", bad) == 0
    err = error_line(capsys)
    assert all(f"warning: {note}" in err for note in notes)
    assert f"{len(rows) - 3} points matched" in err
    assert run("plot", bad, "--out", tmp_path / "figures", "--format", "png") == 0
    err = error_line(capsys)
    assert err.count("warning: ") == 4


def test_compare_takes_a_measured_metric_and_tables_with_rows(tmp_path, capsys, made):
    _, out = made
    table = out / "results.csv"
    assert run("compare", table, table, "--metric", "scenario") == 2
    assert "key '--metric': expected a measured column" in error_line(capsys)
    empty = tmp_path / "empty.csv"
    empty.write_text(table.read_text().splitlines(keepends=True)[0])
    assert run("compare", empty, table) == 2
    assert f"{empty}: the results table has no rows to compare" in error_line(capsys)


@pytest.mark.parametrize("flag", ["--trace", "--link-figure"])
def test_a_trace_or_link_figure_to_a_missing_folder_is_named(tmp_path, capsys, flag):
    target = tmp_path / "missing" / ("x.json" if flag == "--trace" else "x.png")
    status = main(["estimate", "--topology", str(SWITCH), "-c", "allreduce", "-a", "ring",
                   "-p", "4", "-s", "4KiB", flag, str(target)])
    err = capsys.readouterr().err
    assert status == 2 and f"cannot write {target}" in err and "there is no folder" in err
    assert not (tmp_path / "missing").exists()
