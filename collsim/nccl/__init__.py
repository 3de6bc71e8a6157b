"""NCCL as a library: its constants, topology search, cost model and choice of algorithm,
protocol and channels (pure functions of an NcclSystem; no SimPy)."""
