"""NCCL's algorithms as per-rank programs: channels side by side (one ``Parallel``
sub-program per lane of identical channels), laid out on the machine by
:mod:`collsim.nccl.layout`."""

from collsim.algorithms.nccl import ring, tree  # noqa: F401
