# pulsarfast against a real Pulsar 4.0.7 standalone broker (tests/support/pulsar_broker.py, one per run),
# on both backends: round trips, many messages over partitions with Shared consumers, key routing,
# receive timeouts, one shared connection per broker, a full send queue, the errors the official
# module raises, message listeners and partition lookups.
#
# Under the gevent backend the test's own greenlet runs on the hub: the tests wait through the
# client's blocking calls (receive(timeout_millis=...), send, flush), the backend's events and
# tests/support/waiting.py, never with time.sleep.
from __future__ import annotations

import logging
import os
import threading
import time

import pytest

import pulsarfast as pulsar
from msgengine.runtime import get_backend
from pulsarfast.wire.hashing import partition_for_key
from tests.support.pulsar_broker import PulsarAdminError
from tests.support.pulsar_helpers import assert_nothing_more, broker_frozen, entry_of, full, id_tuple, topic_stats
from tests.support.waiting import join_all, run_blocking, stays, wait_for

# The first test asking for the broker pays for its start (about 4-6 s).
pytestmark = pytest.mark.timeout(150)

RECEIVE_MS = 10_000  # a message that was sent must arrive within this
EMPTY_MS = 1_000  # how long "nothing more comes" is watched


def receive_all(consumer, count, timeout_ms=RECEIVE_MS):
    return [consumer.receive(timeout_millis=timeout_ms) for _ in range(count)]


# ----------------------------------------------------------------------------- round trip


@pytest.mark.pythons  # (make test-pythons: on every supported Python)
def test_round_trip_keeps_id_data_properties_key_and_timestamps(make_client, pulsar_topic):
    client = make_client()
    consumer = client.subscribe(pulsar_topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(pulsar_topic, producer_name="round-trip-producer")
    assert producer.topic() == full(pulsar_topic)
    assert producer.producer_name() == "round-trip-producer"
    event_time = 1_700_000_000_123
    before_ms = int(time.time() * 1000)
    sent_id = producer.send(b"hello \x00\xff pulsar", properties={"a": "1", "unicode": "h\u00e9llo \u2603"},
                            partition_key="the-key", event_timestamp=event_time)
    after_ms = int(time.time() * 1000)
    assert isinstance(sent_id, pulsar.MessageId)
    assert sent_id.ledger_id() >= 0 and sent_id.entry_id() >= 0
    assert sent_id.partition() == -1  # not a partitioned topic
    assert producer.last_sequence_id() == 0

    msg = consumer.receive(timeout_millis=RECEIVE_MS)
    got_id = msg.message_id()
    assert entry_of(got_id) == entry_of(sent_id)
    assert got_id == sent_id
    assert msg.data() == b"hello \x00\xff pulsar"
    assert msg.value() == b"hello \x00\xff pulsar"
    assert msg.properties() == {"a": "1", "unicode": "h\u00e9llo \u2603"}
    assert msg.partition_key() == "the-key"
    assert msg.event_timestamp() == event_time
    # the producer stamps the publish time: a wide window around the send
    assert before_ms - 60_000 <= msg.publish_timestamp() <= after_ms + 60_000
    assert msg.topic_name() == full(pulsar_topic)
    assert msg.redelivery_count() == 0
    consumer.acknowledge(msg)
    assert_nothing_more(consumer)


# ----------------------------------------------------------------------------- many messages, Shared


def _run_tasks(backend, fns, timeout):
    """Run each fn on its own task of the backend (greenlet or thread); join them all; re-raise the first error."""
    b = get_backend(backend)
    errors = []

    def guarded(fn):
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    tasks = [b.spawn(guarded, fn) for fn in fns]
    join_all(backend, tasks, timeout=timeout)
    if errors:
        raise errors[0]


def test_10000_messages_on_4_partitions_reach_two_shared_consumers(make_client, pulsar_broker, pulsar_topic,
                                                                     backend):
    total = 10_000
    partitions = 4
    run_blocking(backend, pulsar_broker.create_partitioned_topic, pulsar_topic, partitions)
    client = make_client()
    consumers = [
        client.subscribe(pulsar_topic, "shared-sub", consumer_type=pulsar.ConsumerType.Shared,
                         consumer_name="c%d" % i)
        for i in range(2)
    ]
    producer = client.create_producer(pulsar_topic, block_if_queue_full=True)
    results = []

    def callback_for(index):
        return lambda result, message_id: results.append((index, result, message_id))

    for i in range(total):
        producer.send_async(b"msg-%d" % i, callback_for(i))
    producer.flush()
    assert len(results) == total
    not_ok = [(i, r) for i, r, _ in results if r != pulsar.Result.Ok]
    assert not not_ok, "%d callbacks were not Ok, first: %r" % (len(not_ok), not_ok[:5])
    assert sorted(i for i, _, _ in results) == list(range(total))
    sent_ids = {id_tuple(m) for _, _, m in results}
    assert len(sent_ids) == total
    assert {m.partition() for _, _, m in results} == set(range(partitions))

    expected = {b"msg-%d" % i for i in range(total)}
    received = [[] for _ in consumers]
    deadline = time.monotonic() + 60

    def consume(index):
        consumer = consumers[index]
        mine = received[index]
        while sum(len(r) for r in received) < total:
            try:
                msg = consumer.receive(timeout_millis=200)
            except pulsar.Timeout:
                assert time.monotonic() < deadline, "only %d of %d messages arrived" % (
                    sum(len(r) for r in received), total)
                continue
            mine.append((msg.data(), id_tuple(msg.message_id())))
            consumer.acknowledge(msg)

    _run_tasks(backend, [lambda i=i: consume(i) for i in range(len(consumers))], timeout=90)

    payloads = [data for r in received for data, _ in r]
    got = set(payloads)
    assert not expected - got, "%d messages missing" % len(expected - got)
    assert not got - expected, "unknown messages: %r" % sorted(got - expected)[:5]
    assert len(payloads) == total, "%d duplicates" % (len(payloads) - total)
    assert {mid for r in received for _, mid in r} == sent_ids
    assert all(len(r) > 0 for r in received), [len(r) for r in received]

    stats = run_blocking(backend, pulsar_broker.partitioned_stats, pulsar_topic)
    assert stats["metadata"]["partitions"] == partitions
    per_partition = stats["partitions"]
    assert sorted(per_partition) == [full(pulsar_topic) + "-partition-%d" % i for i in range(partitions)]
    assert sum(p["msgInCounter"] for p in per_partition.values()) == total
    assert stats["msgInCounter"] == total
    # both consumers are on every partition's subscription (the aggregate merges them by name)
    for name, partition_stats in per_partition.items():
        names = sorted(c["consumerName"] for c in partition_stats["subscriptions"]["shared-sub"]["consumers"])
        assert names == ["c0", "c1"], (name, names)

    # and every acknowledgement reached the broker

    def backlog_is_empty():
        s = run_blocking(backend, pulsar_broker.partitioned_stats, pulsar_topic)
        return s["subscriptions"]["shared-sub"]["msgBacklog"] == 0

    wait_for(backlog_is_empty, backend, timeout=20, message="the subscription's backlog to be acknowledged")


# ----------------------------------------------------------------------------- key routing


def test_keyed_messages_go_to_the_boost_hash_partition(make_client, pulsar_broker, pulsar_topic, backend):
    partitions = 5
    run_blocking(backend, pulsar_broker.create_partitioned_topic, pulsar_topic, partitions)
    client = make_client()
    producer = client.create_producer(pulsar_topic)
    keys = ["key-%d" % i for i in range(40)] + ["user:%d" % (i * 7919) for i in range(6)] + [
        "\u00e9t\u00e9", "\u2603 snow", "\U0001f600", "a" * 300]
    wrong = []
    seen = set()
    for key in keys:
        message_id = producer.send(key.encode(), partition_key=key)
        seen.add(message_id.partition())
        if message_id.partition() != partition_for_key(key, partitions):
            wrong.append((key[:20], message_id.partition(), partition_for_key(key, partitions)))
    assert not wrong
    assert len(seen) > 1  # the keys do spread (else the check above proves little)

    unkeyed = {producer.send(b"no key %d" % i).partition() for i in range(2 * partitions)}
    assert len(unkeyed) > 1
    assert unkeyed <= set(range(partitions))


# ----------------------------------------------------------------------------- receive timeout


def test_receive_on_an_empty_topic_raises_timeout(make_client, pulsar_topic):
    client = make_client()
    consumer = client.subscribe(pulsar_topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    with pytest.raises(pulsar.Timeout) as info:
        consumer.receive(timeout_millis=200)
    assert isinstance(info.value, pulsar.PulsarException)
    assert info.value.result == pulsar.Result.Timeout
    # the consumer still works after a timeout
    client.create_producer(pulsar_topic).send(b"after the timeout")
    assert consumer.receive(timeout_millis=RECEIVE_MS).data() == b"after the timeout"


# ----------------------------------------------------------------------------- connection sharing


def _our_tcp_connections_to(port: int) -> set:
    """Inodes of this process's established TCP sockets whose remote port is port (Linux /proc)."""
    ours = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink("/proc/self/fd/" + fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            ours.add(target[len("socket:["):-1])
    found = set()
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            if remote_port == port and fields[3] == "01" and fields[9] in ours:  # 01: ESTABLISHED
                found.add(fields[9])
    return found


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts sockets through Linux /proc")
def test_producers_and_consumer_on_different_topics_share_one_connection(make_client, pulsar_broker,
                                                                         pulsar_topic, backend):
    topics = [pulsar_topic + "_p1", pulsar_topic + "_p2", pulsar_topic + "_c"]
    before = _our_tcp_connections_to(pulsar_broker.port)
    client = make_client()
    p1 = client.create_producer(topics[0])
    p2 = client.create_producer(topics[1])
    consumer = client.subscribe(topics[2], "sub")
    p1.send(b"one")
    p2.send(b"two")

    # this process opened exactly one connection to the broker (lookups included)
    new = _our_tcp_connections_to(pulsar_broker.port) - before
    assert len(new) == 1, new

    # and the broker sees every producer and the consumer on the same client address
    s1, s2, s3 = [topic_stats(pulsar_broker, backend, topic) for topic in topics]
    addresses = [s1["publishers"][0]["address"], s2["publishers"][0]["address"],
                 s3["subscriptions"]["sub"]["consumers"][0]["address"]]
    assert len(s1["publishers"]) == len(s2["publishers"]) == 1
    assert len(set(addresses)) == 1, addresses
    assert s1["publishers"][0]["clientVersion"] == "pulsarfast"
    consumer.close()


# ----------------------------------------------------------------------------- full send queue


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="watches the broker's threads through Linux /proc")
def test_full_send_queue_fails_fast_with_producer_queue_is_full(make_client, private_pulsar_broker, pulsar_topic,
                                                                backend):
    # Deterministic without racing the broker: it is frozen (SIGSTOP) while the queue is full, so
    # the receipt of the first message cannot come before the other sends are tried.
    client = make_client(broker=private_pulsar_broker)
    consumer = client.subscribe(pulsar_topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(pulsar_topic, max_pending_messages=1, block_if_queue_full=False)
    results = []
    with broker_frozen(private_pulsar_broker, backend):
        producer.send_async(b"first", lambda result, mid: results.append(("first", result, mid)))
        producer.send_async(b"second", lambda result, mid: results.append(("second", result, mid)))
        assert results == [("second", pulsar.Result.ProducerQueueIsFull, None)]
        with pytest.raises(pulsar.ProducerQueueIsFull) as info:
            producer.send(b"third")
        assert isinstance(info.value, pulsar.PulsarException)
        assert len(results) == 1  # the first one is still waiting for its receipt
    producer.flush()
    assert [(name, result) for name, result, _ in results] == [("second", pulsar.Result.ProducerQueueIsFull),
                                                               ("first", pulsar.Result.Ok)]
    first_id = results[1][2]
    assert isinstance(first_id, pulsar.MessageId)
    # the queue has room again
    producer.send(b"fourth")
    got = receive_all(consumer, 2)
    assert [m.data() for m in got] == [b"first", b"fourth"]
    assert got[0].message_id() == first_id
    assert_nothing_more(consumer)


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize("url", ["ftp://127.0.0.1:6650", "127.0.0.1:6650", "pulsar://", "pulsar://host:port",
                                 "pulsar://host:0", "pulsar://a:6650,,b:6650", ""])
def test_invalid_service_url_raises_invalid_url(url, backend):
    with pytest.raises(pulsar.InvalidUrl) as info:
        pulsar.Client(url, backend=backend)
    assert isinstance(info.value, pulsar.PulsarException)


@pytest.mark.parametrize("url", [None, 6650, b"pulsar://127.0.0.1:6650"])
def test_service_url_of_another_type_raises_value_error(url, backend):
    with pytest.raises(ValueError):
        pulsar.Client(url, backend=backend)


@pytest.mark.parametrize("topic", ["ftp://public/default/t", "public/t", "persistent://public/default/",
                                   "persistent://pub lic/default/t", "", "   ", "a/b/c/d/e"])
def test_invalid_topic_name_raises_invalid_topic_name(make_client, topic):
    client = make_client()
    with pytest.raises(pulsar.InvalidTopicName):
        client.create_producer(topic)
    with pytest.raises(pulsar.InvalidTopicName):
        client.subscribe(topic, "sub")
    with pytest.raises(pulsar.InvalidTopicName):
        client.get_topic_partitions(topic)


def test_operations_after_close_raise_already_closed(make_client, pulsar_topic):
    client = make_client()
    consumer = client.subscribe(pulsar_topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(pulsar_topic)
    producer.send(b"one")
    msg = consumer.receive(timeout_millis=RECEIVE_MS)

    producer.close()
    with pytest.raises(pulsar.AlreadyClosed):
        producer.send(b"after close")
    results = []
    producer.send_async(b"after close", lambda result, mid: results.append((result, mid)))
    assert results == [(pulsar.Result.AlreadyClosed, None)]

    consumer.close()
    with pytest.raises(pulsar.AlreadyClosed):
        consumer.receive(timeout_millis=200)
    with pytest.raises(pulsar.AlreadyClosed):
        consumer.acknowledge(msg)
    with pytest.raises(pulsar.AlreadyClosed):
        consumer.acknowledge(msg.message_id())
    with pytest.raises(pulsar.AlreadyClosed):
        consumer.negative_acknowledge(msg)

    client.close()
    with pytest.raises(pulsar.AlreadyClosed):
        client.create_producer(pulsar_topic)
    with pytest.raises(pulsar.AlreadyClosed):
        client.subscribe(pulsar_topic, "sub")


def _blocked_receive(backend, consumer, **receive_kwargs):
    """A task of the backend that has started consumer.receive(**receive_kwargs): (task, [what it raised])."""
    outcome = []
    started = get_backend(backend).event()

    def receiver():
        started.set()
        try:
            consumer.receive(**receive_kwargs)
        except BaseException as exc:  # noqa: BLE001 - checked by the test
            outcome.append(exc)

    task = get_backend(backend).spawn(receiver)
    assert started.wait(10)
    return task, outcome


def test_receive_blocked_when_the_consumer_closes_raises_already_closed(make_client, pulsar_topic, backend):
    client = make_client()
    consumer = client.subscribe(pulsar_topic, "sub")
    task, outcome = _blocked_receive(backend, consumer, timeout_millis=30_000)
    consumer.close()
    join_all(backend, [task], timeout=10)
    assert len(outcome) == 1 and isinstance(outcome[0], pulsar.AlreadyClosed), outcome


def test_shutdown_wakes_a_blocked_receive_and_fails_later_calls(make_client, pulsar_topic, backend):
    client = make_client()
    consumer = client.subscribe(pulsar_topic, "sub")
    producer = client.create_producer(pulsar_topic)
    task, outcome = _blocked_receive(backend, consumer)  # no timeout: only the shutdown ends it
    client.shutdown()
    join_all(backend, [task], timeout=10)
    assert len(outcome) == 1 and isinstance(outcome[0], pulsar.AlreadyClosed), outcome
    with pytest.raises(pulsar.AlreadyClosed):
        producer.send(b"after shutdown")
    with pytest.raises(pulsar.AlreadyClosed):
        client.subscribe(pulsar_topic, "other")


def test_second_exclusive_consumer_raises_consumer_busy(make_client, pulsar_topic):
    client = make_client()
    first = client.subscribe(pulsar_topic, "exclusive-sub", consumer_type=pulsar.ConsumerType.Exclusive)
    with pytest.raises(pulsar.ConsumerBusy) as info:
        client.subscribe(pulsar_topic, "exclusive-sub", consumer_type=pulsar.ConsumerType.Exclusive)
    assert isinstance(info.value, pulsar.PulsarException)
    # also from another client (another connection)
    other = make_client()
    with pytest.raises(pulsar.ConsumerBusy):
        other.subscribe(pulsar_topic, "exclusive-sub")
    # the first consumer keeps its subscription
    client.create_producer(pulsar_topic).send(b"still mine")
    assert first.receive(timeout_millis=RECEIVE_MS).data() == b"still mine"


# ----------------------------------------------------------------------------- flush and callbacks


def test_flush_returns_after_the_callbacks_of_the_sends_before_it(make_client, pulsar_topic, backend):
    # As with the official client: when flush() returns, every send made before it has had its
    # callback (a callback that takes its time is not overtaken by the flush).
    client = make_client()
    producer = client.create_producer(pulsar_topic)
    sleep = get_backend(backend).sleep
    outcomes = []

    def slow_callback(result, message_id):
        sleep(0.2)  # (the receipt is in; the flush must still wait for this callback)
        outcomes.append(result)

    for index in range(5):
        producer.send_async(b"m%d" % index, slow_callback)
    producer.flush()
    assert outcomes == [pulsar.Result.Ok] * 5


def test_flush_from_a_send_callback_does_not_wait_for_that_callback(make_client, pulsar_topic, backend):
    client = make_client()
    producer = client.create_producer(pulsar_topic, send_timeout_millis=5000)
    done = get_backend(backend).event()
    outcomes = []

    def callback(result, message_id):
        producer.flush()  # (nothing else is waiting: it returns at once, not at the send timeout)
        outcomes.append(result)
        done.set()

    producer.send_async(b"x", callback)
    assert done.wait(10)
    assert outcomes == [pulsar.Result.Ok]


# ----------------------------------------------------------------------------- terminated topic

SAFETY_NET_MS = 5000  # a regression fails with Timeout after this, never waits out the default 30 s


def test_a_terminated_topic_fails_its_sends_with_topic_terminated_and_the_producer_is_not_recreated(
        make_client, pulsar_broker, pulsar_topic, backend, caplog):
    # The broker closes the producer when the topic is terminated, and answers its re-creation with
    # TopicTerminated: the waiting sends and every later one fail with it (as with the official
    # client), before the send timeout, and the client does not try to re-create the producer again.
    caplog.set_level(logging.WARNING, logger="msgengine.supervisor")
    client = make_client()
    producer = client.create_producer(pulsar_topic, send_timeout_millis=SAFETY_NET_MS)
    producer.send(b"before")
    run_blocking(backend, pulsar_broker.admin, "POST", pulsar_broker.topic_path(pulsar_topic) + "/terminate")
    callbacks = []
    producer.send_async(b"waiting", lambda result, message_id: callbacks.append((result, message_id)))
    with pytest.raises(pulsar.TopicTerminated):
        producer.send(b"after")
    producer.flush()  # (the waiting send's callback may still be running: flush waits for it)
    assert callbacks == [(pulsar.Result.TopicTerminated, None)]
    with pytest.raises(pulsar.TopicTerminated):
        producer.send(b"later")
    assert not producer.is_connected()
    assert producer.stats()["pending"] == 0

    def attempts():
        return [r.getMessage() for r in caplog.records if "cannot connect" in r.getMessage()]

    assert stays(lambda: len(attempts()) <= 1, backend, 1.0), attempts()  # no re-creation loop
    producer.close()


# ----------------------------------------------------------------------------- message listener


def test_message_listener_gets_consumer_and_message_on_runtime_tasks_and_can_acknowledge(make_client, pulsar_topic,
                                                                                       backend):
    count = 20
    client = make_client()
    done = get_backend(backend).event()
    calls = []
    test_thread = threading.get_ident()
    if backend == "gevent":
        import gevent

        test_greenlet = gevent.getcurrent()

    def listener(consumer, msg):
        where = threading.get_ident()
        greenlet = gevent.getcurrent() if backend == "gevent" else None
        consumer.acknowledge(msg)
        calls.append((consumer, msg.data(), where, greenlet))
        if len(calls) == count:
            done.set()

    consumer = client.subscribe(pulsar_topic, "listened", message_listener=listener)
    producer = client.create_producer(pulsar_topic)
    for i in range(count):
        producer.send(b"m%d" % i)
    assert done.wait(RECEIVE_MS / 1000), "the listener was called %d times of %d" % (len(calls), count)

    assert [data for _, data, _, _ in calls] == [b"m%d" % i for i in range(count)]
    assert all(c is consumer for c, _, _, _ in calls)
    if backend == "gevent":
        # on greenlets of the hub's thread, not on the test's greenlet
        assert all(where == test_thread for _, _, where, _ in calls)
        assert all(g is not test_greenlet for _, _, _, g in calls)
    else:
        assert all(where != test_thread for _, _, where, _ in calls)
    with pytest.raises(pulsar.InvalidConfiguration):
        consumer.receive(timeout_millis=100)  # a consumer with a listener is read by the listener only

    # the acknowledgements sent from inside the listener reached the broker: nothing comes again
    consumer.close()
    again = client.subscribe(pulsar_topic, "listened", initial_position=pulsar.InitialPosition.Earliest)
    assert_nothing_more(again)


# ----------------------------------------------------------------------------- partitions


def test_get_topic_partitions_of_partitioned_and_plain_topics(make_client, pulsar_broker, pulsar_topic, backend):
    partitioned = pulsar_topic + "_p"
    plain = pulsar_topic + "_n"
    run_blocking(backend, pulsar_broker.create_partitioned_topic, partitioned, 3)
    client = make_client()
    client.create_producer(plain).close()  # the plain topic exists
    expected = [full(partitioned) + "-partition-%d" % i for i in range(3)]
    assert client.get_topic_partitions(partitioned) == expected
    assert client.get_topic_partitions(full(partitioned)) == expected
    assert client.get_topic_partitions("public/default/" + partitioned) == expected
    assert client.get_topic_partitions(plain) == [full(plain)]
    assert client.get_topic_partitions(full(plain)) == [full(plain)]
    # a producer on the partitioned topic has one broker-side producer per partition
    producer = client.create_producer(partitioned)
    stats = run_blocking(backend, pulsar_broker.partitioned_stats, partitioned)
    assert all(len(p["publishers"]) == 1 for p in stats["partitions"].values())
    assert producer.topic() == full(partitioned)


# ----------------------------------------------------------------------------- more of the consumer


def test_negative_acknowledge_redelivers_with_a_redelivery_count(make_client, pulsar_topic):
    client = make_client()
    consumer = client.subscribe(pulsar_topic, "sub", consumer_type=pulsar.ConsumerType.Shared,
                                negative_ack_redelivery_delay_ms=100)
    producer = client.create_producer(pulsar_topic)
    sent_id = producer.send(b"again, please")
    first = consumer.receive(timeout_millis=RECEIVE_MS)
    assert first.redelivery_count() == 0
    consumer.negative_acknowledge(first)
    second = consumer.receive(timeout_millis=RECEIVE_MS)
    assert second.data() == b"again, please"
    assert second.message_id() == sent_id
    assert second.redelivery_count() == 1
    consumer.acknowledge(second)
    assert_nothing_more(consumer)


def test_small_receiver_queue_still_delivers_everything_in_order(make_client, pulsar_topic):
    count = 200
    client = make_client()
    consumer = client.subscribe(pulsar_topic, "sub", receiver_queue_size=3)
    producer = client.create_producer(pulsar_topic, block_if_queue_full=True)
    results = []
    for i in range(count):
        producer.send_async(b"%d" % i, lambda result, mid: results.append(result))
    producer.flush()
    assert results == [pulsar.Result.Ok] * count
    got = [int(m.data()) for m in receive_all(consumer, count)]
    assert got == list(range(count))
    assert_nothing_more(consumer)


def test_acknowledge_cumulative_acknowledges_every_earlier_message(make_client, pulsar_topic):
    client = make_client()
    consumer = client.subscribe(pulsar_topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(pulsar_topic)
    for i in range(10):
        producer.send(b"%d" % i)
    got = receive_all(consumer, 10)
    consumer.acknowledge_cumulative(got[6])  # 0..6
    consumer.close()
    again = client.subscribe(pulsar_topic, "sub")
    assert [m.data() for m in receive_all(again, 3)] == [b"7", b"8", b"9"]
    assert_nothing_more(again)
    shared = client.subscribe(pulsar_topic, "shared-sub", consumer_type=pulsar.ConsumerType.Shared,
                              initial_position=pulsar.InitialPosition.Earliest)
    msg = shared.receive(timeout_millis=RECEIVE_MS)
    with pytest.raises(pulsar.CumulativeAcknowledgementNotAllowedError):
        shared.acknowledge_cumulative(msg)


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="watches the broker's threads through Linux /proc")
def test_send_timeout_fails_the_sends_a_frozen_broker_does_not_answer(make_client, private_pulsar_broker, pulsar_topic,
                                                                      backend):
    client = make_client(broker=private_pulsar_broker)
    consumer = client.subscribe(pulsar_topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(pulsar_topic, send_timeout_millis=300)
    results = []
    with broker_frozen(private_pulsar_broker, backend):
        producer.send_async(b"a", lambda result, mid: results.append((result, mid)))
        with pytest.raises(pulsar.Timeout):
            producer.send(b"b")
        wait_for(lambda: results, backend, timeout=10, message="the send_async callback")
        assert results == [(pulsar.Result.Timeout, None)]
    # the producer works again once the broker answers
    after = producer.send(b"c")
    assert isinstance(after, pulsar.MessageId)
    assert producer.last_sequence_id() == 2
    # (the timed-out messages may still be stored: a send timeout does not take back bytes already
    # written, with the official client either; what is stored keeps the order)
    got = []
    while True:
        try:
            got.append(consumer.receive(timeout_millis=EMPTY_MS).data())
        except pulsar.Timeout:
            break
    assert got[-1:] == [b"c"]
    assert got in ([b"c"], [b"a", b"c"], [b"b", b"c"], [b"a", b"b", b"c"])


def _dispatched(broker, topic, subscription):
    """Messages the broker dispatched to the subscription's consumers (of the topic's current load)."""
    try:
        subscriptions = broker.topic_stats(topic)["subscriptions"]
    except (PulsarAdminError, OSError):  # the topic is being loaded again
        return 0
    return sum(c["msgOutCounter"] for c in subscriptions.get(subscription, {}).get("consumers", []))


def test_exclusive_consumer_gets_each_message_once_in_order_across_a_topic_unload(make_client, pulsar_broker,
                                                                                  pulsar_topic, backend):
    # The official client (3.13) passes this: on reconnecting it drops the messages it had
    # prefetched and not handed out, and the broker sends them again from the subscription's
    # position. pulsarfast keeps them, so each is received twice, and the order breaks.
    client = make_client()
    consumer = client.subscribe(pulsar_topic, "sub")  # Exclusive
    producer = client.create_producer(pulsar_topic)
    for i in range(50):
        producer.send(b"%d" % i)
    # all 50 were dispatched to the consumer (they wait in its receive queue, unread)
    wait_for(lambda: run_blocking(backend, _dispatched, pulsar_broker, pulsar_topic, "sub") >= 50, backend,
             timeout=20, message="the broker to dispatch the first 50 messages")
    run_blocking(backend, pulsar_broker.unload_topic, pulsar_topic)  # producer and consumer reconnect
    for i in range(50, 100):
        producer.send(b"%d" % i)
    # after re-subscribing, the consumer got what was not acknowledged (0..49 again) and 50..99
    wait_for(lambda: run_blocking(backend, _dispatched, pulsar_broker, pulsar_topic, "sub") >= 100, backend,
             timeout=20, message="the broker to dispatch 100 messages after the unload")
    got = []
    while True:
        try:
            msg = consumer.receive(timeout_millis=EMPTY_MS)
        except pulsar.Timeout:
            break
        got.append(int(msg.data()))
        consumer.acknowledge(msg)
    assert got == list(range(100)), "%d received, %d duplicates; order: %s" % (
        len(got), len(got) - len(set(got)), got[40:60])


def test_a_schema_or_key_reader_of_the_wrong_type_is_refused_as_by_the_official_client(make_client, pulsar_topic):
    """What is not a schema (None too) or a key reader raises the official ValueError, never a
    silent no-op (end-to-end encryption: tests/pulsar/test_encryption.py)."""
    client = make_client()
    for wrong in (object(), None):
        with pytest.raises(ValueError, match="Argument schema is expected to be of type 'Schema'"):
            client.subscribe(pulsar_topic, "sub", schema=wrong)
    with pytest.raises(ValueError, match="crypto_key_reader"):
        client.subscribe(pulsar_topic, "sub", crypto_key_reader=object())
    consumer = client.subscribe(pulsar_topic, "sub", schema=pulsar.BytesSchema())  # the default schema is fine
    consumer.close()


class _FlakyTarget:
    """A producer or consumer stand-in whose creation the broker refuses `refusals` times."""

    def __init__(self, refusals, error):
        self.refusals = refusals
        self.error = error
        self.attempts = 0

    def establish(self):
        self.attempts += 1
        if self.attempts <= self.refusals:
            raise self.error("Not enough non-faulty bookies available")
        return "link"


@pytest.mark.parametrize("error", [pulsar.BrokerPersistenceError, pulsar.ServiceUnitNotReady])
def test_creation_is_tried_again_while_the_broker_is_not_ready_yet(backend, error):
    """After a broker restart its storage may refuse for a moment: create_producer/subscribe try
    again within the operation timeout, as the official clients do (no connection is made here)."""
    client = pulsar.Client("pulsar://127.0.0.1:1", operation_timeout_seconds=10, backend=backend)
    try:
        target = _FlakyTarget(2, error)
        assert client.establish_retrying(target) == "link"
        assert target.attempts == 3
        never = _FlakyTarget(10 ** 6, error)
        short = pulsar.Client("pulsar://127.0.0.1:1", operation_timeout_seconds=1, backend=backend)
        with pytest.raises(error):
            short.establish_retrying(never)  # the operation timeout bounds the retries
        assert 1 < never.attempts < 50
        short.close()
        wrong = _FlakyTarget(1, pulsar.AuthenticationError)
        with pytest.raises(pulsar.AuthenticationError):
            client.establish_retrying(wrong)  # any other refusal reaches the caller at once
        assert wrong.attempts == 1
    finally:
        client.close()
