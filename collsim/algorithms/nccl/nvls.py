"""NCCL's NVLS (NVLink SHARP): the NVSwitch reduces and multicasts (notes §3.5; NCCL
src/device/all_reduce.h ``runNvls``, all_gather.h and reduce_scatter.h NVLS variants).

Every node's NVSwitch is a helper rank. Per channel NCCL moves chunks of 128 KiB
(``NCCL_NVLS_CHUNKSIZE``); all channels carry equal pieces over the same links, so they run
as one lane of weight ``channels``, cut into chunks of ``channels × chunk_size``.

- **allreduce, one node**: each GPU sends chunk i to the switch while it receives chunk i-1
  back; the switch combines the copies and multicasts the result to every GPU.
- **allreduce across nodes** (NCCL pairs NVLS with CollNet there): each chunk is cut into one
  slice per head (slice h: the node's GPU ``h mod size``, in rank order); the switch sends
  the node's sum of slice h to its head, the head sends it to the network switch of slice h
  (a SHARP helper), receives the global sum back and hands it to its NVSwitch, which
  multicasts the whole chunk to the node's GPUs.
- **allgather, reducescatter** (one node only, as NCCL 2.19+): each GPU's block goes up
  once and the switch multicasts it to the others; or each GPU sends every block up and the
  switch sends block b's sum to GPU b.

Not modelled: NCCL's ``multimem.ld_reduce`` returning the reduced slice to the GPU that
loads it before that GPU stores it to the multicast address (the switch multicasts directly,
so each GPU's links carry n, not n(1 + 1/p), each way); NVLS's register-buffer paths.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from collsim.algorithms.nccl.switches import (
    NVLS_CHUNK_BYTES,
    channels_of,
    chunk_cap,
    chunk_elements,
    chunks,
    network_switch,
    node_groups,
    nvswitch_of,
    receive_each,
    reducing_switch,
    regions,
    require,
    send_each,
    slices,
    with_helpers,
)
from collsim.algorithms.nccl.tree import relay_steps
from collsim.algorithms.registry import Cost, register
from collsim.errors import InputError
from collsim.program import Job, Op, Parallel, Program, Recv, Send, block
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
    local, p = nodes[node], job.nranks
    pieces = [[(UP[i], *c)] for i, c in enumerate(cs)]
    if len(nodes) == 1:
        def multicast(i: int) -> list[Send]:
            return [Send(g, DOWN[i], *cs[i]) for g in local]
        yield from reducing_switch(local, pieces, job.count, multicast)
        return
    m = heads_of(nodes)

    def to_heads(i: int) -> list[Send]:
        return [Send(head(local, h), PARTIAL.part(h, m)[i], *piece)
                for h, piece in enumerate(slices(cs[i], m))]
    yield Parallel([reducing_switch(local, pieces, job.count, to_heads),
                    _multicast_results(local, cs, m, p)])


def _multicast_results(local: tuple[int, ...], cs: list[tuple[int, int]], m: int, p: int
                       ) -> Program:
    """Step i receives chunk i's global sums from the heads while chunk i-1 is multicast."""
    for i in range(len(cs) + 1):
        ops: list[Op] = []
        if i < len(cs):
            ops += [Recv(head(local, h), RESULT.part(h, m)[i], *piece)
                    for h, piece in enumerate(slices(cs[i], m))]
        if i >= 1:
            ops += [Send(g, DOWN[i - 1], *cs[i - 1]) for g in local]
        yield tuple(ops)


def headed(rank: int, ranks: tuple[int, ...], m: int) -> list[int]:
    """The slices ``rank`` heads in its node."""
    return [h for h in range(m) if head(ranks, h) == rank]


def sharp_switch(job: Job, nodes: list[tuple[int, ...]], h: int, cs: list[tuple[int, int]]
                 ) -> Program:
    """The network switch of slice h (SHARP): combines the heads' copies of slice h of each
    chunk and sends the sum back to every head."""
    m = heads_of(nodes)
    heads = [head(ranks, h) for ranks in nodes]
    piece = [slices(c, m)[h] for c in cs]

    def back(i: int) -> list[Send]:
        return [Send(g, NET_DOWN.part(h, m)[i], *piece[i]) for g in heads]
    yield from reducing_switch(heads, [[(NET_UP.part(h, m)[i], *s)] for i, s in enumerate(piece)],
                               job.count, back)


def _allreduce(rank: int, job: Job) -> Program:
    p = job.nranks
    if p == 1:
        return
    nodes = node_groups(job)
    many = len(nodes) > 1
    cs = lane_chunks(job, 6 if many else 2)
    if rank >= p + len(nodes):
        yield from sharp_switch(job, nodes, rank - p - len(nodes), cs)
        return
    if rank >= p:
        yield from node_switch(job, nodes, rank - p, cs)
        return
    node = next(k for k, ranks in enumerate(nodes) if rank in ranks)
    threads = gpu_threads(p + node, cs)
    if many:
        m, switch = heads_of(nodes), p + node
        for h in headed(rank, nodes[node], m):
            net = p + len(nodes) + h
            piece = [slices(c, m)[h] for c in cs]
            threads += [relay_steps(piece, [(switch, PARTIAL.part(h, m), False)],
                                    [(net, NET_UP.part(h, m))], 0),
                        relay_steps(piece, [(net, NET_DOWN.part(h, m), False)],
                                    [(switch, RESULT.part(h, m))], 0)]
    yield Parallel(threads)


def allreduce_helpers(job: Job, switches: list[str], nets: list[str]) -> Job:
    """``job`` with its NVSwitches (one per node) and, across nodes, one network switch per
    slice, as helper ranks; ``lanes``: one lane of all channels."""
    nodes = node_groups(job)
    scratch = [len(ranks) * job.count for ranks in nodes] + [len(nodes) * job.count] * len(nets)
    return replace(with_helpers(job, switches + nets, scratch), lanes=(channels_of(job),))


def nvls_allreduce_job(job: Job) -> Job:
    """``job`` with its helper ranks named after nothing in particular (for the data
    interpreter, which does not place them)."""
    nodes = node_groups(job)
    nets = [f"net{h}" for h in range(heads_of(nodes))] if len(nodes) > 1 else []
    return allreduce_helpers(job, [f"n{k}.nvswitch" for k in range(len(nodes))], nets)


def _prepare_allreduce(job: Job, topology: Any, gpus: list[int]) -> Job:
    require(topology, "nvls", "nvls")
    nodes = node_groups(job)
    switches = [nvswitch_of(topology, gpus[ranks[0]], "nvls") for ranks in nodes]
    nets: list[str] = []
    if len(nodes) > 1:
        require(topology, "sharp", "nvls across nodes (NCCL runs it with CollNet)")
        nets = [network_switch(topology, [gpus[head(ranks, h)] for ranks in nodes], "nvls")
                for h in range(heads_of(nodes))]
    return allreduce_helpers(job, switches, nets)


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
