"""Consumers: ``Consumer`` (the public object: one subscription over one or
more topics, and every partition of a partitioned one) over one
``TopicConsumer`` per topic or partition.

A ``TopicConsumer`` owns one broker-side consumer: its consumer id (stable
for the client's life), the subscribe parameters, and its FLOW permits. It
turns MESSAGE frames into ``Message`` objects (unpacking batches, each entry
with its own id; a payload whose checksum does not match is reported, not
delivered, and asked again after the negative-ack delay) and hands them to
the ``Consumer``'s one queue, which ``receive()`` and the message listener
read.

Flow control. The budget of messages a consumer may hold unread is
``receiver_queue_size`` for one topic, and ``min(receiver_queue_size x n,
max_total_receiver_queue_size_across_partitions)`` over n partitions;
``msgengine.flow.FlowControl`` spreads it over the TopicConsumers (each
partition's share). A TopicConsumer grants its share at subscribe, then,
as the spec says, grants again what was read once half of its share has been
read.

Acknowledgement. Individual acks go to the partition the message came from,
grouped: those made within ``ack_grouping_time_ms`` (100 ms, as the official
C++ library's default) leave in one ACK command, and any still grouped go
before the consumer closes or, after a reconnect, right after the new
subscribe (0 sends each at once).
A message of a batch is acknowledged on the broker once every message of
the batch is (the broker knows whole entries). Negative acks are sent as one
redelivery request per partition when their delay has passed. When the
broker closes the consumer or the connection dies, the client's supervisor
subscribes again and grants permits afresh; messages of the earlier
subscription still in the queue are then dropped unread, since the broker
delivers again, in order, everything not acknowledged (as the official
client does).
"""
from __future__ import annotations

import collections
import logging
import queue as _queue
from typing import TYPE_CHECKING, Any, Callable

from msgengine.flow import FlowControl, LinkCredit
from msgengine.runtime import from_any_thread, monotonic

from . import proto
from .enums import ConsumerType, InitialPosition
from .errors import (
    AlreadyClosed,
    CumulativeAcknowledgementNotAllowedError,
    InvalidConfiguration,
    NotConnected,
    ProtocolError,
    PulsarException,
    Timeout,
)
from .link import SessionLink
from .message import BatchDelivery, Message, MessageId
from .wire import read_fields, split_batch_decoded

if TYPE_CHECKING:
    from .client import Client
    from .connection import BrokerConnection

logger = logging.getLogger(__name__)

MessageListener = Callable[["Consumer", Message], None]

_SUB_TYPES = {
    ConsumerType.Exclusive: proto.SUB_EXCLUSIVE,
    ConsumerType.Shared: proto.SUB_SHARED,
    ConsumerType.Failover: proto.SUB_FAILOVER,
    ConsumerType.KeyShared: proto.SUB_KEY_SHARED,
}
_CLOSED = object()  # wakes a receive() blocked when the consumer closes
#: message ids in one grouped ACK command at most
ACKS_PER_COMMAND = 1000
_ENCRYPTION_FIELDS = frozenset((13, 14, 15))  # MessageMetadata: encryption_keys, encryption_algo, encryption_param
_CHUNK_FIELDS = frozenset((27, 28, 29))  # num_chunks_from_msg, total_chunk_msg_size, chunk_id


class _ConsumerLink(SessionLink):
    """One broker-side life of a TopicConsumer on one connection."""

    def __init__(self, consumer: "TopicConsumer", conn: "BrokerConnection") -> None:
        super().__init__(conn)
        self.consumer = consumer

    def on_message(self, event: Any) -> None:
        self.consumer.message_arrived(self, event)

    def on_end_of_topic(self) -> None:
        logger.info("[%s] reached the end of the topic", self.consumer.topic)

    def on_active_change(self, is_active: bool) -> None:
        logger.debug("[%s] consumer %s active", self.consumer.topic, "is" if is_active else "is not")

    def _detach(self, reason: BaseException | None) -> None:
        self.conn.unregister_consumer(self.consumer.consumer_id, self)
        self.consumer.link_closed(self)

    def _close_command(self, request_id: int) -> bytes:
        return proto.close_consumer(self.consumer.consumer_id, request_id)


class TopicConsumer:
    """The consumer of one topic or partition; see the module docstring."""

    def __init__(self, owner: "Consumer", topic: str, partition: int) -> None:
        self.owner = owner
        self.client = owner.client
        self.topic = topic
        self.partition = partition
        self.consumer_id = self.client.new_consumer_id()
        self.credit = LinkCredit(self.consumer_id, max_credit=1 << 30)
        self._lock = self.client.backend.lock()
        self._link: _ConsumerLink | None = None
        self._read_since_flow = 0
        self._share = 0
        #: one more at each subscribe: messages of an earlier subscription still queued are dropped
        #: unread (the broker delivers again what was not acknowledged, in order)
        self.epoch = 0
        self._acks: list[bytes] = []  # individual acknowledgements waiting for the grouping interval
        self._ack_timer: Any = None
        self.closed = False
        self.corrupt_messages = 0

    def __repr__(self) -> str:
        return "<TopicConsumer %s id=%d>" % (self.topic, self.consumer_id)

    # -- subscribing (the supervisor's connect) ----------------------------------------

    def establish(self) -> _ConsumerLink:
        if self.closed:
            raise AlreadyClosed("consumer closed")
        conn = self.client.connection_for(self.topic)
        owner = self.owner
        link = _ConsumerLink(self, conn)
        self.epoch += 1  # (before SUBSCRIBE: what arrives from now on belongs to the new subscription)
        conn.register_consumer(self.consumer_id, link)
        try:
            conn.request(lambda rid: proto.subscribe(
                self.topic, owner.subscription, _SUB_TYPES[owner.consumer_type], self.consumer_id, rid,
                consumer_name=owner.consumer_name_given, initial_position=int(owner.initial_position),
                read_compacted=owner.read_compacted, metadata=owner.properties,
                replicate_subscription_state=owner.replicate_subscription_state,
                key_shared_mode=0 if owner.consumer_type == ConsumerType.KeyShared else None,
            ), self.client.operation_timeout)
        except BaseException:
            conn.unregister_consumer(self.consumer_id, link)
            raise
        with self._lock:
            closed = self.closed
            if not closed:
                self._link = link
                self._read_since_flow = 0
                permits = self._share
        if closed:  # (closed while subscribing: the broker's consumer goes too)
            link.close()
            raise AlreadyClosed("consumer closed")
        if permits > 0:
            self._flow(link, permits)
        self.send_acks()  # (acknowledgements made while disconnected)
        return link

    def link_closed(self, link: _ConsumerLink) -> None:
        # (no lock: a failed write closes the connection, and the writer may hold it)
        if self._link is link:
            self._link = None

    def is_connected(self) -> bool:
        link = self._link
        return link is not None and not link.closed

    # -- permits ------------------------------------------------------------------------

    def set_share(self, share: int) -> None:
        """Flow control gave this partition a new share of the budget."""
        with self._lock:
            grow = share - self._share
            self._share = share
            link = self._link
        if grow > 0 and link is not None and not link.closed:
            self._flow(link, grow)

    def _flow(self, link: _ConsumerLink, permits: int) -> None:
        try:
            link.conn.send_command(proto.flow(self.consumer_id, permits))
        except PulsarException:
            pass  # the connection closed: the next subscribe grants permits afresh

    def message_read(self, count: int = 1) -> None:
        """The application took one of this partition's messages from the queue (or ``count``
        messages were skipped unread)."""
        with self._lock:
            self.credit.answered += count
            self._read_since_flow += count
            if self._read_since_flow * 2 < max(self._share, 1):
                return
            permits, self._read_since_flow = self._read_since_flow, 0
            link = self._link
        if link is not None and not link.closed:
            self._flow(link, permits)

    # -- messages (on the connection's reading task) -----------------------------------------

    def message_arrived(self, link: _ConsumerLink, event: Any) -> None:
        if not event.checksum_ok:
            self._refuse(event, "failed its checksum")
            return
        try:
            messages = self._unpack(event)
        except ProtocolError as exc:
            self._refuse(event, "cannot be read (%s)" % exc)
            return
        self.credit.arrived += len(messages)
        self.owner.deliver(self, self.epoch, messages)

    def _refuse(self, event: Any, why: str) -> None:
        """A message that cannot be delivered: reported, its permit given back,
        and asked for again after the negative-ack delay (never acknowledged)."""
        self.corrupt_messages += 1
        logger.error("[%s] message %d:%d %s: not delivered, asked again after the negative-ack delay",
                     self.topic, event.ledger_id, event.entry_id, why)
        batch_size = event.fields[12] if event.fields is not None else None
        # (the broker counts a batch's messages, as the int32 it parses: a larger count is not one it used)
        self._skip_unread(batch_size if batch_size and 0 < batch_size < 1 << 31 else 1)
        self.owner.nack_entry(self, event.ledger_id, event.entry_id)

    def _skip_unread(self, count: int) -> None:
        """Messages that will not reach the queue still free their permits (in one go: a batch's
        count comes from the producer's metadata and may be anything up to 2**31-1)."""
        self.message_read(count)

    def _unpack(self, event: Any) -> list[Message]:
        (_consumer_id, ledger, entry, _partition, _batch_index, redelivery_count, producer_name, sequence_id,
         publish_time, properties, partition_key, event_time, batch_size, compression, _uncompressed_size,
         ordering_key, null_value, schema_version, generic) = event.fields
        if generic:
            numbers = set(read_fields(event.metadata)[::2])
            if numbers & _ENCRYPTION_FIELDS:
                raise ProtocolError("encrypted messages are not supported")
            if numbers & _CHUNK_FIELDS:
                raise ProtocolError("chunked messages are not supported")
        if compression:
            raise ProtocolError("compression type %d is not supported yet" % compression)
        topic = self.topic
        partition = self.partition
        if batch_size is None:
            return [Message(
                event.payload, MessageId(partition, ledger, entry, -1, 0, topic), topic, properties=properties,
                partition_key=partition_key, ordering_key=ordering_key, publish_time=publish_time,
                event_time=event_time, redelivery_count=redelivery_count, producer_name=producer_name,
                sequence_id=sequence_id, schema_version=schema_version, null_value=null_value,
            )]
        messages = []
        skipped = 0
        waiting: set[int] = set()
        delivery = BatchDelivery(waiting)
        for index, (single, body) in enumerate(split_batch_decoded(event.payload, batch_size)):
            (entry_properties, entry_key, _size, compacted_out, entry_event_time, entry_ordering_key,
             entry_sequence_id, entry_null) = single
            if compacted_out:
                skipped += 1
                continue
            waiting.add(index)
            message_id = MessageId(partition, ledger, entry, index, batch_size, topic)
            message_id.batch = delivery
            messages.append(Message(
                body, message_id, topic,
                properties=entry_properties, partition_key=entry_key, ordering_key=entry_ordering_key,
                publish_time=publish_time, event_time=entry_event_time or event_time,
                redelivery_count=redelivery_count, producer_name=producer_name,
                sequence_id=entry_sequence_id if entry_sequence_id is not None else sequence_id + index,
                schema_version=schema_version, null_value=entry_null,
            ))
        if skipped:
            self._skip_unread(skipped)
        return messages

    # -- acknowledging --------------------------------------------------------------------

    def ack(self, message_id: MessageId) -> None:
        index = message_id.batch_index()
        if index >= 0:
            # the broker hears of a batch once every message of its delivery is acknowledged; an id
            # of a batch that did not come from a delivery (built or deserialized) cannot say that,
            # so it acknowledges nothing on the broker: a duplicate later, never a loss
            batch = message_id.batch
            if batch is None:
                logger.debug("[%s] %s: a batch message's id without its delivery; not acknowledged on the broker",
                             self.topic, message_id)
                return
            with self._lock:
                last = batch.acknowledge(index)
            if not last:
                return
        self._send_ack(proto.ACK_INDIVIDUAL, message_id.to_proto(with_batch_index=False))

    def ack_cumulative(self, message_id: MessageId) -> None:
        index = message_id.batch_index()
        ledger, entry = message_id.entry_key()
        if index >= 0 and index < message_id.batch_size() - 1:
            # not the batch's last message: everything before this batch is acknowledged
            if entry == 0:
                return
            entry -= 1
        self._send_ack(proto.ACK_CUMULATIVE, proto.message_id_data(ledger & ((1 << 64) - 1), entry & ((1 << 64) - 1),
                                                                   self.partition))

    def _send_ack(self, ack_type: int, message_id_bytes: bytes) -> None:
        grouping = self.owner.ack_grouping_seconds
        if ack_type == proto.ACK_INDIVIDUAL and grouping > 0:
            with self._lock:
                self._acks.append(message_id_bytes)
                if self._ack_timer is not None or self.closed:
                    return
                self._ack_timer = self.client.backend.call_later(grouping, self._acks_due)
            return
        link = self._link
        if link is None or link.closed:
            return  # not connected: the broker redelivers what it did not hear acknowledged
        try:
            link.conn.send_command(proto.ack(self.consumer_id, ack_type, [message_id_bytes]))
        except PulsarException:
            pass

    def _acks_due(self) -> None:
        """The grouping interval's timer (which must not block): the acks go in a task."""
        self.client.backend.spawn(self.send_acks)

    def send_acks(self) -> None:
        """Send the grouped individual acknowledgements, in one ACK command per
        thousand; while disconnected they wait for the next subscription."""
        with self._lock:
            timer, self._ack_timer = self._ack_timer, None
            link = self._link
            if not self._acks or link is None or link.closed:
                return
            acks, self._acks = self._acks, []
        if timer is not None:
            timer.cancel()
        try:
            for start in range(0, len(acks), ACKS_PER_COMMAND):
                link.conn.send_command(proto.ack(self.consumer_id, proto.ACK_INDIVIDUAL,
                                                 acks[start:start + ACKS_PER_COMMAND]))
        except PulsarException:
            with self._lock:  # the connection closed: they go after the next subscribe
                self._acks[:0] = acks

    def redeliver(self, entries: list[tuple[int, int]]) -> None:
        link = self._link
        if link is None or link.closed:
            return
        ids = [proto.message_id_data(ledger, entry, self.partition) for ledger, entry in entries]
        try:
            link.conn.send_command(proto.redeliver_unacknowledged(self.consumer_id, ids))
        except PulsarException:
            pass

    # -- closing --------------------------------------------------------------------------

    def unsubscribe(self) -> None:
        """Remove the subscription on the broker; raises (and stays open) when that fails."""
        link = self._link
        if link is None or link.closed:
            raise NotConnected("%s is reconnecting: the subscription cannot be removed now" % self.topic)
        link.conn.request(lambda rid: proto.unsubscribe(self.consumer_id, rid), self.client.operation_timeout)
        self.closed = True
        link.close_link()  # (the broker closed its consumer with the subscription)

    def close(self) -> None:
        self.send_acks()  # (acknowledgements still grouped go before the close)
        with self._lock:
            if self.closed:
                return
            self.closed = True
            link = self._link
            timer, self._ack_timer = self._ack_timer, None
        if timer is not None:
            timer.cancel()
        if link is not None and not link.closed:
            try:
                link.conn.request(lambda rid: proto.close_consumer(self.consumer_id, rid),
                                  self.client.operation_timeout)
            finally:
                link.close_link()


class _NegativeAcks:
    """Entries to redeliver once their delay has passed, sent per partition in one request."""

    def __init__(self, owner: "Consumer", delay: float) -> None:
        self.owner = owner
        self.delay = delay
        self._due: dict[tuple[TopicConsumer, int, int], float] = {}
        self._lock = owner.client.backend.lock()
        self._timer: Any = None

    def add(self, consumer: TopicConsumer, ledger: int, entry: int) -> None:
        with self._lock:
            self._due[(consumer, ledger, entry)] = monotonic() + self.delay
            if self._timer is None:
                self._timer = self.owner.client.backend.call_later(self._tick_every(), self._tick)

    def _tick_every(self) -> float:
        return max(0.05, min(self.delay / 3, 1.0)) if self.delay > 0 else 0.05

    def _tick(self) -> None:
        self.owner.client.backend.spawn(self._send_due)

    def _send_due(self) -> None:
        now = monotonic()
        by_consumer: dict[TopicConsumer, list[tuple[int, int]]] = collections.defaultdict(list)
        with self._lock:
            self._timer = None
            for key, due in list(self._due.items()):
                if due <= now:
                    del self._due[key]
                    by_consumer[key[0]].append((key[1], key[2]))
            if self._due and not self.owner.closed:
                self._timer = self.owner.client.backend.call_later(self._tick_every(), self._tick)
        for consumer, entries in by_consumer.items():
            consumer.redeliver(entries)

    def close(self) -> None:
        with self._lock:
            timer, self._timer = self._timer, None
            self._due.clear()
        if timer is not None:
            timer.cancel()


class Consumer:
    """A subscription over one or more topics; see the module docstring."""

    def __init__(self, client: "Client", topic_label: str, subscription: str, *, consumer_type: ConsumerType,
                 receiver_queue_size: int, max_total_receiver_queue_size_across_partitions: int,
                 consumer_name: str | None, negative_ack_redelivery_delay_ms: int, initial_position: InitialPosition,
                 read_compacted: bool, properties: dict[str, str] | None, replicate_subscription_state: bool,
                 message_listener: MessageListener | None, ack_grouping_time_ms: int = 100) -> None:
        self.client = client
        self.backend = client.backend
        self._topic_label = topic_label
        self.subscription = subscription
        self.consumer_type = consumer_type
        self.consumer_name_given = consumer_name
        self.initial_position = initial_position
        self.read_compacted = read_compacted
        self.properties = dict(properties or {})
        self.replicate_subscription_state = replicate_subscription_state
        self.receiver_queue_size = max(1, receiver_queue_size)
        self.max_total_queue = max(1, max_total_receiver_queue_size_across_partitions)
        self._listener = message_listener
        #: individual acknowledgements are sent together at most this often (0: each at once)
        self.ack_grouping_seconds = max(0, ack_grouping_time_ms) / 1000.0
        self._queue = self.backend.queue()
        self._topics: list[TopicConsumer] = []
        self._by_topic: dict[str, TopicConsumer] = {}
        self._flow = FlowControl(self.receiver_queue_size)
        self._nacks = _NegativeAcks(self, negative_ack_redelivery_delay_ms / 1000.0)
        self._listener_task: Any = None
        self.closed = False

    # -- set-up (by the client) -------------------------------------------------------------

    def add_topic(self, topic: str, partition: int) -> TopicConsumer:
        consumer = TopicConsumer(self, topic, partition)
        self._topics.append(consumer)
        self._by_topic[topic] = consumer
        self._flow.add_link(consumer.credit)
        return consumer

    def spread_budget(self) -> None:
        """Each TopicConsumer's share of the budget (flow control decides)."""
        count = len(self._topics)
        budget = self.receiver_queue_size if count <= 1 else min(self.receiver_queue_size * count, self.max_total_queue)
        self._flow.set_max_in_flight(budget)
        for consumer in self._topics:
            consumer.set_share(self._flow.share(consumer.credit))

    def topic_consumers(self) -> list[TopicConsumer]:
        return list(self._topics)

    def start_listener(self) -> None:
        if self._listener is not None:
            self._listener_task = self.backend.spawn(self._run_listener)

    # -- delivery (on connection reading tasks) ------------------------------------------------

    def deliver(self, consumer: TopicConsumer, epoch: int, messages: list[Message]) -> None:
        put = self._queue.put
        for message in messages:
            put((consumer, epoch, message))

    def nack_entry(self, consumer: TopicConsumer, ledger: int, entry: int) -> None:
        self._nacks.add(consumer, ledger, entry)

    # -- the official API --------------------------------------------------------------------

    def topic(self) -> str:
        return self._topic_label

    def subscription_name(self) -> str:
        return self.subscription

    def consumer_name(self) -> str:
        return self.consumer_name_given or ""

    @from_any_thread()
    def receive(self, timeout_millis: int | None = None) -> Message:
        """The next message; waits at most timeout_millis (then raises Timeout), or for ever."""
        if self._listener is not None:
            raise InvalidConfiguration("receive() cannot be used with a message_listener")
        if timeout_millis is not None and (not isinstance(timeout_millis, int) or isinstance(timeout_millis, bool)):
            raise ValueError("Argument timeout_millis is expected to be of type 'int' and not '%s'"
                             % type(timeout_millis).__name__)
        self._check_open()
        get = self._queue.get
        deadline = None if timeout_millis is None else monotonic() + max(0, timeout_millis) / 1000.0
        while True:
            try:
                item = get() if deadline is None else get(timeout=max(0.0, deadline - monotonic()))
            except _queue.Empty:
                raise Timeout("no message within %d ms" % timeout_millis) from None
            if item is _CLOSED:
                self._queue.put(_CLOSED)  # (wakes the next waiter too)
                raise AlreadyClosed("consumer closed")
            message = self._read(item)
            if message is not None:
                return message

    @staticmethod
    def _read(item: tuple[TopicConsumer, int, Message]) -> Message | None:
        """A queued message taken by the application (None: one of an earlier subscription, dropped)."""
        consumer, epoch, message = item
        if epoch != consumer.epoch:
            return None
        consumer.message_read()
        return message

    def _run_listener(self) -> None:
        listener = self._listener
        assert listener is not None
        get = self._queue.get
        while True:
            item = get()
            if item is _CLOSED:
                return
            message = self._read(item)
            if message is None:
                continue
            try:
                listener(self, message)
            except Exception:
                logger.exception("[%s] message_listener raised", self._topic_label)

    def _topic_consumer(self, message_id: MessageId) -> TopicConsumer:
        if message_id.topic is not None:
            consumer = self._by_topic.get(message_id.topic)
            if consumer is not None:
                return consumer
        if len(self._topics) == 1:
            return self._topics[0]
        partition = message_id.partition()
        for consumer in self._topics:
            if consumer.partition == partition and partition >= 0:
                return consumer
        raise InvalidConfiguration("message id %s does not belong to this consumer's topics" % (message_id,))

    @staticmethod
    def _id_of(message: Message | MessageId) -> MessageId:
        if isinstance(message, Message):
            return message.message_id()
        if isinstance(message, MessageId):
            return message
        raise ValueError("expected a Message or a MessageId, not %s" % type(message).__name__)

    @from_any_thread()
    def acknowledge(self, message: Message | MessageId) -> None:
        """Acknowledge one message (the broker will not deliver it again)."""
        self._check_open()
        message_id = self._id_of(message)
        self._topic_consumer(message_id).ack(message_id)

    @from_any_thread()
    def acknowledge_cumulative(self, message: Message | MessageId) -> None:
        """Acknowledge this message and every one before it (of its partition)."""
        self._check_open()
        if self.consumer_type in (ConsumerType.Shared, ConsumerType.KeyShared):
            raise CumulativeAcknowledgementNotAllowedError("cumulative acknowledgement needs an Exclusive or "
                                                           "Failover subscription")
        message_id = self._id_of(message)
        self._topic_consumer(message_id).ack_cumulative(message_id)

    @from_any_thread()
    def negative_acknowledge(self, message: Message | MessageId) -> None:
        """Ask for the message again after negative_ack_redelivery_delay_ms."""
        self._check_open()
        message_id = self._id_of(message)
        ledger, entry = message_id.entry_key()
        self._nacks.add(self._topic_consumer(message_id), ledger, entry)

    @from_any_thread()
    def redeliver_unacknowledged_messages(self) -> None:
        """Ask the broker to deliver again every message not acknowledged yet."""
        self._check_open()
        for consumer in self._topics:
            consumer.redeliver([])

    def is_connected(self) -> bool:
        return not self.closed and all(c.is_connected() for c in self._topics)

    @from_any_thread()
    def unsubscribe(self) -> None:
        """Remove the subscription from the broker (and close this consumer).
        Raises, leaving the consumer open, when the broker cannot be told
        (a partition reconnecting: NotConnected)."""
        self._check_open()
        for consumer in self._topics:
            if not consumer.closed:
                consumer.unsubscribe()
                self.client.forget_consumer(consumer)
        self._shutdown()

    @from_any_thread()
    def close(self) -> None:
        """Close on the broker; messages received and not acknowledged are delivered again to others."""
        if self.closed:
            return
        if self.client.forked():
            self.closed = True  # (the broker-side consumer is the parent's)
            return
        self._shutdown()

    def abort(self) -> None:
        """The client shut down: blocked and later receive() calls raise AlreadyClosed."""
        self.closed = True
        self._nacks.close()
        self._queue.put(_CLOSED)

    def _shutdown(self) -> None:
        self.closed = True
        self._nacks.close()
        for consumer in self._topics:
            self.client.forget_consumer(consumer)
            try:
                consumer.close()
            except PulsarException as exc:
                logger.warning("[%s] closing the consumer on the broker: %s", consumer.topic, exc)
        self._queue.put(_CLOSED)
        self.client.consumer_closed(self)

    def _check_open(self) -> None:
        self.client.check_usable()
        if self.closed:
            raise AlreadyClosed("consumer closed")
