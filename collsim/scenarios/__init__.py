"""Scenarios: YAML files that describe a sweep of simulations (``loader``, ``sweep``), and
running them (``runner``, ``executors``)."""
