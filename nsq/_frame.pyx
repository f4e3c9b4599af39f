# cython: language_level=3, annotation_typing=False
# Compiled frame codec (the client's hot path): NSQ frame decoder and command
# encoders. Must behave exactly like the pure-Python twin nsq/_frame_py.py.
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport int64_t, uint32_t, uint64_t
from libc.string cimport memcpy

from msgengine._buffer cimport Reassembly, reassembly_append, reassembly_clear, reassembly_free

import json
import sys

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

cdef enum:
    _HDR = 26  # message header: int64 timestamp, uint16 attempts, 16-byte id
_BROKEN = "decoder is unusable after a protocol error"
_REENTERED = "FrameDecoder.feed() called while another feed() is running"
# Largest size we can index on this platform; a larger max_frame_size is clamped.
cdef uint64_t _SIZE_CAP = min(0xFFFFFFFF, sys.maxsize - 4)


cdef inline uint32_t _u32(const unsigned char* p) noexcept nogil:
    return ((<uint32_t>p[0]) << 24) | ((<uint32_t>p[1]) << 16) | ((<uint32_t>p[2]) << 8) | p[3]


cdef inline object _message(const unsigned char* p, Py_ssize_t n):
    """(timestamp, attempts, id, body) from n >= 26 bytes of message frame data."""
    cdef int64_t ts = <int64_t>(((<uint64_t>_u32(p)) << 32) | _u32(p + 4))
    cdef unsigned int attempts = ((<unsigned int>p[8]) << 8) | p[9]
    return (ts, attempts,
            PyBytes_FromStringAndSize(<char*>p + 10, 16),
            PyBytes_FromStringAndSize(<char*>p + _HDR, n - _HDR))


cdef inline object _short_message(Py_ssize_t n):
    return ProtocolError(
        "message frame of %d bytes is shorter than the 26-byte message header" % n)


cdef object _contiguous(object data, str what):
    """data itself if bytes/bytearray, else a C-contiguous memoryview of it."""
    if type(data) is bytes or type(data) is bytearray:
        return data
    try:
        view = memoryview(data)
    except TypeError:
        raise InvalidArgumentError(
            "%s needs a bytes-like object, not %s" % (what, type(data).__name__)) from None
    if not view.c_contiguous:
        raise InvalidArgumentError("%s needs a C-contiguous buffer" % what)
    return view


def decode_message(payload) -> tuple:
    """Decode a message frame's data into (timestamp_ns, attempts, message_id, body)."""
    cdef Py_buffer view
    payload = _contiguous(payload, "decode_message()")
    PyObject_GetBuffer(payload, &view, PyBUF_SIMPLE)
    try:
        if view.len < _HDR:
            raise _short_message(view.len)
        return _message(<const unsigned char*>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)


cdef class FrameDecoder:
    """Incremental decoder: feed() it stream bytes, get back the complete frames.

    A ProtocolError is raised as soon as the bytes that reveal it are fed, even
    if frames before it completed in the same feed() call (those are dropped:
    the stream is dead). After that every feed() raises ProtocolError.
    """

    cdef Reassembly _held      # the one incomplete frame; .need: the bytes needed before the next check or frame
    cdef uint64_t _max         # max_frame_size clamped to what can be indexed
    cdef object _max_obj
    cdef bint _broken
    cdef bint _busy

    def __cinit__(self):
        self._held.need = 4
        self._max = DEFAULT_MAX_FRAME_SIZE
        self._max_obj = DEFAULT_MAX_FRAME_SIZE

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        if (type(max_frame_size) is bool or not isinstance(max_frame_size, int)
                or max_frame_size < 30):
            raise InvalidArgumentError(
                "max_frame_size must be an int >= %d, got %r" % (30, max_frame_size))
        self._max_obj = int(max_frame_size)
        self._max = <uint64_t>min(self._max_obj, _SIZE_CAP)
        self._held.len = 0
        self._held.need = 4
        self._broken = False

    def __dealloc__(self):
        reassembly_free(&self._held)

    @property
    def max_frame_size(self) -> int:
        return self._max_obj

    @property
    def buffered(self) -> int:
        return self._held.len

    def feed(self, data) -> list:
        cdef Py_buffer view
        cdef list out
        if self._broken:
            raise ProtocolError(_BROKEN)
        if self._busy:
            raise RuntimeError(_REENTERED)
        data = _contiguous(data, "feed()")
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        out = []
        self._busy = True
        try:
            if view.len:
                self._feed(<const unsigned char*>view.buf, view.len, out)
        finally:
            self._busy = False
            PyBuffer_Release(&view)
        return out

    cdef int _feed(self, const unsigned char* p, Py_ssize_t n, list out) except -1:
        cdef Py_ssize_t off = 0, k
        cdef Reassembly* held = &self._held
        if held.len:
            # Finish the buffered frame with just the bytes it needs, then go on
            # parsing straight from the caller's buffer.
            if n < held.need - held.len:
                return reassembly_append(held, p, n)
            if held.len < 8:
                k = 8 - held.len
                if k > n:
                    k = n
                reassembly_append(held, p, k)
                off = k
                if self._parse(held.data, held.len, out):
                    reassembly_clear(held)
            if held.len >= 8:
                k = held.need - held.len
                if k > n - off:
                    k = n - off
                reassembly_append(held, p + off, k)
                off += k
                if self._parse(held.data, held.len, out):
                    reassembly_clear(held)
            if held.len:
                return 0
        off += self._parse(p + off, n - off, out)
        if off < n:
            reassembly_append(held, p + off, n - off)
        return 0

    cdef Py_ssize_t _parse(self, const unsigned char* p, Py_ssize_t n, list out) except -1:
        """Append the complete frames at the start of p[:n] to out; return their length."""
        cdef Py_ssize_t pos = 0, avail, total
        cdef uint32_t size, ftype
        while True:
            avail = n - pos
            if avail < 4:
                self._held.need = 4
                return pos
            size = _u32(p + pos)
            if size < 4:
                raise self._poison(ProtocolError(
                    "frame size %d is too small to hold a frame type" % size))
            if size > self._max:
                raise self._poison(ProtocolError(
                    "frame size %d exceeds the maximum of %d" % (size, self._max_obj)))
            if avail < 8:
                self._held.need = 8
                return pos
            ftype = _u32(p + pos + 4)
            if ftype > 2:
                raise self._poison(ProtocolError("unknown frame type %d" % ftype))
            if ftype == 2 and size < 4 + _HDR:
                raise self._poison(_short_message(size - 4))
            total = 4 + <Py_ssize_t>size
            if avail < total:
                self._held.need = total
                return pos
            if ftype == 2:
                out.append((2, _message(p + pos + 8, total - 8)))
            else:
                out.append((ftype, PyBytes_FromStringAndSize(<char*>p + pos + 8, total - 8)))
            pos += total

    cdef object _poison(self, exc):
        self._broken = True
        reassembly_free(&self._held)
        return exc


# --- encoders -----------------------------------------------------------------


cdef bytes _pack_u32(uint64_t v):
    cdef char b[4]
    b[0] = <char>((v >> 24) & 0xFF)
    b[1] = <char>((v >> 16) & 0xFF)
    b[2] = <char>((v >> 8) & 0xFF)
    b[3] = <char>(v & 0xFF)
    return PyBytes_FromStringAndSize(b, 4)


cdef bytes _name(value, str what):
    """A topic or channel name as bytes that cannot break the command line."""
    cdef bytes raw
    if isinstance(value, str):
        try:
            raw = value.encode("ascii")
        except UnicodeEncodeError:
            raise InvalidArgumentError("%s must be ASCII, got %r" % (what, value)) from None
    elif isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
    else:
        raise InvalidArgumentError(
            "%s must be str or bytes, not %s" % (what, type(value).__name__))
    if b" " in raw or b"\n" in raw:
        raise InvalidArgumentError(
            "%s must not contain a space or newline, got %r" % (what, value))
    return raw


cdef inline bint _clean_id(bytes raw) noexcept:
    """True for 16 bytes without a space or newline."""
    cdef const unsigned char* s
    cdef int i
    if PyBytes_GET_SIZE(raw) != 16:
        return False
    s = <const unsigned char*>PyBytes_AS_STRING(raw)
    for i in range(16):
        if s[i] == 32 or s[i] == 10:
            return False
    return True


cdef bytes _message_id(value):
    cdef bytes raw
    if type(value) is bytes and _clean_id(<bytes>value):
        return <bytes>value
    if isinstance(value, str):
        try:
            raw = value.encode("ascii")
        except UnicodeEncodeError:
            raise InvalidArgumentError("message id must be ASCII, got %r" % (value,)) from None
    elif isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
    else:
        raise InvalidArgumentError(
            "message id must be bytes or str, not %s" % type(value).__name__)
    if len(raw) != 16:
        raise InvalidArgumentError("message id must be 16 bytes, got %d" % len(raw))
    if not _clean_id(raw):
        raise InvalidArgumentError(
            "message id must not contain a space or newline, got %r" % (value,))
    return raw


cdef bytes _count(value, str what):
    if type(value) is bool or not isinstance(value, int):
        raise InvalidArgumentError("%s must be an int, not %s" % (what, type(value).__name__))
    if value < 0:
        raise InvalidArgumentError("%s must be >= 0, got %d" % (what, value))
    return b"%d" % value


cdef tuple _body(body):
    """Check a message body; return a contiguous bytes-like object and its length."""
    cdef Py_ssize_t n
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
    if <uint64_t>n > 0xFFFFFFFF:
        raise MessageTooLargeError("message body of %d bytes is too large for NSQ" % n)
    return body, n


cdef object _iterate(obj, str message):
    if isinstance(obj, (str, bytes, bytearray, memoryview)):
        raise InvalidArgumentError(message % type(obj).__name__)
    try:
        return iter(obj)
    except TypeError:
        raise InvalidArgumentError(message % type(obj).__name__) from None


def encode_identify(data: dict) -> bytes:
    if not isinstance(data, dict):
        raise InvalidArgumentError(
            "IDENTIFY data must be a dict, not %s" % type(data).__name__)
    payload = json.dumps(data).encode("utf-8")
    return b"IDENTIFY\n" + _pack_u32(len(payload)) + payload


def encode_auth(secret) -> bytes:
    if isinstance(secret, str):
        secret = secret.encode("utf-8")
    elif not isinstance(secret, (bytes, bytearray, memoryview)):
        raise InvalidArgumentError(
            "auth secret must be bytes or str, not %s" % type(secret).__name__)
    secret, n = _body(secret)
    return b"".join((b"AUTH\n", _pack_u32(n), secret))


def encode_sub(topic, channel) -> bytes:
    return b"SUB " + _name(topic, "topic") + b" " + _name(channel, "channel") + b"\n"


def encode_pub(topic, body) -> bytes:
    name = _name(topic, "topic")
    body, n = _body(body)
    return b"".join((b"PUB ", name, b"\n", _pack_u32(n), body))


def encode_mpub(topic, bodies) -> bytes:
    cdef list parts
    cdef uint64_t total = 4, count = 0
    name = _name(topic, "topic")
    bodies_iter = _iterate(bodies, "MPUB needs an iterable of message bodies, not %s")
    parts = [b"MPUB ", name, b"\n", b"", b""]
    for body in bodies_iter:
        body, n = _body(body)
        parts.append(_pack_u32(n))
        parts.append(body)
        total += 4 + <uint64_t>n
        count += 1
    if not count:
        raise InvalidArgumentError("MPUB needs at least one message")
    if total > 0xFFFFFFFF:
        raise MessageTooLargeError("MPUB body of %d bytes is too large for NSQ" % total)
    parts[3] = _pack_u32(total)
    parts[4] = _pack_u32(count)
    return b"".join(parts)


def encode_dpub(topic, delay_ms: int, body) -> bytes:
    name = _name(topic, "topic")
    delay = _count(delay_ms, "delay_ms")
    body, n = _body(body)
    return b"".join((b"DPUB ", name, b" ", delay, b"\n", _pack_u32(n), body))


def encode_rdy(count: int) -> bytes:
    return b"RDY " + _count(count, "count") + b"\n"


def encode_fin(message_id) -> bytes:
    cdef bytes mid = _message_id(message_id)
    cdef bytes out = PyBytes_FromStringAndSize(NULL, 21)
    cdef char* w = PyBytes_AS_STRING(out)
    memcpy(w, b"FIN ", 4)
    memcpy(w + 4, PyBytes_AS_STRING(mid), 16)
    w[20] = 10  # newline
    return out


def encode_fin_many(ids) -> bytes:
    """FIN commands for every id, concatenated (one write for a batch of acks)."""
    cdef list mids = [_message_id(m) for m in _iterate(
        ids, "encode_fin_many() needs an iterable of message ids, not %s")]
    cdef Py_ssize_t i, n = len(mids)
    cdef bytes out = PyBytes_FromStringAndSize(NULL, 21 * n)
    cdef char* w = PyBytes_AS_STRING(out)
    for i in range(n):
        memcpy(w, b"FIN ", 4)
        memcpy(w + 4, PyBytes_AS_STRING(<bytes>mids[i]), 16)
        w[20] = 10  # newline
        w += 21
    return out


def encode_req(message_id, delay_ms: int) -> bytes:
    mid = _message_id(message_id)
    return b"REQ " + mid + b" " + _count(delay_ms, "delay_ms") + b"\n"


def encode_touch(message_id) -> bytes:
    return b"TOUCH " + _message_id(message_id) + b"\n"


def encode_cls() -> bytes:
    return b"CLS\n"


def encode_nop() -> bytes:
    return b"NOP\n"
