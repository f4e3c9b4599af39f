"""Producers: ``Producer`` (the public object, one topic, possibly
partitioned) over one ``PartitionProducer`` per partition.

A ``PartitionProducer`` owns one broker-side producer: its producer id
(stable for the client's life, so frames built once stay valid), its name,
its sequence ids, and the sends still waiting for the broker's receipt, in
sequence order. Every send is framed once, queued, and written at once when
the producer is connected; a receipt resolves the oldest send (receipts come
in order); a send that waits longer than ``send_timeout_millis`` fails with
``Timeout``. When the broker closes the producer or the connection dies, the
client's supervisor looks the topic up again and re-creates it; the sends
still waiting are then written again, in order, with their sequence ids, so
nothing acknowledged to a caller is lost and nothing unacknowledged is
dropped silently. After ``os.fork()``, the child's copy of a producer starts over
(``after_fork_in_child``): the sends waiting are the parent's, and the client
creates it again, with a name from the broker, on the child's own connection
at the first use there; a producer with a name of its own raises ``ForkedError``
in the child instead, since a name can be on the topic once.

A terminated topic is the exception to re-creating: once the broker says so
(a SEND_ERROR, or its answer to PRODUCER when the producer is re-created),
every send waiting fails with ``TopicTerminated``, later sends fail at once,
and the producer is not re-created (``PartitionProducer.terminated``).

With batching on, messages join an open batch that becomes one SEND frame
(``num_messages``, the first message's sequence id and, when it holds more than one, the
last one's as the highest sequence id, one
``SingleMessageMetadata`` per message) when it holds
``batching_max_messages`` messages (or half of the partition's pending limit, whichever is
fewer: ``_batch_messages``) or ``batching_max_allowed_size_in_bytes``
bytes, when ``batching_max_publish_delay_ms`` has passed, or at ``flush()``,
as the official client's (with ``batching_eager=True``, on the asyncio backend,
also at the end of the loop's turn when no batch of the producer waits for its
receipt: ``_send_early``);
the frame is then pending like any other, and its receipt gives each message
its id (the entry's, with the message's index in the batch).

With a ``compression_type``, each frame's payload (a message's, or a whole
batch's) is compressed once, when the frame is built (``pulsarfast.wire.compression``);
an empty message goes uncompressed.

With an ``encryption_key`` and a ``crypto_key_reader``, each frame's payload is encrypted after
compression (a batch's whole payload when it closes; each chunk of a chunked message on its own, as the
official producers do: ``pulsarfast.wire.crypto``, ``chunks.chunk_frames``); a
send fails with ``CryptoError`` while the public key cannot be read or used.

With ``chunking_enabled`` (batching off), a payload (compressed first) larger than the broker's max
message size is sent as chunks (``pulsarfast.wire.chunks``): one frame each, all with the message's sequence
id, each pending on its own so that a reconnect writes them all again in order; the receipts of the
first ones resolve nothing, the last one's is the message's (its id is the last chunk's entry).

Counts (``Producer.stats()``, which the metrics collector reads at scrape
time): messages the broker acknowledged and messages whose send failed (an
error, the send timeout, a close before the receipt), per partition, added
under the lock that their paths already hold; and the messages pending now.

``Producer`` routes: a message with a ``partition_key`` to the partition its
hash gives (the official client's BoostHash by default, so keys land where
the official client puts them), others round robin from a random start
(``RoundRobinDistribution``) or to one random partition
(``UseSinglePartition``), or to ``message_router(message, partitions)``.

Access modes (``access_mode``, each partition's producer on its own, as the official client does):
the PRODUCER command asks for one, and the broker decides. ``Exclusive`` is refused while another
producer is on the topic (``ProducerFenced``; a ``Shared`` one is then refused with
``ProducerBusy``); ``WaitForExclusive`` is queued by the broker (a first PRODUCER_SUCCESS says
``producer_ready=false``, which ``sansio`` drops) and created when the second one comes, within the
operation timeout like any create (else ``Timeout``, and the queued producer is closed on the
broker); ``ExclusiveWithFencing`` takes the topic from whatever producers are on it. The broker's
``topic_epoch`` is kept and sent again whenever an ``Exclusive`` or ``ExclusiveWithFencing`` producer
is re-created, so it keeps its topic across reconnections; one that was fenced out meanwhile is
refused with ``ProducerFenced``, and then, as in the official client, every send waiting and every
later one fails with ``ProducerFenced``, the producer is not re-created, and ``flush()`` and
``close()`` raise ``AlreadyClosed`` (``PartitionProducer.fenced``). A fenced-out ``Shared`` producer
is only closed by the broker: it is re-created (refused with ``ProducerBusy`` meanwhile, its sends
waiting up to the send timeout) until the exclusive one goes; a ``WaitForExclusive`` one is re-created
without its epoch and so waits in the broker's queue again, as the official client's does.

A message's arguments are checked as the official client checks them, before anything is queued
(``pulsarfast.producing.sendargs``).

With a schema other than bytes (``schema=``, a ``pulsarfast.schema`` schema), the PRODUCER command
carries its definition (the broker refuses an incompatible one: ``IncompatibleSchema``), ``send``
encodes the value through it first (a value it cannot encode raises there, and nothing is queued),
and every message's metadata carries the schema version the broker's PRODUCER_SUCCESS gave. Without
one, a send does no schema work at all.
"""
from __future__ import annotations

import collections
import datetime
import itertools
import logging
import random
import time
from typing import Any, Callable, TypedDict

from msgengine.runtime import from_any_thread, monotonic

from pulsarfast.base.enums import BatchingType, PartitionsRoutingMode, ProducerAccessMode
from pulsarfast.base.parts import HandedOut
from pulsarfast.base.results import (
    AlreadyClosed,
    ForkedError,
    InvalidConfiguration,
    MessageTooBig,
    NotConnected,
    ProducerFenced,
    ProducerQueueIsFull,
    PulsarException,
    Result,
    Timeout,
    TopicTerminated,
    exception_for,
    result_of,
)
from pulsarfast.network.connection import BrokerConnection
from pulsarfast.network.link import SessionLink
from pulsarfast.network.owner import Owner
from pulsarfast.options.settings import ProducerSettings
from pulsarfast.producing.sendargs import check_callback, check_content, check_options, encode_text
from pulsarfast.wire import proto
from pulsarfast.wire.chunks import chunk_frames
from pulsarfast.transactions.transaction import Transaction
from pulsarfast.wire.codec import encode_batch_entry, encode_send_frame, varint
from pulsarfast.wire.txnframes import in_transaction
from pulsarfast.wire.crypto import TAG_SIZE
from pulsarfast.wire.hashing import partition_for_key
from pulsarfast.wire.message import Message, MessageId, batch_message_ids

logger = logging.getLogger(__name__)

SendCallback = Callable[[Result, "MessageId | None"], None]
#: PartitionProducer.send's metadata_args of a message without options
_NO_OPTIONS: tuple = (None, None, 0, b"")

#: errors after which re-sending cannot help: the send fails (TopicTerminated fails them all: terminated())
_FINAL_SEND_ERRORS = (Result.NotAllowedError, Result.ProducerBlockedQuotaExceededError,
                      Result.ProducerBlockedQuotaExceededException, Result.MessageTooBig, Result.ProducerFenced)


class ProducerTopicStats(TypedDict):
    """One partition's (or topic's) counts in ``Producer.stats()``."""

    sent: int  #: messages the broker acknowledged (a receipt)
    failed: int  #: messages whose send failed: the broker's error, the send timeout, a close before the receipt
    pending: int  #: messages sent and not answered yet, the open batch's included
    connected: bool


class ProducerStats(TypedDict):
    """``Producer.stats()``: the topic, whether it is closed, totals and the counts per partition."""

    topic: str
    closed: bool
    sent: int
    failed: int
    pending: int
    topics: dict[str, ProducerTopicStats]


class _Send:
    """One message waiting for its receipt."""

    __slots__ = ("sequence_id", "frame", "callback", "deadline", "event", "result", "message_id", "members")

    def __init__(self, sequence_id: int, frame: bytes, callback: SendCallback | None, deadline: float,
                 event: Any, members: "list[_Send] | None" = None) -> None:
        self.sequence_id = sequence_id
        self.frame = frame
        self.callback = callback
        self.deadline = deadline
        self.event = event
        self.result: BaseException | None = None
        self.message_id: MessageId | None = None
        #: a batch frame's messages, in order (None: a frame of one message)
        self.members = members

    def count(self) -> int:
        return len(self.members) if self.members is not None else 1

    def finish(self, message_id: MessageId | None, error: BaseException | None) -> None:
        result = result_of(error)
        members = self.members
        if members is None:
            self.resolve(result, message_id, error)
            return
        if message_id is None:
            for member in members:
                member.resolve(result, None, error)
            return
        ids: list[MessageId] | None = None  # (made only when a member has a callback or a waiter)
        for index, member in enumerate(members):
            if member.callback is None and member.event is None:
                continue  # (send_async(..., None): nobody reads its outcome; flush() waits on the group)
            if ids is None:
                ids = batch_message_ids(message_id, len(members))
            member.resolve(result, ids[index], error)

    def resolve(self, result: Result, message_id: MessageId | None, error: BaseException | None) -> None:
        self.message_id = message_id
        self.result = error
        callback = self.callback
        if callback is not None:
            try:
                callback(result, message_id)
            except Exception:
                logger.exception("send_async callback raised")
        if self.event is not None:
            self.event.set()


class _ProducerLink(SessionLink):
    """One broker-side life of a PartitionProducer on one connection: what
    the connection tells (receipts, errors, close) goes to the producer; the
    supervisor re-creates the producer once this link closes."""

    def __init__(self, producer: "PartitionProducer", conn: BrokerConnection) -> None:
        super().__init__(conn)
        self.producer = producer

    def on_receipt(self, event: Any) -> None:
        self.producer.receipt(self, event.sequence_id, event.message_id)

    def on_send_error(self, event: Any) -> None:
        self.producer.send_error(self, event.sequence_id, event.error)

    def _detach(self, reason: BaseException | None) -> None:
        self.conn.unregister_producer(self.producer.producer_id, self)
        self.producer.link_closed(self, reason)

    def _close_command(self, request_id: int) -> bytes:
        return proto.close_producer(self.producer.producer_id, request_id)


class PartitionProducer:
    """The producer of one topic or partition; see the module docstring."""

    def __init__(self, client: Owner, topic: str, partition: int, settings: ProducerSettings,
                 max_pending: int) -> None:
        self.client = client
        self.backend = client.backend
        self.topic = topic
        self.partition = partition
        self.settings = settings
        self.producer_id = client.new_producer_id()
        self.name = settings.producer_name or ""
        self._name_bytes: bytes | None = None  # the name as the frames carry it
        #: MessageMetadata.schema_version, serialized, from PRODUCER_SUCCESS (b"": none, a producer without schema)
        self._schema_metadata = b""
        self.user_provided_name = bool(settings.producer_name)
        initial_sequence_id = settings.initial_sequence_id
        self._next_sequence_id = initial_sequence_id + 1 if initial_sequence_id is not None else 0
        self._sequence_id_given = initial_sequence_id is not None
        self.last_sequence_id = initial_sequence_id if initial_sequence_id is not None else -1
        #: this partition's share of the messages that may wait for a receipt
        self.max_pending = max_pending
        #: a batch closes at this many messages: batching_max_messages, but never more than half of
        #: max_pending, so that one batch fills while the one before waits for its receipt. With
        #: both at their default (1,000), a batch of max_pending messages stopped the sender for a
        #: round trip per batch (the official client's does: its producer then waits, idle, for
        #: each batch's receipt); two of 500 in flight keep it busy (benchmarks/pulsar_quick.py, fire)
        self._batch_messages = max(1, min(settings.batching_max_messages, max_pending // 2))
        self._lock = self.backend.lock()
        self._pending: collections.deque[_Send] = collections.deque()
        self._link: _ProducerLink | None = None
        self._epoch = 0
        self._room_waiters: list[Any] = []
        self._drain_waiters: list[Any] = []
        #: groups of sends taken out of the queue whose callbacks have not all run yet: a token ->
        #: (the group's lowest sequence id: flush() waits for those of the sends before it, the task
        #: running its callbacks: a flush from one of those does not wait for other callbacks)
        self._finishing: dict[int, tuple[int, int]] = {}
        self._finishing_tokens = itertools.count()
        self._timer: Any = None
        self._waiting_messages = 0  # messages sent and not answered yet, the open batch's included
        self._sent = 0  # messages acknowledged by the broker (under the lock)
        self._failed = 0  # messages whose send failed (under the lock)
        self._open: list[tuple[_Send, bytes]] = []  # the open batch: each message's send and entry
        #: BatchingType.KeyBased: each batch holds the messages of one partition key, which it carries
        self._key_based = settings.batching_type is BatchingType.KeyBased
        self._open_key: bytes | None = None  # (the key of the open batch's messages)
        self._open_txn: Transaction | None = None  # (the transaction of the open batch's messages)
        self._open_bytes = 0
        self._batch_timer: Any = None
        #: an early send of the open batch is due at the end of the loop's turn (batching_eager: _send_early)
        self._early_due = False
        #: frames of sends nobody waits on are queued on the connection, to be written by the next receipt
        self._flush_owed = False
        self.closed = False
        #: the broker's word that no send can succeed again, TopicTerminated or ProducerFenced, and its
        #: text (None: none yet): later sends fail at once with it, and the producer is not re-created
        self._ended: tuple[type[PulsarException], str] | None = None
        #: the broker's topic epoch for this producer (an exclusive one's), sent when re-creating it
        self._topic_epoch: int | None = None

    def __repr__(self) -> str:
        return "<PartitionProducer %s id=%d>" % (self.topic, self.producer_id)

    # -- creating on a broker (the supervisor's connect) ------------------------------

    def establish(self) -> _ProducerLink:
        """Look the topic up, create the producer on its broker and write the
        sends still waiting; returns the link (raises when it failed)."""
        if self.closed:
            raise AlreadyClosed("producer closed")
        conn = self.client.connection_for(self.topic)
        timeout = self.client.operation_timeout
        link = _ProducerLink(self, conn)
        conn.register_producer(self.producer_id, link)
        access_mode = int(self.settings.access_mode)
        # (a WaitForExclusive producer goes back in the broker's queue: as with the official client, its
        # topic epoch is not sent, which would have the broker refuse it once another took the topic)
        topic_epoch = self._topic_epoch if access_mode != ProducerAccessMode.WaitForExclusive else None
        try:
            answer = conn.request(
                lambda rid: proto.producer(self.topic, self.producer_id, rid, self.name or None,
                                           self.user_provided_name, self._epoch, self.settings.metadata,
                                           self.settings.initial_subscription_name, access_mode, topic_epoch,
                                           self.settings.wire_schema),
                timeout,
            )
        except BaseException as exc:
            conn.unregister_producer(self.producer_id, link)
            if isinstance(exc, TopicTerminated):
                self.terminated(exc)  # (re-created after the broker closed it: nothing left to re-create)
            elif isinstance(exc, ProducerFenced) and self._epoch:
                self.fenced(exc)  # (re-created after an exclusive producer took the topic: fenced for good)
            elif isinstance(exc, Timeout):
                self._close_on_broker(conn)  # (a WaitForExclusive one the broker still queues, or a late one)
            raise
        self._epoch += 1
        if self.closed or self._ended is not None:  # (closed meanwhile: the broker's producer goes too)
            link.close()
            raise AlreadyClosed("producer closed") if self.closed else self._ended_error()
        with self._lock:
            if answer.topic_epoch is not None:
                self._topic_epoch = answer.topic_epoch
            if answer.schema_version and self.settings.wire_schema is not None:
                self._schema_metadata = proto.schema_version_metadata(answer.schema_version)
            if answer.producer_name != self.name:
                self.name = answer.producer_name
                self._name_bytes = None
            if not self._sequence_id_given and answer.last_sequence_id >= 0 and self._next_sequence_id == 0:
                self._next_sequence_id = answer.last_sequence_id + 1  # (deduplication kept our last id)
                self.last_sequence_id = answer.last_sequence_id
            self._link = link
            frames = [send.frame for send in self._pending]
            if frames:
                logger.info("[%s] re-sending %d messages after re-creating the producer", self.topic, len(frames))
                try:
                    conn.queue_frames(frames)
                except PulsarException:
                    frames = []  # the connection closed: the link closes and the next attempt re-sends
        if frames:
            conn.flush()
        return link

    def after_fork_in_child(self) -> None:
        """In a forked child: the broker-side producer, its name and the sends waiting for its
        receipts are the parent's; start over with none (the client creates it again here)."""
        self._lock = self.backend.lock()  # (it may have been held by a thread that is not in the child)
        self._link = None
        self._take_all_locked()  # (their callbacks are the parent's to run: nothing is reported here)
        self._finishing = {}
        self._room_waiters = []
        self._drain_waiters = []
        self._epoch = 0
        if not self.user_provided_name:
            self.name = ""
            self._name_bytes = None

    def usable_in_child(self) -> bool:
        """Whether a forked child may create this producer again (see after_fork_in_child)."""
        return not self.closed and not self.user_provided_name and self._ended is None

    def _close_on_broker(self, conn: BrokerConnection) -> None:
        """CLOSE_PRODUCER for a create that timed out, without waiting for the answer: the broker may
        still queue it (WaitForExclusive) or create it late, and must not keep it."""
        try:
            conn.send_command(proto.close_producer(self.producer_id, conn.protocol.new_request_id()))
        except PulsarException:
            pass  # (the connection is gone: so is the producer)

    def _ended_error(self) -> PulsarException:
        """The error of a producer that ended (see _ended)."""
        assert self._ended is not None
        kind, text = self._ended
        return kind(text)

    @property
    def is_fenced(self) -> bool:
        """An exclusive producer took the topic: this one is over (ProducerFenced)."""
        ended = self._ended
        return ended is not None and ended[0] is ProducerFenced

    def link_closed(self, link: _ProducerLink, reason: BaseException | None) -> None:
        # (no lock: a failed write closes the connection, and the writer may hold it)
        if self._link is link:
            self._link = None

    def is_connected(self) -> bool:
        link = self._link
        return link is not None and not link.closed

    # -- sending ----------------------------------------------------------------------

    def send(self, payload: bytes, metadata_args: tuple, sequence_id: int | None, callback: SendCallback | None,
             wait: bool, txn: Transaction | None = None) -> _Send:
        """Frame and queue one message (or add it to the open batch); write
        what is ready when connected. With wait, the returned send has an
        event to wait on. metadata_args are encode_send_frame's (properties,
        partition_key, event_time, extra_metadata); a message with extra
        metadata (ordering key, delivery time, replication) is never batched.
        In a transaction (txn, whose partition is registered already), its frame carries the
        transaction's id, and a batch holds the messages of one transaction (or of none)."""
        settings = self.settings
        max_size = self.client.max_message_size
        batched = settings.batching_enabled and not metadata_args[3]
        txn_bits = (txn.id.most_bits, txn.id.least_bits) if txn is not None else None
        if txn_bits is not None and not batched:
            pairs, key, event_time, extra = metadata_args
            metadata_args = (pairs, key, event_time, extra + proto.txn_metadata(txn_bits))
        codec = settings.codec
        # (a batch is compressed whole when it closes; an empty payload goes as it is, since the
        # official C++ client cannot read an empty one compressed with zlib, and gains nothing)
        if codec is not None and not batched and payload:
            pairs, key, event_time, extra = metadata_args
            metadata_args = (pairs, key, event_time, extra + proto.compression_metadata(codec.type, len(payload)))
            payload = codec.compress(payload)
        encryptor = settings.encryptor
        seal = None  # (a chunked message's chunks are each encrypted on their own: chunks.chunk_frames)
        if encryptor is not None:  # (after compression; a batch's when it closes)
            if batched:
                encryptor.check()  # (CryptoError now, as for a single message, when no key can be used)
            elif settings.chunking_enabled and len(payload) + TAG_SIZE > max_size:
                encryptor.check()
                seal = encryptor.encrypt
            else:
                pairs, key, event_time, extra = metadata_args
                payload, sealed = encryptor.encrypt(payload)
                metadata_args = (pairs, key, event_time, extra + sealed)
        if len(payload) > max_size and not settings.chunking_enabled:
            raise MessageTooBig("message of %d bytes is larger than the broker's limit of %d" % (len(payload), max_size))
        event = self.backend.event() if wait else None
        while True:
            with self._lock:
                if self.closed:
                    raise AlreadyClosed("producer closed")
                if self._ended is not None:
                    self._failed += 1
                    raise self._ended_error()
                if self._waiting_messages < self.max_pending:
                    in_flight = bool(self._pending)  # (frames before this message's: written, or owed a flush)
                    if sequence_id is None:
                        sequence_id = self._next_sequence_id
                    self._next_sequence_id = sequence_id + 1
                    self._waiting_messages += 1
                    deadline = monotonic() + settings.send_timeout if settings.send_timeout else 0.0
                    if batched:
                        send = _Send(sequence_id, b"", callback, deadline, event)
                        pairs, key, event_time, _extra = metadata_args
                        entry = encode_batch_entry(
                            proto.batch_entry_metadata(len(payload), pairs, key, event_time, sequence_id), payload)
                        if self._open and (self._open_txn is not txn or self._key_based and key != self._open_key):
                            # (a batch holds one transaction's messages, or none's; KeyBased: one key's)
                            frames = self._close_batch_locked()
                            self._open_txn = txn
                            frames += self._add_to_batch_locked(send, entry)
                        else:
                            self._open_txn = txn
                            frames = self._add_to_batch_locked(send, entry)
                        self._open_key = key
                    else:
                        frames = self._close_batch_locked()  # (the open batch goes first: order is kept)
                        name = self._name_bytes
                        if name is None:
                            name = self._name_bytes = self.name.encode("utf-8")
                        if self._schema_metadata:  # (the schema version each message carries)
                            metadata_args = metadata_args[:3] + (metadata_args[3] + self._schema_metadata,)
                        if seal is not None or len(payload) > max_size:  # (chunking_enabled: one SEND per chunk)
                            send = self._queue_chunks_locked(sequence_id, name, payload, metadata_args, max_size,
                                                             callback, deadline, event, frames, seal, txn_bits)
                        else:
                            frame = encode_send_frame(self.producer_id, sequence_id, name, int(time.time() * 1000),
                                                      payload, *metadata_args)
                            if txn_bits is not None:
                                frame = in_transaction(frame, txn_bits)
                            send = _Send(sequence_id, frame, callback, deadline, event)
                            self._pending.append(send)
                            frames.append(frame)
                    link = self._queue_locked(frames)
                    if link is not None and in_flight and not wait and not batched:
                        # A send that nobody waits on, behind frames waiting for their receipts:
                        # the next receipt writes it, with whatever else joined it meanwhile (one
                        # write for many frames, as the broker's answers clock them out). A batch
                        # that closed is written at once: it is many messages already, and held
                        # back it would reach the broker only after the one before's receipt.
                        self._flush_owed = True
                        link = None
                    break
                if not settings.block_if_queue_full:
                    raise ProducerQueueIsFull("%d messages are waiting for the broker" % self._waiting_messages)
                room = self.backend.event()
                self._room_waiters.append(room)
            room.wait(1.0)
        if link is not None:
            link.conn.flush()  # (outside the lock: see queue_frames)
        return send

    def send_plain(self, payload: bytes, callback: SendCallback | None) -> None:
        """``send_async(bytes, callback)`` without any option, schema or transaction: with batching on
        (no encryption, no key-based batching), the message joins the open batch here, with its
        entry's metadata written in place (what ``send`` does for it, without the checks and branches
        that cannot apply); every other case, and a full queue, a closed or ended producer or an
        open batch of a transaction, go through ``send``."""
        settings = self.settings
        if (not settings.batching_enabled or settings.encryptor is not None or self._key_based
                or len(payload) > self.client.max_message_size):
            self.send(payload, _NO_OPTIONS, None, callback, False)
            return
        with self._lock:
            if (self.closed or self._ended is not None or self._waiting_messages >= self.max_pending
                    or self._open_txn is not None):
                link = None
                slow = True
            else:
                slow = False
                in_flight = bool(self._pending)
                sequence_id = self._next_sequence_id
                self._next_sequence_id = sequence_id + 1
                self._waiting_messages += 1
                timeout = settings.send_timeout
                send = _Send(sequence_id, b"", callback, monotonic() + timeout if timeout else 0.0, None)
                # (SingleMessageMetadata: payload_size (3) and sequence_id (8), as batch_entry_metadata)
                entry = encode_batch_entry(b"\x18" + varint(len(payload)) + b"\x40" + varint(sequence_id), payload)
                size = self._open_bytes + len(entry)
                if (self._batch_timer is not None and len(self._open) + 1 < self._batch_messages
                        and size < settings.batching_max_allowed_size_in_bytes
                        and (in_flight or not settings.batching_eager)):
                    # the batch goes on filling (none of _add_to_batch_locked's cases applies)
                    self._open.append((send, entry))
                    self._open_bytes = size
                    return
                # (a batch that closed here is written at once, even behind one waiting for its
                # receipt: two batches on the wire, not one after the other's receipt)
                link = self._queue_locked(self._add_to_batch_locked(send, entry))
        if slow:
            self.send(payload, _NO_OPTIONS, None, callback, False)
        elif link is not None:
            link.conn.flush()

    def _queue_chunks_locked(self, sequence_id: int, name: bytes, payload: bytes, metadata_args: tuple,
                             max_size: int, callback: SendCallback | None, deadline: float, event: Any,
                             frames: list[bytes], seal: Any = None, txn_bits: tuple[int, int] | None = None) -> _Send:
        """A message larger than max_size as its chunks' frames (pulsarfast.wire.chunks), each pending
        with the message's sequence id, in order: the broker's receipt of each resolves the oldest;
        the last chunk's is the message's (the earlier ones count no message: no members)."""
        chunked = chunk_frames(self.producer_id, sequence_id, name, int(time.time() * 1000), payload,
                               metadata_args, max_size, seal)
        if txn_bits is not None:
            chunked = [in_transaction(frame, txn_bits) for frame in chunked]
        for frame in chunked[:-1]:
            self._pending.append(_Send(sequence_id, frame, None, deadline, None, []))
        send = _Send(sequence_id, chunked[-1], callback, deadline, event)
        self._pending.append(send)
        frames.extend(chunked)
        return send

    def _queue_locked(self, frames: list[bytes]) -> "_ProducerLink | None":
        """Queue frames on the live link, if any (under the lock); the link to flush after."""
        if not frames:
            return None
        if self._pending and self._pending[0].deadline and self._timer is None:
            self._timer = self.backend.call_later(max(0.001, self._pending[0].deadline - monotonic()), self._expire)
        link = self._link
        if link is None or link.closed:
            return None  # the frames wait for the re-created producer
        try:
            link.conn.queue_frames(frames)
        except PulsarException:
            return None  # the connection closed: the same
        return link

    # -- batches --------------------------------------------------------------------

    def _add_to_batch_locked(self, send: _Send, entry: bytes) -> list[bytes]:
        self._open.append((send, entry))
        self._open_bytes += len(entry)
        settings = self.settings
        if (len(self._open) >= self._batch_messages
                or self._open_bytes >= settings.batching_max_allowed_size_in_bytes):
            return self._close_batch_locked()
        if self._batch_timer is None:
            self._batch_timer = self.backend.call_later(settings.batch_delay, self._batch_due)
        if not self._pending and settings.batching_eager:
            self._send_early()
        return []

    def _send_early(self) -> None:
        """With ``batching_eager``, when no batch of this producer waits for its receipt: on a
        backend with turns (asyncio), the open batch goes at the end of this turn, with every
        message sent in it, instead of after the batching delay (treated as a maximum: the broker
        would otherwise sit idle meanwhile). So a coroutine awaiting each send waits a round trip,
        not the delay, and concurrent senders fill each batch while the previous one is on its
        way. Off by default: the official client's batch waits for the delay, a full batch or a
        flush()."""
        if not self._early_due and not self.closed:
            self._early_due = self.backend.at_turn_end(self._early_batch)

    def _early_batch(self) -> None:
        self._early_due = False
        if self._open and not self._pending:
            self.backend.spawn(self.send_open_batch)  # (a task: queueing the frame may wait for the lock)

    def _close_batch_locked(self) -> list[bytes]:
        """The open batch becomes one SEND frame, pending like any other (under the lock)."""
        open_batch = self._open
        if not open_batch:
            return []
        self._open = []
        self._open_bytes = 0
        timer, self._batch_timer = self._batch_timer, None
        if timer is not None:
            timer.cancel()
        members = [send for send, _entry in open_batch]
        count = len(members)
        name = self._name_bytes
        if name is None:
            name = self._name_bytes = self.name.encode("utf-8")
        body = b"".join(entry for _send, entry in open_batch)
        extra = proto.f_uint(11, count) + self._schema_metadata
        codec = self.settings.codec
        if codec is not None:
            extra += proto.compression_metadata(codec.type, len(body))
            body = codec.compress(body)
        encryptor = self.settings.encryptor
        if encryptor is not None:  # (its keys were usable when each message joined: see send)
            body, sealed = encryptor.encrypt(body)
            extra += sealed
        key = self._open_key if self._key_based else None  # (the broker's Key_Shared dispatch reads it)
        txn, self._open_txn = self._open_txn, None
        txn_bits = (txn.id.most_bits, txn.id.least_bits) if txn is not None else None
        if txn_bits is not None:
            extra += proto.txn_metadata(txn_bits)
        # The last member's sequence id as the batch's highest (in the command, where the broker's
        # deduplication reads it, and in the metadata, as the Java client writes it; the official
        # Python/C++ client 3.13 sends neither): without it a deduplicating broker takes the batch for
        # its first sequence id only, and stores again a resent batch's later messages whose batches
        # are cut differently (tests/pulsar/test_deduplication.py).
        first, highest = members[0].sequence_id, members[-1].sequence_id
        if highest != first:
            extra += proto.f_uint(24, highest)
        frame = encode_send_frame(self.producer_id, first, name, int(time.time() * 1000),
                                  body, None, key, 0, extra, count, highest if highest != first else None)
        if txn_bits is not None:
            frame = in_transaction(frame, txn_bits)
        self._pending.append(_Send(members[0].sequence_id, frame, None, members[0].deadline, None, members))
        return [frame]

    def _batch_due(self) -> None:
        """The batch delay's timer (which must not block): the batch goes in a task."""
        self.backend.spawn(self.send_open_batch)

    def send_open_batch(self) -> None:
        with self._lock:
            link = self._queue_locked(self._close_batch_locked())
        if link is not None:
            link.conn.flush()

    def _wake(self, waiters: list[Any]) -> None:
        for waiter in waiters:
            waiter.set()

    def _finishing_locked(self, sends: list[_Send]) -> tuple[list[Any], int]:
        """Sends are taken out of the queue to be finished (under the lock): the senders waiting
        for room, to wake now, and the group's token; flush() waits until ``_finish(token)`` has
        run their callbacks."""
        token = next(self._finishing_tokens)
        # (sends leave the queue in order: the first has the lowest id; the callbacks run on this
        # task, but for the send timeout's, which moves them to a task of their own)
        self._finishing[token] = (sends[0].sequence_id if sends else -1, self.backend.current_task_id())
        waiters, self._room_waiters = self._room_waiters, []
        return waiters, token

    def _finish(self, token: int, sends: list[_Send], message_id: MessageId | None,
                error: BaseException | None) -> None:
        """Finish the sends of group ``token`` (their callbacks run here), then wake flush()."""
        try:
            for send in sends:
                send.finish(message_id, error)
        finally:
            with self._lock:
                del self._finishing[token]
                waiters, self._drain_waiters = self._drain_waiters, []
            self._wake(waiters)

    def _fail(self, token: int, sends: list[_Send], error: BaseException) -> None:
        self._finish(token, sends, None, error)

    def receipt(self, link: _ProducerLink, sequence_id: int, message_id: Any) -> None:
        # (no topic, as the official producer's ids: a multi-topics consumer refuses to acknowledge or
        # seek to one, with OperationNotSupported)
        mid = MessageId.from_proto(message_id, partition=self.partition) if message_id else None
        with self._lock:
            pending = self._pending
            if not pending or sequence_id < pending[0].sequence_id:
                return  # a receipt of a send that already failed (timeout), or a duplicate
            if sequence_id > pending[0].sequence_id:
                head = pending[0].sequence_id
                out_of_order = True
            else:
                out_of_order = False
                send = pending.popleft()
                count = send.count()
                self._waiting_messages -= count
                self._sent += count
                self.last_sequence_id = send.members[-1].sequence_id if send.members else sequence_id
                waiters, token = self._finishing_locked([send])
                owed, self._flush_owed = self._flush_owed, False
        if out_of_order:
            logger.error("[%s] receipt for sequence id %d while %d is the oldest waiting: reconnecting",
                         self.topic, sequence_id, head)
            link.conn.close(NotConnected("receipts out of order"))
            return
        if owed:
            link.conn.flush()  # (the frames sends left queued behind this one: see send)
        self._wake(waiters)
        self._finish(token, [send], mid, None)
        if self._open and not self._pending and self.settings.batching_eager:
            self._send_early()  # (what joined the batch while the last one was on its way)

    def send_error(self, link: _ProducerLink, sequence_id: int, error: PulsarException) -> None:
        if error.result is Result.TopicTerminated:
            self.terminated(error)
            return
        if error.result not in _FINAL_SEND_ERRORS:
            logger.warning("[%s] the broker refused sequence id %d (%s): reconnecting", self.topic, sequence_id, error)
            link.conn.close(error)
            return
        with self._lock:
            failed = [s for s in self._pending if s.sequence_id == sequence_id]
            for send in failed:
                self._pending.remove(send)
                self._waiting_messages -= send.count()
                self._failed += send.count()
            waiters, token = self._finishing_locked(failed)
        self._wake(waiters)
        self._fail(token, failed, error)

    def terminated(self, error: PulsarException) -> None:
        """The broker says the topic is terminated: no send can succeed again.
        Every send waiting (the open batch's too) fails with TopicTerminated,
        later ones fail at once, and the client stops re-creating the producer,
        as the official client does; the producer stays open until closed."""
        self._end(TopicTerminated, error, "the topic is terminated")

    def fenced(self, error: PulsarException) -> None:
        """Re-creating the producer, the broker says an exclusive producer took the topic (and its
        epoch) meanwhile: as terminated(), with ProducerFenced, as the official client does."""
        self._end(ProducerFenced, error, "an exclusive producer fenced this one out")

    def _end(self, kind: type[PulsarException], error: PulsarException, why: str) -> None:
        with self._lock:
            if self.closed or self._ended is not None:
                return
            self._ended = (kind, str(error))
            failed = self._take_all_locked()
            waiters, token = self._finishing_locked(failed)
        logger.info("[%s] %s (%s): %d sends failed, the producer is not re-created", self.topic, why, error,
                    len(failed))
        try:
            self.client.forget_producer(self)
            link = self._link
            if link is not None and not link.closed:
                link.close()
        finally:
            self._wake(waiters)
            self._fail(token, failed, self._ended_error())

    def _expire(self) -> None:
        """The send timeout's timer: fail the sends waiting longer than it."""
        now = monotonic()
        with self._lock:
            self._timer = None
            expired = []
            while self._pending and self._pending[0].deadline and self._pending[0].deadline <= now:
                send = self._pending.popleft()
                self._waiting_messages -= send.count()
                self._failed += send.count()
                expired.append(send)
            if self._pending and self._pending[0].deadline and not self.closed:
                self._timer = self.backend.call_later(max(0.001, self._pending[0].deadline - now), self._expire)
            if not expired:
                return
            waiters, token = self._finishing_locked(expired)
        self._wake(waiters)
        error = Timeout("no receipt from the broker within %.1fs" % self.settings.send_timeout)
        try:
            self.backend.spawn(self._fail_on_this_task, token, expired, error)  # (callbacks off the timer's task)
        except BaseException:  # no task to be had (at interpreter exit): here, then
            self._fail(token, expired, error)

    def _fail_on_this_task(self, token: int, sends: list[_Send], error: BaseException) -> None:
        with self._lock:
            self._finishing[token] = (self._finishing[token][0], self.backend.current_task_id())
        self._fail(token, sends, error)


    def pending_count(self) -> int:
        """Messages sent and not answered yet (the open batch's included)."""
        return self._waiting_messages

    def stats(self) -> ProducerTopicStats:
        """This partition's counts (only reads: safe from any thread)."""
        return {"sent": self._sent, "failed": self._failed, "pending": self._waiting_messages,
                "connected": self.is_connected()}

    def flush(self, timeout: float | None) -> None:
        """Wait until every send made before the call has its outcome and its callback has run (as
        with the official client: a callback that counts outcomes has counted them all when flush
        returns). The open batch goes now."""
        self.send_open_batch()
        task = self.backend.current_task_id()
        with self._lock:
            last = self._pending[-1].sequence_id if self._pending else -1
            before = set(self._finishing)  # (groups taken out before the call: their sends were made before it)
            # from a send callback: only the receipts, never other callbacks (two callbacks flushing
            # on two tasks would wait for each other)
            in_callback = any(runner == task for _lowest, runner in self._finishing.values())
        deadline = monotonic() + timeout if timeout else None
        while True:
            with self._lock:
                if ((not self._pending or self._pending[0].sequence_id > last)
                        and (in_callback or not any(token in before or lowest <= last
                                                    for token, (lowest, _runner) in self._finishing.items()))):
                    return
                event = self.backend.event()
                self._drain_waiters.append(event)
            remaining = deadline - monotonic() if deadline is not None else 1.0
            if remaining <= 0:
                raise Timeout("flush: %d messages still wait for the broker" % len(self._pending))
            event.wait(min(remaining, 1.0))

    def close(self, timeout: float) -> None:
        """Flush, then close on the broker; sends still waiting fail with AlreadyClosed."""
        try:
            self.flush(timeout)
        except PulsarException:
            pass
        with self._lock:
            if self.closed:
                return
            self.closed = True
            link, self._link = self._link, None
            failed = self._take_all_locked()
            waiters, token = self._finishing_locked(failed)
        self._wake(waiters)
        self._fail(token, failed, AlreadyClosed("producer closed before the broker's receipt"))
        if link is not None and not link.closed:
            try:
                link.conn.request(lambda rid: proto.close_producer(self.producer_id, rid), timeout)
            except PulsarException as exc:
                logger.debug("[%s] closing the producer on the broker: %s", self.topic, exc)
                link.close()
            else:
                link.close_link(AlreadyClosed("producer closed"))

    def _take_all_locked(self) -> list[_Send]:
        """Every send still waiting, the open batch's included, taken out (under the lock); timers stopped."""
        sends = list(self._pending) + [send for send, _entry in self._open]
        self._failed += sum(send.count() for send in sends)
        self._pending.clear()
        self._open = []
        self._open_bytes = 0
        self._waiting_messages = 0
        for name in ("_timer", "_batch_timer"):
            timer = getattr(self, name)
            setattr(self, name, None)
            if timer is not None:
                timer.cancel()
        return sends

    def abort(self, error: BaseException) -> None:
        """Closed without a word to the broker (the client shut down): every send waiting fails."""
        with self._lock:
            self.closed = True
            failed = self._take_all_locked()
            waiters, token = self._finishing_locked(failed)
        self._wake(waiters)
        self._fail(token, failed, error)


class Producer(HandedOut):
    """Publishes to one topic (all of its partitions, when partitioned)."""

    def __init__(self, client: Owner, settings: ProducerSettings, partitions: list[PartitionProducer]) -> None:
        self._client = client
        self.backend = client.backend
        self.settings = settings
        self._topic = settings.topic
        self._partitions = partitions
        self._value_schema = settings.value_schema
        #: what this producer keeps alive for its user (its Client, which hands its parts itself weakly)
        self.keep_alive: object = None
        self._next_partition = random.randrange(len(partitions))
        self._closed = False
        #: why sends fail once closed (ForkedError for a named producer in a forked child)
        self._closed_error: PulsarException | None = None
        #: a partitioned topic's PartitionWatch (partitionwatch.py: partitions added later), stopped at close
        self.partition_watch: Any = None
        #: send_async calls in a transaction queued behind their partition's registration (flush() waits
        #: for them to be queued on their partition, then for their outcome), and flush()es waiting
        self._registering = 0
        self._registered_waiters: list[Any] = []
        self._registering_lock = self.backend.lock()

    @property
    def closed(self) -> bool:
        return self._closed

    def add_partitions(self, partitions: list["PartitionProducer"]) -> bool:
        """Partitions added to the topic, started: routed to from now on (False: closed meanwhile)."""
        if self._closed:
            return False
        self._partitions = self._partitions + partitions  # (replaced, never changed in place: sends read it)
        return True

    # -- the official API ---------------------------------------------------------------

    def topic(self) -> str:
        return self._topic

    def producer_name(self) -> str:
        return self._partitions[0].name

    def last_sequence_id(self) -> int:
        return max(p.last_sequence_id for p in self._partitions)

    def is_connected(self) -> bool:
        return not self._closed and all(p.is_connected() for p in self._partitions)

    def stats(self) -> ProducerStats:
        """Counts since the producer was made, in all and per partition (see
        ``ProducerTopicStats``). Only reads: safe from any thread, and after
        close (``closed`` says so)."""
        topics = {partition.topic: partition.stats() for partition in self._partitions}
        return {"topic": self._topic, "closed": self._closed,
                "sent": sum(t["sent"] for t in topics.values()),
                "failed": sum(t["failed"] for t in topics.values()),
                "pending": sum(t["pending"] for t in topics.values()),
                "topics": topics}

    @from_any_thread()
    def send(self, content: bytes | None, properties: dict[str, str] | None = None, partition_key: str | None = None,
             ordering_key: str | None = None, sequence_id: int | None = None,
             replication_clusters: list[str] | None = None, disable_replication: bool = False,
             event_timestamp: int | None = None, deliver_at: int | None = None,
             deliver_after: datetime.timedelta | None = None, *, transaction: Transaction | None = None) -> MessageId:
        """Publish and block until the broker's receipt: the message's id. Raises on failure. With
        ``transaction``, the message is sent in it: visible once it commits, never if it aborts."""
        send = self._send(content, None, True, properties, partition_key, ordering_key, sequence_id,
                          replication_clusters, disable_replication, event_timestamp, deliver_at, deliver_after,
                          transaction)
        send.event.wait()
        if send.result is not None:
            raise send.result
        assert send.message_id is not None
        return send.message_id

    @from_any_thread(inline=True)  # (waits only for room with block_if_queue_full, which the loop's callers avoid)
    def send_async(self, content: bytes | None, callback: SendCallback, properties: dict[str, str] | None = None,
                   partition_key: str | None = None, ordering_key: str | None = None,
                   sequence_id: int | None = None, replication_clusters: list[str] | None = None,
                   disable_replication: bool = False, event_timestamp: int | None = None,
                   deliver_at: int | None = None, deliver_after: datetime.timedelta | None = None, *,
                   transaction: Transaction | None = None) -> None:
        """Publish without waiting: ``callback(result, message_id)`` once the broker answers
        (``Result.Ok`` and the id, or an error code and None). ``callback=None``, as
        the official client allows, asks for no outcome (flush() still waits for it). With
        ``transaction``, the message is sent in it; the first message to a partition in a
        transaction waits (in a task, its order kept) for the partition's registration."""
        check_callback(callback)
        try:
            if (type(content) is bytes and properties is None and partition_key is None and ordering_key is None
                    and sequence_id is None and replication_clusters is None and disable_replication is False
                    and event_timestamp is None and deliver_at is None and deliver_after is None
                    and transaction is None and self._value_schema is None):
                self._client.check_usable()  # (the common send: bytes, no option; _send's checks that apply)
                if self._closed:
                    raise self._closed_error or AlreadyClosed("producer closed")
                self._choose(content, None, None).send_plain(content, callback)
                return
            self._send(content, callback, False, properties, partition_key, ordering_key, sequence_id,
                       replication_clusters, disable_replication, event_timestamp, deliver_at, deliver_after,
                       transaction)
        except PulsarException as exc:
            if callback is None:
                raise
            callback(exc.result, None)

    @from_any_thread()
    def flush(self) -> None:
        """Block until every message sent before the call has its outcome. A producer fenced out by an
        exclusive one raises AlreadyClosed, as the official client's does."""
        self._client.check_usable()
        self._wait_for_registrations()
        for partition in self._partitions:
            partition.flush(self.settings.flush_timeout)
        self._check_not_fenced()

    def _wait_for_registrations(self) -> None:
        with self._registering_lock:
            if not self._registering:
                return
            waiter = self.backend.event()
            self._registered_waiters.append(waiter)
        waiter.wait()  # (each registration ends within the operation timeout)

    def _registration_done(self) -> None:
        with self._registering_lock:
            self._registering -= 1
            waiters = self._registered_waiters if not self._registering else []
            if waiters:
                self._registered_waiters = []
        for waiter in waiters:
            waiter.set()

    def _check_not_fenced(self) -> None:
        if any(partition.is_fenced for partition in self._partitions):
            raise AlreadyClosed("the producer was fenced out by an exclusive producer of the topic")

    @from_any_thread()
    def close(self) -> None:
        """Wait for the messages in flight, then close on the broker."""
        if self._closed:
            return
        self._closed = True
        self._stop_partition_watch()
        if self._client.forked():
            return  # (the broker-side producer is the parent's)
        timeout = self._client.operation_timeout
        self._wait_for_registrations()  # (sends in a transaction queued behind a registration go first)
        for partition in self._partitions:
            try:  # while still kept: a producer reconnecting meanwhile sends what waits
                partition.flush(timeout)
            except PulsarException:
                pass
        for partition in self._partitions:
            self._client.forget_producer(partition)
            partition.close(timeout)
        self._client.producer_closed(self)
        self._check_not_fenced()  # (closed all the same)

    def partition_producers(self) -> list[PartitionProducer]:
        return list(self._partitions)

    def _stop_partition_watch(self) -> None:
        if self.partition_watch is not None:
            self.partition_watch.close()

    def after_fork_in_child(self) -> None:
        """In a forked child (the client tells it): each partition starts over; a producer with a
        name of its own cannot be on the topic twice, so it is closed here with ForkedError."""
        self._stop_partition_watch()
        for partition in self._partitions:
            partition.after_fork_in_child()
        if not self._closed and self.settings.producer_name:
            self._closed = True
            self._closed_error = ForkedError(
                "producer %r was created before os.fork() with a name of its own, which the parent's producer "
                "holds on the topic; create a new producer in the child" % self.settings.producer_name)

    def abort(self) -> None:
        """The client shut down: every send still waiting fails with AlreadyClosed."""
        self._closed = True
        self._stop_partition_watch()
        for partition in self._partitions:
            partition.abort(AlreadyClosed("the client shut down before the broker's receipt"))

    # -- internals ----------------------------------------------------------------------

    def _send(self, content: Any, callback: SendCallback | None, wait: bool, properties: Any, partition_key: Any,
              ordering_key: Any, sequence_id: Any, replication_clusters: Any, disable_replication: bool,
              event_timestamp: Any, deliver_at: Any, deliver_after: Any, txn: Transaction | None = None) -> _Send:
        # the official client's checks first (sendargs), whatever the producer's state
        schema = self._value_schema
        if schema is not None:  # (a value the schema cannot encode raises here, before anything is queued)
            payload = schema.encode(content) if content is not None else b""
        elif type(content) is bytes:  # (the common send: no call)
            payload = content
        else:
            payload = check_content(content) if content is not None else b""
        if properties is not None or partition_key is not None or ordering_key is not None \
                or sequence_id is not None or replication_clusters is not None or disable_replication is not False \
                or event_timestamp is not None or deliver_at is not None or deliver_after is not None:
            pairs = check_options(properties, partition_key, ordering_key, sequence_id, replication_clusters,
                                  disable_replication, event_timestamp, deliver_at, deliver_after)
        else:
            pairs = None  # (the common send: no option at all)
        self._client.check_usable()
        if self._closed:
            raise self._closed_error or AlreadyClosed("producer closed")
        extra = b""
        if ordering_key or disable_replication or replication_clusters or deliver_after or deliver_at or content is None:
            if deliver_after:
                deliver_at = int(time.time() * 1000 + deliver_after.total_seconds() * 1000)
            clusters = [encode_text(c, "replication_clusters").decode("utf-8", "replace")
                        for c in replication_clusters] if replication_clusters else None
            extra = proto.extra_metadata(
                ordering_key=ordering_key.encode("utf-8") if ordering_key else None,
                replicate_to=["__local__"] if disable_replication else clusters,
                deliver_at_time=deliver_at or None, null_value=content is None,
            )
        metadata_args = (pairs, partition_key.encode("utf-8") if partition_key else None, event_timestamp or 0, extra)
        partition = self._choose(payload, partition_key, properties)
        if txn is None:
            return partition.send(payload, metadata_args, sequence_id or None, callback, wait)
        return self._send_in_transaction(txn, partition, payload, metadata_args, sequence_id or None, callback, wait)

    def _send_in_transaction(self, txn: Transaction, partition: PartitionProducer, payload: bytes,
                             metadata_args: tuple, sequence_id: int | None, callback: SendCallback | None,
                             wait: bool) -> _Send:
        """A send in a transaction: counted as one of its operations until the broker's answer (a
        failed one fails the transaction's commit), after its partition's registration."""
        if not isinstance(txn, Transaction):
            raise ValueError("transaction must be a pulsarfast Transaction, not %s" % type(txn).__name__)
        txn.check_open()
        user_callback = callback

        def counted(result: Result, message_id: MessageId | None) -> None:
            txn.op_finished(None if result == Result.Ok else exception_for(result)(
                "a send in transaction %s failed: %s" % (txn.id, result.name)))
            if user_callback is not None:
                user_callback(result, message_id)

        txn.op_started(partition)
        if wait:
            if not txn.partition_ready(partition.topic):
                registered = self.backend.event()
                outcome: list[BaseException | None] = []

                def done(error: BaseException | None) -> None:
                    outcome.append(error)
                    registered.set()

                txn.after_partition_registered(partition.topic, done)
                registered.wait()
                if outcome[0] is not None:
                    txn.op_finished(outcome[0])
                    raise outcome[0]
            try:
                return partition.send(payload, metadata_args, sequence_id, counted, True, txn)
            except BaseException as exc:
                txn.op_finished(exc)
                raise

        def send_now(error: BaseException | None) -> None:
            try:
                if error is None:
                    try:
                        partition.send(payload, metadata_args, sequence_id, counted, False, txn)
                        return
                    except PulsarException as exc:
                        error = exc
            finally:
                self._registration_done()
            txn.op_finished(error)
            if user_callback is not None:
                user_callback(result_of(error), None)
            else:
                logger.warning("a send in transaction %s failed: %s", txn.id, error)

        if txn.partition_ready(partition.topic):
            try:
                return partition.send(payload, metadata_args, sequence_id, counted, False, txn)
            except BaseException as exc:
                txn.op_finished(exc)
                raise
        with self._registering_lock:
            self._registering += 1
        txn.after_partition_registered(partition.topic, send_now)
        return _Send(-1, b"", None, 0.0, None)  # (send_async does not look at it)

    def _choose(self, payload: bytes, partition_key: str | None, properties: Any) -> PartitionProducer:
        partitions = self._partitions
        count = len(partitions)
        if count == 1:
            return partitions[0]
        settings = self.settings
        if settings.message_router is not None:
            message = Message(payload, MessageId(), self._topic, properties=dict(properties or {}),
                              partition_key=partition_key)
            index = settings.message_router(message, count)
            if not isinstance(index, int) or not 0 <= index < count:
                raise InvalidConfiguration("message_router returned %r for %d partitions" % (index, count))
            return partitions[index]
        if partition_key:
            return partitions[partition_for_key(partition_key, count, settings.hashing_scheme)]
        if settings.message_routing_mode == PartitionsRoutingMode.UseSinglePartition:
            return partitions[self._next_partition]
        index = self._next_partition
        self._next_partition = (index + 1) % count
        return partitions[index]


