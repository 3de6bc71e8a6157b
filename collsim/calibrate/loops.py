"""Large calls made of identical loops, timed from three shorter runs of the same loops.

NCCL's ring allreduce runs its buffer in loops of ``channels × ranks × chunk_size``, and
NVLSTree's allreduce streams it in chunks of ``channels × heads × chunk_size``. Once a call is
past its first loops (a ring's first, the trees' fill), every further loop adds the same
period to its time, so a fit need not simulate every loop of its largest sizes: it runs the
call with ``first``, ``first + step`` and ``first + 2 step`` loops (each with the call's own
channels and chunk, so that each loop is the call's), checks that both differences are the
same period (``SAME_PERIOD``), and carries the last run on by that period. Where the check
fails, or the call is too short to gain, the point is simulated in full.

Measured on the Voltage Park 4-node log's picks (``h100-cluster``, 32 GPUs): the ring's loops
each add 5.4176 ms from the first one on, NVLSTree's chunks 43.69 us from the tenth on, the
same to 12 digits; the carried times equal the full runs' to 1e-14
(``tests/test_calibrate_loops.py`` holds them to 1e-12)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from collsim.algorithms.registry import get_algorithm
from collsim.calls.pipelined import nvls_tree_chunks
from collsim.callspec import CallSpec
from collsim.hardware.topology import Topology
from collsim.program import Job
from collsim.simulate import make_call

# Two periods (each over ``step`` loops) within this share of each other count as the same.
SAME_PERIOD = 1e-9


def ring_loops(job: Job) -> int | None:
    """Loops of NCCL's ring allreduce when every channel's piece is whole loops (else None:
    a partial last loop is not one period)."""
    channels = int(job.params.get("channels", 1))
    if "chunk_size" not in job.params:
        return None
    loop = channels * job.nranks * job.chunk_elements()
    return job.count // loop if job.count % loop == 0 else None


def nvls_tree_loops(job: Job) -> int | None:
    """Chunks of NVLSTree's allreduce across nodes."""
    return nvls_tree_chunks(job)


@dataclass(frozen=True)
class Steady:
    """How a family's calls reach their steady period: the loops of a job (None: not whole
    loops), the first run's loops and the step between runs."""

    loops: Callable[[Job], int | None]
    first: int
    step: int


# (collective, algorithm) -> where its loops are steady. The ring's loops are whole rings one
# after the other; NVLSTree's first runs fill its trees (on 4 nodes the 10th chunk is steady).
STEADY: dict[tuple[str, str], Steady] = {
    ("allreduce", "ring"): Steady(ring_loops, 1, 1),
    ("allreduce", "nvls_tree"): Steady(nvls_tree_loops, 12, 2),
}


@dataclass(frozen=True)
class Loops:
    """A call of ``loops`` loops timed from runs of ``runs`` loops, of ``sizes`` bytes."""

    loops: int
    runs: tuple[int, int, int]
    sizes: tuple[int, int, int]


def plan_loops(topology: Topology, collective: str, algorithm: str, gpus: Sequence[int],
               size: int, params: Mapping[str, Any]) -> Loops | None:
    """The short runs that time this call (``params`` as planned: channels, chunk), or None
    where it runs in full: a family without a steady form, a call of too few loops to gain,
    loops that do not divide the buffer, or a short run that would not have its loops."""
    steady = STEADY.get((collective, algorithm))
    if steady is None:
        return None
    total = _loops(topology, collective, algorithm, gpus, size, params, steady)
    runs = (steady.first, steady.first + steady.step, steady.first + 2 * steady.step)
    if total is None or total <= runs[-1] or (total - runs[-1]) % steady.step \
            or size % total:
        return None
    sizes = tuple(size // total * m for m in runs)
    for m, short in zip(runs, sizes, strict=True):
        if _loops(topology, collective, algorithm, gpus, short, params, steady) != m:
            return None
    return Loops(total, runs, sizes)  # type: ignore[arg-type]


def carried(plan: Loops, times: Sequence[float]) -> float | None:
    """The call's time from its short runs' ``times`` (in ``plan.runs`` order), or None when
    their two periods differ (the runs are not steady yet)."""
    (a, b, c), (ta, tb, tc) = plan.runs, times
    before, after = (tb - ta) / (b - a), (tc - tb) / (c - b)
    if abs(after - before) > SAME_PERIOD * max(abs(after), abs(tc)):
        return None
    return tc + after * (plan.loops - c)


def _loops(topology: Topology, collective: str, algorithm: str, gpus: Sequence[int],
           size: int, params: Mapping[str, Any], steady: Steady) -> int | None:
    spec = CallSpec(topology, collective, algorithm, len(gpus), size,
                    {**params, "placement": list(gpus)})
    job, _, _ = make_call(spec, get_algorithm(collective, algorithm))
    return steady.loops(job)
