"""Faults with real processes and real signals: a killed worker, a killed or terminated run, a
torn last row, two runs into one folder. Nothing may hang, and after ``--resume`` the table
must equal an uninterrupted run's byte for byte (no row lost, none twice)."""

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
from collsim.errors import InputError
from collsim.output.table import read_table

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").exists(),
                                reason="finds worker processes through Linux's /proc")

ROOT = Path(__file__).resolve().parents[1]
SWITCH = ROOT / "topologies" / "switch-64.yaml"

# 14 points of a tenth of a second to a second each: long enough to be caught mid-run.
SCENARIO = f"""\
name: faults
topologies: [{SWITCH}]
collectives: [allreduce]
algorithms: [double_binary_tree]
sweep:
  size: {{from: 1MiB, to: 64MiB, factor: 2}}
  ranks: [32, 64]
"""
POINTS = 14


@pytest.fixture(scope="module")
def whole(tmp_path_factory) -> tuple[Path, bytes]:
    """The scenario file and the table of an uninterrupted run of it."""
    folder = tmp_path_factory.mktemp("faults")
    scenario = folder / "faults.yaml"
    scenario.write_text(SCENARIO)
    assert main(["run", str(scenario), "--out", str(folder / "whole"), "--no-figures"]) == 0
    return scenario, (folder / "whole" / "results.csv").read_bytes()


def start(scenario: Path, out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "collsim", "run", str(scenario), "--out",
                             str(out), "--no-figures", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def rows_on_disk(table: Path) -> int:
    try:
        return max(0, table.read_text().count("\n") - 1)
    except FileNotFoundError:
        return 0


def wait_for_rows(child: subprocess.Popen, table: Path, count: int) -> None:
    deadline = time.monotonic() + 60
    while rows_on_disk(table) < count:
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.02)


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(p) for p in (task / "children").read_text().split()]
    return found


def running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting to be reaped is not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def ended(pids: list[int], seconds: float = 5) -> bool:
    deadline = time.monotonic() + seconds
    while any(running(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def valid_rows(table: Path) -> int:
    notes: list[str] = []
    _, rows = read_table(table, notes)
    assert notes == []
    return len(rows)


def status(out: Path) -> str:
    return json.loads((out / "run.json").read_text())["status"]


def resume(scenario: Path, out: Path, *extra: str) -> bytes:
    assert main(["run", str(scenario), "--out", str(out), "--no-figures", "--resume",
                 *extra]) == 0
    assert status(out) == "complete"
    return (out / "results.csv").read_bytes()


def test_a_killed_worker_ends_the_run_at_once_naming_its_point(tmp_path, whole):
    scenario, expected = whole
    out = tmp_path / "out"
    child = start(scenario, out, "--jobs", "2")
    wait_for_rows(child, out / "results.csv", 2)
    workers = children(child.pid)
    assert len(workers) == 2
    os.kill(workers[0], signal.SIGKILL)  # what the out-of-memory killer does
    killed = time.monotonic()
    _, err = child.communicate(timeout=30)
    assert time.monotonic() - killed < 10
    assert child.returncode == 1, err
    assert f"worker process {workers[0]} was killed by SIGKILL" in err
    assert "while computing point " in err and "ranks" in err and "--resume" in err
    assert "Traceback" not in err
    assert ended(workers)
    assert 2 <= valid_rows(out / "results.csv") < POINTS
    assert status(out) == "failed"
    assert resume(scenario, out, "--jobs", "2") == expected


def test_rows_land_as_points_finish(tmp_path, whole):
    scenario, expected = whole
    for jobs in ("1", "2"):
        out = tmp_path / f"out{jobs}"
        child = start(scenario, out, "--jobs", jobs)
        seen = []
        while child.poll() is None:
            count = rows_on_disk(out / "results.csv")
            if not seen or count != seen[-1][1]:
                seen.append((time.monotonic(), count))
            time.sleep(0.01)
        assert child.returncode == 0, child.communicate()
        counts = [count for _, count in seen]
        # Every row appears on its own or with a few others, never all at the end.
        assert len(set(counts) - {0, POINTS}) >= POINTS // 3, seen
        gaps = [b - a for (a, _), (b, _) in zip(seen, seen[1:], strict=False)]
        assert max(gaps) < 5, seen
        assert (out / "results.csv").read_bytes() == expected


def test_sigkill_mid_run_and_a_torn_row_then_resume_loses_nothing(tmp_path, whole):
    scenario, expected = whole
    out = tmp_path / "out"
    table = out / "results.csv"
    child = start(scenario, out, "--jobs", "2")
    wait_for_rows(child, table, 3)
    workers = children(child.pid)
    child.kill()
    child.communicate(timeout=30)
    assert ended(workers), "workers outlived the run they worked for"
    with open(table, "a") as file:
        file.write("faults,ideal-switch,allreduce,double_binary_tree,64,104")  # cut mid-row
    assert status(out) == "running"
    assert resume(scenario, out) == expected


def test_a_second_run_into_a_busy_folder_is_refused_and_a_stale_lock_is_not(
        tmp_path, whole, capsys):
    scenario, expected = whole
    out = tmp_path / "out"
    child = start(scenario, out)
    wait_for_rows(child, out / "results.csv", 1)
    for extra in ([], ["--resume"], ["--force"]):
        assert main(["run", str(scenario), "--out", str(out), "--no-figures", *extra]) == 2
        err = capsys.readouterr().err
        assert f"another collsim run (process {child.pid}) is writing {out}" in err
    child.kill()
    child.communicate(timeout=30)
    assert (out / ".collsim.lock").exists()  # left by the killed run; the kernel freed it
    assert resume(scenario, out) == expected
    assert not (out / ".collsim.lock").exists()  # the finished run removes it


def test_a_finished_run_leaves_no_lock_file_and_a_failed_one_keeps_its_folder_lock(tmp_path):
    from collsim.output.lock import LOCK_FILE, FolderLock

    with FolderLock(tmp_path):
        assert (tmp_path / LOCK_FILE).exists()
        with pytest.raises(InputError, match="another collsim run"), FolderLock(tmp_path):
            pass
    assert not (tmp_path / LOCK_FILE).exists()
    with pytest.raises(RuntimeError), FolderLock(tmp_path):
        raise RuntimeError("the run failed")
    assert (tmp_path / LOCK_FILE).exists()  # a failed run's lock stays (released, stale)
    with FolderLock(tmp_path):  # and does not block the next run
        pass
    assert not (tmp_path / LOCK_FILE).exists()


def test_sigterm_is_handled_like_ctrl_c(tmp_path, whole):
    scenario, expected = whole
    out = tmp_path / "out"
    child = start(scenario, out, "--jobs", "2")
    wait_for_rows(child, out / "results.csv", 2)
    workers = children(child.pid)
    child.terminate()
    _, err = child.communicate(timeout=30)
    assert child.returncode == 143, err
    assert "interrupted" in err and "--resume" in err and "Traceback" not in err
    assert ended(workers), "a worker outlived the terminated run"
    assert 2 <= valid_rows(out / "results.csv") < POINTS
    assert status(out) == "interrupted"
    assert resume(scenario, out, "--jobs", "2") == expected
