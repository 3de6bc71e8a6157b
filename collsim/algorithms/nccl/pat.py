"""NCCL's PAT (Parallel Aggregated Trees) allgather and reduce-scatter, which NCCL runs at
one GPU per node (NCCL 2.23+, src/include/collectives.h ``PatAGAlgorithm`` and
``PatRSAlgorithm``, src/device/prims_simple.h ``patCopy``/``patReduce``;
docs/nccl.md#algorithms-pat).

Every rank's block travels a binomial tree rooted at its rank, all p trees side by side,
and each step aggregates what one rank sends to one peer into one message: ⌈log p⌉ steps
instead of the ring's p-1. Allgather goes farthest first: at distance 2^d (d = ⌈log p⌉-1
down to 0) rank r sends to r + 2^d (mod p) the blocks of ranks r - s for every offset s it
already holds with s + 2^d < p; reduce-scatter is the same schedule reversed, partial sums
going towards their block's rank, combined on arrival. Blocks are packed into the scratch
``tmp`` (copies are free). Channels carry equal pieces on the same peers: one lane of all.

As in NCCL (``(rank + s) % nranks``) block indices wrap mod p, and distances halve (its
``scale``). Not modelled: NCCL's limit on how many blocks one step aggregates (its buffer's
``aggFactor`` splits big steps into several), its chunking of large blocks, and the order in
which it walks the blocks within a step.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from typing import Any

from collsim.algorithms.bruck import BRUCK_SOURCE
from collsim.algorithms.nccl.switches import channels_of
from collsim.algorithms.registry import Cost, register
from collsim.errors import InputError
from collsim.program import Copy, Job, Op, Program, Recv, Reduce, Send, block

SOURCE = ("NCCL src/include/collectives.h PatAGAlgorithm, PatRSAlgorithm (2.23+), "
          "docs/nccl.md#algorithms-pat; "
          f"{BRUCK_SOURCE}")
CANONICAL = ("switch", "fully_connected")


@cache
def schedule(p: int) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """Allgather's steps: (distance, offsets sent), farthest first. At a step a rank sends
    the blocks of ranks ``r - s`` for each offset s to ``r + distance``."""
    held, steps = [0], []
    distance = 1 << max(0, (p - 1).bit_length() - 1) if p > 1 else 0
    while distance >= 1:
        sent = tuple(s for s in held if s + distance < p)
        steps.append((distance, sent))
        held += [s + distance for s in sent]
        distance //= 2
    return tuple(steps)


def _pack(job: Job, blocks: list[int], area: int, to_tmp: bool) -> tuple[list[Copy], int]:
    """Copies of ``blocks`` of ``buf`` into ``tmp`` from ``area`` on (or back, unless
    ``to_tmp``), and the elements they take."""
    copies, at = [], area
    for b in blocks:
        offset, length = block(job.count, job.nranks, b)
        copies.append(Copy("tmp", at, "buf", offset, length) if to_tmp
                      else Copy("buf", offset, "tmp", at, length))
        at += length
    return copies, at - area


def _allgather(rank: int, job: Job) -> Program:
    p, n = job.nranks, job.count
    unpack: list[Op] = []
    for step, (distance, sent) in enumerate(schedule(p)):
        mine = [(rank - s) % p for s in sent]
        theirs = [(rank - distance - s) % p for s in sent]
        pack, size = _pack(job, mine, 0, True)
        landing, incoming = _pack(job, theirs, n, False)
        yield tuple(unpack + pack + [Send((rank + distance) % p, step, 0, size, buf="tmp"),
                                     Recv((rank - distance) % p, step, n, incoming,
                                          buf="tmp")])
        unpack = landing
    if unpack:
        yield tuple(unpack)


def _reducescatter(rank: int, job: Job) -> Program:
    p, n = job.nranks, job.count
    for step, (distance, sent) in enumerate(reversed(schedule(p))):
        mine = [(rank - distance - s) % p for s in sent]    # partial sums going back
        theirs = [(rank - s) % p for s in sent]             # partial sums coming in
        pack, size = _pack(job, mine, 0, True)
        incoming = sum(block(n, p, b)[1] for b in theirs)
        yield tuple(pack + [Send((rank - distance) % p, step, 0, size, buf="tmp"),
                            Recv((rank + distance) % p, step, n, incoming, buf="tmp")])
        at, combine = n, []
        for b in theirs:
            offset, length = block(n, p, b)
            combine.append(Reduce("buf", offset, "tmp", at, length))
            at += length
        yield tuple(combine)


def _prepare(job: Job, topology: Any, gpus: list[int]) -> Job:
    nodes = [topology.node_of[g] for g in gpus]
    if topology.kind not in CANONICAL and len(set(nodes)) < len(nodes):
        raise InputError(f"pat runs at one GPU per node (NCCL enables PAT only there); "
                         f"these {len(gpus)} ranks sit on {len(set(nodes))} nodes",
                         key="ranks")
    return replace(job, lanes=(channels_of(job),))


def _log(c: Cost) -> int:
    return len(schedule(c.p))


@register(
    "allgather", "pat",
    formula="⌈log p⌉·α + (p-1)/p·n·β",
    cost=lambda c: _log(c) * c.alpha + (c.p - 1) / c.p * c.n * c.beta,
    source=SOURCE,
    summary="NCCL's PAT: every rank's block down a binomial tree, farthest peer first, one "
            "aggregated message per step",
    params=("channels",),
    scratch=lambda job: 2 * max(1, job.count),
    prepare=_prepare,
)
def pat_allgather(rank: int, job: Job) -> Program:
    """⌈log p⌉ steps of packed blocks, distances halving."""
    return _allgather(rank, job)


@register(
    "reducescatter", "pat",
    formula="⌈log p⌉·α + (p-1)/p·n·(β + γ)",
    cost=lambda c: _log(c) * c.alpha + (c.p - 1) / c.p * c.n * (c.beta + c.gamma),
    source=SOURCE,
    summary="NCCL's PAT: allgather's schedule reversed, partial sums combined on their way "
            "to their block's rank",
    params=("channels",),
    scratch=lambda job: 2 * max(1, job.count),
    prepare=_prepare,
)
def pat_reducescatter(rank: int, job: Job) -> Program:
    """⌈log p⌉ steps of packed partial sums, distances doubling."""
    return _reducescatter(rank, job)
