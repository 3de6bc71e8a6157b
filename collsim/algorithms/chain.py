"""Pipelined chains: the buffer flows chunk by chunk along a line of ranks.

A rank forwards chunk i-1 to its successor while it receives chunk i from its predecessor;
with k chunks the last rank is done after p-2+k chunk hops. Broadcast and reduce chains
follow the ring order rotated to the root; scan's chain follows rank order (prefixes are by
rank).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import accumulate

from collsim.algorithms.chunks import chunk_count, chunk_region, cost_chunks
from collsim.algorithms.order import rooted_order
from collsim.algorithms.registry import Cost, register
from collsim.program import Job, Op, Parallel, Program, Recv, Send
from collsim.tags import TAGS, Tags

CHAIN_SOURCE = "Thakur, Rabenseifner & Gropp 2005; Pješivac-Grbović et al. 2007 (pipeline)"


def chain_steps(rank: int, job: Job, chain: Sequence[int], reduce: bool, tags: Tags = TAGS,
                region: tuple[int, int] | None = None, chunks: int | None = None,
                lane: int = 0) -> Program:
    """Pipeline ``buf`` (or its ``region``, (offset, count)) down ``chain`` (a sequence of
    every rank) in ``chunks`` chunks (default: of the job's chunk size); combine on the way
    if ``reduce``; sends go on ``lane``. Step i forwards chunk i-1 to the successor while
    chunk i arrives from the predecessor, so both transfers of a hop are posted together
    (they must meet)."""
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
                            lane=lane))
        if prev is not None and i < chunks:
            ops.append(Recv(prev, tags[i], *chunk_region(offset, count, chunks, i),
                            reduce=reduce, lane=lane))
        if ops:
            yield tuple(ops)


def window_chain_steps(rank: int, chain: Sequence[int], reduce: bool, tags: Tags,
                       chunks: Sequence[Sequence[tuple[int, int]]], lane: int, window: int,
                       whole: Callable[[int, int], bool] = lambda a, b: False) -> Program:
    """Pipeline ``chunks`` down ``chain`` with up to ``window`` of them in flight on each
    hop; a chunk is a list of contiguous units (regions), forwarded unit by unit on a hop
    unless ``whole(sender, receiver)`` says that hop moves whole chunks (NCCL's network
    proxy sends a step once all of it is in its buffer). The pieces a rank relays (units,
    or chunks when either of its hops moves them whole) are dealt to ``window`` slots, each
    relaying its pieces in turn (receive, then forward while receiving its next); the sends
    of a hop go in order on their connection (``Send.ordered``), so a piece's latency
    overlaps the next pieces' bytes. Unit i of the whole pipeline has tag ``tags[i]``; a
    whole chunk has the tag of its first unit."""
    pos = chain.index(rank)
    prev = chain[pos - 1] if pos > 0 else None
    succ = chain[pos + 1] if pos + 1 < len(chain) else None
    whole_in = prev is not None and whole(prev, rank)
    whole_out = succ is not None and whole(rank, succ)
    first = list(accumulate((len(chunk) for chunk in chunks[:-1]), initial=0))
    if whole_in or whole_out:
        pieces = [list(range(f, f + len(chunk))) for f, chunk in zip(first, chunks, strict=True)]
    else:
        pieces = [[i] for i in range(sum(len(chunk) for chunk in chunks))]
    units = [unit for chunk in chunks for unit in chunk]

    def moved(piece: list[int], as_whole: bool) -> list[tuple[int, int, int]]:
        """(tag index, offset, count) of each message carrying ``piece`` on a hop."""
        if as_whole:
            return [(piece[0], units[piece[0]][0], sum(units[i][1] for i in piece))]
        return [(i, *units[i]) for i in piece]

    def slot(mine: list[list[int]]) -> Program:
        for j in range(len(mine) + 1):
            ops: list[Op] = []
            if succ is not None and j >= 1:
                ops += [Send(succ, tags[i], offset, count, lane=lane, ordered=True)
                        for i, offset, count in moved(mine[j - 1], whole_out)]
            if prev is not None and j < len(mine):
                ops += [Recv(prev, tags[i], offset, count, reduce=reduce, lane=lane)
                        for i, offset, count in moved(mine[j], whole_in)]
            if ops:
                yield tuple(ops)

    slots = [slot(pieces[s::window]) for s in range(min(window, len(pieces)))]
    if len(slots) == 1:
        yield from slots[0]
    elif slots:
        yield Parallel(slots)


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
