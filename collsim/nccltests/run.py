"""One nccl-tests run as its log printed it: header figures, devices, table, footer."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from collsim.nccltests.hints import Hints
from collsim.nccltests.programs import BY_COLLECTIVE, half_digit


@dataclass(frozen=True)
class Half:
    """One placement (out-of-place or in-place) of one size, as printed."""

    time_us: float
    algbw_GBps: float
    busbw_GBps: float
    wrong: int | None = None  # wrong elements; None where unchecked ("N/A", -c 0)
    error: float | None = None  # the oldest layout's max abs error instead of #wrong


@dataclass(frozen=True)
class Row:
    """One table row. ``redop`` and ``root`` are None where the layout has no such column."""

    size_bytes: int
    count: int
    dtype: str
    redop: str | None
    root: int | None
    out_of_place: Half
    in_place: Half | None
    line: int
    extra: tuple[tuple[str, str], ...] = ()  # columns nccl-tests does not print


@dataclass(frozen=True)
class RankLine:
    """One ``#  Rank r Group g Pid p on HOST device d [bus] GPU NAME`` line."""

    rank: int
    group: int | None
    pid: int
    host: str
    device: int
    bus: str
    gpu_name: str
    line: int


@dataclass
class Header:
    """The ``# nThread ...`` line's figures; None where this version did not print one."""

    line: int
    nthread: int | None = None
    ngpus: int | None = None
    min_bytes: int | None = None
    max_bytes: int | None = None
    step: int | None = None
    step_kind: str | None = None  # "factor" or "bytes"
    warmup_iters: int | None = None
    iters: int | None = None
    agg_iters: int | None = None
    validation: int | None = None
    graph: int | None = None
    unalign: int | None = None
    reduced_max_bytes: int | None = None  # "# Reducing maxBytes to N due to memory limitation"


@dataclass
class Run:
    """What one ``*_perf`` invocation printed. Built by the reader or from simulated rows."""

    file: str
    line: int
    program: str | None = None
    collective: str | None = None
    collective_source: str = ""  # "starting line", "command line", "table", "simulated"
    header: Header | None = None
    rank_lines: list[RankLine] = field(default_factory=list)
    ranks_elided: bool = False
    rows: list[Row] = field(default_factory=list)
    rows_elided: bool = False
    layout: str = "classic"
    time_column: str = "time"  # "cputime" when the table printed CPU time (-C 1)
    column_line: int | None = None
    nccl_version: str | None = None
    nccl_tests_version: str | None = None
    out_of_bounds: int | None = None
    avg_busbw_GBps: float | None = None
    hints: Hints = field(default_factory=Hints)
    preamble: list[str] = field(default_factory=list)  # launcher lines before the run
    comment: str | None = None  # "collsim ... simulated ..." in a log collsim printed

    @property
    def ranks(self) -> int | None:
        """Number of ranks: the highest rank line's number + 1, else NCCL's nRanks."""
        if self.rank_lines:
            return max(r.rank for r in self.rank_lines) + 1
        return self.hints.nranks

    @property
    def ranks_complete(self) -> bool:
        """Whether every rank has its line (logs elide them with ``...`` or cut them)."""
        numbers = {r.rank for r in self.rank_lines}
        return bool(numbers) and not self.ranks_elided and numbers == set(range(len(numbers)))

    @property
    def hosts(self) -> list[str]:
        """The distinct host names of the rank lines, in order of appearance."""
        return list(dict.fromkeys(r.host for r in self.rank_lines))

    @property
    def gpus_per_node(self) -> int | None:
        """GPUs per host. When rank lines were cut, the highest device index + 1 stands in
        (right when each host runs its devices 0..n-1); None when hosts differ."""
        ranks = self.ranks
        if not self.rank_lines or ranks is None:
            if self.hints.local_ranks is not None:
                return self.hints.local_ranks
            return None
        if self.ranks_complete:
            counts = set(Counter(r.host for r in self.rank_lines).values())
            return counts.pop() if len(counts) == 1 else None
        per_host = max(r.device for r in self.rank_lines) + 1
        return per_host if ranks % per_host == 0 else None

    @property
    def nodes(self) -> int | None:
        """Distinct hosts (inferred from ``gpus_per_node`` when rank lines were cut)."""
        if self.ranks_complete:
            return len(self.hosts)
        per_node, ranks = self.gpus_per_node, self.ranks
        if per_node and ranks:
            return ranks // per_node
        return self.hints.nnodes

    @property
    def gpu_name(self) -> str | None:
        """The GPU model nccl-tests printed (the most common one if several)."""
        names = Counter(r.gpu_name for r in self.rank_lines)
        return names.most_common(1)[0][0] if names else None

    @property
    def dtype(self) -> str | None:
        """The element type of the table, as nccl-tests names it (float, half, ...)."""
        return self.rows[0].dtype if self.rows else None

    def ranks_from_bandwidth(self) -> int | None:
        """Ranks implied by busbw / algbw, which nccl-tests prints from one figure: for runs
        whose rank lines were cut. None when the factor is 1, or when more than one rank
        count agrees with every row to the printed two decimals."""
        program = BY_COLLECTIVE.get(self.collective or "")
        rows = [r.out_of_place for r in self.rows if r.out_of_place.algbw_GBps >= 1.0]
        if program is None or program.busbw_factor(1000) == 1.0 or not rows:
            return None
        limit = round(program.busbw_factor(10**6))  # 2 for allreduce, 1 for (p-1)/p
        best = max(rows, key=lambda h: h.algbw_GBps)
        a, b = best.algbw_GBps, best.busbw_GBps
        low = (b - half_digit(b)) / (a + half_digit(a)) / limit
        high = (b + half_digit(b)) / (a - half_digit(a)) / limit
        if high >= 1.0:
            return None
        first, last = max(2, math.floor(1 / (1 - low))), math.ceil(1 / (1 - high))
        if last - first > 1000:
            return None
        fits = [p for p in range(first, last + 1)
                if all(abs(h.algbw_GBps * program.busbw_factor(p) - h.busbw_GBps)
                       <= half_digit(h.algbw_GBps) * limit + half_digit(h.busbw_GBps)
                       for h in rows)]
        return fits[0] if len(fits) == 1 else None

