"""The data interpreter: runs per-rank programs on numpy buffers, with no notion of time,
and checks every rank's final buffers against the collective's numpy definition."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from collsim.collectives import REDUCE_OPS, expected_result, initial_buffers, inputs_for
from collsim.engine.rendezvous import Rendezvous, bad_count, bad_peer, deadlock_message
from collsim.errors import SimulationError
from collsim.program import Copy, Job, Parallel, Pause, ProgramFactory, Recv, Reduce, Send


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


class _Thread:
    """One thread of a rank: its program, its operations still outstanding, and the thread
    that forked it (a ``Parallel`` step), if any."""

    __slots__ = ("rank", "program", "outstanding", "parent", "waiting_on", "done")

    def __init__(self, rank: int, program: Iterator, parent: _Thread | None = None) -> None:
        self.rank = rank
        self.program = program
        self.outstanding = 0
        self.parent = parent
        self.waiting_on: list = []
        self.done = False


def run_data(programs: ProgramFactory, job: Job, op: str, buffers: list[dict[str, np.ndarray]]
             ) -> DataRun:
    """Run every rank's program to the end on ``buffers`` (changed in place; one dict per
    rank, helper ranks included).

    A message moves when its send and its receive have both been posted, by the timing
    interpreter's rendezvous rule, so a program that deadlocks there deadlocks here too.
    """
    ufunc = REDUCE_OPS[op]
    p = job.all_ranks
    # Posted, unmatched: a send as (its thread, its data, what its rank had heard), a
    # receive as (its thread, itself).
    rendezvous = Rendezvous()
    heard = [1 << r for r in range(p)]
    mains = [_Thread(r, programs(r, job)) for r in range(p)]
    threads = list(mains)
    ready: deque[_Thread] = deque(mains)
    messages = 0

    def finish_op(thread: _Thread) -> None:
        thread.outstanding -= 1
        if thread.outstanding == 0:
            ready.append(thread)

    def deliver(src: _Thread, dst: _Thread, o: Recv, data: np.ndarray, knowledge: int
                ) -> None:
        nonlocal messages
        if len(data) != o.count:
            raise bad_count(src.rank, dst.rank, o, len(data))
        region = _region(buffers[dst.rank], o.buf, o.offset, o.count, dst.rank, o)
        if o.reduce:
            ufunc(region, data, out=region)
        else:
            region[...] = data
        heard[dst.rank] |= knowledge
        messages += 1
        finish_op(src)
        finish_op(dst)

    def post(thread: _Thread, step) -> None:
        rank = thread.rank
        kind = type(step)
        if kind is Parallel:
            children = [_Thread(rank, iter(sub), thread) for sub in step.programs]
            threads.extend(children)
            thread.waiting_on = []
            thread.outstanding = len(children)
            ready.extend(children)
            if not children:
                ready.append(thread)
            return
        ops = step if kind is tuple or kind is list else (step,)
        thread.waiting_on = ops
        mine = buffers[rank]
        # A step's local operations apply first, in order; then every send takes its region
        # as it stands, whatever a receive of the same step may deliver into it.
        links = 0
        for o in ops:
            kind = type(o)
            if kind is Send or kind is Recv:
                if o.peer == rank or not 0 <= o.peer < p:
                    raise bad_peer(rank, o)
                links += 1
            elif kind is Reduce:
                src = _region(mine, o.src_buf, o.src_offset, o.count, rank, o)
                dst = _region(mine, o.dst_buf, o.dst_offset, o.count, rank, o)
                ufunc(dst, src, out=dst)
            elif kind is Copy:
                if o.runs < 0:
                    raise SimulationError(f"rank {rank}: {o} has a negative number of runs")
                for i in range(o.runs):
                    src = _region(mine, o.src_buf, o.src_offset + i * o.src_stride,
                                  o.count, rank, o)
                    dst = _region(mine, o.dst_buf, o.dst_offset + i * o.dst_stride,
                                  o.count, rank, o)
                    dst[...] = src
            elif kind is Pause:
                continue  # time only
            elif kind is Parallel:
                raise SimulationError(f"rank {rank}: a Parallel step must be a step by "
                                      "itself, not part of a tuple of operations")
            else:
                raise SimulationError(f"rank {rank}: the program yielded {o!r}, not an operation")
        knowledge = heard[rank]
        snapshots = [_region(mine, o.buf, o.offset, o.count, rank, o).copy()
                     if type(o) is Send else None for o in ops]
        thread.outstanding = links
        if not links:
            ready.append(thread)
            return
        for o, snapshot in zip(ops, snapshots, strict=True):
            kind = type(o)
            if kind is Send:
                recv = rendezvous.send((rank, o.peer, o.tag), (thread, snapshot, knowledge))
                if recv is not None:
                    deliver(thread, recv[0], recv[1], snapshot, knowledge)
            elif kind is Recv:
                sent = rendezvous.recv((o.peer, rank, o.tag), (thread, o))
                if sent is not None:
                    deliver(sent[0], thread, o, sent[1], sent[2])

    while ready:
        thread = ready.popleft()
        if thread.outstanding or thread.done:
            continue
        try:
            step = next(thread.program)
        except StopIteration:
            thread.done = True
            if thread.parent is not None:
                finish_op(thread.parent)
            continue
        post(thread, step)
    stuck = [r for r in range(p) if not mains[r].done]
    if stuck:
        waits: dict[int, list] = {}
        for thread in threads:
            if not thread.done:
                waits.setdefault(thread.rank, []).extend(thread.waiting_on)
        raise SimulationError(deadlock_message(stuck, waits))
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
    for helper in job.helpers:  # scratch only: nothing of theirs is checked
        size = helper.scratch or job.count
        buffers.append({"buf": np.full(size, 55, dtype=dtype),
                        "tmp": np.full(size, 55, dtype=dtype)})
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
        if needs_all and run.heard_from[r] & everyone != everyone:
            missing = [q for q in range(job.nranks) if not run.heard_from[r] >> q & 1]
            raise AssertionError(
                f"{job.collective}: rank {r} finished before hearing from ranks {missing[:8]}")
    return run
