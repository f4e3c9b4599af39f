"""``Transaction``: messages sent and acknowledgements made in it take effect together when it
commits, and never when it aborts (the Java client's ``Transaction``, with Python names).

A transaction is opened by ``Client.new_transaction(timeout_ms)`` (NEW_TXN on a coordinator, in
turn), or taken up by id with ``Client.transaction(txn_id)`` (one opened by another client or
process: the Spark sink's tasks open them, its driver commits them). Before the first message
sent to a partition in it, the partition is registered with its coordinator
(ADD_PARTITION_TO_TXN); before the first acknowledgement on a subscription, the subscription
(ADD_SUBSCRIPTION_TO_TXN); each once. ``commit()`` and ``abort()`` first send the open batches of
the producers that hold its messages and wait for every send and acknowledgement made in it to
have the broker's answer, then end it (END_TXN). An operation of the transaction that failed
makes ``commit()`` abort it and raise that operation's error, as the Java client does (an
acknowledgement conflicting with another transaction's: TransactionConflict).

States are the Java client's: OPEN, COMMITTING, ABORTING, COMMITTED, ABORTED, ERROR, TIME_OUT. A
transaction past its timeout is aborted by its coordinator: its ``state`` says TIME_OUT (the
client keeps the deadline, as the Java client's timer does), sending or acknowledging in it
raises InvalidTxnStatusError, ``commit()`` raises InvalidTxnStatusError saying it timed out and
was aborted, and ``abort()`` returns (it is aborted). ``with client.new_transaction() as txn:``
commits at a normal exit and aborts when the block raises.
"""
from __future__ import annotations

import enum
import logging
from types import TracebackType
from typing import Any, Callable, NamedTuple, Protocol

from msgengine.runtime import Backend, from_any_thread, monotonic

from pulsarfast.base.results import (
    InvalidTxnStatusError,
    PulsarException,
    Result,
    TransactionNotFound,
    result_of,
)
from pulsarfast.transactions.coordinator import Coordinators
from pulsarfast.wire import proto

logger = logging.getLogger(__name__)

#: what a transaction's timeout is when none is given (the Java client's default)
DEFAULT_TIMEOUT_MS = 60000


class TransactionId(NamedTuple):
    """A transaction's id: its coordinator's id is ``most_bits``."""

    most_bits: int
    least_bits: int

    def __str__(self) -> str:
        return "(%d,%d)" % (self.most_bits, self.least_bits)


class TransactionState(enum.Enum):
    """Where a transaction is (the Java client's states)."""

    OPEN = "OPEN"
    COMMITTING = "COMMITTING"
    ABORTING = "ABORTING"
    COMMITTED = "COMMITTED"
    ABORTED = "ABORTED"
    ERROR = "ERROR"
    TIME_OUT = "TIME_OUT"


class Flushable(Protocol):
    """A producer's partition holding messages of a transaction, maybe in its open batch."""

    def send_open_batch(self) -> None: ...


def check_timeout_ms(timeout_ms: Any) -> int:
    if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int):
        raise ValueError("timeout_ms must be an int, not %s" % type(timeout_ms).__name__)
    if timeout_ms <= 0:
        raise ValueError("timeout_ms must be positive, not %d" % timeout_ms)
    return timeout_ms


def transaction_id(value: Any) -> TransactionId:
    """A TransactionId from one, or from a (most_bits, least_bits) pair."""
    if isinstance(value, TransactionId):
        return value
    if isinstance(value, (tuple, list)) and len(value) == 2 and all(
            isinstance(bits, int) and not isinstance(bits, bool) and 0 <= bits < 1 << 64 for bits in value):
        return TransactionId(value[0], value[1])
    raise ValueError("a transaction id is a TransactionId or a (most_bits, least_bits) pair of unsigned "
                     "64-bit ints, not %r" % (value,))


class Transaction:
    """One transaction; see the module docstring."""

    def __init__(self, coordinators: Coordinators, backend: Backend, txn_id: TransactionId,
                 timeout_ms: int | None, started: float | None = None) -> None:
        self._coordinators = coordinators
        self.backend = backend
        self._id = txn_id
        #: the timeout it was opened with (None: taken up by id, the timeout is its opener's)
        self.timeout_ms = timeout_ms
        #: when its coordinator aborts it (counted from before NEW_TXN: the coordinator's count starts later)
        self._deadline = ((started if started is not None else monotonic()) + timeout_ms / 1000.0
                          if timeout_ms is not None else None)
        self._state = TransactionState.OPEN
        self._lock = backend.lock()
        self._register_lock = backend.lock()
        self._partitions: set[str] = set()
        self._subscriptions: set[tuple[str, str]] = set()
        #: partition -> the sends waiting for its registration, in order (send_async's)
        self._queued: dict[str, list[Callable[[BaseException | None], None]]] = {}
        self._producers: list[Flushable] = []
        self._ops = 0  # sends and acknowledgements made in it without the broker's answer yet
        self._idle_waiters: list[Any] = []
        self._drained_waiters: list[Any] = []  # (waiting for the sends queued behind registrations)
        self._failed: BaseException | None = None  # the first operation of it that failed

    def __repr__(self) -> str:
        return "<Transaction %s %s>" % (self._id, self.state.name)

    @property
    def id(self) -> TransactionId:
        """Its id (``(most_bits, least_bits)``)."""
        return self._id

    @property
    def state(self) -> TransactionState:
        state = self._state
        if state is TransactionState.OPEN and self._expired():
            return TransactionState.TIME_OUT
        return state

    def _expired(self) -> bool:
        return self._deadline is not None and monotonic() >= self._deadline

    def _bits(self) -> tuple[int, int]:
        return self._id.most_bits, self._id.least_bits

    def check_open(self) -> None:
        """Raise InvalidTxnStatusError unless messages may still be sent and acknowledged in it."""
        state = self.state
        if state is not TransactionState.OPEN:
            raise InvalidTxnStatusError("transaction %s is %s, not OPEN%s" % (
                self._id, state.name, ": it timed out and its coordinator aborted it"
                if state is TransactionState.TIME_OUT else ""))

    def _check_registrable(self) -> None:
        """A registration is for an operation counted already (its send or acknowledgement checked
        check_open): it goes on while commit() or abort() waits for that operation."""
        state = self.state
        if state not in (TransactionState.OPEN, TransactionState.COMMITTING, TransactionState.ABORTING):
            self.check_open()

    # -- registering what it touches ----------------------------------------------------------

    def _coordinator_request(self, build: Callable[[int], bytes]) -> Any:
        return self._coordinators.request(self._id.most_bits, build)

    def register_partition(self, topic: str) -> None:
        """Register a partition (full name) the transaction sends to, once (blocks for the coordinator)."""
        if topic in self._partitions:
            return
        with self._register_lock:
            if topic in self._partitions:
                return
            self._check_registrable()
            self._coordinator_request(lambda rid: proto.add_partition_to_txn(rid, self._bits(), [topic]))
            self._partitions.add(topic)

    def partition_ready(self, topic: str) -> bool:
        """The partition is registered and no send waits for its registration."""
        return topic in self._partitions and topic not in self._queued

    def after_partition_registered(self, topic: str, action: Callable[[BaseException | None], None]) -> None:
        """Run action(None) once the partition is registered (now if it is; else in a task that
        registers it, after the actions queued before it, in order), or action(error) if that failed."""
        with self._lock:
            if self.partition_ready(topic):
                queue = None
            else:
                queue = self._queued.get(topic)
                if queue is None:
                    self._queued[topic] = [action]
                    self.backend.spawn(self._register_queued, topic)
                else:
                    queue.append(action)
                return
        action(None)

    def _register_queued(self, topic: str) -> None:
        error: BaseException | None = None
        try:
            self.register_partition(topic)
        except PulsarException as exc:
            error = exc
        while True:
            with self._lock:
                queue = self._queued.get(topic)
                if not queue:
                    self._queued.pop(topic, None)
                    drained = self._drained_waiters if not self._queued else []
                    if drained:
                        self._drained_waiters = []
                    break
                actions = list(queue)
                queue.clear()
            for action in actions:
                try:
                    action(error)
                except Exception:
                    logger.exception("a send waiting for transaction %s's partition %s raised", self._id, topic)
        for waiter in drained:
            waiter.set()

    def register_subscription(self, topic: str, subscription: str) -> None:
        """Register a subscription acknowledged in the transaction, once (blocks for the coordinator)."""
        key = (topic, subscription)
        if key in self._subscriptions:
            return
        with self._register_lock:
            if key in self._subscriptions:
                return
            self._check_registrable()
            self._coordinator_request(lambda rid: proto.add_subscription_to_txn(rid, self._bits(), [key]))
            self._subscriptions.add(key)

    # -- its operations -------------------------------------------------------------------------

    def op_started(self, producer: Flushable | None = None) -> None:
        """A send (of producer's) or an acknowledgement is made in it (under way until op_finished)."""
        with self._lock:
            self._ops += 1
            if producer is not None and producer not in self._producers:
                self._producers.append(producer)

    def op_finished(self, error: BaseException | None) -> None:
        with self._lock:
            self._ops -= 1
            if error is not None and self._failed is None:
                self._failed = error
            waiters = self._idle_waiters if self._ops == 0 else []
            if waiters:
                self._idle_waiters = []
        for waiter in waiters:
            waiter.set()

    def _settle_ops(self) -> None:
        """Send the open batches holding its messages and wait for every operation's answer."""
        with self._lock:
            drained = None
            if self._queued:  # (sends queued behind a registration first: they join the open batches)
                drained = self.backend.event()
                self._drained_waiters.append(drained)
        if drained is not None:
            drained.wait()
        for producer in list(self._producers):
            producer.send_open_batch()
        with self._lock:
            if self._ops == 0:
                return
            waiter = self.backend.event()
            self._idle_waiters.append(waiter)
        waiter.wait()  # (each send ends by its receipt or its send timeout, each acknowledgement by its answer)

    # -- ending it ------------------------------------------------------------------------------

    def _begin_end(self, to: TransactionState) -> None:
        with self._lock:
            state = self.state
            if state is not TransactionState.OPEN:
                if state is TransactionState.TIME_OUT:
                    self._state = TransactionState.TIME_OUT
                raise InvalidTxnStatusError("transaction %s cannot be %s: it is %s%s" % (
                    self._id, "committed" if to is TransactionState.COMMITTING else "aborted", state.name,
                    " (it timed out and its coordinator aborted it)" if state is TransactionState.TIME_OUT else ""))
            self._state = to

    def _end(self, action: int) -> None:
        self._coordinator_request(lambda rid: proto.end_txn(rid, self._bits(), action))

    @from_any_thread()
    def commit(self) -> None:
        """Make its messages visible and its acknowledgements effective, all together (see the module docstring)."""
        self._begin_end(TransactionState.COMMITTING)
        self._settle_ops()
        failed = self._failed
        if failed is not None:
            try:
                self._end(proto.TXN_ABORT)
                self._state = TransactionState.ABORTED
            except PulsarException as exc:
                logger.warning("transaction %s: aborting it after a failed operation failed too: %s", self._id, exc)
                self._state = TransactionState.ERROR
            raise failed
        try:
            self._end(proto.TXN_COMMIT)
        except (TransactionNotFound, InvalidTxnStatusError) as exc:
            if self._expired():
                self._state = TransactionState.TIME_OUT
                raise InvalidTxnStatusError("transaction %s timed out after %d ms and its coordinator aborted it"
                                            % (self._id, self.timeout_ms or 0)) from exc
            self._state = TransactionState.ERROR
            raise
        except PulsarException:
            self._state = TransactionState.ERROR
            raise
        self._state = TransactionState.COMMITTED

    @from_any_thread()
    def abort(self) -> None:
        """Drop its messages and acknowledgements. Aborting an aborted or timed-out transaction does nothing."""
        if self.state in (TransactionState.ABORTED, TransactionState.TIME_OUT):
            self._state = self.state
            return
        self._begin_end(TransactionState.ABORTING)
        self._settle_ops()
        try:
            self._end(proto.TXN_ABORT)
        except (TransactionNotFound, InvalidTxnStatusError) as exc:
            if self._expired():
                self._state = TransactionState.TIME_OUT
                return
            self._state = TransactionState.ERROR
            raise exc
        except PulsarException:
            self._state = TransactionState.ERROR
            raise
        self._state = TransactionState.ABORTED

    def commit_async(self, callback: Callable[[Result], None] | None = None) -> None:
        """Commit in a task of the client: ``callback(result)`` (``Result.Ok``, or the error's
        code) once it ended. The caller goes on at once (a next transaction while this one's
        END_TXN is under way: the coordinator's and the partitions' log writes overlap)."""
        self._end_async(self.commit, callback, True)

    def abort_async(self, callback: Callable[[Result], None] | None = None) -> None:
        """Abort in a task of the client: ``callback(result)`` once it ended."""
        self._end_async(self.abort, callback, False)

    def _end_async(self, end: Callable[[], None], callback: Callable[[Result], None] | None, committing: bool) -> None:
        with self._lock:
            state = self.state
        if state is not TransactionState.OPEN and committing:
            error: PulsarException = InvalidTxnStatusError("transaction %s cannot be committed: it is %s"
                                                           % (self._id, state.name))
            if callback is None:
                raise error
            callback(error.result)
            return

        def run() -> None:
            error: BaseException | None = None
            try:
                end()
            except PulsarException as exc:
                error = exc
                if callback is None:
                    logger.warning("transaction %s: %s", self._id, exc)
            if callback is not None:
                try:
                    callback(result_of(error))
                except Exception:
                    logger.exception("a transaction's end callback raised")

        self.backend.spawn(run)

    def __enter__(self) -> "Transaction":
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if kind is None:
            self.commit()
            return
        try:
            self.abort()
        except PulsarException as exc:
            logger.warning("transaction %s: abort after %s failed: %s", self._id, kind.__name__, exc)


def open_transaction(coordinators: Coordinators, backend: Backend, timeout_ms: int) -> Transaction:
    """NEW_TXN on the next coordinator: the new transaction."""
    tc_id = coordinators.next_coordinator()
    started = monotonic()
    answer = coordinators.request(tc_id, lambda rid: proto.new_txn(rid, tc_id, timeout_ms))
    return Transaction(coordinators, backend, TransactionId(answer.txnid_most_bits, answer.txnid_least_bits),
                       timeout_ms, started)
