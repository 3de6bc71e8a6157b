"""nccl-tests logs that ``compare --measured`` and ``calibrate`` cannot use: out-of-range
numbers, collectives collsim has no program for, calls that simulate to no time. Each ends
in one exit-2 paragraph naming the log and line (and the column), never a traceback, and an
earlier calibrated file is kept as it was."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collsim.calibrate import fit
from tests.exits import fails_cleanly

LOG = Path(__file__).resolve().parents[1] / "validation" / "logs" / "vp-h100-1n-ar.txt"
FIRST_ROW = ("           8             2     float     sum      -1    33.18    0.00    0.00       0"
             "    32.55    0.00    0.00       0")
ROW_LINE = LOG.read_text().splitlines().index(FIRST_ROW) + 1



def edited(tmp_path: Path, name: str, fields: dict[int, str]) -> Path:
    """The log with fields of its first row (0-based, split on blanks) replaced."""
    tokens = FIRST_ROW.split()
    for index, value in fields.items():
        tokens[index] = value
    path = tmp_path / name
    path.write_text(LOG.read_text().replace(FIRST_ROW, "  ".join(tokens)))
    return path


OUT_OF_RANGE = [
    ("time-inf", {5: "inf"}, "out-of-place time 'inf'"),
    ("time-1e400", {5: "1e400"}, "out-of-place time '1e400'"),
    ("time-1e30", {5: "1e30"}, "a number from 0 to 1e+12 us"),
    ("busbw-nan", {7: "nan"}, "out-of-place busbw 'nan'"),
    ("busbw-1e16", {7: "1e16"}, "a number from 0 to 1e+15 GB/s"),
    ("algbw-1e400", {10: "1e400"}, "in-place algbw '1e400'"),
    ("wrong-inf", {8: "inf"}, "out-of-place #wrong 'inf' is not an integer"),
    ("wrong-fraction", {12: "2.5"}, "in-place #wrong '2.5' is not an integer"),
    ("size-huge", {0: "9" * 40}, "size '999999999999999999999999999..."),
    ("count-5000-digits", {1: "9" * 5000}, "is not an integer from 0 to"),
]


@pytest.mark.parametrize(("name", "fields", "expected"), OUT_OF_RANGE,
                         ids=[case[0] for case in OUT_OF_RANGE])
def test_out_of_range_numbers_in_a_log_name_their_line_and_column(tmp_path, capsys, name,
                                                                   fields, expected):
    log = edited(tmp_path, f"{name}.txt", fields)
    err = fails_cleanly(capsys, "compare", "--measured", log, "--topology", "dgx-h100")
    assert f"{log}:{ROW_LINE}: " in err and expected in err


def test_calibrate_refuses_an_infinite_time_and_keeps_the_old_file(tmp_path, capsys):
    log = edited(tmp_path, "inf.txt", {5: "inf"})
    out = tmp_path / "calibrated.yaml"
    out.write_text("# an earlier calibration\n")
    err = fails_cleanly(capsys, "calibrate", "--measured", log, "--topology", "dgx-h100",
                        "--out", out, "--fixed-picks")
    assert f"{log}:{ROW_LINE}: out-of-place time 'inf'" in err
    assert out.read_text() == "# an earlier calibration\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["calibrated.yaml", "inf.txt"]


@pytest.mark.parametrize("collective", ["scatter", "gather"])
@pytest.mark.parametrize("command", ["compare", "calibrate"])
def test_a_log_of_a_collective_without_a_program_is_named(tmp_path, capsys, collective,
                                                         command):
    log = tmp_path / f"{collective}.txt"
    log.write_text(LOG.read_text().replace("all_reduce_perf", f"{collective}_perf"))
    argv = ["--measured", log, "--topology", "dgx-h100"]
    if command == "calibrate":
        argv += ["--out", tmp_path / "out.yaml"]
    err = fails_cleanly(capsys, command, *argv)
    assert f"{log}:1: the run is of {collective}" in err and "allreduce" in err
    assert not (tmp_path / "out.yaml").exists()


def test_a_call_that_simulates_to_no_time_is_refused_not_fitted(tmp_path, capsys,
                                                                monkeypatch):
    """The fit compares log times; a simulated time of 0 would make every residual NaN and
    end in numpy's 'SVD did not converge'."""
    real = fit.simulate_pick

    def instant(*args, **kwargs):
        prediction = real(*args, **kwargs)
        return type(prediction)(**{**prediction.__dict__, "time_s": 0.0})

    monkeypatch.setattr(fit, "simulate_pick", instant)
    log = tmp_path / "small.txt"
    log.write_text("\n".join(line for line in LOG.read_text().splitlines()
                             if not line.lstrip()[:1].isdigit() or int(line.split()[0]) < 64))
    out = tmp_path / "out.yaml"
    err = fails_cleanly(capsys, "calibrate", "--measured", log, "--topology", "dgx-h100",
                        "--out", out, "--fixed-picks")
    assert f"{log}:1: the allreduce of 8 bytes on 8 rank(s) simulates to 0 s" in err
    assert not out.exists()


def handles_sigterm(pid: int) -> bool:
    """Whether process ``pid`` has a SIGTERM handler (Linux's /proc status, SigCgt mask)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signal.SIGTERM - 1) & 1)
    return False


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads Linux's /proc")
@pytest.mark.parametrize(("signal_name", "after"), [("SIGTERM", 0.0), ("SIGTERM", 2.0),
                                                   ("SIGKILL", 2.0)])
def test_calibrate_killed_mid_fit_keeps_the_old_file(tmp_path, signal_name, after):
    """The fit takes a minute; a signal during it, or while the command line is still being
    read (``after`` 0), leaves the previous calibrated file as it was and no temporary file
    (the new one is written whole, at the end, or not at all)."""
    out = tmp_path / "calibrated.yaml"
    out.write_text("# an earlier calibration\n")
    child = subprocess.Popen([sys.executable, "-m", "collsim", "calibrate", "--measured", LOG,
                              "--topology", "dgx-h100", "--out", out, "--fixed-picks"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not handles_sigterm(child.pid):  # collsim's main() has started
        assert child.poll() is None and time.monotonic() < deadline, child.communicate()
        time.sleep(0.05)
    time.sleep(after)  # 2 s: reading, picking, fitting; well before the file is written
    assert child.poll() is None, child.communicate()
    child.send_signal(getattr(signal, signal_name))
    _, err = child.communicate(timeout=30)
    assert "Traceback" not in err
    if signal_name == "SIGTERM":
        assert child.returncode == 143 and "interrupted" in err
    else:
        assert child.returncode == -signal.SIGKILL
    assert out.read_text() == "# an earlier calibration\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["calibrated.yaml"]
