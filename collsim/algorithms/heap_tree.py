"""The binary tree the pipelined tree algorithms use: node v has children 2v+1 and 2v+2.

Nodes are positions (0 is the root), mapped to ranks by the caller. Every level but the
last is full, so the depth is ⌊log2 p⌋, the internal nodes are 0 .. ⌈(p-1)/2⌉-1, and the
mirrored numbering p-1-v makes a second tree whose internal nodes are leaves of the first.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HeapTree:
    """A complete binary tree of ``p`` nodes in heap order."""

    p: int

    @property
    def depth_of_tree(self) -> int:
        """Depth of the deepest node, ⌊log2 p⌋."""
        return self.p.bit_length() - 1

    def parent(self, v: int) -> int | None:
        return (v - 1) // 2 if v else None

    def children(self, v: int) -> tuple[int, ...]:
        return tuple(c for c in (2 * v + 1, 2 * v + 2) if c < self.p)

    def depth(self, v: int) -> int:
        return (v + 1).bit_length() - 1

    def height(self, v: int) -> int:
        """Hops from ``v`` down to its deepest descendant (the leftmost path is the longest)."""
        return (self.p // (v + 1)).bit_length() - 1
