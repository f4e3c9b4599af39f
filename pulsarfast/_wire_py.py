"""The Pulsar wire codec in pure Python: the reference twin of ``_wire.pyx``.

It owns the byte level under the protobuf messages:

- ``crc32c``: CRC-32C (Castagnoli), the checksum of payload frames;
- ``read_fields``: one protobuf message's fields, in wire order, as a flat
  list ``[number, value, number, value, ...]`` (varints and fixed-width
  numbers as unsigned ints, length-delimited fields as bytes);
- varint and field writers for the encoders in ``pulsarfast.proto``;
- ``FrameDecoder``: splits the byte stream into frames, each
  ``(command, metadata, payload, checksum_ok)``: the serialized
  ``BaseCommand``; for payload frames the serialized ``MessageMetadata`` and
  the payload, and whether the crc32c matched (metadata and payload are None
  for simple commands);
- ``encode_simple`` / ``encode_payload``: frames from a serialized command
  (and metadata and payload);
- ``split_batch``: a batch payload into its ``(SingleMessageMetadata, body)``
  entries.

Malformed input raises ``pulsarfast.errors.ProtocolError`` and nothing else.
The compiled twin has the same names, signatures and behaviour.
"""
from __future__ import annotations

import struct
from typing import Any

from .errors import ProtocolError

#: the two bytes before a payload frame's checksum
MAGIC_CRC32C = 0x0E01
#: 5 MiB of message plus the broker's padding for the command and metadata
DEFAULT_MAX_FRAME_SIZE = 5 * 1024 * 1024 + 10 * 1024

_U32 = struct.Struct(">I")
_U16 = struct.Struct(">H")
_U32_PAIR = struct.Struct(">II")

WIRE_VARINT = 0
WIRE_FIXED64 = 1
WIRE_BYTES = 2
WIRE_FIXED32 = 5

# -- crc32c ---------------------------------------------------------------------------------


def _make_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _make_table()


def crc32c(data: Any, value: int = 0) -> int:
    """CRC-32C of data, continuing from value (the crc of what came before)."""
    table = _CRC_TABLE
    crc = (value ^ 0xFFFFFFFF) & 0xFFFFFFFF
    for byte in bytes(data):
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


# -- protobuf primitives --------------------------------------------------------------------


def varint(value: int) -> bytes:
    """A varint of value (negative values as 64-bit two's complement, as protobuf does)."""
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


def read_fields(data: Any) -> list:
    """The fields of one serialized protobuf message, in wire order:
    ``[number, value, number, value, ...]``."""
    buf = bytes(data)
    end = len(buf)
    pos = 0
    out: list = []
    append = out.append
    while pos < end:
        key, pos = _read_varint(buf, pos, end)
        number = key >> 3
        kind = key & 7
        if number == 0:
            raise ProtocolError("protobuf field number 0")
        if kind == WIRE_VARINT:
            value, pos = _read_varint(buf, pos, end)
        elif kind == WIRE_BYTES:
            size, pos = _read_varint(buf, pos, end)
            if size > end - pos:
                raise ProtocolError("protobuf field %d runs past its message (%d bytes)" % (number, size))
            value = buf[pos : pos + size]
            pos += size
        elif kind == WIRE_FIXED64:
            if pos + 8 > end:
                raise ProtocolError("protobuf fixed64 field %d is cut short" % number)
            value = int.from_bytes(buf[pos : pos + 8], "little")
            pos += 8
        elif kind == WIRE_FIXED32:
            if pos + 4 > end:
                raise ProtocolError("protobuf fixed32 field %d is cut short" % number)
            value = int.from_bytes(buf[pos : pos + 4], "little")
            pos += 4
        else:
            raise ProtocolError("protobuf wire type %d (field %d) is not supported" % (kind, number))
        append(number)
        append(value)
    return out


def _read_varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= end:
            raise ProtocolError("protobuf varint is cut short")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result & 0xFFFFFFFFFFFFFFFF, pos
        shift += 7
        if shift >= 70:
            raise ProtocolError("protobuf varint is longer than 10 bytes")


# -- frames ---------------------------------------------------------------------------------


def _sized(data: Any) -> bytes:
    """data's bytes, for a length prefix: a buffer of wider items (array('I'), a cast
    memoryview) counts in bytes, not items; what has no len() (an int) is refused."""
    if type(data) is bytes:
        return data
    len(data)
    return bytes(data)


def encode_simple(command: Any) -> bytes:
    """A frame holding one serialized BaseCommand."""
    command = _sized(command)
    size = len(command)
    return _U32_PAIR.pack(size + 4, size) + command


def encode_payload(command: Any, metadata: Any, payload: Any) -> bytes:
    """A payload frame: the command, then magic, crc32c, metadata size, metadata and payload."""
    command = _sized(command)
    metadata = _sized(metadata)
    command_size = len(command)
    checked = _U32.pack(len(metadata)) + metadata + bytes(payload)
    total = 4 + command_size + 2 + 4 + len(checked)
    return b"".join((
        _U32_PAIR.pack(total, command_size), command,
        _U16.pack(MAGIC_CRC32C), _U32.pack(crc32c(checked)), checked,
    ))


Frame = tuple  # (command: bytes, metadata: bytes | None, payload: bytes | None, checksum_ok: bool)


class FrameDecoder:
    """Splits a byte stream into frames (see the module docstring).

    After a ProtocolError every later feed() raises ProtocolError: the
    stream cannot be resynchronised.
    """

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        if not isinstance(max_frame_size, int) or max_frame_size < 8:
            raise ProtocolError("max_frame_size must be an int of at least 8, not %r" % (max_frame_size,))
        self.max_frame_size = max_frame_size
        self._buffer = bytearray()
        self._broken = False

    def pending_bytes(self) -> int:
        """Bytes held back: the start of a frame not complete yet."""
        return len(self._buffer)

    def feed(self, data: Any) -> list:
        if self._broken:
            raise ProtocolError("the frame stream broke earlier; the connection must be closed")
        buffer = self._buffer
        buffer += data
        frames: list = []
        pos = 0
        end = len(buffer)
        try:
            while end - pos >= 4:
                (total,) = _U32.unpack_from(buffer, pos)
                if total > self.max_frame_size:
                    raise ProtocolError("frame of %d bytes is larger than the limit (%d)" % (total, self.max_frame_size))
                if total < 4:
                    raise ProtocolError("frame size %d cannot hold a command size" % total)
                if end - pos - 4 < total:
                    break
                start = pos + 4
                frames.append(_split_frame(buffer, start, start + total))
                pos = start + total
        except ProtocolError:
            self._broken = True
            raise
        del buffer[:pos]
        return frames


def _split_frame(buffer: bytearray, start: int, end: int) -> tuple:
    (command_size,) = _U32.unpack_from(buffer, start)
    command_start = start + 4
    command_end = command_start + command_size
    if command_end > end:
        raise ProtocolError("command of %d bytes runs past its frame" % command_size)
    command = bytes(buffer[command_start:command_end])
    if command_end == end:
        return (command, None, None, True)
    pos = command_end
    checksum_ok = True
    if end - pos >= 2 and _U16.unpack_from(buffer, pos)[0] == MAGIC_CRC32C:
        if end - pos < 6:
            raise ProtocolError("payload frame is cut short in its checksum")
        (expected,) = _U32.unpack_from(buffer, pos + 2)
        pos += 6
        checksum_ok = crc32c(memoryview(buffer)[pos:end]) == expected
    if end - pos < 4:
        raise ProtocolError("payload frame is cut short in its metadata size")
    (metadata_size,) = _U32.unpack_from(buffer, pos)
    pos += 4
    if metadata_size > end - pos:
        raise ProtocolError("metadata of %d bytes runs past its frame" % metadata_size)
    metadata = bytes(buffer[pos : pos + metadata_size])
    payload = bytes(buffer[pos + metadata_size : end])
    return (command, metadata, payload, checksum_ok)


# -- batches --------------------------------------------------------------------------------


def split_batch(payload: Any, count: int) -> list:
    """The ``count`` entries of a batch payload, each ``(single_metadata, body)``:
    ``[4-byte size][SingleMessageMetadata][body of its payload_size]`` repeated."""
    buf = bytes(payload)
    end = len(buf)
    if count < 0:
        raise ProtocolError("a batch cannot hold %d messages" % count)
    entries = []
    pos = 0
    for index in range(count):
        if end - pos < 4:
            raise ProtocolError("batch entry %d of %d is cut short in its metadata size" % (index, count))
        (size,) = _U32.unpack_from(buf, pos)
        pos += 4
        if size > end - pos:
            raise ProtocolError("batch entry %d's metadata of %d bytes runs past the payload" % (index, size))
        metadata = buf[pos : pos + size]
        pos += size
        fields = read_fields(metadata)
        body_size = -1
        for i in range(0, len(fields), 2):
            if fields[i] == 3:  # SingleMessageMetadata.payload_size (a length-delimited one is not)
                body_size = fields[i + 1] if type(fields[i + 1]) is int else -1
        if body_size < 0 or body_size >= 1 << 31:
            raise ProtocolError("batch entry %d has no valid payload_size" % index)
        if body_size > end - pos:
            raise ProtocolError("batch entry %d's body of %d bytes runs past the payload" % (index, body_size))
        entries.append((metadata, buf[pos : pos + body_size]))
        pos += body_size
    return entries


def encode_batch_entry(single_metadata: Any, body: Any) -> bytes:
    """One batch entry: its metadata's size, the metadata, the body."""
    single_metadata = _sized(single_metadata)
    return _U32.pack(len(single_metadata)) + single_metadata + bytes(body)


__all__ = [
    "MAGIC_CRC32C", "DEFAULT_MAX_FRAME_SIZE", "WIRE_VARINT", "WIRE_FIXED64", "WIRE_BYTES", "WIRE_FIXED32",
    "crc32c", "varint", "read_fields", "encode_simple", "encode_payload", "FrameDecoder", "split_batch",
    "encode_batch_entry",
]
