"""NCCL's rating of its tree (``nccl.tree_rating``): the choice takes the tree where its rated
time wins, the file key is read and refused outside its range, and a calibration recovers the
picks of a machine whose NCCL rates its tree otherwise than the model."""

from __future__ import annotations

import dataclasses

import pytest

from collsim.calibrate.cases import Case, repicked, shape
from collsim.calibrate.figures import apply
from collsim.calibrate.fit import TREE_RATINGS, calibrate
from collsim.calibrate.predict import pick, simulate_pick, with_figures
from collsim.calibrate.writer import calibrated_yaml
from collsim.hardware.loader import load_topology
from collsim.hardware.shipped import resolve_topology
from collsim.nccl.choice import choose
from collsim.nccl.system import NcclSystem

CLUSTER = resolve_topology("a100-cluster")
TWO_NODES = NcclSystem(arch=80, nodes=2, gpus_per_node=8, nvlink_links=12, nics_per_node=8,
                       nic_bandwidth=25.0)


@pytest.mark.parametrize("rating", [0.5, 1.3, 2.0, 4.0])
@pytest.mark.parametrize("log2", [16, 22, 28, 32])
def test_the_rating_scales_the_trees_bandwidth_in_the_choice_only(rating, log2):
    plain = choose(TWO_NODES, "allreduce", 2**log2)
    rated = choose(dataclasses.replace(TWO_NODES, tree_rating=rating), "allreduce", 2**log2)
    before = {(c.algorithm, c.protocol): c for c in plain.candidates}
    for c in rated.candidates:
        old = before[(c.algorithm, c.protocol)]
        factor = rating if c.algorithm == "nccl_tree" else 1.0
        assert c.bandwidth == pytest.approx(old.bandwidth * factor)
    best = min(rated.candidates, key=lambda c: c.time)
    assert (rated.algorithm, rated.protocol) == (best.algorithm, best.protocol)
    if rated.algorithm == plain.algorithm and rated.protocol == plain.protocol:
        assert rated.time == pytest.approx(plain.time)  # the pick's time as the model rates it


def test_a_high_rating_takes_the_tree_at_large_sizes():
    picked = choose(dataclasses.replace(TWO_NODES, tree_rating=4.0), "allreduce", 2**32)
    assert choose(TWO_NODES, "allreduce", 2**32).algorithm == "ring"
    assert picked.algorithm == "nccl_tree"


def _measured_case(rating: float, launch: float) -> tuple[Case, Case]:
    """A 2 x 2-GPU allreduce log simulated on a machine whose NCCL rates its tree ``rating``
    x the model's and whose launch cost is ``launch`` x the preset's, and the same log as a
    case on the preset (the model's picks)."""
    topology, gpus = shape(CLUSTER, 2, 2, {}, "t")
    sizes = [2**k for k in range(20, 27)]  # 1 .. 64 MiB: the model's ring, the truth's tree
    picks = [pick(topology, "allreduce", s, gpus, "auto", None) for s in sizes]
    case = Case("two-nodes.txt:1", topology, gpus, "allreduce", sizes, [1.0] * len(sizes),
                picks, 2, 2)
    truth = repicked(case, 1.0, rating)
    machine = with_figures(topology, apply(topology.machine.nccl, {"launch": launch}))
    measured = [simulate_pick(machine, "allreduce", s, gpus, p).time_s
                for s, p in zip(sizes, truth.picks, strict=True)]
    return dataclasses.replace(case, measured=measured), truth


def test_a_calibration_finds_nccls_rating_of_its_tree_and_writes_it():
    case, truth = _measured_case(2.0, 1.5)
    assert [p.algorithm for p in truth.picks] != [p.algorithm for p in case.picks]
    result = calibrate([case], names=["launch"], pick_scales=(), tree_ratings=TREE_RATINGS)
    fitted = {f.name: f for f in result.figures}
    rating = fitted["tree_rating"]
    assert rating.determined and rating.value != 1.0
    # the truth's algorithms; a protocol may differ where the tree's two simulate alike (the
    # times below are the measure)
    assert [p.algorithm for p in repicked(case, 1.0, rating.value).picks] == \
        [p.algorithm for p in truth.picks]
    assert fitted["launch"].factor == pytest.approx(1.5, rel=0.05)
    assert result.errors[0].after_median < 0.02
    assert result.errors[0].before_p90 > 0.1  # the model's ring misses the tree's times
    assert result.sources["tree_rating"] == ("two-nodes.txt:1",)
    text = calibrated_yaml(CLUSTER.read_text(), "a100-cluster", "cal", result, [case])
    assert f"tree_rating: {rating.value:.4g}  # fitted" in text


def test_a_log_the_models_picks_explain_keeps_the_rating():
    case, _ = _measured_case(1.0, 1.2)
    result = calibrate([case], names=["launch"], pick_scales=(), tree_ratings=TREE_RATINGS)
    assert calibrate([case], names=["launch"], pick_scales=()).nccl.tree_rating is None
    rating = next(f for f in result.figures if f.name == "tree_rating")
    assert not rating.determined and rating.value == 1.0 and rating.why
    assert result.nccl.tree_rating is None


def test_a_written_rating_is_what_the_estimate_runs(tmp_path):
    path = tmp_path / "rated.yaml"
    path.write_text(CLUSTER.read_text().replace("nccl:\n", "nccl:\n  tree_rating: 4\n", 1))
    rated = load_topology(path, {"nodes": 2})
    topology, gpus = shape(CLUSTER, 2, 8, {}, "t")
    assert pick(topology, "allreduce", 2**32, gpus, "auto", None).algorithm == "ring"
    assert pick(rated, "allreduce", 2**32, gpus, "auto", None).algorithm == "nccl_tree"
