"""Pairing answers with the requests that wait for them.

A ``Pending`` is one request's wait: a callback, or an event (anything with
``set()``) that wakes a blocked caller, or both, and the result once it
came. ``FifoCorrelator`` holds the pending requests of one connection in the
order they were sent, for a protocol that answers in order (NSQ);
``KeyedCorrelator`` pairs them by request id, for a protocol that answers
in any order (Pulsar). Neither does I/O or locking: its protocol object
adds under its driver's lock and takes from the one reading task (deque and
dict operations are atomic).
"""
from __future__ import annotations

import collections
import itertools
import logging
from typing import Any, Callable

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
    ``expect`` (append) and ``popleft`` (the next answer's request) run in C
    on the hot path."""

    __slots__ = ()

    #: a request was sent: its answer comes after those of the requests before it
    expect = collections.deque.append

    def drain(self) -> list[Pending]:
        """Every request still waiting (the connection is going away)."""
        waiting = list(self)
        self.clear()
        return waiting


class KeyedCorrelator(dict):
    """Requests answered by id, in any order (Pulsar's request_id): a dict
    of id -> Pending plus the id counter. ``next_id()`` may be called from
    any task (itertools.count is atomic under the GIL); ``expect`` runs
    under the protocol's driver lock, ``pop`` on the reading task."""

    __slots__ = ("_ids",)

    def __init__(self, first_id: int = 1) -> None:
        super().__init__()
        self._ids = itertools.count(first_id)

    def next_id(self) -> int:
        """A fresh id for one request on this connection."""
        return next(self._ids)

    def expect(self, request_id: int, pending: Pending) -> None:
        """A request with this id was sent: its answer resolves pending."""
        self[request_id] = pending

    def answer(self, request_id: int) -> Pending | None:
        """The request an answer with this id is for (None: unknown or expired)."""
        return self.pop(request_id, None)

    def forget(self, request_id: int) -> Pending | None:
        """The waiter gave up (timeout): a late answer is then ignored."""
        return self.pop(request_id, None)

    def drain(self) -> list[Pending]:
        """Every request still waiting (the connection is going away)."""
        waiting = list(self.values())
        self.clear()
        return waiting
