"""Calibration to measured nccl-tests logs (issue 13): predict what a machine's preset says a
log should show, compare the two, and fit the preset's declared NCCL figures to the logs."""
