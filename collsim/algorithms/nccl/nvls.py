"""NCCL's NVLS (NVLink SHARP): the NVSwitch reduces and multicasts
(docs/nccl.md#algorithms-in-switch; NCCL src/device/all_reduce.h ``runNvls``, all_gather.h and
reduce_scatter.h NVLS variants).

Every node's NVSwitch is a helper rank. Per channel NCCL moves chunks of 128 KiB
(``NCCL_NVLS_CHUNKSIZE``); all channels carry equal pieces over the same links, so they run
as one lane of weight ``channels``. An allreduce goes in loops of ``heads × chunk_size`` a
channel (``runNvls``, ``runNvlsTree``: ``loopCount``; every head of the node reduces one
chunk of each loop; a node has one head per GPU, at most 32). On one node a loop streams:
each GPU's scatter is a copy into its own share of the multicast buffer, and a head's
multicast loads and stores overlap element by element, so the pipeline's unit is one
channel's chunk (``channels × chunk_size`` for the lane). Across nodes a head sends its
slice of a loop to the network as one step, so there the unit is the loop
(``channels × heads × chunk_size``): a head's message is ``channels × chunk_size``.

- **allreduce, one node** (``multimem.ld_reduce`` then ``multimem.st``): each GPU sends
  chunk i to the switch, which combines the copies and returns slice g of the sum to head g
  (the GPU that loads it; the first min(p, 32) GPUs are heads); head g stores the slice
  back and the switch multicasts the chunk to every GPU. A head's links carry
  n(1 + 1/heads) each way, any other GPU's n. The four hops run as a pipeline of steps:
  step j moves chunk j up, slice j-1 down, slice j-2 up and chunk j-3 down. Under NCCL's
  costs every GPU also pays NCCL's scatter and gather, which copy a loop's chunks one head
  after another (:func:`serial_steps`).
- **allreduce across nodes** (NCCL pairs NVLS with CollNet there): each chunk is cut into one
  slice per head (slice h: the node's GPU ``h mod size``, in rank order); the switch sends
  the other GPUs' sum of slice h to its head, which combines it into its own, reduces it
  through SHARP (:func:`~collsim.algorithms.nccl.switches.plan_sharp`: its leaf, a top above
  the leaves), receives the global sum back and hands it to its NVSwitch, which multicasts
  the whole chunk to the node's GPUs. The switch holds every chunk in flight.
- **allgather, reducescatter** (one node only, as NCCL 2.19+): each GPU's block goes up
  once and the switch multicasts it to the others; or each GPU sends every block up and the
  switch sends block b's sum to GPU b.

Not modelled: NVLS's register-buffer paths; the multicast of allgather reaching the GPU
that stores the block as well.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
    nvls_chunk_bytes,
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
from collsim.callspec import CallSpec, gpus_per_node
from collsim.errors import InputError
from collsim.nccl.constants import COLLNET_DIRECT_ARITY_US
from collsim.nccl.search import nvls_heads
from collsim.params import CallParams
from collsim.program import Copy, Job, Op, Parallel, Pause, Program, Recv, Reduce, Send, block
from collsim.tags import TAGS

SOURCE = ("NCCL src/device/all_reduce.h runNvls, src/transport/nvls.cc (NCCL_NVLS_CHUNKSIZE "
          "128 KiB), docs/nccl.md#nvls")
UP, DOWN, PARTIAL, NET_UP, NET_DOWN, RESULT, TREE_UP, TREE_DOWN = TAGS.phases(8)


def heads_of(nodes: list[tuple[int, ...]]) -> int:
    """Slices each chunk is cut into across nodes: one per GPU of the largest node."""
    return max(len(ranks) for ranks in nodes)


def tree_heads(nodes: list[tuple[int, ...]]) -> int:
    """NVLSTree's heads a node, hence its slices across nodes: one per GPU, at most
    ``NCCL_MAX_NVLS_ARITY`` (NCCL's NVLS graph search, src/graph/search.cc: ``maxChannels =
    min(NCCL_MAX_NVLS_ARITY, GPUs)``, one head per NIC:GPU pair), so a 64- or 72-GPU rack
    crosses to the next through 32 of its NICs."""
    return nvls_heads(heads_of(nodes))


def head(ranks: tuple[int, ...], h: int) -> int:
    """The GPU of a node that heads slice ``h``."""
    return ranks[h % len(ranks)]


def lane_chunks(job: Job, stages: int) -> list[tuple[int, int]]:
    """The buffer's chunks across nodes, one per NCCL loop: ``channels × heads ×
    chunk_size`` each (every head sends ``chunk_size`` of it a channel to the network),
    capped for ``stages`` hops."""
    return stream_chunks(job, stages, nvls_heads(heads_of(node_groups(job))))


def stream_chunks(job: Job, stages: int, heads: int = 1) -> list[tuple[int, int]]:
    """The buffer's chunks on one node, where loops stream: ``channels × chunk_size`` each
    (``heads`` times that for :func:`lane_chunks`), capped for ``stages`` hops."""
    k = chunks(job.count, channels_of(job) * heads, chunk_elements(job), stages)
    return regions(0, job.count, k)


ONE_NODE_STAGES = 4  # up, the loaded slice down, the stored slice up, the multicast down


def one_node_cost(c: Cost) -> float:
    """One node: k + 3 steps, step j paying α/2 and the larger of the bytes up and down
    (:func:`one_node_step_bytes`), k chunks of channels × chunk_size (at most 192)."""
    if c.p == 1:
        return 0.0
    k = _cost_chunks(c, c.n, ONE_NODE_STAGES)
    heads = nvls_heads(c.p)
    return sum(c.alpha / 2 + max(one_node_step_bytes(j, k, c.n / k, heads)) * c.beta
               for j in range(k + 3))


def one_node_step_bytes(j: int, k: int, chunk: float, heads: int) -> tuple[float, float]:
    """Bytes (up, down) on a head's links in step j of k chunks: chunk j up and the stored
    slice of chunk j-2; the loaded slice of chunk j-1 and the multicast of chunk j-3 down."""
    piece = chunk / heads
    up = chunk * (j < k) + piece * (2 <= j <= k + 1)
    down = piece * (1 <= j <= k) + chunk * (3 <= j <= k + 2)
    return up, down


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
                cs: list[tuple[int, int]], m: int | None = None) -> Program:
    """Node ``node``'s NVSwitch across nodes: it sends slice h of each chunk's sum to the
    slice's head and multicasts the global sums the heads hand back (``m`` slices, one per
    GPU of the largest node unless given)."""
    local = nodes[node]
    m = heads_of(nodes) if m is None else m
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
    if len(nodes) == 1:
        yield from one_node_allreduce(rank, job)
        return
    m = heads_of(nodes)
    cs = lane_chunks(job, 6)
    plan = slice_plan(job, nodes, p + len(nodes))
    if rank >= p + len(nodes):
        yield from slice_switch(job, plan, rank, cs, m)
        return
    if rank >= p:
        yield from node_switch(job, nodes, rank - p, cs)
        return
    node = next(k for k, ranks in enumerate(nodes) if rank in ranks)
    threads = gpu_threads(p + node, cs)
    switch = p + node
    for h in headed(rank, nodes[node], m):
        net = plan.trees[h].parent(rank)
        piece = [slices(c, m)[h] for c in cs]
        threads += [relay_steps(piece, others_partial(switch, nodes[node], h, m),
                                [(net, NET_UP.part(h, m))], 0),
                    relay_steps(piece, [(net, NET_DOWN.part(h, m), False)],
                                [(switch, RESULT.part(h, m))], 0)]
    yield Parallel(threads)


def one_node_allreduce(rank: int, job: Job) -> Program:
    """One node: head g (the first :func:`~collsim.nccl.search.nvls_heads` GPUs) loads slice
    g of each chunk's sum from the switch and stores it back for the switch to multicast;
    every GPU and the switch (rank p) step together, step j moving chunk j up, slice j-1
    down, slice j-2 up and chunk j-3 down. With ``arity_us`` (NCCL's costs) each GPU also
    spends that long per chunk on its scatter and on its gather (:func:`serial_steps`)."""
    p, width = job.nranks, job.count
    cs = stream_chunks(job, ONE_NODE_STAGES)
    k = len(cs)
    heads = nvls_heads(p)
    piece = [slices(c, heads) for c in cs]
    lead, each, tail = serial_steps(job, k, heads)
    if rank < p and lead:
        yield Pause(lead)
    for j in range(k + 3):
        ops: list[Op] = []
        if rank == p:
            if j < k:
                ops += [Recv(g, UP[j], g * width + cs[j][0], cs[j][1], buf="tmp")
                        for g in range(p)]
            if 1 <= j <= k:
                ops += [Send(g, PARTIAL[j - 1], *piece[j - 1][g]) for g in range(heads)]
            if 2 <= j <= k + 1:
                ops += [Recv(g, RESULT[j - 2], *piece[j - 2][g]) for g in range(heads)]
            if j >= 3:
                ops += [Send(g, DOWN[j - 3], *cs[j - 3]) for g in range(p)]
        else:
            if j < k:
                ops.append(Send(p, UP[j], *cs[j]))
            if 1 <= j <= k and rank < heads:
                ops.append(Recv(p, PARTIAL[j - 1], *piece[j - 1][rank]))
            if 2 <= j <= k + 1 and rank < heads:
                ops.append(Send(p, RESULT[j - 2], *piece[j - 2][rank]))
            if j >= 3:
                ops.append(Recv(p, DOWN[j - 3], *cs[j - 3]))
            if each[j]:
                ops.append(Pause(each[j]))
        if ops:
            yield tuple(ops)
        if rank == p and j < k:  # chunk j's copies combined before its slices leave
            offset, count = cs[j]
            yield (Copy("buf", offset, "tmp", offset, count),
                   *(Reduce("buf", offset, "tmp", g * width + offset, count)
                     for g in range(1, p)))
    if rank < p and tail:
        yield Pause(tail)


def serial_steps(job: Job, k: int, heads: int) -> tuple[float, list[float], float]:
    """The seconds a GPU spends on NCCL's scatter and gather, one head after another
    (``ScatterGatherOp`` in NCCL's src/device/prims_simple.h copies each head's chunk of a
    loop in turn; a loop is ``heads`` chunks): (before the first step, in each of the k + 3
    steps, after the last). Each chunk costs ``arity_us`` on the scatter and again on the
    gather (NCCL's per-rank "arity serialization" figure). Loop l's scatter runs while loop
    l-1 moves (chunk j's beside step j - heads), so the first loop's comes before the first
    step; loop l's gather runs while loop l+1 moves (chunk j's beside step j + 3 + heads, at
    the latest the last step), the last loop's after the last step. A chunk that stands for
    m of NCCL's (the pipeline's cap, :func:`stream_chunks`) costs m times as much, except in
    the first and last loop, which are NCCL's own."""
    each = [0.0] * (k + 3)
    arity = float(job.params.get("arity_us", 0.0)) * 1e-6
    if arity <= 0:
        return 0.0, each, 0.0
    nccl = -(-job.count // (channels_of(job) * chunk_elements(job)))  # NCCL's chunks
    per_chunk = arity * max(1.0, nccl / k)
    for j in range(heads, k):  # the scatter of chunk j, beside step j - heads
        each[j - heads] += per_chunk
    last = k - 1 - (k - 1) % heads  # the first chunk of the last loop
    for j in range(last):  # the gather of chunk j, beside step j + 3 + heads
        each[min(k + 2, j + 3 + heads)] += per_chunk
    in_last_loop = nccl - heads * ((nccl - 1) // heads)
    return arity * min(heads, nccl), each, arity * in_last_loop


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
ONE_NODE_FORM = ("one node, k = min(⌈n/(channels·chunk)⌉, 192) chunks of c = n/k: k+3 steps, "
                 "step j paying α/2 + β·max(bytes up, bytes down); for k ≥ 3: "
                 "(k+3)·α/2 + (4 + (k-1)(1 + 1/p))·c·β (a GPU-switch hop is half a GPU-GPU "
                 "message; chunk 128 KiB by default)")


def nvls_protocol_params(call: CallSpec, gpus: Sequence[int], protocol: str,
                         channels: int | str) -> CallParams:
    """NVLS's chunk follows the call's size (:func:`nvls_chunk_bytes`) and the chunk sizes the
    machine's ``nccl.environment`` sets (NCCL_NVLS_CHUNKSIZE, NCCL_NVLSTREE_MAX_CHUNKSIZE); an
    allreduce on one node, and NVLSTree's on any, also pays NCCL's per-head scatter and
    gather (``arity_us``: :func:`serial_steps`, and ``loop_serial`` in nvls_tree.py). Not
    charged: NVLS across nodes (with CollNet), whose kernel runs them too."""
    per_node = gpus_per_node(call.topology, gpus)
    implied: CallParams = {}
    if "chunk_size" not in call.params:
        heads = nvls_heads(max(per_node.values(), default=1))
        figures = call.topology.machine.nccl if call.topology.machine is not None else None
        environment = figures.environment if figures is not None else {}
        implied["chunk_size"] = nvls_chunk_bytes(
            call.algorithm, call.size_bytes, int(channels), heads, len(per_node),
            nvls_chunk=environment.get("NCCL_NVLS_CHUNKSIZE", NVLS_CHUNK_BYTES),
            tree_max=environment.get("NCCL_NVLSTREE_MAX_CHUNKSIZE"))
    if call.collective == "allreduce" and (len(per_node) == 1 or call.algorithm == "nvls_tree"):
        implied["arity_us"] = COLLNET_DIRECT_ARITY_US
    return implied


@register(
    "allreduce", "nvls",
    formula=ONE_NODE_FORM,
    cost=one_node_cost,
    source=SOURCE,
    summary="NVLink SHARP: each GPU sends its chunks to the NVSwitch, which reduces and "
            "multicasts them; across nodes each slice's head goes through a SHARP switch",
    params=PARAMS,
    prepare=_prepare_allreduce,
    protocol_params=nvls_protocol_params,
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
    source="NCCL src/device/all_gather.h (NVLS, 2.19+), docs/nccl.md#nvls",
    summary="NVLink SHARP on one node: each GPU sends its block's chunks to the NVSwitch, "
            "which multicasts them to the other GPUs",
    params=PARAMS,
    prepare=lambda job, topology, gpus: _one_node(job, topology, gpus, "nvls allgather"),
    protocol_params=nvls_protocol_params,
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
    source="NCCL src/device/reduce_scatter.h (NVLS, 2.19+), docs/nccl.md#nvls",
    summary="NVLink SHARP on one node: each GPU sends every block's chunks to the NVSwitch, "
            "which sends block b's sum to GPU b",
    params=PARAMS,
    prepare=lambda job, topology, gpus: _one_node(job, topology, gpus, "nvls reducescatter"),
    protocol_params=nvls_protocol_params,
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
