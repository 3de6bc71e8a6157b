"""Reading nccl-tests logs: the quirks of saved logs, NCCL's INFO lines, and bad input."""

from __future__ import annotations

import os

import pytest

from collsim.errors import InputError
from collsim.nccltests import parse_logs, read_logs
from collsim.nccltests.reader import nccl_version_from_code

HEADER = """\
# nThread 1 nGpus 1 minBytes 8 maxBytes 128 step: 4(factor) warmup iters: 5 iters: 20 \
agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid   4242 on     nodeA device  0 [0000:18:00] NVIDIA A100-SXM4-80GB
#  Rank  1 Group  0 Pid   4243 on     nodeA device  1 [0000:2a:00] NVIDIA A100-SXM4-80GB
#  Rank  2 Group  0 Pid   5150 on     nodeB device  0 [0000:18:00] NVIDIA A100-SXM4-80GB
#  Rank  3 Group  0 Pid   5151 on     nodeB device  1 [0000:2a:00] NVIDIA A100-SXM4-80GB
#
#                                                              out-of-place                       \
in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   \
algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  \
(GB/s)  (GB/s)
"""
ROWS = """\
           8             2     float     sum      -1    20.00    0.00    0.00      0    19.50    0.00    0.00      0
          32             8     float     sum      -1    20.50    0.00    0.00      0    20.25    0.00    0.00      0
         128            32     float     sum      -1    25.60    0.01    0.01      0    25.00    0.01    0.01      0
"""  # noqa: E501
FOOTER = """\
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.00333
#
"""
LOG = HEADER + ROWS + FOOTER


def figures(text: str) -> list[tuple]:
    """What a run says, without line numbers (which prefixes and blank lines do not move)."""
    return [(run.collective, run.ranks, run.nodes, run.gpus_per_node, run.gpu_name,
             [(r.size_bytes, r.count, r.dtype, r.redop, r.root, r.out_of_place, r.in_place)
              for r in run.rows], run.avg_busbw_GBps)
            for run in parse_logs(text)]


def test_a_plain_log():
    (run,) = parse_logs(LOG)
    assert (run.collective, run.collective_source) == ("allreduce", "table")
    assert (run.ranks, run.nodes, run.gpus_per_node) == (4, 2, 2)
    assert run.hosts == ["nodeA", "nodeB"] and run.gpu_name == "NVIDIA A100-SXM4-80GB"
    assert [r.size_bytes for r in run.rows] == [8, 32, 128]
    assert run.rows[2].out_of_place.time_us == 25.6 and run.rows[2].in_place.time_us == 25.0
    assert run.header.step == 4 and run.avg_busbw_GBps == 0.00333
    assert run.rank_lines[2].pid == 5150 and run.rank_lines[3].bus == "0000:2a:00"


@pytest.mark.parametrize("prefix", ["0: ", "  12: ", "[1,0]<stdout>:", "   [1,0]<stdout>:",
                                    "[0] "])
def test_launcher_prefixes_are_dropped(prefix):
    prefixed = "\n".join(prefix + line for line in LOG.split("\n"))
    assert figures(prefixed) == figures(LOG)


def test_carriage_returns():
    assert figures(LOG.replace("\n", "\r\n")) == figures(LOG)
    noisy = "Warning: Permanently added 'x' (ED25519) to the list of known hosts.\r\n" + LOG
    assert figures(noisy) == figures(LOG)


def test_chatter_around_the_run_is_skipped():
    text = ("$ mpirun -np 4 -x NCCL_ALGO=Tree -x NCCL_PROTO='Simple' ./build/all_reduce_perf "
            "-b 8 -e 128 -f 4\nHello from nodeA\n--------\nWARNING: something\n\n" + LOG
            + "[nodeA:1234] 3 more processes have sent help message\n")
    (run,) = parse_logs(text)
    assert figures(text) == figures(LOG)
    assert run.program == "all_reduce_perf" and run.collective_source == "command line"
    assert run.hints.env == {"NCCL_ALGO": "Tree", "NCCL_PROTO": "Simple"}


def test_runs_concatenated_without_markers():
    second = LOG.replace("sum", "none").replace("    -1", "     0")  # a broadcast table
    runs = parse_logs(LOG + "\n" + second)
    assert [run.collective for run in runs] == ["allreduce", "broadcast"]
    assert runs[1].line == LOG.count("\n") + 2
    assert [len(run.rows) for run in runs] == [3, 3]


def test_elided_rank_lines_and_rows():
    lines = LOG.split("\n")
    cut = [line for line in lines if "Rank  1" not in line and "Rank  2" not in line]
    cut.insert(4, "...")
    cut.insert(cut.index(ROWS.split("\n")[1]), "...")
    (run,) = parse_logs("\n".join(cut))
    assert run.ranks_elided and run.rows_elided and not run.ranks_complete
    assert run.ranks == 4
    assert run.gpus_per_node == 2 and run.nodes == 2  # from the highest device index seen


def test_old_rank_lines_and_uneven_hosts():
    old = LOG.replace(" Group  0", "").replace("[0000:18:00]", "[0x18]")
    old = old.replace("Pid   5151 on     nodeB", "Pid   5151 on     nodeC")
    (run,) = parse_logs(old)
    assert [(r.group, r.bus) for r in run.rank_lines[:1]] == [(None, "0x18")]
    assert run.hosts == ["nodeA", "nodeB", "nodeC"]  # 2 + 1 + 1 GPUs
    assert (run.ranks, run.nodes, run.gpus_per_node) == (4, 3, None)


def test_cputime_and_per_iteration_and_timestamp_columns():
    header = ("#       size         count      type   redop    root  cputime   algbw   busbw  "
              "#wrong    i_min    i_max    i_p99    i_cv%  cputime   algbw   busbw  #wrong    "
              "i_min    i_max    i_p99    i_cv%           timestamp")
    row = ("        1024           256     float     sum      -1    10.00    0.10    0.15       "
           "0     9.00    11.00    11.00     5.00    10.50    0.10    0.15       0     9.50    "
           "11.50    11.50     4.00 2025-01-02 03:04:05")
    (run,) = parse_logs(header + "\n" + row + "\n")
    assert run.time_column == "cputime" and run.layout == "adaptive"
    assert run.rows[0].out_of_place.time_us == 10.0 and run.rows[0].in_place.time_us == 10.5


def test_unchecked_halves_read_as_none():
    (run,) = parse_logs(LOG.replace("      0\n", "    N/A\n"))
    assert all(row.in_place.wrong is None and row.out_of_place.wrong == 0 for row in run.rows)


def test_nccl_info_lines_are_hints():
    info = "nodeA:4242:4300 [0] NCCL INFO "
    lines = [
        "NCCL version 2.21.5+cuda12.4",
        "comm 0x55d8 rank 0 nRanks 4 nNodes 2 localRanks 2 localRank 0 MNNVL 0",
        "Channel 00/24 :    0   1   2   3",
        "Channel 23/24 :    0   1   2   3",
        "Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM",
        "24 coll channels, 24 collnet channels, 16 nvls channels, 32 p2p channels",
        "NCCL_ALGO set by environment to Ring",
        "AllReduce: opCount 0 sendbuff 0x7f recvbuff 0x7f count 2 datatype 7 op 0 root 0 "
        "comm 0x55d8 [nranks=4] stream 0x55e0",
        "8 Bytes -> Algo 1 proto 0 time 12.500000",
        "8 Bytes -> Algo 1 proto 0 time 12.500000",
        "AllReduce: opCount 3 count 32 datatype 7 algo NVLS proto SIMPLE nchannels 16",
        "Latency/AlgBw |    Tree/    LL |    Tree/ LL128 |    Tree/Simple |",
    ]
    at = LOG.index("#\n#    ")
    text = LOG[:at] + "".join(info + line + "\n" for line in lines) + LOG[at:]
    (run,) = parse_logs(text)
    hints = run.hints
    assert run.nccl_version == "2.21.5+cuda12.4"
    assert (hints.nranks, hints.nnodes, hints.local_ranks) == (4, 2, 2)
    assert (hints.ring_channels, hints.coll_channels, hints.nvls_channels) == (24, 24, 16)
    assert hints.env == {"NCCL_ALGO": "Ring"}
    assert hints.choice_for(8) == ("Ring", "LL")
    assert hints.choice_for(128) == ("NVLS", "Simple")
    assert hints.choices[-1].channels == 16 and hints.choices[-1].collective == "allreduce"
    assert hints.choice_for(4096) is None
    assert figures(text) == figures(LOG)


def test_info_lines_before_the_table_belong_to_its_run():
    table = HEADER[HEADER.index("#                    "):] + ROWS
    info = "host:1:2 [0] NCCL INFO comm 0x1 rank 0 nRanks 4 nNodes 2 localRanks 2 localRank 0\n"
    (run,) = parse_logs(info + "NCCL version 2.18.5+cuda12.2\n" + table)
    assert not run.rank_lines and run.nccl_version == "2.18.5+cuda12.2"
    assert (run.ranks, run.nodes, run.gpus_per_node) == (4, 2, 2)  # NCCL's own figures


def test_collective_names():
    allgather = HEADER + (
        "          64             4     float    none      -1    20.00    0.00    0.00      0"
        "    19.50    0.00    0.00      0\n"
        "        1024            64     float    none      -1    25.60    0.04    0.03      0"
        "    25.00    0.04    0.03      0\n")
    assert parse_logs(allgather)[0].collective is None  # allgather or alltoall: cannot tell
    named = "# Collective test starting: alltoall_perf\n" + allgather
    assert parse_logs(named)[0].collective == "alltoall"
    script = "run_nccl_tests.sh -t all_gather -b 8 -e 128\n" + allgather
    assert parse_logs(script)[0].collective == "allgather"
    version = "# nccl-tests version 2.17.9 nccl-headers=22403 nccl-library=22403\n"
    twice = "mpirun -x NCCL_ALGO=Tree ./alltoall_perf\n" + version * 2 + allgather
    (run,) = parse_logs(twice)  # the repeated version line keeps the command line's clues
    assert (run.collective, run.hints.env, run.nccl_version) == (
        "alltoall", {"NCCL_ALGO": "Tree"}, "2.24.3")


@pytest.mark.parametrize(("code", "version"), [(22403, "2.24.3"), (21805, "2.18.5"),
                                                (2708, "2.7.8")])
def test_nccl_library_codes(code, version):
    assert nccl_version_from_code(code) == version


# -- bad input --------------------------------------------------------------------------------

def broken(old: str, new: str) -> str:
    return LOG.replace(old, new, 1)


ROW_LINE = LOG.split("\n").index(ROWS.split("\n")[1]) + 1  # the 32-byte row


@pytest.mark.parametrize(("text", "line", "words"), [
    (broken("20.50", "20,50"), ROW_LINE, "out-of-place time '20,50'"),
    (broken("20.25    0.00", "20.25    zero"), ROW_LINE, "in-place algbw 'zero'"),
    (broken("          32             8", "          32           8.5"), ROW_LINE, "count"),
    (broken("    20.50    0.00    0.00      0", "    20.50    0.00    0.00"), ROW_LINE,
     "12 fields"),
    (broken("20.50", "-20.50"), ROW_LINE, "a number from 0 to 1e+12 us"),
    (ROWS, 1, "no nccl-tests column header"),
    (HEADER + FOOTER, 10, "no rows"),
])
def test_malformed_logs_fail_at_their_line(text, line, words):
    with pytest.raises(InputError) as caught:
        parse_logs(text, "run.log")
    assert (caught.value.file, caught.value.line) == ("run.log", line)
    assert words in caught.value.message
    assert str(caught.value).startswith(f"run.log:{line}: ")


def test_a_file_with_no_run():
    with pytest.raises(InputError) as caught:
        parse_logs("mpirun: command not found\n", "empty.log")
    assert caught.value.file == "empty.log" and caught.value.line is None
    assert "no nccl-tests table" in caught.value.message


def test_reading_files(tmp_path):
    log = tmp_path / "run.log"
    log.write_text(LOG)
    assert len(read_logs(log)) == len(read_logs(str(log))) == 1
    assert read_logs(LOG)[0].file == "<text>"  # text holding a newline is the log itself
    with pytest.raises(InputError, match="no such"):
        read_logs(tmp_path / "missing.log")
    with pytest.raises(InputError, match="not a regular file"):
        read_logs(tmp_path)
    with pytest.raises(InputError, match="larger than 100 bytes"):
        read_logs(log, max_bytes=100)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_named_pipe_is_refused_without_blocking(tmp_path):
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    with pytest.raises(InputError, match="not a regular file"):
        read_logs(pipe)
