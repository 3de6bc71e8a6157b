"""Process groups: which global ranks (GPUs) a rank shares each kind of collective with.

Ranks are laid out as a mixed-radix number whose digits are the tensor, data and pipeline
coordinates, innermost digit first in ``order`` (Megatron's order by default: tensor,
data, pipeline, so a tensor group is consecutive GPUs, inside a node when it fits). Expert
parallelism splits each data-parallel group into consecutive blocks of ``expert`` replicas
(the all-to-all groups); replicas at the same position of every block form the
expert-data group that reduces the experts' gradients.
"""

from __future__ import annotations

from dataclasses import dataclass

from collsim.workloads.model import MEGATRON_ORDER

AXES = ("tensor", "data", "pipeline")
KINDS = ("tensor", "data", "pipeline", "expert", "expert_data")


@dataclass(frozen=True)
class Layout:
    tensor: int = 1
    data: int = 1
    pipeline: int = 1
    expert: int = 1
    order: tuple[str, ...] = MEGATRON_ORDER

    def __post_init__(self) -> None:
        if sorted(self.order) != sorted(AXES):
            raise ValueError(f"order must list {', '.join(AXES)} once each, got {self.order}")
        if self.data % self.expert:
            raise ValueError(f"expert degree {self.expert} does not divide data degree "
                             f"{self.data}")

    @property
    def world(self) -> int:
        return self.tensor * self.data * self.pipeline

    def size(self, axis: str) -> int:
        return getattr(self, axis)

    def coords(self, rank: int) -> dict[str, int]:
        """The tensor, data and pipeline coordinates of a global rank."""
        out = {}
        for axis in self.order:
            rank, out[axis] = divmod(rank, self.size(axis))
        return out

    def rank(self, tensor: int = 0, data: int = 0, pipeline: int = 0) -> int:
        """The global rank at these coordinates."""
        coords = {"tensor": tensor, "data": data, "pipeline": pipeline}
        rank, scale = 0, 1
        for axis in self.order:
            rank += coords[axis] * scale
            scale *= self.size(axis)
        return rank

    def group(self, kind: str, rank: int) -> tuple[int, ...]:
        """The global ranks of ``rank``'s group of ``kind``, in the group's rank order."""
        c = self.coords(rank)
        if kind in AXES:
            return tuple(self.rank(**{**c, kind: i}) for i in range(self.size(kind)))
        block, position = divmod(c["data"], self.expert)
        if kind == "expert":
            return tuple(self.rank(**{**c, "data": block * self.expert + i})
                         for i in range(self.expert))
        if kind == "expert_data":
            return tuple(self.rank(**{**c, "data": b * self.expert + position})
                         for b in range(self.data // self.expert))
        raise ValueError(f"unknown group kind {kind!r}; kinds are {', '.join(KINDS)}")

    def groups(self, kind: str) -> list[tuple[int, ...]]:
        """Every group of ``kind``, each once, ordered by its first rank."""
        seen: dict[int, tuple[int, ...]] = {}
        for rank in range(self.world):
            group = self.group(kind, rank)
            seen.setdefault(group[0], group)
        return [seen[first] for first in sorted(seen)]
