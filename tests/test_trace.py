"""Chrome traces and link reports of a recorded call: well-formed events, spans that nest,
per-rank step totals equal to the simulation's busy times, exact link loads, the cap."""

from __future__ import annotations

import json

import pytest

from collsim.api import load_topology
from collsim.cli import main
from collsim.engine.recording import segments
from collsim.hardware.loader import topology_from_text
from collsim.output.linkload import link_loads
from collsim.output.trace import call_trace
from collsim.recorded import draw_offsets, record_call
from collsim.simulate import simulate
from tests.helpers import SMALL_FAT_TREE

CASES = [("allreduce", "ring", 5), ("allreduce", "double_binary_tree", 7),
         ("allgather", "bruck", 6), ("reduce", "binomial", 3), ("alltoall", "pairwise", 4),
         ("allreduce", "nccl_tree", 6)]  # Parallel channels


def load_events(path):
    return json.loads(path.read_text())


def assert_nested(events):
    """On every (pid, tid), complete spans are disjoint or nested."""
    tracks: dict = {}
    for e in events:
        if e["ph"] == "X":
            tracks.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in tracks.values():
        spans.sort(key=lambda s: (s[0], -s[1]))
        open_ends: list[float] = []
        for start, end in spans:
            while open_ends and open_ends[-1] <= start + 1e-6:
                open_ends.pop()
            if open_ends:
                assert end <= open_ends[-1] + 1e-6, (start, end, open_ends[-1])
            open_ends.append(end)


@pytest.mark.parametrize(("collective", "algorithm", "ranks"), CASES)
def test_step_spans_add_up_to_each_ranks_busy_time(collective, algorithm, ranks):
    """With stragglers: a rank is busy from its own start to its finish, and its steps
    cover that exactly; the call's time matches simulate() when nobody is late."""
    topology = load_topology("switch-64")
    size = 3 * 4 * 64 * 7
    offsets = draw_offsets(ranks, 20e-6, [(ranks - 1, 30e-6)], seed=3)
    recorded = record_call(topology, collective, algorithm, ranks, size, {}, offsets)
    busy = [0.0] * ranks
    for step in recorded.recorder.steps:
        if step.rank < ranks:
            busy[step.rank] += step.end - step.start
    for rank in range(ranks):
        expected = recorded.call.result.finish[rank] - offsets[rank]
        assert busy[rank] == pytest.approx(expected, rel=1e-9, abs=1e-15)
    together = record_call(topology, collective, algorithm, ranks, size, {})
    alone = simulate(topology, collective, algorithm, ranks, size).time_s
    assert together.time_s == pytest.approx(alone, rel=1e-12)


def test_every_flow_moves_its_bytes_and_links_carry_the_ring_closed_form():
    """Ring allreduce on p ranks of a switch: each GPU's uplink carries 2 (p-1)/p of n."""
    p, n = 6, 6 * 4096
    recorded = record_call(load_topology("switch-64"), "allreduce", "ring", p, n, {})
    for flow in recorded.fabric.flows:
        moved = sum((end - start) * rate for start, end, rate in segments(flow))
        assert moved == pytest.approx(flow.size, rel=1e-9)
    loads = link_loads(recorded.fabric)
    uplinks = [load for load in loads if load.link.src.startswith("gpu")]
    assert len(uplinks) == p
    for load in uplinks:
        assert load.bytes == pytest.approx(2 * (p - 1) / p * n)
        assert load.peak_transfers == 1
        assert load.peak_utilisation == pytest.approx(1.0)
        assert load.busy_s <= recorded.time_s + 1e-15


FAT_TREE = SMALL_FAT_TREE.replace("latency: 0us}\n", "latency: 0us, oversubscription: 2}\n")


def test_the_link_report_shows_the_oversubscribed_uplink():
    """Direct all-to-all over 2 nodes at 2:1: 16 transfers share leaf0's 50 GB/s uplink
    (full), so each NIC runs at 4 x 3.125 = 12.5 of 25 GB/s: half."""
    recorded = record_call(topology_from_text(FAT_TREE), "alltoall", "direct", 8, 8 << 20, {})
    loads = {load.link.name: load for load in link_loads(recorded.fabric)}
    uplink = loads["leaf0->spine0"]
    assert uplink.peak_transfers == 16
    assert uplink.peak_utilisation == pytest.approx(1.0)
    assert uplink.bytes == pytest.approx(16 * (8 << 20) / 8)
    nic = loads["n0.nic0->leaf0"]
    assert nic.peak_utilisation == pytest.approx(0.5)


def test_estimate_writes_a_well_formed_trace_and_a_link_report(tmp_path, capsys):
    path = tmp_path / "t.json"
    figure = tmp_path / "links.png"
    assert main(["estimate", "-t", "switch-64", "-c", "allreduce", "-a", "ring", "-p", "5",
                 "-s", "1MiB", "--trace", str(path), "--link-report",
                 "--link-figure", str(figure), "--skew", "10us", "--late", "2=5us"]) == 0
    out = capsys.readouterr().out
    assert "stretch" in out and "switch port" in out
    assert figure.stat().st_size > 1000
    document = load_events(path)
    events = document["traceEvents"]
    assert all({"ph", "ts", "pid", "tid"} <= set(e) for e in events)
    kinds = {e.get("cat") for e in events if e["ph"] == "X"}
    assert {"step", "send", "recv", "reduce"} <= kinds
    assert any(e["ph"] == "C" for e in events)
    assert_nested(events)
    # Every send, receive and combine span lies inside a step span of its rank.
    steps: dict = {}
    for e in events:
        if e["ph"] == "X" and e["cat"] == "step":
            steps.setdefault(e["pid"], []).append((e["ts"], e["ts"] + e["dur"]))
    for e in events:
        if e["ph"] == "X" and e["cat"] != "step":
            assert any(s - 1e-6 <= e["ts"] and e["ts"] + e["dur"] <= t + 1e-6
                       for s, t in steps[e["pid"]])
    assert "capped" not in document["metadata"]


def test_a_capped_trace_says_so(tmp_path, capsys):
    recorded = record_call(load_topology("switch-64"), "allreduce", "ring", 8, 1 << 20, {})
    path = tmp_path / "t.json"
    assert call_trace(recorded).write(path, limit=50)
    document = load_events(path)
    assert "capped" in document["metadata"]
    assert len([e for e in document["traceEvents"] if e["ph"] != "M"]) <= 50
    assert "capped" in capsys.readouterr().err


def test_bad_straggler_options_exit_2(capsys):
    base = ["estimate", "-t", "switch-64", "-c", "allreduce", "-a", "ring", "-p", "4", "-s",
            "1MiB"]
    assert main([*base, "--late", "9=1ms"]) == 2
    assert main([*base, "--late", "oops"]) == 2
    assert main([*base, "--skew", "fast"]) == 2
    assert main([*base, "--trace-limit", "0", "--trace", "x.json"]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_perfetto_reads_the_trace(tmp_path):
    trace_processor = pytest.importorskip("perfetto.trace_processor")
    recorded = record_call(load_topology("switch-64"), "allreduce", "ring", 4, 1 << 16, {})
    path = tmp_path / "t.json"
    call_trace(recorded).write(path)
    try:  # the package fetches its trace_processor binary on first use
        processor = trace_processor.TraceProcessor(trace=str(path))
    except Exception as exc:  # noqa: BLE001 - no binary, no network: nothing to test
        pytest.skip(f"perfetto's trace processor is not available: {exc}")
    with processor as tp:
        slices = list(tp.query("select count(*) as n from slice"))[0].n
        counters = list(tp.query("select count(*) as n from counter"))[0].n
    spans = sum(1 for e in json.loads(path.read_text())["traceEvents"] if e["ph"] == "X")
    assert slices == spans and counters > 0


def test_a_trace_under_nccls_buffered_sends_shows_every_transfer(tmp_path):
    """NCCL's costs buffer sends (their messages are ``Posted``, not rendezvous tuples): the
    trace still draws every transfer: a one-channel ring's every step (2(p-1) a loop, on
    every rank) holds one send and one receive span."""
    path = tmp_path / "t.json"
    assert main(["estimate", "-t", "dgx-h100", "-c", "allreduce", "-a", "ring", "-p", "8",
                 "-s", "1MiB", "--param", "channels=1", "--trace", str(path)]) == 0
    events = load_events(path)["traceEvents"]
    sends = [e for e in events if e["ph"] == "X" and e["cat"] == "send"]
    recvs = [e for e in events if e["ph"] == "X" and e["cat"] == "recv"]
    steps = [e for e in events if e["ph"] == "X" and e["cat"] == "step"]
    assert len(steps) % (8 * 2 * 7) == 0 and steps
    assert len(sends) == len(recvs) == len(steps)
    assert_nested(events)


def test_auto_alltoall_records_what_it_ran(capsys):
    """``auto`` alltoall runs NCCL's point-to-point program, which reports its protocol but
    takes no ``protocol`` parameter: recording the call again must not pass it one. Every
    rank sends 7/8 of its megabyte through its NVLink, so the link report shows 917,504 B
    on each GPU's link into the switch."""
    assert main(["estimate", "-t", "dgx-h100", "-c", "alltoall", "-a", "auto", "-p", "8",
                 "-s", "1MiB", "--link-report"]) == 0
    out = capsys.readouterr().out
    assert "nccl_p2p" in out
    assert "16 directed links carried bytes" in out
    assert "n0.gpu3->n0.nvswitch                   896 KiB" in out
