"""The scenario files collsim ships (the repository's ``scenarios/`` folder, installed as the
package ``collsim.scenario_files``), so that ``collsim run ring-vs-tree`` works from any
folder after any install. Their topologies are named by relative paths
(``../topologies/switch-64.yaml``) that hold in the repository and in the installed package
alike."""

from __future__ import annotations

from pathlib import Path

from collsim.shipped import names_in, resolve_file, shipped_folder


def scenario_directory() -> Path:
    """The folder of the shipped scenario files."""
    return shipped_folder("collsim.scenario_files", "scenarios")


def scenario_names() -> list[str]:
    """The names of the shipped scenarios (file names without ``.yaml``), sorted."""
    return names_in(scenario_directory())


def resolve_scenario(reference: str | Path, key: str = "SCENARIO.yaml") -> Path:
    """A scenario file by path, or a shipped scenario by name (``ring-vs-tree``); an unknown
    bare name is an InputError that lists the shipped scenarios and suggests the closest."""
    return resolve_file(reference, scenario_directory(), "scenario", key)
