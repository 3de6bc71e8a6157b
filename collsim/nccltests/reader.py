"""Reading nccl-tests logs: the text ``*_perf`` binaries print, as users save it.

Liberal in what it skips (launcher prefixes, ssh and MPI chatter, ``\\r`` line ends, NCCL's
own INFO lines, several runs in one file), strict about the tables: a row that is not a row
of the header above it is an InputError at ``file:line``.
"""

from __future__ import annotations

import re
from pathlib import Path

from collsim.errors import InputError
from collsim.nccltests.hints import Hints
from collsim.nccltests.programs import PROGRAMS, Columns, infer_collective
from collsim.nccltests.run import Header, RankLine, Run
from collsim.nccltests.table import Table, column_header, looks_like_row
from collsim.nccltests.textfile import MAX_LOG_BYTES, read_log_text

# srun -l ("0: "), Open MPI --tag-output ("[1,0]<stdout>:"), MPICH -prepend-rank ("[0] ").
_PREFIX = re.compile(r"^\s*(?:\d+: |\[\d+,\d+\]<std(?:out|err)>:|\[\d+\] )")
_RANK = re.compile(r"^#\s*Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+"
                   r"device\s+(\d+)\s+\[([^\]]*)\]\s*(.*?)\s*$")
_HEADER_FIELDS = {
    "nthread": re.compile(r"\bnThread (\d+)"), "ngpus": re.compile(r"\bnGpus (\d+)"),
    "min_bytes": re.compile(r"\bminBytes (\d+)"), "max_bytes": re.compile(r"\bmaxBytes (\d+)"),
    "warmup_iters": re.compile(r"\bwarmup iters: (\d+)"),
    "iters": re.compile(r"(?<!agg )(?<!warmup )\biters: (\d+)"),
    "agg_iters": re.compile(r"\bagg iters: (\d+)"),
    "validation": re.compile(r"\bvalidation: (\d+)"), "graph": re.compile(r"\bgraph: (\d+)"),
    "unalign": re.compile(r"\bunalign: (\d+)"),
}
_STEP = re.compile(r"\bstep: (\d+)\((\w+)\)")
_NCCL_VERSION = re.compile(r"\bNCCL version (\d+(?:\.\d+)+(?:[+-]\S+)?)")
_TESTS_VERSION = re.compile(r"^#\s*nccl-tests version (\S+)")
_LIBRARY = re.compile(r"\bnccl-library=(\d+)")
_STARTING = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
_CONCLUDED = re.compile(r"^#\s*Collective test concluded")
_REDUCING = re.compile(r"Reducing maxBytes to (\d+)")
_OUT_OF_BOUNDS = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
_COMMENT = re.compile(r"^#\s*(collsim \S+ simulated\b.*?)\s*$")
_TEST_NAMES = "|".join(p.removesuffix("_perf") for p in PROGRAMS)
# The order in which a run's marker lines appear.
_STAGES = {"comment": 0, "version": 1, "starting": 2, "header": 3, "devices": 4, "rank": 5,
           "table": 6}
_PROGRAM_MENTION = re.compile(rf"\b({_TEST_NAMES})_perf\b|(?:^|\s)-t\s+({_TEST_NAMES})\b")


def read_logs(source: str | Path, *, max_bytes: int = MAX_LOG_BYTES) -> list[Run]:
    """Every run in a log: ``source`` is a path, or the log's text if it holds a newline."""
    if isinstance(source, str) and "\n" in source:
        return parse_logs(source)
    return parse_logs(read_log_text(source, max_bytes), str(source))


def parse_logs(text: str, file: str = "<text>") -> list[Run]:
    """Every run in ``text``, in order; ``file`` names it in errors."""
    builder = _Builder(file)
    for number, raw in enumerate(text.split("\n"), start=1):
        builder.take(clean_line(raw), number)
    return builder.finish()


def clean_line(raw: str) -> str:
    """A log line as nccl-tests printed it: launcher prefixes and carriage returns removed
    (a terminal shows what follows the last ``\\r``)."""
    text = raw.rstrip("\r\n")
    if "\r" in text:
        parts = [part for part in text.split("\r") if part.strip()]
        text = parts[-1] if parts else ""
    while m := _PREFIX.match(text):
        text = text[m.end():]
    return text


def nccl_version_from_code(code: int) -> str:
    """``nccl-library=22403`` as 2.24.3 (NCCL_VERSION_CODE: x*10000+y*100+z since 2.9,
    x*1000+y*100+z before)."""
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


class _Builder:
    """Cuts a log into runs as its lines arrive."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.runs: list[Run] = []
        self.run: Run | None = None
        self.done = True  # the current run's table has ended; chatter belongs to the next
        self.table: Table | None = None
        self.pending = Run(file, 0)  # what was printed before the run it belongs to
        self.stage = -1

    # -- the run in progress ---------------------------------------------------------
    def start(self, line: int) -> Run:
        before = self.pending
        if self.run is not None and not self.done and self.table is None:
            before = self.run  # a run with no table yet (a repeated marker): take what it had
            before.preamble += self.pending.preamble
        self.run = Run(self.file, line, hints=Hints())
        self.run.preamble = before.preamble
        self.run.hints.adopt(before.hints)
        self.run.nccl_version = before.nccl_version
        self.pending = Run(self.file, 0)
        self.runs.append(self.run)
        self.done = False
        self.table = None
        self.stage = -1
        return self.run

    def current(self, line: int, stage: int) -> Run:
        """The run a marker line belongs to. Markers come in the order of ``_STAGES``; one
        that comes again, or after a later one, begins the next run."""
        repeats = stage == _STAGES["rank"]
        if self.run is None or self.done or self.stage > stage or (
                self.stage == stage and not repeats):
            self.start(line)
        self.stage = max(self.stage, stage)
        assert self.run is not None
        return self.run

    def open_run(self) -> Run:
        """Where chatter, hints and version lines go: the run under way, else the next."""
        return self.run if self.run is not None and not self.done else self.pending

    # -- one line --------------------------------------------------------------------
    def take(self, text: str, line: int) -> None:
        stripped = text.strip()
        if not stripped:
            return
        if " NCCL INFO " in text or " NCCL WARN " in text:
            self.open_run().hints.read_info(text, line)
            if m := _NCCL_VERSION.search(text):
                self.open_run().nccl_version = m.group(1)
            return
        if stripped.startswith("#"):
            self.comment_line(stripped, line)
            return
        if set(stripped) == {"."}:
            self.elided()
            return
        if m := _NCCL_VERSION.search(stripped):
            self.open_run().nccl_version = m.group(1)
            return
        if table := column_header(stripped, line):
            self.new_table(table, line)
            return
        tokens = stripped.split()
        if self.table is not None and not self.done and _is_integer(tokens[0]) and (
                len(tokens) == self.table.width or len(tokens) > 1 and _is_integer(tokens[1])):
            assert self.run is not None
            self.run.rows.append(self.table.row(tokens, self.file, line))
            return
        if looks_like_row(tokens):
            raise InputError("a table row with no nccl-tests column header above it (expected "
                             "'#  size  count  type  redop  root  time  algbw  busbw ...')",
                             file=self.file, line=line)
        self.chatter(stripped)

    def comment_line(self, text: str, line: int) -> None:
        if m := _RANK.match(text):
            run = self.current(line, _STAGES["rank"])
            group = int(m.group(2)) if m.group(2) is not None else None
            run.rank_lines.append(RankLine(int(m.group(1)), group, int(m.group(3)), m.group(4),
                                           int(m.group(5)), m.group(6), m.group(7), line))
        elif table := column_header(text, line):
            self.new_table(table, line)
        elif m := _COMMENT.match(text):
            self.current(line, _STAGES["comment"]).comment = m.group(1)
        elif m := _TESTS_VERSION.match(text):
            run = self.current(line, _STAGES["version"])
            run.nccl_tests_version = m.group(1)
            if lib := _LIBRARY.search(text):
                run.nccl_version = run.nccl_version or nccl_version_from_code(int(lib.group(1)))
        elif m := _STARTING.match(text):
            self.current(line, _STAGES["starting"]).program = m.group(1)
        elif text.lstrip("# ").startswith("nThread"):
            self.current(line, _STAGES["header"]).header = _header(text, line)
        elif text.lstrip("# ").startswith("Using devices"):
            self.current(line, _STAGES["devices"])
        elif m := _OUT_OF_BOUNDS.match(text):
            if self.run is not None and not self.done:
                self.run.out_of_bounds = int(m.group(1))
        elif m := _AVG.match(text):
            if self.run is not None and not self.done:
                self.run.avg_busbw_GBps = _float_or_none(m.group(1))
                self.done = True
        elif _CONCLUDED.match(text):
            self.done = True
        elif m := _REDUCING.search(text):
            run = self.open_run()
            if run.header is not None:
                run.header.reduced_max_bytes = int(m.group(1))
        elif m := _NCCL_VERSION.search(text):
            self.open_run().nccl_version = m.group(1)
        elif "..." in text or "truncat" in text.lower():
            self.elided()

    def new_table(self, table: Table, line: int) -> None:
        run = self.current(line, _STAGES["table"])
        self.table = table
        run.layout = table.layout
        run.time_column = table.time_column
        run.column_line = line

    def elided(self) -> None:
        run = self.run
        if run is None or self.done:
            return
        if self.table is None:
            run.ranks_elided = True
        else:
            run.rows_elided = True

    def chatter(self, text: str) -> None:
        run = self.open_run()
        run.preamble.append(text)
        run.hints.read_command(text)

    # -- the end ---------------------------------------------------------------------
    def finish(self) -> list[Run]:
        runs = [run for run in self.runs if run.rows]
        if not runs:
            headed = [run for run in self.runs if run.column_line is not None]
            if headed:
                raise InputError("the nccl-tests table has a column header but no rows",
                                 file=self.file, line=headed[0].column_line)
            raise InputError("no nccl-tests table found (expected the lines that *_perf "
                             "prints: '#  size  count  type ...' followed by rows)",
                             file=self.file)
        for run in runs:
            _name_collective(run)
        return runs


def _name_collective(run: Run) -> None:
    """Which collective the run timed: from the starting line, else a command line in its
    preamble, else its table's columns."""
    if run.program in PROGRAMS:
        run.collective, run.collective_source = PROGRAMS[run.program].collective, "starting line"
        return
    for text in reversed(run.preamble):
        for m in _PROGRAM_MENTION.finditer(text):
            name = (m.group(1) or m.group(2)) + "_perf"
            run.program = name
            run.collective, run.collective_source = PROGRAMS[name].collective, "command line"
            return
    columns = [Columns(r.size_bytes, r.count, r.dtype, r.redop, r.root,
                       r.out_of_place.algbw_GBps, r.out_of_place.busbw_GBps) for r in run.rows]
    collective = infer_collective(columns, run.ranks)
    if collective is not None:
        run.collective, run.collective_source = collective, "table"


def _header(text: str, line: int) -> Header:
    header = Header(line)
    for name, pattern in _HEADER_FIELDS.items():
        if m := pattern.search(text):
            setattr(header, name, int(m.group(1)))
    if m := _STEP.search(text):
        header.step, header.step_kind = int(m.group(1)), m.group(2)
    return header


def _is_integer(token: str) -> bool:
    return token.lstrip("-").isdigit()


def _float_or_none(token: str) -> float | None:
    try:
        return float(token)
    except ValueError:
        return None
