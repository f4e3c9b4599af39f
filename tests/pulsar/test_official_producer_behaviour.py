"""Producer behaviours where pulsarfast must do what the official client 3.13 does, each checked on the
official client (same steps, same expectations) and on pulsarfast on both backends:

1. access modes (``ProducerAccessMode``): ``Exclusive`` is refused while another producer is on the
   topic (ProducerFenced) and keeps Shared ones out (ProducerBusy); ``WaitForExclusive`` blocks
   until the exclusive producer goes (the broker's ``producer_ready=false`` answer does not end the
   create), within the operation timeout (``Timeout``, and the topic is left free); an
   ``ExclusiveWithFencing`` producer fences out an exclusive one (ProducerFenced on its sends for
   good, AlreadyClosed from flush and close) and a shared one (its sends wait; it comes back once
   the exclusive one goes); an exclusive producer keeps the topic across a reconnection; on a
   partitioned topic each partition does all this; ``access_mode`` is type-checked;
2. a message's arguments to ``send`` / ``send_async`` are checked as the official client checks
   them: the same exception class for each bad argument, before anything is sent;
3. the official ``examples/producer.py`` program (send, send_async with a callback, flush, close).
"""
from __future__ import annotations

import datetime
import functools
import threading

import pytest

import pulsarfast
from msgengine.runtime import get_backend
from pulsarfast.wire import proto
from tests.support.pulsar_helpers import (
    official_session, OFFICIAL_LOGGER, needs_official, official, official_client)
from tests.support.waiting import run_blocking, wait_for

pytestmark = pytest.mark.timeout(150)

WAIT = 30.0
RECEIVE_MS = 10_000
wait_for = functools.partial(wait_for, timeout=WAIT)


def outcome(call):
    """What call() gave: "ok", or the class name of the exception it raised."""
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - the outcome is what is compared
        return type(exc).__name__
    return "ok"


def on_task(backend, fn):
    """Run fn() on a task of its own (a thread for the official client: backend None); a dict that gets
    its "result" or "error"; and the task."""
    box: dict = {}

    def run():
        try:
            box["result"] = fn()
        except Exception as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    if backend is None:
        task = threading.Thread(target=run, daemon=True)
        task.start()
        return box, task
    return box, get_backend(backend).spawn(run)


def close_official(*clients):
    """Close official clients (whose close() raises AlreadyClosed when one of its producers was fenced)."""
    for client in clients:
        try:
            client.close()
        except official.AlreadyClosed:
            pass


def stats(broker, backend, topic):
    return run_blocking(backend, broker.topic_stats, topic) if backend else broker.topic_stats(topic)


# --------------------------------------------------------------------------- 1. access modes


def refusal_steps(lib, client, topic):
    """Which creates the broker refuses while a shared or an exclusive producer is on the topic."""
    mode = lib.ProducerAccessMode
    seen = {}
    shared = client.create_producer(topic)
    seen["exclusive while shared"] = outcome(lambda: client.create_producer(topic, access_mode=mode.Exclusive))
    shared.close()
    exclusive = client.create_producer(topic, access_mode=mode.Exclusive)
    seen["shared while exclusive"] = outcome(lambda: client.create_producer(topic))
    seen["exclusive while exclusive"] = outcome(lambda: client.create_producer(topic, access_mode=mode.Exclusive))
    seen["exclusive sends"] = outcome(lambda: exclusive.send(b"mine"))
    exclusive.close()
    seen["shared after the exclusive closed"] = outcome(lambda: client.create_producer(topic).send(b"shared"))
    return seen


REFUSALS_EXPECTED = {
    "exclusive while shared": "ProducerFenced",
    "shared while exclusive": "ProducerBusy",
    "exclusive while exclusive": "ProducerFenced",
    "exclusive sends": "ok",
    "shared after the exclusive closed": "ok",
}


@needs_official
def test_official_exclusive_producer_is_refused_and_refuses_as_the_broker_says(pulsar_broker, pulsar_topic):
    with official_session(pulsar_broker) as client:
        assert refusal_steps(official, client, pulsar_topic) == REFUSALS_EXPECTED


def test_exclusive_producer_is_refused_and_refuses_as_the_broker_says(client, pulsar_topic):
    assert refusal_steps(pulsarfast, client, pulsar_topic) == REFUSALS_EXPECTED


def wait_for_exclusive_steps(lib, client, broker, backend, topic):
    """A WaitForExclusive create blocks while an exclusive producer is on the topic (the broker holds it
    as a waiting publisher, after telling the client producer_ready=false), and returns once that
    producer closes: whether it returned before the close began, and whether it sends then."""
    mode = lib.ProducerAccessMode
    exclusive = client.create_producer(topic, access_mode=mode.Exclusive)
    closing = []
    box, task = on_task(backend, lambda: (client.create_producer(topic, access_mode=mode.WaitForExclusive),
                                          bool(closing)))
    wait_for(lambda: stats(broker, backend, topic).get("waitingPublishers") == 1, backend or "threads",
             message="the broker holding the WaitForExclusive producer")
    exclusive.send(b"still mine")  # (a round trip on the connection: the broker's first answer came before it)
    seen = {"returned while the exclusive one was on the topic": "result" in box or "error" in box}
    closing.append(True)
    exclusive.close()
    task.join(WAIT)
    assert "error" not in box, box
    waiting, returned_after_close_began = box["result"]
    seen["returned after the close began"] = returned_after_close_began
    seen["sends"] = outcome(lambda: waiting.send(b"now mine"))
    seen["shared refused"] = outcome(lambda: client.create_producer(topic))
    waiting.close()
    return seen


WAIT_EXPECTED = {"returned while the exclusive one was on the topic": False, "returned after the close began": True,
                 "sends": "ok", "shared refused": "ProducerBusy"}


@needs_official
def test_official_wait_for_exclusive_blocks_until_the_exclusive_producer_goes(pulsar_broker, pulsar_topic):
    with official_session(pulsar_broker) as client:
        assert wait_for_exclusive_steps(official, client, pulsar_broker, None, pulsar_topic) == WAIT_EXPECTED


def test_wait_for_exclusive_blocks_until_the_exclusive_producer_goes(client, pulsar_broker, pulsar_topic, backend):
    assert wait_for_exclusive_steps(pulsarfast, client, pulsar_broker, backend, pulsar_topic) == WAIT_EXPECTED


def wait_timeout_steps(lib, client, broker, backend, topic):
    """A WaitForExclusive create that the operation timeout ends (Timeout) leaves the topic free: once
    the exclusive producer closes, the broker ends up with no producer (the official client closes the
    one it gave up on when the broker creates it; pulsarfast closes it at once), and a new Exclusive
    one is created."""
    mode = lib.ProducerAccessMode
    exclusive = client.create_producer(topic, access_mode=mode.Exclusive)
    seen = {"wait": outcome(lambda: client.create_producer(topic, access_mode=mode.WaitForExclusive))}
    exclusive.close()
    wait_for(lambda: not stats(broker, backend, topic)["publishers"]
             and not stats(broker, backend, topic).get("waitingPublishers"), backend or "threads",
             message="no producer left on the topic")
    seen["exclusive after"] = outcome(lambda: client.create_producer(topic, access_mode=mode.Exclusive).close())
    return seen


WAIT_TIMEOUT_EXPECTED = {"wait": "Timeout", "exclusive after": "ok"}


@needs_official
def test_official_wait_for_exclusive_ends_at_the_operation_timeout(pulsar_broker, pulsar_topic):
    with official_session(pulsar_broker, operation_timeout_seconds=2) as client:
        assert wait_timeout_steps(official, client, pulsar_broker, None, pulsar_topic) == WAIT_TIMEOUT_EXPECTED


def test_wait_for_exclusive_ends_at_the_operation_timeout(make_client, pulsar_broker, pulsar_topic, backend):
    client = make_client(operation_timeout_seconds=2)
    assert wait_timeout_steps(pulsarfast, client, pulsar_broker, backend, pulsar_topic) == WAIT_TIMEOUT_EXPECTED


def fencing_steps(lib, client, other, topic):
    """An ExclusiveWithFencing producer (of another client: the broker fences a producer out by closing its
    connection) takes the topic from an Exclusive one, which is fenced for good."""
    mode = lib.ProducerAccessMode
    exclusive = client.create_producer(topic, access_mode=mode.Exclusive)
    exclusive.send(b"before")
    fencing = other.create_producer(topic, access_mode=mode.ExclusiveWithFencing)
    seen = {"fenced send": outcome(lambda: exclusive.send(b"after"))}
    results = []
    exclusive.send_async(b"async", lambda result, _id: results.append(result))
    wait_for(lambda: results, "threads", message="the fenced send_async's callback")
    seen["fenced send_async"] = results[0].name
    seen["fenced connected"] = exclusive.is_connected()
    seen["fencing sends"] = outcome(lambda: fencing.send(b"fencing"))
    fencing.close()
    seen["fenced send after the fencing one closed"] = outcome(lambda: exclusive.send(b"later"))
    seen["fenced flush"] = outcome(exclusive.flush)
    seen["fenced close"] = outcome(exclusive.close)
    return seen


FENCING_EXPECTED = {
    "fenced send": "ProducerFenced", "fenced send_async": "ProducerFenced", "fenced connected": False,
    "fencing sends": "ok", "fenced send after the fencing one closed": "ProducerFenced",
    "fenced flush": "AlreadyClosed", "fenced close": "AlreadyClosed",
}


@needs_official
def test_official_exclusive_with_fencing_fences_out_the_exclusive_producer(pulsar_broker, pulsar_topic):
    client, other = official_client(pulsar_broker), official_client(pulsar_broker)
    try:
        assert fencing_steps(official, client, other, pulsar_topic) == FENCING_EXPECTED
    finally:
        close_official(client, other)


def test_exclusive_with_fencing_fences_out_the_exclusive_producer(client, make_client, pulsar_topic):
    assert fencing_steps(pulsarfast, client, make_client(), pulsar_topic) == FENCING_EXPECTED


def fenced_shared_steps(lib, client, other, topic, backend):
    """A Shared producer fenced out waits (its send times out) and comes back once the exclusive one goes."""
    mode = lib.ProducerAccessMode
    shared = client.create_producer(topic, send_timeout_millis=2000)
    fencing = other.create_producer(topic, access_mode=mode.ExclusiveWithFencing)
    seen = {"send while fenced": outcome(lambda: shared.send(b"while"))}
    fencing.close()
    wait_for(shared.is_connected, backend, message="the shared producer created again")
    seen["send after"] = outcome(lambda: shared.send(b"after"))
    shared.close()
    return seen


FENCED_SHARED_EXPECTED = {"send while fenced": "Timeout", "send after": "ok"}


@needs_official
def test_official_fenced_shared_producer_comes_back_when_the_exclusive_one_goes(pulsar_broker, pulsar_topic):
    client, other = official_client(pulsar_broker), official_client(pulsar_broker)
    try:
        assert fenced_shared_steps(official, client, other, pulsar_topic, "threads") == FENCED_SHARED_EXPECTED
    finally:
        close_official(client, other)


def test_fenced_shared_producer_comes_back_when_the_exclusive_one_goes(client, make_client, pulsar_topic, backend):
    assert fenced_shared_steps(pulsarfast, client, make_client(), pulsar_topic, backend) == FENCED_SHARED_EXPECTED


def fenced_waiting_steps(lib, client, other, topic, backend):
    """A WaitForExclusive producer fenced out goes back to the broker's queue: it sends again once the
    fencing producer goes."""
    mode = lib.ProducerAccessMode
    waiting = client.create_producer(topic, access_mode=mode.WaitForExclusive, send_timeout_millis=2000)
    fencing = other.create_producer(topic, access_mode=mode.ExclusiveWithFencing)
    seen = {"send while fenced": outcome(lambda: waiting.send(b"while"))}
    fencing.close()
    wait_for(waiting.is_connected, backend, message="the waiting producer created again")
    seen["send after"] = outcome(lambda: waiting.send(b"after"))
    waiting.close()
    return seen


@needs_official
def test_official_fenced_wait_for_exclusive_producer_waits_again(pulsar_broker, pulsar_topic):
    client, other = official_client(pulsar_broker), official_client(pulsar_broker)
    try:
        assert fenced_waiting_steps(official, client, other, pulsar_topic, "threads") == FENCED_SHARED_EXPECTED
    finally:
        close_official(client, other)


def test_fenced_wait_for_exclusive_producer_waits_again(client, make_client, pulsar_topic, backend):
    assert fenced_waiting_steps(pulsarfast, client, make_client(), pulsar_topic, backend) == FENCED_SHARED_EXPECTED


def test_exclusive_producer_keeps_the_topic_across_a_reconnection(client, pulsar_broker, pulsar_topic, backend):
    exclusive = client.create_producer(pulsar_topic, access_mode=pulsarfast.ProducerAccessMode.Exclusive)
    exclusive.send(b"before")
    epoch = exclusive.partition_producers()[0]._topic_epoch
    assert epoch is not None  # (the broker gave the exclusive producer its topic epoch)
    run_blocking(backend, pulsar_broker.unload_topic, pulsar_topic)
    exclusive.send(b"after")  # (re-created, with its epoch)
    assert exclusive.partition_producers()[0]._topic_epoch == epoch
    with pytest.raises(pulsarfast.ProducerBusy):
        client.create_producer(pulsar_topic)
    exclusive.close()


def partitioned_steps(lib, client, other, topic):
    mode = lib.ProducerAccessMode
    exclusive = client.create_producer(topic, access_mode=mode.Exclusive)
    seen = {"shared while exclusive": outcome(lambda: client.create_producer(topic)),
            "exclusive while exclusive": outcome(lambda: client.create_producer(topic, access_mode=mode.Exclusive))}
    fencing = other.create_producer(topic, access_mode=mode.ExclusiveWithFencing)
    seen["fenced sends"] = sorted({outcome(lambda: exclusive.send(b"x")) for _ in range(3)})
    seen["fencing sends to partitions"] = sorted({fencing.send(b"f").partition() for _ in range(3)})
    seen["fenced close"] = outcome(exclusive.close)
    fencing.close()
    return seen


PARTITIONED_EXPECTED = {"shared while exclusive": "ProducerBusy", "exclusive while exclusive": "ProducerFenced",
                        "fenced sends": ["ProducerFenced"], "fencing sends to partitions": [0, 1, 2],
                        "fenced close": "AlreadyClosed"}


@needs_official
def test_official_partitioned_topic_access_modes_hold_per_partition(pulsar_broker, pulsar_topic):
    pulsar_broker.create_partitioned_topic(pulsar_topic, 3)
    client, other = official_client(pulsar_broker), official_client(pulsar_broker)
    try:
        assert partitioned_steps(official, client, other, pulsar_topic) == PARTITIONED_EXPECTED
    finally:
        close_official(client, other)


def test_partitioned_topic_access_modes_hold_per_partition(client, make_client, pulsar_broker, pulsar_topic, backend):
    run_blocking(backend, pulsar_broker.create_partitioned_topic, pulsar_topic, 3)
    assert partitioned_steps(pulsarfast, client, make_client(), pulsar_topic) == PARTITIONED_EXPECTED


def test_producer_command_carries_the_access_mode_and_the_topic_epoch():
    kind, record = proto.decode_command(proto.producer("t", 1, 2, access_mode=3, topic_epoch=7))
    assert (kind, record.producer_access_mode, record.topic_epoch) == (proto.PRODUCER, 3, 7)
    kind, record = proto.decode_command(proto.producer("t", 1, 2))  # (Shared: the proto's default)
    assert (record.producer_access_mode, record.topic_epoch) == (0, None)


ACCESS_MODE_CASES = [None, 1, "Exclusive"]


@needs_official
@pytest.mark.parametrize("value", ACCESS_MODE_CASES, ids=repr)
def test_access_mode_is_type_checked_as_the_official_client_does(value):
    refusals = []
    for lib, extra in ((official, {"logger": OFFICIAL_LOGGER}), (pulsarfast, {})):
        client = lib.Client("pulsar://127.0.0.1:1", operation_timeout_seconds=1, **extra)
        try:
            with pytest.raises(Exception) as info:
                client.create_producer("t", access_mode=value)
            refusals.append((type(info.value).__name__, str(info.value)))
        finally:
            client.close()
    assert refusals[0][0] == "ValueError"
    assert refusals[1] == refusals[0]


# --------------------------------------------------------------------------- 2. message arguments

#: (argument, value, what the official client 3.13 does with it: "ok" or the exception class's name)
MESSAGE_CASES = [
    ("content", "text", "TypeError"),
    ("content", bytearray(b"x"), "TypeError"),
    ("content", memoryview(b"x"), "TypeError"),
    ("content", 5, "TypeError"),
    ("properties", ["a"], "ValueError"),
    ("properties", {1: "a"}, "TypeError"),
    ("properties", {"a": 1}, "TypeError"),
    ("properties", {"a": None}, "TypeError"),
    ("properties", {"a": b"bytes", b"k": "v"}, "ok"),
    ("partition_key", 5, "ValueError"),
    ("partition_key", b"k", "ValueError"),
    ("ordering_key", 5, "ValueError"),
    ("ordering_key", b"k", "ValueError"),
    ("sequence_id", "1", "ValueError"),
    ("sequence_id", 1.5, "ValueError"),
    ("sequence_id", -5, "ValueError"),
    ("sequence_id", 2 ** 63, "TypeError"),
    ("replication_clusters", "a", "ValueError"),
    ("replication_clusters", ("a",), "ValueError"),
    ("replication_clusters", [1], "TypeError"),
    ("replication_clusters", [], "ok"),
    ("disable_replication", None, "ValueError"),
    ("disable_replication", 1, "ValueError"),
    ("disable_replication", "yes", "ValueError"),
    ("event_timestamp", "1", "ValueError"),
    ("event_timestamp", 1.5, "ValueError"),
    ("event_timestamp", -1, "TypeError"),
    ("event_timestamp", 2 ** 64, "TypeError"),
    ("event_timestamp", 2 ** 64 - 1, "ok"),
    ("deliver_at", "1", "ValueError"),
    ("deliver_at", 1.5, "ValueError"),
    ("deliver_at", -1, "TypeError"),
    ("deliver_after", 5, "ValueError"),
    ("deliver_after", "1", "ValueError"),
    ("deliver_after", datetime.timedelta(seconds=-1), "ok"),
]


def _case_id(case):
    name, value, _expected = case
    return "%s=%s" % (name, type(value).__name__ if not isinstance(value, (int, list, dict)) else repr(value)[:20])


@pytest.fixture(scope="module")
def producers(pulsar_broker):
    """One producer of each module on a topic of its own: {module name: (module, producer)}."""
    made = {}
    clients = []
    for lib, extra in ((official, {"logger": OFFICIAL_LOGGER}), (pulsarfast, {})):
        if lib is None:
            continue
        client = lib.Client(pulsar_broker.service_url, operation_timeout_seconds=15, **extra)
        clients.append(client)
        made[lib.__name__] = (lib, client.create_producer("message-arguments-" + lib.__name__))
    yield made
    for client in clients:
        client.close()


MODULES = [pytest.param("pulsar", marks=needs_official), "pulsarfast"]


@pytest.mark.parametrize("module", MODULES)
@pytest.mark.parametrize("call", ["send", "send_async"])
@pytest.mark.parametrize("case", MESSAGE_CASES, ids=[_case_id(case) for case in MESSAGE_CASES])
def test_message_arguments_are_checked_as_the_official_client_does(producers, module, call, case):
    name, value, expected = case
    _lib, producer = producers[module]
    producer.flush()
    before = producer.last_sequence_id()
    content = value if name == "content" else b"body"
    kwargs = {} if name == "content" else {name: value}
    results = []
    if call == "send":
        got = outcome(lambda: producer.send(content, **kwargs))
    else:
        got = outcome(lambda: producer.send_async(content, lambda result, _id: results.append(result), **kwargs))
        producer.flush()
    assert got == expected
    if expected != "ok":  # refused before anything was sent: no sequence id taken, the producer as it was
        producer.flush()
        assert producer.last_sequence_id() == before
        assert not results
    assert producer.send(b"after") is not None


@pytest.mark.parametrize("module", MODULES)
@pytest.mark.parametrize("callback", [5, "x"], ids=repr)
def test_send_async_refuses_a_callback_that_is_not_callable_as_the_official_client_does(producers, module, callback):
    _lib, producer = producers[module]
    assert outcome(lambda: producer.send_async(b"x", callback)) == "TypeError"


# --------------------------------------------------------------------------- 3. examples/producer.py


def example_program(lib, service_url, topic, extra):
    """The official examples/producer.py, with send_async and flush as its docs show them."""
    client = lib.Client(service_url, **extra)
    producer = client.create_producer(topic)
    for i in range(10):
        producer.send(('hello-%d' % i).encode('utf-8'))
    outcomes = []

    def callback(res, msg_id):
        outcomes.append((res, msg_id))

    for i in range(10, 20):
        producer.send_async(('hello-%d' % i).encode('utf-8'), callback)
    producer.flush()
    producer.close()
    client.close()
    return outcomes


@pytest.mark.parametrize("module", MODULES)
def test_the_official_example_producer_program_works(module, pulsar_broker, pulsar_topic):
    lib = official if module == "pulsar" else pulsarfast
    extra = {"logger": OFFICIAL_LOGGER} if module == "pulsar" else {}
    outcomes = example_program(lib, pulsar_broker.service_url, pulsar_topic, extra)
    wait_for(lambda: len(outcomes) == 10, "threads", message="the ten callbacks")
    assert [res for res, _id in outcomes] == [lib.Result.Ok] * 10
    assert all(msg_id.entry_id() >= 10 for _res, msg_id in outcomes)
    client = pulsarfast.Client(pulsar_broker.service_url)
    try:
        reader = client.create_reader(pulsar_topic, pulsarfast.MessageId.earliest)
        assert [reader.read_next(RECEIVE_MS).data() for _ in range(20)] == [b"hello-%d" % i for i in range(20)]
    finally:
        client.close()


# --------------------------------------------------------------------------- KeyBased batching


def key_batches(consumer, count):
    """{(ledger, entry): [keys of the messages of that batch]} of the next count messages."""
    batches: dict = {}
    for _ in range(count):
        msg = consumer.receive(15_000)
        batches.setdefault((msg.message_id().ledger_id(), msg.message_id().entry_id()), []).append(
            (msg.partition_key(), msg.data()))
        consumer.acknowledge(msg)
    return batches


@needs_official
def test_official_key_based_batching_puts_one_key_in_each_batch(pulsar_broker, pulsar_topic):
    with official_session(pulsar_broker) as client:
        consumer = client.subscribe(pulsar_topic, "keys")
        producer = client.create_producer(pulsar_topic, batching_enabled=True, batching_max_publish_delay_ms=1000,
                                          batching_type=official.BatchingType.KeyBased)
        check_key_based_batches(producer, consumer)


def test_key_based_batching_puts_one_key_in_each_batch(client, pulsar_topic):
    consumer = client.subscribe(pulsar_topic, "keys")
    producer = client.create_producer(pulsar_topic, batching_enabled=True, batching_max_publish_delay_ms=1000,
                                      batching_type=pulsarfast.BatchingType.KeyBased)
    check_key_based_batches(producer, consumer)


def check_key_based_batches(producer, consumer):
    keys = ["a", "b", "a", "a", "b", "c"]
    for index, key in enumerate(keys):
        producer.send_async(b"%d" % index, None, partition_key=key)
    producer.flush()
    batches = key_batches(consumer, len(keys))
    assert all(len({key for key, _body in members}) == 1 for members in batches.values()), batches
    assert len(batches) < len(keys)  # (batched: some batch holds more than one message)
    for key in set(keys):  # each key's messages in the order sent
        assert [body for members in batches.values() for k, body in members if k == key] == \
            [b"%d" % i for i, k in enumerate(keys) if k == key]
