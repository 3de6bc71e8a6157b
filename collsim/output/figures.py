"""The figures a scenario can ask for, drawn from the rows of a results table; their names
and what each shows are in :mod:`collsim.output.kinds`, and each is drawn by the function
registered for it there with ``@draws`` (here, and ``choice_map`` in its own module)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from collsim.output.crossover import stretches
from collsim.output.kinds import DRAWERS, FIGURE_KINDS, draws
from collsim.output.layout import Plan, Row, distinct, plan, select, spread, value_label
from collsim.output.style import (
    CLOSED_FORM,
    COLORS,
    HATCHES,
    RANKS_LABEL,
    SIZE_LABEL,
    bandwidth_axis,
    darker,
    label_axes,
    legend_below,
    new_figure,
    ranks_axis,
    ratio_axis,
    save,
    series_style,
    size_axis,
    spans_decades,
    styled,
    time_axis,
    title,
)
from collsim.output.table import outcome_columns
from collsim.units import format_size, parse_size

SIZES_PER_SCALING_FIGURE = 4


class Skip(Exception):
    """The table cannot make this figure (one algorithm for a crossover map, say)."""


@dataclass
class Drawn:
    """Files written, and why any figure was left out."""

    files: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def draw_figures(rows: Sequence[Row], specs: Sequence[dict[str, Any]], out: Path,
                 formats: Sequence[str], title: str = "") -> Drawn:
    """Draw every figure in ``specs`` from ``rows`` into ``out`` in each of ``formats``."""
    drawn = Drawn()
    palette = {name: i for i, name in enumerate(distinct(rows, "algorithm"))}
    for spec in specs:
        name = spec.get("name") or spec["kind"]
        try:
            chosen = select(rows, spec.get("select"))
            if not chosen:
                raise Skip("no row matches its select")
            with styled():
                figure = KINDS[spec["kind"]](chosen, spec, palette)
                if spec.get("title"):
                    figure.suptitle(spec["title"])
                drawn.files += save(figure, out, name, formats)
        except Skip as why:
            drawn.notes.append(f"figure {name!r} not drawn: {why}")
    return drawn


def _title(figure: Figure, what: str, layout: Plan) -> None:
    title(figure, what, layout.context())


def _styles(layout: Plan, keys: list[tuple[Any, ...]], palette: dict[Any, int]
            ) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Algorithms keep their colour in every figure of a table; when lines differ in two
    columns, the first picks the colour and the second the marker."""
    def rank(column_index: int, value: Any) -> int:
        if layout.lines[column_index] == "algorithm" and value in palette:
            return palette[value]
        return distinct_values[column_index].index(value)

    distinct_values = [list(dict.fromkeys(k[i] for k in keys)) for i in range(len(layout.lines))]
    if len(layout.lines) == 1:
        return {k: series_style(rank(0, k[0])) for k in keys}
    if len(layout.lines) == 2:
        return {k: series_style(rank(0, k[0]), rank(1, k[1])) for k in keys}
    return {k: series_style(i) for i, k in enumerate(keys)}


def _markers(index: int, count: int, points: int, hidden: int) -> dict[str, Any]:
    """Markers that keep coinciding series visible: on long series each series marks every
    few points, shifted by its index; on short ones a series drawn over ``hidden`` identical
    ones gets smaller markers."""
    if points > 12 and count > 1:
        step = min(count, 4)
        return {"markevery": (index % step, step)}
    return {"markersize": max(2.5, 4.5 - 1.2 * hidden)} if hidden else {}


def _legend(layout: Plan, handles: dict[tuple[Any, ...], Any],
            styles: dict[tuple[Any, ...], dict[str, Any]]) -> tuple[list[Any], list[str]]:
    """One entry per series; when series differ in two columns, one entry per colour (first
    column) and one per marker (second), which reads better than every combination."""
    if len(layout.lines) != 2 or len(handles) < 4:
        return list(handles.values()), [layout.line_label(k) for k in handles]
    shown, labels = [], []
    for position, column in enumerate(layout.lines):
        for value in dict.fromkeys(k[position] for k in handles):
            if value is None:
                continue
            style = next(styles[k] for k in handles if k[position] == value)
            shown.append(Line2D([], [], color=style["color"], linestyle="-") if position == 0
                         else Line2D([], [], color="#333333", marker=style["marker"],
                                     linestyle="none"))
            labels.append(value_label(column, value))
    return shown, labels


def _line_figure(rows: Sequence[Row], spec: dict[str, Any], x: str, what: str,
                 y: Callable[[Row], float | None], closed: Callable[[Row], float | None] | None,
                 axes_setup: Callable[[Any, Sequence[Row]], None], ylabel: str,
                 lines: str = "algorithm", palette: dict[Any, int] | None = None,
                 height: float = 3.1) -> Figure:
    layout = plan(rows, x, spec, lines)
    figure, axes, columns = new_figure(len(layout.panel_values), height=height)
    keys = layout.line_keys(rows)
    styles = _styles(layout, keys, palette or {})
    handles: dict[tuple[Any, ...], Any] = {}
    pick_colors = _pick_colors(rows, palette or {})
    choosers: set[str] = set()
    bands: list[tuple[Any, list[tuple[float, float, str]]]] = []
    any_closed = False
    for ax, value in zip(axes, layout.panel_values, strict=True):
        panel_rows = layout.panel_rows(rows, value)
        drawn: list[tuple[Any, ...]] = []
        for key in keys:
            series = sorted((r for r in panel_rows if layout.line_key(r) == key
                             and y(r) is not None), key=lambda r: r[x])
            if not series:
                continue
            shape = tuple((r[x], float(f"{y(r):.6g}")) for r in series)
            if _is_choice(series):
                handle = _draw_choice(ax, series, x, y, styles[key], pick_colors)
                bands.append((ax, [(r[x], y(r), pick_colors[r["selected"]]) for r in series]))
                choosers.add(series[0]["algorithm"])
            else:
                (handle,) = ax.plot([r[x] for r in series], [y(r) for r in series],
                                    **styles[key], **_markers(keys.index(key), len(keys),
                                                              len(series), drawn.count(shape)))
            drawn.append(shape)
            handles.setdefault(key, handle)
            model = [(r[x], closed(r)) for r in series if closed and closed(r) is not None]
            if model:
                any_closed = True
                ax.plot(*zip(*model, strict=True), color=darker(styles[key]["color"]),
                        zorder=3, **CLOSED_FORM)
        ax.set_title(layout.panel_title(value))
    axes_setup(axes[0], rows)
    for ax, points in bands:   # drawn once the axes know their scale, which bends the band
        _choice_band(ax, points)
    label_axes(axes, columns, SIZE_LABEL if x == "size_bytes" else RANKS_LABEL, ylabel)
    shown, labels = _legend(layout, handles, styles)
    if choosers:
        shown, labels = _choice_legend(shown, labels, choosers, pick_colors,
                                       set(distinct(rows, "algorithm")))
    if any_closed:
        shown.append(Line2D([], [], color="#444444", **CLOSED_FORM))
        labels.append("closed form (α-β-γ)")
    legend_below(figure, shown, labels)
    _title(figure, what, layout)
    return figure


CHOOSERS = ("auto", "best")  # algorithms that run another one, named in the selected column


def _is_choice(series: Sequence[Row]) -> bool:
    """A series of ``auto`` (or ``best``) rows, each saying which algorithm it ran."""
    return all(r.get("algorithm") in CHOOSERS and r.get("selected") for r in series)


def _pick_colors(rows: Sequence[Row], palette: dict[Any, int]) -> dict[str, str]:
    """The colour of each algorithm a chooser picked: that algorithm's own line colour, or a
    colour no line of the table uses when it has no line of its own."""
    picked = distinct([r for r in rows if r.get("algorithm") in CHOOSERS], "selected")
    colors = {name: COLORS[palette[name] % len(COLORS)] for name in picked if name in palette}
    spare = len(palette)
    for name in picked:
        if name and name not in colors:
            colors[name] = COLORS[spare % len(COLORS)]
            spare += 1
    return colors


def _draw_choice(ax: Any, series: Sequence[Row], x: str, y: Callable[[Row], float | None],
                 style: dict[str, Any], pick_colors: dict[str, str]) -> Any:
    """A chooser's points, each marked in the colour of the algorithm it picked there (its
    band, :func:`_choice_band`, follows once the axes have their scales)."""
    xs, ys = [r[x] for r in series], [y(r) for r in series]
    return ax.scatter(xs, ys, s=26, marker=style["marker"], zorder=5, linewidths=0.8,
                      c=[pick_colors[r["selected"]] for r in series], edgecolors="white")


CHOICE_BAND = {"linewidth": 6.5, "alpha": 0.5, "solid_capstyle": "butt", "zorder": 1}


def _choice_band(ax: Any, points: Sequence[tuple[float, float, str]]) -> None:
    """A wide band under the other lines, along a chooser's points and coloured by what it
    picked: each point's colour reaches half-way (on the axes' scales) to its neighbours, so
    the band runs around the line of the algorithm picked, or apart from every line where
    the pick differs from them all (another protocol or channel count)."""
    def middle(a: float, b: float, log: bool) -> float:
        return math.sqrt(a * b) if log and a > 0 and b > 0 else (a + b) / 2

    log_x, log_y = ax.get_xscale() == "log", ax.get_yscale() == "log"
    for i, (px, py, color) in enumerate(points):
        xs, ys = [px], [py]
        if i > 0:
            xs.insert(0, middle(points[i - 1][0], px, log_x))
            ys.insert(0, middle(points[i - 1][1], py, log_y))
        if i + 1 < len(points):
            xs.append(middle(px, points[i + 1][0], log_x))
            ys.append(middle(py, points[i + 1][1], log_y))
        ax.plot(xs, ys, color=color, **CHOICE_BAND)


def _choice_legend(shown: list[Any], labels: list[str], choosers: set[str],
                   pick_colors: dict[str, str], lines: set[str]) -> tuple[list[Any], list[str]]:
    """Say in the legend what a chooser's band colours mean, and give a colour to each
    picked algorithm that has no line of its own."""
    note = " (band: colour of the algorithm it runs)"
    band = Line2D([], [], color="#888888", **{k: v for k, v in CHOICE_BAND.items()
                                               if k != "zorder"})
    named = [label.split(",")[0] in choosers for label in labels]
    shown = [band if chosen else handle for handle, chosen in zip(shown, named, strict=True)]
    labels = [label + note if chosen else label for label, chosen in zip(labels, named,
                                                                         strict=True)]
    if not any(named):
        shown.append(band)
        labels.append(f"{'/'.join(sorted(choosers))}{note}")
    for name, color in pick_colors.items():
        if name not in lines:
            shown.append(Line2D([], [], color=color, linewidth=CHOICE_BAND["linewidth"],
                                alpha=CHOICE_BAND["alpha"]))
            labels.append(f"{name} (run by {'/'.join(sorted(choosers))})")
    return shown, labels


def _sizes(ax: Any, rows: Sequence[Row]) -> None:
    size_axis(ax, [r["size_bytes"] for r in rows if r["size_bytes"] > 0] or [1])


@draws("time_vs_size")
def time_vs_size(rows: Sequence[Row], spec: dict[str, Any], palette: dict[Any, int]
                 ) -> Figure:
    def setup(ax: Any, rows: Sequence[Row]) -> None:
        _sizes(ax, rows)
        time_axis(ax)

    return _line_figure(rows, spec, "size_bytes", "Completion time vs message size",
                        lambda r: r["time_s"], lambda r: r.get("analytic_time_s"), setup,
                        "completion time", palette=palette)


@draws("busbw_vs_size")
def busbw_vs_size(rows: Sequence[Row], spec: dict[str, Any], palette: dict[Any, int]
                  ) -> Figure:
    def closed(row: Row) -> float | None:
        model = row.get("analytic_time_s")
        return row["busbw_GBps"] * row["time_s"] / model if model and row["time_s"] else None

    def setup(ax: Any, rows: Sequence[Row]) -> None:
        _sizes(ax, rows)
        bandwidth_axis(ax, [r["busbw_GBps"] for r in rows])

    # A log axis spreads decades over the panel: taller panels keep the top ones apart.
    tall = spans_decades([r["busbw_GBps"] for r in rows])
    return _line_figure(rows, spec, "size_bytes", "Bus bandwidth vs message size (nccl-tests "
                        "busbw)", lambda r: r["busbw_GBps"], closed, setup,
                        "bus bandwidth (GB/s)", palette=palette, height=3.9 if tall else 3.1)


@draws("time_vs_ranks")
def time_vs_ranks(rows: Sequence[Row], spec: dict[str, Any], palette: dict[Any, int]
                  ) -> Figure:
    if spec.get("size") is not None:
        wanted = parse_size(spec["size"])
        rows = [r for r in rows if r["size_bytes"] == wanted]
        if not rows:
            raise Skip(f"the table has no rows of size {format_size(wanted)}")
    else:
        keep = set(spread(distinct(rows, "size_bytes"), SIZES_PER_SCALING_FIGURE))
        rows = [r for r in rows if r["size_bytes"] in keep]
    if len(distinct(rows, "ranks")) < 2:
        raise Skip("it needs at least two rank counts")
    spec = {"panels": "size_bytes", **spec} if len(distinct(rows, "size_bytes")) > 1 else spec

    def setup(ax: Any, rows: Sequence[Row]) -> None:
        ranks_axis(ax, [r["ranks"] for r in rows])
        time_axis(ax)

    return _line_figure(rows, spec, "ranks", "Completion time vs ranks",
                        lambda r: r["time_s"], lambda r: r.get("analytic_time_s"), setup,
                        "completion time", palette=palette)


@draws("speedup")
def speedup(rows: Sequence[Row], spec: dict[str, Any], palette: dict[Any, int]
            ) -> Figure:
    baseline = spec["baseline"]
    algorithms = distinct(rows, "algorithm")
    if baseline not in algorithms:
        raise Skip(f"the table has no rows of the baseline algorithm {baseline!r}")
    others = [a for a in (spec.get("algorithms") or algorithms) if a != baseline]
    if not others:
        raise Skip("it needs an algorithm besides the baseline")

    skip = _NOT_THE_POINT | outcome_columns(list(rows[0]))

    def point(row: Row) -> tuple[Any, ...]:
        return tuple((k, v) for k, v in row.items() if k not in skip)

    base = {point(r): r["time_s"] for r in rows if r["algorithm"] == baseline}
    ratios = []
    for row in rows:
        if row["algorithm"] in others and point(row) in base and row["time_s"]:
            ratios.append({**row, "speedup": base[point(row)] / row["time_s"]})
    if not ratios:
        raise Skip(f"no point has both {baseline!r} and another algorithm")
    low = min(r["speedup"] for r in ratios)
    high = max(r["speedup"] for r in ratios)

    def setup(ax: Any, rows: Sequence[Row]) -> None:
        _sizes(ax, rows)
        ratio_axis(ax, min(low, 1.0), max(high, 1.0))

    lines = "algorithm" if len(others) > 1 else (spec.get("lines") or _second_line(ratios))
    which = "" if len(others) > 1 else f" of {others[0]}"
    return _line_figure(ratios, {**spec, "lines": lines}, "size_bytes",
                        f"Speedup{which} over {baseline} (time of {baseline} / time{which})",
                        lambda r: r["speedup"], None, setup, f"speedup over {baseline}",
                        lines=lines, palette=palette)


_NOT_THE_POINT = {"algorithm", "scenario", "speedup"}


def _second_line(rows: Sequence[Row]) -> str:
    """With one algorithm against the baseline, lines tell rank counts (or topologies) apart."""
    for column in ("ranks", "topology", "collective"):
        if len(distinct(rows, column)) > 1:
            return column
    return "algorithm"


@draws("crossover_map")
def crossover_map(rows: Sequence[Row], spec: dict[str, Any], palette: dict[Any, int]
                  ) -> Figure:
    algorithms = spec.get("algorithms") or distinct(rows, "algorithm")
    rows = [r for r in rows if r["algorithm"] in algorithms]
    if len(distinct(rows, "algorithm")) < 2:
        raise Skip("a crossover map needs at least two algorithms")
    row_column = "ranks" if len(distinct(rows, "ranks")) > 1 else next(
        (c for c in ("topology", "collective") if len(distinct(rows, c)) > 1), "ranks")
    layout = plan(rows, "size_bytes", {**spec, "lines": row_column}, lines=row_column,
                  ignore=("algorithm",))
    if any(c not in (row_column, "algorithm") for c in layout.lines):
        extra = [c for c in layout.lines if c not in (row_column, "algorithm")]
        raise Skip(f"too many columns vary ({', '.join(extra)}); pick values with select")
    style = {name: (COLORS[palette.get(name, i) % len(COLORS)],
                    HATCHES[palette.get(name, i) % len(HATCHES)])
             for i, name in enumerate(algorithms)}
    figure, axes, columns = new_figure(len(layout.panel_values), width=5.4, height=3.4,
                                       share=False)
    winners: set[str] = set()
    for ax, value in zip(axes, layout.panel_values, strict=True):
        winners |= _crossover_panel(ax, layout.panel_rows(rows, value), row_column, style)
        ax.set_title(layout.panel_title(value))
    label_axes(axes, columns, SIZE_LABEL, {"ranks": RANKS_LABEL}.get(row_column, row_column))
    shown = [name for name in style if name in winners]
    handles = [Patch(facecolor=style[n][0], edgecolor="black", hatch=style[n][1], alpha=0.85,
                     linewidth=0.5) for n in shown]
    handles.append(Line2D([], [], color="black", marker="|", markersize=11,
                          markeredgewidth=2, linestyle="none"))
    legend_below(figure, handles, [f"{n} fastest" for n in shown]
                 + ["crossover (log-log interpolation between the sizes run)"])
    _title(figure, f"Fastest algorithm by ranks and message size, of {', '.join(style)}",
           layout)
    return figure


def _crossover_panel(ax: Any, rows: Sequence[Row], row_column: str,
                     style: dict[str, tuple[str, str]]) -> set[str]:
    """Shade one panel; the algorithms that win somewhere in it."""
    winners: set[str] = set()
    sizes = distinct(rows, "size_bytes")
    levels = distinct(rows, row_column)
    edges = _cell_edges([max(s, 0.5) for s in sizes])
    for level_index, level in enumerate(levels):
        times = {name: [math.inf] * len(sizes) for name in style}
        for r in rows:
            if r[row_column] == level and r["algorithm"] in times:
                times[r["algorithm"]][sizes.index(r["size_bytes"])] = r["time_s"]
        # The sizes at which two algorithms or more ran (a sweep may thin out some rows),
        # and the algorithms that ran at all of them; sizes only one ran stay blank.
        shared = [i for i in range(len(sizes))
                  if sum(math.isfinite(t[i]) for t in times.values()) >= 2]
        complete = {n: [t[i] for i in shared] for n, t in times.items()
                    if shared and all(math.isfinite(t[i]) for i in shared)}
        if len(complete) < 2:
            continue
        # Shading and marks both come from these stretches: a mark is where one ends.
        pieces = stretches([sizes[i] for i in shared], complete)
        left, right = edges[shared[0]], edges[shared[-1] + 1]
        for piece in pieces:
            low = left if piece.low is None else piece.low
            high = right if piece.high is None else piece.high
            winners.add(piece.winner)
            color, hatch = style[piece.winner]
            ax.add_patch(Rectangle((low, level_index - 0.5), high - low, 1, facecolor=color,
                                   hatch=hatch, edgecolor="black", alpha=0.85, linewidth=0.0,
                                   label=f"{level}: {piece.winner}"))
        for piece in pieces[1:]:
            ax.plot([piece.low], [level_index], marker="|", color="black", markersize=12,
                    markeredgewidth=2.2, linestyle="none")
            # The label sits beside its mark, on the side with more room.
            room = math.log(piece.low / edges[0]) < 0.8 * math.log(edges[-1] / edges[0])
            ax.annotate(format_size(piece.low, iec=True), (piece.low, level_index),
                        xytext=(6 if room else -6, 0), textcoords="offset points",
                        ha="left" if room else "right", va="center", fontsize=7.5,
                        bbox={"boxstyle": "round,pad=0.15", "facecolor": "white",
                              "edgecolor": "none", "alpha": 0.9})
    ax.set_xlim(edges[0], edges[-1])
    ax.set_ylim(-0.5, len(levels) - 0.5)
    size_axis(ax, [s for s in sizes if s > 0] or [1])
    ax.set_yticks(range(len(levels)), [value_label(row_column, v).replace(" ranks", "")
                                       if row_column == "ranks" else str(v) for v in levels])
    ax.grid(False)
    return winners


def _cell_edges(sizes: Sequence[float]) -> list[float]:
    """Cell boundaries half-way (geometrically) between sizes, and as wide at the ends."""
    if len(sizes) == 1:
        return [sizes[0] / 1.5, sizes[0] * 1.5]
    mids = [math.sqrt(a * b) for a, b in zip(sizes, sizes[1:], strict=False)]
    return [sizes[0] ** 2 / mids[0], *mids, sizes[-1] ** 2 / mids[-1]]


from collsim.output.choice_map import choice_map  # noqa: E402,F401  (registers; imports Skip)

# Every kind's drawer, in FIGURE_KINDS' order (a kind without one fails here, at import).
KINDS: dict[str, Callable[[Sequence[Row], dict[str, Any], dict[Any, int]], Figure]] = {
    kind: DRAWERS[kind] for kind in FIGURE_KINDS
}
