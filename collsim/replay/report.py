"""What a replay found: the step measured and simulated side by side (step time, compute,
exposed communication, idle), per process group and kind of call, and call by call.

Both columns are cut the same way (collsim/workloads/results.py): on each rank a stretch
where it computes is compute, one where it is in a call but does not compute is exposed
communication, the rest idle (a late start, waiting for other ranks at the end). The
measured column cuts the trace's own spans on its clock; the simulated one the replay's.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from collsim.replay.plan import ReplayPlan
from collsim.replay.run import Replayed
from collsim.units import format_size, format_time
from collsim.workloads.executor import Timeline
from collsim.workloads.results import KindStats, split_step

ROWS = 40  # per-call rows the text report shows (--json has every call)


@dataclass
class Part:
    """One side of the step, averaged over ranks."""

    step_s: float
    compute_s: float
    exposed_s: float
    idle_s: float
    kinds: dict[str, KindStats]


@dataclass
class CallRecord:
    """One rank's part of one call: measured in the trace and simulated in the replay."""

    rank: int
    index: int
    group: str
    collective: str
    bytes: int
    measured_us: float
    simulated_us: float


@dataclass
class ReplayResult:
    trace: str
    backend: str
    topology: str
    ranks: int
    traced_ranks: int
    algorithms: dict[str, str]
    measured: Part
    simulated: Part
    calls: list[CallRecord] = field(repr=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the summary and one record per call."""
        return asdict(self)

    def totals(self) -> tuple[float, float, float | None]:
        """Measured and simulated call time summed over every call of every rank, and the
        median of the per-call ratios simulated/measured (None without measured times)."""
        measured = sum(c.measured_us for c in self.calls)
        simulated = sum(c.simulated_us for c in self.calls)
        ratios = [c.simulated_us / c.measured_us for c in self.calls if c.measured_us > 0]
        return measured, simulated, statistics.median(ratios) if ratios else None


def _part(plan: ReplayPlan, timeline: Timeline) -> Part:
    step, ranks, kinds = split_step(plan, timeline)  # type: ignore[arg-type]
    world = max(len(ranks), 1)
    return Part(step, sum(r.compute_s for r in ranks) / world,
                sum(r.exposed_s for r in ranks) / world,
                sum(r.bubble_s for r in ranks) / world, dict(sorted(kinds.items())))


def measured_timeline(plan: ReplayPlan) -> Timeline:
    """The trace's own spans as a timeline from its first event (seconds)."""
    origin = plan.origin_us
    start = [[(s.start_us - origin) * 1e-6 for s in row] for row in plan.sources]
    end = [[(s.start_us + s.duration_us - origin) * 1e-6 for s in row] for row in plan.sources]
    return Timeline(start, end, {}, [plan.offset(r) for r in range(plan.world)])


def build_result(replayed: Replayed, name: str, traced_ranks: int | None = None
                 ) -> ReplayResult:
    """The report of a replay of the trace called ``name``."""
    plan, timeline = replayed.plan, replayed.timeline
    records = []
    for rank, sources in enumerate(plan.sources):
        for index, source in enumerate(sources):
            task = plan.tasks[rank][index]
            if source.call is None or task.call is None:
                continue
            simulated = timeline.end[rank][index] - timeline.start[rank][index]
            records.append(CallRecord(rank, source.call.index, task.call.label,
                                      source.call.collective, source.call.size_bytes,
                                      source.duration_us, simulated * 1e6))
    trace = plan.trace
    return ReplayResult(name, trace.backend, replayed.topology.name, plan.world,
                        traced_ranks or plan.world, dict(sorted(plan.algorithms.items())),
                        _part(plan, measured_timeline(plan)),
                        _part(plan, timeline), records)


def _share(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole > 0 else "-"


def format_result(result: ReplayResult, rows: int = ROWS) -> str:
    """The summary, the kinds of call, and the first ``rows`` calls (0: none)."""
    m, s = result.measured, result.simulated
    scaled = (f", scaled out from {result.traced_ranks}" if result.ranks != result.traced_ranks
              else "")
    lines = [f"{result.trace} ({result.backend}, {result.ranks} ranks{scaled}) on "
             f"{result.topology}, per rank on average:",
             f"{'':<10}{'step':>10}{'compute':>19}{'exposed comm.':>19}{'idle':>19}"]
    for label, part in (("measured", m), ("simulated", s)):
        cells = [f"{format_time(value)} ({_share(value, part.step_s)})"
                 for value in (part.compute_s, part.exposed_s, part.idle_s)]
        lines.append(f"{label:<10}{format_time(part.step_s):>10}"
                     + "".join(f"{cell:>19}" for cell in cells))
    if s.kinds:
        lines += ["", f"{'per rank on average':<36}{'calls':>7}{'bytes':>9}"
                      f"{'measured':>11}{'simulated':>11}{'exposed':>11}"]
        for kind, stats in s.kinds.items():
            measured = m.kinds.get(kind, KindStats())
            lines.append(f"{kind:<36}{stats.calls:>7.4g}{format_size(stats.bytes):>9}"
                         f"{format_time(measured.time_s):>11}{format_time(stats.time_s):>11}"
                         f"{format_time(stats.exposed_s):>11}")
    if rows and result.calls:
        shown = result.calls[:rows]
        left = len(result.calls) - len(shown)
        lines += ["", f"{'rank':>5} {'call':>5}  {'group':<22}{'collective':<14}{'bytes':>9}"
                      f"{'measured':>11}{'simulated':>11}{'ratio':>7}"]
        for c in shown:
            ratio = f"{c.simulated_us / c.measured_us:.2f}" if c.measured_us > 0 else "-"
            lines.append(f"{c.rank:>5} {c.index:>5}  {c.group:<22}{c.collective:<14}"
                         f"{format_size(c.bytes):>9}{format_time(c.measured_us * 1e-6):>11}"
                         f"{format_time(c.simulated_us * 1e-6):>11}{ratio:>7}")
        if left:
            lines.append(f"... {left} more calls (--calls N shows more; --json lists all)")
    measured, simulated, median = result.totals()
    if result.calls:
        lines.append(f"every call of every rank: measured {format_time(measured * 1e-6)}, "
                     f"simulated {format_time(simulated * 1e-6)}"
                     + (f" ({simulated / measured:.2f}x)" if measured > 0 else "")
                     + (f"; median call {median:.2f}x" if median is not None else ""))
    return "\n".join(lines)
