"""Ring algorithms: bandwidth-optimal, p-1 steps per phase, each rank talks to its neighbours.

Ranks follow ``job.ring_order()`` (topology-aware when the simulator knows the machine);
block b of the buffer always belongs to rank b, whatever its place on the ring.
"""

from __future__ import annotations

from collsim.algorithms.order import ring_position
from collsim.algorithms.registry import Cost, register
from collsim.program import Job, Program, Recv, Send, block
from collsim.tags import TAGS, Tags

RING_SOURCE = "Chan et al. 2007 (bucket); Thakur, Rabenseifner & Gropp 2005; Patarasuk & Yuan 2009"


def _neighbours(rank: int, job: Job) -> tuple[tuple[int, ...], int, int, int]:
    ring = job.ring_order()
    pos = ring_position(job, rank)
    return ring, pos, ring[(pos + 1) % job.nranks], ring[(pos - 1) % job.nranks]


def ring_reducescatter_steps(rank: int, job: Job, tags: Tags = TAGS) -> Program:
    """p-1 steps after which rank r holds block r of ``buf`` combined over every rank."""
    p, n = job.nranks, job.count
    ring, pos, right, left = _neighbours(rank, job)
    out_off, out_len = block(n, p, ring[(pos - 1) % p])
    for step, tag in enumerate(tags.range(p - 1)):
        in_off, in_len = block(n, p, ring[(pos - step - 2) % p])
        yield (Send(right, tag, out_off, out_len),
               Recv(left, tag, in_off, in_len, reduce=True))
        out_off, out_len = in_off, in_len  # what arrived is what goes on next


def ring_allgather_steps(rank: int, job: Job, tags: Tags = TAGS) -> Program:
    """p-1 steps that pass blocks around the ring until every rank holds every block."""
    p, n = job.nranks, job.count
    ring, pos, right, left = _neighbours(rank, job)
    out_off, out_len = block(n, p, ring[pos])
    for step, tag in enumerate(tags.range(p - 1)):
        in_off, in_len = block(n, p, ring[(pos - step - 1) % p])
        yield (Send(right, tag, out_off, out_len),
               Recv(left, tag, in_off, in_len))
        out_off, out_len = in_off, in_len  # what arrived is what goes on next


def _ring_allreduce_cost(c: Cost) -> float:
    return 2 * (c.p - 1) * c.alpha + 2 * (c.p - 1) / c.p * c.n * c.beta \
        + (c.p - 1) / c.p * c.n * c.gamma


@register(
    "allreduce", "ring",
    formula="2(p-1)·α + 2(p-1)/p·n·β + (p-1)/p·n·γ",
    cost=_ring_allreduce_cost,
    source=RING_SOURCE,
    summary="ring reduce-scatter, then ring allgather; chunks of n/p",
)
def ring_allreduce(rank: int, job: Job) -> Program:
    """Reduce-scatter leaves block r combined at rank r; allgather spreads the blocks."""
    yield from ring_reducescatter_steps(rank, job, TAGS.phase(0))
    yield from ring_allgather_steps(rank, job, TAGS.phase(1))


@register(
    "allgather", "ring",
    formula="(p-1)·α + (p-1)/p·n·β",
    cost=lambda c: (c.p - 1) * c.alpha + (c.p - 1) / c.p * c.n * c.beta,
    source=RING_SOURCE,
    summary="each block travels p-1 hops around the ring",
)
def ring_allgather(rank: int, job: Job) -> Program:
    """Ring allgather of the blocks each rank starts with."""
    return ring_allgather_steps(rank, job)


@register(
    "reducescatter", "ring",
    formula="(p-1)·α + (p-1)/p·n·(β + γ)",
    cost=lambda c: (c.p - 1) * (c.alpha + c.n / c.p * (c.beta + c.gamma)),
    source=RING_SOURCE,
    summary="each block is combined on its way p-1 hops around the ring",
)
def ring_reducescatter(rank: int, job: Job) -> Program:
    """Ring reduce-scatter: block r ends combined at rank r."""
    return ring_reducescatter_steps(rank, job)
