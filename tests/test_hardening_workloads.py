"""Workload and jobs files of enormous models or GPU counts, and NaN or infinite values in
them: refused before any plan is built, with one exit-2 paragraph naming the file, line and
key, in well under a second, never a MemoryError or a traceback."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from collsim.cli import main
from collsim.workloads.limits import MAX_PLAN_TASKS

ROOT = Path(__file__).resolve().parents[1]
DP = (ROOT / "workloads" / "llama-7b-dp.yaml").read_text()
JOBS = (ROOT / "jobs" / "two-jobs.yaml").read_text()


def fails_quickly(capsys, *argv: object) -> str:
    """Run the command line; it must exit 2 within seconds, with a short message."""
    started = time.monotonic()
    status = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert status == 2, err
    assert err.startswith("collsim: error: ") and "Traceback" not in err
    assert len(err) < 1000, err
    assert time.monotonic() - started < 10
    return err


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


ENORMOUS = [
    ("micro-batches", "micro_batches: 4", "micro_batches: 1000000000",
     "parallelism.micro_batches", "1,000,000,000 micro-batches"),
    ("layers", "layers: 32", "layers: 10000000", "model.layers", "layers per stage"),
    ("one-byte-bucket", "bucket: 25MiB", "bucket: 1B", "gradients.bucket",
     "gradient buckets per GPU of 1B"),
    ("parameters", "parameters: 6.7B", "parameters: 1e18", "model.parameters",
     "gradient buckets per GPU"),
    ("data-degree", "  tensor: 1\n", "  tensor: 1\n  data: 1000000000\n", "parallelism",
     "1,000,000,000 GPUs, more than collsim builds: at most 131,072"),
]


@pytest.mark.parametrize(("name", "old", "new", "key", "expected"), ENORMOUS,
                         ids=[case[0] for case in ENORMOUS])
def test_an_enormous_step_is_refused_before_it_is_planned(tmp_path, capsys, name, old, new,
                                                          key, expected):
    text = DP.replace(old, new)
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    err = fails_quickly(capsys, "workload", path, "--topology", "switch-64", "--isolated")
    needle = "parallelism:" if key == "parallelism" else new.strip().split(":")[0] + ":"
    assert f"{path}:{line_of(text, needle)}, key '{key}'" in err, err
    assert expected in err
    if key != "parallelism":
        assert f"at most {MAX_PLAN_TASKS:,}" in err


def test_a_huge_gpu_count_on_the_command_line(capsys):
    err = fails_quickly(capsys, "workload", ROOT / "workloads" / "llama-7b-dp.yaml",
                        "--topology", "switch-64", "--gpus", "1000000000")
    assert "1,000,000,000 GPUs" in err and "131,072" in err


JOB_LIMITS = [
    ("range", "gpus: 0-15,32-47,64-79,96-111", "gpus: 0-200000", "jobs[0].gpus",
     "GPU 200,000 is beyond the largest machine collsim builds (131,072 GPUs"),
    ("range-12-digits", "gpus: 0-15,32-47,64-79,96-111", "gpus: 0-999999999999",
     "jobs[0].gpus", "'0-999999999999' names GPUs beyond the largest machine"),
    ("range-digits", "gpus: 0-15,32-47,64-79,96-111", "gpus: 0-" + "9" * 5000,
     "jobs[0].gpus", "names GPUs beyond the largest machine"),
    ("list", "gpus: 0-15,32-47,64-79,96-111", "gpus: [0, 131072]", "jobs[0].gpus",
     "GPU 131,072 is beyond"),
    ("repeat", "repeat: 4", "repeat: 1000000000000", "jobs[0].repeat",
     "1,000,000,000,000 calls on 64 GPUs"),
]


@pytest.mark.parametrize(("name", "old", "new", "key", "expected"), JOB_LIMITS,
                         ids=[case[0] for case in JOB_LIMITS])
def test_enormous_jobs_are_refused_before_they_are_listed(tmp_path, capsys, name, old, new,
                                                          key, expected):
    path = tmp_path / f"{name}.yaml"
    path.write_text(JOBS.replace(old, new))
    err = fails_quickly(capsys, "jobs", path, "--topology", "h100-cluster", "--set",
                        "nodes=16")
    assert f"{path}:" in err and f"key '{key}'" in err and expected in err


NON_FINITE = [
    ("fraction-nan", "compression: {kind: topk, fraction: .nan}\n", "compression.fraction",
     "got nan"),
    ("jitter-inf", "noise: {jitter: .inf}\n", "noise.jitter", "got inf"),
    ("offset-nan", "noise: {offsets: {3: .nan}}\n", "noise.offsets", "got nan"),
]


@pytest.mark.parametrize(("name", "extra", "key", "expected"), NON_FINITE,
                         ids=[case[0] for case in NON_FINITE])
def test_nan_and_infinity_in_a_workload_are_named(tmp_path, capsys, name, extra, key,
                                                  expected):
    path = tmp_path / f"{name}.yaml"
    path.write_text(DP + extra)
    err = fails_quickly(capsys, "workload", path, "--topology", "switch-64", "--gpus", "8",
                        "--isolated")
    assert f"{path}:{len(DP.splitlines()) + 1}, key '{key}" in err
    assert f"expected a finite number, {expected}" in err


def test_nan_in_a_jobs_file_is_named(tmp_path, capsys):
    path = tmp_path / "jobs.yaml"
    path.write_text(JOBS.replace("start: 1ms", "start: .nan"))
    err = fails_quickly(capsys, "jobs", path, "--topology", "h100-cluster", "--set", "nodes=16")
    assert f"{path}:{line_of(JOBS, 'start: 1ms')}, key 'jobs[1].start'" in err
    assert "finite" in err


def test_a_negative_rank_in_noise_offsets_is_named(tmp_path, capsys):
    """Rank -1 would silently delay the last rank (Python's negative index)."""
    path = tmp_path / "noise.yaml"
    path.write_text(DP + "noise: {offsets: {-1: 1ms}}\n")
    err = fails_quickly(capsys, "workload", path, "--topology", "switch-64", "--gpus", "8",
                        "--isolated")
    assert f"{path}:{len(DP.splitlines()) + 1}, key 'noise.offsets.-1'" in err
    assert "rank -1 is not one of the step's 8 ranks" in err
