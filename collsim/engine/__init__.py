"""The two interpreters of per-rank programs: timing on a simulated fabric, and data on numpy."""
