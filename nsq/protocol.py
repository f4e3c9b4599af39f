"""pynsq's module-level protocol API, kept name for name so that programs that
build commands by hand get the same bytes: command builders (with pynsq's
assertions), unpack_response, decode_message, name checks, constants, and
the error classes (re-exported from nsq.errors).
"""
from __future__ import annotations

import json
import struct
from typing import Any, Iterable

from nsq import codec
from nsq.errors import ConnectionClosedError, Error, IntegrityError, SendError
from nsq.message import Message
from nsq.names import VALID_NAME_RE, valid_channel_name, valid_topic_name

MAGIC_V2 = codec.MAGIC_V2
NL = b"\n"

FRAME_TYPE_RESPONSE = codec.FRAME_TYPE_RESPONSE
FRAME_TYPE_ERROR = codec.FRAME_TYPE_ERROR
FRAME_TYPE_MESSAGE = codec.FRAME_TYPE_MESSAGE

AUTH = b"AUTH"
CLS = b"CLS"
DPUB = b"DPUB"
FIN = b"FIN"
IDENTIFY = b"IDENTIFY"
MPUB = b"MPUB"
NOP = b"NOP"
PUB = b"PUB"
RDY = b"RDY"
REQ = b"REQ"
SUB = b"SUB"
TOUCH = b"TOUCH"

bytes_types = (bytes, bytearray, memoryview)

__all__ = [
    "MAGIC_V2", "NL", "FRAME_TYPE_RESPONSE", "FRAME_TYPE_ERROR", "FRAME_TYPE_MESSAGE",
    "AUTH", "CLS", "DPUB", "FIN", "IDENTIFY", "MPUB", "NOP", "PUB", "RDY", "REQ", "SUB", "TOUCH",
    "Error", "SendError", "ConnectionClosedError", "IntegrityError", "VALID_NAME_RE",
    "unpack_response", "decode_message", "identify", "auth", "subscribe", "ready", "finish",
    "requeue", "touch", "nop", "pub", "mpub", "dpub", "valid_topic_name", "valid_channel_name",
]


def _to_bytes(value: Any) -> bytes:
    if isinstance(value, bytes_types):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    raise TypeError("expected bytes or a string, not %r" % type(value))


def _command(cmd: bytes, body: Any, *params: Any) -> bytes:
    line = cmd + b"".join(b" " + _to_bytes(p) for p in params) + NL
    if body is None:
        return line
    assert isinstance(body, bytes_types), "body must be a bytestring"
    return line + struct.pack(">l", len(body)) + bytes(body)


def unpack_response(data: bytes) -> tuple[int, bytes]:
    """Split a frame (without its size) into (frame_type, data)."""
    return struct.unpack(">l", data[:4])[0], data[4:]


def decode_message(data: bytes) -> Message:
    """Decode a message frame's data into a Message (not attached to a connection)."""
    timestamp, attempts, message_id, body = codec.decode_message(data)
    return Message(message_id, body, timestamp, attempts)


def identify(data: dict) -> bytes:
    return _command(IDENTIFY, json.dumps(data).encode("utf-8"))


def auth(data: bytes | str) -> bytes:
    return _command(AUTH, _to_bytes(data))


def subscribe(topic: str, channel: str) -> bytes:
    assert valid_topic_name(topic), "invalid topic name %r" % (topic,)
    assert valid_channel_name(channel), "invalid channel name %r" % (channel,)
    return _command(SUB, None, topic, channel)


def ready(count: int) -> bytes:
    assert isinstance(count, int), "ready count must be an integer"
    assert count >= 0, "ready count cannot be negative"
    return _command(RDY, None, str(count))


def finish(id: bytes | str) -> bytes:
    return _command(FIN, None, id)


def requeue(id: bytes | str, time_ms: int = 0) -> bytes:
    assert isinstance(time_ms, int), "requeue time_ms must be an integer"
    return _command(REQ, None, id, str(time_ms))


def touch(id: bytes | str) -> bytes:
    return _command(TOUCH, None, id)


def nop() -> bytes:
    return _command(NOP, None)


def pub(topic: str, data: bytes) -> bytes:
    return _command(PUB, data, topic)


def mpub(topic: str, data: Iterable[bytes]) -> bytes:
    assert isinstance(data, (list, set, tuple)), "mpub data must be a list of bytestrings"
    parts = [struct.pack(">l", len(data))]
    for message in data:
        assert isinstance(message, bytes_types), "message bodies must be bytestrings"
        parts.append(struct.pack(">l", len(message)))
        parts.append(bytes(message))
    return _command(MPUB, b"".join(parts), topic)


def dpub(topic: str, delay_ms: int, data: bytes) -> bytes:
    assert isinstance(delay_ms, int), "dpub delay_ms must be an integer"
    return _command(DPUB, data, topic, str(delay_ms))
