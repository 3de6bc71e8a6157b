"""Binomial (minimum-spanning-tree) algorithms: ceil(log2 p) rounds, latency-optimal."""

from __future__ import annotations

from collsim.algorithms.registry import Cost, register
from collsim.program import Job, Program, Recv, Send


def binomial_broadcast_steps(rank: int, job: Job, root: int | None = None, tag: int = 0,
                             offset: int = 0, count: int | None = None) -> Program:
    """Broadcast ``buf[offset:offset+count]`` from ``root`` down a binomial tree."""
    p = job.nranks
    root = job.root if root is None else root
    count = job.count if count is None else count
    vrank = (rank - root) % p
    mask = 1
    while mask < p:
        if vrank & mask:
            yield Recv((vrank - mask + root) % p, tag, offset, count)
            break
        mask <<= 1
    mask >>= 1
    while mask > 0:
        if vrank + mask < p:
            yield Send((vrank + mask + root) % p, tag, offset, count)
        mask >>= 1


def binomial_reduce_steps(rank: int, job: Job, root: int | None = None, tag: int = 0,
                          offset: int = 0, count: int | None = None) -> Program:
    """Combine ``buf[offset:offset+count]`` of every rank at ``root`` up a binomial tree."""
    p = job.nranks
    root = job.root if root is None else root
    count = job.count if count is None else count
    vrank = (rank - root) % p
    mask = 1
    while mask < p:
        if vrank & mask:
            yield Send((vrank - mask + root) % p, tag, offset, count)
            break
        child = vrank | mask
        if child < p:
            yield Recv((child + root) % p, tag, offset, count, reduce=True)
        mask <<= 1


@register(
    "broadcast", "binomial",
    formula="⌈log p⌉·(α + n·β)",
    cost=lambda c: c.log_p * (c.alpha + c.n * c.beta),
    source="Thakur, Rabenseifner & Gropp 2005; Chan et al. 2007 (MST)",
    summary="root sends the whole buffer down a binomial tree",
    params=("root",),
)
def binomial_broadcast(rank: int, job: Job) -> Program:
    """Binomial-tree broadcast of the whole buffer."""
    return binomial_broadcast_steps(rank, job)


@register(
    "reduce", "binomial",
    formula="⌈log p⌉·(α + n·β + n·γ)",
    cost=lambda c: c.log_p * (c.alpha + c.n * c.beta + c.n * c.gamma),
    source="Thakur, Rabenseifner & Gropp 2005; Chan et al. 2007 (MST)",
    summary="whole buffers combined up a binomial tree to the root",
    params=("root",),
)
def binomial_reduce(rank: int, job: Job) -> Program:
    """Binomial-tree reduce of the whole buffer."""
    return binomial_reduce_steps(rank, job)


@register(
    "allreduce", "binomial",
    formula="2⌈log p⌉·α + ⌈log p⌉·n·(2β + γ)",
    cost=lambda c: 2 * c.log_p * c.alpha + c.log_p * c.n * (2 * c.beta + c.gamma),
    source="Chan et al. 2007 (MST reduce then MST broadcast)",
    summary="binomial reduce to rank 0, then binomial broadcast from it",
)
def binomial_allreduce(rank: int, job: Job) -> Program:
    """Reduce to rank 0, then broadcast from rank 0 (the textbook MST allreduce)."""
    yield from binomial_reduce_steps(rank, job, root=0, tag=0)
    yield from binomial_broadcast_steps(rank, job, root=0, tag=1)
