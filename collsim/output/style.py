"""One look for every figure: colours safe for colour-blind readers, a distinct marker (and,
on crossover maps, hatching) per series so a black-and-white print still tells them apart,
size ticks in binary units (1 KiB, 1 MiB), time ticks with their unit, and files that do not
change from one run to the next (no dates in SVG or PDF)."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import (  # noqa: E402
    EngFormatter,
    FixedLocator,
    FuncFormatter,
    LogLocator,
    NullFormatter,
    NullLocator,
)

from collsim.output.files import replace_with  # noqa: E402
from collsim.units import format_size  # noqa: E402

# Okabe & Ito's palette, darkest first so that the first series print well in grey.
COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#000000", "#E69F00", "#56B4E9",
          "#999933")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")
HATCHES = ("", "///", "...", "xxx", "\\\\\\", "ooo", "---", "+++")
CLOSED_FORM = {"linestyle": (0, (3, 2.5)), "linewidth": 1.0}

RC = {
    "font.size": 9,
    "axes.titlesize": 9.5,
    "axes.labelsize": 9,
    "legend.fontsize": 8.5,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "axes.grid": True,
    "grid.color": "#d9d9d9",
    "grid.linewidth": 0.6,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "lines.linewidth": 1.5,
    "lines.markersize": 4.5,
    "svg.fonttype": "none",
    "svg.hashsalt": "collsim",
    "figure.dpi": 100,
    "savefig.dpi": 150,
}


def styled() -> Any:
    """The context every figure is drawn in: ``with styled(): ...``."""
    return plt.rc_context(RC)


def darker(color: str, amount: float = 0.45) -> str:
    """``color`` mixed with black: the closed form of a series, visible on top of its line."""
    red, green, blue = (int(color[i:i + 2], 16) for i in (1, 3, 5))
    return "#" + "".join(f"{int(c * (1 - amount)):02x}" for c in (red, green, blue))


def series_style(index: int, variant: int | None = None) -> dict[str, Any]:
    """Colour and marker of a series: by ``index`` alone, or colour by ``index`` and marker by
    ``variant`` when series differ in two ways (algorithm and oversubscription, say)."""
    marker = MARKERS[(index if variant is None else variant) % len(MARKERS)]
    return {"color": COLORS[index % len(COLORS)], "marker": marker, "linestyle": "-"}


def new_figure(panels: int, width: float = 4.3, height: float = 3.1, share: bool = True
               ) -> tuple[Figure, list[Axes], int]:
    """A figure with ``panels`` axes on a grid of up to three columns, and its column count.
    Shared axes keep panels comparable; only the outer ones carry tick labels."""
    columns = 1 if panels == 1 else (2 if panels in (2, 4) else 3)
    rows = math.ceil(panels / columns)
    figure, grid = plt.subplots(rows, columns, figsize=(width * columns, height * rows + 0.7),
                                squeeze=False, layout="constrained", sharex=share, sharey=share)
    axes = list(grid.flat)
    for extra in axes[panels:]:
        extra.set_visible(False)
    return figure, axes[:panels], columns


def label_axes(axes: Sequence[Axes], columns: int, xlabel: str, ylabel: str) -> None:
    """Axis labels on the outer panels only: y on the first column, x under the lowest panel
    of each column (which is not always on the last row)."""
    for index, ax in enumerate(axes):
        if index % columns == 0:
            ax.set_ylabel(ylabel)
        if index + columns >= len(axes):
            ax.set_xlabel(xlabel)
            ax.xaxis.set_tick_params(labelbottom=True)


def power_of_two_ticks(low: float, high: float, most: int = 9) -> list[float]:
    """Ticks at powers of two between ``low`` and ``high``, every 1, 2, 5 or 10 doublings, so
    that 1K, 1M and 1G are among them whenever the range reaches them."""
    first = math.floor(math.log2(max(low, 1)))
    last = math.ceil(math.log2(max(high, 1)))
    for step in (1, 2, 5, 10, 20):
        ticks = [2.0**e for e in range(first, last + 1) if e % step == 0]
        if len(ticks) <= most:
            break
    return ticks or [2.0**first]  # ticks past the data's ends show if the view reaches them


SIZE_LABEL = "message size (bytes)"
RANKS_LABEL = "ranks (GPUs)"


def size_axis(ax: Axes, values: Sequence[float], axis: str = "x") -> None:
    """A log axis of message sizes with ticks such as 1K, 32K, 1M."""
    target = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log", base=2)
    target.set_major_locator(FixedLocator(power_of_two_ticks(min(values), max(values))))
    target.set_major_formatter(FuncFormatter(lambda v, _: format_size(v, iec=True)))
    target.set_minor_locator(NullLocator())


DECADES_FOR_LOG = 2  # values spanning more than 100x get a log axis


def spans_decades(values: Sequence[float]) -> bool:
    """Whether the positive values span more than ``DECADES_FOR_LOG`` decades."""
    positive = [v for v in values if v > 0 and math.isfinite(v)]
    return bool(positive) and max(positive) / min(positive) > 10**DECADES_FOR_LOG


def plain_number(value: float) -> str:
    """A tick value without an exponent: 0.00001, 0.5, 1000."""
    return f"{value:.10f}".rstrip("0").rstrip(".")


def bandwidth_axis(ax: Axes, values: Sequence[float]) -> None:
    """A y axis of bandwidths: logarithmic when the positive values span more than
    ``DECADES_FOR_LOG`` decades (a linear one would flatten the small ones to zero), else
    linear from zero, so that heights compare."""
    if spans_decades(values):
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(base=10))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: plain_number(v)))
        ax.yaxis.set_minor_locator(LogLocator(base=10, subs=(2.0, 5.0)))
        ax.yaxis.set_minor_formatter(NullFormatter())
    else:
        ax.set_ylim(bottom=0)


def ranks_axis(ax: Axes, values: Sequence[int]) -> None:
    """A log-2 axis of rank counts, labelled with the counts swept (or powers of two)."""
    ax.set_xscale("log", base=2)
    distinct = sorted(set(values))
    ticks = distinct if len(distinct) <= 10 else power_of_two_ticks(min(values), max(values))
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_locator(NullLocator())


def time_axis(ax: Axes) -> None:
    """A log axis of seconds with ticks such as 10 µs, 1 ms."""
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(EngFormatter(unit="s", places=0, sep="\u2009"))
    # Unlabelled minor ticks at 2x and 5x only: each tick costs layout time.
    ax.yaxis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))
    ax.yaxis.set_minor_formatter(NullFormatter())


def ratio_axis(ax: Axes, low: float, high: float) -> None:
    """Speedups: a log axis when they span more than 4x, ticks written as 0.5×, 1×, 2×."""
    if high / max(low, 1e-300) > 4:
        ax.set_yscale("log", base=2)
        ax.yaxis.set_major_locator(FixedLocator(power_of_two_ticks_ratio(low, high)))
        ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: ratio_text(v)))
    ax.axhline(1.0, color="#555555", linewidth=0.9, linestyle=(0, (1, 2)))


def ratio_text(value: float) -> str:
    """4×, 1×, 1/4×: fractions below one read better than 0.015625."""
    if 0 < value < 1 and abs(1 / value - round(1 / value)) < 1e-9:
        return f"1/{round(1 / value)}×"
    return f"{value:.3g}×"


def title(figure: Figure, *lines: str) -> None:
    """The figure's title, each line wrapped to the figure's width."""
    width = max(30, int(figure.get_figwidth() * 13))
    figure.suptitle("\n".join(textwrap.fill(line, width) for line in lines if line),
                    fontsize=10)


def power_of_two_ticks_ratio(low: float, high: float, most: int = 9) -> list[float]:
    """Powers of two (including fractions) covering a range of ratios."""
    first, last = math.floor(math.log2(low)), math.ceil(math.log2(high))
    step = max(1, math.ceil((last - first + 1) / most))
    return [2.0**e for e in range(first, last + 1) if e % step == 0]


def legend_below(figure: Figure, handles: list[Any], labels: list[str]) -> None:
    """One legend for every panel, under them, so it never hides data; as many columns as
    the figure's width holds at the longest label's length."""
    widest = max(map(len, labels), default=1)
    fits = int(figure.get_figwidth() / (0.45 + 0.075 * widest))
    figure.legend(handles, labels, loc="outside lower center",
                  ncols=max(1, min(len(labels), fits)), frameon=False)


def save(figure: Figure, out: Path, name: str, formats: Sequence[str]) -> list[Path]:
    """Write ``name.<format>`` for each format, each whole or not at all; no timestamps, so
    files are reproducible."""
    paths = []
    metadata = {"png": {"Software": None}, "svg": {"Date": None, "Creator": None},
                "pdf": {"CreationDate": None, "ModDate": None, "Producer": None,
                        "Creator": None}}
    for fmt in formats:
        path = Path(out) / f"{name}.{fmt}"
        replace_with(path, lambda temporary, fmt=fmt: figure.savefig(
            temporary, format=fmt, metadata=metadata.get(fmt)))
        paths.append(path)
        figure.set_layout_engine("none")  # laid out once; the other formats reuse it
    plt.close(figure)
    return paths
