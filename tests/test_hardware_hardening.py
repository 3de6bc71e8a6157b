"""Bad machines end in one InputError naming the file, line and key and what was expected:
sizes above the stated limits (refused before anything is built), floats and huge
integers where counts belong, bandwidths and latencies outside their physical range at
every key that takes one, and hardware whose parts do not fit together."""

import re

import pytest

from collsim.cli import main
from collsim.errors import InputError
from collsim.hardware.limits import MAX_GPUS, MAX_GPUS_PER_NODE, MAX_LINKS
from collsim.hardware.loader import topology_from_text

LINK = "{latency: 1us, bandwidth: 50GB/s}"
SWITCH = f"name: s\nkind: switch\ngpus: 8\nlink: {LINK}\n"
MESH = f"name: m\nkind: fully_connected\ngpus: 8\nlink: {LINK}\n"
TORUS = f"name: t\nkind: torus\ndims: [4, 4]\nlink: {LINK}\n"
NODE = f"""\
name: n
kind: nvswitch
gpus: 8
nvlink: {LINK}
pcie:
  switches: 4
  sockets: 2
  link: {LINK}
  uplink: {LINK}
  inter_socket: {LINK}
nics: {{count: 8, link: {LINK}}}
gpu: {{reduce_bandwidth: 1TB/s}}
"""
NVLINK = f"name: v\nkind: nvlink\ngpus: 4\nnvlink: {LINK}\n"
CLUSTER = f"""\
name: c
kind: cluster
nodes: 4
node:
  kind: nvswitch
  gpus: 8
  nvlink: {LINK}
  pcie: {{switches: 4, sockets: 2, link: {LINK}, uplink: {LINK}, inter_socket: {LINK}}}
  nics: {{count: 8, link: {LINK}}}
fabric: {{kind: fat_tree, leaf_ports: 16, latency: 1us}}
"""
RAIL = CLUSTER.replace("fabric: {kind: fat_tree, leaf_ports: 16, latency: 1us}",
                       "fabric: {kind: rail, latency: 1us}")
TORUS_FABRIC = CLUSTER.replace("fabric: {kind: fat_tree, leaf_ports: 16, latency: 1us}",
                               f"fabric: {{kind: torus, dims: [2, 2], link: {LINK}}}")


def refused(text, overrides=None):
    """The single error building ``text`` (as file m.yaml) with ``overrides`` raises."""
    with pytest.raises(InputError) as caught:
        topology_from_text(text, overrides, file="m.yaml")
    errors = getattr(caught.value, "errors", [caught.value])
    assert len(errors) == 1, str(caught.value)
    error = errors[0]
    assert error.file == "m.yaml" and error.line is not None, str(error)
    return error


def line_of(text, dotted):
    """The line of ``text`` (from 1) where the key path ``dotted`` is written: each part
    looked for from the line of the part before (flow mappings put several on one line)."""
    lines = text.splitlines()
    at = 0
    for part in dotted.split("."):
        at = next(i for i in range(at, len(lines))
                  if re.search(rf"(^|[\s{{,]){part}:", lines[i]))
    return at + 1


@pytest.mark.parametrize("text, overrides, key, limit", [
    (SWITCH, {"gpus": 1_000_000_000}, "gpus", f"at most {MAX_GPUS:,}"),
    (SWITCH, {"gpus": MAX_GPUS + 1}, "gpus", f"at most {MAX_GPUS:,}"),
    (SWITCH, {"gpus": 99999999999999999999999}, "gpus", "about 10^23 GPUs"),
    (CLUSTER, {"nodes": 100_000_000}, "nodes", "800,000,000 GPUs (100,000,000 nodes of 8"),
    (CLUSTER, {"nodes": MAX_GPUS // 8 + 1}, "nodes", f"at most {MAX_GPUS:,}"),
    (TORUS, {"dims": [100000, 100000]}, "dims", "10,000,000,000 GPUs (the product of dims)"),
    (NODE, {"gpus": MAX_GPUS_PER_NODE + 1}, "gpus", f"at most {MAX_GPUS_PER_NODE:,} in one"),
    (CLUSTER, {"node.gpus": 2000}, "node.gpus", "in one node"),
    (MESH, {"gpus": 3000}, "gpus", f"8,997,000 links (one per direction), more than collsim "
     f"builds: at most {MAX_LINKS:,}"),
    (CLUSTER, {"fabric.spines": 2_000_000}, "fabric", f"at most {MAX_LINKS:,}"),
    (RAIL, {"fabric.spines": 10**7}, "fabric", f"at most {MAX_LINKS:,}"),
    (NVLINK, {"gpus": MAX_GPUS_PER_NODE + 1}, "gpus", "in one node"),
])
def test_machines_above_the_limits_are_refused_before_they_are_built(text, overrides, key,
                                                                     limit):
    error = refused(text, overrides)
    assert error.key == key and limit in error.message, str(error)


def test_the_limits_themselves_are_buildable():
    assert topology_from_text(SWITCH, {"gpus": MAX_GPUS}).gpus == MAX_GPUS
    assert topology_from_text(CLUSTER, {"nodes": 1024, "fabric.leaf_ports": 64}).gpus == 8192


@pytest.mark.parametrize("text, overrides, key, expected", [
    (SWITCH, {"gpus": 8.0}, "gpus", "whole number such as 8, got 8.0"),
    (SWITCH, {"gpus": 1e8}, "gpus", "got 100000000.0"),
    (SWITCH, {"gpus": "1e8"}, "gpus", "expected integer, got '1e8'"),
    (SWITCH, {"gpus": "many"}, "gpus", "expected integer"),
    (SWITCH, {"gpus": True}, "gpus", "expected integer"),
    (SWITCH, {"gpus": [8]}, "gpus", "expected integer"),
    (CLUSTER, {"nodes": 4.0}, "nodes", "whole number"),
    (CLUSTER, {"nodes": 1.5}, "nodes", "expected integer"),
    (TORUS, {"dims": [4.0, 4]}, "dims[0]", "whole number"),
    (CLUSTER, {"node.pcie.switches": 2.0}, "node.pcie.switches", "whole number"),
    (CLUSTER, {"fabric.oversubscription": "lots"}, "fabric.oversubscription", "number"),
    (CLUSTER, {"fabric.oversubscription": float("inf")}, "fabric.oversubscription", "finite"),
    (CLUSTER, {"fabric.oversubscription": float("nan")}, "fabric.oversubscription", "finite"),
    (SWITCH, {"link.latency": {"a": 1}}, "link.latency", "expected string or number"),
    (SWITCH, {"link.bandwidth": [1, 2]}, "link.bandwidth", "expected string or number"),
])
def test_counts_and_numbers_must_be_what_their_key_takes(text, overrides, key, expected):
    error = refused(text, overrides)
    assert error.key == key and expected in error.message, str(error)


HUGE = 10**400  # more than a float holds


@pytest.mark.parametrize("text, key", [
    (SWITCH, "link.bandwidth"), (SWITCH, "link.latency"), (NODE, "gpu.reduce_bandwidth"),
    (NODE, "nvlink.bandwidth"), (NODE, "pcie.inter_socket.latency"),
    (CLUSTER, "node.nics.link.bandwidth"), (CLUSTER, "fabric.latency"),
    (TORUS, "link.bandwidth"), (TORUS_FABRIC, "fabric.link.latency"),
])
@pytest.mark.parametrize("value, expected", [
    ("1e-320", "must lie between"), ("1e308", "must lie between"), (HUGE, "must lie between"),
    (float("inf"), "finite"), (float("nan"), "finite"), ("-1", "cannot be negative"),
    (-HUGE, "cannot be negative"),
])
def test_every_quantity_key_refuses_values_outside_its_physical_range(text, key, value,
                                                                       expected):
    error = refused(text, {key: value})
    assert error.key == key and expected in error.message, str(error)
    assert error.line == line_of(text, key)


@pytest.mark.parametrize("key, value, expected", [
    ("link.bandwidth", "999B/s", "between 1 KB/s and 1000 TB/s"),
    ("link.bandwidth", "1.1PB", "unknown unit"),
    ("link.bandwidth", "1001TB/s", "between 1 KB/s and 1000 TB/s"),
    ("link.bandwidth", 0, "must be positive"),
    ("link.latency", "1.5s", "between 1 ps (1e-12 s) and 1 s, or be 0"),
    ("link.latency", "0.5e-12", "between 1 ps (1e-12 s) and 1 s, or be 0"),
])
def test_the_range_is_stated_in_units(key, value, expected):
    assert expected in refused(SWITCH, {key: value}).message


def test_the_ends_of_the_ranges_are_allowed():
    topology = topology_from_text(SWITCH, {"link.bandwidth": "1KB/s", "link.latency": "1s"})
    assert (topology.links[0].bandwidth, topology.links[0].latency) == (1e3, 1.0)
    topology = topology_from_text(SWITCH, {"link.bandwidth": "1000TB/s", "link.latency": 0})
    assert (topology.links[0].bandwidth, topology.links[0].latency) == (1e15, 0.0)


@pytest.mark.parametrize("text, overrides, key, expected", [
    # links bundled or spread so that one link falls outside the bandwidth range
    (NVLINK, {"links_per_pair": 30000}, "links_per_pair", "30,000 NVLinks of 5e+10 B/s"),
    (NVLINK, {"links_per_pair": 99999999999999999999999}, "links_per_pair", "about 10^23"),
    (NVLINK, {"pairs": [[0, 1, 10**30], [1, 2, 1], [2, 3, 1]]}, "pairs[0]", "between 1 KB/s"),
    (CLUSTER, {"fabric.oversubscription": 1e300}, "fabric.oversubscription",
     "with 1 spine at oversubscription 1e+300, each leaf uplink would carry 8e-289 B/s"),
    (CLUSTER, {"fabric.spines": 10**22}, "fabric.spines", "between 1 KB/s"),
])
def test_derived_link_bandwidths_stay_in_range(text, overrides, key, expected):
    error = refused(text, overrides)
    assert error.key == key and expected in error.message, str(error)


@pytest.mark.parametrize("text, overrides, key, expected", [
    (NODE, {"pcie.switches": 9}, "pcie.switches", "9 PCIe switches for 8 GPUs"),
    (NODE, {"gpus": 3, "pcie.switches": 3}, "nics.count", "8 NICs for 3 GPUs"),
    (NODE, {"pcie.sockets": 5}, "pcie.sockets", "5 sockets for 4 PCIe switches"),
    (CLUSTER, {"node.pcie.switches": 16}, "node.pcie.switches", "16 PCIe switches"),
    (CLUSTER, {"node.nics.count": 9}, "node.nics.count", "9 NICs for 8 GPUs"),
    (CLUSTER, {"fabric.leaf_ports": 3}, "fabric.leaf_ports", "give a multiple of 8"),
    (CLUSTER, {"fabric.leaf_ports": 12}, "fabric.leaf_ports", "whole nodes of 8 NICs"),
    (CLUSTER, {"node.nics.count": 3}, "fabric.leaf_ports", "give a multiple of 3"),
    (TORUS_FABRIC, {"nodes": 5}, "fabric.dims", "holds 4 nodes but 'nodes' is 5"),
    (TORUS_FABRIC, {"fabric.dims": [100000, 100000]}, "fabric.dims",
     "holds 10,000,000,000 nodes"),
    (NVLINK, {"pairs": [[0, 1, 1]], "wiring": "ring"}, "wiring", "no effect with explicit"),
    (NVLINK, {"pairs": [[0, 1, 1]], "links_per_pair": 2}, "links_per_pair", "no effect"),
    (NVLINK, {"pairs": [[0, 1, 1], [2, 3, 1]]}, "pairs", "GPUs 0 and 2 have no path"),
    (NVLINK, {"wiring": "ring"}, "wiring", "GPUs 0 and 2 have no path: wire them with NVLink "
     "or add a 'pcie' section"),
])
def test_parts_that_do_not_fit_together_are_refused(text, overrides, key, expected):
    error = refused(text, overrides)
    assert error.key == key and expected in error.message, str(error)


def test_parts_at_the_edge_of_fitting_are_accepted():
    node = topology_from_text(NODE, {"pcie.switches": 8, "pcie.sockets": 8})
    assert node.gpus == 8
    cluster = topology_from_text(CLUSTER, {"fabric.leaf_ports": 8, "node.nics.count": 1})
    assert cluster.gpus == 32


@pytest.mark.parametrize("argv, message", [
    (["--set", "gpus=1000000000"], "131,072"),
    (["--set", "gpus=99999999999999999999999"], "about 10^23"),
    (["--set", "gpus=1e8"], "expected integer, got '1e8'"),
    (["--set", "link.bandwidth=1e-320"], "between 1 KB/s and 1000 TB/s"),
    (["--set", "link.latency=1e308"], "and 1 s, or be 0"),
    (["--set", "link.latency=&a [*a]"], "key '--set'"),
])
def test_the_command_line_ends_with_status_2_and_one_message(argv, message, capsys):
    status = main(["estimate", "--topology", "switch-64", "--collective", "allreduce",
                   "--algorithm", "ring", "--ranks", "2", "--size", "1MiB", *argv])
    err = capsys.readouterr().err
    assert status == 2 and message in err and "Traceback" not in err, err
