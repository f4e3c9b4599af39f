"""A consumer's delivery controls: the unacknowledged-message timeout
(``unacked_messages_timeout_ms``) and the consumer side of the dead-letter
policy (``deadletter.py`` sends the messages).

``Redelivery`` (one per ``Consumer``, made only when one of the two is on)
owns the tick and the ``DeadLetters``; ``PartitionRedelivery`` (one per
``TopicConsumer``, its ``redelivery`` attribute, None when both are off)
holds what consumer.py's hooks touch:

- handed_out(message): a message goes to the application (``receive()`` or
  the listener). Its entry (each of a chunked message's) goes into ``UnackedEntries``, timed buckets of
  entries (a dict insert; no timer per message). A message of a batch whose
  delivery was withdrawn (its entry asked for again) is not handed out: the
  copy the broker sends again replaces it, so it is not delivered twice.
- acknowledged(entry) / acknowledged_until(entry): the broker hears of the
  entry's acknowledgement (for a batch, once every message of the delivery
  is acknowledged): the entry leaves the tracker.
- negatively_acknowledged(message_id): the entry leaves the tracker and its
  delivery is withdrawn (the negative acknowledgement asks for the whole
  entry again).
- arrived(messages): an entry arrived; with a dead-letter policy, one whose
  redelivery count has reached ``max_redeliver_count`` is kept until it is
  acknowledged (it goes to the dead-letter topic if it would be delivered
  again), and one past it goes there at once, without being delivered.
- redelivering(entries) / redelivering_all(): the TopicConsumer asks the
  broker again for these entries (those due to the dead-letter topic are
  taken out) or for everything (the tracker forgets the partition).
- resubscribed(): after a reconnect the broker delivers again everything not
  acknowledged: the tracker forgets the partition.

Every tick (``TICK_MS``, 1000 ms as the official C++ library's default,
or the timeout when shorter) the oldest bucket's entries are due: their
deliveries are withdrawn and they are asked for again, per partition
(``REDELIVER_UNACKNOWLEDGED_MESSAGES`` with their ids, on Shared and
KeyShared subscriptions; on Exclusive and Failover ones the broker can only
rewind, so everything not acknowledged comes again). With
ceil(timeout / tick) + 1 buckets an entry is asked for again between the
timeout and the timeout plus one tick after it was handed out.

The hooks run on the application's threads (receive, acknowledge) and the
tick in a task: a bucket dict is only swapped by the tick, and every other
step is one dict operation, so adding an entry takes no lock.
"""
from __future__ import annotations

import collections
import logging
import math
from typing import Any, Protocol

from pulsarfast.consuming.deadletter import DeadLetters
from pulsarfast.network.owner import Owner
from pulsarfast.options.settings import MIN_UNACKED_TIMEOUT_MS, ConsumerSettings
from pulsarfast.wire.chunks import ChunkedMessageId
from pulsarfast.wire.message import BatchDelivery, Message, MessageId

logger = logging.getLogger(__name__)

# (MIN_UNACKED_TIMEOUT_MS belongs to the check of unacked_messages_timeout_ms in settings.py; still importable here)
__all__ = ["MIN_UNACKED_TIMEOUT_MS", "TICK_MS", "PartitionRedelivery", "Redelivery", "RedeliveredConsumer",
           "UnackedEntries"]

#: how often due entries are looked for (the official C++ library's tickDurationInMs default)
TICK_MS = 1000

Entry = tuple[int, int]  # (ledger, entry): what the broker acknowledges and redelivers


class RedeliveredConsumer(Protocol):
    """What a PartitionRedelivery uses of its ``consumer.TopicConsumer``."""

    @property
    def topic(self) -> str: ...

    def withdraw(self, delivery: BatchDelivery) -> None:
        """The delivery's entry was asked for again: its messages not handed out yet are dropped."""

    def redeliver(self, entries: list[Entry]) -> None:
        """Ask the broker for entries again."""

    def ack_entry(self, entry: Entry) -> None:
        """Acknowledge a whole entry on the broker."""

    def redeliver_later(self, entry: Entry) -> None:
        """Ask the broker for entry again after the negative-ack delay."""


class UnackedEntries:
    """Entries handed to the application and not acknowledged, in timed buckets
    (the newest last); each entry with the BatchDelivery it came in (None for a
    message of its own)."""

    __slots__ = ("_buckets", "_newest", "_bucket_of")

    def __init__(self, bucket_count: int) -> None:
        self._buckets: collections.deque[dict[Entry, BatchDelivery | None]] = collections.deque(
            {} for _ in range(max(2, bucket_count)))
        self._newest = self._buckets[-1]
        self._bucket_of: dict[Entry, dict[Entry, BatchDelivery | None]] = {}

    def __len__(self) -> int:
        return len(self._bucket_of)

    def __contains__(self, entry: Entry) -> bool:
        return entry in self._bucket_of

    def add(self, entry: Entry, delivery: BatchDelivery | None) -> None:
        bucket_of = self._bucket_of
        if entry not in bucket_of:  # (a batch's entry keeps the time its first message was handed out)
            bucket = self._newest
            bucket[entry] = delivery
            bucket_of[entry] = bucket

    def remove(self, entry: Entry) -> None:
        bucket = self._bucket_of.pop(entry, None)
        if bucket is not None:
            bucket.pop(entry, None)

    def remove_until(self, entry: Entry) -> None:
        """Forget every entry up to and including entry (a cumulative acknowledgement)."""
        for key in [key for key in list(self._bucket_of) if key <= entry]:
            self.remove(key)

    def clear(self) -> None:
        self._bucket_of.clear()
        for bucket in self._buckets:
            bucket.clear()

    def expire(self) -> dict[Entry, BatchDelivery | None]:
        """One tick: a new bucket for what comes next, and the oldest one's entries, now due."""
        fresh: dict[Entry, BatchDelivery | None] = {}
        self._buckets.append(fresh)
        self._newest = fresh
        oldest = self._buckets.popleft()  # (never the bucket an add may still be writing to: there are two or more)
        due = {}
        bucket_of = self._bucket_of
        for entry, delivery in list(oldest.items()):
            bucket = bucket_of.pop(entry, None)
            if bucket is oldest:
                due[entry] = delivery
            elif bucket is not None:  # (acknowledged and handed out again meanwhile: it stays where it is now)
                bucket_of.setdefault(entry, bucket)
        return due


class PartitionRedelivery:
    """The delivery controls of one TopicConsumer: the hooks consumer.py calls (see the module docstring)."""

    def __init__(self, owner: "Redelivery", consumer: RedeliveredConsumer, unacked: UnackedEntries | None,
                 dead_letters: DeadLetters | None) -> None:
        self.owner = owner
        self.consumer = consumer
        self.topic = consumer.topic
        self.unacked = unacked
        self._dead_letters = dead_letters
        self._max_redeliver = dead_letters.max_redeliver_count if dead_letters is not None else -1
        #: entries whose redelivery count reached max_redeliver_count, with their messages (dead-letter policy)
        self._last_chance: dict[Entry, list[Message]] = {}

    # -- the hooks ----------------------------------------------------------------------------

    def arrived(self, messages: list[Message]) -> bool:
        """An entry's messages arrived; False: they go to the dead-letter topic, not to the application."""
        if self._dead_letters is None or not messages:
            return True
        first = messages[0]
        count = first.redelivery_count()
        if count < self._max_redeliver:
            return True
        entry = first.message_id().entry_key()
        if count == self._max_redeliver:
            self._last_chance[entry] = messages
            return True
        logger.info("[%s] entry %s was delivered %d times: it goes to the dead-letter topic", self.topic, entry,
                    count + 1)
        self._dead_letters.send(self, entry, messages)
        return False

    def handed_out(self, message: Message) -> bool:
        """message goes to the application; False: its delivery was withdrawn (drop it, a new copy comes)."""
        message_id = message.message_id()
        delivery = message_id.batch
        if delivery is not None and delivery.withdrawn:
            return False
        unacked = self.unacked
        if unacked is not None:
            if isinstance(message_id, ChunkedMessageId):  # (every chunk comes again, in order)
                for chunk in message_id.chunk_entries:
                    unacked.add(chunk, None)
            else:
                unacked.add(message_id.entry_key(), delivery)
        return True

    def not_delivered(self, entries: list[Entry]) -> None:
        """Entries the consumer kept from the application (crypto_failure_action FAIL): asked for
        again once the timeout passes, as if handed out."""
        if self.unacked is not None:
            for entry in entries:
                self.unacked.add(entry, None)

    def acknowledged(self, entry: Entry) -> None:
        if self.unacked is not None:
            self.unacked.remove(entry)
        if self._last_chance:
            self._last_chance.pop(entry, None)

    def acknowledged_until(self, entry: Entry) -> None:
        if self.unacked is not None:
            self.unacked.remove_until(entry)
        if self._last_chance:
            for key in [key for key in list(self._last_chance) if key <= entry]:
                self._last_chance.pop(key, None)

    def negatively_acknowledged(self, message_id: MessageId) -> None:
        """The entry comes again (whole, for a batch): its messages still queued are not handed out."""
        if self.unacked is not None:
            entries = message_id.chunk_entries if isinstance(message_id, ChunkedMessageId) else [message_id.entry_key()]
            for entry in entries:
                self.unacked.remove(entry)
        delivery = message_id.batch
        if delivery is not None:
            self.consumer.withdraw(delivery)

    def redelivering(self, entries: list[Entry]) -> list[Entry]:
        """The entries to ask the broker for again; those at the dead-letter count go to the dead-letter topic."""
        if not self._last_chance:
            return entries
        again = []
        for entry in entries:
            messages = self._last_chance.pop(entry, None)
            if messages is None:
                again.append(entry)
                continue
            delivery = messages[0].message_id().batch
            if delivery is not None:
                self.consumer.withdraw(delivery)  # (its messages still queued are dropped: the entry goes whole)
            if self.unacked is not None:
                self.unacked.remove(entry)
            self._dead_letters.send(self, entry, messages)  # type: ignore[union-attr]
        return again

    def redelivering_all(self) -> None:
        """Everything not acknowledged comes again."""
        self.forget()

    def resubscribed(self) -> None:
        """A new subscription: the broker delivers again everything not acknowledged."""
        self.forget()

    def forget(self) -> None:
        if self.unacked is not None:
            self.unacked.clear()
        self._last_chance.clear()

    # -- the tick and the dead-letter outcomes -----------------------------------------------

    def expire(self) -> int:
        """Ask again for the entries not acknowledged within the timeout; how many."""
        if self.unacked is None:
            return 0
        due = self.unacked.expire()
        if not due:
            return 0
        for delivery in due.values():
            if delivery is not None:
                self.consumer.withdraw(delivery)
        logger.info("[%s] %d entries not acknowledged within %d ms: asked for again", self.topic, len(due),
                    self.owner.unacked_timeout_ms)
        self.consumer.redeliver(list(due))
        return len(due)

    def dead_lettered(self, entry: Entry) -> None:
        """Every message of entry is on the dead-letter topic: acknowledge it here."""
        self.consumer.ack_entry(entry)

    def dead_letter_failed(self, entry: Entry) -> None:
        """The dead-letter topic did not take entry: deliver it again after the negative-ack delay."""
        self.consumer.redeliver_later(entry)


class Redelivery:
    """A consumer's delivery controls: the tick of the unacked-message timeout and the dead letters."""

    def __init__(self, client: Owner, settings: ConsumerSettings) -> None:
        self.client = client
        self.backend = client.backend
        unacked_timeout_ms = self.unacked_timeout_ms = settings.unacked_timeout_ms
        tick_ms = min(TICK_MS, unacked_timeout_ms) if unacked_timeout_ms else 0
        self.tick_seconds = tick_ms / 1000.0
        self._bucket_count = math.ceil(unacked_timeout_ms / tick_ms) + 1 if tick_ms else 0
        policy = settings.dead_letter_policy
        self.dead_letters = (DeadLetters(client, settings.subscription_name, policy, settings.consumer_type)
                             if policy is not None else None)
        self._partitions: list[PartitionRedelivery] = []
        self._timer: Any = None
        self._closed = False

    def partition(self, consumer: RedeliveredConsumer) -> PartitionRedelivery:
        unacked = UnackedEntries(self._bucket_count) if self._bucket_count else None
        partition = PartitionRedelivery(self, consumer, unacked, self.dead_letters)
        self._partitions.append(partition)
        return partition

    def start(self) -> None:
        """Start the tick (the consumer is subscribed)."""
        if self.tick_seconds and not self._closed:
            self._timer = self.backend.call_later(self.tick_seconds, self._tick)

    def _tick(self) -> None:  # (a timer callback must not block: the work goes in a task)
        self.backend.spawn(self._expire)

    def _expire(self) -> None:
        try:
            if self.client.forked():
                return  # (the consumer is the parent's)
        except ReferenceError:  # (the client was dropped without close(): the tick ends)
            self._closed = True
            return
        try:
            for partition in list(self._partitions):
                try:
                    partition.expire()
                except Exception:
                    logger.exception("[%s] asking for unacknowledged messages again", partition.topic)
        finally:
            if not self._closed:
                self._timer = self.backend.call_later(self.tick_seconds, self._tick)

    def close(self) -> None:
        """The consumer closed: no more ticks; the dead-letter producers close."""
        self.abort()
        if self.dead_letters is not None:
            self.dead_letters.close()

    def abort(self) -> None:
        """The client shut down: no more ticks (its producers are aborted with it)."""
        self._closed = True
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
