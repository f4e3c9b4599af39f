# Tests of the test harness itself: real nsqd/nsqlookupd lifecycle and stats (tests/support/servers.py)
# and the fault-injecting relay (tests/support/faultproxy.py), all against real servers on loopback.
from __future__ import annotations

import json
import socket
import struct
import time

import pytest
import requests

from tests.support.servers import Nsqd, free_port, wait_until

FRAME_RESPONSE = 0


def _identify_bytes(**extra) -> bytes:
    body = json.dumps({"feature_negotiation": True, "client_id": "harness-test", **extra}).encode()
    return b"  V2" + b"IDENTIFY\n" + struct.pack(">i", len(body)) + body


def _recv_exact(sock: socket.socket, n: int, timeout: float = 5.0) -> bytes:
    sock.settimeout(timeout)
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError(f"EOF after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


def _read_frame(sock: socket.socket, timeout: float = 5.0) -> tuple:
    size = struct.unpack(">i", _recv_exact(sock, 4, timeout))[0]
    payload = _recv_exact(sock, size, timeout)
    return struct.unpack(">i", payload[:4])[0], payload[4:]


def _recv_available(sock: socket.socket, wait: float = 0.3) -> bytes:
    """Whatever arrives within ``wait`` seconds (b"" if nothing)."""
    sock.settimeout(wait)
    try:
        return sock.recv(65536)
    except socket.timeout:
        return b""


def _read_until_closed(sock: socket.socket, timeout: float = 5.0) -> tuple:
    """Read until EOF or reset: returns (data, how) with how in {"eof", "reset"}."""
    sock.settimeout(timeout)
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return data, "reset"
        if not chunk:
            return data, "eof"
        data += chunk


# ----------------------------------------------------------------------------- servers


def test_nsqd_starts_and_pings(nsqd):
    r = requests.get(nsqd.http_url + "/ping", timeout=5)
    assert r.status_code == 200 and r.text == "OK"
    assert nsqd.tcp_address == f"127.0.0.1:{nsqd.tcp_port}"
    assert nsqd.http_url == f"http://127.0.0.1:{nsqd.http_port}"
    with socket.create_connection(("127.0.0.1", nsqd.tcp_port), timeout=5):
        pass
    assert nsqd.stats()["version"].startswith("1.3")


def test_http_pub_shows_in_stats(nsqd, topic):
    assert nsqd.http_pub(topic, b"hello").strip() == "OK"
    assert nsqd.topic_depth(topic) == 1
    assert nsqd.message_count(topic) == 1
    nsqd.create_channel(topic, "ch")
    # the first channel also receives the message that waited on the channel-less topic
    assert nsqd.http_mpub(topic, [b"a", b"b", "c"]) == 3
    ch = wait_until(lambda: (c := nsqd.channel_stats(topic, "ch")) and c["depth"] == 4 and c)
    assert nsqd.topic_depth(topic) == 0
    for key in ("in_flight_count", "deferred_count", "message_count", "requeue_count", "timeout_count", "clients"):
        assert key in ch
    assert nsqd.channel_stats(topic, "missing") is None
    assert nsqd.topic_depth("no_such_topic_here") == 0


def test_http_mpub_splits_large_batches(nsqd, topic):
    body = b"x" * 100_000
    assert nsqd.http_mpub(topic, [body] * 60) == 60  # 6 MB > nsqd's 5 MiB max body
    assert nsqd.topic_depth(topic) == 60


def test_topic_admin(nsqd, topic):
    nsqd.create_topic(topic)
    assert nsqd.topic_stats(topic) is not None
    nsqd.delete_topic(topic)
    assert nsqd.topic_stats(topic) is None


def test_restart_keeps_disk_queue(nsqd_factory, topic):
    n = nsqd_factory("--mem-queue-size=0")
    ports = (n.tcp_port, n.http_port)
    n.http_mpub(topic, [f"m{i}".encode() for i in range(5)])
    assert n.stats(topic)["topics"][0]["backend_depth"] == 5
    n.stop()
    assert not n.running
    assert not n.ping()
    n.start()
    assert (n.tcp_port, n.http_port) == ports
    assert n.topic_depth(topic) == 5


def test_kill_and_start_again(nsqd, topic):
    nsqd.http_pub(topic, b"x")
    client = socket.create_connection(("127.0.0.1", nsqd.tcp_port), timeout=5)
    client.sendall(_identify_bytes())
    _read_frame(client)
    nsqd.kill()
    assert nsqd.returncode is not None and not nsqd.running
    assert _read_until_closed(client)[0] == b""
    client.close()
    nsqd.start()
    assert nsqd.ping()
    with socket.create_connection(("127.0.0.1", nsqd.tcp_port), timeout=5) as s:
        s.sendall(_identify_bytes())
        assert _read_frame(s)[0] == FRAME_RESPONSE


def test_extra_flags_are_passed(nsqd_factory):
    n = nsqd_factory("--max-msg-size=12345")
    assert requests.get(n.http_url + "/config/max_msg_size", timeout=5).json() == 12345


@pytest.mark.integration
def test_start_failure_reports_log():
    with pytest.raises(RuntimeError, match="flag provided but not defined"):
        Nsqd("--no-such-flag")


def test_nsqd_registers_with_lookupd(nsqlookupd, nsqd_factory, topic):
    n = nsqd_factory(lookupd=nsqlookupd)
    n.create_topic(topic)
    producers = wait_until(lambda: nsqlookupd.lookup(topic), timeout=10)
    assert len(producers) == 1
    p = producers[0]
    assert (p["broadcast_address"], p["tcp_port"], p["http_port"]) == ("127.0.0.1", n.tcp_port, n.http_port)
    assert nsqlookupd.lookup("unknown_topic_x") == []
    assert topic in nsqlookupd.topics()


def test_free_port_is_bindable_and_unique():
    ports = {free_port() for _ in range(20)}
    assert len(ports) == 20
    s = socket.socket()
    s.bind(("127.0.0.1", ports.pop()))
    s.close()


def test_topic_fixture_is_valid(topic):
    assert 1 <= len(topic) <= 64
    assert all(c.isalnum() or c in "._-" for c in topic)


def test_backend_fixture(backend):
    assert backend in ("gevent", "threads")


# ----------------------------------------------------------------------------- fault proxy


@pytest.fixture
def proxied(nsqd, fault_proxy_factory):
    return fault_proxy_factory("127.0.0.1", nsqd.tcp_port)


def test_proxy_relays_identify(proxied):
    with socket.create_connection(("127.0.0.1", proxied.port), timeout=5) as s:
        s.sendall(_identify_bytes())
        ftype, data = _read_frame(s)
        assert ftype == FRAME_RESPONSE
        assert "max_rdy_count" in json.loads(data)
    assert proxied.connections_accepted == 1
    assert proxied.bytes_up == len(_identify_bytes())
    assert proxied.bytes_down > 8


def test_proxy_hold_and_release(proxied):
    with socket.create_connection(("127.0.0.1", proxied.port), timeout=5) as s:
        proxied.wait_for_connections(1)
        proxied.hold()
        s.sendall(_identify_bytes())
        assert _recv_available(s, 0.3) == b""
        assert proxied.bytes_up == 0 and proxied.bytes_down == 0
        proxied.release()
        ftype, data = _read_frame(s)
        assert ftype == FRAME_RESPONSE and json.loads(data)


def test_proxy_inject_downstream(proxied):
    with socket.create_connection(("127.0.0.1", proxied.port), timeout=5) as s:
        proxied.wait_for_connections(1)
        wait_until(lambda: proxied.active_connections == 1)
        assert proxied.inject_downstream(b"\x00\x00\x00\x06\x00\x00\x00\x00OK") == 1
        assert _read_frame(s) == (FRAME_RESPONSE, b"OK")


def test_proxy_cut_sends_fin(proxied):
    with socket.create_connection(("127.0.0.1", proxied.port), timeout=5) as s:
        s.sendall(_identify_bytes())
        _read_frame(s)
        assert proxied.cut() == 1
        assert _read_until_closed(s) == (b"", "eof")
    wait_until(lambda: proxied.active_connections == 0)


def test_proxy_reset_sends_rst(proxied):
    with socket.create_connection(("127.0.0.1", proxied.port), timeout=5) as s:
        s.sendall(_identify_bytes())
        _read_frame(s)
        assert proxied.reset() == 1
        assert _read_until_closed(s) == (b"", "reset")


def test_proxy_reset_after_mid_frame(proxied):
    proxied.reset_after(6)  # 4-byte size + 2 bytes of the frame type
    with socket.create_connection(("127.0.0.1", proxied.port), timeout=5) as s:
        s.sendall(_identify_bytes())
        data, how = _read_until_closed(s)
        assert (len(data), how) == (6, "reset")
    assert proxied.resets_fired == 1
    proxied.reset_after(None)
    with socket.create_connection(("127.0.0.1", proxied.port), timeout=5) as s:
        s.sendall(_identify_bytes())
        assert _read_frame(s)[0] == FRAME_RESPONSE


def test_proxy_refuse(proxied):
    proxied.refuse(True)
    with socket.create_connection(("127.0.0.1", proxied.port), timeout=5) as s:
        data, _how = _read_until_closed(s)
        assert data == b""
    assert proxied.connections_refused == 1
    proxied.refuse(False)
    with socket.create_connection(("127.0.0.1", proxied.port), timeout=5) as s:
        s.sendall(_identify_bytes())
        assert _read_frame(s)[0] == FRAME_RESPONSE


def test_proxy_delay_still_delivers(proxied):
    proxied.set_delay(0.05)
    with socket.create_connection(("127.0.0.1", proxied.port), timeout=5) as s:
        t0 = time.monotonic()
        s.sendall(_identify_bytes())
        ftype, data = _read_frame(s)
        assert ftype == FRAME_RESPONSE and json.loads(data)
        assert time.monotonic() - t0 >= 0.1  # one delay each way


def test_proxy_client_close_propagates(proxied, nsqd):
    s = socket.create_connection(("127.0.0.1", proxied.port), timeout=5)
    s.sendall(_identify_bytes())
    _read_frame(s)
    s.close()
    wait_until(lambda: proxied.active_connections == 0)


def test_proxy_target_down_closes_client(fault_proxy_factory):
    proxy = fault_proxy_factory("127.0.0.1", free_port())  # nothing listens there
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as s:
        data, _how = _read_until_closed(s)
        assert data == b""


def test_proxy_rejects_non_loopback():
    from tests.support.faultproxy import FaultProxy

    with pytest.raises(ValueError):
        FaultProxy("192.0.2.1", 4150)


def test_proxy_close_joins_threads(nsqd):
    import threading

    from tests.support.faultproxy import FaultProxy

    before = threading.active_count()
    proxy = FaultProxy("127.0.0.1", nsqd.tcp_port)
    socks = [socket.create_connection(("127.0.0.1", proxy.port), timeout=5) for _ in range(3)]
    for s in socks:
        s.sendall(_identify_bytes())
        _read_frame(s)
    proxy.hold()  # close() must also end held connections
    proxy.close()
    for s in socks:
        assert _read_until_closed(s)[1] == "eof"
        s.close()
    assert threading.active_count() == before
    assert proxy.errors == []
