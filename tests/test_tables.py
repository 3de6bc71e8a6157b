"""Each table lives once: data types, the default chunk, the common parameters, and the
figure kinds and defaults are read from one module by everything that uses them."""

from __future__ import annotations

from pathlib import Path

from collsim.algorithms.chunks import cost_chunks
from collsim.algorithms.registry import REGISTRY
from collsim.nccltests.programs import NCCL_TYPE_NAMES
from collsim.output.kinds import DEFAULT_FIGURES, DEFAULT_FORMATS, FIGURE_FORMATS, FIGURE_KINDS
from collsim.params import COMMON_PARAMS, DEFAULT_CHUNK_BYTES, DEFAULT_DTYPE, DTYPES
from collsim.program import Job
from collsim.scenarios.loader import scenario_from_text
from collsim.scenarios.schema import SCENARIO_SCHEMA
from collsim.scenarios.sweep import expand
from collsim.simulate import check_params

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = f"""\
name: tables
topologies: [{ROOT / "topologies" / "switch-64.yaml"}]
collectives: [allreduce]
algorithms: [ring, double_binary_tree]
sweep:
  size: [1MiB]
  ranks: [4]
"""


def test_every_dtype_has_an_nccl_tests_name():
    assert set(NCCL_TYPE_NAMES) == set(DTYPES)
    assert DEFAULT_DTYPE in DTYPES


def test_default_chunk_is_what_programs_and_closed_forms_use():
    job = Job("broadcast", 4, count=10 * DEFAULT_CHUNK_BYTES, itemsize=2)
    assert job.chunk_elements() == DEFAULT_CHUNK_BYTES // 2
    assert cost_chunks(3 * DEFAULT_CHUNK_BYTES, {}) == 3
    assert cost_chunks(3 * DEFAULT_CHUNK_BYTES + 1, {}) == 4


def test_every_algorithm_accepts_the_common_parameters():
    values = {"root": 1, "dtype": "bfloat16", "placement": "spread"}
    assert set(values) == set(COMMON_PARAMS)
    for algorithm in REGISTRY.values():
        assert check_params(algorithm, 4, values) == values


def test_a_swept_common_parameter_applies_to_every_algorithm():
    text = SCENARIO + "  param: {dtype: [float16, float64]}\n"
    points = expand(scenario_from_text(text, str(ROOT / "scenarios" / "t.yaml"))).points
    assert {(p.algorithm, p.params) for p in points} == {
        (name, (("dtype", dtype),)) for name in ("ring", "double_binary_tree")
        for dtype in ("float16", "float64")}


def test_schema_and_drawing_code_know_the_same_figure_kinds():
    from collsim.output.figures import KINDS

    figure = SCENARIO_SCHEMA["properties"]["figures"]["items"]
    assert figure["then"]["enum"] == list(FIGURE_KINDS) == list(KINDS)
    assert all(KINDS[kind].__name__ == kind for kind in KINDS)
    formats = SCENARIO_SCHEMA["properties"]["formats"]["items"]["enum"]
    assert formats == list(FIGURE_FORMATS)


def test_a_scenario_without_figures_gets_the_defaults():
    scenario = scenario_from_text(SCENARIO, str(ROOT / "scenarios" / "t.yaml"))
    assert [f["kind"] for f in scenario.figures] == list(DEFAULT_FIGURES)
    assert scenario.formats == list(DEFAULT_FORMATS)
