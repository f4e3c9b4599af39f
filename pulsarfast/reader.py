"""``Reader``: reading a topic from a chosen position without a durable
subscription (the official ``pulsar.Reader``).

A reader is a ``Consumer`` (consumer.py) with a non-durable Exclusive
subscription of a generated name (``reader-`` and ten random hex digits,
after ``subscription_role_prefix-`` when given) that starts at
``start_message_id``: ``MessageId.earliest``, ``MessageId.latest``, or a
stored id (the message after it, or that one with
``start_message_id_inclusive=True``; inside a batch, at that message of the
batch). It acknowledges nothing. The broker forgets a non-durable
subscription when its consumer goes, so after a reconnect the reader
subscribes again after the last message it handed out (``StartPosition`` in
position.py): it neither repeats nor skips.

``has_message_available()`` asks the broker for the topic's last message id
and compares it with the reader's position. ``seek()`` takes a message id or
a publish timestamp in milliseconds.

On a partitioned topic the reader reads every partition (one
subscription each) from ``MessageId.earliest`` or ``MessageId.latest``; a
stored id names one partition, so it is refused there (read that partition,
``<topic>-partition-<n>``, to start from it).
"""
from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Any, Callable

from msgengine.runtime import from_any_thread

from .consumer import Consumer, ConsumerStats
from .errors import AlreadyClosed, InvalidConfiguration, NotConnected
from .message import Message, MessageId
from .position import has_after, is_earliest, is_latest

if TYPE_CHECKING:
    from .client import Client

ReaderListener = Callable[["Reader", Message], None]


def reader_subscription_name(subscription_role_prefix: str | None) -> str:
    """A fresh subscription name for a reader."""
    name = "reader-" + secrets.token_hex(5)
    return "%s-%s" % (subscription_role_prefix, name) if subscription_role_prefix else name


def check_reader_arguments(topic: Any, start_message_id: Any, reader_listener: Any, receiver_queue_size: Any,
                           reader_name: Any, subscription_role_prefix: Any, is_read_compacted: Any,
                           crypto_key_reader: Any, start_message_id_inclusive: Any, schema: Any) -> None:
    """ValueError for arguments of the wrong type (as the official client raises),
    InvalidConfiguration for features pulsarfast does not have."""
    if not isinstance(topic, str):
        raise ValueError("Argument topic is expected to be of type 'str' and not '%s'" % type(topic).__name__)
    if not isinstance(start_message_id, MessageId):
        raise ValueError("Argument start_message_id is expected to be of type 'MessageId' and not '%s'"
                         % type(start_message_id).__name__)
    if not isinstance(receiver_queue_size, int) or isinstance(receiver_queue_size, bool):
        raise ValueError("Argument receiver_queue_size is expected to be of type 'int' and not '%s'"
                         % type(receiver_queue_size).__name__)
    for name, value in (("reader_name", reader_name), ("subscription_role_prefix", subscription_role_prefix)):
        if value is not None and not isinstance(value, str):
            raise ValueError("Argument %s is expected to be either None or of type 'str'" % name)
    for name, value in (("is_read_compacted", is_read_compacted),
                        ("start_message_id_inclusive", start_message_id_inclusive)):
        if not isinstance(value, bool):
            raise ValueError("Argument %s is expected to be of type 'bool' and not '%s'" % (name, type(value).__name__))
    if reader_listener is not None and not callable(reader_listener):
        raise ValueError("reader_listener must be callable")
    if crypto_key_reader is not None:
        raise InvalidConfiguration("end-to-end encryption is not supported by pulsarfast")
    if schema is not None and type(schema).__name__ != "BytesSchema":
        raise InvalidConfiguration("schemas other than bytes are not supported by pulsarfast yet")


def check_partitioned_start(topic: str, partitions: int, start_message_id: MessageId) -> None:
    if partitions > 0 and not (is_earliest(start_message_id) or is_latest(start_message_id)):
        raise InvalidConfiguration(
            "%s has %d partitions: a reader on a partitioned topic starts at MessageId.earliest or "
            "MessageId.latest (a message id names one partition: read '%s-partition-<n>' to start from it)"
            % (topic, partitions, topic))


class Reader:
    """Reads a topic from a position; see the module docstring."""

    def __init__(self, client: "Client") -> None:
        self._client = client
        self.backend = client.backend
        self._consumer: Consumer | None = None

    def attach(self, consumer: Consumer) -> None:
        """The client made the reader's consumer."""
        self._consumer = consumer

    def listener_for(self, reader_listener: ReaderListener | None) -> Callable[[Consumer, Message], None] | None:
        """The consumer's message listener that calls reader_listener(reader, message)."""
        if reader_listener is None:
            return None

        def on_message(_consumer: Consumer, message: Message) -> None:
            reader_listener(self, message)
        return on_message

    @property
    def consumer(self) -> Consumer:
        consumer = self._consumer
        if consumer is None:
            raise NotConnected("the reader is not created yet")
        return consumer

    # -- the official API ------------------------------------------------------------------

    def topic(self) -> str:
        """The topic this reader reads."""
        return self.consumer.topic()

    def read_next(self, timeout_millis: int | None = None) -> Message:
        """The next message; waits at most timeout_millis (then raises Timeout), or for ever."""
        return self.consumer.receive(timeout_millis)

    @from_any_thread()
    def has_message_available(self) -> bool:
        """Whether a message after the reader's position is in the topic (asks the broker)."""
        consumer = self.consumer
        self._client.check_usable()
        if consumer.closed:
            raise AlreadyClosed("reader closed")
        for partition in consumer.topic_consumers():
            last, mark_delete = partition.last_message_id()
            if has_after(last, partition.start, mark_delete):
                return True
        return False

    def start_at_last_message(self) -> None:
        """MessageId.latest with start_message_id_inclusive: read the topic's last
        message first (as the official client does), by seeking to it."""
        for partition in self.consumer.topic_consumers():
            last, _mark_delete = partition.last_message_id()
            if last.ledger_id() >= 0 and last.entry_id() >= 0:
                partition.seek(message_id=last)

    def seek(self, message_id: MessageId | int) -> None:
        """Read from a message id (the message after it, or that one with
        start_message_id_inclusive) or a publish timestamp in ms."""
        self.consumer.seek(message_id)

    def close(self) -> None:
        self.consumer.close()

    def is_connected(self) -> bool:
        return self.consumer.is_connected()

    def stats(self) -> ConsumerStats:
        """The counts of the reader's subscription (``Consumer.stats()``)."""
        return self.consumer.stats()

    def __enter__(self) -> "Reader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
