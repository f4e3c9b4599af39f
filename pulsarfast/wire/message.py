"""Messages and message ids, with the official ``pulsar`` module's methods.

``MessageId`` is a broker position (ledger, entry), the partition it came
from and, inside a batch, its index; ``serialize()`` gives the protobuf
``MessageIdData`` bytes the official clients use too, and
``MessageId.deserialize`` reads them back. Ids order by
(ledger, entry, batch index). ``Message`` is what a consumer receives:
the payload and what the producer stored with it; it also knows the topic
it came from, so that acknowledging it reaches the right partition.
"""
from __future__ import annotations

from typing import Any

from pulsarfast.base.results import InvalidMessage, ProtocolError
from pulsarfast.wire import proto
from pulsarfast.wire.codec import untrack
from pulsarfast.wire.cryptokeys import EncryptionContext

_MAX_U64 = (1 << 64) - 1


class MessageId:
    """A message's position: ``MessageId(partition=-1, ledger_id=-1, entry_id=-1, batch_index=-1)``."""

    __slots__ = ("_ledger_id", "_entry_id", "_partition", "_batch_index", "_batch_size", "topic", "batch")

    earliest: "MessageId"
    latest: "MessageId"

    def __init__(self, partition: int = -1, ledger_id: int = -1, entry_id: int = -1, batch_index: int = -1,
                 batch_size: int = 0, topic: str | None = None) -> None:
        self._partition = partition
        self._ledger_id = ledger_id
        self._entry_id = entry_id
        self._batch_index = batch_index
        self._batch_size = batch_size
        #: the topic (or partition) of the consumer that received it; None for ids built by hand,
        #: deserialized or returned by a producer, as in the official client (a multi-topics
        #: consumer refuses to acknowledge them or seek to them)
        self.topic = topic
        #: the BatchDelivery this id came in (None: not received in a batch, or built by hand)
        self.batch: BatchDelivery | None = None

    def ledger_id(self) -> int:
        return self._ledger_id

    def entry_id(self) -> int:
        return self._entry_id

    def batch_index(self) -> int:
        return self._batch_index

    def batch_size(self) -> int:
        return self._batch_size

    def partition(self) -> int:
        return self._partition

    def _key(self) -> tuple[int, int, int]:
        return (self._ledger_id, self._entry_id, self._batch_index)

    def entry_key(self) -> tuple[int, int]:
        """(ledger, entry): the broker's unit of acknowledgement and redelivery."""
        return (self._ledger_id, self._entry_id)

    def to_proto(self, with_batch_index: bool = True) -> bytes:
        """Serialized MessageIdData (ledger and entry as unsigned 64-bit: -1 is the maximum)."""
        return proto.message_id_data(
            self._ledger_id & _MAX_U64, self._entry_id & _MAX_U64, self._partition,
            self._batch_index if with_batch_index else -1, self._batch_size if with_batch_index else 0,
        )

    def serialize(self) -> bytes:
        return self.to_proto()

    @staticmethod
    def deserialize(message_id_bytes: bytes, topic: str | None = None) -> "MessageId":
        try:
            record = proto.decode(proto.MESSAGE_ID_DATA, message_id_bytes)
        except ProtocolError as exc:
            raise InvalidMessage("not a serialized message id: %s" % exc) from None
        return MessageId.from_proto(record, topic=topic)

    @classmethod
    def wrap(cls, msg_id: "MessageId") -> "MessageId":
        """A new MessageId equal to msg_id (the official ``MessageId.wrap`` of the C extension's id, which
        ``MessageId.deserialize`` returns there; here both are this class)."""
        if not isinstance(msg_id, MessageId):
            raise ValueError("Argument msg_id is expected to be of type 'MessageId' and not '%s'"
                             % type(msg_id).__name__)
        return cls(msg_id._partition, msg_id._ledger_id, msg_id._entry_id, msg_id._batch_index,
                   msg_id._batch_size, msg_id.topic)

    @staticmethod
    def from_proto(record: Any, partition: int | None = None, batch_index: int = -1, batch_size: int = 0,
                   topic: str | None = None) -> "MessageId":
        ledger = record.ledgerId
        entry = record.entryId
        return MessageId(
            record.partition if partition is None else partition,
            ledger - (1 << 64) if ledger >= 1 << 63 else ledger,
            entry - (1 << 64) if entry >= 1 << 63 else entry,
            batch_index if batch_index >= 0 else record.batch_index,
            batch_size or record.batch_size,
            topic,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented
        return self._key() == other._key() and self._partition == other._partition

    def __lt__(self, other: "MessageId") -> bool:
        return (self._partition, *self._key()) < (other._partition, *other._key())

    def __le__(self, other: "MessageId") -> bool:
        return self == other or self < other

    def __gt__(self, other: "MessageId") -> bool:
        return not self <= other

    def __ge__(self, other: "MessageId") -> bool:
        return not self < other

    def __hash__(self) -> int:
        return hash((self._partition, *self._key()))

    def __str__(self) -> str:
        return "(%d,%d,%d,%d)" % (self._ledger_id, self._entry_id, self._partition, self._batch_index)

    def __repr__(self) -> str:
        return "MessageId%s" % (self,)


class BatchDelivery:
    """The messages of one batch as one delivery handed them out: the broker
    acknowledges whole entries, so the entry is acknowledged once every
    message of this delivery is. A batch delivered again (negative ack,
    reconnect, unacked timeout) is a new delivery: acknowledgements of the old
    one never acknowledge the entry for messages the new one has not seen
    handled (``withdraw``). No lock: each step is one atomic operation under
    the GIL, and the withdrawn flag is set before the set is emptied and read
    after the last discard, so a withdrawal racing the last acknowledgement
    cannot pass for it (two last acknowledgements at once may both say True:
    the entry is then acknowledged twice, which the broker ignores)."""

    __slots__ = ("waiting", "withdrawn")

    def __init__(self, indexes: set[int]) -> None:
        self.waiting = indexes
        self.withdrawn = False

    def acknowledge(self, index: int) -> bool:
        """Message index was acknowledged; True when it was the batch's last one."""
        waiting = self.waiting
        if not waiting:
            return False  # (the entry went out already, or the delivery was withdrawn)
        waiting.discard(index)
        return not waiting and not self.withdrawn

    def withdraw(self) -> None:
        """The entry was asked for again: this delivery acknowledges it no more."""
        self.withdrawn = True
        self.waiting.clear()

    def unacknowledged_words(self) -> list[int] | None:
        """The messages of the batch not acknowledged yet, as an ACK's ack set (``index_words``);
        None when the delivery was withdrawn or nothing waits."""
        waiting = list(self.waiting)  # (one step under the GIL: a copy while others acknowledge)
        if self.withdrawn or not waiting:
            return None
        return index_words(waiting)


def index_words(indexes: Any) -> list[int]:
    """A bit set of batch indexes as the int64 words of an ack set (Java's ``BitSet.toLongArray``:
    index i is bit i % 64 of word i // 64, signed; no trailing zero words)."""
    words: list[int] = []
    for index in indexes:
        word = index >> 6
        if word >= len(words):
            words.extend([0] * (word + 1 - len(words)))
        words[word] |= 1 << (index & 63)
    return [word - (1 << 64) if word >= 1 << 63 else word for word in words]


MessageId.earliest = MessageId(-1, -1, -1, -1)
MessageId.latest = MessageId(-1, (1 << 63) - 1, (1 << 63) - 1, -1)


class Message:
    """A received message (the official ``pulsar.Message`` methods).

    What the producer stored per message (``SingleMessageMetadata``'s fields)
    is kept as the decoder's tuple, and what the messages of one entry share
    (publish time, producer, redelivery count, ...) as one tuple for the whole
    batch: a batch of a thousand messages costs a thousand small objects, not
    a thousand copies of its header."""

    __slots__ = ("_data", "_message_id", "_topic", "_single", "_shared")

    def __init__(self, data: bytes, message_id: MessageId, topic: str, *, properties: dict[str, str] | None = None,
                 partition_key: str | None = None, ordering_key: bytes | None = None, publish_time: int = 0,
                 event_time: int = 0, redelivery_count: int = 0, producer_name: str = "", sequence_id: int = 0,
                 schema_version: bytes = b"", null_value: bool = False, schema: Any = None,
                 encryption: Any = None) -> None:
        self._data = data
        self._message_id = message_id
        self._topic = topic
        self._single = (properties if properties is not None else {}, partition_key, len(data), False, event_time,
                        ordering_key, sequence_id, null_value)
        self._shared = (publish_time, redelivery_count, producer_name, schema_version, 0, 0, schema, encryption)

    def data(self) -> bytes:
        """The payload, as bytes."""
        return self._data

    def value(self) -> Any:
        """The payload decoded by the consumer's schema (without one, or with BytesSchema: the bytes)."""
        schema = self._shared[6]
        return schema.decode_message(self) if schema is not None else self._data

    def properties(self) -> dict[str, str]:
        return self._single[0]

    def partition_key(self) -> str:
        return self._single[1] or ""

    def has_partition_key(self) -> bool:
        return self._single[1] is not None

    def ordering_key(self) -> str:
        key = self._single[5]
        return key.decode("utf-8", "replace") if key else ""

    def publish_timestamp(self) -> int:
        """When the producer published it, in milliseconds since the epoch."""
        return self._shared[0]

    def event_timestamp(self) -> int:
        """The event time the producer gave, in milliseconds since the epoch (0: none)."""
        return self._single[4] or self._shared[4]

    def message_id(self) -> MessageId:
        return self._message_id

    def topic_name(self) -> str:
        return self._topic

    def redelivery_count(self) -> int:
        return self._shared[1]

    def producer_name(self) -> str:
        return self._shared[2]

    def sequence_id(self) -> int:
        sequence_id = self._single[6]
        if sequence_id is None:  # (a batch entry without its own: the batch's first plus its index)
            return self._shared[5] + self._message_id.batch_index()
        return sequence_id

    def schema_version(self) -> str:
        version = self._shared[3]
        return version.decode("utf-8", "replace") if version else ""

    def int_schema_version(self) -> int:
        """The schema version as a number (its 8 bytes, big-endian), as the official extension's
        Message gives it: -1 for a message without one."""
        version = self._shared[3]
        return int.from_bytes(version, "big", signed=True) if version else -1

    def has_null_value(self) -> bool:
        """The producer sent None (a tombstone), not an empty payload."""
        return self._single[7]

    def encryption_context(self) -> EncryptionContext | None:
        """How the message was encrypted (``pulsar.EncryptionContext``), None when it was not. As from
        the official client, a message that was decrypted has one too (``is_decryption_failed()``
        False); one handed out still encrypted (``ConsumerCryptoFailureAction.CONSUME``) says True."""
        shared = self._shared
        context = shared[7] if len(shared) > 7 else None  # (the shared tuple of an entry, its 8th: crypto.py's)
        return EncryptionContext(context) if context is not None else None

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return "<Message %s on %s, %d bytes>" % (self._message_id, self._topic, len(self._data))


#: a batch's received messages and ids leave the cycle collector's view this many at a time, as
#: they are made (``codec.untrack``): a collection set off by their allocation then finds few tracked
UNTRACK_STRETCH = 128


def _batch_ids(partition: int, ledger: int, entry: int, count: int, topic: str | None,
               delivery: BatchDelivery | None) -> list[MessageId]:
    """The ids of an entry's count batch messages, filled without the constructor (a hot path
    of both the consumer and the producer). A received batch's (with its ``delivery``) are
    left out of the cycle collector: nothing in them can lead back to them."""
    new = object.__new__
    ids: list[MessageId] = []
    append = ids.append
    for start in range(0, count, UNTRACK_STRETCH):
        for index in range(start, min(count, start + UNTRACK_STRETCH)):
            message_id = new(MessageId)
            message_id._partition = partition
            message_id._ledger_id = ledger
            message_id._entry_id = entry
            message_id._batch_index = index
            message_id._batch_size = count
            message_id.topic = topic
            message_id.batch = delivery
            append(message_id)
        if delivery is not None:
            untrack(ids, start)
    return ids


def batch_messages(entries: list[tuple[tuple, bytes]], batch_size: int, partition: int, ledger: int, entry: int,
                   topic: str, shared: tuple) -> tuple[list[Message], int]:
    """The Messages of one batch entry, from ``codec.split_batch_decoded``'s
    ``[(single metadata, body), ...]``, each with its own id and all sharing one
    ``BatchDelivery``; ``shared`` is (publish_time, redelivery_count,
    producer_name, schema_version, event_time, first sequence id, the schema that decodes
    values or None, and maybe the ``_pulsar.EncryptionContext`` of an encrypted one). Entries the
    broker compacted out are left out; returns (messages, how many left out).
    The consumer's hot path: objects are filled without their constructors."""
    waiting: set[int] = set()
    ids = _batch_ids(partition, ledger, entry, batch_size, topic, BatchDelivery(waiting))
    messages: list[Message] = []
    append = messages.append
    add = waiting.add
    new = object.__new__
    skipped = 0
    mark = 0  # (messages before it are untracked: no cycle passes through them, see codec.untrack)
    for index, (single, body) in enumerate(entries):
        if single[3]:  # compacted_out
            skipped += 1
            continue
        add(index)
        message = new(Message)
        message._data = body
        message._message_id = ids[index]
        message._topic = topic
        message._single = single
        message._shared = shared
        append(message)
        if len(messages) - mark == UNTRACK_STRETCH:
            untrack(messages, mark)
            mark += UNTRACK_STRETCH
    untrack(messages, mark)
    return messages, skipped


def batch_message_ids(entry_id: MessageId, count: int) -> list[MessageId]:
    """The ids of a batch's count messages, from the receipt's id of its entry."""
    return _batch_ids(entry_id._partition, entry_id._ledger_id, entry_id._entry_id, count, entry_id.topic, None)
