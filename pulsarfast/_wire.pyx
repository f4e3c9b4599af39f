# cython: language_level=3, annotation_typing=False
"""The Pulsar wire codec, compiled: the hot-path twin of ``_wire_py.py``.

It owns the byte level under the protobuf messages, with the same names,
signatures and behaviour as the pure-Python reference (``pulsarfast.wire``
chooses between the two):

- ``crc32c``: CRC-32C (Castagnoli), the checksum of payload frames, with the
  SSE4.2 ``crc32`` instruction (three interleaved streams on long buffers)
  when the CPU has it, else slice-by-8 tables;
- ``read_fields``: one protobuf message's fields, in wire order, as a flat
  list ``[number, value, number, value, ...]``, parsed over a C pointer;
- ``varint`` and the frame writers ``encode_simple`` / ``encode_payload`` /
  ``encode_batch_entry``, each writing into one new bytes object;
- ``FrameDecoder``: splits the byte stream into ``(command, metadata,
  payload, checksum_ok)`` frames straight from the caller's buffer, copying
  only the unfinished frame at the end of a feed() into its own growable
  buffer (the transport reuses the memoryview it feeds);
- ``split_batch``: a batch payload into its ``(SingleMessageMetadata, body)``
  entries.

Malformed input raises ``pulsarfast.errors.ProtocolError``, for the same
inputs as the pure twin (messages may differ).
"""
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.long cimport PyLong_AsUnsignedLongLongMask
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from libc.stdint cimport uint32_t, uint64_t
from libc.string cimport memcpy

import operator
import struct
import sys

from .errors import ProtocolError

cdef extern from *:
    """
    #include <stddef.h>
    #include <stdint.h>
    #include <string.h>

    #define PF_POLY 0x82F63B78u
    /* Three-stream hardware blocks, and the operators shifting a crc over them. */
    #define PF_LONG 8192
    #define PF_SHORT 256

    static uint32_t pf_table[8][256];
    static uint32_t pf_long[4][256];
    static uint32_t pf_short[4][256];
    static int pf_have_hw = 0;

    /* Software: slice-by-8. crc is the register (already inverted). Bytes are
       assembled one by one, so it is right on any endianness (compilers fuse
       the loads on little-endian machines). */
    static uint32_t pf_crc_sw(uint32_t crc, const unsigned char *p, size_t n) {
        while (n >= 8) {
            uint32_t lo = crc ^ ((uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24));
            uint32_t hi = (uint32_t)p[4] | ((uint32_t)p[5] << 8) | ((uint32_t)p[6] << 16) | ((uint32_t)p[7] << 24);
            crc = pf_table[7][lo & 0xFF] ^ pf_table[6][(lo >> 8) & 0xFF]
                ^ pf_table[5][(lo >> 16) & 0xFF] ^ pf_table[4][lo >> 24]
                ^ pf_table[3][hi & 0xFF] ^ pf_table[2][(hi >> 8) & 0xFF]
                ^ pf_table[1][(hi >> 16) & 0xFF] ^ pf_table[0][hi >> 24];
            p += 8;
            n -= 8;
        }
        while (n--) crc = pf_table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
        return crc;
    }

    /* GF(2) operators appending zero bytes to a crc register (Mark Adler's
       crc32c.c), to join the three streams of the hardware path. */
    static uint32_t pf_gf2_times(const uint32_t *mat, uint32_t vec) {
        uint32_t sum = 0;
        while (vec) {
            if (vec & 1) sum ^= *mat;
            vec >>= 1;
            mat++;
        }
        return sum;
    }

    static void pf_gf2_square(uint32_t *square, const uint32_t *mat) {
        int n;
        for (n = 0; n < 32; n++) square[n] = pf_gf2_times(mat, mat[n]);
    }

    /* The operator for len zero bytes (len a power of two). */
    static void pf_zeros_op(uint32_t *even, size_t len) {
        uint32_t odd[32];
        uint32_t row = 1;
        int n;
        odd[0] = PF_POLY;
        for (n = 1; n < 32; n++) {
            odd[n] = row;
            row <<= 1;
        }
        pf_gf2_square(even, odd);  /* two zero bits */
        pf_gf2_square(odd, even);  /* four zero bits */
        do {
            pf_gf2_square(even, odd);
            len >>= 1;
            if (len == 0) return;
            pf_gf2_square(odd, even);
            len >>= 1;
        } while (len);
        for (n = 0; n < 32; n++) even[n] = odd[n];
    }

    static void pf_zeros(uint32_t zeros[][256], size_t len) {
        uint32_t op[32];
        uint32_t n;
        pf_zeros_op(op, len);
        for (n = 0; n < 256; n++) {
            zeros[0][n] = pf_gf2_times(op, n);
            zeros[1][n] = pf_gf2_times(op, n << 8);
            zeros[2][n] = pf_gf2_times(op, n << 16);
            zeros[3][n] = pf_gf2_times(op, n << 24);
        }
    }

    static inline uint32_t pf_shift(uint32_t zeros[][256], uint32_t crc) {
        return zeros[0][crc & 0xFF] ^ zeros[1][(crc >> 8) & 0xFF]
             ^ zeros[2][(crc >> 16) & 0xFF] ^ zeros[3][crc >> 24];
    }

    #if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    #define PF_HW 1
    #include <nmmintrin.h>

    __attribute__((target("sse4.2")))
    static uint32_t pf_crc_hw(uint32_t crc, const unsigned char *p, size_t n) {
        uint64_t c0 = crc, c1, c2, w0, w1, w2;
        const unsigned char *end;
        while (n >= 3 * PF_LONG) {
            c1 = c2 = 0;
            end = p + PF_LONG;
            do {
                memcpy(&w0, p, 8);
                memcpy(&w1, p + PF_LONG, 8);
                memcpy(&w2, p + 2 * PF_LONG, 8);
                c0 = _mm_crc32_u64(c0, w0);
                c1 = _mm_crc32_u64(c1, w1);
                c2 = _mm_crc32_u64(c2, w2);
                p += 8;
            } while (p < end);
            c0 = pf_shift(pf_long, (uint32_t)c0) ^ (uint32_t)c1;
            c0 = pf_shift(pf_long, (uint32_t)c0) ^ (uint32_t)c2;
            p += 2 * PF_LONG;
            n -= 3 * PF_LONG;
        }
        while (n >= 3 * PF_SHORT) {
            c1 = c2 = 0;
            end = p + PF_SHORT;
            do {
                memcpy(&w0, p, 8);
                memcpy(&w1, p + PF_SHORT, 8);
                memcpy(&w2, p + 2 * PF_SHORT, 8);
                c0 = _mm_crc32_u64(c0, w0);
                c1 = _mm_crc32_u64(c1, w1);
                c2 = _mm_crc32_u64(c2, w2);
                p += 8;
            } while (p < end);
            c0 = pf_shift(pf_short, (uint32_t)c0) ^ (uint32_t)c1;
            c0 = pf_shift(pf_short, (uint32_t)c0) ^ (uint32_t)c2;
            p += 2 * PF_SHORT;
            n -= 3 * PF_SHORT;
        }
        while (n >= 8) {
            memcpy(&w0, p, 8);
            c0 = _mm_crc32_u64(c0, w0);
            p += 8;
            n -= 8;
        }
        crc = (uint32_t)c0;
        while (n--) crc = _mm_crc32_u8(crc, *p++);
        return crc;
    }
    #else
    #define PF_HW 0
    static uint32_t pf_crc_hw(uint32_t crc, const unsigned char *p, size_t n) {
        return pf_crc_sw(crc, p, n);
    }
    #endif

    static void pf_crc_init(void) {
        uint32_t n, c;
        int k;
        for (n = 0; n < 256; n++) {
            c = n;
            for (k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ PF_POLY : c >> 1;
            pf_table[0][n] = c;
        }
        for (n = 0; n < 256; n++) {
            c = pf_table[0][n];
            for (k = 1; k < 8; k++) {
                c = pf_table[0][c & 0xFF] ^ (c >> 8);
                pf_table[k][n] = c;
            }
        }
    #if PF_HW
        __builtin_cpu_init();
        if (__builtin_cpu_supports("sse4.2")) {
            pf_zeros(pf_long, PF_LONG);
            pf_zeros(pf_short, PF_SHORT);
            pf_have_hw = 1;
        }
    #endif
    }

    /* The register after n bytes at p. */
    static inline uint32_t pf_crc(uint32_t crc, const unsigned char *p, size_t n) {
        return pf_have_hw ? pf_crc_hw(crc, p, n) : pf_crc_sw(crc, p, n);
    }
    """
    void pf_crc_init() noexcept
    uint32_t pf_crc(uint32_t crc, const unsigned char* p, size_t n) noexcept nogil
    uint32_t pf_crc_sw(uint32_t crc, const unsigned char* p, size_t n) noexcept nogil
    int pf_have_hw

pf_crc_init()

#: the two bytes before a payload frame's checksum
MAGIC_CRC32C = 0x0E01
#: 5 MiB of message plus the broker's padding for the command and metadata
DEFAULT_MAX_FRAME_SIZE = 5 * 1024 * 1024 + 10 * 1024

WIRE_VARINT = 0
WIRE_FIXED64 = 1
WIRE_BYTES = 2
WIRE_FIXED32 = 5

Frame = tuple  # (command: bytes, metadata: bytes | None, payload: bytes | None, checksum_ok: bool)

#: whether crc32c() runs on the CPU's crc32 instruction (else slice-by-8 tables)
CRC32C_HARDWARE = bool(pf_have_hw)

__all__ = [
    "MAGIC_CRC32C", "DEFAULT_MAX_FRAME_SIZE", "WIRE_VARINT", "WIRE_FIXED64", "WIRE_BYTES", "WIRE_FIXED32",
    "crc32c", "varint", "read_fields", "encode_simple", "encode_payload", "FrameDecoder", "split_batch",
    "encode_batch_entry",
]

cdef enum:
    _MAGIC_HI = 0x0E
    _MAGIC_LO = 0x01

# crc32c() releases the GIL for buffers at least this long
cdef Py_ssize_t _NOGIL_CRC = 32768
# the decoder keeps at most this much buffer capacity between frames
cdef Py_ssize_t _KEEP_CAP = 65536
# a frame size the decoder can index on this platform (a larger limit is clamped)
cdef uint64_t _SIZE_CAP = min(0xFFFFFFFF, sys.maxsize - 8)
# (large literals in C expressions would be Python ints: these keep the arithmetic in C)
cdef uint32_t _ONES = 0xFFFFFFFF
cdef uint64_t _U32_MAX = 0xFFFFFFFF
cdef uint64_t _BODY_LIMIT = 0x80000000  # a payload_size is an int32
_U32_RANGE = "'I' format requires 0 <= number <= 4294967295"
_BROKEN = "the frame stream broke earlier; the connection must be closed"
_REENTERED = "FrameDecoder.feed() called while another feed() is running"


cdef inline uint32_t _u32(const unsigned char* p) noexcept nogil:
    return ((<uint32_t>p[0]) << 24) | ((<uint32_t>p[1]) << 16) | ((<uint32_t>p[2]) << 8) | p[3]


cdef inline void _put_u32(unsigned char* p, uint32_t v) noexcept nogil:
    p[0] = <unsigned char>(v >> 24)
    p[1] = <unsigned char>(v >> 16)
    p[2] = <unsigned char>(v >> 8)
    p[3] = <unsigned char>v


cdef inline object _bytes_like(object data):
    """An object whose simple buffer holds exactly bytes(data)."""
    if type(data) is bytes or type(data) is bytearray:
        return data
    if type(data) is memoryview and data.c_contiguous:
        return data
    return bytes(data)


cdef inline object _sized(object data):
    """The same, for a length prefix: len() first, so that what has none (an int) is
    refused as the twin refuses it; the length written is the byte count."""
    if type(data) is bytes or type(data) is bytearray:
        return data
    len(data)
    return _bytes_like(data)


# -- crc32c ---------------------------------------------------------------------------------


cdef inline uint32_t _register(object value) except? 0:
    """The crc register continuing from value: (value ^ 0xFFFFFFFF) & 0xFFFFFFFF."""
    if type(value) is int:
        return (<uint32_t>PyLong_AsUnsignedLongLongMask(value)) ^ _ONES
    return (value ^ 0xFFFFFFFF) & 0xFFFFFFFF


def crc32c(data, value=0) -> int:
    """CRC-32C of data, continuing from value (the crc of what came before)."""
    cdef Py_buffer view
    data = _bytes_like(data)
    cdef uint32_t crc = _register(value)
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        if view.len >= _NOGIL_CRC:
            with nogil:
                crc = pf_crc(crc, <const unsigned char*>view.buf, <size_t>view.len)
        else:
            crc = pf_crc(crc, <const unsigned char*>view.buf, <size_t>view.len)
    finally:
        PyBuffer_Release(&view)
    return crc ^ _ONES


def _crc32c_software(data, value=0) -> int:
    """crc32c() on the slice-by-8 tables whatever the CPU has (for the tests)."""
    cdef Py_buffer view
    data = _bytes_like(data)
    cdef uint32_t crc = _register(value)
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        crc = pf_crc_sw(crc, <const unsigned char*>view.buf, <size_t>view.len)
    finally:
        PyBuffer_Release(&view)
    return crc ^ _ONES


# -- protobuf primitives --------------------------------------------------------------------


def _varint_object(value):
    """varint() of what is not a plain int of at most 64 bits (the twin's code)."""
    if value < 0:
        value &= 0xFFFFFFFFFFFFFFFF
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def varint(value) -> bytes:
    """A varint of value (negative values as 64-bit two's complement, as protobuf does)."""
    cdef uint64_t v
    cdef unsigned char out[10]
    cdef int n = 0
    if type(value) is not int:
        return _varint_object(value)
    if value < 0:
        v = PyLong_AsUnsignedLongLongMask(value)
    elif value <= 0xFFFFFFFFFFFFFFFF:
        v = value
    else:
        return _varint_object(value)
    while v >= 0x80:
        out[n] = <unsigned char>((v & 0x7F) | 0x80)
        v >>= 7
        n += 1
    out[n] = <unsigned char>v
    return PyBytes_FromStringAndSize(<char*>out, n + 1)


cdef Py_ssize_t _varint(const unsigned char* p, Py_ssize_t pos, Py_ssize_t end, uint64_t* out) except -1:
    """Read the varint at p[pos:end] into out; return the position after it."""
    cdef uint64_t result = 0
    cdef unsigned int shift = 0
    cdef unsigned char byte
    while True:
        if pos >= end:
            raise ProtocolError("protobuf varint is cut short")
        byte = p[pos]
        pos += 1
        result |= (<uint64_t>(byte & 0x7F)) << shift
        if not byte & 0x80:
            out[0] = result
            return pos
        shift += 7
        if shift >= 70:
            raise ProtocolError("protobuf varint is longer than 10 bytes")


cdef Py_ssize_t _field(const unsigned char* p, Py_ssize_t pos, Py_ssize_t end,
                       uint64_t* number, unsigned int* kind, uint64_t* value) except -1:
    """Read the field at p[pos:end]: its number, wire type and value (the size of a
    length-delimited one, whose bytes end at the position returned)."""
    cdef uint64_t key
    if p[pos] < 0x80:  # a one-byte key: fields 1 to 15
        key = p[pos]
        pos += 1
    else:
        pos = _varint(p, pos, end, &key)
    number[0] = key >> 3
    kind[0] = key & 7
    if number[0] == 0:
        raise ProtocolError("protobuf field number 0")
    if kind[0] == WIRE_VARINT:
        if pos < end and p[pos] < 0x80:
            value[0] = p[pos]
            return pos + 1
        return _varint(p, pos, end, value)
    if kind[0] == WIRE_BYTES:
        pos = _varint(p, pos, end, value)
        if value[0] > <uint64_t>(end - pos):
            raise ProtocolError("protobuf field %d runs past its message (%d bytes)" % (number[0], value[0]))
        return pos + <Py_ssize_t>value[0]
    if kind[0] == WIRE_FIXED64:
        if end - pos < 8:
            raise ProtocolError("protobuf fixed64 field %d is cut short" % number[0])
        value[0] = ((<uint64_t>p[pos]) | (<uint64_t>p[pos + 1] << 8) | (<uint64_t>p[pos + 2] << 16)
                    | (<uint64_t>p[pos + 3] << 24) | (<uint64_t>p[pos + 4] << 32) | (<uint64_t>p[pos + 5] << 40)
                    | (<uint64_t>p[pos + 6] << 48) | (<uint64_t>p[pos + 7] << 56))
        return pos + 8
    if kind[0] == WIRE_FIXED32:
        if end - pos < 4:
            raise ProtocolError("protobuf fixed32 field %d is cut short" % number[0])
        value[0] = ((<uint64_t>p[pos]) | (<uint64_t>p[pos + 1] << 8) | (<uint64_t>p[pos + 2] << 16)
                    | (<uint64_t>p[pos + 3] << 24))
        return pos + 4
    raise ProtocolError("protobuf wire type %d (field %d) is not supported" % (kind[0], number[0]))


cdef list _read_fields(const unsigned char* p, Py_ssize_t end):
    cdef list out = []
    cdef Py_ssize_t pos = 0, after
    cdef uint64_t number, value
    cdef unsigned int kind
    while pos < end:
        after = _field(p, pos, end, &number, &kind, &value)
        out.append(number)
        if kind == WIRE_BYTES:
            out.append(PyBytes_FromStringAndSize(<const char*>p + after - <Py_ssize_t>value, <Py_ssize_t>value))
        else:
            out.append(value)
        pos = after
    return out


def read_fields(data) -> list:
    """The fields of one serialized protobuf message, in wire order:
    ``[number, value, number, value, ...]``."""
    cdef Py_buffer view
    data = _bytes_like(data)
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        return _read_fields(<const unsigned char*>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)


# -- frames ---------------------------------------------------------------------------------


def encode_simple(command) -> bytes:
    """A frame holding one serialized BaseCommand."""
    cdef Py_buffer view
    cdef unsigned char* w
    command = _sized(command)
    PyObject_GetBuffer(command, &view, PyBUF_SIMPLE)
    try:
        if <uint64_t>view.len + 4 > _U32_MAX:
            raise struct.error(_U32_RANGE)
        out = PyBytes_FromStringAndSize(NULL, 8 + view.len)
        w = <unsigned char*>PyBytes_AS_STRING(out)
        _put_u32(w, <uint32_t>(view.len + 4))
        _put_u32(w + 4, <uint32_t>view.len)
        memcpy(w + 8, view.buf, view.len)
    finally:
        PyBuffer_Release(&view)
    return out


def encode_payload(command, metadata, payload) -> bytes:
    """A payload frame: the command, then magic, crc32c, metadata size, metadata and payload."""
    cdef Py_buffer c, m, b
    cdef unsigned char* w
    cdef unsigned char* checked
    cdef uint64_t checked_size, total
    command = _sized(command)
    metadata = _sized(metadata)
    payload = _bytes_like(payload)
    PyObject_GetBuffer(command, &c, PyBUF_SIMPLE)
    try:
        PyObject_GetBuffer(metadata, &m, PyBUF_SIMPLE)
        try:
            PyObject_GetBuffer(payload, &b, PyBUF_SIMPLE)
            try:
                checked_size = 4 + <uint64_t>m.len + <uint64_t>b.len
                total = 4 + <uint64_t>c.len + 2 + 4 + checked_size
                if <uint64_t>m.len > _U32_MAX or total > _U32_MAX:
                    raise struct.error(_U32_RANGE)
                out = PyBytes_FromStringAndSize(NULL, <Py_ssize_t>(4 + total))
                w = <unsigned char*>PyBytes_AS_STRING(out)
                _put_u32(w, <uint32_t>total)
                _put_u32(w + 4, <uint32_t>c.len)
                memcpy(w + 8, c.buf, c.len)
                w += 8 + c.len
                w[0] = _MAGIC_HI
                w[1] = _MAGIC_LO
                checked = w + 6
                _put_u32(checked, <uint32_t>m.len)
                memcpy(checked + 4, m.buf, m.len)
                memcpy(checked + 4 + m.len, b.buf, b.len)
                _put_u32(w + 2, pf_crc(_ONES, checked, <size_t>checked_size) ^ _ONES)
            finally:
                PyBuffer_Release(&b)
        finally:
            PyBuffer_Release(&m)
    finally:
        PyBuffer_Release(&c)
    return out


cdef tuple _split_frame(const unsigned char* p, Py_ssize_t end):
    """The frame whose bytes after its total size are p[:end] (end >= 4)."""
    cdef uint32_t command_size = _u32(p)
    cdef Py_ssize_t pos, metadata_size
    cdef bint checksum_ok = True
    cdef uint32_t expected
    if <Py_ssize_t>command_size > end - 4:
        raise ProtocolError("command of %d bytes runs past its frame" % command_size)
    pos = 4 + <Py_ssize_t>command_size
    command = PyBytes_FromStringAndSize(<const char*>p + 4, command_size)
    if pos == end:
        return (command, None, None, True)
    if end - pos >= 2 and p[pos] == _MAGIC_HI and p[pos + 1] == _MAGIC_LO:
        if end - pos < 6:
            raise ProtocolError("payload frame is cut short in its checksum")
        expected = _u32(p + pos + 2)
        pos += 6
        checksum_ok = (pf_crc(_ONES, p + pos, <size_t>(end - pos)) ^ _ONES) == expected
    if end - pos < 4:
        raise ProtocolError("payload frame is cut short in its metadata size")
    metadata_size = _u32(p + pos)
    pos += 4
    if metadata_size > end - pos:
        raise ProtocolError("metadata of %d bytes runs past its frame" % metadata_size)
    metadata = PyBytes_FromStringAndSize(<const char*>p + pos, metadata_size)
    pos += metadata_size
    payload = PyBytes_FromStringAndSize(<const char*>p + pos, end - pos)
    return (command, metadata, payload, checksum_ok)


cdef class FrameDecoder:
    """Splits a byte stream into frames (see the module docstring).

    After a ProtocolError every later feed() raises ProtocolError: the
    stream cannot be resynchronised.
    """

    cdef unsigned char* _buf   # the start of the one unfinished frame
    cdef Py_ssize_t _len       # bytes held in _buf
    cdef Py_ssize_t _cap       # bytes allocated for _buf
    cdef Py_ssize_t _need      # bytes the unfinished frame needs: 4, or its whole length once known
    cdef uint64_t _max         # max_frame_size, clamped to what can be indexed
    cdef object _max_obj
    cdef bint _broken
    cdef bint _busy            # in feed(): a second one (another thread, a finalizer) must not move _buf

    def __cinit__(self):
        self._need = 4
        self._max = DEFAULT_MAX_FRAME_SIZE
        self._max_obj = DEFAULT_MAX_FRAME_SIZE

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.max_frame_size = max_frame_size
        self._len = 0
        self._need = 4
        self._broken = False

    def __dealloc__(self):
        PyMem_Free(self._buf)

    @property
    def max_frame_size(self) -> int:
        return self._max_obj

    @max_frame_size.setter
    def max_frame_size(self, max_frame_size) -> None:
        if not isinstance(max_frame_size, int) or max_frame_size < 8:
            raise ProtocolError("max_frame_size must be an int of at least 8, not %r" % (max_frame_size,))
        self._max = <uint64_t>min(max_frame_size, _SIZE_CAP)
        self._max_obj = max_frame_size

    def pending_bytes(self) -> int:
        """Bytes held back: the start of a frame not complete yet."""
        return self._len

    def feed(self, data) -> list:
        cdef Py_buffer view
        cdef list frames = []
        cdef Py_ssize_t held = self._len
        if self._broken:
            raise ProtocolError(_BROKEN)
        if self._busy:
            raise RuntimeError(_REENTERED)
        try:
            PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        except Exception:
            raise TypeError("can't concat %s to bytearray" % type(data).__name__) from None
        self._busy = True
        try:
            if view.len:
                self._feed(<const unsigned char*>view.buf, view.len, frames)
        except ProtocolError:
            # Broken for good; pending_bytes() counts what was fed, as the twin's does.
            self._broken = True
            PyMem_Free(self._buf)
            self._buf = NULL
            self._cap = 0
            self._len = held + view.len
            raise
        finally:
            self._busy = False
            PyBuffer_Release(&view)
        return frames

    cdef int _feed(self, const unsigned char* p, Py_ssize_t n, list frames) except -1:
        cdef Py_ssize_t off = 0, k
        if self._len:
            # Finish the held frame with just the bytes it needs, then parse the rest
            # straight from the caller's buffer.
            if self._len < 4:
                k = 4 - self._len
                if k > n:
                    k = n
                self._append(p, k)
                off = k
                if self._len < 4:
                    return 0
                self._need = 4 + self._check(_u32(self._buf))
            k = self._need - self._len
            if k > n - off:
                k = n - off
            self._append(p + off, k)
            off += k
            if self._len < self._need:
                return 0
            frames.append(_split_frame(self._buf + 4, self._len - 4))
            self._len = 0
            self._need = 4
            if self._cap > _KEEP_CAP:
                PyMem_Free(self._buf)
                self._buf = NULL
                self._cap = 0
        off += self._parse(p + off, n - off, frames)
        if off < n:
            self._append(p + off, n - off)
        return 0

    cdef inline Py_ssize_t _check(self, uint32_t total) except -1:
        if total > self._max:
            raise ProtocolError("frame of %d bytes is larger than the limit (%d)" % (total, self._max_obj))
        if total < 4:
            raise ProtocolError("frame size %d cannot hold a command size" % total)
        return total

    cdef Py_ssize_t _parse(self, const unsigned char* p, Py_ssize_t n, list frames) except -1:
        """Append the complete frames at the start of p[:n]; return their length
        (and set _need for what is left)."""
        cdef Py_ssize_t pos = 0, total
        while True:
            if n - pos < 4:
                self._need = 4
                return pos
            total = self._check(_u32(p + pos))
            if n - pos - 4 < total:
                self._need = 4 + total
                return pos
            frames.append(_split_frame(p + pos + 4, total))
            pos += 4 + total

    cdef int _append(self, const unsigned char* p, Py_ssize_t k) except -1:
        """Copy k bytes to the buffer, growing it geometrically up to the frame's length."""
        cdef Py_ssize_t want = self._len + k, cap
        cdef unsigned char* grown
        if want > self._cap:
            cap = self._cap * 2
            if cap < 256:
                cap = 256
            if cap > self._need:
                cap = self._need
            if cap < want:
                cap = want
            grown = <unsigned char*>PyMem_Realloc(self._buf, cap)
            if grown == NULL:
                raise MemoryError()
            self._buf = grown
            self._cap = cap
        memcpy(self._buf + self._len, p, k)
        self._len = want
        return 0


# -- batches --------------------------------------------------------------------------------


def split_batch(payload, count) -> list:
    """The ``count`` entries of a batch payload, each ``(single_metadata, body)``:
    ``[4-byte size][SingleMessageMetadata][body of its payload_size]`` repeated."""
    cdef Py_buffer view
    cdef const unsigned char* p
    cdef Py_ssize_t end, pos = 0, index, entries_count, size, field_pos, field_end
    cdef uint64_t number, value, body_size
    cdef unsigned int kind
    cdef bint has_size
    cdef list entries = []
    payload = _bytes_like(payload)
    if count < 0:
        raise ProtocolError("a batch cannot hold %d messages" % count)
    wanted = operator.index(count)
    PyObject_GetBuffer(payload, &view, PyBUF_SIMPLE)
    try:
        p = <const unsigned char*>view.buf
        end = view.len
        # Every entry takes at least 4 bytes: a larger count fails on the same entry.
        entries_count = min(wanted, end // 4 + 1)
        for index in range(entries_count):
            if end - pos < 4:
                raise ProtocolError("batch entry %d of %d is cut short in its metadata size" % (index, count))
            size = _u32(p + pos)
            pos += 4
            if size > end - pos:
                raise ProtocolError("batch entry %d's metadata of %d bytes runs past the payload" % (index, size))
            field_pos = pos
            field_end = pos + size
            has_size = False
            body_size = 0
            while field_pos < field_end:
                field_pos = _field(p, field_pos, field_end, &number, &kind, &value)
                if number == 3:  # SingleMessageMetadata.payload_size (a length-delimited one is not)
                    has_size = kind != WIRE_BYTES
                    body_size = value
            if not has_size or body_size >= _BODY_LIMIT:
                raise ProtocolError("batch entry %d has no valid payload_size" % index)
            if <Py_ssize_t>body_size > end - field_end:
                raise ProtocolError("batch entry %d's body of %d bytes runs past the payload" % (index, body_size))
            entries.append((
                PyBytes_FromStringAndSize(<const char*>p + pos, size),
                PyBytes_FromStringAndSize(<const char*>p + field_end, <Py_ssize_t>body_size),
            ))
            pos = field_end + <Py_ssize_t>body_size
    finally:
        PyBuffer_Release(&view)
    return entries


def encode_batch_entry(single_metadata, body) -> bytes:
    """One batch entry: its metadata's size, the metadata, the body."""
    cdef Py_buffer m, b
    cdef unsigned char* w
    single_metadata = _sized(single_metadata)
    body = _bytes_like(body)
    PyObject_GetBuffer(single_metadata, &m, PyBUF_SIMPLE)
    try:
        PyObject_GetBuffer(body, &b, PyBUF_SIMPLE)
        try:
            if <uint64_t>m.len > _U32_MAX:
                raise struct.error(_U32_RANGE)
            out = PyBytes_FromStringAndSize(NULL, 4 + m.len + b.len)
            w = <unsigned char*>PyBytes_AS_STRING(out)
            _put_u32(w, <uint32_t>m.len)
            memcpy(w + 4, m.buf, m.len)
            memcpy(w + 4 + m.len, b.buf, b.len)
        finally:
            PyBuffer_Release(&b)
    finally:
        PyBuffer_Release(&m)
    return out
