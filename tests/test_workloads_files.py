"""Workload files: the published schema, bad files reported at file:line with the key and
exit status 2, the ``collsim workload`` command, the Python entry points and the examples."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import jsonschema
import pytest

from collsim.cli import main
from collsim.workloads.executor import run_plan
from collsim.workloads.loader import load_workload
from collsim.workloads.plan import build_plan
from collsim.workloads.schema import PUBLISHED, WORKLOAD_SCHEMA, published_text
from collsim.workloads.service import alpha_beta, isolated

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "workloads").glob("*.yaml"))

GOOD = """\
name: small
model:
  layers: 4
  parameters: 40M
  hidden: 256
  sequence: 128
  micro_batch: 1
parallelism:
  tensor: 2
  pipeline: 2
  micro_batches: 2
compute:
  forward: 100us
  flops: 20G
  peak: 1TFLOP/s
gradients:
  bucket: 4MiB
"""


def test_published_schema_is_the_loaders_schema():
    assert PUBLISHED.read_text(encoding="utf-8") == published_text(), \
        "regenerate: python -m collsim.workloads.schema > collsim/schemas/workload.schema.json"
    jsonschema.Draft202012Validator.check_schema(json.loads(published_text()))
    assert json.loads(PUBLISHED.read_text()) == WORKLOAD_SCHEMA


def edit(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


@pytest.fixture
def pow2_ring():
    """An allreduce that serves powers of two only (no built-in one refuses a rank count)."""
    import collsim
    from collsim.algorithms.registry import get_algorithm, power_of_two

    collsim.register("allreduce", "pow2_ring", accepts=power_of_two)(
        get_algorithm("allreduce", "ring").program)
    yield
    collsim.unregister("allreduce", "pow2_ring")


BAD = [
    ("unknown key", edit(GOOD, "model:", "modle:"), 2, "modle", "did you mean 'model'"),
    ("zero stage", edit(GOOD, "  micro_batches: 2", "  zero: 4"), 11, "parallelism.zero",
     "not one of 0, 1, 2, 3"),
    ("format", GOOD + "dtypes: {gradients: fp12}\n", 18, "dtypes.gradients",
     "unknown number format 'fp12'"),
    ("top-k fraction", GOOD + "compression: {kind: topk}\n", 18, "compression.fraction",
     "required for topk"),
    ("key of another kind", GOOD + "compression: {kind: sign, block: 64, fraction: 0.1}\n",
     18, "compression.fraction", "applies to topk only"),
    ("algorithm", GOOD + "algorithms:\n  allreduce: rign\n", 19, "algorithms.allreduce",
     "did you mean 'ring'"),
    ("both counts", edit(GOOD, "  parameters: 40M", "  parameters: 40M\n"
                               "  parameters_per_layer: 10M"), 5, "model.parameters_per_layer",
     "not both"),
    ("time unit", edit(GOOD, "forward: 100us", "forward: 3 parsecs"), 13, "compute.forward",
     "unknown unit"),
    ("count", edit(GOOD, "parameters: 40M", "parameters: lots"), 4, "model.parameters",
     "expected a count"),
    ("stages", edit(GOOD, "pipeline: 2", "pipeline: 3"), 10, "parallelism.pipeline",
     "4 layers do not split evenly into 3 pipeline stages"),
    ("activation", edit(GOOD, "  hidden: 256\n  sequence: 128\n  micro_batch: 1\n", ""), 2,
     "model", "moves activations"),
    ("half a shape", edit(GOOD, "  sequence: 128\n", ""), 5, "model.sequence", "required"),
    ("zero and compression", edit(GOOD, "  micro_batches: 2", "  zero: 1") +
     "compression: {kind: topk, fraction: 0.01}\n", 18, "compression.kind", "zero: 0"),
    ("backward", edit(GOOD, "  forward: 100us", "  forward: 100us\n  backward: twice"), 14,
     "compute.backward", "expected a time"),
    ("ratio", edit(GOOD, "  forward: 100us", "  forward: 100us\n  backward: -2x"), 14,
     "compute.backward", "positive multiple"),
    ("no compute", edit(GOOD, "  forward: 100us\n", ""), 12, "compute",
     "give forward"),
    ("shapes too big", GOOD + "compression: {kind: lowrank, rank: 2, shapes: [[5000, 5000]]}\n",
     18, "compression.shapes", "more than a layer's"),
    ("experts split", edit(GOOD, "  micro_batch: 1", "  micro_batch: 1\n  experts: {count: 3}")
     .replace("  tensor: 2", "  tensor: 2\n  expert: 2"), 8, "model.experts.count",
     "3 experts do not split evenly"),
    ("offset rank", GOOD + "noise: {offsets: {99: 1ms}}\n", 18, "noise.offsets.99",
     "rank 99 is not one of the step's 64 ranks"),
    ("algorithm for group", GOOD + "algorithms: {allreduce: pow2_ring}\n", 18,
     "algorithms.allreduce", "power-of-two number of ranks (the data groups have 3 ranks)"),
    ("not YAML", GOOD + "noise: [\n", 19, None, "not valid YAML"),
    ("not a mapping", "- name: x\n", 1, None, "must be a mapping"),
]


@pytest.mark.parametrize(("case", "text", "line", "key", "fragment"), BAD,
                         ids=[case[0] for case in BAD])
def test_bad_workloads_exit_2_naming_file_line_and_key(tmp_path, capsys, pow2_ring, case,
                                                       text, line, key, fragment):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    gpus = ["--gpus", "12"] if case == "algorithm for group" else []
    assert main(["workload", str(path), "-t", "switch-64", *gpus]) == 2
    err = capsys.readouterr().err
    assert err.startswith("collsim: error: ")
    assert f"{path}:{line}" in err, err
    if key:
        assert f"key '{key}'" in err, err
    assert fragment in err, err
    assert "Traceback" not in err


def test_every_problem_of_a_file_is_reported_at_once(tmp_path, capsys):
    text = edit(edit(GOOD, "forward: 100us", "forward: soon"), "bucket: 4MiB", "bucket: big")
    path = tmp_path / "two.yaml"
    path.write_text(text + "dtypes: {activations: fp7}\n")
    assert main(["workload", str(path), "-t", "switch-64"]) == 2
    err = capsys.readouterr().err
    assert [f"{path}:{n}" in err for n in (13, 17, 18)] == [True] * 3


def test_bad_command_line_values_exit_2(tmp_path, capsys):
    path = tmp_path / "good.yaml"
    path.write_text(GOOD)
    assert main(["workload", str(path), "-t", "switch-64", "--with", "novalue"]) == 2
    assert "--with" in capsys.readouterr().err
    assert main(["workload", str(path), "-t", "switch-64", "--gpus", "6"]) == 2
    assert "not a whole number of tensor x pipeline" in capsys.readouterr().err
    assert main(["workload", str(path), "-t", "switch-64", "--gpus", "0"]) == 2
    capsys.readouterr()
    assert main(["workload", str(path), "-t", "switch-64", "--with", "parallelism.data=20"]) == 2
    assert f"{path}:8, key 'parallelism': the workload needs 80 GPUs" in \
        capsys.readouterr().err
    assert main(["workload", str(tmp_path / "missing.yaml"), "-t", "switch-64"]) == 2
    assert "no such" in capsys.readouterr().err


def test_the_command_prints_a_summary_and_json(tmp_path, capsys):
    path = tmp_path / "good.yaml"
    path.write_text(GOOD)
    assert main(["workload", str(path), "-t", "switch-64", "--gpus", "8"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("small on ideal-switch: 8 GPUs = tensor 2 x data 2 x pipeline 2")
    for word in ("step", "compute", "exposed communication", "bubble", "MFU",
                 "tensor allreduce", "data allreduce", "pipeline send"):
        assert word in out
    assert main(["workload", str(path), "-t", "switch-64", "--gpus", "8", "--json",
                 "--with", "dtypes.gradients=fp8_e5m2", "--set", "link.bandwidth=50GB/s"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["topology"] == "ideal-switch" and data["gpus"] == 8
    assert data["layout"]["tensor"] == 2 and data["layout"]["data"] == 2
    parts = data["compute_s"] + data["exposed_s"] + data["bubble_s"]
    assert parts == pytest.approx(data["step_s"], rel=1e-12)
    per_rank = 2 * 10_000_000 // 2  # 2 layers per stage, 10M parameters each, tensor 2
    assert data["kinds"]["data allreduce"]["bytes"] == per_rank  # fp8: a byte each
    # MFU = 3 x 20 GFLOP x 4 layers x 2 micro-batches x 2 replicas / (step x 8 x 1 TFLOP/s)
    assert data["mfu"] == pytest.approx(3 * 20e9 * 4 * 2 * 2 / (data["step_s"] * 8 * 1e12))


def test_the_stand_in_times_a_call_by_simulating_it_alone():
    """Data parallelism on 4 GPUs of the canonical switch, no overlap: each bucket's ring
    allreduce takes its closed form 2(p-1)(alpha + n/p beta) + (p-1)(n/p) gamma, with
    alpha = 2 us, beta = 1/100 GB/s, gamma = 1/1 TB/s (switch-64.yaml)."""
    from collsim.api import load_topology
    from collsim.workloads.loader import workload_from_text
    from collsim.workloads.step import run_workload

    workload = workload_from_text("""
name: dp
model: {layers: 2, parameters_per_layer: 1M}
parallelism: {data: 4}
compute: {forward: 1ms}
gradients: {bucket: 4MB, overlap: false}
dtypes: {gradients: fp32}
""")
    result = run_workload(workload, load_topology("switch-64"))
    p, n = 4, 4e6
    ring = 2 * (p - 1) * (2e-6 + n / p / 100e9) + (p - 1) * (n / p) / 1e12
    assert result.step_s == pytest.approx(2 * 3e-3 + 2 * ring, rel=1e-9)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_workloads_plan_and_run(path):
    """Every example loads, plans with two replicas and runs with calls at 50 GB/s."""
    workload = load_workload(path)
    par = workload.parallelism
    plan = build_plan(workload, 2 * par.tensor * par.pipeline)
    assert plan.layout.data == 2
    result = run_plan(plan, isolated(alpha_beta(5e-6, 1 / 50e9)))
    assert result.step_s > result.compute_s > 0 and 0 < result.mfu < 1


def test_the_examples_cover_the_issue():
    names = {path.stem for path in EXAMPLES}
    assert {"llama-7b-dp", "llama-7b-zero3", "gpt-39b-3d"} <= names
    three_d = load_workload(ROOT / "workloads" / "gpt-39b-3d.yaml").parallelism
    assert (three_d.tensor, three_d.pipeline) == (8, 4)
    assert load_workload(ROOT / "workloads" / "llama-7b-zero3.yaml").parallelism.zero == 3


def test_overrides_change_a_workload_as_the_file_would():
    base = ROOT / "workloads" / "llama-7b-dp.yaml"
    changed = load_workload(base, {"dtypes.gradients": "fp32", "compression.kind": "topk",
                                   "compression.fraction": 0.01})
    assert changed.dtypes.gradients.bits == 32
    assert (changed.compression.kind, changed.compression.fraction) == ("topk", Fraction(1, 100))
    assert load_workload(base).compression.kind == "none"
