"""TableView against a real Pulsar broker, on both backends, side by side with the official
client's TableView on the same topic: the initial contents (overwritten keys, tombstones, messages
without a key), for_each_and_listen hearing later messages from both clients' producers, a
partitioned topic, a compacted topic, JSON values, the argument checks and broker refusals, str,
len and close (also through the client's close), and the extension's raw TableView and
TableViewConfiguration. The official client blocks in C++: its calls go through run_blocking."""
from __future__ import annotations

import functools
import gc
import logging
import threading
import weakref

import pytest

import pulsarfast
import pulsarfast._pulsar as fast_raw
from pulsarfast import schema as fast_schema
from tests.support.pulsar_helpers import (
    full, needs_official, official, official_client, official_session, send_all)
from tests.support.waiting import run_blocking, wait_for

pytestmark = [pytest.mark.timeout(120), needs_official]

WAIT = 15.0
wait_for = functools.partial(wait_for, timeout=WAIT)

#: (key or None, payload) in send order: overwritten keys, tombstones (of a held key and of a key
#: never held), a message without a key, an empty key (which the official producer does not set: no key)
BEFORE = [("a", b"a-1"), ("b", b"b-1"), ("a", b"a-2"), (None, b"no key"), ("b", b""), ("never", b""),
          ("c", b"c-1"), ("", b"empty key")]
#: what the pulsarfast producer adds before the table views start
BEFORE_FAST = [("d", b"d-1"), ("c", b""), ("a", b"a-3")]
ABSENT = ["b", "c", "never", "missing"]


def send_keyed(producer, messages):
    """Send (key, payload) pairs in order (a key of None: no key); either client's producer."""
    send_all(producer, [(payload, {} if key is None else {"partition_key": key}) for key, payload in messages])


def contents(table_view) -> dict:
    """{key: value} through for_each (either client's table view)."""
    seen: dict = {}
    table_view.for_each(lambda key, value: seen.__setitem__(key, value))
    return seen


def snapshot(table_view, keys) -> tuple:
    """(contents, len, [get(key) for keys]) of either client's table view."""
    return contents(table_view), len(table_view), [table_view.get(key) for key in keys]


def official_send(client, topic, messages, **kwargs):
    producer = client.create_producer(topic, **kwargs)
    send_keyed(producer, messages)
    producer.close()


def fast_send(client, topic, messages, **kwargs):
    producer = client.create_producer(topic, **kwargs)
    send_keyed(producer, messages)
    producer.close()


class Listened:
    """What a for_each_and_listen callback heard, in order (from any thread)."""

    def __init__(self):
        self.heard: list = []

    def __call__(self, key, value):
        self.heard.append((key, value))

    def has(self, key) -> bool:
        return any(k == key for k, _ in list(self.heard))


# --------------------------------------------------------------------------- contents


@pytest.mark.parametrize("batched", [False, True], ids=["single", "batched"])
def test_initial_contents_are_the_official_ones(make_client, pulsar_broker, pulsar_topic, backend, batched):
    client = make_client()
    topic = full(pulsar_topic)
    with official_session(pulsar_broker) as theirs:
        run_blocking(backend, functools.partial(official_send, theirs, topic, BEFORE, batching_enabled=batched))
        fast_send(client, topic, BEFORE_FAST, batching_enabled=batched)
        keys = ["a", "d", ""] + ABSENT
        official_view = run_blocking(backend, theirs.create_table_view, topic)
        expected = run_blocking(backend, snapshot, official_view, keys)
        ours = client.create_table_view(topic)
        assert snapshot(ours, keys) == expected
    assert expected == ({"a": b"a-3", "d": b"d-1"}, 2, [b"a-3", b"d-1", None, None, None, None, None])
    assert isinstance(ours, pulsarfast.TableView) and isinstance(ours, pulsarfast.tableview.TableView)


def test_an_empty_topic_gives_an_empty_table_view(make_client, pulsar_topic):
    table_view = make_client().create_table_view(pulsar_topic)
    assert (len(table_view), contents(table_view), table_view.get("a")) == (0, {}, None)


def test_for_each_and_listen_hears_both_clients_producers(make_client, pulsar_broker, pulsar_topic, backend):
    client = make_client()
    topic = full(pulsar_topic)
    later_official = [("a", b"a-9"), (None, b"no key"), ("b", b"b-9"), ("gone", b"")]
    later_fast = [("b", b""), ("e", b"e-1"), ("end", b"!")]
    with official_session(pulsar_broker) as theirs:
        run_blocking(backend, official_send, theirs, topic, BEFORE)
        official_view = run_blocking(backend, theirs.create_table_view, topic)
        ours = client.create_table_view(topic, "tv-listen")
        official_heard, fast_heard = Listened(), Listened()
        run_blocking(backend, official_view.for_each_and_listen, official_heard)
        ours.for_each_and_listen(fast_heard)
        assert sorted(fast_heard.heard) == sorted(official_heard.heard) == [("a", b"a-2"), ("c", b"c-1")]
        run_blocking(backend, official_send, theirs, topic, later_official)
        fast_send(client, topic, later_fast)
        for heard in (fast_heard, official_heard):
            wait_for(lambda: heard.has("end"), backend, message="the listener to hear the last message")
        after = run_blocking(backend, snapshot, official_view, ["a", "b", "e", "gone"])
        assert snapshot(ours, ["a", "b", "e", "gone"]) == after
    # the table first (in no set order), then every message with a key, tombstones too (b""); the one
    # without a key is not heard of
    assert fast_heard.heard[2:] == official_heard.heard[2:] == [
        ("a", b"a-9"), ("b", b"b-9"), ("gone", b""), ("b", b""), ("e", b"e-1"), ("end", b"!")]


def test_a_listener_that_raises_is_logged_and_the_others_hear_on(make_client, pulsar_topic, backend, caplog):
    client = make_client()
    table_view = client.create_table_view(pulsar_topic)
    heard = Listened()

    def raising(key, value):
        raise RuntimeError("listener fails on " + key)

    table_view.for_each_and_listen(raising)
    table_view.for_each_and_listen(heard)
    with caplog.at_level(logging.ERROR, logger="pulsarfast.consuming.rawtable"):
        fast_send(client, pulsar_topic, [("x", b"1"), ("end", b"2")])
        wait_for(lambda: heard.has("end"), backend)
    assert heard.heard == [("x", b"1"), ("end", b"2")]
    assert "listener fails on x" in caplog.text and "listener fails on end" in caplog.text


def test_a_callback_that_raises_while_going_over_the_table_reaches_the_caller(make_client, pulsar_broker,
                                                                             pulsar_topic, backend):
    client = make_client()
    fast_send(client, pulsar_topic, [("x", b"1")])

    def steps(table_view):
        heard = Listened()
        for call in (table_view.for_each, table_view.for_each_and_listen):
            with pytest.raises(ZeroDivisionError):
                call(lambda key, value: 1 / 0)
        table_view.for_each_and_listen(heard)
        return list(heard.heard), heard

    with official_session(pulsar_broker) as theirs:
        official_view = run_blocking(backend, theirs.create_table_view, full(pulsar_topic))
        official_first, official_heard = run_blocking(backend, steps, official_view)
        ours = client.create_table_view(pulsar_topic)
        fast_first, fast_heard = steps(ours)
        fast_send(client, pulsar_topic, [("end", b"2")])
        for heard in (official_heard, fast_heard):
            wait_for(lambda: heard.has("end"), backend)
    # the failing for_each_and_listen callback was not registered: only the later one hears
    assert fast_first == official_first == [("x", b"1")]
    assert fast_heard.heard == official_heard.heard == [("x", b"1"), ("end", b"2")]


# --------------------------------------------------------------------------- partitions, compaction, schemas


def test_partitioned_topic(make_client, pulsar_broker, pulsar_topic, backend):
    run_blocking(backend, pulsar_broker.create_partitioned_topic, pulsar_topic, 3)
    client = make_client()
    topic = full(pulsar_topic)
    messages = [("k-%d" % i, b"v-%d" % i) for i in range(12)] + [("k-3", b""), ("k-5", b"again"), (None, b"x")]
    with official_session(pulsar_broker) as theirs:
        run_blocking(backend, official_send, theirs, topic, messages[:8])
        fast_send(client, topic, messages[8:])
        keys = ["k-%d" % i for i in range(13)]
        held: dict = {}
        for key, payload in messages:  # (the last value of each key; an empty one deletes it)
            if key is not None and payload == b"":
                held.pop(key, None)
            elif key is not None:
                held[key] = payload
        expected = (held, len(held), [held.get(key) for key in keys])
        ours = client.create_table_view(topic, "tv-partitions-fast")
        assert snapshot(ours, keys) == expected  # (ours holds every existing message once made)
        official_view = run_blocking(backend, theirs.create_table_view, topic, "tv-partitions")
        # (the official view, loaded, may still lack a partition's last message: a run beside a CPU hog
        # saw it without the tombstone of k-3 just after it was made; it holds the same soon after)
        wait_for(lambda: run_blocking(backend, snapshot, official_view, keys) == expected, backend,
                 message="the official table view to hold what was sent")
        heard = Listened()
        ours.for_each_and_listen(heard)
        fast_send(client, topic, [("k-%d" % i, b"w-%d" % i) for i in range(6)])
        wait_for(lambda: len([key for key, _ in heard.heard]) == 11 + 6, backend)
        wait_for(lambda: run_blocking(backend, snapshot, official_view, keys) == snapshot(ours, keys), backend,
                 message="the official table view to hold what pulsarfast's holds")
    assert len(ours) == 12 and ours.get("k-3") == b"w-3" and ours.get("k-5") == b"w-5"
    assert client.get_topic_partitions(topic) == [topic + "-partition-%d" % i for i in range(3)]


def compact(broker, name):
    """Compact the topic and wait until the broker reports it done."""
    broker.admin("PUT", broker.topic_path(name) + "/compaction")
    wait_for(lambda: broker.admin("GET", broker.topic_path(name) + "/compaction")["status"] in ("SUCCESS", "ERROR"),
             "threads", message="the compaction to end")
    assert broker.admin("GET", broker.topic_path(name) + "/compaction")["status"] == "SUCCESS"


def test_a_compacted_topic(make_client, pulsar_broker, pulsar_topic, backend):
    client = make_client()
    topic = full(pulsar_topic)
    with official_session(pulsar_broker) as theirs:
        run_blocking(backend, official_send, theirs, topic, BEFORE)
        fast_send(client, topic, BEFORE_FAST)
        run_blocking(backend, compact, pulsar_broker, pulsar_topic)
        fast_send(client, topic, [("after", b"compaction")])
        keys = ["a", "d", "", "after"] + ABSENT
        official_view = run_blocking(backend, theirs.create_table_view, topic)
        expected = run_blocking(backend, snapshot, official_view, keys)
        ours = client.create_table_view(topic)
        assert snapshot(ours, keys) == expected
    assert expected[0] == {"a": b"a-3", "d": b"d-1", "after": b"compaction"}


class FastPoint(fast_schema.Record):
    name = fast_schema.String()
    x = fast_schema.Integer()


def official_point_class():
    class Point(official.schema.Record):
        name = official.schema.String()
        x = official.schema.Integer()
    return Point


def fields(record) -> dict:
    return None if record is None else {"name": record.name, "x": record.x}


def test_json_values(make_client, pulsar_broker, pulsar_topic, backend):
    client = make_client()
    topic = full(pulsar_topic)
    producer = client.create_producer(topic, schema=fast_schema.JsonSchema(FastPoint))
    for key, x in [("p", 1), ("q", 2), ("p", 3)]:
        producer.send(FastPoint(name=key, x=x), partition_key=key)
    OfficialPoint = official_point_class()
    with official_session(pulsar_broker) as theirs:
        official_view = run_blocking(backend, theirs.create_table_view, topic, None,
                                     official.schema.JsonSchema(OfficialPoint))

        def official_values():
            return {key: fields(value) for key, value in contents(official_view).items()}, \
                fields(official_view.get("p")), official_view.get("r")

        expected = run_blocking(backend, official_values)
        ours = client.create_table_view(topic, schema=fast_schema.JsonSchema(FastPoint))
        heard = Listened()
        ours.for_each_and_listen(heard)
        assert ({key: fields(value) for key, value in contents(ours).items()}, fields(ours.get("p")),
                ours.get("r")) == expected
        assert isinstance(ours.get("q"), FastPoint)
        producer.send(FastPoint(name="r", x=4), partition_key="r")
        wait_for(lambda: heard.has("r"), backend)
    assert expected == ({"p": {"name": "p", "x": 3}, "q": {"name": "q", "x": 2}}, {"name": "p", "x": 3}, None)
    assert [(key, fields(value)) for key, value in heard.heard][-1] == ("r", {"name": "r", "x": 4})


# --------------------------------------------------------------------------- checks and refusals


def outcome(call):
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - what is raised is what is compared
        return type(exc).__name__, str(exc) if isinstance(exc, ValueError) else None
    return "ok", None


def refusals(lib, client, topic):
    """What create_table_view raises for wrong arguments and what the broker refuses."""
    producer = client.create_producer(topic)  # (a bytes producer on the topic)
    first = client.create_table_view(topic, "tv-busy")
    results = [outcome(lambda: client.create_table_view(*args)) for args in [
        (1,), (topic, 1), (topic, None, "x"), (topic, None, None), (topic, b"sub"), ("",), ("bad://x/y/z",),
        (topic, "tv-busy"), (topic, None, lib.schema.StringSchema()), ("persistent://no-tenant/no-ns/t",),
    ]]
    first.close()
    producer.close()
    return results


def test_argument_checks_and_refusals_are_the_official_ones(make_client, pulsar_broker, pulsar_topic, backend):
    topic = full(pulsar_topic)
    with official_session(pulsar_broker) as theirs:
        expected = run_blocking(backend, refusals, official, theirs, topic)
    got = refusals(pulsarfast, make_client(), topic)
    assert got == expected
    assert expected[:4] == [
        ("ValueError", "Argument topic is expected to be of type 'str' and not 'int'"),
        ("ValueError", "Argument subscription_name is expected to be either None or of type 'str'"),
        ("ValueError", "Argument schema is expected to be of type 'Schema' and not 'str'"),
        ("ValueError", "Argument schema is expected to be of type 'Schema' and not 'NoneType'")]
    assert [kind for kind, _ in expected[4:]] == ["ValueError", "InvalidTopicName", "InvalidTopicName",
                                                  "ConsumerBusy", "IncompatibleSchema", "TopicNotFound"]


def closed_client_steps(client, topic):
    client.close()
    return outcome(lambda: client.create_table_view(topic))


def test_a_closed_client_refuses(make_client, pulsar_broker, pulsar_topic, backend):
    expected = run_blocking(backend, closed_client_steps, official_client(pulsar_broker), full(pulsar_topic))
    assert closed_client_steps(make_client(), full(pulsar_topic)) == expected == ("AlreadyClosed", None)


# --------------------------------------------------------------------------- str, len, close


def lifetime_steps(client, topic, send, late_key):
    """str/repr, then close: what stays readable, what a later message changes, a second close."""
    named = client.create_table_view(topic, "tv-named")
    unnamed = client.create_table_view(topic)
    texts = [str(named), repr(named), str(unnamed), repr(unnamed)]
    named.close()
    second = outcome(named.close)
    send([(late_key, b"1")])
    return texts, second, named, unnamed


def test_str_len_and_close(make_client, pulsar_broker, pulsar_topic, backend):
    client = make_client()
    fast_send(client, pulsar_topic, [("x", b"1")])
    with official_session(pulsar_broker) as theirs:
        def official_send_here(messages):
            official_send(theirs, pulsar_topic, messages)

        expected_texts, expected_second, official_named, official_unnamed = run_blocking(
            backend, lifetime_steps, theirs, pulsar_topic, official_send_here, "late-official")
        texts, second, named, unnamed = lifetime_steps(
            client, pulsar_topic, lambda messages: fast_send(client, pulsar_topic, messages), "late-fast")
        wait_for(lambda: unnamed.get("late-fast") == b"1", backend)
        wait_for(lambda: run_blocking(backend, official_unnamed.get, "late-official") == b"1", backend)
        # the closed one heard nothing more (the other one, open, heard the late message by now)
        assert (len(named), named.get("x"), named.get("late-fast")) == (2, b"1", None)
        assert run_blocking(backend, lambda: (len(official_named), official_named.get("late-official"))) == (1, None)
    assert texts == expected_texts == ["TableView(topic=%s, subscription=tv-named)" % pulsar_topic] * 2 + \
        ["TableView(topic=%s)" % pulsar_topic] * 2
    assert second == expected_second == ("ConsumerNotInitialized", None)
    assert len(unnamed) == 3


def test_closing_the_client_closes_its_table_views(make_client, pulsar_broker, pulsar_topic, backend):
    client = make_client()
    fast_send(client, pulsar_topic, [("x", b"1")])
    table_view = client.create_table_view(pulsar_topic)
    heard = Listened()
    table_view.for_each_and_listen(heard)
    client.close()
    # the reader is gone with the client: what it held stays readable, and close() is allowed once
    assert (len(table_view), table_view.get("x"), heard.heard) == (1, b"1", [("x", b"1")])
    assert outcome(table_view.close) == ("ok", None)
    assert outcome(table_view.close) == ("ConsumerNotInitialized", None)

    def official_steps():
        theirs = official_client(pulsar_broker)
        official_view = theirs.create_table_view(full(pulsar_topic))
        theirs.close()
        return len(official_view), official_view.get("x"), outcome(official_view.close), outcome(official_view.close)
    assert run_blocking(backend, official_steps) == (1, b"1", ("ok", None), ("ConsumerNotInitialized", None))


def new_threads(before: set) -> list:
    return [t for t in threading.enumerate() if t not in before and t.is_alive()]


def test_no_task_of_a_table_view_remains_after_the_client_closes(pulsar_broker, pulsar_topic, backend):
    before = set(threading.enumerate())
    client = pulsarfast.Client(pulsar_broker.service_url, backend=backend, operation_timeout_seconds=15)
    table_view = client.create_table_view(pulsar_topic)
    table_view.for_each_and_listen(Listened())
    client.close()
    assert new_threads(before) == []


def test_a_client_dropped_with_its_table_view_is_collected(pulsar_broker, pulsar_topic, backend):
    before = set(threading.enumerate())
    client = pulsarfast.Client(pulsar_broker.service_url, backend=backend, operation_timeout_seconds=15)
    fast_send(client, pulsar_topic, [("x", b"1")])
    table_view = client.create_table_view(pulsar_topic)
    table_view.for_each_and_listen(Listened())
    gone = weakref.ref(client)
    connections = client.broker_connections()
    del client, table_view
    gc.collect()
    assert gone() is None, "the dropped client is still referenced: %r" % gc.get_referrers(gone())
    wait_for(lambda: all(conn.is_closed() for conn in connections), backend, message="its connections closed")
    wait_for(lambda: new_threads(before) == [], backend, message=lambda: "threads left: %r" % new_threads(before))


# --------------------------------------------------------------------------- the extension's objects


def raw_steps(raw, client, topic):
    conf = raw.TableViewConfiguration()
    setters = [conf.subscription_name("tv-raw"), conf.schema(raw.SchemaInfo(raw.SchemaType.BYTES, "BYTES", ""))]
    table_view = client.create_table_view(topic, conf)
    seen: dict = {}
    table_view.for_each(lambda key, value: seen.__setitem__(key, value))
    result = (setters, table_view.size(), table_view.get("x"), table_view.get("nope"), seen)
    table_view.close()
    return result


def test_the_extension_table_view(pulsar_broker, pulsar_topic, backend):
    import _pulsar as official_raw

    topic = full(pulsar_topic)
    fast_client = fast_raw.Client(pulsar_broker.service_url, fast_raw.ClientConfiguration())
    try:
        fast_send(fast_client, topic, [("x", b"1"), ("y", b"2"), ("y", b"")])
        got = raw_steps(fast_raw, fast_client, topic)
    finally:
        fast_client.close()

    def official_steps():
        client = official_raw.Client(pulsar_broker.service_url, official_raw.ClientConfiguration())
        try:
            return raw_steps(official_raw, client, topic)
        finally:
            client.close()
    expected = run_blocking(backend, official_steps)
    assert got == expected == ([None, None], 1, (True, b"1"), (False, b""), {"x": b"1"})
    assert isinstance(fast_raw.TableView(), pulsarfast.consuming.rawtable.RawTableView)
