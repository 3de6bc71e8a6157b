"""Keys that many kinds share: their JSON Schemas, and readers that turn a key's value into
a number, refusing a bad one at its key (file, line) with what was expected."""

from __future__ import annotations

import math
from pathlib import Path

from collsim.hardware.nodes import LinkSpec
from collsim.schema import QUANTITY, at, quantity
from collsim.units import parse_bandwidth, parse_time
from collsim.yamlfile import Document, KeyPath

COUNT = {"type": "integer", "minimum": 1}
RATIO = {"type": "number", "minimum": 1}
LINK_SCHEMA = {
    "type": "object",
    "properties": {"latency": QUANTITY, "bandwidth": QUANTITY},
    "required": ["latency", "bandwidth"],
    "additionalProperties": False,
}
GPU_SCHEMA = {
    "type": "object",
    "properties": {"reduce_bandwidth": QUANTITY, "model": {"type": "string"},
                   "arch": {"type": "integer", "minimum": 60}},
    "additionalProperties": False,
}
DIMS_SCHEMA = {"type": "array", "items": COUNT, "minItems": 1, "maxItems": 3}


def count(doc: Document, path: KeyPath, default: int | None = None) -> int:
    """A whole number of at least one at ``path`` (the schema has checked the rest): an
    integer, not a float that happens to be whole, so ``8.0`` or ``1e8`` is refused."""
    value = at(doc.data, path, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise doc.error(path, f"expected a whole number such as 8, got {value!r}")
    if value < 1:
        raise doc.error(path, f"expected a whole number of at least 1, got {value}")
    return value


def ratio(doc: Document, path: KeyPath, default: float = 1.0) -> float:
    """A finite number of at least one at ``path`` (an oversubscription ratio)."""
    value = at(doc.data, path, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(float(value)) or value < 1:
        raise doc.error(path, f"expected a finite number of at least 1, got {value!r}")
    return float(value)


def link(doc: Document, path: KeyPath) -> LinkSpec:
    """The ``{latency, bandwidth}`` link at ``path``."""
    return LinkSpec(quantity(doc, path + ("latency",), parse_time),
                    quantity(doc, path + ("bandwidth",), parse_bandwidth))


def reduce_bandwidth(doc: Document) -> float:
    """The GPUs' reduction bandwidth (``gpu.reduce_bandwidth``); infinite (free) if absent."""
    gpu = doc.data.get("gpu") or {}
    if "reduce_bandwidth" not in gpu:
        return math.inf
    return quantity(doc, ("gpu", "reduce_bandwidth"), parse_bandwidth)


def machine_name(doc: Document) -> str:
    """The file's ``name``, else its file name without the suffix."""
    return doc.data.get("name") or Path(doc.file).stem


def amount(n: int, one: str, many: str) -> str:
    """``n`` with its noun in the right number: '1 GPU', '3 GPUs'."""
    return f"{n} {one if n == 1 else many}"
