"""What one call runs with, above the algorithms and NCCL's model: its plan (cost model,
protocol, channels: ``plan``), what ``auto`` and ``best`` select (``plan``, ``select``), and
what ``topo show`` prints of NCCL's choices (``report``). ``select`` is handed the simulator,
which sits above this package."""
