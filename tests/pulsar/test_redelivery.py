# pulsarfast's delivery controls against a real Pulsar 4.0.7 broker, on both backends:
# unacked_messages_timeout_ms (a message handed out and not acknowledged comes again, an
# acknowledged one does not, a batch comes again whole without its queued copy delivered twice,
# an Exclusive subscription rewinds once) and dead_letter_policy (a message redelivered
# max_redeliver_count times moves to the dead-letter topic, from a negative acknowledgement or the
# timeout, a batch whole, with initial_subscription_name; a failed dead-letter send loses nothing).
# Bad values raise clearly.
#
# Timing: the smallest timeout the API allows (1000 ms; the tick is 1000 ms, so a message comes
# again 1-2 s after it was handed out). Waits are for what the broker reports (its stats) or for a
# message to arrive, each with a timeout; "nothing more" is checked only once something sent later
# or redelivered with it proves the redelivery it would have come with has happened.
from __future__ import annotations

import functools
import logging
import time

import pytest

import pulsarfast as pulsar
from pulsarfast.consuming.deadletter import ORIGIN_MESSAGE_ID, REAL_TOPIC
from pulsarfast.consuming.redelivery import MIN_UNACKED_TIMEOUT_MS
from tests.support.pulsar_helpers import assert_nothing_more, full, produce, subscription_stats, topic_stats
from tests.support.waiting import run_blocking, wait_for

pytestmark = pytest.mark.timeout(150)

TIMEOUT_MS = MIN_UNACKED_TIMEOUT_MS
RECEIVE_MS = 15_000  # a message that was sent (or is due again) must arrive within this
NACK_DELAY_MS = 50

wait_for = functools.partial(wait_for, timeout=20)


def dispatched(pulsar_broker, backend, topic, subscription):
    """Messages the broker has sent to the subscription's consumers (redeliveries included)."""
    consumers = subscription_stats(pulsar_broker, backend, topic, subscription)["consumers"]
    return sum(c["msgOutCounter"] for c in consumers)


def wait_until_dispatched(pulsar_broker, backend, topic, subscription, count):
    wait_for(lambda: dispatched(pulsar_broker, backend, topic, subscription) >= count, backend,
             message=lambda: "the broker to have sent %d messages (it sent %d)" % (
                 count, dispatched(pulsar_broker, backend, topic, subscription)))


def wait_until_all_acknowledged(pulsar_broker, backend, topic, subscription):
    def done():
        stats = subscription_stats(pulsar_broker, backend, topic, subscription)
        return stats["msgBacklog"] == 0 and stats["unackedMessages"] == 0
    wait_for(done, backend, message=lambda: "the subscription's backlog to be acknowledged: %r" % (
        {k: v for k, v in subscription_stats(pulsar_broker, backend, topic, subscription).items()
         if k in ("msgBacklog", "unackedMessages")},))


def send_one_batch(client, topic, payloads):
    """payloads in one batch (one entry): their ids."""
    ids = produce(client, topic, payloads, batching_enabled=True, batching_max_messages=len(payloads),
                  batching_max_publish_delay_ms=60_000)
    assert len({message_id.entry_key() for message_id in ids}) == 1, "not one batch: %r" % ids
    return ids


# ----------------------------------------------------------------------------- unacked_messages_timeout_ms


def test_an_unacknowledged_message_comes_again_after_the_timeout_and_an_acknowledged_one_does_not(
        client, pulsar_topic):
    consumer = client.subscribe(pulsar_topic, "sub", consumer_type=pulsar.ConsumerType.Shared,
                                unacked_messages_timeout_ms=TIMEOUT_MS)
    producer = client.create_producer(pulsar_topic)
    acked_id = producer.send(b"acked")
    kept_id = producer.send(b"kept", properties={"p": "1"})

    acked = consumer.receive(timeout_millis=RECEIVE_MS)
    assert acked.data() == b"acked"
    consumer.acknowledge(acked)
    kept = consumer.receive(timeout_millis=RECEIVE_MS)
    handed_out = time.monotonic()
    assert (kept.data(), kept.redelivery_count()) == (b"kept", 0)

    # the first message after the timeout is the unacknowledged one: had the acknowledged one (handed
    # out before it) been asked for again, it would have come first (the broker redelivers in order)
    again = consumer.receive(timeout_millis=RECEIVE_MS)
    assert time.monotonic() - handed_out >= TIMEOUT_MS / 1000 * 0.95  # (never before the timeout)
    assert again.data() == b"kept"
    assert again.properties() == {"p": "1"}
    assert again.redelivery_count() == 1
    assert again.message_id() == kept_id != acked_id
    consumer.acknowledge(again)
    assert_nothing_more(consumer)


def test_a_message_given_to_the_listener_and_not_acknowledged_comes_again(client, pulsar_topic, backend):
    deliveries = []

    def listener(consumer, message):
        deliveries.append((message.data(), message.redelivery_count()))
        if message.redelivery_count() > 0:
            consumer.acknowledge(message)

    client.subscribe(pulsar_topic, "sub", consumer_type=pulsar.ConsumerType.Shared,
                     unacked_messages_timeout_ms=TIMEOUT_MS, message_listener=listener)
    client.create_producer(pulsar_topic).send(b"to the listener")
    wait_for(lambda: len(deliveries) >= 2, backend, message=lambda: "a second delivery: %r" % deliveries)
    assert deliveries[:2] == [(b"to the listener", 0), (b"to the listener", 1)]


def test_a_batch_message_not_acknowledged_comes_again_with_its_batch(client, pulsar_topic):
    consumer = client.subscribe(pulsar_topic, "sub", consumer_type=pulsar.ConsumerType.Shared,
                                unacked_messages_timeout_ms=TIMEOUT_MS)
    ids = send_one_batch(client, pulsar_topic, [b"b0", b"b1", b"b2"])
    first = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(3)]
    assert [m.data() for m in first] == [b"b0", b"b1", b"b2"]
    consumer.acknowledge(first[0])
    consumer.acknowledge(first[2])  # b1 is not acknowledged: the entry is not, and comes again whole

    again = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(3)]
    assert [(m.data(), m.redelivery_count()) for m in again] == [(b"b0", 1), (b"b1", 1), (b"b2", 1)]
    assert [m.message_id() for m in again] == ids
    for message in again:
        consumer.acknowledge(message)
    assert_nothing_more(consumer)


def test_queued_messages_of_a_batch_asked_for_again_are_not_delivered_twice(client, pulsar_broker, pulsar_topic,
                                                                            backend):
    consumer = client.subscribe(pulsar_topic, "sub", consumer_type=pulsar.ConsumerType.Shared,
                                unacked_messages_timeout_ms=TIMEOUT_MS)
    send_one_batch(client, pulsar_topic, [b"q0", b"q1", b"q2"])
    first = consumer.receive(timeout_millis=RECEIVE_MS)
    assert (first.data(), first.redelivery_count()) == (b"q0", 0)
    # q1 and q2 wait unread in the receive queue while the timeout asks for the entry again, and the
    # broker sends the whole batch a second time
    wait_until_dispatched(pulsar_broker, backend, pulsar_topic, "sub", 6)
    got = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(3)]
    assert [(m.data(), m.redelivery_count()) for m in got] == [(b"q0", 1), (b"q1", 1), (b"q2", 1)]
    for message in got:
        consumer.acknowledge(message)
    assert_nothing_more(consumer)


@pytest.mark.parametrize("trigger", ["unacked timeout", "negative ack"])
def test_an_exclusive_subscription_delivers_everything_again_once_and_in_order(client, pulsar_broker, pulsar_topic,
                                                                               backend, trigger):
    # The broker redelivers by rewinding an Exclusive (or Failover) subscription to its first message
    # not acknowledged, and counts no redeliveries there; what waited in the receive queue is dropped.
    consumer = client.subscribe(pulsar_topic, "sub", consumer_type=pulsar.ConsumerType.Exclusive,
                                unacked_messages_timeout_ms=TIMEOUT_MS if trigger == "unacked timeout" else None,
                                negative_ack_redelivery_delay_ms=NACK_DELAY_MS)
    producer = client.create_producer(pulsar_topic)
    for i in range(3):
        producer.send(b"e%d" % i)
    first = consumer.receive(timeout_millis=RECEIVE_MS)
    assert first.data() == b"e0"  # (e1, e2 wait in the queue)
    if trigger == "negative ack":
        consumer.negative_acknowledge(first)
    wait_until_dispatched(pulsar_broker, backend, pulsar_topic, "sub", 6)
    got = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(3)]
    assert [m.data() for m in got] == [b"e0", b"e1", b"e2"]
    consumer.acknowledge_cumulative(got[-1])
    assert_nothing_more(consumer)


def test_redeliver_unacknowledged_messages_does_not_deliver_the_queued_copies_too(client, pulsar_broker,
                                                                                   pulsar_topic, backend):
    consumer = client.subscribe(pulsar_topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(pulsar_topic)
    for i in range(3):
        producer.send(b"r%d" % i)
    assert consumer.receive(timeout_millis=RECEIVE_MS).data() == b"r0"  # (r1, r2 wait in the queue)
    wait_until_dispatched(pulsar_broker, backend, pulsar_topic, "sub", 3)
    consumer.redeliver_unacknowledged_messages()
    wait_until_dispatched(pulsar_broker, backend, pulsar_topic, "sub", 6)
    got = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(3)]
    assert [(m.data(), m.redelivery_count()) for m in got] == [(b"r0", 1), (b"r1", 1), (b"r2", 1)]
    for message in got:
        consumer.acknowledge(message)
    assert_nothing_more(consumer)


# ----------------------------------------------------------------------------- dead_letter_policy


def test_a_message_negatively_acknowledged_past_max_redeliver_count_moves_to_the_dead_letter_topic(
        client, pulsar_broker, pulsar_topic, backend):
    consumer = client.subscribe(
        pulsar_topic, "sub", consumer_type=pulsar.ConsumerType.Shared, negative_ack_redelivery_delay_ms=NACK_DELAY_MS,
        dead_letter_policy=pulsar.ConsumerDeadLetterPolicy(max_redeliver_count=2, initial_subscription_name="dlq-sub"))
    sent_id = client.create_producer(pulsar_topic).send(b"poison", properties={"k": "v"}, partition_key="key-1")
    for count in range(3):  # delivered, then redelivered twice (max_redeliver_count)
        msg = consumer.receive(timeout_millis=RECEIVE_MS)
        assert (msg.data(), msg.redelivery_count()) == (b"poison", count)
        consumer.negative_acknowledge(msg)

    # the default dead-letter topic, whose subscription the broker created with the producer (before
    # the message went there: a consumer arriving now on it still gets the message)
    dead_letter_topic = full(pulsar_topic) + "-sub-DLQ"
    dead_consumer = client.subscribe(dead_letter_topic, "dlq-sub")
    dead = dead_consumer.receive(timeout_millis=RECEIVE_MS)
    assert dead.data() == b"poison"
    assert dead.properties() == {"k": "v", REAL_TOPIC: full(pulsar_topic), ORIGIN_MESSAGE_ID: str(sent_id)}
    assert dead.properties()[ORIGIN_MESSAGE_ID] == "(%d,%d,-1,-1)" % sent_id.entry_key()
    assert dead.partition_key() == "key-1"
    dead_consumer.acknowledge(dead)
    assert "dlq-sub" in topic_stats(pulsar_broker, backend, pulsar_topic + "-sub-DLQ")["subscriptions"]

    # and acknowledged on the original subscription: never delivered there again
    wait_until_all_acknowledged(pulsar_broker, backend, pulsar_topic, "sub")
    assert_nothing_more(consumer)


def test_the_unacked_timeout_moves_a_message_to_the_dead_letter_topic(client, pulsar_broker, pulsar_topic, backend):
    dead_letter_topic = pulsar_topic + "-dead"
    dead_consumer = client.subscribe(dead_letter_topic, "watch")  # (before anything goes there)
    consumer = client.subscribe(
        pulsar_topic, "sub", consumer_type=pulsar.ConsumerType.KeyShared, unacked_messages_timeout_ms=TIMEOUT_MS,
        dead_letter_policy=pulsar.ConsumerDeadLetterPolicy(1, dead_letter_topic=dead_letter_topic))
    sent_id = client.create_producer(pulsar_topic).send(b"slow", partition_key="k")
    assert consumer.receive(timeout_millis=RECEIVE_MS).redelivery_count() == 0  # not acknowledged
    assert consumer.receive(timeout_millis=RECEIVE_MS).redelivery_count() == 1  # nor this time

    dead = dead_consumer.receive(timeout_millis=RECEIVE_MS)
    assert dead.data() == b"slow"
    assert dead.properties() == {REAL_TOPIC: full(pulsar_topic), ORIGIN_MESSAGE_ID: str(sent_id)}
    dead_consumer.acknowledge(dead)
    wait_until_all_acknowledged(pulsar_broker, backend, pulsar_topic, "sub")
    assert_nothing_more(consumer)


def test_a_batch_moves_to_the_dead_letter_topic_whole(client, pulsar_broker, pulsar_topic, backend):
    dead_letter_topic = pulsar_topic + "-dead"
    dead_consumer = client.subscribe(dead_letter_topic, "watch")
    consumer = client.subscribe(pulsar_topic, "sub", consumer_type=pulsar.ConsumerType.Shared,
                                negative_ack_redelivery_delay_ms=NACK_DELAY_MS,
                                dead_letter_policy=pulsar.ConsumerDeadLetterPolicy(1, dead_letter_topic))
    ids = send_one_batch(client, pulsar_topic, [b"d0", b"d1", b"d2"])
    for count in range(2):
        got = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(3)]
        assert [(m.data(), m.redelivery_count()) for m in got] == [(b"d0", count), (b"d1", count), (b"d2", count)]
        consumer.acknowledge(got[0])
        consumer.negative_acknowledge(got[1])  # (one message of the batch: the entry comes again whole)
        consumer.acknowledge(got[2])

    dead = [dead_consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(3)]
    assert [m.data() for m in dead] == [b"d0", b"d1", b"d2"]
    assert [m.properties()[ORIGIN_MESSAGE_ID] for m in dead] == [str(message_id) for message_id in ids]
    for message in dead:
        dead_consumer.acknowledge(message)
    wait_until_all_acknowledged(pulsar_broker, backend, pulsar_topic, "sub")
    assert_nothing_more(consumer)


def test_each_partition_has_its_own_default_dead_letter_topic(client, pulsar_broker, pulsar_topic, backend):
    # the official C++ library's rule: <the partition consumed>-<subscription>-DLQ
    run_blocking(backend, pulsar_broker.create_partitioned_topic, pulsar_topic, 2)
    consumer = client.subscribe(pulsar_topic, "sub", consumer_type=pulsar.ConsumerType.Shared,
                                negative_ack_redelivery_delay_ms=NACK_DELAY_MS,
                                dead_letter_policy=pulsar.ConsumerDeadLetterPolicy(1))
    client.create_producer(pulsar_topic).send(b"partitioned", partition_key="some key")
    for count in range(2):
        msg = consumer.receive(timeout_millis=RECEIVE_MS)
        assert msg.redelivery_count() == count
        consumer.negative_acknowledge(msg)
    partition = msg.topic_name()
    assert partition.startswith(full(pulsar_topic) + "-partition-")
    dead_consumer = client.subscribe(partition + "-sub-DLQ", "watch", initial_position=pulsar.InitialPosition.Earliest)
    dead = dead_consumer.receive(timeout_millis=RECEIVE_MS)
    assert dead.data() == b"partitioned"
    assert dead.properties()[REAL_TOPIC] == partition
    assert dead.partition_key() == "some key"
    dead_consumer.acknowledge(dead)
    assert_nothing_more(consumer)


def test_a_message_the_dead_letter_topic_refuses_stays_on_the_subscription(client, pulsar_broker, pulsar_topic,
                                                                           backend):
    consumer = client.subscribe(
        pulsar_topic, "sub", consumer_type=pulsar.ConsumerType.Shared, negative_ack_redelivery_delay_ms=NACK_DELAY_MS,
        dead_letter_policy=pulsar.ConsumerDeadLetterPolicy(1, dead_letter_topic="persistent://no-such/tenant/dlq"))
    sent_id = client.create_producer(pulsar_topic).send(b"keep me")
    for count in range(2):
        msg = consumer.receive(timeout_millis=RECEIVE_MS)
        assert msg.redelivery_count() == count
        consumer.negative_acknowledge(msg)
    # the dead-letter producer cannot be made: the entry is asked for again (and again) instead of acknowledged
    wait_until_dispatched(pulsar_broker, backend, pulsar_topic, "sub", 3)
    consumer.close()

    other = client.subscribe(pulsar_topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
    msg = other.receive(timeout_millis=RECEIVE_MS)  # (the broker's redelivery count starts again at 0 here)
    assert (msg.data(), msg.message_id()) == (b"keep me", sent_id)
    other.acknowledge(msg)


# ----------------------------------------------------------------------------- bad values


@pytest.mark.parametrize("value", [1, 500, 999, -1])
def test_an_unacked_timeout_under_the_minimum_is_refused(client, pulsar_topic, value):
    with pytest.raises(ValueError, match="unacked_messages_timeout_ms must be at least 1000 ms"):
        client.subscribe(pulsar_topic, "sub", unacked_messages_timeout_ms=value)


@pytest.mark.parametrize("value", ["1000", 1500.0, True])
def test_an_unacked_timeout_that_is_not_an_int_is_refused(client, pulsar_topic, value):
    with pytest.raises(ValueError, match="unacked_messages_timeout_ms is expected to be of type 'int'"):
        client.subscribe(pulsar_topic, "sub", unacked_messages_timeout_ms=value)


@pytest.mark.parametrize("value", [0, None, TIMEOUT_MS])
def test_an_unacked_timeout_of_zero_or_none_turns_it_off(client, pulsar_topic, value):
    consumer = client.subscribe(pulsar_topic, "sub", unacked_messages_timeout_ms=value)
    assert (consumer.redelivery is None) == (not value)
    consumer.close()


@pytest.mark.parametrize("count", [0, -1, None, "3", 2.0])
def test_a_dead_letter_policy_needs_a_positive_max_redeliver_count(count):
    with pytest.raises(ValueError, match="max_redeliver_count must be greater than 0"):
        pulsar.ConsumerDeadLetterPolicy(count)


def test_a_dead_letter_policy_keeps_what_it_was_given():
    policy = pulsar.ConsumerDeadLetterPolicy(3)
    assert (policy.max_redeliver_count, policy.dead_letter_topic, policy.initial_subscription_name) == (3, "", "")
    policy = pulsar.ConsumerDeadLetterPolicy(5, "dlq", "init")
    assert (policy.max_redeliver_count, policy.dead_letter_topic, policy.initial_subscription_name) == (5, "dlq", "init")
    with pytest.raises(ValueError, match="dead_letter_topic"):
        pulsar.ConsumerDeadLetterPolicy(5, dead_letter_topic=7)


@pytest.mark.parametrize("consumer_type", [pulsar.ConsumerType.Exclusive, pulsar.ConsumerType.Failover])
def test_a_dead_letter_policy_where_the_broker_counts_no_redeliveries_is_accepted_with_a_warning(
        client, pulsar_topic, consumer_type, caplog):
    """The official client accepts it; a program written for it must subscribe, and be told it cannot apply."""
    with caplog.at_level(logging.WARNING, logger="pulsarfast.consuming.deadletter"):
        consumer = client.subscribe(pulsar_topic, "sub", consumer_type=consumer_type,
                                    dead_letter_policy=pulsar.ConsumerDeadLetterPolicy(3))
    assert any("no message will ever reach the dead-letter topic" in r.getMessage() for r in caplog.records)
    producer = client.create_producer(pulsar_topic)
    producer.send(b"still-consumed")
    message = consumer.receive(10_000)
    assert message.data() == b"still-consumed"
    consumer.acknowledge(message)
    producer.close()
    consumer.close()


def test_a_dead_letter_policy_that_is_not_one_is_refused(client, pulsar_topic):
    with pytest.raises(ValueError, match="dead_letter_policy is expected to be a ConsumerDeadLetterPolicy"):
        client.subscribe(pulsar_topic, "sub", consumer_type=pulsar.ConsumerType.Shared, dead_letter_policy=3)
