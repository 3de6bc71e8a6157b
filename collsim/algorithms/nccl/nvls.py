"""NCCL's NVLS (NVLink SHARP): the NVSwitch reduces and multicasts (notes §3.5; NCCL
src/device/all_reduce.h ``runNvls``, all_gather.h and reduce_scatter.h NVLS variants).

Every node's NVSwitch is a helper rank. Per channel NCCL moves chunks of 128 KiB
(``NCCL_NVLS_CHUNKSIZE``); all channels carry equal pieces over the same links, so they run
as one lane of weight ``channels``, cut into chunks of ``channels × chunk_size``.

- **allreduce, one node**: each GPU sends chunk i to the switch while it receives chunk i-1
  back; the switch combines the copies and multicasts the result to every GPU.
- **allreduce across nodes** (NCCL pairs NVLS with CollNet there): each chunk is cut into one
  slice per head (slice h: the node's GPU ``h mod size``, in rank order); the switch sends
  the other GPUs' sum of slice h to its head, which combines it into its own, reduces it
  through SHARP (:func:`~collsim.algorithms.nccl.switches.plan_sharp`: its leaf, a top above
  the leaves), receives the global sum back and hands it to its NVSwitch, which multicasts
  the whole chunk to the node's GPUs. The switch holds every chunk in flight.
- **allgather, reducescatter** (one node only, as NCCL 2.19+): each GPU's block goes up
  once and the switch multicasts it to the others; or each GPU sends every block up and the
  switch sends block b's sum to GPU b.

Not modelled: NCCL's ``multimem.ld_reduce`` returning the reduced slice to the GPU that
loads it before that GPU stores it to the multicast address (the switch multicasts directly,
so each GPU's links carry n, not n(1 + 1/p), each way); NVLS's register-buffer paths.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from collsim.algorithms.nccl.switches import (
    NVLS_CHUNK_BYTES,
    SharpPlan,
    channels_of,
    chunk_cap,
    chunk_elements,
    chunks,
    machine_sharp,
    node_groups,
    nvswitch_of,
    plan_sharp,
    receive_each,
    reducing_switch,
    regions,
    require,
    send_each,
    sharp_helper,
    slices,
    with_helpers,
)
from collsim.algorithms.nccl.tree import relay_steps
from collsim.algorithms.registry import Cost, register
from collsim.errors import InputError
from collsim.program import Copy, Job, Op, Parallel, Program, Recv, Reduce, Send, block
from collsim.tags import TAGS

SOURCE = ("NCCL src/device/all_reduce.h runNvls, src/transport/nvls.cc (NCCL_NVLS_CHUNKSIZE "
          "128 KiB), notes §3.5")
UP, DOWN, PARTIAL, NET_UP, NET_DOWN, RESULT, TREE_UP, TREE_DOWN = TAGS.phases(8)


def heads_of(nodes: list[tuple[int, ...]]) -> int:
    """Slices each chunk is cut into across nodes: one per GPU of the largest node."""
    return max(len(ranks) for ranks in nodes)


def head(ranks: tuple[int, ...], h: int) -> int:
    """The GPU of a node that heads slice ``h``."""
    return ranks[h % len(ranks)]


def lane_chunks(job: Job, stages: int) -> list[tuple[int, int]]:
    """The buffer's chunks: ``channels × chunk_size`` each, capped for ``stages`` hops."""
    k = chunks(job.count, channels_of(job), chunk_elements(job), stages)
    return regions(0, job.count, k)


def one_node_cost(c: Cost) -> float:
    """One node: (k + 1)·(α/2 + n/k·β), k chunks of channels × chunk_size (at most 64)."""
    if c.p == 1:
        return 0.0
    k = _cost_chunks(c, c.n)
    return (k + 1) * (c.alpha / 2 + c.n / k * c.beta)


def _cost_chunks(c: Cost, n: float, stages: int = 2) -> int:
    """The closed forms' chunk count for ``n`` bytes."""
    channels = int(c.params.get("channels", 1))
    chunk = float(c.params.get("chunk_size", NVLS_CHUNK_BYTES))
    return min(max(1, -(-int(n) // int(channels * chunk))), chunk_cap(stages))


# ---------------------------------------------------------------- allreduce


def gpu_threads(switch: int, cs: list[tuple[int, int]]) -> list[Program]:
    """A GPU's chunks up to its switch and the results back, side by side."""
    return [send_each(cs, [switch], UP), receive_each(cs, switch, DOWN)]


def node_switch(job: Job, nodes: list[tuple[int, ...]], node: int,
                cs: list[tuple[int, int]]) -> Program:
    """Node ``node``'s NVSwitch: on one node it multicasts each chunk's sum; across nodes it
    sends slice h of each chunk's sum to the slice's head and multicasts the global sums
    the heads hand back."""
    local = nodes[node]
    pieces = [[(UP[i], *c)] for i, c in enumerate(cs)]
    if len(nodes) == 1:
        def multicast(i: int) -> list[Send]:
            return [Send(g, DOWN[i], *cs[i]) for g in local]
        yield from reducing_switch(local, pieces, job.count, multicast)
        return
    m = heads_of(nodes)
    yield Parallel([_chunk_through(local, cs[i], i, m, job.count) for i in range(len(cs))])


def _chunk_through(local: tuple[int, ...], chunk: tuple[int, int], i: int, m: int,
                   width: int) -> Program:
    """One chunk through a node's NVSwitch across nodes: its copies in; slice h of the other
    GPUs' sum to the slice's head, which combines it into its own; then the global sums
    back from the heads, multicast.

    Each chunk is a thread of its own, so the switch holds every chunk in flight (NCCL's
    buffer slots, here unbounded): a switch that waited for every head before taking the
    next chunk would tie all slices' trees together in lockstep. Leaving the head's own
    copy out lets the head combine what it receives in any order."""
    offset, count = chunk
    yield tuple(Recv(g, UP[i], j * width + offset, count, buf="tmp")
                for j, g in enumerate(local))
    combine: list[Op] = []
    sends: list[Op] = []
    for h, (start, length) in enumerate(slices(chunk, m)):
        others = [j for j, g in enumerate(local) if g != head(local, h)]
        if not others:
            continue
        combine.append(Copy("buf", start, "tmp", others[0] * width + start, length))
        combine += [Reduce("buf", start, "tmp", j * width + start, length) for j in others[1:]]
        sends.append(Send(head(local, h), PARTIAL.part(h, m)[i], start, length))
    if combine:
        yield tuple(combine)
        yield tuple(sends)
    yield tuple(Recv(head(local, h), RESULT.part(h, m)[i], *piece)
                for h, piece in enumerate(slices(chunk, m)))
    yield tuple(Send(g, DOWN[i], *chunk) for g in local)


def others_partial(switch: int, local: tuple[int, ...], h: int, m: int) -> list:
    """What a head of slice h receives from its NVSwitch: the other GPUs' sum, combined
    (nothing on a node of one GPU)."""
    return [(switch, PARTIAL.part(h, m), True)] if len(local) > 1 else []


def headed(rank: int, ranks: tuple[int, ...], m: int) -> list[int]:
    """The slices ``rank`` heads in its node."""
    return [h for h in range(m) if head(ranks, h) == rank]


def slice_plan(job: Job, nodes: list[tuple[int, ...]], first: int) -> SharpPlan:
    """The network reductions of the slices: the one the simulator prepared, else one
    switch per slice (helper ranks from ``first`` on)."""
    plan = job.layout
    if isinstance(plan, SharpPlan) and len(plan.trees) == heads_of(nodes):
        return plan
    return plan_sharp(slice_groups(nodes), first)


def slice_groups(nodes: list[tuple[int, ...]]) -> list[list[int]]:
    """The heads of each slice, one per node."""
    return [[head(ranks, h) for ranks in nodes] for h in range(heads_of(nodes))]


def slice_switch(job: Job, plan: SharpPlan, rank: int, cs: list[tuple[int, int]], m: int
                 ) -> Program:
    """Network helper ``rank``: its part of slice h's aggregation tree."""
    return sharp_helper(plan, rank, lambda h: [slices(c, m)[h] for c in cs],
                        lambda h: NET_UP.part(h, m), lambda h: NET_DOWN.part(h, m), job.count)


def _allreduce(rank: int, job: Job) -> Program:
    p = job.nranks
    if p == 1:
        return
    nodes = node_groups(job)
    many = len(nodes) > 1
    m = heads_of(nodes)
    cs = lane_chunks(job, 6 if many else 2)
    plan = slice_plan(job, nodes, p + len(nodes)) if many else None
    if rank >= p + len(nodes):
        yield from slice_switch(job, plan, rank, cs, m)
        return
    if rank >= p:
        yield from node_switch(job, nodes, rank - p, cs)
        return
    node = next(k for k, ranks in enumerate(nodes) if rank in ranks)
    threads = gpu_threads(p + node, cs)
    if plan is not None:
        switch = p + node
        for h in headed(rank, nodes[node], m):
            net = plan.trees[h].parent(rank)
            piece = [slices(c, m)[h] for c in cs]
            threads += [relay_steps(piece, others_partial(switch, nodes[node], h, m),
                                    [(net, NET_UP.part(h, m))], 0),
                        relay_steps(piece, [(net, NET_DOWN.part(h, m), False)],
                                    [(switch, RESULT.part(h, m))], 0)]
    yield Parallel(threads)


def allreduce_helpers(job: Job, switches: list[str], plan: SharpPlan | None) -> Job:
    """``job`` with its NVSwitches (one per node) and, across nodes, the network switches
    of ``plan`` as helper ranks; ``lanes``: one lane of all channels."""
    nodes = node_groups(job)
    nets = list(plan.names) if plan is not None else []
    scratch = [len(ranks) * job.count for ranks in nodes] + [len(nodes) * job.count] * len(nets)
    return replace(with_helpers(job, switches + nets, scratch), lanes=(channels_of(job),),
                   layout=plan)


def nvls_allreduce_job(job: Job, leaf_of: Callable[[int], str] | None = None) -> Job:
    """``job`` with its helper ranks (for the data interpreter, which does not place them):
    one switch per slice, or with ``leaf_of`` (head -> leaf name) a leaf per name and a top
    above them."""
    nodes = node_groups(job)
    plan = None
    if len(nodes) > 1:
        plan = plan_sharp(slice_groups(nodes), job.nranks + len(nodes), leaf_of,
                          (lambda leaves, g: f"top{g}") if leaf_of else None)
    return allreduce_helpers(job, [f"n{k}.nvswitch" for k in range(len(nodes))], plan)


def _prepare_allreduce(job: Job, topology: Any, gpus: list[int]) -> Job:
    require(topology, "nvls", "nvls")
    nodes = node_groups(job)
    switches = [nvswitch_of(topology, gpus[ranks[0]], "nvls") for ranks in nodes]
    plan = None
    if len(nodes) > 1:
        require(topology, "sharp", "nvls across nodes (NCCL runs it with CollNet)")
        plan = machine_sharp(topology, gpus, slice_groups(nodes), job.nranks + len(nodes),
                             "nvls")
    return allreduce_helpers(job, switches, plan)


PARAMS = ("channels", "chunk_size")


@register(
    "allreduce", "nvls",
    formula="one node, k = min(⌈n/(channels·chunk)⌉, 64): (k+1)·(α/2 + n/k·β) "
            "(a GPU-switch hop is half a GPU-GPU message; chunk 128 KiB by default)",
    cost=one_node_cost,
    source=SOURCE,
    summary="NVLink SHARP: each GPU sends its chunks to the NVSwitch, which reduces and "
            "multicasts them; across nodes each slice's head goes through a SHARP switch",
    params=PARAMS,
    prepare=_prepare_allreduce,
)
def nvls_allreduce(rank: int, job: Job) -> Program:
    """GPUs, NVSwitches and network switches (helper ranks) as laid out above."""
    return _allreduce(rank, job)


# ------------------------------------------------------- allgather, reducescatter


def _one_node(job: Job, topology: Any, gpus: list[int], algorithm: str) -> Job:
    require(topology, "nvls", algorithm)
    nodes = node_groups(job)
    if len(nodes) > 1:
        raise InputError(f"{algorithm} runs on one node only (as NCCL's NVLS "
                         f"{job.collective}); these ranks span {len(nodes)} nodes",
                         key="ranks")
    switch = nvswitch_of(topology, gpus[0], algorithm)
    return replace(with_helpers(job, [switch], [job.nranks * job.count]),
                   lanes=(channels_of(job),))


def nvls_one_node_job(job: Job) -> Job:
    """``job`` with the NVSwitch of its one node as a helper rank (data interpreter)."""
    return replace(with_helpers(job, ["n0.nvswitch"], [job.nranks * job.count]),
                   lanes=(channels_of(job),))


def block_chunks(job: Job) -> list[list[tuple[int, int]]]:
    """Every block's chunks (as many for each block: the largest block's count)."""
    p = job.nranks
    k = chunks(block(job.count, p, 0)[1], channels_of(job), chunk_elements(job), 2)
    return [regions(*block(job.count, p, b), k) for b in range(p)]


def _allgather_cost(c: Cost) -> float:
    """(k+1)·α/2 + n/(pk)·β·(1 + k(p-1)): chunk i of every block goes up while chunk i-1 of
    the other p-1 blocks comes down."""
    if c.p == 1:
        return 0.0
    k = _cost_chunks(c, c.n / c.p)
    return (k + 1) * c.alpha / 2 + c.n / (c.p * k) * c.beta * (1 + k * (c.p - 1))


@register(
    "allgather", "nvls",
    formula="one node, k = min(⌈n/(p·channels·chunk)⌉, 64): (k+1)·α/2 + "
            "n/(p·k)·β·(1 + k(p-1))",
    cost=_allgather_cost,
    source="NCCL src/device/all_gather.h (NVLS, 2.19+), notes §3.5",
    summary="NVLink SHARP on one node: each GPU sends its block's chunks to the NVSwitch, "
            "which multicasts them to the other GPUs",
    params=PARAMS,
    prepare=lambda job, topology, gpus: _one_node(job, topology, gpus, "nvls allgather"),
)
def nvls_allgather(rank: int, job: Job) -> Program:
    """Blocks up once, multicast down to every other GPU."""
    p = job.nranks
    if p == 1:
        return
    blocks = block_chunks(job)
    k = len(blocks[0])
    if rank == p:
        for i in range(k + 1):
            ops: list[Op] = []
            if i < k:
                ops += [Recv(b, UP[i], *blocks[b][i]) for b in range(p)]
            if i >= 1:
                ops += [Send(g, DOWN.part(b, p)[i - 1], *blocks[b][i - 1])
                        for b in range(p) for g in range(p) if g != b]
            yield tuple(ops)
        return
    others = [b for b in range(p) if b != rank]
    yield Parallel([
        send_each(blocks[rank], [p], UP),
        (tuple(Recv(p, DOWN.part(b, p)[i], *blocks[b][i]) for b in others)
         for i in range(k)),
    ])


def _reducescatter_cost(c: Cost) -> float:
    """(k+1)·α/2 + n·β + n/(pk)·β: every block's chunk i goes up while chunk i-1 of the own
    block comes down."""
    if c.p == 1:
        return 0.0
    k = _cost_chunks(c, c.n / c.p)
    return (k + 1) * c.alpha / 2 + c.n * c.beta + c.n / (c.p * k) * c.beta


@register(
    "reducescatter", "nvls",
    formula="one node, k = min(⌈n/(p·channels·chunk)⌉, 64): (k+1)·α/2 + n·β + n/(p·k)·β",
    cost=_reducescatter_cost,
    source="NCCL src/device/reduce_scatter.h (NVLS, 2.19+), notes §3.5",
    summary="NVLink SHARP on one node: each GPU sends every block's chunks to the NVSwitch, "
            "which sends block b's sum to GPU b",
    params=PARAMS,
    prepare=lambda job, topology, gpus: _one_node(job, topology, gpus, "nvls reducescatter"),
)
def nvls_reducescatter(rank: int, job: Job) -> Program:
    """Every block up, each block's sum down to its GPU."""
    p = job.nranks
    if p == 1:
        return
    blocks = block_chunks(job)
    k = len(blocks[0])
    if rank == p:
        def own(i: int) -> list[Send]:
            return [Send(b, DOWN[i], *blocks[b][i]) for b in range(p)]
        yield from reducing_switch(range(p), [[(UP.part(b, p)[i], *blocks[b][i])
                                               for b in range(p)] for i in range(k)],
                                   job.count, own)
        return
    yield Parallel([
        (tuple(Send(p, UP.part(b, p)[i], *blocks[b][i]) for b in range(p)) for i in range(k)),
        (Recv(p, DOWN[i], *blocks[rank][i]) for i in range(k)),
    ])
