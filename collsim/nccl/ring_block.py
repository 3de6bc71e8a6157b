"""What one thread block of NCCL's Simple ring kernel sends per second on one node: the cap
that binds a ring of two GPUs (docs/nccl.md#ring-block).

Each channel of NCCL's ring is one thread block that walks its piece in loops, and every loop
is a fixed list of primitives run one after another by the whole block (``runRing`` in NCCL
src/device/all_gather.h, reduce_scatter.h, all_reduce.h):

- allgather: ``directCopySend``, p-2 ``directRecvCopyDirectSend``, ``directRecv``: p
  primitives for the p-1 chunks the block sends;
- reducescatter: ``send``, p-2 ``recvReduceSend``, ``recvReduceCopy``: p for p-1;
- allreduce: ``directSend``, p-2 ``directRecvReduceDirectSend``,
  ``directRecvReduceCopyDirectSend``, p-2 ``directRecvCopyDirectSend``, ``directRecv``: 2p-1
  for 2(p-1).

On many GPUs nearly every primitive sends; on two, an allgather's block sends a chunk in one
primitive and receives the peer's in the next, so it sends only half the time.

The block's rate per primitive is NCCL's per-channel figure for Simple, ``perChMaxTreeBw`` of
the architecture on one node (src/graph/tuning.cc). NCCL's model multiplies it by the graph's
channel count (``graphs[a]->nChannels``, 16 on a B200 node), while ``ncclTopoPostset``
(src/graph/connect.cc) runs twice as many channels at run time, one block each, so one block's
share is half the figure: 35 GB/s on Blackwell, 19.35 on Hopper, 12 on Ampere. Reading it as
a copy rate per primitive is an assumption; NCCL uses it as the tree's cap.
"""

from __future__ import annotations

from dataclasses import replace

from collsim.engine.costs import CostModel
from collsim.nccl import constants as C
from collsim.nccl.protocols import ProtocolCosts

GB = 1e9
BLOCKS_PER_GRAPH_CHANNEL = 2   # ncclTopoPostset doubles the graph's channels at run time
RING_COLLECTIVES = ("allgather", "reducescatter", "allreduce")


def primitives_and_sends(collective: str, ranks: int) -> tuple[int, int]:
    """(primitives, chunks sent) of one loop of NCCL's ring kernel on ``ranks`` GPUs."""
    if collective not in RING_COLLECTIVES:
        raise ValueError(f"{collective!r} is not a ring collective with a fixed loop "
                         f"(expected one of {', '.join(RING_COLLECTIVES)})")
    if ranks < 2:
        raise ValueError(f"a ring needs at least 2 ranks, not {ranks}")
    if collective == "allreduce":
        return 2 * ranks - 1, 2 * (ranks - 1)
    return ranks, ranks - 1


def block_rate(arch: int) -> float:
    """Bytes/s one thread block moves per Simple primitive on one node (assumption: NCCL's
    per-channel Simple figure, halved for the two blocks of a graph channel)."""
    return C.PER_CHANNEL_MAX_TREE_BW[C.arch_row(arch)][0] * GB / BLOCKS_PER_GRAPH_CHANNEL


def ring_block_cap(collective: str, ranks: int, arch: int) -> float:
    """Payload bytes/s one channel of a Simple ring sends on one node: the block's rate x the
    share of its primitives that send."""
    primitives, sends = primitives_and_sends(collective, ranks)
    return block_rate(arch) * sends / primitives


def with_ring_block_cap(model: CostModel, collective: str, ranks: int,
                        arch: int) -> CostModel:
    """``model`` with its channel cap lowered to :func:`ring_block_cap` where it is NCCL's
    Simple ring on one node; unchanged elsewhere (across nodes NCCL's figures hold other
    columns)."""
    if not isinstance(model, ProtocolCosts) or model.family != "ring" \
            or model.protocol != "Simple" or model.nodes != 1 \
            or collective not in RING_COLLECTIVES or ranks < 2:
        return model
    cap = ring_block_cap(collective, ranks, arch)
    current = model.channel_cap
    return replace(model, channel_cap=cap if current is None else min(current, cap))
