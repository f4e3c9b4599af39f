# snappy and deflate, alone and under TLS: Writer -> real nsqd -> Reader byte for
# byte (0.5 MB bodies, incompressible ones), nsqd's view of the negotiated
# features, a server that does not offer the feature, and bytes that arrive
# together with the IDENTIFY response (a scripted server sends the IDENTIFY
# response, the compressed OK and a heartbeat in one write).
from __future__ import annotations

import collections
import functools
import json
import os
import socket
import struct
import sys
import threading
import time
import zlib

import pytest
import snappy

import nsq
from nsq.conn import Connection
from nsq.errors import ConfigError, FeatureNegotiationError
from msgengine.transport import DeflateStream, SnappyStream

from tests.support.certs import make_pki
from tests.support.servers import free_port
from tests.support import waiting

pytestmark = pytest.mark.timeout(60)

MODES = ["snappy", "deflate", "tls+snappy", "tls+deflate"]


def mode_kwargs(mode, pki=None):
    kwargs = {}
    if "tls" in mode:
        kwargs.update(tls_v1=True, tls_options={"ca_certs": pki.ca_cert})
    if "snappy" in mode:
        kwargs["snappy"] = True
    if "deflate" in mode:
        kwargs["deflate"] = True
    return kwargs


def start_nsqd(nsqd_factory, mode, pki=None, *extra):
    flags = list(extra)
    if "tls" in mode:
        flags += [
            "--tls-cert=%s" % pki.server_cert,
            "--tls-key=%s" % pki.server_key,
            "--tls-required=tcp-https",
            "--https-address=127.0.0.1:%d" % free_port(),
        ]
    return nsqd_factory(*flags)


wait_for = functools.partial(waiting.wait_for, interval=0.01)


def stack(conn):
    """Class names of the connection's stream layers, outermost first."""
    names, stream = [], conn.stream
    while stream is not None:
        names.append(type(stream).__name__)
        stream = getattr(stream, "inner", None)
    return names


# ----------------------------------------------------------------------------- real nsqd


@pytest.mark.parametrize("mode", MODES)
def test_round_trip_byte_for_byte(nsqd_factory, backend, topic, mode):
    pki = make_pki() if "tls" in mode else None
    server = start_nsqd(nsqd_factory, mode, pki)
    kwargs = dict(mode_kwargs(mode, pki), backend=backend)
    half_mb = 512 * 1024
    bodies = [
        b"compressible " * (half_mb // 13),
        os.urandom(half_mb),  # incompressible
        os.urandom(1),
        bytes(range(256)) * 64,
    ] + [b"small %d " % i + os.urandom(i % 50) for i in range(300)]
    received = []

    writer = nsq.Writer([server.tcp_address], **kwargs)
    try:
        assert writer.pub(topic, bodies[0]) == b"OK"
        assert writer.pub(topic, bodies[1]) == b"OK"
        assert writer.mpub(topic, bodies[2:]) == b"OK"
        (conn,) = writer.conns.values()
        assert conn.features["snappy" if "snappy" in mode else "deflate"] is True
        assert ("TLSStream" in stack(conn)) == ("tls" in mode)
    finally:
        writer.close()

    def handler(message):
        received.append(bytes(message.body))
        return True

    reader = nsq.Reader(topic, "ch", handler, nsqd_tcp_addresses=[server.tcp_address], max_in_flight=100, **kwargs)
    reader.start()
    try:
        wait_for(lambda: len(received) >= len(bodies), backend, message="all messages")
        (client,) = server.clients(topic, "ch")
        assert client["snappy"] == ("snappy" in mode)
        assert client["deflate"] == ("deflate" in mode)
        assert client["tls"] == ("tls" in mode)
    finally:
        reader.close()
    assert collections.Counter(received) == collections.Counter(bodies)


def test_deflate_level_is_negotiated(nsqd_factory, topic):
    server = nsqd_factory("--max-deflate-level=9")
    for level in (1, 9):
        conn = Connection("127.0.0.1", server.tcp_port, deflate=True, deflate_level=level, backend="threads")
        conn.connect()
        try:
            assert conn.features["deflate"] is True and conn.features["deflate_level"] == level
            assert conn.request(nsq.codec.encode_pub(topic, b"x" * 10000)) == b"OK"
        finally:
            conn.close()


@pytest.mark.parametrize("feature", ["snappy", "deflate"])
def test_compression_not_offered_is_a_clear_error(nsqd_factory, backend, feature):
    server = nsqd_factory("--%s=false" % feature)
    conn = Connection("127.0.0.1", server.tcp_port, backend=backend, **{feature: True})
    started = time.monotonic()
    with pytest.raises(FeatureNegotiationError) as info:
        conn.connect()
    assert time.monotonic() - started < 2
    assert feature in str(info.value) and "--%s" % feature in str(info.value)
    assert conn.closed()


def test_compression_not_offered_under_tls(nsqd_factory):
    pki = make_pki()
    server = start_nsqd(nsqd_factory, "tls", pki, "--snappy=false")
    conn = Connection("127.0.0.1", server.tcp_port, snappy=True, backend="threads", **mode_kwargs("tls", pki))
    with pytest.raises(FeatureNegotiationError):
        conn.connect()
    assert conn.closed()


def test_snappy_and_deflate_together_is_a_config_error():
    with pytest.raises(ConfigError, match="snappy and deflate"):
        Connection("127.0.0.1", 4150, snappy=True, deflate=True)
    with pytest.raises(ConfigError):
        nsq.Writer(["127.0.0.1:4150"], snappy=True, deflate=True)


def test_missing_python_snappy_is_a_config_error_before_connecting(nsqd, monkeypatch):
    monkeypatch.setitem(sys.modules, "snappy", None)  # makes `import snappy` fail
    with pytest.raises(ConfigError, match="python-snappy"):
        Connection("127.0.0.1", nsqd.tcp_port, snappy=True, backend="threads")


# ----------------------------------------------------------------------------- scripted server


def _frame(frame_type, data):
    return struct.pack(">ii", len(data) + 4, frame_type) + data


class _Codec:
    """Server side of one compression mode."""

    def __init__(self, mode):
        if mode == "snappy":
            compressor, decompressor = snappy.StreamCompressor(), snappy.StreamDecompressor()
            self.compress = compressor.add_chunk
            self.decompress = decompressor.decompress
        else:
            compressor = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
            decompressor = zlib.decompressobj(-zlib.MAX_WBITS)
            self.compress = lambda data: compressor.compress(data) + compressor.flush(zlib.Z_SYNC_FLUSH)
            self.decompress = decompressor.decompress


def _recv_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


@pytest.mark.parametrize("mode", ["snappy", "deflate"])
def test_bytes_after_the_identify_response_are_not_lost(backend, mode):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    seen = {}

    def serve():
        sock, _ = listener.accept()
        with sock:
            sock.settimeout(10)
            assert _recv_exact(sock, 4) == b"  V2"
            assert _recv_exact(sock, 9) == b"IDENTIFY\n"
            identify = json.loads(_recv_exact(sock, struct.unpack(">i", _recv_exact(sock, 4))[0]))
            seen["identify"] = identify
            codec = _Codec(mode)
            features = {"max_rdy_count": 2500, "version": "1.3.0", "tls_v1": False, "snappy": mode == "snappy",
                        "deflate": mode == "deflate", "auth_required": False}
            # IDENTIFY response, compressed OK and a compressed heartbeat in ONE write.
            sock.sendall(
                _frame(0, json.dumps(features).encode())
                + codec.compress(_frame(0, b"OK") + _frame(0, b"_heartbeat_"))
            )
            received = b""
            while b"NOP\n" not in received:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                received += codec.decompress(chunk)
            seen["answer"] = received

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    port = listener.getsockname()[1]
    conn = Connection("127.0.0.1", port, backend=backend, **{mode: True})
    heartbeats = []
    conn.on("heartbeat", lambda conn: heartbeats.append(conn))
    try:
        conn.connect()
        assert stack(conn)[0] == ("SnappyStream" if mode == "snappy" else "DeflateStream")
        wait_for(lambda: "answer" in seen, backend, message="NOP answer to the heartbeat")
    finally:
        conn.close()
        listener.close()
    thread.join(5)
    assert seen["identify"][mode] is True
    assert seen["answer"] == b"NOP\n"
    assert len(heartbeats) == 1


# ----------------------------------------------------------------------------- stream layers


class _FakeInner:
    """An inner stream that hands out fixed chunks and records what is sent."""

    def __init__(self, chunks):
        self.chunks = collections.deque(chunks)
        self.sent = []

    def recv(self):
        return memoryview(self.chunks.popleft()) if self.chunks else b""

    def send(self, data):
        self.sent.append(bytes(data))

    def settimeout(self, timeout):
        pass

    def close(self):
        pass


def _split(data, sizes):
    out, i, k = [], 0, 0
    while i < len(data):
        n = sizes[k % len(sizes)]
        out.append(data[i : i + n])
        i += n
        k += 1
    return out


@pytest.mark.parametrize("mode", ["snappy", "deflate"])
@pytest.mark.parametrize("sizes", [[1], [3, 7, 1, 2], [4096], [1 << 20]])
def test_stream_layers_reassemble_any_chunking(mode, sizes):
    payload = b"".join(_frame(2, os.urandom(26) + (b"msg %d " % i) * (i % 40)) for i in range(500)) + os.urandom(70000)
    codec = _Codec(mode)
    wire = b"".join(codec.compress(payload[i : i + 5000]) for i in range(0, len(payload), 5000))
    inner = _FakeInner(_split(wire, sizes))
    stream = SnappyStream(inner) if mode == "snappy" else DeflateStream(inner, 6)
    out = bytearray()
    while True:
        data = stream.recv()
        if not data:
            break
        out += data
    assert bytes(out) == payload

    # and the other direction: what the layer sends decodes on the far side
    sent_payload = [os.urandom(1000), b"PUB t\n" + b"z" * 100000, b"NOP\n"]
    for data in sent_payload:
        stream.send(data)
    far = _Codec(mode)
    assert b"".join(far.decompress(chunk) for chunk in inner.sent) == b"".join(sent_payload)
