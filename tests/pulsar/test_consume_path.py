"""The consumer's fast path (a batch taken whole from the queue, its messages
handed out by receive() without the queue, acknowledgements grouped without a
lock), against a real broker on both backends: several receivers at once get
every message exactly once, every acknowledgement reaches the broker, permits
keep flowing past many times the receiver queue, a backlog of batches larger
than a tenth of the queue is asked for one entry at a time with the broker's
count lifted to exactly one (read from the FLOW commands a recording relay saw,
and from the broker's count of entries read from storage), permits held back
are granted when the application waits, and the fields of a batch's messages
are each message's own."""
from __future__ import annotations

import gc
import threading

import pytest

import pulsarfast as pulsar
import pulsarfast.consuming.consumer as consumer_module
from pulsarfast.wire import codec, proto
from pulsarfast.wire.message import UNTRACK_STRETCH
from tests.support.pulsar_broker import STORAGE_ENTRIES_READ
from tests.support.pulsar_helpers import bodies_of, produce, subscription_stats
from tests.support.waiting import run_blocking, wait_for

pytestmark = pytest.mark.timeout(120)

RECEIVE_MS = 10_000


def produce_batched(client, topic, count, batch=100, max_delay_ms=10):
    """m-0 ... m-<count - 1> in batches of up to batch messages (each sent after max_delay_ms): the bodies."""
    bodies = bodies_of(b"m", count)
    produce(client, topic, bodies, batching_enabled=True, batching_max_messages=batch,
            batching_max_publish_delay_ms=max_delay_ms, block_if_queue_full=True)
    return bodies


def backlog(broker, backend, topic, subscription):
    return subscription_stats(broker, backend, topic, subscription)["msgBacklog"]


def test_many_receivers_at_once_get_every_batched_message_exactly_once(client, pulsar_broker, pulsar_topic, backend):
    consumer = client.subscribe(pulsar_topic, "sub", consumer_type=pulsar.ConsumerType.Shared,
                                initial_position=pulsar.InitialPosition.Earliest, receiver_queue_size=50)
    bodies = produce_batched(client, pulsar_topic, 2000)
    received: list[bytes] = []
    errors: list[BaseException] = []

    def receive_until_timeout():
        try:
            while True:
                try:
                    message = consumer.receive(1000)
                except pulsar.Timeout:
                    return
                received.append(message.data())
                consumer.acknowledge(message)
        except BaseException as exc:  # reported by the test, not lost in a thread
            errors.append(exc)

    if backend == "gevent":
        import gevent
        gevent.joinall([gevent.spawn(receive_until_timeout) for _ in range(4)], timeout=60, raise_error=True)
    else:
        threads = [threading.Thread(target=receive_until_timeout) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not any(thread.is_alive() for thread in threads)
    assert errors == []
    assert sorted(received) == sorted(bodies)  # every one, none twice (the queue is 40 times smaller)
    consumer.close()  # (grouped acknowledgements go before the close)
    assert wait_for(lambda: backlog(pulsar_broker, backend, pulsar_topic, "sub") == 0, backend, timeout=20)


def test_a_batch_messages_fields_are_each_its_own(client, pulsar_topic):
    consumer = client.subscribe(pulsar_topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(pulsar_topic, batching_enabled=True, batching_max_messages=10,
                                      batching_max_publish_delay_ms=60_000, producer_name="batcher")
    results = []
    for index in range(10):
        producer.send_async(b"body-%d" % index, lambda result, message_id: results.append((result, message_id)),
                            properties={"index": str(index)}, partition_key="key-%d" % index,
                            event_timestamp=1000 + index)
    producer.flush()
    assert [result for result, _ in results] == [pulsar.Result.Ok] * 10
    messages = [consumer.receive(RECEIVE_MS) for _ in range(10)]
    for index, message in enumerate(messages):
        assert message.data() == b"body-%d" % index
        assert message.properties() == {"index": str(index)}
        assert message.partition_key() == "key-%d" % index
        assert message.event_timestamp() == 1000 + index
        assert message.producer_name() == "batcher"
        assert message.message_id() == results[index][1]
        assert message.message_id().batch_index() == index
        assert message.redelivery_count() == 0
        assert message.publish_timestamp() > 0
    assert [m.sequence_id() for m in messages] == list(range(messages[0].sequence_id(),
                                                             messages[0].sequence_id() + 10))
    producer.close()


def test_a_received_batchs_messages_are_left_out_of_the_cycle_collector(client, pulsar_topic):
    # (thousands queue in a consumer: tracked, they set off full collections; see codec.untrack)
    consumer = client.subscribe(pulsar_topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    count = UNTRACK_STRETCH + 5  # (more than one stretch of codec.untrack)
    producer = client.create_producer(pulsar_topic, batching_enabled=True, batching_max_messages=count,
                                      batching_max_publish_delay_ms=60_000)
    for index in range(count):
        producer.send_async(b"body-%d" % index, None, properties={"index": str(index)})
    producer.flush()
    messages = [consumer.receive(RECEIVE_MS) for _ in range(count)]
    compiled = codec.IMPLEMENTATION == "cython"
    for index, message in enumerate(messages):
        assert message.data() == b"body-%d" % index and message.properties() == {"index": str(index)}
        assert message.message_id().batch_index() == index
        assert gc.is_tracked(message) is not compiled
        assert gc.is_tracked(message.message_id()) is not compiled
    for message in messages:
        consumer.acknowledge(message)
    producer.close()
    consumer.close()


def test_acknowledged_batches_leave_no_backlog_after_close(client, pulsar_broker, pulsar_topic, backend):
    consumer = client.subscribe(pulsar_topic, "sub", consumer_type=pulsar.ConsumerType.Shared,
                                initial_position=pulsar.InitialPosition.Earliest, receiver_queue_size=100)
    bodies = produce_batched(client, pulsar_topic, 1500)
    got = []
    for _ in bodies:
        message = consumer.receive(RECEIVE_MS)
        got.append(message.data())
        consumer.acknowledge(message)
    assert sorted(got) == sorted(bodies)
    with pytest.raises(pulsar.Timeout):
        consumer.receive(300)
    consumer.close()
    assert wait_for(lambda: backlog(pulsar_broker, backend, pulsar_topic, "sub") == 0, backend, timeout=20)


def test_send_async_without_a_callback_is_sent_and_flush_waits_for_it(client, pulsar_topic):
    """The official client accepts callback=None; the message still goes, and flush() waits for its receipt."""
    consumer = client.subscribe(pulsar_topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    for batching in (False, True):
        producer = client.create_producer(pulsar_topic, batching_enabled=batching)
        producer.send_async(b"no-callback-%d" % batching, None)
        producer.flush()
        producer.close()
    assert sorted(consumer.receive(RECEIVE_MS).data() for _ in range(2)) == [b"no-callback-0", b"no-callback-1"]
    producer = client.create_producer(pulsar_topic)
    with pytest.raises(TypeError):  # (the official client's binding refuses it so)
        producer.send_async(b"x", "not callable")
    producer.close()


def test_sends_async_behind_others_are_written_by_their_receipts_without_a_flush(client, pulsar_topic, backend):
    """send_async() behind frames still waiting for their receipts leaves its frame queued, to be
    written as the receipts come in (many frames, one write): every one is written, and answered,
    though the program never calls flush()."""
    consumer = client.subscribe(pulsar_topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(pulsar_topic, block_if_queue_full=True)
    answers = []
    bodies = bodies_of(b"q", 500)
    for body in bodies:
        producer.send_async(body, lambda result, _id: answers.append(result))
    assert wait_for(lambda: len(answers) == len(bodies), backend, timeout=20)
    assert set(answers) == {pulsar.Result.Ok}
    assert sorted(consumer.receive(RECEIVE_MS).data() for _ in bodies) == sorted(bodies)
    producer.close()


def sent_flow_permits(stream: bytes) -> list:
    """The messagePermits of every FLOW command in what a client sent, in order."""
    permits = []
    for command, _metadata, _payload, _ok in codec.FrameDecoder().feed(stream):
        kind, record = proto.decode_command(command)
        if kind == proto.FLOW:
            permits.append(record.messagePermits)
    return permits


def test_a_batched_backlog_is_asked_for_one_entry_at_a_time_and_read_from_storage_once(
        make_client, private_pulsar_broker, pulsar_topic, backend, fault_proxy_factory, monkeypatch):
    # (a broker of its own: the storage-reads metric counts every topic's reads)
    pulsar_broker = private_pulsar_broker
    client = make_client(broker=pulsar_broker)
    # The broker reads min(permits, 100) entries per dispatch and sends only those its permits pay
    # for (permits count messages): with 500-message batches, a count of 2..501 when it reads makes it
    # read many entries to send one or two, and read the rest again later. So the consumer grants one
    # permit at subscribe, then only grants that lift the broker's count from zero or below to exactly 1.
    monkeypatch.setattr(consumer_module, "OWED_RELEASE_SECONDS", 3600.0)  # (the safety net stays out of it)
    produce_batched(client, pulsar_topic, 3000, batch=500, max_delay_ms=60_000)  # (batches of exactly 500)
    proxy = fault_proxy_factory(pulsar_broker.host, pulsar_broker.port)
    proxy.record_upstream()
    proxied = pulsar.Client("pulsar://%s" % proxy.address, operation_timeout_seconds=15, backend=backend)
    read_before = run_blocking(backend, pulsar_broker.metric_total, STORAGE_ENTRIES_READ)
    try:
        consumer = proxied.subscribe(pulsar_topic, "sub", consumer_type=pulsar.ConsumerType.Shared,
                                     initial_position=pulsar.InitialPosition.Earliest, receiver_queue_size=1000)
        # the first entry's 500 permits were owed: the count goes back to 1 at once, and a second batch comes
        wait_for(lambda: consumer.stats()["received"] == 1000, backend, message="the first two batches")

        def drain():
            bodies = []
            for _ in range(3000):
                message = consumer.receive(RECEIVE_MS)
                bodies.append(message.data())
                consumer.acknowledge(message)
            return bodies

        bodies = drain()
        consumer.close()
    finally:
        proxied.close()
    read = run_blocking(backend, pulsar_broker.metric_total, STORAGE_ENTRIES_READ) - read_before
    assert sorted(bodies) == sorted(b"m-%d" % index for index in range(3000))
    flows = [permits for stream in proxy.recorded_upstream() for permits in sent_flow_permits(stream)]
    # one permit, then each entry's 500 (the last one leaves the broker waiting for a seventh)
    assert flows == [1] + [500] * 6, flows
    assert read <= 6, "the broker read %d entries from storage to send 6" % read


def test_a_consumer_that_waits_grants_the_permits_it_holds(client, pulsar_broker, pulsar_topic, backend, monkeypatch):
    # Read permits wait while the broker's count is above zero (it has an entry to send, or waits for
    # one); a receive() that has waited OWED_RELEASE_SECONDS with nothing arriving grants all of them.
    monkeypatch.setattr(consumer_module, "OWED_RELEASE_SECONDS", 3600.0)  # (not during the drain, however slow)
    produce_batched(client, pulsar_topic, 1000, batch=500, max_delay_ms=60_000)
    consumer = client.subscribe(pulsar_topic, "sub", consumer_type=pulsar.ConsumerType.Shared,
                                initial_position=pulsar.InitialPosition.Earliest, receiver_queue_size=1000)
    for _ in range(1000):
        consumer.acknowledge(consumer.receive(RECEIVE_MS))

    def broker_permits():
        consumers = subscription_stats(pulsar_broker, backend, pulsar_topic, "sub")["consumers"]
        assert len(consumers) == 1, consumers
        return consumers[0]["availablePermits"]

    wait_for(lambda: broker_permits() == 1, backend,
             message="the broker's count lifted to 1 after the second batch")
    monkeypatch.setattr(consumer_module, "OWED_RELEASE_SECONDS", 1.0)
    with pytest.raises(pulsar.Timeout):
        consumer.receive(2500)
    assert broker_permits() == 1000  # the whole queue: nothing is unread
    producer = client.create_producer(pulsar_topic, batching_enabled=False)
    producer.send(b"after")
    assert consumer.receive(RECEIVE_MS).data() == b"after"
    producer.close()
    consumer.close()
