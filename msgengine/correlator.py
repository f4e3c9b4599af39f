"""Pairing answers with the requests that wait for them.

A ``Pending`` is one request's wait: a callback, or an event (anything with
``set()``) that wakes a blocked caller, or both, and the result once it
came. A correlator holds the pending requests of one connection: in the
order they were sent (``FifoCorrelator``: NSQ answers in order) or by
request id (``KeyedCorrelator``: Pulsar's request and sequence ids). Neither
does I/O or locking: the protocol object that owns one is guarded by its
driver.
"""
from __future__ import annotations

import collections
import logging
from typing import Any, Callable, Hashable

logger = logging.getLogger(__name__)

AnswerCallback = Callable[[Any, Any], None]


class Pending:
    """A request waiting for its answer. ``deadline`` is for whoever expires it."""

    __slots__ = ("callback", "event", "result", "deadline")

    def __init__(self, callback: AnswerCallback | None = None, event: Any = None, deadline: float = 0.0) -> None:
        self.callback = callback
        self.event = event
        self.result: Any = None
        self.deadline = deadline

    def resolve(self, source: Any, result: Any) -> None:
        """The answer (or an exception) arrived from source: call back, then wake the waiter."""
        self.result = result
        if self.callback is not None:
            try:
                self.callback(source, result)
            except Exception:
                logger.exception("[%s] answer callback raised", source)
        if self.event is not None:
            self.event.set()


class FifoCorrelator(collections.deque):
    """Requests answered in the order they were sent: a deque whose
    ``expect`` (append) and ``popleft`` run in C on the hot path."""

    __slots__ = ()

    #: a request was sent: its answer comes after those of the requests before it
    expect = collections.deque.append

    def answered(self) -> Pending | None:
        """The request the next answer belongs to (None when nothing waits)."""
        return self.popleft() if self else None

    def drain(self) -> list[Pending]:
        """Every request still waiting (the connection is going away)."""
        waiting = list(self)
        self.clear()
        return waiting


class KeyedCorrelator:
    """Requests answered by id, in any order."""

    __slots__ = ("_waiting",)

    def __init__(self) -> None:
        self._waiting: dict[Hashable, Pending] = {}

    def __len__(self) -> int:
        return len(self._waiting)

    def expect(self, key: Hashable, pending: Pending) -> None:
        if key in self._waiting:
            raise KeyError("a request with id %r is already waiting" % (key,))
        self._waiting[key] = pending

    def answered(self, key: Hashable) -> Pending | None:
        return self._waiting.pop(key, None)

    def drain(self) -> list[Pending]:
        waiting = list(self._waiting.values())
        self._waiting.clear()
        return waiting
