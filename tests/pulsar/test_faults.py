"""pulsarfast against a real Pulsar standalone broker when things go wrong:
a topic unloaded mid-stream, the connection dropped mid-stream, a stalled
broker, and send timeouts, on both backends (the `backend` fixture).

The fault proxy (tests/support/faultproxy.py) sits in the service URL. The
standalone's lookup answers say ``proxy_through_service_url``, so the client
connects to the service URL's host (the proxy) for the topic too, naming the
broker in CONNECT: the proxy is in the data path, not only in the lookups
(test_the_fault_proxy_is_in_the_data_path checks it)."""
from __future__ import annotations

import functools

import pytest

import pulsarfast as pulsar
from msgengine.runtime import get_backend
from pulsarfast.wire import proto
from pulsarfast.wire.codec import encode_simple
from tests.support.pulsar_helpers import subscription_stats, topic_stats
from tests.support.pulsar_streams import Collector, Sender
from tests.support.waiting import run_blocking, stays, wait_for

pytestmark = pytest.mark.timeout(150)

WAIT = 20.0
RECEIVE_MS = 200
STREAM = 3000

wait_for = functools.partial(wait_for, timeout=WAIT)


def proxied_client(proxy, backend, **kwargs):
    kwargs.setdefault("operation_timeout_seconds", 10)
    kwargs.setdefault("connection_timeout_ms", 3000)
    return pulsar.Client("pulsar://%s" % proxy.address, backend=backend, **kwargs)


def expected_bodies(count):
    return {b"m-%05d" % i for i in range(count)}


def check_stream(backend, sender, collector):
    """Every send got exactly one callback with Result.Ok and a message id; the
    consumer received every message (duplicates allowed)."""
    wait_for(sender.done, backend, message=lambda: "all %d send callbacks, got %d (sender errors %r)"
             % (sender.count, sender.callbacks, sender.errors))
    assert sender.errors == []
    assert sorted(sender.results) == list(range(sender.count))
    assert sender.failed() == {}
    assert all(mid is not None for r in sender.results.values() for _res, mid in r)
    want = expected_bodies(sender.count)
    wait_for(lambda: want <= collector.bodies, backend,
             message=lambda: "the consumer to receive all %d messages; missing %d, e.g. %r (errors %r)"
             % (len(want), len(want - collector.bodies), sorted(want - collector.bodies)[:5], collector.errors))
    assert collector.bodies == want
    assert collector.errors == []


def check_still_usable(backend, producer, collector, body):
    producer.send(body)  # blocks until the broker's receipt
    wait_for(lambda: body in collector.bodies, backend, message="%r to reach the consumer" % body)


# --------------------------------------------------------------------------- proxy placement


def test_the_fault_proxy_is_in_the_data_path(pulsar_broker, pulsar_topic, backend, fault_proxy_factory):
    proxy = fault_proxy_factory(pulsar_broker.host, pulsar_broker.port)
    client = proxied_client(proxy, backend)
    try:
        producer = client.create_producer(pulsar_topic)
        producer.send(b"warm-up")
        before = proxy.bytes_up
        producer.send(b"x" * 100_000)
        assert proxy.bytes_up - before >= 100_000  # the payload went through the relay
        # every connection of the client (lookups' and the topic's) goes to the proxy
        connections = client.broker_connections()
        assert len(connections) >= 1
        assert {c.address for c in connections} == {(proxy.host, proxy.port)}
        assert proxy.active_connections == len(connections)
    finally:
        client.close()


# --------------------------------------------------------------------------- topic unload


def test_topic_unload_mid_stream_loses_no_send_and_no_message(pulsar_broker, pulsar_topic, backend):
    b = get_backend(backend)
    client = pulsar.Client(pulsar_broker.service_url, backend=backend, operation_timeout_seconds=10)
    collector = None
    try:
        consumer = client.subscribe(pulsar_topic, "unload", consumer_type=pulsar.ConsumerType.Shared)
        producer = client.create_producer(pulsar_topic, block_if_queue_full=True, send_timeout_millis=30000)
        collector = Collector(backend, consumer, RECEIVE_MS)
        stats = topic_stats(pulsar_broker, backend, pulsar_topic)
        publisher_before = stats["publishers"][0]["connectedSince"]

        resume = b.event()
        sender = Sender(backend, producer, STREAM, STREAM // 3, resume, WAIT)
        wait_for(lambda: sender.callbacks >= 200, backend, message="the stream to start")
        resume.set()  # the sender goes on while the broker unloads the topic
        run_blocking(backend, pulsar_broker.unload_topic, pulsar_topic)

        check_stream(backend, sender, collector)
        wait_for(lambda: producer.is_connected() and consumer.is_connected(), backend,
                 message="producer and consumer connected again")
        stats = topic_stats(pulsar_broker, backend, pulsar_topic)
        assert stats["publishers"][0]["connectedSince"] != publisher_before  # it was re-created
        check_still_usable(backend, producer, collector, b"after-unload")
    finally:
        if collector is not None:
            collector.stop()
        client.close()


# --------------------------------------------------------------------------- dropped connection


@pytest.mark.parametrize("how", ["reset", "cut"])
def test_dropped_connection_mid_stream_loses_no_send_and_no_message(
        pulsar_broker, pulsar_topic, backend, fault_proxy_factory, how):
    b = get_backend(backend)
    proxy = fault_proxy_factory(pulsar_broker.host, pulsar_broker.port)
    client = proxied_client(proxy, backend)
    collector = None
    try:
        consumer = client.subscribe(pulsar_topic, "drop", consumer_type=pulsar.ConsumerType.Shared)
        producer = client.create_producer(pulsar_topic, block_if_queue_full=True, send_timeout_millis=30000)
        collector = Collector(backend, consumer, RECEIVE_MS)
        accepted = proxy.connections_accepted

        resume = b.event()
        sender = Sender(backend, producer, STREAM, STREAM // 3, resume, WAIT)
        wait_for(lambda: sender.callbacks >= 200, backend, message="the stream to start")
        resume.set()
        dropped = run_blocking(backend, getattr(proxy, how))  # every connection: lookups' and the data's
        assert dropped >= 1

        check_stream(backend, sender, collector)
        assert proxy.connections_accepted > accepted  # it reconnected through the proxy
        wait_for(lambda: producer.is_connected() and consumer.is_connected(), backend,
                 message="producer and consumer connected again")
        check_still_usable(backend, producer, collector, b"after-" + how.encode())
    finally:
        if collector is not None:
            collector.stop()
        client.close()


# --------------------------------------------------------------------------- stalled broker


def test_stalled_broker_is_detected_by_keep_alive_and_client_reconnects_after_the_stall(
        pulsar_broker, pulsar_topic, backend, fault_proxy_factory):
    proxy = fault_proxy_factory(pulsar_broker.host, pulsar_broker.port)
    client = proxied_client(proxy, backend, keep_alive_interval_seconds=1, connection_timeout_ms=2000)
    try:
        consumer = client.subscribe(pulsar_topic, "stall", consumer_type=pulsar.ConsumerType.Shared)
        producer = client.create_producer(pulsar_topic, send_timeout_millis=60000)
        producer.send(b"before")
        msg = consumer.receive(timeout_millis=10_000)
        assert msg.data() == b"before"
        consumer.acknowledge(msg)
        wait_for(lambda: subscription_stats(pulsar_broker, backend, pulsar_topic, "stall")["msgBacklog"] == 0, backend,
                 message="the ack to reach the broker")
        connections = client.broker_connections()
        assert connections

        proxy.hold()  # nothing moves either way; the sockets stay open
        try:
            during = []
            producer.send_async(b"during", lambda res, mid: during.append(res))
            # nothing arrives, not even PONGs: the keep-alive watchdog closes the connection
            wait_for(lambda: all(c.is_closed() for c in connections), backend,
                     message="the stalled connections to close")
            # closed by the keep-alive watchdog (nothing, not even a PONG, for two intervals),
            # not by a request's timeout or an error
            for c in connections:
                assert isinstance(c.close_error, pulsar.NotConnected), c.close_error
                assert "nothing received" in str(c.close_error), c.close_error
            wait_for(lambda: not producer.is_connected() and not consumer.is_connected(), backend,
                     message="producer and consumer to notice")
            assert during == []  # waiting for the broker, not failed
        finally:
            proxy.release()

        wait_for(lambda: producer.is_connected() and consumer.is_connected(), backend,
                 message="producer and consumer connected again after the stall")
        assert producer.send(b"after") is not None
        wait_for(lambda: during, backend, message="the send made during the stall to complete")
        assert during == [pulsar.Result.Ok]
        # "during" may come twice: the proxy hands the broker the copy written on the stalled
        # connection once released, and the client re-sends it (no deduplication: at least once)
        got = []
        while not {b"during", b"after"} <= set(got) and len(got) < 10:
            msg = consumer.receive(timeout_millis=10_000)
            got.append(msg.data())
            consumer.acknowledge(msg)
        assert set(got) == {b"during", b"after"}, got
        after = client.broker_connections()
        assert after and not any(c.is_closed() for c in after)
        assert not {id(c) for c in after} & {id(c) for c in connections}  # new connections, not the stalled ones
    finally:
        client.close()


# --------------------------------------------------------------------------- send timeout


def test_send_timeout_while_stalled_raises_timeout_and_calls_back_with_timeout(
        pulsar_broker, pulsar_topic, backend, fault_proxy_factory):
    b = get_backend(backend)
    proxy = fault_proxy_factory(pulsar_broker.host, pulsar_broker.port)
    client = proxied_client(proxy, backend)  # keep-alive 30 s: the connection itself stays up
    try:
        producer = client.create_producer(pulsar_topic, send_timeout_millis=1000)
        producer.send(b"ok-before")
        proxy.hold()
        try:
            outcome = []

            def blocking_send():
                try:
                    outcome.append(producer.send(b"stalled-send"))
                except Exception as exc:
                    outcome.append(exc)

            task = b.spawn(blocking_send)
            wait_for(lambda: outcome, backend, message="send() to return or raise")
            task.join(1)
            assert len(outcome) == 1
            assert isinstance(outcome[0], pulsar.Timeout), outcome
            assert isinstance(outcome[0], pulsar.PulsarException)

            callbacks = []
            producer.send_async(b"stalled-async", lambda res, mid: callbacks.append((res, mid)))
            wait_for(lambda: callbacks, backend, message="the send_async callback")
            assert callbacks == [(pulsar.Result.Timeout, None)]
        finally:
            proxy.release()

        # the broker gets the timed-out messages late; their receipts must not call back again
        assert producer.send(b"ok-after") is not None
        producer.flush()
        assert callbacks == [(pulsar.Result.Timeout, None)]
    finally:
        client.close()


# --------------------------------------------------------------------------- terminated under sends


def test_a_send_error_saying_the_topic_is_terminated_fails_every_waiting_send(
        pulsar_broker, pulsar_topic, backend, fault_proxy_factory):
    # A topic terminated under sends in flight: the broker sends CLOSE_PRODUCER, then one SEND_ERROR
    # (TopicTerminated) per send, and keeps the topic fenced for a while (re-creating the producer
    # gets ServiceUnitNotReady). The relay holds the real traffic and plays the broker's part: every
    # waiting send fails with TopicTerminated at once, not at its send timeout, and later ones too.
    proxy = fault_proxy_factory(pulsar_broker.host, pulsar_broker.port)
    client = proxied_client(proxy, backend)
    try:
        producer = client.create_producer(pulsar_topic, send_timeout_millis=5000)  # (the safety net)
        producer.send(b"before")  # sequence id 0; the client's first producer has id 0
        proxy.hold()
        try:
            callbacks = []
            for index in range(3):  # sequence ids 1, 2, 3
                producer.send_async(b"in flight %d" % index, lambda result, message_id: callbacks.append(result))
            error = proto.f_uint(1, 0) + proto.f_uint(2, 1) + proto.f_uint(3, 15) + proto.f_str(
                4, "ManagedLedgerTerminatedException: Managed ledger was already terminated")
            proxy.inject_downstream(encode_simple(proto.close_producer(0, 0))
                                    + encode_simple(proto.base_command(proto.SEND_ERROR, error)))
            wait_for(lambda: len(callbacks) == 3, backend, timeout=10, message=lambda: "3 callbacks: %r" % callbacks)
            assert callbacks == [pulsar.Result.TopicTerminated] * 3
            with pytest.raises(pulsar.TopicTerminated):
                producer.send(b"later")
        finally:
            proxy.release()
        assert stays(lambda: not producer.is_connected(), backend, 1.0)  # not re-created
        assert producer.stats()["failed"] == 4 and producer.stats()["pending"] == 0
    finally:
        client.close()
