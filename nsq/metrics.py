"""Prometheus metrics of nsq Readers and Writers (``pip install nsqfast[metrics]``).

``NsqCollector`` is a prometheus_client collector that reads each
registered object's ``stats()`` when the registry is scraped: nothing is
counted per message on its behalf (the counts are those the objects keep
anyway). ``register(reader_or_writer)`` adds an object to the one
NsqCollector of a registry (the default registry unless told otherwise);
``unregister`` takes it off. Objects are held weakly and dropped at the
first scrape after they close, so a closed Reader's series disappear.

Samples of two objects with the same labels (two Readers of one
topic/channel in one process) are summed. See docs/metrics.md for the table
of metrics and an example.

Importing this module without prometheus_client raises ImportError naming
the extra; ``import nsq`` never imports it.
"""
from __future__ import annotations

from msgengine.metrics import REGISTRY, CollectorRegistry, Families, MetricSpec, ObjectCollector, register_object
from msgengine.metrics import unregister_object

from nsq.reader import Reader
from nsq.writer import Writer

__all__ = ["NsqCollector", "register", "unregister", "READER_METRICS", "WRITER_METRICS"]

_RC = ("topic", "channel")

#: the Reader's metrics, and the key of Reader.stats() each one reports
READER_METRICS: tuple[tuple[MetricSpec, str], ...] = (
    (MetricSpec("nsq_reader_messages_received_total", "counter", "Messages received from nsqd.", _RC), "received"),
    (MetricSpec("nsq_reader_messages_finished_total", "counter", "Messages finished (FIN).", _RC), "finished"),
    (MetricSpec("nsq_reader_messages_requeued_total", "counter", "Messages requeued (REQ).", _RC), "requeued"),
    (MetricSpec("nsq_reader_messages_given_up_total", "counter",
                "Messages given up after max_tries (and finished).", _RC), "given_up"),
    (MetricSpec("nsq_reader_handler_errors_total", "counter",
                "Handler calls that raised or returned neither True nor False.", _RC), "handler_errors"),
    (MetricSpec("nsq_reader_connections", "gauge", "nsqd connections open.", _RC), "connections"),
    (MetricSpec("nsq_reader_max_in_flight", "gauge", "The max_in_flight setting (0: paused).", _RC), "max_in_flight"),
    (MetricSpec("nsq_reader_rdy", "gauge", "RDY granted over all connections.", _RC), "total_rdy"),
    (MetricSpec("nsq_reader_in_flight", "gauge", "Messages received and not answered yet.", _RC), "in_flight"),
    (MetricSpec("nsq_reader_in_backoff", "gauge", "1 while the Reader backs off, else 0.", _RC), "in_backoff"),
)

_RCN = ("topic", "channel", "nsqd")

#: per connection (the label nsqd is the connection's id, host:port)
READER_CONNECTION_METRICS: tuple[tuple[MetricSpec, str], ...] = (
    (MetricSpec("nsq_reader_connection_rdy", "gauge", "RDY granted on one nsqd connection.", _RCN), "rdy"),
    (MetricSpec("nsq_reader_connection_in_flight", "gauge",
                "Messages in flight on one nsqd connection.", _RCN), "in_flight"),
)

#: the Writer's metrics per topic, and the key of Writer.stats()["topics"][topic] each one reports
WRITER_METRICS: tuple[tuple[MetricSpec, str], ...] = (
    (MetricSpec("nsq_writer_messages_published_total", "counter",
                "Messages nsqd acknowledged (OK).", ("topic",)), "published"),
    (MetricSpec("nsq_writer_publish_errors_total", "counter",
                "Publish calls (PUB, MPUB, DPUB, pub_many) that failed or timed out.", ("topic",)), "errors"),
)

_WRITER_CONNECTIONS = MetricSpec("nsq_writer_connections", "gauge", "nsqd connections open, over all Writers.", ())


class NsqCollector(ObjectCollector["Reader | Writer"]):
    """Reports nsq Readers and Writers (see the module docstring)."""

    specs = tuple(spec for spec, _key in READER_METRICS + READER_CONNECTION_METRICS + WRITER_METRICS) + (
        _WRITER_CONNECTIONS,
    )

    def accepts(self, obj: object) -> bool:
        return isinstance(obj, (Reader, Writer))

    def is_closed(self, obj: "Reader | Writer") -> bool:
        return obj.is_closed()

    def read(self, obj: "Reader | Writer", families: Families) -> None:
        if isinstance(obj, Reader):
            self._read_reader(obj, families)
        else:
            self._read_writer(obj, families)

    @staticmethod
    def _read_reader(reader: Reader, families: Families) -> None:
        stats = reader.stats()
        labels = (reader.topic, reader.channel)
        for spec, key in READER_METRICS:
            families.add(spec.name, labels, float(stats[key]))
        for conn_id, conn in stats["per_connection"].items():
            for spec, key in READER_CONNECTION_METRICS:
                families.add(spec.name, labels + (str(conn_id),), float(conn[key]))

    @staticmethod
    def _read_writer(writer: Writer, families: Families) -> None:
        stats = writer.stats()
        families.add(_WRITER_CONNECTIONS.name, (), float(stats["connections"]))
        for topic, counts in stats["topics"].items():
            for spec, key in WRITER_METRICS:
                families.add(spec.name, (topic,), float(counts[key]))  # type: ignore[literal-required]


def register(obj: "Reader | Writer", registry: CollectorRegistry = REGISTRY) -> NsqCollector:
    """Report a Reader or Writer in registry (the default one unless told);
    returns the registry's NsqCollector (made and registered on first use)."""
    return register_object(NsqCollector, obj, registry)


def unregister(obj: "Reader | Writer", registry: CollectorRegistry = REGISTRY) -> None:
    """Stop reporting obj in registry (closing it does as much at the next scrape)."""
    unregister_object(NsqCollector, obj, registry)
