"""Consumers: ``Consumer`` (the public object: one subscription over one or
more topics, and every partition of a partitioned one) over one
``TopicConsumer`` per topic or partition.

A ``TopicConsumer`` owns one broker-side consumer: its consumer id (stable
for the client's life), the subscribe parameters, and its FLOW permits. It
turns MESSAGE frames into ``Message`` objects (unpacking batches, each entry
with its own id, after decompressing a compressed payload; a payload whose
checksum does not match, or that does not decompress, is reported, not
delivered, and asked again after the negative-ack delay) and hands them to
the ``Consumer``'s one queue, which ``receive()`` and the message listener
read. The chunks of a chunked message are put back together first
(``pulsarfast.wire.chunks``): the message is handed out whole, and acknowledging
(or negatively acknowledging) it does so for each of its chunks.

Flow control. The budget of messages a consumer may hold unread is
``receiver_queue_size`` for one topic, and ``min(receiver_queue_size x n,
max_total_receiver_queue_size_across_partitions)`` over n partitions;
``msgengine.flow.FlowControl`` spreads it over the TopicConsumers (each
partition's share). Permits the share allows and the broker does not hold yet
are owed: the messages read since the last grant, and at subscribe all of the
share but one permit (the first FLOW is 1), until the first entry shows how
large entries are. What counts is how the broker dispatches: it counts
permits in messages, reads ``min(permits, 100)`` entries when its count is
above zero, sends those the count pays for (a whole batch as long as the count
is above zero, taking it below) and reads the rest again later. So:

- entries of one message: what is owed goes once it reaches half of the
  share, as the official clients do (the broker's count then never falls below
  half the share, so its reads of up to 100 entries are whole, and it handles a
  fifth of the FLOW commands a tenth made it handle);
- batches of up to a tenth of the share: what is owed goes once it reaches a
  tenth of the share (with larger grants a fast reader waits less for the
  broker);
- larger batches: the only grant is the one that lifts the broker's count from
  zero or below to exactly 1, as soon as enough is owed (when a batch arrives,
  or at the read that makes it so), and none while the count is above zero
  (the broker reads for it, or an entry is on the wire). Each read is then one
  entry, read once. A grant added while the broker's read was being scheduled
  used to make it read up to a hundred 1000-message entries to send one (7 to
  13 entries read from storage per entry sent, by the broker's
  ``pulsar_ml_cache_pendingreads_entries_read_total``; now 1).

The consumer estimates the broker's count as permits granted minus the
messages of the entries arrived since the subscribe; entries still on the wire
make the estimate high, never low, so a held grant goes once they arrive. As a
safety net, a ``receive()`` (or the listener) that waits ``OWED_RELEASE_SECONDS``
with nothing arriving grants everything owed.

Acknowledgement. Individual acks go to the partition the message came from,
grouped: those made within ``ack_grouping_time_ms`` (100 ms, as the official
C++ library's default) leave in one ACK command, and any still grouped go
before the consumer closes or, after a reconnect, right after the new
subscribe (0 sends each at once).
A message of a batch is acknowledged on the broker once every message of
the batch is (the broker knows whole entries). With ``batch_index_ack_enabled``
(and the broker's ``acknowledgmentAtBatchIndexLevelEnabled``) each
acknowledgement of a batch's message before its last also goes, with the
entry's ack set: a bit set (int64 words) of the indexes still not
acknowledged (``message.index_words``); a cumulative one inside a batch
sends the indexes after it. Whatever the option, a batch the broker
delivers with an ack set (CommandMessage's, looked for only when the
command's bytes may hold its tag) leaves out the messages whose bit is clear. Negative acks are sent as one
redelivery request per partition when their delay has passed. When the
broker closes the consumer or the connection dies, the client's supervisor
subscribes again and grants permits afresh; messages of the earlier
subscription still in the queue are then dropped unread, since the broker
delivers again, in order, everything not acknowledged (as the official
client does). So are they, their permits given back, when everything not
acknowledged is asked for again (``redeliver_unacknowledged_messages``, and
any redelivery on an Exclusive or Failover subscription, where the broker
rewinds to the first message not acknowledged).

``batch_receive()`` takes messages from the same queue as ``receive()``, one at a
time, until the ``batch_receive_policy`` (batchreceive.py) says the batch is
complete; a message that would take it past its bytes goes back to the front
of the queue. A KeyShared subscription's SUBSCRIBE carries its
``key_shared_policy`` (keyshared.py): the mode, a Sticky consumer's hash
ranges and ``allow_out_of_order_delivery``.

Delivery controls. With ``unacked_messages_timeout_ms`` or a
``dead_letter_policy``, each TopicConsumer has a ``redelivery`` object
(``redelivery.PartitionRedelivery``) that a few hooks here call: a message
handed to the application, an entry arriving, acknowledged, negatively
acknowledged or asked for again, a new subscription. Without either, the
hooks cost one ``is None`` test.

Positions. ``seek`` (a message id or a publish time) resets the
subscription on the broker, which closes the consumer; it subscribes again
and what was queued from before the seek is dropped unread. Seeking a
consumer to a message id is exclusive, as in the official client, unless it
was made with ``start_message_id_inclusive`` (then the target comes next,
inside a batch too): the broker delivers from that id's entry, and what lies
before the target by the official client's rule (``StartPosition.seek_skips``)
is dropped, unacknowledged as there, whenever it comes until the next seek; a
reader's seek keeps its ``start_message_id_inclusive``. A reader's
subscription (``durable=False``, reader.py) starts at a ``StartPosition``
(startposition.py) and, after a reconnect, after the last message it handed out;
what the broker delivers from before the position (the start entry comes
whole) is dropped on arrival.

Interrupts. Ctrl-C during a blocked ``receive()`` raises ``ReceiveInterrupted``, both the
official ``Interrupted`` and a ``KeyboardInterrupt``. Under the threads backend a receive()
blocked on the main thread is woken at once by a signal that lands on another thread
(``_SignalWake``); the hub's loop does that under gevent.

Counts (``Consumer.stats()``, which the metrics collector reads at scrape
time): messages received (the flow-control record's, per arrived batch) and
acknowledged, negatively acknowledged and cumulatively acknowledged by the
application, per topic or partition. They are plain int additions without a
lock: with the GIL an attribute's ``+=`` is not interrupted by another thread.
"""
from __future__ import annotations

import collections
import functools
import itertools
import logging
import os
import queue as _queue
import signal
import threading
import weakref
from typing import Any, Callable, TypedDict

from msgengine.flow import FlowControl, LinkCredit
from msgengine.primitives import lock_or_none
from msgengine.runtime import ProcessLock, from_any_thread, monotonic, on_fork_in_child, start_os_thread

from pulsarfast.base.enums import ConsumerCryptoFailureAction, ConsumerType, InitialPosition
from pulsarfast.base.parts import HandedOut
from pulsarfast.base.results import (
    AlreadyClosed,
    BrokerMetadataError,
    CumulativeAcknowledgementNotAllowedError,
    ForkedError,
    ReceiveInterrupted,
    InvalidConfiguration,
    NotConnected,
    OperationNotSupported,
    ProtocolError,
    PulsarException,
    Timeout,
    from_server_error,
)
from pulsarfast.consuming.redelivery import PartitionRedelivery, Redelivery
from pulsarfast.network.connection import BrokerConnection
from pulsarfast.network.link import SessionLink
from pulsarfast.network.owner import Owner
from pulsarfast.options.settings import ConsumerSettings
from pulsarfast.options.startposition import StartPosition, is_earliest, is_latest
from pulsarfast.transactions.transaction import Transaction
from pulsarfast.wire import proto
from pulsarfast.wire.chunks import ChunkAssembler, ChunkedMessageId
from pulsarfast.wire.codec import read_fields, split_batch_decoded
from pulsarfast.wire.compression import decompress
from pulsarfast.wire.crypto import encryption_context, encryption_metadata
from pulsarfast.wire.message import BatchDelivery, Message, MessageId, batch_messages, index_words

logger = logging.getLogger(__name__)

MessageListener = Callable[["Consumer", Message], None]

_SUB_TYPES = {
    ConsumerType.Exclusive: proto.SUB_EXCLUSIVE,
    ConsumerType.Shared: proto.SUB_SHARED,
    ConsumerType.Failover: proto.SUB_FAILOVER,
    ConsumerType.KeyShared: proto.SUB_KEY_SHARED,
}
_CLOSED = object()  # wakes a receive() blocked when the consumer closes
_WAKE = object()  # wakes a receive() blocked on the main thread: a signal arrived (see _SignalWake)
#: where the broker redelivers the entries asked for; on the others it rewinds to the first not acknowledged
_REDELIVER_BY_ID = frozenset((ConsumerType.Shared, ConsumerType.KeyShared))
#: message ids in one grouped ACK command at most
ACKS_PER_COMMAND = 1000
#: permits go back to the broker each time this fraction of a share was read (a tenth): a batch as
#: large as the receiver queue is then asked for while nine tenths of the one before are still unread
FLOW_FRACTION = 10
#: with entries of one message (an unbatched producer's) permits go back each time half of the share
#: was read, as the official clients do: every FLOW wakes the broker's connection thread and
#: schedules a read, and with the broker's count never below half the share its reads (at most 100
#: entries) are whole either way. A tenth wrote five times as many FLOW commands, and the broker's
#: thread serving the consumer made about twice the system calls per message
SINGLE_MESSAGE_FLOW_FRACTION = 2
#: a receive() (or the listener) that waited this long with nothing arriving grants every permit still owed
OWED_RELEASE_SECONDS = 1.0
_ENCRYPTION_FIELDS = frozenset((13, 14, 15))  # MessageMetadata: encryption_keys, encryption_algo, encryption_param
_CHUNK_FIELDS = frozenset((27, 28, 29))  # num_chunks_from_msg, total_chunk_msg_size, chunk_id


class _SignalWake:
    """Under the threads backend, wakes a ``receive()`` blocked on the main thread when a signal
    lands on another thread. Python runs signal handlers on the main thread only, at its next
    bytecode; a signal the kernel delivers to another thread does not end the main thread's wait,
    which would notice it only when it next wakes. While the main thread blocks in receive(), the
    signal module's wakeup fd (``signal.set_wakeup_fd``, which the C-level handler writes to
    whichever thread runs it) is a pipe read by one watcher thread, which puts ``_WAKE`` in the
    waiting consumers' queues: the main thread wakes and runs the handler (Ctrl-C's raises).
    Used only when no wakeup fd is set already (an asyncio loop's, say): that one is left alone."""

    def __init__(self) -> None:
        self._lock = ProcessLock()  # (fresh in a forked child)
        self._queues: dict[int, Any] = {}  # (id -> queue of the receive() calls waiting)
        self._write_fd = -1

    def _start(self) -> int:
        """Under the lock: the pipe and its watcher thread, made once per process."""
        if self._write_fd < 0:
            read_fd, write_fd = os.pipe()
            os.set_blocking(write_fd, False)
            start_os_thread(functools.partial(self._watch, read_fd))
            self._write_fd = write_fd
        return self._write_fd

    def _watch(self, read_fd: int) -> None:
        while os.read(read_fd, 512):
            with self._lock:
                queues = list(self._queues.values())
            for waiting in queues:
                waiting.put(_WAKE)

    def enter(self, waiting: Any) -> bool:
        """On the main thread, before receive() blocks on ``waiting``; False: not armed (a wakeup
        fd of someone else's is set)."""
        with self._lock:
            write_fd = self._start()
            previous = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
            if previous not in (-1, write_fd):
                signal.set_wakeup_fd(previous)
                return False
            self._queues[id(waiting)] = waiting
            return True

    def leave(self, waiting: Any) -> None:
        with self._lock:
            self._queues.pop(id(waiting), None)
            if not self._queues:  # (enter and leave run on the main thread only: no other receive() is armed)
                signal.set_wakeup_fd(-1)

    def after_fork_in_child(self) -> None:
        self._queues.clear()
        self._write_fd = -1  # (the watcher thread is the parent's)


_signal_wake = _SignalWake()
on_fork_in_child(_signal_wake)


class ConsumerTopicStats(TypedDict):
    """One topic's (or partition's) counts in ``Consumer.stats()``."""

    received: int  #: messages that arrived from the broker for the application
    acknowledged: int  #: acknowledge() calls
    negatively_acknowledged: int  #: negative_acknowledge() calls
    acknowledged_cumulative: int  #: acknowledge_cumulative() calls
    corrupt: int  #: messages refused (bad checksum, not decompressible, unsupported)
    connected: bool


class ConsumerStats(TypedDict):
    """``Consumer.stats()``: the subscription, whether it is closed, totals and the counts per topic."""

    subscription: str
    closed: bool
    received: int
    acknowledged: int
    negatively_acknowledged: int
    acknowledged_cumulative: int
    corrupt: int
    topics: dict[str, ConsumerTopicStats]


class _ConsumerLink(SessionLink):
    """One broker-side life of a TopicConsumer on one connection."""

    def __init__(self, consumer: "TopicConsumer", conn: BrokerConnection) -> None:
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


def _key_shared_arguments(settings: ConsumerSettings) -> dict[str, Any]:
    """proto.subscribe's KeySharedMeta arguments: none but on a KeyShared subscription, where the
    key_shared_policy (default: AutoSplit, in order) says the mode, the sticky ranges and the order."""
    if settings.consumer_type != ConsumerType.KeyShared:
        return {}
    policy = settings.key_shared_policy
    if policy is None:
        return {"key_shared_mode": proto.KEY_SHARED_AUTO_SPLIT}
    return {"key_shared_mode": int(policy.key_shared_mode), "hash_ranges": policy.hash_ranges(),
            "allow_out_of_order": policy.allow_out_of_order_delivery}


def _entry_messages(event: Any) -> int:
    """How many permits the broker counted for a MESSAGE frame's entry: a batch's messages, as the
    int32 it parses (a larger count is not one it used), else one."""
    batch_size = event.fields[12] if event.fields is not None else None
    return batch_size if batch_size and 0 < batch_size < 1 << 31 else 1


class TopicConsumer:
    """The consumer of one topic or partition; see the module docstring."""

    def __init__(self, owner: "Consumer", topic: str, partition: int) -> None:
        self.owner = owner
        self.client: Owner = owner.client
        #: where a new subscription starts on this topic (None: the consumer's initial_position; a
        #: partition added to the topic later starts at its earliest: partitionwatch.py)
        self.initial_position: InitialPosition | None = None
        self.settings: ConsumerSettings = owner.settings
        self.topic = topic
        self.partition = partition
        self.consumer_id = self.client.new_consumer_id()
        self.credit = LinkCredit(self.consumer_id, max_credit=1 << 30)
        self.backend = self.client.backend
        self._lock = self.backend.lock()
        self._read_lock = lock_or_none(self._lock)  # (message_read's, for every message: None under gevent)
        self._link: _ConsumerLink | None = None
        self._linked = self.client.backend.event()  # (set while subscribed: seek and queries wait for it)
        self._read_since_flow = 0
        self._share = 0
        self._flow_every = 1
        self._flow_single = 1  # (the grant threshold while entries are of one message each)
        #: permits granted and messages the broker counted as sent, since the subscribe (an
        #: estimate of the broker's count: what the read loop adds is read without the lock)
        self._permits_granted = 0
        self._permits_used = 0
        #: permits the budget allows and not granted yet: messages read since the last grant, and the
        #: share held back at subscribe until the first entry shows how large entries are
        self._owed = 0
        self._last_entry_messages = 1
        self._sizing = False  # (subscribed, no entry arrived yet: one permit granted)
        #: one more at each subscribe: messages of an earlier subscription still queued are dropped
        #: unread (the broker delivers again what was not acknowledged, in order)
        self.epoch = 0
        self._subscribed_epoch = 0  # (the epoch of the current subscription's first messages)
        #: the incomplete chunked messages (made at the first chunk)
        self._chunks: ChunkAssembler | None = None
        #: the hooks of the unacked-message timeout and the dead-letter policy (None when both are off)
        self.redelivery: PartitionRedelivery | None = (
            owner.redelivery.partition(self) if owner.redelivery is not None else None)
        #: individual acknowledgements waiting for the grouping interval
        self._acks: collections.deque[bytes] = collections.deque()
        self._ack_timer: Any = None
        self._acks_sending = self.client.backend.mutex()
        self.closed = False
        self.corrupt_messages = 0
        #: what the application did with this partition's messages (counted by the Consumer)
        self.acknowledged = 0
        self.negatively_acknowledged = 0
        self.acknowledged_cumulative = 0
        #: False for a reader's subscription: it resumes after the last message handed out
        self.durable = self.settings.durable
        #: acknowledging some messages of a batch tells the broker which (an ACK with an ack set)
        self._batch_index_ack = self.settings.batch_index_ack_enabled
        #: where a non-durable subscription (re)starts, and what delivered before it is dropped
        #: (a reader's start, then its last message handed out; a seek's target)
        self.start: StartPosition | None = self.settings.start_position

    def __repr__(self) -> str:
        return "<TopicConsumer %s id=%d>" % (self.topic, self.consumer_id)

    # -- subscribing (the supervisor's connect) ----------------------------------------

    def establish(self) -> _ConsumerLink:
        if self.closed:
            raise AlreadyClosed("consumer closed")
        conn = self.client.connection_for(self.topic)
        settings = self.settings
        link = _ConsumerLink(self, conn)
        with self._lock:
            self.epoch += 1  # (before SUBSCRIBE: what arrives from now on belongs to the new subscription)
            self._subscribed_epoch = self.epoch
            start = self.start
        if self.redelivery is not None:
            self.redelivery.resubscribed()
        start_id = start.subscribe_id() if start is not None and not self.durable else None
        conn.register_consumer(self.consumer_id, link)
        try:
            conn.request(lambda rid: proto.subscribe(
                self.topic, settings.subscription_name, _SUB_TYPES[settings.consumer_type], self.consumer_id, rid,
                consumer_name=settings.consumer_name,
                initial_position=int(self.initial_position if self.initial_position is not None
                                     else settings.initial_position),
                read_compacted=settings.is_read_compacted, metadata=settings.metadata,
                replicate_subscription_state=settings.replicate_subscription_state_enabled,
                durable=self.durable, start_message_id=start_id, schema=settings.wire_schema,
                **_key_shared_arguments(settings),
            ), self.client.operation_timeout)
        except BaseException:
            conn.unregister_consumer(self.consumer_id, link)
            raise
        with self._lock:
            closed = self.closed
            if not closed:
                self._link = link
                self._read_since_flow = 0
                # one permit first: the first entry shows whether the share can go at once (see the
                # module docstring); the rest of it is owed until then
                share = max(0, self._share)
                permits = min(share, 1)
                self._owed = share - permits
                self._sizing = share > 1
                self._permits_granted = permits
                self._permits_used = 0
        if closed:  # (closed while subscribing: the broker's consumer goes too)
            link.close()
            raise AlreadyClosed("consumer closed")
        self._linked.set()
        if permits > 0:
            self._flow(link, permits)
        self.send_acks()  # (acknowledgements made while disconnected)
        if start is not None and start.pins_on_arrival and not self.durable:
            self._pin_start(link, start)
        return link

    def _pin_start(self, link: _ConsumerLink, start: StartPosition) -> None:
        """The broker placed a reader's cursor (latest, a publish time): its
        mark-delete position is where the reader stands until a message comes,
        and where a subscription made again starts."""
        try:
            record = link.conn.request(lambda rid: proto.get_last_message_id(self.consumer_id, rid),
                                       self.client.operation_timeout)
        except PulsarException as exc:
            logger.warning("[%s] reader position not pinned: %s", self.topic, exc)
            return
        mark_delete = record.consumer_mark_delete_position
        if mark_delete is None:
            return
        position = StartPosition(MessageId.from_proto(mark_delete, topic=self.topic), inclusive=False)
        with self._lock:
            if self.start is start:
                self.start = position

    def link_closed(self, link: _ConsumerLink) -> None:
        # (no lock: a failed write closes the connection, and the writer may hold it)
        if self._link is link:
            self._link = None
            self._linked.clear()

    def is_connected(self) -> bool:
        link = self._link
        return link is not None and not link.closed

    def stats(self) -> ConsumerTopicStats:
        """This partition's counts (only reads: safe from any thread)."""
        return {
            "received": self.credit.arrived,
            "acknowledged": self.acknowledged,
            "negatively_acknowledged": self.negatively_acknowledged,
            "acknowledged_cumulative": self.acknowledged_cumulative,
            "corrupt": self.corrupt_messages,
            "connected": self.is_connected(),
        }

    # -- permits ------------------------------------------------------------------------

    def set_share(self, share: int) -> None:
        """Flow control gave this partition a new share of the budget."""
        with self._lock:
            grow = share - self._share
            self._share = share
            self._flow_every = max(1, share // FLOW_FRACTION)
            self._flow_single = max(1, share // SINGLE_MESSAGE_FLOW_FRACTION)
            if grow <= 0:
                return
            self._owed += grow
            grant = self._grant_now()
            link = self._link
        if grant and link is not None and not link.closed:
            self._flow(link, grant)

    def _flow(self, link: _ConsumerLink, permits: int) -> None:
        try:
            link.conn.send_command(proto.flow(self.consumer_id, permits))
        except PulsarException:
            pass  # the connection closed: the next subscribe grants permits afresh

    def _grant_now(self) -> int:
        """Under the lock: the permits to grant now out of those owed (0: none yet), recorded as
        granted. Entries of one message: what is owed goes once it reaches half of the share; of a
        few messages: a tenth of the share. Entries larger than that (and before the first entry):
        only the grant that lifts the broker's estimated count from zero or below to exactly 1, and
        nothing while it is above zero (an entry is on its way, or the broker waits for one); see
        the module docstring."""
        owed = self._owed
        if self._sizing or self._last_entry_messages > self._flow_every:  # (message_read inlines this test)
            balance = self._permits_granted - self._permits_used
            if balance > 0:
                return 0
            grant = 1 - balance
            if owed < grant:
                return 0
        elif owed < (self._flow_single if self._last_entry_messages == 1 else self._flow_every):
            return 0
        else:
            grant = owed
        self._record_grant(grant)
        return grant

    def _record_grant(self, grant: int) -> None:
        """Under the lock: grant permits out of those owed."""
        self._owed -= grant
        self._permits_granted += grant
        self.credit.answered += self._read_since_flow
        self._read_since_flow = 0

    def message_read(self, count: int = 1) -> None:
        """The application took one of this partition's messages from the queue (or ``count``
        messages were skipped unread): their permits are owed to the broker, and go when
        ``_grant_now`` says."""
        lock = self._read_lock  # (self._lock, acquired only when it does something)
        if lock is not None:
            lock.acquire()
        try:
            self._read_since_flow += count
            owed = self._owed + count
            self._owed = owed
            # (_grant_now's "not yet", inlined: this runs for every message read)
            if self._sizing or self._last_entry_messages > self._flow_every:
                balance = self._permits_granted - self._permits_used
                if balance > 0 or owed + balance < 1:
                    return
            elif owed < (self._flow_single if self._last_entry_messages == 1 else self._flow_every):
                return
            grant = self._grant_now()
            link = self._link
        finally:
            if lock is not None:
                lock.release()
        if link is not None and not link.closed:
            self._flow(link, grant)

    def release_owed(self) -> None:
        """Grant every owed permit now: the application waits and nothing has arrived for a while
        (a safety net: the estimate of the broker's count can only be wrong the safe way, too high
        while an entry is on the wire, but a consumer must never wait on a grant it holds)."""
        with self._lock:
            grant = self._owed
            if grant <= 0:
                return
            self._record_grant(grant)
            link = self._link
        if link is not None and not link.closed:
            self._flow(link, grant)

    # -- messages (on the connection's reading task) -----------------------------------------

    def message_arrived(self, link: _ConsumerLink, event: Any) -> None:
        if link is not self._link:
            # Not yet this subscription's: its link becomes current before its first FLOW, so this
            # is the closed subscription's, which the broker wrote after its CLOSE_CONSUMER (a
            # dispatch under way when a topic unloads) and which this one delivers again.
            logger.debug("[%s] message %d:%d of the closed subscription dropped",
                         self.topic, event.ledger_id, event.entry_id)
            return
        messages_in_entry = _entry_messages(event)
        self._last_entry_messages = messages_in_entry
        self._permits_used += messages_in_entry
        if self._sizing or messages_in_entry > self._flow_every:
            # the next entry is asked for as soon as the budget allows, before this one is unpacked
            # (and the share held back at subscribe goes now if entries are small)
            with self._lock:
                self._sizing = False
                grant = self._grant_now()
            if grant:
                self._flow(link, grant)
        if not event.checksum_ok:
            self._refuse(event, messages_in_entry, "failed its checksum")
            return
        try:
            messages = self._unpack(event)
        except ProtocolError as exc:
            self._refuse(event, messages_in_entry, "cannot be read (%s)" % exc)
            return
        if self.start is not None and messages:
            messages = self._from_start(event, messages)
        redelivery = self.redelivery
        if redelivery is not None and not redelivery.arrived(messages):
            self._skip_unread(len(messages))  # (they went to the dead-letter topic)
            return
        self.credit.arrived += len(messages)
        self.owner.deliver(self, self.epoch, messages)

    def _from_start(self, event: Any, messages: list[Message]) -> list[Message]:
        """Drop what the broker delivered from before the start position (the
        start entry comes whole); a reader started at the latest message is
        pinned to the first one that arrives, which a reconnect resumes from.
        A durable consumer's seek target drops what its rule says
        (``StartPosition.seek_skips``) until the next seek."""
        start = self.start
        if start is None:
            return messages
        if self.durable:  # (a seek's target, kept until the next seek, as by the official client)
            if start.is_earliest or start.is_latest or event.ledger_id != start.message_id.ledger_id():
                return messages
            kept = [message for message in messages if not start.seek_skips(message.message_id())]
        else:
            if start.entry_passed(event.ledger_id, event.entry_id):
                if start.pins_on_arrival:
                    with self._lock:
                        if self.start is start:
                            self.start = StartPosition(messages[0].message_id(), inclusive=True)
                return messages
            kept = [message for message in messages if not start.before(message.message_id())]
        dropped = len(messages) - len(kept)
        if dropped:  # (never acknowledged: the official client leaves them to the subscription's backlog)
            self._skip_unread(dropped)
        return kept

    def hand_out(self, epoch: int, message_id: MessageId) -> bool:
        """A reader's message is handed to the application: it becomes the
        position a reconnect resumes after. False: it belongs to an earlier
        subscription or lies before the position (not to be handed out)."""
        with self._lock:
            if epoch != self.epoch:
                return False
            start = self.start
            if start is not None and start.before(message_id):
                return False
            self.start = StartPosition.after(message_id)
        return True

    def _refuse(self, event: Any, messages_in_entry: int, why: str) -> None:
        """A message that cannot be delivered: reported, its permit given back,
        and asked for again after the negative-ack delay (never acknowledged)."""
        self.corrupt_messages += 1
        logger.error("[%s] message %d:%d %s: not delivered, asked again after the negative-ack delay",
                     self.topic, event.ledger_id, event.entry_id, why)
        self._skip_unread(messages_in_entry)
        self.redeliver_later((event.ledger_id, event.entry_id))

    def _skip_unread(self, count: int) -> None:
        """Messages that will not reach the queue still free their permits (in one go: a batch's
        count comes from the producer's metadata and may be anything up to 2**31-1)."""
        self.message_read(count)

    def _unpack(self, event: Any) -> list[Message]:
        (_consumer_id, ledger, entry, _partition, _batch_index, redelivery_count, producer_name, sequence_id,
         publish_time, properties, partition_key, event_time, batch_size, compression, uncompressed_size,
         ordering_key, null_value, schema_version, generic) = event.fields
        payload = event.payload
        encryption = None  # (an encrypted message's context: crypto.encryption_context)
        if generic:
            numbers = set(read_fields(event.metadata)[::2])
            if numbers & _CHUNK_FIELDS:
                return self._unchunk(event)  # (decrypted once whole)
            if numbers & _ENCRYPTION_FIELDS:
                record = encryption_metadata(event.metadata)  # (ProtocolError when malformed: refused)
                if record.encryption_keys:  # (decrypted before decompression)
                    opened = self._decrypt(record, payload)
                    if opened is None:
                        return self._undecryptable(
                            event, record, payload, MessageId(self.partition, ledger, entry, -1, 0, self.topic),
                            _entry_messages(event), [(ledger, entry)])
                    payload = opened
                    encryption = encryption_context(record, failed=False)
        if compression:  # (ProtocolError when it does not decompress to uncompressed_size bytes: refused)
            payload = decompress(compression, payload, uncompressed_size)
        topic = self.topic
        partition = self.partition
        if batch_size is None:
            return [Message(
                payload, MessageId(partition, ledger, entry, -1, 0, topic), topic, properties=properties,
                partition_key=partition_key, ordering_key=ordering_key, publish_time=publish_time,
                event_time=event_time, redelivery_count=redelivery_count, producer_name=producer_name,
                sequence_id=sequence_id, schema_version=schema_version, null_value=null_value,
                schema=self.settings.value_schema, encryption=encryption,
            )]
        messages, skipped = batch_messages(
            split_batch_decoded(payload, batch_size), batch_size, partition, ledger, entry, topic,
            (publish_time, redelivery_count, producer_name, schema_version, event_time, sequence_id,
             self.settings.value_schema, encryption))
        if skipped:
            self._skip_unread(skipped)
        if b"\x20" in event.command:  # (0x20: CommandMessage.ack_set's tag, maybe: a batch acknowledged in part)
            messages = self._drop_acknowledged(event.command, messages)
        return messages

    def _unchunk(self, event: Any) -> list[Message]:
        """One chunk of a chunked message (pulsarfast.wire.chunks): the whole message once its last
        chunk arrived, else nothing (the chunk's permit goes back at once)."""
        (_consumer_id, ledger, entry, _partition, _batch_index, redelivery_count, producer_name, sequence_id,
         publish_time, properties, partition_key, event_time, _batch_size, compression, uncompressed_size,
         ordering_key, null_value, schema_version, _generic) = event.fields
        assembler = self._chunks
        if assembler is None:
            settings = self.settings
            assembler = self._chunks = ChunkAssembler(
                self.topic, settings.max_pending_chunked_message,
                settings.auto_ack_oldest_chunked_message_on_queue_full, self._ack_entries,
                settings.expire_time_of_incomplete_chunked_message_ms / 1000.0, self.client.backend)
        payload = event.payload
        encryption = None
        record = encryption_metadata(event.metadata)
        if record.encryption_keys:  # (each chunk is encrypted on its own, as the official producers do)
            opened = self._decrypt(record, payload)
            if opened is None:
                return self._undecryptable_chunk(ledger, entry)
            payload = opened
            encryption = encryption_context(record, failed=False)
        whole = assembler.add(proto.decode(proto.MESSAGE_METADATA, event.metadata),
                              payload if payload.__class__ is bytes else bytes(payload), (ledger, entry))
        if whole is None:
            self._skip_unread(1)
            return []
        payload, entries = whole
        topic = self.topic
        message_id = ChunkedMessageId(self.partition, ledger, entry, topic, entries)
        if compression:
            payload = decompress(compression, payload, uncompressed_size)
        return [Message(
            payload, message_id, topic, properties=properties,
            partition_key=partition_key, ordering_key=ordering_key, publish_time=publish_time,
            event_time=event_time, redelivery_count=redelivery_count, producer_name=producer_name,
            sequence_id=sequence_id, schema_version=schema_version, null_value=null_value,
            schema=self.settings.value_schema, encryption=encryption,
        )]

    def _decrypt(self, record: Any, payload: Any) -> bytes | None:
        """An encrypted message's payload decrypted (None: no crypto_key_reader, or it cannot be)."""
        decryptor = self.settings.decryptor
        return decryptor.decrypt(record, payload) if decryptor is not None else None

    def _undecryptable(self, event: Any, record: Any, payload: Any, message_id: MessageId, messages_in_entry: int,
                       entries: list[tuple[int, int]]) -> list[Message]:
        """An encrypted message this consumer cannot decrypt (no crypto_key_reader, or no key of
        it that works), as the official client does by crypto_failure_action: CONSUME hands it out
        as it came (a batch as one message, still compressed), with an encryption context that
        says so; DISCARD acknowledges it unread; FAIL does not deliver it and leaves it
        unacknowledged (asked for again after the unacked-message timeout, when there is one, as
        by the C++ client; else after a reconnect or a redelivery request)."""
        settings = self.settings
        action = settings.crypto_failure_action
        why = ("cannot be decrypted" if settings.decryptor is not None
               else "is encrypted and there is no crypto_key_reader")
        if action is ConsumerCryptoFailureAction.CONSUME:
            logger.warning("[%s] message %s %s: delivered as it is (crypto_failure_action CONSUME)",
                           self.topic, message_id, why)
            if messages_in_entry > 1:
                self._skip_unread(messages_in_entry - 1)
            (_consumer_id, _ledger, _entry, _partition, _batch_index, redelivery_count, producer_name, sequence_id,
             publish_time, properties, partition_key, event_time, _batch_size, _compression, _uncompressed_size,
             ordering_key, null_value, schema_version, _generic) = event.fields
            return [Message(
                payload if payload.__class__ is bytes else bytes(payload), message_id, self.topic,
                properties=properties, partition_key=partition_key, ordering_key=ordering_key,
                publish_time=publish_time, event_time=event_time, redelivery_count=redelivery_count,
                producer_name=producer_name, sequence_id=sequence_id, schema_version=schema_version,
                null_value=null_value, schema=settings.value_schema, encryption=encryption_context(record, failed=True),
            )]
        self._skip_unread(messages_in_entry)
        if action is ConsumerCryptoFailureAction.DISCARD:
            logger.warning("[%s] message %s %s: acknowledged unread (crypto_failure_action DISCARD)",
                           self.topic, message_id, why)
            for chunk_entry in entries:
                self.ack_entry(chunk_entry)
        else:
            logger.error("[%s] message %s %s: not delivered, left unacknowledged (crypto_failure_action FAIL)",
                         self.topic, message_id, why)
            self._track_undelivered(entries)
        return []

    def _undecryptable_chunk(self, ledger: int, entry: int) -> list[Message]:
        """A chunk this consumer cannot decrypt: DISCARD acknowledges it unread; FAIL, and CONSUME
        too (encrypted chunks cannot be put back together into a message), leave it unacknowledged:
        its message is not delivered."""
        settings = self.settings
        self._skip_unread(1)
        if settings.crypto_failure_action is ConsumerCryptoFailureAction.DISCARD:
            logger.warning("[%s] chunk %d:%d cannot be decrypted: acknowledged unread (crypto_failure_action "
                           "DISCARD)", self.topic, ledger, entry)
            self.ack_entry((ledger, entry))
        else:
            logger.error("[%s] chunk %d:%d cannot be decrypted: its message is not delivered, the chunk is left "
                         "unacknowledged (crypto_failure_action %s)", self.topic, ledger, entry,
                         settings.crypto_failure_action.name)
            self._track_undelivered([(ledger, entry)])
        return []

    def _track_undelivered(self, entries: list[tuple[int, int]]) -> None:
        """Entries left unacknowledged undelivered (FAIL) go into the unacked-message timeout's
        tracker, as the C++ client puts them in its own: with a timeout, they are asked for again
        when it passes (and decrypted again, a key reader that can by then reading them)."""
        if self.redelivery is not None:
            self.redelivery.not_delivered(entries)
    def forget_chunks(self) -> None:
        """The incomplete chunked messages are forgotten and their expiry timer stops (closed, the
        client shut down, or in a forked child)."""
        if self._chunks is not None:
            self._chunks.close()

    def abort(self) -> None:
        """The client shut down (its connections are closed): the grouped acknowledgements' timer
        and the incomplete chunked messages' one stop, so that no task of the client starts later."""
        with self._lock:
            timer, self._ack_timer = self._ack_timer, None
        if timer is not None:
            timer.cancel()
        self.forget_chunks()

    def _ack_entries(self, entries: list[tuple[int, int]]) -> None:
        for chunk_entry in entries:
            self.ack_entry(chunk_entry)

    def _drop_acknowledged(self, command: bytes, messages: list[Message]) -> list[Message]:
        """A batch the broker delivers with an ack set (some of its messages were acknowledged by
        index): those whose bit is clear are not delivered again (the broker did not count them)."""
        try:
            ack_set = proto.decode_command(command)[1].ack_set
        except (ProtocolError, AttributeError):
            return messages
        if not ack_set or not messages:
            return messages
        kept = []
        delivery = messages[0].message_id().batch
        for message in messages:
            index = message.message_id().batch_index()
            word = index >> 6
            if word < len(ack_set) and ack_set[word] >> (index & 63) & 1:
                kept.append(message)
            elif delivery is not None:
                delivery.waiting.discard(index)  # (acknowledged already: the entry waits for the others only)
        self._permits_used -= len(messages) - len(kept)
        return kept

    # -- acknowledging --------------------------------------------------------------------

    def ack(self, message_id: MessageId) -> None:
        index = message_id.batch_index()
        if index >= 0:
            # the broker hears of a batch once every message of its delivery is acknowledged
            batch = message_id.batch
            if batch is None:
                # an id that did not come from a delivery (a producer's, deserialized, built) knows
                # nothing of the others; as the official client: with its batch size it acknowledges
                # nothing, unless batch_index_ack_enabled (then the whole entry, the ack set it
                # sends being empty); without one (built by hand) the whole entry
                if message_id.batch_size() > 0 and not self._batch_index_ack:
                    logger.debug("[%s] %s: a batch message's id without its delivery; not acknowledged on "
                                 "the broker", self.topic, message_id)
                    return
            elif not batch.acknowledge(index):
                if self._batch_index_ack:
                    self._ack_batch_index(message_id, batch)
                return
        if message_id.__class__ is ChunkedMessageId:  # (every chunk's entry; the last one's below)
            self._ack_entries(message_id.chunk_entries[:-1])
        if self.redelivery is not None:
            self.redelivery.acknowledged(message_id.entry_key())
        self._send_ack(proto.ACK_INDIVIDUAL, message_id.to_proto(with_batch_index=False))

    def _ack_batch_index(self, message_id: MessageId, batch: BatchDelivery) -> None:
        """A message of a batch acknowledged, not its last one (batch_index_ack_enabled): the broker
        hears which messages of the entry are still not acknowledged."""
        words = batch.unacknowledged_words()
        if words is None:
            return  # (withdrawn: the new delivery acknowledges the entry)
        ledger, entry = message_id.entry_key()
        self._send_ack(proto.ACK_INDIVIDUAL, proto.message_id_ack_set(
            ledger & ((1 << 64) - 1), entry & ((1 << 64) - 1), self.partition, words))

    def ack_entry(self, entry: tuple[int, int]) -> None:
        """Acknowledge a whole entry (every message of a batch) on the broker."""
        ledger, entry_id = entry
        if self.redelivery is not None:
            self.redelivery.acknowledged(entry)
        self._send_ack(proto.ACK_INDIVIDUAL, proto.message_id_data(ledger & ((1 << 64) - 1),
                                                                   entry_id & ((1 << 64) - 1), self.partition))

    def withdraw(self, delivery: BatchDelivery) -> None:
        """The delivery's entry was asked for again: its messages not handed out yet are dropped, and
        acknowledging those handed out no longer acknowledges the entry (the new copy does)."""
        delivery.withdraw()

    def ack_cumulative(self, message_id: MessageId) -> None:
        index = message_id.batch_index()
        ledger, entry = message_id.entry_key()
        if index >= 0 and message_id.batch is None and message_id.batch_size() > 0:
            # an id that did not come from a delivery (a producer's, deserialized), as the official
            # client: with batch_index_ack_enabled its whole entry (an empty ack set), else
            # everything before its entry, whatever its index
            if not self._batch_index_ack:
                if entry == 0:
                    return
                entry -= 1
        elif index >= 0 and index < message_id.batch_size() - 1:
            if self._batch_index_ack:  # (the broker hears of this batch's messages up to this one too)
                if self.redelivery is not None and entry > 0:
                    self.redelivery.acknowledged_until((ledger, entry - 1))
                self._send_ack(proto.ACK_CUMULATIVE, proto.message_id_ack_set(
                    ledger & ((1 << 64) - 1), entry & ((1 << 64) - 1), self.partition,
                    index_words(range(index + 1, message_id.batch_size()))))
                return
            # not the batch's last message: everything before this batch is acknowledged
            if entry == 0:
                return
            entry -= 1
        if self.redelivery is not None:
            self.redelivery.acknowledged_until((ledger, entry))
        self._send_ack(proto.ACK_CUMULATIVE, proto.message_id_data(ledger & ((1 << 64) - 1), entry & ((1 << 64) - 1),
                                                                   self.partition))

    def ack_in_transaction(self, message_id: MessageId, txn: Transaction, cumulative: bool) -> None:
        """Acknowledge in a transaction (effective when it commits): the subscription registered
        with the transaction first, then an ACK carrying the transaction's id and a request id,
        whose ACK_RESPONSE is awaited; the broker's refusal (TransactionConflict: another
        transaction holds that message) raises, and fails the transaction's commit. A message of a
        batch is acknowledged by its index (an ack set), a cumulative one up to its index."""
        txn.check_open()
        txn.register_subscription(self.topic, self.settings.subscription_name)
        ledger, entry = message_id.entry_key()
        ledger &= (1 << 64) - 1
        entry &= (1 << 64) - 1
        index, size = message_id.batch_index(), message_id.batch_size()
        if index >= 0 and size > 1:
            if cumulative:
                words = index_words(range(index + 1, size))
            else:
                words = index_words([i for i in range(size) if i != index])
            id_bytes = proto.message_id_ack_set(ledger, entry, self.partition, words)
        else:
            id_bytes = proto.message_id_data(ledger, entry, self.partition)
        ack_type = proto.ACK_CUMULATIVE if cumulative else proto.ACK_INDIVIDUAL
        bits = (txn.id.most_bits, txn.id.least_bits)
        link = self._link
        if link is None or link.closed:
            raise NotConnected("the consumer of %s is not connected: the acknowledgement in transaction %s was "
                               "not made" % (self.topic, txn.id))
        txn.op_started()
        try:
            answer = link.conn.request(
                lambda rid: proto.ack(self.consumer_id, ack_type, [id_bytes], txn=bits, request_id=rid),
                self.client.operation_timeout)
            if answer.error is not None:
                raise from_server_error(answer.error, answer.message)
        except BaseException as exc:
            txn.op_finished(exc)
            raise
        txn.op_finished(None)
        if self.redelivery is not None:  # (the unacknowledged-message timeout no longer asks for it)
            if cumulative:
                self.redelivery.acknowledged_until(message_id.entry_key())
            elif index < 0 or size <= 1:
                self.redelivery.acknowledged(message_id.entry_key())

    def _send_ack(self, ack_type: int, message_id_bytes: bytes) -> None:
        if ack_type == proto.ACK_INDIVIDUAL and self.settings.ack_grouping_seconds > 0:
            self._acks.append(message_id_bytes)  # (a deque: appends and send_acks' pops need no lock)
            if self._ack_timer is None:
                with self._lock:
                    if self._ack_timer is None and not self.closed:
                        self._ack_timer = self.client.backend.call_later(self.settings.ack_grouping_seconds,
                                                                         self._acks_due)
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
        self.backend.spawn(self.send_acks)  # (the backend: a dropped client is gone from self.client)

    def send_acks(self) -> None:
        """Send the grouped individual acknowledgements, in one ACK command per
        thousand; while disconnected they wait for the next subscription. One
        send at a time: a close (or a seek) that sends the last ones waits for
        the interval's send under way, whose ACK must reach the broker before
        the CLOSE_CONSUMER (the broker drops acks for a consumer it closed)."""
        with self._acks_sending:
            self._send_grouped_acks()

    def _send_grouped_acks(self) -> None:
        with self._lock:
            timer, self._ack_timer = self._ack_timer, None  # (before taking them: a later ack arms a new one)
            link = self._link
        if timer is not None:
            timer.cancel()
        pending = self._acks
        if not pending or link is None or link.closed:
            return
        acks = []
        try:
            while True:
                acks.append(pending.popleft())
        except IndexError:
            pass
        try:
            for start in range(0, len(acks), ACKS_PER_COMMAND):
                link.conn.send_command(proto.ack(self.consumer_id, proto.ACK_INDIVIDUAL,
                                                 acks[start:start + ACKS_PER_COMMAND]))
        except PulsarException:
            pending.extendleft(reversed(acks))  # the connection closed: they go after the next subscribe

    def seek(self, message_id: MessageId | None = None, publish_time: int | None = None) -> None:
        """Reset the subscription to a message id or a publish time (ms); blocks
        for the broker's answer and raises on failure. The broker then closes
        this consumer, which subscribes again at the new position; messages
        queued from before the seek are dropped unread. A message id is
        exclusive, as in the official client (the broker delivers from its
        entry; the message itself is dropped), except with
        ``start_message_id_inclusive`` (a consumer's or a reader's)."""
        link = self._subscribed_link()
        if message_id is not None:
            position: StartPosition | None = StartPosition(
                message_id, inclusive=self.settings.start_message_id_inclusive)
            command_id: bytes | None = message_id.to_proto()
        else:  # (a reader: the broker keeps its subscription through the seek's disconnect)
            position = (StartPosition(MessageId.earliest, inclusive=True, pins_on_arrival=True)
                        if not self.durable else None)
            command_id = None
        self.send_acks()  # (acknowledgements made before the seek reach the broker before it)
        epoch = self.epoch
        # the broker closes the consumer (CLOSE_CONSUMER) before it answers: nothing of the
        # old position arrives after the answer
        link.conn.request(lambda rid: proto.seek(self.consumer_id, rid, message_id=command_id,
                                                 publish_time=publish_time), self.client.operation_timeout)
        with self._lock:
            self.start = position
            if self.epoch == epoch:  # (no new subscription yet: everything queued is from before the seek)
                self.epoch += 1

    def _subscribed_link(self) -> _ConsumerLink:
        """The current subscription's link, waiting for a reconnect (a seek's,
        an unload's) within the operation timeout; NotConnected after that."""
        deadline = monotonic() + self.client.operation_timeout
        while True:
            link = self._link
            if link is not None and not link.closed:
                return link
            if self.closed:
                raise AlreadyClosed("consumer closed")
            remaining = deadline - monotonic()
            if remaining <= 0:
                raise NotConnected("%s is reconnecting" % self.topic)
            self._linked.wait(min(remaining, 0.5))

    def last_message_id(self) -> tuple[MessageId, MessageId | None]:
        """The id of the topic's last message and the subscription's mark-delete
        position (None when the broker does not say), asked of the broker
        (GET_LAST_MESSAGE_ID)."""
        deadline = monotonic() + self.client.operation_timeout
        while True:
            link = self._subscribed_link()
            try:
                record = link.conn.request(lambda rid: proto.get_last_message_id(self.consumer_id, rid),
                                           max(0.001, deadline - monotonic()))
                break
            except BrokerMetadataError as exc:
                # right after a seek the broker may answer before its CLOSE_CONSUMER comes: asked on
                # the subscription it has just dropped, "Consumer not found"; asked again once the
                # consumer has subscribed again (within the operation timeout)
                if "Consumer not found" not in str(exc) or monotonic() >= deadline:
                    raise
                while not link.closed and monotonic() < deadline:
                    self.client.backend.sleep(0.01)
        mark_delete = record.consumer_mark_delete_position
        return (MessageId.from_proto(record.last_message_id, topic=self.topic),
                MessageId.from_proto(mark_delete, topic=self.topic) if mark_delete is not None else None)

    def redeliver(self, entries: list[tuple[int, int]]) -> None:
        """Ask the broker for entries again (none given: everything not acknowledged); those the
        dead-letter policy takes go to the dead-letter topic instead."""
        redelivery = self.redelivery
        if entries and redelivery is not None:
            entries = redelivery.redelivering(entries)
            if not entries:
                return
        link = self._link
        if link is None or link.closed:
            return
        if not entries or self.settings.consumer_type not in _REDELIVER_BY_ID:
            # everything not acknowledged comes again (on Exclusive and Failover subscriptions whatever
            # ids are given: the broker rewinds): what waits unread in the queue is dropped, not delivered twice
            self.epoch += 1
            if redelivery is not None:
                redelivery.redelivering_all()
            entries = []
            # (acknowledgements still grouped reach the broker first: it rewinds to the first
            # message it has not heard acknowledged, which must not be one acknowledged here)
            self.send_acks()
        ids = [proto.message_id_data(ledger, entry, self.partition) for ledger, entry in entries]
        try:
            link.conn.send_command(proto.redeliver_unacknowledged(self.consumer_id, ids))
        except PulsarException:
            pass

    def redeliver_later(self, entry: tuple[int, int]) -> None:
        """Ask the broker for entry again after the negative-ack delay (a message that cannot be
        delivered, or that the dead-letter topic did not take)."""
        self.owner.nack_entry(self, *entry)

    def dropped(self, epoch: int, count: int = 1) -> None:
        """count queued messages of an earlier epoch were dropped unread; their permits go back when
        the broker still counts them (the same subscription, after a redelivery of everything)."""
        if epoch >= self._subscribed_epoch:
            self.message_read(count)

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
        self.forget_chunks()
        if link is not None and not link.closed:
            try:
                link.conn.request(lambda rid: proto.close_consumer(self.consumer_id, rid),
                                  self.client.operation_timeout)
            finally:
                link.close_link()


class _NegativeAcks:
    """Entries to redeliver once their delay has passed, sent per partition in one request."""

    def __init__(self, owner: "Consumer", delay: float) -> None:
        # (held weakly: its timer must not keep a consumer dropped with its client alive)
        self.owner = weakref.proxy(owner)
        self.backend = owner.client.backend
        self.delay = delay
        self._due: dict[tuple[TopicConsumer, int, int], float] = {}
        self._lock = self.backend.lock()
        self._timer: Any = None

    def add(self, consumer: TopicConsumer, ledger: int, entry: int) -> None:
        with self._lock:
            self._due[(consumer, ledger, entry)] = monotonic() + self.delay
            if self._timer is None:
                self._timer = self.backend.call_later(self._tick_every(), self._tick)

    def _tick_every(self) -> float:
        return max(0.05, min(self.delay / 3, 1.0)) if self.delay > 0 else 0.05

    def _tick(self) -> None:
        self.backend.spawn(self._send_due)

    def _send_due(self) -> None:
        now = monotonic()
        by_consumer: dict[TopicConsumer, list[tuple[int, int]]] = collections.defaultdict(list)
        try:
            open_ = not self.owner.closed
        except ReferenceError:  # (the consumer was dropped with its client: nothing to ask for)
            return
        with self._lock:
            self._timer = None
            for key, due in list(self._due.items()):
                if due <= now:
                    del self._due[key]
                    by_consumer[key[0]].append((key[1], key[2]))
            if self._due and open_:
                self._timer = self.backend.call_later(self._tick_every(), self._tick)
        for consumer, entries in by_consumer.items():
            consumer.redeliver(entries)

    def close(self) -> None:
        with self._lock:
            timer, self._timer = self._timer, None
            self._due.clear()
        if timer is not None:
            timer.cancel()

    def forget_after_fork(self) -> None:
        """In a forked child: the entries due are the parent's (its lock may have been held by a
        thread that is not in the child, and a gevent timer survives the fork)."""
        self._lock = self.backend.lock()
        timer, self._timer = self._timer, None
        self._due = {}
        if timer is not None:
            try:
                timer.cancel()
            except Exception:  # pragma: no cover - a timer of the parent's scheduler thread
                pass


def _run_listener(ref: "weakref.ref[Consumer]", queue: Any, running: Any) -> None:
    """The message listener's task. It waits on the consumer's queue (and, paused, on its running
    event) without holding the consumer, which it holds only to hand out what it took
    (``listen_once``): a consumer dropped with its client, never closed, is then collected, and
    the task ends at its next round."""
    while True:
        item = None
        if running.wait(OWED_RELEASE_SECONDS):  # (not paused; close sets it too)
            try:
                item = queue.get(timeout=OWED_RELEASE_SECONDS)
            except _queue.Empty:
                pass
        consumer = ref()
        if consumer is None or not consumer.listen_once(item):
            return
        del consumer


class Consumer(HandedOut):
    """A subscription over one or more topics; see the module docstring."""

    def __init__(self, client: Owner, settings: ConsumerSettings) -> None:
        self.client = client
        self.backend = client.backend
        self.settings = settings
        self._listener = settings.message_listener
        #: batches arrived, each (TopicConsumer, epoch, [Message, ...]); receive() moves one at a
        #: time into _ready, whose messages it then hands out without touching the queue
        self._queue = self.backend.queue()
        #: a receive() blocked on the main thread is woken by a signal landing on another thread
        #: (under gevent the hub's loop wakes for signals itself)
        self._wake_on_signals = self.backend.name == "threads"
        self._ready: collections.deque[tuple[TopicConsumer, int, Message]] = collections.deque()
        #: messages handed out and put back (return_to_queue): the next receive() takes these first
        self._returned: collections.deque[tuple[TopicConsumer, int, Message]] = collections.deque()
        #: open and in the process that made it: receive()'s fast path may be taken
        self._usable = True
        #: started in a process this one forked from (every call raises ForkedError)
        self._forked = False
        #: what this consumer keeps alive for its user (its Client, which hands its parts itself weakly)
        self.keep_alive: object = None
        #: (replaced, never changed in place: a pattern's discovery adds and removes topics while
        #: other tasks go through the list)
        self._topics: list[TopicConsumer] = []
        #: a pattern subscription's PatternWatch (pattern.py; None for topics), stopped at close
        self.topic_watch: Any = None
        #: (keyed by topic names; looked up with a message id's topic, None for an id built by hand)
        self._by_topic: dict[str | None, TopicConsumer] = {}
        self._flow = FlowControl(settings.queue_size)
        self._nacks = _NegativeAcks(self, settings.negative_ack_delay)
        #: the unacked-message timeout and the dead-letter policy (None when both are off; see redelivery.py)
        self.redelivery = Redelivery(client, settings) if settings.delivery_controls else None
        self._listener_task: Any = None
        #: set unless pause_message_listener() holds the listener's calls (None without a listener)
        self._listener_running: Any = None
        if self._listener is not None:
            self._listener_running = self.backend.event()
            self._listener_running.set()
        self.closed = False

    # -- set-up (by the client) -------------------------------------------------------------

    def add_topic(self, topic: str, partition: int) -> TopicConsumer:
        # (held weakly: the connection holds the TopicConsumer, and must not keep this consumer alive)
        consumer = TopicConsumer(weakref.proxy(self), topic, partition)
        self._topics = self._topics + [consumer]
        self._by_topic[topic] = consumer
        self._flow.add_link(consumer.credit)
        return consumer

    def remove_topic(self, consumer: TopicConsumer) -> None:
        """A topic left (a pattern's topic deleted): its TopicConsumer no longer counts here (its
        caller closes it, then spreads the budget again)."""
        self._topics = [each for each in self._topics if each is not consumer]
        if self._by_topic.get(consumer.topic) is consumer:
            del self._by_topic[consumer.topic]
        self._flow.remove_conn(consumer.credit.key)

    def _stop_topic_watch(self) -> None:
        watch = self.topic_watch
        if watch is not None:
            watch.close()

    def spread_budget(self) -> None:
        """Each TopicConsumer's share of the budget (flow control decides)."""
        self._flow.set_max_in_flight(self.settings.receive_budget(len(self._topics)))
        for consumer in self._topics:
            consumer.set_share(self._flow.share(consumer.credit))

    def topic_consumers(self) -> list[TopicConsumer]:
        return list(self._topics)

    def start_listener(self) -> None:
        """Subscribed: the listener and the unacked-message timeout's tick start."""
        if self.redelivery is not None:
            self.redelivery.start()
        if self._listener is not None:
            self._listener_task = self.backend.spawn(_run_listener, weakref.ref(self), self._queue,
                                                     self._listener_running)

    # -- delivery (on connection reading tasks) ------------------------------------------------

    def deliver(self, consumer: TopicConsumer, epoch: int, messages: list[Message]) -> None:
        """A batch (or one message) arrived: one queue item, taken whole by the next receive()."""
        if messages:
            self._queue.put((consumer, epoch, messages))

    def nack_entry(self, consumer: TopicConsumer, ledger: int, entry: int) -> None:
        self._nacks.add(consumer, ledger, entry)

    # -- the official API --------------------------------------------------------------------

    def topic(self) -> str:
        return self.settings.label

    def subscription_name(self) -> str:
        return self.settings.subscription_name

    def consumer_name(self) -> str:
        return self.settings.consumer_name or ""

    def receive(self, timeout_millis: int | None = None) -> Message:
        """The next message; waits at most timeout_millis (then raises Timeout), or for ever.
        A KeyboardInterrupt while waiting raises ``ReceiveInterrupted`` (an ``Interrupted``
        that is also a KeyboardInterrupt)."""
        # the fast path: a message of an arrived batch is ready (no lock but the permits'), or an
        # arrived entry waits in the queue (an unbatched producer's: one message each)
        ready = self._ready
        if not self._returned and self._usable and self._listener is None \
                and (timeout_millis is None or type(timeout_millis) is int) and self.backend.in_backend_context():
            if not ready:
                queue = self._queue
                if not queue.empty():
                    try:
                        self._accept(queue.get(False))  # (_CLOSED is put back for the waiting path below)
                    except _queue.Empty:  # (another thread took it)
                        pass
            try:
                consumer, epoch, message = ready.popleft()
            except IndexError:  # (nothing ready, or another thread took the last one)
                pass
            else:
                handed = self._hand_out(consumer, epoch, message)
                if handed is not None:
                    return handed
        try:
            return self._receive_waiting(timeout_millis)
        except KeyboardInterrupt as exc:  # (Ctrl-C while waiting: Interrupted, as the official client)
            if isinstance(exc, ReceiveInterrupted):
                raise
            raise ReceiveInterrupted("Pulsar error: Interrupted") from exc

    @from_any_thread()
    def _receive_waiting(self, timeout_millis: int | None) -> Message:
        if self._listener is not None:
            raise InvalidConfiguration("receive() cannot be used with a message_listener")
        if timeout_millis is not None and (not isinstance(timeout_millis, int) or isinstance(timeout_millis, bool)):
            raise ValueError("Argument timeout_millis is expected to be of type 'int' and not '%s'"
                             % type(timeout_millis).__name__)
        self._check_open()
        deadline = None if timeout_millis is None else monotonic() + max(0, timeout_millis) / 1000.0
        while True:
            waiting = self._queue
            if self._wake_on_signals and waiting.empty() and threading.current_thread() is threading.main_thread() \
                    and _signal_wake.enter(waiting):
                try:
                    message = self._take(deadline)
                finally:
                    _signal_wake.leave(waiting)
            else:
                message = self._take(deadline)
            if message is _CLOSED:
                raise AlreadyClosed("consumer closed")
            if message is None:
                raise Timeout("no message within %d ms" % (timeout_millis or 0))
            return message

    def receive_ready(self) -> Message | None:
        """The message receive() would return at once, or None when it would have to wait (or
        raise: closed, a listener). Never waits: for a caller on the backend's thread that must
        not (the asyncio API's receive, on its loop, tries this before it waits in a task)."""
        if not self._usable or self._listener is not None:
            return None
        message = self._take(None, wait=False)
        return None if message is _CLOSED else message

    def _take(self, deadline: float | None, wait: bool = True) -> Any:
        """The next message handed to the application: from the ready batch, else
        the next batch from the queue (None: the deadline passed, or nothing is
        there without waiting; _CLOSED: closed)."""
        ready = self._ready
        get = self._queue.get
        while True:
            if self._returned:
                returned = self._take_returned()
                if returned is not None:
                    return returned
                continue
            try:
                consumer, epoch, message = ready.popleft()
            except IndexError:
                if not wait:
                    try:
                        item = get(False)
                    except _queue.Empty:
                        return None
                    if self._accept(item) is _CLOSED:
                        return _CLOSED
                    continue
                wait_for = OWED_RELEASE_SECONDS if deadline is None else \
                    min(OWED_RELEASE_SECONDS, max(0.0, deadline - monotonic()))
                try:
                    item = get(timeout=wait_for)
                except _queue.Empty:
                    if deadline is not None and monotonic() >= deadline:
                        return None
                    for topic_consumer in self._topics:
                        topic_consumer.release_owed()
                    continue
                if self._accept(item) is _CLOSED:
                    return _CLOSED
                continue
            handed = self._hand_out(consumer, epoch, message)
            if handed is not None:
                return handed

    def return_to_queue(self, message: Message) -> None:
        """Put back a message receive() handed out: the next receive() returns it again, before any
        other. For a caller that took a message it could not pass on (an asyncio receive cancelled
        meanwhile: pulsarfast.asyncio). A seek drops what was put back, and so does a new
        subscription of a durable consumer (a reconnect): its broker delivers those messages again."""
        consumer = self._topic_consumer(message.message_id(), needs_topic=False)
        self._returned.appendleft((consumer, consumer.epoch, message))
        self._queue.put(_WAKE)  # (a receive() waiting on the queue looks again)

    def _take_returned(self) -> Message | None:
        """The first message put back (None: none, or one a durable subscription's broker sends again)."""
        try:
            consumer, epoch, message = self._returned.popleft()
        except IndexError:
            return None
        if epoch != consumer.epoch and consumer.durable:
            return None
        return message

    def _accept(self, item: Any) -> Any:
        """An item taken from the queue: a batch joins the ready messages (None), _CLOSED stays
        in the queue for the next waiter too (returned), and _WAKE (a signal: its handler runs
        now, on this thread) is nothing."""
        if item is _CLOSED:
            self._queue.put(_CLOSED)
            return _CLOSED
        if item is not _WAKE:
            consumer, epoch, messages = item
            if epoch == consumer.epoch:
                if len(messages) == 1:  # (an unbatched producer's entry)
                    self._ready.append((consumer, epoch, messages[0]))
                else:
                    self._ready.extend(zip(itertools.repeat(consumer, len(messages)),
                                           itertools.repeat(epoch, len(messages)), messages))
            else:  # (a batch of an earlier epoch, dropped whole)
                consumer.dropped(epoch, len(messages))
        return None

    def batch_receive(self) -> list[Message]:
        """The messages that arrived, as one list, within the ``batch_receive_policy`` (batchreceive.py):
        up to its count or its bytes, or what came within its timeout (maybe nothing: []). Ctrl-C
        while waiting raises ``ReceiveInterrupted``, as receive() does."""
        try:
            return self._batch_receive_waiting()
        except KeyboardInterrupt as exc:
            if isinstance(exc, ReceiveInterrupted):
                raise
            raise ReceiveInterrupted("Pulsar error: Interrupted") from exc

    @from_any_thread()
    def _batch_receive_waiting(self) -> list[Message]:
        self._check_open()
        policy = self.settings.batch_receive
        max_count, max_bytes, timeout_ms = policy.max_num_message, policy.max_num_bytes, policy.timeout_ms
        deadline = monotonic() + timeout_ms / 1000.0 if timeout_ms > 0 else None
        if self._listener is not None:
            # (the listener takes every message: as with the official client, the batch stays empty
            # until its timeout; without one it does not wait)
            if deadline is not None:
                self.backend.sleep(timeout_ms / 1000.0)
            return []
        waiting = self._queue
        armed = self._wake_on_signals and threading.current_thread() is threading.main_thread() \
            and _signal_wake.enter(waiting)
        try:
            return self._collect_batch(max_count, max_bytes, deadline)
        finally:
            if armed:
                _signal_wake.leave(waiting)

    def _collect_batch(self, max_count: int, max_bytes: int, deadline: float | None) -> list[Message]:
        batch: list[Message] = []
        size = 0
        ready = self._ready
        while max_count <= 0 or len(batch) < max_count:
            try:
                item = ready.popleft()
            except IndexError:
                if not self._wait_batch(deadline):
                    break
                continue
            length = len(item[2].data())
            if batch and 0 < max_bytes < size + length:
                ready.appendleft(item)  # (not handed out: the next call's first message)
                break
            handed = self._hand_out(*item)
            if handed is None:
                continue
            batch.append(handed)
            size += length
            if 0 < max_bytes <= size:
                break
        return batch

    def _wait_batch(self, deadline: float | None) -> bool:
        """batch_receive() has nothing ready: wait for the next arrived batch and make its messages
        ready. False: the deadline passed (a batch already queued is still taken at the deadline)."""
        wait = OWED_RELEASE_SECONDS if deadline is None else min(OWED_RELEASE_SECONDS,
                                                                 max(0.0, deadline - monotonic()))
        try:
            item = self._queue.get(timeout=wait)
        except _queue.Empty:
            if deadline is not None and monotonic() >= deadline:
                return False
            for topic_consumer in self._topics:
                topic_consumer.release_owed()
            return True
        if item is _CLOSED:
            self._queue.put(_CLOSED)  # (wakes the next waiter too)
            raise AlreadyClosed("consumer closed")
        if item is _WAKE:
            return True  # (a signal: its handler runs now, on this thread)
        consumer, epoch, messages = item
        if epoch == consumer.epoch:
            self._ready.extend(zip(itertools.repeat(consumer, len(messages)), itertools.repeat(epoch, len(messages)),
                                   messages))
        else:
            consumer.dropped(epoch, len(messages))
        return True

    @staticmethod
    def _hand_out(consumer: TopicConsumer, epoch: int, message: Message) -> Message | None:
        """A message taken from the ready batch for the application (None: dropped: one of an
        earlier epoch, a reader's from before its position, or one whose entry was asked for again)."""
        if epoch != consumer.epoch:
            consumer.dropped(epoch)
            return None
        consumer.message_read()
        if not consumer.durable and not consumer.hand_out(epoch, message.message_id()):
            return None
        redelivery = consumer.redelivery
        if redelivery is not None and not redelivery.handed_out(message):
            return None  # (its entry was asked for again: the new copy is delivered instead)
        return message

    def listen_once(self, item: Any) -> bool:
        """One round of the listener task, with what it took from the queue (None: nothing came for
        OWED_RELEASE_SECONDS): a batch joins the ready messages, which go to the listener one by one
        (held while paused); False once closed."""
        listener = self._listener
        running = self._listener_running
        assert listener is not None and running is not None
        if item is None:  # (what _take does after each quiet OWED_RELEASE_SECONDS)
            for topic_consumer in self._topics:
                topic_consumer.release_owed()
        elif self._accept(item) is _CLOSED:
            return False
        ready = self._ready
        while ready and not self.closed:
            if not running.is_set():  # (paused: the ready messages wait for the resume; close sets it)
                running.wait()
                continue
            consumer, epoch, message = ready.popleft()
            handed = self._hand_out(consumer, epoch, message)
            if handed is None:
                continue
            try:
                listener(self, handed)
            except Exception:
                logger.exception("[%s] message_listener raised", self.settings.label)
        return not self.closed

    def _multi_topic(self) -> bool:
        """A list of topics (even of one), a pattern, or a partitioned topic: the official
        client's multi-topics consumer."""
        topics = self._topics
        return (not isinstance(self.settings.topic, str) or len(topics) != 1
                or topics[0].partition >= 0)

    def _topic_consumer(self, message_id: MessageId, needs_topic: bool = True) -> TopicConsumer:
        """The TopicConsumer of a message id: its topic's, else its partition's. When
        ``needs_topic`` (acknowledgements, a consumer's seek), a multi-topics consumer takes only
        an id of one of its topics, as the official one: an id without a topic (built,
        deserialized, a producer's) or of another topic raises OperationNotSupported."""
        consumer = self._by_topic.get(message_id.topic) if message_id.topic is not None else None
        if consumer is not None:
            return consumer
        if needs_topic and self._multi_topic():
            # (as the official multi-topics consumer: an id without one of its topics names no partition)
            raise OperationNotSupported("Pulsar error: OperationNotSupported")
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

    def acknowledge(self, message: Message | MessageId, *, transaction: Transaction | None = None) -> None:
        """Acknowledge one message (the broker will not deliver it again). With ``transaction``,
        the acknowledgement takes effect when it commits; the call waits for the broker's answer."""
        if transaction is not None:
            return self._acknowledge_in_transaction(message, transaction, False)
        if not (self._usable and self.backend.may_call_inline()):
            return self._acknowledge_checked(message)
        message_id = message.message_id() if type(message) is Message else self._id_of(message)
        consumer = self._by_topic.get(message_id.topic)  # (the fast path: a message this consumer received)
        if consumer is None:
            consumer = self._topic_consumer(message_id)
        consumer.ack(message_id)
        consumer.acknowledged += 1

    @from_any_thread(inline=True)
    def _acknowledge_checked(self, message: Message | MessageId) -> None:
        self._check_open()
        message_id = self._id_of(message)
        consumer = self._topic_consumer(message_id)
        consumer.ack(message_id)
        consumer.acknowledged += 1

    @from_any_thread()
    def _acknowledge_in_transaction(self, message: Message | MessageId, transaction: Transaction,
                                    cumulative: bool) -> None:
        self._check_open()
        if not isinstance(transaction, Transaction):
            raise ValueError("transaction must be a pulsarfast Transaction, not %s" % type(transaction).__name__)
        if cumulative and self.settings.consumer_type in (ConsumerType.Shared, ConsumerType.KeyShared):
            raise CumulativeAcknowledgementNotAllowedError("cumulative acknowledgement needs an Exclusive or "
                                                           "Failover subscription")
        message_id = self._id_of(message)
        consumer = self._topic_consumer(message_id)
        consumer.ack_in_transaction(message_id, transaction, cumulative)
        if cumulative:
            consumer.acknowledged_cumulative += 1
        else:
            consumer.acknowledged += 1

    def acknowledge_cumulative(self, message: Message | MessageId, *, transaction: Transaction | None = None) -> None:
        """Acknowledge this message and every one before it (of its partition). With
        ``transaction``, effective when it commits; the call waits for the broker's answer."""
        if transaction is not None:
            return self._acknowledge_in_transaction(message, transaction, True)
        return self._acknowledge_cumulative(message)

    @from_any_thread()
    def _acknowledge_cumulative(self, message: Message | MessageId) -> None:
        self._check_open()
        if self.settings.consumer_type in (ConsumerType.Shared, ConsumerType.KeyShared):
            raise CumulativeAcknowledgementNotAllowedError("cumulative acknowledgement needs an Exclusive or "
                                                           "Failover subscription")
        message_id = self._id_of(message)
        consumer = self._topic_consumer(message_id)
        consumer.ack_cumulative(message_id)
        consumer.acknowledged_cumulative += 1

    @from_any_thread()
    def negative_acknowledge(self, message: Message | MessageId) -> None:
        """Ask for the message again after negative_ack_redelivery_delay_ms. On a multi-topics
        consumer (a list of topics, a pattern, a partitioned topic) an id without one of its
        topics (built, deserialized, a producer's, another topic's) is ignored, as the official
        client does."""
        self._check_open()
        message_id = self._id_of(message)
        if message_id.topic not in self._by_topic and self._multi_topic():
            return
        ledger, entry = message_id.entry_key()
        consumer = self._topic_consumer(message_id)
        if consumer.redelivery is not None:
            consumer.redelivery.negatively_acknowledged(message_id)
        if message_id.__class__ is ChunkedMessageId:  # (every chunk again; the last one's below)
            for chunk_ledger, chunk_entry in message_id.chunk_entries[:-1]:
                self._nacks.add(consumer, chunk_ledger, chunk_entry)
        self._nacks.add(consumer, ledger, entry)
        consumer.negatively_acknowledged += 1

    @from_any_thread()
    def redeliver_unacknowledged_messages(self) -> None:
        """Ask the broker to deliver again every message not acknowledged yet."""
        self._check_open()
        for consumer in self._topics:
            consumer.redeliver([])

    @from_any_thread()
    def pause_message_listener(self) -> None:
        """Stop calling the message_listener until resume_message_listener(); the messages
        that arrive meanwhile wait (a call under way finishes). InvalidConfiguration without
        a listener, as in the official client."""
        self._check_open()
        running = self._listener_running
        if running is None:
            raise InvalidConfiguration("Pulsar error: InvalidConfiguration")
        running.clear()

    @from_any_thread()
    def resume_message_listener(self) -> None:
        """Call the message_listener again, first for the messages that arrived while paused."""
        self._check_open()
        running = self._listener_running
        if running is None:
            raise InvalidConfiguration("Pulsar error: InvalidConfiguration")
        running.set()

    def is_connected(self) -> bool:
        return not self.closed and all(c.is_connected() for c in self._topics)

    @from_any_thread()
    def get_last_message_id(self) -> MessageId:
        """The id of the last message of the topic (asked of the broker; ``(-1,-1,-1,-1)`` for an
        empty one). A multi-topics or partitioned consumer raises OperationNotSupported, as the
        official one does."""
        self._check_open()
        if self._multi_topic():
            raise OperationNotSupported("Pulsar error: OperationNotSupported")
        return self._topics[0].last_message_id()[0]

    def stats(self) -> ConsumerStats:
        """Counts since the consumer was made, in all and per topic or partition
        (see ``ConsumerTopicStats``). Only reads: safe from any thread, and
        after close (``closed`` says so)."""
        topics = {consumer.topic: consumer.stats() for consumer in list(self._topics)}
        each = list(topics.values())
        return {
            "subscription": self.settings.subscription_name,
            "closed": self.closed,
            "received": sum(t["received"] for t in each),
            "acknowledged": sum(t["acknowledged"] for t in each),
            "negatively_acknowledged": sum(t["negatively_acknowledged"] for t in each),
            "acknowledged_cumulative": sum(t["acknowledged_cumulative"] for t in each),
            "corrupt": sum(t["corrupt"] for t in each),
            "topics": topics,
        }

    @from_any_thread()
    def seek(self, messageid: MessageId | int) -> None:
        """Reset the subscription to a message id (the message after it comes next,
        as in the official client, or that very message with
        ``start_message_id_inclusive``) or a publish timestamp in ms (the first
        message published at or after it).
        A timestamp, MessageId.earliest or MessageId.latest applies to every
        partition, another id to its own partition (on a multi-topics consumer, an
        id of one of its topics: OperationNotSupported for one without, as there).
        Blocks for the broker's answer; raises on failure."""
        self._check_open()
        if isinstance(messageid, int) and not isinstance(messageid, bool):
            if messageid < 0:
                raise ValueError("a seek timestamp is milliseconds since the epoch, not %d" % messageid)
            self._returned.clear()  # (messages put back are from before the seek)
            for consumer in self._topics:
                consumer.seek(publish_time=messageid)
            return
        if not isinstance(messageid, MessageId):
            raise ValueError("invalid seek argument type %s: a MessageId or a timestamp in ms"
                             % type(messageid).__name__)
        if is_earliest(messageid) or is_latest(messageid):
            self._returned.clear()
            for consumer in self._topics:
                consumer.seek(message_id=messageid)
            return
        # (a multi-topics consumer's id must be of one of its topics, as there; a reader's names
        # its partition)
        target = self._topic_consumer(messageid, needs_topic=self.settings.durable)
        self._returned.clear()
        target.seek(message_id=messageid)

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
        if self._forked:
            self.closed = True  # (the broker-side consumer is the parent's)
            self._usable = False
            return
        self._shutdown()

    def after_fork_in_child(self) -> None:
        """In a forked child: the subscription and the messages received are the parent's; calls
        take the checked path, which raises ForkedError, and the delivery timers stop here."""
        self._forked = True
        self._usable = False
        self._stop_topic_watch()
        self._ready.clear()
        self._nacks.forget_after_fork()
        if self.redelivery is not None:
            self.redelivery.abort()
        for consumer in self._topics:
            consumer.forget_chunks()

    def abort(self) -> None:
        """The client shut down: blocked and later receive() calls raise AlreadyClosed."""
        self.closed = True
        self._usable = False
        self._stop_topic_watch()
        self._nacks.close()
        if self.redelivery is not None:
            self.redelivery.abort()
        for consumer in self._topics:
            consumer.abort()
        self._queue.put(_CLOSED)
        self._wake_listener()

    def _shutdown(self) -> None:
        self.closed = True
        self._usable = False
        self._stop_topic_watch()
        self._nacks.close()
        if self.redelivery is not None:
            self.redelivery.close()
        for consumer in self._topics:
            self.client.forget_consumer(consumer)
            try:
                consumer.close()
            except PulsarException as exc:
                logger.warning("[%s] closing the consumer on the broker: %s", consumer.topic, exc)
        self._queue.put(_CLOSED)
        self._wake_listener()
        self.client.consumer_closed(self)

    def join_listener(self, timeout: float) -> None:
        """Closed: wait, at most timeout, for the listener task to end (a call under way finishes)."""
        task = self._listener_task
        if task is not None:
            self.backend.join_task(task, timeout)

    def _wake_listener(self) -> None:
        """Closed: a paused listener task ends."""
        if self._listener_running is not None:
            self._listener_running.set()

    def _check_open(self) -> None:
        if self._forked:
            raise ForkedError("this consumer was started before os.fork(): its subscription and unacknowledged "
                              "messages are the parent's; subscribe again in the child")
        self.client.check_usable()
        if self.closed:
            raise AlreadyClosed("consumer closed")
