"""``nccl.environment``: the NCCL variables a cloud's network plugin or profile sets
(NCCL_ALGO, NCCL_PROTO, NCCL_NVLS_ENABLE, NCCL_MIN_NCHANNELS). NCCL's choice runs under them,
a caller's own restriction wins over them, `topo show` prints them, and a bad value is a clean
input error (exit 2) naming the key."""

from __future__ import annotations

import pytest

from collsim.algorithms.nccl.channels import ring_chunk_bytes, simple_buffer
from collsim.algorithms.nccl.nvls import nvls_protocol_params
from collsim.algorithms.nccl.switches import nvls_chunk_bytes
from collsim.algorithms.nccl.tree import _protocol_params as tree_params
from collsim.calibrate.predict import pick
from collsim.calls.plan import auto_choice, candidates
from collsim.callspec import CallSpec
from collsim.cli import main
from collsim.hardware.loader import load_topology
from collsim.hardware.shipped import find_topology
from collsim.nccl.adapter import nccl_system
from collsim.nccl.choice import choose
from collsim.nccl.protocols import buffer_payload
from collsim.nccl.tuning import model
from tests.exits import fails_cleanly

MiB = 1 << 20
SIZES = [1 << k for k in range(10, 34, 2)]
# The profile Google's TCPXO plugin image v1.0.3 shipped (docs/hardware.md#clouds).
OLD_TCPXO = {"nccl.environment.NCCL_ALGO": "Ring,Tree",
             "nccl.environment.NCCL_PROTO": "Simple",
             "nccl.environment.NCCL_NVLS_ENABLE": 0}


def preset(name, **overrides):
    return load_topology(find_topology(name), overrides)


def picks(topology, collective="allreduce", **restrictions):
    system = nccl_system(topology)
    return {(c.algorithm, c.protocol) for size in SIZES
            if (c := choose(system, collective, size, **restrictions)) is not None}


def test_the_shipped_cloud_presets_carry_their_plugins_and_profiles_settings():
    assert dict(preset("p4d-efa-cluster").machine.nccl.environment) == {
        "NCCL_PROTO": "simple", "NCCL_BUFFSIZE": 8 << 20}
    assert dict(preset("a3-mega-cluster").machine.nccl.environment) == {
        "NCCL_PROTO": "Simple,LL128", "NCCL_MIN_NCHANNELS": 4,
        "NCCL_NVLSTREE_MAX_CHUNKSIZE": 128 << 10, "NCCL_BUFFSIZE": 8 << 20}
    assert dict(preset("p5-efa-cluster").machine.nccl.environment) == {
        "NCCL_NVLS_CHUNKSIZE": 512 << 10, "NCCL_NVLSTREE_MAX_CHUNKSIZE": 512 << 10,
        "NCCL_BUFFSIZE": 8 << 20, "NCCL_NET_FORCE_FLUSH": 0}
    assert dict(preset("a3-high-cluster").machine.nccl.environment) == {
        "NCCL_ALGO": "Ring,Tree", "NCCL_PROTO": "Simple", "NCCL_BUFFSIZE": 4 << 20}
    assert dict(preset("h100-cluster").machine.nccl.environment) == {}


def test_nccl_proto_keeps_nccl_to_the_protocols_it_names():
    assert {protocol for _, protocol in picks(preset("p4d-efa-cluster"))} == {"Simple"}
    # Without the plugin's setting NCCL picks LL or LL128 at some sizes on the same machine.
    free = picks(preset("p4d-efa-cluster", **{"nccl.environment": {}}))
    assert {protocol for _, protocol in free} - {"Simple"}
    assert "LL" not in {protocol for _, protocol in picks(preset("a3-mega-cluster"))}


def test_the_old_tcpxo_profile_turns_nvls_off_and_keeps_ring_and_tree():
    today = picks(preset("a3-mega-cluster", nodes=2))
    assert ("nvls_tree", "Simple") in today
    old = picks(preset("a3-mega-cluster", nodes=2, **OLD_TCPXO))
    assert old and {algorithm for algorithm, _ in old} <= {"ring", "nccl_tree"}
    assert {protocol for _, protocol in old} == {"Simple"}
    system = nccl_system(preset("a3-mega-cluster", nodes=2, **OLD_TCPXO))
    assert not system.nvls_capable
    refused = {(r.algorithm, r.protocol): r.reason
               for r in choose(system, "allreduce", 64 * MiB).refused}
    assert "NCCL_NVLS_ENABLE=0" in refused[("nvls_tree", "Simple")]


def test_a_callers_own_restriction_wins_over_the_machines():
    p4d = preset("p4d-efa-cluster")
    forced = picks(p4d, protocols={"LL128"})
    assert forced and {protocol for _, protocol in forced} == {"LL128"}
    # An algorithm forced on a machine whose NCCL_ALGO leaves it out still runs.
    old = preset("a3-mega-cluster", nodes=2, **OLD_TCPXO)
    assert {a for a, _ in picks(old, algorithms={"ring"})} == {"ring"}


def test_auto_runs_under_the_machines_nccl_algo():
    """`estimate -a auto` and `best` name collsim's registered programs to NCCL's choice; the
    machine's NCCL_ALGO still holds: A3 High's Ring,Tree with NVLS left on (Google's TCPX
    config), where NCCL's model alone takes NVLSTree on 2 nodes at 64-256 MiB."""
    a3 = preset("a3-high-cluster")
    free = preset("a3-high-cluster", **{"nccl.environment": {}})
    gpus = list(range(a3.gpus))
    free_picks = {auto_choice(free, "allreduce", gpus, 128 * MiB).algorithm}
    assert free_picks == {"nvls_tree"}
    for size in (64 * MiB, 128 * MiB, 256 * MiB):
        assert auto_choice(a3, "allreduce", gpus, size).algorithm in {"ring", "nccl_tree"}
        assert {a for a, _ in candidates(a3, "allreduce", gpus, size)} <= {"ring", "nccl_tree"}
        # calibrate's and fidelity's pick as well
        assert pick(a3, "allreduce", size, gpus).algorithm in {"ring", "nccl_tree"}
    assert pick(free, "allreduce", 128 * MiB, gpus).algorithm == "nvls_tree"


def test_per_collective_entries_follow_nccls_syntax():
    topology = preset("p4d-efa-cluster",
                      **{"nccl.environment.NCCL_PROTO": "LL128;allreduce:Simple"})
    assert {p for _, p in picks(topology, "allreduce")} == {"Simple"}
    assert {p for _, p in picks(topology, "allgather")} == {"LL128"}


def test_min_nchannels_raises_the_channels_of_nccls_search():
    few = nccl_system(preset("a3-mega-cluster", nodes=2,
                             **{"nccl.environment": {}, "node.nics.count": 1}))
    more = nccl_system(preset("a3-mega-cluster", nodes=2,
                              **{"nccl.environment": {"NCCL_MIN_NCHANNELS": 32},
                                 "node.nics.count": 1}))
    assert few.min_channels is None and more.min_channels == 32
    assert model(more).graphs.channels > model(few).graphs.channels


def test_topo_show_prints_the_environment(capsys):
    assert main(["topo", "show", "p4d-efa-cluster", "--no-bisection"]) == 0
    out = capsys.readouterr().out
    assert "NCCL env        nccl.environment" in out
    assert any(line.split() == ["NCCL_PROTO", "simple"] for line in out.splitlines())
    assert main(["topo", "show", "h100-cluster", "--no-bisection"]) == 0
    assert "NCCL env " not in capsys.readouterr().out


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("NCCL_PROTO", "LL,Fast", "unknown NCCL protocol 'Fast'"),
    ("NCCL_ALGO", "Ring,Star", "unknown NCCL algorithm 'Star'"),
    ("NCCL_PROTO", "^LL,LL128,Simple", "leaves NCCL no protocol"),
    ("NCCL_ALGO", "ring;alltoall:tree", "unknown collective prefix"),
    ("NCCL_NVLS_ENABLE", "2", "is not one of"),
    ("NCCL_MIN_NCHANNELS", "0", "minimum"),
    ("NCCL_NVLS_CHUNKSIZE", "512KiB", "expected integer"),
    ("NCCL_NVLSTREE_MAX_CHUNKSIZE", "1024", "minimum"),
    ("NCCL_BUFFSIZE", "4096", "minimum"),
    ("NCCL_LL_BUFFSIZE", "8388608", "unknown key"),
])
def test_a_bad_value_exits_2_naming_the_key(capsys, key, value, expected):
    err = fails_cleanly(capsys, "topo", "show", "a3-mega-cluster", "--set",
                        f"nccl.environment.{key}={value}")
    assert f"nccl.environment.{key}" in err
    assert expected in err


@pytest.mark.parametrize(("size", "nodes", "env", "want"), [
    # NCCL's NVLSTree rules (enqueue.cc calcCollChunking) from a 512 KiB NCCL_NVLS_CHUNKSIZE,
    # 16 channels x 8 heads = 128 ops: 512 KiB from 32 x 128 x 512 KiB = 2 GiB up, 256 KiB
    # under it, 128 KiB under 16 x 128 x 256 KiB = 512 MiB, 64 KiB under 64 MiB.
    (2 << 30, 2, {"nvls_chunk": 512 << 10, "tree_max": 512 << 10}, 512 << 10),
    ((2 << 30) - 1, 2, {"nvls_chunk": 512 << 10, "tree_max": 512 << 10}, 256 << 10),
    ((512 << 20) - 1, 2, {"nvls_chunk": 512 << 10, "tree_max": 512 << 10}, 128 << 10),
    ((64 << 20) - 1, 2, {"nvls_chunk": 512 << 10, "tree_max": 512 << 10}, 64 << 10),
    # NCCL_NVLSTREE_MAX_CHUNKSIZE lifts the 64 KiB cap of 4 nodes and more ...
    (2 << 30, 4, {"nvls_chunk": 512 << 10, "tree_max": 512 << 10}, 512 << 10),
    (2 << 30, 4, {"nvls_chunk": 512 << 10}, 64 << 10),
    # ... or lowers it (A3 Mega's 128 KiB) below the chunk
    (2 << 30, 2, {"nvls_chunk": 512 << 10, "tree_max": 128 << 10}, 128 << 10),
])
def test_the_environments_nvls_chunk_sizes_follow_nccls_rules(size, nodes, env, want):
    assert nvls_chunk_bytes("nvls_tree", size, 16, 8, nodes, **env) == want


def test_p5s_nvlstree_runs_the_plugins_chunk():
    p5 = preset("p5-efa-cluster")
    spec = CallSpec(p5, "allreduce", "nvls_tree", 16, 4 << 30)
    assert nvls_protocol_params(spec, range(16), "Simple", 16)["chunk_size"] == 512 << 10
    plain = preset("p5-efa-cluster", **{"nccl.environment": {}})
    spec = CallSpec(plain, "allreduce", "nvls_tree", 16, 4 << 30)
    assert nvls_protocol_params(spec, range(16), "Simple", 16)["chunk_size"] == 128 << 10


def test_nccl_buffsize_sets_simples_step_and_a_connections_slots():
    """NCCL_BUFFSIZE is Simple's buffer: its step (an eighth) is the ring's and tree's chunk
    unit, and the slots hold the whole buffer; LL and LL128 keep theirs."""
    p4d, plain = preset("p4d-efa-cluster"), preset("p4d-efa-cluster", **{"nccl.environment": {}})
    assert simple_buffer(p4d) == 8 << 20 and simple_buffer(plain) == 4 << 20
    assert ring_chunk_bytes("allreduce", "Simple", simple_buffer(p4d)) == 4 << 20  # 4 steps
    assert ring_chunk_bytes("allreduce", "Simple", simple_buffer(plain)) == 2 << 20
    assert ring_chunk_bytes("allreduce", "LL128", 8 << 20) == ring_chunk_bytes("allreduce",
                                                                               "LL128")
    tree = CallSpec(p4d, "allreduce", "nccl_tree", 16, 64 << 20)
    assert tree_params(tree, range(16), "Simple", 8) == {"chunk_size": 1 << 20}
    assert tree_params(CallSpec(plain, "allreduce", "nccl_tree", 16, 64 << 20), range(16),
                       "Simple", 8) == {}
    assert buffer_payload("Simple", 8 << 20) == 2 * buffer_payload("Simple")
    assert buffer_payload("LL128", 8 << 20) == buffer_payload("LL128")
