"""The nccl-tests binaries: which collective each measures, how its table counts elements and
turns algbw into busbw (nccl-tests' src/*.cu and doc/PERFORMANCE.md; docs/nccl.md#nccl-tests)."""

from __future__ import annotations

from dataclasses import dataclass

from collsim.collectives import COLLECTIVES


@dataclass(frozen=True)
class Program:
    """One ``*_perf`` binary and the collective (collsim's name) it times."""

    name: str
    collective: str
    prints_op: bool  # the redop column names the op (-o), not "none"
    rooted: bool
    count_per_rank: bool  # the count column is size / (type size x ranks), not size / type size

    def busbw_factor(self, ranks: int) -> float:
        """busbw / algbw at ``ranks``: the factors of docs/design.md#bus-bandwidth, which are
        nccl-tests'."""
        return COLLECTIVES[self.collective].busbw_factor(ranks)


PROGRAMS: dict[str, Program] = {p.name: p for p in (
    Program("all_reduce_perf", "allreduce", True, False, False),
    Program("all_gather_perf", "allgather", False, False, True),
    Program("reduce_scatter_perf", "reducescatter", True, False, True),
    Program("broadcast_perf", "broadcast", False, True, False),
    Program("reduce_perf", "reduce", True, True, False),
    Program("alltoall_perf", "alltoall", False, False, True),
    # sendrecv_perf loops over -o as the reducing tests do and prints the op, reducing nothing
    # (src/sendrecv.cu SendRecvRunTest)
    Program("sendrecv_perf", "sendrecv", True, False, False),
    Program("gather_perf", "gather", False, True, True),
    Program("scatter_perf", "scatter", False, True, True),
)}

BY_COLLECTIVE: dict[str, Program] = {p.collective: p for p in PROGRAMS.values()}

# Bytes per element of nccl-tests' type names (src/common.cu test_typenames; "char" and "int"
# are NCCL 1's names). The fp8 spellings are an assumption: no published table showed one.
TYPE_SIZES: dict[str, int] = {
    "int8": 1, "uint8": 1, "char": 1, "int32": 4, "uint32": 4, "int": 4, "int64": 8,
    "uint64": 8, "half": 2, "float": 4, "double": 8, "bfloat16": 2,
    "f8e4m3": 1, "f8e5m2": 1, "fp8_e4m3": 1, "fp8_e5m2": 1,
}

# collsim's dtype names (collsim/params.py DTYPES) as nccl-tests prints them.
NCCL_TYPE_NAMES: dict[str, str] = {
    "int8": "int8", "uint8": "uint8", "int32": "int32", "uint32": "uint32", "int64": "int64",
    "uint64": "uint64", "float16": "half", "bfloat16": "bfloat16", "float32": "float",
    "float64": "double",
}


def program_for(collective: str) -> Program | None:
    """The nccl-tests binary that times ``collective``; None for collsim-only collectives."""
    return BY_COLLECTIVE.get(collective)


@dataclass(frozen=True)
class Columns:
    """What one table row says about its collective."""

    size: int
    count: int
    dtype: str
    redop: str | None
    root: int | None
    algbw: float
    busbw: float


def candidates(row: Columns, ranks: int | None) -> set[str]:
    """The collectives one table row can belong to, judged by its redop and root columns,
    its busbw/algbw ratio and its count; a clue that would leave nothing is ignored (the
    published tables hold typing errors)."""
    printed_op = row.redop is not None and row.redop != "none"
    rooted = row.root is not None and row.root >= 0
    if row.root is None and row.redop is None:  # the oldest all_gather layout
        left = {"allgather", "alltoall", "sendrecv"}
    else:
        left = {p.collective for p in PROGRAMS.values()
                if p.prints_op == printed_op and p.rooted == rooted}
    if row.algbw >= 1.0:
        gap = row.busbw - row.algbw
        slack = half_digit(row.algbw) * 2 + half_digit(row.busbw)
        if gap > slack:
            left = _narrow(left, {"allreduce"})
        elif gap < -slack:
            left = _narrow(left, {c for c, p in BY_COLLECTIVE.items()
                                  if p.busbw_factor(1000) < 1})
        if ranks is not None:  # the factors that give the printed busbw at this rank count
            left = _narrow(left, {c for c, p in BY_COLLECTIVE.items()
                                  if abs(row.algbw * p.busbw_factor(ranks) - row.busbw) <= slack})
    itemsize = TYPE_SIZES.get(row.dtype)
    if itemsize is None or row.count <= 0 or row.size <= 0:
        return left
    whole = row.count * itemsize
    if whole == row.size:
        return _narrow(left, {c for c in left if not BY_COLLECTIVE[c].count_per_rank})
    if row.size % whole == 0 and (ranks is None or row.size // whole == ranks):
        return _narrow(left, {c for c in left if BY_COLLECTIVE[c].count_per_rank})
    return left


def infer_collective(rows: list[Columns], ranks: int | None) -> str | None:
    """The one collective every row allows; None if the columns cannot tell (allgather and
    alltoall print the same ones). sendrecv is named only when nothing else fits: its
    columns are allreduce's wherever busbw cannot tell them apart (2 ranks, or rows below
    1 GB/s), and such a table is far more often all_reduce_perf's."""
    left: set[str] | None = None
    for row in rows:
        found = candidates(row, ranks)
        left = found if left is None else left & found
    if left is not None and len(left) > 1:
        left.discard("sendrecv")
    return left.pop() if left is not None and len(left) == 1 else None


def _narrow(left: set[str], allowed: set[str]) -> set[str]:
    return (left & allowed) or left


def half_digit(value: float) -> float:
    """Half the last printed digit of a bandwidth: two decimals below 1000 in both layouts;
    above, the adaptive layout prints fewer (taken as the coarsest, 0.5, to stay safe)."""
    return 0.005 if value < 1000 else 0.5
