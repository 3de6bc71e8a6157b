"""The README's fidelity figure, plots/fidelity/busbw.png, drawn from plots/fidelity/rows.csv
(which benchmarks/fidelity.py writes, and then calls this): measured and simulated busbw
against size for six runs, chosen by a rule the figure states: of the runs with at least
MIN_SIZES sizes and a leave-one-out fit, six evenly spaced from the preset's smallest median
|busbw error| to its largest, so the figure shows the range and not the best cases.

    python benchmarks/fidelity_figure.py [--rows plots/fidelity/rows.csv] [--out plots/fidelity]
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "plots" / "fidelity"
PANELS, MIN_SIZES = 6, 8
SERIES = (("measured_busbw", "measured (nccl-tests)", {"color": "black", "marker": "o",
                                                         "linestyle": "none", "ms": 3.5}),
          ("auto_busbw", "preset as shipped, NCCL's pick (auto)", {"linestyle": "-"}),
          ("calibrated_busbw", "calibrated, leave-one-out: fitted on the run's other sizes",
           {"linestyle": "--"}),
          ("nccl_model_busbw", "NCCL's own cost model of its pick", {"linestyle": ":"}))
NUMBERS = ("ranks", "size_bytes", *(column for column, _, _ in SERIES))


def read_rows(path: Path) -> list[dict]:
    """rows.csv's rows, numbers as numbers and empty cells as None."""
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        for column in NUMBERS:
            text = row[column]
            row[column] = None if text == "" else (int(text) if column in ("ranks", "size_bytes")
                                                   else float(text))
    return rows


def median_error(rows: list[dict], column: str) -> float | None:
    errors = [abs(r[column] / r["measured_busbw"] - 1) for r in rows if r[column] is not None]
    return statistics.median(errors) if errors else None


def chosen_runs(rows: list[dict]) -> tuple[list[str], int]:
    """The runs drawn, from the preset's best to its worst, and how many were eligible."""
    from collsim.output.layout import spread

    runs: dict[str, list[dict]] = {}
    for row in rows:
        runs.setdefault(row["run_id"], []).append(row)
    eligible = [run for run, mine in runs.items() if len(mine) >= MIN_SIZES
                and sum(r["calibrated_busbw"] is not None for r in mine) >= MIN_SIZES]
    eligible.sort(key=lambda run: (median_error(runs[run], "auto_busbw"), run))
    return spread(eligible, PANELS), len(eligible)


def draw(rows: list[dict], out: Path = OUT) -> Path | None:
    """Write ``out``/busbw.png; the path, or None when no run qualifies."""
    from collsim.output.style import save, styled

    with styled():
        drawn = figure(rows)
        if drawn is None:
            return None
        (path,) = save(drawn, out, "busbw", ["png"])
    return path


def figure(rows: list[dict]):  # noqa: ANN201 (matplotlib is imported only to draw)
    """The figure of :func:`chosen_runs`, or None when no run qualifies."""
    import matplotlib.pyplot as plt

    from collsim.output.style import (
        SIZE_LABEL,
        bandwidth_axis,
        label_axes,
        legend_below,
        size_axis,
        title,
    )

    runs, eligible = chosen_runs(rows)
    if not runs:
        return None
    columns = 3
    fig, grid = plt.subplots((len(runs) + columns - 1) // columns, columns,
                             figsize=(4.3 * columns, 3.3 * len(runs) / columns + 1.3),
                             squeeze=False, layout="constrained")
    axes = list(grid.flat)
    handles = []
    for ax, run in zip(axes, runs, strict=False):
        mine = sorted((r for r in rows if r["run_id"] == run), key=lambda r: r["size_bytes"])
        values = []
        for column, label, style in SERIES:
            points = [(r["size_bytes"], r[column]) for r in mine if r[column] is not None]
            if points:
                values += [v for _, v in points]
                (line,) = ax.plot(*zip(*points, strict=True), label=label, **style)
                if len(handles) < len(SERIES) and label not in [h.get_label()
                                                                for h in handles]:
                    handles.append(line)
        size_axis(ax, [r["size_bytes"] for r in mine])
        bandwidth_axis(ax, values)
        first = mine[0]
        auto, calibrated = (median_error(mine, c) for c in ("auto_busbw", "calibrated_busbw"))
        ax.set_title(f"{run}: {first['collective']}\n{first['machine']}, "
                     f"{first['ranks']} GPUs; median |error| preset {100 * auto:.0f}%, "
                     f"calibrated {100 * calibrated:.0f}%", fontsize=8)
    for ax in axes[len(runs):]:
        ax.set_visible(False)
    label_axes(axes[:len(runs)], columns, SIZE_LABEL, "busbw (GB/s)")
    for ax in axes[:len(runs)]:   # each panel its own sizes: every one labels its axis
        ax.set_xlabel(SIZE_LABEL)
    handles.sort(key=lambda h: [label for _, label, _ in SERIES].index(h.get_label()))
    legend_below(fig, handles, [h.get_label() for h in handles])
    title(fig, "nccl-tests busbw, measured and simulated (sizes of 1 MiB and more)",
          f"{len(runs)} of the {eligible} runs with {MIN_SIZES}+ sizes and a leave-one-out "
          "fit, evenly spaced from the preset's smallest median |error| (top left) to its "
          "largest (bottom right)")
    return fig


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=Path, default=OUT / "rows.csv")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    path = draw(read_rows(args.rows), args.out)
    print(path or "no run has enough sizes to draw")
    return 0


if __name__ == "__main__":
    sys.exit(main())
