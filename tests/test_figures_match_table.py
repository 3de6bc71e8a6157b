"""What each figure kind draws matches the table it is drawn from: line data, marker positions
and colours, shaded regions, crossover marks and tick labels, read back from the matplotlib
figure's artists (never from pixels)."""

from __future__ import annotations

import csv
import importlib.util
import math
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
from matplotlib.collections import PathCollection
from matplotlib.colors import to_rgba
from matplotlib.patches import Rectangle

from collsim.output.crossover import crossovers
from collsim.output.figures import CHOICE_BAND, KINDS
from collsim.output.layout import distinct
from collsim.output.style import COLORS, styled
from collsim.output.table import read_table
from collsim.units import format_size

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _close_figures():
    """The figures read here are never saved, so nothing else closes them."""
    yield
    plt.close("all")

SIZES = [2**k for k in range(10, 31, 2)]   # 1 KiB to 1 GiB


def _row(algorithm: str, ranks: int, size: int, time: float, **extra) -> dict:
    return {"scenario": "s", "topology": "t", "collective": "allreduce",
            "algorithm": algorithm, "ranks": ranks, "size_bytes": size, "time_s": time,
            "algbw_GBps": size / time / 1e9, "busbw_GBps": 2 * size / time / 1e9,
            "analytic_time_s": None, **extra}


def _power_laws(ranks=(8, 64)) -> list[dict]:
    """ring: 1e-9·s, tree: c·sqrt(s), straight lines on log-log axes, so the crossover is
    known exactly: s = (c / 1e-9)^2, 1e6 B at 8 ranks and 4e6 B at 64 (c = 1e-6, 2e-6)."""
    rows = []
    for p in ranks:
        c = 1e-6 * math.log2(p) / 3
        for s in SIZES:
            rows.append(_row("ring", p, s, 1e-9 * s))
            rows.append(_row("tree", p, s, c * math.sqrt(s)))
    return rows


def _draw(kind: str, rows: list[dict], **spec):
    palette = {name: i for i, name in enumerate(distinct(rows, "algorithm"))}
    with styled():
        return KINDS[kind](rows, {"kind": kind, **spec}, palette), palette


def _color(palette: dict, name: str, alpha: float = 1.0) -> tuple:
    return to_rgba(COLORS[palette[name] % len(COLORS)], alpha)


def _lines_of(ax, palette: dict, name: str):
    """The plain series lines (not bands, not marks) drawn in ``name``'s colour."""
    return [line for line in ax.get_lines() if to_rgba(line.get_color()) == _color(palette, name)
            and line.get_linewidth() < CHOICE_BAND["linewidth"]]


def test_crossover_marks_are_at_the_exact_crossovers_and_the_shading_changes_there():
    figure, palette = _draw("crossover_map", _power_laws())
    (ax,) = figure.axes
    expected = {0: 1e6, 1: 4e6}   # row of the map (8, 64 ranks) -> crossover in bytes
    marks = {round(line.get_ydata()[0]): line.get_xdata()[0] for line in ax.get_lines()}
    assert marks.keys() == expected.keys()
    for level, size in expected.items():
        assert marks[level] == pytest.approx(size, rel=1e-9)
        cells = sorted((p for p in ax.patches if isinstance(p, Rectangle)
                        and p.get_y() == level - 0.5), key=lambda p: p.get_x())
        # ring (faster below) up to the mark, tree from it: one boundary, at the mark.
        assert [p.get_facecolor() for p in cells] == [_color(palette, "ring", 0.85),
                                                     _color(palette, "tree", 0.85)]
        assert cells[0].get_x() + cells[0].get_width() == pytest.approx(size, rel=1e-9)
        assert cells[1].get_x() == pytest.approx(size, rel=1e-9)
    labels = sorted(t.get_text() for t in ax.texts)
    assert labels == sorted(format_size(s, iec=True) for s in expected.values()) \
        == ["3.81 MiB", "977 KiB"]


def test_the_shipped_crossover_map_shades_each_swept_size_by_the_tables_fastest():
    """The ring-vs-tree table: at every size the table swept, the shaded region holds the
    algorithm with the least time in the table, and every mark sits where two regions meet,
    at the crossover read off the table."""
    _, rows = read_table(ROOT / "plots" / "ring-vs-tree" / "results.csv", [])
    figure, palette = _draw("crossover_map", rows)
    (ax,) = figure.axes
    levels = distinct(rows, "ranks")
    sizes = distinct(rows, "size_bytes")
    for index, ranks in enumerate(levels):
        cells = [p for p in ax.patches if isinstance(p, Rectangle)
                 and p.get_y() == index - 0.5]
        times = {a: [next(r["time_s"] for r in rows if r["algorithm"] == a
                          and r["ranks"] == ranks and r["size_bytes"] == s) for s in sizes]
                 for a in distinct(rows, "algorithm")}
        for i, size in enumerate(sizes):
            fastest = min(times, key=lambda a: times[a][i])
            (cell,) = [p for p in cells if p.get_x() <= size <= p.get_x() + p.get_width()
                       and not math.isclose(size, p.get_x())
                       and not math.isclose(size, p.get_x() + p.get_width())]
            assert cell.get_facecolor() == _color(palette, fastest, 0.85), (ranks, size)
        marks = sorted(line.get_xdata()[0] for line in ax.get_lines()
                       if line.get_ydata()[0] == index)
        assert marks == pytest.approx([c.size for c in crossovers(sizes, times)], rel=1e-12)
        inner = sorted(p.get_x() for p in cells)[1:]
        assert inner == pytest.approx(marks, rel=1e-12)


def test_busbw_lines_hold_the_tables_values_and_auto_is_marked_by_what_it_ran():
    rows = _power_laws(ranks=(8,))
    fastest = {}
    for s in SIZES:
        ring, tree = (next(r for r in rows if r["algorithm"] == a and r["size_bytes"] == s)
                      for a in ("ring", "tree"))
        fastest[s] = min((ring, tree), key=lambda r: r["time_s"])
    auto = [{**fastest[s], "algorithm": "auto", "selected": fastest[s]["algorithm"]}
            for s in SIZES]
    figure, palette = _draw("busbw_vs_size", auto + rows)
    ax = figure.axes[0]
    for name in ("ring", "tree"):
        (line,) = _lines_of(ax, palette, name)
        table = sorted((r["size_bytes"], r["busbw_GBps"]) for r in rows if r["algorithm"] == name)
        assert list(zip(line.get_xdata(), line.get_ydata(), strict=True)) == table
    (points,) = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert [tuple(p) for p in points.get_offsets()] == \
        [(r["size_bytes"], r["busbw_GBps"]) for r in auto]
    assert [tuple(c) for c in points.get_facecolors()] == \
        [_color(palette, r["selected"]) for r in auto]
    band = [line for line in ax.get_lines()
            if line.get_linewidth() == CHOICE_BAND["linewidth"]]
    assert [to_rgba(line.get_color()) for line in band] == \
        [_color(palette, r["selected"]) for r in auto]
    assert {r["selected"] for r in auto} == {"ring", "tree"}    # the choice changes
    legend = [t.get_text() for t in figure.legends[0].get_texts()]
    assert any(t.startswith("auto (band: colour of the algorithm it runs)") for t in legend)


def test_busbw_gets_a_log_axis_only_where_its_values_span_decades():
    wide, _ = _draw("busbw_vs_size", _power_laws(ranks=(8,)))
    assert wide.axes[0].get_yscale() == "log"
    narrow_rows = [r for r in _power_laws(ranks=(8,)) if r["size_bytes"] >= 2**26]
    narrow, _ = _draw("busbw_vs_size", narrow_rows)
    assert narrow.axes[0].get_yscale() == "linear" and narrow.axes[0].get_ylim()[0] == 0


def test_size_ticks_read_in_binary_units():
    figure, _ = _draw("time_vs_size", _power_laws(ranks=(8,)))
    ax = figure.axes[0]
    formatter = ax.xaxis.get_major_formatter()
    assert [formatter(t, 0) for t in ax.get_xticks()] == \
        [format_size(t, iec=True) for t in ax.get_xticks()]
    assert formatter(2**20, 0) == "1 MiB" and formatter(32 * 2**10, 0) == "32 KiB"


def test_time_lines_hold_the_tables_times():
    rows = _power_laws(ranks=(8, 64))
    figure, palette = _draw("time_vs_size", rows)
    for ax, ranks in zip(figure.axes, (8, 64), strict=True):
        for name in ("ring", "tree"):
            (line,) = _lines_of(ax, palette, name)
            assert list(line.get_ydata()) == [r["time_s"] for r in rows
                                              if r["algorithm"] == name and r["ranks"] == ranks]


def test_scaling_lines_hold_the_tables_times_against_ranks():
    rows = _power_laws(ranks=(8, 16, 64))
    figure, palette = _draw("time_vs_ranks", rows, size="1MiB")
    (ax,) = figure.axes
    for name in ("ring", "tree"):
        (line,) = _lines_of(ax, palette, name)
        table = [(r["ranks"], r["time_s"]) for r in rows
                 if r["algorithm"] == name and r["size_bytes"] == 2**20]
        assert list(zip(line.get_xdata(), line.get_ydata(), strict=True)) == table
    assert [ax.xaxis.get_major_formatter()(t, 0) for t in ax.get_xticks()] == ["8", "16", "64"]


def test_speedup_lines_are_the_baseline_time_over_each_time():
    rows = _power_laws(ranks=(8,))
    figure, palette = _draw("speedup", rows, baseline="ring")
    (ax,) = figure.axes
    (line,) = _lines_of(ax, palette, "tree")
    ring = {r["size_bytes"]: r["time_s"] for r in rows if r["algorithm"] == "ring"}
    assert list(line.get_ydata()) == pytest.approx(
        [ring[r["size_bytes"]] / r["time_s"] for r in rows if r["algorithm"] == "tree"])


def test_the_choice_map_shades_each_cell_by_what_auto_selected():
    rows = [_row("auto", p, s, 1.0, selected="ring" if s < 2**20 else "nvls",
                 protocol="LL" if s < 2**16 else "Simple")
            for p in (8, 16) for s in SIZES]
    figure, _ = _draw("choice_map", rows)
    (ax,) = figure.axes
    legend = figure.legends[0]
    color_of = {t.get_text(): to_rgba(h.get_facecolor()[:3], 0.85)
                for t, h in zip(legend.get_texts(), legend.legend_handles, strict=True)}
    cells = [p for p in ax.patches if isinstance(p, Rectangle)]
    assert len(cells) == len(rows)
    for row in rows:
        level = (8, 16).index(row["ranks"])
        (cell,) = [p for p in cells if p.get_y() == level - 0.5
                   and p.get_x() < row["size_bytes"] < p.get_x() + p.get_width()]
        assert cell.get_facecolor() == color_of[f"{row['selected']} {row['protocol']}"]


def test_the_shipped_nccl_figure_marks_every_auto_point_with_its_pick():
    _, rows = read_table(ROOT / "plots" / "nccl-h100" / "results.csv", [])
    figure, palette = _draw("busbw_vs_size", rows, lines="algorithm", panels="ranks")
    for ax, ranks in zip(figure.axes, distinct(rows, "ranks"), strict=False):
        auto = sorted((r for r in rows if r["ranks"] == ranks and r["algorithm"] == "auto"),
                      key=lambda r: r["size_bytes"])
        (points,) = [c for c in ax.collections if isinstance(c, PathCollection)]
        assert [tuple(p) for p in points.get_offsets()] == \
            [(r["size_bytes"], r["busbw_GBps"]) for r in auto]
        assert [tuple(c) for c in points.get_facecolors()] == \
            [_color(palette, r["selected"]) for r in auto]



def test_the_choice_map_colours_an_algorithm_as_its_line_and_hatches_by_protocol():
    rows = [_row("auto", 8, s, 1.0, selected="tree" if s < 2**20 else "ring",
                 protocol="LL" if s < 2**16 else "Simple") for s in SIZES]
    rows += [_row(a, 8, s, 1.0, selected=a, protocol="Simple") for a in ("ring", "tree")
             for s in SIZES]
    figure, palette = _draw("choice_map", rows)
    (ax,) = figure.axes
    for row in rows[:len(SIZES)]:
        (cell,) = [p for p in ax.patches if isinstance(p, Rectangle)
                   and p.get_x() < row["size_bytes"] < p.get_x() + p.get_width()]
        assert cell.get_facecolor() == _color(palette, row["selected"], 0.85)
        assert (cell.get_hatch() or "") == {"LL": "...", "Simple": ""}[row["protocol"]]


def _script(path: str, name: str):
    """A figure script (benchmarks/, workloads/) as a module, its own folder importable."""
    folder = ROOT / Path(path).parent
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    spec = importlib.util.spec_from_file_location(name, ROOT / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


WORKLOADS = ROOT / "plots" / "workloads"


def _workload_figure(name: str):
    draw = _script("workloads/draw.py", "workload_figures_draw")
    rows = draw.read_table(WORKLOADS / f"{name}.csv")
    with styled():
        return draw.FIGURES[name](rows), rows


def test_zero3_bars_and_differences_are_the_tables():
    figure, rows = _workload_figure("zero3-vs-dp")
    bars, gaps = figure.axes[:2]
    widths = [p.get_width() for p in bars.patches]
    rest = [r["step_s"] - r["exposed_s"] for r in rows]
    assert widths == pytest.approx(rest + [r["exposed_s"] for r in rows])
    assert [t.get_text() for t in bars.texts] == [f"{r['step_s']:.3f} s" for r in rows]
    step_gaps = [p.get_width() for p in gaps.patches][:len(rows) - 1]
    assert step_gaps == pytest.approx([1e3 * (r["step_s"] - rows[0]["step_s"])
                                       for r in rows[1:]])
    zero3_gap = 1e3 * (rows[1]["step_s"] - rows[0]["step_s"])   # ZeRO-3 against DDP
    assert f"{zero3_gap:+.1f} ms" in [t.get_text() for t in gaps.texts]
    figure.canvas.draw()
    legend = figure.legends[0].get_window_extent()
    assert not any(legend.overlaps(ax.get_window_extent()) for ax in (bars, gaps))


def test_two_jobs_bars_are_the_slowdowns_and_name_the_fabrics():
    figure, rows = _workload_figure("two-jobs")
    (ax,) = figure.axes
    heights = [p.get_height() for p in ax.patches]
    assert heights == pytest.approx([100 * (r["slowdown"] - 1) for r in rows])
    assert [t.get_text() for t in figure.legends[0].get_texts()] == \
        ["non-blocking (1:1)", "2:1 oversubscribed"]


def test_scaling_ticks_read_as_gpu_counts_and_lines_hold_the_table():
    figure, rows = _workload_figure("dp-scaling")
    step, exposed = figure.axes[:2]
    for ax, column in ((step, "step_s"), (exposed, "exposed_s")):
        assert [ax.xaxis.get_major_formatter()(t, 0) for t in ax.get_xticks()] == \
            [str(g) for g in sorted({r["gpus"] for r in rows})]
        for line in ax.get_lines():
            mine = [r for r in rows if r["algorithm"] == line.get_label()]
            assert list(line.get_ydata()) == [r[column] for r in mine]
    assert step.get_ylim()[0] == 0 and exposed.get_yscale() == "log"
    figure, rows = _workload_figure("ps-vs-allreduce")
    (ax,) = figure.axes
    labels = [ax.yaxis.get_major_formatter()(t, 0) for t in ax.get_yticks()]
    assert all("^" not in label and "e" not in label for label in labels) and "10" in labels


def test_gradient_format_bars_hold_the_table():
    figure, rows = _workload_figure("gradient-formats")
    bars, exposed = figure.axes[:2]
    assert [p.get_height() for p in exposed.patches] == [r["exposed_s"] for r in rows]
    tops = [p.get_y() + p.get_height() for p in bars.patches][len(rows):]
    assert tops == pytest.approx([r["step_s"] for r in rows])


def test_the_timeline_legend_names_only_what_is_drawn():
    figure, rows = _workload_figure("3d-timeline")
    draw = _script("workloads/draw.py", "workload_figures_draw")
    legend = [t.get_text() for t in figure.legends[0].get_texts()]
    busy = {r["kind"] for r in rows if r["end_s"] > r["start_s"]}
    assert sorted(legend) == sorted(draw.KIND_LABELS.get(k, k) for k in busy)
    idle = {r["kind"] for r in rows} - busy
    assert all(kind in figure.get_suptitle() for kind in idle)
    (ax,) = figure.axes
    lanes = list(dict.fromkeys((r["stage"], r["stream"]) for r in rows))
    assert len(ax.collections) == len(lanes)
    for lane, bars in zip(lanes, ax.collections, strict=True):
        mine = [r for r in rows if (r["stage"], r["stream"]) == lane]
        starts = [path.vertices[:, 0].min() for path in bars.get_paths()]
        assert starts == pytest.approx([1e3 * r["start_s"] for r in mine])


def test_the_fidelity_figure_draws_the_chosen_runs_rows():
    fidelity = _script("benchmarks/fidelity_figure.py", "fidelity_figure_module")
    rows = fidelity.read_rows(ROOT / "plots" / "fidelity" / "rows.csv")
    runs, eligible = fidelity.chosen_runs(rows)
    errors = [fidelity.median_error([r for r in rows if r["run_id"] == run], "auto_busbw")
              for run in runs]
    assert len(runs) == fidelity.PANELS and errors == sorted(errors) and eligible > len(runs)
    with styled():
        figure = fidelity.figure(rows)
    panels = [ax for ax in figure.axes if ax.get_visible()]
    for ax, run in zip(panels, runs, strict=True):
        mine = sorted((r for r in rows if r["run_id"] == run), key=lambda r: r["size_bytes"])
        measured = next(line for line in ax.get_lines() if line.get_marker() == "o")
        assert list(measured.get_ydata()) == [r["measured_busbw"] for r in mine]
        assert ax.get_xlabel() == "message size (bytes)" and run in ax.get_title()
    assert any("leave-one-out" in t.get_text() for t in figure.legends[0].get_texts())


def test_the_calibration_figure_starts_the_sweep_at_zero_and_says_why_1gib_is_off():
    extrapolate = _script("benchmarks/extrapolate.py", "extrapolate_module")
    table = {}
    with (ROOT / "plots" / "calibrate" / "extrapolate.csv").open() as f:
        for kind, nodes, size, value in csv.reader(f):
            table[(kind, int(nodes), int(size))] = float(value)
    one = {size: 100.0 + size / 2**30 for size in (2**20, 2**30)}
    fitted = {kind: {s: table.get((kind, 1, s), 1.0) for s in one} for kind in ("preset",
                                                                              "calibrated")}
    sweep = {kind: [table[(kind, n, 2**30)] for n in extrapolate.NODES[kind]]
             for kind in ("preset", "calibrated")}
    sizes = [2**20, 2**30]
    curves = {kind: [table[(kind, 4, s)] for s in sizes] for kind in ("preset", "calibrated")}
    with styled():
        figure = extrapolate.figure({1: one, 4: dict(one)}, fitted, sizes, curves, sweep)
    seen, _, right = figure.axes[:3]
    assert right.get_ylim()[0] == 0
    lines = right.get_lines()
    assert [list(line.get_ydata()) for line in lines[:2]] == [sweep["preset"],
                                                              sweep["calibrated"]]
    off = 100 * (fitted["calibrated"][2**30] / one[2**30] - 1)
    assert f"calibrated {off:+.1f}%" in seen.texts[0].get_text()
