# nsq.conn.Connection (pynsq's AsyncConn) against a real nsqd, on both backends: the
# IDENTIFY handshake and negotiated features, event hooks, heartbeats, compression,
# fatal and non-fatal server errors, write coalescing and dead-peer detection.
from __future__ import annotations

import functools
import socket
import threading

import pytest

import nsq
import nsq.config
from nsq import codec
from nsq.conn import Connection, Pending
from nsq.errors import (
    BadTopicError,
    ConfigError,
    ConnectionClosedError,
    FinFailedError,
)
from msgengine.runtime import get_backend

from tests.support import waiting
from tests.support.waiting import run_blocking

WAIT = 10.0
UNKNOWN_ID = b"0123456789abcdef"


wait_for = functools.partial(waiting.wait_for, timeout=WAIT, interval=0.01)


def connect(nsqd_or_host, backend, port=None, **kwargs):
    if port is None:
        host, port = nsqd_or_host.host, nsqd_or_host.tcp_port
    else:
        host = nsqd_or_host
    conn = Connection(host, port, backend=backend, **kwargs)
    conn.connect()
    return conn


class SendCounter:
    """Wraps conn.stream.send after connect: records every write that reaches the socket."""

    def __init__(self, conn, gate=None):
        self.conn = conn
        self.writes: list[bytes] = []
        self.gate = gate  # an event the first write waits on (to hold the writer busy)
        self.entered = get_backend(conn.backend).event()
        self._inner = conn.stream.send
        conn.stream.send = self

    def __call__(self, data):
        self.writes.append(bytes(data))
        self.entered.set()
        if self.gate is not None and len(self.writes) == 1:
            assert self.gate.wait(WAIT)
        return self._inner(data)


def pub_request(conn, topic, body):
    return conn.request(codec.encode_pub(topic, body), timeout=WAIT)


# ----------------------------------------------------------------------------- handshake


def test_connect_keeps_identify_features(nsqd_factory, backend):
    nsqd = nsqd_factory("--max-rdy-count=123")
    conn = connect(nsqd, backend, msg_timeout=30, sample_rate=7, output_buffer_size=4096, output_buffer_timeout=100)
    try:
        assert conn.is_connected() and conn.connected() and not conn.closed()
        assert conn.state == "CONNECTED"
        features = conn.features
        assert features["max_rdy_count"] == 123
        assert conn.max_rdy_count == 123
        assert features["version"]
        # nsqd echoes the values it accepted from IDENTIFY
        assert features["msg_timeout"] == 30000
        assert features["sample_rate"] == 7
        assert features["output_buffer_size"] == 4096
        assert features["output_buffer_timeout"] == 100
        assert features["tls_v1"] is False and features["snappy"] is False and features["deflate"] is False
        assert features["auth_required"] is False
        # the negotiated maximum is enforced before the wire
        with pytest.raises(ConfigError):
            conn.send_rdy(124)
        conn.send_rdy(123)
        assert conn.rdy == 123 and conn.last_rdy == 123
    finally:
        conn.close()
    assert conn.closed() and not conn.is_connected()


def test_connect_refused_raises_connection_closed(backend):
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    conn = Connection("127.0.0.1", port, backend=backend)
    with pytest.raises(ConnectionClosedError):
        conn.connect()
    assert conn.closed()
    with pytest.raises(nsq.Error):
        conn.connect()  # a connection object is single-use


def test_identify_data_keys():
    conn = Connection("127.0.0.1", 4150, backend="threads", hostname="host.example.com", user_agent="ua/1")
    data = conn.identify_data()
    assert set(data) == {
        "client_id", "hostname", "feature_negotiation", "heartbeat_interval", "output_buffer_size",
        "output_buffer_timeout", "tls_v1", "snappy", "deflate", "deflate_level", "sample_rate", "user_agent",
    }
    assert data["feature_negotiation"] is True
    assert data["hostname"] == "host.example.com"
    assert data["client_id"] == "host"  # short host name by default, as pynsq
    assert data["heartbeat_interval"] == 30000
    assert data["user_agent"] == "ua/1"

    full = Connection(
        "127.0.0.1", 4150, backend="threads", msg_timeout=12.5, topology_zone="z1", topology_region="r1",
        heartbeat_interval=-1, client_id="cid", deflate=True, deflate_level=3,
    ).identify_data()
    assert full["msg_timeout"] == 12500
    assert full["topology_zone"] == "z1"
    assert full["topology_region"] == "r1"
    assert full["heartbeat_interval"] == -1
    assert full["client_id"] == "cid"
    assert full["deflate"] is True and full["deflate_level"] == 3 and full["snappy"] is False


def test_identify_reaches_nsqd(nsqd, topic, backend):
    conn = connect(
        nsqd, backend,
        client_id="my-client-id", hostname="my.host.example", user_agent="nsqfast-test/9.9",
        sample_rate=11, msg_timeout=45, output_buffer_size=8192, output_buffer_timeout=50,
        topology_zone="zone-a", topology_region="region-b",
    )
    try:
        conn.subscribe(topic, "ch")
        clients = wait_for(lambda: run_blocking(backend, nsqd.clients, topic, "ch"), backend)
        assert len(clients) == 1
        client = clients[0]
        assert client["client_id"] == "my-client-id"
        assert client["hostname"] == "my.host.example"
        assert client["user_agent"] == "nsqfast-test/9.9"
        assert client["sample_rate"] == 11
        assert client["snappy"] is False and client["deflate"] is False and client["tls"] is False
        # the rest is visible in what nsqd negotiated
        assert conn.features["msg_timeout"] == 45000
        assert conn.features["output_buffer_size"] == 8192
        assert conn.features["output_buffer_timeout"] == 50
    finally:
        conn.close()


def test_snappy_and_deflate_together_is_config_error_before_connecting(nsqd, fault_proxy_factory, backend):
    proxy = fault_proxy_factory(nsqd.host, nsqd.tcp_port)
    with pytest.raises(ConfigError):
        Connection(proxy.host, proxy.port, backend=backend, snappy=True, deflate=True)
    with pytest.raises(ConfigError):
        nsq.Writer([proxy.address], backend=backend, snappy=True, deflate=True)
    get_backend(backend).sleep(0.05)
    assert proxy.connections_accepted == 0


@pytest.mark.parametrize("compression", ["snappy", "deflate"])
def test_compressed_connection_round_trip(nsqd, topic, backend, compression):
    conn = connect(nsqd, backend, **{compression: True})
    received = []
    conn.on("message", lambda conn, message: received.append(message))
    try:
        assert conn.features[compression] is True
        conn.subscribe(topic, "ch")
        body = b"compressible " * 200
        assert pub_request(conn, topic, body) == b"OK"
        conn.send_rdy(1)
        wait_for(lambda: received, backend)
        assert received[0].body == body
        received[0].finish()
        clients = run_blocking(backend, nsqd.clients, topic, "ch")
        assert clients[0][compression] is True
        wait_for(lambda: run_blocking(backend, nsqd.channel_stats, topic, "ch")["in_flight_count"] == 0, backend)
    finally:
        conn.close()


# ----------------------------------------------------------------------------- events


def test_event_hooks_fire(nsqd, topic, backend):
    seen: list = []

    def hook(name):
        return lambda **kw: seen.append((name, kw))

    # (the connection Readers and Writers open: connect() blocks; AsyncConn's is tested in
    # test_asyncconn_pynsq.py)
    conn = Connection(nsqd.host, nsqd.tcp_port, backend=backend)
    for name in ("connect", "identify_response", "response", "message", "ready", "error", "close"):
        conn.on(name, hook(name))
    names = lambda: [n for n, _ in seen]  # noqa: E731

    conn.connect()
    assert names()[:3] == ["connect", "identify_response", "ready"]  # pynsq's order
    identify_kw = seen[1][1]
    assert identify_kw["conn"] is conn and identify_kw["data"]["max_rdy_count"] > 0
    assert seen[0][1]["conn"] is conn

    conn.subscribe(topic, "ch")
    responses = [kw for n, kw in seen if n == "response"]
    assert [bytes(kw["data"]) for kw in responses] == [b"OK"]
    assert responses[0]["conn"] is conn

    run_blocking(backend, nsqd.http_pub, topic, b"hooked")
    conn.send_rdy(1)
    message = wait_for(lambda: [kw["message"] for n, kw in seen if n == "message"], backend)[0]
    assert message.body == b"hooked" and message.attempts == 1
    assert names().count("ready") == 1  # once, after the handshake: a RDY does not fire it again
    message.finish()

    conn.send(codec.encode_fin(UNKNOWN_ID))  # E_FIN_FAILED
    error = wait_for(lambda: [kw["error"] for n, kw in seen if n == "error"], backend)[0]
    assert isinstance(error, FinFailedError)

    conn.close()
    wait_for(lambda: "close" in names(), backend)
    assert [kw["conn"] for n, kw in seen if n == "close"] == [conn]

    # off() detaches
    calls = []
    cb = lambda **kw: calls.append(kw)  # noqa: E731
    other = Connection(nsqd.host, nsqd.tcp_port, backend=backend)
    other.on("connect", cb)
    other.off("connect", cb)
    other.connect()
    other.close()
    assert calls == []


def test_heartbeat_answered_with_nop_keeps_connection_alive(nsqd, topic, backend):
    conn = connect(nsqd, backend, heartbeat_interval=1)
    heartbeats = []
    closes = []
    conn.on("heartbeat", lambda conn: heartbeats.append(get_backend(backend).monotonic()))
    conn.on("close", lambda conn: closes.append(True))
    counter = SendCounter(conn)
    try:
        # nsqd drops a client that leaves 2 heartbeats unanswered; survive 3 of them
        wait_for(lambda: len(heartbeats) >= 3, backend)
        assert conn.is_connected()
        assert closes == []
        assert counter.writes.count(b"NOP\n") >= 2
        # and the connection still works
        assert pub_request(conn, topic, b"alive") == b"OK"
        assert run_blocking(backend, nsqd.message_count, topic) == 1
    finally:
        conn.close()


# ----------------------------------------------------------------------------- errors


def test_fatal_error_closes_connection_and_waiters_get_it(nsqd, topic, backend):
    conn = connect(nsqd, backend)
    closes = []
    conn.on("close", lambda conn: closes.append(True))
    b = get_backend(backend)
    bad = Pending(event=b.event())
    behind = Pending(event=b.event())
    # raw, unvalidated bytes: nsqd answers E_BAD_TOPIC and hangs up
    conn.send(b"SUB bad!topic ch\n", bad, flush=False)
    conn.send(codec.encode_pub(topic, b"never answered"), behind)
    assert bad.event.wait(WAIT)
    assert isinstance(bad.result, BadTopicError)
    assert bad.result.fatal is True
    assert behind.event.wait(WAIT)
    assert isinstance(behind.result, ConnectionClosedError)
    wait_for(lambda: closes, backend)  # the close event fired
    assert conn.closed()
    assert isinstance(conn.close_error, BadTopicError)
    assert closes == [True]
    assert conn.wait_closed(0)
    with pytest.raises(ConnectionClosedError):
        conn.send(codec.encode_nop())


def test_fatal_error_raised_by_request(nsqd, backend):
    conn = connect(nsqd, backend)
    with pytest.raises(BadTopicError):
        conn.request(b"PUB bad!topic\n\x00\x00\x00\x01x", timeout=WAIT)
    wait_for(lambda: conn.closed(), backend)
    with pytest.raises(ConnectionClosedError):
        conn.request(codec.encode_nop())


def test_non_fatal_fin_failed_keeps_connection(nsqd, topic, backend):
    conn = connect(nsqd, backend)
    errors = []
    conn.on("error", lambda conn, error: errors.append(error))
    try:
        conn.subscribe(topic, "ch")
        conn.send(codec.encode_fin(UNKNOWN_ID))
        conn.send(codec.encode_touch(UNKNOWN_ID))
        conn.send(codec.encode_req(UNKNOWN_ID, 0))
        wait_for(lambda: len(errors) == 3, backend)
        assert [e.code for e in errors] == ["E_FIN_FAILED", "E_TOUCH_FAILED", "E_REQ_FAILED"]
        assert all(e.fatal is False for e in errors)
        assert conn.is_connected()
        # responses still pair with the right commands afterwards
        assert pub_request(conn, topic, b"still fine") == b"OK"
        assert conn.is_connected()
    finally:
        conn.close()


# ----------------------------------------------------------------------------- writing


def test_sends_without_flush_leave_in_a_single_write(nsqd, topic, backend):
    conn = connect(nsqd, backend)
    try:
        counter = SendCounter(conn)
        b = get_backend(backend)
        waiters = [Pending(event=b.event()) for _ in range(50)]
        for i, waiter in enumerate(waiters):
            conn.send(codec.encode_pub(topic, b"m%d" % i), waiter, flush=False)
        assert counter.writes == []  # nothing written yet
        conn.flush()
        assert len(counter.writes) == 1
        assert counter.writes[0] == b"".join(codec.encode_pub(topic, b"m%d" % i) for i in range(50))
        for waiter in waiters:
            assert waiter.event.wait(WAIT)
            assert waiter.result == b"OK"
        assert run_blocking(backend, nsqd.message_count, topic) == 50
        conn.flush()  # nothing pending: no write
        assert len(counter.writes) == 1
    finally:
        conn.close()


def test_sends_during_a_write_are_coalesced_into_the_next_write(nsqd, topic, backend):
    conn = connect(nsqd, backend)
    b = get_backend(backend)
    gate = b.event()
    try:
        counter = SendCounter(conn, gate=gate)
        first = Pending(event=b.event())
        task = b.spawn(conn.send, codec.encode_pub(topic, b"first"), first)
        assert counter.entered.wait(WAIT)  # the first write is in progress (held at the gate)
        waiters = [Pending(event=b.event()) for _ in range(20)]
        for i, waiter in enumerate(waiters):
            conn.send(codec.encode_pub(topic, b"q%d" % i), waiter)  # returns at once: a write is busy
        assert len(counter.writes) == 1
        gate.set()
        task.join(WAIT)
        for waiter in [first, *waiters]:
            assert waiter.event.wait(WAIT)
            assert waiter.result == b"OK"
        assert len(counter.writes) == 2
        assert counter.writes[1] == b"".join(codec.encode_pub(topic, b"q%d" % i) for i in range(20))
        assert run_blocking(backend, nsqd.message_count, topic) == 21
    finally:
        gate.set()
        conn.close()


# ----------------------------------------------------------------------------- dead peer


@pytest.mark.timeout(60)
def test_dead_peer_detected_by_missing_heartbeats(nsqd, topic, fault_proxy_factory, backend):
    proxy = fault_proxy_factory(nsqd.host, nsqd.tcp_port)
    conn = connect(proxy.host, backend, port=proxy.port, heartbeat_interval=1)
    closes = []
    conn.on("close", lambda conn: closes.append(True))
    b = get_backend(backend)
    try:
        assert pub_request(conn, topic, b"before") == b"OK"
        proxy.hold()  # the peer goes silent but the TCP connection stays open
        pending = Pending(event=b.event())
        conn.send(codec.encode_pub(topic, b"into the void"), pending)
        wait_for(lambda: closes, backend, timeout=30)  # the close event fired
        assert closes == [True]
        assert conn.closed()
        assert isinstance(conn.close_error, ConnectionClosedError)
        assert "heartbeat" in str(conn.close_error)
        assert pending.event.wait(WAIT)
        assert isinstance(pending.result, ConnectionClosedError)
    finally:
        proxy.release()
        conn.close()


def test_a_failed_flush_closes_the_connection_instead_of_raising_at_the_flusher(nsqd, fault_proxy_factory):
    """A Reader's worker flushes every batch's answers; a write that fails there
    (the link was cut) must close the connection, not kill the worker."""
    proxy = fault_proxy_factory(nsqd.host, nsqd.tcp_port)
    host, port = proxy.address.rsplit(":", 1)
    conn = Connection(host, int(port), backend="gevent")
    conn.connect()
    proxy.reset()  # RST: the next write fails; the hub (this thread) does not run meanwhile
    threading.Event().wait(0.1)  # an OS-level wait: the RST arrives, the read greenlet does not run
    conn.send(codec.encode_nop(), flush=False)
    conn.flush()  # raised ConnectionClosedError before
    waiting.wait_for(conn.closed, "gevent", timeout=5)
    assert isinstance(conn.close_error, (OSError, nsq.Error))


def test_settings_by_position_follow_pynsq_order():
    # pynsq's AsyncConn(host, port, timeout, heartbeat_interval, requeue_delay, ...)
    conn = Connection("127.0.0.1", 4150, 5.0, 10, 30)
    # (heartbeat_interval reads back in milliseconds, as pynsq's attribute does)
    assert (conn.timeout, conn.heartbeat_interval, conn.requeue_delay) == (5.0, 10000, 30)
    config = nsq.config.Config(timeout=2.0)
    assert Connection("127.0.0.1", 4150, config).config is config
    with pytest.raises(TypeError):
        Connection("127.0.0.1", 4150, 5.0, timeout=6.0)
