"""The JSON Schema of workload files: the loader validates against it, and the same schema is
published as ``collsim/schemas/workload.schema.json`` so that editors can complete keys.

Regenerate the published file after changing this module::

    python -m collsim.workloads.schema > collsim/schemas/workload.schema.json
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from collsim.workloads.compression import KINDS as COMPRESSIONS
from collsim.workloads.groups import AXES
from collsim.workloads.model import DEFAULT_ALGORITHMS, SCHEDULES

PUBLISHED = Path(__file__).resolve().parent.parent / "schemas" / "workload.schema.json"

_QUANTITY = {"type": ["string", "number"]}
_COUNT = {"type": ["string", "integer"], "description": "a count: 7B, 218M, 4096"}
_POSITIVE = {"type": "integer", "minimum": 1}
_FORMAT = {"type": "string",
           "description": "fp32, bf16, fp16, fp8_e4m3, fp8_e5m2, or sign-exponent-mantissa "
                          "bits such as 1-6-9"}


def _section(description: str, properties: dict[str, Any],
             required: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "description": description,
                           "properties": properties, "additionalProperties": False}
    if required:
        out["required"] = required
    return out


def _described(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {**schema, "description": description}


_EXPERTS = _section("mixture-of-experts layers", {
    "count": _described(_POSITIVE, "experts per MoE layer"),
    "every": _described(_POSITIVE, "every k-th layer is a MoE layer (default 1: all)"),
    "top_k": _described(_POSITIVE, "experts each token is routed to (default 1)"),
    "parameters": _described(_COUNT, "parameters of one expert (default 0: counted in the "
                                     "layer's)"),
}, ["count"])

_MODEL = _section("the model: layers, parameters, activation size", {
    "layers": _described(_POSITIVE, "transformer layers (or blocks)"),
    "parameters": _described(_COUNT, "total parameters, spread evenly over the layers"),
    "parameters_per_layer": _described(_COUNT, "parameters of one layer"),
    "activation": _described(_QUANTITY, "bytes of one layer's output for one micro-batch, "
                                         "e.g. 32MiB"),
    "hidden": _described(_POSITIVE, "hidden size (with sequence and micro_batch instead of "
                                    "activation)"),
    "sequence": _described(_POSITIVE, "sequence length in tokens"),
    "micro_batch": _described(_POSITIVE, "sequences per micro-batch"),
    "experts": _EXPERTS,
}, ["layers"])

_PARALLELISM = _section("degrees of parallelism and how the step is scheduled", {
    "data": _described(_POSITIVE, "data-parallel replicas; omitted: GPUs / (tensor x "
                                  "pipeline)"),
    "tensor": _described(_POSITIVE, "tensor-parallel degree (Megatron)"),
    "pipeline": _described(_POSITIVE, "pipeline stages"),
    "expert": _described(_POSITIVE, "expert-parallel degree (divides data)"),
    "zero": {"enum": [0, 1, 2, 3], "description": "ZeRO stage"},
    "micro_batches": _described(_POSITIVE, "micro-batches per step (gradient accumulation)"),
    "schedule": {"enum": list(SCHEDULES), "description": "pipeline schedule"},
    "order": {"type": "array", "items": {"enum": list(AXES)}, "minItems": 3, "maxItems": 3,
              "uniqueItems": True,
              "description": "rank layout, innermost first; default [tensor, data, "
                             "pipeline] (Megatron)"},
})

_COMPUTE = _section("compute per layer per micro-batch (the whole layer on one GPU)", {
    "forward": _described(_QUANTITY, "forward time of one layer, e.g. 3.5ms"),
    "backward": _described(_QUANTITY, "backward time, or a multiple of forward: 2x "
                                      "(default)"),
    "optimizer": _described(_QUANTITY, "optimizer step of the whole model on one GPU "
                                       "(default 0)"),
    "flops": _described(_QUANTITY, "forward FLOPs of one layer for one micro-batch: 1.8T"),
    "peak": _described(_QUANTITY, "GPU peak FLOP/s: 989TFLOP/s"),
    "efficiency": {"type": "number", "exclusiveMinimum": 0, "maximum": 1,
                   "description": "achieved fraction of peak (forward time = flops / "
                                  "(peak x efficiency))"},
})

_GRADIENTS = _section("gradient buckets and overlap", {
    "bucket": _described(_QUANTITY, "bucket size (default 25MiB, PyTorch DDP's)"),
    "overlap": {"type": "boolean",
                "description": "communication runs beside compute (default true)"},
})

_DTYPES = _section("number formats per tensor class", {
    name: _FORMAT for name in ("parameters", "gradients", "activations", "optimizer")})

_COMPRESSION = _section("gradient compression", {
    "kind": {"enum": list(COMPRESSIONS)},
    "fraction": {"type": "number", "exclusiveMinimum": 0, "maximum": 1,
                 "description": "topk: fraction of values kept (0.01 = top 1%)"},
    "index_bytes": {"type": "integer", "minimum": 0,
                    "description": "topk: bytes of each kept value's index (default 4)"},
    "block": _described(_POSITIVE, "sign: values per scale"),
    "scale": _described(_FORMAT, "sign: format of each block's scale (default fp32)"),
    "rank": _described(_POSITIVE, "lowrank: rank of the factors"),
    "shapes": {"type": "array", "minItems": 1,
               "items": {"type": "array", "items": _POSITIVE, "minItems": 2, "maxItems": 2},
               "description": "lowrank: the layer's weight matrices [m, n]; omitted: one "
                              "square matrix per GPU's share"},
    "encode": _described(_QUANTITY, "encoding cost per bucket: a time (50us) or a "
                                    "throughput over the bucket's bytes (400GB/s)"),
    "decode": _described(_QUANTITY, "decoding cost per bucket, as encode"),
}, ["kind"])

_ALGORITHMS = _section("algorithm per collective (any registered name)", {
    name: {"type": "string", "description": f"default {default}"}
    for name, default in DEFAULT_ALGORITHMS.items()})

_NOISE = _section("stragglers and noise (deterministic for a seed)", {
    "seed": {"type": "integer", "minimum": 0},
    "jitter": {"type": "number", "minimum": 0,
               "description": "coefficient of variation of every compute time"},
    "spread": _described(_QUANTITY, "start offsets drawn uniformly from 0 to this"),
    "offsets": {"type": "object", "propertyNames": {"pattern": "^[0-9]+$"},
                "additionalProperties": _QUANTITY,
                "description": "rank: extra start offset, e.g. {5: 2ms}"},
})

WORKLOAD_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "collsim workload",
    "description": "One training step: a model, its parallelism, its compute and its "
                   "communication formats.",
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": r"^[A-Za-z0-9_-][A-Za-z0-9._-]*$"},
        "description": {"type": "string"},
        "model": _MODEL,
        "parallelism": _PARALLELISM,
        "compute": _COMPUTE,
        "gradients": _GRADIENTS,
        "dtypes": _DTYPES,
        "compression": _COMPRESSION,
        "algorithms": _ALGORITHMS,
        "noise": _NOISE,
    },
    "required": ["name", "model", "compute"],
    "additionalProperties": False,
}


def published_text() -> str:
    """The text of the published schema file for :data:`WORKLOAD_SCHEMA`."""
    return json.dumps(WORKLOAD_SCHEMA, indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    print(published_text(), end="")
