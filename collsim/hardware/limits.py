"""The largest machine collsim builds, checked from a file's numbers before anything is built.

- ``MAX_GPUS`` = 131,072 (2^17): above the 100,000-GPU clusters users ask about and 8x the
  16,384 GPUs the scale work simulates. A cluster of DGX H100 nodes that size has 1.5
  million links; at about 430 bytes per link (measured on 16,384 GPUs, 184,320 links,
  80 MB) it builds in well under a gigabyte.
- ``MAX_GPUS_PER_NODE`` = 1,024: a node is one NVLink or PCIe domain, and the largest
  announced is 576 GPUs (NVL576). A node's every GPU pair is routed once when it is built
  (about 5 s and 200 MB for an NVSwitch node of 1,024 GPUs).
- ``MAX_LINKS`` = 4,194,304 (2^22) directed links, one per direction of a physical link:
  about 1.8 GB at the figure above. A fully connected machine reaches it at 2,048 GPUs.
"""

from __future__ import annotations

import math

from collsim.yamlfile import Document, KeyPath

MAX_GPUS = 131_072
MAX_GPUS_PER_NODE = 1_024
MAX_LINKS = 4_194_304


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
