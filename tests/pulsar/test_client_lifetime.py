"""What a Client leaves behind, against the real broker, on both backends: after ``close()``
returns no thread of the client remains; a client dropped without ``close()`` (with the
producers, consumers, listener and reader it made) is freed the moment its last reference goes,
with no ``gc.collect()``, and its threads (under gevent: its greenlets) are gone by the next
statement, as the official client's destructor joins its own: the same steps on the official
client leave no thread either. Dropped on one of its own tasks (a listener, a send callback) it
does not wait for that task, which ends once the call returns; dropped where nothing may wait
(the gevent hub, the threads' timer thread) it shuts down on a task of its own. A client is kept
alive by any producer, consumer or reader its user still holds, as the official one is."""
from __future__ import annotations

import contextlib
import functools
import gc
import sys
import threading
import weakref

import pytest

import pulsarfast as pulsar
from msgengine.runtime import get_backend
from pulsarfast.network import lifetime
from tests.support.pulsar_helpers import needs_official, official
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(120)

WAIT = 30.0
wait_for = functools.partial(wait_for, timeout=WAIT)


def new_threads(before: set) -> list:
    return [t for t in threading.enumerate() if t not in before and t.is_alive()]


def live_greenlets() -> set:
    """The greenlets started and not ended (gevent's tasks), but the hubs, the main ones and the
    workers of the hub's thread pool (gevent's, shared by the process and kept a while after its
    last job, such as a name resolution: none of them is a client's task)."""
    if "gevent" not in sys.modules:
        return set()
    import greenlet

    return {each for each in gc.get_objects()  # (type(), not isinstance(): a dead weak proxy raises)
            if issubclass(type(each), greenlet.greenlet) and each.parent is not None and not each.dead
            and (bool(each) or getattr(each, "started", False)) and type(each).__name__ not in ("Hub", "_WorkerGreenlet")}


def new_greenlets(before: set) -> list:
    return list(live_greenlets() - before)


def tasks_now() -> tuple:
    """What a client's tasks are counted against: the threads (Python's) and the greenlets alive now."""
    return set(threading.enumerate()), live_greenlets()


def new_tasks(before: tuple) -> tuple:
    return new_threads(before[0]), new_greenlets(before[1])


@contextlib.contextmanager
def no_collection():
    """No automatic gc.collect() meanwhile: what is freed is freed by its reference count."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


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


def use_and_drop(make_client, topic: str, subscription: str) -> tuple:
    """The steps: a client, a producer and a consumer; a message sent, received and acknowledged;
    then every reference dropped, without close(), as this function returns. A weak reference to
    the client, and its connections (pulsarfast's)."""
    client = make_client()
    producer = client.create_producer(topic)
    consumer = client.subscribe(topic, subscription)
    producer.send(b"one")
    consumer.acknowledge(consumer.receive(10_000))
    connections = client.broker_connections() if hasattr(client, "broker_connections") else []
    return weakref.ref(client), connections


def test_no_thread_of_the_client_remains_after_close(pulsar_broker, pulsar_topic, backend):
    before = set(threading.enumerate())
    client, _parts = busy_client(pulsar_broker.service_url, backend, pulsar_topic)
    if backend == "threads":
        assert new_threads(before), "the threads backend reads on threads of its own"
    client.close()
    assert new_threads(before) == []


@needs_official
def test_a_dropped_client_leaves_no_task_at_the_next_statement_as_the_official_one(pulsar_broker, pulsar_topic,
                                                                                     backend):
    quiet = official.ConsoleLogger(official.LoggerLevel.Error)  # (a Python logger would add a thread per C++ one)
    clients = {
        "official": lambda: official.Client(pulsar_broker.service_url, operation_timeout_seconds=15, logger=quiet),
        "pulsarfast": lambda: pulsar.Client(pulsar_broker.service_url, backend=backend, operation_timeout_seconds=15),
    }
    left, freed = {}, {}
    for name, make_client in clients.items():
        before = tasks_now()
        with no_collection():
            gone, connections = use_and_drop(make_client, pulsar_topic, "drop-" + name)
            left[name] = new_tasks(before)  # (the statement right after the drop)
            freed[name] = gone() is None
        if name == "pulsarfast":
            assert all(conn.is_closed() for conn in connections)
    assert left["official"] == ([], [])
    assert left["pulsarfast"] == left["official"]
    assert freed["pulsarfast"], "the client outlived its last reference (a reference cycle?)"


def test_a_busy_client_dropped_without_close_is_freed_at_once_and_its_tasks_are_gone(pulsar_broker,
                                                                                    pulsar_topic, backend):
    before = tasks_now()
    client, parts = busy_client(pulsar_broker.service_url, backend, pulsar_topic)
    gone = weakref.ref(client)
    connections = client.broker_connections()
    assert connections
    with no_collection():
        del client, parts
        left = new_tasks(before)
        assert gone() is None, "the dropped client is still referenced: %r" % gc.get_referrers(gone())
    assert all(conn.is_closed() for conn in connections)
    assert left == ([], [])


def test_a_producer_dropped_while_its_client_lives_is_still_closed_with_the_client(pulsar_broker, pulsar_topic,
                                                                                   backend):
    client = pulsar.Client(pulsar_broker.service_url, backend=backend, operation_timeout_seconds=15)
    producer = client.create_producer(pulsar_topic)
    consumer = client.subscribe(pulsar_topic, "dropped-producer")
    sent = []
    producer.send_async(b"in flight", lambda result, _id: sent.append(result))
    kept = weakref.ref(producer)
    del producer
    gc.collect()
    assert kept() is not None, "the client let go of a producer its user dropped"
    client.close()  # (which flushes it, and closes it on the broker)
    assert sent == [pulsar.Result.Ok]
    del consumer


def note_where_freed(backend: str, record: dict, client) -> None:
    """Note in record["freed on"], when client is freed, the task (thread or greenlet) it is freed on
    (by a finalizer of the test's own, which runs just before the client's)."""
    current_task_id = get_backend(backend).current_task_id
    weakref.finalize(client, lambda: record.setdefault("freed on", current_task_id()))


@pytest.mark.parametrize("where", ["listener", "send callback"])
def test_a_client_dropped_on_one_of_its_own_tasks_does_not_wait_for_that_task(pulsar_broker, pulsar_topic, backend,
                                                                              where, monkeypatch):
    monkeypatch.setattr(lifetime, "TASK_END_SECONDS", 3600.0)  # (a wait for its own task would hang, not pass later)
    b = get_backend(backend)
    before = tasks_now()
    armed, returned = b.event(), b.event()
    holder: dict = {}
    record: dict = {}

    def drop() -> None:
        armed.wait(WAIT)  # (until the test let go of its own references)
        record["dropped on"] = b.current_task_id()
        if backend == "threads":
            record["thread"] = threading.current_thread().name
        holder.clear()  # the last references: the client goes on this task (here, or as its caller returns)
        returned.set()

    client = pulsar.Client(pulsar_broker.service_url, backend=backend, operation_timeout_seconds=15)
    gone = weakref.ref(client)
    note_where_freed(backend, record, client)
    producer = client.create_producer(pulsar_topic)
    if where == "listener":
        producer.send(b"drop the client")
        consumer = client.subscribe(pulsar_topic, "own-task", initial_position=pulsar.InitialPosition.Earliest,
                                    message_listener=lambda c, m: drop())
    else:
        consumer = client.subscribe(pulsar_topic, "own-task")
        producer.send_async(b"drop the client", lambda result, message_id: drop())
    connections = client.broker_connections()
    holder.update(client=client, producer=producer, consumer=consumer)
    del client, producer, consumer
    armed.set()
    wait_for(returned.is_set, backend, message="the call that dropped the client returned")
    wait_for(lambda: gone() is None, backend, message="the client freed")
    assert record["freed on"] == record["dropped on"] != b.current_task_id()
    if backend == "threads":
        assert record["thread"].startswith("msgengine-"), "dropped on %s, not on one of the client's threads" % (
            record["thread"],)
    wait_for(lambda: all(conn.is_closed() for conn in connections), backend, message="its connections closed")
    wait_for(lambda: new_tasks(before) == ([], []), backend, message=lambda: "left: %r" % (new_tasks(before),))


def test_a_client_dropped_where_nothing_may_wait_shuts_down_on_a_task_of_its_own(pulsar_broker, pulsar_topic,
                                                                                  backend):
    b = get_backend(backend)
    before = tasks_now()
    holder: dict = {}
    record: dict = {}
    client = pulsar.Client(pulsar_broker.service_url, backend=backend, operation_timeout_seconds=15)
    gone = weakref.ref(client)
    note_where_freed(backend, record, client)
    producer = client.create_producer(pulsar_topic)
    consumer = client.subscribe(pulsar_topic, "nowhere-to-wait")
    producer.send(b"one")
    consumer.acknowledge(consumer.receive(10_000))
    connections = client.broker_connections()
    holder.update(client=client, producer=producer, consumer=consumer)
    del client, producer, consumer

    def drop() -> None:
        record["dropped on"] = b.current_task_id()
        holder.clear()

    if backend == "gevent":
        import gevent

        hub = gevent.get_hub()
        hub.loop.run_callback(drop)  # (a callback of the hub itself)
        wait_for(lambda: gone() is None, backend, message="the client freed")
        assert record["freed on"] == record["dropped on"] == id(hub)
    else:
        b.call_later(0.0, drop)  # (on the timer thread, which every timer of the process waits for)
        wait_for(lambda: gone() is None, backend, message="the client freed")
        assert record["freed on"] == record["dropped on"] != b.current_task_id()
    wait_for(lambda: all(conn.is_closed() for conn in connections), backend, message="its connections closed")
    wait_for(lambda: new_tasks(before) == ([], []), backend, message=lambda: "left: %r" % (new_tasks(before),))


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
