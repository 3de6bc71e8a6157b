"""The package's layering, read from the source with ``ast``: every import between top-level
units of ``collsim/`` points down the layer table below, so there is no cycle between them;
an import inside a function says why it is there (a heavy or optional import deferred, or a
cycle inside one package)."""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "collsim"

# Top-level units of collsim/ (packages and modules), highest layer first. A unit may import
# units of lower layers only: not its own layer's others, never a higher one.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("__init__", "__main__"),                            # `import collsim`, `python -m collsim`
    ("cli",),                                            # the command line
    ("api",),                                            # the Python interface
    ("replay",),                                         # a profiled job, run as a workload
    ("calibrate", "scenarios", "workloads", "recorded"),  # what runs many calls
    ("output",),                                         # tables, figures, traces
    ("simulate",),                                       # one simulated call
    ("calls",),                                          # its plan; auto and best
    ("algorithms",),                                     # per-rank programs, the registry
    ("nccl", "callspec"),                                # NCCL's model; one call as asked
    ("engine",),                                         # the discrete-event timing
    ("hardware", "nccltests"),                           # machines; nccl-tests' files
    ("schema", "collectives", "watch", "shipped"),
    ("program", "yamlfile", "tags"),
    ("units", "suggest"),
    ("params", "errors"),
)
LAYER = {unit: depth for depth, units in enumerate(LAYERS) for unit in units}


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _unit(path: Path) -> str:
    """The top-level unit ``path`` belongs to (``calls`` for collsim/calls/plan.py)."""
    return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


def _dotted(path: Path) -> list[str]:
    parts = ["collsim", *path.relative_to(PACKAGE).with_suffix("").parts]
    return parts[:-1] if parts[-1] == "__init__" else parts


def _imported(path: Path, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The absolute module names an import statement names."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level == 0:
        return [node.module or ""]
    package = _dotted(path)
    if path.name != "__init__.py":
        package = package[:-1]
    base = package[:len(package) - node.level + 1]
    return [".".join(base + ([node.module] if node.module else []))]


def _edges() -> dict[tuple[str, str], list[str]]:
    """(importing unit, imported unit) -> where: every import between two units."""
    edges: dict[tuple[str, str], list[str]] = {}
    for path in _modules():
        source = _unit(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for name in _imported(path, node):
                parts = name.split(".")
                if parts[0] == "collsim" and len(parts) > 1 and parts[1] != source:
                    where = f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
                    edges.setdefault((source, parts[1]), []).append(where)
    return edges


def test_every_unit_has_a_layer() -> None:
    units = {_unit(path) for path in _modules()}
    assert units - set(LAYER) == set(), "add the new unit to LAYERS"
    assert set(LAYER) - units == set(), "a unit in LAYERS is gone"


def test_imports_point_down_the_layers() -> None:
    against = [f"{a} -> {b} ({', '.join(where)})" for (a, b), where in sorted(_edges().items())
               if LAYER[b] <= LAYER[a]]
    assert against == []


def test_no_cycle_between_units() -> None:
    graph: dict[str, set[str]] = {}
    for a, b in _edges():
        graph.setdefault(a, set()).add(b)
    state: dict[str, int] = {}  # 1 on the current path, 2 done

    def visit(unit: str, path: list[str]) -> None:
        state[unit] = 1
        for other in sorted(graph.get(unit, ())):
            if state.get(other) == 1:
                pytest.fail("import cycle: " + " -> ".join(path + [unit, other]))
            if other not in state:
                visit(other, path + [unit])
        state[unit] = 2

    for unit in sorted(graph):
        if unit not in state:
            visit(unit, [])


def test_the_issue_chain_holds() -> None:
    """cli -> scenarios/workloads -> simulate/calls -> algorithms, nccl -> engine -> hardware,
    with no arrow back."""
    chain = ["cli", "scenarios", "simulate", "calls", "algorithms", "nccl", "engine",
             "hardware"]
    assert [LAYER[u] for u in chain] == sorted(LAYER[u] for u in chain)
    assert LAYER["workloads"] == LAYER["scenarios"]
    edges = _edges()
    for lower, higher in [(lo, hi) for i, hi in enumerate(chain) for lo in chain[i + 1:]]:
        assert (lower, higher) not in edges, edges.get((lower, higher))


def _comment_lines(source: str) -> set[int]:
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return {token.start[0] for token in tokens if token.type == tokenize.COMMENT}


def _function_imports(tree: ast.AST) -> list[tuple[ast.AST, list[ast.stmt], int]]:
    """(enclosing function, statement list, index) of every import inside a function."""
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            for field in ("body", "orelse", "finalbody"):
                body = getattr(node, field, None)
                if not isinstance(body, list):
                    continue
                for index, statement in enumerate(body):
                    if isinstance(statement, (ast.Import, ast.ImportFrom)):
                        found.append((function, body, index))
    return found


def test_imports_inside_functions_say_why() -> None:
    """A comment on the import, on the line above its group of imports, or on the function's
    ``def`` line gives the reason."""
    silent = []
    for path in _modules():
        source = path.read_text(encoding="utf-8")
        comments = _comment_lines(source)
        for function, body, index in _function_imports(ast.parse(source)):
            start = index
            while start > 0 and isinstance(body[start - 1], (ast.Import, ast.ImportFrom)):
                start -= 1
            first = body[start].lineno - 1
            lines = set(range(first, body[index].end_lineno + 1)) | {function.lineno}
            if not lines & comments:
                silent.append(f"{path.relative_to(PACKAGE.parent)}:{body[index].lineno}")
    assert silent == []
