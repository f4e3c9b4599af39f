"""The NSQ protocol of one connection, without I/O (in the manner of h11).

``NsqProtocol`` takes the bytes nsqd sent (``receive_data``) and returns
events; commands (``send_request``, ``fin``, ``send_rdy``, ...) put bytes into its
outgoing buffer, which its driver takes with ``data_to_send()``. It owns:

- the handshake states: magic and IDENTIFY, feature negotiation, the two
  upgrade points (TLS, then snappy/deflate, where the driver must change the
  byte stream under it before more bytes are fed), AUTH, and SUB;
- the FIFO that pairs nsqd's in-order answers with the requests waiting for
  them (``msgengine.correlator``);
- the connection's RDY and in-flight counts, the one copy (``credit``, a
  ``nsq.rdy.RdyCount`` that the Reader's flow control reads);
- the flush policy: answers (FIN/REQ/RDY) may wait in the buffer while a
  batch of handler calls runs (``hold_answers``); requests, TOUCH and the
  NOP that answers a heartbeat (``send_nop``) never wait.

It touches no socket, clock or thread and is not thread-safe: its driver
(``nsq.conn.Connection``) serializes commands under a lock. ``receive_data``
runs on the one reading task without it: it only pops answers (a deque) and
adds to ``credit.arrived`` (that task's count alone), and queues nothing.
"""
from __future__ import annotations

import enum
import json
import logging
from typing import Any, Callable, Hashable

from msgengine.correlator import FifoCorrelator, Pending

from nsq import codec
from nsq.errors import (
    AuthError,
    ConfigError,
    ConnectionClosedError,
    FeatureNegotiationError,
    FinFailedError,
    ProtocolError,
    ReqFailedError,
    ServerError,
    TouchFailedError,
    server_error,
)
from nsq.rdy import DEFAULT_MAX_RDY_COUNT, RdyCount

logger = logging.getLogger(__name__)

HEARTBEAT = b"_heartbeat_"
OK = b"OK"
CLOSE_WAIT = b"CLOSE_WAIT"
#: The largest delay (ms) nsqd reads without wrapping: it parses a delay as a
#: uint64 of milliseconds and multiplies it into an int64 of nanoseconds.
MAX_DELAY_MS = (2**63 - 1) // 1_000_000

_FRAME_MESSAGE = codec.FRAME_TYPE_MESSAGE
_FRAME_RESPONSE = codec.FRAME_TYPE_RESPONSE
_ANSWER_FAILURES = (FinFailedError, ReqFailedError, TouchFailedError)


class State(enum.Enum):
    INIT = "INIT"
    IDENTIFYING = "IDENTIFYING"  # magic and IDENTIFY sent
    TLS_UPGRADE = "TLS_UPGRADE"  # the driver must run the TLS handshake, then call tls_established()
    TLS_CONFIRM = "TLS_CONFIRM"  # waiting for the OK inside TLS
    COMPRESSION_UPGRADE = "COMPRESSION_UPGRADE"  # the driver must wrap the stream, then call compression_established()
    COMPRESSION_CONFIRM = "COMPRESSION_CONFIRM"  # waiting for the compressed OK
    AUTHENTICATING = "AUTHENTICATING"  # AUTH sent
    READY = "READY"  # handshake done: commands flow
    CLOSING = "CLOSING"  # nsqd answered CLS with CLOSE_WAIT
    CLOSED = "CLOSED"


HANDSHAKE_STATES = frozenset(
    {
        State.IDENTIFYING,
        State.TLS_UPGRADE,
        State.TLS_CONFIRM,
        State.COMPRESSION_UPGRADE,
        State.COMPRESSION_CONFIRM,
        State.AUTHENTICATING,
    }
)
_OPEN = (State.READY, State.CLOSING)


# -- events -------------------------------------------------------------------


class Event:
    __slots__: tuple[str, ...] = ()

    def __repr__(self) -> str:
        fields = ", ".join("%s=%r" % (name, getattr(self, name)) for name in self.__slots__)
        return "%s(%s)" % (type(self).__name__, fields)


class Identified(Event):
    """nsqd answered IDENTIFY; ``features`` is its JSON answer ({} for a bare OK)."""

    __slots__ = ("features",)

    def __init__(self, features: dict[str, Any]) -> None:
        self.features = features


class UpgradeTLS(Event):
    """Run the TLS handshake on the socket now, then call ``tls_established()``."""

    __slots__ = ()


class UpgradeCompression(Event):
    """Wrap the stream in ``kind`` ("snappy" or "deflate", at ``level``) now,
    then call ``compression_established()``."""

    __slots__ = ("kind", "level")

    def __init__(self, kind: str, level: int) -> None:
        self.kind = kind
        self.level = level


class Authenticated(Event):
    """nsqd accepted AUTH; ``identity`` is its JSON answer."""

    __slots__ = ("identity",)

    def __init__(self, identity: dict[str, Any]) -> None:
        self.identity = identity


class Ready(Event):
    """The handshake is done."""

    __slots__ = ()


class MessagesReceived(Event):
    """Messages of one read, as built by the protocol's message factory."""

    __slots__ = ("messages",)

    def __init__(self, messages: list) -> None:
        self.messages = messages


class ResponseReceived(Event):
    """A response frame; ``pending`` is the request it answers (None if none waited)."""

    __slots__ = ("data", "pending")

    def __init__(self, data: bytes, pending: Pending | None) -> None:
        self.data = data
        self.pending = pending


class ErrorReceived(Event):
    """An error frame; ``pending`` is the request it answers (None for a
    failed FIN/REQ/TOUCH, which nsqd answers only when they fail)."""

    __slots__ = ("error", "pending")

    def __init__(self, error: ServerError, pending: Pending | None) -> None:
        self.error = error
        self.pending = pending


class HeartbeatReceived(Event):
    """nsqd's heartbeat: answer it with ``send_nop()``."""

    __slots__ = ()


def _raw_message(timestamp: int, attempts: int, message_id: bytes, body: bytes) -> tuple:
    return (timestamp, attempts, message_id, body)


class NsqProtocol:
    """The protocol state of one NSQ connection; see the module docstring.

    ``identify`` is the IDENTIFY body; ``tls_v1``, ``snappy``, ``deflate``
    (with ``deflate_level``) and ``auth_secret`` say what to negotiate;
    ``message_factory(timestamp, attempts, id, body)`` builds what
    ``MessagesReceived`` carries; ``name`` goes into error texts.
    """

    def __init__(
        self,
        identify: dict[str, Any],
        *,
        tls_v1: bool = False,
        snappy: bool = False,
        deflate: bool = False,
        deflate_level: int = 6,
        auth_secret: bytes | str | None = None,
        max_frame_size: int = codec.DEFAULT_MAX_FRAME_SIZE,
        message_factory: Callable[[int, int, bytes, bytes], Any] = _raw_message,
        name: str = "nsqd",
        key: Hashable = None,
    ) -> None:
        self.name = name
        self.state = State.INIT
        self.features: dict[str, Any] = {}
        self.auth_identity: dict[str, Any] | None = None
        self.credit = RdyCount(key if key is not None else name, DEFAULT_MAX_RDY_COUNT)
        self.subscribed = False
        self._identify = identify
        self._tls_v1 = tls_v1
        self._compression = "snappy" if snappy else "deflate" if deflate else None
        self._deflate_level = deflate_level
        self._auth_secret = auth_secret
        self._max_frame_size = max_frame_size
        self._decoder = codec.FrameDecoder(max_frame_size)
        self._message_factory = message_factory
        self._answers = FifoCorrelator()
        self._expect = self._answers.expect
        self._out: list[bytes] = []
        self._urgent = False  # a request waits in _out: flush regardless of a hold
        self._holds = 0
        self._exact_size: int | None = None  # during exact reads: the size of the frame whose head came
        self._exact_head = b""

    # -- views --------------------------------------------------------------

    @property
    def max_rdy_count(self) -> int:
        return self.credit.max_credit

    @property
    def rdy(self) -> int:
        return self.credit.credit

    @property
    def in_flight(self) -> int:
        return self.credit.in_flight

    def is_open(self) -> bool:
        """Commands may be sent (the handshake is done and the connection is not closed)."""
        return self.state in _OPEN

    def buffered_bytes(self) -> int:
        """Bytes of a frame received in part (waiting for the rest)."""
        return self._decoder.buffered

    def waiting_answers(self) -> int:
        return len(self._answers)

    def bytes_wanted(self) -> int | None:
        """How many bytes the driver must read next, exactly, or None for
        "whatever arrives". Exact reads are needed before an upgrade point:
        the bytes after it belong to the next layer."""
        if not self._upgrade_follows():
            return None
        return 4 if self._exact_size is None else self._exact_size

    def _upgrade_follows(self) -> bool:
        if self.state is State.IDENTIFYING:
            return self._tls_v1 or self._compression is not None
        if self.state is State.TLS_CONFIRM:
            return self._compression is not None
        return False

    # -- handshake ------------------------------------------------------------

    def start(self) -> None:
        """Queue the magic and IDENTIFY."""
        if self.state is not State.INIT:
            raise ProtocolError("the handshake with nsqd %s has already started" % (self.name,))
        self.state = State.IDENTIFYING
        self._out.append(codec.MAGIC_V2 + codec.encode_identify(self._identify))
        self._urgent = True

    def tls_established(self) -> None:
        self._expect_state(State.TLS_UPGRADE)
        self.state = State.TLS_CONFIRM

    def compression_established(self) -> None:
        self._expect_state(State.COMPRESSION_UPGRADE)
        self.state = State.COMPRESSION_CONFIRM

    def _expect_state(self, state: State) -> None:
        if self.state is not state:
            raise ProtocolError("nsqd %s: expected state %s, in %s" % (self.name, state.value, self.state.value))

    def _handshake_frame(self, frame_type: int, data: Any, events: list) -> None:
        if frame_type != _FRAME_RESPONSE:
            if frame_type == codec.FRAME_TYPE_ERROR:
                raise server_error(data)
            raise ProtocolError("expected a response frame during the handshake, got frame type %d" % frame_type)
        if data == HEARTBEAT:  # nsqd's heartbeat ticker runs while it waits on an auth server
            events.append(HeartbeatReceived())
            return
        state = self.state
        if state is State.IDENTIFYING:
            self._on_identify_response(data, events)
        elif state is State.TLS_CONFIRM:
            self._expect_ok(data, "TLS")
            self._after_tls(events)
        elif state is State.COMPRESSION_CONFIRM:
            self._expect_ok(data, self._compression or "compression")
            self._after_compression(events)
        elif state is State.AUTHENTICATING:
            self._on_auth_response(data, events)
        else:
            raise ProtocolError("nsqd %s sent a frame while the stream was being upgraded" % (self.name,))

    def _on_identify_response(self, data: Any, events: list) -> None:
        if data == OK:
            features: dict[str, Any] = {}
        else:
            try:
                features = json.loads(bytes(data))
            except ValueError as exc:
                raise ProtocolError("IDENTIFY response is neither OK nor JSON: %r" % (bytes(data[:100]),)) from exc
            if not isinstance(features, dict):
                raise ProtocolError("IDENTIFY response is JSON but not an object: %r" % (bytes(data[:100]),))
        max_rdy_count = features.get("max_rdy_count", DEFAULT_MAX_RDY_COUNT)
        if isinstance(max_rdy_count, bool) or not isinstance(max_rdy_count, int) or max_rdy_count < 1:
            raise ProtocolError("IDENTIFY response has a bad max_rdy_count: %r" % (max_rdy_count,))
        self.features = features
        self.credit.max_credit = max_rdy_count
        events.append(Identified(features))
        if self._tls_v1:
            self._require_feature("tls_v1")
            self.state = State.TLS_UPGRADE
            events.append(UpgradeTLS())
            return
        self._after_tls(events)

    def _after_tls(self, events: list) -> None:
        kind = self._compression
        if kind is not None:
            self._require_feature(kind)
            self.state = State.COMPRESSION_UPGRADE
            events.append(UpgradeCompression(kind, self._deflate_level))
            return
        self._after_compression(events)

    def _after_compression(self, events: list) -> None:
        if self.features.get("auth_required"):
            # The secret goes into the AUTH command only: never into logs, events or errors.
            if not self._auth_secret:
                raise AuthError("nsqd %s requires AUTH but no auth_secret was given" % (self.name,), code="E_AUTH_REQUIRED")
            self.state = State.AUTHENTICATING
            self._out.append(codec.encode_auth(self._auth_secret))
            self._urgent = True
            return
        if self._auth_secret:
            logger.warning("[%s] auth_secret given but nsqd does not require AUTH; not sending it", self.name)
        self._ready(events)

    def _on_auth_response(self, data: Any, events: list) -> None:
        try:
            identity = json.loads(bytes(data))
        except ValueError as exc:
            raise ProtocolError("AUTH response from nsqd %s is not JSON" % (self.name,)) from exc
        if not isinstance(identity, dict):
            raise ProtocolError("AUTH response from nsqd %s is not a JSON object" % (self.name,))
        self.auth_identity = identity
        events.append(Authenticated(identity))
        self._ready(events)

    def _ready(self, events: list) -> None:
        self.state = State.READY
        events.append(Ready())

    def _require_feature(self, name: str) -> None:
        if self.features.get(name):
            return
        if not self.features:
            why = "it answered IDENTIFY without feature negotiation (nsqd older than 0.2.20?)"
        else:
            flags = {"tls_v1": "--tls-cert and --tls-key", "snappy": "--snappy", "deflate": "--deflate"}
            why = "its IDENTIFY response has %s=%s; start nsqd with %s" % (
                name, json.dumps(self.features.get(name, False)), flags.get(name, "the matching flag")
            )
        raise FeatureNegotiationError("%s was requested but nsqd %s does not offer it: %s" % (name, self.name, why))

    def _expect_ok(self, data: Any, what: str) -> None:
        if data != OK:
            raise ProtocolError(
                "expected OK after %s negotiation with nsqd %s, got %r" % (what, self.name, bytes(data[:100]))
            )

    # -- bytes in -------------------------------------------------------------

    def receive_data(self, data: Any) -> list[Event]:
        """Feed bytes nsqd sent; returns the events they complete. Raises
        an nsq.Error (a ServerError, ProtocolError, FeatureNegotiationError,
        AuthError) when the handshake fails or the stream is corrupt."""
        state = self.state
        if state is State.READY or state is State.CLOSING:
            frames = self._decoder.feed(data)
            return self._dispatch(frames) if frames else []
        if state is State.CLOSED:
            return []
        if state is State.INIT or state is State.TLS_UPGRADE or state is State.COMPRESSION_UPGRADE:
            raise ProtocolError("nsqd %s sent bytes while the client was to upgrade the stream (state %s)"
                                % (self.name, state.value))
        return self._receive_handshake(data)

    def _receive_handshake(self, data: Any) -> list[Event]:
        events: list[Event] = []
        if self._upgrade_follows():
            data = self._exact(data)
            if data is None:
                return events
        frames = self._decoder.feed(data)
        for index, (frame_type, payload) in enumerate(frames):
            if self.state not in HANDSHAKE_STATES:  # the handshake finished inside this read
                events.extend(self._dispatch(frames[index:]))
                break
            self._handshake_frame(frame_type, payload, events)
            if self.state in (State.TLS_UPGRADE, State.COMPRESSION_UPGRADE) and (
                index + 1 < len(frames) or self._decoder.buffered
            ):
                raise ProtocolError("nsqd %s sent bytes past an upgrade point (state %s)" % (self.name, self.state.value))
        return events

    def _exact(self, data: Any) -> Any:
        """Exact reads: a 4-byte head, then exactly the frame it announces."""
        if self._exact_size is None:
            if len(data) != 4:
                raise ProtocolError("nsqd %s: the handshake needs exact reads here, got %d bytes" % (self.name, len(data)))
            size = int.from_bytes(bytes(data), "big")
            if not 4 <= size <= self._max_frame_size:
                raise ProtocolError(
                    "nsqd %s sent a %d-byte frame during the handshake; is this an nsqd TCP port?" % (self.name, size)
                )
            self._exact_size = size
            self._exact_head = bytes(data)
            return None
        if len(data) != self._exact_size:
            raise ProtocolError("nsqd %s: expected exactly %d bytes, got %d" % (self.name, self._exact_size, len(data)))
        self._exact_size = None
        return self._exact_head + bytes(data)

    def _dispatch(self, frames: list) -> list[Event]:
        events: list[Event] = []
        messages: list | None = None
        make = self._message_factory
        for frame_type, data in frames:
            if frame_type == _FRAME_MESSAGE:
                message = make(*data)
                if messages is None:
                    messages = [message]
                else:
                    messages.append(message)
            elif frame_type == _FRAME_RESPONSE:
                if data == HEARTBEAT:
                    events.append(HeartbeatReceived())  # the driver answers it with send_nop()
                    continue
                if data == CLOSE_WAIT:
                    self.state = State.CLOSING
                answers = self._answers
                events.append(ResponseReceived(data, answers.popleft() if answers else None))
            else:
                error = server_error(data)
                # nsqd answers FIN/REQ/TOUCH only when they fail: such an error answers no request
                answers = self._answers
                pending = None if isinstance(error, _ANSWER_FAILURES) or not answers else answers.popleft()
                events.append(ErrorReceived(error, pending))
        if messages is not None:
            self.credit.arrived += len(messages)  # (this task is its only writer)
            events.append(MessagesReceived(messages))
        return events

    # -- bytes out ------------------------------------------------------------

    def data_to_send(self) -> bytes:
        """Everything queued, as one write (b"" when nothing is)."""
        out = self._out
        if not out:
            return b""
        data = out[0] if len(out) == 1 else b"".join(out)
        out.clear()
        self._urgent = False
        return data

    def has_data(self) -> bool:
        return bool(self._out)

    def flush_due(self) -> bool:
        """The buffer should be written now: it holds a request, or answers
        while no batch holds them back."""
        return bool(self._out) and (self._urgent or not self._holds)

    def hold_answers(self) -> None:
        """Answers queued from now on wait for release_answers() (or a request)."""
        self._holds += 1

    def release_answers(self) -> None:
        if self._holds > 0:
            self._holds -= 1

    def answers_held(self) -> bool:
        return self._holds > 0

    def _check_open(self) -> None:
        if self.state is not State.READY and self.state is not State.CLOSING:
            raise ConnectionClosedError("connection to nsqd %s is %s" % (self.name, public_state(self.state).lower()))

    def send_request(self, data: bytes, pending: Pending | None) -> None:
        """Queue a command nsqd answers (PUB, MPUB, DPUB, SUB, CLS, ...);
        ``pending`` gets the answer (None: the answer is dropped)."""
        state = self.state
        if state is not State.READY and state is not State.CLOSING:
            self._check_open()
        self._out.append(data)
        self._expect(pending if pending is not None else Pending())
        self._urgent = True

    def send_nop(self) -> None:
        """Queue the NOP that answers a heartbeat (valid at any point after the magic)."""
        if self.state is State.INIT or self.state is State.CLOSED:
            raise ConnectionClosedError("connection to nsqd %s is %s" % (self.name, public_state(self.state).lower()))
        self._out.append(codec.encode_nop())
        self._urgent = True

    def send_unanswered(self, data: bytes) -> None:
        """Queue a command nsqd does not answer unless it fails (NOP and the like)."""
        self._check_open()
        self._out.append(data)
        self._urgent = True

    def subscribe(self, topic: str, channel: str, pending: Pending | None) -> None:
        if self.subscribed:
            raise ProtocolError("connection to nsqd %s is already subscribed" % (self.name,))
        self.send_request(codec.encode_sub(topic, channel), pending)
        self.subscribed = True

    def cls(self, pending: Pending | None) -> None:
        self.send_request(codec.encode_cls(), pending)

    def send_rdy(self, count: int) -> None:
        """Queue RDY count (an answer: it waits under a hold)."""
        self._check_open()
        credit = self.credit
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ConfigError("RDY count must be a non-negative int, not %r" % (count,))
        if count > credit.max_credit:
            raise ConfigError("RDY %d exceeds nsqd %s's max_rdy_count of %d" % (count, self.name, credit.max_credit))
        self._out.append(codec.encode_rdy(count))
        credit.grant(count)

    def _answered(self, count: int) -> None:
        self.credit.answer(count)

    def fin(self, message_id: bytes) -> None:
        self._check_open()
        self._out.append(codec.encode_fin(message_id))
        self._answered(1)

    def fin_many(self, message_ids: list[bytes]) -> None:
        self._check_open()
        if not message_ids:
            return
        self._out.append(codec.encode_fin_many(message_ids))
        self._answered(len(message_ids))

    def req(self, message_id: bytes, delay_ms: int) -> None:
        self._check_open()
        # nsqd caps a REQ delay at its --max-req-timeout, but only if the number
        # did not wrap around on the way: cap it first.
        self._out.append(codec.encode_req(message_id, min(max(int(delay_ms), 0), MAX_DELAY_MS)))
        self._answered(1)

    def touch(self, message_id: bytes) -> None:
        """Queue TOUCH: not held back by a batch (the handler asked for time now)."""
        self._check_open()
        self._out.append(codec.encode_touch(message_id))
        self._urgent = True

    def message_lost(self, count: int = 1) -> None:
        """Messages that will not be answered on this connection (it is closing)."""
        self._answered(count)

    # -- closing --------------------------------------------------------------

    def close(self) -> list[Pending]:
        """The connection is gone: no more commands; returns the requests
        that will never be answered (the caller fails them)."""
        self.state = State.CLOSED
        self._out.clear()
        self._urgent = False
        return self._answers.drain()


def public_state(state: State) -> str:
    """pynsq's connection state names for a protocol state."""
    if state is State.INIT:
        return "INIT"
    if state in HANDSHAKE_STATES:
        return "CONNECTING"
    if state is State.READY:
        return "CONNECTED"
    return state.value
