"""What a ``Client`` does when dropped without ``close()``.

A client is freed the moment its last reference goes, with no ``gc.collect()`` (its parts and it
hold each other without a cycle: ``parts.py``). ``ClientLifetime`` is what it leaves behind: its
finalizer (the official client's destructor) shuts it down as ``Client.shutdown()`` does (the
connections close, sends still waiting fail, blocked receives raise) and then waits, at most
``TASK_END_SECONDS`` in all, for its tasks to end (the connections' readers, the listeners, the
table views' followers). So on the threads backend its threads are gone by the statement after the
one that dropped it, and under gevent its greenlets are. It never waits for the task it runs on (a
drop on one of the client's own threads: a listener, a callback), nor where the caller may not
wait (the gevent hub, an OS thread other than the hub's, an asyncio loop outside its tasks, the
threads' timer thread): there the shutdown goes to a task of its own, and the tasks end just after.
At the interpreter's end it does nothing (the process's sockets close with it).
"""
from __future__ import annotations

import logging
import sys
from typing import Any, Callable

from msgengine.runtime import Backend, monotonic
from msgengine.scheduler import thread_scheduler
from msgengine.supervisor import Supervisor
from msgengine.taskgroup import TaskGroup

from pulsarfast.base.parts import Parts
from pulsarfast.network.discovery import Discovery
from pulsarfast.network.pool import ConnectionPool

logger = logging.getLogger(__name__)

#: how long close(), or the finalizer of a dropped client, waits for each of its tasks (the finalizer: for all)
TASK_END_SECONDS = 5.0


class ClientLifetime:
    """What a client leaves behind for its finalizer and shares with close() and shutdown(): its
    connection pool, lookups, supervisor (the child's, after a fork: ``supervisor`` is set again),
    and its parts. It holds nothing that holds the client."""

    def __init__(self, backend: Backend, pool: ConnectionPool, discovery: Discovery,
                 supervisor: Supervisor[Any], tasks: TaskGroup | None) -> None:
        self.backend = backend
        #: every task spawned for the client (None on the asyncio backend: a finalizer there runs
        #: on the loop, where it may not wait, and the loop's tasks are no threads)
        self.tasks = tasks
        self.pool = pool
        self.discovery = discovery
        self.supervisor = supervisor
        self.producers: Parts[Any] = Parts()
        self.consumers: Parts[Any] = Parts()
        self.table_views: Parts[Any] = Parts()
        #: closed or shut down already: the finalizer has nothing left to do
        self.ended = False

    def shutdown(self) -> list[Callable[[float], None]]:
        """Close the connections at once, without closing producers and consumers on the broker:
        sends still waiting fail, blocked receives raise AlreadyClosed. Returns the waits for its
        tasks to end (``join``)."""
        self.ended = True
        self.discovery.close()
        self.supervisor.close()
        connections = self.pool.close()
        for producer in self.producers:
            producer.abort()
        consumers = list(self.consumers)
        for consumer in consumers:
            consumer.abort()
        table_views = list(self.table_views)
        for parts in (self.producers, self.consumers, self.table_views):
            parts.close()
        return ([conn.join_reader for conn in connections] + [consumer.join_listener for consumer in consumers]
                + [table_view.join for table_view in table_views])

    def join(self, waits: list[Callable[[float], None]], seconds: float) -> None:
        """Wait, at most seconds in all, for the tasks ``shutdown`` returned the waits of to end,
        then for every other task of the client (a send of acknowledgements, a reconnection)."""
        deadline = monotonic() + seconds
        for wait in waits:
            wait(max(deadline - monotonic(), 0.0))
        if self.tasks is not None:
            self.tasks.join(max(deadline - monotonic(), 0.0))

    def __call__(self) -> None:
        """The client was dropped without close() (its finalizer)."""
        if self.ended or sys.is_finalizing():
            return  # (the interpreter's end: its daemon threads can no longer run, and the sockets close with it)
        backend = self.backend
        try:
            # (a timer callback of the threads backend must not wait: every timer of the process waits for it)
            if backend.in_backend_context() and backend.may_wait() and not thread_scheduler().in_scheduler_thread():
                logger.debug("a Client was dropped without close(): shutting it down")
                self.join(self.shutdown(), TASK_END_SECONDS)
            else:  # (the gevent hub, another OS thread, an asyncio loop outside its tasks: a task does it)
                backend.call_threadsafe(backend.spawn, self.shutdown)
        except Exception:  # pragma: no cover - a backend gone with the interpreter
            logger.debug("shutting down a dropped Client", exc_info=True)
