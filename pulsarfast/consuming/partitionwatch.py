"""Partitions added to a partitioned topic after a consumer subscribed to it, or a producer
started on it.

A topic's partitions can only grow (the admin API refuses fewer). ``PartitionWatch`` (one per
consumer of a partitioned topic, not of a pattern: pattern.py lists partitions one by one; one per
producer of a partitioned topic) asks the broker for the partition count every
``partitions_update_interval_seconds`` (60 s, the C++ client's partitionsUpdateInterval) on a task
of its own, as the official clients do, and joins the new partitions: a consumer subscribes them as
subscribe() does (its flow budget spread again over its partitions); a producer starts on them as
create_producer() does, and its routing (round robin, key hash, message_router) takes them from
then on.

Messages a producer writes to a new partition before the consumer joins it belong to the
subscription: the broker creates a partitioned topic's subscriptions on the partitions it adds,
and a partition added later is subscribed from its earliest message whatever the consumer's
initial_position (for a broker that did not create the subscription there: with Latest, those
messages would be skipped, and so lost to it). A count that cannot be read,
or a partition that cannot be subscribed, is logged and tried again at the next interval. It holds
its consumer weakly and stops when the consumer closes.
"""
from __future__ import annotations

import logging
import weakref
from typing import Any, Callable, Protocol, Sequence

from pulsarfast.base.enums import InitialPosition
from pulsarfast.base.results import PulsarException
from pulsarfast.base.topics import partition_index
from pulsarfast.consuming.consumer import Consumer

logger = logging.getLogger(__name__)


class PartitionClient(Protocol):
    """What a PartitionWatch uses of its Client."""

    backend: Any

    def get_topic_partitions(self, topic: str) -> list[str]: ...

    def add_topics(self, consumer: Consumer, parts: Sequence[tuple[str, int]],
                   initial_position: InitialPosition | None = None) -> None: ...

    def start_partition_producers(self, producer: Any, parts: list[tuple[str, int]]) -> None: ...


#: join(client, target, topic, the new partitions as (name, index)): subscribe or start them (raises
#: PulsarException, with nothing of them left behind, when that fails)
Join = Callable[[PartitionClient, Any, str, list[tuple[str, int]]], None]


def join_consumer_partitions(client: PartitionClient, consumer: Consumer, _topic: str,
                             parts: list[tuple[str, int]]) -> None:
    """Subscribe a consumer's new partitions, from their earliest message (what was written there
    before it joined is its)."""
    client.add_topics(consumer, parts, InitialPosition.Earliest)


def join_producer_partitions(client: PartitionClient, producer: Any, _topic: str,
                             parts: list[tuple[str, int]]) -> None:
    """Start producers on a producer's new partitions; its routing takes them from then on."""
    client.start_partition_producers(producer, parts)


class PartitionWatch:
    """Joins the partitions added to a consumer's or producer's partitioned topics; see the module
    docstring."""

    def __init__(self, client: PartitionClient, target: Any, counts: dict[str, int], period: float,
                 join: Join) -> None:
        self._client = client  # (the client's weak proxy)
        self._target: Callable[[], Any] = weakref.ref(target)
        self._join_parts = join
        #: each partitioned topic -> the partitions joined
        self.counts = dict(counts)
        self.period = float(period)
        self.backend = client.backend
        self._lock = self.backend.lock()
        self._timer: Any = None
        self._closed = False
        #: checks done
        self.checks = 0

    def __repr__(self) -> str:
        return "<PartitionWatch %s>" % ",".join(self.counts)

    @property
    def closed(self) -> bool:
        """The watch stopped (its consumer or producer closed): no more checks."""
        return self._closed and self._timer is None

    def start(self) -> None:
        self._arm()

    def _arm(self) -> None:
        with self._lock:
            if not self._closed:
                self._timer = self.backend.call_later(self.period, self._tick)

    def _tick(self) -> None:  # (a timer callback must not block: the work goes in a task)
        self.backend.spawn(self._check_and_arm)

    def _check_and_arm(self) -> None:
        try:
            target = self._target()
            if target is None or target.closed or self._closed:
                return
            self.check(target)
        except ReferenceError:  # (the client was dropped)
            return
        except Exception:
            logger.exception("[%s] checking for new partitions failed; again in %.0fs", self, self.period)
        self._arm()

    def check(self, target: Any) -> None:
        """Ask each topic's partition count once; join the partitions added since."""
        self.checks += 1
        for topic, known in list(self.counts.items()):
            try:
                names = self._client.get_topic_partitions(topic)
            except PulsarException as exc:
                logger.warning("[%s] reading the partitions of %s: %s; again in %.0fs", self, topic, exc, self.period)
                continue
            new = [(name, partition_index(name)) for name in names if partition_index(name) >= known]
            if not new:
                continue
            try:
                self._join_parts(self._client, target, topic, new)
            except PulsarException as exc:
                logger.warning("[%s] joining the new partitions of %s: %s; again in %.0fs", self, topic, exc,
                               self.period)
                continue
            self.counts[topic] = max(index for _name, index in new) + 1
            logger.info("[%s] %s has %d partitions now: joined %s", self, topic, self.counts[topic],
                        ", ".join(name for name, _index in new))

    def close(self) -> None:
        """Stop checking (the consumer or producer closed)."""
        with self._lock:
            self._closed = True
            timer, self._timer = self._timer, None
        if timer is not None:
            try:
                timer.cancel()
            except Exception:  # pragma: no cover - in a forked child, a timer of the parent's scheduler thread
                pass


__all__ = ["PartitionClient", "PartitionWatch", "join_consumer_partitions", "join_producer_partitions"]
