"""NCCL as a library: its constants, topology search, cost model and choice of algorithm,
protocol and channels (pure functions of an NcclSystem; no SimPy); the adapter from a machine
to its NcclSystem (``adapter``), the cost models NCCL's protocols put on a machine
(``protocols``), and what ``topo show`` prints of them (``report``)."""
