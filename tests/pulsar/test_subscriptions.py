"""pulsarfast against a real Pulsar standalone broker: subscription types and
acknowledgement (Exclusive, Failover, KeyShared, Shared with negative acks,
cumulative acks, unsubscribe, several topics in one subscription), on both
backends (the `backend` fixture)."""
from __future__ import annotations

import collections
import functools

import pytest

import pulsarfast as pulsar
from tests.support.pulsar_helpers import full, subscription_stats, topic_stats
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(150)

WAIT = 15.0  # seconds any single expected thing may take
RECEIVE_MS = 10_000

wait_for = functools.partial(wait_for, timeout=WAIT)


# --------------------------------------------------------------------------- Exclusive


def test_exclusive_subscription_refuses_a_second_consumer_with_consumer_busy(client, make_client, pulsar_broker,
                                                                             pulsar_topic, backend):
    other = make_client()
    first = client.subscribe(pulsar_topic, "excl", consumer_type=pulsar.ConsumerType.Exclusive)
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(pulsar_topic, "excl", consumer_type=pulsar.ConsumerType.Exclusive)
    with pytest.raises(pulsar.ConsumerBusy):  # from another connection too
        other.subscribe(pulsar_topic, "excl", consumer_type=pulsar.ConsumerType.Exclusive)
    assert issubclass(pulsar.ConsumerBusy, pulsar.PulsarException)

    # the first consumer is untouched by the refusals
    producer = client.create_producer(pulsar_topic)
    producer.send(b"still-mine")
    msg = first.receive(timeout_millis=RECEIVE_MS)
    assert msg.data() == b"still-mine"
    first.acknowledge(msg)
    stats = subscription_stats(pulsar_broker, backend, pulsar_topic, "excl")
    assert len(stats["consumers"]) == 1


# --------------------------------------------------------------------------- Failover


def test_failover_delivers_to_the_active_consumer_and_switches_when_it_closes(client, pulsar_broker, pulsar_topic,
                                                                              backend):
    got = {"a": [], "b": []}

    def listener_for(name):
        def listener(consumer, msg):
            got[name].append(msg.data())
            consumer.acknowledge(msg)
        return listener

    consumers = {
        name: client.subscribe(pulsar_topic, "fo", consumer_type=pulsar.ConsumerType.Failover,
                               consumer_name=name, message_listener=listener_for(name))
        for name in ("a", "b")
    }
    # both are known to the broker, and it has picked the active one
    def active_name():
        stats = subscription_stats(pulsar_broker, backend, pulsar_topic, "fo")
        if stats is None or len(stats["consumers"]) != 2:
            return None
        return stats.get("activeConsumerName")

    active = wait_for(active_name, backend, message="the broker to report 2 consumers and an active one")
    assert active in consumers
    standby = "b" if active == "a" else "a"

    producer = client.create_producer(pulsar_topic)
    first = [b"first-%d" % i for i in range(20)]
    for body in first:
        producer.send(body)
    wait_for(lambda: len(got["a"]) + len(got["b"]) >= len(first), backend,
             message=lambda: "20 messages, got %r" % got)
    assert got[active] == first  # every one, in order, at the active consumer
    assert got[standby] == []

    consumers[active].close()
    second = [b"second-%d" % i for i in range(20)]
    for body in second:
        producer.send(body)
    wait_for(lambda: set(second) <= set(got[standby]), backend,
             message=lambda: "the standby consumer %r to get the messages sent after the active one "
                             "closed; got %r" % (standby, got))
    assert [body for body in got[standby] if body in second] == second  # in order


# --------------------------------------------------------------------------- KeyShared

KEYS = 20
PER_KEY = 50


def test_key_shared_sends_each_key_to_exactly_one_consumer_in_order(client, pulsar_broker, pulsar_topic, backend):
    # per consumer: key -> sequence numbers in arrival order
    got = {"k1": collections.defaultdict(list), "k2": collections.defaultdict(list)}
    count = [0]

    def listener_for(name):
        def listener(consumer, msg):
            got[name][msg.partition_key()].append(int(msg.properties()["seq"]))
            count[0] += 1
            consumer.acknowledge(msg)
        return listener

    for name in got:
        client.subscribe(pulsar_topic, "ks", consumer_type=pulsar.ConsumerType.KeyShared, consumer_name=name,
                         message_listener=listener_for(name))
    wait_for(lambda: len((subscription_stats(pulsar_broker, backend, pulsar_topic, "ks") or {})
                         .get("consumers", ())) == 2, backend, message="2 consumers on the subscription")

    producer = client.create_producer(pulsar_topic, block_if_queue_full=True)
    results = []
    keys = ["key-%02d" % k for k in range(KEYS)]
    for seq in range(PER_KEY):  # interleaved: each key's numbers increase
        for key in keys:
            producer.send_async(b"%s/%d" % (key.encode(), seq), lambda res, mid: results.append(res),
                                partition_key=key, properties={"seq": str(seq)})
    producer.flush()
    wait_for(lambda: len(results) == KEYS * PER_KEY, backend, message="every send's callback")
    assert set(results) == {pulsar.Result.Ok}

    wait_for(lambda: count[0] >= KEYS * PER_KEY, backend,
             message=lambda: "%d messages, got %d" % (KEYS * PER_KEY, count[0]))
    for key in keys:
        owners = [name for name in got if key in got[name]]
        assert len(owners) == 1, "key %s went to %s" % (key, owners)
        assert got[owners[0]][key] == list(range(PER_KEY)), "key %s out of order or duplicated" % key
    assert count[0] == KEYS * PER_KEY
    assert got["k1"] and got["k2"], "one consumer got no key at all: %r" % {n: sorted(g) for n, g in got.items()}


# --------------------------------------------------------------------------- negative acks


def test_negative_acknowledge_redelivers_with_a_redelivery_count(client, pulsar_broker, pulsar_topic, backend):
    consumer = client.subscribe(pulsar_topic, "nack", consumer_type=pulsar.ConsumerType.Shared,
                                negative_ack_redelivery_delay_ms=500)
    producer = client.create_producer(pulsar_topic)
    sent_id = producer.send(b"try-again", properties={"p": "1"})

    msg = consumer.receive(timeout_millis=RECEIVE_MS)
    assert msg.data() == b"try-again"
    assert msg.redelivery_count() == 0
    consumer.negative_acknowledge(msg)

    again = consumer.receive(timeout_millis=RECEIVE_MS)
    assert again.data() == b"try-again"
    assert again.properties() == {"p": "1"}
    assert again.redelivery_count() >= 1
    assert again.message_id().entry_key() == sent_id.entry_key() == msg.message_id().entry_key()
    consumer.acknowledge(again)
    with pytest.raises(pulsar.Timeout):  # acknowledged: it does not come a third time
        consumer.receive(timeout_millis=1500)


# --------------------------------------------------------------------------- cumulative acks


def test_acknowledge_cumulative_on_exclusive_moves_the_subscription_past_the_message(
        client, pulsar_broker, pulsar_topic, backend):
    consumer = client.subscribe(pulsar_topic, "cumul", consumer_type=pulsar.ConsumerType.Exclusive)
    producer = client.create_producer(pulsar_topic)
    for i in range(20):
        producer.send(b"m%d" % i)
    received = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(10)]
    assert [m.data() for m in received] == [b"m%d" % i for i in range(10)]
    consumer.acknowledge_cumulative(received[-1])  # the 10th: it and all before it
    consumer.close()

    wait_for(lambda: (subscription_stats(pulsar_broker, backend, pulsar_topic, "cumul") or {})
             .get("msgBacklog") == 10, backend, message="a backlog of 10 after the cumulative ack")

    again = client.subscribe(pulsar_topic, "cumul", consumer_type=pulsar.ConsumerType.Exclusive)
    rest = [again.receive(timeout_millis=RECEIVE_MS) for _ in range(10)]
    assert [m.data() for m in rest] == [b"m%d" % i for i in range(10, 20)]
    assert all(m.redelivery_count() == 0 for m in rest)


def test_acknowledge_cumulative_on_shared_raises_not_allowed(client, pulsar_broker, pulsar_topic, backend):
    consumer = client.subscribe(pulsar_topic, "shared-cumul", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(pulsar_topic)
    producer.send(b"one")
    msg = consumer.receive(timeout_millis=RECEIVE_MS)
    with pytest.raises(pulsar.CumulativeAcknowledgementNotAllowedError):
        consumer.acknowledge_cumulative(msg)
    with pytest.raises(pulsar.CumulativeAcknowledgementNotAllowedError):
        consumer.acknowledge_cumulative(msg.message_id())
    consumer.acknowledge(msg)  # the individual ack still works
    wait_for(lambda: (subscription_stats(pulsar_broker, backend, pulsar_topic, "shared-cumul") or {})
             .get("msgBacklog") == 0, backend, message="the individual ack to reach the broker")


# --------------------------------------------------------------------------- unsubscribe


def test_unsubscribe_removes_the_subscription_from_the_broker(client, pulsar_broker, pulsar_topic, backend):
    consumer = client.subscribe(pulsar_topic, "gone-soon", consumer_type=pulsar.ConsumerType.Shared)
    keeper = client.subscribe(pulsar_topic, "stays", consumer_type=pulsar.ConsumerType.Shared)
    stats = topic_stats(pulsar_broker, backend, pulsar_topic)
    assert {"gone-soon", "stays"} <= set(stats["subscriptions"])

    consumer.unsubscribe()

    stats = topic_stats(pulsar_broker, backend, pulsar_topic)
    assert "gone-soon" not in stats["subscriptions"]
    assert "stays" in stats["subscriptions"]
    with pytest.raises(pulsar.AlreadyClosed):
        consumer.receive(timeout_millis=100)
    keeper.close()


# --------------------------------------------------------------------------- several topics


def test_subscription_over_a_list_of_two_topics_receives_from_both(client, pulsar_broker, pulsar_topic, backend):
    topics = [pulsar_topic + "_x", pulsar_topic + "_y"]
    consumer = client.subscribe(topics, "both", consumer_type=pulsar.ConsumerType.Shared)
    for topic in topics:
        client.create_producer(topic).send(b"from " + topic.encode())
    seen = {}
    for _ in range(2):
        msg = consumer.receive(timeout_millis=RECEIVE_MS)
        seen[msg.topic_name()] = msg.data()
        consumer.acknowledge(msg)
    assert seen == {full(t): b"from " + t.encode() for t in topics}
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=500)
    for topic in topics:
        stats = topic_stats(pulsar_broker, backend, topic)
        assert "both" in stats["subscriptions"]
        wait_for(lambda topic=topic: subscription_stats(pulsar_broker, backend, topic, "both")["msgBacklog"] == 0,
                 backend, message="acks on %s to reach the broker" % topic)
