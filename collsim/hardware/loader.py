"""Topology files: read YAML, apply ``--set`` overrides, validate against the kind's schema,
and build the machine. New kinds register a schema and a builder with :func:`register_kind`."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collsim.errors import InputError
from collsim.hardware.topology import Topology, fully_connected, switch
from collsim.schema import QUANTITY, quantity, validate
from collsim.units import parse_bandwidth, parse_time
from collsim.yamlfile import Document, load_yaml, parse_yaml, yaml_value

LINK_SCHEMA = {
    "type": "object",
    "properties": {"latency": QUANTITY, "bandwidth": QUANTITY},
    "required": ["latency", "bandwidth"],
    "additionalProperties": False,
}
GPU_SCHEMA = {
    "type": "object",
    "properties": {"reduce_bandwidth": QUANTITY},
    "additionalProperties": False,
}


@dataclass(frozen=True)
class Kind:
    """A topology kind: the keys its files take (JSON Schema properties) and its builder."""

    name: str
    properties: dict[str, Any]
    required: tuple[str, ...]
    build: Callable[[Document], Topology]
    summary: str = ""

    def schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {"name": {"type": "string"}, "kind": {"const": self.name},
                           "description": {"type": "string"}, **self.properties},
            "required": ["kind", *self.required],
            "additionalProperties": False,
        }


KINDS: dict[str, Kind] = {}


def register_kind(kind: Kind) -> Kind:
    """Make ``kind`` loadable from topology files."""
    KINDS[kind.name] = kind
    return kind


def reduce_bandwidth(doc: Document) -> float:
    """The GPUs' reduction bandwidth (``gpu.reduce_bandwidth``); infinite (free) if absent."""
    return quantity(doc, ("gpu", "reduce_bandwidth"), parse_bandwidth, default=float("inf")) \
        if "reduce_bandwidth" in (doc.data.get("gpu") or {}) else float("inf")


def _uniform(builder: Callable[..., Topology]) -> Callable[[Document], Topology]:
    def build(doc: Document) -> Topology:
        return builder(
            doc.data.get("name") or Path(doc.file).stem, int(doc.data["gpus"]),
            quantity(doc, ("link", "latency"), parse_time),
            quantity(doc, ("link", "bandwidth"), parse_bandwidth),
            reduce_bandwidth(doc))
    return build


_UNIFORM = {"gpus": {"type": "integer", "minimum": 1}, "link": LINK_SCHEMA, "gpu": GPU_SCHEMA}
register_kind(Kind("switch", _UNIFORM, ("gpus", "link"), _uniform(switch),
                   "every GPU has one full-duplex port to one non-blocking switch"))
register_kind(Kind("fully_connected", _UNIFORM, ("gpus", "link"), _uniform(fully_connected),
                   "a dedicated full-duplex link between every pair of GPUs"))


def parse_override(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` from the command line; VALUE is read as a YAML scalar (16, 200GB/s, true)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise InputError(f"expected KEY=VALUE, got {text!r}", key="--set")
    return key.strip(), yaml_value(value, "--set") if value.strip() else ""


def apply_overrides(data: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``data`` with dotted keys (``link.bandwidth``) set to the given values."""
    data = copy.deepcopy(data)
    for dotted_key, value in overrides.items():
        target = data
        parts = dotted_key.split(".")
        for part in parts[:-1]:
            if not isinstance(target.get(part), dict):
                target[part] = {}
            target = target[part]
        target[parts[-1]] = value
    return data


def topology_from_document(doc: Document, overrides: dict[str, Any] | None = None) -> Topology:
    """Validate and build the topology a parsed YAML document describes."""
    if not isinstance(doc.data, dict):
        raise InputError("a topology file must be a mapping of keys to values", file=doc.file)
    if overrides:
        doc = Document(apply_overrides(doc.data, overrides), doc.file, doc.lines)
    kind_name = doc.data.get("kind")
    if kind_name not in KINDS:
        raise doc.error(("kind",), f"unknown topology kind {kind_name!r}; choose one of "
                        f"{', '.join(KINDS)}" if kind_name is not None else
                        "required key is missing")
    kind = KINDS[kind_name]
    validate(doc, kind.schema())
    return kind.build(doc)


def load_topology(path: str | Path, overrides: dict[str, Any] | None = None) -> Topology:
    """Load a topology file, with optional dotted-key overrides."""
    return topology_from_document(load_yaml(path), overrides)


def topology_from_text(text: str, overrides: dict[str, Any] | None = None,
                       file: str = "<inline>") -> Topology:
    """Build a topology from YAML text (tests and inline scenario topologies)."""
    return topology_from_document(parse_yaml(text, file), overrides)


# Real machines: NVSwitch / NVLink / PCIe nodes, clusters on fabrics, tori of GPUs.
from collsim.hardware import kinds as _real_machines  # noqa: E402

for _kind in _real_machines.kinds():
    register_kind(_kind)
