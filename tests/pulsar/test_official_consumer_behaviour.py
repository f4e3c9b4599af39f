"""Consumer behaviours where pulsarfast must do what the official client does, each checked on the
official client (same steps, same expectations) and on pulsarfast on both backends:

- ``Consumer.seek(message_id)`` is exclusive: the next message is the one after the id (unbatched,
  inside a batch, at a batch's first or last message), and that very message on a consumer made
  with ``start_message_id_inclusive=True`` (also on the asyncio modules); a reader's seek keeps its
  own ``start_message_id_inclusive``; what a seek drops before its target is never acknowledged,
  and is dropped again whenever it comes (a redelivery, the cursor reset) until the next seek;
- on a multi-topics consumer (a list of topics, even of one, a pattern, a partitioned topic),
  acknowledging or seeking to a ``MessageId`` without one of its topics (deserialized, built by
  hand, a producer's, another topic's) raises ``OperationNotSupported``, a negative ack of one is
  ignored; on a single-topic consumer a producer's ids are acknowledged as there;
- ``pause_message_listener()`` / ``resume_message_listener()``;
- Ctrl-C during ``receive()`` raises ``Interrupted`` (also a KeyboardInterrupt), in a subprocess
  (tests/support/programs/pulsar_receive_interrupted.py).
"""
from __future__ import annotations

import asyncio
import functools
import importlib
import json
import os
import re

import pytest

import pulsarfast as pulsar
import pulsarfast.consuming.consumer as consumer_module
from tests.support.pulsar_helpers import (
    official_session, bodies_of, needs_official, official, official_client, send_all, subscription_stats)
from tests.support.subprocess_programs import Program
from tests.support.waiting import run_blocking, wait_for

pytestmark = pytest.mark.timeout(150)

WAIT = 15.0
RECEIVE_MS = 30_000  # (the official client's receive after a seek took over 10 s once in a loaded CI run)
PROGRAMS = os.path.join(os.path.dirname(os.path.dirname(__file__)), "support", "programs")

wait_for = functools.partial(wait_for, timeout=WAIT)


# --------------------------------------------------------------------------- 1. seek


def seek_steps(lib, client, topic, inclusive=False):
    """Seek a consumer (made with start_message_id_inclusive=inclusive) to ids of an unbatched and of
    a batched topic: the bodies received after each (as many as the topic holds after the target, and
    the target too when inclusive)."""
    seen = {}

    def rest(consumer, count):  # (the target and the messages after it: count of them)
        return [consumer.receive(RECEIVE_MS).data() for _ in range(count - (0 if inclusive else 1))]

    producer = client.create_producer(topic)
    ids = send_all(producer, bodies_of(b"s", 6))
    consumer = client.subscribe(topic, "seek", initial_position=lib.InitialPosition.Earliest,
                                start_message_id_inclusive=inclusive)
    assert [consumer.receive(RECEIVE_MS).data() for _ in range(6)] == bodies_of(b"s", 6)
    consumer.seek(ids[2])
    seen["unbatched"] = rest(consumer, 4)
    consumer.close()

    batched = client.create_producer(topic + "b", batching_enabled=True, batching_max_messages=4,
                                     batching_max_publish_delay_ms=1000)
    ids = send_all(batched, bodies_of(b"b", 8))
    assert [(i.entry_id(), i.batch_index()) for i in ids] == [(e, b) for e in (0, 1) for b in range(4)]
    consumer = client.subscribe(topic + "b", "seek", initial_position=lib.InitialPosition.Earliest,
                                start_message_id_inclusive=inclusive)
    received = [consumer.receive(RECEIVE_MS) for _ in range(8)]
    consumer.seek(ids[5])  # (inside the second batch)
    seen["in_batch"] = rest(consumer, 3)
    consumer.seek(ids[3])  # (the first batch's last message)
    seen["batch_end"] = rest(consumer, 5)
    consumer.seek(ids[4])  # (the second batch's first message)
    seen["batch_start"] = rest(consumer, 4)
    consumer.seek(ids[0])  # (the topic's first message)
    seen["first"] = rest(consumer, 8)
    consumer.seek(received[1].message_id())  # (a received message's id)
    seen["received_id"] = consumer.receive(RECEIVE_MS).data()
    consumer.seek(lib.MessageId.earliest)
    seen["earliest"] = consumer.receive(RECEIVE_MS).data()
    consumer.close()

    for reader_inclusive in (False, True):  # a reader keeps its own start_message_id_inclusive
        reader = client.create_reader(topic + "b", lib.MessageId.earliest,
                                      start_message_id_inclusive=reader_inclusive)
        reader.read_next(RECEIVE_MS)
        reader.seek(ids[5])
        seen["reader_inclusive=%s" % reader_inclusive] = reader.read_next(RECEIVE_MS).data()
        reader.close()
    return seen


SEEK_EXPECTED = {
    "unbatched": [b"s-3", b"s-4", b"s-5"],
    "in_batch": [b"b-6", b"b-7"],
    "batch_end": [b"b-4", b"b-5", b"b-6", b"b-7"],
    "batch_start": [b"b-5", b"b-6", b"b-7"],
    "first": bodies_of(b"b", 8)[1:],
    "received_id": b"b-2",
    "earliest": b"b-0",
    "reader_inclusive=False": b"b-6",
    "reader_inclusive=True": b"b-5",
}
# start_message_id_inclusive=True: the target comes first, inside a batch too
SEEK_INCLUSIVE_EXPECTED = {
    **SEEK_EXPECTED,
    "unbatched": [b"s-2", b"s-3", b"s-4", b"s-5"],
    "in_batch": [b"b-5", b"b-6", b"b-7"],
    "batch_end": [b"b-3", b"b-4", b"b-5", b"b-6", b"b-7"],
    "batch_start": [b"b-4", b"b-5", b"b-6", b"b-7"],
    "first": bodies_of(b"b", 8),
    "received_id": b"b-1",
}


@needs_official
def test_official_consumer_seek_is_exclusive(pulsar_broker, pulsar_topic):
    with official_session(pulsar_broker) as client:
        assert seek_steps(official, client, pulsar_topic) == SEEK_EXPECTED


def test_consumer_seek_is_exclusive(client, pulsar_topic):
    assert seek_steps(pulsar, client, pulsar_topic) == SEEK_EXPECTED


@needs_official
def test_official_consumer_seek_with_start_message_id_inclusive(pulsar_broker, pulsar_topic):
    with official_session(pulsar_broker) as client:
        assert seek_steps(official, client, pulsar_topic, inclusive=True) == SEEK_INCLUSIVE_EXPECTED


def test_consumer_seek_with_start_message_id_inclusive(client, pulsar_topic):
    assert seek_steps(pulsar, client, pulsar_topic, inclusive=True) == SEEK_INCLUSIVE_EXPECTED


def seek_redeliver_steps(lib, client, topic):
    """After a seek, ask for everything unacknowledged again: what comes, in order."""
    producer = client.create_producer(topic)
    ids = send_all(producer, bodies_of(b"a", 4))
    consumer = client.subscribe(topic, "seek-again", initial_position=lib.InitialPosition.Earliest)
    for _ in range(4):
        consumer.acknowledge(consumer.receive(RECEIVE_MS))
    consumer.seek(ids[1])
    first = [consumer.receive(RECEIVE_MS).data() for _ in range(2)]
    consumer.redeliver_unacknowledged_messages()
    again = [consumer.receive(RECEIVE_MS).data() for _ in range(2)]
    consumer.close()
    return first, again


SEEK_AGAIN_EXPECTED = ([b"a-2", b"a-3"], [b"a-2", b"a-3"])


@needs_official
def test_official_seek_target_does_not_come_again(pulsar_broker, pulsar_topic):
    with official_session(pulsar_broker) as client:
        assert seek_redeliver_steps(official, client, pulsar_topic) == SEEK_AGAIN_EXPECTED


def test_seek_target_does_not_come_again(client, pulsar_topic):
    assert seek_redeliver_steps(pulsar, client, pulsar_topic) == SEEK_AGAIN_EXPECTED


def backlog(broker, backend, topic, subscription):
    """The subscription's backlog counted message by message (the plain stats' count is an estimate,
    wrong after a seek)."""
    stats = run_blocking(backend, broker.admin, "GET", broker.topic_path(topic) + "/stats?getPreciseBacklog=true")
    return stats["subscriptions"][subscription]["msgBacklog"]


def reset_cursor(broker, backend, topic, subscription):
    """The subscription's cursor back to the topic's first message (the admin API's reset-cursor to
    publish time 0; the broker disconnects its consumer, which subscribes again)."""
    run_blocking(backend, broker.admin, "POST",
                 broker.topic_path(topic) + "/subscription/%s/resetcursor/0" % subscription)


def seek_leftover_steps(lib, client, broker, backend, topic, inclusive):
    """What a consumer's seek leaves behind: what the client drops before the target is never
    acknowledged (the subscription keeps it), and it is dropped again whenever the broker sends it
    (a redelivery, the cursor reset by the admin API), until the next seek."""
    seen = {}
    skip = 0 if inclusive else 1
    subscribe = functools.partial(client.subscribe, initial_position=lib.InitialPosition.Earliest,
                                  start_message_id_inclusive=inclusive)

    def bodies(consumer, count):
        return [consumer.receive(RECEIVE_MS).data() for _ in range(count)]

    producer = client.create_producer(topic)
    ids = send_all(producer, bodies_of(b"u", 4))
    consumer = subscribe(topic, "left")
    bodies(consumer, 4)
    consumer.seek(ids[1])
    after = [consumer.receive(RECEIVE_MS) for _ in range(3 - skip)]
    for message in after:
        consumer.acknowledge(message)
    seen["unbatched"] = [message.data() for message in after]
    consumer.close()  # (its grouped acknowledgements go first)
    left = skip  # (exclusive: the target, dropped unacknowledged)
    wait_for(lambda: backlog(broker, backend, topic, "left") == left, backend,
             message=lambda: "a backlog of %d, not %d" % (left, backlog(broker, backend, topic, "left")))
    if left:
        consumer = subscribe(topic, "left")  # (a new consumer: no seek target, the target comes)
        seen["unbatched, subscribed again"] = consumer.receive(RECEIVE_MS).data()
        consumer.close()

    consumer = subscribe(topic, "reset")
    bodies(consumer, 4)
    consumer.seek(ids[2])
    seen["unbatched, before the reset"] = bodies(consumer, 2 - skip)
    reset_cursor(broker, backend, topic, "reset")
    # (every earlier message of the target's ledger is dropped, not only the target's entry)
    seen["unbatched, reset"] = bodies(consumer, 2 - skip)
    consumer.seek(0)  # (a publish time: no target any more, everything comes)
    seen["unbatched, seek to a time"] = bodies(consumer, 4)
    consumer.close()

    batched = client.create_producer(topic + "b", batching_enabled=True, batching_max_messages=4,
                                     batching_max_publish_delay_ms=1000)
    ids = send_all(batched, bodies_of(b"b", 8))
    consumer = subscribe(topic + "b", "left")
    bodies(consumer, 8)
    consumer.seek(ids[5])
    after = [consumer.receive(RECEIVE_MS) for _ in range(3 - skip)]
    for message in after:
        consumer.acknowledge(message)
    seen["batched"] = [message.data() for message in after]
    # (b-4 is never acknowledged, so neither is its entry: it comes again, and b-4 is dropped again)
    consumer.redeliver_unacknowledged_messages()
    seen["batched, redelivered"] = bodies(consumer, 3 - skip)
    reset_cursor(broker, backend, topic + "b", "left")
    seen["batched, reset"] = bodies(consumer, 4 + 3 - skip)
    consumer.close()
    return seen


SEEK_LEFTOVER_EXPECTED = {
    "unbatched": [b"u-2", b"u-3"],
    "unbatched, subscribed again": b"u-1",
    "unbatched, before the reset": [b"u-3"],
    "unbatched, reset": [b"u-3"],
    "unbatched, seek to a time": bodies_of(b"u", 4),
    "batched": [b"b-6", b"b-7"],
    "batched, redelivered": [b"b-6", b"b-7"],
    "batched, reset": [b"b-0", b"b-1", b"b-2", b"b-3", b"b-6", b"b-7"],
}
SEEK_INCLUSIVE_LEFTOVER_EXPECTED = {
    "unbatched": [b"u-1", b"u-2", b"u-3"],
    "unbatched, before the reset": [b"u-2", b"u-3"],
    "unbatched, reset": [b"u-2", b"u-3"],
    "unbatched, seek to a time": bodies_of(b"u", 4),
    "batched": [b"b-5", b"b-6", b"b-7"],
    "batched, redelivered": [b"b-5", b"b-6", b"b-7"],
    "batched, reset": [b"b-0", b"b-1", b"b-2", b"b-3", b"b-5", b"b-6", b"b-7"],
}
LEFTOVER = pytest.mark.parametrize("inclusive, expected", [(False, SEEK_LEFTOVER_EXPECTED),
                                                           (True, SEEK_INCLUSIVE_LEFTOVER_EXPECTED)],
                                   ids=["exclusive", "inclusive"])


@needs_official
@LEFTOVER
def test_official_what_a_seek_drops_stays_unacknowledged(pulsar_broker, pulsar_topic, inclusive, expected):
    with official_session(pulsar_broker) as client:
        assert seek_leftover_steps(official, client, pulsar_broker, "threads", pulsar_topic, inclusive) == expected


@LEFTOVER
def test_what_a_seek_drops_stays_unacknowledged(client, pulsar_broker, pulsar_topic, backend, inclusive, expected):
    assert seek_leftover_steps(pulsar, client, pulsar_broker, backend, pulsar_topic, inclusive) == expected


async def async_seek_steps(alib, lib, url, topic, inclusive):
    """The asyncio modules' consumer (start_message_id_inclusive as given): what comes after a seek
    to an unbatched message, into a batch and to a batch's last message."""
    within = functools.partial(asyncio.wait_for, timeout=WAIT)
    client = alib.Client(url, operation_timeout_seconds=15)
    skip = 0 if inclusive else 1
    seen = {}

    async def rest(consumer, count):
        return [(await within(consumer.receive())).data() for _ in range(count - skip)]

    producer = await within(client.create_producer(topic, batching_enabled=False))
    ids = [await within(producer.send(body)) for body in bodies_of(b"s", 4)]
    consumer = await within(client.subscribe(topic, "seek", initial_position=lib.InitialPosition.Earliest,
                                             start_message_id_inclusive=inclusive))
    await rest(consumer, 4 + skip)
    await within(consumer.seek(ids[1]))
    seen["unbatched"] = await rest(consumer, 3)
    await within(consumer.close())

    batched = await within(client.create_producer(topic + "b", batching_enabled=True, batching_max_messages=4,
                                                  batching_max_publish_delay_ms=1000))
    ids = await within(asyncio.gather(*[batched.send(body) for body in bodies_of(b"b", 8)]))
    consumer = await within(client.subscribe(topic + "b", "seek", initial_position=lib.InitialPosition.Earliest,
                                             start_message_id_inclusive=inclusive))
    await rest(consumer, 8 + skip)
    await within(consumer.seek(ids[5]))
    seen["in_batch"] = await rest(consumer, 3)
    await within(consumer.seek(ids[3]))
    seen["batch_end"] = await rest(consumer, 5)
    await within(consumer.close())
    await within(client.close())
    return seen


ASYNC_SEEK_EXPECTED = {
    False: {"unbatched": [b"s-2", b"s-3"], "in_batch": [b"b-6", b"b-7"], "batch_end": [b"b-4", b"b-5", b"b-6", b"b-7"]},
    True: {"unbatched": [b"s-1", b"s-2", b"s-3"], "in_batch": [b"b-5", b"b-6", b"b-7"],
           "batch_end": [b"b-3", b"b-4", b"b-5", b"b-6", b"b-7"]},
}


@needs_official
@pytest.mark.parametrize("inclusive", [False, True], ids=["exclusive", "inclusive"])
@pytest.mark.parametrize("side", ["official", "pulsarfast"])
def test_asyncio_consumer_seek_with_start_message_id_inclusive(pulsar_broker, pulsar_topic, side, inclusive):
    # (pulsar.asyncio and pulsarfast.asyncio: the same steps, the same expectations)
    alib, lib = ((importlib.import_module("pulsar.asyncio"), official) if side == "official"
                 else (importlib.import_module("pulsarfast.asyncio"), pulsar))
    seen = asyncio.run(asyncio.wait_for(
        async_seek_steps(alib, lib, pulsar_broker.service_url, pulsar_topic, inclusive), 120))
    assert seen == ASYNC_SEEK_EXPECTED[inclusive]


# --------------------------------------------------------------------------- 2. ids without one of the topics


def multi_topic_ack_steps(lib, client, topics, subscribe_to, kinds=("deserialized", "built", "producer's", "other")):
    """Acknowledge ids without one of the consumer's topics on a multi-topics consumer (a received id
    deserialized, one built by hand, a producer's, one received on another topic), and seek to them:
    {(kind of id, call): "ok" or the exception's class name and text}."""
    ids = []
    for topic in topics:
        producer = client.create_producer(topic)
        ids += send_all(producer, [b"m-" + topic.encode()])
        producer.close()
    other_topic = "o_" + topics[0]  # (no pattern of the cases matches it)
    producer = client.create_producer(other_topic)
    send_all(producer, [b"x"])
    producer.close()
    other = client.subscribe(other_topic, "x", initial_position=lib.InitialPosition.Earliest)
    other_id = other.receive(RECEIVE_MS).message_id()
    other.close()
    consumer = client.subscribe(subscribe_to, "mt", initial_position=lib.InitialPosition.Earliest)
    message = consumer.receive(RECEIVE_MS)
    outcomes = {}
    received = message.message_id()
    bare = {"deserialized": lib.MessageId.deserialize(received.serialize()), "producer's": ids[0],
            "built": lib.MessageId(received.partition(), received.ledger_id(), received.entry_id(), -1),
            "other": other_id}

    def outcome(call, *args):
        try:
            call(*args)
            return "ok"
        except Exception as exc:  # noqa: BLE001 - the outcome is what is compared
            return "%s: %s" % (type(exc).__name__, exc)

    for kind in kinds:
        message_id = bare[kind]
        # (the official client's negative_acknowledge does not take a MessageId built in Python: TypeError)
        for call in ("acknowledge", "acknowledge_cumulative", "seek") + (
                ("negative_acknowledge",) if kind != "built" else ()):
            outcomes[kind, call] = outcome(getattr(consumer, call), message_id)
    outcomes["get_last_message_id"] = outcome(consumer.get_last_message_id)
    consumer.acknowledge(message)  # (a message, and its own id, know their topic)
    consumer.acknowledge(message.message_id())
    consumer.seek(message.message_id())  # (a seek to it too)
    consumer.close()
    return outcomes


NOT_SUPPORTED = "OperationNotSupported: Pulsar error: OperationNotSupported"
ACK_EXPECTED = {
    **{(kind, call): NOT_SUPPORTED for kind in ("deserialized", "built", "producer's", "other")
       for call in ("acknowledge", "acknowledge_cumulative", "seek")},
    **{(kind, "negative_acknowledge"): "ok" for kind in ("deserialized", "producer's", "other")},  # (ignored)
    "get_last_message_id": NOT_SUPPORTED,
}


def multi_topic_cases(broker, backend, topic):
    """(topics to produce to, what to subscribe to): a list of two topics, a partitioned topic, a list
    of one topic, a pattern (all the official client's multi-topics consumer)."""
    run_blocking(backend, broker.create_partitioned_topic, topic + "_p", 2)
    return [([topic + "_l1", topic + "_l2"], [topic + "_l1", topic + "_l2"]),
            ([topic + "_p"], topic + "_p"),
            ([topic + "_one"], [topic + "_one"]),
            ([topic + "_r1", topic + "_r2"], re.compile("persistent://public/default/%s_r[0-9]" % topic))]


@needs_official
def test_official_multi_topic_consumer_refuses_ids_without_its_topics(pulsar_broker, pulsar_topic):
    with official_session(pulsar_broker) as client:
        for topics, subscribe_to in multi_topic_cases(pulsar_broker, "threads", pulsar_topic):
            assert multi_topic_ack_steps(official, client, topics, subscribe_to) == ACK_EXPECTED, subscribe_to


def test_multi_topic_consumer_refuses_ids_without_its_topics(client, pulsar_broker, pulsar_topic, backend):
    for topics, subscribe_to in multi_topic_cases(pulsar_broker, backend, pulsar_topic):
        assert multi_topic_ack_steps(pulsar, client, topics, subscribe_to) == ACK_EXPECTED, subscribe_to


def ignored_nack_steps(lib, client, topic):
    """A negative acknowledgement of a producer's id on a multi-topics consumer: nothing comes again."""
    topics = [topic + "_1", topic + "_2"]
    ids = []
    for name in topics:
        producer = client.create_producer(name)
        ids += send_all(producer, [name.encode()])
        producer.close()
    consumer = client.subscribe(topics, "nack", initial_position=lib.InitialPosition.Earliest,
                                negative_ack_redelivery_delay_ms=100)
    received = sorted(consumer.receive(RECEIVE_MS).data() for _ in topics)
    consumer.negative_acknowledge(ids[0])
    try:
        again = consumer.receive(1500).data()
    except lib.Timeout:
        again = None
    consumer.close()
    return received == sorted(name.encode() for name in topics), again


@needs_official
def test_official_multi_topic_consumer_ignores_nack_of_a_producer_id(pulsar_broker, pulsar_topic):
    with official_session(pulsar_broker) as client:
        assert ignored_nack_steps(official, client, pulsar_topic) == (True, None)


def test_multi_topic_consumer_ignores_nack_of_a_producer_id(client, pulsar_topic):
    assert ignored_nack_steps(pulsar, client, pulsar_topic) == (True, None)


def single_topic_producer_id_steps(lib, client, broker, backend, topic):
    """A producer's ids acknowledged on a single-topic consumer, as the official client does: an
    unbatched one as the message's own; a batched one knows nothing of its batch, so alone it
    acknowledges nothing (with batch_index_ack_enabled: its whole entry), and cumulatively
    everything before its entry (with batch_index_ack_enabled: its entry too). What is left."""
    seen = {}
    subscribe = functools.partial(client.subscribe, initial_position=lib.InitialPosition.Earliest)

    def bodies(consumer, count):
        return sorted(consumer.receive(RECEIVE_MS).data() for _ in range(count))

    def left(subscription, count, **kwargs):  # (what a new consumer of the subscription gets)
        consumer = subscribe(topic_of[subscription], subscription, **kwargs)
        got = bodies(consumer, count)
        consumer.close()
        return got

    topic_of = {"u": topic, "b": topic + "b", "bi": topic + "b"}
    producer = client.create_producer(topic, batching_enabled=False)
    ids = send_all(producer, bodies_of(b"u", 4))
    consumer = subscribe(topic, "u")
    bodies(consumer, 4)
    consumer.acknowledge(ids[2])
    consumer.acknowledge_cumulative(ids[0])
    consumer.close()
    seen["unbatched"] = left("u", 2)

    producer = client.create_producer(topic + "b", batching_enabled=True, batching_max_messages=3,
                                      batching_max_publish_delay_ms=1000)
    ids = send_all(producer, bodies_of(b"b", 6))
    assert [(i.entry_id(), i.batch_index()) for i in ids] == [(e, b) for e in (0, 1) for b in range(3)]
    consumer = subscribe(topic + "b", "b")
    bodies(consumer, 6)
    for message_id in ids[:3]:  # (every message of the first batch: nothing)
        consumer.acknowledge(message_id)
    consumer.acknowledge_cumulative(ids[5])  # (the second batch's last: the first batch)
    consumer.close()
    seen["batched"] = left("b", 3)

    consumer = subscribe(topic + "b", "bi", batch_index_ack_enabled=True)
    bodies(consumer, 6)
    consumer.acknowledge(ids[1])  # (the whole first batch)
    consumer.close()
    seen["batch index acks"] = left("bi", 3, batch_index_ack_enabled=True)
    consumer = subscribe(topic + "b", "bi", batch_index_ack_enabled=True)
    bodies(consumer, 3)
    consumer.acknowledge_cumulative(ids[3])  # (the second batch's first: the whole second batch)
    consumer.close()
    wait_for(lambda: backlog(broker, backend, topic + "b", "bi") == 0, backend,
             message=lambda: "no backlog, not %d" % backlog(broker, backend, topic + "b", "bi"))
    return seen


PRODUCER_IDS_LEFT = {"unbatched": [b"u-1", b"u-3"], "batched": [b"b-3", b"b-4", b"b-5"],
                     "batch index acks": [b"b-3", b"b-4", b"b-5"]}


@needs_official
def test_official_single_topic_consumer_acknowledges_producer_ids(pulsar_broker, pulsar_topic):
    with official_session(pulsar_broker) as client:
        assert single_topic_producer_id_steps(official, client, pulsar_broker, "threads",
                                              pulsar_topic) == PRODUCER_IDS_LEFT


def test_single_topic_consumer_acknowledges_producer_ids(client, pulsar_broker, pulsar_topic, backend):
    assert single_topic_producer_id_steps(pulsar, client, pulsar_broker, backend, pulsar_topic) == PRODUCER_IDS_LEFT


def test_single_topic_consumer_acknowledges_bare_ids(client, pulsar_broker, pulsar_topic, backend):
    producer = client.create_producer(pulsar_topic)
    ids = send_all(producer, [b"x"])
    consumer = client.subscribe(pulsar_topic, "single", initial_position=pulsar.InitialPosition.Earliest)
    consumer.receive(RECEIVE_MS)
    consumer.acknowledge(pulsar.MessageId.deserialize(ids[0].serialize()))
    consumer.close()  # (the grouped ack goes before the close)
    wait_for(lambda: subscription_stats(pulsar_broker, backend, pulsar_topic, "single")["msgBacklog"] == 0, backend)


# --------------------------------------------------------------------------- 3. pausing the listener


def pause_steps(lib, client, topic, dispatched, backend):
    """Pause the listener, send, see nothing delivered to it; resume: everything comes, in order."""
    calls = []

    def listener(consumer, message):
        calls.append(message.data())
        consumer.acknowledge(message)

    consumer = client.subscribe(topic, "paused", message_listener=listener,
                                initial_position=lib.InitialPosition.Earliest)
    consumer.pause_message_listener()
    consumer.pause_message_listener()  # (twice: no error)
    producer = client.create_producer(topic)
    send_all(producer, bodies_of(b"p", 3))
    dispatched(consumer)  # (the client holds them)
    held = list(calls)
    consumer.resume_message_listener()
    wait_for(lambda: len(calls) == 3, backend, message=lambda: "the listener's calls: %r" % calls)
    consumer.resume_message_listener()  # (not paused: no error)
    consumer.close()

    plain = client.subscribe(topic, "no-listener")
    refused = []
    for call in (plain.pause_message_listener, plain.resume_message_listener):
        try:
            call()
        except Exception as exc:  # noqa: BLE001 - the outcome is what is compared
            refused.append("%s: %s" % (type(exc).__name__, exc))
    plain.close()
    return held, calls, refused


PAUSE_EXPECTED = ([], bodies_of(b"p", 3), ["InvalidConfiguration: Pulsar error: InvalidConfiguration"] * 2)


@needs_official
def test_official_pause_and_resume_message_listener(pulsar_broker, pulsar_topic):
    client = official_client(pulsar_broker)

    def dispatched(_consumer):  # (the broker has sent them: its count of messages out)
        wait_for(lambda: (pulsar_broker.topic_stats(pulsar_topic)["subscriptions"]["paused"]["msgOutCounter"]
                          == 3), "threads")
    try:
        assert pause_steps(official, client, pulsar_topic, dispatched, "threads") == PAUSE_EXPECTED
    finally:
        client.close()


def test_pause_and_resume_message_listener(client, pulsar_topic, backend):
    def dispatched(consumer):  # (every message is in the consumer's queue)
        wait_for(lambda: consumer.stats()["received"] == 3, backend)
    assert pause_steps(pulsar, client, pulsar_topic, dispatched, backend) == PAUSE_EXPECTED


def test_close_ends_a_paused_listener(client, pulsar_topic, backend):
    consumer = client.subscribe(pulsar_topic, "paused-close", message_listener=lambda c, m: None)
    consumer.pause_message_listener()
    consumer.close()
    task = consumer._listener_task
    wait_for(lambda: task.dead if hasattr(task, "dead") else not task.thread.is_alive(), backend)


# --------------------------------------------------------------------------- 4. Ctrl-C in receive()


@pytest.mark.parametrize("delivery", ["process", "thread"])
@pytest.mark.parametrize("program_backend", ["threads", "gevent"])
def test_ctrl_c_in_receive_raises_interrupted(pulsar_broker, pulsar_topic, program_backend, delivery):
    # receive() has no periodic wake-up in the program: an interrupt not noticed at once leaves it
    # blocked (the program then never exits); "thread": SIGINT lands on another thread than receive()'s
    program = Program([os.path.join(PROGRAMS, "pulsar_receive_interrupted.py"), "--backend", program_backend,
                       "--service-url", pulsar_broker.service_url, "--topic", pulsar_topic]
                      + (["--to-thread"] if delivery == "thread" else []))
    code = program.wait_exit(60)
    assert code == 0, program.report()
    report = json.loads(program.stdout[-1])
    assert report == {"raised": "ReceiveInterrupted", "message": "Pulsar error: Interrupted", "interrupted": True,
                      "pulsar_exception": True, "keyboard_interrupt": True, "usable_after": True}, program.report()
    assert issubclass(consumer_module.ReceiveInterrupted, (pulsar.Interrupted, KeyboardInterrupt))


# --------------------------------------------------------------------------- 5. get_last_message_id()


def last_message_id_steps(lib, client, broker, topic):
    """(the last id of an empty topic, the last id after two sends and the second send's id, what a
    consumer of a partitioned topic raises)."""
    consumer = client.subscribe(topic, "last")
    empty = str(consumer.get_last_message_id())
    producer = client.create_producer(topic)
    producer.send(b"one")
    second = producer.send(b"two")
    last = consumer.get_last_message_id()
    partitioned = topic + "_p"
    broker.create_partitioned_topic(partitioned, 2)
    with pytest.raises(lib.OperationNotSupported):
        client.subscribe(partitioned, "last").get_last_message_id()
    return empty, (last.ledger_id(), last.entry_id()) == (second.ledger_id(), second.entry_id())


@needs_official
def test_official_get_last_message_id(pulsar_broker, pulsar_topic):
    with official_session(pulsar_broker) as client:
        assert last_message_id_steps(official, client, pulsar_broker, pulsar_topic) == ("(-1,-1,-1,-1)", True)


def test_get_last_message_id(client, pulsar_broker, pulsar_topic):
    assert last_message_id_steps(pulsar, client, pulsar_broker, pulsar_topic) == ("(-1,-1,-1,-1)", True)
