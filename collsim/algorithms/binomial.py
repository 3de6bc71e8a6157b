"""Binomial (minimum-spanning-tree) algorithms: ceil(log2 p) rounds, latency-optimal.

Broadcast and reduce number the ranks by their place in the topology-aware ring order,
counted from the root, so that a subtree (positions ``v .. v + lowbit(v) - 1``) is a run of
neighbours on the machine: the lower levels stay inside a node and only the top levels
cross the network, as NCCL's trees do. Gather and scatter number ranks relative to the root
(``v = rank - root mod p``) because a subtree's blocks must be a run of the buffer; they
wrap around its end when the root is not rank 0 (see :mod:`wrap`).

A parent receives from its children one after another, and a child's transfer starts only when
its parent posts the receive, so a short subtree that is ready early waits its turn instead of
sharing the parent's port: the closed forms hold for every p, not only powers of two.
"""

from __future__ import annotations

from collsim.algorithms.order import rooted_order, rooted_position
from collsim.algorithms.registry import Cost, register
from collsim.algorithms.wrap import wrapped_regions
from collsim.program import Job, Program, Recv, Send
from collsim.tags import TAGS, Tags

MST_SOURCE = "Chan et al. 2007 (MST); Thakur, Rabenseifner & Gropp 2005"


def binomial_broadcast_steps(rank: int, job: Job, root: int | None = None,
                             tags: Tags = TAGS, offset: int = 0, count: int | None = None
                             ) -> Program:
    """Broadcast ``buf[offset:offset+count]`` from ``root`` down a binomial tree."""
    p, tag = job.nranks, tags[0]
    count = job.count if count is None else count
    root = job.root if root is None else root
    order = rooted_order(job, root)
    vrank = rooted_position(job, root, rank)
    mask = 1
    while mask < p:
        if vrank & mask:
            yield Recv(order[vrank - mask], tag, offset, count)
            break
        mask <<= 1
    mask >>= 1
    while mask > 0:
        if vrank + mask < p:
            yield Send(order[vrank + mask], tag, offset, count)
        mask >>= 1


def binomial_reduce_steps(rank: int, job: Job, root: int | None = None, tags: Tags = TAGS,
                          offset: int = 0, count: int | None = None) -> Program:
    """Combine ``buf[offset:offset+count]`` of every rank at ``root`` up a binomial tree."""
    p, tag = job.nranks, tags[0]
    count = job.count if count is None else count
    root = job.root if root is None else root
    order = rooted_order(job, root)
    vrank = rooted_position(job, root, rank)
    mask = 1
    while mask < p:
        if vrank & mask:
            yield Send(order[vrank - mask], tag, offset, count)
            break
        child = vrank | mask
        if child < p:
            yield Recv(order[child], tag, offset, count, reduce=True)
        mask <<= 1


def _subtree_regions(job: Job, vrank: int, size: int, root: int) -> list[tuple[int, int]]:
    return wrapped_regions(job.count, job.nranks, vrank + root, min(size, job.nranks - vrank))


def binomial_gather_steps(rank: int, job: Job, root: int | None = None, tags: Tags = TAGS
                          ) -> Program:
    """Gather block r of every rank r at ``root``: each subtree's blocks travel as one run
    (two messages when the run wraps around the buffer's end)."""
    p = job.nranks
    root = job.root if root is None else root
    vrank = (rank - root) % p
    mask = 1
    while mask < p:
        if vrank & mask:
            parent = (vrank - mask + root) % p
            yield tuple(Send(parent, tags[i], off, length) for i, (off, length)
                        in enumerate(_subtree_regions(job, vrank, mask, root)))
            return
        child = vrank + mask
        if child < p:
            yield tuple(Recv((child + root) % p, tags[i], off, length) for i, (off, length)
                        in enumerate(_subtree_regions(job, child, mask, root)))
        mask <<= 1


def binomial_scatter_steps(rank: int, job: Job, root: int | None = None, tags: Tags = TAGS
                           ) -> Program:
    """Scatter the root's buffer so that rank r gets block r; halves the run at every level."""
    p = job.nranks
    root = job.root if root is None else root
    vrank = (rank - root) % p
    mask = 1
    while mask < p:
        if vrank & mask:
            parent = (vrank - mask + root) % p
            yield tuple(Recv(parent, tags[i], off, length) for i, (off, length)
                        in enumerate(_subtree_regions(job, vrank, mask, root)))
            break
        mask <<= 1
    mask >>= 1
    while mask > 0:
        child = vrank + mask
        if child < p:
            yield tuple(Send((child + root) % p, tags[i], off, length) for i, (off, length)
                        in enumerate(_subtree_regions(job, child, mask, root)))
        mask >>= 1


def _gather_cost(c: Cost) -> float:
    return c.log_p * c.alpha + (c.p - 1) / c.p * c.n * c.beta


@register(
    "broadcast", "binomial",
    formula="⌈log p⌉·(α + n·β)",
    cost=lambda c: c.log_p * (c.alpha + c.n * c.beta),
    source=MST_SOURCE,
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
    source=MST_SOURCE,
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
    source=MST_SOURCE + " (MST reduce then MST broadcast)",
    summary="binomial reduce to rank 0, then binomial broadcast from it",
)
def binomial_allreduce(rank: int, job: Job) -> Program:
    """Reduce to rank 0, then broadcast from rank 0 (the textbook MST allreduce)."""
    yield from binomial_reduce_steps(rank, job, root=0, tags=TAGS.phase(0))
    yield from binomial_broadcast_steps(rank, job, root=0, tags=TAGS.phase(1))


@register(
    "gather", "binomial",
    formula="⌈log p⌉·α + (p-1)/p·n·β",
    cost=_gather_cost,
    source=MST_SOURCE,
    summary="subtrees' blocks gathered up a binomial tree",
    params=("root",),
)
def binomial_gather(rank: int, job: Job) -> Program:
    """Binomial-tree gather at the root."""
    return binomial_gather_steps(rank, job)


@register(
    "scatter", "binomial",
    formula="⌈log p⌉·α + (p-1)/p·n·β",
    cost=_gather_cost,
    source=MST_SOURCE,
    summary="root hands each subtree its blocks down a binomial tree",
    params=("root",),
)
def binomial_scatter(rank: int, job: Job) -> Program:
    """Binomial-tree scatter from the root."""
    return binomial_scatter_steps(rank, job)


@register(
    "allgather", "binomial",
    formula="2⌈log p⌉·α + ⌈log p⌉·n·β + (p-1)/p·n·β",
    cost=lambda c: 2 * c.log_p * c.alpha + c.log_p * c.n * c.beta
    + (c.p - 1) / c.p * c.n * c.beta,
    source=MST_SOURCE + " (MST gather then MST broadcast)",
    summary="binomial gather to rank 0, then binomial broadcast of the whole buffer",
)
def binomial_allgather(rank: int, job: Job) -> Program:
    """Gather at rank 0, then broadcast from it (the textbook MST allgather)."""
    yield from binomial_gather_steps(rank, job, root=0, tags=TAGS.phase(0))
    yield from binomial_broadcast_steps(rank, job, root=0, tags=TAGS.phase(1))


@register(
    "reducescatter", "binomial",
    formula="2⌈log p⌉·α + ⌈log p⌉·n·(β + γ) + (p-1)/p·n·β",
    cost=lambda c: 2 * c.log_p * c.alpha + c.log_p * c.n * (c.beta + c.gamma)
    + (c.p - 1) / c.p * c.n * c.beta,
    source=MST_SOURCE + " (MST reduce then MST scatter)",
    summary="binomial reduce of the whole buffer to rank 0, then binomial scatter",
)
def binomial_reducescatter(rank: int, job: Job) -> Program:
    """Reduce to rank 0, then scatter from it (the textbook MST reduce-scatter)."""
    yield from binomial_reduce_steps(rank, job, root=0, tags=TAGS.phase(0))
    yield from binomial_scatter_steps(rank, job, root=0, tags=TAGS.phase(1))
