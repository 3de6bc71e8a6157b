"""Pairwise exchange: p-1 steps; at step k rank r sends to r+k and receives from r-k, so every
port carries one transfer per step."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from collsim.algorithms.registry import even_blocks, register
from collsim.algorithms.ring import block_lengths
from collsim.engine.lockstep import Exchange
from collsim.program import Copy, Job, Program, Recv, Send, block

PAIRWISE_SOURCE = "Thakur, Rabenseifner & Gropp 2005 (pairwise exchange)"


def pairwise_exchanges(job: Job, reduce: bool) -> Iterator[Exchange]:
    """The p-1 steps as whole steps of every rank (:mod:`collsim.engine.lockstep`): at step
    k rank r sends block r+k (its length) to rank r+k."""
    p = job.nranks
    senders = np.arange(p)
    lengths = block_lengths(job.count, p)
    for k in range(1, p):
        receivers = (senders + k) % p
        yield Exchange(senders, receivers, lengths[receivers], reduce)


@register(
    "reducescatter", "pairwise",
    symmetric=even_blocks,
    formula="(p-1)·α + (p-1)/p·n·(β + γ)",
    cost=lambda c: (c.p - 1) * (c.alpha + c.n / c.p * (c.beta + c.gamma)),
    source=PAIRWISE_SOURCE,
    summary="at step k, send block r+k to rank r+k and combine rank r-k's copy of block r",
    lockstep=lambda job: pairwise_exchanges(job, True),
)
def pairwise_reducescatter(rank: int, job: Job) -> Program:
    """Pairwise-exchange reduce-scatter."""
    p, n = job.nranks, job.count
    for k in range(1, p):
        to, frm = (rank + k) % p, (rank - k) % p
        yield (Send(to, k, *block(n, p, to)), Recv(frm, k, *block(n, p, rank), reduce=True))


@register(
    "alltoall", "pairwise",
    symmetric=even_blocks,
    formula="(p-1)·α + (p-1)/p·n·β",
    cost=lambda c: (c.p - 1) * (c.alpha + c.n / c.p * c.beta),
    source=PAIRWISE_SOURCE,
    summary="at step k, send block r+k to rank r+k and receive rank r-k's block",
    lockstep=lambda job: pairwise_exchanges(job, False),
)
def pairwise_alltoall(rank: int, job: Job) -> Program:
    """Pairwise-exchange all-to-all."""
    p, n = job.nranks, job.count
    slot = block(n, p, rank)[1]
    yield Copy("out", rank * slot, "in", block(n, p, rank)[0], slot)
    for k in range(1, p):
        to, frm = (rank + k) % p, (rank - k) % p
        yield (Send(to, k, *block(n, p, to), buf="in"), Recv(frm, k, frm * slot, slot, buf="out"))
