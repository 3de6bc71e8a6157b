"""Several jobs on one fabric: disjoint jobs on a non-blocking fabric take their solo time;
across a 2:1 spine they slow by the factor max-min gives by hand; jobs files are checked
with file:line errors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collsim.cli import main
from collsim.errors import InputError
from collsim.hardware.loader import topology_from_text
from collsim.workloads.jobs import run_jobs
from collsim.workloads.jobsfile import jobs_from_text, parse_gpus
from tests.helpers import SMALL_FAT_TREE

FAT_TREE = SMALL_FAT_TREE   # every byte between its nodes crosses one 100 GB/s uplink
NIC = 25e9
SIZE = 8 * 2**20

TWO_JOBS = f"""
name: halves
jobs:
  - {{name: a, collective: alltoall, algorithm: direct, size: {SIZE}, gpus: [0, 1, 4, 5]}}
  - {{name: b, collective: alltoall, algorithm: direct, size: {SIZE}, gpus: "2-3,6-7"}}
"""


def fat_tree(ratio: float):
    return topology_from_text(FAT_TREE, {"fabric.oversubscription": ratio})


def test_disjoint_jobs_on_a_non_blocking_fabric_take_their_solo_time():
    """Each rank sends SIZE/4 to each other rank; the two cross-node blocks of a rank share
    its NIC (12.5 GB/s each). Both jobs put 8 transfers on the uplink of 100 GB/s: 12.5 GB/s
    each, so the NICs still bind and neither job notices the other."""
    results = run_jobs(jobs_from_text(TWO_JOBS), fat_tree(1))
    for result in results:
        assert result.solo_s == pytest.approx((SIZE / 4) / (NIC / 2), rel=1e-9)
        assert result.time_s == pytest.approx(result.solo_s, rel=1e-12)
        assert result.slowdown == pytest.approx(1.0, rel=1e-12)


def test_jobs_across_a_2_to_1_spine_slow_by_the_max_min_factor():
    """At 2:1 the uplink carries 50 GB/s. Alone, a job's 4 cross transfers per direction get
    12.5 GB/s each (the NIC binds). Together 8 share it: 6.25 GB/s each, so each job takes
    twice as long: (SIZE/4) / 6.25 GB/s."""
    results = run_jobs(jobs_from_text(TWO_JOBS), fat_tree(2))
    for result in results:
        assert result.solo_s == pytest.approx((SIZE / 4) / (NIC / 2), rel=1e-9)
        assert result.time_s == pytest.approx((SIZE / 4) / (50e9 / 8), rel=1e-9)
        assert result.slowdown == pytest.approx(2.0, rel=1e-9)


def test_a_later_job_overlaps_only_its_share_and_repeats_run_back_to_back():
    """Job b starts when a's first call (T alone) is half done; a repeats twice. At 2:1,
    while both run each moves at half its solo speed (the previous test)."""
    one = (SIZE / 4) / (NIC / 2)  # one call alone
    text = TWO_JOBS.replace("gpus: [0, 1, 4, 5]", "gpus: [0, 1, 4, 5], repeat: 2") \
        .replace('gpus: "2-3,6-7"', f'gpus: "2-3,6-7", start: {one / 2}')
    results = {r.name: r for r in run_jobs(jobs_from_text(text), fat_tree(2))}
    assert results["a"].solo_s == pytest.approx(2 * one, rel=1e-9)
    # From T/2 both run at half speed: a has 1.5 calls left, b 1; b ends after 2 T at
    # 2.5 T, when a has done 1 of its 1.5; a's last half runs alone: 3 T in all.
    assert results["b"].time_s == pytest.approx(2 * one, rel=1e-9)
    assert results["a"].time_s == pytest.approx(3 * one, rel=1e-9)
    assert results["b"].start_s == pytest.approx(one / 2)


def test_workload_jobs_on_disjoint_switch_ports_match_their_solo_step(tmp_path):
    workload = tmp_path / "w.yaml"
    workload.write_text("""
name: small
model: {layers: 2, parameters_per_layer: 1M}
parallelism: {micro_batches: 1}
compute: {forward: 1ms, backward: 2x, optimizer: 1ms}
gradients: {bucket: 1MiB}
""")
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text("jobs:\n  - {name: x, workload: w.yaml, gpus: 0-3}\n"
                    "  - {name: y, workload: w.yaml, gpus: 4-7, start: 1ms}\n")
    assert main(["jobs", str(jobs), "-t", "switch-64"]) == 0
    from collsim.api import load_topology
    from collsim.workloads.jobsfile import load_jobs
    for result in run_jobs(load_jobs(jobs), load_topology("switch-64")):
        assert result.time_s == pytest.approx(result.solo_s, rel=1e-12)
        assert result.solo_s > 3e-3


@pytest.mark.parametrize(("body", "line", "key"), [
    ("jobs:\n  - {name: a, gpus: 0-3}\n", 2, "jobs[0]"),
    ("jobs:\n  - {name: a, gpus: 0-3, collective: allreduce, size: 1MiB}\n"
     "  - {name: b, gpus: 3-4, collective: allreduce, size: 1MiB}\n", 3, "jobs[1].gpus"),
    ("jobs:\n  - name: a\n    gpus: 0-3\n    collective: allreduce\n    size: lots\n", 5,
     "jobs[0].size"),
    ("jobs:\n  - name: a\n    gpus: 3-0\n    collective: allreduce\n    size: 1MiB\n", 3,
     "jobs[0].gpus"),
    ("jobs:\n  - {name: a, gpus: 0-3, collective: allreduce, algorithm: nope, size: 1}\n", 2,
     "jobs[0].algorithm"),
    ("jobs:\n  - {name: a, gpus: 0-3, collective: allreduce, size: 1, colour: red}\n", 2,
     None),
])
def test_bad_jobs_files_name_file_line_and_key(tmp_path, body, line, key, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text(body)
    with pytest.raises(InputError) as caught:
        from collsim.workloads.jobsfile import load_jobs
        load_jobs(path)
    error = caught.value
    errors = getattr(error, "errors", [error])
    assert errors[0].line == line
    if key is not None:
        assert errors[0].key == key
    assert main(["jobs", str(path), "-t", "switch-64"]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_a_job_beyond_the_topology_is_bad_input(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("jobs:\n  - {name: a, gpus: 60-67, collective: allreduce, size: 1MiB}\n")
    assert main(["jobs", str(path), "-t", "switch-64"]) == 2


@given(st.lists(st.tuples(st.integers(0, 300), st.integers(0, 20)), min_size=1, max_size=6))
def test_gpu_ranges_list_every_gpu_of_every_range_in_order(ranges):
    text = ",".join(f"{low}-{low + width}" if width else str(low) for low, width in ranges)
    expected = [g for low, width in ranges for g in range(low, low + width + 1)]
    assert list(parse_gpus(text)) == expected
    assert parse_gpus(expected) == tuple(expected)


def test_the_jobs_link_report_shows_the_shared_uplink(tmp_path, capsys):
    """Both jobs' 8 cross transfers per direction meet on leaf0's single uplink."""
    topology = tmp_path / "tree.yaml"
    topology.write_text("name: tree\n" + FAT_TREE.replace(
        "latency: 0us}\n", "latency: 0us, oversubscription: 2}\n"))
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(TWO_JOBS)
    assert main(["jobs", str(jobs), "-t", str(topology), "--link-report"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "leaf0->spine0" in line)
    assert row.split()[-1] == "8" and "100.0%" in row


def test_the_published_jobs_schema_is_current():
    import json

    from collsim.workloads.jobsfile import JOBS_SCHEMA, PUBLISHED
    assert json.loads(PUBLISHED.read_text()) == JOBS_SCHEMA, \
        "regenerate: python -m collsim.workloads.jobsfile > collsim/schemas/jobs.schema.json"


@settings(max_examples=12, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([("allreduce", "ring"), ("allgather", "bruck"),
                                           ("alltoall", "pairwise"),
                                           ("broadcast", "binomial")]),
                          st.integers(2, 5), st.integers(1, 3), st.integers(0, 3)),
                min_size=2, max_size=3))
def test_disjoint_jobs_on_a_switch_never_slow_each_other(jobs):
    """Each GPU of the canonical switch has its own port, so jobs on disjoint GPUs share no
    link: together each takes exactly its time alone, whatever the starts."""
    lines, first = ["jobs:"], 0
    for index, ((collective, algorithm), ranks, repeat, start) in enumerate(jobs):
        lines.append(f"  - {{name: j{index}, collective: {collective}, algorithm: "
                     f"{algorithm}, size: {ranks * 4096}, repeat: {repeat}, "
                     f"gpus: {first}-{first + ranks - 1}, start: {start * 3}us}}")
        first += ranks
    for result in run_jobs(jobs_from_text("\n".join(lines) + "\n"),
                           topology_from_text("kind: switch\ngpus: 16\nlink: {latency: 1us, "
                                              "bandwidth: 10GB/s}\n")):
        assert result.time_s == pytest.approx(result.solo_s, rel=1e-12)
