"""What NCCL's Simple ring sends per second from one GPU on one node when its thread blocks,
not NVLink, hold it: the cap that binds a ring of two GPUs (docs/nccl.md#ring-block).

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

What the blocks move together is NCCL's own cap form (``ncclTopoTuneModel``,
src/graph/tuning.cc): the graph's channels x a per-channel figure, here Simple's
(``perChMaxTreeBw``, the architecture's one-node column: 16 x 70 = 1120 GB/s on a B200 node),
taken as what the blocks move in primitives; the GPU sends the primitives' share that send.
Reading the tree's figure as the Simple blocks' primitive rate is an assumption. The cap is
set only where it is below the ring graph's own total (channels x ``bwIntra``): on the
shipped NVSwitch machines, rings of two GPUs. :mod:`collsim.calls.plan` sets it on rings over
NVLink only (over PCIe, where NCCL may stage through host memory, it is not applied).
"""

from __future__ import annotations

from dataclasses import replace

from collsim.engine.costs import CostModel
from collsim.nccl import constants as C
from collsim.nccl.protocols import ProtocolCosts

GB = 1e9
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


def blocks_rate(arch: int, graph_channels: int) -> float:
    """Bytes/s the ring's blocks move in primitives on one node: the graph's channels x
    NCCL's per-channel Simple figure (an assumption as a primitive rate)."""
    if graph_channels < 1:
        raise ValueError(f"a ring graph has at least 1 channel, not {graph_channels}")
    return graph_channels * C.PER_CHANNEL_MAX_TREE_BW[C.arch_row(arch)][0] * GB


def ring_send_cap(collective: str, ranks: int, arch: int, graph_channels: int) -> float:
    """Payload bytes/s one GPU of a Simple ring sends at most on one node: the blocks' rate x
    the share of their primitives that send."""
    primitives, sends = primitives_and_sends(collective, ranks)
    return blocks_rate(arch, graph_channels) * sends / primitives


def with_ring_send_cap(model: CostModel, collective: str, ranks: int, arch: int,
                       graph_channels: int, graph_bw: float) -> CostModel:
    """``model`` with its per-GPU cap lowered to :func:`ring_send_cap` where it is NCCL's
    Simple ring on one node and the cap is below the ring graph's own total
    (``graph_channels`` x ``graph_bw`` GB/s, what NCCL's model credits the links); unchanged
    elsewhere (across nodes NCCL's figures hold other columns; a cap the links never reach
    would only cost the call its closed form)."""
    if not isinstance(model, ProtocolCosts) or model.family != "ring" \
            or model.protocol != "Simple" or model.nodes != 1 \
            or collective not in RING_COLLECTIVES or ranks < 2:
        return model
    cap = ring_send_cap(collective, ranks, arch, graph_channels)
    if cap >= graph_channels * graph_bw * GB:
        return model
    current = model.gpu_cap
    return replace(model, gpu_cap=cap if current is None else min(current, cap))
