"""The collectives: their names, which take a root or reduce, bus-bandwidth factors, and
what every rank must hold at the end (the numpy reference the data interpreter checks)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from collsim.program import Job, block

REDUCE_OPS: dict[str, np.ufunc] = {
    "sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum,
}


@dataclass(frozen=True)
class Collective:
    """What a collective means, independent of any algorithm."""

    name: str
    rooted: bool
    reduces: bool
    busbw_factor: Callable[[int], float]
    description: str


def _one(p: int) -> float:
    return 1.0


def _spread(p: int) -> float:
    return (p - 1) / p


def _allreduce(p: int) -> float:
    return 2 * (p - 1) / p


COLLECTIVES: dict[str, Collective] = {c.name: c for c in (
    Collective("broadcast", True, False, _one, "root's buffer to every rank"),
    Collective("reduce", True, True, _one, "every rank's buffer combined at the root"),
    Collective("allreduce", False, True, _allreduce, "every rank's buffer combined, at every rank"),
    Collective("gather", True, False, _spread, "block r of rank r to the root"),
    Collective("allgather", False, False, _spread, "block r of rank r to every rank"),
    Collective("scatter", True, False, _spread, "block r of the root's buffer to rank r"),
    Collective("reducescatter", False, True, _spread,
               "every rank's buffer combined, block r left at rank r"),
    Collective("alltoall", False, False, _spread, "block j of rank i to block i of rank j"),
    Collective("barrier", False, False, _one, "no rank leaves before every rank has entered"),
    Collective("scan", False, True, _one, "rank r gets the combination of ranks 0..r"),
    Collective("sendrecv", False, False, _one,
               "rank r's buffer to rank r+1, rank r-1's into a second buffer"),
)}


def inputs_for(job: Job, dtype: np.dtype, rng: np.random.Generator) -> list[np.ndarray]:
    """Each rank's contribution; small integer values so every reduction is exact in any dtype."""
    p, n = job.nranks, job.count
    values = np.array([-2, -1, 1, 2]) if np.dtype(dtype).kind in "if" else np.array([1, 2, 3])
    if job.collective in ("gather", "allgather"):
        sizes = [block(n, p, r)[1] for r in range(p)]
    elif job.collective == "barrier":
        sizes = [0] * p
    else:
        sizes = [n] * p
    return [rng.choice(values, size=s).astype(dtype) for s in sizes]


def initial_buffers(job: Job, inputs: list[np.ndarray], rank: int, garbage: np.ndarray
                    ) -> dict[str, np.ndarray]:
    """The buffers rank ``rank`` starts with; places it must fill start as ``garbage``."""
    p, n, name = job.nranks, job.count, job.collective
    buf = garbage[:n].copy()
    if name in ("reduce", "allreduce", "scan", "reducescatter"):
        buf = inputs[rank].copy()
    elif name in ("broadcast", "scatter"):
        if rank == job.root:
            buf = inputs[rank].copy()
    elif name in ("gather", "allgather"):
        offset, length = block(n, p, rank)
        buf[offset:offset + length] = inputs[rank]
    elif name == "alltoall":
        # Out holds p slots of this rank's block length: slot i receives rank i's block.
        return {"in": inputs[rank].copy(), "out": garbage[: p * block(n, p, rank)[1]].copy()}
    if name == "sendrecv":
        # nccl-tests' sendrecv: send from one buffer, receive the neighbour's into another.
        return {"in": inputs[rank].copy(), "out": garbage[:n].copy()}
    return {"buf": buf}


def expected_result(job: Job, inputs: list[np.ndarray], op: str, rank: int
                    ) -> dict[str, tuple[int, np.ndarray]]:
    """What rank ``rank`` must hold: buffer name -> (offset, values); empty if nothing."""
    p, n, name = job.nranks, job.count, job.collective
    ufunc = REDUCE_OPS[op]
    mine = block(n, p, rank)
    if name == "broadcast":
        return {"buf": (0, inputs[job.root])}
    if name == "reduce":
        return {"buf": (0, _combine(ufunc, inputs))} if rank == job.root else {}
    if name == "allreduce":
        return {"buf": (0, _combine(ufunc, inputs))}
    if name == "scan":
        return {"buf": (0, _combine(ufunc, inputs[: rank + 1]))}
    if name == "gather":
        return {"buf": (0, np.concatenate(inputs))} if rank == job.root else {}
    if name == "allgather":
        return {"buf": (0, np.concatenate(inputs))}
    if name == "scatter":
        return {"buf": (mine[0], inputs[job.root][mine[0]:mine[0] + mine[1]])}
    if name == "reducescatter":
        total = _combine(ufunc, inputs)
        return {"buf": (mine[0], total[mine[0]:mine[0] + mine[1]])}
    if name == "alltoall":
        return {"out": (0, np.concatenate([
            inputs[src][slice(*_bounds(block(n, p, rank)))] for src in range(p)]))}
    if name == "sendrecv":
        return {"out": (0, inputs[(rank - 1) % p])}
    return {}


def _bounds(offset_length: tuple[int, int]) -> tuple[int, int]:
    offset, length = offset_length
    return offset, offset + length


def _combine(ufunc: np.ufunc, arrays: list[np.ndarray]) -> np.ndarray:
    """Element-wise reduction in the arrays' own dtype (numpy would widen small integers)."""
    return ufunc.reduce(np.stack(arrays), axis=0, dtype=arrays[0].dtype)
