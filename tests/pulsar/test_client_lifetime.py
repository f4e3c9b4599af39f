"""What a Client leaves behind, against the real broker, on both backends: after ``close()``
returns no thread of the client remains, and a client dropped without ``close()`` (with the
producers, consumers, listener and reader it made) is collected by ``gc.collect()`` and its
connections close, so its threads end, as the official client's destructor closes it. A client
is kept alive by any producer, consumer or reader its user still holds, as the official one is."""
from __future__ import annotations

import gc
import threading
import weakref

import pytest

import pulsarfast as pulsar
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(120)


def new_threads(before: set) -> list:
    return [t for t in threading.enumerate() if t not in before and t.is_alive()]


def busy_client(service_url: str, backend: str, topic: str) -> tuple:
    """A client with a producer, a consumer with negative acks and an unacked timeout pending, a
    listener consumer, a dead-letter consumer and a reader, each having moved messages."""
    client = pulsar.Client(service_url, backend=backend, operation_timeout_seconds=15)
    producer = client.create_producer(topic)
    consumer = client.subscribe(topic, "lifetime", consumer_type=pulsar.ConsumerType.Shared,
                                unacked_messages_timeout_ms=10_000, negative_ack_redelivery_delay_ms=100)
    heard = []
    listening = client.subscribe(topic, "lifetime-listener", message_listener=lambda c, m: heard.append(m.data()))
    dead_letters = client.subscribe(topic, "lifetime-dlq", consumer_type=pulsar.ConsumerType.Shared,
                                    dead_letter_policy=pulsar.ConsumerDeadLetterPolicy(max_redeliver_count=1),
                                    negative_ack_redelivery_delay_ms=100)
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    for body in (b"one", b"two"):
        producer.send(body)
    consumer.negative_acknowledge(consumer.receive(10_000))
    consumer.receive(10_000)
    reader.read_next(10_000)
    dead_letters.negative_acknowledge(dead_letters.receive(10_000))
    wait_for(lambda: len(heard) == 2, backend)
    return client, [producer, consumer, listening, dead_letters, reader]


def test_no_thread_of_the_client_remains_after_close(pulsar_broker, pulsar_topic, backend):
    before = set(threading.enumerate())
    client, _parts = busy_client(pulsar_broker.service_url, backend, pulsar_topic)
    if backend == "threads":
        assert new_threads(before), "the threads backend reads on threads of its own"
    client.close()
    assert new_threads(before) == []


def test_a_client_dropped_without_close_is_collected_and_its_threads_end(pulsar_broker, pulsar_topic, backend):
    before = set(threading.enumerate())
    client, parts = busy_client(pulsar_broker.service_url, backend, pulsar_topic)
    gone = weakref.ref(client)
    connections = client.broker_connections()
    assert connections
    del client, parts
    gc.collect()
    assert gone() is None, "the dropped client is still referenced: %r" % gc.get_referrers(gone())
    wait_for(lambda: all(conn.is_closed() for conn in connections), backend, message="its connections closed")
    wait_for(lambda: new_threads(before) == [], backend, message=lambda: "threads left: %r" % new_threads(before))


def test_a_producer_the_user_holds_keeps_its_client(pulsar_broker, pulsar_topic, backend):
    client = pulsar.Client(pulsar_broker.service_url, backend=backend, operation_timeout_seconds=15)
    gone = weakref.ref(client)
    producer = client.create_producer(pulsar_topic)
    consumer = client.subscribe(pulsar_topic, "kept")
    del client
    gc.collect()
    assert gone() is not None
    producer.send(b"still here")
    assert consumer.receive(10_000).data() == b"still here"
    gone().close()
