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

This reaches into the fabric's private methods (``_settle``, ``_schedule_flows``) and
replaces ``Flow`` with a numbered subclass; it measures the engine, it is not an API.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

CONTENDED = ["ring", "double_binary_tree", "double_binary_tree (64 MiB)", "direct",
             "binary_tree"]


def _numbered_flows(fabric_module, settling: list | None, wanted: set[int] | None = None
                    ) -> dict[int, object]:
    """Make the fabric build flows that carry their creation number (the same in every
    run, since runs are deterministic). With ``settling`` (a one-item list holding the
    entry of the settle in progress, or None), record there the detachments a settle
    makes; with ``wanted``, keep those flows by number (and no others, so that a replay
    holds no more flows alive than the real run)."""
    kept: dict[int, object] = {}
    count = [0]
    base = fabric_module.Flow
    slot = base.attached  # the slot's descriptor, wrapped by the property below

    class NumberedFlow(base):
        __slots__ = ("number",)

        def __init__(self, *args) -> None:
            base.__init__(self, *args)
            self.number = number = count[0]
            count[0] = number + 1
            if wanted is not None and number in wanted:
                kept[number] = self

        if settling is not None:
            @property
            def attached(self) -> bool:
                return slot.__get__(self)

            @attached.setter
            def attached(self, value: bool) -> None:
                if not value and settling[0] is not None and slot.__get__(self):
                    settling[0][0].append(self.number)
                slot.__set__(self, value)

    fabric_module.Flow = NumberedFlow
    return kept


def measure(family: str, p: int) -> dict:
    """The real run's CPU seconds, then the replay's, for one family at p ranks (the fabric
    is restored afterwards)."""
    import collsim.engine.fabric as fabric_module

    Fabric = fabric_module.Fabric
    saved = Fabric._settle, Fabric._schedule_flows, fabric_module.Flow
    try:
        return _measure(family, p)
    finally:
        Fabric._settle, Fabric._schedule_flows, fabric_module.Flow = saved


def _measure(family: str, p: int) -> dict:
    from algorithms import case

    import collsim.engine.fabric as fabric_module
    from collsim.engine.timing import TimingEngine

    Fabric = fabric_module.Fabric
    settle, schedule = Fabric._settle, Fabric._schedule_flows
    original_flow = fabric_module.Flow

    def timed_run() -> tuple[object, float]:
        topology, gpus, job, algorithm = case(family, p)
        engine = TimingEngine(topology, gpus, job, algorithm.program)
        start = time.process_time()
        run = engine.run()
        return run, time.process_time() - start

    # The recording run (first, so that both timed runs find the process warm):
    # each settle's (detached, rescheduled states).
    journal: list[tuple[list, list]] = []
    settling: list = [None]  # the entry of the settle in progress
    _numbered_flows(fabric_module, settling)

    def recording_settle(self, _=None):
        settling[0] = ([], [])
        journal.append(settling[0])
        settle(self, _)
        settling[0] = None

    def recording_schedule(self, flows, now):
        flows = list(flows)
        if settling[0] is not None:
            settling[0][1].extend((f.number, f.rate, f.drain_at, f.outlasted, f.since, f.left)
                                  for f in flows)
        schedule(self, flows, now)

    Fabric._settle, Fabric._schedule_flows = recording_settle, recording_schedule
    topology, gpus, job, algorithm = case(family, p)
    recorded = TimingEngine(topology, gpus, job, algorithm.program).run()
    Fabric._settle, Fabric._schedule_flows = settle, schedule
    fabric_module.Flow = original_flow

    real, real_cpu = timed_run()
    if recorded.time != real.time:
        raise RuntimeError(f"{family}: the recording run diverged")

    # The replay: every settle applies what the recording run decided. A flow is kept by
    # number from its creation to the last settle that names it.
    last_use: dict[int, int] = {}
    for index, (detached, states) in enumerate(journal):
        for number in detached:
            last_use[number] = index
        for state in states:
            last_use[state[0]] = index
    done_after: list[list[int]] = [[] for _ in journal]
    for number, index in last_use.items():
        done_after[index].append(number)
    created = _numbered_flows(fabric_module, None, set(last_use))
    decisions = iter(zip(journal, done_after, strict=True))

    def replayed_settle(self, _=None):
        self._settle_pending = False
        self._started, self._freed = [], []
        (detached, states), done = next(decisions)
        for number in detached:
            flow = created[number]
            flow.attached = False
            for channel in flow.channels:
                del channel.flows[flow]
        flows = []
        for number, rate, drain_at, outlasted, since, left in states:
            flow = created[number]
            flow.rate, flow.drain_at, flow.outlasted = rate, drain_at, outlasted
            flow.since, flow.left = since, left
            flows.append(flow)
        schedule(self, flows, self.env._now)
        for number in done:
            del created[number]

    Fabric._settle = replayed_settle
    replay, replay_cpu = timed_run()
    if replay.time != real.time or replay.finish != real.finish \
            or next(decisions, None) is not None:
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
