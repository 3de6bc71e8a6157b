"""Between collsim's results table (docs/design.md#results-table) and nccl-tests runs: simulated
rows become a Run the writer prints, and a measured Run becomes rows ``compare`` can match."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from collsim import __version__
from collsim.errors import InputError
from collsim.nccltests.layouts import DEFAULT_LAYOUT
from collsim.nccltests.programs import NCCL_TYPE_NAMES, program_for
from collsim.nccltests.run import Half, Header, RankLine, Row, Run
from collsim.params import DEFAULT_DTYPE, DTYPES

_PID_BASE = 10000  # synthetic process ids: one process per rank, as mpirun -np starts them
_GROUP_KEYS = ("topology", "algorithm", "collective", "ranks", "dtype")


def run_from_results(rows: Iterable[Mapping[str, Any]], *, topology: str, gpu_name: str,
                     gpus_per_node: int, placement: Sequence[tuple[int, int]] | None = None,
                     dtype: str = DEFAULT_DTYPE, redop: str = "sum", root: int = 0,
                     checked: bool = False) -> Run:
    """A Run of simulated rows of one collective at one rank count, in nccl-tests' terms.

    ``placement`` gives each rank's (node, device); by default ranks fill nodes in order,
    ``gpus_per_node`` each. The simulator has one time per point, so both placements
    (out-of-place and in-place) show it. ``checked`` prints ``#wrong`` as 0 rather than N/A
    (the simulator checks no data unless asked to)."""
    rows = list(rows)
    if not rows:
        raise ValueError("no simulated rows to print")
    kinds = {(r["collective"], int(r["ranks"]), r.get("dtype") or dtype) for r in rows}
    if len(kinds) != 1:
        raise ValueError(f"one nccl-tests table holds one collective, rank count and dtype; "
                         f"got {sorted(kinds)}")
    collective, ranks, element = kinds.pop()
    if element not in NCCL_TYPE_NAMES:
        raise ValueError(f"dtype {element!r} has no nccl-tests name; choose one of "
                         f"{', '.join(NCCL_TYPE_NAMES)}")
    program = program_for(collective)
    type_name = NCCL_TYPE_NAMES[element]
    per_count = DTYPES[element] * (ranks if program and program.count_per_rank else 1)
    prints_op = program.prints_op if program else collective in ("scan",)
    rooted = program.rooted if program else False
    wrong = 0 if checked else None
    table = []
    for r in rows:
        half = Half(float(r["time_s"]) * 1e6, float(r["algbw_GBps"]), float(r["busbw_GBps"]),
                    wrong)
        table.append(Row(int(r["size_bytes"]), int(r["size_bytes"]) // per_count, type_name,
                         redop if prints_op else "none", root if rooted else -1, half, half, 0))
    run = Run(file="<simulated>", line=0, program=program.name if program else None,
              collective=collective, collective_source="simulated", layout=DEFAULT_LAYOUT,
              rows=table, comment=f"collsim {__version__} simulated {topology}")
    run.header = _header([row.size_bytes for row in table], checked)
    run.rank_lines = _rank_lines(ranks, gpus_per_node, placement, gpu_name)
    busbw = [row.out_of_place.busbw_GBps for row in table]
    run.avg_busbw_GBps = sum(busbw) / len(busbw)
    return run


def runs_from_results(rows: Iterable[Mapping[str, Any]], **machine: Any) -> list[Run]:
    """One Run per (topology, algorithm, collective, ranks, dtype) of a results table, in the
    order they first appear; ``machine`` as for ``run_from_results``."""
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for row in rows:
        groups.setdefault(tuple(row.get(k) for k in _GROUP_KEYS), []).append(row)
    return [run_from_results(group, **machine) for group in groups.values()]


def results_rows(run: Run, *, in_place: bool = False, drop_empty: bool = True,
                 collective: str | None = None, ranks: int | None = None
                 ) -> list[dict[str, Any]]:
    """A measured run as rows of the results table (the columns a log can fill):
    the out-of-place half by default. Size-0 rows, which move no data, are dropped unless
    ``drop_empty`` is False. ``collective`` and ``ranks`` fill in what the log does not say."""
    collective = collective or run.collective
    if collective is None:
        raise InputError("cannot tell which collective this nccl-tests run timed (its table "
                         "fits several); name it, e.g. alltoall", file=run.file, line=run.line)
    ranks = ranks or run.ranks or run.ranks_from_bandwidth()
    if ranks is None:
        raise InputError("cannot tell how many ranks this nccl-tests run had (no '#  Rank' "
                         "lines, and busbw/algbw does not settle it); give the rank count",
                         file=run.file, line=run.line)
    out = []
    for row in run.rows:
        half = row.in_place if in_place else row.out_of_place
        if half is None:
            raise InputError("the table has no in-place columns", file=run.file, line=row.line)
        if drop_empty and row.size_bytes == 0:
            continue
        out.append({"collective": collective, "ranks": ranks, "size_bytes": row.size_bytes,
                    "time_s": half.time_us * 1e-6, "algbw_GBps": half.algbw_GBps,
                    "busbw_GBps": half.busbw_GBps})
    return out


def _header(sizes: list[int], checked: bool) -> Header:
    positive = sorted({s for s in sizes if s > 0})
    step, kind = 2, "factor"
    if len(positive) >= 2:
        ratios = {b / a for a, b in itertools.pairwise(positive)}
        gaps = {b - a for a, b in itertools.pairwise(positive)}
        if len(ratios) == 1 and next(iter(ratios)).is_integer():
            step = int(next(iter(ratios)))
        elif len(gaps) == 1:
            step, kind = gaps.pop(), "bytes"
    return Header(0, nthread=1, ngpus=1, min_bytes=min(sizes), max_bytes=max(sizes), step=step,
                  step_kind=kind, warmup_iters=0, iters=1, agg_iters=1,
                  validation=1 if checked else 0, graph=0, unalign=0)


def _rank_lines(ranks: int, gpus_per_node: int, placement: Sequence[tuple[int, int]] | None,
                gpu_name: str) -> list[RankLine]:
    if gpus_per_node < 1:
        raise ValueError("gpus_per_node must be at least 1")
    where = list(placement) if placement is not None else [
        divmod(rank, gpus_per_node) for rank in range(ranks)]
    if len(where) != ranks:
        raise ValueError(f"placement names {len(where)} ranks, the rows {ranks}")
    return [RankLine(rank, 0, _PID_BASE + rank, f"node{node}", device, f"0000:{device:02x}:00",
                     gpu_name, 0) for rank, (node, device) in enumerate(where)]
