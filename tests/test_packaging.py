"""Shipped topologies are package data: pyproject installs the top-level topologies/ folder
as collsim.topologies, and a shipped name resolves from any folder, on the command line and
in a scenario; every package under collsim/ is in pyproject's list."""

import importlib.resources
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from collsim.cli import main
from collsim.errors import InputError
from collsim.hardware.shipped import (
    find_topology,
    resolve_topology,
    shipped_directory,
    shipped_names,
)
from collsim.scenarios.loader import load_scenario
from collsim.scenarios.shipped import resolve_scenario, scenario_directory, scenario_names

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = sorted(path.stem for path in (ROOT / "topologies").glob("*.yaml"))
SCENARIOS = sorted(path.stem for path in (ROOT / "scenarios").glob("*.yaml"))


def test_pyproject_lists_every_package_and_maps_the_topologies_folder():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = {".".join(path.parent.relative_to(ROOT).parts)
                for path in (ROOT / "collsim").rglob("__init__.py")}
    assert set(config["packages"]) == packages | {"collsim.topologies", "collsim.scenario_files"}
    assert config["package-dir"] == {"collsim.topologies": "topologies",
                                     "collsim.scenario_files": "scenarios"}
    assert config["package-data"]["collsim.topologies"] == ["*.yaml"]
    assert config["package-data"]["collsim.scenario_files"] == ["*.yaml"]
    assert (ROOT / "topologies" / "__init__.py").is_file()
    assert (ROOT / "scenarios" / "__init__.py").is_file()


def test_the_installed_package_data_is_the_topologies_folder():
    files = importlib.resources.files("collsim.topologies")
    assert sorted(p.name[:-5] for p in files.iterdir() if p.name.endswith(".yaml")) == SHIPPED
    assert shipped_names() == SHIPPED and len(SHIPPED) >= 7
    assert shipped_directory().samefile(ROOT / "topologies")


def test_a_shipped_name_resolves_from_another_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for reference in ("dgx-h100", "dgx-h100.yaml"):
        assert resolve_topology(reference).samefile(ROOT / "topologies" / "dgx-h100.yaml")
    assert main(["estimate", "--topology", "dgx-h100", "--collective", "allreduce",
                 "--algorithm", "ring", "--ranks", "8", "--size", "1MiB"]) == 0
    line = capsys.readouterr().out
    assert line.startswith("allreduce ring (") and ") on dgx-h100, 8 ranks" in line


def test_a_local_file_comes_before_a_shipped_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dgx-h100").write_text("kind: switch\n")
    assert resolve_topology("dgx-h100") == Path("dgx-h100")
    assert find_topology("dgx-h100", tmp_path / "elsewhere") != tmp_path / "dgx-h100"


def test_an_unknown_name_lists_the_shipped_ones(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match="did you mean 'dgx-h100'") as caught:
        resolve_topology("dgx-h10")
    assert caught.value.key == "--topology" and "pcie-8gpu" in str(caught.value)
    assert resolve_topology("some/dir/x.yaml") == Path("some/dir/x.yaml")  # the loader says


def test_topo_show_takes_a_shipped_name_in_a_fresh_process_elsewhere(tmp_path):
    done = subprocess.run([sys.executable, "-m", "collsim", "topo", "show", "h100-cluster",
                           "--no-bisection", "--set", "nodes=2"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "GPUs            16 on 2 nodes (8 per node)" in done.stdout


SCENARIO = """\
name: shipped
topologies: [{topology}]
collectives: [allreduce]
algorithms: [ring]
sweep: {{size: [1MiB], ranks: [4]}}
"""


@pytest.mark.parametrize("reference", ["switch-64", "switch-64.yaml",
                                       str(ROOT / "topologies" / "switch-64.yaml")])
def test_a_scenario_names_a_shipped_topology_or_a_path(tmp_path, reference):
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.format(topology=reference))
    scenario = load_scenario(path)
    assert scenario.topology_names == ["ideal-switch"]
    assert Path(scenario.topologies[0].file).samefile(ROOT / "topologies" / "switch-64.yaml")


def test_a_scenario_next_to_its_topology_file_uses_that_file(tmp_path):
    (tmp_path / "switch-64.yaml").write_text(
        "name: mine\nkind: switch\ngpus: 4\nlink: {latency: 1us, bandwidth: 1GB/s}\n")
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.format(topology="switch-64.yaml"))
    assert load_scenario(path).topology_names == ["mine"]


def test_the_installed_scenarios_are_the_scenarios_folder():
    files = importlib.resources.files("collsim.scenario_files")
    assert sorted(p.name[:-5] for p in files.iterdir() if p.name.endswith(".yaml")) == SCENARIOS
    assert scenario_names() == SCENARIOS and "ring-vs-tree" in SCENARIOS
    assert scenario_directory().samefile(ROOT / "scenarios")


def test_every_shipped_scenario_loads_by_name_from_another_folder(tmp_path, monkeypatch):
    """Their topologies are relative paths (../topologies/...) that hold where the package
    is installed too: collsim.scenario_files sits beside collsim.topologies."""
    monkeypatch.chdir(tmp_path)
    for name in SCENARIOS:
        assert resolve_scenario(name).samefile(ROOT / "scenarios" / f"{name}.yaml")
        load_scenario(resolve_scenario(name), quick=True)


def test_an_unknown_scenario_name_suggests_the_closest(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match="did you mean 'ring-vs-tree'") as caught:
        resolve_scenario("ring-vs-tre")
    assert "nccl-h100" in str(caught.value)


def test_run_a_shipped_scenario_by_name_in_a_fresh_process_elsewhere(tmp_path):
    """``collsim run ring-vs-tree --quick`` from a folder that holds no scenario: the
    default output folder is under the current folder, and the run says where it wrote."""
    done = subprocess.run([sys.executable, "-m", "collsim", "run", "ring-vs-tree", "--quick",
                           "--no-figures"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "results" / "ring-vs-tree-quick"
    assert (out / "results.csv").is_file()
    assert str(out) in done.stderr and "no --out given" in done.stderr
    assert done.stdout.startswith("ring-vs-tree: ran ")


def test_collsim_list_names_the_shipped_scenarios(capsys):
    assert main(["list"]) == 0
    printed = capsys.readouterr().out
    section = printed.split("Shipped scenarios (collsim run NAME;")[1]
    for name in SCENARIOS:
        assert f"\n  {name} " in section
    assert "Ring vs tree allreduce crossover" in section
