"""Chrome trace-event JSON (chrome://tracing, Perfetto) of a recorded run.

Times are microseconds. Each rank (or GPU) is a process; its threads hold spans that nest:
the algorithm's steps (and, in a workload, the compute and the calls they belong to), and
beside them, per step, the span of its sends, of its receives and of its combines. Link
utilisation is one counter track per directed link that carried bytes. A large run is
capped at ``limit`` events (the earliest kept); the file's metadata says so.
"""

from __future__ import annotations

import bisect
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from collsim.engine.recording import Recorder, RecordingFabric
from collsim.output.files import replace_text
from collsim.output.linkload import LinkLoad, group_of, link_loads

LIMIT = 500_000  # events; a Chrome trace of a few hundred thousand events still loads
LINKS_PID = 0
US = 1e6


class Trace:
    """Events under construction: spans, counters and the names of processes and threads."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.meta: list[dict[str, Any]] = []
        self._named: set[tuple[int, int | None]] = set()

    def process(self, pid: int, name: str, sort: int | None = None) -> None:
        if (pid, None) not in self._named:
            self._named.add((pid, None))
            self.meta.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                              "ts": 0, "args": {"name": name}})
            self.meta.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                              "ts": 0, "args": {"sort_index": pid if sort is None else sort}})

    def thread(self, pid: int, tid: int, name: str) -> None:
        if (pid, tid) not in self._named:
            self._named.add((pid, tid))
            self.meta.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                              "ts": 0, "args": {"name": name}})

    def span(self, pid: int, tid: int, name: str, start: float, end: float, cat: str,
             args: dict[str, Any] | None = None) -> None:
        event = {"ph": "X", "name": name, "cat": cat, "pid": pid, "tid": tid,
                 "ts": start * US, "dur": max(end - start, 0.0) * US}
        if args:
            event["args"] = args
        self.events.append(event)

    def async_span(self, pid: int, tid: int, name: str, start: float, end: float, cat: str,
                   ident: int) -> None:
        """A span that may overlap others on its thread (a pre-posted receive)."""
        for ph, at in (("b", start), ("e", end)):
            self.events.append({"ph": ph, "name": name, "cat": cat, "pid": pid, "tid": tid,
                                "ts": at * US, "id": ident})

    def counter(self, pid: int, name: str, time: float, values: dict[str, float]) -> None:
        self.events.append({"ph": "C", "name": name, "pid": pid, "tid": 0, "ts": time * US,
                            "args": values})

    def write(self, path: str | Path, limit: int = LIMIT, info: dict[str, Any] | None = None
              ) -> bool:
        """Write the JSON file; True if events were left out (said on stderr and in the
        file's ``metadata``)."""
        events = sorted(self.events, key=lambda e: (e["ts"], -e.get("dur", 0.0)))
        capped = len(events) > limit
        metadata: dict[str, Any] = {"generator": "collsim", **(info or {}),
                                    "events": len(events)}
        if capped:
            until = events[limit]["ts"]
            events = events[:limit]
            # An async span cut in two keeps its begin only; drop such begins.
            ends = {(e["id"], e["pid"]) for e in events if e["ph"] == "e"}
            events = [e for e in events if e["ph"] != "b" or (e["id"], e["pid"]) in ends]
            metadata["capped"] = (f"only the first {limit} of {metadata['events']} events, "
                                  f"up to t = {until:.3f} us, are in this file")
            print(f"collsim: trace capped: {metadata['capped']} (--trace-limit to raise)",
                  file=sys.stderr)
        document = {"traceEvents": self.meta + events, "displayTimeUnit": "ns",
                    "metadata": metadata}
        replace_text(path, lambda out: json.dump(document, out, separators=(",", ":")))
        return capped


Place = Callable[[object, int], tuple[int, int, int] | None]


def add_steps(trace: Trace, recorder: Recorder, fabric: RecordingFabric, place: Place) -> None:
    """The algorithm's steps of every recorded call: ``place(label, rank)`` gives the
    (pid, step thread, first detail thread) of a rank of a call, or None to leave it out;
    sends, receives and combines of a step become one span each on the three detail
    threads."""
    steps: dict[tuple[object, int], list] = {}
    for record in recorder.steps:
        steps.setdefault((record.label, record.rank), []).append(record)
    starts = {}
    for key, records in steps.items():
        records.sort(key=lambda r: r.index)
        starts[key] = [r.start for r in records]

    def step_of(label: object, rank: int, at: float):
        records = steps.get((label, rank))
        if not records:
            return None
        i = bisect.bisect_right(starts[label, rank], at) - 1
        return records[i] if i >= 0 else None

    detail: dict[tuple[object, int, int, int], list] = {}

    def add(label: object, rank: int, kind: int, start: float, end: float, peer: int | None
            ) -> None:
        record = step_of(label, rank, start)
        if record is None:
            return
        entry = detail.setdefault((label, rank, record.index, kind), [start, end, []])
        entry[0], entry[1] = min(entry[0], start), max(entry[1], end)
        if peer is not None and peer not in entry[2]:
            entry[2].append(peer)

    for label, sender, receiver, start, end in recorder.transfers(fabric.flows):
        add(label, sender, 0, start, end, receiver)
        add(label, receiver, 1, start, end, sender)
    for label, rank, start, end in recorder.combines:
        add(label, rank, 2, start, end, None)

    for (label, rank), records in steps.items():
        where = place(label, rank)
        if where is None:
            continue
        pid, tid, _ = where
        for r in records:
            trace.span(pid, tid, f"step {r.index}: {r.name}", r.start, r.end, "step")
    names = ("send", "recv", "reduce")
    for (label, rank, index, kind), (start, end, peers) in detail.items():
        where = place(label, rank)
        if where is None:
            continue
        pid, _, first = where
        trace.thread(pid, first + kind, names[kind])
        arrow = (">" if kind == 0 else "<") if kind < 2 else ""
        name = names[kind] + (arrow + ",".join(map(str, peers)) if peers else "")
        trace.span(pid, first + kind, name, start, end, names[kind], {"step": index})


def add_links(trace: Trace, loads: list[LinkLoad]) -> None:
    """One utilisation counter (0..1) per directed link that carried bytes."""
    trace.process(LINKS_PID, "links (utilisation)", sort=10**9)
    for load in loads:
        name = f"{group_of(load.link)} {load.link.name}"
        for time, utilisation in load.timeline:
            trace.counter(LINKS_PID, name, time, {"utilisation": utilisation})


def call_trace(recorded: Any) -> Trace:
    """The trace of one recorded call (:func:`collsim.recorded.record_call`): a process per
    rank with its steps and their sends, receives and combines, and the links' counters."""
    trace = Trace()
    ranks = len(recorded.gpus)
    for rank in range(recorded.call.nranks):
        where = f"GPU {recorded.gpus[rank]}" if rank < ranks else "a switch"
        trace.process(rank + 1, f"rank {rank} ({where})")
        trace.thread(rank + 1, 0, "steps")
    add_steps(trace, recorded.recorder, recorded.fabric, lambda label, rank: (rank + 1, 0, 1))
    add_links(trace, link_loads(recorded.fabric))
    return trace
