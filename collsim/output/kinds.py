"""The figures collsim draws, by name, and the defaults: one table that the scenario schema,
the scenario loader, ``collsim plot`` and the drawing code (``output/figures.py``) import.
It needs no matplotlib, so checking a scenario never loads it."""

from __future__ import annotations

# Each kind is drawn by the function of the same name in collsim/output/figures.py (which
# imports choice_map from collsim/output/choice_map.py).
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
