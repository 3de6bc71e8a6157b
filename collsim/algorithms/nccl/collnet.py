"""NCCL's CollNet: the network switches reduce (SHARP), one helper rank per reduction
(notes §3.6; NCCL src/device/all_reduce.h ``runCollNetDirect``, ``runCollNetChain``).

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

from dataclasses import replace
from typing import Any

from collsim.algorithms.nccl.channels import SIMPLE_STEP_BYTES, lane_region, lane_tags
from collsim.algorithms.nccl.nvls import (
    NET_DOWN,
    NET_UP,
    head,
    headed,
    heads_of,
    sharp_switch,
)
from collsim.algorithms.nccl.switches import (
    channels_of,
    chunk_cap,
    chunks,
    network_switch,
    node_groups,
    reducing_switch,
    regions,
    require,
    slices,
    with_helpers,
)
from collsim.algorithms.nccl.tree import relay_steps
from collsim.algorithms.registry import Cost, register
from collsim.nccl.layout import Layout, layout_of, machine_layout
from collsim.program import Job, Parallel, Program, Recv, Send
from collsim.tags import TAGS

SOURCE = "NCCL src/device/all_reduce.h runCollNetDirect, runCollNetChain (notes §3.6)"
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
    if rank >= p:
        yield from sharp_switch(job, nodes, rank - p, cs)
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
        net = p + h
        piece = [pieces[h] for pieces in cut]
        threads += [relay_steps(piece, [(g, LOCAL_UP.part(h, m), True) for g in others],
                                [(net, NET_UP.part(h, m))], 0),
                    relay_steps(piece, [(net, NET_DOWN.part(h, m), False)],
                                [(g, LOCAL_DOWN.part(h, m)) for g in others], 0)]
    yield Parallel(threads)


def collnet_direct_job(job: Job, nets: list[str] | None = None) -> Job:
    """``job`` with one network-switch helper rank per slice (named ``net<h>`` unless
    ``nets`` names them) and one lane of all channels."""
    nodes = node_groups(job)
    m = heads_of(nodes)
    names = nets or [f"net{h}" for h in range(m)]
    return replace(with_helpers(job, names, [len(nodes) * job.count] * m),
                   lanes=(channels_of(job),))


def _prepare_direct(job: Job, topology: Any, gpus: list[int]) -> Job:
    require(topology, "sharp", "collnet_direct")
    nodes = node_groups(job)
    return collnet_direct_job(job, [
        network_switch(topology, [gpus[head(ranks, h)] for ranks in nodes], "collnet_direct")
        for h in range(heads_of(nodes))])


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
    return layout_of(job, channels_of(job))


def _chain(rank: int, job: Job) -> Program:
    p = job.nranks
    if p == 1:
        return
    channels = channels_of(job)
    layout = _chain_layout(job)
    lanes = layout.tree_lanes
    longest = max(len(chain) for chain in layout.channels[0].chains)
    stages = 2 * longest + 2
    if rank >= p:
        lane = rank - p
        laid = layout.channels[lanes.channels[lane][0]]
        offset, count = lane_region(job, channels, lanes, lane)
        cs = regions(offset, count, _chunks(job, count, lanes.weights[lane], stages))
        tags = lane_tags(lanes, lane)
        heads = [chain[0] for chain in laid.chains]

        def back(i: int) -> list[Send]:
            return [Send(g, tags.phase(1)[i], *cs[i], lane=lane) for g in heads]
        yield from reducing_switch(heads, [[(tags.phase(0)[i], *c)] for i, c in enumerate(cs)],
                                   job.count, back, lane)
        return
    threads = []
    for lane, members in enumerate(lanes.channels):
        laid = layout.channels[members[0]]
        chain = laid.chains[layout.node_position[rank]]
        j = chain.index(rank)
        parent = chain[j - 1] if j else p + lane
        children = chain[j + 1:j + 2]
        offset, count = lane_region(job, channels, lanes, lane)
        cs = regions(offset, count, _chunks(job, count, lanes.weights[lane], stages))
        tags = lane_tags(lanes, lane)
        up, down = tags.phase(0), tags.phase(1)
        threads += [relay_steps(cs, [(child, up, True) for child in children],
                                [(parent, up)], lane),
                    relay_steps(cs, [(parent, down, False)],
                                [(child, down) for child in children], lane)]
    yield Parallel(threads)


def collnet_chain_job(job: Job, nets: list[str] | None = None) -> Job:
    """``job`` with one network-switch helper rank per lane of its tree layout (named
    ``net<l>`` unless ``nets`` names them)."""
    lanes = _chain_layout(job).tree_lanes
    names = nets or [f"net{lane}" for lane in range(len(lanes.channels))]
    return replace(with_helpers(job, names, [job.nranks * job.count] * len(names)),
                   lanes=lanes.weights)


def _prepare_chain(job: Job, topology: Any, gpus: list[int]) -> Job:
    require(topology, "sharp", "collnet_chain")
    layout = machine_layout(topology, gpus, channels_of(job))
    job = replace(job, layout=layout)
    nets = [network_switch(topology, [gpus[chain[0]] for chain in
                                      layout.channels[members[0]].chains], "collnet_chain")
            for members in layout.tree_lanes.channels]
    return collnet_chain_job(job, nets)


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
