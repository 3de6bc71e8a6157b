"""Printing a run in nccl-tests' layout, so ``diff`` can set a simulated run beside a measured
one (column widths and number formats: see ``layouts``)."""

from __future__ import annotations

from collsim.nccltests.layouts import DEFAULT_LAYOUT, LAYOUTS, ROW_LEAD, Layout
from collsim.nccltests.run import Header, RankLine, Row, Run


def format_run(run: Run, layout: str | None = None) -> str:
    """The run as ``*_perf`` prints it; ``layout`` defaults to the one the run was read in."""
    chosen = _layout(run, layout)
    lines = []
    if run.comment:
        lines.append(f"# {run.comment}")
    announced = run.program is not None and run.collective_source in _ANNOUNCED
    if announced:
        lines.append(f"# Collective test starting: {run.program}")
    lines += [header_line(run.header or Header(0), chosen), "#", "# Using devices"]
    lines += [rank_line(r) for r in run.rank_lines]
    lines += ["#", *chosen.column_header()]
    lines += [format_row(row, chosen.name) for row in run.rows]
    wrong = run.out_of_bounds or 0
    lines.append(f"# {'Out of bounds values':<20} : {wrong} {'FAILED' if wrong else 'OK'}")
    lines.append(f"# {'Avg bus bandwidth':<20} : {_avg_busbw(run):g} ")
    lines.append("#")
    if announced:
        lines.append(f"# Collective test concluded: {run.program}")
    return "\n".join(lines) + "\n"


def format_runs(runs: list[Run], layout: str | None = None) -> str:
    """Several runs one after another, as a shell loop over ``*_perf`` would print them."""
    return "\n".join(format_run(run, layout) for run in runs)


def format_row(row: Row, layout: str = DEFAULT_LAYOUT) -> str:
    """One table row: the five leading columns, then each placement's four."""
    chosen = LAYOUTS[layout]
    root = row.root if row.root is not None else -1
    text = ROW_LEAD % (row.size_bytes, row.count, row.dtype, row.redop or "none", f"{root:6d}")
    for half in (row.out_of_place, row.in_place):
        if half is not None:
            text += chosen.half(half.time_us, half.algbw_GBps, half.busbw_GBps, half.wrong)
    return text


def header_line(header: Header, layout: Layout) -> str:
    """The ``# nThread ...`` line; figures the run did not record print as for one call per
    size (``unalign``, which only newer versions print, is left out)."""
    def value(name: str, default: int) -> int:
        found = getattr(header, name)
        return default if found is None else found

    text = (f"# nThread {value('nthread', 1)} nGpus {value('ngpus', 1)} "
            f"minBytes {value('min_bytes', 0)} maxBytes {value('max_bytes', 0)} "
            f"step: {value('step', 2)}({header.step_kind or 'factor'}) "
            f"warmup iters: {value('warmup_iters', 0)} iters: {value('iters', 1)} "
            f"agg iters: {value('agg_iters', 1)} validation: {value('validation', 0)} "
            f"graph: {value('graph', 0)}")
    if layout.name == "adaptive" and header.unalign is not None:
        text += f" unalign: {header.unalign}"
    return text


def rank_line(rank: RankLine) -> str:
    """``#  Rank r Group g Pid p on HOST device d [bus] GPU NAME``, nccl-tests' widths."""
    return (f"#  Rank {rank.rank:2d} Group {rank.group or 0:2d} Pid {rank.pid:6d} on "
            f"{rank.host:>10} device {rank.device:2d} [{rank.bus}] {rank.gpu_name}")


# Runs whose log named the test (newer nccl-tests print "Collective test starting"; collsim
# prints it for simulated runs, since allgather and alltoall tables look alike).
_ANNOUNCED = ("starting line", "simulated")
# The oldest tables (an ``error`` column, no ``root``) reprint in the classic layout.
_PRINTED_AS = {"legacy": "classic", "": DEFAULT_LAYOUT}


def _layout(run: Run, layout: str | None) -> Layout:
    name = layout or _PRINTED_AS.get(run.layout, run.layout)
    if name not in LAYOUTS:
        raise ValueError(f"unknown nccl-tests layout {name!r}; choose one of "
                         f"{', '.join(LAYOUTS)}")
    return LAYOUTS[name]


def _avg_busbw(run: Run) -> float:
    """The footer's figure: as read, else the mean busbw over both placements of every row."""
    if run.avg_busbw_GBps is not None:
        return run.avg_busbw_GBps
    values = [half.busbw_GBps for row in run.rows
              for half in (row.out_of_place, row.in_place) if half is not None]
    return sum(values) / len(values) if values else 0.0
