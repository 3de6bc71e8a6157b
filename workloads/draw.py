"""Draw the workload figures in plots/workloads/ from their tables (NAME.csv beside each
NAME.png), which workloads/figures.py writes from its runs; redrawing runs nothing.

    .venv/bin/python workloads/draw.py [--out plots/workloads] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter, NullLocator

from collsim.output.style import (
    COLORS,
    legend_below,
    new_figure,
    plain_number,
    ranks_axis,
    save,
    styled,
    title,
)

HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "plots" / "workloads"
Row = dict[str, Any]
REST, EXPOSED = "#7fa9c9", "#C0392B"   # the step outside exposed communication; exposed
GPUS_LABEL = "H100 GPUs (8 a node, non-blocking fat-tree)"


def read_table(path: Path) -> list[Row]:
    """A figure's table: numbers as floats (GPU counts as ints), text as text."""
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        for key, text in row.items():
            with contextlib.suppress(ValueError):
                row[key] = int(text) if key in ("gpus", "stage", "gpu") else float(text)
    return rows


def seconds(value: float) -> str:
    return f"{value:.3f} s" if value >= 0.1 else f"{1e3 * value:.1f} ms"


def _log_seconds(ax: Any) -> None:
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: plain_number(v)))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_minor_formatter(NullFormatter())


def dp_scaling(rows: list[Row]) -> Figure:
    """Step time (from zero) and exposed communication (log: it spans decades) against
    GPUs, one line per allreduce algorithm."""
    figure, (step, exposed), _ = new_figure(2, width=4.6, height=3.3, share=False)
    for index, algorithm in enumerate(dict.fromkeys(r["algorithm"] for r in rows)):
        mine = [r for r in rows if r["algorithm"] == algorithm]
        for ax, column in ((step, "step_s"), (exposed, "exposed_s")):
            ax.plot([r["gpus"] for r in mine], [r[column] for r in mine], marker="o",
                    color=COLORS[index], label=algorithm)
    for ax, what in ((step, "step time (s)"), (exposed, "exposed communication (s)")):
        ranks_axis(ax, [r["gpus"] for r in rows])
        ax.set_xlabel(GPUS_LABEL)
        ax.set_ylabel(what)
    step.set_ylim(bottom=0)
    _log_seconds(exposed)
    legend_below(figure, *step.get_legend_handles_labels())
    title(figure, "LLaMA-7B data parallel: bf16 gradients in 25 MiB buckets, overlapped with "
          "the backward pass (double_binary_tree run to 128 GPUs)")
    return figure


def zero3_vs_dp(rows: list[Row]) -> Figure:
    """Each setup's step split into exposed communication and the rest, with its time
    written on the bar; beside it, how far each ZeRO-3 run is from DDP, part by part, in
    milliseconds, where a 43 ms difference in a 1.5 s step can be seen."""
    figure, (bars, gaps), _ = new_figure(2, width=4.6, height=3.2, share=False)
    labels = [r["setup"] for r in rows]
    positions = range(len(rows))
    rest = [r["step_s"] - r["exposed_s"] for r in rows]
    bars.barh(positions, rest, color=REST)
    bars.barh(positions, [r["exposed_s"] for r in rows], left=rest, color=EXPOSED)
    for y, row in zip(positions, rows, strict=True):
        bars.annotate(seconds(row["step_s"]), (row["step_s"], y), xytext=(3, 0),
                      textcoords="offset points", va="center", fontsize=8)
    bars.set_yticks(list(positions), labels)
    bars.invert_yaxis()
    bars.set_xlim(0, 1.25 * max(r["step_s"] for r in rows))
    bars.set_xlabel("seconds per step (average GPU)")
    base = rows[0]
    parts = (("step", "step_s", "#555555"), ("exposed communication", "exposed_s", EXPOSED),
             ("rest of the step", None, REST))
    height = 0.8 / len(parts)
    for k, (_, column, color) in enumerate(parts):
        values = [1e3 * ((r[column] - base[column]) if column else
                         (r["step_s"] - r["exposed_s"] - base["step_s"] + base["exposed_s"]))
                  for r in rows[1:]]
        ys = [i + (k - 1) * height for i in range(len(values))]
        gaps.barh(ys, values, height, color=color)
        for y, value in zip(ys, values, strict=True):
            gaps.annotate(f"{value:+.1f} ms", (value, y), xytext=(-3 if value < 0 else 3, 0),
                          textcoords="offset points", va="center", fontsize=7,
                          ha="right" if value < 0 else "left")
    gaps.set_yticks(range(len(rows) - 1), labels[1:])
    gaps.invert_yaxis()
    low = min(0.0, *(v for v in gaps.get_xlim()))
    gaps.set_xlim(1.45 * low, max(5.0, gaps.get_xlim()[1]))
    gaps.axvline(0, color="black", linewidth=0.8)
    gaps.set_xlabel(f"difference from {labels[0].splitlines()[0]} (ms)")
    handles = [Patch(color=color) for _, _, color in parts]
    legend_below(figure, handles, [name for name, _, _ in parts])
    title(figure, "LLaMA-7B on 32 H100s: DDP vs ZeRO-3 (rest of the step: compute, or "
          "waiting for other GPUs)")
    return figure


def ps_vs_allreduce(rows: list[Row]) -> Figure:
    """Step time against GPUs per algorithm, on a log axis with plain seconds."""
    figure, (ax,), _ = new_figure(1, width=5.6, height=3.4)
    for index, algorithm in enumerate(dict.fromkeys(r["algorithm"] for r in rows)):
        mine = [r for r in rows if r["algorithm"] == algorithm]
        ax.plot([r["gpus"] for r in mine], [r["step_s"] for r in mine], marker="o",
                color=COLORS[index], label=algorithm)
    ranks_axis(ax, [r["gpus"] for r in rows])
    _log_seconds(ax)
    ax.set_xlabel(GPUS_LABEL)
    ax.set_ylabel("step time (s)")
    legend_below(figure, *ax.get_legend_handles_labels())
    title(figure, "LLaMA-7B DDP: parameter server vs allreduce, the same gradient bytes")
    return figure


def gradient_formats(rows: list[Row]) -> Figure:
    """The step split into exposed communication and the rest per gradient format; beside
    it, the exposed communication alone on a log axis (it spans two decades)."""
    figure, (bars, exposed), _ = new_figure(2, width=4.4, height=3.2, share=False)
    labels = [r["format"] for r in rows]
    rest = [r["step_s"] - r["exposed_s"] for r in rows]
    bars.bar(labels, rest, color=REST, label="rest of the step")
    bars.bar(labels, [r["exposed_s"] for r in rows], bottom=rest, color=EXPOSED,
             label="exposed communication")
    for x, row in enumerate(rows):
        bars.annotate(seconds(row["step_s"]), (x, row["step_s"]), xytext=(0, 2),
                      textcoords="offset points", ha="center", fontsize=7.5)
    bars.set_ylim(0, 1.12 * max(r["step_s"] for r in rows))
    bars.set_ylabel("seconds per step (average GPU)")
    exposed.bar(labels, [r["exposed_s"] for r in rows], color=EXPOSED)
    for x, row in enumerate(rows):
        exposed.annotate(seconds(row["exposed_s"]), (x, row["exposed_s"]), xytext=(0, 2),
                         textcoords="offset points", ha="center", fontsize=7.5)
    _log_seconds(exposed)
    exposed.set_ylim(top=3 * max(r["exposed_s"] for r in rows))
    exposed.set_ylabel("exposed communication (s)")
    legend_below(figure, *bars.get_legend_handles_labels())
    title(figure, "LLaMA-7B DDP on 64 H100s: gradient formats (rest of the step: compute, or "
          "waiting for other GPUs)")
    return figure


FABRICS = {"h100-cluster": "non-blocking (1:1)", "h100-cluster-2to1": "2:1 oversubscribed"}


def two_jobs(rows: list[Row]) -> Figure:
    """How much slower each job runs beside the other than alone, per fabric."""
    figure, (ax,), _ = new_figure(1, width=5.6, height=3.4)
    jobs = list(dict.fromkeys(r["job"] for r in rows))
    fabrics = list(dict.fromkeys(r["fabric"] for r in rows))
    width = 0.8 / len(fabrics)
    for i, fabric in enumerate(fabrics):
        mine = {r["job"]: r for r in rows if r["fabric"] == fabric}
        xs = [j + (i - (len(fabrics) - 1) / 2) * width for j in range(len(jobs))]
        values = [100 * (mine[job]["slowdown"] - 1) for job in jobs]
        ax.bar(xs, values, width, color=COLORS[i], label=FABRICS.get(fabric, fabric))
        for x, value in zip(xs, values, strict=True):
            ax.annotate(f"{value:.1f}%", (x, value), xytext=(0, 2), textcoords="offset points",
                        ha="center", fontsize=8)
    ax.set_xticks(range(len(jobs)), [f"{job} job" for job in jobs])
    ax.set_ylim(0, 1.2 * max(100 * (r["slowdown"] - 1) for r in rows))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}%"))
    ax.set_ylabel("slower together than alone")
    ax.grid(axis="x", visible=False)
    legend_below(figure, *ax.get_legend_handles_labels())
    title(figure, "Two jobs on 16 nodes (128 H100s) of a fat-tree, each on half of every "
          "leaf: an all-to-all and a ring allreduce")
    return figure


KIND_COLORS = {"forward": "#66bb6a", "backward": "#1b5e20", "optimizer": "#8d6e63",
               "tensor": "#1565c0", "data": "#c62828", "pipeline": "#f9a825"}
KIND_LABELS = {"tensor": "tensor-parallel calls", "data": "data-parallel calls",
               "pipeline": "pipeline sends"}


def timeline_3d(rows: list[Row]) -> Figure:
    """One row per (pipeline stage, stream), a bar per task; the legend names only the kinds
    of task that take time (the title names those that take none)."""
    figure, (ax,), _ = new_figure(1, width=10.5, height=4.6)
    lanes = list(dict.fromkeys((r["stage"], r["gpu"], r["stream"]) for r in rows))
    for lane, (stage, gpu, stream) in enumerate(lanes):
        mine = [r for r in rows if (r["stage"], r["gpu"], r["stream"]) == (stage, gpu, stream)]
        ax.broken_barh([(1e3 * r["start_s"], 1e3 * (r["end_s"] - r["start_s"])) for r in mine],
                       (lane - 0.4, 0.8), facecolors=[KIND_COLORS.get(r["kind"], "#9e9e9e")
                                                      for r in mine])
    ax.set_yticks(range(len(lanes)), [f"stage {s} (GPU {g}) {stream}"
                                      for s, g, stream in lanes], fontsize=7)
    ax.yaxis.set_minor_locator(FixedLocator([]))
    ax.invert_yaxis()
    ax.grid(axis="y", visible=False)
    ax.set_xlabel("time (ms)")
    kinds = [k for k in KIND_COLORS if any(r["kind"] == k for r in rows)]
    kinds += sorted({r["kind"] for r in rows} - set(KIND_COLORS))
    drawn = [k for k in kinds if any(r["kind"] == k and r["end_s"] > r["start_s"] for r in rows)]
    legend_below(figure, [Patch(color=KIND_COLORS.get(k, "#9e9e9e")) for k in drawn],
                 [KIND_LABELS.get(k, k) for k in drawn])
    empty = [k for k in kinds if k not in drawn]
    title(figure, "GPT-39B, tensor 8 x pipeline 4 x data 2, 1F1B over 8 micro-batches, on 64 "
          "H100s: one GPU per pipeline stage (data replica 0)",
          f"{', '.join(empty)}: no time in this step" if empty else "")
    return figure


FIGURES: dict[str, Callable[[list[Row]], Figure]] = {
    "dp-scaling": dp_scaling, "zero3-vs-dp": zero3_vs_dp, "ps-vs-allreduce": ps_vs_allreduce,
    "gradient-formats": gradient_formats, "3d-timeline": timeline_3d, "two-jobs": two_jobs}


def draw(name: str, out: Path = OUT) -> Path:
    """Draw ``name``.png from ``name``.csv in ``out``."""
    rows = read_table(out / f"{name}.csv")
    with styled():
        (path,) = save(FIGURES[name](rows), out, name, ["png"])
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--only", nargs="*", choices=list(FIGURES), default=list(FIGURES))
    args = parser.parse_args(argv)
    for name in args.only:
        print(draw(name, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
