"""What one call runs with: the cost model per call, protocol and channels parameters, auto
(NCCL's choice) and best (the fastest simulated), and the columns that record them."""

from __future__ import annotations

import json

import pytest

from collsim.algorithms.nccl.channels import ring_chunk_bytes
from collsim.calls.plan import registered_nccl
from collsim.cli import main
from collsim.engine.costs import IDEAL
from collsim.errors import InputError
from collsim.hardware.loader import load_topology
from collsim.nccl.adapter import nccl_system
from collsim.nccl.choice import choose
from collsim.nccl.protocols import cost_model
from collsim.simulate import COLUMNS, simulate

DGX = load_topology("topologies/dgx-h100.yaml")
MiB, GiB = 2**20, 2**30


def cluster(nodes: int):
    return load_topology("topologies/h100-cluster.yaml", {"nodes": nodes})


@pytest.mark.parametrize("machine, ranks, size", [
    (DGX, 8, 8), (DGX, 8, 64 * 1024), (DGX, 8, 4 * MiB), (DGX, 8, GiB), (DGX, 5, MiB),
    (cluster(2), 16, 8), (cluster(2), 16, 16 * MiB), (cluster(4), 32, 256 * MiB)],
    ids=lambda v: getattr(v, "name", str(v)))
def test_auto_records_and_runs_nccls_choice(machine, ranks, size):
    auto = simulate(machine, "allreduce", "auto", ranks, size)
    choice = choose(nccl_system(machine, list(range(ranks))), "allreduce", size,
                    algorithms=set(registered_nccl("allreduce")))
    assert (auto.algorithm, auto.selected, auto.protocol, auto.channels) == \
        ("auto", choice.algorithm, choice.protocol, choice.channels)
    forced = simulate(machine, "allreduce", choice.algorithm, ranks, size,
                      {"protocol": choice.protocol.lower(), "channels": choice.channels})
    assert forced.time_s == auto.time_s
    # The algorithm's own defaults are NCCL's choice restricted to it.
    assert simulate(machine, "allreduce", choice.algorithm, ranks, size).time_s == auto.time_s


def test_auto_picks_ll_for_tiny_calls_and_simple_for_huge_ones():
    assert simulate(DGX, "allreduce", "auto", 8, 8).protocol == "LL"
    assert simulate(DGX, "allreduce", "auto", 8, GiB).protocol == "Simple"
    assert simulate(cluster(2), "allreduce", "auto", 16, 8).protocol == "LL"


def test_the_protocol_changes_the_time_in_the_right_direction():
    def time(size: int, protocol: str) -> float:
        return simulate(DGX, "allreduce", "ring", 8, size,
                        {"protocol": protocol, "channels": 8}).time_s
    tiny = {p: time(8, p) for p in ("LL", "LL128", "Simple")}
    huge = {p: time(GiB, p) for p in ("LL", "LL128", "Simple")}
    assert tiny["LL"] < tiny["LL128"] < tiny["Simple"]
    assert huge["Simple"] < huge["LL128"] < huge["LL"]
    # LL moves 8 data bytes per 16-byte line: at 1 GiB at least half as fast as Simple.
    assert huge["LL"] > 1.9 * huge["Simple"]


def test_nccl_algorithms_run_under_their_protocols_cost_model():
    for protocol in ("LL", "LL128", "Simple"):
        model = cost_model(DGX, "ring", protocol, range(8))
        # the protocol sets the ring's cost model and its loop chunk
        chunk = ring_chunk_bytes("allreduce", protocol)
        given = simulate(DGX, "allreduce", "ring", 8, 4 * MiB,
                         {"channels": 4, "chunk_size": chunk}, model)
        planned = simulate(DGX, "allreduce", "ring", 8, 4 * MiB,
                           {"channels": 4, "protocol": protocol})
        assert planned.time_s == given.time_s
        assert planned.protocol == protocol and given.protocol is None


def test_broadcast_and_reduce_pipeline_the_protocols_step():
    # LL's step is 32 KiB of data, not Simple's 512 KiB: at 1 MiB on 4 channels each channel's
    # 256 KiB goes down the ring in 8 chunks instead of 1, so the pipeline fills sooner; and
    # LL keeps 8 steps in flight per connection, each forwarded by its 16 warps' units.
    for collective in ("broadcast", "reduce"):
        model = cost_model(DGX, "ring", "LL", range(8))
        planned = simulate(DGX, collective, "ring", 8, MiB, {"channels": 4, "protocol": "LL"})
        given = simulate(DGX, collective, "ring", 8, MiB,
                         {"channels": 4, "chunk_size": 32 * 1024, "window": 8, "units": 16},
                         model)
        in_turn = simulate(DGX, collective, "ring", 8, MiB,
                           {"channels": 4, "chunk_size": 32 * 1024}, model)
        whole = simulate(DGX, collective, "ring", 8, MiB,
                         {"channels": 4, "chunk_size": 512 * 1024}, model)
        assert planned.time_s == given.time_s < in_turn.time_s < whole.time_s
    # Simple synchronises every step: one in flight, as the ring's loops pay theirs.
    simple = simulate(DGX, "broadcast", "ring", 8, MiB, {"channels": 4, "protocol": "Simple"})
    model = cost_model(DGX, "ring", "Simple", range(8))
    assert simple.time_s == simulate(DGX, "broadcast", "ring", 8, MiB,
                                     {"channels": 4, "chunk_size": 512 * 1024}, model).time_s


def test_textbook_algorithms_run_under_the_ring_simple_costs():
    model = cost_model(DGX, "ring", "Simple", range(8))
    for name in ("binomial", "recursive_doubling", "direct"):
        planned = simulate(DGX, "allreduce", name, 8, MiB)
        assert planned.time_s == simulate(DGX, "allreduce", name, 8, MiB, costs=model).time_s
        assert (planned.protocol, planned.channels, planned.selected) == ("Simple", None, name)
        # Launch and NCCL's per-step latency make it slower than the links alone.
        assert planned.time_s > simulate(DGX, "allreduce", name, 8, MiB, costs=IDEAL).time_s
    with pytest.raises(InputError) as raised:
        simulate(DGX, "allreduce", "binomial", 8, MiB, {"protocol": "LL"})
    assert raised.value.key == "param.protocol"


def test_canonical_kinds_keep_the_ideal_model():
    machine = load_topology("topologies/switch-64.yaml")  # 2 us, 100 GB/s, 1 TB/s
    ring = simulate(machine, "allreduce", "ring", 8, 64 * MiB)
    p, n = 8, 64 * MiB
    want = 2 * (p - 1) * 2e-6 + 2 * (p - 1) / p * n / 100e9 + (p - 1) / p * n / 1e12
    assert ring.time_s == pytest.approx(want, rel=1e-9)
    assert (ring.protocol, ring.channels, ring.selected) == (None, 1, "ring")
    assert simulate(machine, "allreduce", "ring", 8, n, {"protocol": "auto"}).time_s == \
        ring.time_s
    assert simulate(machine, "allreduce", "binomial", 8, n).channels is None
    for params in ({"protocol": "LL"}, {"protocol": "Simple"}):
        with pytest.raises(InputError, match="declares no NCCL figures") as raised:
            simulate(machine, "allreduce", "ring", 8, n, params)
        assert raised.value.key == "param.protocol"
    for selector in ("auto", "best"):
        with pytest.raises(InputError, match="declares no NCCL figures") as raised:
            simulate(machine, "allreduce", selector, 8, n)
        assert raised.value.key == "algorithm"


@pytest.mark.parametrize("size", [8, 256 * 1024, 64 * MiB])
def test_best_is_the_fastest_candidate_and_never_slower_than_auto(size):
    best = simulate(DGX, "allreduce", "best", 8, size)
    auto = simulate(DGX, "allreduce", "auto", 8, size)
    assert best.algorithm == "best" and best.time_s <= auto.time_s
    assert best.speedup_vs_auto == pytest.approx(auto.time_s / best.time_s, rel=1e-12)
    choice = choose(nccl_system(DGX, list(range(8))), "allreduce", size,
                    algorithms=set(registered_nccl("allreduce")))
    times = {(c.algorithm, c.protocol): simulate(DGX, "allreduce", c.algorithm, 8, size,
                                                 {"protocol": c.protocol}).time_s
             for c in choice.candidates}
    assert len(times) >= 4    # ring and tree, each with several protocols
    assert best.time_s == min(times.values())
    assert times[best.selected, best.protocol] == best.time_s


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


ESTIMATE = ("estimate", "-t", "dgx-h100", "-c", "allreduce", "-p", "8", "-s", "1MiB")


def test_estimate_json_records_the_choice(capsys):
    status, out, _ = run_cli(capsys, *ESTIMATE, "-a", "auto", "--json")
    row = json.loads(out)
    assert status == 0 and tuple(row) == COLUMNS
    assert row["algorithm"] == "auto" and row["selected"] in registered_nccl("allreduce")
    assert row["protocol"] in ("LL", "LL128", "Simple") and row["channels"] >= 1
    status, out, _ = run_cli(capsys, *ESTIMATE, "-a", "best", "--json")
    row = json.loads(out)
    assert row["speedup_vs_auto"] >= 1
    status, out, _ = run_cli(capsys, *ESTIMATE, "-a", "auto")
    assert out.startswith(f"allreduce auto ({row['selected']}, ") or \
        out.startswith("allreduce auto (")


@pytest.mark.parametrize("extra, key", [
    (("-a", "ring", "--param", "protocol=LL256"), "param.protocol"),
    (("-a", "ring", "--param", "channels=0"), "param.channels"),
    (("-a", "ring", "--param", "channels=65"), "param.channels"),
    (("-a", "ring", "--param", "channels=some"), "param.channels"),
    (("-a", "auto", "--param", "protocol=LL256"), "param.protocol"),
    (("-a", "best", "--param", "channels=4"), "param.channels"),
    (("-a", "binomial", "--param", "protocol=LL128"), "param.protocol"),
])
def test_bad_protocol_or_channels_exit_2_naming_the_key(capsys, extra, key):
    status, out, err = run_cli(capsys, *ESTIMATE, *extra)
    assert status == 2 and out == ""
    assert f"key '{key}'" in err and "Traceback" not in err


def test_protocol_spellings_are_case_insensitive_and_auto_channels_is_accepted():
    times = {simulate(DGX, "allreduce", "ring", 8, MiB, {"protocol": spelling,
                                                         "channels": "AUTO"}).time_s
             for spelling in ("ll128", "LL128", "Ll128")}
    assert len(times) == 1


def test_auto_and_best_are_deterministic(capsys):
    for selector in ("auto", "best"):
        outs = {run_cli(capsys, *ESTIMATE, "-a", selector, "--json")[1] for _ in range(2)}
        assert len(outs) == 1


def test_the_choice_map_draws_what_auto_selected(tmp_path):
    from collsim.output.figures import draw_figures

    rows = [simulate(DGX, "allreduce", "auto", 8, size).row() for size in (8, MiB, GiB)]
    rows += [simulate(DGX, "allreduce", "ring", 8, 8).row()]
    for row in rows:
        row["scenario"] = "s"
    drawn = draw_figures(rows, [{"kind": "choice_map"}], tmp_path, ["svg"])
    assert [p.name for p in drawn.files] == ["choice_map.svg"] and drawn.notes == []
    text = (tmp_path / "choice_map.svg").read_text()
    for row in rows[:3]:
        assert f"{row['selected']} {row['protocol']}" in text   # in the legend
    drawn = draw_figures(rows[3:], [{"kind": "choice_map"}], tmp_path, ["svg"])
    assert drawn.files == [] and "no rows of algorithm 'auto'" in drawn.notes[0]


def test_scenarios_skip_auto_where_there_are_no_nccl_figures():
    from collsim.api import load_scenario, run_scenario

    text = """
name: s
topologies: [switch-64, dgx-h100]
collectives: [allreduce]
algorithms: [auto, binomial]
sweep: {size: [8, 1MiB], ranks: [8]}
"""
    rows = run_scenario(load_scenario(text=text))
    kinds = {(r["topology"], r["algorithm"]) for r in rows}
    assert kinds == {("ideal-switch", "binomial"), ("dgx-h100", "auto"),
                     ("dgx-h100", "binomial")}
    for r in rows:
        want = None if r["topology"] == "ideal-switch" else \
            simulate(DGX, "allreduce", r["algorithm"], 8, r["size_bytes"]).protocol
        assert r["protocol"] == want


def test_protocol_and_channels_sweep_like_any_parameter(tmp_path):
    from collsim.api import load_scenario, run_scenario
    from collsim.output.table import key_columns

    text = """
name: s
topologies: [dgx-h100]
collectives: [allreduce]
algorithms: [ring, binomial]
sweep: {size: [8, 1GiB], ranks: [8], param: {protocol: [ll, Simple], channels: [2, auto]}}
"""
    rows = run_scenario(load_scenario(text=text), tmp_path / "out")
    assert rows.columns[10:] == ["selected", "path", "protocol", "channels"]
    assert key_columns(rows.columns)[-2:] == ["protocol", "channels"]
    ring = [r for r in rows if r["algorithm"] == "ring"]
    assert len(ring) == 8 and len(rows) == 10      # binomial takes neither: one row per size
    for r in ring:   # the value asked for, and the time of that call
        params = {"protocol": r["protocol"], "channels": r["channels"]}
        assert r["time_s"] == simulate(DGX, "allreduce", "ring", 8, r["size_bytes"],
                                       params).time_s
    assert {(r["protocol"], r["channels"]) for r in rows if r["algorithm"] == "binomial"} == \
        {(None, None)}
    # The table is complete: resuming runs nothing.
    again = run_scenario(load_scenario(text=text), tmp_path / "out", resume=True)
    assert [r["time_s"] for r in again] == [r["time_s"] for r in rows]


def test_auto_runs_nccls_point_to_point_program_for_alltoall():
    import collsim
    from collsim.algorithms.registry import REGISTRY

    standing_in = ("alltoall", "nccl_p2p") not in REGISTRY
    if standing_in:   # until NCCL's own program is registered: any alltoall program will do
        collsim.register("alltoall", "nccl_p2p", params=("channels",))(
            REGISTRY["alltoall", "direct"].program)
    try:
        auto = simulate(DGX, "alltoall", "auto", 8, MiB)
        forced = simulate(DGX, "alltoall", "nccl_p2p", 8, MiB, {"channels": 32})
        assert (auto.selected, auto.protocol, auto.channels) == ("nccl_p2p", "Simple", 32)
        assert auto.time_s == forced.time_s
    finally:
        if standing_in:
            collsim.unregister("alltoall", "nccl_p2p")
    with pytest.raises(InputError, match="no NCCL algorithm for gather") as raised:
        simulate(DGX, "gather", "auto", 8, MiB)
    assert raised.value.key == "algorithm"


def test_a_protocol_the_family_does_not_run_is_refused_at_its_key():
    from collsim.calls.plan import plan

    with pytest.raises(InputError, match="Simple protocol only") as raised:
        plan(DGX, "allreduce", "nvls", list(range(8)), MiB, {"protocol": "LL"})
    assert raised.value.key == "param.protocol"


def test_a_scenario_may_name_nccl_algorithms_without_a_program_yet():
    from collsim.algorithms.registry import REGISTRY
    from collsim.api import load_scenario
    from collsim.hardware.nccl_names import ALGORITHMS
    from collsim.scenarios.sweep import expand

    missing = [name for name in ALGORITHMS if ("allreduce", name) not in REGISTRY]
    names = ["ring", *missing]
    scenario = load_scenario(text=f"""
name: s
topologies: [dgx-h100]
collectives: [allreduce]
algorithms: [{", ".join(names)}]
sweep: {{size: [8, 1MiB, 1GiB], ranks: [4, 8]}}
where: "size < GiB"
""")
    sweep = expand(scenario)
    assert {p.algorithm for p in sweep.points} == {"ring"} and len(sweep.points) == 4
    assert dict(sweep.skipped) == {f"NCCL's {name} for allreduce, which has no program yet": 4
                                   for name in missing}
    with pytest.raises(InputError, match="no allreduce algorithm named 'nvlss'"):
        load_scenario(text="""
name: s
topologies: [dgx-h100]
collectives: [allreduce]
algorithms: [ring, nvlss]
sweep: {size: [8]}
""")


def test_the_progress_lines_closed_form_uses_the_calls_cost_model():
    from collsim.simulate import expected_time

    ring = simulate(DGX, "allreduce", "ring", 8, GiB)
    assert ring.analytic_time_s is not None
    assert expected_time(DGX, "allreduce", "ring", 8, GiB) == ring.analytic_time_s
    assert expected_time(DGX, "allreduce", "ring", 8, GiB, costs=IDEAL) < ring.analytic_time_s
    assert expected_time(DGX, "allreduce", "auto", 8, GiB) is None
    assert expected_time(DGX, "allreduce", "ring", 8, GiB, {"channels": 0}) is None


def test_topo_show_prints_nccls_choice_by_size(capsys):
    from collsim.calls.report import CHOICE_SIZES
    from collsim.units import format_size

    assert main(["topo", "show", "dgx-h100", "--no-bisection"]) == 0
    out = capsys.readouterr().out
    index = {format_size(size): i for i, size in enumerate(CHOICE_SIZES)}
    covered = []
    for line in out[out.index("NCCL's choice"):].splitlines()[1:]:
        sizes, pick = line.split(None, 1)
        first, _, last = sizes.partition("-")
        span = range(index[first], index[last or first] + 1)
        covered += span
        for i in span:   # every size of the line has that pick
            choice = choose(nccl_system(DGX), "allreduce", CHOICE_SIZES[i])
            mark = "" if choice.algorithm in registered_nccl("allreduce") else "*"
            assert pick.startswith(f"{choice.algorithm}{mark} {choice.protocol}, "
                                   f"{choice.channels} channel")
    assert covered == list(range(len(CHOICE_SIZES)))


def test_nccl_algo_spellings_and_selectors_in_any_case():
    tree = simulate(DGX, "allreduce", "nccl_tree", 8, MiB)
    for spelling in ("Tree", "TREE", "tree"):
        same = simulate(DGX, "allreduce", spelling, 8, MiB)
        assert (same.algorithm, same.time_s) == ("nccl_tree", tree.time_s)
    assert simulate(DGX, "allreduce", "Ring", 8, MiB).algorithm == "ring"
    assert simulate(DGX, "allreduce", "AUTO", 8, MiB).algorithm == "auto"
    with pytest.raises(InputError, match="no allreduce algorithm named 'Trees'"):
        simulate(DGX, "allreduce", "Trees", 8, MiB)
    from collsim.api import load_scenario

    scenario = load_scenario(text="""
name: s
topologies: [dgx-h100]
collectives: [allreduce]
algorithms: [Ring, Tree, Auto]
sweep: {size: [8]}
""")
    assert scenario.algorithms["allreduce"] == ["ring", "nccl_tree", "auto"]
