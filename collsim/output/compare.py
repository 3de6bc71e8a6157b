"""The per-point ratio of two results tables (before and after a change of link bandwidth,
one machine against another): rows are matched on the columns that say what a point is."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from collsim.errors import InputError
from collsim.output.table import MEASURED_COLUMNS, format_value, key_columns

Row = dict[str, Any]


@dataclass
class Comparison:
    """Matched points, with the metric in both tables and their ratio (B / A)."""

    on: list[str]
    metric: str
    rows: list[Row]
    only_a: int
    only_b: int
    ignored: list[str] = field(default_factory=list)

    def summary(self) -> str:
        ratios = [r["ratio"] for r in self.rows if r["ratio"] is not None and r["ratio"] > 0]
        text = f"{len(self.rows)} points matched on {', '.join(self.on)}"
        if ratios:
            mean = math.exp(sum(map(math.log, ratios)) / len(ratios))
            text += (f"; {self.metric} B/A: min {min(ratios):.4g}, geometric mean {mean:.4g}, "
                     f"max {max(ratios):.4g}")
        if self.only_a or self.only_b:
            text += f"; unmatched: {self.only_a} in A, {self.only_b} in B"
        return text


def compare(columns_a: Sequence[str], rows_a: Sequence[Row], columns_b: Sequence[str],
            rows_b: Sequence[Row], metric: str = "time_s", on: Sequence[str] | None = None,
            ignore: Sequence[str] = ()) -> Comparison:
    """Match rows of A and B and divide B's ``metric`` by A's, point by point.

    Without ``on``, rows match on the key columns both tables have, except ``ignore`` and any
    column whose values the two tables never share (comparing two machines, the topology
    column would otherwise match nothing)."""
    if metric not in MEASURED_COLUMNS:
        raise InputError(f"expected a measured column ({', '.join(MEASURED_COLUMNS)}), got "
                         f"{metric!r}", key="--metric")
    for name, columns in (("A", columns_a), ("B", columns_b)):
        if metric not in columns:
            raise InputError(f"table {name} has no column {metric!r}", key="--metric")
    ignored: list[str] = []
    if on:
        missing = [c for c in on if c not in columns_a or c not in columns_b]
        if missing:
            raise InputError(f"column {missing[0]!r} is not in both tables", key="--on")
        keys = list(on)
    else:
        shared = [c for c in key_columns(columns_a) if c in key_columns(columns_b)]
        keys = []
        for column in shared:
            if column in ignore:
                continue
            values_a = {format_value(r[column]) for r in rows_a}
            if values_a.isdisjoint(format_value(r[column]) for r in rows_b):
                ignored.append(column)
            else:
                keys.append(column)
    index_a = _index(rows_a, keys, "A")
    index_b = _index(rows_b, keys, "B")
    matched = []
    for key, row_a in index_a.items():
        row_b = index_b.get(key)
        if row_b is None:
            continue
        a, b = row_a[metric], row_b[metric]
        ratio = b / a if isinstance(a, (int, float)) and isinstance(b, (int, float)) and a \
            else None
        matched.append({**{c: row_a[c] for c in keys}, f"{metric}_a": a, f"{metric}_b": b,
                        "ratio": ratio})
    if not matched:
        raise InputError(f"no point of A matches a point of B on {', '.join(keys) or 'nothing'}"
                         f"; choose the columns to match with --on or --ignore")
    return Comparison(keys, metric, matched, len(index_a) - len(matched),
                      len(index_b) - len(matched), ignored)


def _index(rows: Sequence[Row], keys: list[str], name: str) -> dict[tuple[str, ...], Row]:
    index: dict[tuple[str, ...], Row] = {}
    for row in rows:
        key = tuple(format_value(row.get(c)) for c in keys)
        if key in index:
            differ = [c for c in row if c not in keys and row[c] != index[key].get(c)
                      and c not in MEASURED_COLUMNS]
            hint = f" (they differ in {', '.join(differ)}: pass --on with those too)" \
                if differ else ""
            raise InputError(f"table {name} has two rows for the same point "
                             f"{dict(zip(keys, key, strict=True))}{hint}", key="--on")
        index[key] = row
    return index
