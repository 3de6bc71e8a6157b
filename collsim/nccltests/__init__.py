"""nccl-tests logs in and out (issue 13): read the tables ``*_perf`` binaries print, and print
simulated results in the same layout so a measured and a simulated run can be diffed."""

from collsim.nccltests.hints import AlgoChoice, Hints
from collsim.nccltests.layouts import DEFAULT_LAYOUT, LAYOUTS
from collsim.nccltests.reader import clean_line, parse_logs, read_logs
from collsim.nccltests.run import Half, Header, RankLine, Row, Run
from collsim.nccltests.simulated import results_rows, run_from_results, runs_from_results
from collsim.nccltests.writer import format_row, format_run, format_runs

__all__ = [
    "DEFAULT_LAYOUT", "LAYOUTS", "AlgoChoice", "Half", "Header", "Hints", "RankLine", "Row",
    "Run", "clean_line", "format_row", "format_run", "format_runs", "parse_logs", "read_logs",
    "results_rows", "run_from_results", "runs_from_results",
]
