"""``collsim replay``: a trace's calls and compute replayed on a machine. Hand-checkable
steps on the ideal switch (step = compute + the closed form), waits kept as measured,
scale-out and number formats, the report's JSON and trace file, bad traces exit 2."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from collsim.api import load_topology
from collsim.cli import main
from collsim.errors import InputError
from collsim.replay.model import ComputeSpan, ProcessGroup, Trace, TracedCall
from collsim.replay.plan import build_plan
from collsim.replay.report import build_result
from collsim.replay.run import replay
from collsim.replay.whatif import data_parallel_groups, scale_out, with_format

SWITCH = load_topology("switch-64")
# switch-64: latency 1 us (alpha = 2 us a message), 100 GB/s a port, 1 TB/s reduction.
ALPHA, BETA, GAMMA = 2e-6, 1 / 100e9, 1 / 1e12


def ring_allreduce(p: int, n: int) -> float:
    """The ring allreduce's closed form on the switch (collsim list)."""
    return 2 * (p - 1) * ALPHA + 2 * (p - 1) / p * n * BETA + (p - 1) / p * n * GAMMA


def call(rank: int, index: int, start: float, duration: float, size: int = 2**20,
         group: str = "0", collective: str = "allreduce", dtype: str = "float32",
         stream: int | None = None, peer: int | None = None, root: int | None = None
         ) -> TracedCall:
    return TracedCall(rank, index, collective, size, dtype, group, start, duration, stream,
                      peer=peer, root=root)


def span(rank: int, start: float, duration: float, stream: int | None = None,
         name: str = "compute") -> ComputeSpan:
    return ComputeSpan(rank, start, duration, stream, name)


def make_trace(calls: dict, compute: dict, groups: dict | None = None, world: int = 2,
               backend: str = "gloo") -> Trace:
    groups = groups or {"0": ProcessGroup("0", "default_pg", tuple(range(world)))}
    return Trace(world, backend, groups, {r: tuple(calls.get(r, ())) for r in range(world)},
                 {r: tuple(compute.get(r, ())) for r in range(world)},
                 {r: f"rank{r}.json" for r in range(world)})


def compute_then_allreduce(size: int = 64 * 2**20) -> Trace:
    """Two ranks: 1 ms of compute, then one allreduce (measured 900 us)."""
    return make_trace({r: [call(r, 0, 1000.0, 900.0, size)] for r in range(2)},
                      {r: [span(r, 0.0, 1000.0)] for r in range(2)})


def run(trace: Trace, topology=SWITCH, **kwargs):
    return build_result(replay(build_plan(trace, **kwargs), topology), "test")


@pytest.mark.parametrize("isolated", [False, True])
def test_step_is_compute_plus_the_closed_form_allreduce(isolated):
    size = 64 * 2**20
    result = build_result(replay(build_plan(compute_then_allreduce(size)), SWITCH, isolated),
                          "test")
    assert result.simulated.step_s == pytest.approx(1e-3 + ring_allreduce(2, size),
                                                    rel=1e-12)
    assert result.simulated.compute_s == pytest.approx(1e-3)
    assert result.simulated.exposed_s == pytest.approx(ring_allreduce(2, size), rel=1e-12)
    assert result.measured.step_s == pytest.approx(1.9e-3)
    assert build_plan(compute_then_allreduce(size)).measured_s() == pytest.approx(1.9e-3)
    assert result.measured.exposed_s == pytest.approx(0.9e-3)
    (kind,) = result.simulated.kinds
    assert kind == "default_pg (0) allreduce"
    assert [(c.rank, c.bytes, c.measured_us) for c in result.calls] == [
        (0, size, 900.0), (1, size, 900.0)]
    assert result.calls[0].simulated_us == pytest.approx(ring_allreduce(2, size) * 1e6)


def test_work_after_a_call_waits_for_it_and_work_beside_it_does_not():
    """GPU trace: compute on stream 7, calls on stream 13. The kernel that started while
    the allreduce ran overlaps it in the replay; the one that started after it ended waits.
    The 20 us the stream stood idle between two kernels is not replayed."""
    size = 64 * 2**20  # 1.36 ms on the switch, measured 100 us: the replay is slower
    calls = {r: [call(r, 0, 100.0, 100.0, size, stream=13)] for r in range(2)}
    compute = {r: [span(r, 0.0, 100.0, 7, "backward a"), span(r, 120.0, 500.0, 7, "backward b"),
                   span(r, 700.0, 50.0, 7, "optimizer")] for r in range(2)}
    plan = build_plan(make_trace(calls, compute, backend="nccl"))
    names = [t.name for t in plan.tasks[0]]
    assert names == ["backward a", "allreduce 67108864 B", "backward b", "optimizer"]
    assert plan.tasks[0][1].deps == (0,)           # the call waits for the kernel before it
    assert plan.tasks[0][2].deps == ()             # started while the call ran: no wait
    assert plan.tasks[0][3].deps == (1,)           # started after it ended: waits for it
    timeline = replay(plan, SWITCH).timeline
    call_end = 100e-6 + ring_allreduce(2, size)
    assert timeline.start[0][2] == pytest.approx(100e-6)
    assert timeline.start[0][3] == pytest.approx(call_end)
    assert max(timeline.end[0]) == pytest.approx(call_end + 50e-6)


def test_cpu_calls_wait_for_the_compute_before_them_and_a_late_rank():
    """A gloo trace is one CPU thread: compute, call, compute in order. Rank 1's trace
    starts 300 us after rank 0's, so rank 0 waits for it in the call, as measured."""
    size = 2**20
    calls = {0: [call(0, 0, 100.0, 450.0, size)], 1: [call(1, 0, 400.0, 150.0, size)]}
    compute = {0: [span(0, 0.0, 100.0), span(0, 550.0, 200.0)],
               1: [span(1, 300.0, 100.0), span(1, 550.0, 200.0)]}
    replayed = replay(build_plan(make_trace(calls, compute)), SWITCH)
    timeline = replayed.timeline
    end = 400e-6 + ring_allreduce(2, size)
    assert timeline.start[0][1] == pytest.approx(100e-6)   # rank 0 arrives at 100 us
    assert timeline.end[0][1] == pytest.approx(end)        # and waits for rank 1
    assert timeline.start[1][0] == pytest.approx(300e-6)
    assert timeline.start[0][2] == pytest.approx(end)


def test_a_cpu_trace_keeps_the_time_it_recorded_nothing_and_a_gpu_trace_does_not():
    """100 us of compute, 200 us with no event, then the allreduce: on CPU the 200 us are
    the rank's own untraced work (host), kept; on a GPU stream they are idle, dropped."""
    size = 2**20
    for backend, stream, host in (("gloo", None, 200e-6), ("nccl", 5, 0.0)):
        trace = make_trace({r: [call(r, 0, 300.0, 50.0, size, stream=stream)] for r in range(2)},
                           {r: [span(r, 0.0, 100.0, stream)] for r in range(2)},
                           backend=backend)
        result = run(trace)
        assert result.simulated.step_s == pytest.approx(100e-6 + host + ring_allreduce(2, size))
        assert result.simulated.compute_s == pytest.approx(100e-6 + host)
        assert result.measured.compute_s == pytest.approx(100e-6 + host)


def test_calls_match_by_group_and_order_and_must_agree():
    calls = {0: [call(0, 0, 0.0, 10.0, 2**20)], 1: [call(1, 0, 0.0, 10.0, 2**21)]}
    with pytest.raises(InputError, match="do not match") as caught:
        build_plan(make_trace(calls, {}))
    assert caught.value.file == "rank1.json"
    missing = {0: [call(0, 0, 0.0, 10.0), call(0, 1, 20.0, 10.0)], 1: [call(1, 0, 0.0, 10.0)]}
    with pytest.raises(InputError, match=r"call 1 of group '0' .* missing on rank\(s\) 1"):
        build_plan(make_trace(missing, {}))


def test_a_rooted_call_keeps_the_traced_root():
    """Group {2, 5}: a broadcast from global rank 5 is rooted at its member 1."""
    groups = {"0": ProcessGroup("0", "default_pg", tuple(range(6))),
              "1": ProcessGroup("1", "pair", (2, 5))}
    calls = {r: [call(r, 0, 0.0, 10.0, 64, "1", "broadcast", root=5)] for r in (2, 5)}
    plan = build_plan(make_trace(calls, {}, groups, world=6))
    assert plan.tasks[2][0].call.root == 1 and plan.tasks[5][0].call.group == (2, 5)
    calls = {r: [call(r, 0, 0.0, 10.0, 64, "1", "broadcast", root=0)] for r in (2, 5)}
    with pytest.raises(InputError, match="root rank 0, which is not in its group"):
        build_plan(make_trace(calls, {}, groups, world=6))


def test_sends_meet_their_receives():
    calls = {0: [call(0, 0, 0.0, 50.0, 2**20, collective="send", peer=1)],
             1: [call(1, 0, 0.0, 50.0, 2**20, collective="recv", peer=0)]}
    result = run(make_trace(calls, {}))
    # One message of n bytes over two ports: alpha + n * beta.
    assert result.simulated.step_s == pytest.approx(ALPHA + 2**20 * BETA, rel=1e-12)
    assert list(result.simulated.kinds) == ["default_pg (0) send"]


def tp_dp_trace() -> Trace:
    """4 ranks: tensor groups {0,1} {2,3}, data-parallel groups {0,2} {1,3}; each rank does
    a tensor allreduce of 1 MiB, then a data-parallel allreduce of 8 MiB."""
    groups = {"0": ProcessGroup("0", "default_pg", (0, 1, 2, 3)),
              "1": ProcessGroup("1", "tp", (0, 1)), "2": ProcessGroup("2", "tp", (2, 3)),
              "3": ProcessGroup("3", "dp", (0, 2)), "4": ProcessGroup("4", "dp", (1, 3))}
    tp = {0: "1", 1: "1", 2: "2", 3: "2"}
    dp = {0: "3", 2: "3", 1: "4", 3: "4"}
    calls = {r: [call(r, 0, 10.0, 5.0, 2**20, tp[r]), call(r, 1, 20.0, 40.0, 2**23, dp[r])]
             for r in range(4)}
    return make_trace(calls, {r: [span(r, 0.0, 10.0)] for r in range(4)}, groups, world=4)


def test_scale_out_grows_data_parallel_groups_and_keeps_call_sizes():
    trace = tp_dp_trace()
    assert [g.ranks for g in data_parallel_groups(trace)] == [(0, 2), (1, 3)]
    grown = scale_out(trace, 16)
    assert grown.world_size == 16 and set(grown.calls) == set(range(16))
    dp_groups = sorted({c.group for calls in grown.calls.values() for c in calls
                        if grown.groups[c.group].description == "dp"})
    assert [grown.groups[g].ranks for g in dp_groups] == [(0, 2, 4, 6, 8, 10, 12, 14),
                                                          (1, 3, 5, 7, 9, 11, 13, 15)]
    tp_groups = {grown.groups[c.group].ranks for calls in grown.calls.values() for c in calls
                 if grown.groups[c.group].description == "tp"}
    assert tp_groups == {(2 * i, 2 * i + 1) for i in range(8)}
    assert {c.size_bytes for calls in grown.calls.values() for c in calls
            if c.group in dp_groups} == {2**23}
    result = run(grown)
    assert result.ranks == 16 and len(result.calls) == 32
    # Compute, the tensor allreduce (2 ranks), the 5 us the CPU trace shows nothing between
    # the calls (host time, kept), then the data-parallel allreduce (8 ranks).
    step = 10e-6 + ring_allreduce(2, 2**20) + 5e-6 + ring_allreduce(8, 2**23)
    assert result.simulated.step_s == pytest.approx(step, rel=1e-9)


def test_scale_out_of_one_world_group_and_bad_counts():
    grown = scale_out(compute_then_allreduce(2**20), 8)
    assert grown.groups["0"].ranks == tuple(range(8))
    assert {c.size_bytes for calls in grown.calls.values() for c in calls} == {2**20}
    with pytest.raises(InputError, match="multiple of 2"):
        scale_out(tp_dp_trace(), 9)


def test_number_format_changes_float_calls_only():
    calls = {r: [call(r, 0, 0.0, 1.0, 4000), call(r, 1, 2.0, 1.0, 800, dtype="int64")]
             for r in range(2)}
    changed = with_format(make_trace(calls, {}), "bf16")
    assert [(c.size_bytes, c.dtype) for c in changed.calls[0]] == [(2000, "bfloat16"),
                                                                    (800, "int64")]
    with pytest.raises(InputError, match="unknown number format"):
        with_format(make_trace(calls, {}), "fp7")


def test_another_algorithm_by_param():
    size = 64 * 2**20
    result = run(compute_then_allreduce(size), algorithms={"allreduce": "direct"})
    # direct: 2 alpha + 2(p-1)/p n beta + (p-1)/p n gamma (collsim list).
    assert result.simulated.step_s == pytest.approx(
        1e-3 + 2 * ALPHA + size * BETA + size / 2 * GAMMA, rel=1e-12)
    with pytest.raises(InputError, match="no allreduce algorithm named 'nonesuch'") as caught:
        build_plan(compute_then_allreduce(), {"allreduce": "nonesuch"})
    assert caught.value.key == "--param allreduce"


@pytest.fixture
def traced(monkeypatch):
    """The CLI reads the trace given in code (the reader is tested on its own)."""
    trace = {"value": compute_then_allreduce()}
    monkeypatch.setattr("collsim.replay.reader.read_trace", lambda path: trace["value"])
    return trace


def test_cli_json_has_the_summary_and_every_call(traced, capsys):
    assert main(["replay", "job/", "-t", "switch-64", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["topology"] == "ideal-switch" and out["ranks"] == 2
    assert out["algorithms"]["allreduce"] == "ring"
    assert out["simulated"]["step_s"] == pytest.approx(1e-3 + ring_allreduce(2, 64 * 2**20))
    assert set(out["measured"]) == {"step_s", "compute_s", "exposed_s", "idle_s", "kinds"}
    assert [set(c) for c in out["calls"]] == [{
        "rank", "index", "group", "collective", "bytes", "measured_us", "simulated_us"}] * 2


def test_cli_own_machine_table_perfetto_trace_and_figure(traced, capsys, tmp_path):
    path, figure = tmp_path / "out.json", tmp_path / "replay.png"
    assert main(["replay", "job/", "--trace", str(path), "--figure", str(figure)]) == 0
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = capsys.readouterr().out
    assert "on traced-cpu-2" in text and "ratio" in text and "every call of every rank" in text
    events = json.loads(path.read_text())["traceEvents"]
    threads = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert {"measured: cpu", "simulated: cpu"} <= threads
    spans = [e for e in events if e["ph"] == "X" and e["name"].startswith("allreduce")]
    assert sorted(e["cat"] for e in spans) == ["measured"] * 2 + ["simulated"] * 2
    measured = next(e for e in spans if e["cat"] == "measured")
    assert measured["dur"] == pytest.approx(900.0)


def test_cli_scale_out_and_bad_input_exit_2(traced, capsys):
    assert main(["replay", "job/", "-t", "switch-64", "--scale-out", "8", "--calls", "0"]) == 0
    assert "8 ranks, scaled out from 2" in capsys.readouterr().out
    for argv, message in ((["--scale-out", "0"], "--scale-out"),
                          (["-t", "switch-64", "--param", "allreduce=nonesuch"], "nonesuch"),
                          (["-t", "switch-64", "--format", "fp7"], "fp7"),
                          (["-t", "switch-64", "--scale-out", "128"], "64 GPUs")):
        assert main(["replay", "job/", *argv]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err
    traced["value"] = make_trace({0: [call(0, 0, 0.0, 1.0, 8)], 1: [call(1, 0, 0.0, 1.0, 16)]},
                                 {})
    assert main(["replay", "job/"]) == 2
    err = capsys.readouterr().err
    assert "rank1.json" in err and "do not match" in err
    traced["value"] = make_trace({}, {}, backend="nccl")
    assert main(["replay", "job/"]) == 2
    assert "give one with -t" in capsys.readouterr().err


# -- the fixtures: real PyTorch traces (gloo on CPU, tests/fixtures/traces/record.py) ------

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "traces"
CASES = ["ddp", "fsdp", "pipeline", "moe"]


@pytest.mark.parametrize("case", CASES)
def test_each_fixture_replays_on_its_own_machine_and_on_dgx_h100(case, capsys):
    """On its own machine the replayed step is the measured one within 5% (compute and host
    time are kept, and calls wait for late ranks as they did); every traced call of every
    rank has a record with its measured time."""
    from collsim.replay.reader import read_trace

    trace = read_trace(FIXTURES / case)
    traced = {(c.rank, c.index): c.duration_us for calls in trace.calls.values() for c in calls}
    for machine in ([], ["-t", "dgx-h100"]):
        assert main(["replay", str(FIXTURES / case), "--json", *machine]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["topology"] == ("dgx-h100" if machine else f"traced-cpu-{trace.world_size}")
        assert {(c["rank"], c["index"]): c["measured_us"] for c in out["calls"]} == traced
        assert all(c["simulated_us"] > 0 for c in out["calls"])
        if not machine:
            assert out["simulated"]["step_s"] == pytest.approx(out["measured"]["step_s"],
                                                               rel=0.05)


def test_pipeline_fixture_scales_out_over_its_two_data_parallel_groups(capsys):
    """Stages {0,1} and {2,3} are the data-parallel groups; 8 ranks make each of 4; the
    pipeline's sends are copied into each new replica."""
    from collsim.replay.reader import read_trace

    trace = read_trace(FIXTURES / "pipeline")
    assert [g.ranks for g in data_parallel_groups(trace)] == [(0, 1), (2, 3)]
    grown = scale_out(trace, 8)
    allreduces = {grown.groups[c.group].ranks for calls in grown.calls.values()
                  for c in calls if c.collective == "allreduce"}
    assert allreduces == {(0, 1, 4, 6), (2, 3, 5, 7)}
    sends = {(c.rank, c.peer) for calls in grown.calls.values() for c in calls
             if c.collective == "send"}
    assert sends == {(0, 2), (1, 3), (4, 5), (6, 7), (2, 0), (3, 1), (5, 4), (7, 6)}
    assert main(["replay", str(FIXTURES / "pipeline"), "--scale-out", "8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ranks"] == 8 and out["traced_ranks"] == 4
    assert len(out["calls"]) == 2 * sum(len(c) for c in trace.calls.values())


def _rank_files(tmp_path: Path, case: str = "ddp") -> list[Path]:
    """The fixture's files as plain JSON in a fresh folder."""
    folder = tmp_path / case
    folder.mkdir()
    paths = []
    for source in sorted((FIXTURES / case).glob("rank*.json.gz")):
        path = folder / source.name.removesuffix(".gz")
        path.write_bytes(gzip.decompress(source.read_bytes()))
        paths.append(path)
    return paths


def _breaks(kind: str, paths: list[Path]) -> str:
    """Break a copy of the ddp fixture in one way; returns the file the message must name."""
    if kind == "truncated":
        paths[1].write_bytes(paths[1].read_bytes()[:5000])
        return paths[1].name
    if kind == "wrong JSON":
        paths[0].write_text('{"traceEvents": [1, 2,, 3]}')
        return paths[0].name
    if kind == "a rank missing":
        paths[1].unlink()
        return "world_size"
    document = json.loads(paths[1].read_text())
    document["distributedInfo"]["pg_config"][0]["ranks"] = [1, 0]
    paths[1].write_text(json.dumps(document))
    return "rank"


@pytest.mark.parametrize("kind", ["truncated", "wrong JSON", "a rank missing",
                                  "mismatched groups"])
def test_bad_traces_exit_2_with_a_message_and_no_traceback(kind, tmp_path, capsys):
    paths = _rank_files(tmp_path)
    named = _breaks(kind, paths)
    assert main(["replay", str(paths[0].parent)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("collsim: error: ") and "Traceback" not in captured.err
    assert named in captured.err


def test_ddp_fixture_scaled_out_to_64_h100s_keeps_every_call_size(capsys):
    argv = ["replay", str(FIXTURES / "ddp"), "-t", "h100-cluster", "--set", "nodes=8",
            "--scale-out", "64", "--isolated", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ranks"] == 64 and out["traced_ranks"] == 2
    by_rank: dict[int, list[int]] = {}
    for record in out["calls"]:
        by_rank.setdefault(record["rank"], []).append(record["bytes"])
    assert sorted(by_rank) == list(range(64))
    assert all(sizes == by_rank[0] for sizes in by_rank.values())
    assert out["simulated"]["step_s"] >= out["simulated"]["compute_s"] > 0
