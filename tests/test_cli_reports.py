"""What ``--trace`` and ``--link-report`` tell the user: the trace file written, bytes with
their unit, and every link on request (``--links all``)."""

from __future__ import annotations

import json

import pytest

from collsim.cli import main
from collsim.units import format_bytes

# Every rank sends 7/8 of its megabyte through its own NVLink into the switch: 16 directed
# links carry 896 KiB each.
ALLTOALL = ["estimate", "-t", "dgx-h100", "-c", "alltoall", "-a", "auto", "-p", "8",
            "-s", "1MiB", "--link-report"]


def link_rows(out: str) -> list[str]:
    return [line for line in out.splitlines() if "->" in line]


def test_format_bytes_names_its_unit():
    assert format_bytes(917504) == "896 KiB"
    assert format_bytes(3 * 2**29) == "1.5 GiB"
    assert format_bytes(512) == "512 B"
    assert format_bytes(2**40) == "1 TiB"


def test_the_link_report_gives_bytes_with_a_unit(capsys):
    assert main(ALLTOALL) == 0
    out = capsys.readouterr().out
    rows = link_rows(out)
    assert len(rows) == 10 and all(" 896 KiB " in row for row in rows)
    assert "... 6 more (--links all lists them)" in out
    assert "moved" in out


@pytest.mark.parametrize(("links", "listed"), [("all", 16), ("3", 3), ("40", 16)])
def test_links_chooses_how_many_are_listed(capsys, links, listed):
    assert main([*ALLTOALL, "--links", links]) == 0
    out = capsys.readouterr().out
    assert len(link_rows(out)) == listed
    assert ("more (--links all" in out) == (listed < 16)


@pytest.mark.parametrize("links", ["0", "-2", "some"])
def test_a_bad_links_count_exits_2(capsys, links):
    with pytest.raises(SystemExit) as stopped:
        main([*ALLTOALL, "--links", links])
    assert stopped.value.code == 2
    assert "expected a positive number or 'all'" in capsys.readouterr().err


def test_trace_says_what_it_wrote(tmp_path, capsys):
    path = tmp_path / "t.json"
    assert main(["estimate", "-t", "switch-64", "-c", "allreduce", "-a", "ring", "-p", "4",
                 "-s", "1MiB", "--trace", str(path)]) == 0
    captured = capsys.readouterr()
    events = [e for e in json.loads(path.read_text())["traceEvents"] if e["ph"] != "M"]
    assert f"collsim: wrote {path}: a Chrome trace of {len(events):,} events" in captured.err
    assert str(path) not in captured.out  # stdout stays the result (--json stays JSON)
