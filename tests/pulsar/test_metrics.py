# pulsarfast.metrics against the real Pulsar broker, on both backends: N sent (blocking and
# batched), N received and acknowledged (one of them negatively first), then the registry scraped
# by generate_latest and over HTTP; partitions as labels, sends the broker refuses, closed
# objects. The import rules are in test_metrics_imports.py.
from __future__ import annotations

import pytest

prometheus_client = pytest.importorskip("prometheus_client")

from prometheus_client import CollectorRegistry  # noqa: E402

import pulsarfast as pulsar  # noqa: E402
import pulsarfast.metrics  # noqa: E402
from tests.support.scraping import http_scrape, names, scrape, value  # noqa: E402
from tests.support.waiting import run_blocking  # noqa: E402

pytestmark = pytest.mark.timeout(150)

RECEIVE_MS = 15_000


def test_counters_after_sending_receiving_and_acknowledging_n(make_client, pulsar_broker, pulsar_topic, backend):
    registry = CollectorRegistry()
    client = make_client()
    full = pulsar_broker.topic_name(pulsar_topic)
    consumer = client.subscribe(pulsar_topic, "sub", consumer_type=pulsar.ConsumerType.Shared,
                                initial_position=pulsar.InitialPosition.Earliest,
                                negative_ack_redelivery_delay_ms=100)
    collector = pulsarfast.metrics.register(consumer, registry)
    assert isinstance(collector, pulsarfast.metrics.PulsarCollector)
    one_by_one = client.create_producer(pulsar_topic)
    batched = client.create_producer(pulsar_topic, batching_enabled=True, batching_max_messages=16)
    pulsarfast.metrics.register(one_by_one, registry)
    pulsarfast.metrics.register(batched, registry)
    for i in range(10):
        one_by_one.send(b"one %d" % i)
    results = []
    for i in range(50):
        batched.send_async(b"batch %d" % i, lambda result, _id: results.append(result))
    batched.flush()
    assert results == [pulsar.Result.Ok] * 50
    n = 60

    nacked = None
    acknowledged = set()
    while len(acknowledged) < n:
        message = consumer.receive(timeout_millis=RECEIVE_MS)
        if nacked is None:
            nacked = message.data()
            assert nacked == b"one 0"  # (not a batch's: its redelivery is that one message alone)
            consumer.negative_acknowledge(message)  # (delivered again after 100 ms)
            continue
        assert message.data() not in acknowledged
        consumer.acknowledge(message)
        acknowledged.add(message.data())
    assert consumer.stats()["received"] == n + 1

    for samples in (scrape(registry), http_scrape(registry, backend)):
        ts = {"topic": full, "subscription": "sub"}
        assert value(samples, "pulsar_consumer_messages_received_total", **ts) == n + 1
        assert value(samples, "pulsar_consumer_messages_acknowledged_total", **ts) == n
        assert value(samples, "pulsar_consumer_messages_negatively_acknowledged_total", **ts) == 1
        assert value(samples, "pulsar_consumer_cumulative_acknowledgements_total", **ts) == 0
        assert value(samples, "pulsar_consumer_messages_corrupt_total", **ts) == 0
        assert value(samples, "pulsar_consumer_connected", **ts) == 1
        # the two producers of one topic: summed
        assert value(samples, "pulsar_producer_messages_sent_total", topic=full) == n
        assert value(samples, "pulsar_producer_messages_failed_total", topic=full) == 0
        assert value(samples, "pulsar_producer_messages_pending", topic=full) == 0
        assert value(samples, "pulsar_producer_connected", topic=full) == 2
    assert batched.stats()["sent"] == 50 and one_by_one.stats()["sent"] == 10

    consumer.close()
    one_by_one.close()
    samples = scrape(registry)
    assert "pulsar_consumer_messages_received_total" not in names(samples)
    assert value(samples, "pulsar_producer_messages_sent_total", topic=full) == 50  # (the batched one only)
    assert collector.objects() == [batched]


def test_partitions_are_labelled_and_a_reader_reports_as_its_subscription(make_client, pulsar_broker, pulsar_topic,
                                                                          backend):
    run_blocking(backend, pulsar_broker.create_partitioned_topic, pulsar_topic, 2)
    registry = CollectorRegistry()
    client = make_client()
    producer = client.create_producer(pulsar_topic)
    pulsarfast.metrics.register(producer, registry)
    for i in range(6):
        producer.send(b"%d" % i)  # (round robin: 3 on each partition)
    reader = client.create_reader(pulsar_topic, pulsar.MessageId.earliest)
    pulsarfast.metrics.register(reader, registry)
    for _ in range(6):
        reader.read_next(timeout_millis=RECEIVE_MS)
    subscription = reader.stats()["subscription"]
    samples = scrape(registry)
    partitions = [pulsar_broker.topic_name(pulsar_topic) + "-partition-%d" % i for i in range(2)]
    assert [value(samples, "pulsar_producer_messages_sent_total", topic=p) for p in partitions] == [3, 3]
    assert [value(samples, "pulsar_consumer_messages_received_total", topic=p, subscription=subscription)
            for p in partitions] == [3, 3]
    reader.close()
    producer.close()


def test_sends_the_broker_refuses_are_failed(make_client, pulsar_broker, pulsar_topic, backend):
    registry = CollectorRegistry()
    client = make_client()
    producer = client.create_producer(pulsar_topic, send_timeout_millis=5000)  # (a safety net: it fails at once)
    pulsarfast.metrics.register(producer, registry)
    producer.send(b"before")
    run_blocking(backend, pulsar_broker.admin, "POST", pulsar_broker.topic_path(pulsar_topic) + "/terminate")
    with pytest.raises(pulsar.TopicTerminated):  # (not a Timeout: the broker's refusal fails it at once)
        producer.send(b"after")
    samples = scrape(registry)
    full = pulsar_broker.topic_name(pulsar_topic)
    assert value(samples, "pulsar_producer_messages_sent_total", topic=full) == 1
    assert value(samples, "pulsar_producer_messages_failed_total", topic=full) == 1
    assert value(samples, "pulsar_producer_messages_pending", topic=full) == 0


def test_objects_of_a_closed_client_leave(make_client, pulsar_topic, backend):
    registry = CollectorRegistry()
    client = make_client()
    producer = client.create_producer(pulsar_topic)
    collector = pulsarfast.metrics.register(producer, registry)
    producer.send(b"x")
    client.close()
    assert "pulsar_producer_messages_sent_total" not in names(scrape(registry))
    assert collector.objects() == []
    with pytest.raises(TypeError):
        pulsarfast.metrics.register(object(), registry)  # type: ignore[arg-type]
