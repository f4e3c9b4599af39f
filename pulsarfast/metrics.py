"""Prometheus metrics of pulsarfast Producers, Consumers and Readers
(``pip install nsqfast[metrics]``).

``PulsarCollector`` is a prometheus_client collector that reads each
registered object's ``stats()`` when the registry is scraped: nothing is
counted per message on its behalf. ``register(producer_or_consumer)`` adds
an object to the one PulsarCollector of a registry (the default registry
unless told otherwise); ``unregister`` takes it off. Objects are held
weakly and dropped at the first scrape after they close.

The label ``topic`` is the full name of the topic, or of each partition of
a partitioned one (``persistent://public/default/events-partition-0``). A
Reader is reported as the consumer of its subscription. Samples with the
same labels (two producers of one topic) are summed. See docs/metrics.md.

Importing this module without prometheus_client raises ImportError naming
the extra; ``import pulsarfast`` never imports it.
"""
from __future__ import annotations

from msgengine.metrics import REGISTRY, CollectorRegistry, Families, MetricSpec, ObjectCollector, register_object
from msgengine.metrics import unregister_object

from pulsarfast.consuming.consumer import Consumer
from pulsarfast.consuming.reader import Reader
from pulsarfast.producing.producer import Producer

__all__ = ["PulsarCollector", "register", "unregister", "CONSUMER_METRICS", "PRODUCER_METRICS"]

_TS = ("topic", "subscription")

#: the consumer's metrics per topic or partition, and the key of Consumer.stats()["topics"][topic] each reports
CONSUMER_METRICS: tuple[tuple[MetricSpec, str], ...] = (
    (MetricSpec("pulsar_consumer_messages_received_total", "counter",
                "Messages received from the broker.", _TS), "received"),
    (MetricSpec("pulsar_consumer_messages_acknowledged_total", "counter",
                "Messages acknowledged by the application.", _TS), "acknowledged"),
    (MetricSpec("pulsar_consumer_messages_negatively_acknowledged_total", "counter",
                "Messages negatively acknowledged by the application.", _TS), "negatively_acknowledged"),
    (MetricSpec("pulsar_consumer_cumulative_acknowledgements_total", "counter",
                "Cumulative acknowledgements made by the application.", _TS), "acknowledged_cumulative"),
    (MetricSpec("pulsar_consumer_messages_corrupt_total", "counter",
                "Messages refused: a bad checksum, not decompressible, or unsupported.", _TS), "corrupt"),
    (MetricSpec("pulsar_consumer_connected", "gauge", "1 while subscribed on a broker, else 0.", _TS), "connected"),
)

#: the producer's metrics per topic or partition, and the key of Producer.stats()["topics"][topic] each reports
PRODUCER_METRICS: tuple[tuple[MetricSpec, str], ...] = (
    (MetricSpec("pulsar_producer_messages_sent_total", "counter",
                "Messages the broker acknowledged (a receipt).", ("topic",)), "sent"),
    (MetricSpec("pulsar_producer_messages_failed_total", "counter",
                "Messages whose send failed: the broker's error, the send timeout, a close before the receipt.",
                ("topic",)), "failed"),
    (MetricSpec("pulsar_producer_messages_pending", "gauge",
                "Messages sent and waiting for the broker's receipt (the open batch's included).", ("topic",)),
     "pending"),
    (MetricSpec("pulsar_producer_connected", "gauge", "1 while the producer exists on a broker, else 0.",
                ("topic",)), "connected"),
)


class PulsarCollector(ObjectCollector["Producer | Consumer | Reader"]):
    """Reports pulsarfast Producers, Consumers and Readers (see the module docstring)."""

    specs = tuple(spec for spec, _key in CONSUMER_METRICS + PRODUCER_METRICS)

    def accepts(self, obj: object) -> bool:
        return isinstance(obj, (Producer, Consumer, Reader))

    def is_closed(self, obj: "Producer | Consumer | Reader") -> bool:
        return obj.stats()["closed"]

    def read(self, obj: "Producer | Consumer | Reader", families: Families) -> None:
        if isinstance(obj, Producer):
            for topic, counts in obj.stats()["topics"].items():
                for spec, key in PRODUCER_METRICS:
                    families.add(spec.name, (topic,), float(counts[key]))  # type: ignore[literal-required]
            return
        stats = obj.stats()
        for topic, consumed in stats["topics"].items():
            for spec, key in CONSUMER_METRICS:
                families.add(spec.name, (topic, stats["subscription"]),
                             float(consumed[key]))  # type: ignore[literal-required]


def register(obj: "Producer | Consumer | Reader", registry: CollectorRegistry = REGISTRY) -> PulsarCollector:
    """Report a Producer, Consumer or Reader in registry (the default one
    unless told); returns the registry's PulsarCollector (made and
    registered on first use)."""
    return register_object(PulsarCollector, obj, registry)


def unregister(obj: "Producer | Consumer | Reader", registry: CollectorRegistry = REGISTRY) -> None:
    """Stop reporting obj in registry (closing it does as much at the next scrape)."""
    unregister_object(PulsarCollector, obj, registry)
