"""One connection per broker, shared by every producer, consumer and lookup
of a client (the protocol's connection sharing).

``ConnectionPool.get(logical_url, address)`` returns the open connection for
that (broker, socket address) pair, connecting first when there is none;
callers that ask for the same broker at once wait for one attempt. A closed
connection leaves the pool, and the next ``get`` makes a new one.
"""
from __future__ import annotations

import functools
import logging
from typing import Any, Callable

from msgengine.runtime import Backend

from pulsarfast.base.results import AlreadyClosed
from pulsarfast.network.connection import BrokerConnection

logger = logging.getLogger(__name__)

Key = tuple[str, tuple[str, int]]


class ConnectionPool:
    def __init__(self, backend: Backend, make: Callable[[str, tuple[str, int], bool], BrokerConnection]) -> None:
        self.backend = backend
        self._make = make
        self._lock = backend.lock()
        self._connections: dict[Key, BrokerConnection] = {}
        self._connecting: dict[Key, Any] = {}  # key -> event set when the attempt under way ends
        self._closed = False

    def get(self, logical_url: str, address: tuple[str, int], through_proxy: bool = False) -> BrokerConnection:
        key = (logical_url, address)
        while True:
            with self._lock:
                if self._closed:
                    raise AlreadyClosed("the client is closed")
                conn = self._connections.get(key)
                if conn is not None and conn.is_ready():
                    return conn
                underway = self._connecting.get(key)
                if underway is None:
                    done = self._connecting[key] = self.backend.event()
            if underway is not None:
                underway.wait(1.0)  # the attempt under way ends (set), then look again
                continue
            try:
                conn = self._make(logical_url, address, through_proxy)
                conn.connect()
            finally:
                with self._lock:
                    del self._connecting[key]
                done.set()
            with self._lock:
                closed = self._closed
                if not closed:
                    self._connections[key] = conn
            if closed:
                conn.close()
                raise AlreadyClosed("the client is closed")
            conn.add_close_listener(functools.partial(self._forget, key))
            return conn

    def _forget(self, key: Key, conn: BrokerConnection) -> None:
        with self._lock:
            if self._connections.get(key) is conn:
                del self._connections[key]

    def connections(self) -> list[BrokerConnection]:
        with self._lock:
            return list(self._connections.values())

    def close(self, join_timeout: float = 0.0) -> list[BrokerConnection]:
        """Close every connection; with join_timeout, wait (that long at most, for each) for
        their reading tasks to end. Returns the connections it closed."""
        with self._lock:
            self._closed = True
            connections = list(self._connections.values())
            self._connections.clear()
        for conn in connections:
            conn.close()
        if join_timeout:
            for conn in connections:
                conn.join_reader(join_timeout)
        return connections

    def forget_after_fork(self) -> None:
        """In a forked child: the connections are the parent's (each dropped its socket already);
        the next ``get`` makes the child's own."""
        self._lock = self.backend.lock()
        self._connections = {}
        self._connecting = {}
