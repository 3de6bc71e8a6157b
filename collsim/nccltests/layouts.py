"""How nccl-tests prints its table, per layout: the column header and the numbers' precision.

Two layouts are in use (facts from NVIDIA/nccl-tests src/common.cu and src/util.cu):

- ``classic`` (nccl-tests before the 2.17 series): time ``%7.2f`` below 100 us, ``%7.1f``
  below 10000 us, ``%7.0f`` above; algbw and busbw ``%6.2f``; ``#wrong`` ``%5g`` or ``N/A``.
- ``adaptive`` (seen with ``nccl-tests version 2.17.9``): ``getFloatStr`` — two decimals,
  fewer as the integer part grows, ``e`` notation when it would not fit — at width 7 for
  time and 6 for the bandwidths; ``#wrong`` ``%6g`` and a header one column wider.

The reader tells them apart by the header's spacing (``busbw #wrong`` or ``busbw  #wrong``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

_LEAD = "# %10s  %12s  %8s  %6s  %6s"
_PLACEMENTS = "           out-of-place                       in-place          "
_NAMES = ("size", "count", "type", "redop", "root",
          "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong")
_UNITS = ("(B)", "(elements)", "", "", "",
          "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "")
ROW_LEAD = "%12d  %12d  %8s  %6s  %6s"


def float_str(value: float, width: int) -> str:
    """nccl-tests' getFloatStr: precision chosen from the number of integer digits."""
    digits = 0
    place = 1
    while value >= place and digits < 400:  # digits of the integer part
        digits += 1
        place *= 10
    if digits < width - 2:
        return f"{value:{width}.2f}"
    if digits < width - 1:
        return f"{value:{width}.1f}"
    if digits < width + 1:
        return f"{value:{width}.0f}"
    if width >= 7:
        return f"{value:{width}.1e}"
    return f"{value:{width}.0e}"


def classic_time(us: float) -> str:
    """Time column of the classic layout: fixed thresholds at 100 and 10000 us."""
    if us >= 10000.0:
        return f"{us:7.0f}"
    if us >= 100.0:
        return f"{us:7.1f}"
    return f"{us:7.2f}"


@dataclass(frozen=True)
class Layout:
    """One way nccl-tests lays out its table."""

    name: str
    time: Callable[[float], str]
    bandwidth: Callable[[float], str]
    wrong: str  # printf format of the #wrong count, separator included
    unchecked: str  # what stands for #wrong under -c 0, separator included
    names: str  # printf format of the column-name line
    units: str  # printf format of the units line

    def half(self, time_us: float, algbw: float, busbw: float, wrong: int | None) -> str:
        """One placement's four fields, each with its leading separator."""
        fields = f"  {self.time(time_us)}  {self.bandwidth(algbw)}  {self.bandwidth(busbw)}"
        return fields + (self.unchecked if wrong is None else self.wrong % wrong)

    def column_header(self) -> list[str]:
        """The three comment lines above the rows."""
        return [_LEAD % ("", "", "", "", "") + _PLACEMENTS,
                self.names % _NAMES, self.units % _UNITS]


_CLASSIC_HALF = "  %7s  %6s  %6s %6s"
_ADAPTIVE_HALF = "  %7s  %6s  %6s  %6s"

LAYOUTS: dict[str, Layout] = {lay.name: lay for lay in (
    Layout("classic", classic_time, lambda v: f"{v:6.2f}", "  %5g", "    N/A",
           _LEAD + _CLASSIC_HALF * 2,
           _LEAD + "  %7s  %6s  %6s  %5s" * 2),
    Layout("adaptive", lambda v: float_str(v, 7), lambda v: float_str(v, 6), "  %6g", "    N/A",
           _LEAD + _ADAPTIVE_HALF * 2 + " ",
           _LEAD + _ADAPTIVE_HALF * 2 + " "),
)}

DEFAULT_LAYOUT = "adaptive"
