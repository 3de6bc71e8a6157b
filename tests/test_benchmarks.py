"""The benchmark scripts still run, and the rate floor's replay is faithful."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import algorithms  # noqa: E402
import engine  # noqa: E402
import fastpath_families  # noqa: E402
import rate_floor  # noqa: E402
import scale  # noqa: E402
import tree_symmetry  # noqa: E402


@pytest.mark.parametrize("family", ["double_binary_tree (64 MiB)", "direct", "binary_tree"])
def test_replaying_the_settles_reproduces_every_finish_time(family):
    """The floor is only a floor if the replay makes the same events: it must finish every
    rank at the very same instant as the real run (measure raises otherwise), having
    replayed settles that really rescheduled transfers."""
    result = rate_floor.measure(family, 12)
    assert result["settles"] > 0 and result["reschedules"] >= result["settles"]
    assert result["transfers"] > 0


def test_every_family_case_builds_at_a_small_rank_count():
    for family in algorithms.FAMILIES:
        topology, gpus, job, algorithm = algorithms.case(family, 8)
        assert len(gpus) == 8 and job.nranks == 8


def test_engine_and_scale_benchmarks_run_at_a_small_size(monkeypatch):
    """Both paths of the engine benchmark agree; the scale benchmark reports its path."""
    monkeypatch.setattr(engine, "RAW_EVENTS", 1000)  # the raw SimPy yardstick, shortened
    quick, full = engine.ring(12), engine.ring(12, lockstep=False)
    assert (quick["path"], full["path"]) == ("lockstep", "full")
    assert quick["time"] == full["time"] and quick["transfers"] == 2 * 12 * 11
    # LL128's 256 KiB chunks each hold one of a connection's 8 slots and fit its buffer, so
    # each send finds room and the lockstep path can show it; a Simple chunk holds 4 of the
    # slots (two in flight), so its sends wait and take the events.
    case = scale.one(str(scale.CLUSTER), 2, "ring",
                     {"channels": 1, "chunk_size": 1 << 18, "protocol": "LL128"},
                     {"fabric.routing": "dmodk"})
    assert case["gpus"] == 16 and case["path"] == "lockstep" and case["time_s"] > 0
    case = scale.one(str(scale.CLUSTER), 2, "ring", {"channels": 1}, {"fabric.routing": "dmodk"})
    assert case["path"] == "full"
    # Two GB200 racks: NCCL's 32 channels share NVLink, each lane timed on its own.
    case = scale.one(str(scale.RACKS), 2, "ring", {}, scale.NVLS_OFF)
    assert case["gpus"] == 144 and case["path"] == "lanes" and case["time_s"] > 0


@pytest.mark.parametrize("n", [6, 7, 16, 33, 64])
def test_the_double_tree_leaves_no_two_nodes_alike_where_one_tree_does(n):
    """One binary tree leaves nodes alike (all leaves of a level); with its mirror or shift
    every node is told apart; a ring is one class."""
    first, second = tree_symmetry.double_tree(n)
    assert tree_symmetry.classes((first,), n) < n
    assert tree_symmetry.classes((first, second), n) == n
    assert tree_symmetry.classes((tree_symmetry.ring(n),), n) == 1


def test_the_families_benchmark_times_the_same_call_on_every_rank_s_events():
    """Its reference is the events (path full) and, for an exact path, the same time."""
    quick = fastpath_families.one("ring", "dmodk", 16, "1MiB", False)
    events = fastpath_families.one("ring", "dmodk", 16, "1MiB", True)
    assert events["path"] == "full" and not events["fallback"]
    assert quick["time_s"] == events["time_s"]
    for family in ("nvls", "pat"):  # each on the machine it needs (SHARP, a GPU a node)
        assert fastpath_families.one(family, "dmodk", 16, "1MiB", False)["time_s"] > 0
