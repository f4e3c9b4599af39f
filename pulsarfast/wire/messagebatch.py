"""``MessageBatch``: the messages of one batched entry, read from its payload
(the official ``pulsar.MessageBatch`` and ``_pulsar.MessageBatch``), for
programs that fetch a raw entry themselves (from BookKeeper, or the admin
API's ``get-message-by-id``) and want its messages.

``parse_from(data, size)`` reads ``size`` messages
(``[4-byte size][SingleMessageMetadata][payload]`` each) with pulsarfast's
wire codec. Message *i* has the id set by ``with_message_id(id)`` (ledger,
entry and partition) with batch index *i* (without one: ``(-1,-1,-1,i)``),
its properties, partition key, ordering key, event time and null value, and
no topic (``""``), as in the official client.

Differs: a payload shorter than ``size`` messages, or whose metadata does not
parse, raises ``InvalidMessage`` here; the official client returns empty
messages for what it cannot read.
"""
from __future__ import annotations

from typing import Any

from pulsarfast.base.results import InvalidMessage, ProtocolError
from pulsarfast.wire import codec
from pulsarfast.wire.message import Message, MessageId

__all__ = ["MessageBatch", "RawMessageBatch"]

_UINT32 = 1 << 32


def parse_batch(data: Any, size: Any, base: MessageId | None) -> list[Message]:
    """The size messages of a batch payload (see the module docstring)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError("parse_from(): incompatible function arguments: data must be bytes or str, not %r"
                        % (type(data).__name__,))
    if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size < _UINT32:
        raise TypeError("parse_from(): incompatible function arguments: size must be an int from 0 to 2**32-1, "
                        "not %r" % (size,))
    try:
        entries = codec.split_batch_decoded(bytes(data), size)
    except ProtocolError as exc:
        raise InvalidMessage(str(exc)) from None
    partition, ledger, entry = (-1, -1, -1) if base is None else (base.partition(), base.ledger_id(), base.entry_id())
    messages = []
    for index, (single, body) in enumerate(entries):
        properties, partition_key, _size, _compacted_out, event_time, ordering_key, sequence_id, null_value = single
        messages.append(Message(
            bytes(body), MessageId(partition, ledger, entry, index, size), "", properties=properties,
            partition_key=partition_key, ordering_key=ordering_key, event_time=event_time,
            sequence_id=sequence_id or 0, null_value=null_value))
    return messages


def _message_id(msg_id: Any) -> MessageId:
    if not isinstance(msg_id, MessageId):
        raise TypeError("unknown message id type")
    return msg_id


class RawMessageBatch:
    """``_pulsar.MessageBatch()``: ``with_message_id(id)`` and ``parse_from(data, size)`` return the
    batch, ``messages()`` the messages parsed."""

    def __init__(self) -> None:
        self._base: MessageId | None = None
        self._messages: list[Message] = []

    def with_message_id(self, msg_id: MessageId) -> "RawMessageBatch":
        self._base = _message_id(msg_id)
        return self

    def parse_from(self, data: Any, size: int) -> "RawMessageBatch":
        self._messages = parse_batch(data, size, self._base)
        return self

    def messages(self) -> list[Message]:
        return list(self._messages)


class MessageBatch:
    """``pulsar.MessageBatch()``: ``with_message_id(id)`` returns the batch, ``parse_from(data, size)``
    the list of messages."""

    def __init__(self) -> None:
        self._base: MessageId | None = None

    def with_message_id(self, msg_id: MessageId) -> "MessageBatch":
        self._base = _message_id(msg_id)
        return self

    def parse_from(self, data: Any, size: int) -> list[Message]:
        return parse_batch(data, size, self._base)
