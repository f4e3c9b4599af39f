"""Producer batching (batching_enabled=True) against a real broker, on both
backends: per-message ids within a batch, the limits that close a batch,
flush() sending the open batch, messages that are never batched, the official
client reading our batches, and batches re-sent after a topic unload."""
from __future__ import annotations

import pytest

import pulsarfast as pulsar
from tests.support.pulsar_helpers import entry_of, needs_official, official_client, send_outcomes
from tests.support.waiting import run_blocking

pytestmark = pytest.mark.timeout(150)

RECEIVE_MS = 10_000
EMPTY_MS = 500


def batch_indexes_by_entry(outcomes: list) -> dict:
    """Every send Ok: each entry's batch indexes, in send order."""
    by_entry: dict = {}
    for result, message_id in outcomes:
        assert result == pulsar.Result.Ok
        by_entry.setdefault(entry_of(message_id), []).append(message_id.batch_index())
    return by_entry


def test_batched_messages_get_their_own_ids_and_arrive_with_them(client, pulsar_topic):
    consumer = client.subscribe(pulsar_topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    # (a long publish delay: only the count and flush() close a batch, however loaded the machine)
    producer = client.create_producer(pulsar_topic, batching_enabled=True, batching_max_messages=100,
                                      batching_max_publish_delay_ms=60_000, block_if_queue_full=True)
    count = 1000
    bodies = [b"m-%d" % i for i in range(count)]
    outcomes = []
    for start in range(0, count, 250):  # properties and keys per message, in batches
        chunk = bodies[start:start + 250]
        outcomes += send_outcomes(producer, chunk, properties={"p": "v"}, partition_key="k", event_timestamp=1234)
    assert all(o is not None and o[0] == pulsar.Result.Ok for o in outcomes)
    ids = [o[1] for o in outcomes]
    assert len(set(map(str, ids))) == count
    assert all(i.batch_index() >= 0 for i in ids)
    # (each chunk of 250: two full batches, and the 50 left that its flush() sends)
    assert len({entry_of(i) for i in ids}) == 3 * (count // 250)

    received = {}
    for _ in range(count):
        msg = consumer.receive(timeout_millis=RECEIVE_MS)
        received[msg.data()] = msg
        consumer.acknowledge(msg)
    for body, message_id in zip(bodies, ids):
        msg = received[body]
        assert msg.message_id() == message_id
        assert (msg.properties(), msg.partition_key(), msg.event_timestamp()) == ({"p": "v"}, "k", 1234)
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=EMPTY_MS)


def test_a_batch_closes_at_its_message_limit(client, pulsar_topic):
    producer = client.create_producer(pulsar_topic, batching_enabled=True, batching_max_messages=10,
                                      batching_max_publish_delay_ms=60_000)
    by_entry = batch_indexes_by_entry(send_outcomes(producer, [b"%d" % i for i in range(25)]))
    assert sorted(len(v) for v in by_entry.values()) == [5, 10, 10]
    assert all(sorted(v) == list(range(len(v))) for v in by_entry.values())


def test_a_batch_holds_at_most_half_of_the_pending_limit(client, pulsar_topic):
    # (so that one batch fills while the one before waits for its receipt)
    producer = client.create_producer(pulsar_topic, batching_enabled=True, batching_max_messages=1000,
                                      max_pending_messages=20, block_if_queue_full=True,
                                      batching_max_publish_delay_ms=60_000)
    by_entry = batch_indexes_by_entry(send_outcomes(producer, [b"%d" % i for i in range(25)]))
    assert sorted(len(v) for v in by_entry.values()) == [5, 10, 10]


def test_fire_and_forget_sends_land_and_flush_waits_for_them(client, pulsar_broker, pulsar_topic):
    # send_async(body, None), batched: no callback, no id made; flush() returns once all are stored
    consumer = client.subscribe(pulsar_topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(pulsar_topic, batching_enabled=True, max_pending_messages=100,
                                      block_if_queue_full=True, batching_max_publish_delay_ms=60_000)
    bodies = [b"f-%d" % i for i in range(1000)]
    for body in bodies:
        producer.send_async(body, None)
    producer.flush()
    assert pulsar_broker.topic_stats(pulsar_topic)["msgInCounter"] == len(bodies)
    got = []
    for _ in bodies:
        msg = consumer.receive(timeout_millis=RECEIVE_MS)
        got.append(msg.data())
        consumer.acknowledge(msg)
    assert got == bodies


def test_a_batch_closes_at_its_size_limit(client, pulsar_topic):
    producer = client.create_producer(pulsar_topic, batching_enabled=True, batching_max_messages=1000,
                                      batching_max_allowed_size_in_bytes=5000, batching_max_publish_delay_ms=60_000)
    outcomes = send_outcomes(producer, [b"x" * 1000 for _ in range(12)])
    sizes: dict = {}
    for result, message_id in outcomes:
        assert result == pulsar.Result.Ok
        sizes[entry_of(message_id)] = sizes.get(entry_of(message_id), 0) + 1
    assert len(sizes) >= 3 and max(sizes.values()) <= 5


def test_flush_sends_the_open_batch_at_once(client, pulsar_topic, backend):
    producer = client.create_producer(pulsar_topic, batching_enabled=True, batching_max_messages=1000,
                                      batching_max_publish_delay_ms=600_000)  # (only flush() can close it)
    outcomes = send_outcomes(producer, [b"a", b"b", b"c"])
    assert [o[0] for o in outcomes] == [pulsar.Result.Ok] * 3
    assert len({entry_of(o[1]) for o in outcomes}) == 1


def test_the_batch_delay_sends_a_batch_without_flush(client, pulsar_topic, backend):
    producer = client.create_producer(pulsar_topic, batching_enabled=True, batching_max_messages=1000,
                                      batching_max_publish_delay_ms=20)
    message_id = producer.send(b"alone")  # blocks until the delay closed the batch and the broker answered
    assert message_id.batch_index() == 0


def test_messages_with_an_ordering_key_or_delivery_time_are_not_batched_and_order_is_kept(client, pulsar_topic):
    consumer = client.subscribe(pulsar_topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(pulsar_topic, batching_enabled=True, batching_max_messages=100,
                                      batching_max_publish_delay_ms=60_000)
    results: list = []
    for i in range(9):
        kwargs = {"ordering_key": "o"} if i % 3 == 2 else {}
        producer.send_async(b"%d" % i, lambda r, m, i=i: results.append((i, r, m)), **kwargs)
    producer.flush()
    by_index = {i: (r, m) for i, r, m in results}
    assert all(by_index[i][0] == pulsar.Result.Ok for i in range(9))
    assert [by_index[i][1].batch_index() == -1 for i in range(9)] == [i % 3 == 2 for i in range(9)]
    got = [consumer.receive(timeout_millis=RECEIVE_MS).data() for _ in range(9)]
    assert got == [b"%d" % i for i in range(9)]  # (one producer, one partition: the broker keeps the order)


@needs_official
def test_the_official_client_reads_our_batches(client, pulsar_broker, pulsar_topic, backend):
    producer = client.create_producer(pulsar_topic, batching_enabled=True, batching_max_messages=50)
    # the official consumer subscribes first, so that it sees every message
    off_client = run_blocking(backend, official_client, pulsar_broker)
    try:
        off_consumer = run_blocking(backend, off_client.subscribe, pulsar_topic, "official-sub")
        outcomes = send_outcomes(producer, [b"ours-%d" % i for i in range(200)], properties={"from": "pulsarfast"})
        assert all(o[0] == pulsar.Result.Ok for o in outcomes)

        def read_all():
            got = []
            for _ in range(200):
                msg = off_consumer.receive(timeout_millis=RECEIVE_MS)
                got.append((msg.data(), msg.properties(), msg.message_id().ledger_id(), msg.message_id().entry_id(),
                            msg.message_id().batch_index()))
                off_consumer.acknowledge(msg)
            return got

        got = run_blocking(backend, read_all)
    finally:
        run_blocking(backend, off_client.close)
    assert [g[0] for g in got] == [b"ours-%d" % i for i in range(200)]
    assert all(g[1] == {"from": "pulsarfast"} for g in got)
    assert [g[2:] for g in got] == [(o[1].ledger_id(), o[1].entry_id(), o[1].batch_index()) for o in outcomes]


def test_batches_in_flight_are_sent_again_after_a_topic_unload(client, pulsar_broker, pulsar_topic, backend):
    consumer = client.subscribe(pulsar_topic, "sub", consumer_type=pulsar.ConsumerType.Shared,
                                initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(pulsar_topic, batching_enabled=True, batching_max_messages=50,
                                      block_if_queue_full=True)
    count = 3000
    outcomes: list = [None] * count
    unloaded = []

    def unload():
        pulsar_broker.unload_topic(pulsar_topic)
        unloaded.append(True)

    for i in range(count):
        producer.send_async(b"%d" % i, lambda r, m, i=i: outcomes.__setitem__(i, r))
        if i == count // 3:
            run_blocking(backend, unload)
    producer.flush()
    assert unloaded and all(r == pulsar.Result.Ok for r in outcomes)
    seen = set()
    while len(seen) < count:
        msg = consumer.receive(timeout_millis=RECEIVE_MS)  # (a Timeout here means messages were lost)
        seen.add(int(msg.data()))
        consumer.acknowledge(msg)
    assert seen == set(range(count))
    assert producer.send(b"after").entry_id() >= 0  # (the producer carries on)
