"""The figures collsim draws, by name, and the defaults: one table that the scenario schema,
the scenario loader, ``collsim plot`` and the drawing code (``output/figures.py``) import.
It needs no matplotlib, so checking a scenario never loads it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

# Each kind is drawn by the function registered for it with @draws (in
# collsim/output/figures.py and collsim/output/choice_map.py).
FIGURE_KINDS: dict[str, str] = {
    "time_vs_size": "completion time against message size, log-log, closed form dashed",
    "busbw_vs_size": "bus bandwidth (nccl-tests' definition) against message size, log where "
                     "it spans decades, auto's pick as a band in the picked algorithm's colour",
    "crossover_map": "ranks x size, shaded and hatched by the fastest algorithm between the "
                     "interpolated crossover sizes, which are marked",
    "time_vs_ranks": "completion time against ranks at a few sizes (scaling)",
    "speedup": "time of a baseline algorithm divided by each other algorithm's time",
    "choice_map": "ranks x size, each cell coloured by the algorithm and hatched by the "
                  "protocol auto (NCCL's choice) runs there",
}
# What a scenario without a figures: key, and a table without a run.json, get first.
DEFAULT_FIGURES = ("time_vs_size", "busbw_vs_size")

FIGURE_FORMATS = ("png", "svg", "pdf")
DEFAULT_FORMATS = ("png", "svg")

Drawer = TypeVar("Drawer", bound=Callable[..., Any])
# The figure registry: kind -> the function that draws it, (rows, spec, palette) -> Figure.
# Filled as collsim.output.figures is imported (matplotlib's side; this module needs none).
DRAWERS: dict[str, Callable[..., Any]] = {}


def draws(kind: str) -> Callable[[Drawer], Drawer]:
    """Decorator: register the function it decorates as the one that draws ``kind``."""
    if kind not in FIGURE_KINDS:
        raise ValueError(f"unknown figure kind {kind!r}; add it to FIGURE_KINDS")

    def register(function: Drawer) -> Drawer:
        if kind in DRAWERS:
            raise ValueError(f"figure kind {kind!r} registered twice")
        DRAWERS[kind] = function
        return function

    return register
