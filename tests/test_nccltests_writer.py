"""Printing runs in nccl-tests' layout: number formats, published rows reprinted unchanged,
and simulated runs that read back to the figures they were printed from."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collsim.errors import InputError
from collsim.nccltests import (
    LAYOUTS,
    clean_line,
    format_row,
    format_run,
    format_runs,
    parse_logs,
    read_logs,
    results_rows,
    run_from_results,
    runs_from_results,
)
from collsim.nccltests.layouts import classic_time, float_str
from collsim.nccltests.programs import PROGRAMS, TYPE_SIZES

VALIDATION = Path(__file__).resolve().parents[1] / "validation"
# Fixtures whose rows nccl-tests printed itself (the OCI GB200 excerpts were retyped with
# other spacing, and the nccl#527 table is the oldest layout with a user's column in front).
PRINTED = sorted((VALIDATION / "logs").glob("*.txt")) + [
    VALIDATION / "sources" / name for name in (
        "aws-p4de-2n-ar.txt", "aws-p5-2n-ar.txt", "aws-p5-2n-eks-nccl2185-ar.txt",
        "coreweave-gb200-nvl72-1rack-ar.txt", "coreweave-gb200-nvl72-2rack-ar.txt",
        "coreweave-gb200-nvl72-20rack-ar.txt", "coreweave-h100-8n-sharp-ar.txt",
        "gcp-a4-b200-1n2g-ag.txt", "nccl-tests-issue232-h100-2x1-tree.txt",
        "nccl-tests-issue309-h100-ib-2n-4n-8n.txt")]


@pytest.mark.parametrize(("value", "width", "text"), [
    (33.18, 7, "  33.18"), (1112.194, 7, "1112.19"), (12851.23, 7, "12851.2"),
    (123456.7, 7, " 123457"), (1234567.0, 7, "1234567"), (12345678.0, 7, "1.2e+07"),
    (0.0, 6, "  0.00"), (479.72, 6, "479.72"), (1049.9, 6, "1049.9"), (12345.6, 6, " 12346"),
    (123456.0, 6, "123456"), (1234567.0, 6, " 1e+06"),
])
def test_get_float_str(value, width, text):
    assert float_str(value, width) == text


@pytest.mark.parametrize(("us", "text"), [
    (35.594, "  35.59"), (99.994, "  99.99"), (135.84, "  135.8"), (9999.94, " 9999.9"),
    (12646.4, "  12646"), (1059765.0, "1059765"),
])
def test_classic_time(us, text):
    assert classic_time(us) == text


@pytest.mark.parametrize(("layout", "name"), [("classic", "gcp-a3mega-h100-2n-ar.txt"),
                                              ("adaptive", "vp-h100-4n-ag.txt")])
def test_column_header_as_printed(layout, name):
    lines = (VALIDATION / "logs" / name).read_text().split("\n")
    at = next(i for i, line in enumerate(lines) if "busbw" in line)
    assert LAYOUTS[layout].column_header() == lines[at - 1:at + 2]


@pytest.mark.parametrize("path", PRINTED, ids=lambda path: path.name)
def test_published_rows_reprint_unchanged(path):
    raw = path.read_text().split("\n")
    runs = read_logs(path)
    for run in runs:
        for row in run.rows:
            assert format_row(row, run.layout) == clean_line(raw[row.line - 1])


@pytest.mark.parametrize("path", PRINTED, ids=lambda path: path.name)
def test_published_runs_read_back_from_their_reprint(path):
    runs = read_logs(path)
    again = parse_logs(format_runs(runs))
    assert len(again) == len(runs)
    for first, second in zip(runs, again, strict=True):
        assert [_figures(r) for r in first.rows] == [_figures(r) for r in second.rows]
        assert second.layout == first.layout
        if first.collective_source in ("starting line", "table"):  # not named by a command
            assert second.collective == first.collective
        busbw = [h.busbw_GBps for r in first.rows for h in (r.out_of_place, r.in_place)]
        average = first.avg_busbw_GBps or sum(busbw) / len(busbw)  # cut logs: from the rows
        assert second.avg_busbw_GBps == pytest.approx(average, rel=1e-5)
        if first.rank_lines:
            assert (second.ranks, second.gpu_name, second.hosts) == (
                first.ranks, first.gpu_name, first.hosts)


@pytest.mark.parametrize("path", sorted((VALIDATION / "logs").glob("*.txt")),
                         ids=lambda path: path.name)
def test_reprinted_logs_diff_only_by_lines_the_writer_leaves_out(path):
    """Every line printed for a published log is a line of it, in order: a ``diff`` of a
    measured and a printed run shows only chatter and the figures that differ."""
    source = iter([clean_line(line).rstrip() for line in path.read_text().split("\n")])
    for line in format_runs(read_logs(path)).split("\n"):
        if line and line != "#":  # some logs were saved without the closing "#"
            assert line.rstrip() in source, line  # consumes the source up to the match


def _figures(row):
    return (row.size_bytes, row.count, row.dtype, row.redop, row.root, row.out_of_place,
            row.in_place)


# -- simulated runs ---------------------------------------------------------------------------

def simulated_rows(collective: str, ranks: int, points: list[tuple[int, float]]) -> list[dict]:
    factor = PROGRAMS[f"{_program(collective)}"].busbw_factor(ranks)
    rows = []
    for size, seconds in points:
        algbw = size / seconds / 1e9
        rows.append({"scenario": "s", "topology": "t", "algorithm": "ring",
                     "collective": collective, "ranks": ranks, "size_bytes": size,
                     "time_s": seconds, "algbw_GBps": algbw, "busbw_GBps": algbw * factor})
    return rows


def _program(collective: str) -> str:
    return next(name for name, p in PROGRAMS.items() if p.collective == collective)


def _tolerance(token: str) -> float:
    """Half the last printed digit of ``token`` ('12.34', '123', '1.2e+07')."""
    mantissa, _, exponent = token.partition("e")
    decimals = len(mantissa.partition(".")[2])
    return 0.5 * 10.0 ** (int(exponent or 0) - decimals)


@settings(max_examples=150, deadline=None)
@given(collective=st.sampled_from(sorted(p.collective for p in PROGRAMS.values())),
       ranks=st.integers(2, 600), per_node=st.integers(1, 8),
       layout=st.sampled_from(sorted(LAYOUTS)),
       dtype=st.sampled_from(["float32", "bfloat16", "float64", "int8"]),
       points=st.lists(st.tuples(st.integers(0, 1 << 40), st.floats(1e-7, 100.0)),
                       min_size=1, max_size=12, unique_by=lambda p: p[0]))
def test_simulated_run_reads_back_to_the_printed_precision(collective, ranks, per_node, layout,
                                                           dtype, points):
    points.sort()
    rows = simulated_rows(collective, ranks, points)
    for row in rows:
        row["dtype"] = dtype
    run = run_from_results(rows, topology="h100-dgx", gpu_name="NVIDIA H100 80GB HBM3",
                           gpus_per_node=per_node)
    text = format_run(run, layout)
    (back,) = parse_logs(text)
    program = PROGRAMS[_program(collective)]
    assert (back.collective, back.program, back.layout) == (collective, program.name, layout)
    assert (back.ranks, back.nodes, back.gpu_name) == (
        ranks, math.ceil(ranks / per_node), "NVIDIA H100 80GB HBM3")
    assert back.comment.startswith("collsim ") and back.comment.endswith("simulated h100-dgx")
    type_name = {"float32": "float", "bfloat16": "bfloat16", "float64": "double",
                 "int8": "int8"}[dtype]
    per_count = TYPE_SIZES[type_name] * (ranks if program.count_per_rank else 1)
    table = [line for line in text.split("\n") if line and not line.startswith("#")]
    assert len(back.rows) == len(rows) == len(table)
    for row, sent, line in zip(back.rows, rows, table, strict=True):
        tokens = line.split()
        assert (row.size_bytes, row.count, row.dtype) == (
            sent["size_bytes"], sent["size_bytes"] // per_count, type_name)
        assert row.redop == ("sum" if program.prints_op else "none")
        assert row.root == (0 if program.rooted else -1)
        for half, at in ((row.out_of_place, 5), (row.in_place, 9)):
            for value, want, token in ((half.time_us, sent["time_s"] * 1e6, tokens[at]),
                                       (half.algbw_GBps, sent["algbw_GBps"], tokens[at + 1]),
                                       (half.busbw_GBps, sent["busbw_GBps"], tokens[at + 2])):
                assert abs(value - want) <= _tolerance(token) * (1 + 1e-9) + 1e-12 * want
            assert half.wrong is None
    mean = sum(r["busbw_GBps"] for r in rows) / len(rows)
    assert back.avg_busbw_GBps == pytest.approx(mean, rel=1e-5, abs=1e-300)


def test_simulated_header_and_devices():
    rows = simulated_rows("allreduce", 12, [(8 << k, 1e-5 * (1 + k)) for k in range(0, 10, 3)])
    run = run_from_results(rows, topology="a100x2", gpu_name="NVIDIA A100-SXM4-80GB",
                           gpus_per_node=8, checked=True)
    text = format_run(run)
    assert text.startswith("# collsim ")
    assert "# nThread 1 nGpus 1 minBytes 8 maxBytes 4096 step: 8(factor) warmup iters: 0 " \
           "iters: 1 agg iters: 1 validation: 1 graph: 0 unalign: 0\n" in text
    assert "#  Rank  8 Group  0 Pid  10008 on      node1 device  0 [0000:00:00] " \
           "NVIDIA A100-SXM4-80GB\n" in text
    (back,) = parse_logs(text)
    assert back.hosts == ["node0", "node1"] and back.gpus_per_node is None  # 8 + 4 GPUs
    assert all(row.out_of_place.wrong == 0 == row.in_place.wrong for row in back.rows)
    assert format_run(run) == text  # same run, same bytes
    placed = run_from_results(rows, topology="a100x2", gpu_name="G", gpus_per_node=8,
                              placement=[(r % 2, r // 2) for r in range(12)])
    assert [line.host for line in placed.rank_lines[:3]] == ["node0", "node1", "node0"]


def test_results_tables_split_into_runs():
    rows = (simulated_rows("allreduce", 8, [(1024, 1e-5), (4096, 2e-5)])
            + simulated_rows("allgather", 8, [(1024, 1e-5)])
            + simulated_rows("allreduce", 16, [(1024, 2e-5)]))
    runs = runs_from_results(rows, topology="t", gpu_name="G", gpus_per_node=8)
    assert [(run.collective, run.ranks, len(run.rows)) for run in runs] == [
        ("allreduce", 8, 2), ("allgather", 8, 1), ("allreduce", 16, 1)]
    with pytest.raises(ValueError, match="one collective"):
        run_from_results(rows, topology="t", gpu_name="G", gpus_per_node=8)


def test_measured_run_as_results_rows():
    (run,) = read_logs(VALIDATION / "logs" / "gcp-a3mega-h100-2n-ar.txt")
    rows = results_rows(run)
    assert len(rows) == 31
    assert rows[0] == {"collective": "allreduce", "ranks": 16, "size_bytes": 8,
                       "time_s": pytest.approx(135.8e-6), "algbw_GBps": 0.0, "busbw_GBps": 0.0}
    assert rows[-1]["busbw_GBps"] == 338.82 and rows[-1]["time_s"] == pytest.approx(0.047535)
    assert results_rows(run, in_place=True)[-1]["busbw_GBps"] == 337.35
    (sizes0,) = read_logs(VALIDATION / "logs" / "gcp-a4-b200-2x1-ag.txt")
    assert len(results_rows(sizes0)) == 26 and len(results_rows(sizes0, drop_empty=False)) == 28
    (cut,) = read_logs(VALIDATION / "sources" / "aws-p4de-2n-ar.txt")
    assert {row["ranks"] for row in results_rows(cut)} == {16}  # from busbw / algbw
    (unnamed,) = read_logs(VALIDATION / "sources" / "gcp-a4-b200-1n2g-ag.txt")
    with pytest.raises(InputError, match="which collective"):
        results_rows(unnamed)
    assert results_rows(unnamed, collective="allgather")[0]["collective"] == "allgather"
    (legacy,) = read_logs(VALIDATION / "sources" / "nccl-issue527-p4dn-1to4n.txt")
    with pytest.raises(InputError, match="how many ranks"):
        results_rows(legacy)
