"""The client of the brokers' transaction coordinators (TCs): one per partition of
``persistent://pulsar/system/transaction_coordinator_assign``, each served by the broker that
owns that partition.

``Coordinators.request(tc_id, build)`` sends a coordinator command (NEW_TXN, ADD_PARTITION_TO_TXN,
ADD_SUBSCRIPTION_TO_TXN, END_TXN) to coordinator ``tc_id`` and returns its answer. The connection
is made on first use, as the Java client makes it: a lookup of the coordinator's partition, the
shared connection to its broker (the client's pool), then TC_CLIENT_CONNECT_REQUEST on it. When
that connection closes, or the coordinator moved or is still loading (the broker answers
TransactionCoordinatorNotFound, or ServiceNotReady), the request is made again on a fresh lookup,
after a backoff, until the client's operation timeout. A broker without coordinators (none
configured: ``transactionCoordinatorEnabled=false``) fails at once with
TransactionCoordinatorNotFoundError saying so.
"""
from __future__ import annotations

import itertools
import logging
from typing import Any, Callable, Protocol

from msgengine.runtime import Backend, monotonic

from pulsarfast.base.results import (
    ConnectError,
    NotConnected,
    PulsarException,
    ServiceUnitNotReady,
    Timeout,
    TransactionCoordinatorNotFoundError,
    from_server_error,
)
from pulsarfast.base.topics import partition_name
from pulsarfast.network.connection import BrokerConnection
from pulsarfast.wire import proto

logger = logging.getLogger(__name__)

#: the partitioned topic whose partitions name the coordinators (partition i: coordinator i)
ASSIGN_TOPIC = "persistent://pulsar/system/transaction_coordinator_assign"
#: errors after which a coordinator request is made again on a fresh lookup (the coordinator
#: moved, is loading, or its connection closed)
_RETRIED = (NotConnected, ConnectError, ServiceUnitNotReady, TransactionCoordinatorNotFoundError)
_FIRST_DELAY = 0.1
_MAX_DELAY = 2.0


class CoordinatorHost(Protocol):
    """What the coordinators' client uses of the Client."""

    @property
    def backend(self) -> Backend: ...

    @property
    def operation_timeout(self) -> float: ...

    def connection_for(self, topic: str) -> BrokerConnection:
        """The connection to the broker that serves topic (a lookup, then the shared connection)."""

    def partition_count(self, topic: str) -> int:
        """How many partitions topic has (0: not partitioned, or absent)."""


def checked(answer: Any) -> Any:
    """A coordinator's answer, or its error raised (the official exception of its ServerError)."""
    error = getattr(answer, "error", None)
    if error is not None:
        raise from_server_error(error, answer.message)
    return answer


class Coordinators:
    """The client's coordinators; see the module docstring."""

    def __init__(self, host: CoordinatorHost) -> None:
        self._host = host
        self._lock = host.backend.lock()
        self._count: int | None = None
        #: coordinator id -> the connection it was connected on (TC_CLIENT_CONNECT answered)
        self._connected: dict[int, BrokerConnection] = {}
        self._turns = itertools.count()

    def count(self) -> int:
        """How many coordinators the cluster has (asked once); none raises TransactionCoordinatorNotFoundError."""
        count = self._count
        if count is None:
            try:
                count = self._host.partition_count(ASSIGN_TOPIC)
            except PulsarException as exc:
                raise TransactionCoordinatorNotFoundError(
                    "no transaction coordinator: the partitions of %s could not be read (%s); transactions need "
                    "transactionCoordinatorEnabled=true on the brokers" % (ASSIGN_TOPIC, exc)) from exc
            if count <= 0:
                raise TransactionCoordinatorNotFoundError(
                    "no transaction coordinator: %s has no partitions; transactions need "
                    "transactionCoordinatorEnabled=true on the brokers" % ASSIGN_TOPIC)
            self._count = count
        return count

    def next_coordinator(self) -> int:
        """The coordinator a new transaction goes to (in turn, as the Java client spreads them)."""
        return next(self._turns) % self.count()

    def _connection(self, tc_id: int, timeout: float) -> BrokerConnection:
        conn = self._connected.get(tc_id)
        if conn is not None and conn.is_ready():
            return conn
        conn = self._host.connection_for(partition_name(ASSIGN_TOPIC, tc_id))
        checked(conn.request(lambda rid: proto.tc_client_connect(rid, tc_id), timeout))
        with self._lock:
            self._connected[tc_id] = conn
        logger.debug("transaction coordinator %d on %s", tc_id, conn.name)
        return conn

    def _forget(self, tc_id: int, conn: BrokerConnection | None) -> None:
        with self._lock:
            if conn is None or self._connected.get(tc_id) is conn:
                self._connected.pop(tc_id, None)

    def request(self, tc_id: int, build: Callable[[int], bytes]) -> Any:
        """Coordinator tc_id's answer to the command build(request_id) (see the module docstring)."""
        host = self._host
        timeout = host.operation_timeout
        deadline = monotonic() + timeout
        delay = _FIRST_DELAY
        while True:
            conn: BrokerConnection | None = None
            try:
                conn = self._connection(tc_id, max(0.001, deadline - monotonic()))
                return checked(conn.request(build, max(0.001, deadline - monotonic())))
            except _RETRIED as exc:
                self._forget(tc_id, conn)
                left = deadline - monotonic()
                if left <= delay:
                    if isinstance(exc, TransactionCoordinatorNotFoundError):
                        raise
                    raise Timeout("transaction coordinator %d did not answer within %.1fs: %s"
                                  % (tc_id, timeout, exc)) from exc
                logger.info("transaction coordinator %d: %s; asking again in %.1fs", tc_id, exc, delay)
                host.backend.sleep(delay)
                delay = min(delay * 2, _MAX_DELAY)

    def forget_all(self) -> None:
        """Connections are gone (the client shut down, or forked): each coordinator is connected again on next use."""
        with self._lock:
            self._connected.clear()
