"""Ring algorithms: bandwidth-optimal, p-1 steps per phase, each rank talks to its neighbours.

Ranks follow ``job.ring_order()`` (topology-aware when the simulator knows the machine);
block b of the buffer always belongs to rank b, whatever its place on the ring. These are
the building blocks; the registered ``ring`` algorithms are NCCL's ring
(:mod:`collsim.algorithms.nccl.ring`), which on one channel is exactly these programs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from functools import partial

import numpy as np

from collsim.algorithms.order import ring_position
from collsim.algorithms.registry import Cost
from collsim.engine.lockstep import Exchange, ring_pattern
from collsim.program import Job, Program, Recv, Send, block
from collsim.tags import TAGS, Tags

RING_SOURCE = "Chan et al. 2007 (bucket); Thakur, Rabenseifner & Gropp 2005; Patarasuk & Yuan 2009"


Blocks = Callable[[int], tuple[int, int]]  # block b -> (offset, count) in the buffer


def _neighbours(rank: int, job: Job, ring: Sequence[int] | None
                ) -> tuple[Sequence[int], int, int, int]:
    p = job.nranks
    if ring is None:
        ring, pos = job.ring_order(), ring_position(job, rank)
    else:
        pos = ring.index(rank)
    return ring, pos, ring[(pos + 1) % p], ring[(pos - 1) % p]


def _forwarding(step: int, steps: int, opens: bool, closes: bool) -> dict[str, bool]:
    """A ring step's Send flags: each step but a loop's first passes on what the previous
    step received, and each but its last is passed on so (``opens``/``closes``: whether
    these steps open or close the loop)."""
    return {"forwarded": step > 0 or not opens, "forwarding": step < steps - 1 or not closes}


def ring_reducescatter_steps(rank: int, job: Job, tags: Tags = TAGS,
                             ring: Sequence[int] | None = None, blocks: Blocks | None = None,
                             lane: int = 0, opens: bool = True, closes: bool = True
                             ) -> Program:
    """p-1 steps after which rank r holds block r of ``buf`` combined over every rank.

    ``ring`` (default the job's) is the order of the ranks; ``blocks(b)`` (default block b
    of p of the buffer) is the region block b stands for, so that one NCCL channel can run
    the ring over its own piece of every block; its sends go on ``lane``. ``opens`` and
    ``closes`` say whether the steps open and close a loop of NCCL's ring (an allreduce's
    reduce-scatter does not close it): their sends' ``forwarded``/``forwarding`` flags.
    """
    p, n = job.nranks, job.count
    ring, pos, right, left = _neighbours(rank, job, ring)
    if blocks is None:
        blocks = partial(block, n, p)
    out_off, out_len = blocks(ring[(pos - 1) % p])
    for step, tag in enumerate(tags.range(p - 1)):
        in_off, in_len = blocks(ring[(pos - step - 2) % p])
        yield (Send(right, tag, out_off, out_len, "buf", lane,
                    **_forwarding(step, p - 1, opens, closes)),
               Recv(left, tag, in_off, in_len, "buf", True, lane))
        out_off, out_len = in_off, in_len  # what arrived is what goes on next


def ring_allgather_steps(rank: int, job: Job, tags: Tags = TAGS,
                         ring: Sequence[int] | None = None, blocks: Blocks | None = None,
                         lane: int = 0, opens: bool = True, closes: bool = True) -> Program:
    """p-1 steps that pass blocks around the ring until every rank holds every block
    (``ring``, ``blocks``, ``lane``, ``opens`` and ``closes`` as for
    :func:`ring_reducescatter_steps`)."""
    p, n = job.nranks, job.count
    ring, pos, right, left = _neighbours(rank, job, ring)
    if blocks is None:
        blocks = partial(block, n, p)
    out_off, out_len = blocks(ring[pos])
    for step, tag in enumerate(tags.range(p - 1)):
        in_off, in_len = blocks(ring[(pos - step - 1) % p])
        yield (Send(right, tag, out_off, out_len, "buf", lane,
                    **_forwarding(step, p - 1, opens, closes)),
               Recv(left, tag, in_off, in_len, "buf", False, lane))
        out_off, out_len = in_off, in_len  # what arrived is what goes on next


def ring_allreduce_cost(c: Cost) -> float:
    """The textbook ring allreduce's closed form."""
    return 2 * (c.p - 1) * c.alpha + 2 * (c.p - 1) / c.p * c.n * c.beta \
        + (c.p - 1) / c.p * c.n * c.gamma


def ring_allgather_cost(c: Cost) -> float:
    """The textbook ring allgather's closed form."""
    return (c.p - 1) * c.alpha + (c.p - 1) / c.p * c.n * c.beta


def ring_reducescatter_cost(c: Cost) -> float:
    """The textbook ring reduce-scatter's closed form."""
    return (c.p - 1) * (c.alpha + c.n / c.p * (c.beta + c.gamma))


def ring_allreduce(rank: int, job: Job) -> Program:
    """Reduce-scatter leaves block r combined at rank r; allgather spreads the blocks."""
    yield from ring_reducescatter_steps(rank, job, TAGS.phase(0), closes=False)
    yield from ring_allgather_steps(rank, job, TAGS.phase(1), opens=False)


def block_lengths(count: int, p: int) -> np.ndarray:
    """The length of each of the ``p`` blocks of ``count`` elements (as :func:`block`)."""
    base, extra = divmod(count, p)
    return base + (np.arange(p) < extra).astype(np.int64)


def ring_exchanges(ring: Sequence[int], lengths: np.ndarray, reduce_steps: int,
                   gather_steps: int, lane: int = 0) -> Iterator[Exchange]:
    """The steps of :func:`ring_reducescatter_steps` (``reduce_steps`` of them, 0 or p-1)
    then of :func:`ring_allgather_steps` as whole steps of every rank (the lockstep path):
    ``lengths[b]`` is the length of block b. The steps are one loop of NCCL's ring (the
    sends' forwarding flags)."""
    senders, receivers = ring_pattern(ring)
    by_position = lengths[senders]
    uniform = bool(np.all(by_position == by_position[0])) if len(by_position) else True
    steps = reduce_steps + gather_steps
    for step in range(reduce_steps):  # position i sends block ring[i - 1 - step]
        counts = int(by_position[0]) if uniform else np.roll(by_position, step + 1)
        yield Exchange(senders, receivers, counts, True, lane, step > 0, step < steps - 1)
    for step in range(reduce_steps, steps):  # position i sends block ring[i - step]
        counts = int(by_position[0]) if uniform else \
            np.roll(by_position, step - reduce_steps)
        yield Exchange(senders, receivers, counts, False, lane, step > 0, step < steps - 1)


def shift_invariant(ring: Sequence[int], shift: int) -> bool:
    """Whether moving every rank of ``ring`` (an order of 0..p-1) by ``shift`` (mod p) gives
    the same ring, started elsewhere: then the ring's programs are equivariant under the
    shift wherever block lengths allow."""
    order = np.asarray(ring, dtype=np.int64)
    p = len(order)
    if p == 0:
        return True
    moved = (order + shift) % p
    start = int(np.flatnonzero(order == moved[0])[0])
    return bool(np.array_equal(moved, np.roll(order, -start)))
