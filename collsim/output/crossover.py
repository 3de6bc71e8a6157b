"""Crossovers read off a results table: which algorithm is fastest at each size, and where
the fastest changes, interpolated on the log-log curves between the two sizes around it; and
the stretches of sizes between them, which a crossover map shades, so that its shading and
its marks come from the same numbers. (``collsim crossover`` finds crossovers exactly by
bisection in simulation instead.)"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Crossover:
    """Below ``size`` bytes ``before`` is fastest, above it ``after``."""

    size: float
    before: str
    after: str


def fastest(times: Mapping[str, float]) -> str:
    """The algorithm with the least time; ties go to the first listed (stable)."""
    return min(times, key=lambda name: times[name])


def crossovers(sizes: Sequence[int], times: Mapping[str, Sequence[float]]) -> list[Crossover]:
    """Where the fastest algorithm changes along ``sizes`` (ascending); ``times[name][i]`` is
    the time of ``name`` at ``sizes[i]``. Each change is placed where the two algorithms'
    log-times meet on the straight line between the neighbouring sizes."""
    out: list[Crossover] = []
    winners = [fastest({n: t[i] for n, t in times.items()}) for i in range(len(sizes))]
    for i in range(1, len(sizes)):
        before, after = winners[i - 1], winners[i]
        if before == after:
            continue
        known = [times[before][i - 1], times[after][i - 1], times[before][i], times[after][i]]
        if sizes[i - 1] <= 0 or min(known) <= 0:
            out.append(Crossover((sizes[i - 1] + sizes[i]) / 2, before, after))
            continue
        gap_low = math.log(known[0] / known[1])
        gap_high = math.log(known[2] / known[3])
        low, high = math.log2(sizes[i - 1]), math.log2(sizes[i])
        weight = gap_low / (gap_low - gap_high) if gap_low != gap_high else 0.5
        weight = min(max(weight, 0.0), 1.0)
        out.append(Crossover(2 ** (low + weight * (high - low)), before, after))
    return out


@dataclass(frozen=True)
class Stretch:
    """``winner`` is fastest from ``low`` to ``high`` bytes; ``None`` is the sweep's end."""

    low: float | None
    high: float | None
    winner: str


def stretches(sizes: Sequence[int], times: Mapping[str, Sequence[float]]) -> list[Stretch]:
    """The sizes cut at each of :func:`crossovers`, each piece with its fastest algorithm."""
    if not sizes:
        return []
    marks = crossovers(sizes, times)
    bounds: list[float | None] = [None, *(c.size for c in marks), None]
    names = [fastest({n: t[0] for n, t in times.items()}), *(c.after for c in marks)]
    return [Stretch(bounds[i], bounds[i + 1], name) for i, name in enumerate(names)]
