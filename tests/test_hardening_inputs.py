"""Hostile and absurd inputs end in one exit-2 paragraph naming the file, key or path and what
was expected: never a traceback, a hang or runaway memory."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from collsim.cli import main
from collsim.yamlfile import MAX_YAML_BYTES, MAX_YAML_DEPTH, MAX_YAML_VALUES, parse_yaml

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


def fails_cleanly(capsys, *argv: object) -> str:
    """Run the command line; it must exit 2 with a short message and no traceback."""
    status = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert status == 2, err
    assert err.startswith("collsim: error: ") and "Traceback" not in err
    assert len(err) < 1000, err
    return err


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
