"""Canonical topology files: the contract's keys (docs/design.md#kinds), overrides, and clear
errors."""

import pytest

from collsim.errors import InputError
from collsim.hardware.loader import load_topology, topology_from_text

SWITCH = """\
name: ideal-switch
kind: switch
gpus: 64
link: {latency: 1us, bandwidth: 100GB/s}
gpu: {reduce_bandwidth: 1TB/s}
"""
MESH = """\
name: ideal-mesh
kind: fully_connected
gpus: 16
link: {latency: 2us, bandwidth: 50GB/s}
"""


def test_switch_file_gives_two_hop_routes_and_design_parameters():
    topo = topology_from_text(SWITCH)
    assert (topo.name, topo.gpus, len(topo.links)) == ("ideal-switch", 64, 128)
    alpha, beta = topo.path_parameters()
    assert alpha == pytest.approx(2e-6) and beta == pytest.approx(1e-11)
    assert topo.gamma == pytest.approx(1e-12)
    for src, dst in [(0, 1), (5, 63), (63, 0)]:
        route = topo.route(src, dst)
        assert [topo.links[i].name for i in route] == [f"gpu{src}->switch", f"switch->gpu{dst}"]


def test_mesh_file_has_a_dedicated_link_per_ordered_pair():
    topo = topology_from_text(MESH)
    assert topo.gamma == 0
    seen = set()
    for src in range(16):
        for dst in range(16):
            if src != dst:
                (link,) = topo.route(src, dst)
                assert topo.links[link].name == f"gpu{src}->gpu{dst}"
                seen.add(link)
    assert len(seen) == 16 * 15 == len(topo.links)


def test_overrides_use_dotted_keys():
    topo = topology_from_text(SWITCH, {"gpus": 8, "link.bandwidth": "200GB/s"})
    assert topo.gpus == 8
    assert topo.links[0].bandwidth == 200e9


@pytest.mark.parametrize("text, line, key, message", [
    (SWITCH.replace("bandwidth: 100", "bandwith: 100"), 4, "link.bandwith",
     "did you mean 'bandwidth'"),
    (SWITCH.replace("gpus: 64\n", ""), 1, "gpus", "required key is missing"),
    (SWITCH.replace("100GB/s", "-100GB/s"), 4, "link.bandwidth", "cannot be negative"),
    (SWITCH.replace("100GB/s", "0GB/s"), 4, "link.bandwidth", "must be positive"),
    (SWITCH.replace("1us", "1 fortnight"), 4, "link.latency", "unknown unit"),
    (SWITCH.replace("kind: switch", "kind: swich"), 2, "kind", "unknown topology kind"),
    (SWITCH.replace("gpus: 64", "gpus: many"), 3, "gpus", "expected integer"),
    (SWITCH + "colour: blue\n", 6, "colour", "unknown key"),
    ("link: [1, 2\n", 2, None, "not valid YAML"),
])
def test_bad_files_name_the_line_key_and_expectation(text, line, key, message):
    with pytest.raises(InputError) as caught:
        topology_from_text(text, file="machine.yaml")
    error = caught.value
    errors = getattr(error, "errors", [error])
    assert any(e.file == "machine.yaml" and (line is None or e.line == line) and e.key == key
               and message in e.message for e in errors), str(error)


def test_a_missing_file_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        load_topology(tmp_path / "nope.yaml")


def test_yaml_tags_that_build_objects_are_refused():
    with pytest.raises(InputError, match="not valid YAML"):
        topology_from_text("!!python/object/apply:os.system ['echo hi']\n")
