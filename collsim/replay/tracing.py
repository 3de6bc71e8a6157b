"""A replay as a Chrome/Perfetto trace: for every rank, the measured spans and the simulated
ones on threads side by side (``measured: cpu`` above ``simulated: cpu``), both from the
trace's first event, so a call that took longer in one than the other shows at a glance."""

from __future__ import annotations

from collsim.output.trace import Trace
from collsim.replay.report import measured_timeline
from collsim.replay.run import Replayed


def replay_trace(replayed: Replayed) -> Trace:
    """The Chrome trace of a replay: a process per rank, a measured and a simulated thread
    per stream of it."""
    plan = replayed.plan
    sides = (("measured", measured_timeline(plan)), ("simulated", replayed.timeline))
    trace = Trace()
    for rank, tasks in enumerate(plan.tasks):
        pid = rank + 1
        trace.process(pid, f"rank {rank}")
        streams = sorted({task.stream or "" for task in tasks})
        for side_index, (side, timeline) in enumerate(sides):
            for stream_index, stream in enumerate(streams):
                # Threads sort by id: each stream's measured thread just above its simulated.
                tid = 1 + 2 * stream_index + side_index
                trace.thread(pid, tid, f"{side}: {stream}")
            for index, task in enumerate(tasks):
                tid = 1 + 2 * streams.index(task.stream or "") + side_index
                start, end = timeline.start[rank][index], timeline.end[rank][index]
                source = plan.sources[rank][index]
                if task.call is None:
                    trace.span(pid, tid, source.name, start, end, "compute")
                else:
                    args = {"group": task.call.label, "bytes": task.call.size,
                            "call": source.call.index if source.call else index,
                            "algorithm": task.call.algorithm}
                    trace.span(pid, tid, task.name, start, end, side, args)
    return trace
