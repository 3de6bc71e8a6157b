"""Pipelined chains: the buffer flows chunk by chunk along a line of ranks.

A rank forwards chunk i-1 to its successor while it receives chunk i from its predecessor;
with k chunks the last rank is done after p-2+k chunk hops. Broadcast and reduce chains
follow the ring order rotated to the root; scan's chain follows rank order (prefixes are by
rank).
"""

from __future__ import annotations

from collections.abc import Sequence

from collsim.algorithms.chunks import chunk_count, chunk_region, cost_chunks
from collsim.algorithms.order import rooted_order
from collsim.algorithms.registry import Cost, register
from collsim.program import Job, Op, Program, Recv, Send
from collsim.tags import TAGS, Tags

CHAIN_SOURCE = "Thakur, Rabenseifner & Gropp 2005; Pješivac-Grbović et al. 2007 (pipeline)"


def chain_steps(rank: int, job: Job, chain: Sequence[int], reduce: bool, tags: Tags = TAGS,
                region: tuple[int, int] | None = None, chunks: int | None = None,
                lane: int = 0) -> Program:
    """Pipeline ``buf`` (or its ``region``, (offset, count)) down ``chain`` (a sequence of
    every rank) in ``chunks`` chunks (default: of the job's chunk size); combine on the way
    if ``reduce``; sends go on ``lane``. Step i forwards chunk i-1 to the successor while
    chunk i arrives from the predecessor, so both transfers of a hop are posted together
    (they must meet). A rank between the ends passes its chunks on in the same pass (the
    sends' ``forwarded`` and ``forwarding`` flags)."""
    pos = chain.index(rank)
    prev = chain[pos - 1] if pos > 0 else None
    succ = chain[pos + 1] if pos + 1 < len(chain) else None
    offset, count = region if region is not None else (0, job.count)
    if chunks is None:
        chunks = chunk_count(job, count)
    for i in range(chunks + 1):
        ops: list[Op] = []
        if succ is not None and i >= 1:
            ops.append(Send(succ, tags[i - 1], *chunk_region(offset, count, chunks, i - 1),
                            lane=lane, forwarded=prev is not None,
                            forwarding=pos + 2 < len(chain)))
        if prev is not None and i < chunks:
            ops.append(Recv(prev, tags[i], *chunk_region(offset, count, chunks, i),
                            reduce=reduce, lane=lane))
        if ops:
            yield tuple(ops)


def window_pipeline_time(hops: int, k: int, alpha: float, send_time: float,
                         combine_time: float, window: int) -> float:
    """A pipeline of ``k`` chunks over ``hops`` uncontended hops with ``window`` chunks in
    flight per hop: a chunk takes ``alpha + send_time`` on a hop and ``combine_time`` at each
    rank it reaches; the first chunk's hops, then one chunk every
    ``max(send_time, combine_time, (alpha + send_time + combine_time) / window)``. Exact
    when the window covers the latency (the last term is not the largest); an upper bound
    otherwise."""
    hop = alpha + send_time + combine_time
    every = max(send_time, combine_time, hop / window)
    return hops * hop + (k - 1) * every


def _pipeline(c: Cost, per_byte: float) -> float:
    """(p-2+k) chunk hops of alpha + (n/k)·per_byte each."""
    if c.p == 1:
        return 0.0
    k = cost_chunks(c.n, c.params)
    return (c.p - 2 + k) * (c.alpha + c.n / k * per_byte)


CHAIN_TEXT = "k = ⌈n/chunk⌉: "


@register(
    "broadcast", "chain",
    formula=CHAIN_TEXT + "(p-2+k)·(α + n/k·β)",
    cost=lambda c: _pipeline(c, c.beta),
    source=CHAIN_SOURCE,
    summary="root pipelines chunks down a chain in ring order",
    params=("root", "chunk_size"),
)
def chain_broadcast(rank: int, job: Job) -> Program:
    """Pipelined chain broadcast from the root."""
    return chain_steps(rank, job, rooted_order(job, job.root), reduce=False)


@register(
    "reduce", "chain",
    formula=CHAIN_TEXT + "(p-2+k)·(α + n/k·(β + γ))",
    cost=lambda c: _pipeline(c, c.beta + c.gamma),
    source=CHAIN_SOURCE,
    summary="chunks combined rank by rank along a chain in ring order that ends at the root",
    params=("root", "chunk_size"),
)
def chain_reduce(rank: int, job: Job) -> Program:
    """Pipelined chain reduce to the root."""
    order = rooted_order(job, job.root)
    return chain_steps(rank, job, order[1:] + order[:1], reduce=True)


@register(
    "scan", "chain",
    formula=CHAIN_TEXT + "(p-2+k)·(α + n/k·(β + γ))",
    cost=lambda c: _pipeline(c, c.beta + c.gamma),
    source=CHAIN_SOURCE,
    summary="rank r adds its buffer to rank r-1's prefix and passes it on, chunk by chunk",
    params=("chunk_size",),
)
def chain_scan(rank: int, job: Job) -> Program:
    """Pipelined chain scan in rank order."""
    return chain_steps(rank, job, range(job.nranks), reduce=True)
