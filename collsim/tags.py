"""Message tags for algorithms built of phases: every phase gets its own tag space, so no
phase can ever match another phase's messages.

A tag space is an arithmetic progression of tags: its i-th tag (i = 0, 1, 2, ...) is
``tags[i] = first + i·stride``. Phase k of a space (0 <= k < PHASES) keeps the tags whose
index is k modulo PHASES, so the phases of one space share no tag, and neither do the
phases of phases, to any depth. A program that is not built of phases uses :data:`TAGS`,
whose i-th tag is i; a step function that can serve as a phase takes a ``tags`` argument
and numbers its messages ``tags[0], tags[1], ...`` (or walks ``tags.range(count)``)::

    def ring_allreduce(rank, job):
        yield from ring_reducescatter_steps(rank, job, TAGS.phase(0))
        yield from ring_allgather_steps(rank, job, TAGS.phase(1))
"""

from __future__ import annotations

from dataclasses import dataclass

PHASES = 16  # phases one tag space can be cut into


@dataclass(frozen=True, slots=True)
class Tags:
    """The tag space ``first, first + stride, first + 2·stride, ...``."""

    first: int = 0
    stride: int = 1

    def __getitem__(self, index: int) -> int:
        """The ``index``-th tag of this space (``index`` >= 0)."""
        if index < 0:
            raise IndexError(f"tag index {index} is negative")
        return self.first + self.stride * index

    def range(self, count: int) -> range:
        """The first ``count`` tags of the space, in order."""
        return range(self.first, self.first + self.stride * count, self.stride)

    def phase(self, k: int) -> Tags:
        """The tag space of phase ``k`` of this one, disjoint from every other phase's."""
        if not 0 <= k < PHASES:
            raise ValueError(f"phase {k} is not one of 0..{PHASES - 1}")
        return self.part(k, PHASES)

    def part(self, k: int, parts: int) -> Tags:
        """The tag space of part ``k`` of ``parts`` side-by-side sub-programs (NCCL channels,
        any number of them): disjoint from the other parts, and :meth:`phase` is
        ``part(k, PHASES)``, so phases and parts nest at any depth."""
        if not 0 <= k < parts:
            raise ValueError(f"part {k} is not one of 0..{parts - 1}")
        return Tags(self.first + self.stride * k, self.stride * parts)

    def phases(self, count: int) -> tuple[Tags, ...]:
        """The spaces of phases 0 .. ``count``-1."""
        return tuple(self.phase(k) for k in range(count))


TAGS = Tags()  # the whole tag space: the i-th tag is i
