"""Positions on a torus grid (``dims`` of one to three sizes): their coordinates, which
positions a torus link joins, how many links that makes, a walk that visits neighbours
only, and where to draw each position. Tori of GPUs and torus fabrics share these."""

from __future__ import annotations

import itertools
import math


def torus_coordinates(dims: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Coordinates of every position of a ``dims`` grid, index = row-major order."""
    return list(itertools.product(*(range(d) for d in dims)))


def torus_neighbours(dims: tuple[int, ...]) -> list[tuple[int, int]]:
    """Index pairs joined by a torus link (+1 along each dimension, wrapping; no duplicates)."""
    coords = torus_coordinates(dims)
    index = {c: i for i, c in enumerate(coords)}
    pairs = set()
    for c in coords:
        for axis, size in enumerate(dims):
            if size < 2:
                continue
            other = list(c)
            other[axis] = (c[axis] + 1) % size
            a, b = index[c], index[tuple(other)]
            pairs.add((min(a, b), max(a, b)))
    return sorted(pairs)


def torus_link_count(dims: tuple[int, ...]) -> int:
    """``len(torus_neighbours(dims))`` without building the grid: along an axis of size 3 or
    more every position has its own +1 link; of size 2 the +1 and the wrap are one link."""
    positions = math.prod(dims)
    return sum(positions if size > 2 else positions // 2 if size == 2 else 0 for size in dims)


def torus_position(coord: tuple[int, ...]) -> tuple[float, float]:
    """Where to draw a grid position: x = first axis, y = second (third offsets both)."""
    x = coord[0] if coord else 0
    y = coord[1] if len(coord) > 1 else 0
    z = coord[2] if len(coord) > 2 else 0
    return (x + 0.3 * z, y + 0.3 * z)


def gray_order(dims: tuple[int, ...]) -> list[int]:
    """Row-major indices of a ``dims`` grid in boustrophedon (reflected Gray) order: each
    step moves one position along one axis, so consecutive entries are torus neighbours."""
    if not dims:
        return [0]
    order: list[tuple[int, ...]] = [()]
    for size in dims:
        grown = []
        for i, prefix in enumerate(order):
            steps = range(size) if i % 2 == 0 else range(size - 1, -1, -1)
            grown.extend(prefix + (s,) for s in steps)
        order = grown
    index = {c: i for i, c in enumerate(torus_coordinates(dims))}
    return [index[c] for c in order]
