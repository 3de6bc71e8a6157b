"""sendrecv as nccl-tests' sendrecv_perf runs it (src/sendrecv.cu): every rank r sends its
whole buffer to r+1 and receives r-1's into a second buffer, the send and the receive posted
together (``ncclGroupStart``/``ncclSend``/``ncclRecv``). On one rank the send is to itself, a
local copy.

``direct`` is the textbook exchange; ``nccl_p2p`` is NCCL's p2p path: the same exchange
spread over the channels NCCL gives one operation (:mod:`collsim.nccl.p2p`), one lane of that
many channels, each carrying at most NCCL's 14 GB/s across the network
(:func:`collsim.nccl.protocols.p2p_network_cap`). Every port carries one send and one
receive, so both take α + n·β.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from collsim.algorithms.nccl.switches import channels_of
from collsim.algorithms.registry import Cost, register
from collsim.engine.lockstep import Exchange
from collsim.program import Copy, Job, Program, Recv, Send

FORMULA = "α + n·β (p > 1)"
SOURCE = "nccl-tests src/sendrecv.cu (send to r+1, receive from r-1, grouped)"


def _cost(c: Cost) -> float:
    return c.alpha + c.n * c.beta if c.p > 1 else 0.0


def _any_shift(job: Job, shift: int) -> str | None:
    """Every rank runs the same program with its peers at offsets ±1: any shift works."""
    return None


def _exchange(job: Job) -> list[Exchange] | None:
    """The one step of every rank (none on one rank, where the send is a local copy)."""
    p = job.nranks
    if p < 2:
        return None
    senders = np.arange(p)
    return [Exchange(senders, np.roll(senders, -1), job.count)]


def neighbour_exchange(rank: int, job: Job) -> Program:
    """Send ``in`` to rank+1 and receive rank-1's into ``out``, together."""
    p, n = job.nranks, job.count
    if p == 1:
        yield Copy("out", 0, "in", 0, n)
        return
    yield (Send((rank + 1) % p, 0, 0, n, buf="in"), Recv((rank - 1) % p, 0, 0, n, buf="out"))


def _prepare(job: Job, topology: Any, gpus: list[int]) -> Job:
    """One lane standing for the operation's channels."""
    return replace(job, lanes=(max(1, channels_of(job)),))


register(
    "sendrecv", "direct",
    formula=FORMULA, cost=_cost, source=SOURCE,
    summary="every rank sends its buffer to rank r+1 and receives rank r-1's at once",
    symmetric=_any_shift, lockstep=_exchange,
)(neighbour_exchange)

register(
    "sendrecv", "nccl_p2p",
    formula=FORMULA, cost=_cost,
    source=SOURCE + "; NCCL src/enqueue.cc addP2pToPlan, src/graph/paths.cc "
           "ncclTopoComputeP2pChannels (channels), docs/nccl.md#algorithms-p2p",
    summary="NCCL's p2p path: one send and one receive grouped, over the channels NCCL gives "
            "one operation of the size",
    params=("channels",), prepare=_prepare, symmetric=_any_shift, lockstep=_exchange,
)(neighbour_exchange)
