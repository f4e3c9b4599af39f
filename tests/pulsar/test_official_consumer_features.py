"""Consumer features of the official client, each checked on the official client (same steps, same
expectations) and on pulsarfast on both backends:

- ``ConsumerKeySharedPolicy`` and ``KeySharedMode``: two Sticky consumers with disjoint hash ranges
  each get the keys whose hash (Murmur3 32 of the key, mod 65536) lies in their ranges, and together
  every key; a range taken by another consumer is refused by the broker; the constructor's checks;
- ``ConsumerBatchReceivePolicy`` and ``Consumer.batch_receive()``: a list, ended by the count, the
  bytes or the timeout (then maybe empty); the count capped at the receiver queue's size;
- ``batch_index_ack_enabled=True``: after acknowledging 2 of a batch of 5, exactly the other 3 come
  again (resubscribed, negatively acknowledged); a cumulative ack inside a batch;
- the dead-letter topic gets the messages in the order they were sent.
"""
from __future__ import annotations

import functools

import pytest

import pulsarfast as pulsar
from pulsarfast.wire import proto
from pulsarfast.wire.hashing import murmur3_32_hash
from pulsarfast.wire.message import index_words
from tests.support.pulsar_helpers import (
    official_session, bodies_of, needs_official, official, official_client, send_all)

pytestmark = pytest.mark.timeout(150)

RECEIVE_MS = 10_000

LIBRARIES = [pytest.param(pulsar, id="pulsarfast"),
             pytest.param(official, id="official", marks=needs_official)]


def drain(consumer, timeout_ms: int = 1_500) -> list:
    """What the consumer (of either client) receives until nothing comes within timeout_ms."""
    got = []
    while True:
        try:
            got.append(consumer.receive(timeout_ms))
        except Exception as exc:  # noqa: BLE001 - either client's Timeout
            assert type(exc).__name__ == "Timeout", exc
            return got


def run_official(broker, steps, topic):
    with official_session(broker) as client:
        return steps(official, client, topic)


# --------------------------------------------------------------------------- 1. KeyShared policies


def key_hash(key: str) -> int:
    return murmur3_32_hash(key) % 65536


LOW, HIGH = [(0, 32767)], [(32768, 65535)]
KEYS = ["key-%d" % i for i in range(40)]


def sticky_steps(lib, client, topic):
    """Two Sticky consumers (low and high halves of the hash space): the keys each receives."""
    policy = functools.partial(lib.ConsumerKeySharedPolicy, lib.KeySharedMode.Sticky)
    low = client.subscribe(topic, "ks", consumer_type=lib.ConsumerType.KeyShared, key_shared_policy=policy(
        sticky_ranges=LOW))
    high = client.subscribe(topic, "ks", consumer_type=lib.ConsumerType.KeyShared, key_shared_policy=policy(
        sticky_ranges=HIGH))
    with pytest.raises(lib.ConsumerAssignError):  # (a range another consumer has)
        client.subscribe(topic, "ks", consumer_type=lib.ConsumerType.KeyShared,
                         key_shared_policy=policy(sticky_ranges=[(100, 200)]))
    with pytest.raises(lib.ConsumerAssignError):  # (start after end: accepted here, refused by the broker)
        client.subscribe(topic, "ks-backwards", consumer_type=lib.ConsumerType.KeyShared,
                         key_shared_policy=policy(sticky_ranges=[(200, 100)]))
    producer = client.create_producer(topic)
    send_all(producer, [(key.encode(), {"partition_key": key}) for key in KEYS])
    expected_low = [key for key in KEYS if key_hash(key) <= 32767]
    got_low = [low.receive(RECEIVE_MS).partition_key() for _ in expected_low]
    got_high = [high.receive(RECEIVE_MS).partition_key() for _ in range(len(KEYS) - len(expected_low))]
    extra = drain(low, 1_000) + drain(high, 1_000)
    return got_low, got_high, extra


def check_sticky(got_low, got_high, extra):
    assert not extra
    assert all(key_hash(key) <= 32767 for key in got_low)
    assert all(key_hash(key) >= 32768 for key in got_high)
    assert sorted(got_low + got_high) == sorted(KEYS)
    assert got_low and got_high  # (40 keys fall on both halves)


@needs_official
def test_official_sticky_key_shared_consumers_get_their_ranges(pulsar_broker, pulsar_topic):
    check_sticky(*run_official(pulsar_broker, sticky_steps, pulsar_topic))


def test_sticky_key_shared_consumers_get_their_ranges(client, pulsar_topic):
    check_sticky(*sticky_steps(pulsar, client, pulsar_topic))


def test_key_shared_subscribe_carries_the_policy():
    policy = pulsar.ConsumerKeySharedPolicy(pulsar.KeySharedMode.Sticky, True, [(0, 9), (20, 65535)])
    command = proto.subscribe("t", "s", proto.SUB_KEY_SHARED, 1, 2, key_shared_mode=int(policy.key_shared_mode),
                              hash_ranges=policy.hash_ranges(), allow_out_of_order=True)
    meta = proto.decode_command(command)[1].keySharedMeta
    assert meta.keySharedMode == proto.KEY_SHARED_STICKY
    assert [(r.start, r.end) for r in meta.hashRanges] == [(0, 9), (20, 65535)]
    assert meta.allowOutOfOrderDelivery is True
    auto = pulsar.ConsumerKeySharedPolicy(sticky_ranges=[(0, 9)])  # (AutoSplit: the ranges are not sent)
    assert auto.hash_ranges() == []


def key_shared_outcome(lib, *args, **kwargs):
    try:
        policy = lib.ConsumerKeySharedPolicy(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - the outcome is what is compared
        return type(exc).__name__, str(exc) if isinstance(exc, ValueError) else ""
    return "ok", (policy.key_shared_mode.name, policy.allow_out_of_order_delivery, policy.sticky_ranges)


STICKY = "Sticky"
KEY_SHARED_CASES = {
    "default": ((), {}, ("ok", ("AutoSplit", False, []))),
    "sticky without ranges": ((STICKY,), {}, ("ValueError", "When using key_shared_mode = KeySharedMode.Sticky "
                                                            "you must also provide sticky_ranges")),
    "empty": ((STICKY,), {"sticky_ranges": []}, ("ValueError", "Ranges for KeyShared policy must not be empty.")),
    "overlapping": ((STICKY,), {"sticky_ranges": [(0, 100), (50, 200)]},
                    ("ValueError", "Ranges for KeyShared policy with overlap.")),
    "touching": ((STICKY,), {"sticky_ranges": [(0, 100), (100, 200)]},
                 ("ValueError", "Ranges for KeyShared policy with overlap.")),
    "inside": ((STICKY,), {"sticky_ranges": [(50, 60), (0, 100)]},
               ("ValueError", "Ranges for KeyShared policy with overlap.")),
    "equal ranges": ((STICKY,), {"sticky_ranges": [(0, 10), (0, 10)]}, ("ok", (STICKY, False, [(0, 10), (0, 10)]))),
    "start after end": ((STICKY,), {"sticky_ranges": [(200, 100)]}, ("ok", (STICKY, False, [(200, 100)]))),
    "above 65535": ((STICKY,), {"sticky_ranges": [(0, 65536)]},
                    ("ValueError", "KeySharedPolicy Exception: Ranges must be [0, 65535].")),
    "below 0": ((STICKY,), {"sticky_ranges": [(-1, 5)]},
                ("ValueError", "KeySharedPolicy Exception: Ranges must be [0, 65535].")),
    "bounds before overlap": ((STICKY,), {"sticky_ranges": [(50, 70000), (0, 100)]},
                              ("ValueError", "KeySharedPolicy Exception: Ranges must be [0, 65535].")),
    "overlap before bounds": ((STICKY,), {"sticky_ranges": [(0, 100), (50, 70000)]},
                              ("ValueError", "Ranges for KeyShared policy with overlap.")),
    "whole space": ((STICKY,), {"sticky_ranges": [[0, 65535]]}, ("ok", (STICKY, False, [(0, 65535)]))),
    "three numbers": ((STICKY,), {"sticky_ranges": [(0, 1, 2)]}, ("TypeError", "")),
    "a float": ((STICKY,), {"sticky_ranges": [(0.5, 1)]}, ("TypeError", "")),
    "not a list": ((STICKY,), {"sticky_ranges": 5}, ("TypeError", "")),
    "mode as a str": (("Sticky",), {}, ("TypeError", "")),
    "out of order": (("AutoSplit",), {"allow_out_of_order_delivery": 1}, ("ok", ("AutoSplit", True, []))),
    "out of order str": (("AutoSplit",), {"allow_out_of_order_delivery": "x"}, ("TypeError", "")),
}


@pytest.mark.parametrize("lib", LIBRARIES)
@pytest.mark.parametrize("case", list(KEY_SHARED_CASES))
def test_key_shared_policy_checks(lib, case):
    args, kwargs, expected = KEY_SHARED_CASES[case]
    if args and args[0] in ("Sticky", "AutoSplit") and case != "mode as a str":
        args = (getattr(lib.KeySharedMode, args[0]),) + args[1:]
    assert key_shared_outcome(lib, *args, **kwargs) == expected


@pytest.mark.parametrize("lib", LIBRARIES)
def test_key_shared_policy_argument_type(lib, pulsar_broker):
    client = lib.Client(pulsar_broker.service_url) if lib is pulsar else official_client(pulsar_broker)
    try:
        with pytest.raises(ValueError, match="key_shared_policy is expected to be either None or of type "
                                             "'ConsumerKeySharedPolicy'"):
            client.subscribe("t-unused", "s", consumer_type=lib.ConsumerType.KeyShared, key_shared_policy="x")
        with pytest.raises(ValueError, match="batch_receive_policy is expected to be either None or of type "
                                             "'ConsumerBatchReceivePolicy'"):
            client.subscribe("t-unused", "s", batch_receive_policy=5)
    finally:
        client.close()


# --------------------------------------------------------------------------- 2. batch_receive


def batch_receive_steps(lib, client, topic):
    """batch_receive() under several policies over 7 two-byte messages: the bodies of each call."""
    produced = bodies_of(b"m", 7)  # (b"m-0": three bytes each)
    producer = client.create_producer(topic)
    send_all(producer, produced)
    seen = {}

    def subscribe(name, *policy, **kwargs):
        return client.subscribe(topic, name, initial_position=lib.InitialPosition.Earliest,
                                batch_receive_policy=lib.ConsumerBatchReceivePolicy(*policy) if policy else None,
                                **kwargs)

    consumer = subscribe("count", 3, -1, 2_000)
    batches = [consumer.batch_receive() for _ in range(4)]
    seen["type"] = type(batches[0]).__name__
    seen["indexing"] = (len(batches[0]), batches[0][0].data(), batches[0][-1].data())
    seen["count"] = [[message.data() for message in batch] for batch in batches]
    for batch in batches:
        for message in batch:
            consumer.acknowledge(message)
    consumer.close()
    consumer = subscribe("bytes", -1, 6, 10_000)  # (two messages reach 6 bytes: no wait)
    seen["bytes"] = [[message.data() for message in consumer.batch_receive()] for _ in range(3)]
    consumer.close()
    consumer = subscribe("small", -1, 1, 10_000)  # (the first message goes whatever its size)
    seen["first"] = [message.data() for message in consumer.batch_receive()]
    consumer.close()
    consumer = subscribe("capped", 5, -1, 10_000, receiver_queue_size=2)  # (5 capped at the queue's 2)
    seen["capped"] = [message.data() for message in consumer.batch_receive()]
    consumer.close()
    return seen


BATCH_RECEIVE_EXPECTED = {
    "type": "list",
    "indexing": (3, b"m-0", b"m-2"),
    "count": [[b"m-0", b"m-1", b"m-2"], [b"m-3", b"m-4", b"m-5"], [b"m-6"], []],
    "bytes": [[b"m-0", b"m-1"], [b"m-2", b"m-3"], [b"m-4", b"m-5"]],
    "first": [b"m-0"],
    "capped": [b"m-0", b"m-1"],
}


@needs_official
def test_official_batch_receive(pulsar_broker, pulsar_topic):
    assert run_official(pulsar_broker, batch_receive_steps, pulsar_topic) == BATCH_RECEIVE_EXPECTED


def test_batch_receive(client, pulsar_topic):
    assert batch_receive_steps(pulsar, client, pulsar_topic) == BATCH_RECEIVE_EXPECTED


def batch_policy_outcome(lib, *args):
    try:
        policy = lib.ConsumerBatchReceivePolicy(*args).policy()
    except Exception as exc:  # noqa: BLE001 - the outcome is what is compared
        return type(exc).__name__, str(exc) if isinstance(exc, ValueError) else ""
    return "ok", (policy.getMaxNumMessages(), policy.getMaxNumBytes(), policy.getTimeoutMs())


BATCH_POLICY_CASES = {
    "all": ((10, 100, 1000), ("ok", (10, 100, 1000))),
    "none": ((-1, -1, -1), ("ValueError", "At least one of maxNumMessages, maxNumBytes and timeoutMs must be "
                                          "specified.")),
    "zeros": ((0, 0, 0), ("ValueError", "At least one of maxNumMessages, maxNumBytes and timeoutMs must be "
                                        "specified.")),
    "timeout only": ((-1, -1, 100), ("ok", (-1, 10 * 1024 * 1024, 100))),
    "count only": ((5, -1, -1), ("ok", (5, -1, -1))),
    "a float": ((1.5, 1, 1), ("TypeError", "")),
    "None": ((None, 1, 1), ("TypeError", "")),
    "count above int32": ((2**31, 1, 1), ("TypeError", "")),
    "bytes above int32": ((1, 2**31, 1), ("TypeError", "")),
    "long timeout": ((1, 1, 2**31), ("ok", (1, 1, 2**31))),
}


@pytest.mark.parametrize("lib", LIBRARIES)
@pytest.mark.parametrize("case", list(BATCH_POLICY_CASES))
def test_batch_receive_policy_checks(lib, case):
    args, expected = BATCH_POLICY_CASES[case]
    assert batch_policy_outcome(lib, *args) == expected


# --------------------------------------------------------------------------- 3. batch-index acknowledgement


def batch_index_ack_steps(lib, client, topic):
    """A batch of 5; 2 acknowledged (1 and 3); what comes again after a resubscribe, after a negative
    ack of another one; and after a cumulative ack of index 2 on an Exclusive subscription."""
    seen = {}
    for how in ("resubscribe", "negative ack", "cumulative"):
        name = "%s-%s" % (topic, how.replace(" ", "-"))
        kind = lib.ConsumerType.Exclusive if how == "cumulative" else lib.ConsumerType.Shared

        def subscribe():
            return client.subscribe(name, "bia", consumer_type=kind, batch_index_ack_enabled=True,
                                    negative_ack_redelivery_delay_ms=100)
        consumer = subscribe()
        producer = client.create_producer(name, batching_enabled=True, batching_max_messages=5,
                                          batching_max_publish_delay_ms=60_000)
        ids = send_all(producer, bodies_of(b"b", 5))
        assert len({(i.ledger_id(), i.entry_id()) for i in ids}) == 1  # (one entry)
        received = [consumer.receive(RECEIVE_MS) for _ in range(5)]
        if how == "cumulative":
            consumer.acknowledge_cumulative(received[2])
        else:
            consumer.acknowledge(received[1])
            consumer.acknowledge(received[3])
        if how == "negative ack":
            consumer.negative_acknowledge(received[0])
        else:
            consumer.close()  # (acknowledgements still grouped go before the close)
            consumer = subscribe()
        seen[how] = sorted(message.data() for message in drain(consumer))
        consumer.close()
        producer.close()
    return seen


BATCH_INDEX_EXPECTED = {
    "resubscribe": [b"b-0", b"b-2", b"b-4"],
    "negative ack": [b"b-0", b"b-2", b"b-4"],
    "cumulative": [b"b-3", b"b-4"],
}


@needs_official
def test_official_batch_index_ack(pulsar_broker, pulsar_topic):
    assert run_official(pulsar_broker, batch_index_ack_steps, pulsar_topic) == BATCH_INDEX_EXPECTED


def test_batch_index_ack(client, pulsar_topic):
    assert batch_index_ack_steps(pulsar, client, pulsar_topic) == BATCH_INDEX_EXPECTED


def test_batch_index_ack_then_redeliver_unacknowledged(client, pulsar_topic):
    """(pulsarfast only: the official client sends redeliver_unacknowledged_messages() before its grouped
    acknowledgements, so all 5 come again there within the grouping time)"""
    consumer = client.subscribe(pulsar_topic, "bia", consumer_type=pulsar.ConsumerType.Shared,
                                batch_index_ack_enabled=True)
    producer = client.create_producer(pulsar_topic, batching_enabled=True, batching_max_messages=5,
                                      batching_max_publish_delay_ms=60_000)
    send_all(producer, bodies_of(b"r", 5))
    received = [consumer.receive(RECEIVE_MS) for _ in range(5)]
    consumer.acknowledge(received[0])
    consumer.acknowledge(received[4])
    consumer.redeliver_unacknowledged_messages()
    assert sorted(message.data() for message in drain(consumer)) == [b"r-1", b"r-2", b"r-3"]


def test_without_batch_index_ack_the_whole_batch_comes_again(client, pulsar_topic):
    consumer = client.subscribe(pulsar_topic, "whole", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(pulsar_topic, batching_enabled=True, batching_max_messages=5,
                                      batching_max_publish_delay_ms=60_000)
    send_all(producer, bodies_of(b"w", 5))
    received = [consumer.receive(RECEIVE_MS) for _ in range(5)]
    consumer.acknowledge(received[1])
    consumer.close()
    consumer = client.subscribe(pulsar_topic, "whole", consumer_type=pulsar.ConsumerType.Shared)
    assert sorted(message.data() for message in drain(consumer)) == bodies_of(b"w", 5)


def test_ack_set_words():
    assert index_words([]) == []
    assert index_words([0, 2, 4]) == [0b10101]
    assert index_words([63]) == [-(1 << 63)]  # (int64, signed)
    assert index_words([1, 64, 130]) == [2, 1, 4]
    command = proto.ack(7, proto.ACK_INDIVIDUAL, [proto.message_id_ack_set(3, 4, -1, index_words([0, 2, 4]))])
    message_id = proto.decode_command(command)[1].message_id[0]
    assert (message_id.ledgerId, message_id.entryId, message_id.ack_set) == (3, 4, [0b10101])


# --------------------------------------------------------------------------- 4. dead letters keep their order


def dead_letter_order_steps(lib, client, topic):
    """Six messages, each negatively acknowledged until it goes to the dead-letter topic
    (max_redeliver_count=1): the dead-letter topic's bodies, in order."""
    dead = topic + "-DLQ"
    dlq = client.subscribe(dead, "dlq-reader", initial_position=lib.InitialPosition.Earliest)
    consumer = client.subscribe(topic, "dl", consumer_type=lib.ConsumerType.Shared,
                                negative_ack_redelivery_delay_ms=100,
                                dead_letter_policy=lib.ConsumerDeadLetterPolicy(1, dead_letter_topic=dead))
    producer = client.create_producer(topic)
    send_all(producer, bodies_of(b"hello", 6))
    for _ in range(12):  # (each message twice: the delivery and its one redelivery)
        consumer.negative_acknowledge(consumer.receive(RECEIVE_MS))
    arrived = [dlq.receive(RECEIVE_MS).data() for _ in range(6)]
    extra = drain(dlq, 1_000)
    consumer.close()
    return arrived, extra


@needs_official
def test_official_dead_letters_keep_their_order(pulsar_broker, pulsar_topic):
    assert run_official(pulsar_broker, dead_letter_order_steps, pulsar_topic) == (bodies_of(b"hello", 6), [])


def test_dead_letters_keep_their_order(client, pulsar_topic):
    assert dead_letter_order_steps(pulsar, client, pulsar_topic) == (bodies_of(b"hello", 6), [])
