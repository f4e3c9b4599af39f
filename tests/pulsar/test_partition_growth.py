"""Partitions added to a partitioned topic after subscribe or create_producer
(pulsarfast/consuming/partitionwatch.py), on the real broker, both backends: producers route to them, and
the consumer joins them within partitions_update_interval_seconds
(60 s by default, the C++ client's partitionsUpdateInterval; 1 s here), and what a producer
wrote there before the consumer joined is not lost to the subscription, whatever its
initial_position."""
from __future__ import annotations

import functools

import pytest

import pulsarfast as pulsar
from tests.support.pulsar_helpers import assert_nothing_more, full, produce
from tests.support.waiting import run_blocking, wait_for

pytestmark = pytest.mark.timeout(120)

WAIT = 15.0
RECEIVE_MS = 10_000

wait_for = functools.partial(wait_for, timeout=WAIT)


def _partitions_of(consumer) -> set:
    return {each.topic for each in consumer.topic_consumers()}


@pytest.mark.parametrize("initial_position", [pulsar.InitialPosition.Latest, pulsar.InitialPosition.Earliest],
                         ids=["latest", "earliest"])
def test_a_partition_added_later_is_joined_from_its_first_message(make_client, pulsar_broker, pulsar_topic, backend,
                                                                   initial_position):
    topic = full(pulsar_topic)
    run_blocking(backend, pulsar_broker.create_partitioned_topic, pulsar_topic, 2)
    client = make_client(partitions_update_interval_seconds=600)  # (checked by hand below, after the send)
    consumer = client.subscribe(pulsar_topic, "grow", initial_position=initial_position)
    watch = consumer.topic_watch
    assert _partitions_of(consumer) == {topic + "-partition-0", topic + "-partition-1"}
    run_blocking(backend, pulsar_broker.update_partitioned_topic, pulsar_topic, 3)
    produce(client, topic + "-partition-2", [b"before the consumer joined"])
    watch.check(consumer)
    assert _partitions_of(consumer) == {topic + "-partition-%d" % i for i in range(3)}
    assert watch.counts == {topic: 3}
    message = consumer.receive(timeout_millis=RECEIVE_MS)
    assert (message.topic_name(), message.data()) == (topic + "-partition-2", b"before the consumer joined")
    consumer.acknowledge(message)
    produce(client, topic + "-partition-2", [b"after"])
    assert consumer.receive(timeout_millis=RECEIVE_MS).data() == b"after"
    assert_nothing_more(consumer)


def test_new_partitions_are_joined_within_the_interval(make_client, pulsar_broker, pulsar_topic, backend):
    topic = full(pulsar_topic)
    run_blocking(backend, pulsar_broker.create_partitioned_topic, pulsar_topic, 1)
    consumer = make_client(partitions_update_interval_seconds=1).subscribe(pulsar_topic, "grow")
    run_blocking(backend, pulsar_broker.update_partitioned_topic, pulsar_topic, 2)
    wait_for(lambda: topic + "-partition-1" in _partitions_of(consumer), backend, message="the new partition joined")
    consumer.close()
    assert consumer.topic_watch.closed


def test_a_producer_routes_to_partitions_added_later(make_client, pulsar_broker, pulsar_topic, backend):
    topic = full(pulsar_topic)
    run_blocking(backend, pulsar_broker.create_partitioned_topic, pulsar_topic, 2)
    client = make_client(partitions_update_interval_seconds=600)  # (checked by hand below)
    producer = client.create_producer(pulsar_topic,
                                      message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution)
    run_blocking(backend, pulsar_broker.update_partitioned_topic, pulsar_topic, 3)
    consumer = client.subscribe(topic + "-partition-2", "new", initial_position=pulsar.InitialPosition.Earliest)
    producer.partition_watch.check(producer)
    assert [p.topic for p in producer.partition_producers()] == [topic + "-partition-%d" % i for i in range(3)]
    ids = [producer.send(b"m-%d" % i) for i in range(6)]  # (round robin: two go to the new partition)
    assert sorted(message_id.partition() for message_id in ids) == [0, 0, 1, 1, 2, 2]
    got = sorted(consumer.receive(timeout_millis=RECEIVE_MS).data() for _ in range(2))
    assert len(got) == 2 and all(body.startswith(b"m-") for body in got)
    producer.close()
    assert producer.partition_watch.closed


def test_a_topic_that_is_not_partitioned_has_no_watch(client, pulsar_topic):
    consumer = client.subscribe(pulsar_topic, "plain")
    assert consumer.topic_watch is None
    assert client.create_producer(pulsar_topic).partition_watch is None


def test_the_interval_is_checked_as_a_positive_int():
    with pytest.raises(ValueError):
        pulsar.Client("pulsar://127.0.0.1:1", partitions_update_interval_seconds=0)
