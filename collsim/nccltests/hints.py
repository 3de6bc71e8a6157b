"""What NCCL's own ``NCCL_DEBUG=INFO`` lines in a log say about the run: ranks and nodes,
channel counts, the environment, and the algorithm/protocol chosen per call where printed.

Read liberally: NCCL's wording differs between versions, so each figure has its own pattern
and a line that matches none is simply not a hint.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

# NCCL's algorithm and protocol ids (nccl_common.h / nccl.h: NCCL_ALGO_TREE = 0 ...,
# NCCL_PROTO_LL = 0 ...), 2.19 and later; before NVLS (2.17) id 2 was CollNet.
ALGORITHMS = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")
PROTOCOLS = ("LL", "LL128", "Simple")
_ALGO_NAMES = {a.lower(): a for a in ALGORITHMS} | {
    "collnet": "CollNet", "collnet_direct": "CollNetDirect", "collnet_chain": "CollNetChain",
    "nvls_tree": "NVLSTree"}
_PROTO_NAMES = {p.lower(): p for p in PROTOCOLS}
# Bytes of NCCL's datatype enum (ncclInt8 = 0 ... ncclBfloat16 = 9, then the two fp8 types).
_DATATYPE_BYTES = (1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1)
# NCCL's function names in its call lines, as collsim names the collectives
# (docs/design.md#collectives).
_FUNCTIONS = {"AllReduce": "allreduce", "AllGather": "allgather",
              "ReduceScatter": "reducescatter", "Broadcast": "broadcast", "Reduce": "reduce",
              "Send": "sendrecv", "Recv": "sendrecv", "AllToAll": "alltoall"}

_CHOICE = re.compile(r"\b[Aa]lgo(?:rithm)?\b[\s=:,]*(\w+)[\s,]+[Pp]roto(?:col)?\b[\s=:,]*(\w+)")
_BYTES = re.compile(r"\b(\d+) Bytes\b")
_COUNT = re.compile(r"\bcount (\d+) datatype (\d+)")
_FUNCTION = re.compile(r"NCCL INFO (\w+): ")
_NCHANNELS = re.compile(r"\bn[Cc]hannels[\s=:]*(\d+)")
_CHANNEL_RANGE = re.compile(r"channel\{Lo\.\.Hi\}=\{(\d+)\.\.(\d+)\}")
_RING = re.compile(r"\bChannel (\d+)/(\d+) :")
_COLL_CHANNELS = re.compile(r"\b(\d+) coll channels")
_NVLS_CHANNELS = re.compile(r"\b(\d+) nvls channels")
_NRANKS = re.compile(r"\bnRanks (\d+)|\[nranks=(\d+)\]")
_NNODES = re.compile(r"\bnNodes (\d+)")
_LOCAL_RANKS = re.compile(r"\blocalRanks (\d+)")
_ENV_SET = re.compile(r"\b(NCCL_\w+) set by environment to (\S+)")
_ENV_ASSIGN = re.compile(r"(?<![\w$])(NCCL_[A-Z0-9_]+)=(\"[^\"]*\"|'[^']*'|[^\s;'\"]+)")


@dataclass(frozen=True)
class AlgoChoice:
    """One call's algorithm and protocol as NCCL logged it."""

    line: int
    algorithm: str
    protocol: str
    nbytes: int | None
    collective: str | None
    channels: int | None


@dataclass
class Hints:
    """Figures NCCL printed about the run; None where it printed nothing."""

    nranks: int | None = None
    nnodes: int | None = None
    local_ranks: int | None = None
    ring_channels: int | None = None
    coll_channels: int | None = None
    nvls_channels: int | None = None
    env: dict[str, str] = field(default_factory=dict)
    choices: list[AlgoChoice] = field(default_factory=list)

    def read_info(self, text: str, line: int) -> None:
        """Take what one ``NCCL INFO`` line says."""
        if m := _ENV_SET.search(text):
            self.env[m.group(1)] = m.group(2).rstrip(".")
        if m := _NRANKS.search(text):
            self.nranks = int(m.group(1) or m.group(2))
        if m := _NNODES.search(text):
            self.nnodes = int(m.group(1))
        if m := _LOCAL_RANKS.search(text):
            self.local_ranks = int(m.group(1))
        if m := _COLL_CHANNELS.search(text):
            self.coll_channels = int(m.group(1))
        if m := _NVLS_CHANNELS.search(text):
            self.nvls_channels = int(m.group(1))
        if (m := _RING.search(text)) and "->" not in text:
            self.ring_channels = max(self.ring_channels or 0, int(m.group(2)))
        if m := _CHOICE.search(text):
            self._read_choice(text, m, line)

    def read_command(self, text: str) -> None:
        """Take the ``NCCL_X=value`` settings of a command line or an environment dump."""
        for name, value in _ENV_ASSIGN.findall(text):
            self.env[name] = value.strip("\"'")

    def choice_for(self, nbytes: int) -> tuple[str, str] | None:
        """The (algorithm, protocol) NCCL logged most often for calls of ``nbytes``."""
        seen = Counter((c.algorithm, c.protocol) for c in self.choices if c.nbytes == nbytes)
        return seen.most_common(1)[0][0] if seen else None

    def adopt(self, other: Hints) -> None:
        """Take the figures of hints printed before the run was recognised."""
        for name in ("nranks", "nnodes", "local_ranks", "ring_channels", "coll_channels",
                     "nvls_channels"):
            if getattr(self, name) is None:
                setattr(self, name, getattr(other, name))
        self.env = other.env | self.env
        self.choices = other.choices + self.choices

    def _read_choice(self, text: str, m: re.Match[str], line: int) -> None:
        algorithm = _name(m.group(1), ALGORITHMS, _ALGO_NAMES)
        protocol = _name(m.group(2), PROTOCOLS, _PROTO_NAMES)
        if algorithm is None or protocol is None:
            return
        nbytes = None
        if b := _BYTES.search(text):
            nbytes = int(b.group(1))
        elif (c := _COUNT.search(text)) and int(c.group(2)) < len(_DATATYPE_BYTES):
            nbytes = int(c.group(1)) * _DATATYPE_BYTES[int(c.group(2))]
        channels = None
        if n := _NCHANNELS.search(text):
            channels = int(n.group(1))
        elif r := _CHANNEL_RANGE.search(text):
            channels = int(r.group(2)) - int(r.group(1)) + 1
        function = _FUNCTION.search(text)
        collective = _FUNCTIONS.get(function.group(1)) if function else None
        self.choices.append(AlgoChoice(line, algorithm, protocol, nbytes, collective, channels))


def _name(token: str, by_id: tuple[str, ...], by_name: dict[str, str]) -> str | None:
    if token.isdigit():
        return by_id[int(token)] if int(token) < len(by_id) else None
    return by_name.get(token.lower())
