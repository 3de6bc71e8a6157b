"""The machine a trace was recorded on, described from what the trace says, for replaying a
job where it ran (its calls measured against their simulation, call by call).

A gloo trace is a CPU run: every rank is a process on one host and every message goes
through loopback TCP. It is modelled as a ``switch`` (each rank one full-duplex port to a
non-blocking switch) with the figures below. They are assumptions, not measurements: a
loopback message costs a send and a receive system call and a thread wake-up on each side
(tens of microseconds on a loaded host), and gloo's TCP pairs move a few GB/s through the
kernel's copies; gloo sums on the CPU. ``--set link.latency=...`` and
``--set link.bandwidth=...`` replace them. NCCL traces do not say which GPUs or network ran
them: replay them with ``-t`` (a shipped machine or a topology file).
"""

from __future__ import annotations

from typing import Any

import yaml

from collsim.errors import InputError
from collsim.hardware.loader import topology_from_text
from collsim.hardware.topology import Topology
from collsim.replay.model import Trace

# Assumed figures of gloo over loopback TCP (see the module's docstring).
LOOPBACK_LATENCY = "20us"
LOOPBACK_BANDWIDTH = "2GB/s"
CPU_REDUCE_BANDWIDTH = "4GB/s"  # a float32 sum, memory-bound, on one core


def traced_machine(trace: Trace, overrides: dict[str, Any] | None = None) -> Topology:
    """The trace's own machine (gloo: the loopback switch above), with ``--set`` overrides."""
    if trace.backend != "gloo":
        raise InputError(f"a {trace.backend or 'GPU'} trace does not say which machine ran "
                         f"it; give one with -t (a shipped name such as dgx-h100, or a "
                         f"topology file)", key="--topology")
    document = {
        "name": f"traced-cpu-{trace.world_size}",
        "kind": "switch",
        "gpus": trace.world_size,
        "link": {"latency": LOOPBACK_LATENCY, "bandwidth": LOOPBACK_BANDWIDTH},
        "gpu": {"reduce_bandwidth": CPU_REDUCE_BANDWIDTH},
    }
    return topology_from_text(yaml.safe_dump(document), overrides,
                              file="<the trace's machine>")
