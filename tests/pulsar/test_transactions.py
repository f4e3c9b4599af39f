"""Pulsar transactions (pulsarfast's; the official client has none) on a real broker with its
transaction coordinator on (the run's ``txn_broker``), on both backends: what a transaction sends
is delivered only once it commits and never once it aborts, acknowledgements in it take effect at
commit, a conflicting one fails it, the coordinator's timeout aborts it, a coordinator that
reloads under it is followed, and a broker without coordinators refuses at once with a clear
error. ``test_transactions_interop.py`` runs the Java and official clients beside ours."""
from __future__ import annotations

import asyncio
import uuid

import pytest

import pulsarfast
from pulsarfast import InitialPosition, TransactionState
from tests.support.waiting import wait_for

#: how long a consumer is given to show a message that must not be delivered (a bounded "stays" check)
ABSENT_MS = 1000
RECEIVE_MS = 15000


def _name(prefix: str) -> str:
    return "%s-%s" % (prefix, uuid.uuid4().hex[:10])


def _receive_all(consumer, count: int) -> list[bytes]:
    return [consumer.receive(RECEIVE_MS).data() for _ in range(count)]


def _nothing_delivered(consumer) -> bool:
    try:
        message = consumer.receive(ABSENT_MS)
    except pulsarfast.Timeout:
        return True
    raise AssertionError("delivered: %r" % message.data())


def _backlog(broker, topic: str, subscription: str) -> int:
    stats = broker.admin("GET", "/admin/v2/persistent/public/default/%s/stats" % topic)
    return stats["subscriptions"][subscription]["msgBacklog"]


@pytest.fixture
def txn_client(make_client, txn_broker):
    return make_client(txn_broker)


@pytest.mark.parametrize("batching", [False, True], ids=["unbatched", "batched"])
def test_messages_sent_in_a_transaction_are_delivered_only_once_it_commits(txn_client, batching):
    topic = _name("txn-visible")
    consumer = txn_client.subscribe(topic, "s", initial_position=InitialPosition.Earliest)
    producer = txn_client.create_producer(topic, batching_enabled=batching, batching_max_publish_delay_ms=5)
    txn = txn_client.new_transaction()
    assert txn.state is TransactionState.OPEN
    ids = [producer.send(b"m%d" % i, transaction=txn) for i in range(5)]
    assert len(set(map(str, ids))) == 5  # (each send has the broker's receipt while the transaction is open)
    assert _nothing_delivered(consumer)
    txn.commit()
    assert txn.state is TransactionState.COMMITTED
    assert _receive_all(consumer, 5) == [b"m%d" % i for i in range(5)]


def test_messages_of_an_aborted_transaction_are_never_delivered(txn_client):
    topic = _name("txn-aborted")
    consumer = txn_client.subscribe(topic, "s", initial_position=InitialPosition.Earliest)
    producer = txn_client.create_producer(topic)
    txn = txn_client.new_transaction()
    for i in range(3):
        producer.send(b"dropped-%d" % i, transaction=txn)
    txn.abort()
    assert txn.state is TransactionState.ABORTED
    producer.send(b"after")  # (the first message delivered: the aborted ones are not, before or after it)
    assert consumer.receive(RECEIVE_MS).data() == b"after"
    assert _nothing_delivered(consumer)


def test_send_async_in_a_transaction_keeps_the_order_of_sends_waiting_for_the_partition(txn_client, backend):
    topic = _name("txn-async")
    consumer = txn_client.subscribe(topic, "s", initial_position=InitialPosition.Earliest)
    producer = txn_client.create_producer(topic, batching_enabled=True, batching_max_messages=7,
                                          batching_max_publish_delay_ms=10)
    txn = txn_client.new_transaction()
    results = []
    for i in range(50):  # (the first waits for the partition's registration; the next ones queue behind it)
        producer.send_async(b"%02d" % i, lambda result, _id: results.append(result), transaction=txn)
    txn.commit()  # (waits for every send of the transaction)
    assert results == [pulsarfast.Result.Ok] * 50
    assert _receive_all(consumer, 50) == [b"%02d" % i for i in range(50)]


def test_a_batch_never_mixes_transactions(txn_client):
    topic = _name("txn-batches")
    consumer = txn_client.subscribe(topic, "s", initial_position=InitialPosition.Earliest)
    producer = txn_client.create_producer(topic, batching_enabled=True, batching_max_messages=1000,
                                          batching_max_publish_delay_ms=60000)
    first, second = txn_client.new_transaction(), txn_client.new_transaction()
    for i in range(3):  # (interleaved: each switch closes the open batch)
        producer.send_async(b"a%d" % i, None, transaction=first)
        producer.send_async(b"b%d" % i, None, transaction=second)
        producer.send_async(b"n%d" % i, None)
    producer.flush()
    first.abort()
    second.commit()
    assert sorted(_receive_all(consumer, 6)) == [b"b0", b"b1", b"b2", b"n0", b"n1", b"n2"]
    assert _nothing_delivered(consumer)


def test_consume_transform_produce_after_an_abort_outputs_each_message_once(txn_client, txn_broker):
    source, output = _name("txn-in"), _name("txn-out")
    feeder = txn_client.create_producer(source, batching_enabled=True, batching_max_publish_delay_ms=5)
    for i in range(10):
        feeder.send_async(b"in%d" % i, None)
    feeder.flush()
    consumer = txn_client.subscribe(source, "work", initial_position=InitialPosition.Earliest)
    producer = txn_client.create_producer(output, batching_enabled=True, batching_max_publish_delay_ms=60000)
    reader = txn_client.subscribe(output, "check", initial_position=InitialPosition.Earliest)

    def transform(txn) -> None:
        for message in [consumer.receive(RECEIVE_MS) for _ in range(10)]:
            producer.send_async(message.data().upper(), None, transaction=txn)
            consumer.acknowledge(message, transaction=txn)

    attempt = txn_client.new_transaction()
    transform(attempt)
    attempt.abort()  # (the worker "crashed": its output dropped, its input acknowledged by nobody)
    consumer.redeliver_unacknowledged_messages()
    with txn_client.new_transaction() as txn:
        transform(txn)
    assert txn.state is TransactionState.COMMITTED
    assert _receive_all(reader, 10) == [b"IN%d" % i for i in range(10)]
    assert _nothing_delivered(reader)
    assert wait_for(lambda: _backlog(txn_broker, source, "work") == 0, "threads", timeout=15)


def test_a_with_block_commits_at_its_end_and_aborts_when_it_raises(txn_client):
    topic = _name("txn-with")
    consumer = txn_client.subscribe(topic, "s", initial_position=InitialPosition.Earliest)
    producer = txn_client.create_producer(topic)
    with pytest.raises(RuntimeError):
        with txn_client.new_transaction() as failed:
            producer.send(b"dropped", transaction=failed)
            raise RuntimeError("the block failed")
    assert failed.state is TransactionState.ABORTED
    with txn_client.new_transaction() as kept:
        producer.send(b"kept", transaction=kept)
    assert kept.state is TransactionState.COMMITTED
    assert consumer.receive(RECEIVE_MS).data() == b"kept"
    assert _nothing_delivered(consumer)


def test_an_acknowledgement_held_by_another_transaction_raises_transaction_conflict(txn_client):
    topic = _name("txn-conflict")
    consumer = txn_client.subscribe(topic, "s", consumer_type=pulsarfast.ConsumerType.Shared,
                                    initial_position=InitialPosition.Earliest)
    txn_client.create_producer(topic).send(b"x")
    message = consumer.receive(RECEIVE_MS)
    holder, other = txn_client.new_transaction(), txn_client.new_transaction()
    consumer.acknowledge(message, transaction=holder)
    with pytest.raises(pulsarfast.TransactionConflict):
        consumer.acknowledge(message, transaction=other)
    with pytest.raises(pulsarfast.TransactionConflict):  # (as the Java client: the failed operation fails the commit)
        other.commit()
    assert other.state is TransactionState.ABORTED
    holder.commit()
    assert holder.state is TransactionState.COMMITTED


def test_an_ended_transaction_refuses_sends_acknowledgements_and_a_second_end(txn_client):
    topic = _name("txn-ended")
    producer = txn_client.create_producer(topic)
    consumer = txn_client.subscribe(topic, "s", initial_position=InitialPosition.Earliest)
    producer.send(b"x")
    message = consumer.receive(RECEIVE_MS)
    txn = txn_client.new_transaction()
    txn.commit()
    with pytest.raises(pulsarfast.InvalidTxnStatusError):
        producer.send(b"late", transaction=txn)
    with pytest.raises(pulsarfast.InvalidTxnStatusError):
        consumer.acknowledge(message, transaction=txn)
    with pytest.raises(pulsarfast.InvalidTxnStatusError):
        txn.commit()
    with pytest.raises(pulsarfast.InvalidTxnStatusError):
        txn.abort()


def test_a_transaction_past_its_timeout_is_aborted_by_its_coordinator(txn_client):
    topic = _name("txn-timeout")
    consumer = txn_client.subscribe(topic, "s", initial_position=InitialPosition.Earliest)
    producer = txn_client.create_producer(topic)
    txn = txn_client.new_transaction(timeout_ms=1000)
    producer.send(b"never", transaction=txn)
    producer.send(b"after")  # (held back behind the open transaction until its coordinator ends it)
    assert consumer.receive(30000).data() == b"after"  # (so the coordinator aborted it: "never" is not before)
    assert txn.state is TransactionState.TIME_OUT
    with pytest.raises(pulsarfast.InvalidTxnStatusError, match="timed out"):
        txn.commit()
    with pytest.raises(pulsarfast.TransactionNotFound):  # (the coordinator's own word, through a handle by id)
        txn_client.transaction(txn.id).commit()
    txn.abort()  # (aborted already: nothing to do)
    assert _nothing_delivered(consumer)


def test_a_transaction_taken_up_by_id_is_committed_by_another_client(txn_client, make_client, txn_broker):
    topic = _name("txn-by-id")
    consumer = txn_client.subscribe(topic, "s", initial_position=InitialPosition.Earliest)
    txn = txn_client.new_transaction()
    txn_client.create_producer(topic).send(b"from the opener", transaction=txn)
    other = make_client(txn_broker)
    handle = other.transaction((txn.id.most_bits, txn.id.least_bits))
    assert handle.id == txn.id and str(handle.id) == "(%d,%d)" % txn.id
    other.create_producer(topic).send(b"from another client", transaction=handle)
    handle.commit()
    assert sorted(_receive_all(consumer, 2)) == [b"from another client", b"from the opener"]


def test_the_coordinator_reloading_mid_transaction_is_followed(make_client, private_txn_broker):
    client = make_client(private_txn_broker)
    topic = _name("txn-moved")
    consumer = client.subscribe(topic, "s", initial_position=InitialPosition.Earliest)
    producer = client.create_producer(topic)
    txn = client.new_transaction()
    producer.send(b"before", transaction=txn)
    private_txn_broker.unload_coordinator()
    # a new partition to register (ADD_PARTITION_TO_TXN on the reloaded coordinator), then the end
    client.create_producer(topic + "-2").send(b"elsewhere", transaction=txn)
    producer.send(b"after", transaction=txn)
    txn.commit()
    assert _receive_all(consumer, 2) == [b"before", b"after"]
    assert client.new_transaction().state is TransactionState.OPEN


def test_a_broker_without_a_coordinator_refuses_a_transaction_at_once(make_client, pulsar_broker):
    client = make_client(pulsar_broker)  # (the run's plain broker: transactionCoordinatorEnabled=false)
    with pytest.raises(pulsarfast.TransactionCoordinatorNotFoundError, match="transactionCoordinatorEnabled"):
        client.new_transaction()


@pytest.mark.parametrize("value", [0, -5, 1.5, "60000", True])
def test_new_transaction_checks_its_timeout(value):
    client = pulsarfast.Client("pulsar://127.0.0.1:9", backend="threads")
    try:
        with pytest.raises(ValueError, match="timeout_ms"):
            client.new_transaction(timeout_ms=value)
        with pytest.raises(ValueError, match="transaction id"):
            client.transaction((1, -1))
    finally:
        client.close()


def test_asyncio_transactions_commit_abort_and_async_with(txn_broker):
    import pulsarfast.asyncio as pulsar_asyncio

    async def main():
        client = pulsar_asyncio.Client(txn_broker.service_url, operation_timeout_seconds=15)
        try:
            topic = _name("txn-aio")
            producer = await client.create_producer(topic)
            consumer = await client.subscribe(topic, "s", initial_position=pulsar_asyncio.InitialPosition.Earliest)
            async with await client.new_transaction() as txn:
                await producer.send(b"a", transaction=txn)
                await producer.send(b"b", transaction=txn)
            assert txn.state is TransactionState.COMMITTED
            with pytest.raises(RuntimeError):
                async with await client.new_transaction() as dropped:
                    await producer.send(b"dropped", transaction=dropped)
                    raise RuntimeError("the block failed")
            assert dropped.state is TransactionState.ABORTED
            first = await consumer.receive()
            ack = await client.new_transaction()
            await consumer.acknowledge(first, transaction=ack)
            await ack.commit()
            second = await consumer.receive()
            await producer.send(b"c")
            assert [first.data(), second.data(), (await consumer.receive()).data()] == [b"a", b"b", b"c"]
            ended = await client.new_transaction()
            await ended.abort()
            with pytest.raises(pulsar_asyncio.PulsarException) as refused:
                await ended.commit()
            assert refused.value.error() == pulsarfast.Result.InvalidTxnStatusError
        finally:
            await client.close()

    asyncio.run(asyncio.wait_for(main(), 60))


def test_commit_async_and_abort_async_report_their_outcome_to_a_callback(txn_client, backend):
    topic = _name("txn-end-async")
    consumer = txn_client.subscribe(topic, "s", initial_position=InitialPosition.Earliest)
    producer = txn_client.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=60000)
    outcomes = []
    kept, dropped = txn_client.new_transaction(), txn_client.new_transaction()
    producer.send_async(b"kept", None, transaction=kept)
    producer.send_async(b"dropped", None, transaction=dropped)
    dropped.abort_async(lambda result: outcomes.append(("abort", result)))
    kept.commit_async(lambda result: outcomes.append(("commit", result)))
    wait_for(lambda: len(outcomes) == 2, backend, timeout=15)
    assert sorted(outcomes) == [("abort", pulsarfast.Result.Ok), ("commit", pulsarfast.Result.Ok)]
    assert consumer.receive(RECEIVE_MS).data() == b"kept"
    refused = []
    kept.commit_async(refused.append)  # (ended: refused at once)
    assert refused == [pulsarfast.Result.InvalidTxnStatusError]


@pytest.mark.timeout(300)  # (a broker killed and started again, its coordinator recovered: over 60 s under load)
def test_a_transaction_survives_its_coordinators_broker_restarting(make_client, private_txn_broker):
    client = make_client(private_txn_broker, operation_timeout_seconds=60)
    topic = _name("txn-restart")
    producer = client.create_producer(topic)
    consumer = client.subscribe(topic, "s", initial_position=InitialPosition.Earliest)
    txn = client.new_transaction(timeout_ms=300000)
    producer.send(b"before", transaction=txn)
    private_txn_broker.kill(keep_data=True)  # (SIGKILL: the coordinator recovers the transaction from its log)
    private_txn_broker.start()
    producer.send(b"after", transaction=txn)  # (the producer and the coordinator connected again)
    client.create_producer(topic + "-2").send(b"elsewhere", transaction=txn)
    txn.commit()
    assert _receive_all(consumer, 2) == [b"before", b"after"]


def test_flush_waits_for_sends_queued_behind_a_partitions_registration(txn_client, backend):
    topic = _name("txn-flush")
    producer = txn_client.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=60000)
    txn = txn_client.new_transaction()
    outcomes = []
    for i in range(200):  # (the first waits for the registration; the others queue behind it)
        producer.send_async(b"%d" % i, lambda result, _id: outcomes.append(result), transaction=txn)
    producer.flush()
    assert outcomes == [pulsarfast.Result.Ok] * 200
    txn.commit()
