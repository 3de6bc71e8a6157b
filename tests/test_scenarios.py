"""Scenario files: schema, axes, where filters, sweep expansion and their error messages."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jsonschema
import pytest

from collsim.algorithms.registry import REGISTRY, power_of_two
from collsim.errors import InputError, InputErrors
from collsim.scenarios.loader import load_scenario, scenario_from_text
from collsim.scenarios.schema import PUBLISHED, SCENARIO_SCHEMA, published_text
from collsim.scenarios.sweep import expand

ROOT = Path(__file__).resolve().parents[1]
SWITCH = str(ROOT / "topologies" / "switch-64.yaml")

BASE = f"""\
name: demo
topologies: [{SWITCH}]
collectives: [allreduce]
algorithms: [ring, binomial]
sweep:
  size: {{from: 1KiB, to: 1MiB, factor: 4}}
  ranks: [4, 8]
"""


def scenario(text: str = BASE, **kwargs):
    return scenario_from_text(text, str(ROOT / "scenarios" / "test.yaml"), **kwargs)


def problems(text: str) -> list[InputError]:
    with pytest.raises(InputError) as caught:
        expand(scenario(text))
    error = caught.value
    return error.errors if isinstance(error, InputErrors) else [error]


def test_published_schema_is_the_loaders_schema():
    assert PUBLISHED.read_text(encoding="utf-8") == published_text(), \
        "regenerate: python -m collsim.scenarios.schema > collsim/schemas/scenario.schema.json"
    jsonschema.Draft202012Validator.check_schema(json.loads(published_text()))
    assert json.loads(PUBLISHED.read_text()) == SCENARIO_SCHEMA


def test_sweep_is_the_product_in_order():
    sweep = expand(scenario())
    points = sweep.points
    assert len(points) == 2 * 2 * 6
    assert [p.index for p in points] == list(range(len(points)))
    assert [(p.algorithm, p.ranks, p.size) for p in points[:7]] == [
        ("ring", 4, 1024), ("ring", 4, 4096), ("ring", 4, 16384), ("ring", 4, 65536),
        ("ring", 4, 262144), ("ring", 4, 1048576), ("ring", 8, 1024)]


def test_ranges_lists_and_units():
    text = BASE.replace("ranks: [4, 8]", """ranks: {from: 2, to: 7, step: 2}
  set:
    link.bandwidth: {from: 100GB/s, to: 400GB/s, factor: 2}
    link.latency: [1us, 2us]""").replace("{from: 1KiB, to: 1MiB, factor: 4}", "[4KiB, 4096, 1MB]")
    loaded = scenario(text)
    assert loaded.sizes == [4096, 10**6]
    assert loaded.ranks == [2, 4, 6]
    assert loaded.settings == {"link.bandwidth": ["100GB/s", "200GB/s", "400GB/s"],
                               "link.latency": ["1us", "2us"]}
    assert loaded.swept_columns == ["link.bandwidth", "link.latency"]
    assert len(expand(loaded).points) == 2 * 3 * 3 * 2 * 2


def test_ranks_default_to_every_gpu_and_all_algorithms():
    text = BASE.replace("  ranks: [4, 8]\n", "").replace("[ring, binomial]", "all")
    loaded = scenario(text)
    points = expand(loaded).points
    assert {p.ranks for p in points} == {64}
    assert {p.algorithm for p in points} >= {"ring", "binomial", "double_binary_tree"}


def test_where_filters_and_names_units():
    text = BASE + "where: [ranks == 8 or size >= 64 * KiB, algorithm != 'binomial']\n"
    points = expand(scenario(text)).points
    assert {p.algorithm for p in points} == {"ring"}
    assert all(p.ranks == 8 or p.size >= 65536 for p in points)
    assert len(points) == 6 + 3


def test_unservable_points_are_skipped_with_a_note(monkeypatch):
    binomial = REGISTRY["allreduce", "binomial"]
    monkeypatch.setitem(REGISTRY, ("allreduce", "binomial"),
                        dataclasses.replace(binomial, accepts=power_of_two))
    text = BASE.replace("[4, 8]", "[4, 6, 80]")
    sweep = expand(scenario(text))
    assert {(p.algorithm, p.ranks) for p in sweep.points} == {
        ("ring", 4), ("ring", 6), ("binomial", 4)}
    notes = "\n".join(sweep.notes())
    assert "fewer than 80 ranks" in notes and "power-of-two" in notes


def test_parameters_apply_only_to_algorithms_that_take_them():
    text = BASE.replace("[ring, binomial]", "[binomial, double_binary_tree]") + \
        "  param: {chunk_size: [64KiB, 256KiB]}\n"
    points = expand(scenario(text)).points
    binomial = [p for p in points if p.algorithm == "binomial"]
    tree = [p for p in points if p.algorithm == "double_binary_tree"]
    assert len(tree) == 2 * len(binomial)
    assert all(p.params == () for p in binomial)
    assert {p.params for p in tree} == {(("chunk_size", "64KiB"),), (("chunk_size", "256KiB"),)}


def test_quick_replaces_axes():
    text = BASE + "quick:\n  sweep: {size: [1KiB], ranks: [4]}\n"
    assert len(expand(scenario(text)).points) == 24
    assert [(p.ranks, p.size) for p in expand(scenario(text, quick=True)).points] == [
        (4, 1024), (4, 1024)]
    assert scenario(text).digest != scenario(text, quick=True).digest


def test_inline_topology_errors_point_into_the_scenario():
    text = BASE.replace(f"[{SWITCH}]", """
  - name: tiny
    kind: switch
    gpus: 8
    link: {latency: 1us, bandwith: 10GB/s}""")
    (error,) = problems(text)
    assert error.file.endswith("test.yaml") and error.line == 6
    assert "bandwith" in str(error) and "did you mean 'bandwidth'" in str(error)


@pytest.mark.parametrize(("change", "line", "key", "words"), [
    (("  size:", "  sise:"), 6, "sweep.sise", "did you mean 'size'"),
    (("{from: 1KiB, to: 1MiB, factor: 4}", "[-1KB]"), 6, "sweep.size[0]", "negative"),
    (("{from: 1KiB, to: 1MiB, factor: 4}", "{from: 1MiB, to: 1KiB, factor: 4}"), 6,
     "sweep.size.from", "from '1MiB' is more than to '1KiB'"),
    (("{from: 1KiB, to: 1MiB, factor: 4}", "{from: 1KiB, to: 1MiB}"), 6, "sweep.size",
     "exactly one of 'factor'"),
    (("[4, 8]", "[]"), 7, "sweep.ranks", "non-empty"),
    ((f"[{SWITCH}]", "[nosuch.yaml]"), 2, "topologies[0]", "no topology file 'nosuch.yaml'"),
    (("[ring, binomial]", "[ring, rnig]"), 4, "algorithms[1]", "did you mean 'ring'"),
    (("[allreduce]", "[allreduse]"), 3, "collectives[0]", "not one of"),
    (("[4, 8]", "[4, 8]\nwhere: rank > 2"), 8, "where", "did you mean 'ranks'"),
    (("[4, 8]", "[4, 8]\nwhere: ranks > 100"), 8, "where", "sweep is empty"),
    (("[4, 8]", "[4, 8]\nwhere: __import__('os')"), 8, "where", "not allowed"),
    (("[4, 8]", "[4, 8]\n  set: {link.bandwdth: [1GB/s]}"), 8, "sweep.set.link.bandwdth",
     "did you mean 'bandwidth'"),
    (("[4, 8]", "[4, 8]\n  param: {chunk_sze: 1MiB}"), 8, "sweep.param.chunk_sze",
     "did you mean 'chunk_size'"),
    (("[4, 8]", "[4, 8]\n  param: {root: [0, 6]}"), 8, "sweep.param.root", "root must be"),
])
def test_each_bad_input_names_file_line_and_key(change, line, key, words):
    text = BASE.replace(*change)
    assert text != BASE
    found = problems(text)
    assert len(found) == 1, found
    error = found[0]
    assert error.file.endswith("test.yaml")
    assert (error.line, error.key) == (line, key), str(error)
    assert words in str(error)


def test_every_problem_is_reported_at_once():
    text = BASE.replace("size:", "sise:").replace("[ring, binomial]", "[rnig]") \
        .replace("[4, 8]", "[4, 8]\nfigures: [time_vs_sise]")
    keys = {e.key for e in problems(text)}
    assert {"sweep.sise", "figures[0]"} <= keys


def test_example_scenarios_load(tmp_path):
    examples = sorted((ROOT / "scenarios").glob("*.yaml"))
    assert len(examples) >= 5
    for path in examples:
        for quick in (False, True):
            loaded = load_scenario(path, quick=quick)
            assert expand(loaded).points, path


def test_progress_line_counts_points_and_time_left():
    import io

    from collsim.scenarios.progress import Progress

    stream = io.StringIO()
    bar = Progress(10, done=2, stream=stream, enabled=True, width=10)
    bar._start -= 4.0  # four seconds for the next two points: 2 s a point
    bar.advance(2)
    assert bar.line(bar._start + 4.0) == "[####......] 4/10 points, 6 to go, 0:12 left"
    assert stream.getvalue().startswith("\r[####......] 4/10 points")
    quiet = io.StringIO()
    Progress(3, stream=quiet).advance(1)  # not a terminal: nothing drawn
    assert quiet.getvalue() == ""
