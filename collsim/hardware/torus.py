"""A TPU-style torus of GPUs: every GPU is a router with a link to each neighbour, wrapping
around in every dimension of ``dims``; routes are shortest paths with ECMP."""

from __future__ import annotations

import math
from collections.abc import Sequence

from collsim.hardware.graph import GraphTopology, LinkGraph
from collsim.hardware.grid import gray_order, torus_coordinates, torus_neighbours, torus_position


class TorusTopology(GraphTopology):
    """GPUs at the positions of a ``dims`` grid (row-major), one node; rings follow the grid."""

    def __init__(self, name: str, dims: tuple[int, ...], latency: float, bandwidth: float,
                 reduce_bandwidth: float = math.inf, source: str = "") -> None:
        g = LinkGraph()
        gpus = [g.vertex(f"gpu{i}", "gpu", transit=True, layer=1, pos=torus_position(c))
                for i, c in enumerate(torus_coordinates(dims))]
        for a, b in torus_neighbours(dims):
            g.connect(gpus[a], gpus[b], latency, bandwidth, "torus")
        super().__init__(name, "torus", g, gpus, reduce_bandwidth, source=source)
        self.dims = dims

    def ring_hint(self, gpus: Sequence[int]) -> list[int] | None:
        """All GPUs: the grid walked in Gray order, so every ring hop is one link (and the
        ring closes in one hop when the first dimension is even)."""
        if len(gpus) != self.gpus:
            return None
        return gray_order(self.dims)
