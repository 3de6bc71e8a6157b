"""Crossover sizes found in simulation: where two algorithms' simulated times cross, bracketed
on a doubling grid of sizes and then narrowed by bisection (geometric, on whole elements)
until the bracket is within a relative tolerance."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from collsim.algorithms.registry import get_algorithm
from collsim.hardware.topology import Topology
from collsim.params import itemsize as element_size
from collsim.simulate import check_params, simulate


@dataclass(frozen=True)
class Crossing:
    """Below ``low`` bytes ``below`` is faster; from ``high`` bytes on, ``above`` is."""

    ranks: int
    low: int
    high: int
    below: str
    above: str
    time_s: float  # the faster algorithm's time at ``high``

    @property
    def size(self) -> int:
        """The crossover size: the first size (within tolerance) where ``above`` wins."""
        return self.high


@dataclass(frozen=True)
class Search:
    """The outcome for one rank count: its crossings, and who wins at the ends of the range."""

    ranks: int
    crossings: tuple[Crossing, ...]
    first: str
    last: str
    simulations: int


class Timer:
    """Simulated times of the two algorithms at any size, each point simulated once."""

    def __init__(self, topology: Topology, collective: str, algorithms: tuple[str, str],
                 ranks: int, params: dict[str, Any]) -> None:
        self.topology, self.collective, self.algorithms = topology, collective, algorithms
        self.ranks, self.params = ranks, params
        self.cache: dict[tuple[str, int], float] = {}

    def time(self, algorithm: str, size: int) -> float:
        key = (algorithm, size)
        if key not in self.cache:
            self.cache[key] = simulate(self.topology, self.collective, algorithm, self.ranks,
                                       size, self.params or None).time_s
        return self.cache[key]

    def winner(self, size: int) -> str:
        """The faster algorithm at ``size``; a tie goes to the first."""
        a, b = self.algorithms
        return a if self.time(a, size) <= self.time(b, size) else b


def itemsize(collective: str, algorithms: tuple[str, str], ranks: int,
             params: dict[str, Any]) -> int:
    """Bytes per element: sizes must be whole elements (the parameters are checked here)."""
    for name in algorithms:
        checked = check_params(get_algorithm(collective, name), ranks, dict(params))
    return element_size(checked)


def search(topology: Topology, collective: str, algorithms: tuple[str, str], ranks: int,
           low: int, high: int, params: dict[str, Any] | None = None,
           tolerance: float = 0.01, on_step: Callable[[], None] | None = None) -> Search:
    """Every crossover of the two algorithms between ``low`` and ``high`` bytes."""
    params = dict(params or {})
    for name in algorithms:
        get_algorithm(collective, name).check_ranks(ranks)
    unit = itemsize(collective, algorithms, ranks, params)
    timer = Timer(topology, collective, algorithms, ranks, params)
    first, last = max(1, math.ceil(low / unit)), max(1, high // unit)
    grid = [first]
    while grid[-1] * 2 < last:
        grid.append(grid[-1] * 2)
    if last > first:
        grid.append(last)
    winners = [timer.winner(n * unit) for n in grid]
    crossings = []
    for i in range(1, len(grid)):
        if winners[i] != winners[i - 1]:
            crossings.append(_narrow(timer, grid[i - 1], grid[i], unit, tolerance))
            if on_step:
                on_step()
    return Search(ranks, tuple(crossings), winners[0], winners[-1], len(timer.cache))


def _narrow(timer: Timer, low: int, high: int, unit: int, tolerance: float) -> Crossing:
    """Bisect the bracket [low, high] elements, whose ends have different winners."""
    low_winner = timer.winner(low * unit)
    while high - low > 1 and high > low * (1 + tolerance):
        middle = min(max(round(math.sqrt(low * high)), low + 1), high - 1)
        if timer.winner(middle * unit) == low_winner:
            low = middle
        else:
            high = middle
    above = timer.winner(high * unit)
    return Crossing(timer.ranks, low * unit, high * unit, low_winner, above,
                    timer.time(above, high * unit))
