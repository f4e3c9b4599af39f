"""The Pulsar binary protocol as a sans-I/O object: bytes in, events out;
commands in, bytes out. No sockets, clocks or threads.

``PulsarProtocol`` owns one connection's protocol state: the CONNECT /
CONNECTED handshake, the frame decoder, request ids and the requests waiting
for their answers (``msgengine.correlator.KeyedCorrelator``), and the bytes
queued for the wire. ``receive_data(bytes)`` returns events:

- ``Connected`` (the handshake finished), ``ConnectFailed`` (the broker
  refused it);
- ``Answered``: a request's answer (or error) and the ``Pending`` that waited
  for it (already popped; the driver resolves it);
- ``SendReceipt`` / ``SendError`` for a producer id, ``MessageReceived`` for a
  consumer id (with the raw metadata and payload and whether the checksum
  matched), ``ProducerClosed`` / ``ConsumerClosed`` (the broker closed one),
  ``EndOfTopic``, ``ActiveConsumerChange``;
- ``TopicListChanged``: topics of a namespace watched with WATCH_TOPIC_LIST
  came or went (``supports_topic_watchers``: the broker's CONNECTED said it
  takes the watch);
- ``PingReceived`` (answer with ``pong()``);
- ``AuthChallenged``: the broker asks for fresh credentials (answer with
  ``send_auth_response``, allowed during the handshake too).

Commands are methods that queue bytes (``send_request`` for the ones the
broker answers by request id, ``send_command`` for the others); the driver
collects them with ``data_to_send()``. As the engine's driver requires,
``receive_data`` runs on one reading task without the driver's lock and
touches only the decoder and the correlator's pops; commands run under the
lock.
"""
from __future__ import annotations

import enum
from typing import Any

from msgengine.correlator import KeyedCorrelator, Pending

from pulsarfast.base.results import NotConnected, ProtocolError, from_server_error
from pulsarfast.wire import proto
from pulsarfast.wire.codec import DEFAULT_MAX_FRAME_SIZE, FrameDecoder, decode_message, encode_simple


class State(enum.Enum):
    INIT = "INIT"
    CONNECTING = "CONNECTING"
    READY = "READY"
    CLOSED = "CLOSED"


class Connected:
    __slots__ = ("server_version", "protocol_version", "max_message_size")

    def __init__(self, server_version: str, protocol_version: int, max_message_size: int) -> None:
        self.server_version = server_version
        self.protocol_version = protocol_version
        self.max_message_size = max_message_size


class ConnectFailed:
    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


class Answered:
    """A request's answer: ``result`` is the response record or an exception."""

    __slots__ = ("pending", "result")

    def __init__(self, pending: Pending, result: Any) -> None:
        self.pending = pending
        self.result = result


class SendReceipt:
    __slots__ = ("producer_id", "sequence_id", "message_id", "highest_sequence_id")

    def __init__(self, producer_id: int, sequence_id: int, message_id: Any, highest_sequence_id: int) -> None:
        self.producer_id = producer_id
        self.sequence_id = sequence_id
        self.message_id = message_id  # a proto MessageIdData record (or None)
        self.highest_sequence_id = highest_sequence_id


class SendError:
    __slots__ = ("producer_id", "sequence_id", "error")

    def __init__(self, producer_id: int, sequence_id: int, error: BaseException) -> None:
        self.producer_id = producer_id
        self.sequence_id = sequence_id
        self.error = error


class MessageReceived:
    """A MESSAGE frame. ``fields`` is ``codec.decode_message``'s tuple (the
    command's and the metadata's fields) when the checksum matched; when it
    did not, ``fields`` is None and only the ids are known (``ledger_id``,
    ``entry_id``); ``metadata`` and ``command`` (the CommandMessage's
    BaseCommand) stay serialized for the rare fields the tuple does not carry
    (the metadata's; the command's ``ack_set``, consumer.py)."""

    __slots__ = ("consumer_id", "ledger_id", "entry_id", "fields", "metadata", "payload", "checksum_ok", "command")

    def __init__(self, consumer_id: int, ledger_id: int, entry_id: int, fields: tuple | None, metadata: bytes,
                 payload: bytes, checksum_ok: bool, command: bytes = b"") -> None:
        self.command = command
        self.consumer_id = consumer_id
        self.ledger_id = ledger_id
        self.entry_id = entry_id
        self.fields = fields
        self.metadata = metadata
        self.payload = payload
        self.checksum_ok = checksum_ok


class ProducerClosed:
    __slots__ = ("producer_id",)

    def __init__(self, producer_id: int) -> None:
        self.producer_id = producer_id


class ConsumerClosed:
    __slots__ = ("consumer_id",)

    def __init__(self, consumer_id: int) -> None:
        self.consumer_id = consumer_id


class EndOfTopic:
    __slots__ = ("consumer_id",)

    def __init__(self, consumer_id: int) -> None:
        self.consumer_id = consumer_id


class ActiveConsumerChange:
    __slots__ = ("consumer_id", "is_active")

    def __init__(self, consumer_id: int, is_active: bool) -> None:
        self.consumer_id = consumer_id
        self.is_active = is_active


class TopicListChanged:
    """WATCH_TOPIC_UPDATE: topics of a watched namespace created or deleted."""

    __slots__ = ("watcher_id", "new_topics", "deleted_topics")

    def __init__(self, watcher_id: int, new_topics: list[str], deleted_topics: list[str]) -> None:
        self.watcher_id = watcher_id
        self.new_topics = new_topics
        self.deleted_topics = deleted_topics


class PingReceived:
    __slots__ = ()


PING_RECEIVED = PingReceived()


class AuthChallenged:
    """AUTH_CHALLENGE: the broker wants fresh authentication data (its
    ``challenge`` is the AuthData it sent: method name and data)."""

    __slots__ = ("method_name", "data")

    def __init__(self, method_name: str, data: bytes) -> None:
        self.method_name = method_name
        self.data = data
#: what a frame may hold beyond its message: the command and the metadata
FRAME_PADDING = 10 * 1024


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value

#: answers that carry a request_id, whatever their type
_ANSWERS = frozenset((
    proto.SUCCESS, proto.PRODUCER_SUCCESS, proto.PARTITIONED_METADATA_RESPONSE, proto.LOOKUP_RESPONSE,
    proto.GET_LAST_MESSAGE_ID_RESPONSE, proto.GET_TOPICS_OF_NAMESPACE_RESPONSE, proto.ACK_RESPONSE,
    proto.GET_SCHEMA_RESPONSE, proto.WATCH_TOPIC_LIST_SUCCESS, proto.TC_CLIENT_CONNECT_RESPONSE,
    proto.NEW_TXN_RESPONSE, proto.ADD_PARTITION_TO_TXN_RESPONSE, proto.ADD_SUBSCRIPTION_TO_TXN_RESPONSE,
    proto.END_TXN_RESPONSE,
))


class PulsarProtocol:
    """One connection's protocol state; see the module docstring."""

    def __init__(self, connect_command: bytes, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE, name: str = "") -> None:
        self.name = name
        self.state = State.INIT
        self._connect_command = connect_command
        self._decoder = FrameDecoder(max_frame_size)
        self._out: list[bytes] = []
        self.requests = KeyedCorrelator()
        self.server_version = ""
        self.protocol_version = 0
        self.max_message_size = 5 * 1024 * 1024
        #: the broker's CONNECTED says it takes WATCH_TOPIC_LIST (pattern subscriptions)
        self.supports_topic_watchers = False
        self.frames_received = 0

    # -- handshake ------------------------------------------------------------

    def start(self) -> None:
        """Queue CONNECT."""
        if self.state is not State.INIT:
            raise ProtocolError("connection %s already started" % self.name)
        self.state = State.CONNECTING
        self._out.append(encode_simple(self._connect_command))

    # -- receiving ------------------------------------------------------------

    def receive_data(self, data: Any) -> list:
        if self.state is State.CLOSED:
            return []
        events: list = []
        for command, metadata, payload, checksum_ok in self._decoder.feed(data):
            self.frames_received += 1
            if metadata is not None and checksum_ok:
                fields = decode_message(command, metadata)  # (the hot path: None if not a MESSAGE)
                if fields is not None:
                    events.append(MessageReceived(fields[0], fields[1], fields[2], fields, metadata, payload, True,
                                                  command))
                    continue
            kind, record = proto.decode_command(command)
            event = self._event(kind, record, metadata, payload, checksum_ok)
            if event is not None:
                events.append(event)
        return events

    def _event(self, kind: int, record: Any, metadata: Any, payload: Any, checksum_ok: bool) -> Any:
        if kind == proto.MESSAGE:
            if metadata is None or record.message_id is None:
                raise ProtocolError("MESSAGE frame without a payload or a message id")
            ids = record.message_id  # (a payload that failed its checksum: its metadata is not read)
            return MessageReceived(record.consumer_id, _signed(ids.ledgerId), _signed(ids.entryId), None, metadata,
                                   payload, checksum_ok)
        if kind == proto.SEND_RECEIPT:
            return SendReceipt(record.producer_id, record.sequence_id, record.message_id, record.highest_sequence_id)
        if kind in _ANSWERS:
            return self._answer(record.request_id, record)
        if kind == proto.PING:
            return PING_RECEIVED
        if kind == proto.PONG:
            return None
        if kind == proto.ERROR:
            return self._answer(record.request_id, from_server_error(record.error, record.message))
        if kind == proto.SEND_ERROR:
            return SendError(record.producer_id, record.sequence_id, from_server_error(record.error, record.message))
        if kind == proto.CLOSE_PRODUCER:
            return ProducerClosed(record.producer_id)
        if kind == proto.CLOSE_CONSUMER:
            return ConsumerClosed(record.consumer_id)
        if kind == proto.CONNECTED:
            if self.state is not State.CONNECTING:
                raise ProtocolError("CONNECTED received in state %s" % self.state.name)
            self.state = State.READY
            self.server_version = record.server_version
            self.protocol_version = record.protocol_version
            flags = record.feature_flags
            self.supports_topic_watchers = bool(flags is not None and flags.supports_topic_watchers)
            if record.max_message_size > 0:
                self.max_message_size = record.max_message_size
                # frames carry a message plus its command and metadata (the broker's own padding)
                self._decoder.max_frame_size = max(DEFAULT_MAX_FRAME_SIZE, record.max_message_size + FRAME_PADDING)
            return Connected(record.server_version, record.protocol_version, self.max_message_size)
        if kind == proto.AUTH_CHALLENGE:
            challenge = record.challenge
            if challenge is None:
                return AuthChallenged("", b"")
            return AuthChallenged(challenge.auth_method_name, challenge.auth_data)
        if kind == proto.REACHED_END_OF_TOPIC:
            return EndOfTopic(record.consumer_id)
        if kind == proto.ACTIVE_CONSUMER_CHANGE:
            return ActiveConsumerChange(record.consumer_id, record.is_active)
        if kind == proto.WATCH_TOPIC_UPDATE:
            return TopicListChanged(record.watcher_id, list(record.new_topics), list(record.deleted_topics))
        if kind == proto.TOPIC_MIGRATED:
            if record.resource_type == 0:
                return ProducerClosed(record.resource_id)
            return ConsumerClosed(record.resource_id)
        return None  # a command a client does not act on

    def _answer(self, request_id: int, result: Any) -> Any:
        if self.state is State.CONNECTING and isinstance(result, BaseException):
            # the broker refused CONNECT (its ERROR carries no request of ours)
            self.state = State.CLOSED
            return ConnectFailed(result)
        if isinstance(result, proto.Record) and getattr(result, "producer_ready", True) is False:
            return None  # the producer waits for exclusive access: the real answer comes later
        pending = self.requests.answer(request_id)
        if pending is None:
            return None  # the waiter gave up (timeout): a late answer is dropped
        return Answered(pending, result)

    # -- commands ---------------------------------------------------------------

    def new_request_id(self) -> int:
        return self.requests.next_id()

    def send_request(self, request_id: int, command: bytes, pending: Pending) -> None:
        """Queue a command the broker answers by its request id (a serialized BaseCommand)."""
        self._check_open()
        self.requests.expect(request_id, pending)
        self._out.append(encode_simple(command))

    def send_command(self, command: bytes) -> None:
        """Queue a serialized BaseCommand that gets no answer by request id (FLOW, ACK, PONG, ...)."""
        self._check_open()
        self._out.append(encode_simple(command))

    def send_frame(self, frame: bytes) -> None:
        """Queue a ready frame (a payload frame: SEND)."""
        self._check_open()
        self._out.append(frame)

    def send_frames(self, frames: list[bytes]) -> None:
        self._check_open()
        self._out.extend(frames)

    def send_auth_response(self, command: bytes) -> None:
        """Queue AUTH_RESPONSE: allowed while connecting (a challenge during the handshake) and once ready."""
        if self.state is not State.CONNECTING:
            self._check_open()
        self._out.append(encode_simple(command))

    def forget_request(self, request_id: int) -> None:
        self.requests.forget(request_id)

    def _check_open(self) -> None:
        if self.state is not State.READY:
            raise NotConnected("connection %s is %s" % (self.name, self.state.name.lower()))

    # -- the driver's side --------------------------------------------------------

    def data_to_send(self) -> bytes:
        out = self._out
        if not out:
            return b""
        data = out[0] if len(out) == 1 else b"".join(out)
        self._out = []
        return data

    def flush_due(self) -> bool:
        return bool(self._out)

    def waiting_answers(self) -> int:
        return len(self.requests)

    def close(self) -> list[Pending]:
        """The connection is going away: the requests that still wait."""
        self.state = State.CLOSED
        self._out = []
        return self.requests.drain()


__all__ = [
    "State", "PulsarProtocol", "Connected", "ConnectFailed", "Answered", "SendReceipt", "SendError",
    "MessageReceived", "ProducerClosed", "ConsumerClosed", "EndOfTopic", "ActiveConsumerChange", "PingReceived",
    "AuthChallenged", "TopicListChanged",
]
