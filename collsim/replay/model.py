"""What a job's traces say: its process groups, each rank's collective calls in issue order,
and the compute spans between them; the reader builds these, the replay consumes them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# collsim's collectives (collsim/collectives.py) plus the point-to-point calls a trace holds.
TRACED_COLLECTIVES = (
    "allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce", "gather",
    "scatter", "barrier", "send", "recv",
)


@dataclass(frozen=True, slots=True)
class ProcessGroup:
    """One torch.distributed process group, as the traces' distributedInfo lists it."""

    name: str  # the trace's process-group name ("0", "1", ...)
    description: str  # its pg_desc where present ("default_pg", "undefined", ...), else ""
    ranks: tuple[int, ...]  # global ranks, in group-rank order


@dataclass(frozen=True, slots=True)
class TracedCall:
    """One collective (or send/recv) one rank issued, with its measured time.

    ``size_bytes`` follows collsim's convention (docs/design.md), as nccl-tests' size column:
    the per-rank buffer for allreduce, broadcast, reduce and alltoall, the whole gathered buffer
    for allgather, reducescatter, gather and scatter, the message for send and recv, 0 for a
    barrier. An alltoall's is this rank's input, which differs between ranks whose splits
    are uneven."""

    rank: int  # global rank that issued it
    index: int  # its position among this rank's calls (0, 1, ...)
    collective: str  # one of TRACED_COLLECTIVES
    size_bytes: int
    dtype: str  # "float32", "bfloat16", ... ("" for a barrier)
    group: str  # ProcessGroup.name
    start_us: float  # measured start on the trace's clock (microseconds)
    duration_us: float  # the NCCL kernel on GPU traces, else gloo's event, else the c10d op
    stream: int | None  # GPU stream of its kernel; None on CPU traces
    in_split_sizes: tuple[int, ...] = ()  # alltoall(v) splits, in elements, where given
    out_split_sizes: tuple[int, ...] = ()
    sequence: int | None = None  # the trace's sequence number within its group, where present
    peer: int | None = None  # send/recv: the global rank at the other end, where the trace says
    root: int | None = None  # broadcast/reduce/gather/scatter: the root's global rank, where given


@dataclass(frozen=True, slots=True)
class ComputeSpan:
    """The work a rank did in one gap between its calls (at most one span per gap, so a
    trace of millions of kernels stays small): on GPU traces the compute kernels that start
    in the gap, ``duration_us`` their busy time (overlaps counted once) from the first one's
    start; on CPU traces the issuing thread's time outside collective ops."""

    rank: int
    start_us: float
    duration_us: float
    stream: int | None  # the stream most of the gap's kernels ran on; None for CPU work
    name: str  # "cpu", or "<n> kernels"


@dataclass(frozen=True, slots=True)
class Trace:
    """A whole job: every rank's calls and compute, checked to agree between ranks."""

    world_size: int
    backend: str  # "nccl" | "gloo"
    groups: Mapping[str, ProcessGroup]
    calls: Mapping[int, tuple[TracedCall, ...]]  # by global rank, in issue order
    compute: Mapping[int, tuple[ComputeSpan, ...]]  # by global rank, in time order
    files: Mapping[int, str]  # rank -> the file it came from
    pytorch_version: str = ""  # where a trace records it (those of PyTorch 2.14 do not)
