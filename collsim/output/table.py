"""The results table (``results.csv``): the contract's columns (docs/design.md#results-table),
what the call ran with, the engine's path, then one column per swept key.

Values are written so that the same simulation always gives the same bytes: integers as
digits, floats as Python's shortest round-trip text, missing values empty. Rows are appended
one ``write`` at a time as points finish; :func:`finish` rewrites the file in sweep order.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Iterable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any, TextIO

from collsim.errors import InputError
from collsim.output.files import cut_torn_tail, replace_text, reported
from collsim.simulate import (  # the columns are declared with the record that fills them
    CHOICE_COLUMNS,
    ENGINE_COLUMNS,
    MEASURED_COLUMNS,
    RESULT_COLUMNS,
)
from collsim.yamlfile import read_text

# A million-point sweep (the most a scenario may have) writes about 300 MB.
MAX_TABLE_BYTES = 2**30
NUMERIC_COLUMNS = {"ranks": int, "size_bytes": int, "time_s": float, "algbw_GBps": float,
                   "busbw_GBps": float, "analytic_time_s": float}


def header(swept: Sequence[str]) -> list[str]:
    """The table's columns for a scenario sweeping ``swept`` keys."""
    return [*RESULT_COLUMNS, *(c for c in CHOICE_COLUMNS if c not in swept), *ENGINE_COLUMNS,
            *swept]


def outcome_columns(columns: Sequence[str]) -> set[str]:
    """The measured columns, the choice columns in their place after the contract's (up to
    ``selected``, always last there), and the engine's ``path`` right after them; a swept
    protocol or channels further on is a key. A table written before ``path`` was a column
    ends its outcomes at ``selected``."""
    columns = list(columns)
    outcomes = set(MEASURED_COLUMNS)
    if "analytic_time_s" in columns:
        allowed = CHOICE_COLUMNS
        for column in columns[columns.index("analytic_time_s") + 1:]:
            if column not in allowed:
                break
            outcomes.add(column)
            if column == CHOICE_COLUMNS[-1]:
                allowed = ENGINE_COLUMNS
    return outcomes


def key_columns(columns: Sequence[str]) -> list[str]:
    """The columns that identify a point (everything but the outcomes and the scenario)."""
    outcomes = outcome_columns(columns)
    return [c for c in columns if c not in outcomes and c != "scenario"]


def format_value(value: Any) -> str:
    """One cell: '' for None, 'true'/'false', digits, or the shortest round-trip float."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def format_row(row: dict[str, Any], columns: Sequence[str]) -> str:
    """One CSV line (with its newline) holding ``row``'s values in ``columns`` order."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow([format_value(row.get(c)) for c in columns])
    return buffer.getvalue()


class TableWriter:
    """Appends rows to a results file, each flushed whole, so the file is always a table.

    Opening cuts a torn last line first (left by a crash or a full disk in the middle of a
    write), so that the next row starts on a line of its own instead of merging with it."""

    def __init__(self, path: Path, columns: Sequence[str]) -> None:
        self.path = Path(path)
        self.columns = list(columns)
        with reported(self.path):
            self._file = open(self.path, "ab+", buffering=0)  # noqa: SIM115 - see close()
            cut_torn_tail(self._file)
            if self._file.tell() == 0:
                self._append(format_row(dict(zip(columns, columns, strict=True)), columns))

    def write(self, row: dict[str, Any]) -> None:
        with reported(self.path):
            self._append(format_row(row, self.columns))

    def _append(self, line: str) -> None:
        """Write one whole line; if the write fails half-way, cut the half line again."""
        data = memoryview(line.encode("utf-8"))
        try:
            while data:
                data = data[self._file.write(data):]
        except OSError:
            with suppress(OSError):
                cut_torn_tail(self._file)
            raise

    def close(self) -> None:
        if not self._file.closed:
            try:
                with reported(self.path):
                    os.fsync(self._file.fileno())
            finally:
                self._file.close()

    def __enter__(self) -> TableWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_raw(path: Path, notes: list[str] | None = None
             ) -> tuple[list[str], list[list[str]]]:
    """Header and rows as text. Rows that cannot be part of the table (a last line cut short
    by a crash, a row with more or fewer cells than the header) are left out, each with a
    note naming the file and line appended to ``notes``."""
    columns, records = _records(Path(path), notes)
    return columns, [row for _, row in records]


def _records(path: Path, notes: list[str] | None) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """read_raw's header and rows, each row with the line it starts on."""
    text = read_text(path, "results table", MAX_TABLE_BYTES)
    complete = text if text.endswith("\n") else text[: text.rfind("\n") + 1]
    reader = csv.reader(io.StringIO(complete))
    try:
        columns = next(reader)
    except StopIteration:
        raise InputError("empty results table: no header row", file=str(path)) from None
    except csv.Error as exc:
        raise InputError(f"not a results table: {exc}", file=str(path), line=1) from None
    missing = [c for c in RESULT_COLUMNS if c not in columns]
    if missing:
        raise InputError(f"not a collsim results table: no column {', '.join(missing)}",
                         file=str(path), line=1)
    rows, line = [], reader.line_num
    say = notes.append if notes is not None else (lambda note: None)
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            say(f"{path}:{line + 1}: left out: {exc}")
            line = reader.line_num
            continue
        if len(row) == len(columns):
            rows.append((line + 1, row))
        elif row:
            say(f"{path}:{line + 1}: left out: {len(row)} cells where the header has "
                f"{len(columns)}")
        line = reader.line_num
    if complete != text:
        say(f"{path}:{complete.count(chr(10)) + 1}: left out: the last line is cut short "
            f"(a run stopped while writing it)")
    return columns, rows


# What a measured value may be: a time or a bandwidth is a finite number, never negative.
def _measured(value: float) -> bool:
    return math.isfinite(value) and value >= 0


def parse_cell(column: str, text: str) -> Any:
    """A cell back to a value: numbers for numeric columns and numeric-looking swept values."""
    if text == "":
        return None
    kind = NUMERIC_COLUMNS.get(column)
    if kind is not None:
        return kind(text)
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return text


def read_table(path: str | Path, notes: list[str] | None = None
               ) -> tuple[list[str], list[dict[str, Any]]]:
    """Columns and rows of a results table, with values parsed. A row whose numbers do not
    parse, or whose measured values are NaN, infinite or negative, is left out with a note
    (as :func:`read_raw` does for ragged rows), so no figure or ratio is made of it."""
    columns, records = _records(Path(path), notes)
    say = notes.append if notes is not None else (lambda note: None)
    out = []
    for number, row in records:
        try:
            parsed = {c: parse_cell(c, v) for c, v in zip(columns, row, strict=True)}
        except ValueError as exc:
            say(f"{path}:{number}: left out: {exc}")
            continue
        bad = [c for c in MEASURED_COLUMNS
               if parsed.get(c) is not None and not _measured(parsed[c])]
        bad += [c for c in ("ranks", "size_bytes") if (parsed.get(c) or 0) < 0]
        if parsed.get("time_s") is None:
            bad.append("time_s")
        if bad:
            shown = ", ".join(f"{c}={row[columns.index(c)] or 'empty'}" for c in bad)
            say(f"{path}:{number}: left out: {shown} (expected a finite number, not "
                f"negative)")
            continue
        out.append(parsed)
    return columns, out


def rewrite_sorted(path: Path, order: dict[tuple[str, ...], int]) -> None:
    """Rewrite the table in sweep order (rows unknown to ``order`` last, as found), atomically."""
    columns, rows = read_raw(path)
    keys = [columns.index(c) for c in key_columns(columns)]
    unknown = len(order)
    ranked = sorted(enumerate(rows), key=lambda item: (
        order.get(tuple(item[1][k] for k in keys), unknown), item[0]))
    write_rows(path, columns, (row for _, row in ranked))


def write_rows(path: Path, columns: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    """Write header and text rows to ``path`` whole or not at all (temporary file, rename)."""
    def write(file: TextIO) -> None:
        writer = csv.writer(file, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(rows)

    replace_text(path, write)


def point_key(values: dict[str, Any], columns: Sequence[str]) -> tuple[str, ...]:
    """The text key of a point (as its row would hold it) for matching rows to points."""
    return tuple(format_value(values.get(c)) for c in key_columns(columns))
