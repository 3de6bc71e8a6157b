"""The link report as a figure: per group of link kind, the hottest directed links' average
and peak utilisation, so an oversubscribed spine stands out."""

from __future__ import annotations

from pathlib import Path

from collsim.output.files import replace_with
from collsim.output.linkload import LinkLoad, group_of


def link_figure(loads: list[LinkLoad], span_s: float, path: str | Path, title: str = "",
                top: int = 8) -> None:
    """Bars of average (solid) and peak (outline) utilisation of the ``top`` busiest links
    of each group, groups side by side."""
    import matplotlib  # only when a figure is drawn
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after the backend is chosen

    groups: dict[str, list[LinkLoad]] = {}
    for load in loads:
        groups.setdefault(group_of(load.link), []).append(load)
    labels, average, peak, colours = [], [], [], []
    palette = {"NVLink": "#2e7d32", "PCIe": "#1565c0", "NIC": "#c62828",
               "leaf-spine": "#212121"}
    for name in sorted(groups):
        hottest = sorted(groups[name], key=lambda x: (-x.busy_s, -x.bytes, x.index))[:top]
        for load in hottest:
            labels.append(f"{name}: {load.link.name}")
            average.append(100 * load.average_utilisation(span_s))
            peak.append(100 * load.peak_utilisation)
            colours.append(palette.get(name, "#757575"))
    figure, axes = plt.subplots(figsize=(8, 0.28 * len(labels) + 1.4), layout="constrained")
    rows = range(len(labels))
    axes.barh(rows, peak, color="none", edgecolor=colours, label="peak")
    axes.barh(rows, average, color=colours, label="average over the run")
    axes.set_yticks(list(rows), labels, fontsize=7)
    axes.invert_yaxis()
    axes.set_xlabel("utilisation (%)")
    axes.set_xlim(0, 105)
    axes.set_title(title or "busiest directed links per kind", fontsize=9)
    figure.legend(*axes.get_legend_handles_labels(), fontsize=7, ncols=2, frameon=False,
                  loc="outside lower center")   # under the bars, never over them
    replace_with(path, lambda temporary: figure.savefig(temporary, dpi=110,
                                                      format=Path(path).suffix[1:] or None))
    plt.close(figure)
