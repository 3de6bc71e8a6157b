"""NCCL's algorithms as per-rank programs: channels side by side (one ``Parallel``
sub-program per lane of identical channels), laid out on the machine by
:mod:`collsim.nccl.layout`; the in-switch ones (NVLS, CollNet) with helper ranks on
switches. Imported in NCCL's order of algorithms, which is the order listings show."""
# ruff: noqa: I001

from collsim.algorithms.nccl import ring, tree  # noqa: F401
from collsim.algorithms.nccl import nvls, nvls_tree, collnet, pat, alltoall  # noqa: F401
