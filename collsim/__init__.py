"""collsim: discrete-event simulation of collective communication on GPU clusters.

In a notebook or a script::

    import collsim
    collsim.estimate("dgx-h100", "allreduce", "ring", 8, "1GiB")

Every name below is loaded on first use, so ``import collsim`` itself costs nothing and
never loads matplotlib. ``help(collsim.estimate)`` and friends say the rest.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# Public name -> the module that defines it.
_EXPORTS = {
    # one point, a scenario, machines (collsim/api.py)
    "estimate": "collsim.api",
    "load_topology": "collsim.api",
    "load_scenario": "collsim.api",
    "run_scenario": "collsim.api",
    "list_topologies": "collsim.api",
    "list_algorithms": "collsim.api",
    # writing an algorithm
    "register": "collsim.api",
    "unregister": "collsim.api",
    "check_algorithm": "collsim.api",
    "Send": "collsim.program",
    "Recv": "collsim.program",
    "Reduce": "collsim.program",
    "Copy": "collsim.program",
    "Job": "collsim.program",
    "Program": "collsim.program",
    "block": "collsim.program",
    "span": "collsim.program",
    "Cost": "collsim.algorithms.registry",
    # what comes back, cost models and errors
    "PointResult": "collsim.simulate",
    "Rows": "collsim.output.rows",
    "Scenario": "collsim.scenarios.model",
    "Topology": "collsim.hardware.topology",
    "MessageCosts": "collsim.engine.costs",
    "IDEAL": "collsim.engine.costs",
    "InputError": "collsim.errors",
    "SimulationError": "collsim.errors",
}
__all__ = list(_EXPORTS)

def __getattr__(name: str) -> Any:
    """Load a public name from its module on first use."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'collsim' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
