"""Which rows a figure shows and how it splits them: one panel per value of one column, one
line per combination of the others that vary. Figures ask this module, so every kind splits
the same way and labels series the same way."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from collsim.errors import InputError
from collsim.output.table import format_value, outcome_columns, parse_cell
from collsim.units import UnitError, format_size, parse_size

Row = dict[str, Any]
PREFERRED = ("collective", "topology")
DERIVED = ("speedup",)  # computed by a figure from measured columns
LAST = ("ranks", "size_bytes", "algorithm")


def key_columns_of(rows: Sequence[Row]) -> list[str]:
    """The columns that say what a point is, in the order figures prefer to split by them."""
    if not rows:
        return []
    outcomes = outcome_columns(list(rows[0]))
    columns = [c for c in rows[0] if c not in outcomes and c not in DERIVED and c != "scenario"]
    swept = [c for c in columns if c not in PREFERRED and c not in LAST]
    return [c for c in PREFERRED if c in columns] + swept + [c for c in LAST if c in columns]


def distinct(rows: Iterable[Row], column: str) -> list[Any]:
    """The values ``column`` takes, numbers sorted, text in order of first appearance."""
    values = list(dict.fromkeys(row.get(column) for row in rows))
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return sorted(values)
    return values


def _as_cell(column: str, value: Any) -> str:
    if column == "size_bytes" and isinstance(value, str):
        try:
            value = parse_size(value)
        except UnitError as exc:
            raise InputError(f"figure selects size_bytes={value!r}: {exc}") from None
    return format_value(parse_cell(column, format_value(value)))


def select(rows: Sequence[Row], choice: dict[str, Any] | None) -> list[Row]:
    """The rows whose columns hold one of the chosen values (``{ranks: [8, 64]}``)."""
    chosen = list(rows)
    known = set(rows[0]) if rows else set()
    for column, wanted in (choice or {}).items():
        if rows and column not in known:
            raise InputError(f"a figure selects column {column!r}, which the table does not "
                             f"have; its columns are {', '.join(key_columns_of(rows))}")
        texts = {_as_cell(column, v) for v in (wanted if isinstance(wanted, list) else [wanted])}
        chosen = [r for r in chosen if _as_cell(column, r.get(column)) in texts]
    return chosen


def spread(values: Sequence[Any], most: int) -> list[Any]:
    """At most ``most`` values, evenly spaced, always keeping the first and the last."""
    if len(values) <= most:
        return list(values)
    picks = sorted({round(i * (len(values) - 1) / (most - 1)) for i in range(most)})
    return [values[i] for i in picks]


def value_label(column: str, value: Any) -> str:
    """How a value reads in a legend or a panel title."""
    if column == "size_bytes":
        return f"size {format_size(value, iec=True)}"
    if column == "ranks":
        return f"{value} ranks"
    if column in ("algorithm", "topology", "collective"):
        return str(value)
    return f"{column.rsplit('.', 1)[-1]} = {value}"


@dataclass
class Plan:
    """How one figure splits its rows."""

    panel: str | None
    panel_values: list[Any]
    lines: list[str]
    fixed: dict[str, Any]
    dropped_panels: int = 0

    def panel_rows(self, rows: Sequence[Row], value: Any) -> list[Row]:
        return [r for r in rows if self.panel is None or r.get(self.panel) == value]

    def panel_title(self, value: Any) -> str:
        return "" if self.panel is None else value_label(self.panel, value)

    def line_key(self, row: Row) -> tuple[Any, ...]:
        return tuple(row.get(c) for c in self.lines)

    def line_label(self, key: tuple[Any, ...]) -> str:
        return ", ".join(value_label(c, v) for c, v in zip(self.lines, key, strict=True)
                         if v is not None)

    def line_keys(self, rows: Sequence[Row]) -> list[tuple[Any, ...]]:
        """Every series, grouped by the first line column, then the second, ..., each in the
        order its values first appear (sweep order), so styles are stable."""
        keys = list(dict.fromkeys(self.line_key(r) for r in rows))
        orders = [list(dict.fromkeys(k[i] for k in keys)) for i in range(len(self.lines))]
        return sorted(keys, key=lambda k: [orders[i].index(v) for i, v in enumerate(k)])

    def context(self) -> str:
        """The values every series shares, for the subtitle: 'allreduce · switch · 64 ranks'."""
        shown = [value_label(c, v) for c, v in self.fixed.items() if c != "algorithm"]
        return " · ".join(shown)


def plan(rows: Sequence[Row], x: str, spec: dict[str, Any], lines: str = "algorithm",
         most_panels: int = 9, ignore: Sequence[str] = ()) -> Plan:
    """Panels by ``spec['panels']`` (``none`` for a single panel) or the first column that
    varies; lines by ``lines`` plus every other varying column; ``x`` and the ``ignore``
    columns never split."""
    columns = key_columns_of(rows)
    for key in ("panels", "lines"):
        if spec.get(key) and spec[key] not in columns and spec[key] != "none":
            raise InputError(f"figure {spec.get('name', spec['kind'])!r}: {key} column "
                             f"{spec[key]!r} is not in the table; its columns are "
                             f"{', '.join(columns)}")
    varying = [c for c in columns
               if c != x and c not in ignore and len(distinct(rows, c)) > 1]
    line_columns = [spec.get("lines") or lines]
    panel = spec.get("panels") or next((c for c in varying if c not in line_columns), None)
    if panel in (x, "none") or panel in line_columns:
        panel = None
    line_columns += [c for c in varying if c not in line_columns and c != panel]
    values = distinct(rows, panel) if panel else [None]
    shown = spread(values, most_panels)
    fixed = {c: rows[0].get(c) for c in columns
             if c != x and c not in ignore and c not in varying and c != panel and rows}
    return Plan(panel, shown, line_columns, fixed, len(values) - len(shown))
