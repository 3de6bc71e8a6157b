"""Barriers: zero-byte messages arranged so that every rank hears, directly or through others,
from every rank before it leaves."""

from __future__ import annotations

from collsim.algorithms.binomial import binomial_broadcast_steps, binomial_reduce_steps
from collsim.algorithms.registry import even_blocks, register
from collsim.program import Job, Program, Recv, Send
from collsim.tags import TAGS


@register(
    "barrier", "dissemination",
    symmetric=even_blocks,
    formula="⌈log p⌉·α",
    cost=lambda c: c.log_p * c.alpha,
    source="Hensgen, Finkel & Manber 1988; MPICH",
    summary="at round k, signal rank r+2^k and wait for rank r-2^k",
)
def dissemination_barrier(rank: int, job: Job) -> Program:
    """⌈log p⌉ rounds of one zero-byte send and one receive."""
    p, distance, rnd = job.nranks, 1, 0
    while distance < p:
        yield (Send((rank + distance) % p, rnd, 0, 0), Recv((rank - distance) % p, rnd, 0, 0))
        distance *= 2
        rnd += 1


@register(
    "barrier", "binomial",
    formula="2⌈log p⌉·α",
    cost=lambda c: 2 * c.log_p * c.alpha,
    source="Chan et al. 2007 (MST reduce + MST broadcast of nothing)",
    summary="zero-byte binomial reduce to rank 0, then zero-byte binomial broadcast",
)
def binomial_barrier(rank: int, job: Job) -> Program:
    """Tree barrier: everyone reports up a binomial tree, rank 0 releases everyone."""
    yield from binomial_reduce_steps(rank, job, root=0, tags=TAGS.phase(0), count=0)
    yield from binomial_broadcast_steps(rank, job, root=0, tags=TAGS.phase(1), count=0)
