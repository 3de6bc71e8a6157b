"""Text to numbers for sizes (bytes), bandwidths (bytes/s) and times (seconds).

Sizes: B, KB, MB, GB, TB (powers of 1000), KiB, MiB, GiB, TiB (powers of 1024).
Bandwidths: B/s, KB/s, MB/s, GB/s, TB/s, and bit rates bps, Kbps, Mbps, Gbps, Tbps.
Times: ns, us, ms, s. Plain numbers mean bytes, bytes/s and seconds.

Bandwidths and times (link latencies) must lie in a physical range, so that no time the
engine computes can overflow or underflow:

- bandwidth from 1 KB/s to 1000 TB/s (1 PB/s): the slowest link of a GPU machine (1 GbE,
  125 MB/s) is five orders of magnitude above the floor, which keeps a byte's time at most
  1 ms (a TiB takes at most 1e9 s); the fastest (NVLink5, 900 GB/s per GPU per direction;
  an NVL72 rack's ~130 TB/s in all) is below the ceiling, at which a link's routing cost
  (femtoseconds per byte, see :mod:`collsim.hardware.graph`) reaches its floor of one.
- time 0, or from 1 ps to 1 s: a network hop takes microseconds and a link between
  continents about 0.1 s, so sums of a million hops stay far from any float limit; below
  a picosecond (light crosses 0.3 mm) a latency is a rounding error, not a figure.
"""

from __future__ import annotations

import math
import re

SIZE_UNITS = {
    "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
    "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40,
}
BANDWIDTH_UNITS = {
    "B/s": 1.0, "KB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9, "TB/s": 1e12,
    "bps": 1 / 8, "Kbps": 1e3 / 8, "Mbps": 1e6 / 8, "Gbps": 1e9 / 8, "Tbps": 1e12 / 8,
}
TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
BANDWIDTH_RANGE = (1e3, 1e15)   # bytes/s, both ends allowed (see the module docstring)
TIME_RANGE = (1e-12, 1.0)       # seconds, both ends allowed, and 0

_NUMBER_UNIT = re.compile(r"^\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*([A-Za-z/]*)\s*$")


# Digits of the longest integer collsim reads from text. Python refuses to convert more than
# 4,300 (sys.get_int_max_str_digits) with a ValueError; no count, size or rank comes near 20.
MAX_DIGITS = 1_000


class UnitError(ValueError):
    """A quantity that does not parse; the message says what was expected."""


def whole_number(text: str, what: str = "whole number") -> int:
    """The integer the decimal digits ``text`` spell, refused above :data:`MAX_DIGITS`."""
    digits = text.strip().lstrip("+-")
    if len(digits) > MAX_DIGITS:
        raise UnitError(f"expected a {what}, got an integer of {len(digits):,} digits (at most "
                        f"{MAX_DIGITS:,})")
    return int(text)


def _split(text: object, what: str, units: dict[str, float]) -> tuple[float, str]:
    if isinstance(text, bool) or not isinstance(text, (int, float, str)):
        raise UnitError(f"expected a {what} such as {_example(units)}, got {_shown(text)}")
    if isinstance(text, (int, float)):
        value, unit = _float(text), ""
    else:
        match = _NUMBER_UNIT.match(text)
        if not match:
            raise UnitError(f"expected a {what} such as {_example(units)}, got {_shown(text)}")
        value, unit = float(match.group(1)), match.group(2)
    if unit and unit not in units:
        raise UnitError(
            f"unknown unit {unit!r} in {_shown(text)}: a {what} takes {', '.join(units)}"
        )
    if not math.isfinite(value) and not isinstance(text, int):  # a huge int: out of range
        raise UnitError(f"expected a finite {what}, got {_shown(text)}")
    if value < 0:
        raise UnitError(f"a {what} cannot be negative, got {_shown(text)}")
    return value, unit


def _float(number: int | float) -> float:
    """``number`` as a float; an integer too large for one becomes an infinity."""
    try:
        return float(number)
    except OverflowError:
        return math.inf if number > 0 else -math.inf


def _shown(value: object) -> str:
    """``value`` for a message: an integer of more than 30 digits by its size alone."""
    if isinstance(value, int) and value.bit_length() > 100:
        return f"an integer of about {int(value.bit_length() * math.log10(2))} digits"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _in_range(value: float, low: float, high: float, what: str, low_text: str,
              high_text: str, shown: str) -> None:
    if not low <= value <= high:
        raise UnitError(f"a {what} must lie between {low_text} and {high_text}, got {shown}")


def _example(units: dict[str, float]) -> str:
    return {id(SIZE_UNITS): "'4MiB' or '1GB'", id(BANDWIDTH_UNITS): "'100GB/s' or '400Gbps'",
            id(TIME_UNITS): "'1.5us' or '2ms'"}[id(units)]


def parse_size(text: object) -> int:
    """Bytes from '4MiB', '1GB', '512' or an integer; a whole number of bytes, not negative."""
    value, unit = _split(text, "size", SIZE_UNITS)
    nbytes = value * SIZE_UNITS[unit or "B"]
    if not math.isfinite(nbytes):
        raise UnitError(f"expected a finite size, got {_shown(text)}")
    if abs(nbytes - round(nbytes)) > 1e-6 * max(1.0, nbytes):
        raise UnitError(f"a size must be a whole number of bytes, got {_shown(text)}")
    return int(round(nbytes))


def parse_bandwidth(text: object) -> float:
    """Bytes per second from '900GB/s', '400Gbps' (= 50 GB/s) or a number, within
    :data:`BANDWIDTH_RANGE`."""
    value, unit = _split(text, "bandwidth", BANDWIDTH_UNITS)
    if value == 0:
        raise UnitError(f"a bandwidth must be positive, got {_shown(text)}")
    bandwidth = value * BANDWIDTH_UNITS[unit or "B/s"]
    check_bandwidth(bandwidth, text)
    return bandwidth


def check_bandwidth(bandwidth: float, text: object = None) -> None:
    """Raise UnitError unless ``bandwidth`` (B/s) lies in :data:`BANDWIDTH_RANGE`."""
    _in_range(bandwidth, *BANDWIDTH_RANGE, "bandwidth", "1 KB/s", "1000 TB/s",
              f"{bandwidth:.3g} B/s" if text is None else _shown(text))


def parse_time(text: object) -> float:
    """Seconds from '1.5us', '2ms', '0' or a number: 0, or within :data:`TIME_RANGE`."""
    value, unit = _split(text, "time", TIME_UNITS)
    seconds = value * TIME_UNITS[unit or "s"]
    if seconds != 0:
        _in_range(seconds, *TIME_RANGE, "time", "1 ps (1e-12 s)", "1 s, or be 0",
                  _shown(text))
    return seconds


def format_size(nbytes: float, iec: bool = False) -> str:
    """Short binary size for tables: 1K, 4M, 1G (exact powers) or 1.5M. With ``iec`` the unit
    is spelled out (1 KiB, 1.5 MiB, 8 B), for figures, whose readers may take 1K for 1000."""
    suffix, space = ("iB", " ") if iec else ("", "")
    for unit, factor in (("T", 2**40), ("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if nbytes >= factor:
            value = nbytes / factor
            # 3 significant digits, but whole numbers from 1000 up (1015K, not 1.02e+03K)
            number = f"{value:g}" if value == int(value) else (
                f"{value:.3g}" if value < 1000 else f"{value:.0f}")
            return f"{number}{space}{unit}{suffix}"
    number = f"{int(nbytes)}" if nbytes == int(nbytes) else f"{nbytes:g}"
    return f"{number}{space}B"


def format_bytes(nbytes: float) -> str:
    """A byte count with its binary unit, for reports: 512 B, 896 KiB, 1.5 GiB."""
    for unit, factor in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= factor:
            return f"{nbytes / factor:.4g} {unit}"
    return f"{nbytes:.4g} B"


def format_time(seconds: float) -> str:
    """Seconds in the unit that reads best: 12.3 us, 4.56 ms."""
    for unit, factor in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= factor:
            return f"{seconds / factor:.4g} {unit}"
    return f"{seconds / 1e-9:.4g} ns"
