"""NCCL's CollNet: the network switches reduce (SHARP), one helper rank per reduction
(docs/nccl.md#algorithms-in-switch; NCCL src/device/all_reduce.h ``runCollNetDirect``,
``runCollNetChain``).

- **collnet_direct**: every chunk is cut into one slice per head (the node's GPU
  ``h mod size``; on an NVSwitch node each GPU heads one slice through its own NIC). Each GPU
  sends slice h of each chunk straight to its node's head h, which combines the node's copies,
  sends the node's sum to the network switch of slice h, receives the global sum back and
  sends it to the node's other GPUs. One lane of all channels.
- **collnet_chain**: per lane of NCCL's tree layout (:mod:`collsim.nccl.layout`), a chain
  through each node's GPUs from the head on the lane's NIC: chunks are combined up the chain,
  the heads send them to the lane's network switch, and the global sums come back down.

The network switch of a group of heads is the switch they all reach in the fewest hops
(a rail, a leaf, or a spine: the top of the aggregation tree SHARP builds; the leaves'
partial reductions under a spine are not modelled). Chunks are NCCL's Simple step (512 KiB
per channel by default: CollNet runs Simple only).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from collsim.algorithms.nccl.channels import SIMPLE_STEP_BYTES, lane_region, lane_tags
from collsim.algorithms.nccl.nvls import (
    NET_DOWN,
    NET_UP,
    head,
    headed,
    heads_of,
    slice_groups,
    slice_plan,
    slice_switch,
)
from collsim.algorithms.nccl.switches import (
    SharpPlan,
    channels_of,
    chunk_cap,
    chunks,
    machine_sharp,
    node_groups,
    plan_sharp,
    regions,
    require,
    sharp_helper,
    slices,
    with_helpers,
)
from collsim.algorithms.nccl.tree import WINDOW, relay_steps
from collsim.algorithms.registry import Cost, register
from collsim.nccl.layout import Layout, layout_of, machine_layout
from collsim.program import Job, Parallel, Program, Recv, Send
from collsim.tags import TAGS

SOURCE = ("NCCL src/device/all_reduce.h runCollNetDirect, runCollNetChain "
          "(docs/nccl.md#algorithms-in-switch)")
LOCAL_UP, LOCAL_DOWN = TAGS.phase(8), TAGS.phase(9)


def _chunks(job: Job, count: int, weight: int, stages: int) -> int:
    return chunks(count, weight, job.chunk_elements(SIMPLE_STEP_BYTES), stages)


def _cost_chunks(c: Cost, stages: int) -> int:
    channels = int(c.params.get("channels", 1))
    chunk = float(c.params.get("chunk_size", SIMPLE_STEP_BYTES))
    return min(max(1, -(-int(c.n) // int(channels * chunk))), chunk_cap(stages))


# ------------------------------------------------------------------ direct


def _direct(rank: int, job: Job) -> Program:
    p = job.nranks
    if p == 1:
        return
    nodes = node_groups(job)
    m = heads_of(nodes)
    cs = regions(0, job.count, _chunks(job, job.count, channels_of(job), 6))
    plan = slice_plan(job, nodes, p)
    if rank >= p:
        yield from slice_switch(job, plan, rank, cs, m)
        return
    local = next(ranks for ranks in nodes if rank in ranks)
    mine = headed(rank, local, m)
    cut = [slices(c, m) for c in cs]

    def up() -> Program:
        for i, pieces in enumerate(cut):
            ops = [Send(head(local, h), LOCAL_UP.part(h, m)[i], *piece)
                   for h, piece in enumerate(pieces) if h not in mine]
            if ops:
                yield tuple(ops)

    def down() -> Program:
        for i, pieces in enumerate(cut):
            ops = [Recv(head(local, h), LOCAL_DOWN.part(h, m)[i], *piece)
                   for h, piece in enumerate(pieces) if h not in mine]
            if ops:
                yield tuple(ops)

    threads = [up(), down()]
    others = [g for g in local if g != rank]
    for h in mine:
        net = plan.trees[h].parent(rank)
        piece = [pieces[h] for pieces in cut]
        threads += [relay_steps(piece, [(g, LOCAL_UP.part(h, m), True) for g in others],
                                [(net, NET_UP.part(h, m))], 0),
                    relay_steps(piece, [(net, NET_DOWN.part(h, m), False)],
                                [(g, LOCAL_DOWN.part(h, m)) for g in others], 0)]
    yield Parallel(threads)


def collnet_direct_job(job: Job, leaf_of: Callable[[int], str] | None = None,
                       plan: SharpPlan | None = None) -> Job:
    """``job`` with the network switches of ``plan`` as helper ranks (by default one per
    slice, or with ``leaf_of`` (head -> leaf name) a leaf per name and a top above them) and
    one lane of all channels."""
    nodes = node_groups(job)
    if plan is None:
        plan = plan_sharp(slice_groups(nodes), job.nranks, leaf_of,
                          (lambda leaves, g: f"top{g}") if leaf_of else None)
    return replace(with_helpers(job, plan.names, [len(nodes) * job.count] * len(plan.names)),
                   lanes=(channels_of(job),), layout=plan)


def _prepare_direct(job: Job, topology: Any, gpus: list[int]) -> Job:
    require(topology, "sharp", "collnet_direct")
    nodes = node_groups(job)
    return collnet_direct_job(job, plan=machine_sharp(topology, gpus, slice_groups(nodes),
                                                      job.nranks, "collnet_direct"))


def _direct_cost(c: Cost) -> float:
    """A model of one node of p GPUs on a switch, k chunks of c = n/k: a chunk's slices go to
    their heads (α + (p-1)/p·c·β, combined), to the switch and back (α + 2c/p·β) and out to
    the GPUs (α + (p-1)/p·c·β); each further chunk adds the busiest port's (2p-1)/p·c·β and
    its combine."""
    if c.p == 1:
        return 0.0
    k = _cost_chunks(c, 6)
    size, p = c.n / k, c.p
    return (3 * c.alpha + (2 * (p - 1) + 2) / p * size * c.beta
            + (k - 1) * (2 * p - 1) / p * size * c.beta + k * (p - 1) / p * size * c.gamma)


@register(
    "allreduce", "collnet_direct",
    formula="a model of one node, k = min(⌈n/(channels·chunk)⌉, 320), c = n/k: "
            "3α + 2c·β + (k-1)·(2p-1)/p·c·β + k·(p-1)/p·c·γ",
    cost=_direct_cost,
    source=SOURCE,
    summary="SHARP: each GPU sends slice h of every chunk to its node's head h, which "
            "reduces it through the network switch and sends the sum back to its node",
    exact="contention",
    params=("channels", "chunk_size"),
    prepare=_prepare_direct,
)
def collnet_direct_allreduce(rank: int, job: Job) -> Program:
    """GPUs, heads and network switches (helper ranks) as laid out above."""
    return _direct(rank, job)


# ------------------------------------------------------------------ chain


def _chain_layout(job: Job) -> Layout:
    """The tree layout the plan was made with, else the job's own."""
    if isinstance(job.layout, SharpPlan) and isinstance(job.layout.layout, Layout):
        return job.layout.layout
    return layout_of(job, channels_of(job))


def _chain_plan(job: Job, layout: Layout) -> SharpPlan:
    """The network reductions of the lanes: the one prepared, else one switch per lane."""
    if isinstance(job.layout, SharpPlan):
        return job.layout
    return plan_sharp(_lane_heads(layout), job.nranks)


def _lane_heads(layout: Layout) -> list[list[int]]:
    """Each lane's heads: the first GPU of every node's chain."""
    return [[chain[0] for chain in layout.channels[members[0]].chains]
            for members in layout.chain_lanes.channels]


def _chain(rank: int, job: Job) -> Program:
    p = job.nranks
    if p == 1:
        return
    channels = channels_of(job)
    layout = _chain_layout(job)
    lanes = layout.chain_lanes
    longest = max(len(chain) for chain in layout.channels[0].chains)
    stages = 2 * longest + 2
    plan = _chain_plan(job, layout)

    def lane_chunks(lane: int) -> list[tuple[int, int]]:
        offset, count = lane_region(job, channels, lanes, lane)
        return regions(offset, count, _chunks(job, count, lanes.weights[lane], stages))
    if rank >= p:
        yield from sharp_helper(plan, rank, lane_chunks,
                                lambda lane: lane_tags(lanes, lane).phase(0),
                                lambda lane: lane_tags(lanes, lane).phase(1), job.count,
                                lambda lane: lane)
        return
    threads = []
    for lane, members in enumerate(lanes.channels):
        laid = layout.channels[members[0]]
        chain = laid.chains[layout.node_position[rank]]
        j = chain.index(rank)
        parent = chain[j - 1] if j else plan.trees[lane].parent(rank)
        children = chain[j + 1:j + 2]
        cs = lane_chunks(lane)
        tags = lane_tags(lanes, lane)
        up, down = tags.phase(0), tags.phase(1)
        threads += [relay_steps(cs, [(child, up, True) for child in children],
                                [(parent, up)], lane, WINDOW),
                    relay_steps(cs, [(parent, down, False)],
                                [(child, down) for child in children], lane, WINDOW)]
    yield Parallel(threads)


def collnet_chain_job(job: Job, leaf_of: Callable[[int], str] | None = None) -> Job:
    """``job`` with one network switch per lane of its chains as helper ranks (or with
    ``leaf_of`` (head -> leaf name) a leaf per name and a top above them)."""
    layout = _chain_layout(job)
    plan = plan_sharp(_lane_heads(layout), job.nranks, leaf_of,
                      (lambda leaves, g: f"top{g}") if leaf_of else None)
    return _declare_chain(job, replace(plan, layout=layout))


def _declare_chain(job: Job, plan: SharpPlan) -> Job:
    return replace(with_helpers(job, plan.names, [job.nranks * job.count] * len(plan.names)),
                   lanes=plan.layout.chain_lanes.weights, layout=plan)


def _prepare_chain(job: Job, topology: Any, gpus: list[int]) -> Job:
    require(topology, "sharp", "collnet_chain")
    layout = machine_layout(topology, gpus, channels_of(job))
    plan = machine_sharp(topology, gpus, _lane_heads(layout), job.nranks, "collnet_chain")
    return _declare_chain(job, replace(plan, layout=layout))


def _chain_cost(c: Cost) -> float:
    """A model of one node of p GPUs on a switch (one chain, its head under the network
    switch), k chunks of c = n/k, as nccl_tree's: a chunk climbs p hops and comes back down,
    each further chunk adding a stage; a GPU's port carries a chunk up and one down in most
    stages, so the bytes cost (p + k - 1)·c·(2β + γ)."""
    if c.p == 1:
        return 0.0
    k = _cost_chunks(c, 2 * c.p + 2)
    size = c.n / k
    return (2 * c.p + k - 1) * c.alpha + (c.p + k - 1) * size * (2 * c.beta + c.gamma)


@register(
    "allreduce", "collnet_chain",
    formula="a model of one node, k = min(⌈n/(channels·chunk)⌉, 64(2p+1)), c = n/k: "
            "(2p + k - 1)·α + (p + k - 1)·c·(2β + γ) (an upper bound)",
    cost=_chain_cost,
    source=SOURCE,
    summary="SHARP: per channel a chain up each node to its head, the heads reduce through "
            "the network switch, the sums come back down the chains",
    exact="contention",
    params=("channels", "chunk_size"),
    prepare=_prepare_chain,
)
def collnet_chain_allreduce(rank: int, job: Job) -> Program:
    """Chains of GPUs and one network switch (helper rank) per lane."""
    return _chain(rank, job)
