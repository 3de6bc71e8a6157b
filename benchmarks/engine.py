"""Engine speed: raw SimPy timeouts/s against collsim transfers/s for ring allreduce.

Each rank count runs in a fresh subprocess so that its peak memory (max RSS) is its own.
Raw SimPy is measured with p timeouts pending at once, because SimPy's rate falls as its
heap grows; ring allreduce keeps about p transfers in flight, so the two compare like with
like. Times are process CPU seconds (robust on a shared machine) and wall seconds. The
engine runs as ``simulate()`` runs it: ring allreduce takes the lockstep path (whole steps
of every rank at once); ``--full`` also times the event-driven path (every transfer an
event, as for a contended machine) and checks both agree to the bit.

    python benchmarks/engine.py                 # p = 64, 256, 1024, 2048
    python benchmarks/engine.py --ranks 4096    # the memory check (about 34 M transfers)
    python benchmarks/engine.py --ranks 1024 --full
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

RAW_EVENTS = 1_000_000


def raw_simpy(pending: int) -> float:
    """Timeouts per CPU second with ``pending`` timeouts in the heap at all times."""
    import simpy

    env = simpy.Environment()
    fired = 0

    def refire(event):
        nonlocal fired
        fired += 1
        if fired <= RAW_EVENTS:
            env.timeout(1.0 + (fired % 97) * 1e-4).callbacks.append(refire)

    for i in range(pending):
        env.timeout(i * 1e-9).callbacks.append(refire)
    start = time.process_time()
    env.run()
    return fired / (time.process_time() - start)


def ring(p: int, lockstep: bool = True) -> dict:
    """One ring allreduce (one chunk per step, 4 B per element) on a p-GPU switch."""
    from collsim.engine.timing import TimingEngine
    from collsim.hardware.topology import switch
    from collsim.simulate import get_algorithm, make_job

    topology = switch("bench", p, 1e-6, 100e9)
    algorithm = get_algorithm("allreduce", "ring")
    job, gpus = make_job(topology, algorithm, p, 4 * p, {})
    wall, cpu = time.perf_counter(), time.process_time()
    run = TimingEngine(topology, gpus, job, algorithm.program, lockstep=lockstep,
                       steps=algorithm.lockstep).run()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    assert run.transfers == 2 * p * (p - 1)
    return {"p": p, "transfers": run.transfers, "cpu_s": cpu, "wall_s": wall,
            "path": run.path, "time": run.time, "raw_per_s": raw_simpy(p),
            "peak_rss_MiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="*", default=[64, 256, 1024, 2048])
    parser.add_argument("--full", action="store_true",
                        help="also time the event-driven path")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--events", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(ring(args.one, lockstep=not args.events)))
        return
    print(f"{'p':>6} {'path':>8} {'transfers':>10} {'raw SimPy/s':>12} {'transfers/s':>12} "
          f"{'ratio':>6} {'cpu s':>8} {'wall s':>8} {'us/transfer':>11} {'peak MiB':>9}")
    for p in args.ranks:
        times = []
        for events in ([False, True] if args.full else [False]):
            command = [sys.executable, __file__, "--one", str(p)] + (["--events"] * events)
            out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
            r = json.loads(out)
            times.append(r["time"])
            rate = r["transfers"] / r["cpu_s"]
            print(f"{p:>6} {r['path']:>8} {r['transfers']:>10} {r['raw_per_s']:>12,.0f} "
                  f"{rate:>12,.0f} {rate / r['raw_per_s']:>6.2f} {r['cpu_s']:>8.2f} "
                  f"{r['wall_s']:>8.2f} {1e6 / rate:>11.3f} {r['peak_rss_MiB']:>9.0f}")
        if len(times) == 2:
            print(f"{'':>6} simulated times {'identical' if times[0] == times[1] else 'DIFFER'}:"
                  f" {times[0]!r} s")


if __name__ == "__main__":
    main()
