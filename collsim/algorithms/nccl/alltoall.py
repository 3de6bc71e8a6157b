"""NCCL's alltoall: a group of one send and one receive per peer (nccl-tests' alltoall,
``ncclGroupStart``/``ncclSend``/``ncclRecv``), laid out as NCCL's p2p schedule lays it out
(:mod:`collsim.nccl.p2p_schedule`, docs/nccl.md#algorithms-p2p).

Round i pairs every rank with the peers of NCCL's node-aware order; the round's operation is
cut into ``peer_channels`` parts on consecutive channels from the round's base channel; each
of the ``channels`` channels runs its operations in batches of at most ``batch`` rounds
(NCCL: 8, from one group of 8 rounds), a batch's sends and receives posted together and the
batches one after another. Channels running the same batches are one lane. The own block is a
local copy.

On machines with NCCL figures the call runs on NCCL's p2p channels, parts and batches
(``collsim.calls.plan``). Elsewhere the defaults, 1 part and 1 operation per batch, deal the
rounds over the channels one at a time: one channel is the pairwise exchange, p-1 or more
``direct``.

Not modelled: PXN (a send to another node through the GPU on the receiver's rail), the limit
on work batches per kernel launch (a larger group is split over several launches).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from collsim.algorithms.registry import Cost, register
from collsim.nccl.p2p_schedule import P2pPlan, p2p_plan, part_bounds, round_peers
from collsim.program import Copy, Job, Parallel, Program, Recv, Send, block


def plan_of(job: Job) -> P2pPlan:
    """The job's layout (set by :func:`_prepare`), or the one its parameters give."""
    if isinstance(job.layout, P2pPlan):
        return job.layout
    return _layout(job.nodes or (0,) * job.nranks, job.params)


def _layout(nodes: Any, params: Any) -> P2pPlan:
    return p2p_plan(nodes, int(params.get("channels", 1)), int(params.get("peer_channels", 1)),
                    int(params.get("batch", 1)))


def _cost(c: Cost) -> float:
    """One α per batch on the busiest channel, every byte through the rank's port."""
    if c.p == 1:
        return 0.0
    return _layout((0,) * c.p, c.params).waves * c.alpha + (c.p - 1) / c.p * c.n * c.beta


def _lane(rank: int, job: Job, plan: P2pPlan, lane: int,
          peers: list[tuple[int, int]]) -> Program:
    """The batches of one lane, each a tuple of its rounds' sends and receives."""
    p, n, parts = job.nranks, job.count, plan.parts
    slot = block(n, p, rank)[1]
    bounds = part_bounds(slot, parts, job.itemsize)
    for batch in plan.lanes[lane].batches:
        step = []
        for round_ in batch:
            to, frm = peers[round_]
            offset, length = block(n, p, to)
            cuts = part_bounds(length, parts, job.itemsize)
            for on, first, end in plan.runs[round_]:
                if on != lane:
                    continue
                tag = round_ * parts + first
                if cuts[end] > cuts[first] or (length == 0 and first == 0):
                    step.append(Send(to, tag, offset + cuts[first], cuts[end] - cuts[first],
                                     buf="in", lane=lane))
                if bounds[end] > bounds[first] or (slot == 0 and first == 0):
                    step.append(Recv(frm, tag, frm * slot + bounds[first],
                                     bounds[end] - bounds[first], buf="out", lane=lane))
        if step:
            yield tuple(step)


def _prepare(job: Job, topology: Any, gpus: list[int]) -> Job:
    plan = _layout(job.nodes or (0,) * job.nranks, job.params)
    return replace(job, layout=plan, lanes=plan.weights)


@register(
    "alltoall", "nccl_p2p",
    formula="b·α + (p-1)/p·n·β, b = batches one after another on the busiest channel",
    cost=_cost,
    source="NCCL src/init.cc ncclP2pSchedule, src/include/channel.h "
           "ncclP2pChannelBaseForRound, src/enqueue.cc ncclAddWorkBatchToPlan (grouped "
           "ncclSend/ncclRecv), docs/nccl.md#algorithms-p2p",
    summary="NCCL's alltoall: one send and one receive per peer in NCCL's round order, each "
            "round on its channels, a channel running up to `batch` rounds at once",
    params=("channels", "peer_channels", "batch"),
    prepare=_prepare,
)
def nccl_alltoall(rank: int, job: Job) -> Program:
    """The own block copied; the lanes' batches side by side."""
    p, n = job.nranks, job.count
    slot = block(n, p, rank)[1]
    yield Copy("out", rank * slot, "in", block(n, p, rank)[0], slot)
    if p == 1:
        return
    plan = plan_of(job)
    peers = round_peers(job.nodes or (0,) * p, rank)
    lanes = [_lane(rank, job, plan, lane, peers) for lane in range(len(plan.lanes))]
    if len(lanes) > 1:
        yield Parallel(lanes)
    else:
        yield from lanes[0]
