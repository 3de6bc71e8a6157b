"""Workload files: parse the YAML (safe loader), apply ``--with`` overrides, validate against
the published schema, then check what a schema cannot (units, formats, algorithm names,
combinations) and report every problem at once, each with its file, line and key."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from fractions import Fraction
from pathlib import Path
from types import MappingProxyType
from typing import Any

from collsim.algorithms.registry import algorithms_for
from collsim.errors import InputError, InputErrors
from collsim.hardware.loader import apply_overrides
from collsim.schema import validate
from collsim.units import UnitError, parse_size, parse_time
from collsim.workloads.compression import Compression
from collsim.workloads.formats import Format, parse_format
from collsim.workloads.model import (
    DEFAULT_ALGORITHMS,
    MEGATRON_ORDER,
    Compute,
    Dtypes,
    Experts,
    Gradients,
    Model,
    Noise,
    Parallelism,
    Workload,
)
from collsim.workloads.quantities import (
    FREE,
    parse_cost,
    parse_count,
    parse_flop_rate,
    parse_flops,
    parse_ratio,
)
from collsim.workloads.schema import WORKLOAD_SCHEMA
from collsim.yamlfile import Document, KeyPath, load_yaml, parse_yaml

# Keys of compression that only some kinds take.
_COMPRESSION_KEYS = {"fraction": "topk", "index_bytes": "topk", "block": "sign",
                     "scale": "sign", "rank": "lowrank", "shapes": "lowrank"}


def load_workload(path: str | Path, overrides: Mapping[str, Any] | None = None) -> Workload:
    """Read, validate and check a workload file; ``overrides`` set dotted keys
    (``{"dtypes.gradients": "fp8_e4m3"}``) before validation, as ``--with`` does."""
    return workload_from_document(load_yaml(path), overrides)


def workload_from_text(text: str, file: str = "<workload>",
                       overrides: Mapping[str, Any] | None = None) -> Workload:
    """A workload from YAML text."""
    return workload_from_document(parse_yaml(text, file), overrides)


def workload_from_document(doc: Document, overrides: Mapping[str, Any] | None = None
                           ) -> Workload:
    """Validate a parsed workload document and build the :class:`Workload` it describes."""
    if not isinstance(doc.data, dict):
        raise InputError("a workload file must be a mapping of keys (name, model, "
                         "parallelism, compute, ...) to values", file=doc.file, line=1)
    if overrides:
        doc = Document(apply_overrides(doc.data, dict(overrides)), doc.file, doc.lines)
    validate(doc, WORKLOAD_SCHEMA)
    return _Reader(doc).workload()


class _Reader:
    """Collects every semantic problem of one document before raising them together."""

    def __init__(self, doc: Document) -> None:
        self.doc = doc
        self.data: dict[str, Any] = doc.data
        self.problems: list[InputError] = []

    def attempt(self, function: Callable[..., Any], *args: Any, default: Any = None) -> Any:
        try:
            return function(*args)
        except InputErrors as exc:
            self.problems.extend(exc.errors)
        except InputError as exc:
            self.problems.append(exc)
        return default

    def get(self, path: KeyPath, default: Any = None) -> Any:
        data: Any = self.data
        for part in path:
            if not isinstance(data, dict) or part not in data:
                return default
            data = data[part]
        return data

    def error(self, path: KeyPath, message: str) -> InputError:
        return self.doc.error(path, message)

    def parse(self, path: KeyPath, parser: Callable[[Any], Any], default: Any = None) -> Any:
        value = self.get(path)
        if value is None:
            return default
        try:
            return parser(value)
        except (UnitError, ValueError) as exc:
            raise self.error(path, str(exc)) from None

    # -- sections ---------------------------------------------------------------------

    def workload(self) -> Workload:
        dtypes = self.attempt(self.dtypes, default=Dtypes())
        parallelism = self.attempt(self.parallelism, default=Parallelism())
        model = self.attempt(self.model, dtypes, parallelism)
        compute = self.attempt(self.compute, default=None)
        gradients = self.attempt(self.gradients, default=Gradients())
        compression = self.attempt(self.compression, parallelism, model, default=None)
        algorithms = self.attempt(self.algorithms, default=DEFAULT_ALGORITHMS)
        noise = self.attempt(self.noise, default=Noise())
        if self.problems:
            self.problems.sort(key=lambda e: (e.line or 0, e.key or ""))
            raise self.problems[0] if len(self.problems) == 1 else InputErrors(self.problems)
        return Workload(name=self.data["name"], model=model, parallelism=parallelism,
                        compute=compute, gradients=gradients, dtypes=dtypes,
                        compression=compression, algorithms=algorithms, noise=noise,
                        description=self.data.get("description", ""), file=self.doc.file,
                        lines=dict(self.doc.lines))

    def dtypes(self) -> Dtypes:
        defaults = Dtypes()
        formats: dict[str, Format] = {}
        for name in ("parameters", "gradients", "activations", "optimizer"):
            formats[name] = self.attempt(self.parse, ("dtypes", name), parse_format,
                                         getattr(defaults, name),
                                         default=getattr(defaults, name))
        return Dtypes(**formats)

    def parallelism(self) -> Parallelism:
        section = self.get(("parallelism",), {})
        return Parallelism(
            data=section.get("data"), tensor=section.get("tensor", 1),
            pipeline=section.get("pipeline", 1), expert=section.get("expert", 1),
            zero=section.get("zero", 0), micro_batches=section.get("micro_batches", 1),
            schedule=section.get("schedule", "1f1b"),
            order=tuple(section.get("order", MEGATRON_ORDER)))

    def model(self, dtypes: Dtypes, par: Parallelism) -> Model:
        section = self.data["model"]
        layers = section["layers"]
        if par.pipeline > layers or layers % par.pipeline:
            self.problems.append(self.error(("parallelism", "pipeline"), f"{layers} layers do "
                                 f"not split evenly into {par.pipeline} pipeline stages"))
        per_layer = self.attempt(self.parameters, layers)
        failed = len(self.problems)
        activation = self.attempt(self.activation, dtypes.activations)
        experts = None
        if "experts" in section:
            experts = self.attempt(self.experts, par)
        needs = [what for what, used in (("tensor", par.tensor > 1),
                                         ("pipeline", par.pipeline > 1),
                                         ("expert", experts is not None and par.expert > 1))
                 if used]
        if needs and activation is None and len(self.problems) == failed:
            self.problems.append(self.error(("model",), f"{' and '.join(needs)} parallelism "
                                 f"moves activations: give model.activation (bytes per "
                                 f"micro-batch per layer) or model.hidden, sequence and "
                                 f"micro_batch"))
        return Model(layers, per_layer or 1, activation, experts)

    def parameters(self, layers: int) -> int:
        total = self.parse(("model", "parameters"), parse_count)
        per_layer = self.parse(("model", "parameters_per_layer"), parse_count)
        if total is not None and per_layer is not None:
            raise self.error(("model", "parameters_per_layer"), "give parameters (the total) "
                             "or parameters_per_layer, not both")
        if total is None and per_layer is None:
            raise self.error(("model",), "give parameters (the total, e.g. 7B) or "
                             "parameters_per_layer")
        # A total is spread evenly over the layers, rounded to the nearest whole value.
        return per_layer if per_layer is not None else max(1, (total + layers // 2) // layers)

    def activation(self, fmt: Format) -> int | None:
        given = self.parse(("model", "activation"), parse_size)
        shape = {key: self.get(("model", key)) for key in ("hidden", "sequence", "micro_batch")}
        named = [key for key, value in shape.items() if value is not None]
        if given is not None and named:
            raise self.error(("model", named[0]), "give activation (bytes) or hidden, "
                             "sequence and micro_batch, not both")
        if given is not None:
            if given <= 0:
                raise self.error(("model", "activation"), "must be positive")
            return given
        if not named:
            return None
        missing = [key for key in shape if shape[key] is None]
        if missing:  # reported at the line of the keys that ask for it
            raise InputError(f"required with {', '.join(named)}: the activation is hidden x "
                             f"sequence x micro_batch values", file=self.doc.file,
                             key=f"model.{missing[0]}", line=self.doc.line(("model", named[0])))
        return fmt.nbytes(shape["hidden"] * shape["sequence"] * shape["micro_batch"])

    def experts(self, par: Parallelism) -> Experts:
        section = self.data["model"]["experts"]
        count = section["count"]
        if count % par.expert:
            raise self.error(("model", "experts", "count"), f"{count} experts do not split "
                             f"evenly over expert degree {par.expert}")
        return Experts(count, section.get("every", 1), section.get("top_k", 1),
                       self.parse(("model", "experts", "parameters"), parse_count, 0))

    def compute(self) -> Compute:
        forward = self.parse(("compute", "forward"), parse_time)
        flops = self.parse(("compute", "flops"), parse_flops)
        peak = self.parse(("compute", "peak"), parse_flop_rate)
        efficiency = self.get(("compute", "efficiency"))
        if forward is None:
            if flops is None or peak is None or efficiency is None:
                raise self.error(("compute",), "give forward (a time per layer per "
                                 "micro-batch) or flops, peak and efficiency")
            forward = flops / (peak * efficiency)
        elif forward <= 0:
            raise self.error(("compute", "forward"), "must be positive")
        path = ("compute", "backward")
        given = self.get(path)
        if given is None:
            backward = 2 * forward  # the usual estimate: gradients of inputs and of weights
        elif isinstance(given, str) and given.strip().endswith("x"):
            backward = forward * self.parse(path, parse_ratio)
        else:
            backward = self.parse(path, parse_time)
        optimizer = self.parse(("compute", "optimizer"), parse_time, 0.0)
        return Compute(forward, backward, optimizer, flops, peak)

    def gradients(self) -> Gradients:
        bucket = self.parse(("gradients", "bucket"), parse_size, Gradients.bucket)
        if bucket <= 0:
            raise self.error(("gradients", "bucket"), "must be positive")
        return Gradients(bucket, self.get(("gradients", "overlap"), True))

    def compression(self, par: Parallelism, model: Model | None) -> Compression:
        section = self.get(("compression",))
        if section is None:
            return Compression()
        kind = section["kind"]
        for key, owner in _COMPRESSION_KEYS.items():
            if key in section and owner != kind:
                raise self.error(("compression", key), f"{key} applies to {owner} only, not "
                                 f"to {kind}")
        if kind != "none" and par.zero:
            raise self.error(("compression", "kind"), "compression encodes the data-parallel "
                             "allreduce (zero: 0); ZeRO's reduce-scatter is not compressed")
        required = {"topk": "fraction", "sign": "block", "lowrank": "rank"}.get(kind)
        if required and required not in section:
            raise self.error(("compression", required), f"required for {kind}")
        fields: dict[str, Any] = {"kind": kind}
        if "fraction" in section:
            fields["fraction"] = Fraction(str(section["fraction"]))
        for key in ("index_bytes", "block", "rank"):
            if key in section:
                fields[key] = section[key]
        if "scale" in section:
            fields["scale"] = self.parse(("compression", "scale"), parse_format)
        if "shapes" in section:
            shapes = tuple((m, n) for m, n in section["shapes"])
            covered = sum(m * n for m, n in shapes)
            if model is not None and covered > model.parameters_per_layer:
                raise self.error(("compression", "shapes"), f"the matrices hold {covered:,} "
                                 f"values, more than a layer's {model.parameters_per_layer:,} "
                                 f"parameters")
            fields["shapes"] = shapes
        fields["encode"] = self.parse(("compression", "encode"), parse_cost, FREE)
        fields["decode"] = self.parse(("compression", "decode"), parse_cost, FREE)
        return Compression(**fields)

    def algorithms(self) -> MappingProxyType:
        chosen = dict(DEFAULT_ALGORITHMS)
        for collective, name in (self.get(("algorithms",)) or {}).items():
            known = [a.name for a in algorithms_for(collective)]
            if name not in known:
                hint = difflib.get_close_matches(name, known, n=1)
                raise self.error(("algorithms", collective), f"no {collective} algorithm "
                                 f"named {name!r}; " + (f"did you mean {hint[0]!r}?" if hint
                                                        else f"choose from {', '.join(known)}"))
            chosen[collective] = name
        return MappingProxyType(chosen)

    def noise(self) -> Noise:
        section = self.get(("noise",)) or {}
        offsets = tuple((int(rank), self.parse(("noise", "offsets", rank), parse_time))
                        for rank in sorted(section.get("offsets", {}), key=int))
        return Noise(seed=section.get("seed", 0), jitter=float(section.get("jitter", 0.0)),
                     spread=self.parse(("noise", "spread"), parse_time, 0.0),
                     offsets=offsets)
