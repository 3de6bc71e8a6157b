"""Recursive-doubling scan (Hillis & Steele): at round k rank r sends its partial prefix, which
covers ranks r-2^k+1 .. r, to rank r+2^k and combines the one from rank r-2^k.

The send carries the partial as it was when the round began, which the data interpreter
snapshots at posting; a transfer starts only when both ends have posted it, so the ranks below
2^k that have nothing to combine cannot run ahead and every round takes α + n·β + n·γ.
"""

from __future__ import annotations

from collsim.algorithms.registry import register
from collsim.program import Job, Op, Program, Recv, Send


@register(
    "scan", "recursive_doubling",
    formula="⌈log p⌉·(α + n·β + n·γ)",
    cost=lambda c: c.log_p * (c.alpha + c.n * (c.beta + c.gamma)),
    source="Hillis & Steele 1986; Thakur, Rabenseifner & Gropp 2005",
    summary="at round k, pass the partial prefix to rank r+2^k and combine rank r-2^k's",
)
def recursive_doubling_scan(rank: int, job: Job) -> Program:
    """⌈log p⌉ rounds of at most one send and one combining receive of the whole buffer."""
    p, n, distance, rnd = job.nranks, job.count, 1, 0
    while distance < p:
        ops: list[Op] = []
        if rank + distance < p:
            ops.append(Send(rank + distance, rnd, 0, n))
        if rank - distance >= 0:
            ops.append(Recv(rank - distance, rnd, 0, n, reduce=True))
        if ops:
            yield tuple(ops)
        distance *= 2
        rnd += 1
