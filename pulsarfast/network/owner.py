"""``Owner``: the ``Client`` as the objects it makes see it (a ``typing.Protocol``).

Producers (``PartitionProducer``, ``Producer``), consumers (``TopicConsumer``,
``Consumer``), readers and a consumer's redelivery and dead-letter helpers
hold their client as an ``Owner``: what they use of it, and nothing else. So
none of them imports client.py, which imports them all.

``Supervised`` is what the client's supervisor keeps (a ``PartitionProducer``
or a ``TopicConsumer``: ``establish()`` creates it on its broker), and
``SendingProducer`` what the dead letters do with the producers
``create_producer`` makes.
"""
from __future__ import annotations

from typing import Any, Callable, Protocol

from msgengine.runtime import Backend

from pulsarfast.base.results import Result
from pulsarfast.network.connection import BrokerConnection
from pulsarfast.wire.message import MessageId


class Supervised(Protocol):
    """A producer or consumer of one topic or partition, kept by the client's supervisor."""

    def establish(self) -> Any:
        """Create it on its broker (a lookup, then the command); returns its link, raises when refused."""

    def __hash__(self) -> int: ...


class SendingProducer(Protocol):
    """A producer made by ``Owner.create_producer``, as the dead letters use it."""

    def send_async(self, content: bytes | None, callback: Callable[[Result, MessageId | None], None], *,
                   properties: dict[str, str] | None = None, partition_key: str | None = None,
                   ordering_key: str | None = None) -> None: ...

    def close(self) -> None: ...

    #: the client, which a producer keeps alive for its user; a part of the client that makes one for
    #: itself (the dead letters) sets it to None, so that a dropped client is still collected
    keep_alive: object


class Owner(Protocol):
    """What producers, consumers and readers use of the Client that made them."""

    @property
    def backend(self) -> Backend:
        """The runtime (gevent or threads): locks, events, timers, tasks."""

    @property
    def operation_timeout(self) -> float:
        """Seconds a request to a broker may take."""

    @property
    def max_message_size(self) -> int:
        """The largest message the brokers take (what the last connection made said)."""

    def connection_for(self, topic: str) -> BrokerConnection:
        """The connection to the broker that serves topic (a lookup, then the shared connection)."""

    def new_producer_id(self) -> int: ...

    def new_consumer_id(self) -> int: ...

    def forget_producer(self, producer: Supervised) -> None:
        """Stop re-creating this partition's producer (closed, or its topic terminated)."""

    def forget_consumer(self, consumer: Supervised) -> None:
        """Stop subscribing this topic consumer again (closed or unsubscribed)."""

    def producer_closed(self, producer: object) -> None:
        """A Producer closed: the client no longer closes it with itself."""

    def consumer_closed(self, consumer: object) -> None:
        """A Consumer closed: the client no longer closes it with itself."""

    def forked(self) -> bool:
        """This process forked from the one that made the client."""

    def check_usable(self) -> None:
        """Raise ForkedError in a forked child, AlreadyClosed once the client is closed."""

    def create_producer(self, topic: str, *, block_if_queue_full: bool, batching_enabled: bool,
                        initial_subscription_name: str | None) -> SendingProducer:
        """A producer on topic (the dead letters' producers)."""
