"""Pure-Python twin of nsq/_frame.pyx: the sans-I/O NSQ frame decoder and command
encoders. It is the reference; the compiled module must behave identically.
"""
from __future__ import annotations

import json
import struct
from typing import Any, Iterable

from nsq.errors import InvalidArgumentError, InvalidBodyError, MessageTooLargeError, ProtocolError

__all__ = [
    "MAGIC_V2",
    "FRAME_TYPE_RESPONSE",
    "FRAME_TYPE_ERROR",
    "FRAME_TYPE_MESSAGE",
    "MESSAGE_HEADER_SIZE",
    "DEFAULT_MAX_FRAME_SIZE",
    "FrameDecoder",
    "decode_message",
    "encode_identify",
    "encode_auth",
    "encode_sub",
    "encode_pub",
    "encode_mpub",
    "encode_dpub",
    "encode_rdy",
    "encode_fin",
    "encode_fin_many",
    "encode_req",
    "encode_touch",
    "encode_cls",
    "encode_nop",
]

MAGIC_V2 = b"  V2"
FRAME_TYPE_RESPONSE = 0
FRAME_TYPE_ERROR = 1
FRAME_TYPE_MESSAGE = 2
MESSAGE_HEADER_SIZE = 26
DEFAULT_MAX_FRAME_SIZE = 16 * 1024 * 1024

_MIN_MAX_FRAME_SIZE = 4 + MESSAGE_HEADER_SIZE
_U32_MAX = 0xFFFFFFFF
_BROKEN = "decoder is unusable after a protocol error"
_REENTERED = "FrameDecoder.feed() called while another feed() is running"

_U32 = struct.Struct(">I")
_MSG_HEADER = struct.Struct(">qH16s")


def _short_message(n: int) -> ProtocolError:
    return ProtocolError(
        "message frame of %d bytes is shorter than the 26-byte message header" % n
    )


def _as_bytes(data: Any, what: str) -> bytes:
    """Return the bytes of a C-contiguous buffer, or raise InvalidArgumentError."""
    if type(data) is bytes:
        return data
    try:
        view = memoryview(data)
    except TypeError:
        raise InvalidArgumentError(
            "%s needs a bytes-like object, not %s" % (what, type(data).__name__)
        ) from None
    if not view.c_contiguous:
        raise InvalidArgumentError("%s needs a C-contiguous buffer" % what)
    return view.tobytes()


def decode_message(payload: Any) -> tuple[int, int, bytes, bytes]:
    """Decode a message frame's data into (timestamp_ns, attempts, message_id, body)."""
    data = _as_bytes(payload, "decode_message()")
    if len(data) < MESSAGE_HEADER_SIZE:
        raise _short_message(len(data))
    timestamp, attempts, message_id = _MSG_HEADER.unpack_from(data)
    return timestamp, attempts, message_id, data[MESSAGE_HEADER_SIZE:]


class FrameDecoder:
    """Incremental decoder: feed() it stream bytes, get back the complete frames.

    A ProtocolError is raised as soon as the bytes that reveal it are fed, even
    if frames before it completed in the same feed() call (those are dropped:
    the stream is dead). After that every feed() raises ProtocolError.
    """

    __slots__ = ("_max", "_buf", "_need", "_broken", "_busy")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        if (
            type(max_frame_size) is bool
            or not isinstance(max_frame_size, int)
            or max_frame_size < _MIN_MAX_FRAME_SIZE
        ):
            raise InvalidArgumentError(
                "max_frame_size must be an int >= %d, got %r"
                % (_MIN_MAX_FRAME_SIZE, max_frame_size)
            )
        self._max = int(max_frame_size)
        self._buf = bytearray()  # the start of the one incomplete frame
        self._need = 4  # buffered bytes needed before the next check or frame
        self._broken = False
        self._busy = False

    @property
    def max_frame_size(self) -> int:
        return self._max

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def feed(self, data: Any) -> list[tuple[int, Any]]:
        if self._broken:
            raise ProtocolError(_BROKEN)
        if self._busy:
            raise RuntimeError(_REENTERED)
        chunk = _as_bytes(data, "feed()")
        if not chunk:
            return []
        if self._buf:
            self._buf += chunk
            if len(self._buf) < self._need:
                return []
            chunk = bytes(self._buf)
        self._busy = True
        try:
            frames, pos = self._parse(chunk)
        except ProtocolError:
            self._broken = True
            self._buf = bytearray()
            raise
        finally:
            self._busy = False
        self._buf = bytearray(chunk[pos:]) if pos < len(chunk) else bytearray()
        return frames

    def _parse(self, data: bytes) -> tuple[list[tuple[int, Any]], int]:
        """Parse the complete frames at the start of data; return them and the end offset."""
        frames: list[tuple[int, Any]] = []
        end = len(data)
        pos = 0
        while True:
            avail = end - pos
            if avail < 4:
                self._need = 4
                return frames, pos
            (size,) = _U32.unpack_from(data, pos)
            if size < 4:
                raise ProtocolError("frame size %d is too small to hold a frame type" % size)
            if size > self._max:
                raise ProtocolError(
                    "frame size %d exceeds the maximum of %d" % (size, self._max)
                )
            if avail < 8:
                self._need = 8
                return frames, pos
            (frame_type,) = _U32.unpack_from(data, pos + 4)
            if frame_type > FRAME_TYPE_MESSAGE:
                raise ProtocolError("unknown frame type %d" % frame_type)
            if frame_type == FRAME_TYPE_MESSAGE and size - 4 < MESSAGE_HEADER_SIZE:
                raise _short_message(size - 4)
            if avail < 4 + size:
                self._need = 4 + size
                return frames, pos
            start = pos + 8
            pos += 4 + size
            if frame_type == FRAME_TYPE_MESSAGE:
                timestamp, attempts, message_id = _MSG_HEADER.unpack_from(data, start)
                body = data[start + MESSAGE_HEADER_SIZE : pos]
                frames.append((FRAME_TYPE_MESSAGE, (timestamp, attempts, message_id, body)))
            else:
                frames.append((frame_type, data[start:pos]))


# --- encoders -----------------------------------------------------------------


def _name(value: Any, what: str) -> bytes:
    """A topic or channel name (or message id) as bytes that cannot break the line."""
    if isinstance(value, str):
        try:
            raw = value.encode("ascii")
        except UnicodeEncodeError:
            raise InvalidArgumentError("%s must be ASCII, got %r" % (what, value)) from None
    elif isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
    else:
        raise InvalidArgumentError(
            "%s must be str or bytes, not %s" % (what, type(value).__name__)
        )
    if b" " in raw or b"\n" in raw:
        raise InvalidArgumentError(
            "%s must not contain a space or newline, got %r" % (what, value)
        )
    return raw


def _message_id(value: Any) -> bytes:
    if isinstance(value, str):
        try:
            raw = value.encode("ascii")
        except UnicodeEncodeError:
            raise InvalidArgumentError("message id must be ASCII, got %r" % (value,)) from None
    elif isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
    else:
        raise InvalidArgumentError(
            "message id must be bytes or str, not %s" % type(value).__name__
        )
    if len(raw) != 16:
        raise InvalidArgumentError("message id must be 16 bytes, got %d" % len(raw))
    if b" " in raw or b"\n" in raw:
        raise InvalidArgumentError(
            "message id must not contain a space or newline, got %r" % (value,)
        )
    return raw


def _count(value: Any, what: str) -> bytes:
    if type(value) is bool or not isinstance(value, int):
        raise InvalidArgumentError("%s must be an int, not %s" % (what, type(value).__name__))
    if value < 0:
        raise InvalidArgumentError("%s must be >= 0, got %d" % (what, value))
    return b"%d" % value


def _body(body: Any) -> tuple[Any, int]:
    """Check a message body; return a contiguous bytes-like object and its length."""
    if isinstance(body, (bytes, bytearray)):
        n = len(body)
    elif isinstance(body, memoryview):
        if body.c_contiguous:
            n = body.nbytes
        else:
            body = body.tobytes()
            n = len(body)
    else:
        raise InvalidBodyError("message body must be bytes, not %s" % type(body).__name__)
    if n > _U32_MAX:
        raise MessageTooLargeError("message body of %d bytes is too large for NSQ" % n)
    return body, n


def encode_identify(data: dict[str, Any]) -> bytes:
    if not isinstance(data, dict):
        raise InvalidArgumentError(
            "IDENTIFY data must be a dict, not %s" % type(data).__name__
        )
    payload = json.dumps(data).encode("utf-8")
    return b"IDENTIFY\n" + _U32.pack(len(payload)) + payload


def encode_auth(secret: Any) -> bytes:
    if isinstance(secret, str):
        secret = secret.encode("utf-8")
    elif not isinstance(secret, (bytes, bytearray, memoryview)):
        raise InvalidArgumentError(
            "auth secret must be bytes or str, not %s" % type(secret).__name__
        )
    secret, n = _body(secret)
    return b"".join((b"AUTH\n", _U32.pack(n), secret))


def encode_sub(topic: Any, channel: Any) -> bytes:
    return b"SUB " + _name(topic, "topic") + b" " + _name(channel, "channel") + b"\n"


def encode_pub(topic: Any, body: Any) -> bytes:
    name = _name(topic, "topic")
    body, n = _body(body)
    return b"".join((b"PUB ", name, b"\n", _U32.pack(n), body))


def encode_mpub(topic: Any, bodies: Iterable[Any]) -> bytes:
    name = _name(topic, "topic")
    if isinstance(bodies, (str, bytes, bytearray, memoryview)):
        bodies_iter = None
    else:
        try:
            bodies_iter = iter(bodies)
        except TypeError:
            bodies_iter = None
    if bodies_iter is None:
        raise InvalidArgumentError(
            "MPUB needs an iterable of message bodies, not %s" % type(bodies).__name__
        )
    parts = [b"MPUB ", name, b"\n", b"", b""]
    total = 4
    count = 0
    for body in bodies_iter:
        body, n = _body(body)
        parts.append(_U32.pack(n))
        parts.append(body)
        total += 4 + n
        count += 1
    if not count:
        raise InvalidArgumentError("MPUB needs at least one message")
    if total > _U32_MAX:
        raise MessageTooLargeError("MPUB body of %d bytes is too large for NSQ" % total)
    parts[3] = _U32.pack(total)
    parts[4] = _U32.pack(count)
    return b"".join(parts)


def encode_dpub(topic: Any, delay_ms: int, body: Any) -> bytes:
    name = _name(topic, "topic")
    delay = _count(delay_ms, "delay_ms")
    body, n = _body(body)
    return b"".join((b"DPUB ", name, b" ", delay, b"\n", _U32.pack(n), body))


def encode_rdy(count: int) -> bytes:
    return b"RDY " + _count(count, "count") + b"\n"


def encode_fin(message_id: Any) -> bytes:
    return b"FIN " + _message_id(message_id) + b"\n"


def encode_fin_many(ids: Iterable[Any]) -> bytes:
    """FIN commands for every id, concatenated (one write for a batch of acks)."""
    if isinstance(ids, (str, bytes, bytearray, memoryview)):
        ids_iter = None
    else:
        try:
            ids_iter = iter(ids)
        except TypeError:
            ids_iter = None
    if ids_iter is None:
        raise InvalidArgumentError(
            "encode_fin_many() needs an iterable of message ids, not %s" % type(ids).__name__
        )
    return b"".join([b"FIN " + _message_id(i) + b"\n" for i in ids_iter])


def encode_req(message_id: Any, delay_ms: int) -> bytes:
    mid = _message_id(message_id)
    return b"REQ " + mid + b" " + _count(delay_ms, "delay_ms") + b"\n"


def encode_touch(message_id: Any) -> bytes:
    return b"TOUCH " + _message_id(message_id) + b"\n"


def encode_cls() -> bytes:
    return b"CLS\n"


def encode_nop() -> bytes:
    return b"NOP\n"
