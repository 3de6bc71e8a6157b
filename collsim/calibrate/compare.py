"""A measured nccl-tests run beside the simulation of the same calls on a topology: per size,
measured and simulated time and busbw, the relative error of busbw, and what ``auto`` picked;
a summary (median and 90th percentile of |error|); a figure of busbw against size."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from collsim.calibrate.cases import Case
from collsim.calibrate.predict import simulate_pick
from collsim.collectives import COLLECTIVES


@dataclass(frozen=True)
class Point:
    """One size of one run: measured and simulated, and what ran in the simulation."""

    run: str
    collective: str
    ranks: int
    size_bytes: int
    measured_time_s: float
    simulated_time_s: float
    measured_busbw_GBps: float
    simulated_busbw_GBps: float
    algorithm: str
    protocol: str
    channels: int | None

    @property
    def error(self) -> float:
        """simulated busbw / measured busbw - 1 (= measured time / simulated time - 1)."""
        return self.measured_time_s / self.simulated_time_s - 1


COLUMNS = ("run", "collective", "ranks", "size_bytes", "measured_time_s", "simulated_time_s",
           "measured_busbw_GBps", "simulated_busbw_GBps", "error", "algorithm", "protocol",
           "channels")


def compare_case(case: Case) -> list[Point]:
    """Every size of ``case`` simulated with its pick."""
    factor = COLLECTIVES[case.collective].busbw_factor(case.ranks)
    points = []
    for size, measured, pick in zip(case.sizes, case.measured, case.picks, strict=True):
        simulated = simulate_pick(case.topology, case.collective, size, case.gpus, pick)
        points.append(Point(case.label, case.collective, case.ranks, size, measured,
                            simulated.time_s, size / measured / 1e9 * factor,
                            simulated.busbw_GBps, pick.algorithm, pick.protocol, pick.channels))
    return points


def summary(points: Sequence[Point], min_size: int = 0) -> tuple[int, float, float]:
    """(points, median |error|, 90th percentile |error|) over sizes of ``min_size`` or more."""
    errors = np.abs([p.error for p in points if p.size_bytes >= min_size])
    if not len(errors):
        return 0, float("nan"), float("nan")
    return len(errors), float(np.median(errors)), float(np.percentile(errors, 90))


def plot(points: Sequence[Point], out: Path, title: str) -> None:
    """Measured (markers) and simulated (lines) busbw against size, one colour per run; a log
    busbw axis when the sizes run from latency-bound to bandwidth-bound."""
    # matplotlib only when a figure is drawn
    import matplotlib.pyplot as plt

    from collsim.output.style import (
        bandwidth_axis,
        legend_below,
        save,
        series_style,
        size_axis,
        styled,
    )

    with styled():
        figure, ax = plt.subplots(figsize=(6.4, 4.2), layout="constrained")
        runs = list(dict.fromkeys(p.run for p in points))
        for index, run in enumerate(runs):
            mine = [p for p in points if p.run == run]
            style = series_style(index)
            sizes = [p.size_bytes for p in mine]
            label = f"{Path(run).name} ({mine[0].collective}, {mine[0].ranks} GPUs)"
            ax.plot(sizes, [p.measured_busbw_GBps for p in mine], linestyle="none",
                    marker=style["marker"], color=style["color"], label=f"measured {label}")
            ax.plot(sizes, [p.simulated_busbw_GBps for p in mine], linestyle="-",
                    color=style["color"], label=f"simulated {label}")
        size_axis(ax, [p.size_bytes for p in points])
        bandwidth_axis(ax, [v for p in points
                            for v in (p.measured_busbw_GBps, p.simulated_busbw_GBps)])
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("bus bandwidth (GB/s)")
        ax.set_title(title, fontsize=9)
        legend_below(figure, *ax.get_legend_handles_labels())   # never over the points
        save(figure, out.parent, out.stem, [out.suffix.lstrip(".") or "png"])
