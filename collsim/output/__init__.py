"""What runs produce: the results table, the run record, comparisons and figures."""
