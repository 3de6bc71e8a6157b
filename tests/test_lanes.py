"""The shared-lanes path (collsim.engine.lanes): NCCL's ring channels on rings of their own,
sharing NVLink and NICs, timed lane by lane, against every rank's events."""

from __future__ import annotations

from pathlib import Path

import pytest

from collsim.engine.costs import MessageCosts
from collsim.engine.timing import TimingEngine
from collsim.hardware.loader import load_topology
from collsim.nccl.protocols import cost_model
from collsim.simulate import get_algorithm, make_job

CLUSTER = Path(__file__).resolve().parent.parent / "topologies" / "h100-cluster.yaml"


def both(topology, p, size, channels, costs=None):
    """(engine run offered the shared-lanes path, every rank's events) of NCCL's ring
    allreduce with ``channels`` channels."""
    algorithm = get_algorithm("allreduce", "ring")
    job, gpus = make_job(topology, algorithm, p, size, {"channels": channels})
    extra = {} if costs is None else {"costs": costs}
    quick = TimingEngine(topology, gpus, job, algorithm.program, steps=algorithm.lockstep,
                         lanes=algorithm.lanes, **extra).run()
    full = TimingEngine(topology, gpus, job, algorithm.program, lockstep=False, **extra).run()
    assert full.path == "full"
    return quick, full


def close(quick, full):
    """The same finish times as the events, up to the rounding of the shares."""
    assert quick.transfers == full.transfers
    assert quick.finish == pytest.approx(full.finish, rel=1e-9, abs=0)


@pytest.mark.parametrize("nics", [1, 2, 8])
@pytest.mark.parametrize("channels", [2, 4, 8])
@pytest.mark.parametrize("protocol", [None, "Simple", "LL128"])
def test_shared_lanes_are_exact_or_fall_back(nics, channels, protocol):
    """Two nodes of 8 GPUs, 1, 2 or 8 NICs a node (channels share NICs when there are
    fewer NICs than channels), ideal and NCCL costs: whichever path runs, the finish times
    are the events'."""
    topology = load_topology(CLUSTER, {"nodes": 2, "node.nics.count": nics})
    costs = None if protocol is None else cost_model(topology, "ring", protocol)
    quick, full = both(topology, 16, 3 << 20, channels, costs)
    if nics == 1:
        assert quick.path == "lockstep"  # every channel on one NIC: one ring, one lane
    elif protocol == "LL128":
        # LL128's channel cap holds every lane below its share of NVLink and the NIC
        assert quick.path == "lanes"
    close(quick, full)


def test_caps_below_the_shared_links_take_the_lanes_path_exactly():
    """A channel cap far below NVLink's share and the NIC: no shared link ever binds, so
    each lane is timed alone, to the events' times."""
    topology = load_topology(CLUSTER, {"nodes": 2, "node.nics.count": 8})
    costs = MessageCosts(channel_cap=5e9)
    quick, full = both(topology, 16, 4 << 20, 4, costs)
    assert quick.path == "lanes"
    close(quick, full)


def test_lanes_that_bind_a_shared_link_out_of_step_fall_back():
    """Ideal costs, four channels through two NICs a node: NVLink binds, shared by lanes
    whose rings reach a GPU at different steps, so the events run."""
    topology = load_topology(CLUSTER, {"nodes": 2, "node.nics.count": 2})
    quick, full = both(topology, 16, 4 << 20, 4)
    assert quick.path == "full"
    close(quick, full)
