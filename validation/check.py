"""Consistency check of measurements.csv: recompute algbw and busbw as nccl-tests does.

algbw = bytes / time; busbw = algbw x factor, factor 2(p-1)/p for allreduce, (p-1)/p for
allgather, reducescatter and alltoall, 1 for broadcast, reduce and sendrecv.  A row is
reported when its algbw is off from bytes/time by more than 2% (times are printed to four
significant digits) and by more than the two-decimal rounding, or when its busbw is off from
algbw x factor by more than that rounding alone: both are printed from the same figure, so
any larger gap means the row's rank count is not the one the table was run with.
Standard library only:

    python3 validation/check.py [measurements.csv]
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

TOLERANCE = 0.02
HALF_CENT = 0.005  # GB/s: nccl-tests prints two decimals, so each figure is off by up to this


def bus_factor(collective: str, ranks: int) -> float:
    if collective == "allreduce":
        return 2 * (ranks - 1) / ranks
    if collective in ("allgather", "reducescatter", "alltoall"):
        return (ranks - 1) / ranks
    if collective in ("broadcast", "reduce", "sendrecv"):
        return 1.0
    raise ValueError(f"no bus factor for collective {collective!r}")


def off(printed: float, expected: float, rounding: float) -> bool:
    return abs(printed - expected) > max(TOLERANCE * abs(expected), rounding + 1e-9)


def problems(row: dict) -> list[str]:
    found = []
    factor = bus_factor(row["collective"], int(row["gpus"]))
    algbw = float(row["algbw_GBps"]) if row["algbw_GBps"] else None
    busbw = float(row["busbw_GBps"]) if row["busbw_GBps"] else None
    if row["time_us"] and algbw is not None:
        expected = int(row["bytes"]) / float(row["time_us"]) / 1e3
        if off(algbw, expected, HALF_CENT):
            found.append(f"algbw {algbw} vs bytes/time {expected:.2f}")
    if algbw is not None and busbw is not None:
        expected = algbw * factor
        if abs(busbw - expected) > HALF_CENT * (1 + factor) + 1e-9:
            found.append(f"busbw {busbw} vs algbw x {factor:.4f} = {expected:.2f}")
    return found


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("measurements.csv")
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    flagged = 0
    checkable = 0
    for line, row in enumerate(rows, start=2):
        if row["algbw_GBps"]:
            checkable += 1
        for problem in problems(row):
            flagged += 1
            print(f"{path.name}:{line} {row['run_id']} {row['bytes']} B: {problem}")
    print(f"{len(rows)} rows, {checkable} with algbw to check, {flagged} findings")


if __name__ == "__main__":
    main()
