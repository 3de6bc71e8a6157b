"""``collsim estimate`` end to end: output, JSON columns, determinism, and clear errors."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from collsim.cli import main
from collsim.simulate import COLUMNS

ROOT = Path(__file__).resolve().parents[1]
SWITCH = str(ROOT / "topologies" / "switch-64.yaml")
BASE = ["estimate", "--topology", SWITCH, "-c", "allreduce", "-a", "ring", "-p", "8",
        "-s", "64MiB"]


def run_cli(capsys, argv):
    status = main(argv)
    out, err = capsys.readouterr()
    return status, out, err


def test_estimate_prints_one_line_with_time_and_bandwidths(capsys):
    status, out, err = run_cli(capsys, BASE)
    assert status == 0 and err == ""
    assert out.count("\n") == 1
    assert "allreduce ring on ideal-switch, 8 ranks, 64M" in out
    assert "busbw" in out and "closed form" in out


def test_estimate_json_has_the_results_table_columns(capsys):
    status, out, _ = run_cli(capsys, BASE + ["--json"])
    row = json.loads(out)
    assert status == 0 and tuple(row) == COLUMNS
    assert row["path"] == "lockstep"  # a one-channel ring on a switch: whole steps at once
    p, n = 8, 64 * 2**20
    want = 2 * (p - 1) * 2e-6 + 2 * (p - 1) / p * n / 100e9 + (p - 1) / p * n / 1e12
    assert row["time_s"] == pytest.approx(want, rel=1e-9)
    assert row["analytic_time_s"] == pytest.approx(want, rel=1e-12)
    assert row["busbw_GBps"] == pytest.approx(n / want / 1e9 * 2 * (p - 1) / p)


def test_estimate_json_says_when_the_events_ran(capsys):
    """A binomial tree has no lockstep form: the event-driven path."""
    _, out, _ = run_cli(capsys, ["estimate", "-t", SWITCH, "-c", "broadcast", "-a", "binomial",
                                 "-p", "5", "-s", "4KiB", "--json"])
    assert json.loads(out)["path"] == "full"


def test_estimate_json_says_when_one_rank_per_orbit_ran_or_why_not(capsys):
    """A direct allreduce shares every port (no lockstep form) and treats every rank alike:
    one rank per orbit, at the closed form; an uneven size runs every rank and says why."""
    argv = ["estimate", "-t", SWITCH, "-c", "allreduce", "-a", "direct", "-p", "6", "--json"]
    _, out, _ = run_cli(capsys, argv + ["-s", "24KiB"])
    row = json.loads(out)
    assert row["path"] == "symmetric" and "fallback" not in row
    assert row["time_s"] == pytest.approx(row["analytic_time_s"], rel=1e-9)
    _, out, _ = run_cli(capsys, argv + ["-s", "4100"])
    row = json.loads(out)
    assert row["path"] == "full" and row["fallback"] == "shift by 1: blocks of uneven length"


def test_overrides_and_params_reach_the_simulation(capsys):
    _, out, _ = run_cli(capsys, BASE + ["--json", "--set", "link.bandwidth=200GB/s"])
    fast = json.loads(out)["time_s"]
    _, out, _ = run_cli(capsys, BASE + ["--json"])
    assert fast < json.loads(out)["time_s"]
    _, out, _ = run_cli(capsys, ["estimate", "-t", SWITCH, "-c", "broadcast", "-a", "binomial",
                                 "-p", "5", "-s", "4KiB", "--param", "root=4", "--json"])
    assert json.loads(out)["time_s"] == pytest.approx(3 * (2e-6 + 4096 / 100e9))


def test_same_command_same_output_byte_for_byte():
    command = [sys.executable, "-m", "collsim", *BASE[:-4], "-p", "24", "-s", "3MiB"]
    first = subprocess.run(command, capture_output=True, check=True).stdout
    second = subprocess.run(command, capture_output=True, check=True).stdout
    assert first == second and first


def write(tmp_path, text):
    path = tmp_path / "machine.yaml"
    path.write_text(text)
    return str(path)


GOOD = "name: m\nkind: switch\ngpus: 8\nlink: {latency: 1us, bandwidth: 100GB/s}\n"


@pytest.mark.parametrize("topology, args, expected", [
    ("kind: switch\ngpus: [8\n", [], "not valid YAML"),
    (GOOD.replace("bandwidth", "bandwith"), [], "key 'link.bandwith': unknown key"),
    (GOOD.replace("gpus: 8\n", ""), [], "key 'gpus': required key is missing"),
    (GOOD.replace("100GB/s", "-1GB/s"), [], "cannot be negative"),
    (GOOD.replace("100GB/s", "0GB/s"), [], "must be positive"),
    (GOOD, ["-p", "9"], "9 ranks do not fit on topology 'm', which has 8 GPUs"),
    (GOOD, ["-a", "rign"], "no allreduce algorithm named 'rign'; choose one of"),
    (GOOD, ["-c", "allreduse"], "unknown collective 'allreduse'"),
    (GOOD, ["-s", "4 MB/s"], "unknown unit 'MB/s'"),
])
def test_bad_input_is_one_clear_message_and_exit_status_2(tmp_path, capsys, topology, args,
                                                          expected):
    argv = ["estimate", "-t", write(tmp_path, topology), "-c", "allreduce", "-a", "ring",
            "-p", "8", "-s", "1MiB"]
    for flag_value in zip(args[::2], args[1::2], strict=True):
        index = argv.index(flag_value[0])
        argv[index + 1] = flag_value[1]
    status, out, err = run_cli(capsys, argv)
    assert status == 2 and out == ""
    assert expected in err and "Traceback" not in err


def test_errors_exit_2_without_traceback_in_a_real_process(tmp_path):
    path = write(tmp_path, GOOD.replace("bandwidth", "bandwith"))
    done = subprocess.run([sys.executable, "-m", "collsim", "estimate", "-t", path, "-c",
                           "allreduce", "-a", "ring", "-p", "8", "-s", "1MiB"],
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert "machine.yaml:4, key 'link.bandwith'" in done.stderr
    assert "Traceback" not in done.stderr
