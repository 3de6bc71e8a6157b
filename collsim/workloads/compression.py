"""Gradient compression as bytes on the wire and the compute it costs.

- ``topk``: each rank keeps ``ceil(fraction * n)`` of its ``n`` gradient values and sends
  each with its index (``index_bytes``). Sparse vectors with different supports cannot be
  summed inside a ring, so ranks exchange them with an **allgather** and sum locally.
- ``sign`` (1-bit): one bit per value plus one scale (in the ``scale`` format) per ``block``
  values; exchanged by **allgather** as well (signSGD's majority vote needs every sign).
- ``lowrank`` (PowerSGD, ATOMO): a weight matrix m x n is sent as its rank-``r`` factors,
  ``r(m + n)`` values instead of ``mn``; sums of factors with a shared basis are exact, so the
  factors are **allreduced**. PowerSGD's two allreduces (P then Q) are one call of the same
  bytes here. Shapes are the layer's weight matrices (``shapes``); with tensor parallelism a
  GPU holds ``m x ceil(n / tensor)`` of each; values the matrices do not cover (biases,
  norms) are sent uncompressed. Without ``shapes`` a GPU's share of a layer is taken to be
  one square matrix of side ``ceil(sqrt(share))``. A bucket that holds part of a layer
  carries that part's share of the layer's factors, rounded up to a whole value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from collsim.workloads.formats import Format, ceil_div, isqrt_ceil, parse_format
from collsim.workloads.quantities import FREE, Cost

KINDS = ("none", "topk", "sign", "lowrank")


@dataclass(frozen=True)
class Compression:
    """How gradient buckets are encoded for the data-parallel exchange."""

    kind: str = "none"
    fraction: Fraction = Fraction(1)
    index_bytes: int = 4
    block: int = 1
    scale: Format = parse_format("fp32")
    rank: int = 1
    shapes: tuple[tuple[int, int], ...] = ()
    encode: Cost = FREE
    decode: Cost = FREE

    @property
    def collective(self) -> str:
        """The collective a bucket is exchanged with."""
        return "allgather" if self.kind in ("topk", "sign") else "allreduce"

    def engine_dtype(self, value: Format) -> str:
        """The dtype the exchange is simulated in: the values' own, or bytes."""
        return "uint8" if self.kind in ("topk", "sign") else value.engine_dtype

    def layer_values(self, share: int, tensor: int) -> int:
        """Values one GPU sends for its ``share`` of a layer's gradient (low-rank only
        differs from ``share``)."""
        if self.kind != "lowrank":
            return share
        if not self.shapes:
            return 2 * self.rank * isqrt_ceil(share)
        covered = sum(m * ceil_div(n, tensor) for m, n in self.shapes)
        factors = sum(self.rank * (m + ceil_div(n, tensor)) for m, n in self.shapes)
        return factors + max(0, share - covered)

    def contribution(self, pieces: Sequence[tuple[int, int]], value: Format,
                     tensor: int) -> int:
        """Bytes one rank contributes for a bucket made of ``pieces``, each (values of the
        bucket from one layer, that layer's share on this GPU)."""
        n = sum(part for part, _ in pieces)
        if self.kind == "none":
            return value.nbytes(n)
        if self.kind == "topk":
            kept = ceil_div(self.fraction.numerator * n, self.fraction.denominator)
            return value.nbytes(kept) + kept * self.index_bytes
        if self.kind == "sign":
            return ceil_div(n, 8) + self.scale.nbytes(ceil_div(n, self.block))
        values = sum(ceil_div(self.layer_values(share, tensor) * part, share)
                     for part, share in pieces)
        return value.nbytes(values)

    def call_size(self, contribution: int, group: int) -> int:
        """The collective's size (nccl-tests' convention) for a rank's ``contribution``:
        the gathered buffer for an allgather, the buffer itself for an allreduce."""
        return contribution * group if self.collective == "allgather" else contribution


NONE = Compression()
