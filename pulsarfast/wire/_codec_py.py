"""The Pulsar wire codec in pure Python: the reference twin of ``_codec.pyx``.

It owns the byte level under the protobuf messages:

- ``crc32c``: CRC-32C (Castagnoli), the checksum of payload frames;
- ``read_fields``: one protobuf message's fields, in wire order, as a flat
  list ``[number, value, number, value, ...]`` (varints and fixed-width
  numbers as unsigned ints, length-delimited fields as bytes);
- varint and field writers for the encoders in ``pulsarfast.wire.proto``;
- ``FrameDecoder``: splits the byte stream into frames, each
  ``(command, metadata, payload, checksum_ok)``: the serialized
  ``BaseCommand``; for payload frames the serialized ``MessageMetadata`` and
  the payload, and whether the crc32c matched (metadata and payload are None
  for simple commands);
- ``encode_simple`` / ``encode_payload``: frames from a serialized command
  (and metadata and payload);
- ``split_batch``: a batch payload into its ``(SingleMessageMetadata, body)``
  entries;
- the per-message hot paths, which skip the generic encoder/decoder of
  ``pulsarfast.wire.proto`` (same bytes, same values): ``encode_send_frame`` (the
  whole payload frame of one SEND), ``decode_message`` (a MESSAGE command and
  its MessageMetadata as one flat tuple), ``decode_single_metadata`` and
  ``split_batch_decoded`` (a batch's entries with their metadata decoded).

Malformed input raises ``pulsarfast.base.results.ProtocolError`` and nothing else.
The compiled twin has the same names, signatures and behaviour.
"""
from __future__ import annotations

import operator
import struct
from typing import Any

from pulsarfast.base.results import ProtocolError

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
    value: int | bytes
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


# -- the hot paths: one SEND frame, one MESSAGE, one batch entry ------------------------------
#
# What the producer and the consumer do per message, without the generic
# encoder/decoder of pulsarfast.wire.proto in between (same bytes, same values).

_U64_MASK = 0xFFFFFFFFFFFFFFFF
_INT64_MIN = -(1 << 63)
_INT64_SIGN = 1 << 63


def _uint64(value: Any) -> int:
    """value as the uint64 protobuf writes (a negative int64 as two's complement);
    OverflowError outside -2**63 .. 2**64-1, TypeError for what is not an integer."""
    if type(value) is not int:
        value = operator.index(value)
    if value < 0:
        if value < _INT64_MIN:
            raise OverflowError("%d does not fit in 64 bits" % value)
        return value & _U64_MASK
    if value > _U64_MASK:
        raise OverflowError("%d does not fit in 64 bits" % value)
    return value


def _buffer(data: Any) -> bytes:
    """The bytes of a bytes-like object (str, int and the like are refused: TypeError)."""
    if type(data) is bytes:
        return data
    return memoryview(data).tobytes()


def _lv(data: bytes) -> bytes:
    """Length-delimited: the varint size, then data."""
    return varint(len(data)) + data


def encode_send_frame(producer_id: int, sequence_id: int, producer_name: Any, publish_time: int, payload: Any,
                      properties: Any = None, partition_key: Any = None, event_time: int = 0,
                      extra_metadata: Any = b"", num_messages: int = 1,
                      highest_sequence_id: int | None = None) -> bytes:
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
    producer_id = _uint64(producer_id)
    sequence_id = _uint64(sequence_id)
    num_messages = _uint64(num_messages)
    publish_time = _uint64(publish_time)
    event_time = _uint64(event_time)
    producer_name = _buffer(producer_name)
    body = b"\x08" + varint(producer_id) + b"\x10" + varint(sequence_id)
    if num_messages != 1:
        body += b"\x18" + varint(num_messages)
    if highest_sequence_id is not None:
        body += b"\x30" + varint(_uint64(highest_sequence_id))
    command = b"\x08\x06\x32" + _lv(body)  # type = SEND (6), send (field 6)
    parts = [b"\x0a", _lv(producer_name), b"\x10", varint(sequence_id), b"\x18", varint(publish_time)]
    if properties is not None:
        if isinstance(properties, dict):
            properties = properties.items()
        for key, value in properties:
            pair = b"\x0a" + _lv(_buffer(key)) + b"\x12" + _lv(_buffer(value))
            parts.append(b"\x22" + _lv(pair))
    if partition_key is not None:
        parts.append(b"\x32" + _lv(_buffer(partition_key)))
    if event_time:
        parts.append(b"\x60" + varint(event_time))
    parts.append(_sized(extra_metadata))
    return encode_payload(command, b"".join(parts), payload)


class _Fields:
    """The fields of one message, read one by one with their wire type checked."""

    __slots__ = ("fields", "name")

    def __init__(self, data: Any, name: str) -> None:
        self.fields = read_fields(data)
        self.name = name

    def number(self, value: Any, field: str) -> int:
        if type(value) is not int:
            raise ProtocolError("%s.%s: expected a number" % (self.name, field))
        return value

    def length(self, value: Any, field: str) -> bytes:
        if type(value) is not bytes:
            raise ProtocolError("%s.%s: expected a length-delimited field" % (self.name, field))
        return value

    def text(self, value: Any, field: str) -> str:
        try:
            return self.length(value, field).decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolError("%s.%s: not UTF-8" % (self.name, field)) from None


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= _INT64_SIGN else value


def _key_value(data: bytes, properties: dict) -> None:
    """Add one KeyValue{key = 1; value = 2} to properties (absent ones are "")."""
    reader = _Fields(data, "KeyValue")
    fields = reader.fields
    key = value = ""
    for i in range(0, len(fields), 2):
        number = fields[i]
        if number == 1:
            key = reader.text(fields[i + 1], "key")
        elif number == 2:
            value = reader.text(fields[i + 1], "value")
    properties[key] = value


def _message_id(data: bytes) -> tuple:
    """(ledger_id, entry_id, partition, batch_index) of a MessageIdData, all signed."""
    reader = _Fields(data, "MessageIdData")
    fields = reader.fields
    ledger = entry = 0
    partition = batch_index = -1
    for i in range(0, len(fields), 2):
        number = fields[i]
        if number == 1:
            ledger = reader.number(fields[i + 1], "ledgerId")
        elif number == 2:
            entry = reader.number(fields[i + 1], "entryId")
        elif number == 3:
            partition = reader.number(fields[i + 1], "partition")
        elif number == 4:
            batch_index = reader.number(fields[i + 1], "batch_index")
        elif number == 5 or number == 6:  # ack_set, batch_size
            reader.number(fields[i + 1], "ack_set" if number == 5 else "batch_size")
    return _signed(ledger), _signed(entry), _signed(partition), _signed(batch_index)


#: MessageMetadata fields that need the generic decoder whenever present
#: (encryption_keys, encryption_algo, encryption_param, txnid_least_bits, txnid_most_bits,
#: num_chunks_from_msg, total_chunk_msg_size, chunk_id); partition_key_b64_encoded (17)
#: and null_partition_key (30) need it when true. The ignored ones, read and checked but
#: not returned: replicated_from (5), replicate_to (7), deliver_at_time (19),
#: marker_type (20), highest_sequence_id (24), uuid (26).
GENERIC_METADATA_FIELDS = frozenset((13, 14, 15, 22, 23, 27, 28, 29))
_UNCHECKED_GENERIC = frozenset((13, 15, 22, 23))  # not in proto.MESSAGE_METADATA: not type-checked


def decode_message(command: Any, metadata: Any) -> tuple | None:
    """The consumer's hot path: a serialized BaseCommand and, when it is a MESSAGE, its
    serialized MessageMetadata, as one flat tuple::

        (consumer_id, ledger_id, entry_id, partition, batch_index, redelivery_count,
         producer_name, sequence_id, publish_time, properties, partition_key, event_time,
         num_messages_in_batch, compression, uncompressed_size, ordering_key, null_value,
         schema_version, generic)

    None when the command is not a MESSAGE (metadata is not looked at). ledger_id,
    entry_id and the int32/int64 fields are signed (2**64-1 is -1); absent fields have
    their proto default (partition, batch_index -1; partition_key, ordering_key,
    num_messages_in_batch None). generic is True when the metadata has fields this
    tuple does not carry and the caller must not ignore (GENERIC_METADATA_FIELDS,
    or partition_key_b64_encoded / null_partition_key true): then decode it with
    the generic decoder. Unknown fields are skipped; malformed input, a field of the
    wrong wire type, a string that is not UTF-8 raise ProtocolError, as the generic
    decoder does.
    """
    reader = _Fields(command, "BaseCommand")
    fields = reader.fields
    kind = None
    body = None
    for i in range(0, len(fields), 2):
        number = fields[i]
        if number == 1:
            kind = reader.number(fields[i + 1], "type")
        elif number == 9:
            body = fields[i + 1]
    if kind is None:
        raise ProtocolError("BaseCommand without a type")
    if kind != 9:
        return None
    if body is None:
        raise ProtocolError("BaseCommand of type MESSAGE without its command")
    reader = _Fields(reader.length(body, "message"), "CommandMessage")
    fields = reader.fields
    consumer_id = redelivery_count = 0
    message_id = None
    for i in range(0, len(fields), 2):
        number = fields[i]
        value = fields[i + 1]
        if number == 1:
            consumer_id = reader.number(value, "consumer_id")
        elif number == 2:
            message_id = _message_id(reader.length(value, "message_id"))
        elif number == 3:
            redelivery_count = reader.number(value, "redelivery_count")
        elif number == 4 or number == 5:  # ack_set, consumer_epoch
            reader.number(value, "ack_set" if number == 4 else "consumer_epoch")
    if message_id is None:
        raise ProtocolError("CommandMessage without a message_id")
    if metadata is None:
        raise ProtocolError("MESSAGE frame without metadata")
    reader = _Fields(metadata, "MessageMetadata")
    fields = reader.fields
    producer_name = ""
    sequence_id = publish_time = event_time = compression = uncompressed_size = 0
    properties: dict = {}
    partition_key = num_messages_in_batch = ordering_key = None
    null_value = b64 = null_partition_key = generic = False
    schema_version = b""
    for i in range(0, len(fields), 2):
        number = fields[i]
        value = fields[i + 1]
        if number == 1:
            producer_name = reader.text(value, "producer_name")
        elif number == 2:
            sequence_id = reader.number(value, "sequence_id")
        elif number == 3:
            publish_time = reader.number(value, "publish_time")
        elif number == 4:
            _key_value(reader.length(value, "properties"), properties)
        elif number == 6:
            partition_key = reader.text(value, "partition_key")
        elif number == 8:
            compression = reader.number(value, "compression")
        elif number == 9:
            uncompressed_size = reader.number(value, "uncompressed_size")
        elif number == 11:
            num_messages_in_batch = _signed(reader.number(value, "num_messages_in_batch"))
        elif number == 12:
            event_time = reader.number(value, "event_time")
        elif number == 16:
            schema_version = reader.length(value, "schema_version")
        elif number == 18:
            ordering_key = reader.length(value, "ordering_key")
        elif number == 25:
            null_value = reader.number(value, "null_value") != 0
        elif number == 17:
            b64 = reader.number(value, "partition_key_b64_encoded") != 0
        elif number == 30:
            null_partition_key = reader.number(value, "null_partition_key") != 0
        elif number in GENERIC_METADATA_FIELDS:
            generic = True
            if number not in _UNCHECKED_GENERIC:
                if number == 14:
                    reader.text(value, "encryption_algo")
                else:
                    reader.number(value, "chunking")
        elif number == 5 or number == 7 or number == 26:  # replicated_from, replicate_to, uuid
            reader.text(value, "replicated_from, replicate_to or uuid")
        elif number == 19 or number == 20 or number == 24:  # deliver_at_time, marker_type, highest_sequence_id
            reader.number(value, "deliver_at_time, marker_type or highest_sequence_id")
    return (
        consumer_id, message_id[0], message_id[1], message_id[2], message_id[3], redelivery_count,
        producer_name, sequence_id, publish_time, properties, partition_key, event_time,
        num_messages_in_batch, compression, uncompressed_size, ordering_key, null_value, schema_version,
        generic or b64 or null_partition_key,
    )


def decode_single_metadata(data: Any) -> tuple:
    """A serialized SingleMessageMetadata (one entry of a batch) as::

        (properties, partition_key, payload_size, compacted_out, event_time,
         ordering_key, sequence_id, null_value)

    partition_key, ordering_key and sequence_id are None when absent; payload_size is
    signed. partition_key_b64_encoded (6) and null_partition_key (10) are checked but
    not returned; unknown fields are skipped; malformed input raises ProtocolError.
    """
    reader = _Fields(data, "SingleMessageMetadata")
    fields = reader.fields
    properties: dict = {}
    partition_key = ordering_key = sequence_id = None
    payload_size = event_time = 0
    compacted_out = null_value = False
    for i in range(0, len(fields), 2):
        number = fields[i]
        value = fields[i + 1]
        if number == 1:
            _key_value(reader.length(value, "properties"), properties)
        elif number == 2:
            partition_key = reader.text(value, "partition_key")
        elif number == 3:
            payload_size = _signed(reader.number(value, "payload_size"))
        elif number == 4:
            compacted_out = reader.number(value, "compacted_out") != 0
        elif number == 5:
            event_time = reader.number(value, "event_time")
        elif number == 7:
            ordering_key = reader.length(value, "ordering_key")
        elif number == 8:
            sequence_id = reader.number(value, "sequence_id")
        elif number == 9:
            null_value = reader.number(value, "null_value") != 0
        elif number == 6 or number == 10:
            reader.number(value, "partition_key_b64_encoded or null_partition_key")
    return (properties, partition_key, payload_size, compacted_out, event_time, ordering_key, sequence_id, null_value)


def split_batch_decoded(payload: Any, count: int) -> list:
    """split_batch() with each entry's metadata decoded: ``[(decode_single_metadata(m), body), ...]``."""
    return [(decode_single_metadata(metadata), body) for metadata, body in split_batch(payload, count)]


def untrack(objects: list, start: int = 0) -> None:
    """The compiled codec takes the consumer's received messages and ids out of the cycle
    collector's view (they can never be part of a cycle; see ``_codec.untrack``). Python has
    no way to do that: here they stay tracked, which changes nothing but the collector's work."""
    if type(objects) is not list:
        raise TypeError("untrack() takes a list, not %s" % type(objects).__name__)
    if operator.index(start) < 0:
        raise ValueError("untrack() start must be >= 0, not %d" % start)


__all__ = [
    "MAGIC_CRC32C", "DEFAULT_MAX_FRAME_SIZE", "WIRE_VARINT", "WIRE_FIXED64", "WIRE_BYTES", "WIRE_FIXED32",
    "crc32c", "varint", "read_fields", "encode_simple", "encode_payload", "FrameDecoder", "split_batch",
    "encode_batch_entry", "encode_send_frame", "decode_message", "decode_single_metadata", "split_batch_decoded",
    "GENERIC_METADATA_FIELDS", "untrack",
]
