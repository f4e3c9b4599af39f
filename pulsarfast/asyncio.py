"""``pulsarfast.asyncio``: the official ``pulsar.asyncio`` module (``import pulsarfast.asyncio as
pulsar_asyncio``): ``Client``, ``Producer``, ``Consumer``, ``Reader`` and ``PulsarException``, with
the official names, parameters, defaults and argument checks.

Each object wraps its counterpart of the sync API (``pulsarfast.Client``, ``Producer``, ...) made
on the asyncio backend (``backend="asyncio"``, msgengine/aio.py): the client's connections run
as tasks of the running loop, with no thread of their own, and every coroutine method here awaits
the blocking call of the sync API through ``msgengine.aio.run_sync`` (a greenlet driven by a task
of the loop, its waits awaits on the loop). So the ``Client`` must be made in a coroutine (with a
loop running), and its objects used on that loop.

Errors are the official ones: argument checks raise ``ValueError`` as the official module's do,
and a failed operation raises ``PulsarException`` (this module's, not ``pulsarfast.PulsarException``:
the official async API raises one class for every error) whose ``error()`` is the ``Result``.

Cancelling an ``await consumer.receive()`` (or ``reader.read_next()``) loses no message: a message
already taken when the cancellation lands goes back to the front of the queue, for the next
receive (aiotake.py). The official client loses it.

Batching is the official one: a batch goes when full, after ``batching_max_publish_delay_ms`` or at
``flush()``; ``create_producer(..., batching_eager=True)`` (pulsarfast's own) also sends it at the end
of the loop's turn when none of the producer's batches waits for its receipt. Once the client is
shut down or closed, its objects' calls fail with AlreadyClosed (or do nothing) at once, where the
official ones do (``_ClientEnd``). ``_set_future`` is the official module's helper, kept for code
written against it.
"""
from __future__ import annotations

import asyncio
import functools
import logging
import re
from datetime import timedelta
from typing import Any, Awaitable, Callable, List, NoReturn, Union

from msgengine.aio import SLICE, next_turn, run_sync

from pulsarfast.base.enums import (
    BatchingType,
    CompressionType,
    ConsumerCryptoFailureAction,
    ConsumerType,
    InitialPosition,
    PartitionsRoutingMode,
    ProducerAccessMode,
    RegexSubscriptionMode,
)
from pulsarfast.base.results import PulsarException as _SyncPulsarException
from pulsarfast.base.results import Result
from pulsarfast.client import Client as _SyncClient
from pulsarfast.consuming.aiotake import Takes
from pulsarfast.consuming.consumer import Consumer as _SyncConsumer
from pulsarfast.consuming.reader import Reader as _SyncReader
from pulsarfast.options.batchreceive import ConsumerBatchReceivePolicy
from pulsarfast.options.deadletterpolicy import ConsumerDeadLetterPolicy
from pulsarfast.options.keyshared import ConsumerKeySharedPolicy
from pulsarfast.producing.producer import Producer as _SyncProducer
from pulsarfast.schema import BytesSchema, Schema
from pulsarfast.transactions.transaction import DEFAULT_TIMEOUT_MS, TransactionId, TransactionState
from pulsarfast.transactions.transaction import Transaction as _SyncTransaction
from pulsarfast.wire.cryptokeys import CryptoKeyReader
from pulsarfast.wire.message import Message, MessageId

logger = logging.getLogger(__name__)

__all__ = [
    "PulsarException", "Producer", "Consumer", "Reader", "Client",
    "InitialPosition", "CompressionType", "PartitionsRoutingMode", "BatchingType", "ProducerAccessMode",
    "RegexSubscriptionMode", "ConsumerCryptoFailureAction", "Transaction", "TransactionId", "TransactionState",
]


class PulsarException(Exception):
    """The error of a ``pulsarfast.asyncio`` operation: ``error()`` is its ``Result``."""

    def __init__(self, result: Result, msg: str | None = None) -> None:
        self._result = result
        self._msg = msg

    def error(self) -> Result:
        """The Result code of the failed operation."""
        return self._result

    def __str__(self) -> str:
        if self._msg:
            return f"{self._result.value} {self._result.name}: {self._msg}"
        return f"{self._result.value} {self._result.name}"


def _raise_mapped(exc: _SyncPulsarException) -> NoReturn:
    """The sync API's exception as this module's PulsarException (same Result, same detail)."""
    detail = str(exc)
    raise PulsarException(exc.result, None if detail == exc.result.name else detail) from exc


def _closed(what: str) -> PulsarException:
    return PulsarException(Result.AlreadyClosed, what)


class _ClientEnd:
    """Whether the ``Client`` that made an object was closed or shut down, shared with its objects:
    from then on their calls fail with AlreadyClosed (or do nothing) as the official ones do, at
    once, though the sync client's shutdown runs in a task, at the loop's next turn."""

    __slots__ = ("ended", "shutting_down")

    def __init__(self) -> None:
        self.ended = False
        #: the task running the sync client's shutdown (None: shutdown() was not called)
        self.shutting_down: asyncio.Future[Any] | None = None

    def check(self) -> None:
        if self.ended:
            raise _closed("the client is closed")


_NOT_ENDED = _ClientEnd()  # (an object made outside a Client: never ended by anyone)


async def _call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Await the sync API's blocking call, its errors mapped to PulsarException."""
    try:
        return await run_sync(fn, *args, **kwargs)
    except _SyncPulsarException as exc:
        _raise_mapped(exc)


async def _mapped(awaitable: Awaitable[Any]) -> Any:
    try:
        return await awaitable
    except _SyncPulsarException as exc:
        _raise_mapped(exc)


_started: set[asyncio.Future[Any]] = set()


def _log_outcome(task: asyncio.Future[Any]) -> None:
    _started.discard(task)
    if not task.cancelled() and task.exception() is not None:
        logger.warning("%s", task.exception())


def _start(fn: Callable[[], Any]) -> asyncio.Future[Any]:
    """Run a call of the sync API the official API makes without waiting (shutdown, redeliver) in
    a task of the loop: a blocking call cannot run on the loop outside such a task."""
    task = asyncio.ensure_future(run_sync(fn))
    _started.add(task)  # (held until it ends: the loop keeps only weak references to tasks)
    task.add_done_callback(_log_outcome)
    return task


def _complete(future: asyncio.Future[Any], result: Result, value: Any) -> None:
    """Resolve future by an operation's outcome, on its loop's thread: value when result is Ok,
    else PulsarException(result); nothing when the future is done already (cancelled or resolved).
    The send path's callback (send_async's callbacks run on the loop's thread)."""
    if future.done():
        return
    if result == Result.Ok:
        future.set_result(value)
    else:
        future.set_exception(PulsarException(result))


def _set_future(future: asyncio.Future[Any], result: Result, value: Any) -> None:
    """The official module's helper, for code written against it: from any thread, resolve future
    (at its loop's next turn) with value when result is Ok, else with PulsarException(result); a
    future cancelled or resolved meanwhile is left as it is."""
    future.get_loop().call_soon_threadsafe(_complete, future, result, value)


class _Turns:
    """Awaits that return at once (a message already here) never give the loop a turn: a loop
    of them would hold it for as long as messages keep coming. After the backend's SLICE seconds
    without one, ``take_turn`` gives the loop one (behind the timers already due: next_turn)."""

    def __init__(self) -> None:
        self._since = 0.0

    async def take_turn(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        if now - self._since >= SLICE:
            if self._since:
                await next_turn()
            self._since = loop.time()


def _check_seek_target(messageid: Any) -> None:
    """The official seek()'s check: a MessageId or an int (a publish timestamp in ms)."""
    if not isinstance(messageid, (MessageId, int)):
        raise ValueError(f"invalid messageid type {type(messageid)}")


def _check_type(var_type: type, var: Any, name: str) -> None:
    """The official module's argument check (its ValueError and message)."""
    if not isinstance(var, var_type):
        raise ValueError("Argument %s is expected to be of type '%s' and not '%s'"
                         % (name, var_type.__name__, type(var).__name__))


class Transaction:
    """A transaction (pulsarfast's: the official client has none); made by ``Client.new_transaction``.
    ``async with await client.new_transaction() as txn:`` commits at a normal exit and aborts when
    the block raises. The sync ``pulsarfast.Transaction`` documents the semantics."""

    def __init__(self, txn: _SyncTransaction) -> None:
        self._txn = txn

    def __repr__(self) -> str:
        return repr(self._txn)

    @property
    def id(self) -> TransactionId:
        return self._txn.id

    @property
    def state(self) -> TransactionState:
        return self._txn.state

    @property
    def timeout_ms(self) -> int | None:
        return self._txn.timeout_ms

    async def commit(self) -> None:
        """Make its messages visible and its acknowledgements effective (raises PulsarException)."""
        await _call(self._txn.commit)

    async def abort(self) -> None:
        """Drop its messages and acknowledgements."""
        await _call(self._txn.abort)

    async def __aenter__(self) -> "Transaction":
        return self

    async def __aexit__(self, kind: Any, error: Any, traceback: Any) -> None:
        if kind is None:
            await self.commit()
            return
        try:
            await self.abort()
        except PulsarException as exc:
            logger.warning("transaction %s: abort after %s failed: %s", self._txn.id, kind.__name__, exc)


def _sync_transaction(transaction: Any) -> _SyncTransaction:
    if isinstance(transaction, Transaction):
        return transaction._txn
    if isinstance(transaction, _SyncTransaction):
        return transaction
    raise ValueError("transaction must be a Transaction, not %s" % type(transaction).__name__)


class Producer:
    """Publishes messages on a topic; made by ``Client.create_producer``."""

    def __init__(self, producer: _SyncProducer, schema: Schema) -> None:
        self._producer = producer
        self._schema = schema
        self._closed = False
        self._client_end = _NOT_ENDED  # (the Client that makes it sets its own)

    async def send(self, content: Any,
                   properties: dict | None = None,
                   partition_key: str | None = None,
                   ordering_key: str | None = None,
                   sequence_id: int | None = None,
                   replication_clusters: List[str] | None = None,
                   disable_replication: bool | None = None,
                   event_timestamp: int | None = None,
                   deliver_at: int | None = None,
                   deliver_after: timedelta | None = None, *,
                   transaction: Transaction | None = None) -> MessageId:
        """Send a message; returns its id once the broker has it (raises PulsarException). With
        ``transaction`` (pulsarfast's), the message is sent in it."""
        if self._closed:
            raise _closed("producer closed")
        self._client_end.check()
        producer = self._producer
        if transaction is not None:
            return await _call(producer.send, content, properties, partition_key, ordering_key, sequence_id,
                               replication_clusters, bool(disable_replication), event_timestamp, deliver_at,
                               deliver_after, transaction=_sync_transaction(transaction))
        if producer.settings.block_if_queue_full:  # (waiting for room: in a task of the backend)
            return await _call(producer.send, content, properties, partition_key, ordering_key, sequence_id,
                               replication_clusters, bool(disable_replication), event_timestamp, deliver_at,
                               deliver_after)
        # The message is queued here, at once (send_async never waits without block_if_queue_full), and
        # the receipt resolves a future of the loop: no task, no greenlet per send.
        sent: asyncio.Future[MessageId] = asyncio.get_running_loop().create_future()
        try:
            producer.send_async(content, functools.partial(_complete, sent), properties, partition_key,
                                ordering_key, sequence_id, replication_clusters, bool(disable_replication),
                                event_timestamp, deliver_at, deliver_after)
        except _SyncPulsarException as exc:
            _raise_mapped(exc)
        return await sent

    async def flush(self) -> None:
        """Wait until every message sent so far has the broker's receipt."""
        if self._closed:
            raise _closed("producer closed")
        self._client_end.check()
        await _call(self._producer.flush)

    async def close(self) -> None:
        """Close the producer (after its messages in flight); a second close raises AlreadyClosed, and
        so does a close once the client is closed or shut down, as the official one."""
        if self._closed:
            raise _closed("producer closed")
        self._closed = True
        self._client_end.check()
        await _call(self._producer.close)

    def topic(self) -> str:
        return self._producer.topic()

    def producer_name(self) -> str:
        return self._producer.producer_name()

    def last_sequence_id(self) -> int:
        return self._producer.last_sequence_id()

    def is_connected(self) -> bool:
        return self._producer.is_connected()


class Consumer:
    """Receives the messages of a subscription; made by ``Client.subscribe``."""

    def __init__(self, consumer: _SyncConsumer, schema: Schema) -> None:
        self._consumer = consumer
        self._schema = schema
        self._takes: Takes[Message] = Takes(consumer.receive, consumer.return_to_queue)
        self._turns = _Turns()
        self._client_end = _NOT_ENDED  # (the Client that makes it sets its own)

    async def receive(self) -> Message:
        """The next message (waits for ever; a cancelled wait loses no message)."""
        self._client_end.check()  # (also when messages wait in the queue, as the official one)
        ready = self._consumer.receive_ready()  # (one already here: no task, no greenlet)
        if ready is None:
            return await _mapped(self._takes.next())
        try:
            await self._turns.take_turn()
        except asyncio.CancelledError:
            self._consumer.return_to_queue(ready)  # (cancelled while giving the loop its turn: kept)
            raise
        return ready

    async def acknowledge(self, message: Union[Message, MessageId], *,
                          transaction: Transaction | None = None) -> None:
        """Acknowledge a message; with ``transaction`` (pulsarfast's), in it, the broker's answer awaited."""
        self._client_end.check()
        if transaction is not None:
            await _call(self._consumer.acknowledge, message, transaction=_sync_transaction(transaction))
            return
        try:
            self._consumer.acknowledge(message)  # (never waits: acknowledgements are grouped and sent later)
        except _SyncPulsarException as exc:
            _raise_mapped(exc)

    async def acknowledge_cumulative(self, message: Union[Message, MessageId], *,
                                     transaction: Transaction | None = None) -> None:
        self._client_end.check()
        if transaction is not None:
            await _call(self._consumer.acknowledge_cumulative, message, transaction=_sync_transaction(transaction))
            return
        await _call(self._consumer.acknowledge_cumulative, message)

    async def negative_acknowledge(self, message: Union[Message, MessageId]) -> None:
        """Ask for the message again after the negative-ack delay (on a closed consumer: nothing,
        as the official one)."""
        if self._consumer.closed:
            return
        await _call(self._consumer.negative_acknowledge, message)

    async def unsubscribe(self) -> None:
        self._client_end.check()
        await _call(self._consumer.unsubscribe)

    async def seek(self, messageid: Union[MessageId, int]) -> None:
        """Reset the subscription to a message id or a publish timestamp (ms)."""
        _check_seek_target(messageid)
        await _call(self._consumer.seek, messageid)

    async def close(self) -> None:
        await _call(self._consumer.close)

    async def get_last_message_id(self) -> MessageId:
        """The topic's last message id (asked of the broker); AlreadyClosed once the client is closed or
        shut down, else NotConnected once the consumer is closed, as the official one."""
        self._client_end.check()
        if self._consumer.closed:
            raise PulsarException(Result.NotConnected)
        result: MessageId = await _call(self._consumer.get_last_message_id)
        return result

    def redeliver_unacknowledged_messages(self) -> None:
        """Ask for every unacknowledged message again (a call that does not wait, as the official
        one: it is sent from a task of the loop, at its next turn); nothing once the client is
        closed or shut down, as the official one."""
        if self._client_end.ended:
            return
        _start(self._consumer.redeliver_unacknowledged_messages)

    def topic(self) -> str:
        return self._consumer.topic()

    def subscription_name(self) -> str:
        return self._consumer.subscription_name()

    def consumer_name(self) -> str:
        return self._consumer.consumer_name()


class Reader:
    """Reads a topic from a position; made by ``Client.create_reader``."""

    def __init__(self, reader: _SyncReader, schema: Schema) -> None:
        self._reader = reader
        self._schema = schema
        self._takes: Takes[Message] = Takes(reader.read_next, reader.consumer.return_to_queue)
        self._client_end = _NOT_ENDED  # (the Client that makes it sets its own)

    async def read_next(self) -> Message:
        """The next message (waits for ever; a cancelled wait loses no message)."""
        self._client_end.check()
        return await _mapped(self._takes.next())

    async def has_message_available(self) -> bool:
        self._client_end.check()
        result: bool = await _call(self._reader.has_message_available)
        return result

    async def seek(self, messageid: Union[MessageId, int]) -> None:
        _check_seek_target(messageid)
        await _call(self._reader.seek, messageid)

    async def close(self) -> None:
        await _call(self._reader.close)

    def topic(self) -> str:
        return self._reader.topic()

    def is_connected(self) -> bool:
        return self._reader.is_connected()


class Client:
    """The asyncio client (the official ``pulsar.asyncio.Client``); takes ``pulsarfast.Client``'s
    arguments. Make it in a coroutine: its connections run on the running loop."""

    def __init__(self, service_url, **kwargs) -> None:  # (the official signature: no annotations)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError("pulsarfast.asyncio.Client runs on the running event loop: make it in a coroutine "
                               "(or use the sync pulsarfast.Client)") from None
        self._client = _SyncClient(service_url, backend="asyncio", **kwargs)
        self._closed = False  # (close() was called)
        self._end = _ClientEnd()  # (closed or shut down: shared with the objects it makes)

    def _check_open(self) -> None:
        if self._closed or self._end.ended:
            raise _closed("client closed")

    async def create_producer(self, topic: str,
                              producer_name: str | None = None,
                              schema: Schema | None = None,
                              initial_sequence_id: int | None = None,
                              send_timeout_millis: int = 30000,
                              compression_type: CompressionType = CompressionType.NONE,
                              max_pending_messages: int = 1000,
                              max_pending_messages_across_partitions: int = 50000,
                              block_if_queue_full: bool = False,
                              batching_enabled: bool = True,
                              batching_max_messages: int = 1000,
                              batching_max_allowed_size_in_bytes: int = 128*1024,
                              batching_max_publish_delay_ms: int = 10,
                              chunking_enabled: bool = False,
                              message_routing_mode: PartitionsRoutingMode =
                              PartitionsRoutingMode.RoundRobinDistribution,
                              lazy_start_partitioned_producers: bool = False,
                              properties: dict | None = None,
                              batching_type: BatchingType = BatchingType.Default,
                              encryption_key: str | None = None,
                              crypto_key_reader: CryptoKeyReader | None = None,
                              access_mode: ProducerAccessMode = ProducerAccessMode.Shared,
                              message_router: Callable[[Message, int], int] | None = None,
                              *,
                              batching_eager: bool = False,
                              ) -> Producer:
        """A producer on topic (batching on by default, unlike the sync API's, as the official one).

        pulsarfast's own keyword: ``batching_eager=True`` also sends the open batch at the end of
        the loop's turn when none of the producer's batches waits for its receipt, rather than
        only when it is full, at ``batching_max_publish_delay_ms`` or at ``flush()`` (the official
        semantics, the default): a coroutine awaiting each send then waits a round trip, not the
        delay."""
        if batching_enabled and chunking_enabled:
            raise ValueError("Batching and chunking of messages can't be enabled together.")
        if schema is None:
            schema = BytesSchema()
        self._check_open()
        producer = await _call(
            self._client.create_producer, topic, producer_name=producer_name, schema=schema,
            initial_sequence_id=initial_sequence_id, send_timeout_millis=send_timeout_millis,
            compression_type=compression_type, max_pending_messages=max_pending_messages,
            max_pending_messages_across_partitions=max_pending_messages_across_partitions,
            block_if_queue_full=block_if_queue_full, batching_enabled=batching_enabled,
            batching_max_messages=batching_max_messages,
            batching_max_allowed_size_in_bytes=batching_max_allowed_size_in_bytes,
            batching_max_publish_delay_ms=batching_max_publish_delay_ms, chunking_enabled=chunking_enabled,
            message_routing_mode=message_routing_mode,
            lazy_start_partitioned_producers=lazy_start_partitioned_producers, properties=properties,
            batching_type=batching_type, encryption_key=encryption_key, crypto_key_reader=crypto_key_reader,
            access_mode=access_mode, message_router=message_router, batching_eager=batching_eager)
        made = Producer(producer, schema)
        made._client_end = self._end
        return made

    async def subscribe(self, topic: Union[str, List[str]],
                        subscription_name: str,
                        consumer_type: ConsumerType = ConsumerType.Exclusive,
                        schema: Schema | None = None,
                        receiver_queue_size: int = 1000,
                        max_total_receiver_queue_size_across_partitions: int = 50000,
                        consumer_name: str | None = None,
                        unacked_messages_timeout_ms: int | None = None,
                        broker_consumer_stats_cache_time_ms: int = 30000,
                        negative_ack_redelivery_delay_ms: int = 60000,
                        is_read_compacted: bool = False,
                        properties: dict | None = None,
                        initial_position: InitialPosition = InitialPosition.Latest,
                        crypto_key_reader: CryptoKeyReader | None = None,
                        replicate_subscription_state_enabled: bool = False,
                        max_pending_chunked_message: int = 10,
                        auto_ack_oldest_chunked_message_on_queue_full: bool = False,
                        start_message_id_inclusive: bool = False,
                        batch_receive_policy: ConsumerBatchReceivePolicy | None = None,
                        key_shared_policy: ConsumerKeySharedPolicy | None = None,
                        batch_index_ack_enabled: bool = False,
                        regex_subscription_mode: RegexSubscriptionMode = RegexSubscriptionMode.PersistentOnly,
                        dead_letter_policy: ConsumerDeadLetterPolicy | None = None,
                        crypto_failure_action: ConsumerCryptoFailureAction = ConsumerCryptoFailureAction.FAIL,
                        is_pattern_topic: bool = False) -> Consumer:
        """A consumer of topic (a name, a list of names, or a regex with is_pattern_topic=True)."""
        if schema is None:
            schema = BytesSchema()
        topics: str | list[str] | re.Pattern[str]
        if isinstance(topic, str):
            topics = re.compile(topic) if is_pattern_topic else topic
        elif isinstance(topic, list):
            if is_pattern_topic:
                raise ValueError("Argument 'topic' must be a string when 'is_pattern_topic' is True; lists of "
                                 "topics do not support pattern subscriptions")
            topics = topic
        else:
            raise ValueError("Argument 'topic' is expected to be of type 'str' or 'list'")
        self._check_open()
        consumer = await _call(
            self._client.subscribe, topics, subscription_name, consumer_type=consumer_type, schema=schema,
            receiver_queue_size=receiver_queue_size,
            max_total_receiver_queue_size_across_partitions=max_total_receiver_queue_size_across_partitions,
            consumer_name=consumer_name, unacked_messages_timeout_ms=unacked_messages_timeout_ms,
            broker_consumer_stats_cache_time_ms=broker_consumer_stats_cache_time_ms,
            negative_ack_redelivery_delay_ms=negative_ack_redelivery_delay_ms, is_read_compacted=is_read_compacted,
            properties=properties, initial_position=initial_position, crypto_key_reader=crypto_key_reader,
            replicate_subscription_state_enabled=replicate_subscription_state_enabled,
            max_pending_chunked_message=max_pending_chunked_message,
            auto_ack_oldest_chunked_message_on_queue_full=auto_ack_oldest_chunked_message_on_queue_full,
            start_message_id_inclusive=start_message_id_inclusive, batch_receive_policy=batch_receive_policy,
            key_shared_policy=key_shared_policy, batch_index_ack_enabled=batch_index_ack_enabled,
            regex_subscription_mode=regex_subscription_mode, dead_letter_policy=dead_letter_policy,
            crypto_failure_action=crypto_failure_action)
        subscribed = Consumer(consumer, schema)
        subscribed._client_end = self._end
        return subscribed

    async def create_reader(self, topic: str,
                            start_message_id: MessageId,
                            schema: Schema | None = None,
                            receiver_queue_size: int = 1000,
                            reader_name: str | None = None,
                            subscription_role_prefix: str | None = None,
                            is_read_compacted: bool = False,
                            crypto_key_reader: CryptoKeyReader | None = None,
                            start_message_id_inclusive: bool = False,
                            crypto_failure_action: ConsumerCryptoFailureAction =
                            ConsumerCryptoFailureAction.FAIL,
                            ) -> Reader:
        """A reader of topic from start_message_id (MessageId.earliest, MessageId.latest or a stored id)."""
        if schema is None:
            schema = BytesSchema()
        _check_type(MessageId, start_message_id, "start_message_id")
        self._check_open()
        reader = await _call(
            self._client.create_reader, topic, start_message_id, schema=schema,
            receiver_queue_size=receiver_queue_size, reader_name=reader_name,
            subscription_role_prefix=subscription_role_prefix, is_read_compacted=is_read_compacted,
            crypto_key_reader=crypto_key_reader, start_message_id_inclusive=start_message_id_inclusive,
            crypto_failure_action=crypto_failure_action)
        made = Reader(reader, schema)
        made._client_end = self._end
        return made

    def shutdown(self) -> None:
        """Close every connection at once (producers and consumers are not closed on the broker):
        from now on the client's and its objects' calls raise AlreadyClosed, as the official ones
        (the sync client's shutdown runs in a task, at the loop's next turn; close() waits for it)."""
        end = self._end
        end.ended = True
        if end.shutting_down is None and not self._closed:
            end.shutting_down = _start(self._client.shutdown)

    async def new_transaction(self, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> Transaction:
        """Open a transaction (pulsarfast's; see ``pulsarfast.Client.new_transaction``)."""
        self._check_open()
        return Transaction(await _call(self._client.new_transaction, timeout_ms))

    def transaction(self, txn_id: Any) -> Transaction:
        """A handle on a transaction opened elsewhere, by its id (see ``pulsarfast.Client.transaction``)."""
        self._check_open()
        return Transaction(self._client.transaction(txn_id))

    async def get_topic_partitions(self, topic: str) -> List[str]:
        """The topic's partition names (the topic itself when not partitioned)."""
        _check_type(str, topic, "topic")
        self._check_open()
        result: List[str] = await _call(self._client.get_topic_partitions, topic)
        return result

    async def close(self) -> None:
        """Close every producer, consumer and reader, then the connections; after shutdown(), wait
        for it and return; a second close raises AlreadyClosed. As the official one."""
        if self._closed:
            raise _closed("client closed")
        self._closed = True
        shutting_down = self._end.shutting_down
        if shutting_down is not None:
            await asyncio.wait([shutting_down])  # (a cancelled close leaves it running; its errors are logged)
            return
        try:
            await _call(self._client.close)
        finally:
            self._end.ended = True
