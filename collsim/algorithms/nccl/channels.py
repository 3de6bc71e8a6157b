"""What NCCL's ring and tree programs share: the channel count, the layout the simulator
prepares, and how the buffer is cut into lanes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from collsim.hardware.nccl_names import PROTOCOLS
from collsim.nccl.constants import (
    BUFFER_BYTES,
    CHUNK_STEPS,
    DATA_BYTES_PER_LINE,
    LINE_FLAGGED,
    NCCL_STEPS,
)
from collsim.nccl.layout import Lanes, Layout, layout_of, machine_layout
from collsim.nccl.tuning import log2i
from collsim.program import Job, Parallel, Program, span
from collsim.tags import TAGS, Tags

# A Simple-protocol step: the buffer (DEFAULT_BUFFSIZE) over its NCCL_STEPS slots, 512 KiB;
# NCCL's chunk for Tree, Broadcast and Reduce with Simple (docs/nccl.md#algorithms-chunks).
SIMPLE_STEP_BYTES = BUFFER_BYTES[2] // NCCL_STEPS
LOOPED = ("allreduce", "allgather", "reducescatter")  # ring programs that run in loops
PIPELINED = ("broadcast", "reduce")  # ring programs that pipeline chunks from or to a root


def simple_buffer(topology: Any) -> int:
    """A connection's Simple buffer on ``topology``: the NCCL_BUFFSIZE its plugin or vendor
    profile sets (``nccl.environment``), else NCCL's default (4 MiB)."""
    machine = getattr(topology, "machine", None)
    figures = getattr(machine, "nccl", None)
    environment = figures.environment if figures is not None else {}
    return int(environment.get("NCCL_BUFFSIZE", BUFFER_BYTES[2]))


def ring_chunk_bytes(collective: str, protocol: str, simple_buffer: int | None = None) -> int:
    """The data bytes one channel moves per rank and ring step of one loop of NCCL's ring
    (``runRing``'s chunkSize: ``Proto::calcBytePerStep()`` times CHUNKSTEPS with Simple, one
    step with LL and LL128; src/device/all_reduce.h, all_gather.h, reduce_scatter.h,
    docs/nccl.md#algorithms-chunks): Simple 2 MiB, LL128 576,000 B, LL 32 KiB. Broadcast and
    reduce pipeline one step a chunk (CHUNKSTEPS 1): Simple 512 KiB. ``simple_buffer``:
    NCCL_BUFFSIZE where set (Simple's step is its eighth)."""
    p = PROTOCOLS.index(protocol)
    data, wire = DATA_BYTES_PER_LINE[p]
    buffer = simple_buffer if protocol == "Simple" and simple_buffer else BUFFER_BYTES[p]
    step = buffer // NCCL_STEPS * data // wire
    return step * (CHUNK_STEPS[collective][0] if protocol == "Simple" else 1)


def pipeline_units(protocol: str) -> int:
    """The units one channel forwards a step of NCCL's broadcast, reduce and tree pipelines
    in. Simple forwards a whole step once it has arrived (1); LL and LL128 flag every line,
    so each warp forwards its share of the step as it arrives: as many units as the
    protocol has warps (``LINE_FLAGGED``: LL 16, LL128 20). Across nodes the network proxy
    posts a step once all of it is written: the ring's pipelines gather it at the sender and
    send it in these units, the tree sends it whole."""
    return LINE_FLAGGED.get(protocol, 1)


def tree_chunk_bytes(protocol: str, size: int, channels: int, nodes: int, ranks: int,
                     simple_buffer: int | None = None) -> int:
    """NCCL's Tree chunk per channel (``calcCollChunking``): one step of the protocol's
    buffer (LL 32 KiB of data, LL128 576,000 B, Simple 512 KiB); LL128's is halved while a
    channel's share of the call is fewer than ``(1 + log2i(nodes) + ppn/10)·64/ppn`` chunks
    (down to 131,072 B or less) and then ``·16/ppn`` (down to 32,768 B or less), ppn the
    ranks per node; Simple's is NCCL_BUFFSIZE's step where ``simple_buffer`` is given. Not
    modelled: the alignment to the protocol's grain."""
    chunk = ring_chunk_bytes("broadcast", protocol, simple_buffer)
    if protocol == "LL128":
        ppn = ranks / max(1, nodes)
        steps = 1 + log2i(max(1, nodes)) + 0.1 * ppn
        for factor, least in ((64, 131072), (16, 32768)):
            while size // (max(1, channels) * chunk) < steps * factor / ppn and chunk > least:
                chunk //= 2
    return chunk


def ring_loops(count: int, weight: int, nranks: int, chunk_elements: int | None) -> int:
    """How many loops NCCL's ring runs over a lane's ``count`` elements (``weight``
    channels): its loop covers ``nranks`` chunks per channel; one loop without a chunk."""
    if chunk_elements is None or count <= 0:
        return 1
    return max(1, -(-count // (weight * nranks * chunk_elements)))


def channel_count(job: Job) -> int:
    """The job's ``channels`` parameter (1 when unset)."""
    return int(job.params.get("channels", 1))


def prepare(lanes_of: Callable[[Layout], Lanes]) -> Callable[[Job, Any, list[int]], Job]:
    """A registry ``prepare`` hook: lay the channels out on the machine and declare the
    lanes ``lanes_of(layout)`` gives (the ring's or the tree's)."""
    def hook(job: Job, topology: Any, gpus: list[int]) -> Job:
        layout = machine_layout(topology, gpus, channel_count(job))
        return replace(job, layout=layout, lanes=lanes_of(layout).weights)
    return hook


def lanes_and_layout(job: Job, lanes_of: Callable[[Layout], Lanes]
                     ) -> tuple[int, Layout, Lanes]:
    """(channels, layout, lanes) of ``job``: prepared by the simulator, or made from the
    job alone."""
    channels = channel_count(job)
    layout = layout_of(job, channels)
    return channels, layout, lanes_of(layout)


def lane_region(job: Job, channels: int, lanes: Lanes, lane: int, count: int | None = None
                ) -> tuple[int, int]:
    """(offset, count) of lane ``lane``'s part of ``count`` elements (the buffer by
    default): the buffer is cut into one piece per channel and a lane takes its channels'
    pieces together."""
    total = job.count if count is None else count
    return span(total, channels, lanes.first_block(lane), lanes.weights[lane])


def lane_tags(lanes: Lanes, lane: int) -> Tags:
    """Lane ``lane``'s own tag space (the whole space when there is one lane)."""
    return TAGS if len(lanes.channels) == 1 else TAGS.part(lane, len(lanes.channels))


def side_by_side(programs: list[Iterator]) -> Program:
    """One program when there is one lane, else the lanes as a ``Parallel`` step."""
    if len(programs) == 1:
        yield from programs[0]
    elif programs:
        yield Parallel(programs)
