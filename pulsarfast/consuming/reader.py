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
startposition.py): it neither repeats nor skips. Its settings
(``settings.ReaderSettings``: the subscription's name, the consumer's settings)
are made from ``create_reader``'s arguments.

``has_message_available()`` asks the broker for the topic's last message id
and compares it with the reader's position. ``seek()`` takes a message id or
a publish timestamp in milliseconds.

On a partitioned topic the reader reads every partition (one
subscription each) from ``MessageId.earliest`` or ``MessageId.latest``; a
stored id names one partition, so it is refused there (read that partition,
``<topic>-partition-<n>``, to start from it).
"""
from __future__ import annotations

from typing import Any, Callable

from msgengine.runtime import from_any_thread

from pulsarfast.base.results import AlreadyClosed
from pulsarfast.consuming.consumer import Consumer, ConsumerStats
from pulsarfast.network.owner import Owner
from pulsarfast.options.settings import ReaderSettings
from pulsarfast.options.startposition import has_after
from pulsarfast.wire.message import Message, MessageId

ReaderListener = Callable[["Reader", Message], None]


class Reader:
    """Reads a topic from a position; see the module docstring. The client
    subscribes its consumer's topics (``consumer``) and starts it."""

    def __init__(self, client: Owner, settings: ReaderSettings) -> None:
        self._client = client
        self.backend = client.backend
        self.settings = settings
        self.consumer = Consumer(client, settings.consumer_settings(self._listener(settings.reader_listener)))
        #: what this reader keeps alive for its user (its Client, which hands its parts itself weakly)
        self.keep_alive: object = None

    def _listener(self, reader_listener: ReaderListener | None) -> Callable[[Consumer, Message], None] | None:
        """The consumer's message listener that calls reader_listener(reader, message)."""
        if reader_listener is None:
            return None

        def on_message(_consumer: Consumer, message: Message) -> None:
            reader_listener(self, message)
        return on_message

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

    def seek(self, messageid: MessageId | int) -> None:
        """Read from a message id (the message after it, or that one with
        start_message_id_inclusive) or a publish timestamp in ms (the
        official parameter name: ``messageid``)."""
        self.consumer.seek(messageid)

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
