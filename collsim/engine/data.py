"""The data interpreter: runs per-rank programs on numpy buffers, with no notion of time,
and checks every rank's final buffers against the collective's numpy definition."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from collsim.collectives import REDUCE_OPS, expected_result, initial_buffers, inputs_for
from collsim.errors import SimulationError
from collsim.program import Copy, Job, ProgramFactory, Recv, Reduce, Send


@dataclass
class DataRun:
    """Final buffers of every rank, and which ranks' entry each rank has heard of."""

    buffers: list[dict[str, np.ndarray]]
    heard_from: list[int]  # bit r set: rank r's start causally precedes this rank's end
    messages: int


def _region(buffers: dict[str, np.ndarray], name: str, offset: int, count: int, rank: int,
            what: object) -> np.ndarray:
    array = buffers.get(name)
    if array is None:
        raise SimulationError(f"rank {rank}: {what} names buffer {name!r}, which it does not have")
    if offset < 0 or count < 0 or offset + count > len(array):
        raise SimulationError(
            f"rank {rank}: {what} reaches [{offset}, {offset + count}) of buffer {name!r} "
            f"of {len(array)} elements")
    return array[offset:offset + count]


def run_data(programs: ProgramFactory, job: Job, op: str, buffers: list[dict[str, np.ndarray]]
             ) -> DataRun:
    """Run every rank's program to the end on ``buffers`` (changed in place)."""
    ufunc = REDUCE_OPS[op]
    p = job.nranks
    mailbox: dict[tuple[int, int, int], deque] = {}
    heard = [1 << r for r in range(p)]
    gens = [programs(r, job) for r in range(p)]
    waiting: list[list[Recv] | None] = [None] * p
    active = list(range(p))
    messages = 0

    def post(rank: int, step) -> list[Recv]:
        nonlocal messages
        ops = step if isinstance(step, (tuple, list)) else (step,)
        recvs = []
        for o in ops:
            if isinstance(o, Send):
                if not 0 <= o.peer < p or o.peer == rank:
                    raise SimulationError(f"rank {rank}: {o} sends to an invalid peer")
                data = _region(buffers[rank], o.buf, o.offset, o.count, rank, o).copy()
                mailbox.setdefault((rank, o.peer, o.tag), deque()).append((data, heard[rank]))
                messages += 1
            elif isinstance(o, Recv):
                if not 0 <= o.peer < p or o.peer == rank:
                    raise SimulationError(f"rank {rank}: {o} receives from an invalid peer")
                recvs.append(o)
            elif isinstance(o, (Reduce, Copy)):
                src = _region(buffers[rank], o.src_buf, o.src_offset, o.count, rank, o)
                dst = _region(buffers[rank], o.dst_buf, o.dst_offset, o.count, rank, o)
                if isinstance(o, Reduce):
                    ufunc(dst, src, out=dst)
                else:
                    dst[...] = src
            else:
                raise SimulationError(f"rank {rank}: the program yielded {o!r}, not an operation")
        return recvs

    def complete(rank: int, recvs: list[Recv]) -> list[Recv]:
        left = []
        for o in recvs:
            queue = mailbox.get((o.peer, rank, o.tag))
            if not queue:
                left.append(o)
                continue
            data, knowledge = queue.popleft()
            if len(data) != o.count:
                raise SimulationError(
                    f"rank {rank}: {o} expects {o.count} elements but rank {o.peer} "
                    f"sent {len(data)}")
            dst = _region(buffers[rank], o.buf, o.offset, o.count, rank, o)
            if o.reduce:
                ufunc(dst, data, out=dst)
            else:
                dst[...] = data
            heard[rank] |= knowledge
        return left

    progress = True
    while active and progress:
        progress = False
        still = []
        for rank in active:
            while True:
                if waiting[rank]:
                    left = complete(rank, waiting[rank])
                    progress |= len(left) != len(waiting[rank])
                    waiting[rank] = left
                    if left:
                        break
                try:
                    step = next(gens[rank])
                except StopIteration:
                    waiting[rank] = None
                    progress = True
                    break
                waiting[rank] = post(rank, step)
                progress = True
            if waiting[rank] is not None:
                still.append(rank)
        active = still
    if active:
        stuck = "; ".join(f"rank {r} waits on {', '.join(map(str, waiting[r]))}"
                          for r in active[:8])
        more = f" (and {len(active) - 8} more ranks)" if len(active) > 8 else ""
        raise SimulationError(f"deadlock: {len(active)} ranks cannot finish: {stuck}{more}")
    leftover = sum(len(q) for q in mailbox.values())
    if leftover:
        raise SimulationError(f"{leftover} messages were sent but never received")
    return DataRun(buffers, heard, messages)


def check_algorithm(programs: ProgramFactory, job: Job, op: str = "sum", dtype="float64",
                    seed: int = 0, scratch: int = 0) -> DataRun:
    """Run ``programs`` on random inputs and raise AssertionError where a rank's result is wrong."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    inputs = inputs_for(job, dtype, rng)
    garbage = np.full(job.count + job.nranks, 99, dtype=dtype)
    buffers = []
    for r in range(job.nranks):
        bufs = initial_buffers(job, inputs, r, garbage)
        if scratch:
            bufs["tmp"] = np.full(scratch, 77, dtype=dtype)
        buffers.append(bufs)
    run = run_data(programs, job, op, buffers)
    everyone = (1 << job.nranks) - 1
    for r in range(job.nranks):
        for name, (offset, want) in expected_result(job, inputs, op, r).items():
            got = run.buffers[r][name][offset:offset + len(want)]
            if not np.array_equal(got, want):
                bad = np.flatnonzero(got != want)[:5]
                raise AssertionError(
                    f"{job.collective} p={job.nranks} n={job.count} {op} {dtype}: rank {r} "
                    f"buffer {name!r} wrong at elements {[int(offset + i) for i in bad]}: "
                    f"got {got[bad].tolist()}, want {want[bad].tolist()}")
        needs_all = job.collective == "barrier" or (job.collective == "allreduce" and job.count)
        if needs_all and run.heard_from[r] != everyone:
            missing = [q for q in range(job.nranks) if not run.heard_from[r] >> q & 1]
            raise AssertionError(
                f"{job.collective}: rank {r} finished before hearing from ranks {missing[:8]}")
    return run
