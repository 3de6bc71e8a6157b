"""Direct algorithms: every transfer of a phase is posted at once and the fabric shares the
ports (max-min fair). On ``switch`` each port carries p-1 equal flows, so a phase of blocks
of b bytes takes α + (p-1)·b·β, and the received blocks are combined one after another.
"""

from __future__ import annotations

from collsim.algorithms.registry import even_blocks, register
from collsim.program import Copy, Job, Program, Recv, Send, block
from collsim.tags import TAGS

# The two phases of the allreduces, each in its own tag space.
GATHER, SPREAD = (tags[0] for tags in TAGS.phases(2))

DIRECT_SOURCE = "Thakur, Rabenseifner & Gropp 2005 (every send and receive posted at once)"


def _others(rank: int, p: int) -> list[int]:
    return [q for q in range(p) if q != rank]


@register(
    "allreduce", "direct",
    symmetric=even_blocks,
    formula="2α + 2(p-1)/p·n·β + (p-1)/p·n·γ",
    cost=lambda c: 2 * c.alpha + (c.p - 1) / c.p * c.n * (2 * c.beta + c.gamma)
    if c.p > 1 else 0.0,
    source=DIRECT_SOURCE + "; reduce-scatter then allgather",
    summary="every rank sends block j to rank j, which combines them and sends the result to "
            "every rank",
)
def direct_allreduce(rank: int, job: Job) -> Program:
    """Direct reduce-scatter, then direct allgather of the combined blocks."""
    p, n = job.nranks, job.count
    others = _others(rank, p)
    if not others:
        return
    mine = block(n, p, rank)
    yield tuple([Send(q, GATHER, *block(n, p, q)) for q in others]
                + [Recv(q, GATHER, *mine, reduce=True) for q in others])
    yield tuple([Send(q, SPREAD, *mine) for q in others]
                + [Recv(q, SPREAD, *block(n, p, q)) for q in others])


@register(
    "allreduce", "parameter_server",
    formula="2α + 2(p-1)·n·β + (p-1)·n·γ",
    cost=lambda c: 2 * c.alpha + (c.p - 1) * c.n * (2 * c.beta + c.gamma) if c.p > 1 else 0.0,
    source="Li et al. 2014 (parameter server); course notes: server port carries 2(p-1)·n",
    summary="every rank sends its buffer to rank 0, which combines them and sends the result "
            "back; the course notes' 2α + 2p·n·β counts p workers and a separate server",
)
def parameter_server_allreduce(rank: int, job: Job) -> Program:
    """Rank 0 is the server; its one port carries all 2(p-1) buffers."""
    p, n = job.nranks, job.count
    if p == 1:
        return
    if rank == 0:
        yield tuple(Recv(q, GATHER, 0, n, reduce=True) for q in range(1, p))
        yield tuple(Send(q, SPREAD, 0, n) for q in range(1, p))
    else:
        yield Send(0, GATHER, 0, n)
        yield Recv(0, SPREAD, 0, n)


@register(
    "allgather", "direct",
    symmetric=even_blocks,
    formula="α + (p-1)/p·n·β",
    cost=lambda c: c.alpha + (c.p - 1) / c.p * c.n * c.beta if c.p > 1 else 0.0,
    source=DIRECT_SOURCE,
    summary="every rank sends its block to every other rank at once",
)
def direct_allgather(rank: int, job: Job) -> Program:
    """One step: p-1 sends of the own block, p-1 receives."""
    p, n = job.nranks, job.count
    others = _others(rank, p)
    if others:
        own = block(n, p, rank)
        yield tuple([Send(q, 0, *own) for q in others]
                    + [Recv(q, 0, *block(n, p, q)) for q in others])


@register(
    "reducescatter", "direct",
    symmetric=even_blocks,
    formula="α + (p-1)/p·n·(β + γ)",
    cost=lambda c: c.alpha + (c.p - 1) / c.p * c.n * (c.beta + c.gamma) if c.p > 1 else 0.0,
    source=DIRECT_SOURCE,
    summary="every rank sends block j to rank j at once; rank j combines them",
)
def direct_reducescatter(rank: int, job: Job) -> Program:
    """One step: p-1 sends, p-1 combining receives into the own block."""
    p, n = job.nranks, job.count
    others = _others(rank, p)
    if others:
        yield tuple([Send(q, 0, *block(n, p, q)) for q in others]
                    + [Recv(q, 0, *block(n, p, rank), reduce=True) for q in others])


@register(
    "alltoall", "direct",
    symmetric=even_blocks,
    formula="α + (p-1)/p·n·β",
    cost=lambda c: c.alpha + (c.p - 1) / c.p * c.n * c.beta if c.p > 1 else 0.0,
    source=DIRECT_SOURCE,
    summary="every rank sends block j to rank j at once",
)
def direct_alltoall(rank: int, job: Job) -> Program:
    """Copy the own block, then one step of p-1 sends and p-1 receives."""
    p, n = job.nranks, job.count
    slot = block(n, p, rank)[1]
    yield Copy("out", rank * slot, "in", block(n, p, rank)[0], slot)
    others = _others(rank, p)
    if others:
        yield tuple([Send(q, 0, *block(n, p, q), buf="in") for q in others]
                    + [Recv(q, 0, q * slot, slot, buf="out") for q in others])


@register(
    "gather", "linear",
    formula="α + (p-1)/p·n·β",
    cost=lambda c: c.alpha + (c.p - 1) / c.p * c.n * c.beta if c.p > 1 else 0.0,
    source=DIRECT_SOURCE,
    summary="every rank sends its block to the root at once and the root's port is shared; "
            "the textbook's one-at-a-time linear gather costs (p-1)·α + (p-1)/p·n·β",
    params=("root",),
)
def linear_gather(rank: int, job: Job) -> Program:
    """Non-roots send; the root posts p-1 receives in one step."""
    p, n, root = job.nranks, job.count, job.root
    if p == 1:
        return
    if rank == root:
        yield tuple(Recv(q, 0, *block(n, p, q)) for q in _others(root, p))
    else:
        yield Send(root, 0, *block(n, p, rank))


@register(
    "scatter", "linear",
    formula="α + (p-1)/p·n·β",
    cost=lambda c: c.alpha + (c.p - 1) / c.p * c.n * c.beta if c.p > 1 else 0.0,
    source=DIRECT_SOURCE,
    summary="the root sends every rank its block at once and its port is shared; the "
            "textbook's one-at-a-time linear scatter costs (p-1)·α + (p-1)/p·n·β",
    params=("root",),
)
def linear_scatter(rank: int, job: Job) -> Program:
    """The root posts p-1 sends in one step; the others receive."""
    p, n, root = job.nranks, job.count, job.root
    if p == 1:
        return
    if rank == root:
        yield tuple(Send(q, 0, *block(n, p, q)) for q in _others(root, p))
    else:
        yield Recv(root, 0, *block(n, p, rank))
