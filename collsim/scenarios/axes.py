"""Sweep axes: the values of one key, written as a value, a list, or a range
``{from, to, factor}`` (geometric) / ``{from, to, step}`` (arithmetic), both ends inclusive."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from collsim.units import (
    BANDWIDTH_UNITS,
    SIZE_UNITS,
    TIME_UNITS,
    UnitError,
    parse_size,
    whole_number,
)
from collsim.yamlfile import Document, KeyPath

MAX_VALUES = 100_000
# 1 PiB: far beyond any one collective call, and small enough that every size below it is an
# exact float (sizes are parsed through floats), so a typo of 30 digits is refused, not rounded.
MAX_SIZE_BYTES = 2**50

_QUANTITY = re.compile(r"^\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*([A-Za-z/]+)\s*$")
_FAMILIES = (SIZE_UNITS, BANDWIDTH_UNITS, TIME_UNITS)


def quantity_value(value: Any) -> float | None:
    """The number a unit-bearing text stands for ('200GB/s' -> 2e11), None if it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if not isinstance(value, str):
        return None
    match = _QUANTITY.match(value)
    if not match:
        return None
    for family in _FAMILIES:
        if match.group(2) in family:
            return float(match.group(1)) * family[match.group(2)]
    return None


def message_size(value: Any) -> int:
    """A message size in bytes ('4MiB', 1024), at most MAX_SIZE_BYTES."""
    size = parse_size(value)
    if size > MAX_SIZE_BYTES:
        raise UnitError(f"a message size may be at most 1024TiB ({MAX_SIZE_BYTES} B), got "
                        f"{value!r}")
    return size


def parse_rank_count(value: Any) -> int:
    """A rank count: a positive whole number."""
    if isinstance(value, bool) or not isinstance(value, (int, str, float)):
        raise UnitError(f"expected a whole number of ranks, got {value!r}")
    if isinstance(value, str) and value.strip().isdigit():
        value = whole_number(value, "rank count")  # exactly: a float would round it
    try:
        number = value if isinstance(value, int) else float(value)
    except ValueError:
        raise UnitError(f"expected a whole number of ranks, got {value!r}") from None
    if not math.isfinite(number) or number != int(number) or number < 1:
        raise UnitError(f"expected a whole number of ranks, at least 1, got {value!r}")
    return int(number)


def _parsed(doc: Document, path: KeyPath, value: Any, parse: Callable[[Any], Any]) -> Any:
    try:
        return parse(value)
    except (UnitError, ValueError, TypeError) as exc:
        raise doc.error(path, str(exc)) from None


def _unique(values: list[Any]) -> list[Any]:
    seen: set[Any] = set()
    out = []
    for value in values:
        marker = (type(value).__name__, value)
        if marker not in seen:
            seen.add(marker)
            out.append(value)
    return out


def numeric_axis(doc: Document, path: KeyPath, spec: Any, parse: Callable[[Any], int]
                 ) -> list[int]:
    """Whole-number values (sizes in bytes, rank counts) of the axis at ``path``."""
    if isinstance(spec, list):
        return _unique([_parsed(doc, path + (i,), v, parse) for i, v in enumerate(spec)])
    if not isinstance(spec, dict):
        return [_parsed(doc, path, spec, parse)]
    first = _parsed(doc, path + ("from",), spec["from"], parse)
    last = _parsed(doc, path + ("to",), spec["to"], parse)
    _check_order(doc, path, spec, first, last)
    if ("factor" in spec) == ("step" in spec):
        raise doc.error(path, "a range takes exactly one of 'factor' (from, from*factor, ...) "
                              "or 'step' (from, from+step, ...)")
    if "factor" in spec:
        factor = spec["factor"]
        values, k = [], 0
        while True:
            try:
                value = first * factor**k if isinstance(factor, int) else \
                    int(round(first * float(factor) ** k))
            except OverflowError:
                break
            if value > last or (first == 0 and k > 0):
                break
            values.append(int(value))
            k += 1
            _check_count(doc, path, len(values))
        return _unique(values)
    step = _parsed(doc, path + ("step",), spec["step"], parse)
    if step <= 0:
        raise doc.error(path + ("step",), f"a step must be positive, got {spec['step']!r}")
    _check_count(doc, path, (last - first) // step + 1)
    return list(range(first, last + 1, step))


def value_axis(doc: Document, path: KeyPath, spec: Any) -> list[Any]:
    """Values of a topology key or algorithm parameter, kept as written so the topology or the
    algorithm parses them; a range of quantities keeps the unit of its ``from``."""
    if isinstance(spec, list):
        return _unique(spec)
    if not isinstance(spec, dict):
        return [spec]
    first, unit, scale = _range_end(doc, path + ("from",), spec["from"])
    last, last_unit, _ = _range_end(doc, path + ("to",), spec["to"])
    if (unit == "") != (last_unit == "") or (unit and _family(unit) is not _family(last_unit)):
        raise doc.error(path + ("to",), f"'from' and 'to' must be the same kind of quantity, got "
                                        f"{spec['from']!r} and {spec['to']!r}")
    _check_order(doc, path, spec, first, last)
    if ("factor" in spec) == ("step" in spec):
        raise doc.error(path, "a range takes exactly one of 'factor' or 'step'")
    if "factor" in spec:
        factor = float(spec["factor"])
        if first <= 0:
            raise doc.error(path + ("from",), "a geometric range must start above zero")
        count = int(math.floor(math.log(last / first) / math.log(factor) + 1e-9)) + 1
        _check_count(doc, path, count)
        numbers = [first * factor**k for k in range(count)]
    else:
        step, step_unit, _ = _range_end(doc, path + ("step",), spec["step"])
        if (step_unit == "") != (unit == "") or (unit and _family(unit) is not _family(step_unit)):
            raise doc.error(path + ("step",), "'step' must be the same kind of quantity as "
                                              "'from'")
        if step <= 0:
            raise doc.error(path + ("step",), f"a step must be positive, got {spec['step']!r}")
        count = int(math.floor((last - first) / step + 1e-9)) + 1
        _check_count(doc, path, count)
        numbers = [first + k * step for k in range(count)]
    whole = all(isinstance(spec.get(k, 1), int) for k in ("from", "to", "factor", "step"))
    return _unique([_written(n, unit, scale, whole) for n in numbers])


def _range_end(doc: Document, path: KeyPath, value: Any) -> tuple[float, str, float]:
    """(value in base units, unit as written, unit scale) of one end of a range."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise doc.error(path, f"expected a finite number, got {value!r}")
        return float(value), "", 1.0
    match = _QUANTITY.match(value) if isinstance(value, str) else None
    family = _family(match.group(2)) if match else None
    if not match or family is None:
        raise doc.error(path, f"expected a number or a quantity such as 1KiB, 100GB/s or 2us, "
                              f"got {value!r}")
    number = float(match.group(1))
    if not math.isfinite(number):
        raise doc.error(path, f"expected a finite quantity, got {value!r}")
    scale = family[match.group(2)]
    return number * scale, match.group(2), scale


def _family(unit: str) -> dict[str, float] | None:
    return next((f for f in _FAMILIES if unit in f), None)


def _written(number: float, unit: str, scale: float, whole: bool) -> Any:
    if not unit:
        return int(round(number)) if whole else float(f"{number:.12g}")
    return f"{number / scale:.12g}{unit}"


def _check_order(doc: Document, path: KeyPath, spec: dict[str, Any], first: Any, last: Any
                 ) -> None:
    if first > last:
        raise doc.error(path + ("from",), f"range goes down: from {spec['from']!r} is more than "
                                          f"to {spec['to']!r}")


def _check_count(doc: Document, path: KeyPath, count: int) -> None:
    if count > MAX_VALUES:
        raise doc.error(path, f"range has more than {MAX_VALUES} values; use a larger factor "
                              f"or step")


def parse_sizes(doc: Document, path: KeyPath, spec: Any) -> list[int]:
    """Message sizes in bytes."""
    return numeric_axis(doc, path, spec, message_size)


def parse_ranks(doc: Document, path: KeyPath, spec: Any) -> list[int]:
    """Rank counts."""
    return numeric_axis(doc, path, spec, parse_rank_count)

