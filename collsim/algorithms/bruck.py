"""Bruck's algorithms: ⌈log p⌉ rounds; at round k rank r exchanges with ranks r±2^k, whatever
p is, one message per round. Data sits in the scratch buffer ``tmp`` in rotated order (slot
j belongs to rank r+j).
"""

from __future__ import annotations

from collsim.algorithms.registry import Cost, even_blocks, register
from collsim.program import Copy, Job, Op, Program, Recv, Send, block

BRUCK_SOURCE = "Bruck et al. 1997; Thakur, Rabenseifner & Gropp 2005"


def _rotated_offset(n: int, p: int, rank: int, slot: int) -> int:
    """Offset in ``tmp`` of slot ``slot`` when slot j holds block rank+j (mod p)."""
    start = block(n, p, rank)[0]
    target = rank + slot
    if target <= p:
        return (block(n, p, target)[0] if target < p else n) - start
    return n - start + block(n, p, target - p)[0]


@register(
    "allgather", "bruck",
    symmetric=even_blocks,
    formula="⌈log p⌉·α + (p-1)/p·n·β",
    cost=lambda c: c.log_p * c.alpha + (c.p - 1) / c.p * c.n * c.beta,
    source=BRUCK_SOURCE,
    summary="at round k, send the first min(2^k, p-2^k) gathered blocks to rank r-2^k",
    scratch=lambda job: max(1, job.count),
)
def bruck_allgather(rank: int, job: Job) -> Program:
    """Gather in rotated order in ``tmp``, then copy the blocks to their places in ``buf``."""
    p, n = job.nranks, job.count
    start, length = block(n, p, rank)
    yield Copy("tmp", 0, "buf", start, length)
    distance, rnd = 1, 0
    while distance < p:
        number = min(distance, p - distance)
        have = _rotated_offset(n, p, rank, number)
        lo = _rotated_offset(n, p, rank, distance)
        hi = _rotated_offset(n, p, rank, distance + number)
        yield (Send((rank - distance) % p, rnd, 0, have, buf="tmp"),
               Recv((rank + distance) % p, rnd, lo, hi - lo, buf="tmp"))
        distance *= 2
        rnd += 1
    yield (Copy("buf", start, "tmp", 0, n - start), Copy("buf", 0, "tmp", n - start, start))


def set_bits(p: int, k: int) -> int:
    """How many of 0 .. p-1 have bit ``k`` set: the slots Bruck's all-to-all moves in round k."""
    period, half = 2 << k, 1 << k
    return (p // period) * half + max(0, p % period - half)


def _alltoall_cost(c: Cost) -> float:
    rounds = range(c.log_p)
    return c.log_p * c.alpha + sum(set_bits(c.p, k) for k in rounds) * c.n / c.p * c.beta


def _moves(p: int, width: int, distance: int, area: int, unpack: bool) -> list[Copy]:
    """The copies that pack the slots moved at ``distance`` (those whose index has that bit
    set: runs of ``distance`` slots every ``2·distance``) one after another from offset
    ``area`` of ``tmp``, or with ``unpack`` put them back: one strided copy for the full
    runs and one for a last, shorter run."""
    runs = -(-(p - distance) // (2 * distance))
    last = distance + (runs - 1) * 2 * distance
    full = runs if p - last >= distance else runs - 1
    run, packed_last = distance * width, area + full * distance * width
    moves = []
    if full:
        moves.append(Copy("tmp", distance * width, "tmp", area, run, full, 2 * run, run)
                     if unpack else
                     Copy("tmp", area, "tmp", distance * width, run, full, run, 2 * run))
    if full < runs:
        length = (p - last) * width
        moves.append(Copy("tmp", last * width, "tmp", packed_last, length) if unpack else
                     Copy("tmp", packed_last, "tmp", last * width, length))
    return moves


def _moved(p: int, width: int, distance: int) -> int:
    """Elements packed at ``distance``: every slot whose index has that bit set."""
    return ((p // (2 * distance)) * distance + max(0, p % (2 * distance) - distance)) * width


@register(
    "alltoall", "bruck",
    symmetric=even_blocks,
    formula="⌈log p⌉·α + n/p·β·Σₖ #{j < p : bit k of j set}  "
            "(= ⌈log p⌉·(α + n/2·β) for p = 2^k)",
    cost=_alltoall_cost,
    source=BRUCK_SOURCE,
    summary="at round k, forward every slot whose distance has bit k set to rank r+2^k, "
            "packed in one message; blocks are padded to the largest when the size does "
            "not divide evenly",
    scratch=lambda job: max(1, (job.nranks + 2 * (job.nranks // 2))
                            * block(job.count, job.nranks, 0)[1]),
)
def bruck_alltoall(rank: int, job: Job) -> Program:
    """Rotate into ``tmp`` (slot j holds the block for rank r+j); each round packs the slots
    to move into one message (copies are free) and unpacks what arrives at the start of the
    next step; finally slot (r-s) mod p goes to the output slot of rank s."""
    p, n = job.nranks, job.count
    width = block(n, p, 0)[1]
    start = block(n, p, rank)[0]
    send_area, recv_area = p * width, (p + p // 2) * width
    if n % p == 0:
        yield (Copy("tmp", 0, "in", start, n - start), Copy("tmp", n - start, "in", 0, start))
    else:
        yield tuple(Copy("tmp", j * width, "in", *block(n, p, (rank + j) % p)) for j in range(p))
    unpack: list[Op] = []
    distance, rnd = 1, 0
    while distance < p:
        size = _moved(p, width, distance)
        yield tuple(unpack + _moves(p, width, distance, send_area, unpack=False) + [
            Send((rank + distance) % p, rnd, send_area, size, buf="tmp"),
            Recv((rank - distance) % p, rnd, recv_area, size, buf="tmp")])
        unpack = _moves(p, width, distance, recv_area, unpack=True)
        distance *= 2
        rnd += 1
    # Slot (r - s) mod p goes to the output slot of rank s: s = 0..r read slots r..0, then
    # s = r+1..p-1 read slots p-1..r+1.
    mine = block(n, p, rank)[1]
    final = [Copy("out", 0, "tmp", rank * width, mine, rank + 1, mine, -width)]
    if rank + 1 < p:
        final.append(Copy("out", (rank + 1) * mine, "tmp", (p - 1) * width, mine, p - 1 - rank,
                          mine, -width))
    yield tuple(unpack + final)
