"""NCCL's alltoall: a group of one send and one receive per peer (nccl-tests' alltoall,
``ncclGroupStart``/``ncclSend``/``ncclRecv``), scheduled by NCCL's p2p schedule over its
channels (NCCL src/enqueue.cc ``p2pSchedule``/``scheduleP2pTasksToPlan``,
docs/nccl.md#algorithms-p2p).

NCCL orders a rank's peers by step s = 1..p-1 (send to r + s, receive from r - s, so every
pair meets at the same step) and gives each channel its share of the steps; a channel works
through its steps one after another. Here channel w of ``channels`` runs the steps
s ≡ w+1 (mod channels), each a send and a receive posted together, as a lane of its own; the
own block is a local copy. One channel is the pairwise exchange, p-1 channels or more is
``direct``.

Not modelled: NCCL splitting one peer's data over several channels
(``NCCL_NCHANNELS_PER_NET_PEER``), its node-aware ordering of steps across nodes, and the
proxy's limit on connections in flight.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from collsim.algorithms.nccl.switches import channels_of
from collsim.algorithms.registry import Cost, register
from collsim.program import Copy, Job, Parallel, Program, Recv, Send, block


def _cost(c: Cost) -> float:
    """⌈(p-1)/w⌉ rounds of w exchanges sharing each port, w = min(channels, p-1)."""
    if c.p == 1:
        return 0.0
    ways = min(int(c.params.get("channels", 1)), c.p - 1)
    return -(-(c.p - 1) // ways) * c.alpha + (c.p - 1) / c.p * c.n * c.beta


def _steps(rank: int, job: Job, steps: range, lane: int) -> Program:
    p, n = job.nranks, job.count
    slot = block(n, p, rank)[1]
    for s in steps:
        to, frm = (rank + s) % p, (rank - s) % p
        yield (Send(to, s, *block(n, p, to), buf="in", lane=lane),
               Recv(frm, s, frm * slot, slot, buf="out", lane=lane))


def _prepare(job: Job, topology: Any, gpus: list[int]) -> Job:
    ways = max(1, min(channels_of(job), job.nranks - 1))
    return replace(job, lanes=(1,) * ways)


@register(
    "alltoall", "nccl_p2p",
    formula="w = min(channels, p-1): ⌈(p-1)/w⌉·α + (p-1)/p·n·β",
    cost=_cost,
    source="NCCL src/enqueue.cc p2pSchedule (grouped ncclSend/ncclRecv), "
           "docs/nccl.md#algorithms-p2p",
    summary="NCCL's alltoall: one send and one receive per peer, step s to r+s and from "
            "r-s, the steps dealt over the channels, each channel one step at a time",
    params=("channels",),
    prepare=_prepare,
)
def nccl_alltoall(rank: int, job: Job) -> Program:
    """The own block copied; the channels' steps side by side."""
    p, n = job.nranks, job.count
    slot = block(n, p, rank)[1]
    yield Copy("out", rank * slot, "in", block(n, p, rank)[0], slot)
    ways = max(1, min(channels_of(job), p - 1))
    lanes = [_steps(rank, job, range(w + 1, p, ways), w) for w in range(ways)]
    if ways > 1:
        yield Parallel(lanes)
    else:
        yield from lanes[0]
