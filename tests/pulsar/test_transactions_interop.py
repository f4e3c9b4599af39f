"""pulsarfast's transactions beside the Java client's (the reference: tests/support/java_txn.py
runs it from .pulsar-lib) and the official Python client's consumers, on the run's transaction
broker: a transaction of ours is invisible to their consumers until it commits and never visible
once aborted; the Java client's are the same to ours; a transaction begun by one client is
committed by the other, by id."""
from __future__ import annotations

import uuid

import pulsar as official
import pytest

import pulsarfast
from pulsarfast import InitialPosition
from tests.support.java_txn import HeldTransaction, messages, run_java_txn
from tests.support.waiting import wait_for

pytestmark = pytest.mark.slow

IDLE_MS = 1000  # how long a Java consumer waits for a message that must not come
RECEIVE_MS = 15000


@pytest.fixture
def ours(txn_broker):
    client = pulsarfast.Client(txn_broker.service_url, operation_timeout_seconds=15, backend="threads")
    yield client
    client.close()


@pytest.fixture
def theirs(txn_broker):
    client = official.Client(txn_broker.service_url, operation_timeout_seconds=15)
    yield client
    client.close()


def _topic(prefix: str) -> str:
    return "persistent://public/default/%s-%s" % (prefix, uuid.uuid4().hex[:10])


def _java_values(broker, topic: str, subscription: str) -> list[str]:
    return messages(run_java_txn(["consume", broker.service_url, topic, subscription, IDLE_MS]))


def _official_none(consumer) -> bool:
    try:
        message = consumer.receive(IDLE_MS)
    except official.Timeout:
        return True
    raise AssertionError("the official consumer got %r" % message.data())


def test_our_transaction_is_seen_by_java_and_official_consumers_only_once_committed(ours, theirs, txn_broker):
    topic = _topic("ours-to-theirs")
    official_consumer = theirs.subscribe(topic, "official", initial_position=official.InitialPosition.Earliest)
    producer = ours.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=5)
    txn = ours.new_transaction()
    for i in range(5):
        producer.send(("ours-%d" % i).encode(), transaction=txn)
    assert _java_values(txn_broker, topic, "java") == []
    assert _official_none(official_consumer)
    txn.commit()
    assert _java_values(txn_broker, topic, "java") == ["ours-%d" % i for i in range(5)]
    assert [official_consumer.receive(RECEIVE_MS).data() for _ in range(5)] == [b"ours-%d" % i for i in range(5)]


def test_our_aborted_transaction_is_never_seen_by_java_or_official_consumers(ours, theirs, txn_broker):
    topic = _topic("ours-aborted")
    official_consumer = theirs.subscribe(topic, "official", initial_position=official.InitialPosition.Earliest)
    producer = ours.create_producer(topic)
    txn = ours.new_transaction()
    producer.send(b"dropped", transaction=txn)
    txn.abort()
    producer.send(b"plain")
    assert _java_values(txn_broker, topic, "java") == ["plain"]
    assert official_consumer.receive(RECEIVE_MS).data() == b"plain"
    assert _official_none(official_consumer)


@pytest.mark.parametrize("batch", [False, True], ids=["unbatched", "batched"])
def test_a_java_transaction_is_seen_by_ours_only_once_committed(ours, txn_broker, batch):
    topic = _topic("java-to-ours")
    consumer = ours.subscribe(topic, "ours", initial_position=InitialPosition.Earliest)
    args = ["produce", txn_broker.service_url, topic, 4, "java", "hold"] + (["--batch"] if batch else [])
    with HeldTransaction(args) as held:
        assert len(held.txn_id) == 2
        with pytest.raises(pulsarfast.Timeout):
            consumer.receive(IDLE_MS)
        held.commit()
    assert [consumer.receive(RECEIVE_MS).data() for _ in range(4)] == [b"java-%d" % i for i in range(4)]


def test_a_java_aborted_transaction_is_never_seen_by_ours(ours, txn_broker):
    topic = _topic("java-aborted")
    consumer = ours.subscribe(topic, "ours", initial_position=InitialPosition.Earliest)
    run_java_txn(["produce", txn_broker.service_url, topic, 3, "dropped", "abort"])
    ours.create_producer(topic).send(b"plain")
    assert consumer.receive(RECEIVE_MS).data() == b"plain"
    with pytest.raises(pulsarfast.Timeout):
        consumer.receive(IDLE_MS)


def test_a_transaction_begun_by_one_client_is_ended_by_the_other(ours, txn_broker):
    topic = _topic("by-id")
    consumer = ours.subscribe(topic, "ours", initial_position=InitialPosition.Earliest)
    # Java begins, sends; ours sends in it too and commits it by id
    (begun,) = [line for line in run_java_txn(["produce", txn_broker.service_url, topic, 2, "java", "open"])
                if "txn" in line]
    handle = ours.transaction(tuple(begun["txn"]))
    ours.create_producer(topic).send(b"ours", transaction=handle)
    handle.commit()
    assert sorted(consumer.receive(RECEIVE_MS).data() for _ in range(3)) == [b"java-0", b"java-1", b"ours"]
    # ours begins, sends; Java commits it by id
    txn = ours.new_transaction()
    ours.create_producer(topic).send(b"ours again", transaction=txn)
    run_java_txn(["commit", txn_broker.service_url, txn.id.most_bits, txn.id.least_bits])
    assert consumer.receive(RECEIVE_MS).data() == b"ours again"
    with pytest.raises(pulsarfast.TransactionNotFound):  # (ended by the other client: the coordinator forgot it)
        txn.commit()


def test_java_acknowledgements_in_a_transaction_and_ours_count_once_committed(ours, txn_broker):
    topic = _topic("acks")
    producer = ours.create_producer(topic)
    for i in range(4):
        producer.send(b"m%d" % i)
    consumer = ours.subscribe(topic, "shared-sub", consumer_type=pulsarfast.ConsumerType.Shared,
                              initial_position=InitialPosition.Earliest)
    first = [consumer.receive(RECEIVE_MS) for _ in range(2)]
    txn = ours.new_transaction()
    for message in first:
        consumer.acknowledge(message, transaction=txn)
    txn.commit()
    consumer.close()
    # the Java consumer on the same subscription gets the two not acknowledged, and acknowledges them in its own
    lines = run_java_txn(["consume-txn-ack", txn_broker.service_url, topic, "shared-sub", 2, "commit", "--shared"])
    assert sorted(messages(lines)) == ["m2", "m3"]

    def backlog() -> int:
        stats = txn_broker.admin("GET", "/admin/v2/persistent/public/default/%s/stats" % topic.rsplit("/", 1)[1])
        return stats["subscriptions"]["shared-sub"]["msgBacklog"]
    assert wait_for(lambda: backlog() == 0, "threads", timeout=15)
