"""The published logs in validation/ parse to the figures their files show."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from collsim.errors import InputError
from collsim.nccltests import read_logs

VALIDATION = Path(__file__).resolve().parents[1] / "validation"
H100 = "NVIDIA H100 80GB HBM3"
GB300 = "NVIDIA GB300"

# file, run index, collective, ranks, hosts, GPUs per host, GPU, rows, first size, last size,
# last row's out-of-place busbw, layout: read off the files by eye.
LOGS = [
    ("gcp-a3mega-h100-2n-ar.txt", 0, "allreduce", 16, 2, 8, H100, 31, 8, 8 << 30, 338.82,
     "classic"),
    ("gcp-a4-b200-2n-ag.txt", 0, "allgather", 16, 2, 8, "NVIDIA B200", 24, 1024, 8 << 30, 260.03,
     "classic"),
    ("gcp-a4-b200-2x1-ag.txt", 0, "allgather", 2, 2, 1, "NVIDIA B200", 28, 0, 1 << 30, 36.67,
     "classic"),
    ("gcp-h200-2x1-ar.txt", 0, "allreduce", 2, 2, 1, "NVIDIA H200", 24, 1024, 8 << 30, 31.89,
     "classic"),
    *[("oci-gb300-ar-a2a-1to32trays.txt", i, collective, ranks, ranks // 4, 4, GB300, 16,
       512 << 10, 16 << 30, busbw, "classic")
      for i, (collective, ranks, busbw) in enumerate([
          ("allreduce", 4, 685.19), ("allreduce", 8, 841.63), ("allreduce", 64, 930.48),
          ("allreduce", 128, 738.39), ("alltoall", 4, 627.69), ("alltoall", 8, 685.06),
          ("alltoall", 64, 666.92), ("alltoall", 128, 47.67)])],
    # nccl-tests#309: one reporter's 2 bare-metal and 4 virtualised H100 hosts.
    *[("nccl-tests-issue309-xe9680-h100-2n-4n.txt", i, "allreduce", 8 * hosts, hosts, 8, H100,
       32, 8, 16 << 30, busbw, "classic") for i, (hosts, busbw) in enumerate([(2, 469.21),
                                                                               (4, 365.84)])],
    ("ocp-h200-2x8-socket-ring-ar.txt", 0, "allreduce", 16, 2, 8, "NVIDIA H200", 32, 8, 16 << 30,
     92.33, "classic"),
    ("ocp-l40s-2x1-socket-ring-ar.txt", 0, "allreduce", 2, 2, 1, "NVIDIA L40S", 31, 8, 8 << 30,
     8.11, "classic"),
    ("ocp-l40s-2x2-ib-ring-ar.txt", 0, "allreduce", 4, 2, 2, "NVIDIA L40S", 31, 8, 8 << 30, 9.63,
     "classic"),
    ("vp-h100-1n-ar.txt", 0, "allreduce", 8, 1, 8, H100, 31, 8, 8 << 30, 479.72, "adaptive"),
    ("vp-h100-4n-ag.txt", 0, "allgather", 32, 4, 8, H100, 31, 0, 8 << 30, 323.53, "adaptive"),
    ("vp-h100-4n-ar.txt", 0, "allreduce", 32, 4, 8, H100, 31, 8, 8 << 30, 330.93, "adaptive"),
    ("vp-h100-4n-bcast.txt", 0, "broadcast", 32, 4, 8, H100, 31, 8, 8 << 30, 286.34, "adaptive"),
    ("vp-h100-4n-reduce.txt", 0, "reduce", 32, 4, 8, H100, 31, 8, 8 << 30, 285.74, "adaptive"),
    # nccl-tests-cluster's example H100 cluster: five runs a file on 1 and 10 nodes (sizes of
    # allgather, reducescatter and alltoall divisible by the ranks), two between 2 nodes.
    *[("ntc-h100-1n-5tests.txt", i, collective, 8, 1, 8, H100, 10, 32 << 20, 16 << 30, busbw,
       "adaptive") for i, (collective, busbw) in enumerate([
           ("allreduce", 482.27), ("allgather", 361.86), ("reducescatter", 364.76),
           ("alltoall", 348.03), ("sendrecv", 367.25)])],
    *[("ntc-h100-10n-5tests.txt", i, collective, 80, 10, 8, H100, 10, first, last, busbw,
       "adaptive") for i, (collective, first, last, busbw) in enumerate([
           ("allreduce", 32 << 20, 16 << 30, 320.54),
           ("allgather", 33553920, 17179868160, 324.29),
           ("reducescatter", 33553920, 17179868160, 323.40),
           ("alltoall", 33553920, 17179868160, 50.38),
           ("sendrecv", 32 << 20, 16 << 30, 15.22)])],
    *[("ntc-h100-10x1-5tests.txt", i, collective, 10, 10, 1, H100, 10, first, last, busbw,
       "adaptive") for i, (collective, first, last, busbw) in enumerate([
           ("allreduce", 32 << 20, 16 << 30, 48.89),
           ("allgather", 33554400, 17179869120, 48.15),
           ("reducescatter", 33554400, 17179869120, 48.84),
           ("alltoall", 33554400, 17179869120, 44.66),
           ("sendrecv", 32 << 20, 16 << 30, 24.86)])],
    *[(f"ntc-h100-10x{per_host}-5tests.txt", i, collective, 10 * per_host, 10, per_host, H100, 10,
       first, last, busbw, "adaptive")
      for per_host, runs in (
          (2, [("allreduce", 32 << 20, 16 << 30, 97.85),
               ("allgather", 33554240, 17179869120, 97.31),
               ("reducescatter", 33554240, 17179869120, 97.83),
               ("alltoall", 33554240, 17179869120, 47.83),
               ("sendrecv", 32 << 20, 16 << 30, 25.19)]),
          (4, [("allreduce", 32 << 20, 16 << 30, 196.30),
               ("allgather", 33553920, 17179868800, 194.36),
               ("reducescatter", 33553920, 17179868800, 195.38),
               ("alltoall", 33553920, 17179868800, 49.53),
               ("sendrecv", 32 << 20, 16 << 30, 26.22)]))
      for i, (collective, first, last, busbw) in enumerate(runs)],
    *[(f"ntc-h100-{shape}-pair-a2a-sendrecv.txt", i, collective, 2 * per_host, 2, per_host, H100,
       3, 4 << 30, 16 << 30, busbw, "adaptive")
      for shape, per_host, busbws in (("2n", 8, (92.04, 45.87)), ("2x1", 1, (38.84, 43.78)),
                                      ("2x2", 2, (72.14, 43.92)), ("2x4", 4, (82.82, 40.21)))
      for i, (collective, busbw) in enumerate(zip(("alltoall", "sendrecv"), busbws, strict=True))],
]

# Published excerpts in nccl-tests' layout (validation/sources): file, collective (None where
# the columns cannot tell allgather from alltoall), ranks from the rank lines, ranks from
# busbw/algbw, rows, first size, last size, last out-of-place busbw.
SOURCES = [
    ("aws-p4de-2n-ar.txt", "allreduce", None, 16, 29, 8, 2 << 30, 78.33),
    ("aws-p5-2n-ar.txt", "allreduce", None, 16, 32, 8, 16 << 30, 487.09),
    ("aws-p5-2n-eks-nccl2185-ar.txt", "allreduce", None, 16, 32, 0, 2 << 30, 437.79),
    ("coreweave-gb200-nvl72-1rack-ar.txt", "allreduce", 72, 72, 5, 512 << 20, 8 << 30, 834.57),
    ("coreweave-gb200-nvl72-2rack-ar.txt", "allreduce", 144, 128, 6, 512 << 20, 16 << 30,
     810.41),
    ("coreweave-gb200-nvl72-20rack-ar.txt", "allreduce", 1440, None, 6, 512 << 20, 16 << 30,
     405.74),
    ("coreweave-h100-8n-sharp-ar.txt", "allreduce", None, 96, 5, 512 << 20, 8 << 30, 386.56),
    ("gcp-a4-b200-1n2g-ag.txt", None, 2, None, 8, 64 << 20, 8 << 30, 482.71),
    ("gcp-a4-b200-2n-gce-ag.txt", "allgather", None, 16, 23, 4 << 10, 16 << 30, 377.38),
    ("nccl-issue527-p4dn-1to4n.txt", "allreduce", None, None, 4, 1 << 30, 1 << 30, 29.61),
    ("nccl-tests-issue232-h100-2x1-tree.txt", "allreduce", None, 2, 5, 2 << 20, 32 << 20, 41.31),
    ("oci-gb200-a2a-1tray.txt", None, None, None, 2, 4 << 30, 8 << 30, 615.30),
    ("oci-gb200-a2a-2tray.txt", None, None, None, 2, 8 << 30, 16 << 30, 662.27),
    ("oci-gb200-a2a-16tray.txt", None, None, None, 2, 4 << 30, 8 << 30, 622.92),
    ("oci-gb200-a2a-32tray.txt", None, None, None, 2, 4 << 30, 8 << 30, 89.70),
    ("oci-gb200-a2a-48tray.txt", None, None, None, 2, 4 << 30, 8 << 30, 62.49),
    ("oci-gb200-ar-1tray.txt", "allreduce", 4, 4, 2, 4 << 30, 8 << 30, 663.34),
    ("oci-gb200-ar-1rack-64.txt", "allreduce", None, 64, 2, 4 << 30, 8 << 30, 891.64),
    ("oci-gb200-ar-32tray.txt", "allreduce", None, 128, 2, 4 << 30, 8 << 30, 799.79),
    ("oci-gb200-ar-48tray.txt", "allreduce", None, 192, 2, 4 << 30, 8 << 30, 748.93),
]


def test_every_log_fixture_is_covered():
    files = {path.name for path in (VALIDATION / "logs").glob("*.txt")}
    assert files == {entry[0] for entry in LOGS}
    assert len(LOGS) == 55  # 12 single-run logs, the 8 runs of the OCI GB300 file, 2 of #309,
    # 33 of nccl-tests-cluster's 9 files


@pytest.mark.parametrize(("name", "index", "collective", "ranks", "hosts", "per_host", "gpu",
                          "rows", "first", "last", "busbw", "layout"), LOGS)
def test_log_fixture(name, index, collective, ranks, hosts, per_host, gpu, rows, first, last,
                     busbw, layout):
    runs = read_logs(VALIDATION / "logs" / name)
    run = runs[index]
    assert (run.collective, run.ranks, run.nodes, run.gpus_per_node, run.gpu_name) == (
        collective, ranks, hosts, per_host, gpu)
    assert len(run.rows) == rows
    assert (run.rows[0].size_bytes, run.rows[-1].size_bytes) == (first, last)
    assert run.rows[-1].out_of_place.busbw_GBps == busbw
    assert run.layout == layout
    assert run.avg_busbw_GBps is not None


@pytest.mark.parametrize(("name", "collective", "ranks", "from_bandwidth", "rows", "first",
                          "last", "busbw"), SOURCES)
def test_source_fixture(name, collective, ranks, from_bandwidth, rows, first, last, busbw):
    (run,) = read_logs(VALIDATION / "sources" / name)
    assert run.collective == collective
    assert run.ranks == ranks
    assert run.ranks_from_bandwidth() == from_bandwidth
    assert len(run.rows) == rows
    assert (run.rows[0].size_bytes, run.rows[-1].size_bytes) == (first, last)
    assert run.rows[-1].out_of_place.busbw_GBps == busbw


def test_concatenated_runs_split_at_their_markers():
    runs = read_logs(VALIDATION / "logs" / "oci-gb300-ar-a2a-1to32trays.txt")
    assert [run.line for run in runs] == [1, 35, 70, 105, 140, 174, 209, 244]
    assert [run.ranks_complete for run in runs] == [True, False, False, False] * 2
    assert all(run.nccl_version == "2.28.7+cuda13.0" for run in runs)
    alltoall = runs[4]
    assert alltoall.rows[0].out_of_place.wrong == 0
    assert alltoall.rows[0].in_place.wrong is None  # printed N/A


def test_gb300_two_racks_figures_the_misses_quote():
    """docs/misses.md#gb300-racks reads two figures off OCI's two-rack runs: alltoall moves a
    quarter of a GPU's 2 x 400 Gb/s across the racks (each GPU sends half its buffer there),
    and allreduce takes about 490 us at every size from 1 MiB to 16 MiB, where one rack takes
    under 150 us."""
    runs = read_logs(VALIDATION / "logs" / "oci-gb300-ar-a2a-1to32trays.txt")
    one_rack, two_racks, alltoall = runs[2], runs[3], runs[7]
    assert (one_rack.ranks, two_racks.ranks, alltoall.ranks) == (64, 128, 128)
    large = [r.out_of_place for r in alltoall.rows if r.size_bytes >= 1 << 30]
    across = [h.algbw_GBps / 2 for h in large]  # GB/s a GPU sends to the other rack
    assert len(across) == 5 and all(0.22 <= a / 100.0 <= 0.26 for a in across)
    small = [r for r in two_racks.rows if 1 << 20 <= r.size_bytes <= 16 << 20]
    times = [h.time_us for r in small for h in (r.out_of_place, r.in_place)]
    assert len(times) == 10 and min(times) >= 480 and max(times) <= 525
    rack = [r.out_of_place.time_us for r in one_rack.rows if 1 << 20 <= r.size_bytes <= 16 << 20]
    assert max(rack) < 150


def test_log_details():
    (vp,) = read_logs(VALIDATION / "logs" / "vp-h100-1n-ar.txt")
    assert vp.header.ngpus == 8 and vp.hosts == ["g138"] and vp.nccl_version == "2.24.3"
    assert vp.nccl_tests_version == "2.17.9" and vp.program == "all_reduce_perf"
    (bcast,) = read_logs(VALIDATION / "logs" / "vp-h100-4n-bcast.txt")
    assert {row.root for row in bcast.rows} == {0} and bcast.rows[0].redop == "none"
    (ocp,) = read_logs(VALIDATION / "logs" / "ocp-l40s-2x1-socket-ring-ar.txt")
    assert ocp.header.max_bytes == 17179869184 and ocp.header.reduced_max_bytes == 15534478677
    assert "NCCL_ALGO" not in ocp.hints.env and ocp.hints.env["NCCL_IB_DISABLE"] == "1"
    (gcp,) = read_logs(VALIDATION / "logs" / "gcp-a3mega-h100-2n-ar.txt")
    header = gcp.header
    assert (header.nthread, header.min_bytes, header.max_bytes, header.step, header.step_kind,
            header.warmup_iters, header.iters, header.agg_iters, header.validation,
            header.graph) == (1, 8, 8589934592, 2, "factor", 5, 20, 1, 1, 0)
    assert gcp.collective_source == "command line" and gcp.avg_busbw_GBps == 70.742


def test_issue_thread_logs_keep_each_runs_command_line():
    """Runs pasted one after another into an issue thread: each takes the environment of the
    mpirun line above it (one wrapped over two lines), none inherits the previous run's, and
    MPI's warning block between the header and the rank lines is chatter."""
    bare_metal, virtualised = read_logs(VALIDATION / "logs" /
                                        "nccl-tests-issue309-xe9680-h100-2n-4n.txt")
    assert bare_metal.hosts == ["bm-h100-01", "bm-h100-02"] and len(bare_metal.rank_lines) == 16
    assert bare_metal.hints.env["NCCL_NET_GDR_LEVEL"] == "1"
    assert "NCCL_TOPO_FILE" not in bare_metal.hints.env
    assert virtualised.hints.env["NCCL_TOPO_FILE"] == "/mnt/nfs/vm_topo_mod.xml"
    assert {run.nccl_version for run in (bare_metal, virtualised)} == {"2.26.2+cuda12.8"}
    # The other reporter's cluster at 8, 2 and 4 nodes and 2 nodes with Ring forced (in
    # sources/: its host names were replaced by 8-character hashes, unpadded).
    runs = read_logs(VALIDATION / "sources" / "nccl-tests-issue309-h100-ib-2n-4n-8n.txt")
    assert [(run.collective, run.ranks, run.nodes, run.gpus_per_node, len(run.rows),
             run.rows[0].size_bytes, run.rows[-1].size_bytes, run.rows[-1].out_of_place.busbw_GBps)
            for run in runs] == [("allreduce", 8 * n, n, 8, 14, 1 << 20, 8 << 30, busbw)
                                 for n, busbw in ((8, 320.70), (2, 466.73), (4, 324.52),
                                                  (2, 392.69))]
    eight, two, four, ring = runs
    assert [run.hints.env for run in (eight, two, four)] == [{}, {}, {}]
    assert ring.hints.env == {"NCCL_ALGO": "Ring", "NCCL_MIN_CTAS": "24",
                              "NCCL_IB_QPS_PER_CONNECTION": "2"}
    assert two.hosts == eight.hosts[:2] and four.hosts == eight.hosts[:4]


@pytest.mark.parametrize("log, hca", [("ocp-h200-2x8-socket-ring-ar.txt", "mlx5_0"),
                                       ("ocp-l40s-2x1-socket-ring-ar.txt", "mlx5_1,mlx5_3"),
                                       ("ocp-l40s-2x2-ib-ring-ar.txt", "mlx5_2,mlx5_8")])
def test_the_openshift_logs_are_the_commands_as_run(log, hca):
    """The OpenShift logs are the texts as first published: no NCCL_ALGO (the README added
    ``-x NCCL_ALGO=ring`` to the commands months later, the output unchanged;
    docs/misses.md#ocp-h200), so a calibration of them leaves NCCL its pick."""
    (run,) = read_logs(VALIDATION / "logs" / log)
    assert run.hints.env["NCCL_IB_HCA"] == hca and "NCCL_IB_DISABLE" in run.hints.env
    assert "NCCL_ALGO" not in run.hints.env


def test_old_layout_with_error_column_and_a_column_of_the_users():
    (run,) = read_logs(VALIDATION / "sources" / "nccl-issue527-p4dn-1to4n.txt")
    assert run.layout == "legacy"
    assert [row.root for row in run.rows] == [None] * 4
    assert [row.extra for row in run.rows] == [(("p4dn", str(n)),) for n in (1, 2, 3, 4)]
    assert run.rows[-1].out_of_place.error == 1e-06 and run.rows[0].in_place.error == 2e-07


@pytest.mark.parametrize(("name", "line"), [
    ("nccl-tests-issue119-a100-3n.txt", 1),  # rows without their column header
    ("nccl-issue1801-gb200-3partitions.txt", None),  # a table the reporter laid out
    ("nccl-issue2409-h100-2n-roce-summary.txt", None),  # a markdown summary
])
def test_sources_outside_the_layout_are_refused(name, line):
    with pytest.raises(InputError) as caught:
        read_logs(VALIDATION / "sources" / name)
    assert caught.value.line == line
    assert caught.value.file.endswith(name)


def _measured(run_id: str) -> list[dict]:
    with open(VALIDATION / "measurements.csv", newline="") as handle:
        return [row for row in csv.DictReader(handle) if row["run_id"] == run_id]


def _table_runs() -> list[dict]:
    with open(VALIDATION / "runs.csv", newline="") as handle:
        return [run for run in csv.DictReader(handle)
                if run["parse"] == "table" and run["file"].endswith(".txt")
                and "issue119" not in run["file"]]


@pytest.mark.parametrize("entry", _table_runs(), ids=lambda entry: entry["run_id"])
def test_rows_agree_with_the_validation_builders_parse(entry):
    """validation/build.py parses the same files by another method into measurements.csv
    (leaving out size-0 rows)."""
    runs = read_logs(VALIDATION / entry["file"])
    rows = [row for run in runs for row in run.rows if row.size_bytes > 0]
    if entry["lines"]:
        low, _, high = entry["lines"].partition("-")
        rows = [row for row in rows if int(low) <= row.line <= int(high or low)]
    measured = _measured(entry["run_id"])
    assert len(rows) == len(measured)
    for row, expected in zip(rows, measured, strict=True):
        half = row.in_place if expected["in_place"] == "1" else row.out_of_place
        assert row.size_bytes == int(expected["bytes"])
        assert half.time_us == float(expected["time_us"])
        assert half.algbw_GBps == float(expected["algbw_GBps"])
        assert half.busbw_GBps == float(expected["busbw_GBps"])
