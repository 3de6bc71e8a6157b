"""The rows of a results table as Python gets them back: a list of dicts (one per point, in
sweep order, numbers as numbers) that knows its columns and prints as a short table."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from collsim.output.table import format_value

SHOWN = 12  # rows a repr prints before "... N more"


class Rows(list):
    """Rows of a results table; ``columns`` in the table's order, ``out`` the folder that
    holds ``results.csv`` (None when nothing was written). ``pandas.DataFrame(rows)`` takes
    it as it is."""

    def __init__(self, rows: Iterable[dict[str, Any]], columns: Sequence[str],
                 out: Path | None = None) -> None:
        super().__init__(rows)
        self.columns = list(columns)
        self.out = out

    def column(self, name: str) -> list[Any]:
        """Every row's value of one column, in order."""
        if name not in self.columns:
            raise KeyError(f"no column {name!r}; the columns are {', '.join(self.columns)}")
        return [row.get(name) for row in self]

    def where(self, **values: Any) -> Rows:
        """The rows whose columns hold the given values (``where(algorithm="ring")``)."""
        for name in values:
            self.column(name)  # an unknown column is an error, not an empty result
        kept = [row for row in self if all(row.get(k) == v for k, v in values.items())]
        return Rows(kept, self.columns, self.out)

    def __repr__(self) -> str:
        shown = [c for c in self.columns if c != "scenario"]
        cells = [shown] + [[_cell(row.get(c)) for c in shown] for row in self[:SHOWN]]
        widths = [max(len(line[i]) for line in cells) for i in range(len(shown))]
        numeric = [all(isinstance(row[c], (int, float)) for row in self[:SHOWN]
                       if row.get(c) is not None) for c in shown]
        lines = ["  ".join(text.rjust(width) if right else text.ljust(width)
                           for text, width, right in zip(line, widths, numeric, strict=True))
                 .rstrip() for line in cells]
        if len(self) > SHOWN:
            lines.append(f"... {len(self) - SHOWN} more rows")
        return "\n".join(lines) if self else f"Rows([], columns={self.columns})"


def _cell(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else format_value(value)
