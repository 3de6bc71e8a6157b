"""An nccl-tests column header, and the rows read against it.

The header names the columns, so the reader follows what the log printed rather than one
version's layout: older tables have no ``redop`` or ``root`` column or an ``error`` column for
``#wrong``, newer ones may add per-iteration (``i_min`` ...) or ``timestamp`` columns, and
users paste tables with a column of their own in front."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from collsim.errors import InputError
from collsim.nccltests.run import Half, Row

_FIXED = ("size", "count", "type", "redop", "root")
_HALF = {"time": "time", "cputime": "time", "algbw": "algbw", "busbw": "busbw",
         "#wrong": "wrong", "error": "error"}
_PER_ITERATION = ("i_min", "i_max", "i_p99", "i_cv%")

# What a row's numbers may be, checked where they are read so that nothing downstream (the
# comparison, the fit's logarithms) meets an infinity or a NaN. A call of more than 10^12 us
# (11.6 days) is a corrupted row, not a measurement, and so is a bandwidth above 10^15 GB/s:
# nccl-tests derives bandwidths from size and time, so a tiny printed time may legitimately
# give far more than a link carries (1024 TiB in 0.01 us is 1.1e14 GB/s), and only a figure
# past what any size and printed time give is refused. Sizes stop at 1024 TiB, as everywhere
# in collsim.
MAX_TIME_US = 1e12
MAX_BANDWIDTH_GBPS = 1e15
MAX_BYTES = 2**50
_UNITS = {"time": " us", "algbw": " GB/s", "busbw": " GB/s"}
MAX_DIGITS = 20  # an integer field longer than this is refused before Python converts it


@dataclass(frozen=True)
class Column:
    """One printed column: ``half`` is 0 (out-of-place), 1 (in-place) or None."""

    key: str
    half: int | None
    name: str


@dataclass(frozen=True)
class Table:
    """The columns a header line announces, and where that line is."""

    columns: tuple[Column, ...]
    line: int
    layout: str
    time_column: str

    @property
    def width(self) -> int:
        """Fields a row has: a timestamp prints as two (date and time)."""
        return len(self.columns) + sum(c.key == "timestamp" for c in self.columns)

    def row(self, tokens: list[str], file: str, line: int) -> Row:
        """Read one row's fields; a malformed one is an InputError at ``file:line``."""
        if len(tokens) != self.width:
            raise InputError(f"table row has {len(tokens)} fields; the column header at line "
                             f"{self.line} announces {self.width}", file=file, line=line)
        fixed: dict[str, str] = {}
        halves: list[dict[str, str]] = [{}, {}]
        extra: list[tuple[str, str]] = []
        at = 0
        for column in self.columns:
            token = tokens[at]
            at += 2 if column.key == "timestamp" else 1
            if column.half is not None:
                halves[column.half][column.key] = token
            elif column.key == "extra":
                extra.append((column.name, token))
            elif column.key in _FIXED:
                fixed[column.key] = token
        read = _Reader(file, line)
        return Row(
            size_bytes=read.integer(fixed["size"], "size", MAX_BYTES),
            count=read.integer(fixed["count"], "count", MAX_BYTES),
            dtype=fixed["type"],
            redop=fixed.get("redop"),
            root=read.integer(fixed["root"], "root", MAX_BYTES, -1) if "root" in fixed else None,
            out_of_place=read.half(halves[0], "out-of-place"),
            in_place=read.half(halves[1], "in-place") if halves[1] else None,
            line=line,
            extra=tuple(extra),
        )


def column_header(text: str, line: int) -> Table | None:
    """The table a column-name line announces; None if ``text`` is not one."""
    tokens = text.lstrip("#").split()
    if not {"size", "count", "type", "algbw", "busbw"} <= set(tokens):
        return None
    if "time" not in tokens and "cputime" not in tokens:
        return None
    columns: list[Column] = []
    half = -1
    for token in tokens:
        if token in ("time", "cputime"):
            half += 1
        if token in _FIXED:
            columns.append(Column(token, None, token))
        elif token in _HALF and 0 <= half <= 1:
            columns.append(Column(_HALF[token], half, token))
        elif token in _PER_ITERATION or token in _HALF:
            columns.append(Column("ignored", None, token))
        elif token == "timestamp":
            columns.append(Column("timestamp", None, token))
        else:
            columns.append(Column("extra", None, token))
    first = {c.key for c in columns if c.half == 0}
    if not {"time", "algbw", "busbw"} <= first:
        return None
    if "error" in first:
        layout = "legacy"
    elif "busbw  #wrong" in text:
        layout = "adaptive"
    else:
        layout = "classic"
    return Table(tuple(columns), line, layout, "cputime" if "cputime" in tokens else "time")


def looks_like_row(tokens: list[str]) -> bool:
    """Whether a line outside any table has a row's shape (size, count, type name, numbers)."""
    return (len(tokens) >= 8 and tokens[0].isdigit() and tokens[1].isdigit()
            and tokens[2].isidentifier())


class _Reader:
    """Reads one row's fields: every number finite and within the bounds above, or an
    InputError at the row's ``file:line`` naming the column."""

    def __init__(self, file: str, line: int) -> None:
        self.file, self.line = file, line

    def fail(self, what: str, token: str, expected: str) -> InputError:
        shown = token if len(token) <= 30 else f"{token[:27]}..."
        return InputError(f"{what} {shown!r} is not {expected}", file=self.file,
                          line=self.line)

    def integer(self, token: str, what: str, high: int, low: int = 0) -> int:
        digits = token.lstrip("+-")
        if not digits.isdigit():
            raise self.fail(what, token, "an integer")
        value = int(token) if len(digits) <= MAX_DIGITS else high + 1
        if not low <= value <= high:
            raise self.fail(what, token, f"an integer from {low} to {high:,}")
        return value

    def number(self, token: str | None, what: str, high: float) -> float:
        if token is None:
            raise InputError(f"row has no {what}", file=self.file, line=self.line)
        try:
            value = float(token)
        except ValueError:
            raise self.fail(what, token, "a number") from None
        if not 0 <= value <= high:  # False for NaN too
            unit = _UNITS.get(what.rsplit(" ", 1)[-1], "")
            raise self.fail(what, token, f"a number from 0 to {high:g}{unit}")
        return value

    def half(self, fields: dict[str, str], name: str) -> Half:
        wrong = error = None
        if fields.get("wrong", "N/A") != "N/A":
            wrong = self.integer(fields["wrong"], f"{name} #wrong", MAX_BYTES)
        if fields.get("error", "N/A") != "N/A":
            error = self.number(fields["error"], f"{name} error", sys.float_info.max)
        return Half(self.number(fields.get("time"), f"{name} time", MAX_TIME_US),
                    self.number(fields.get("algbw"), f"{name} algbw", MAX_BANDWIDTH_GBPS),
                    self.number(fields.get("busbw"), f"{name} busbw", MAX_BANDWIDTH_GBPS),
                    wrong, error)
