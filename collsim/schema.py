"""JSON-Schema validation of YAML documents, every problem reported at once with file, line
and key, plus typed readers for quantities (sizes, bandwidths, times) at a key path."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import jsonschema

from collsim.errors import InputError, InputErrors
from collsim.suggest import closest
from collsim.units import UnitError
from collsim.yamlfile import Document, KeyPath, dotted

T = TypeVar("T")

QUANTITY = {"type": ["string", "number"]}


def _describe(error: jsonschema.ValidationError, doc: Document) -> list[InputError]:
    path = tuple(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = sorted(error.schema.get("properties", {}))
        out = []
        for key in error.instance:
            if key in allowed or any(
                    re.match(pattern, key)
                    for pattern in error.schema.get("patternProperties", {})):
                continue
            hint = closest(str(key), allowed)
            suggestion = f"; did you mean '{hint}'?" if hint else \
                f"; expected one of {', '.join(allowed)}"
            problem = doc.error(path + (key,), f"unknown key '{key}'{suggestion}")
            problem.suggested_key = dotted(path + (hint,)) if hint else None
            out.append(problem)
        return out
    if error.validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else error.message
        return [doc.error(path + (missing,), "required key is missing")]
    if error.validator == "enum":
        choices = ", ".join(map(str, error.validator_value))
        return [doc.error(path, f"{error.instance!r} is not one of {choices}")]
    if error.validator == "type":
        expected = error.validator_value
        expected = " or ".join(expected) if isinstance(expected, list) else expected
        return [doc.error(path, f"expected {expected}, got {error.instance!r}")]
    if error.validator in ("minimum", "exclusiveMinimum", "maximum"):
        bound = error.message.split(" is ", 1)[-1]
        return [doc.error(path, f"{error.instance!r} is out of range ({bound})")]
    if error.validator == "minItems":
        return [doc.error(path, "must be non-empty: give at least one value"
                          if not error.instance else
                          f"needs at least {error.validator_value} items")]
    if error.validator in ("oneOf", "anyOf") and error.context:
        best = jsonschema.exceptions.best_match(error.context)
        return _describe(best, doc)
    return [doc.error(path, error.message)]


def validate(doc: Document, schema: dict[str, Any]) -> None:
    """Raise InputErrors listing every way ``doc.data`` breaks ``schema``, in file order."""
    validator = jsonschema.Draft202012Validator(schema)
    problems: list[InputError] = list(_non_finite(doc, doc.data, ()))
    for error in validator.iter_errors(doc.data):
        problems.extend(_describe(error, doc))
    # A misspelt required key is reported once, as the unknown key with its suggestion.
    suggested = {e.suggested_key for e in problems if e.suggested_key}
    problems = [e for e in problems
                if not (e.message == "required key is missing" and e.key in suggested)]
    if problems:
        problems.sort(key=lambda e: (e.line or 0, e.key or ""))
        raise problems[0] if len(problems) == 1 else InputErrors(problems)


def _non_finite(doc: Document, data: Any, path: KeyPath) -> Iterator[InputError]:
    """Every NaN or infinity (YAML's .nan, .inf) in ``data``: a schema's minimum and maximum
    let NaN through (it compares false with everything), and no collsim value may be one."""
    if isinstance(data, float) and not math.isfinite(data):
        yield doc.error(path, f"expected a finite number, got {data!r}")
    elif isinstance(data, dict):
        for key, value in data.items():
            yield from _non_finite(doc, value, path + (key,))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from _non_finite(doc, value, path + (index,))


def at(data: Any, path: KeyPath, default: Any = None) -> Any:
    """The value at ``path`` in nested dicts/lists, or ``default`` when a key is absent."""
    for part in path:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return default
    return data


def quantity(doc: Document, path: KeyPath, parse: Callable[[Any], T], default: Any = None,
             data: Any = None) -> T:
    """Parse the value at ``path`` with a units parser; a bad value becomes an InputError there."""
    value = at(doc.data if data is None else data, path, None)
    if value is None:
        if default is None:
            raise doc.error(path, "required key is missing")
        value = default
    try:
        return parse(value)
    except UnitError as exc:
        raise doc.error(path, str(exc)) from None
