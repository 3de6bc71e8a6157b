"""Workload quantities the units module does not cover: counts of parameters or FLOPs with
decimal suffixes (``7B``, ``1.8T``), FLOP rates (``989TFLOP/s``), ratios (``2x``) and costs
given either as a time (``50us``) or as a throughput (``400GB/s``)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from collsim.units import UnitError, parse_bandwidth, parse_time

SUFFIXES = {"": 1.0, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12, "P": 1e15}
_COUNT = re.compile(r"^\s*((?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*([KMBGTP]?)\s*"
                    r"(FLOPs?|FLOP/s|FLOPS)?\s*$")


def _number(text: object, what: str, unit_words: tuple[str, ...]) -> float:
    if isinstance(text, bool) or not isinstance(text, (int, float, str)):
        raise UnitError(f"expected {what}, got {text!r}")
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        match = _COUNT.match(text)
        if not match or (match.group(3) and match.group(3) not in unit_words):
            raise UnitError(f"expected {what}, got {text!r}")
        value = float(match.group(1)) * SUFFIXES[match.group(2)]
    if not math.isfinite(value) or value <= 0:
        raise UnitError(f"expected {what} (positive and finite), got {text!r}")
    return value


def parse_count(text: object) -> int:
    """A whole count: ``7B`` (7e9), ``218M``, ``4096`` or a number (K, M, B = G, T, P are
    powers of 1000)."""
    value = _number(text, "a count such as '7B', '218M' or 4096", ())
    return int(round(value))


def parse_flops(text: object) -> float:
    """Floating-point operations: ``1.8T``, ``1.8TFLOP`` or a number."""
    return _number(text, "FLOPs such as '1.8T' or '1.8TFLOP'", ("FLOP", "FLOPs"))


def parse_flop_rate(text: object) -> float:
    """FLOP/s: ``989TFLOP/s``, ``989T`` or a number."""
    return _number(text, "a FLOP rate such as '989TFLOP/s'", ("FLOP/s", "FLOPS"))


def parse_ratio(text: object) -> float:
    """A multiple written ``2x`` (or ``2``)."""
    if isinstance(text, str) and text.strip().endswith("x"):
        text = text.strip()[:-1]
    try:
        value = float(text) if not isinstance(text, bool) else math.nan
    except (TypeError, ValueError):
        raise UnitError(f"expected a multiple such as '2x', got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise UnitError(f"expected a positive multiple such as '2x', got {text!r}")
    return value


@dataclass(frozen=True)
class Cost:
    """What some work costs: a fixed time, or a throughput over the bytes it handles."""

    seconds: float = 0.0
    throughput: float | None = None  # bytes per second

    def time(self, nbytes: int) -> float:
        """Seconds this cost takes on ``nbytes`` bytes."""
        return self.seconds if self.throughput is None else nbytes / self.throughput


FREE = Cost()


def parse_cost(text: object) -> Cost:
    """``50us`` (a time per use) or ``400GB/s`` (a throughput over the bytes)."""
    if isinstance(text, str) and (text.strip().endswith("/s") or text.strip().endswith("bps")):
        return Cost(throughput=parse_bandwidth(text))
    try:
        return Cost(seconds=parse_time(text))
    except UnitError:
        raise UnitError(f"expected a time such as '50us' or a throughput such as "
                        f"'400GB/s', got {text!r}") from None
