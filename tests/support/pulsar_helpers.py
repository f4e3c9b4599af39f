"""Helpers the Pulsar tests share: topic names and message ids (``full``, ``entry_of``, ``id_tuple``,
``bodies_of``), the broker's stats without stalling gevent (``topic_stats``, ``subscription_stats``),
sending (``send_outcomes``, ``send_all``, ``produce``: with pulsarfast or the official client), the
official client (``official``, ``needs_official``, ``official_client``), a consumer that must get
nothing more (``assert_nothing_more``), a broker frozen with SIGSTOP (``broker_frozen``: only ever a
broker of the test's own, see ``private_pulsar_broker``), and a producer on a raw socket that writes
frames the client's producers never write (``raw_producer``, ``read_until``).
"""
from __future__ import annotations

import contextlib
import importlib
import logging
import os
import signal
import socket
from typing import Iterator

import pytest

import pulsarfast
from pulsarfast.wire import codec, proto

from .waiting import run_blocking, wait_for

__all__ = [
    "OFFICIAL_LOGGER", "assert_nothing_more", "bodies_of", "broker_frozen", "entry_of", "full", "id_tuple",
    "needs_official", "official", "official_client", "produce", "raw_producer", "read_until", "send_all", "send_outcomes", "subscription_stats",
    "topic_stats",
]

try:
    official = importlib.import_module("pulsar")  # the official client (pulsarfast is imported as `pulsar` in tests)
except ImportError:  # pragma: no cover - requirements-dev.txt installs it
    official = None

needs_official = pytest.mark.skipif(
    official is None, reason="the official `pulsar-client` wheel is not installed (pip install -r requirements-dev.txt)")

OFFICIAL_LOGGER = logging.getLogger("pulsar-official-client")

CALLBACKS_WITHIN = 15.0  # seconds: every send_async callback after flush()


# ----------------------------------------------------------------------------- names and ids


def full(name: str) -> str:
    """The full name of a topic of public/default: ``persistent://public/default/<name>``."""
    return "persistent://public/default/" + name


def entry_of(message_id) -> tuple:
    """(ledger, entry, partition) of either client's MessageId: the stored entry (a batch's messages share it)."""
    return (message_id.ledger_id(), message_id.entry_id(), message_id.partition())


def id_tuple(message_id) -> tuple:
    """(ledger, entry, partition, batch index) of either client's MessageId."""
    return (message_id.ledger_id(), message_id.entry_id(), message_id.partition(), message_id.batch_index())


def bodies_of(prefix: bytes, count: int) -> list:
    """count distinct bodies: ``<prefix>-0``, ``<prefix>-1``, ..."""
    return [b"%s-%d" % (prefix, i) for i in range(count)]


# ----------------------------------------------------------------------------- the broker's stats


def topic_stats(broker, backend, topic: str) -> dict:
    """The broker's stats of the topic (its admin API), fetched without stalling gevent."""
    return run_blocking(backend, broker.topic_stats, topic)


def subscription_stats(broker, backend, topic: str, subscription: str) -> dict | None:
    """The stats of one subscription of the topic (see topic_stats); None while the broker does not know it."""
    return topic_stats(broker, backend, topic)["subscriptions"].get(subscription)


# ----------------------------------------------------------------------------- sending


def _is_ok(result) -> bool:
    return result == type(result).Ok  # (pulsarfast.Result or the official client's Result)


def send_outcomes(producer, messages, **kwargs) -> list:
    """send_async every message (a body, or a (body, send_async kwargs) pair; kwargs go with every one),
    then flush() and wait for every callback: [(result, message_id)] in send order. Works with a
    pulsarfast producer or an official one (whose calls run on a thread of their own)."""
    outcomes: list = [None] * len(messages)
    repeated: list = []

    def callback_for(index):
        def callback(result, message_id):  # (one list item each: safe from the official client's C++ threads)
            if outcomes[index] is not None:
                repeated.append(index)
            outcomes[index] = (result, message_id)
        return callback

    for index, message in enumerate(messages):
        body, own = message if isinstance(message, tuple) else (message, {})
        producer.send_async(body, callback_for(index), **kwargs, **own)
    producer.flush()  # (pulsarfast's returns after the callbacks of the sends before it)
    progress = lambda: "every send's callback (%d of %d)" % (len(outcomes) - outcomes.count(None), len(outcomes))  # noqa: E731
    if not isinstance(producer, pulsarfast.Producer):  # the official client's callbacks run on a thread of its own
        wait_for(lambda: None not in outcomes, "threads", timeout=CALLBACKS_WITHIN, message=progress)
    assert None not in outcomes, "flush() returned before " + progress()
    assert not repeated, "callbacks called more than once, of the sends %r" % repeated[:5]
    return outcomes


def send_all(producer, messages, **kwargs) -> list:
    """send_outcomes(), asserting that every send succeeded: the message ids in send order."""
    outcomes = send_outcomes(producer, messages, **kwargs)
    failed = [(index, result) for index, (result, _) in enumerate(outcomes) if not _is_ok(result)]
    assert not failed, "%d sends failed, first: %r" % (len(failed), failed[:5])
    return [message_id for _, message_id in outcomes]


def produce(client, topic: str, messages, **producer_kwargs) -> list:
    """send_all() the messages from a producer of their own (create_producer(topic, **producer_kwargs)),
    closed after: the message ids in send order. Either client."""
    producer = client.create_producer(topic, **producer_kwargs)
    ids = send_all(producer, messages)
    producer.close()
    return ids


# ----------------------------------------------------------------------------- receiving


def assert_nothing_more(consumer, timeout_ms: int = 1_000) -> None:
    """No message comes to the (pulsarfast) consumer within timeout_ms."""
    with pytest.raises(pulsarfast.Timeout):
        extra = consumer.receive(timeout_millis=timeout_ms)
        pytest.fail("unexpected message %r (%r, redelivery count %d)" % (extra, extra.data(),
                                                                          extra.redelivery_count()))


# ----------------------------------------------------------------------------- the official client


def official_client(broker, **kwargs):
    """An official pulsar-client Client on the broker (operation timeout 15 s and its log to Python
    logging, unless kwargs say otherwise). Its calls block in C++: under gevent, run them through
    run_blocking, or before or after pulsarfast's part of the test."""
    kwargs.setdefault("operation_timeout_seconds", 15)
    kwargs.setdefault("logger", OFFICIAL_LOGGER)
    return official.Client(broker.service_url, **kwargs)


# ----------------------------------------------------------------------------- a frozen broker


def _threads_state(pid: int) -> set:
    states = set()
    for task in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/stat" % (pid, task)) as f:
                states.add(f.read().rsplit(")", 1)[1].split()[0])
        except OSError:
            continue  # a thread that just ended
    return states


@contextlib.contextmanager
def broker_frozen(broker, backend) -> Iterator[None]:
    """The broker's JVM stopped (SIGSTOP) for the block: it answers nothing until SIGCONT at the end."""
    pid = broker.pid
    assert pid is not None and broker.running, "only a broker of the test's own can be frozen"
    os.kill(pid, signal.SIGSTOP)
    try:
        # SIGSTOP takes effect on each thread asynchronously: wait until every one is stopped
        wait_for(lambda: _threads_state(pid) <= {"T", "t"}, backend, timeout=10, interval=0.001,
                 message="the broker's threads to stop")
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


ROUND_TRIP_WAIT = 20.0  # seconds: each message of a round trip on a broker of a test's own


def patient_client(url, backend, **kwargs):
    """A pulsarfast client for a broker of a test's own (operation timeout 30 s, connect 5 s), which
    the caller closes."""
    import pulsarfast  # (here: a run of the NSQ tests alone never imports it)

    kwargs.setdefault("operation_timeout_seconds", 30)
    kwargs.setdefault("connection_timeout_ms", 5000)
    return pulsarfast.Client(url, backend=backend, **kwargs)


def round_trip(client, topic, count=3, ordered=True):
    """Send count messages and receive them all back, acknowledged, on a new subscription (in
    order, unless the topic is partitioned: there the order holds per partition only); returns
    (producer, consumer)."""
    import pulsarfast

    consumer = client.subscribe(topic, "sub", initial_position=pulsarfast.InitialPosition.Earliest)
    producer = client.create_producer(topic)
    sent = [b"m-%d" % i for i in range(count)]
    for body in sent:
        producer.send(body)
    received = []
    for _ in sent:
        msg = consumer.receive(timeout_millis=int(ROUND_TRIP_WAIT * 1000))
        received.append(msg.data())
        consumer.acknowledge(msg)
    assert (received if ordered else sorted(received)) == sent
    return producer, consumer


@contextlib.contextmanager
def official_session(broker, **kwargs):
    """``official_client(broker, **kwargs)`` for the length of a ``with`` block, closed after it
    (the official half of a side-by-side test)."""
    client = official_client(broker, **kwargs)
    try:
        yield client
    finally:
        client.close()


# ----------------------------------------------------------------------------- raw frames


def read_until(sock, decoder, kind, timeout: float = 20.0):
    """Read frames from a raw connection until one of type kind: its record (a broker ERROR or
    SEND_ERROR fails the test)."""
    sock.settimeout(timeout)
    while True:
        data = sock.recv(65536)
        assert data, "the broker closed the raw connection"
        for command, _metadata, _payload, _ok in decoder.feed(data):
            got, record = proto.decode_command(command)
            if got == kind:
                return record
            assert got not in (proto.ERROR, proto.SEND_ERROR), record


@contextlib.contextmanager
def raw_producer(broker, topic: str, producer_id: int = 1, timeout: float = 20.0):
    """A producer (producer_id) on topic over a raw socket, made with pulsarfast's own encoders:
    yields (socket, FrameDecoder) for frames no client producer writes; closed after the block."""
    decoder = codec.FrameDecoder()
    with socket.create_connection((broker.host, broker.port), timeout=timeout) as sock:
        sock.sendall(codec.encode_simple(proto.connect()))
        read_until(sock, decoder, proto.CONNECTED, timeout)
        sock.sendall(codec.encode_simple(proto.producer(broker.topic_name(topic), producer_id, 1)))
        read_until(sock, decoder, proto.PRODUCER_SUCCESS, timeout)
        yield sock, decoder
