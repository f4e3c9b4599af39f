"""Grouped acknowledgements (``ack_grouping_time_ms``, 100 ms by default):
individual acks leave together, reach the broker within the interval, go
before a close, and survive a reconnect; both backends, a real broker."""
from __future__ import annotations

import pytest

import pulsarfast as pulsar
from msgengine.runtime import get_backend
from tests.support.pulsar_helpers import bodies_of, produce, subscription_stats
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(150)

RECEIVE_MS = 10_000
EMPTY_MS = 500


def assert_all_acknowledged_at_close(client, consumer, topic):
    """Close the consumer, subscribe again: nothing comes (its acknowledgements reached the broker)."""
    consumer.close()
    again = client.subscribe(topic, "sub")
    with pytest.raises(pulsar.Timeout):
        again.receive(timeout_millis=EMPTY_MS)


def test_grouped_acks_reach_the_broker_within_the_interval(client, pulsar_broker, pulsar_topic, backend):
    consumer = client.subscribe(pulsar_topic, "sub", consumer_type=pulsar.ConsumerType.Shared,
                                initial_position=pulsar.InitialPosition.Earliest, ack_grouping_time_ms=100)
    produce(client, pulsar_topic, bodies_of(b"m", 20))
    for _ in range(20):
        consumer.acknowledge(consumer.receive(timeout_millis=RECEIVE_MS))

    def all_acknowledged():
        sub = subscription_stats(pulsar_broker, backend, pulsar_topic, "sub")
        return sub["msgBacklog"] == 0 and sub.get("unackedMessages", 0) == 0

    wait_for(all_acknowledged, backend)


def test_grouped_acks_are_sent_before_the_consumer_closes(client, pulsar_topic):
    consumer = client.subscribe(pulsar_topic, "sub", initial_position=pulsar.InitialPosition.Earliest,
                                ack_grouping_time_ms=600_000)  # (only close() sends them)
    produce(client, pulsar_topic, bodies_of(b"m", 20))
    for _ in range(20):
        consumer.acknowledge(consumer.receive(timeout_millis=RECEIVE_MS))
    assert_all_acknowledged_at_close(client, consumer, pulsar_topic)


def test_acks_made_around_a_reconnect_still_reach_the_broker(client, pulsar_broker, pulsar_topic, backend):
    consumer = client.subscribe(pulsar_topic, "sub", initial_position=pulsar.InitialPosition.Earliest,
                                ack_grouping_time_ms=600_000)
    produce(client, pulsar_topic, bodies_of(b"m", 10))
    received = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(10)]
    for conn in client.broker_connections():
        conn.close()
    for message in received:
        consumer.acknowledge(message)
    wait_for(consumer.is_connected, backend)
    assert_all_acknowledged_at_close(client, consumer, pulsar_topic)


def test_acks_without_grouping_reach_the_broker(client, pulsar_broker, pulsar_topic, backend):
    consumer = client.subscribe(pulsar_topic, "sub", consumer_type=pulsar.ConsumerType.Shared,
                                initial_position=pulsar.InitialPosition.Earliest, ack_grouping_time_ms=0)
    produce(client, pulsar_topic, bodies_of(b"m", 5))
    for _ in range(5):
        consumer.acknowledge(consumer.receive(timeout_millis=RECEIVE_MS))
    wait_for(lambda: subscription_stats(pulsar_broker, backend, pulsar_topic, "sub")["msgBacklog"] == 0, backend)


def test_a_close_waits_for_a_grouped_ack_command_already_being_sent(
        client, pulsar_broker, pulsar_topic, backend, monkeypatch):
    # The interval's send takes the grouped acks, then builds and writes the ACK command; a close
    # in between must not overtake it (the broker ignores acks for a consumer it has closed). The
    # gap is widened here: building the interval's command waits 0.5 s, and the close starts then.
    from pulsarfast.consuming import consumer as consumer_module

    runtime = get_backend(backend)
    building = runtime.event()
    real_ack = consumer_module.proto.ack

    def slow_first_ack(*args, **kwargs):
        if not building.is_set():
            building.set()
            runtime.sleep(0.5)
        return real_ack(*args, **kwargs)

    consumer = client.subscribe(pulsar_topic, "sub", consumer_type=pulsar.ConsumerType.Shared,
                                initial_position=pulsar.InitialPosition.Earliest, ack_grouping_time_ms=50)
    produce(client, pulsar_topic, bodies_of(b"m", 10))
    messages = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(10)]
    monkeypatch.setattr(consumer_module.proto, "ack", slow_first_ack)
    for message in messages:
        consumer.acknowledge(message)
    assert building.wait(10), "the grouping interval's send did not start"
    consumer.close()
    wait_for(lambda: subscription_stats(pulsar_broker, backend, pulsar_topic, "sub")["msgBacklog"] == 0, backend,
             timeout=5, message=lambda: "an empty backlog: %r" % (
                 subscription_stats(pulsar_broker, backend, pulsar_topic, "sub"),))
