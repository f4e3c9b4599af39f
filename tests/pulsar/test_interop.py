# pulsarfast and the official `pulsar` module (pulsar-client 3.13, its C++ library) on the same real
# broker: messages of either client (batched or not) read by the other with everything intact, the
# same partition for the same key, and message ids that serialize to the same bytes.
#
# The official client blocks in C++ and runs its own threads. Under the gevent backend its
# blocking calls freeze the hub, so each test does the official client's part entirely before or
# after pulsarfast's part, never interleaved.
from __future__ import annotations

import pytest

import pulsarfast
from tests.support.pulsar_helpers import entry_of, full, id_tuple, official_client, produce
from tests.support.waiting import run_blocking

official = pytest.importorskip(
    "pulsar", reason="the official `pulsar-client` wheel is not installed (pip install -r requirements-dev.txt)"
)

# The first test asking for the broker pays for its start (about 4-6 s).
pytestmark = pytest.mark.timeout(150)

RECEIVE_MS = 10_000
EMPTY_MS = 1_000


# ----------------------------------------------------------------------------- official -> pulsarfast


def _produce_with_official(broker, topic, count, batching):
    """Send count messages with the official client (send_async + flush); returns {index: official id tuple}."""
    messages = [(b"official-%d" % i, {"properties": {"i": str(i), "kind": "interop"},
                                      "partition_key": "key-%d" % (i % 17), "event_timestamp": 1_600_000_000_000 + i})
                for i in range(count)]
    client = official_client(broker)
    try:
        ids = produce(client, topic, messages, batching_enabled=batching, batching_max_messages=100,
                      batching_max_publish_delay_ms=10, block_if_queue_full=True, max_pending_messages=count)
    finally:
        client.close()
    return {i: id_tuple(message_id) for i, message_id in enumerate(ids)}


@pytest.mark.pythons  # (make test-pythons: on every supported Python)
@pytest.mark.parametrize("batching", [False, True], ids=["unbatched", "batched"])
def test_official_messages_are_read_by_pulsarfast_and_acks_reach_the_broker(make_client, pulsar_broker, pulsar_topic,
                                                                           backend, batching):
    count = 1000
    # the official client's part first, entirely
    official_ids = run_blocking(backend, _produce_with_official, pulsar_broker, pulsar_topic, count, batching)
    if batching:
        entries = {(t[0], t[1]) for t in official_ids.values()}
        assert len(entries) < count, "the official producer did not batch"
        assert all(t[3] >= 0 for t in official_ids.values())
    else:
        assert all(t[3] == -1 for t in official_ids.values())

    client = make_client()
    consumer = client.subscribe(pulsar_topic, "interop-sub", initial_position=pulsarfast.InitialPosition.Earliest)
    got = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(count)]
    with pytest.raises(pulsarfast.Timeout):
        consumer.receive(timeout_millis=EMPTY_MS)  # no duplicates, nothing else

    wrong = []
    for msg in got:
        i = int(msg.properties()["i"])
        expected = (b"official-%d" % i, {"i": str(i), "kind": "interop"}, "key-%d" % (i % 17),
                    1_600_000_000_000 + i, official_ids[i])
        actual = (msg.data(), msg.properties(), msg.partition_key(), msg.event_timestamp(),
                  id_tuple(msg.message_id()))
        if actual != expected:
            wrong.append((expected, actual))
    assert not wrong, "%d messages differ, first: %r" % (len(wrong), wrong[:3])
    assert [int(m.properties()["i"]) for m in got] == list(range(count))  # in order (one partition, Exclusive)
    assert len({id_tuple(m.message_id()) for m in got}) == count  # one distinct id per message
    if batching:
        assert all(m.message_id().batch_index() >= 0 for m in got)
    else:
        assert all(m.message_id().batch_index() == -1 for m in got)
    assert all(m.topic_name() == full(pulsar_topic) for m in got)
    assert all(m.publish_timestamp() > 0 and m.redelivery_count() == 0 for m in got)

    for msg in got:
        consumer.acknowledge(msg)
    consumer.close()

    # every acknowledgement (a batch's once all its messages are acknowledged) reached the broker:
    # a new consumer on the subscription gets nothing
    again = client.subscribe(pulsar_topic, "interop-sub", initial_position=pulsarfast.InitialPosition.Earliest)
    with pytest.raises(pulsarfast.Timeout):
        extra = again.receive(timeout_millis=EMPTY_MS)
        pytest.fail("redelivered after acknowledgement: %r" % (extra,))


@pytest.mark.parametrize("batching", [False, True], ids=["unbatched", "batched"])
def test_received_ids_serialize_like_the_official_ids(make_client, pulsar_broker, pulsar_topic, backend, batching):
    count = 250
    official_ids = run_blocking(backend, _produce_with_official, pulsar_broker, pulsar_topic, count, batching)
    client = make_client()
    consumer = client.subscribe(pulsar_topic, "ids", initial_position=pulsarfast.InitialPosition.Earliest)
    got = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(count)]
    for msg in got:
        consumer.acknowledge(msg)
    client.close()
    for msg in got:
        ours = msg.message_id()
        theirs = official.MessageId.deserialize(ours.serialize())
        assert id_tuple(theirs) == id_tuple(ours) == official_ids[int(msg.properties()["i"])]
        back = pulsarfast.MessageId.deserialize(theirs.serialize())
        assert id_tuple(back) == id_tuple(ours)
        assert back == ours


# ----------------------------------------------------------------------------- pulsarfast -> official


@pytest.mark.pythons  # (make test-pythons: on every supported Python)
@pytest.mark.parametrize("partitions", [0, 3], ids=["plain", "3_partitions"])
def test_pulsarfast_messages_are_read_by_the_official_client(make_client, pulsar_broker, pulsar_topic, backend,
                                                             partitions):
    if partitions:
        run_blocking(backend, pulsar_broker.create_partitioned_topic, pulsar_topic, partitions)
    count = 60
    sent = {}
    # pulsarfast's part first, entirely
    client = make_client()  # (closed before the official client's part)
    producer = client.create_producer(pulsar_topic)
    for i in range(count):
        key = "key-%d" % (i % 7) if i % 3 else None  # a third without a key
        message_id = producer.send(b"fast-%d" % i, properties={"i": str(i), "p": "\u00e9\u2603"},
                                   partition_key=key, event_timestamp=1_650_000_000_000 + i)
        sent[b"fast-%d" % i] = (message_id, key, i)
    producer.close()
    client.close()
    assert len({entry_of(m) for m, _, _ in sent.values()}) == count
    if partitions:
        assert {m.partition() for m, _, _ in sent.values()} == set(range(partitions))
    else:
        assert {m.partition() for m, _, _ in sent.values()} == {-1}

    def consume_with_official():
        oclient = official_client(pulsar_broker)
        try:
            consumer = oclient.subscribe(pulsar_topic, "official-sub",
                                         initial_position=official.InitialPosition.Earliest)
            messages = []
            for _ in range(count):
                msg = consumer.receive(timeout_millis=RECEIVE_MS)
                messages.append((msg.data(), msg.properties(), msg.partition_key(), msg.event_timestamp(),
                                 entry_of(msg.message_id()), msg.message_id().batch_index(), msg.topic_name(),
                                 msg.publish_timestamp()))
                consumer.acknowledge(msg)
            try:
                extra = consumer.receive(timeout_millis=EMPTY_MS)
                messages.append(("extra", extra.data()))
            except official.Timeout:
                pass
            consumer.close()
            return messages
        finally:
            oclient.close()

    messages = run_blocking(backend, consume_with_official)
    assert len(messages) == count, messages[count:]
    assert {m[0] for m in messages} == set(sent)
    for data, properties, key, event_time, entry, batch_index, topic_name, publish_time in messages:
        message_id, sent_key, i = sent[data]
        assert properties == {"i": str(i), "p": "\u00e9\u2603"}
        assert key == (sent_key or "")
        assert event_time == 1_650_000_000_000 + i
        assert entry == entry_of(message_id), (data, entry, message_id)
        assert batch_index == -1  # pulsarfast does not batch yet
        if partitions:
            assert topic_name == full(pulsar_topic) + "-partition-%d" % message_id.partition()
        else:
            assert topic_name == full(pulsar_topic)
        assert publish_time > 0


# ----------------------------------------------------------------------------- key routing


KEYS = ["key-%d" % i for i in range(60)] + ["order:%d" % (i * 104729) for i in range(20)] + [
    "\u00e9t\u00e9", "\u2603", "\U0001f600 emoji", "x" * 500, "MiXeD-CaSe", "with space", "0", "-1"]


@pytest.mark.parametrize("mode", ["RoundRobinDistribution", "UseSinglePartition"])
def test_both_clients_put_the_same_key_on_the_same_partition(make_client, pulsar_broker, pulsar_topic, backend, mode):
    partitions = 4
    run_blocking(backend, pulsar_broker.create_partitioned_topic, pulsar_topic, partitions)
    client = make_client()
    producer = client.create_producer(pulsar_topic,
                                      message_routing_mode=getattr(pulsarfast.PartitionsRoutingMode, mode))
    ours = {key: producer.send(key.encode(), partition_key=key).partition() for key in KEYS}
    client.close()

    def produce_with_official():
        oclient = official_client(pulsar_broker)
        try:
            oproducer = oclient.create_producer(pulsar_topic, batching_enabled=False,
                                                message_routing_mode=getattr(official.PartitionsRoutingMode, mode))
            return {key: oproducer.send(key.encode(), partition_key=key).partition() for key in KEYS}
        finally:
            oclient.close()

    theirs = run_blocking(backend, produce_with_official)
    assert set(ours.values()) == set(range(partitions))  # the keys do spread
    differ = {key[:20]: (ours[key], theirs[key]) for key in KEYS if ours[key] != theirs[key]}
    assert not differ


# ----------------------------------------------------------------------------- MessageId.serialize


ID_CASES = [
    (-1, 0, 0, -1),
    (-1, 123, 45, -1),
    (2, 123, 45, 3),
    (0, 7, 0, 0),
    (15, 2**40 + 5, 2**33 + 1, 99),
    (-1, 2**63 - 1, 2**63 - 1, -1),  # MessageId.latest
    (-1, -1, -1, -1),  # MessageId.earliest
]


@pytest.mark.parametrize("partition,ledger,entry,batch", ID_CASES)
def test_pulsarfast_serialized_ids_deserialize_in_the_official_client(partition, ledger, entry, batch):
    ours = pulsarfast.MessageId(partition, ledger, entry, batch)
    theirs = official.MessageId.deserialize(ours.serialize())
    assert id_tuple(theirs) == (ledger, entry, partition, batch)
    assert ours.serialize() == official.MessageId(partition, ledger, entry, batch).serialize()


@pytest.mark.parametrize("partition,ledger,entry,batch", ID_CASES)
def test_official_serialized_ids_deserialize_in_pulsarfast(partition, ledger, entry, batch):
    theirs = official.MessageId(partition, ledger, entry, batch)
    ours = pulsarfast.MessageId.deserialize(theirs.serialize())
    assert id_tuple(ours) == (ledger, entry, partition, batch)
    assert ours == pulsarfast.MessageId(partition, ledger, entry, batch)


def test_earliest_and_latest_match_the_official_ones():
    for name in ("earliest", "latest"):
        ours = getattr(pulsarfast.MessageId, name)
        theirs = getattr(official.MessageId, name)
        assert id_tuple(ours) == id_tuple(theirs), name
        assert ours.serialize() == theirs.serialize(), name
