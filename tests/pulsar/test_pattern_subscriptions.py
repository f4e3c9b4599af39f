"""Pattern subscriptions (``subscribe(re.compile(...))``, pulsarfast/consuming/pattern.py) on the real broker,
both backends: the topics the pattern takes and no other, a topic created after the subscribe
joined within the discovery period, a topic no longer listed left; the official client side by
side on the same topics where cheap, and the checks of the pattern argument."""
from __future__ import annotations

import functools
import re

import pytest

import pulsarfast as pulsar
from pulsarfast.wire import proto
from tests.support.pulsar_helpers import (
    assert_nothing_more, full, needs_official, official, official_client, produce, subscription_stats,
)
from tests.support.waiting import run_blocking, wait_for

pytestmark = pytest.mark.timeout(150)

WAIT = 15.0  # seconds any single expected thing may take
RECEIVE_MS = 10_000

wait_for = functools.partial(wait_for, timeout=WAIT)


def _pattern_of(prefix: str) -> re.Pattern:
    return re.compile(re.escape(full(prefix)) + ".*")


def _listed(pulsar_broker, backend, *topics: str) -> None:
    """Wait until the broker lists these topics in the namespace. A subscribe right after a topic's
    first producer may otherwise get an older list: the broker lists a namespace from its metadata
    store's cache of the children of a path, which a topic's creation refreshes through an
    asynchronous notification (either client sees the topic only at its next listing then)."""
    def listed() -> bool:
        names = set(pulsar_broker.admin("GET", "/admin/v2/persistent/public/default"))
        return names.issuperset(topics)

    wait_for(lambda: run_blocking(backend, listed), backend, message="the broker lists %s" % (topics,))


def _receive_all(consumer, count: int) -> dict:
    """{topic name: [body, ...]} of count messages, each acknowledged."""
    got: dict = {}
    for _ in range(count):
        msg = consumer.receive(timeout_millis=RECEIVE_MS)
        got.setdefault(msg.topic_name(), []).append(msg.data())
        consumer.acknowledge(msg)
    return got


def _topics_of(consumer) -> set:
    return {each.topic for each in consumer.topic_consumers()}


# --------------------------------------------------------------------------- the wire


def test_get_topics_of_namespace_round_trips_through_the_decoder():
    command = proto.get_topics_of_namespace("public/default", 7, mode=2, topics_pattern="p.*", topics_hash="h")
    kind, record = proto.decode_command(command)
    assert kind == proto.GET_TOPICS_OF_NAMESPACE
    assert (record.request_id, record.namespace, record.mode, record.topics_pattern, record.topics_hash) == (
        7, "public/default", 2, "p.*", "h")
    answer = proto.base_command(proto.GET_TOPICS_OF_NAMESPACE_RESPONSE,
                                proto.f_uint(1, 7) + proto.f_str(2, "persistent://public/default/a")
                                + proto.f_str(2, "persistent://public/default/b") + proto.f_bool(3, True)
                                + proto.f_str(4, "abc"))
    kind, record = proto.decode_command(answer)
    assert kind == proto.GET_TOPICS_OF_NAMESPACE_RESPONSE
    assert record.topics == ["persistent://public/default/a", "persistent://public/default/b"]
    assert (record.filtered, record.topics_hash, record.changed) == (True, "abc", True)


def test_the_topic_list_watch_commands_round_trip_through_the_decoder():
    kind, record = proto.decode_command(proto.watch_topic_list(3, 9, "public/default", "persistent://public/default/.*"))
    assert kind == proto.WATCH_TOPIC_LIST
    assert (record.request_id, record.watcher_id, record.namespace, record.topics_pattern) == (
        3, 9, "public/default", "persistent://public/default/.*")
    kind, record = proto.decode_command(proto.watch_topic_list_close(4, 9))
    assert (kind, record.request_id, record.watcher_id) == (proto.WATCH_TOPIC_LIST_CLOSE, 4, 9)
    update = proto.base_command(proto.WATCH_TOPIC_UPDATE, proto.f_uint(1, 9) + proto.f_str(2, "persistent://a/b/new")
                                + proto.f_str(3, "persistent://a/b/old") + proto.f_str(4, "h"))
    from pulsarfast.wire import codec
    from pulsarfast.wire.sansio import PulsarProtocol, TopicListChanged
    [event] = PulsarProtocol(proto.connect()).receive_data(codec.encode_simple(update))
    assert isinstance(event, TopicListChanged)
    assert (event.watcher_id, event.new_topics, event.deleted_topics) == (9, ["persistent://a/b/new"],
                                                                          ["persistent://a/b/old"])


# --------------------------------------------------------------------------- the argument


def test_a_pattern_takes_the_listed_topics_it_matches_in_its_mode():
    from pulsarfast.consuming.pattern import TopicPattern

    pattern = TopicPattern(re.compile("persistent://public/default/pre-.*"), pulsar.RegexSubscriptionMode.PersistentOnly)
    assert pattern.namespace == "public/default"
    listed = ["persistent://public/default/pre-a", "persistent://public/default/other",
              "persistent://public/default/pre-p-partition-1", "non-persistent://public/default/pre-n",
              "persistent://public/default/pre-a"]
    assert pattern.matching(listed) == ["persistent://public/default/pre-a", "persistent://public/default/pre-p-partition-1"]
    every = TopicPattern(re.compile("my-tenant/my-ns/x$"), pulsar.RegexSubscriptionMode.AllTopics)
    assert every.namespace == "my-tenant/my-ns"
    assert every.matching(["non-persistent://my-tenant/my-ns/x", "persistent://my-tenant/my-ns/x-partition-0",
                           "persistent://my-tenant/my-ns/xy"]) == [
        "non-persistent://my-tenant/my-ns/x", "persistent://my-tenant/my-ns/x-partition-0"]
    short = TopicPattern(re.compile("pre-.*"), pulsar.RegexSubscriptionMode.NonPersistentOnly)
    assert short.namespace == "public/default"
    assert short.matching(listed) == ["non-persistent://public/default/pre-n"]


def test_pattern_arguments_are_checked_before_anything_is_sent(client):
    with pytest.raises(ValueError):
        client.subscribe(re.compile(b"persistent://public/default/x.*"), "sub")
    with pytest.raises(pulsar.InvalidTopicName):
        client.subscribe(re.compile("persistent://only-a-tenant/"), "sub")
    with pytest.raises(ValueError):
        client.subscribe(re.compile("x.*"), "sub", pattern_auto_discovery_period=1.5)
    with pytest.raises(ValueError):
        client.subscribe(re.compile("x.*"), "sub", regex_subscription_mode=2)


# --------------------------------------------------------------------------- on the broker


def test_a_pattern_consumer_gets_the_matching_topics_and_no_other(client, backend, pulsar_topic, pulsar_broker):
    prefix = pulsar_topic + "_p"
    first, second, other = full(prefix + "a"), full(prefix + "b"), full(pulsar_topic + "_other")
    for topic in (first, second, other):
        produce(client, topic, [b"before"])  # (the topics exist before the subscribe)
    _listed(pulsar_broker, backend, first, second, other)
    consumer = client.subscribe(_pattern_of(prefix), "pat", initial_position=pulsar.InitialPosition.Earliest,
                                consumer_type=pulsar.ConsumerType.Shared)
    assert _topics_of(consumer) == {first, second}
    assert consumer.topic() == _pattern_of(prefix).pattern
    for topic in (first, second, other):
        produce(client, topic, [b"after " + topic.encode()])
    got = _receive_all(consumer, 4)
    assert got == {first: [b"before", b"after " + first.encode()],
                   second: [b"before", b"after " + second.encode()]}
    assert_nothing_more(consumer)
    consumer.close()
    assert consumer.topic_watch is not None and consumer.topic_watch._timer is None


def test_a_topic_created_after_the_subscribe_is_joined_within_the_period(client, backend, pulsar_topic,
                                                                          pulsar_broker):
    prefix = pulsar_topic + "_p"
    first, later, other = full(prefix + "a"), full(prefix + "later"), full(pulsar_topic + "_other_later")
    produce(client, first, [b"first"])
    _listed(pulsar_broker, backend, first)
    consumer = client.subscribe(_pattern_of(prefix), "pat", initial_position=pulsar.InitialPosition.Earliest,
                                pattern_auto_discovery_period=1)
    assert _topics_of(consumer) == {first}
    assert _receive_all(consumer, 1) == {first: [b"first"]}
    produce(client, later, [b"later"])  # (auto-created by the producer)
    produce(client, other, [b"not mine"])
    wait_for(lambda: later in _topics_of(consumer), backend, message="the new topic joined")
    assert _receive_all(consumer, 1) == {later: [b"later"]}
    assert _topics_of(consumer) == {first, later}
    produce(client, first, [b"again"])
    assert _receive_all(consumer, 1) == {first: [b"again"]}
    assert_nothing_more(consumer)


def test_the_brokers_topic_list_watch_joins_a_new_topic_long_before_the_period(client, backend, pulsar_topic,
                                                                               pulsar_broker):
    prefix = pulsar_topic + "_p"
    first, later = full(prefix + "a"), full(prefix + "later")
    produce(client, first, [b"first"])
    _listed(pulsar_broker, backend, first)
    consumer = client.subscribe(_pattern_of(prefix), "pat", initial_position=pulsar.InitialPosition.Earliest,
                                pattern_auto_discovery_period=600)  # (no listing again within the test)
    watch = consumer.topic_watch
    wait_for(lambda: watch.watching, backend, message="the topic-list watch opened")
    produce(client, later, [b"later"])
    wait_for(lambda: later in _topics_of(consumer), backend, message="the new topic joined through the watch")
    assert watch.listings == 1 and watch.watch_updates >= 1
    assert _receive_all(consumer, 2) == {first: [b"first"], later: [b"later"]}
    consumer.close()
    assert not watch.watching


def test_a_pattern_matching_nothing_yet_joins_its_first_topic(client, backend, pulsar_topic):
    prefix = pulsar_topic + "_p"
    first = full(prefix + "first")
    consumer = client.subscribe(_pattern_of(prefix), "pat", initial_position=pulsar.InitialPosition.Earliest,
                                pattern_auto_discovery_period=1)
    assert _topics_of(consumer) == set()
    produce(client, first, [b"one"])
    wait_for(lambda: first in _topics_of(consumer), backend, message="the first topic joined")
    assert _receive_all(consumer, 1) == {first: [b"one"]}
    consumer.unsubscribe()
    assert consumer.topic_watch._timer is None


def test_partitions_of_a_partitioned_topic_are_joined(client, backend, pulsar_topic, pulsar_broker):
    prefix = pulsar_topic + "_p"
    parted = full(prefix + "parted")
    run_blocking(backend, pulsar_broker.create_partitioned_topic, prefix + "parted", 2)
    produce(client, parted, [b"p%d" % i for i in range(4)])
    names = {parted + "-partition-0", parted + "-partition-1"}
    _listed(pulsar_broker, backend, *names)
    consumer = client.subscribe(_pattern_of(prefix), "pat", initial_position=pulsar.InitialPosition.Earliest)
    assert _topics_of(consumer) == names
    got = _receive_all(consumer, 4)
    assert set(got) == names
    assert sorted(body for bodies in got.values() for body in bodies) == [b"p0", b"p1", b"p2", b"p3"]


def test_a_partition_added_to_a_joined_topic_is_joined_within_the_period(client, backend, pulsar_topic,
                                                                          pulsar_broker):
    prefix = pulsar_topic + "_p"
    parted = full(prefix + "grows")
    run_blocking(backend, pulsar_broker.create_partitioned_topic, prefix + "grows", 2)
    consumer = client.subscribe(_pattern_of(prefix), "pat", initial_position=pulsar.InitialPosition.Earliest,
                                pattern_auto_discovery_period=1)
    assert _topics_of(consumer) == {parted + "-partition-0", parted + "-partition-1"}
    run_blocking(backend, pulsar_broker.update_partitioned_topic, prefix + "grows", 3)
    produce(client, parted + "-partition-2", [b"on the new partition"])
    wait_for(lambda: parted + "-partition-2" in _topics_of(consumer), backend, message="the new partition joined")
    assert _receive_all(consumer, 1) == {parted + "-partition-2": [b"on the new partition"]}
    assert_nothing_more(consumer)


def test_a_topic_no_longer_listed_is_left(client, backend, pulsar_topic, pulsar_broker, monkeypatch):
    prefix = pulsar_topic + "_p"
    first, second = full(prefix + "a"), full(prefix + "b")
    for topic in (first, second):
        produce(client, topic, [b"x"])
    _listed(pulsar_broker, backend, first, second)
    consumer = client.subscribe(_pattern_of(prefix), "pat", initial_position=pulsar.InitialPosition.Earliest)
    assert _receive_all(consumer, 2) == {first: [b"x"], second: [b"x"]}
    watch = consumer.topic_watch
    # (as the broker would list the namespace once second is deleted: deleting it for real races the
    # re-subscription, which auto-creates it again, in either client)
    monkeypatch.setattr(watch, "_listed", lambda: [first])
    watch.discover(consumer)
    assert _topics_of(consumer) == {first}
    wait_for(lambda: not subscription_stats(pulsar_broker, backend, prefix + "b", "pat")["consumers"], backend,
             message="the left topic's consumer closed on the broker")
    produce(client, second, [b"not any more"])
    produce(client, first, [b"still"])
    assert _receive_all(consumer, 1) == {first: [b"still"]}
    assert_nothing_more(consumer)


# --------------------------------------------------------------------------- the official client


@needs_official
def test_the_official_client_takes_the_same_topics(client, backend, pulsar_topic, pulsar_broker):
    """Both clients on the same pattern: the same topics (and the same topic()). The official
    wrapper checks pattern_auto_discovery_period and never passes it on (its C++ client lists every
    60 s whatever is given), so its joining of later topics is not waited for here."""
    prefix = pulsar_topic + "_p"
    first, second, other = full(prefix + "a"), full(prefix + "b"), full(pulsar_topic + "_other")
    for topic in (first, second, other):
        produce(client, topic, [b"before"])
    _listed(pulsar_broker, backend, first, second, other)
    theirs_client = run_blocking(backend, official_client, pulsar_broker)
    try:
        theirs = run_blocking(backend, functools.partial(
            theirs_client.subscribe, _pattern_of(prefix), "official",
            initial_position=official.InitialPosition.Earliest))
        ours = client.subscribe(_pattern_of(prefix), "ours", initial_position=pulsar.InitialPosition.Earliest)
        assert run_blocking(backend, theirs.topic) == ours.topic() == _pattern_of(prefix).pattern

        def official_gets(count):
            got: dict = {}
            for _ in range(count):
                msg = theirs.receive(timeout_millis=RECEIVE_MS)
                got.setdefault(msg.topic_name(), []).append(msg.data())
                theirs.acknowledge(msg)
            return got

        expected = {first: [b"before"], second: [b"before"]}
        assert run_blocking(backend, official_gets, 2) == expected
        assert _receive_all(ours, 2) == expected
        assert_nothing_more(ours)
        with pytest.raises(official.Timeout):
            run_blocking(backend, functools.partial(theirs.receive, timeout_millis=1_000))
    finally:
        run_blocking(backend, theirs_client.close)


def test_an_http_service_url_refuses_patterns_before_subscribing(pulsar_broker, backend):
    http_client = pulsar.Client(pulsar_broker.web_url, operation_timeout_seconds=15, backend=backend)
    try:
        with pytest.raises(pulsar.InvalidConfiguration, match="pulsar://"):
            http_client.subscribe(re.compile("persistent://public/default/x.*"), "sub")
    finally:
        http_client.close()


@needs_official
def test_a_str_is_a_topic_name_for_both_clients(client, backend, pulsar_topic, pulsar_broker):
    """A pattern given as a str is a topic name in the official client: the same here."""
    text = full(pulsar_topic + "_p.*")
    ours = client.subscribe(text, "str")
    assert ours.topic() == text and _topics_of(ours) == {text}
    theirs_client = run_blocking(backend, official_client, pulsar_broker)
    try:
        theirs = run_blocking(backend, theirs_client.subscribe, text, "str-official")
        assert run_blocking(backend, theirs.topic) == text
    finally:
        run_blocking(backend, theirs_client.close)
