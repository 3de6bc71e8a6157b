"""The ``where:`` filter of a sweep: a small expression language (comparisons, and/or/not,
arithmetic, constants such as KiB) evaluated on each point, never Python's eval."""

from __future__ import annotations

import ast
import difflib
import operator
from collections.abc import Callable, Mapping
from typing import Any

from collsim.yamlfile import Document, KeyPath

CONSTANTS = {
    "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
    "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40,
    "true": True, "false": False, "True": True, "False": False,
}

_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}
_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
}
_UNARY: dict[type, Callable[[Any], Any]] = {
    ast.Not: operator.not_, ast.USub: operator.neg, ast.UAdd: operator.pos,
}


# A condition is a line or two; these bounds keep a pathological one (a megabyte of text,
# thousands of nested operators) from exhausting memory or the recursion limit.
MAX_CONDITION_CHARS = 1000
MAX_CONDITION_DEPTH = 40


class _NotApplicable(Exception):
    """A name without a value at this point (a parameter its algorithm does not take)."""


class Filter:
    """One ``where`` condition, checked against the names a point offers when it is loaded."""

    def __init__(self, doc: Document, path: KeyPath, text: str, names: set[str]) -> None:
        self.text = text
        self._doc, self._path = doc, path
        if not isinstance(text, str):
            raise doc.error(path, f"expected a condition as text, got {text!r}")
        if len(text) > MAX_CONDITION_CHARS:
            raise doc.error(path, f"the condition is {len(text)} characters long, more than "
                                  f"{MAX_CONDITION_CHARS}; split it into several where: "
                                  f"entries (a list, all of which must hold)")
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            raise doc.error(path, f"cannot read the condition {text!r}; write comparisons such "
                                  f"as \"ranks <= gpus and size >= 64 * KiB\"") from None
        self._tree = tree.body
        self._check(self._tree, names, 0)

    def _check(self, node: ast.AST, names: set[str], depth: int) -> None:
        if depth > MAX_CONDITION_DEPTH:
            raise self._doc.error(self._path, f"the condition nests more than "
                                              f"{MAX_CONDITION_DEPTH} levels of operators; "
                                              f"write it more simply")
        if isinstance(node, (ast.Name, ast.Attribute)):
            name = _dotted(node)
            if name is None:
                raise self._doc.error(self._path, f"{self.text!r}: only names such as ranks or "
                                                  f"link.bandwidth may be dotted")
            if name not in names and name not in CONSTANTS:
                hint = difflib.get_close_matches(name, sorted(names), n=1)
                raise self._doc.error(self._path, f"{self.text!r}: unknown name {name!r}; " + (
                    f"did you mean {hint[0]!r}?" if hint else
                    f"a condition can use {', '.join(sorted(names))}"))
            return
        allowed = (ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.BinOp, ast.Compare,
                   ast.Constant, ast.List, ast.Tuple, ast.Load, *_COMPARE, *_BINARY, *_UNARY)
        if not isinstance(node, allowed):
            raise self._doc.error(self._path, f"{self.text!r}: {type(node).__name__.lower()} is "
                                              f"not allowed in a condition")
        for child in ast.iter_child_nodes(node):
            self._check(child, names, depth + 1)

    def __call__(self, values: Mapping[str, Any]) -> bool:
        """Whether the point with these ``values`` is kept. A condition that names a parameter
        the point's algorithm does not take (its value is None) does not apply: it keeps."""
        try:
            return bool(_evaluate(self._tree, values))
        except _NotApplicable:
            return True
        except (TypeError, ValueError, ZeroDivisionError, ArithmeticError) as exc:
            raise self._doc.error(self._path, f"{self.text!r} cannot be evaluated for "
                                              f"{_describe(values)}: {exc}") from None


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr}" if head else None
    return None


def _evaluate(node: ast.AST, values: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.Name, ast.Attribute)):
        name = _dotted(node)
        if name in values:
            if values[name] is None:
                raise _NotApplicable(name)
            return values[name]
        return CONSTANTS[name]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_evaluate(item, values) for item in node.elts]
    if isinstance(node, ast.BoolOp):
        results = (_evaluate(v, values) for v in node.values)
        return all(results) if isinstance(node.op, ast.And) else any(results)
    if isinstance(node, ast.UnaryOp):
        return _UNARY[type(node.op)](_evaluate(node.operand, values))
    if isinstance(node, ast.BinOp):
        left, right = _evaluate(node.left, values), _evaluate(node.right, values)
        if not all(isinstance(x, (int, float)) for x in (left, right)):
            raise TypeError("arithmetic needs numbers")
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.Compare):
        left = _evaluate(node.left, values)
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = _evaluate(right_node, values)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    raise TypeError(f"cannot evaluate {type(node).__name__}")


def _describe(values: Mapping[str, Any]) -> str:
    shown = ("topology", "collective", "algorithm", "ranks", "size")
    return ", ".join(f"{k}={values[k]!r}" for k in shown if k in values)

