"""Hostile and absurd inputs end in one exit-2 paragraph naming the file, key or path and what
was expected: never a traceback, a hang or runaway memory."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from collsim.cli import main
from collsim.yamlfile import MAX_YAML_BYTES, MAX_YAML_DEPTH, MAX_YAML_VALUES, parse_yaml
from tests.exits import fails_cleanly

ROOT = Path(__file__).resolve().parents[1]
SWITCH = ROOT / "topologies" / "switch-64.yaml"
ESTIMATE = ["estimate", "-c", "allreduce", "-a", "ring", "-p", "2", "-s", "1KiB"]

SCENARIO = f"""\
name: small
topologies: [{SWITCH}]
collectives: [allreduce]
algorithms: [ring]
sweep:
  size: [1KiB, 1MiB]
  ranks: [2, 4]
"""



def alias_bomb(levels: int) -> str:
    """Billion laughs: each level lists the previous one nine times (9**levels values)."""
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels + 1):
        lines.append(f"l{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_quickly_at_its_line(tmp_path, capsys):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(alias_bomb(9))  # 387 million values once expanded
    started = time.monotonic()
    err = fails_cleanly(capsys, *ESTIMATE, "--topology", bomb)
    assert time.monotonic() - started < 5
    assert f"{bomb}:" in err and "aliases" in err and f"{MAX_YAML_VALUES:,}" in err
    err = fails_cleanly(capsys, "run", bomb, "--out", tmp_path / "out")
    assert "alias" in err and not (tmp_path / "out").exists()


def test_modest_aliases_are_still_yaml():
    doc = parse_yaml("link: &l {latency: 1us, bandwidth: 1GB/s}\nother: *l\n", "t.yaml")
    assert doc.data["other"] == {"latency": "1us", "bandwidth": "1GB/s"}
    assert doc.line(("other",)) == 2 and doc.line(("other", "latency")) == 1  # as written


def test_a_self_referring_alias_and_deep_nesting_are_refused(tmp_path, capsys):
    looped = tmp_path / "loop.yaml"
    looped.write_text("a: &a [1, *a]\n")
    assert "contains it" in fails_cleanly(capsys, *ESTIMATE, "--topology", looped)
    deep = tmp_path / "deep.yaml"
    deep.write_text("a: " + "[" * 3000 + "]" * 3000 + "\n")
    err = fails_cleanly(capsys, *ESTIMATE, "--topology", deep)
    assert f"{MAX_YAML_DEPTH} levels" in err and str(deep) in err
    nested = tmp_path / "nested.yaml"
    nested.write_text("a: " + "[" * (MAX_YAML_DEPTH + 5) + "]" * (MAX_YAML_DEPTH + 5) + "\n")
    assert f"{MAX_YAML_DEPTH} levels" in fails_cleanly(capsys, "run", nested)


@pytest.mark.parametrize("command", ["estimate", "run", "plot", "compare", "topo"])
@pytest.mark.parametrize("kind", ["device", "directory", "fifo", "huge", "binary"])
def test_every_reader_takes_regular_files_only(tmp_path, capsys, command, kind):
    if kind == "device":
        path = Path("/dev/zero")
    elif kind == "directory":
        path = tmp_path
    elif kind == "fifo":
        path = tmp_path / "pipe.yaml"
        os.mkfifo(path)  # nothing ever writes to it: a reader that opens it would wait forever
    elif kind == "huge":
        path = tmp_path / "huge.yaml"
        with open(path, "wb") as file:
            file.truncate(2**30 + 1)  # sparse: above every cap, costs no disk
    else:
        path = tmp_path / "binary.yaml"
        path.write_bytes(b"name: \xff\xfe\n")
    argv = {"estimate": [*ESTIMATE, "--topology", path], "run": ["run", path],
            "plot": ["plot", path], "compare": ["compare", path, path],
            "topo": ["topo", "show", path]}[command]
    started = time.monotonic()
    err = fails_cleanly(capsys, *argv)
    assert time.monotonic() - started < 5
    assert f"error: {path}" in err
    expected = {"device": "not a regular file", "fifo": "not a regular file",
                "directory": "is a directory", "huge": "larger than",
                "binary": "not UTF-8"}[kind]
    assert expected in err


def test_the_yaml_size_cap_is_stated(tmp_path, capsys):
    big = tmp_path / "big.yaml"
    big.write_text("# " + "x" * MAX_YAML_BYTES + "\n")
    assert "larger than 4 MiB" in fails_cleanly(capsys, *ESTIMATE, "--topology", big)


def scenario_file(tmp_path: Path, text: str = SCENARIO) -> Path:
    path = tmp_path / "scenario.yaml"
    path.write_text(text)
    return path


HUGE = [
    ("size-digits", [*ESTIMATE[:-1], "99999999999999999999999999999"], "at most 1024TiB"),
    ("size-overflow", [*ESTIMATE[:-1], "1e400"], "finite"),
    ("size-exponent", [*ESTIMATE[:-1], "1e30"], "at most 1024TiB"),
    ("ranks-digits", ["estimate", "-c", "allreduce", "-a", "ring", "-s", "1KiB",
                      "-p", "99999999999999999999"], "99999999999999999999 ranks do not fit"),
]


@pytest.mark.parametrize(("name", "argv", "expected"), HUGE, ids=[h[0] for h in HUGE])
def test_huge_numbers_on_the_command_line(capsys, name, argv, expected):
    assert expected in fails_cleanly(capsys, *argv, "--topology", SWITCH)


def test_huge_numbers_for_crossover_and_jobs(tmp_path, capsys):
    err = fails_cleanly(capsys, "crossover", "-t", SWITCH, "--algorithms", "ring", "binomial",
                        "--max-size", "1e30")
    assert "--max-size" in err and "1024TiB" in err
    err = fails_cleanly(capsys, "crossover", "-t", SWITCH, "--algorithms", "ring", "binomial",
                        "--ranks", "123456789012345678901234567")
    assert "123456789012345678901234567 ranks" in err  # exactly, not rounded through a float
    err = fails_cleanly(capsys, "run", scenario_file(tmp_path), "--jobs",
                        "99999999999999999999", "--out", tmp_path / "out")
    assert "--jobs" in err and "1024" in err and not (tmp_path / "out").exists()


YAML_HUGE = [
    ("size-range", "size: [1KiB, 1MiB]", "size: {from: 1, to: 1e30, factor: 2}",
     "sweep.size.to", "at most 1024TiB"),
    ("size-digits", "size: [1KiB, 1MiB]", "size: 99999999999999999999999999999",
     "sweep.size", "at most 1024TiB"),
    ("ranks-range", "ranks: [2, 4]", "ranks: {from: 1, to: 1e30, step: 1}",
     "sweep.ranks", "more than 100000 values"),
    ("points", "ranks: [2, 4]",
     "ranks: [2, 4]\n  param: {root: {from: 0, to: 99999, step: 1}, "
     "dtype: [float32, float16, int8, int32, float64, int64, uint8, bfloat16, uint32, "
     "float16, uint64]}",
     "sweep", "more than 1,000,000"),
]


@pytest.mark.parametrize(("name", "old", "new", "key", "expected"), YAML_HUGE,
                         ids=[h[0] for h in YAML_HUGE])
def test_huge_numbers_and_sweeps_in_a_scenario(tmp_path, capsys, name, old, new, key,
                                               expected):
    path = scenario_file(tmp_path, SCENARIO.replace(old, new))
    started = time.monotonic()
    err = fails_cleanly(capsys, "run", path, "--out", tmp_path / "out")
    assert time.monotonic() - started < 10
    assert f"key '{key}'" in err and expected in err and str(path) in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("condition", "expected"), [
    (" and ".join(["ranks > 1"] * 200), "more than 1000"),
    ("-" * 900 + "ranks > 1", "more than 40 levels"),
    ("not " * 200 + "ranks > 1", "more than 40 levels"),
    ("(" * 300 + "ranks" + ")" * 300 + " > 1", "cannot read the condition"),
])
def test_long_or_deep_where_conditions(tmp_path, capsys, condition, expected):
    path = scenario_file(tmp_path, SCENARIO + f"where: '{condition}'\n")
    err = fails_cleanly(capsys, "run", path, "--out", tmp_path / "out")
    assert f"{path}:8, key 'where'" in err and expected in err


def test_one_rank_reports_zero_bandwidth_not_nan(capsys):
    one_rank = ["estimate", "-c", "allreduce", "-a", "ring", "-p", "1", "-s", "1KiB",
                "--topology", str(SWITCH)]
    assert main([*one_rank, "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["time_s"] == 0.0 and row["algbw_GBps"] == 0.0 and row["busbw_GBps"] == 0.0
    assert main(one_rank) == 0
    assert "algbw 0 GB/s, busbw 0 GB/s" in capsys.readouterr().out


@pytest.mark.parametrize("option", ["--set", "--param"])
def test_an_alias_bomb_on_the_command_line(capsys, option):
    items = ["&l0 [1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    items += [f"&l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 9)]
    started = time.monotonic()
    err = fails_cleanly(capsys, *ESTIMATE, "--topology", SWITCH, option,
                        "root=[" + ", ".join(items) + "]")
    assert time.monotonic() - started < 5
    assert f"key '{option}'" in err and "aliases" in err


@pytest.mark.parametrize("command", ["run", "plot"])
def test_an_empty_out_is_refused_rather_than_the_current_folder(tmp_path, capsys, command,
                                                               monkeypatch):
    monkeypatch.chdir(tmp_path)
    target = scenario_file(tmp_path) if command == "run" else tmp_path / "results.csv"
    if command == "plot":
        assert main(["run", str(scenario_file(tmp_path)), "--out", "made", "--no-figures"]) == 0
        target = tmp_path / "made" / "results.csv"
    before = sorted(p.name for p in tmp_path.iterdir())
    assert "--out" in fails_cleanly(capsys, command, target, "--out", "")
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.parametrize(("option", "value", "expected"), [
    ("--seed", "-5", "key '--seed': must be 0 or more"),
    ("--skew", "nan", "key '--skew': expected a time"),
    ("--skew", "1e300", "key '--skew': a time must lie between"),
    ("--late", "1=nan", "key '--late': expected RANK=TIME"),
    ("--late", "99=1ms", "rank 99 is not one of the call's ranks 0..1"),
])
def test_bad_stragglers(capsys, option, value, expected):
    extra = ["--skew", "1us"] if option == "--seed" else []
    err = fails_cleanly(capsys, *ESTIMATE, "--topology", SWITCH, *extra, option, value)
    assert expected in err
