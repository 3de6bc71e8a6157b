"""What a step cost: step time and, per GPU, compute, exposed communication and bubble,
which add up to the step time on every GPU; MFU; and a row per kind of collective.

On each GPU the step (from time 0 to the end of the last task of any GPU) is cut at every
task boundary. A stretch where the GPU computes is compute; one where it does not compute
but takes part in a call is exposed communication, shared equally among the kinds of call
in progress; the rest is bubble: waiting for a pipeline peer, a late start, or slower GPUs
at the end. A GPU takes part in a call from its arrival (so waiting for late members of a
collective is exposed communication) except a pre-posted pipeline receive, which counts
from the moment both ends are there.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from collsim.units import format_size, format_time

if TYPE_CHECKING:
    from collsim.workloads.executor import Timeline
    from collsim.workloads.plan import Plan


@dataclass
class KindStats:
    """One kind of call (``data allreduce``, ``pipeline send``), averaged over GPUs: calls a
    GPU takes part in, their bytes (nccl-tests' size of each call), the time the GPU spends
    in them, and the part of that time it does not compute."""

    calls: float = 0.0
    bytes: float = 0.0
    time_s: float = 0.0
    exposed_s: float = 0.0


@dataclass
class RankTimes:
    """One GPU's step: compute + exposed + bubble = the step time."""

    compute_s: float
    exposed_s: float
    bubble_s: float
    offset_s: float
    end_s: float


@dataclass
class StepResult:
    name: str
    gpus: int
    layout: dict[str, Any]
    step_s: float
    compute_s: float
    exposed_s: float
    bubble_s: float
    mfu: float | None
    kinds: dict[str, KindStats]
    ranks: list[RankTimes] = field(repr=False)
    # How the calls were timed: "shared" (every call's events on one simulation), "alone"
    # (calls that ran alone on their links timed alone: collsim/workloads/alone.py),
    # "periodic" (a few identical layers run, the rest extended: workloads/periodic.py) or
    # "isolated" (each call alone, contention ignored: --isolated).
    path: str = "shared"
    fallback: str = ""  # why a faster path declined the step

    def to_dict(self, ranks: bool = False) -> dict[str, Any]:
        """The result as JSON-ready data (with every GPU's times if ``ranks``)."""
        out = asdict(self)
        if not ranks:
            del out["ranks"]
        return out

    def __str__(self) -> str:
        return format_result(self)


def _split(rank: int, plan: Plan, timeline: Timeline, step: float,
           kinds: dict[str, KindStats]) -> RankTimes:
    """Cut one GPU's step into compute, exposed communication (per kind) and bubble."""
    edges: list[tuple[float, int, str | None]] = []  # (time, +1/-1, kind or None=compute)
    compute = 0.0
    for index, task in enumerate(plan.tasks[rank]):
        begin, finish = timeline.start[rank][index], timeline.end[rank][index]
        if task.call is None:
            kind = None
            compute += finish - begin
        else:
            kind = task.call.kind
            if task.preposted:
                begin = max(begin, timeline.call_start[task.call.key])
            stats = kinds.setdefault(kind, KindStats())
            stats.calls += 1
            stats.bytes += task.call.size
            stats.time_s += finish - begin
        if finish > begin:
            edges += [(begin, 1, kind), (finish, -1, kind)]
    edges.sort(key=lambda e: (e[0], e[1]))
    computing = 0
    active: dict[str, int] = {}
    exposed = 0.0
    now = 0.0
    for time, change, kind in edges:
        if time > now:
            if not computing and active:
                share = (time - now) / len(active)
                for name in active:
                    kinds[name].exposed_s += share
                exposed += time - now
            now = time
        if kind is None:
            computing += change
        else:
            active[kind] = active.get(kind, 0) + change
            if not active[kind]:
                del active[kind]
    bubble = step - compute - exposed
    if abs(bubble) <= 1e-12 * step:  # what is left of rounding, not a wait
        bubble = 0.0
    ends = timeline.end[rank]
    return RankTimes(compute, exposed, bubble, timeline.offsets[rank],
                     max(ends) if ends else 0.0)


def split_step(plan: Plan, timeline: Timeline
               ) -> tuple[float, list[RankTimes], dict[str, KindStats]]:
    """The step time, each GPU's split of it, and the kinds of call averaged over GPUs
    (only ``plan.tasks`` is read, so a replayed trace's plan is split the same way)."""
    step = max((max(ends) for ends in timeline.end if ends), default=0.0)
    kinds: dict[str, KindStats] = {}
    world = len(plan.tasks)
    ranks = [_split(rank, plan, timeline, step, kinds) for rank in range(world)]
    for stats in kinds.values():
        stats.calls /= world
        stats.bytes /= world
        stats.time_s /= world
        stats.exposed_s /= world
    return step, ranks, kinds


def summarize(plan: Plan, timeline: Timeline) -> StepResult:
    """The step's figures from when every task ran."""
    step, ranks, kinds = split_step(plan, timeline)
    world = plan.world
    mfu = None
    if plan.model_flops is not None and plan.peak and step > 0:
        mfu = plan.model_flops / (step * world * plan.peak)
    layout = plan.layout
    par = plan.workload.parallelism
    return StepResult(
        name=plan.workload.name, gpus=world,
        layout={"tensor": layout.tensor, "data": layout.data, "pipeline": layout.pipeline,
                "expert": layout.expert, "order": list(layout.order), "zero": par.zero,
                "micro_batches": par.micro_batches, "schedule": par.schedule},
        step_s=step,
        compute_s=sum(r.compute_s for r in ranks) / world,
        exposed_s=sum(r.exposed_s for r in ranks) / world,
        bubble_s=sum(r.bubble_s for r in ranks) / world,
        mfu=mfu, kinds=dict(sorted(kinds.items())), ranks=ranks)


PERIODIC = "a few layers per stage simulated, the rest extended: docs/engine.md#step-paths"


def _share(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole > 0 else "-"


def format_result(result: StepResult, topology: str = "") -> str:
    """A readable summary: the layout, the step's parts, and a table of collective kinds."""
    lay = result.layout
    where = f" on {topology}" if topology else ""
    lines = [
        f"{result.name}{where}: {result.gpus} GPUs = tensor {lay['tensor']} x data "
        f"{lay['data']} x pipeline {lay['pipeline']}"
        + (f" (expert {lay['expert']})" if lay["expert"] > 1 else "")
        + f", ZeRO-{lay['zero']}, {lay['micro_batches']} micro-batch"
        + ("es" if lay["micro_batches"] != 1 else "")
        + (f", {lay['schedule']}" if lay["pipeline"] > 1 else ""),
        f"step {format_time(result.step_s)}; per GPU on average: compute "
        f"{format_time(result.compute_s)} ({_share(result.compute_s, result.step_s)}), "
        f"exposed communication {format_time(result.exposed_s)} "
        f"({_share(result.exposed_s, result.step_s)}), bubble "
        f"{format_time(result.bubble_s)} ({_share(result.bubble_s, result.step_s)})"
        + (f"; MFU {100 * result.mfu:.1f}%" if result.mfu is not None else ""),
        f"calls timed: {result.path}" + (f" ({result.fallback})" if result.fallback else
                                         f" ({PERIODIC})" if result.path == "periodic" else ""),
    ]
    if result.kinds:
        lines.append("")
        lines.append(f"{'per GPU':<26}{'calls':>8}{'bytes':>11}{'time':>12}{'exposed':>12}")
        for kind, stats in result.kinds.items():
            lines.append(f"{kind:<26}{stats.calls:>8.4g}{format_size(stats.bytes):>11}"
                         f"{format_time(stats.time_s):>12}{format_time(stats.exposed_s):>12}")
    return "\n".join(lines)
