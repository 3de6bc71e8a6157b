"""Topology files: read YAML, merge the file over its ``base:`` (see
:mod:`collsim.hardware.bases`), apply ``--set`` overrides, validate against the kind's schema,
and build the machine. The kinds are records in :mod:`collsim.hardware.kinds`."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import yaml

from collsim.errors import InputError, InputErrors
from collsim.hardware.bases import resolve_bases
from collsim.hardware.kinds import KINDS
from collsim.hardware.topology import Topology
from collsim.schema import validate
from collsim.yamlfile import Document, load_yaml, parse_yaml

__all__ = ["KINDS", "apply_overrides", "load_topology", "parse_override",
           "topology_from_document", "topology_from_text"]


def parse_override(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` from the command line; VALUE is read as a YAML scalar (16, 200GB/s, true)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise InputError(f"expected KEY=VALUE, got {text!r}", key="--set")
    try:
        if any(isinstance(event, yaml.AliasEvent)
               for event in yaml.parse(value, Loader=yaml.SafeLoader)):
            raise InputError(f"{key.strip()}: a value may not use YAML aliases (*name)",
                             key="--set")
        parsed = yaml.safe_load(value) if value.strip() else ""
    except yaml.YAMLError:
        parsed = value
    except (ValueError, RecursionError):  # an integer of thousands of digits; deep nesting
        raise InputError(f"{key.strip()}: the value is too large or too deeply nested",
                         key="--set") from None
    return key.strip(), parsed


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


class OverrideError(InputError):
    """A problem with a key that an override set: it names where the override came from
    (``--set`` on the command line) instead of a line of the file it was applied to."""

    def __init__(self, error: InputError, source: str) -> None:
        self.source = source
        super().__init__(error.message, file=error.file, key=error.key)
        self.suggested_key = error.suggested_key

    def __str__(self) -> str:
        applied = f", applied to {self.file}" if self.file else ""
        return f"key '{self.key}' (from {self.source}{applied}): {self.message}"


def blame_overrides(error: InputError, overrides: dict[str, Any], source: str) -> InputError:
    """``error`` with each problem in a key that ``overrides`` set (or a key inside it)
    reported as coming from ``source``; problems in the file's own keys are left as they are."""
    if isinstance(error, InputErrors):
        return InputErrors([blame_overrides(e, overrides, source) for e in error.errors])
    key = error.key or ""
    if any(key == k or key.startswith((f"{k}.", f"{k}[")) for k in overrides):
        return OverrideError(error, source)
    return error


def topology_from_document(doc: Document, overrides: dict[str, Any] | None = None,
                           source: str | None = None) -> Topology:
    """Validate and build the topology a parsed YAML document describes: the document merged
    over its bases, then ``overrides`` (dotted keys) set on top. ``source`` says
    where ``overrides`` came from (``--set on the command line``), for an error in one of
    their keys; without it such an error names the file."""
    if not isinstance(doc.data, dict):
        raise InputError("a topology file must be a mapping of keys to values", file=doc.file)
    if overrides and source:
        try:
            return topology_from_document(doc, overrides)
        except InputError as exc:
            raise blame_overrides(exc, overrides, source) from None
    doc = resolve_bases(doc)
    if overrides:
        doc = dataclasses.replace(doc, data=apply_overrides(doc.data, overrides))
    kind_name = doc.data.get("kind")
    if kind_name not in KINDS:
        raise doc.error(("kind",), f"unknown topology kind {kind_name!r}; choose one of "
                        f"{', '.join(KINDS)}" if kind_name is not None else
                        "required key is missing")
    kind = KINDS[kind_name]
    validate(doc, kind.schema())
    topology = kind.build(doc)
    topology.bases = doc.bases
    return topology


def load_topology(path: str | Path, overrides: dict[str, Any] | None = None,
                  source: str | None = None) -> Topology:
    """Load a topology file, with optional dotted-key overrides from ``source``."""
    return topology_from_document(load_yaml(path), overrides, source)


def topology_from_text(text: str, overrides: dict[str, Any] | None = None,
                       file: str = "<inline>") -> Topology:
    """Build a topology from YAML text (tests and inline scenario topologies)."""
    return topology_from_document(parse_yaml(text, file), overrides)

