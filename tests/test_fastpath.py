"""The pipeline path (collsim/calls/pipeline.py): NVLSTree on many nodes from two small full
runs, against the full simulation, its fallbacks, and ``--exact``."""

import json
from pathlib import Path

import pytest

import collsim.calls.pipeline as pipeline_module
from collsim.calls.pipeline import (
    REFERENCE_NODES,
    STEADY_CHUNKS,
    Reference,
    at_chunks,
    extrapolate,
    pipeline_time,
    tree_depth,
)
from collsim.cli import main
from collsim.cli.nccltests_format import tables as nccl_tests_tables
from collsim.engine.timing import PipelineDecline
from collsim.hardware.loader import load_topology
from collsim.nccltests import read_logs
from collsim.output.table import read_table
from collsim.simulate import simulate

ROOT = Path(__file__).resolve().parents[1]
CLUSTER = ROOT / "topologies" / "h100-cluster.yaml"
DMODK = {"nodes": 24, "fabric.routing": "dmodk"}  # the preset's own (InfiniBand), named
ECMP = {"nodes": 24, "fabric.routing": "ecmp"}    # as on an Ethernet fabric
BOUND = 0.01  # the error docs/engine.md states for the pipeline path at 192 GPUs, 1 MiB


@pytest.fixture(scope="module")
def cluster():
    return load_topology(CLUSTER, DMODK)


LEAST_CHUNKS = pipeline_module.LEAST_CHUNKS


@pytest.fixture(autouse=True)
def any_chunks(monkeypatch):
    """The tests time 1 MiB and 64 MiB calls (1 and 8 chunks), quick to run in full, which
    the path declines (it times calls of LEAST_CHUNKS or more): here it takes them."""
    monkeypatch.setattr(pipeline_module, "LEAST_CHUNKS", 1)


def test_a_call_of_few_chunks_runs_in_full_and_says_why(cluster, monkeypatch):
    monkeypatch.setattr(pipeline_module, "LEAST_CHUNKS", LEAST_CHUNKS)
    result = simulate(cluster, "allreduce", "nvls_tree", cluster.gpus, 1 << 20)
    assert result.path == "full"
    assert result.fallback == (f"pipeline: 1 chunk: the fill is too much of the call (the "
                               f"path times {LEAST_CHUNKS} or more)")


def test_tree_depth_is_the_deeper_tree_of_nccl_double_tree():
    from collsim.algorithms.nccl.nvls_tree import depth
    from collsim.nccl.layout import double_tree

    for nodes in (2, 5, 12, 16, 100, 256):
        assert tree_depth(nodes) == max(depth(tree) for tree in double_tree(nodes))


def test_extrapolate_reads_the_line_by_depth_and_transfers_by_nodes():
    a, b = Reference(6, 3, 1.0, 600), Reference(12, 4, 1.5, 1200)
    time, transfers = extrapolate([a, b], 7, 100)
    assert time == pytest.approx(3.0)
    assert transfers == 10_000


def test_three_references_give_the_least_squares_line_by_depth():
    # levels costing 0.5 and 0.7: the line's slope is their mean, through the mean point
    refs = [Reference(8, 3, 1.0, 800), Reference(16, 4, 1.5, 1600), Reference(32, 5, 2.2, 3200)]
    time, transfers = extrapolate(refs, 8, 256)
    assert time == pytest.approx((1.0 + 1.5 + 2.2) / 3 + 0.6 * (8 - 4))
    assert transfers == 25_600
    assert extrapolate(refs, 8, 256)[0] < extrapolate(refs[1:], 8, 256)[0]  # 0.6 < 0.7 a level


def test_at_chunks_adds_one_period_a_chunk_and_transfers_in_proportion():
    short, longer = Reference(8, 3, 1.0, 100), Reference(8, 3, 1.5, 200)  # 4 and 8 chunks
    carried = at_chunks(short, longer, Reference(16, 4, 2.0, 300), 4, 12)
    assert carried == Reference(16, 4, 2.0 + 8 * 0.125, 900)


def time_with_stand_ins(machine, fill):
    """The pipeline path of a 1 GiB NVLSTree call on ``machine`` with stand-in references: a
    reference is (nodes, elements), and runs in ``fill(nodes)`` plus 0.01 a chunk, moving 10
    transfers a node and chunk. Returns (time, transfers, chunks, the references asked for as
    (nodes, elements))."""
    from collsim.algorithms.registry import get_algorithm
    from collsim.callspec import CallSpec
    from collsim.simulate import make_call

    spec = CallSpec(machine, "allreduce", "nvls_tree", machine.gpus, 1 << 30, {}, None)
    job, gpus, call = make_call(spec, get_algorithm("allreduce", "nvls_tree"))
    k = 8 * STEADY_CHUNKS
    asked = []

    def reference(ranks: int, count: int) -> tuple[int, int]:
        asked.append((ranks // 8, count))
        return ranks // 8, count

    def chunks(j) -> int:
        return k if j is job else j[1] * k // job.count

    def run(j) -> tuple[float, int]:
        nodes, count = j[0], chunks(j)
        return fill(nodes) + 0.01 * count, 10 * nodes * count

    time, transfers = pipeline_time(machine, call.costs, job, gpus, chunks, reference, run)
    return time, transfers, k, [(nodes, count * 8 // job.count) for nodes, count in asked]


def test_many_chunks_run_the_references_on_fewer_and_carry_them_on(cluster):
    # a pipeline whose first chunks cost more (0.5): steady from STEADY_CHUNKS on
    time, transfers, k, asked = time_with_stand_ins(cluster, lambda n: tree_depth(n) + 0.5)
    assert asked == [(8, 1), (16, 1), (8, 2)]  # in eighths of the call's elements
    assert time == pytest.approx(1.0 * 5 + 0.01 * k + 0.5)  # 24 nodes: 5 levels
    assert transfers == 10 * 24 * k


def test_a_call_on_more_than_32_nodes_adds_a_third_reference():
    machine = load_topology(CLUSTER, {"nodes": 40, "fabric.routing": "dmodk"})
    # levels costing 1.0, then 1.2: the line's slope is their mean, 1.1
    time, transfers, k, asked = time_with_stand_ins(machine, {8: 3.0, 16: 4.0, 32: 5.2}.get)
    assert asked == [(8, 1), (16, 1), (32, 1), (8, 2)]
    assert tree_depth(40) == 6
    assert time == pytest.approx((3.0 + 4.0 + 5.2) / 3 + 1.1 * 2 + 0.01 * k)
    assert transfers == 10 * 40 * k


def test_a_call_placed_on_the_first_gpus_by_name_takes_the_path_as_without(cluster):
    # collsim.calibrate.predict names every call's GPUs; the references take fewer
    placed = simulate(cluster, "allreduce", "nvls_tree", cluster.gpus, 1 << 20,
                      {"placement": list(range(cluster.gpus))})
    plain = simulate(cluster, "allreduce", "nvls_tree", cluster.gpus, 1 << 20)
    assert (placed.path, placed.time_s) == ("pipeline", plain.time_s)


def test_pipeline_agrees_with_the_full_run_on_24_nodes(cluster):
    fast = simulate(cluster, "allreduce", "nvls_tree", cluster.gpus, 1 << 20)
    full = simulate(cluster, "allreduce", "nvls_tree", cluster.gpus, 1 << 20, exact=True)
    assert (fast.path, full.path) == ("pipeline", "full")
    assert fast.time_s == pytest.approx(full.time_s, rel=BOUND)
    assert fast.transfers == full.transfers  # each node adds the same transfers


def test_auto_reports_the_pipeline_path_and_exact_turns_it_off(capsys, cluster):
    argv = ["estimate", "-t", "h100-cluster", "--set", "nodes=24", "--set",
            "fabric.routing=dmodk", "-c", "allreduce", "-a", "auto", "-p", "192", "-s", "64MiB",
            "--json"]
    assert main(argv) == 0
    fast = json.loads(capsys.readouterr().out)
    assert main(argv + ["--exact"]) == 0
    full = json.loads(capsys.readouterr().out)
    assert (fast["selected"], fast["path"], full["path"]) == ("nvls_tree", "pipeline", "full")


def test_shared_network_links_fall_back_to_the_full_run():
    ecmp = load_topology(CLUSTER, ECMP)  # hash ECMP: five hops on one uplink
    result = simulate(ecmp, "allreduce", "nvls_tree", ecmp.gpus, 1 << 20)
    assert result.path == "full"
    assert result.fallback.startswith("pipeline: ") and "links" in result.fallback


def test_no_more_nodes_than_the_references_runs_in_full(cluster):
    ranks = REFERENCE_NODES[1] * 8
    result = simulate(cluster, "allreduce", "nvls_tree", ranks, 1 << 20)
    assert (result.path, result.fallback) == ("full", "")  # not a fallback: nothing to gain


def test_a_chunk_count_the_references_cannot_show_declines(cluster):
    from dataclasses import replace

    from collsim.algorithms.registry import get_algorithm
    from collsim.callspec import CallSpec
    from collsim.simulate import make_call

    algorithm = get_algorithm("allreduce", "nvls_tree")
    spec = CallSpec(cluster, "allreduce", "nvls_tree", cluster.gpus, 1 << 20, {}, None)
    job, gpus, call = make_call(spec, algorithm)
    other = replace(job)  # a stand-in for a reference's job, with fewer chunks

    with pytest.raises(PipelineDecline, match="runs 4 chunks, the call 8"):
        pipeline_time(cluster, call.costs, job, gpus, lambda j: 8 if j is job else 4,
                      lambda ranks, count: other, lambda j: pytest.fail("a reference ran"))


def test_the_busiest_link_is_a_nic_under_dmodk_and_an_uplink_under_hash_ecmp(cluster):
    from collsim.calls.pipeline import hop_period
    from collsim.engine.costs import IDEAL

    dmodk = [hop_period(cluster, IDEAL, 8, nodes) for nodes in (8, 16, 24)]
    assert dmodk[0] == dmodk[1] == dmodk[2]
    ecmp = load_topology(CLUSTER, ECMP)
    assert hop_period(ecmp, IDEAL, 8, 16) > hop_period(ecmp, IDEAL, 8, 8)


def test_ranks_spread_over_the_nodes_fall_back_to_the_full_run():
    machine = load_topology(CLUSTER, {"nodes": 48, "fabric.routing": "dmodk"})
    result = simulate(machine, "allreduce", "nvls_tree", 24 * 8, 1 << 20,
                      {"placement": "spread"})
    assert result.path == "full" and "packed" in result.fallback


def test_trees_deeper_than_one_level_past_the_checked_ones_run_in_full(cluster, monkeypatch):
    import collsim.calls.pipeline as pipeline

    assert tree_depth(24) == 5
    monkeypatch.setattr(pipeline, "CHECKED_DEPTH", 3)
    result = simulate(cluster, "allreduce", "nvls_tree", cluster.gpus, 1 << 20)
    assert result.path == "full"
    assert result.fallback == "pipeline: 24 nodes: trees 5 levels deep; the path's error is " \
                              "checked to 3 and it times one level more"
    monkeypatch.setattr(pipeline, "CHECKED_DEPTH", 4)
    assert simulate(cluster, "allreduce", "nvls_tree", cluster.gpus, 1 << 20).path == "pipeline"


def test_auto_beyond_its_full_run_limit_takes_the_pipeline_path(capsys, monkeypatch):
    import collsim.hardware.limits as limits

    monkeypatch.setattr(limits, "MAX_SELECTED_RANKS", 64)  # the 24 nodes' 192 GPUs are beyond
    argv = ["estimate", "-t", "h100-cluster", "--set", "nodes=24", "-c", "allreduce", "-a",
            "auto", "-p", "192", "-s", "64MiB", "--json"]
    assert main(argv + ["--set", "fabric.routing=dmodk"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert (row["selected"], row["path"]) == ("nvls_tree", "pipeline")
    # where the pipeline path declines (hash ECMP shares uplinks), auto refuses, saying why
    assert main(argv + ["--set", "fabric.routing=ecmp"]) == 2
    err = capsys.readouterr().err
    assert "192 ranks in one call with auto: NCCL's pick, nvls_tree, would run in full " \
           "(pipeline: the references' busiest links differ)" in err
    assert "at most 64 ranks" in err and "Traceback" not in err
    assert main(argv + ["--set", "fabric.routing=dmodk", "--exact"]) == 2  # no quicker path


def test_auto_keeps_the_reason_the_pipeline_path_declined(capsys):
    # Hash ECMP puts more of the trees' hops on an uplink than the references have; auto picks
    # NVLSTree at 64 MiB, and its row says why it ran in full, as the algorithm's own does.
    argv = ["estimate", "-t", "h100-cluster", "--set", "nodes=24", "--set",
            "fabric.routing=ecmp", "-c", "allreduce", "-p", "192", "-s", "64MiB", "--json"]
    assert main(argv + ["-a", "auto"]) == 0
    chosen = json.loads(capsys.readouterr().out)
    assert main(argv + ["-a", "nvls_tree"]) == 0
    named = json.loads(capsys.readouterr().out)
    assert (chosen["selected"], chosen["path"]) == ("nvls_tree", "full")
    assert chosen["fallback"] == named["fallback"]
    assert chosen["fallback"].startswith("pipeline: ")


SCENARIO = f"""\
name: tree-at-24
topologies: [{CLUSTER}]
collectives: [allreduce]
algorithms: [nvls_tree]
sweep:
  size: [1MiB]
  set: {{nodes: [24], fabric.routing: [dmodk]}}
"""


def run_paths(tmp_path: Path, text: str, *options: str) -> tuple[dict, float]:
    """``collsim run`` of the scenario ``text``: run.json's points per path, and the time.
    The table's path column says the same as run.json."""
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(text)
    out = tmp_path / "out"
    assert main(["run", str(scenario), "--out", str(out), "--no-figures", "--force",
                 *options]) == 0
    _, rows = read_table(out / "results.csv")
    paths = json.loads((out / "run.json").read_text())["paths"]
    assert paths == {rows[0]["path"]: 1}
    return paths, rows[0]["time_s"]


def test_run_exact_runs_every_point_in_full(tmp_path):
    paths, fast = run_paths(tmp_path, SCENARIO)
    assert paths == {"pipeline": 1}
    paths, full = run_paths(tmp_path, SCENARIO, "--exact")
    assert paths == {"full": 1}
    paths, from_file = run_paths(tmp_path, SCENARIO + "exact: true\n")
    assert paths == {"full": 1} and from_file == full
    assert fast == pytest.approx(full, rel=BOUND) and fast != full


def test_a_scenario_exact_that_is_not_true_or_false_exits_2(tmp_path, capsys):
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(SCENARIO + "exact: yes please\n")
    assert main(["run", str(scenario), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "scenario.yaml" in err and "exact" in err and "boolean" in err


def test_resume_keeps_to_the_way_the_table_was_run(tmp_path, capsys):
    run_paths(tmp_path, SCENARIO, "--exact")
    argv = ["run", str(tmp_path / "scenario.yaml"), "--out", str(tmp_path / "out"),
            "--no-figures", "--resume"]
    assert main(argv) == 2
    assert "run.json was run with --exact" in capsys.readouterr().err
    assert main(argv + ["--exact"]) == 0


def test_each_row_says_the_path_that_timed_it_and_the_table_repeats_byte_for_byte(tmp_path):
    # On a switch: a one-channel ring steps in lockstep, a direct allreduce of an even size
    # runs one rank per orbit, an uneven one and a binomial tree run every rank.
    switch = ROOT / "topologies" / "switch-64.yaml"
    text = f"""\
name: paths
topologies: [{switch}]
collectives: [allreduce]
algorithms: [ring, direct, binomial]
sweep: {{size: [24KiB, 4100], ranks: [6]}}
"""
    (tmp_path / "paths.yaml").write_text(text)
    written = []
    for out in ("one", "two"):
        assert main(["run", str(tmp_path / "paths.yaml"), "--out", str(tmp_path / out),
                     "--no-figures"]) == 0
        written.append((tmp_path / out / "results.csv").read_bytes())
    assert written[0] == written[1]
    _, rows = read_table(tmp_path / "one" / "results.csv")
    topology = load_topology(switch)
    for row in rows:
        assert row["path"] == simulate(topology, "allreduce", row["algorithm"], 6,
                                       row["size_bytes"]).path
    assert {r["path"] for r in rows} == {"lockstep", "symmetric", "full"}
    # nccl-tests prints one table per algorithm and rank count, whichever path timed a size.
    direct = [r for r in rows if r["algorithm"] == "direct"]
    assert {r["path"] for r in direct} == {"symmetric", "full"}
    (run,) = read_logs(nccl_tests_tables(direct, {"switch-64": topology}))
    assert sorted(row.size_bytes for row in run.rows) == [4100, 24 * 1024]
