"""The topology files collsim ships: package data of ``collsim.topologies`` (see
:mod:`collsim.hardware.shipped`), so that ``--topology dgx-h100`` works from any folder."""
