"""Recursive doubling and halving: log2 p rounds of pairwise exchanges at distances 1, 2, 4, ...
(doubling) or p/2, p/4, ..., 1 (halving).

When p is not a power of two, MPICH's fold-in (:mod:`fold`) runs the power-of-two algorithm on
``q = 2^⌊log p⌋`` ranks, with one extra step before and one after. Transfers start only when
both partners have posted them, so ranks that skip the fold-in wait for their partners instead
of contending with them, and the closed forms (fold-in steps added) hold for every p. Where
the rounds move whole blocks of the p ranks, the folded ranks, which stand for two blocks,
make the rounds of newrank 0 the longest: ``Σ_{d=1,2,…,q/2} (α + (d + min(d, r))·n/p·…)``
with ``r = p - q``.
"""

from __future__ import annotations

from collections.abc import Callable

from collsim.algorithms.fold import Fold
from collsim.algorithms.registry import Cost, half_shift, register
from collsim.program import Job, Program, Recv, Send, block
from collsim.tags import TAGS

RD_SOURCE = "Thakur, Rabenseifner & Gropp 2005; MPICH (fold-in for other p)"
# The parts of these algorithms, each in its own tag space; a round's messages are tagged
# by the round's number.
FOLD_IN, FOLD_OUT, HALVING, DOUBLING = TAGS.phases(4)
# region(first, number): the buffer region of the blocks newranks first..first+number-1 hold
Region = Callable[[int, int], tuple[int, int]]


def _floor_log(p: int) -> int:
    return p.bit_length() - 1


def _folded(c: Cost) -> bool:
    return c.p & (c.p - 1) != 0


def fold_in_steps(rank: int, fold: Fold, offset: int, count: int, reduce: bool) -> Program:
    """The step before the rounds: in each folded pair the even rank hands its region to the
    odd rank (combining it there if ``reduce``)."""
    if rank < 2 * fold.rem:
        if rank % 2 == 0:
            yield Send(rank + 1, FOLD_IN[0], offset, count)
        else:
            yield Recv(rank - 1, FOLD_IN[0], offset, count, reduce=reduce)


def fold_out_steps(rank: int, fold: Fold, offset: int, count: int) -> Program:
    """The step after the rounds: the odd rank of each folded pair hands the region back."""
    if rank < 2 * fold.rem:
        if rank % 2:
            yield Send(rank - 1, FOLD_OUT[0], offset, count)
        else:
            yield Recv(rank + 1, FOLD_OUT[0], offset, count)


def halving_steps(fold: Fold, newrank: int, region: Region, reduce: bool = True) -> Program:
    """Recursive halving over the folded ranks: at distance d the group of 2d ranks splits,
    each half keeping the blocks of its own ranks combined. ``region(first, number)`` gives the
    buffer region of the blocks owned by newranks ``first .. first+number-1``."""
    distance, rnd = fold.pof2 // 2, 0
    while distance >= 1:
        partner = newrank ^ distance
        keep = newrank & ~(distance - 1)
        give = partner & ~(distance - 1)
        peer = fold.oldrank(partner)
        yield (Send(peer, HALVING[rnd], *region(give, distance)),
               Recv(peer, HALVING[rnd], *region(keep, distance), reduce=reduce))
        distance //= 2
        rnd += 1


def doubling_steps(fold: Fold, newrank: int, region: Region) -> Program:
    """Recursive doubling allgather over the folded ranks: at distance d each rank swaps the
    blocks of its group of d ranks with its partner's group."""
    distance, rnd = 1, 0
    while distance < fold.pof2:
        partner = newrank ^ distance
        mine = newrank & ~(distance - 1)
        theirs = partner & ~(distance - 1)
        peer = fold.oldrank(partner)
        yield (Send(peer, DOUBLING[rnd], *region(mine, distance)),
               Recv(peer, DOUBLING[rnd], *region(theirs, distance)))
        distance *= 2
        rnd += 1


def _fold_cost(c: Cost, pre: float, post: float) -> float:
    return (2 * c.alpha + pre + post) if _folded(c) else 0.0


@register(
    "allreduce", "recursive_doubling",
    symmetric=half_shift,
    formula="⌈log p⌉·(α + n·β + n·γ) for p = 2^k; other p: ⌊log p⌋·(α + n·β + n·γ) "
            "+ 2α + 2n·β + n·γ (fold-in)",
    cost=lambda c: _floor_log(c.p) * (c.alpha + c.n * (c.beta + c.gamma))
    + _fold_cost(c, c.n * (c.beta + c.gamma), c.n * c.beta),
    source=RD_SOURCE,
    summary="partners at distance 1, 2, 4, ... swap and combine the whole buffer",
)
def recursive_doubling_allreduce(rank: int, job: Job) -> Program:
    """Recursive doubling allreduce (whole-buffer exchanges)."""
    fold, n = Fold(job.nranks), job.count
    yield from fold_in_steps(rank, fold, 0, n, reduce=True)
    newrank = fold.newrank(rank)
    if newrank is not None:
        distance, rnd = 1, 0
        while distance < fold.pof2:
            peer = fold.oldrank(newrank ^ distance)
            yield (Send(peer, DOUBLING[rnd], 0, n),
                   Recv(peer, DOUBLING[rnd], 0, n, reduce=True))
            distance *= 2
            rnd += 1
    yield from fold_out_steps(rank, fold, 0, n)


def _halving_doubling_cost(c: Cost) -> float:
    q = 1 << _floor_log(c.p)
    spread = (q - 1) / q * c.n
    return 2 * _floor_log(c.p) * c.alpha + spread * (2 * c.beta + c.gamma) \
        + _fold_cost(c, c.n * (c.beta + c.gamma), c.n * c.beta)


@register(
    "allreduce", "halving_doubling",
    symmetric=half_shift,
    formula="2⌈log p⌉·α + 2(p-1)/p·n·β + (p-1)/p·n·γ for p = 2^k; other p: the same with "
            "q = 2^⌊log p⌋ in place of p, + 2α + 2n·β + n·γ (fold-in)",
    cost=_halving_doubling_cost,
    source="Rabenseifner 2004; Thakur, Rabenseifner & Gropp 2005; MPICH (fold-in)",
    summary="recursive-halving reduce-scatter, then recursive-doubling allgather",
)
def halving_doubling_allreduce(rank: int, job: Job) -> Program:
    """Rabenseifner's allreduce on 2^⌊log p⌋ blocks of the buffer."""
    fold, n = Fold(job.nranks), job.count
    yield from fold_in_steps(rank, fold, 0, n, reduce=True)
    newrank = fold.newrank(rank)
    if newrank is not None:
        region = _block_runs(n, fold.pof2, lambda first: first)
        yield from halving_steps(fold, newrank, region)
        yield from doubling_steps(fold, newrank, region)
    yield from fold_out_steps(rank, fold, 0, n)


def _block_runs(count: int, parts: int, first_block: Callable[[int], int]) -> Region:
    """``region(first, number)``: the buffer region of the blocks (``count`` cut into ``parts``)
    that newranks ``first .. first+number-1`` stand for, ``first_block`` mapping a newrank to
    its first block."""
    base, extra = divmod(count, parts)

    def region(first: int, number: int) -> tuple[int, int]:
        lo, hi = first_block(first), first_block(first + number)
        start = lo * base + min(lo, extra)
        return start, hi * base + min(hi, extra) - start

    return region


def _rank_blocks(job: Job, fold: Fold) -> Region:
    """Region of the blocks of the original ranks that newranks ``first..first+number-1``
    stand for (a folded pair stands for two)."""
    return _block_runs(job.count, job.nranks, fold.first_block)


def _blocks_moved(p: int) -> int:
    """Blocks newrank 0 moves over the rounds when folded pairs stand for two blocks each:
    Σ over distances d = 1, 2, ..., q/2 of d + min(d, p - q)."""
    q = 1 << _floor_log(p)
    return sum(d + min(d, p - q) for d in (1 << i for i in range(_floor_log(p))))


def _allgather_rd_cost(c: Cost) -> float:
    return _floor_log(c.p) * c.alpha + _blocks_moved(c.p) * c.n / c.p * c.beta \
        + _fold_cost(c, c.n / c.p * c.beta, c.n * c.beta)


@register(
    "allgather", "recursive_doubling",
    symmetric=half_shift,
    formula="⌈log p⌉·α + (p-1)/p·n·β for p = 2^k; other p (q = 2^⌊log p⌋, r = p-q): "
            "⌊log p⌋·α + Σ_{d=1,2,…,q/2} (d + min(d, r))·n/p·β + 2α + n/p·β + n·β (fold-in)",
    cost=_allgather_rd_cost,
    source=RD_SOURCE,
    summary="partners at distance 1, 2, 4, ... swap everything they have gathered",
)
def recursive_doubling_allgather(rank: int, job: Job) -> Program:
    """Recursive doubling allgather."""
    fold, p, n = Fold(job.nranks), job.nranks, job.count
    if rank < 2 * fold.rem:
        mine = rank - rank % 2
        yield from fold_in_steps(rank, fold, *block(n, p, mine), reduce=False)
    newrank = fold.newrank(rank)
    if newrank is not None:
        yield from doubling_steps(fold, newrank, _rank_blocks(job, fold))
    yield from fold_out_steps(rank, fold, 0, n)


def _halving_rs_cost(c: Cost) -> float:
    return _floor_log(c.p) * c.alpha + _blocks_moved(c.p) * c.n / c.p * (c.beta + c.gamma) \
        + _fold_cost(c, c.n * (c.beta + c.gamma), c.n / c.p * c.beta)


@register(
    "reducescatter", "recursive_halving",
    symmetric=half_shift,
    formula="⌈log p⌉·α + (p-1)/p·n·(β + γ) for p = 2^k; other p (q = 2^⌊log p⌋, r = p-q): "
            "⌊log p⌋·α + Σ_{d=1,2,…,q/2} (d + min(d, r))·n/p·(β + γ) + 2α + n·(β + γ) + n/p·β "
            "(fold-in)",
    cost=_halving_rs_cost,
    source=RD_SOURCE,
    summary="partners at distance p/2, p/4, ... swap and combine half of what they hold",
)
def recursive_halving_reducescatter(rank: int, job: Job) -> Program:
    """Recursive halving reduce-scatter; block r ends at rank r."""
    fold, p, n = Fold(job.nranks), job.nranks, job.count
    yield from fold_in_steps(rank, fold, 0, n, reduce=True)
    newrank = fold.newrank(rank)
    if newrank is not None:
        yield from halving_steps(fold, newrank, _rank_blocks(job, fold))
    if rank < 2 * fold.rem:
        even = rank - rank % 2
        yield from fold_out_steps(rank, fold, *block(n, p, even))
