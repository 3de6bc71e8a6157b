"""The largest machine collsim builds, checked from a file's numbers before anything is built.

- ``MAX_GPUS`` = 131,072 (2^17): above the 100,000-GPU clusters users ask about and 8x the
  16,384-GPU clusters of scale studies. A cluster of 16,384 DGX H100 nodes (131,072 GPUs,
  1.47 million links) builds in 8 s and 0.7 GB; a switch of as many GPUs in 0.2 s.
- ``MAX_GPUS_PER_NODE`` = 1,024: a node is one NVLink or PCIe domain, and the largest
  announced is 576 GPUs (NVIDIA Rubin Ultra NVL576, GTC 2025). Every GPU pair of a node
  is routed once when it is built: an NVSwitch node of 1,024 GPUs takes 9 s and 0.25 GB,
  a full NVLink mesh of 1,024 GPUs (a million links) 22 s and 1.3 GB.
- ``MAX_LINKS`` = 4,194,304 (2^22) directed links, one per direction of a physical link: a
  fully connected machine of 2,048 GPUs (4.19 million links) builds in 5 s and 0.9 GB.

(Figures from ``python -c`` builds with ``load_topology`` on a 2-core machine, peak RSS.)

A machine of ``MAX_GPUS`` builds, but one collective call is simulated on fewer of its GPUs,
refused up front on each path (measured with ``collsim estimate`` under ``nice`` on a shared
2-core machine, a 1 MiB allreduce on ``h100-cluster``):

- a named algorithm: ``MAX_CALL_RANKS`` = 16,384 ranks. The ring there takes 73 s and
  0.26 GB, and four times as long per doubling of its ranks (2(p - 1) steps of p
  transfers): 32,768 ranks about 5 minutes, 131,072 more than an hour. Algorithms that
  simulate every transfer (trees, hash ECMP) take longer at the same size; progress shows.
- ``best``, and ``auto`` where NCCL's pick runs in full (every rank's events):
  ``MAX_SELECTED_RANKS`` = 4,096 ranks. ``auto`` picks NCCL's 16-channel tree at 1 MiB
  there and takes 117 s and 0.6 GB; at 16,384 ranks it had not finished after 300 s, and at
  131,072 it ran out of memory at 3.6 GB. ``best`` simulates each of NCCL's candidates, so
  it takes several times as long. ``auto`` takes up to ``MAX_CALL_RANKS`` where a quicker
  path times its pick (lockstep, lanes, symmetric, or the pipeline path: NVLSTree of 1 GiB on
  16,384 GPUs in 16 s of CPU); where none does, it is refused once they declined.

Several jobs or a workload's groups may together use the whole machine.
"""

from __future__ import annotations

import math

from collsim.errors import InputError
from collsim.yamlfile import Document, KeyPath

MAX_GPUS = 131_072
MAX_GPUS_PER_NODE = 1_024
MAX_LINKS = 4_194_304
MAX_CALL_RANKS = 16_384
MAX_SELECTED_RANKS = 4_096


def count_text(n: int) -> str:
    """``n`` with thousands separators, or its order of magnitude when it is enormous."""
    if n.bit_length() > 64:
        return f"about 10^{int(n.bit_length() * math.log10(2))}"
    return f"{n:,}"


def check_gpus(doc: Document, path: KeyPath, gpus: int, how: str = "",
               limit: int = MAX_GPUS) -> None:
    """Refuse ``gpus`` GPUs above ``limit``, at ``path``; ``how`` says how they add up."""
    if gpus > limit:
        where = " in one node (one NVLink or PCIe domain; kind: cluster joins nodes)" \
            if limit == MAX_GPUS_PER_NODE else ""
        raise doc.error(path, f"{count_text(gpus)} GPUs{f' ({how})' if how else ''} are "
                        f"more than collsim builds: at most {count_text(limit)}{where}")


def check_links(doc: Document, path: KeyPath, links: int, what: str = "the machine") -> None:
    """Refuse a machine of more than ``MAX_LINKS`` directed links, at ``path``."""
    if links > MAX_LINKS:
        raise doc.error(path, f"{what} has {count_text(links)} links (one per direction), "
                        f"more than collsim builds: at most {count_text(MAX_LINKS)}")


def check_call_ranks(ranks: int, algorithm: str = "") -> None:
    """Refuse one call on more ranks than its path simulates in a couple of minutes
    (``best`` simulates each of NCCL's choices), before anything is built."""
    limit = MAX_SELECTED_RANKS if algorithm == "best" else MAX_CALL_RANKS
    if ranks > limit:
        how = ("best simulates each of NCCL's choices, trees of 16 channels: 117 s at 4,096 "
               "ranks; auto or a named algorithm take up to 16,384" if algorithm == "best"
               else "a 1 MiB ring there takes about a minute, and four times as long per "
               "doubling")
        raise InputError(f"{count_text(ranks)} ranks in one call: collsim simulates a call on "
                         f"at most {count_text(limit)} ranks on this path ({how})",
                         key="ranks")


def full_run_refused(ranks: int, algorithm: str, why: str, limit: int) -> InputError:
    """The error for a call of ``auto`` above ``limit`` ranks whose pick (``algorithm``) no
    quicker path takes: ``why`` they declined."""
    return InputError(f"{count_text(ranks)} ranks in one call with auto: NCCL's pick, "
                      f"{algorithm}, would run in full ({why}), which auto does on at most "
                      f"{count_text(limit)} ranks; name an algorithm a quicker path takes, or "
                      f"use fewer ranks", key="ranks")
