"""What happens after ``os.fork()``: the fork counter and the objects told in the child.

``fork_generation()`` counts the forks this process descends from. In a
child, before anything else runs there, the backends hear of the fork first
(``on_fork_first``: their doors and hub threads belong to the parent), then
every object registered with ``on_fork_in_child``: all of them stop their
I/O (``stop_io_after_fork``, when they have it) before any cleans up
(``after_fork_in_child``), so that nothing in the child uses a socket it
shares with its parent.
"""
from __future__ import annotations

import logging
import os
import weakref
from typing import Any

logger = logging.getLogger(__name__)

#: forks this process descends from (read it through fork_generation())
generation = 0

_first: list[Any] = []
_watchers: "weakref.WeakSet[Any]" = weakref.WeakSet()


def fork_generation() -> int:
    """How many forks separate this process from the one that imported msgengine."""
    return generation


def on_fork_first(obj: Any) -> None:
    """Call ``obj.after_fork_in_child()`` in a child before the objects of
    ``on_fork_in_child`` (held strongly: the process's backends)."""
    _first.append(obj)


def on_fork_in_child(obj: Any) -> None:
    """Call ``obj.after_fork_in_child()`` in a child process after os.fork()
    (held weakly: a collected object is forgotten)."""
    _watchers.add(obj)


def _after_fork_in_child() -> None:
    global generation
    generation += 1
    for obj in list(_first):
        obj.after_fork_in_child()
    watchers = list(_watchers)
    for obj in watchers:  # first every socket goes quiet, then owners clean up
        stop_io = getattr(obj, "stop_io_after_fork", None)
        if stop_io is not None:
            stop_io()
    for obj in watchers:
        try:
            obj.after_fork_in_child()
        except Exception:  # pragma: no cover - must not break the child
            logger.exception("after-fork cleanup of %r failed", obj)


os.register_at_fork(after_in_child=_after_fork_in_child)
