"""Readers and positions against a real Pulsar broker, on both backends:
readers from MessageId.earliest / .latest / a stored (serialized) id,
exclusive and inclusive, from unbatched and batched producers;
has_message_available; read_next timeouts; a reader across a topic unload
(no repeats, no gaps); reader_listener; Consumer.seek and Reader.seek by id
and by publish timestamp, dropping what was queued before the seek; and
initial_position for subscriptions."""
from __future__ import annotations

import functools
import time

import pytest

import pulsarfast as pulsar
from tests.support.pulsar_helpers import (
    bodies_of, full, id_tuple, needs_official, official, official_client, send_all, subscription_stats, topic_stats)
from tests.support.waiting import run_blocking, wait_for

pytestmark = pytest.mark.timeout(150)

WAIT = 15.0
RECEIVE_MS = 10_000
EMPTY_MS = 300

wait_for = functools.partial(wait_for, timeout=WAIT)


def make_producer(client, topic, batched):
    if batched:  # batches of 4: stored ids fall inside batches
        return client.create_producer(topic, batching_enabled=True, batching_max_messages=4,
                                      batching_max_publish_delay_ms=1000)
    return client.create_producer(topic)


def read_bodies(reader, count):
    return [reader.read_next(RECEIVE_MS).data() for _ in range(count)]


def assert_nothing_more(reader):
    with pytest.raises(pulsar.Timeout):
        reader.read_next(EMPTY_MS)


def wait_past_millisecond(backend, timestamp_ms):
    """Wait until the clock is past timestamp_ms (publish times after it are later)."""
    wait_for(lambda: time.time() * 1000 > timestamp_ms + 1, backend)


# --------------------------------------------------------------------------- positions (no broker)


def test_start_position_drops_what_lies_before_it():
    from pulsarfast.options.startposition import StartPosition, has_after

    def mid(entry, index=-1):
        return pulsar.MessageId(-1, 7, entry, index)

    single = StartPosition(mid(5), inclusive=False)
    assert [single.before(mid(e)) for e in (4, 5, 6)] == [True, True, False]
    assert [StartPosition(mid(5), inclusive=True).before(mid(e)) for e in (4, 5, 6)] == [True, False, False]
    in_batch = StartPosition(mid(5, 2), inclusive=False)
    assert [in_batch.before(mid(5, i)) for i in range(5)] == [True, True, True, False, False]
    in_batch_inclusive = StartPosition(mid(5, 2), inclusive=True)
    assert [in_batch_inclusive.before(mid(5, i)) for i in range(5)] == [True, True, False, False, False]
    assert not in_batch.before(mid(6, 0)) and in_batch.before(mid(4, 3))
    for special in (pulsar.MessageId.earliest, pulsar.MessageId.latest):
        assert not StartPosition(special, inclusive=False).before(mid(0))
    assert StartPosition(pulsar.MessageId.latest, inclusive=False).pins_on_arrival
    assert StartPosition(mid(5), inclusive=False).subscribe_id() == mid(5).serialize()

    empty = pulsar.MessageId(-1, 7, -1, -1)
    assert not has_after(empty, None, None)
    assert has_after(mid(5), StartPosition(pulsar.MessageId.earliest, False), None)
    assert not has_after(mid(5), single, None) and has_after(mid(6), single, None)
    assert has_after(mid(5, 3), in_batch, None) and not has_after(mid(5, 2), in_batch, None)
    latest = StartPosition(pulsar.MessageId.latest, inclusive=False)
    assert has_after(mid(6), latest, mid(5)) and not has_after(mid(5), latest, mid(5))


# --------------------------------------------------------------------------- message ids


def test_message_id_earliest_latest_and_serialized_ids_round_trip(client, pulsar_topic):
    assert isinstance(pulsar.MessageId.earliest, pulsar.MessageId)
    assert isinstance(pulsar.MessageId.latest, pulsar.MessageId)
    assert pulsar.MessageId.earliest < pulsar.MessageId.latest
    for special in (pulsar.MessageId.earliest, pulsar.MessageId.latest):
        assert pulsar.MessageId.deserialize(special.serialize()) == special
    producer = make_producer(client, pulsar_topic, batched=True)
    for message_id in send_all(producer, bodies_of(b"id", 6)):
        back = pulsar.MessageId.deserialize(message_id.serialize())
        assert back == message_id
        assert id_tuple(back) == id_tuple(message_id)


# --------------------------------------------------------------------------- start positions


def test_reader_from_earliest_reads_every_message(client, pulsar_topic):
    producer = client.create_producer(pulsar_topic)
    bodies = bodies_of(b"early", 10)
    send_all(producer, bodies)
    reader = client.create_reader(pulsar_topic, pulsar.MessageId.earliest)
    assert reader.topic() == full(pulsar_topic)
    assert read_bodies(reader, 10) == bodies
    assert_nothing_more(reader)
    reader.close()


def test_reader_from_latest_reads_only_messages_sent_after_it(client, pulsar_topic):
    producer = client.create_producer(pulsar_topic)
    send_all(producer, bodies_of(b"before", 5))
    reader = client.create_reader(pulsar_topic, pulsar.MessageId.latest)
    after = bodies_of(b"after", 5)
    send_all(producer, after)
    assert read_bodies(reader, 5) == after
    assert_nothing_more(reader)


@pytest.mark.parametrize("batched", [False, True], ids=["unbatched", "batched"])
def test_reader_from_a_stored_id_exclusive_and_inclusive(client, pulsar_topic, batched):
    producer = make_producer(client, pulsar_topic, batched)
    bodies = bodies_of(b"m", 12)
    ids = send_all(producer, bodies)
    if batched:
        assert ids[5].batch_index() == 1  # (inside a batch: messages 4..7 share an entry)
    stored = ids[5].serialize()

    exclusive = client.create_reader(pulsar_topic, pulsar.MessageId.deserialize(stored))
    assert read_bodies(exclusive, 6) == bodies[6:]
    assert_nothing_more(exclusive)

    inclusive = client.create_reader(pulsar_topic, pulsar.MessageId.deserialize(stored),
                                     start_message_id_inclusive=True)
    first = inclusive.read_next(RECEIVE_MS)
    assert first.data() == bodies[5]
    assert first.message_id() == ids[5]
    assert read_bodies(inclusive, 6) == bodies[6:]
    assert_nothing_more(inclusive)


def test_has_message_available_is_true_until_the_last_message_is_read(client, pulsar_topic):
    producer = client.create_producer(pulsar_topic)
    empty = client.create_reader(pulsar_topic, pulsar.MessageId.earliest)
    assert empty.has_message_available() is False
    send_all(producer, bodies_of(b"h", 3))
    reader = client.create_reader(pulsar_topic, pulsar.MessageId.earliest)
    for body in bodies_of(b"h", 3):
        assert reader.has_message_available() is True
        assert reader.read_next(RECEIVE_MS).data() == body
    assert reader.has_message_available() is False
    wait_for(empty.has_message_available, client.backend)  # (it reads from the start)

    latest = client.create_reader(pulsar_topic, pulsar.MessageId.latest)
    assert latest.has_message_available() is False
    producer.send(b"h-new")
    assert latest.has_message_available() is True  # (whether or not it has arrived yet)
    assert latest.read_next(RECEIVE_MS).data() == b"h-new"
    assert latest.has_message_available() is False


def test_has_message_available_inside_a_batch(client, pulsar_topic):
    producer = make_producer(client, pulsar_topic, batched=True)
    ids = send_all(producer, bodies_of(b"b", 4))  # (one batch)
    assert ids[3].batch_index() == 3
    at_last = client.create_reader(pulsar_topic, ids[3])
    assert at_last.has_message_available() is False
    inside = client.create_reader(pulsar_topic, ids[2])
    assert inside.has_message_available() is True
    assert inside.read_next(RECEIVE_MS).data() == b"b-3"
    assert inside.has_message_available() is False


def test_reader_from_latest_inclusive_reads_the_last_message_first(client, pulsar_topic):
    producer = client.create_producer(pulsar_topic)
    send_all(producer, bodies_of(b"i", 3))
    reader = client.create_reader(pulsar_topic, pulsar.MessageId.latest, start_message_id_inclusive=True)
    assert reader.read_next(RECEIVE_MS).data() == b"i-2"
    producer.send(b"i-3")
    assert reader.read_next(RECEIVE_MS).data() == b"i-3"
    assert_nothing_more(reader)
    empty_topic = pulsar_topic + "_empty"
    on_empty = client.create_reader(empty_topic, pulsar.MessageId.latest, start_message_id_inclusive=True)
    client.create_producer(empty_topic).send(b"first")
    assert on_empty.read_next(RECEIVE_MS).data() == b"first"


def test_read_next_raises_timeout_when_nothing_comes(client, pulsar_topic):
    reader = client.create_reader(pulsar_topic, pulsar.MessageId.latest)
    with pytest.raises(pulsar.Timeout):
        reader.read_next(200)
    assert reader.is_connected()
    with pytest.raises(ValueError):
        reader.read_next("soon")


def test_reader_listener_receives_every_message(client, pulsar_topic, backend):
    got = []
    readers = []

    def listener(reader, message):
        readers.append(reader)
        got.append(message.data())

    producer = client.create_producer(pulsar_topic)
    bodies = bodies_of(b"listen", 8)
    send_all(producer, bodies[:4])
    reader = client.create_reader(pulsar_topic, pulsar.MessageId.earliest, reader_listener=listener)
    send_all(producer, bodies[4:])
    wait_for(lambda: len(got) == 8, backend)
    assert got == bodies
    assert all(r is reader for r in readers)
    with pytest.raises(pulsar.InvalidConfiguration):
        reader.read_next(10)


def test_reader_subscription_is_non_durable_with_a_generated_name(pulsar_broker, client, pulsar_topic, backend):
    producer = client.create_producer(pulsar_topic)
    send_all(producer, bodies_of(b"s", 2))
    plain = client.create_reader(pulsar_topic, pulsar.MessageId.earliest, reader_name="my-reader")
    prefixed = client.create_reader(pulsar_topic, pulsar.MessageId.earliest, subscription_role_prefix="audit")
    assert read_bodies(plain, 2) == read_bodies(prefixed, 2)
    subscriptions = topic_stats(pulsar_broker, backend, pulsar_topic)["subscriptions"]
    names = sorted(subscriptions)
    assert len(names) == 2
    assert any(n.startswith("reader-") for n in names) and any(n.startswith("audit-reader-") for n in names)
    assert all(s["isDurable"] is False for s in subscriptions.values())
    consumers = [c for s in subscriptions.values() for c in s["consumers"]]
    assert "my-reader" in {c.get("consumerName") for c in consumers}
    plain.close()
    prefixed.close()
    # the broker forgets a non-durable subscription with its consumer
    wait_for(lambda: not topic_stats(pulsar_broker, backend, pulsar_topic)["subscriptions"], backend)


def test_reader_arguments_are_checked(client, pulsar_topic):
    with pytest.raises(ValueError):
        client.create_reader(pulsar_topic, "earliest")
    with pytest.raises(ValueError):
        client.create_reader(pulsar_topic, pulsar.MessageId.earliest, receiver_queue_size="10")
    with pytest.raises(ValueError):
        client.create_reader(pulsar_topic, pulsar.MessageId.earliest, start_message_id_inclusive=1)
    with pytest.raises(ValueError):  # (not a pulsar.CryptoKeyReader: tests/pulsar/test_encryption.py)
        client.create_reader(pulsar_topic, pulsar.MessageId.earliest, crypto_key_reader=object())


# --------------------------------------------------------------------------- reconnects


@pytest.mark.parametrize("batched", [False, True], ids=["unbatched", "batched"])
def test_reader_survives_a_topic_unload_without_repeats_or_gaps(pulsar_broker, client, pulsar_topic, backend,
                                                                batched):
    producer = make_producer(client, pulsar_topic, batched)
    bodies = bodies_of(b"u", 30)
    send_all(producer, bodies[:14])
    reader = client.create_reader(pulsar_topic, pulsar.MessageId.earliest, receiver_queue_size=100)
    got = read_bodies(reader, 7)  # (the rest of the 14 are queued or on their way)
    run_blocking(backend, pulsar_broker.unload_topic, pulsar_topic)
    send_all(producer, bodies[14:])
    got += read_bodies(reader, 23)
    assert got == bodies
    assert_nothing_more(reader)
    wait_for(reader.is_connected, backend)


def test_reader_survives_a_dropped_connection_without_repeats_or_gaps(client, pulsar_topic, backend):
    producer = make_producer(client, pulsar_topic, batched=True)
    bodies = bodies_of(b"d", 20)
    send_all(producer, bodies[:10])
    reader = client.create_reader(pulsar_topic, pulsar.MessageId.earliest)
    got = read_bodies(reader, 5)
    for conn in client.broker_connections():
        conn.close()
    send_all(producer, bodies[10:])  # (the producer resends on its new connection)
    got += read_bodies(reader, 15)
    assert got == bodies
    assert_nothing_more(reader)


def test_reader_from_latest_keeps_what_arrived_across_an_unload(pulsar_broker, client, pulsar_topic, backend):
    producer = client.create_producer(pulsar_topic)
    reader = client.create_reader(pulsar_topic, pulsar.MessageId.latest)
    bodies = bodies_of(b"l", 6)
    send_all(producer, bodies[:3])
    wait_for(reader.has_message_available, backend)
    run_blocking(backend, pulsar_broker.unload_topic, pulsar_topic)  # (before anything was read)
    send_all(producer, bodies[3:])
    assert read_bodies(reader, 6) == bodies
    assert_nothing_more(reader)


# --------------------------------------------------------------------------- seek


def test_consumer_seek_to_an_earlier_id_redelivers_from_there(client, pulsar_topic):
    consumer = client.subscribe(pulsar_topic, "seek-sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(pulsar_topic)
    bodies = bodies_of(b"s", 8)
    ids = send_all(producer, bodies)
    for body in bodies:
        msg = consumer.receive(RECEIVE_MS)
        assert msg.data() == body
        consumer.acknowledge(msg)
    consumer.seek(ids[3])  # (exclusive, as the official client: the message after it comes next)
    assert [consumer.receive(RECEIVE_MS).data() for _ in range(4)] == bodies[4:]
    with pytest.raises(pulsar.Timeout):
        consumer.receive(EMPTY_MS)
    consumer.seek(pulsar.MessageId.earliest)
    assert consumer.receive(RECEIVE_MS).data() == bodies[0]
    consumer.seek(pulsar.MessageId.latest)  # (the rest, queued again by now or not, is skipped)
    producer.send(b"fresh")
    assert consumer.receive(RECEIVE_MS).data() == b"fresh"


def test_consumer_seek_into_a_batch_starts_after_that_message(client, pulsar_topic):
    consumer = client.subscribe(pulsar_topic, "seek-batch", initial_position=pulsar.InitialPosition.Earliest)
    producer = make_producer(client, pulsar_topic, batched=True)
    bodies = bodies_of(b"sb", 8)
    ids = send_all(producer, bodies)
    assert [consumer.receive(RECEIVE_MS).data() for _ in range(8)] == bodies
    assert ids[6].batch_index() == 2
    consumer.seek(ids[6])
    assert [consumer.receive(RECEIVE_MS).data() for _ in range(1)] == bodies[7:]
    with pytest.raises(pulsar.Timeout):
        consumer.receive(EMPTY_MS)


def test_consumer_seek_by_timestamp(client, pulsar_topic, backend):
    consumer = client.subscribe(pulsar_topic, "seek-time", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(pulsar_topic)
    first = bodies_of(b"old", 4)
    send_all(producer, first)
    received = [consumer.receive(RECEIVE_MS) for _ in range(4)]
    boundary = max(m.publish_timestamp() for m in received)
    wait_past_millisecond(backend, boundary)
    later = bodies_of(b"new", 4)
    send_all(producer, later)
    assert [consumer.receive(RECEIVE_MS).data() for _ in range(4)] == later
    consumer.seek(boundary + 1)
    assert [consumer.receive(RECEIVE_MS).data() for _ in range(4)] == later
    consumer.seek(0)
    assert [consumer.receive(RECEIVE_MS).data() for _ in range(8)] == first + later


def test_seek_drops_the_messages_queued_before_it(pulsar_broker, client, pulsar_topic, backend):
    consumer = client.subscribe(pulsar_topic, "seek-queued", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(pulsar_topic)
    bodies = bodies_of(b"q", 10)
    ids = send_all(producer, bodies)
    assert consumer.receive(RECEIVE_MS).data() == bodies[0]

    def all_delivered():
        sub = subscription_stats(pulsar_broker, backend, pulsar_topic, "seek-queued")
        return sub["msgOutCounter"] >= 10
    wait_for(all_delivered, backend)  # (1..9 are in the consumer's queue now)
    consumer.seek(ids[6])
    assert [consumer.receive(RECEIVE_MS).data() for _ in range(3)] == bodies[7:]
    with pytest.raises(pulsar.Timeout):
        consumer.receive(EMPTY_MS)


def test_seek_arguments_are_checked(client, pulsar_topic):
    consumer = client.subscribe(pulsar_topic, "seek-args")
    with pytest.raises(ValueError):
        consumer.seek("yesterday")
    with pytest.raises(ValueError):
        consumer.seek(-5)
    consumer.close()
    with pytest.raises(pulsar.AlreadyClosed):
        consumer.seek(0)


@pytest.mark.parametrize("inclusive", [False, True], ids=["exclusive", "inclusive"])
def test_reader_seek_by_id_and_by_timestamp(client, pulsar_topic, backend, inclusive):
    producer = client.create_producer(pulsar_topic)
    first = bodies_of(b"old", 4)
    ids = send_all(producer, first)
    reader = client.create_reader(pulsar_topic, pulsar.MessageId.earliest, start_message_id_inclusive=inclusive)
    received = [reader.read_next(RECEIVE_MS) for _ in range(4)]
    boundary = max(m.publish_timestamp() for m in received)
    wait_past_millisecond(backend, boundary)
    later = bodies_of(b"new", 3)
    send_all(producer, later)
    assert read_bodies(reader, 3) == later

    reader.seek(ids[1])
    expected = (first + later)[1 if inclusive else 2:]
    assert read_bodies(reader, len(expected)) == expected
    assert_nothing_more(reader)

    reader.seek(boundary + 1)
    assert reader.has_message_available() is True
    assert read_bodies(reader, 3) == later
    assert_nothing_more(reader)
    assert reader.has_message_available() is False

    reader.seek(int(time.time() * 1000) + 60_000)  # (after every message)
    assert reader.has_message_available() is False
    assert_nothing_more(reader)


def test_reader_after_a_timestamp_seek_survives_an_unload(pulsar_broker, client, pulsar_topic, backend):
    producer = client.create_producer(pulsar_topic)
    first = bodies_of(b"old", 3)
    send_all(producer, first)
    reader = client.create_reader(pulsar_topic, pulsar.MessageId.earliest)
    boundary = max(m.publish_timestamp() for m in [reader.read_next(RECEIVE_MS) for _ in range(3)])
    wait_past_millisecond(backend, boundary)
    later = bodies_of(b"new", 4)
    send_all(producer, later)
    reader.seek(boundary + 1)
    got = read_bodies(reader, 1)
    run_blocking(backend, pulsar_broker.unload_topic, pulsar_topic)
    got += read_bodies(reader, 3)
    assert got == later
    assert_nothing_more(reader)


# --------------------------------------------------------------------------- partitioned topics


def test_reader_on_a_partitioned_topic(pulsar_broker, client, pulsar_topic, backend):
    run_blocking(backend, pulsar_broker.create_partitioned_topic, pulsar_topic, 3)
    producer = client.create_producer(pulsar_topic)
    bodies = bodies_of(b"p", 9)
    ids = send_all(producer, bodies)
    reader = client.create_reader(pulsar_topic, pulsar.MessageId.earliest)
    assert sorted(read_bodies(reader, 9)) == sorted(bodies)
    assert reader.has_message_available() is False
    assert_nothing_more(reader)
    with pytest.raises(pulsar.InvalidConfiguration):
        client.create_reader(pulsar_topic, ids[0])
    # one partition read on its own from a stored id
    partition = client.get_topic_partitions(pulsar_topic)[ids[0].partition()]
    one = client.create_reader(partition, ids[0])
    expected = [b for b, i in zip(bodies, ids) if i.partition() == ids[0].partition()][1:]
    assert read_bodies(one, len(expected)) == expected


# --------------------------------------------------------------------------- initial position


def test_subscribe_initial_position_earliest_reads_old_messages_latest_does_not(client, pulsar_topic):
    producer = client.create_producer(pulsar_topic)
    old = bodies_of(b"old", 3)
    send_all(producer, old)
    earliest = client.subscribe(pulsar_topic, "from-earliest", initial_position=pulsar.InitialPosition.Earliest)
    latest = client.subscribe(pulsar_topic, "from-latest", initial_position=pulsar.InitialPosition.Latest)
    producer.send(b"new")
    assert [earliest.receive(RECEIVE_MS).data() for _ in range(4)] == old + [b"new"]
    assert latest.receive(RECEIVE_MS).data() == b"new"
    with pytest.raises(pulsar.Timeout):
        latest.receive(EMPTY_MS)


def test_consumer_seek_on_a_partitioned_topic(pulsar_broker, client, pulsar_topic, backend):
    run_blocking(backend, pulsar_broker.create_partitioned_topic, pulsar_topic, 3)
    consumer = client.subscribe(pulsar_topic, "seek-parts", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(pulsar_topic)
    bodies = bodies_of(b"sp", 9)
    ids = send_all(producer, bodies)
    assert len({i.partition() for i in ids}) == 3

    received = {}

    def receive_all(count):
        got = []
        for _ in range(count):
            msg = consumer.receive(RECEIVE_MS)
            consumer.acknowledge(msg)
            got.append(msg.data())
            received[msg.data()] = msg.message_id()
        with pytest.raises(pulsar.Timeout):
            consumer.receive(EMPTY_MS)
        return sorted(got)

    assert receive_all(9) == sorted(bodies)
    consumer.seek(0)  # (a timestamp: every partition)
    assert receive_all(9) == sorted(bodies)
    # an id: its own partition, after that message; a received message's id (it names its partition's
    # topic: the producer's carries no topic, so the partitioned consumer refuses it, as the official one)
    partition = ids[0].partition()
    same = [b for b, i in zip(bodies, ids) if i.partition() == partition]
    with pytest.raises(pulsar.OperationNotSupported):
        consumer.seek(ids[0])
    consumer.seek(received[bodies[0]])
    assert receive_all(len(same) - 1) == sorted(same[1:])


# --------------------------------------------------------------------------- the official client's ids


@needs_official
def test_ids_stored_by_the_official_client_position_our_reader(make_client, pulsar_broker, pulsar_topic, backend):
    # the official client's part first, then ours (its blocking calls would freeze gevent's hub)
    theirs = official_client(pulsar_broker)
    try:
        producer = theirs.create_producer(pulsar_topic, batching_enabled=True, batching_max_messages=4,
                                          batching_max_publish_delay_ms=1000)
        for i in range(8):
            producer.send_async(b"o-%d" % i, None)
        producer.flush()
        reader = theirs.create_reader(pulsar_topic, official.MessageId.earliest)
        stored = [reader.read_next(RECEIVE_MS).message_id().serialize() for _ in range(8)]
    finally:
        theirs.close()
    ours = make_client()
    start = pulsar.MessageId.deserialize(stored[5])
    assert start.batch_index() == 1
    reader = ours.create_reader(pulsar_topic, start)
    assert read_bodies(reader, 2) == [b"o-6", b"o-7"]
    assert_nothing_more(reader)
    inclusive = ours.create_reader(pulsar_topic, start, start_message_id_inclusive=True)
    first = inclusive.read_next(RECEIVE_MS)
    assert first.data() == b"o-5" and first.message_id().serialize() == stored[5]
