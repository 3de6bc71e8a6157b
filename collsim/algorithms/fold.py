"""MPICH's fold-in for rank counts that are not powers of two.

With ``p = 2^k + rem``, the first ``2·rem`` ranks pair up: each even rank hands its data to
the odd rank after it and sits out, so that ``2^k`` ranks run the power-of-two algorithm
under new numbers; the odd ranks hand the result back at the end.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Fold:
    """The fold-in of ``p`` ranks onto ``pof2`` (the largest power of two not above p)."""

    p: int
    pof2: int = field(init=False)
    rem: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "pof2", 1 << (self.p.bit_length() - 1))
        object.__setattr__(self, "rem", self.p - self.pof2)

    def newrank(self, rank: int) -> int | None:
        """The rank's number among the ``pof2`` that stay, or None if it sits out."""
        if rank < 2 * self.rem:
            return rank // 2 if rank % 2 else None
        return rank - self.rem

    def oldrank(self, newrank: int) -> int:
        """The rank that plays ``newrank``."""
        return 2 * newrank + 1 if newrank < self.rem else newrank + self.rem

    def first_block(self, newrank: int) -> int:
        """First of the consecutive blocks (one per original rank) that ``newrank`` stands for:
        two blocks for a folded pair, one otherwise (``first_block(pof2) == p``)."""
        return newrank + min(newrank, self.rem)
