"""What NCCL's in-switch algorithms (NVLS, CollNet) share: the switches their helper ranks
sit on, the machine's permission to reduce there, the chunks they pipeline, and the program
of a reducing switch.

A helper rank's program is the same whatever switch it stands for: it receives one copy of
each chunk from every source into a slot of its scratch ``tmp`` (slot j at ``j·width``),
combines the slots into ``buf`` and sends the result on, while the next chunk comes in.
The switch's own combining is free (NVLS's and SHARP's reduction rates are folded into the
links' efficiency by the cost model, :mod:`collsim.nccl.protocols`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from collsim.errors import InputError
from collsim.hardware.topology import Topology
from collsim.nccl.constants import (
    NVLS_CHUNK_BYTES,
    NVLS_CHUNK_RULES,
    NVLS_TREE_CHUNK_RULES,
    NVLS_TREE_MAX_CHUNK,
)
from collsim.program import (
    Copy,
    HelperRank,
    Job,
    Op,
    Parallel,
    Program,
    Recv,
    Reduce,
    Send,
    block,
)
from collsim.tags import Tags

# A pipeline of s stages runs at most ⌈(s-1)·64⌉ chunks: with fewer, larger chunks the fill
# costs at most 1/64 of the streaming time more than with NCCL's chunks, and the simulation
# stays at a few hundred messages per GPU whatever the size.
MAX_FILL_ERROR = 1 / 64
# Algorithms whose programs need helper ranks on switches (their jobs declare them).
SWITCH_ALGORITHMS = ("nvls", "nvls_tree", "collnet_direct", "collnet_chain")
CANONICAL = ("switch",)  # canonical kinds whose one switch may stand for a reducing switch


def chunk_cap(stages: int) -> int:
    """Chunks a pipeline of ``stages`` hops runs at most (see :data:`MAX_FILL_ERROR`)."""
    return max(1, math.ceil((stages - 1) / MAX_FILL_ERROR))


def chunks(count: int, weight: int, chunk_elements: int, stages: int) -> int:
    """Chunks of a region of ``count`` elements moved by ``weight`` channels of
    ``chunk_elements`` each: at least one, at most the cap."""
    return min(max(1, -(-count // (weight * chunk_elements))), chunk_cap(stages))


def regions(offset: int, count: int, k: int) -> list[tuple[int, int]]:
    """The ``k`` chunks of ``[offset, offset + count)``, balanced."""
    return [(offset + block(count, k, i)[0], block(count, k, i)[1]) for i in range(k)]


def slices(chunk: tuple[int, int], parts: int) -> list[tuple[int, int]]:
    """``chunk`` cut into ``parts`` balanced slices (one per head)."""
    offset, count = chunk
    return [(offset + block(count, parts, h)[0], block(count, parts, h)[1])
            for h in range(parts)]


def channels_of(job: Job) -> int:
    """The job's ``channels`` parameter (1 when unset)."""
    return int(job.params.get("channels", 1))


def nvls_chunk_bytes(algorithm: str, size: int, channels: int, heads: int, nodes: int, *,
                     nvls_chunk: int = NVLS_CHUNK_BYTES, tree_max: int | None = None) -> int:
    """NCCL's NVLS chunk per channel for a call of ``size`` bytes on ``channels`` channels
    and ``heads`` NVLS heads per node: ``nvls_chunk`` (NCCL_NVLS_CHUNKSIZE, 128 KiB), less for
    smaller calls and, for NVLSTree, at most ``tree_max`` (NCCL_NVLSTREE_MAX_CHUNKSIZE; unset:
    64 KiB from 4 nodes on) (:data:`~collsim.nccl.constants.NVLS_CHUNK_RULES`). Not modelled:
    NVLS across nodes capped at 32 KiB when NCCL's model gives it under 150 GB/s."""
    chunk, rules = nvls_chunk, NVLS_CHUNK_RULES
    if algorithm == "nvls_tree":
        rules = NVLS_TREE_CHUNK_RULES
        least_nodes, most = NVLS_TREE_MAX_CHUNK
        if tree_max is not None:
            chunk = min(chunk, tree_max)
        elif nodes >= least_nodes:
            chunk = min(chunk, most)
    ops = max(1, channels) * max(1, heads)
    for factor, smaller in rules:
        if size < factor * ops * chunk and chunk > smaller:
            chunk = smaller
    return chunk


def chunk_elements(job: Job) -> int:
    """NVLS's chunk (``chunk_size``, 128 KiB by default) in elements."""
    return job.chunk_elements(NVLS_CHUNK_BYTES)


def node_groups(job: Job) -> list[tuple[int, ...]]:
    """The job's ranks by node (``job.nodes``), nodes in order of their first rank."""
    groups: dict[int, list[int]] = {}
    for rank in range(job.nranks):
        groups.setdefault(job.node_of(rank), []).append(rank)
    return [tuple(ranks) for ranks in groups.values()]


def with_helpers(job: Job, names: Sequence[str], scratch: Sequence[int]) -> Job:
    """``job`` with one helper rank per name (rank ``nranks + i`` on ``names[i]``), each with
    ``scratch[i]`` elements of ``buf`` and ``tmp``."""
    return replace(job, helpers=tuple(HelperRank(name, scratch=max(1, size))
                                      for name, size in zip(names, scratch, strict=True)))


def require(topology: Topology, flag: str, algorithm: str) -> None:
    """Refuse a machine that does not declare the switches able to reduce (``nvls`` for the
    NVSwitch, ``sharp`` for the network); the canonical ``switch`` stands for an ideal one."""
    if topology.kind in CANONICAL:
        return
    machine = topology.machine
    figures = None if machine is None else machine.nccl
    if figures is None or not getattr(figures, flag):
        what = ("its NVSwitch can reduce and multicast (NVLink SHARP)" if flag == "nvls"
                else "its network switches can reduce (SHARP)")
        raise InputError(f"{algorithm} needs a machine whose file declares that {what}: "
                         f"topology '{topology.name}' has no 'nccl: {{{flag}: true}}'",
                         key=f"nccl.{flag}")


def nvswitch_of(topology: Topology, gpu: int, algorithm: str) -> str:
    """The endpoint of the NVSwitch of ``gpu``'s node (the canonical switch on ``switch``)."""
    if topology.kind in CANONICAL:
        return topology.endpoints()[0].name
    name = topology.nvswitch(topology.node_of[gpu])
    if name is None:
        raise InputError(f"{algorithm} needs NVSwitch nodes; topology '{topology.name}' "
                         f"has none", key="topology")
    return name


def nearest_switches(topology: Topology, gpus: Sequence[int]) -> list[str]:
    """The network switches every one of ``gpus`` reaches in the fewest hops, in the
    topology's order (empty when they reach none)."""
    found: list[tuple[int, str]] = []
    for endpoint in topology.endpoints():
        if endpoint.kind == "nvswitch":
            continue
        try:
            hops = max(len(topology.route(g, endpoint.index)) for g in gpus)
        except ValueError:
            continue
        found.append((hops, endpoint.name))
    fewest = min((hops for hops, _ in found), default=0)
    return [name for hops, name in found if hops == fewest]


@dataclass(frozen=True)
class SharpTree:
    """How one group of heads reduces in the network (SHARP's aggregation tree): each head
    sends to its leaf (a helper rank), the leaves to the top; without leaves the heads send
    to the top directly. ``leaves``: (helper rank, the heads under it)."""

    heads: tuple[int, ...]
    top: int
    leaves: tuple[tuple[int, tuple[int, ...]], ...] = ()

    def parent(self, head: int) -> int:
        """The helper rank ``head`` sends its copy to."""
        return next((leaf for leaf, under in self.leaves if head in under), self.top)

    @property
    def sources(self) -> tuple[int, ...]:
        """The ranks the top combines: the leaves, or the heads."""
        return tuple(leaf for leaf, _ in self.leaves) or self.heads


@dataclass(frozen=True)
class SharpPlan:
    """The network reductions of a call: one tree per group of heads, the helper ranks'
    endpoint names (in rank order from the first network helper) and the NCCL layout the
    plan was made with, if any."""

    trees: tuple[SharpTree, ...]
    names: tuple[str, ...]
    layout: Any = None


def plan_sharp(groups: Sequence[Sequence[int]], first: int,
               leaf_of: Callable[[int], str] | None = None,
               top_of: Callable[[list[str], int], str] | None = None) -> SharpPlan:
    """One tree per group of heads, helper ranks from ``first`` on. ``leaf_of(head)`` names
    the switch a head reaches first; groups whose heads reach several get a leaf helper on
    each and a top on ``top_of(leaves, group)``. Without ``leaf_of`` every group has one
    switch (named ``net<g>``)."""
    trees, names = [], []
    for g, heads in enumerate(groups):
        under: dict[str, list[int]] = {}
        for head in heads:
            under.setdefault(leaf_of(head) if leaf_of else f"net{g}", []).append(head)
        if len(under) == 1 or top_of is None:
            trees.append(SharpTree(tuple(heads), first + len(names)))
            names.append(next(iter(under)))
            continue
        leaves = []
        for name, members in under.items():
            leaves.append((first + len(names), tuple(members)))
            names.append(name)
        trees.append(SharpTree(tuple(heads), first + len(names), tuple(leaves)))
        names.append(top_of(list(under), g))
    return SharpPlan(tuple(trees), tuple(names))


def machine_sharp(topology: Topology, gpus: Sequence[int], groups: Sequence[Sequence[int]],
                  first: int, algorithm: str) -> SharpPlan:
    """:func:`plan_sharp` on the machine: each head's leaf is the network switch nearest its
    GPU; a group spread over several leaves gets a top switch among those nearest to all of
    them, group g on the (g mod count)-th, so that the groups spread over the spines."""
    def leaf_of(head: int) -> str:
        near = nearest_switches(topology, [gpus[head]])
        if not near:
            raise InputError(f"{algorithm} needs a network switch that every node reaches; "
                             f"topology '{topology.name}' has none", key="topology")
        return near[0]

    def top_of(leaves: list[str], group: int) -> str:
        indices = [topology.endpoint(name) for name in leaves]
        found: list[tuple[int, str]] = []
        for endpoint in topology.endpoints():
            if endpoint.kind == "nvswitch" or endpoint.name in leaves:
                continue
            try:
                hops = max(len(topology.route(i, endpoint.index)) for i in indices)
            except ValueError:
                continue
            found.append((hops, endpoint.name))
        if not found:
            raise InputError(f"{algorithm} needs a switch above {', '.join(leaves)}; "
                             f"topology '{topology.name}' has none", key="topology")
        fewest = min(hops for hops, _ in found)
        tops = [name for hops, name in found if hops == fewest]
        return tops[group % len(tops)]

    if topology.kind in CANONICAL:
        return plan_sharp(groups, first, lambda head: topology.endpoints()[0].name)
    return plan_sharp(groups, first, leaf_of, top_of)


def sharp_helper(plan: SharpPlan, rank: int, pieces: Callable[[int], list[list[tuple[int, int]]]],
                 up: Callable[[int], Any], down: Callable[[int], Any], width: int,
                 lane: Callable[[int], int] = lambda g: 0) -> Program:
    """The program of network helper ``rank`` of ``plan``: a leaf combines its heads'
    copies and sends the sum to the top while it passes the top's results down to them; a
    top combines its sources' copies and sends the result back. ``pieces(g)``: group g's
    chunks (offset, count); ``up(g)``, ``down(g)``: its tag spaces."""
    for g, tree in enumerate(plan.trees):
        if rank == tree.top or any(rank == leaf for leaf, _ in tree.leaves):
            yield from _tree_switch(tree, rank, pieces(g), up(g), down(g), width, lane(g))
            return


def _tree_switch(tree: SharpTree, rank: int, chunks_: Sequence[tuple[int, int]], up: Any,
                 down: Any, width: int, lane: int) -> Program:
    stacked = [[(up[i], *c)] for i, c in enumerate(chunks_)]
    if rank == tree.top:
        def back(i: int) -> list[Send]:
            return [Send(src, down[i], *chunks_[i], lane=lane) for src in tree.sources]
        yield from reducing_switch(tree.sources, stacked, width, back, lane)
        return
    under = next(members for leaf, members in tree.leaves if leaf == rank)

    def to_top(i: int) -> list[Send]:
        return [Send(tree.top, up[i], *chunks_[i], lane=lane)]
    yield Parallel([reducing_switch(under, stacked, width, to_top, lane),
                    _pass_down(chunks_, tree.top, under, down, lane)])


def _pass_down(chunks_: Sequence[tuple[int, int]], top: int, under: Sequence[int], tags: Any,
               lane: int) -> Program:
    """Step i receives chunk i's result from the top while chunk i-1 goes to the heads."""
    for i in range(len(chunks_) + 1):
        ops: list[Op] = []
        if i < len(chunks_):
            ops.append(Recv(top, tags[i], *chunks_[i], lane=lane))
        if i >= 1:
            ops += [Send(head, tags[i - 1], *chunks_[i - 1], lane=lane) for head in under]
        yield tuple(ops)


def reducing_switch(sources: Sequence[int], pieces: Sequence[Sequence[tuple[int, int, int]]],
                    width: int, results: Callable[[int], list[Send]], lane: int = 0
                    ) -> Program:
    """A switch combining one copy of every piece of each chunk from every rank of
    ``sources`` (``pieces[i]``: chunk i's pieces as (tag, offset, count)) and sending
    ``results(i)`` on: step i receives chunk i into ``tmp`` (source j's copy at
    ``j·width`` + the piece's offset) while chunk i-1's results leave; then chunk i is
    combined into ``buf``."""
    for i in range(len(pieces) + 1):
        ops: list[Op] = []
        if i < len(pieces):
            ops += [Recv(src, tag, j * width + offset, count, buf="tmp", lane=lane)
                    for tag, offset, count in pieces[i] for j, src in enumerate(sources)]
        if i >= 1:
            ops += results(i - 1)
        if ops:
            yield tuple(ops)
        if i < len(pieces):
            yield tuple(op for _, offset, count in pieces[i] for op in
                        [Copy("buf", offset, "tmp", offset, count)]
                        + [Reduce("buf", offset, "tmp", j * width + offset, count)
                           for j in range(1, len(sources))])


def send_each(chunks_: Sequence[tuple[int, int]], peers: Sequence[int], tags: Tags,
              lane: int = 0) -> Program:
    """Chunk after chunk to every one of ``peers`` (each step waits for its delivery)."""
    for i, (offset, count) in enumerate(chunks_):
        if peers:
            yield tuple(Send(peer, tags[i], offset, count, lane=lane) for peer in peers)


def receive_each(chunks_: Sequence[tuple[int, int]], peer: int, tags: Tags, lane: int = 0
                 ) -> Program:
    """Chunk after chunk from ``peer`` (posted as soon as the previous one arrived)."""
    for i, (offset, count) in enumerate(chunks_):
        yield Recv(peer, tags[i], offset, count, lane=lane)
