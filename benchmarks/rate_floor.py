"""What contention costs the engine: each family's run again with its max-min rates free.

A case runs three times on the same program:

1. a recording run: what every settle of rates decided, that is which transfers it
   detached and which it rescheduled, with their new rate, drain time and milestone
   (first, so that the timed runs both find the process warm);
2. the real run, timed;
3. the replay, timed: every settle applies what run 1 decided. It makes exactly the same
   events at the same instants (it must end at the same time to the bit, or the script
   fails), but spends nothing on finding rates.

The replay's speed bounds what a perfect max-min algorithm would give this engine (from
above: it also pays for numbering its flows, under a microsecond each). The gap to the
real run is the rates' share.

    python benchmarks/rate_floor.py                       # the contended families
    python benchmarks/rate_floor.py --ranks 256 --family ring direct

The runs use subclasses of the fabric passed to the timing engine (``fabric=``): they number
flows through ``Fabric.flow_class`` and watch or replace the rate computation through its
extension points (``settle``, ``take_changes``, ``unlink``, ``schedule``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator

from collsim.engine.fabric import Fabric
from collsim.engine.loop import clock
from collsim.engine.timing import TimingEngine

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

CONTENDED = ["ring", "double_binary_tree", "double_binary_tree (64 MiB)", "direct",
             "binary_tree"]


def _numbered(base: type, wanted: set[int] | None = None) -> tuple[type, dict[int, object]]:
    """A subclass of the flow class ``base`` whose flows carry their creation number (the
    same in every run, since runs are deterministic); with ``wanted``, the flows of those
    numbers are kept by number (and no others, so that a replay holds no more flows alive
    than the real run)."""
    kept: dict[int, object] = {}
    count = [0]

    class NumberedFlow(base):
        __slots__ = ("number",)

        def __init__(self, *args) -> None:
            base.__init__(self, *args)
            self.number = number = count[0]
            count[0] = number + 1
            if wanted is not None and number in wanted:
                kept[number] = self

    return NumberedFlow, kept


def recording_fabric(journal: list[tuple[list, list]]) -> type[Fabric]:
    """A fabric that appends to ``journal``, for every settle, the numbers of the flows it
    detached and the new states of those it rescheduled."""
    numbered, _ = _numbered(Fabric.flow_class)

    class RecordingFabric(Fabric):
        flow_class = numbered
        entry: tuple[list, list] | None = None  # the settle in progress

        def settle(self) -> None:
            self.entry = ([], [])
            journal.append(self.entry)
            super().settle()
            self.entry = None

        def unlink(self, flow) -> None:
            if self.entry is not None:
                self.entry[0].append(flow.number)
            super().unlink(flow)

        def schedule(self, flows, now: float) -> None:
            flows = list(flows)
            if self.entry is not None:
                self.entry[1].extend((f.number, f.rate, f.drain_at, f.outlasted, f.since,
                                      f.left) for f in flows)
            super().schedule(flows, now)

    return RecordingFabric


def replaying_fabric(journal: list[tuple[list, list]]) -> tuple[type[Fabric], Iterator]:
    """A fabric whose settles apply what ``journal`` recorded instead of finding rates,
    and the decisions it has not applied yet (a settle past the journal's end raises
    StopIteration)."""
    # A flow is kept by number from its creation to the last settle that names it.
    last_use: dict[int, int] = {}
    for index, (detached, states) in enumerate(journal):
        for number in detached:
            last_use[number] = index
        for state in states:
            last_use[state[0]] = index
    done_after: list[list[int]] = [[] for _ in journal]
    for number, index in last_use.items():
        done_after[index].append(number)
    numbered, created = _numbered(Fabric.flow_class, set(last_use))
    decisions = iter(zip(journal, done_after, strict=True))

    class ReplayingFabric(Fabric):
        flow_class = numbered

        def settle(self) -> None:
            self.take_changes()
            (detached, states), done = next(decisions)
            for number in detached:
                self.unlink(created[number])
            flows = []
            for number, rate, drain_at, outlasted, since, left in states:
                flow = created[number]
                flow.rate, flow.drain_at, flow.outlasted = rate, drain_at, outlasted
                flow.since, flow.left = since, left
                flows.append(flow)
            self.schedule(flows, clock(self.env))
            for number in done:
                del created[number]

    return ReplayingFabric, decisions


def measure(family: str, p: int) -> dict:
    """The real run's CPU seconds, then the replay's, for one family at p ranks."""
    from algorithms import case

    def run(fabric: type[Fabric]) -> tuple[object, float]:
        topology, gpus, job, algorithm = case(family, p)
        engine = TimingEngine(topology, gpus, job, algorithm.program, fabric=fabric)
        start = time.process_time()
        result = engine.run()
        return result, time.process_time() - start

    # The recording run first, so that both timed runs find the process warm.
    journal: list[tuple[list, list]] = []
    recorded, _ = run(recording_fabric(journal))
    real, real_cpu = run(Fabric)
    if recorded.time != real.time:
        raise RuntimeError(f"{family}: the recording run diverged")
    replaying, remaining = replaying_fabric(journal)
    replay, replay_cpu = run(replaying)
    if replay.time != real.time or replay.finish != real.finish \
            or next(remaining, None) is not None:
        raise RuntimeError(f"{family}: the replay diverged ({replay.time!r} != {real.time!r})")
    return {"family": family, "p": p, "transfers": real.transfers, "settles": len(journal),
            "reschedules": sum(len(entry[1]) for entry in journal),
            "real_s": real_cpu, "floor_s": replay_cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--family", nargs="*", default=CONTENDED)
    parser.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one[0], int(args.one[1]))))
        return
    print(f"{'family':<28} {'p':>5} {'transfers':>10} {'settles':>8} {'resched':>8} "
          f"{'real s':>7} {'floor s':>7} {'rates':>6} {'real/s':>9} {'floor/s':>9}")
    for family in args.family:
        out = subprocess.run([sys.executable, __file__, "--one", family, str(args.ranks)],
                             check=True, capture_output=True, text=True).stdout
        r = json.loads(out)
        rates = 1 - r["floor_s"] / r["real_s"] if r["real_s"] > 0 else 0.0
        print(f"{family:<28} {r['p']:>5} {r['transfers']:>10} {r['settles']:>8} "
              f"{r['reschedules']:>8} {r['real_s']:>7.2f} {r['floor_s']:>7.2f} {rates:>6.0%} "
              f"{r['transfers'] / r['real_s']:>9,.0f} {r['transfers'] / r['floor_s']:>9,.0f}",
              flush=True)


if __name__ == "__main__":
    main()
