"""Bring your own job (issue 31): read the PyTorch profiler (Kineto) traces a training job
wrote, one per rank, into the collectives each rank called and the compute between them, so
the job can be replayed on a simulated machine."""

from collsim.replay.model import ComputeSpan, ProcessGroup, Trace, TracedCall
from collsim.replay.reader import read_trace

__all__ = ["ComputeSpan", "ProcessGroup", "Trace", "TracedCall", "read_trace"]
