"""sendrecv (nccl-tests' sendrecv_perf) and calibration on point-to-point logs: NCCL's p2p
channels by hand, the numpy semantics on a few ranks, sendrecv tables read, and the recorded
2-node sendrecv and alltoall logs (tests/fixtures/nccltests/, collsim's own output on a
preset whose network figures were changed) calibrated back to those figures, with an
allreduce predicted from the fit moving as the figures say."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from collsim.calibrate.cases import case_from_run
from collsim.calibrate.figures import step_latency
from collsim.calibrate.fit import calibrate
from collsim.calibrate.predict import predict
from collsim.cli import main
from collsim.collectives import expected_result, initial_buffers, inputs_for
from collsim.hardware.loader import load_topology
from collsim.hardware.shipped import resolve_topology
from collsim.nccl.p2p import chunk_bytes, operation_channels, p2p_channels, pow2_up
from collsim.nccl.search import search
from collsim.nccl.system import NcclSystem
from collsim.nccltests import read_logs
from collsim.nccltests.programs import Columns, candidates
from collsim.program import Job

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "nccltests"
_spec = importlib.util.spec_from_file_location("record", FIXTURES / "record.py")
record = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(record)

PRESET = resolve_topology(record.PRESET)
TOLERANCE = 0.01  # the logs print 4-5 significant digits of each time: 1% is ample
H100 = {"arch": 90, "gpu_link": "nvswitch", "nvlink_links": 18, "pcie_bandwidth": 48.0}


def test_sendrecv_moves_each_buffer_to_the_next_rank():
    job = Job("sendrecv", 3, 4, itemsize=8)
    inputs = inputs_for(job, np.dtype("int64"), np.random.default_rng(0))
    garbage = np.full(job.count + job.nranks, 99, dtype="int64")
    for rank in range(3):
        start = initial_buffers(job, inputs, rank, garbage)
        assert np.array_equal(start["in"], inputs[rank]) and len(start["out"]) == 4
        want = expected_result(job, inputs, "sum", rank)
        assert set(want) == {"out"}
        offset, values = want["out"]
        assert offset == 0 and np.array_equal(values, inputs[(rank - 1) % 3])


def test_p2p_channels_on_two_h100_nodes_by_hand():
    """8 NICs of 50 GB/s on 2 x 8 GPUs: to the other node max(1 NIC, ceil(50 / 14)) = 4
    channels, fewer than the 2 x 18 NVLinks give; 4 x ceil(16 ranks / 8) = 8 fits the p2p
    channels, so 4 per peer; one operation starts on 4 halved while 16 ranks x it exceeds
    them (1 or 2, at most one part per 64 KiB), and doubles while its part exceeds the
    128 KiB chunk."""
    system = NcclSystem(nodes=2, nics_per_node=8, nic_bandwidth=50.0, **H100)
    total = pow2_up(search(system).channels)
    assert total >= 16  # so that the halving below stops at 1
    assert p2p_channels(system) == (total, 4)
    assert chunk_bytes(system) == 128 * 1024
    assert operation_channels(system, 1) == 1
    assert operation_channels(system, 64 * 1024) == 1  # one part of at least 64 KiB
    assert operation_channels(system, 256 * 1024) == 2  # 256 KiB: 2 parts of 128 KiB
    assert operation_channels(system, 2**20) == 4  # at most 4 per peer
    assert operation_channels(system, 2**30) == 4


def test_p2p_channels_on_one_h100_node_by_hand():
    """2 x 18 NVLinks = 36, rounded up to 64 and cut to the p2p channels (the communicator's
    rounded up); the 512 KiB NVLink chunk makes parts of 64 KiB .. 16 MiB."""
    system = NcclSystem(nodes=1, **H100)
    total = pow2_up(search(system).channels)
    assert p2p_channels(system) == (total, min(total, 64))
    assert chunk_bytes(system) == 512 * 1024
    fewest = total
    while fewest * 8 > total and fewest > 1:
        fewest //= 2
    assert operation_channels(system, 2**20) == min(fewest, 16)
    parts = fewest
    while 2**30 / parts > 16 * 2**20 and parts <= total // 2:
        parts *= 2
    assert operation_channels(system, 2**30) == parts


def test_auto_sendrecv_runs_nccls_p2p_program_on_its_channels():
    topology = load_topology(PRESET, {"nodes": 2})
    for size, channels in ((64 * 1024, 1), (2**20, 4)):
        chosen = predict(topology, "sendrecv", 16, size)
        assert (chosen.pick.algorithm, chosen.pick.protocol, chosen.pick.channels) == \
            ("nccl_p2p", "Simple", channels)
        assert chosen.busbw_GBps == pytest.approx(chosen.algbw_GBps)  # nccl-tests' factor 1


@pytest.mark.parametrize("nodes, per_node, channels", [(10, 8, 1), (10, 1, 2), (2, 1, 4)])
def test_each_p2p_channel_drives_the_network_at_nccls_per_channel_figure(nodes, per_node,
                                                                         channels):
    """NCCL gives one sendrecv 1 channel on 10 x 8 GPUs and 2 on 10 x 1 (the per-peer count
    halved while it times ceil(ranks / 8) exceeds the p2p channels, 16 and 4), 4 on 2 x 1;
    each channel carries NCCL_P2P_PER_CHANNEL_NET_BW = 14 GB/s across the network, so 1 GiB
    moves at 14 and 28 GB/s less the call's few tens of us, and 4 channels (56) leave the
    400 Gb/s NIC the bound (48 GB/s reached)."""
    topology = load_topology(PRESET, {"nodes": nodes})
    gpus = [node * 8 + g for node in range(nodes) for g in range(per_node)]
    size = 2**30
    chosen = predict(topology, "sendrecv", len(gpus), size, gpus=gpus)
    assert chosen.pick.channels == channels
    cap = min(channels * 14.0, 50.0 * 0.96)
    assert cap * 0.99 < chosen.algbw_GBps <= cap


def test_a_sendrecv_table_is_told_from_an_allreduce_by_its_busbw():
    """sendrecv_perf prints its op (sum) like all_reduce_perf; on more than 2 ranks its
    busbw = algbw tells it apart, on 2 ranks (allreduce's factor is 1 too) nothing does."""
    row = Columns(2**20, 2**18, "float", "sum", -1, 20.0, 20.0)
    assert candidates(row, 16) == {"sendrecv"}
    assert candidates(row, 2) == {"allreduce", "sendrecv"}
    allreduce = Columns(2**20, 2**18, "float", "sum", -1, 20.0, 37.5)
    assert candidates(allreduce, 16) == {"allreduce"}


def test_the_fixtures_are_what_the_recorder_prints():
    for collective, path in record.FILES.items():
        assert path.read_text() == record.log_text(collective), path.name


def test_the_p2p_path_crosses_a_nic_at_its_own_reach_and_the_rings_at_theirs():
    """sendrecv on 2 nodes of 8: one GPU a node sends across, through its one NIC, so at
    1 GiB its busbw is what the p2p path reaches of that NIC (80% of 50 GB/s declared; the
    rings' 48 GB/s undeclared); a ring's time does not move with the p2p figure."""
    plain = load_topology(PRESET, {"nodes": 2})
    p2p = load_topology(PRESET, {"nodes": 2, "nccl.reachable.p2p": "80%"})
    nic = plain.machine.nccl.line["network"] / 1e9
    for topology, reach in ((plain, plain.machine.nccl.reached("network") / 1e9),
                            (p2p, 0.8 * nic)):
        busbw = predict(topology, "sendrecv", 16, 2**30).busbw_GBps
        assert 0.98 * reach <= busbw <= reach
    assert predict(p2p, "allreduce", 16, 2**30, "ring").time_s == \
        predict(plain, "allreduce", 16, 2**30, "ring").time_s


@pytest.fixture(scope="module")
def fitted():
    cases = [case_from_run(run, PRESET) for path in record.FILES.values()
             for run in read_logs(path)]
    return cases, calibrate(cases)


def test_calibration_on_sendrecv_and_alltoall_recovers_the_network(fitted):
    """Both logs give the network's reach. Neither tells its latency from the launch: NCCL
    runs an alltoall's rounds across 2 nodes at once (collsim.nccl.p2p_schedule), so each
    call pays one network latency, as sendrecv does, and the launch takes it in."""
    cases, result = fitted
    assert [c.collective for c in cases] == ["sendrecv", "alltoall"]
    determined = {f.name: f.factor for f in result.figures if f.determined}
    assert set(determined) == {"launch", "reachable.p2p"}
    assert determined["reachable.p2p"] == pytest.approx(record.TRUTH["reachable.p2p"],
                                                        rel=TOLERANCE)
    assert determined["launch"] > 1.0   # the launch and the network's one latency per call
    # The NVLink figures are not fitted from p2p logs across nodes: kept as the preset's.
    preset = load_topology(PRESET).machine.nccl
    assert result.nccl.reachable.get("nvlink") == preset.reachable.get("nvlink")
    # Nor the rings' reach of a NIC: the p2p path's reach is a figure of its own.
    assert result.nccl.reached("network") == preset.reached("network")
    assert result.nccl.p2p_reached() == pytest.approx(
        0.6 * preset.reached("network"), rel=TOLERANCE)
    assert step_latency(result.nccl, "Simple", "ring", "nvlink") == \
        step_latency(preset, "Simple", "ring", "nvlink")
    sendrecv, alltoall = (c.label for c in cases)
    assert result.sources["reachable.p2p"] == (sendrecv, alltoall)
    assert all(e.after_median < TOLERANCE for e in result.errors)


def test_one_sendrecv_log_cannot_tell_the_networks_latency_from_the_launch():
    """sendrecv pays one network latency per call, as it pays the launch: on one log the two
    are one constant, read as the launch; alltoall's many steps across nodes separate them."""
    cases = [case_from_run(run, PRESET) for run in read_logs(record.FILES["sendrecv"])]
    result = calibrate(cases, pick_scales=())
    by_name = {f.name: f for f in result.figures}
    assert not by_name["latency.network"].determined
    assert by_name["reachable.p2p"].factor == pytest.approx(
        record.TRUTH["reachable.p2p"], rel=TOLERANCE)
    assert "reachable.network" not in by_name  # the rings' reach is not the p2p logs' to fit


def test_an_allreduce_predicted_from_the_fit_moves_as_the_figures_say(fitted, tmp_path, capsys):
    out = tmp_path / "p2p.yaml"
    logs = [str(p) for p in record.FILES.values()]
    assert main(["calibrate", "--topology", str(PRESET), "--measured", logs[0],
                 "--measured", logs[1], "--out", str(out), "--fixed-picks"]) == 0
    printed = capsys.readouterr().out
    for log in logs:  # both logs fitted, and named as a source of the p2p path's reach
        assert f"{log}:1: " in printed
    reach = printed.splitlines()[[i for i, line in enumerate(printed.splitlines())
                                  if "reachable.p2p" in line][0] + 1]
    assert reach.strip() == f"fitted from {logs[0]}:1, {logs[1]}:1"
    calibrated = load_topology(out, {"nodes": 2})
    truth = record.changed_topology()
    shipped = load_topology(PRESET, {"nodes": 2})
    for size in (16, 2**16, 2**24, 2**30):
        fit = predict(calibrated, "allreduce", 16, size)
        want = predict(truth, "allreduce", 16, size)
        assert fit.pick == want.pick
        if size == 2**30:   # below, the network latency the logs could not separate shows
            assert fit.time_s == pytest.approx(want.time_s, rel=TOLERANCE), size
    # A ring across 2 nodes at 1 GiB is bound by the NICs: its busbw is the 8 NICs' reach,
    # 8 x 48 GB/s, less the GPU's slice copies at each of its 2 loops' ends
    # (docs/nccl.md#algorithms-staging: 1-2 % of the call); the p2p logs leave it there.
    nic = load_topology(PRESET).machine.nccl.reached("network") / 1e9
    for topology in (shipped, calibrated):
        ring = predict(topology, "allreduce", 16, 2**30, "ring")
        assert 0.98 * 8 * nic <= ring.busbw_GBps <= 8 * nic
    assert predict(calibrated, "allreduce", 16, 2**30, "ring").time_s == pytest.approx(
        predict(shipped, "allreduce", 16, 2**30, "ring").time_s, rel=0.05)
