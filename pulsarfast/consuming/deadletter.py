"""Dead-letter topics: ``DeadLetters``, which moves a consumer's messages that were
redelivered too often to the dead-letter topic, as its ``ConsumerDeadLetterPolicy`` (the
official ``pulsar.ConsumerDeadLetterPolicy``, ``pulsarfast.options.deadletterpolicy``) says.

A message whose ``redelivery_count()`` has reached the policy's
``max_redeliver_count``, and that would be delivered again (a negative
acknowledgement, the unacknowledged-message timeout), is produced to the
dead-letter topic instead: the same payload, properties, partition key and
ordering key, plus the properties the official clients add, ``REAL_TOPIC``
(the topic or partition it was consumed from) and ``ORIGIN_MESSAGE_ID`` (its
id, ``(ledger,entry,partition,batch_index)``). The broker knows entries, so a
batch goes whole. Only once the broker has stored every message of the entry
on the dead-letter topic is the original acknowledged; when a send fails,
the entry is delivered again as a negative acknowledgement would (after
``negative_ack_redelivery_delay_ms``), and goes to the dead-letter topic the
next time round. Nothing is lost on the way; a message may be on the
dead-letter topic twice when an acknowledgement did not reach the broker.

The dead-letter topic is, as in the official C++ library (which the Python
client wraps), ``<topic>-<subscription>-DLQ`` for each topic or partition
consumed, unless the policy names one. Its producer is made through the
consumer's client the first time a message goes there (without batching,
failing rather than waiting when its queue is full), and, with
``initial_subscription_name``, the broker creates that subscription on the
dead-letter topic as the producer is created, so that nothing sent there is
lost before someone subscribes.

Order. The entries go to the dead-letter topic in the order they are handed
over (the order the consumer received them in): one task sends them, one
entry after the other, through one producer per dead-letter topic. (A task
per entry raced for the producer being made, and the first to wake after it
was made sent first: ``hello-4`` could reach the topic before ``hello-1``.)
"""
from __future__ import annotations

import collections
import logging
from typing import Any, Protocol

from pulsarfast.base.enums import ConsumerType
from pulsarfast.base.results import AlreadyClosed, PulsarException, Result
from pulsarfast.base.topics import full_topic_name
from pulsarfast.network.owner import Owner, SendingProducer
from pulsarfast.options.deadletterpolicy import ConsumerDeadLetterPolicy
from pulsarfast.wire.message import Message

logger = logging.getLogger(__name__)

#: the properties the official clients add to a message they move to a dead-letter topic
REAL_TOPIC = "REAL_TOPIC"
ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
DLQ_SUFFIX = "-DLQ"


class DeadLetterOrigin(Protocol):
    """The partition an entry was consumed from (``redelivery.PartitionRedelivery``): told
    whether the entry reached the dead-letter topic."""

    @property
    def topic(self) -> str: ...

    def dead_lettered(self, entry: tuple[int, int]) -> None:
        """Every message of entry is on the dead-letter topic."""

    def dead_letter_failed(self, entry: tuple[int, int]) -> None:
        """The dead-letter topic did not take entry."""


class DeadLetters:
    """One consumer's dead-letter topic(s) and their producers (see the module docstring)."""

    def __init__(self, client: Owner, subscription: str, policy: ConsumerDeadLetterPolicy,
                 consumer_type: ConsumerType) -> None:
        if consumer_type not in (ConsumerType.Shared, ConsumerType.KeyShared):
            # accepted, as the official client accepts it, but said out loud: it can never apply
            logger.warning("dead_letter_policy on an %s subscription: the broker counts redeliveries "
                           "(redelivery_count) only on Shared and KeyShared ones, so no message will ever reach "
                           "the dead-letter topic", ConsumerType(consumer_type).name)
        self.client = client
        self.backend = client.backend
        self.subscription = subscription
        self.max_redeliver_count = policy.max_redeliver_count
        self._topic = full_topic_name(policy.dead_letter_topic) if policy.dead_letter_topic else None
        self._initial_subscription = policy.initial_subscription_name or None
        self._lock = self.backend.lock()
        self._producers: dict[str, SendingProducer] = {}
        self._creating: dict[str, Any] = {}  # topic -> event set once its producer is made (or failed)
        self._closed = False
        #: entries handed over and not sent yet, in order; one task (while _sending) sends them
        self._pending: collections.deque[tuple[DeadLetterOrigin, tuple[int, int], list[Message]]] = \
            collections.deque()
        self._sending = False

    def topic_for(self, topic: str) -> str:
        """The dead-letter topic of messages consumed from topic (a topic or a partition)."""
        return self._topic or "%s-%s%s" % (topic, self.subscription, DLQ_SUFFIX)

    def send(self, partition: DeadLetterOrigin, entry: tuple[int, int], messages: list[Message]) -> None:
        """Move the messages of one entry to the dead-letter topic, after those handed over before
        (in the sending task); partition hears of the outcome: dead_lettered(entry) or
        dead_letter_failed(entry)."""
        with self._lock:
            self._pending.append((partition, entry, messages))
            if self._sending:
                return
            self._sending = True
        self.backend.spawn(self._send_pending)

    def _send_pending(self) -> None:
        """The sending task: the entries handed over, in order, until none is left."""
        while True:
            with self._lock:
                if not self._pending:
                    self._sending = False
                    return
                partition, entry, messages = self._pending.popleft()
            try:
                self._send(partition, entry, messages)
            except Exception:  # (never leave the entries after it unsent)
                logger.exception("[%s] sending entry %s to the dead-letter topic", partition.topic, entry)
                partition.dead_letter_failed(entry)

    def _send(self, partition: DeadLetterOrigin, entry: tuple[int, int], messages: list[Message]) -> None:
        topic = self.topic_for(partition.topic)
        try:
            producer = self._producer(topic)
        except PulsarException as exc:
            logger.warning("[%s] cannot create the dead-letter producer on %s (%s): entry %s is delivered again",
                           partition.topic, topic, exc, entry)
            partition.dead_letter_failed(entry)
            return
        outcome = _EntryOutcome(self.backend, partition, entry, len(messages), topic)
        for message in messages:
            properties = dict(message.properties())
            properties[ORIGIN_MESSAGE_ID] = str(message.message_id())
            properties[REAL_TOPIC] = message.topic_name()
            producer.send_async(
                None if message.has_null_value() else message.data(), outcome.sent, properties=properties,
                partition_key=message.partition_key() if message.has_partition_key() else None,
                ordering_key=message.ordering_key() or None,
            )

    def _producer(self, topic: str) -> SendingProducer:
        """The producer on a dead-letter topic, made the first time (one maker at a time)."""
        while True:
            with self._lock:
                if self._closed:
                    raise AlreadyClosed("the consumer is closed")
                producer = self._producers.get(topic)
                if producer is not None:
                    return producer
                made = self._creating.get(topic)
                if made is None:
                    made = self._creating[topic] = self.backend.event()
                    break
            made.wait()
        try:
            producer = self.client.create_producer(topic, block_if_queue_full=False, batching_enabled=False,
                                                   initial_subscription_name=self._initial_subscription)
            producer.keep_alive = None  # (the consumer's part: it must not keep a dropped client alive)
            with self._lock:
                closed = self._closed
                if not closed:
                    self._producers[topic] = producer
            if closed:  # (the consumer closed meanwhile)
                producer.close()
                raise AlreadyClosed("the consumer is closed")
            return producer
        finally:
            with self._lock:
                del self._creating[topic]
            made.set()

    def close(self) -> None:
        """Close the dead-letter producers (after the messages they are sending)."""
        with self._lock:
            self._closed = True
            producers, self._producers = list(self._producers.values()), {}
        for producer in producers:
            try:
                producer.close()
            except PulsarException as exc:
                logger.warning("closing a dead-letter producer: %s", exc)


class _EntryOutcome:
    """Counts the receipts of one entry's messages on the dead-letter topic."""

    def __init__(self, backend: Any, partition: DeadLetterOrigin, entry: tuple[int, int], count: int,
                 topic: str) -> None:
        self.backend = backend
        self.partition = partition
        self.entry = entry
        self.topic = topic
        self._waiting = count
        self._failed: Result | None = None
        self._lock = backend.lock()

    def sent(self, result: Result, _message_id: Any) -> None:
        with self._lock:
            self._waiting -= 1
            if result != Result.Ok and self._failed is None:
                self._failed = result
            if self._waiting:
                return
            failed = self._failed
        if failed is None:
            self.backend.spawn(self.partition.dead_lettered, self.entry)
        else:
            logger.warning("[%s] sending entry %s to the dead-letter topic %s failed (%s): it is delivered again",
                           self.partition.topic, self.entry, self.topic, failed)
            self.backend.spawn(self.partition.dead_letter_failed, self.entry)
