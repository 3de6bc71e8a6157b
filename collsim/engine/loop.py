"""SimPy as the engine drives it: the few SimPy internals the engine relies on, in one place.

SimPy's loop pops ``(time, priority, id, event)`` from its heap and reads only three things
of the event: ``callbacks`` (run in order, then cleared), ``_ok`` and ``_value``. So any
object carrying those can be scheduled with ``env.schedule``; the engine schedules such bare
events (flows, batches of flows, deferred calls) instead of ``simpy.Event`` or ``Timeout``
objects, which cost a dict and an ``__init__`` each. ``env._now`` is read through
:data:`clock`, a C-level getter, where the ``env.now`` property would cost a Python call on
the hot path. These are SimPy 4's internals; pyproject.toml pins SimPy's major version.
"""

from __future__ import annotations

import operator
from collections.abc import Callable

import simpy

clock: Callable[[simpy.Environment], float] = operator.attrgetter("_now")
"""``clock(env)``: the simulation's current time (``env.now`` without the property call)."""


class BareEvent:
    """What SimPy's loop needs of an event: callbacks to run, and a success with no value.

    Subclasses add their own ``__slots__``; schedule one with ``env.schedule(event,
    delay=...)``. A fired event's ``callbacks`` is None until set again.
    """

    __slots__ = ("callbacks",)
    _ok = True
    _value = None


class _Call(BareEvent):
    __slots__ = ()


def call_later(env: simpy.Environment, delay: float, callback: Callable[[object], None],
               argument: object = None) -> None:
    """Call ``callback(argument)`` ``delay`` seconds from now, after whatever is already
    scheduled for that instant: a bare event, the cheapest thing SimPy schedules."""
    event = _Call()
    event.callbacks = [lambda _: callback(argument)]
    env.schedule(event, delay=delay)
