"""A transaction's marks on a payload frame: the SEND command of a message (or batch, or chunk)
sent in a transaction carries the transaction's id (``CommandSend.txnid_least_bits = 4``,
``txnid_most_bits = 5``), which the broker reads to put the entry in the topic's transaction
buffer; its ``MessageMetadata`` carries it too (``txnid_least_bits = 22``, ``txnid_most_bits =
23``: ``proto.txn_metadata``, added with the other extra metadata fields), which the broker's
dispatch reads to leave out aborted transactions' messages.

``in_transaction(frame, txn)`` adds the command's fields to a frame made by
``codec.encode_send_frame`` (the compiled hot path knows nothing of transactions: a transactional
frame costs one copy more, once per batch when batching). The crc32c covers the metadata and
payload only, so the rest of the frame is kept as it is.
"""
from __future__ import annotations

import struct

from pulsarfast.base.results import ProtocolError
from pulsarfast.wire import proto
from pulsarfast.wire.codec import varint

_U32_PAIR = struct.Struct(">II")
#: BaseCommand {type = 1: SEND (6); send = 6: ...}: what a SEND frame's command starts with
_SEND_PREFIX = b"\x08\x06\x32"


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise ProtocolError("truncated varint in a SEND command")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7


def in_transaction(frame: bytes, txn: tuple[int, int]) -> bytes:
    """The SEND frame with the transaction's (most, least) bits added to its command."""
    total, command_size = _U32_PAIR.unpack_from(frame, 0)
    command = frame[8:8 + command_size]
    if not command.startswith(_SEND_PREFIX):
        raise ProtocolError("not a SEND frame")
    body_size, body_at = _read_varint(command, len(_SEND_PREFIX))
    body = command[body_at:body_at + body_size] + proto.txn_send_fields(txn)
    new_command = _SEND_PREFIX + varint(len(body)) + body
    rest = frame[8 + command_size:]
    return _U32_PAIR.pack(total - command_size + len(new_command), len(new_command)) + new_command + rest
