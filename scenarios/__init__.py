"""The scenario files collsim ships: package data of ``collsim.scenario_files`` (see
:mod:`collsim.scenarios.shipped`), so that ``collsim run ring-vs-tree`` works from any folder."""
