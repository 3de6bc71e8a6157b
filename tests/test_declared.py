"""What the code declares instead of discovering: a call as one CallSpec, the parameters an
NCCL protocol implies as a hook on the algorithm's registry record, lockstep forms as a
registry field, figure drawers in a registry, and the results table's columns on the
record's fields."""

from __future__ import annotations

from dataclasses import fields

import pytest

from collsim.algorithms.nccl.channels import ring_chunk_bytes
from collsim.algorithms.registry import REGISTRY, get_algorithm
from collsim.calls.plan import plan_call
from collsim.callspec import CallSpec
from collsim.engine.costs import MessageCosts
from collsim.hardware.loader import load_topology
from collsim.output.kinds import DRAWERS, FIGURE_KINDS, draws
from collsim.simulate import TABLE_COLUMNS, PointResult, simulate, simulate_call

DGX = load_topology("topologies/dgx-h100.yaml")
GPUS = list(range(8))


def test_a_call_spec_simulates_as_the_values_given_apart():
    params = {"protocol": "LL", "channels": 2}
    call = CallSpec(DGX, "allreduce", "ring", 8, 1 << 20, params)
    assert simulate_call(call) == simulate(DGX, "allreduce", "ring", 8, 1 << 20, params)
    assert call.params == {"protocol": "LL", "channels": 2}  # the spec's params are not changed


def test_the_protocol_implies_the_rings_chunk_through_its_hook():
    for protocol in ("LL", "LL128", "Simple"):
        planned = plan_call(CallSpec(DGX, "allreduce", "ring", 8, 1 << 20,
                                     {"protocol": protocol, "channels": 2}), GPUS)
        assert planned.params["chunk_size"] == ring_chunk_bytes("allreduce", protocol)
    given = plan_call(CallSpec(DGX, "allreduce", "ring", 8, 1 << 20,
                               {"protocol": "LL", "channels": 2, "chunk_size": 4096}), GPUS)
    assert given.params["chunk_size"] == 4096  # the caller's parameter wins


def test_the_hook_is_not_asked_under_a_callers_cost_model_or_without_one():
    costs = MessageCosts()
    planned = plan_call(CallSpec(DGX, "allreduce", "ring", 8, 1 << 20, {"channels": 2},
                                 costs), GPUS)
    assert "chunk_size" not in planned.params and planned.costs is costs
    assert REGISTRY["allreduce", "collnet_direct"].protocol_params is None
    # A textbook algorithm pays the ring's Simple costs and declares nothing the protocol
    # implies: its parameters stay its own.
    assert REGISTRY["broadcast", "binomial"].protocol_params is None
    plain = plan_call(CallSpec(DGX, "broadcast", "binomial", 8, 1 << 20, {}), GPUS)
    assert plain.protocol == "Simple" and "chunk_size" not in plain.params


def test_lockstep_forms_are_registry_fields_not_program_attributes():
    declared = {key for key, algorithm in REGISTRY.items() if algorithm.lockstep is not None}
    assert ("allreduce", "ring") in declared and ("alltoall", "pairwise") in declared
    assert not any(hasattr(algorithm.program, "lockstep") for algorithm in REGISTRY.values())
    assert simulate(DGX, "allreduce", "ring", 8, 1 << 20, {"channels": 1}).path == "lockstep"


def test_every_figure_kind_has_one_registered_drawer():
    from collsim.output.figures import KINDS

    assert list(KINDS) == list(FIGURE_KINDS) and set(DRAWERS) == set(FIGURE_KINDS)
    with pytest.raises(ValueError, match="registered twice"):
        draws("time_vs_size")(lambda rows, spec, palette: None)
    with pytest.raises(ValueError, match="unknown figure kind"):
        draws("no_such_figure")


def test_the_tables_columns_are_the_fields_that_declare_them():
    declared = [f.name for f in fields(PointResult) if "column" in f.metadata]
    assert sorted(declared) == sorted(TABLE_COLUMNS)
    row = simulate(DGX, "allreduce", get_algorithm("allreduce", "ring").name, 8, 1024).row()
    assert tuple(row) == TABLE_COLUMNS and row["scenario"] == ""
