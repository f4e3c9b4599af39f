# A complete NSQ exchange against a real nsqd with nothing but a raw socket and the
# sans-I/O codec (nsq.codec), then the same with pynsq's SyncConn + nsq.protocol builders.
from __future__ import annotations

import json
import socket
import struct
import time

import pytest

import nsq
from nsq import codec

from tests.support.servers import wait_until

TIMEOUT = 5.0


class RawClient:
    """A blocking socket fed through nsq.codec.FrameDecoder."""

    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port), timeout=TIMEOUT)
        self.decoder = codec.FrameDecoder()
        self.frames: list = []

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def frame(self) -> tuple:
        while not self.frames:
            data = self.sock.recv(65536)
            if not data:
                raise EOFError("nsqd closed the connection")
            self.frames.extend(self.decoder.feed(data))
        return self.frames.pop(0)

    def response(self) -> bytes:
        """Next non-heartbeat response frame's data (fails on an error frame)."""
        while True:
            frame_type, data = self.frame()
            assert frame_type == codec.FRAME_TYPE_RESPONSE, (frame_type, bytes(data))
            if bytes(data) != b"_heartbeat_":
                return bytes(data)

    def close(self) -> None:
        self.sock.close()


def _stats_channel(nsqd, topic, channel):
    return nsqd.channel_stats(topic, channel)


def test_raw_socket_codec_round_trip(nsqd, topic):
    channel = "raw"
    client = RawClient(nsqd.host, nsqd.tcp_port)
    try:
        # magic + IDENTIFY with feature negotiation -> JSON features
        client.send(codec.MAGIC_V2)
        client.send(codec.encode_identify({
            "client_id": "raw-client",
            "hostname": "raw.example",
            "feature_negotiation": True,
            "user_agent": "nsqfast-test/raw",
            "heartbeat_interval": 30000,
        }))
        features = json.loads(client.response())
        assert features["max_rdy_count"] > 0
        assert features["version"]
        assert features["tls_v1"] is False
        assert "max_msg_timeout" in features and "msg_timeout" in features

        # SUB -> OK
        client.send(codec.encode_sub(topic, channel))
        assert client.response() == b"OK"

        # PUB on a second raw connection
        publisher = RawClient(nsqd.host, nsqd.tcp_port)
        try:
            publisher.send(codec.MAGIC_V2)
            before_ns = time.time_ns()
            publisher.send(codec.encode_pub(topic, b"hello raw"))
            assert publisher.response() == b"OK"
            after_ns = time.time_ns()
        finally:
            publisher.close()

        # RDY 1 -> the message is pushed
        client.send(codec.encode_rdy(1))
        frame_type, data = client.frame()
        while frame_type == codec.FRAME_TYPE_RESPONSE and bytes(data) == b"_heartbeat_":
            frame_type, data = client.frame()
        assert frame_type == codec.FRAME_TYPE_MESSAGE
        timestamp, attempts, message_id, body = data
        assert body == b"hello raw"
        assert attempts == 1
        assert len(message_id) == 16
        assert all(c in b"0123456789abcdef" for c in message_id)
        # nsqd stamps the message when it accepts the PUB (allow clock granularity)
        assert before_ns - 1_000_000_000 <= timestamp <= after_ns + 1_000_000_000

        wait_until(lambda: (_stats_channel(nsqd, topic, channel) or {}).get("in_flight_count") == 1, TIMEOUT)

        # FIN (no response) -> nsqd counts it finished
        client.send(codec.encode_fin(message_id))
        wait_until(
            lambda: (lambda c: c is not None and c["in_flight_count"] == 0 and c["depth"] == 0
                     and c["message_count"] == 1 and c["clients"][0]["finish_count"] == 1)(
                _stats_channel(nsqd, topic, channel)
            ),
            TIMEOUT,
            message=lambda: repr(_stats_channel(nsqd, topic, channel)),
        )

        # CLS -> CLOSE_WAIT
        client.send(codec.encode_cls())
        assert client.response() == b"CLOSE_WAIT"
    finally:
        client.close()


def test_raw_socket_error_frame_decodes_to_server_error(nsqd):
    client = RawClient(nsqd.host, nsqd.tcp_port)
    try:
        client.send(codec.MAGIC_V2)
        client.send(codec.encode_fin(b"0123456789abcdef"))  # not subscribed: E_INVALID
        frame_type, data = client.frame()
        assert frame_type == codec.FRAME_TYPE_ERROR
        err = nsq.errors.server_error(data)
        assert isinstance(err, nsq.errors.ServerError)
        assert err.code.startswith("E_")
    finally:
        client.close()


def test_sync_conn_round_trip_with_protocol_builders(nsqd, topic):
    channel = "sync"
    conn = nsq.SyncConn(timeout=TIMEOUT)
    conn.connect(nsqd.host, nsqd.tcp_port)
    try:
        conn.send(nsq.identify({"feature_negotiation": True, "client_id": "syncconn"}))
        frame_type, data = nsq.unpack_response(conn.read_response())
        assert frame_type == nsq.FRAME_TYPE_RESPONSE
        assert json.loads(data)["max_rdy_count"] > 0

        conn.send(nsq.pub(topic, b"one"))
        assert nsq.unpack_response(conn.read_response()) == (nsq.FRAME_TYPE_RESPONSE, b"OK")
        conn.send(nsq.mpub(topic, [b"two", b"three"]))
        assert nsq.unpack_response(conn.read_response()) == (nsq.FRAME_TYPE_RESPONSE, b"OK")
        conn.send(nsq.protocol.dpub(topic, 0, b"four"))
        assert nsq.unpack_response(conn.read_response()) == (nsq.FRAME_TYPE_RESPONSE, b"OK")

        conn.send(nsq.subscribe(topic, channel))
        assert nsq.unpack_response(conn.read_response()) == (nsq.FRAME_TYPE_RESPONSE, b"OK")
        # messages published before the first channel existed flow into it
        conn.send(nsq.pub(topic, b"five"))
        assert nsq.unpack_response(conn.read_response()) == (nsq.FRAME_TYPE_RESPONSE, b"OK")

        conn.send(nsq.ready(1))
        frame_type, data = nsq.unpack_response(conn.read_response())
        while frame_type == nsq.FRAME_TYPE_RESPONSE and data == b"_heartbeat_":
            frame_type, data = nsq.unpack_response(conn.read_response())
        assert frame_type == nsq.FRAME_TYPE_MESSAGE
        msg = nsq.decode_message(data)
        assert isinstance(msg, nsq.Message)
        assert msg.body in (b"one", b"two", b"three", b"four", b"five")
        assert msg.attempts == 1
        conn.send(nsq.touch(msg.id))
        conn.send(nsq.requeue(msg.id, 0))
        conn.send(nsq.nop())

        # the requeued message comes back with attempts == 2
        frame_type, data = nsq.unpack_response(conn.read_response())
        while frame_type == nsq.FRAME_TYPE_RESPONSE and data == b"_heartbeat_":
            frame_type, data = nsq.unpack_response(conn.read_response())
        assert frame_type == nsq.FRAME_TYPE_MESSAGE
        again = nsq.decode_message(data)
        assert again.attempts >= 1
        conn.send(nsq.finish(again.id))
        conn.send(nsq.ready(0))
        conn.send(b"CLS\n")
        frame_type, data = nsq.unpack_response(conn.read_response())
        while frame_type == nsq.FRAME_TYPE_MESSAGE:
            frame_type, data = nsq.unpack_response(conn.read_response())
        assert (frame_type, data) == (nsq.FRAME_TYPE_RESPONSE, b"CLOSE_WAIT")
    finally:
        conn.close()
    assert nsqd.message_count(topic) == 5
    stats = wait_until(lambda: nsqd.channel_stats(topic, channel), TIMEOUT)
    assert stats["message_count"] == 5
    assert stats["requeue_count"] == 1


def test_sync_conn_error_frame(nsqd):
    conn = nsq.SyncConn(timeout=TIMEOUT)
    conn.connect(nsqd.host, nsqd.tcp_port)
    try:
        conn.send(b"PUB bad!topic\n" + struct.pack(">l", 1) + b"x")
        frame_type, data = nsq.unpack_response(conn.read_response())
        assert frame_type == nsq.FRAME_TYPE_ERROR
        assert data.startswith(b"E_BAD_TOPIC")
        # E_BAD_TOPIC is fatal: nsqd closes the connection
        with pytest.raises((nsq.ConnectionClosedError, OSError)):
            conn.read_response()
    finally:
        conn.close()
