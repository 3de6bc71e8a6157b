"""NCCL as a library: its constants, topology search, cost model and choice of algorithm,
protocol and channels (pure functions of an NcclSystem; no simulation); the adapter from a
machine to its NcclSystem (``adapter``), the cost models NCCL's protocols put on a machine
(``protocols``) and how its algorithms lay channels out on a machine (``layout``). What a call
runs with, and ``auto``/``best``, are in :mod:`collsim.calls`."""
