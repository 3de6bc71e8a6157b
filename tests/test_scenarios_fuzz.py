"""Fuzzing the scenario loader: random YAML documents and random mutations of the example
scenarios either load or fail with an InputError that names the file, never anything else."""

from __future__ import annotations

from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collsim.errors import InputError
from collsim.scenarios.loader import scenario_from_text
from collsim.scenarios.schema import FIGURE_KINDS
from collsim.scenarios.sweep import count_points, expand

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = {p.name: p.read_text() for p in sorted((ROOT / "scenarios").glob("*.yaml"))}
FILE = str(ROOT / "scenarios" / "fuzz.yaml")

KEYS = ["name", "topologies", "collectives", "algorithms", "sweep", "size", "ranks", "set",
        "param", "where", "figures", "formats", "quick", "from", "to", "factor", "step", "kind",
        "select", "panels", "lines", "baseline", "root", "chunk_size", "link.bandwidth", "gpus",
        "allreduce", "ring", "all", "description"]
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
    st.sampled_from(["1KiB", "-1KB", "4GiB", "100GB/s", "0", "ring", "all", "allreduce",
                     "ranks <= gpus", "size >", "1e400", "../topologies/switch-64.yaml",
                     "nosuch.yaml", *FIGURE_KINDS, "png", "x" * 40]),
    st.text(max_size=12),
)
DOCUMENTS = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=6),
                                                      st.integers(-3, 3)), inner, max_size=5)),
    max_leaves=25,
)
TOKENS = [": ", "-", "[", "]", "{", "}", ",", "'", '"', "#", "x", "0", "-1", "1e400", "null",
          "~", "&a ", "*a", "!!python/object:os.system ", "\t", "\n", "KiB", "  ", "all", "%",
          "? ", "|", ">", "@", "`", "\\", "1.5", "where: ranks > 2\n"]


def check(text: str) -> None:
    try:
        scenario = scenario_from_text(text, FILE)
        if count_points(scenario) <= 5000:
            expand(scenario)
        scenario = scenario_from_text(text, FILE, quick=True)
        if count_points(scenario) <= 5000:
            expand(scenario)
    except InputError as exc:
        assert str(exc).strip()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(DOCUMENTS)
def test_random_documents_fail_cleanly(document):
    check(yaml.safe_dump(document, allow_unicode=True))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=200))
def test_random_text_fails_cleanly(text):
    check(text)


@st.composite
def mutated(draw):
    text = draw(st.sampled_from(sorted(EXAMPLES.values())))
    for _ in range(draw(st.integers(1, 3))):
        lines = text.split("\n")
        how = draw(st.sampled_from(["delete", "duplicate", "swap", "char", "insert"]))
        at = draw(st.integers(0, len(lines) - 1))
        if how == "delete":
            del lines[at]
        elif how == "duplicate":
            lines.insert(at, lines[at])
        elif how == "swap":
            other = draw(st.integers(0, len(lines) - 1))
            lines[at], lines[other] = lines[other], lines[at]
        else:
            line = lines[at]
            column = draw(st.integers(0, len(line)))
            new = draw(st.sampled_from(TOKENS)) if how == "insert" else \
                draw(st.characters(blacklist_categories=("Cs",)))
            skip = 1 if how == "char" and column < len(line) else 0
            lines[at] = line[:column] + new + line[column + skip:]
        text = "\n".join(lines)
    return text


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_examples_fail_cleanly(text):
    check(text)
