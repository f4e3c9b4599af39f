# cython: language_level=3, annotation_typing=False
"""The Pulsar wire codec, compiled: the hot-path twin of ``_codec_py.py``.

It owns the byte level under the protobuf messages, with the same names,
signatures and behaviour as the pure-Python reference (``pulsarfast.wire.codec``
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
  entries;
- the hot paths ``encode_send_frame`` (one SEND frame, command and metadata
  written in place), ``decode_message`` (a MESSAGE command and its metadata
  into one flat tuple), ``decode_single_metadata`` and ``split_batch_decoded``,
  parsed over C pointers with no intermediate field lists.

Malformed input raises ``pulsarfast.base.results.ProtocolError``, for the same
inputs as the pure twin (messages may differ).
"""
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.list cimport PyList_AsTuple, PyList_GET_ITEM
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_AsUnsignedLongLong, PyLong_AsUnsignedLongLongMask
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int64_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy

from msgengine._buffer cimport Reassembly, reassembly_append, reassembly_clear, reassembly_free

import operator
import struct
import sys

from pulsarfast.base.results import ProtocolError

cdef extern from "Python.h":
    void PyObject_GC_UnTrack(void* op)

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
    "encode_batch_entry", "encode_send_frame", "decode_message", "decode_single_metadata", "split_batch_decoded",
    "GENERIC_METADATA_FIELDS",
]

cdef enum:
    _MAGIC_HI = 0x0E
    _MAGIC_LO = 0x01
    # the wire types as C constants (the WIRE_* names above are module globals)
    _W_VARINT = 0
    _W_FIXED64 = 1
    _W_BYTES = 2
    _W_FIXED32 = 5

# crc32c() releases the GIL for buffers at least this long
cdef Py_ssize_t _NOGIL_CRC = 32768
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
    if kind[0] == _W_VARINT:
        if pos < end and p[pos] < 0x80:
            value[0] = p[pos]
            return pos + 1
        return _varint(p, pos, end, value)
    if kind[0] == _W_BYTES:
        pos = _varint(p, pos, end, value)
        if value[0] > <uint64_t>(end - pos):
            raise ProtocolError("protobuf field %d runs past its message (%d bytes)" % (number[0], value[0]))
        return pos + <Py_ssize_t>value[0]
    if kind[0] == _W_FIXED64:
        if end - pos < 8:
            raise ProtocolError("protobuf fixed64 field %d is cut short" % number[0])
        value[0] = ((<uint64_t>p[pos]) | (<uint64_t>p[pos + 1] << 8) | (<uint64_t>p[pos + 2] << 16)
                    | (<uint64_t>p[pos + 3] << 24) | (<uint64_t>p[pos + 4] << 32) | (<uint64_t>p[pos + 5] << 40)
                    | (<uint64_t>p[pos + 6] << 48) | (<uint64_t>p[pos + 7] << 56))
        return pos + 8
    if kind[0] == _W_FIXED32:
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
        if kind == _W_BYTES:
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

    cdef Reassembly _held      # the one unfinished frame; .need: 4, or its whole length once known
    cdef uint64_t _max         # max_frame_size, clamped to what can be indexed
    cdef object _max_obj
    cdef bint _broken
    cdef bint _busy            # in feed(): a second one (another thread, a finalizer) must not move _held

    def __cinit__(self):
        self._held.need = 4
        self._max = DEFAULT_MAX_FRAME_SIZE
        self._max_obj = DEFAULT_MAX_FRAME_SIZE

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.max_frame_size = max_frame_size
        self._held.len = 0
        self._held.need = 4
        self._broken = False

    def __dealloc__(self):
        reassembly_free(&self._held)

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
        return self._held.len

    def feed(self, data) -> list:
        cdef Py_buffer view
        cdef list frames = []
        cdef Py_ssize_t held = self._held.len
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
            reassembly_free(&self._held)
            self._held.len = held + view.len
            raise
        finally:
            self._busy = False
            PyBuffer_Release(&view)
        return frames

    cdef int _feed(self, const unsigned char* p, Py_ssize_t n, list frames) except -1:
        cdef Py_ssize_t off = 0, k
        cdef Reassembly* held = &self._held
        if held.len:
            # Finish the held frame with just the bytes it needs, then parse the rest
            # straight from the caller's buffer.
            if held.len < 4:
                k = 4 - held.len
                if k > n:
                    k = n
                reassembly_append(held, p, k)
                off = k
                if held.len < 4:
                    return 0
                held.need = 4 + self._check(_u32(held.data))
            k = held.need - held.len
            if k > n - off:
                k = n - off
            reassembly_append(held, p + off, k)
            off += k
            if held.len < held.need:
                return 0
            frames.append(_split_frame(held.data + 4, held.len - 4))
            reassembly_clear(held)
            held.need = 4
        off += self._parse(p + off, n - off, frames)
        if off < n:
            reassembly_append(held, p + off, n - off)
        return 0

    cdef inline Py_ssize_t _check(self, uint32_t total) except -1:
        if total > self._max:
            raise ProtocolError("frame of %d bytes is larger than the limit (%d)" % (total, self._max_obj))
        if total < 4:
            raise ProtocolError("frame size %d cannot hold a command size" % total)
        return total

    cdef Py_ssize_t _parse(self, const unsigned char* p, Py_ssize_t n, list frames) except -1:
        """Append the complete frames at the start of p[:n]; return their length
        (and set _held.need for what is left)."""
        cdef Py_ssize_t pos = 0, total
        while True:
            if n - pos < 4:
                self._held.need = 4
                return pos
            total = self._check(_u32(p + pos))
            if n - pos - 4 < total:
                self._held.need = 4 + total
                return pos
            frames.append(_split_frame(p + pos + 4, total))
            pos += 4 + total


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
                    has_size = kind != _W_BYTES
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



# -- the hot paths: one SEND frame, one MESSAGE, one batch entry ------------------------------
#
# What the producer and the consumer do per message, without the generic
# encoder/decoder of pulsarfast.wire.proto in between (same bytes, same values).

#: MessageMetadata fields that need the generic decoder whenever present (see _wire_py)
GENERIC_METADATA_FIELDS = frozenset((13, 14, 15, 22, 23, 27, 28, 29))

cdef bytes _EMPTY_BYTES = b""
cdef str _EMPTY_STR = ""


cdef inline int _vlen(uint64_t v) noexcept nogil:
    """The length of v's varint."""
    cdef int n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


cdef inline unsigned char* _put_varint(unsigned char* w, uint64_t v) noexcept nogil:
    while v >= 0x80:
        w[0] = <unsigned char>((v & 0x7F) | 0x80)
        v >>= 7
        w += 1
    w[0] = <unsigned char>v
    return w + 1


cdef inline unsigned char* _put_lv(unsigned char* w, unsigned char key, bytes data) noexcept:
    """A length-delimited field: its key, the varint size, the bytes."""
    cdef Py_ssize_t n = len(data)
    w[0] = key
    w = _put_varint(w + 1, <uint64_t>n)
    memcpy(w, PyBytes_AS_STRING(data), n)
    return w + n


cdef inline Py_ssize_t _lv_size(Py_ssize_t n) noexcept:
    """The bytes of a length-delimited field of n bytes with a one-byte key."""
    return 1 + _vlen(<uint64_t>n) + n


cdef int _uint64(object value, uint64_t* out) except -1:
    """value as the uint64 protobuf writes (a negative int64 as two's complement);
    OverflowError outside -2**63 .. 2**64-1, TypeError for what is not an integer."""
    cdef int overflow = 0
    cdef long long signed_value
    if type(value) is not int:
        value = operator.index(value)
    signed_value = PyLong_AsLongLongAndOverflow(value, &overflow)
    if overflow == 0:
        out[0] = <uint64_t>signed_value
    elif overflow > 0:
        out[0] = PyLong_AsUnsignedLongLong(value)  # OverflowError past 2**64-1
    else:
        raise OverflowError("%d does not fit in 64 bits" % value)
    return 0


cdef inline bytes _buffer(object data):
    """The bytes of a bytes-like object (str, int and the like are refused: TypeError)."""
    if type(data) is bytes:
        return <bytes>data
    return memoryview(data).tobytes()


cdef inline bint _inert(object data) noexcept:
    """Whether _sized() / _bytes_like() and the buffer of data run no Python code."""
    return type(data) is bytes or type(data) is bytearray or type(data) is memoryview


cdef inline bint _exact_pair(object item) noexcept:
    return (type(item) is tuple and PyTuple_GET_SIZE(item) == 2
            and type(<object>PyTuple_GET_ITEM(item, 0)) is bytes
            and type(<object>PyTuple_GET_ITEM(item, 1)) is bytes)


def encode_send_frame(producer_id, sequence_id, producer_name, publish_time, payload, properties=None,
                      partition_key=None, event_time=0, extra_metadata=b"", num_messages=1,
                      highest_sequence_id=None) -> bytes:
    """The payload frame of one SEND: ``BaseCommand{type: SEND, send: CommandSend{producer_id,
    sequence_id, num_messages (when not 1), highest_sequence_id (when not None)}}``, then magic, crc32c, and ``MessageMetadata{
    producer_name, sequence_id, publish_time, properties, partition_key (when not None),
    event_time (when not 0)}`` followed by extra_metadata (more serialized MessageMetadata
    fields, appended as they are), then payload.

    The same bytes as ``encode_payload(proto.send(...), proto.message_metadata(...) +
    extra_metadata, payload)``. producer_name, the property keys and values and
    partition_key are bytes-like (UTF-8 already); properties is None or an iterable of
    ``(key, value)`` pairs (a dict gives its items). The integers must fit in 64 bits
    (negative ones are written as int64): else OverflowError.
    """
    cdef uint64_t pid, seq, count, ptime, etime, high = 0, body_size, meta_size, cmd_size, total, checked_size
    cdef bint has_high = highest_sequence_id is not None
    cdef Py_ssize_t i, npairs = 0, pair_size
    cdef bytes name, key, value, pkey = None
    cdef object pairs = None   # a list or tuple of (bytes, bytes) tuples, or a flat list [k, v, ...] of bytes
    cdef bint flat = False
    cdef Py_buffer e, b
    cdef unsigned char* w
    cdef unsigned char* crc_at
    cdef unsigned char* checked
    _uint64(producer_id, &pid)
    _uint64(sequence_id, &seq)
    _uint64(num_messages, &count)
    _uint64(publish_time, &ptime)
    _uint64(event_time, &etime)
    if has_high:
        _uint64(highest_sequence_id, &high)
    name = _buffer(producer_name)
    if properties is not None:
        if isinstance(properties, dict):
            properties = properties.items()
        if type(properties) is list or type(properties) is tuple:
            npairs = len(properties)
            for i in range(npairs):
                if not _exact_pair(properties[i]):
                    break
            else:
                pairs = properties
                if type(properties) is list and not (_inert(extra_metadata) and _inert(payload)):
                    # converting extra_metadata or payload below could run code that changes the list
                    pairs = PyList_AsTuple(properties)
        if pairs is None:
            # what is not a sequence of (bytes, bytes): unpacked pair by pair, as the twin does
            pairs = []
            for item in properties:
                k, v = item
                pairs.append(_buffer(k))
                pairs.append(_buffer(v))
            npairs = len(pairs) // 2
            flat = True
    if partition_key is not None:
        pkey = _buffer(partition_key)
    extra = _sized(extra_metadata)
    payload = _bytes_like(payload)

    body_size = 2 + _vlen(pid) + _vlen(seq)
    if count != 1:
        body_size += 1 + _vlen(count)
    if has_high:
        body_size += 1 + _vlen(high)
    cmd_size = 3 + _vlen(body_size) + body_size
    meta_size = _lv_size(len(name)) + 2 + _vlen(seq) + _vlen(ptime)
    for i in range(npairs):
        if flat:
            key = <bytes><object>PyList_GET_ITEM(pairs, 2 * i)
            value = <bytes><object>PyList_GET_ITEM(pairs, 2 * i + 1)
        else:
            item = pairs[i]
            key = <bytes><object>PyTuple_GET_ITEM(item, 0)
            value = <bytes><object>PyTuple_GET_ITEM(item, 1)
        pair_size = _lv_size(len(key)) + _lv_size(len(value))
        meta_size += _lv_size(pair_size)
    if pkey is not None:
        meta_size += _lv_size(len(pkey))
    if etime:
        meta_size += 1 + _vlen(etime)
    PyObject_GetBuffer(extra, &e, PyBUF_SIMPLE)
    try:
        PyObject_GetBuffer(payload, &b, PyBUF_SIMPLE)
        try:
            meta_size += <uint64_t>e.len
            checked_size = 4 + meta_size + <uint64_t>b.len
            total = 4 + cmd_size + 2 + 4 + checked_size
            if meta_size > _U32_MAX or total > _U32_MAX:
                raise struct.error(_U32_RANGE)
            out = PyBytes_FromStringAndSize(NULL, <Py_ssize_t>(4 + total))
            w = <unsigned char*>PyBytes_AS_STRING(out)
            _put_u32(w, <uint32_t>total)
            _put_u32(w + 4, <uint32_t>cmd_size)
            w[8] = 0x08   # BaseCommand.type = SEND
            w[9] = 0x06
            w[10] = 0x32  # BaseCommand.send
            w = _put_varint(w + 11, body_size)
            w[0] = 0x08   # CommandSend.producer_id
            w = _put_varint(w + 1, pid)
            w[0] = 0x10   # CommandSend.sequence_id
            w = _put_varint(w + 1, seq)
            if count != 1:
                w[0] = 0x18  # CommandSend.num_messages
                w = _put_varint(w + 1, count)
            if has_high:
                w[0] = 0x30  # CommandSend.highest_sequence_id
                w = _put_varint(w + 1, high)
            w[0] = _MAGIC_HI
            w[1] = _MAGIC_LO
            crc_at = w + 2
            checked = w + 6
            _put_u32(checked, <uint32_t>meta_size)
            w = _put_lv(checked + 4, 0x0A, name)  # MessageMetadata.producer_name
            w[0] = 0x10  # sequence_id
            w = _put_varint(w + 1, seq)
            w[0] = 0x18  # publish_time
            w = _put_varint(w + 1, ptime)
            for i in range(npairs):
                if flat:
                    key = <bytes><object>PyList_GET_ITEM(pairs, 2 * i)
                    value = <bytes><object>PyList_GET_ITEM(pairs, 2 * i + 1)
                else:
                    item = pairs[i]
                    key = <bytes><object>PyTuple_GET_ITEM(item, 0)
                    value = <bytes><object>PyTuple_GET_ITEM(item, 1)
                pair_size = _lv_size(len(key)) + _lv_size(len(value))
                w[0] = 0x22  # properties: KeyValue{key = 1; value = 2}
                w = _put_varint(w + 1, <uint64_t>pair_size)
                w = _put_lv(w, 0x0A, key)
                w = _put_lv(w, 0x12, value)
            if pkey is not None:
                w = _put_lv(w, 0x32, pkey)  # partition_key
            if etime:
                w[0] = 0x60  # event_time
                w = _put_varint(w + 1, etime)
            memcpy(w, e.buf, e.len)
            memcpy(w + e.len, b.buf, b.len)
            _put_u32(crc_at, pf_crc(_ONES, checked, <size_t>checked_size) ^ _ONES)
        finally:
            PyBuffer_Release(&b)
    finally:
        PyBuffer_Release(&e)
    return out


cdef int _wrong(str what) except -1:
    raise ProtocolError(what)


cdef inline int _number(unsigned int kind, str what) except -1:
    """A numeric field (varint, fixed64 or fixed32) must not be length-delimited."""
    if kind == _W_BYTES:
        _wrong(what + ": expected a number")
    return 0


cdef inline int _length(unsigned int kind, str what) except -1:
    if kind != _W_BYTES:
        _wrong(what + ": expected a length-delimited field")
    return 0


cdef object _text(const unsigned char* p, Py_ssize_t n, str what):
    """p[:n] decoded from UTF-8 (ProtocolError if it is not)."""
    try:
        return PyUnicode_DecodeUTF8(<char*>p, n, NULL)
    except UnicodeDecodeError:
        raise ProtocolError(what + ": not UTF-8") from None


# Decoded producer names and property keys, which repeat from message to message: a
# direct-mapped cache of (UTF-8 bytes, str) saves the decoding and, the str's hash
# being cached in it, the hashing of a dict key. (Values vary: they are not cached.)
cdef enum:
    _CACHE_SLOTS = 64
    _CACHE_MAX_LEN = 48
cdef list _cache_raw = [None] * _CACHE_SLOTS
cdef list _cache_text = [None] * _CACHE_SLOTS


cdef object _cached_text(const unsigned char* p, Py_ssize_t n, str what):
    """_text(p, n, what), from the cache when these bytes were decoded lately."""
    cdef Py_ssize_t slot
    cdef object raw
    if n == 0 or n > _CACHE_MAX_LEN:
        return _text(p, n, what)
    slot = (<Py_ssize_t>n * 7 + p[0] * 3 + p[n - 1] + p[n >> 1]) & (_CACHE_SLOTS - 1)
    raw = _cache_raw[slot]
    if raw is not None and PyBytes_GET_SIZE(raw) == n and memcmp(PyBytes_AS_STRING(raw), p, n) == 0:
        return _cache_text[slot]
    text = _text(p, n, what)
    _cache_raw[slot] = PyBytes_FromStringAndSize(<const char*>p, n)
    _cache_text[slot] = text
    return text


cdef inline object _field_text(const unsigned char* p, Py_ssize_t after, uint64_t size, unsigned int kind, str what):
    """The string of the length-delimited field ending at p[after]."""
    _length(kind, what)
    return _text(p + after - <Py_ssize_t>size, <Py_ssize_t>size, what)


cdef inline bytes _field_bytes(const unsigned char* p, Py_ssize_t after, uint64_t size, unsigned int kind, str what):
    _length(kind, what)
    return PyBytes_FromStringAndSize(<const char*>p + after - <Py_ssize_t>size, <Py_ssize_t>size)


cdef int _key_value(const unsigned char* p, Py_ssize_t end, dict properties) except -1:
    """Add one KeyValue{key = 1; value = 2} at p[:end] to properties (absent ones are "")."""
    cdef Py_ssize_t pos = 0
    cdef uint64_t number, value
    cdef unsigned int kind
    cdef object k = _EMPTY_STR, v = _EMPTY_STR
    while pos < end:
        pos = _field(p, pos, end, &number, &kind, &value)
        if number == 1:
            _length(kind, "KeyValue.key")
            k = _cached_text(p + pos - <Py_ssize_t>value, <Py_ssize_t>value, "KeyValue.key")
        elif number == 2:
            v = _field_text(p, pos, value, kind, "KeyValue.value")
    properties[k] = v
    return 0


cdef int _message_id(const unsigned char* p, Py_ssize_t end, uint64_t* out) except -1:
    """ledgerId, entryId, partition, batch_index of the MessageIdData at p[:end] into out[0:4]."""
    cdef Py_ssize_t pos = 0
    cdef uint64_t number, value
    cdef unsigned int kind
    out[0] = 0
    out[1] = 0
    out[2] = <uint64_t>-1
    out[3] = <uint64_t>-1
    while pos < end:
        pos = _field(p, pos, end, &number, &kind, &value)
        if 1 <= number <= 6:
            _number(kind, "MessageIdData: expected numbers")
            if number <= 4:
                out[number - 1] = value
    return 0


# BaseCommand / CommandMessage fields read straight from the command's buffer
cdef struct _Command:
    bint has_type
    uint64_t type
    bint has_body
    unsigned int body_kind
    Py_ssize_t body_start
    Py_ssize_t body_end


cdef int _read_command(const unsigned char* p, Py_ssize_t end, _Command* c) except -1:
    cdef Py_ssize_t pos = 0
    cdef uint64_t number, value
    cdef unsigned int kind
    c.has_type = False
    c.has_body = False
    c.body_kind = 0
    c.body_start = 0
    c.body_end = 0
    while pos < end:
        pos = _field(p, pos, end, &number, &kind, &value)
        if number == 1:
            _number(kind, "BaseCommand.type")
            c.has_type = True
            c.type = value
        elif number == 9:
            c.has_body = True
            c.body_kind = kind
            c.body_end = pos
            c.body_start = pos - <Py_ssize_t>value if kind == _W_BYTES else pos
    return 0


def decode_message(command, metadata):
    """The consumer's hot path: a serialized BaseCommand and, when it is a MESSAGE, its
    serialized MessageMetadata, as one flat tuple::

        (consumer_id, ledger_id, entry_id, partition, batch_index, redelivery_count,
         producer_name, sequence_id, publish_time, properties, partition_key, event_time,
         num_messages_in_batch, compression, uncompressed_size, ordering_key, null_value,
         schema_version, generic)

    None when the command is not a MESSAGE (metadata is not looked at). See the twin
    (``_codec_py.decode_message``) for the rules.
    """
    cdef Py_buffer view
    cdef const unsigned char* p
    cdef Py_ssize_t pos, end
    cdef uint64_t number, value
    cdef unsigned int kind
    cdef _Command c
    cdef uint64_t consumer_id = 0, redelivery_count = 0
    cdef uint64_t mid[4]
    cdef bint has_mid = False
    cdef uint64_t sequence_id = 0, publish_time = 0, event_time = 0, compression = 0, uncompressed_size = 0
    cdef uint64_t num_messages_in_batch = 0
    cdef bint has_batch = False, null_value = False, b64 = False, null_partition_key = False, generic = False
    cdef object producer_name = _EMPTY_STR, partition_key = None, ordering_key = None
    cdef object schema_version = _EMPTY_BYTES
    cdef dict properties
    command = _bytes_like(command)
    PyObject_GetBuffer(command, &view, PyBUF_SIMPLE)
    try:
        p = <const unsigned char*>view.buf
        _read_command(p, view.len, &c)
        if not c.has_type:
            raise ProtocolError("BaseCommand without a type")
        if c.type != 9:
            return None
        if not c.has_body:
            raise ProtocolError("BaseCommand of type MESSAGE without its command")
        _length(c.body_kind, "BaseCommand.message")
        pos = c.body_start
        end = c.body_end
        while pos < end:
            pos = _field(p, pos, end, &number, &kind, &value)
            if number == 1:
                _number(kind, "CommandMessage.consumer_id")
                consumer_id = value
            elif number == 2:
                _length(kind, "CommandMessage.message_id")
                _message_id(p + pos - <Py_ssize_t>value, <Py_ssize_t>value, mid)
                has_mid = True
            elif number == 3:
                _number(kind, "CommandMessage.redelivery_count")
                redelivery_count = value
            elif number == 4 or number == 5:
                _number(kind, "CommandMessage.ack_set or consumer_epoch")
    finally:
        PyBuffer_Release(&view)
    if not has_mid:
        raise ProtocolError("CommandMessage without a message_id")
    if metadata is None:
        raise ProtocolError("MESSAGE frame without metadata")
    properties = {}
    metadata = _bytes_like(metadata)
    PyObject_GetBuffer(metadata, &view, PyBUF_SIMPLE)
    try:
        p = <const unsigned char*>view.buf
        end = view.len
        pos = 0
        while pos < end:
            pos = _field(p, pos, end, &number, &kind, &value)
            if number == 1:
                _length(kind, "MessageMetadata.producer_name")
                producer_name = _cached_text(p + pos - <Py_ssize_t>value, <Py_ssize_t>value,
                                             "MessageMetadata.producer_name")
            elif number == 2:
                _number(kind, "MessageMetadata.sequence_id")
                sequence_id = value
            elif number == 3:
                _number(kind, "MessageMetadata.publish_time")
                publish_time = value
            elif number == 4:
                _length(kind, "MessageMetadata.properties")
                _key_value(p + pos - <Py_ssize_t>value, <Py_ssize_t>value, properties)
            elif number == 6:
                partition_key = _field_text(p, pos, value, kind, "MessageMetadata.partition_key")
            elif number == 8:
                _number(kind, "MessageMetadata.compression")
                compression = value
            elif number == 9:
                _number(kind, "MessageMetadata.uncompressed_size")
                uncompressed_size = value
            elif number == 11:
                _number(kind, "MessageMetadata.num_messages_in_batch")
                num_messages_in_batch = value
                has_batch = True
            elif number == 12:
                _number(kind, "MessageMetadata.event_time")
                event_time = value
            elif number == 16:
                schema_version = _field_bytes(p, pos, value, kind, "MessageMetadata.schema_version")
            elif number == 18:
                ordering_key = _field_bytes(p, pos, value, kind, "MessageMetadata.ordering_key")
            elif number == 25:
                _number(kind, "MessageMetadata.null_value")
                null_value = value != 0
            elif number == 17:
                _number(kind, "MessageMetadata.partition_key_b64_encoded")
                b64 = value != 0
            elif number == 30:
                _number(kind, "MessageMetadata.null_partition_key")
                null_partition_key = value != 0
            elif number == 13 or number == 15 or number == 22 or number == 23:
                generic = True  # encryption keys and parameter, transaction: not type-checked
            elif number == 14:
                _field_text(p, pos, value, kind, "MessageMetadata.encryption_algo")
                generic = True
            elif 27 <= number <= 29:
                _number(kind, "MessageMetadata.chunking")
                generic = True
            elif number == 5 or number == 7 or number == 26:
                _field_text(p, pos, value, kind, "MessageMetadata.replicated_from, replicate_to or uuid")
            elif number == 19 or number == 20 or number == 24:
                _number(kind, "MessageMetadata.deliver_at_time, marker_type or highest_sequence_id")
    finally:
        PyBuffer_Release(&view)
    batch = None
    if has_batch:
        batch = <int64_t>num_messages_in_batch
    return (
        consumer_id, <int64_t>mid[0], <int64_t>mid[1], <int64_t>mid[2], <int64_t>mid[3], redelivery_count,
        producer_name, sequence_id, publish_time, properties, partition_key, event_time,
        batch, compression, uncompressed_size, ordering_key,
        null_value, schema_version, generic or b64 or null_partition_key,
    )


cdef tuple _single_metadata(const unsigned char* p, Py_ssize_t end, uint64_t* payload_size):
    """The decode_single_metadata() tuple of p[:end]; payload_size gets the raw field
    (ProtocolError if absent: only split_batch_decoded() asks for it)."""
    cdef Py_ssize_t pos = 0
    cdef uint64_t number, value, size = 0, event_time = 0, sequence_id = 0
    cdef unsigned int kind
    cdef bint compacted_out = False, null_value = False, has_sequence = False, has_size = False
    cdef object partition_key = None, ordering_key = None
    cdef dict properties = {}
    while pos < end:
        pos = _field(p, pos, end, &number, &kind, &value)
        if number == 1:
            _length(kind, "SingleMessageMetadata.properties")
            _key_value(p + pos - <Py_ssize_t>value, <Py_ssize_t>value, properties)
        elif number == 2:
            partition_key = _field_text(p, pos, value, kind, "SingleMessageMetadata.partition_key")
        elif number == 3:
            _number(kind, "SingleMessageMetadata.payload_size")
            size = value
            has_size = True
        elif number == 4:
            _number(kind, "SingleMessageMetadata.compacted_out")
            compacted_out = value != 0
        elif number == 5:
            _number(kind, "SingleMessageMetadata.event_time")
            event_time = value
        elif number == 7:
            ordering_key = _field_bytes(p, pos, value, kind, "SingleMessageMetadata.ordering_key")
        elif number == 8:
            _number(kind, "SingleMessageMetadata.sequence_id")
            sequence_id = value
            has_sequence = True
        elif number == 9:
            _number(kind, "SingleMessageMetadata.null_value")
            null_value = value != 0
        elif number == 6 or number == 10:
            _number(kind, "SingleMessageMetadata.partition_key_b64_encoded or null_partition_key")
    if payload_size != NULL:
        if not has_size:
            raise ProtocolError("batch entry without a payload_size")
        payload_size[0] = size
    sequence = None
    if has_sequence:
        sequence = sequence_id
    return (properties, partition_key, <int64_t>size, compacted_out, event_time, ordering_key, sequence, null_value)


def decode_single_metadata(data) -> tuple:
    """A serialized SingleMessageMetadata (one entry of a batch) as::

        (properties, partition_key, payload_size, compacted_out, event_time,
         ordering_key, sequence_id, null_value)

    partition_key, ordering_key and sequence_id are None when absent; payload_size is
    signed. See the twin (``_codec_py.decode_single_metadata``).
    """
    cdef Py_buffer view
    data = _bytes_like(data)
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        return _single_metadata(<const unsigned char*>view.buf, view.len, NULL)
    finally:
        PyBuffer_Release(&view)


def split_batch_decoded(payload, count) -> list:
    """split_batch() with each entry's metadata decoded: ``[(decode_single_metadata(m), body), ...]``.
    The metadata tuples are kept out of the cycle collector's view (``untrack()``): each
    holds a dict of strings besides atoms, which keeps CPython from untracking it itself."""
    cdef Py_buffer view
    cdef const unsigned char* p
    cdef Py_ssize_t end, pos = 0, index, entries_count, size, field_end
    cdef uint64_t body_size
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
            field_end = pos + size
            single = _single_metadata(p + pos, size, &body_size)
            PyObject_GC_UnTrack(<void*>single)  # (no cycle passes through it: see untrack())
            if body_size >= _BODY_LIMIT:
                raise ProtocolError("batch entry %d has no valid payload_size" % index)
            if <Py_ssize_t>body_size > end - field_end:
                raise ProtocolError("batch entry %d's body of %d bytes runs past the payload" % (index, body_size))
            entries.append((single, PyBytes_FromStringAndSize(<const char*>p + field_end, <Py_ssize_t>body_size)))
            pos = field_end + <Py_ssize_t>body_size
    finally:
        PyBuffer_Release(&view)
    return entries


def untrack(list objects not None, Py_ssize_t start=0) -> None:
    """Take objects out of the cycle collector's view (``PyObject_GC_UnTrack``).

    For the consumer's received messages and their ids: slotted objects whose
    fields hold only atoms and objects that never point back at them (bytes,
    str, tuples of atoms, a schema, a batch's delivery), so they can never be
    part of a reference cycle and the collector has nothing to find in them.
    A consumer holds thousands of them queued; tracked, they reach the oldest
    generation and set off a full collection every few thousand messages
    (a quarter of a 16-partition consumer's CPU). Reference counting still frees
    them. The pure-Python twin cannot untrack and leaves them as they are.

    Only ``objects[start:]``: a builder of many untracks each stretch as it goes, so that
    a collection its own allocations set off finds few of them tracked (one that does
    moves them to an older generation, which counts toward the next full collection).
    """
    cdef Py_ssize_t index
    if start < 0:
        raise ValueError("untrack() start must be >= 0, not %d" % start)
    for index in range(start, len(objects)):
        PyObject_GC_UnTrack(<void*>objects[index])
