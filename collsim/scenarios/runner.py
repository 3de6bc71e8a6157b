"""Running a scenario: expand the sweep, skip the points a previous run already holds, simulate
the rest on the chosen executor, append each row as it finishes, then sort the table into
sweep order and draw the figures.

Nothing touches the output directory until the scenario and its whole sweep have been
checked, and a directory this run created is removed again if no row made it into it, so a
bad input never leaves something that looks like a result. The directory is locked for the
run (a second run into it is refused); a run that stops early, however it stops, leaves a
table of whole rows that ``--resume`` completes, and ``run.json`` says "complete" only when
the table holds every point.
"""

from __future__ import annotations

import shutil
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collsim.errors import InputError, OutputError
from collsim.output.files import is_figure_file, reported
from collsim.output.lock import FolderLock
from collsim.output.runinfo import RUN_FILE, new_info, now, read_info, write_info
from collsim.output.table import (
    TableWriter,
    header,
    key_columns,
    point_key,
    read_raw,
    read_table,
    rewrite_sorted,
)
from collsim.scenarios.executors import Batcher, run_dask, run_here, run_local
from collsim.scenarios.model import Point, Scenario
from collsim.scenarios.progress import Progress
from collsim.scenarios.sweep import Sweep, expand
from collsim.scenarios.worker import raise_error
from collsim.simulate import ENGINE_COLUMNS

if TYPE_CHECKING:
    from collsim.output.figures import Drawn

TABLE_FILE = "results.csv"


@dataclass
class RunOptions:
    """How to run: where to write, on what, and whether to resume or replace a table."""

    out: Path
    jobs: int = 1
    resume: bool = False
    force: bool = False
    executor: str = "local"
    scheduler: str | None = None
    figures: bool = True
    progress: bool | None = None
    exact: bool = False  # --exact: the full simulation's times (as the scenario's exact: true)


@dataclass
class RunReport:
    """What a run did."""

    out: Path
    total: int
    already: int
    ran: int
    seconds: float
    figures: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def point_values(point: Point) -> dict[str, Any]:
    """The point's input columns, as its row holds them."""
    return {"topology": point.topology_name, "collective": point.collective,
            "algorithm": point.algorithm, "ranks": point.ranks, "size_bytes": point.size,
            **dict(point.settings), **dict(point.params)}


def run_scenario(scenario: Scenario, options: RunOptions) -> RunReport:
    """Run every point of ``scenario`` not yet in ``options.out``; see the module docstring."""
    sweep = expand(scenario)
    columns = header(scenario.swept_columns)
    order = {point_key(point_values(p), columns): p.index for p in sweep.points}
    out = Path(options.out)
    if out.exists() and not out.is_dir():
        raise InputError(f"{out} exists and is not a directory", key="--out")
    created = not out.exists()
    with reported(out):
        out.mkdir(parents=True, exist_ok=True)
    try:
        with FolderLock(out):
            return _run_locked(scenario, options, sweep, columns, order, out, created)
    except BaseException:
        if created and not (out / TABLE_FILE).exists():
            shutil.rmtree(out, ignore_errors=True)
        raise


def _run_locked(scenario: Scenario, options: RunOptions, sweep: Sweep, columns: list[str],
                order: dict[tuple[str, ...], int], out: Path, created: bool) -> RunReport:
    table = out / TABLE_FILE
    read_notes: list[str] = []
    done = _prepare(out, table, scenario, columns, order, options, read_notes)
    pending = [p for p in sweep.points if point_key(point_values(p), columns) not in done]
    info = _start_info(out, scenario, options, columns, len(sweep.points), sweep.notes())
    started = time.monotonic()
    status = "failed"
    progress = Progress(len(sweep.points), len(sweep.points) - len(pending),
                        enabled=options.progress)
    try:
        with TableWriter(table, columns) as writer, \
                closing(_execute(pending, scenario, options)) as results:
            paths = info.setdefault("paths", {})  # how the engine timed the points
            for result in results:
                for index, row in result.rows:
                    paths[row["path"]] = paths.get(row["path"], 0) + 1
                    values = point_values(sweep.points[index])
                    # A swept key the algorithm does not take is empty, even a protocol or
                    # channels the call ran with.
                    row.update(values, **{k: None for k in scenario.params if k not in values})
                    writer.write(row)
                progress.advance(len(result.rows))
                if result.error:
                    raise_error(result.error)
        status = "complete"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        with _no_interrupts():
            progress.close()
            _finish(out, table, created, order, info, status)
    report = RunReport(out, len(sweep.points), len(sweep.points) - len(pending), len(pending),
                       time.monotonic() - started, notes=sweep.notes() + read_notes)
    if info["status"] != "complete":
        raise OutputError(f"{table} does not hold every point after the run; run again with "
                          f"--resume to complete it")
    if options.figures:
        drawn = draw_scenario_figures(scenario, table, out)
        report.figures, report.notes = drawn.files, report.notes + drawn.notes
        info["figure_files"] = [f.name for f in drawn.files]
        write_info(out, info)
    return report


def draw_scenario_figures(scenario: Scenario, table: Path, out: Path) -> Drawn:
    """The scenario's figures from its finished table."""
    from collsim.output.figures import draw_figures  # matplotlib only when figures are drawn

    _, rows = read_table(table)
    return draw_figures(rows, scenario.figures, out, scenario.formats, title=scenario.name)


def _prepare(out: Path, table: Path, scenario: Scenario, columns: list[str],
             order: dict[tuple[str, ...], int], options: RunOptions, notes: list[str]
             ) -> set[tuple[str, ...]]:
    """Check the output directory; the keys of points already in its table (on --resume),
    with a note in ``notes`` for each row of it that is left out (and so run again)."""
    if not table.exists():
        if options.force:
            _remove_previous(out)
        return set()
    if options.resume:
        info = read_info(out)
        if info is None:
            raise InputError(f"{out} has a {TABLE_FILE} but no {RUN_FILE} to check it against "
                             f"this scenario; pass --force to replace it", key="--resume")
        if info.get("scenario_sha256") != scenario.digest:
            raise InputError(f"{out} holds results of another scenario (or another version of "
                             f"this one, or of its topologies); run without --resume into a new "
                             f"--out, or pass --force to replace them", key="--resume")
        found, rows = read_raw(table, notes)
        if found == [c for c in columns if c not in ENGINE_COLUMNS]:
            # Its rows cannot say which path timed them, and guessing would make the column
            # untrue; running them again costs what the first run did.
            raise InputError(f"{table} has no path column (it was written by an earlier "
                             f"collsim), so its rows do not say how the engine timed them; "
                             f"pass --force to run it again, or run into a new --out",
                             key="--resume")
        if found != columns:
            raise InputError(f"the columns of {table} are not this scenario's; pass --force to "
                             f"replace the table", key="--resume")
        keep = [found.index(c) for c in key_columns(columns)]
        return {tuple(row[k] for k in keep) for row in rows} & set(order)
    if not options.force:
        raise InputError(f"{out} already holds {TABLE_FILE}; pass --resume to complete it, "
                         f"--force to replace it, or choose another --out", key="--out")
    _remove_previous(out)
    return set()


def _remove_previous(out: Path) -> None:
    """--force: remove the table, the run record and the figures the record lists. The record
    may be corrupted (that is one reason to force); figure names in it are only trusted when
    they are plain figure file names, so nothing outside ``out`` is ever touched."""
    try:
        listed = (read_info(out) or {}).get("figure_files") or []
    except InputError:
        listed = []
    figures = [name for name in listed if isinstance(name, str) and is_figure_file(name)]
    for name in [TABLE_FILE, RUN_FILE, *figures]:
        with reported(out / name):
            (out / name).unlink(missing_ok=True)


def _start_info(out: Path, scenario: Scenario, options: RunOptions, columns: list[str],
                total: int, notes: list[str]) -> dict[str, Any]:
    info = read_info(out) if options.resume else None
    exact = options.exact or scenario.exact
    if info is None:
        info = new_info(scenario=scenario.name, scenario_file=str(scenario.file),
                        scenario_sha256=scenario.digest, quick=scenario.quick)
    elif any(isinstance(session, dict) and session.get("exact", False) != exact
             for session in info.get("sessions") or []):
        # One table, one engine: a row timed on the pipeline path next to full ones would
        # differ by the path's error, not by what the sweep varies.
        raise InputError(f"{out / RUN_FILE} was run {'without' if exact else 'with'} --exact "
                         "(or the scenario's exact: true): resume it the same way, or --force",
                         key="--exact")
    info.update(status="running", finished=None, columns=columns, swept=scenario.swept_columns,
                figures=scenario.figures, formats=scenario.formats,
                points={"total": total, "done": None}, notes=notes)
    info.setdefault("sessions", []).append(
        {"started": now(), "finished": None, "jobs": options.jobs, "executor": options.executor,
         "exact": exact, "status": "running"})
    write_info(out, info)
    return info


def _finish(out: Path, table: Path, created: bool, order: dict[tuple[str, ...], int],
            info: dict[str, Any], status: str) -> None:
    """Sort the table and record how the run ended; drop a directory that holds no result.
    The record says "complete" only if the table holds every point of the sweep."""
    columns, rows = read_raw(table) if table.exists() else ([], [])
    if not rows and created:
        shutil.rmtree(out, ignore_errors=True)
        return
    if rows:
        rewrite_sorted(table, order)
    keep = [columns.index(c) for c in key_columns(columns)]
    held = {tuple(row[k] for k in keep) for row in rows} & set(order)
    if status == "complete" and len(held) < len(order):
        status = "incomplete"
    info["status"] = status
    info["finished"] = now()
    info["points"]["done"] = len(held)
    info["sessions"][-1].update(finished=info["finished"], status=status)
    write_info(out, info)


def _execute(points: list[Point], scenario: Scenario, options: RunOptions) -> Iterator[Any]:
    batcher = Batcher(points, options.jobs, scenario.name, tuple(scenario.topologies),
                      exact=options.exact or scenario.exact)
    if options.executor == "dask":
        if not options.scheduler:
            raise InputError("--executor dask needs --scheduler ADDRESS (host:port of a running "
                             "Dask scheduler)", key="--scheduler")
        return run_dask(batcher, options.scheduler)
    if options.jobs > 1 and len(points) > 1:
        return run_local(batcher, min(options.jobs, len(points)))
    return run_here(batcher)


@contextmanager
def _no_interrupts() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM off while the table is sorted and the run recorded."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {number: signal.signal(number, signal.SIG_IGN)
                for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
