"""The ``choice_map`` figure: which (algorithm, protocol) ``auto`` (NCCL's choice) runs at each
message size and rank count, one cell per point of the table's ``auto`` rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from collsim.output.kinds import draws
from collsim.output.layout import Row, distinct
from collsim.output.style import (
    COLORS,
    HATCHES,
    SIZE_LABEL,
    label_axes,
    legend_below,
    new_figure,
    size_axis,
)


@draws("choice_map")
def choice_map(rows: Sequence[Row], spec: dict[str, Any], palette: dict[Any, int]) -> Figure:
    """Size x (topology, ranks), each cell coloured by the ``selected`` algorithm and hatched
    by the protocol of the rows of algorithm ``spec["algorithm"]`` (``auto`` by default); one
    panel per collective."""
    from collsim.output.figures import Skip, _cell_edges  # figures imports this module

    selector = spec.get("algorithm", "auto")
    rows = [r for r in rows if r.get("algorithm") == selector and r.get("selected")]
    if not rows:
        raise Skip(f"the table has no rows of algorithm {selector!r} with a selected column")
    choices = sorted(dict.fromkeys(_choice(r) for r in rows),
                     key=lambda c: (_algorithm_order(c, rows, palette), c))
    style = _styles(rows, palette)
    collectives = distinct(rows, "collective")
    figure, axes, columns = new_figure(len(collectives), width=6.0,
                                       height=max(2.6, 0.32 * _levels(rows) + 1.2), share=False)
    several = len(distinct(rows, "topology")) > 1
    for ax, collective in zip(axes, collectives, strict=True):
        chosen = [r for r in rows if r["collective"] == collective]
        sizes = distinct(chosen, "size_bytes")
        levels = list(dict.fromkeys((r["topology"], r["ranks"]) for r in sorted(
            chosen, key=lambda r: (r["ranks"], str(r["topology"])))))
        edges = _cell_edges([max(s, 0.5) for s in sizes])
        for r in chosen:
            i, level = sizes.index(r["size_bytes"]), levels.index((r["topology"], r["ranks"]))
            color, hatch = style[_choice(r)]
            ax.add_patch(Rectangle((edges[i], level - 0.5), edges[i + 1] - edges[i], 1,
                                   facecolor=color, hatch=hatch, edgecolor="black",
                                   alpha=0.85, linewidth=0.0))
        ax.set_xlim(edges[0], edges[-1])
        ax.set_ylim(-0.5, len(levels) - 0.5)
        size_axis(ax, [s for s in sizes if s > 0] or [1])
        ax.set_yticks(range(len(levels)), [f"{ranks} · {topology}" if several else str(ranks)
                                           for topology, ranks in levels])
        ax.set_title(str(collective))
        ax.grid(False)
    label_axes(axes, columns, SIZE_LABEL, "ranks")
    handles = [Patch(facecolor=style[c][0], edgecolor="black", hatch=style[c][1], alpha=0.85,
                     linewidth=0.5) for c in choices]
    legend_below(figure, handles, choices)
    figure.suptitle(f"What {selector} runs: algorithm (colour) and protocol (hatching) by ranks "
                    "and message size")
    return figure


def _styles(rows: Sequence[Row], palette: dict[Any, int]) -> dict[str, tuple[str, str]]:
    """Colour by algorithm, the colour of its line in the table's other figures (a spare one
    when it has none), and hatching by protocol, so a choice reads the same in both."""
    algorithms = distinct(rows, "selected")
    spare = len(palette)
    colors = {}
    for name in algorithms:
        if name in palette:
            colors[name] = COLORS[palette[name] % len(COLORS)]
        else:
            colors[name] = COLORS[spare % len(COLORS)]
            spare += 1
    protocols = [p for p in PROTOCOL_HATCHES if p in distinct(rows, "protocol")]
    protocols += [p for p in distinct(rows, "protocol") if p not in protocols]
    hatches = {p: (PROTOCOL_HATCHES.get(p) or HATCHES[i % len(HATCHES)])
               for i, p in enumerate(protocols)}
    return {_choice(r): (colors[r["selected"]], hatches[r.get("protocol")]) for r in rows}


PROTOCOL_HATCHES = {"Simple": "", "LL128": "///", "LL": "..."}


def _algorithm_order(choice: str, rows: Sequence[Row], palette: dict[Any, int]) -> int:
    name = choice.split(" ")[0]
    return palette.get(name, len(palette) + distinct(rows, "selected").index(name))


def _choice(row: Row) -> str:
    protocol = row.get("protocol")
    return f"{row['selected']} {protocol}" if protocol else str(row["selected"])


def _levels(rows: Sequence[Row]) -> int:
    return len({(r["topology"], r["ranks"]) for r in rows})
