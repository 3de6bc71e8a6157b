"""Pipelined binary-tree broadcast: chunks flow down a complete binary tree; an inner node
forwards each chunk to its two children at once (they share its port).

Positions follow the ring order rotated to the root, numbered in heap order
(:mod:`heap_tree`).
"""

from __future__ import annotations

from collsim.algorithms.chunks import chunk_count, chunk_region, cost_chunks
from collsim.algorithms.heap_tree import HeapTree
from collsim.algorithms.order import rooted_order, rooted_position
from collsim.algorithms.registry import Cost, register
from collsim.program import Job, Op, Program, Recv, Send


def _binary_tree_cost(c: Cost) -> float:
    """The last chunk leaves the root after k steps of α + 2c·β (two children share the port)
    and then goes down the deepest path; a lone deepest leaf (p = 2^D) costs α + c·β."""
    if c.p == 1:
        return 0.0
    k = cost_chunks(c.n, c.params)
    one, two = c.alpha + c.n / k * c.beta, c.alpha + 2 * c.n / k * c.beta
    if c.p == 2:
        return k * one
    depth = c.p.bit_length() - 1
    if c.p == 1 << depth:
        return (k + depth - 2) * two + one
    return (k + depth - 1) * two


@register(
    "broadcast", "binary_tree",
    formula="k = ⌈n/chunk⌉, c = n/k, D = ⌊log p⌋: (k + D - 1)·(α + 2c·β); for p = 2^D ≥ 4: "
            "(k + D - 2)·(α + 2c·β) + α + c·β; for p = 2: k·(α + c·β)",
    cost=_binary_tree_cost,
    source="Pješivac-Grbović et al. 2007; Sanders, Speck & Träff 2009 (pipelined binary tree)",
    summary="chunks pipelined down a complete binary tree; each inner node feeds both "
            "children at once (single-port textbook models feed one child after the "
            "other, paying two α per chunk and level)",
    params=("root", "chunk_size"),
)
def binary_tree_broadcast(rank: int, job: Job) -> Program:
    """Step i sends chunk i-1 to both children while chunk i arrives from the parent."""
    order = rooted_order(job, job.root)
    tree = HeapTree(job.nranks)
    v = rooted_position(job, job.root, rank)
    parent = tree.parent(v)
    children = [order[c] for c in tree.children(v)]
    chunks = chunk_count(job, job.count)
    regions = [chunk_region(0, job.count, chunks, i) for i in range(chunks)]
    source = None if parent is None else order[parent]
    for i in range(chunks + 1):
        ops: list[Op] = []
        if i >= 1:
            ops.extend(Send(child, i - 1, *regions[i - 1]) for child in children)
        if source is not None and i < chunks:
            ops.append(Recv(source, i, *regions[i]))
        if ops:
            yield tuple(ops)
