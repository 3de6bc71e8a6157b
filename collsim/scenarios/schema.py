"""The JSON Schema of scenario files: the loader validates against it, and the same schema is
published as ``collsim/schemas/scenario.schema.json`` so that editors can complete keys.

Regenerate the published file after changing this module::

    python -m collsim.scenarios.schema > collsim/schemas/scenario.schema.json
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from collsim.collectives import COLLECTIVES
from collsim.output.kinds import FIGURE_FORMATS, FIGURE_KINDS

PUBLISHED = Path(__file__).resolve().parent.parent / "schemas" / "scenario.schema.json"


_SCALAR = ["string", "number", "boolean"]

# One sweep axis: a single value, a list of values, or a range. Type-specific keywords apply
# only to their type (items to lists, properties to mappings), so one schema covers all three
# forms and every error names the exact key, which anyOf would blur.
_RANGE_PROPERTIES = {
    "from": {"type": ["string", "number"], "description": "first value, e.g. 1KiB"},
    "to": {"type": ["string", "number"], "description": "last value (inclusive), e.g. 4GiB"},
    "factor": {"type": "number", "exclusiveMinimum": 1,
               "description": "geometric step: from, from*factor, ... up to to"},
    "step": {"type": ["string", "number"], "description": "arithmetic step: from, from+step, ..."},
}


def _axis(description: str, scalar: list[str]) -> dict[str, Any]:
    return {
        "description": description,
        "type": [*scalar, "array", "object"],
        "items": {"type": scalar},
        "minItems": 1,
        "properties": _RANGE_PROPERTIES,
        "required": ["from", "to"],
        "additionalProperties": False,
    }


_SIZE_AXIS = _axis("message sizes: 4MiB, [1KiB, 1MiB], or {from: 1KiB, to: 4GiB, factor: 2}",
                   ["string", "integer"])
_RANKS_AXIS = _axis("rank counts: 64, [8, 16], or {from: 8, to: 1024, factor: 2}; "
                    "omitted: every GPU of the topology", ["string", "integer"])
_VALUE_AXIS = _axis("values of one key: a value, a list, or {from, to, factor | step}", _SCALAR)

_DOTTED_KEY = {"type": "string", "pattern": r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"}


def _sweep(required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "description": "the axes of the sweep; every point is one combination of their values",
        "properties": {
            "size": _SIZE_AXIS,
            "ranks": _RANKS_AXIS,
            "set": {"type": "object", "propertyNames": _DOTTED_KEY,
                    "additionalProperties": _VALUE_AXIS,
                    "description": "topology keys, dotted as for --set: link.bandwidth, nodes"},
            "param": {"type": "object", "propertyNames": _DOTTED_KEY,
                      "additionalProperties": _VALUE_AXIS,
                      "description": "algorithm parameters, as for --param: chunk_size, root"},
        },
        "required": required,
        "additionalProperties": False,
    }


_WHERE = {
    "description": "keep only points where this holds (or all of these hold), e.g. "
                   "'ranks <= gpus' or 'size >= 64 * KiB'",
    "type": ["string", "array"],
    "items": {"type": "string"},
}

_NAMES = {"type": ["string", "array"], "items": {"type": "string"}, "minItems": 1,
          "pattern": "^all$"}

# A bare string must be a figure kind; a mapping needs "kind". enum would apply to both types,
# so the string case gets it through if/then.
_FIGURE = {
    "type": ["string", "object"],
    "if": {"type": "string"},
    "then": {"enum": list(FIGURE_KINDS)},
    "properties": {
        "kind": {"enum": list(FIGURE_KINDS)},
        "name": {"type": "string", "pattern": r"^[A-Za-z0-9_-][A-Za-z0-9._-]*$",
                 "description": "file name without extension; default: the kind"},
        "title": {"type": "string"},
        "select": {"type": "object", "description": "column: value or [values] to keep"},
        "panels": {"type": "string",
                   "description": "column that splits the figure in panels, or none"},
        "lines": {"type": "string", "description": "column that tells lines apart"},
        "baseline": {"type": "string", "description": "speedup: the algorithm divided by"},
        "algorithms": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "size": {"type": ["string", "integer"], "description": "time_vs_ranks: message size"},
        "algorithm": {"enum": ["auto", "best"],
                      "description": "choice_map: whose choices it draws (default auto)"},
    },
    "required": ["kind"],
    "additionalProperties": False,
}
SCENARIO_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "collsim scenario",
    "description": "A sweep of collective simulations and the figures drawn from it.",
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": r"^[A-Za-z0-9_-][A-Za-z0-9._-]*$",
                 "description": "scenario name: the table's scenario column, the default --out"},
        "description": {"type": "string"},
        "topologies": {
            "description": "topology files (relative to this file) or inline topologies",
            "type": ["string", "array"],
            "minItems": 1,
            "items": {"type": ["string", "object"], "required": ["kind"]},
        },
        "collectives": {"type": "array", "minItems": 1,
                        "items": {"enum": list(COLLECTIVES)}},
        "algorithms": {
            "description": "names, 'all', or a mapping from collective to names or 'all'",
            "type": ["string", "array", "object"],
            "items": {"type": "string"},
            "minItems": 1,
            "pattern": "^all$",
            "properties": {name: _NAMES for name in COLLECTIVES},
            "additionalProperties": False,
        },
        "sweep": _sweep(["size"]),
        "where": _WHERE,
        "figures": {"type": "array", "items": _FIGURE},
        "formats": {"type": "array", "minItems": 1, "items": {"enum": list(FIGURE_FORMATS)},
                    "description": "figure file formats; default [png, svg]"},
        "exact": {"type": "boolean",
                  "description": "every point on the full simulation's times (as run --exact): "
                                 "no pipeline path; default false"},
        "quick": {
            "type": "object",
            "description": "replacements used by --quick: a smaller sweep for tests and demos",
            "properties": {"sweep": _sweep([]), "where": _WHERE},
            "additionalProperties": False,
        },
    },
    "required": ["name", "topologies", "collectives", "algorithms", "sweep"],
    "additionalProperties": False,
}


def published_text() -> str:
    """The text of the published schema file for :data:`SCENARIO_SCHEMA`."""
    return json.dumps(SCENARIO_SCHEMA, indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    print(published_text(), end="")
