"""Results tables, crossovers read off a table, comparisons, and figures."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from collsim.errors import InputError
from collsim.output.compare import compare
from collsim.output.crossover import crossovers
from collsim.output.figures import draw_figures
from collsim.output.layout import plan
from collsim.output.style import power_of_two_ticks
from collsim.output.table import (
    TableWriter,
    format_value,
    header,
    key_columns,
    point_key,
    read_raw,
    read_table,
    rewrite_sorted,
)
from collsim.simulate import COLUMNS, RESULT_COLUMNS


def test_columns_are_the_simulators():
    # The contract's columns first (docs/design.md#results-table), then what the call ran with
    # and how the engine timed it.
    assert (*RESULT_COLUMNS, "protocol", "channels", "selected", "path") == COLUMNS


def test_path_is_an_outcome_in_new_tables_and_absent_from_old_ones():
    swept = header(["protocol", "link.bandwidth"])
    assert swept[len(RESULT_COLUMNS):] == ["channels", "selected", "path", "protocol",
                                           "link.bandwidth"]
    assert key_columns(swept)[-2:] == ["protocol", "link.bandwidth"]  # the values asked for
    # A table from before the path column: its outcomes end at selected, as they did.
    old = [c for c in swept if c != "path"]
    assert key_columns(old) == key_columns(swept)
    assert key_columns(header([])) == key_columns([c for c in header([]) if c != "path"])


def test_values_are_written_reproducibly():
    assert [format_value(v) for v in (None, True, 3, 0.1, 1e-05, 2.5e-07, "x")] == \
        ["", "true", "3", "0.1", "1e-05", "2.5e-07", "x"]
    assert float(format_value(1 / 3)) == 1 / 3


def _row(algorithm: str, ranks: int, size: int, time: float, **extra) -> dict:
    return {"scenario": "s", "topology": "t", "collective": "allreduce",
            "algorithm": algorithm, "ranks": ranks, "size_bytes": size, "time_s": time,
            "algbw_GBps": size / time / 1e9, "busbw_GBps": 2 * size / time / 1e9,
            "analytic_time_s": extra.pop("analytic", None), **extra}


def test_a_crash_mid_row_leaves_a_readable_table_and_sorting_restores_order(tmp_path):
    path = tmp_path / "results.csv"
    columns = header(["link.bandwidth"])
    rows = [_row("ring", 8, 2**k, 1e-6 * k, **{"link.bandwidth": "1GB/s"}) for k in range(1, 5)]
    with TableWriter(path, columns) as writer:
        for row in reversed(rows):
            writer.write(row)
    with open(path, "a", encoding="utf-8") as file:
        file.write("s,t,allreduce,ring,8,1")  # killed while writing
    found, raw = read_raw(path)
    assert found == columns and len(raw) == 4
    order = {point_key(r, columns): i for i, r in enumerate(rows)}
    rewrite_sorted(path, order)
    _, back = read_table(path)
    assert [r["size_bytes"] for r in back] == [2, 4, 8, 16]
    assert back[0]["link.bandwidth"] == "1GB/s" and back[0]["analytic_time_s"] is None
    assert path.read_text().endswith("\n")


def test_reading_something_else_is_an_input_error(tmp_path):
    bad = tmp_path / "x.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match="not a collsim results table"):
        read_table(bad)
    with pytest.raises(InputError, match="no such"):
        read_table(tmp_path / "missing.csv")


def test_crossovers_are_interpolated_on_log_log_curves():
    sizes = [1024, 2048, 4096]
    # a is flat; b goes from half of a to twice a between 1K and 2K: equal at 2^10.5.
    times = {"a": [10.0, 10.0, 10.0], "b": [5.0, 20.0, 40.0]}
    (cross,) = crossovers(sizes, times)
    assert (cross.before, cross.after) == ("b", "a")
    assert cross.size == pytest.approx(2**10.5)
    assert crossovers(sizes, {"a": [1, 1, 1], "b": [2, 2, 2]}) == []


def test_compare_matches_points_and_ignores_columns_that_never_meet():
    a = [_row("ring", 8, 1024, 2.0), _row("ring", 8, 2048, 4.0)]
    b = [{**r, "topology": "other", "time_s": r["time_s"] / 2} for r in a]
    result = compare(list(a[0]), a, list(b[0]), b)
    assert result.ignored == ["topology"]
    assert [r["ratio"] for r in result.rows] == [0.5, 0.5]
    assert "geometric mean 0.5" in result.summary()
    with pytest.raises(InputError, match="two rows for the same point"):
        compare(list(a[0]), a, list(b[0]), b, on=["ranks"])


def test_size_ticks_include_1k_1m_1g():
    ticks = power_of_two_ticks(8, 8 * 2**30)
    assert {2**10, 2**20, 2**30} <= set(ticks) and len(ticks) <= 9
    assert power_of_two_ticks(1024, 65536) == [2.0**k for k in range(10, 17, 2)] or \
        len(power_of_two_ticks(1024, 65536)) <= 9


def _table(algorithms=("ring", "tree"), ranks=(8, 64), extra=None):
    rows = []
    for algorithm in algorithms:
        for p in ranks:
            for k in range(10, 31, 4):
                n = 2**k
                base = 1e-6 * (p if algorithm == "ring" else math.log2(p))
                time = base + n / 1e11 * (2 if algorithm == "tree" else 1)
                rows.append(_row(algorithm, p, n, time, analytic=time, **(extra or {})))
    return rows


def test_layout_splits_panels_then_lines():
    rows = _table()
    layout = plan(rows, "size_bytes", {"kind": "time_vs_size"})
    assert layout.panel == "ranks" and layout.lines == ["algorithm"]
    assert layout.context() == "allreduce · t"
    layout = plan(rows, "size_bytes", {"kind": "time_vs_size", "panels": "none"})
    assert layout.panel is None and layout.lines == ["algorithm", "ranks"]


def test_every_figure_kind_draws(tmp_path):
    rows = _table()
    specs = [{"kind": k, "name": k} for k in ("time_vs_size", "busbw_vs_size", "crossover_map",
                                              "time_vs_ranks")]
    specs.append({"kind": "speedup", "name": "speedup", "baseline": "ring"})
    specs.append({"kind": "crossover_map", "name": "one", "algorithms": ["ring"]})
    drawn = draw_figures(rows, specs, tmp_path, ["png", "svg"])
    assert sorted(p.name for p in drawn.files) == sorted(
        f"{s['name']}.{f}" for s in specs[:-1] for f in ("png", "svg"))
    assert drawn.notes == ["figure 'one' not drawn: a crossover map needs at least two "
                           "algorithms"]
    for path in drawn.files:
        assert path.stat().st_size > 1000
    assert (tmp_path / "time_vs_size.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_svg_files_are_reproducible(tmp_path):
    rows = _table(ranks=(8,))
    spec = [{"kind": "time_vs_size", "name": "a"}]
    first = draw_figures(rows, spec, tmp_path, ["svg"]).files[0].read_bytes()
    second = draw_figures(rows, spec, tmp_path, ["svg"]).files[0].read_bytes()
    assert first == second and b"<dc:date>" not in first


def test_figures_select_rows(tmp_path):
    rows = _table()
    drawn = draw_figures(rows, [{"kind": "time_vs_size", "name": "x", "select": {"ranks": 64}}],
                         tmp_path, ["png"])
    assert [p.name for p in drawn.files] == ["x.png"]
    with pytest.raises(InputError, match="column 'rank'"):
        draw_figures(rows, [{"kind": "time_vs_size", "select": {"rank": 64}}], Path(tmp_path),
                     ["png"])
