# One connection to one nsqd: the handshake (magic, IDENTIFY, TLS, compression,
# AUTH), a reader task that feeds the codec and dispatches frames, heartbeat
# answers and dead-peer detection, coalesced writes, and the FIFO that pairs
# nsqd's in-order responses with the commands waiting for them.
from __future__ import annotations

import collections
import json
import logging
import socket
import ssl
from typing import Any, Callable, Mapping

from . import codec, events
from .errors import (
    AuthError,
    ConfigError,
    ConnectionClosedError,
    Error,
    FeatureNegotiationError,
    ForkedError,
    FinFailedError,
    ProtocolError,
    ReqFailedError,
    ServerError,
    TouchFailedError,
    server_error,
)
from .message import Message
from .runtime import Backend, get_backend, monotonic, on_fork_in_child
from .transport import (
    DEFAULT_READ_SIZE,
    DeflateStream,
    PlainStream,
    SnappyStream,
    TLSStream,
    import_snappy,
    make_ssl_context,
)
from .version import __version__

logger = logging.getLogger(__name__)

DEFAULT_USER_AGENT = "nsqfast/%s" % __version__
DEFAULT_MAX_RDY_COUNT = 2500
#: The largest delay (ms) nsqd reads without wrapping: it parses a delay as a
#: uint64 of milliseconds and multiplies it into an int64 of nanoseconds.
MAX_DELAY_MS = (2**63 - 1) // 1_000_000
HEARTBEAT = b"_heartbeat_"
OK = b"OK"
CLOSE_WAIT = b"CLOSE_WAIT"

INIT, CONNECTING, CONNECTED, CLOSING, CLOSED = "INIT", "CONNECTING", "CONNECTED", "CLOSING", "CLOSED"

Callback = Callable[["Connection", Any], None]


class Pending:
    """A command waiting for its response: a callback, or an event (anything
    with set()) to wake a blocked caller. ``deadline`` is for whoever expires it."""

    __slots__ = ("callback", "event", "result", "deadline")

    def __init__(self, callback: Callback | None = None, event: Any = None, deadline: float = 0.0) -> None:
        self.callback = callback
        self.event = event
        self.result: Any = None
        self.deadline = deadline

    def resolve(self, conn: "Connection", result: Any) -> None:
        """The answer (bytes, or an nsq.Error) arrived: call back, then wake the waiter."""
        self.result = result
        if self.callback is not None:
            try:
                self.callback(conn, result)
            except Exception:
                logger.exception("[%s] callback raised", conn.id)
        if self.event is not None:
            self.event.set()


def _validated_settings(
    heartbeat_interval: float | None,
    snappy: bool,
    deflate: bool,
    deflate_level: int,
    sample_rate: int,
    msg_timeout: float | None,
    requeue_delay: float,
    max_requeue_delay: float,
) -> None:
    if snappy and deflate:
        raise ConfigError("snappy and deflate cannot both be enabled on one connection")
    if not isinstance(deflate_level, int) or not 1 <= deflate_level <= 9:
        raise ConfigError("deflate_level must be an int from 1 to 9, not %r" % (deflate_level,))
    if not isinstance(sample_rate, int) or not 0 <= sample_rate <= 99:
        raise ConfigError("sample_rate must be an int from 0 to 99, not %r" % (sample_rate,))
    if heartbeat_interval is not None and heartbeat_interval != -1 and not heartbeat_interval >= 1:
        raise ConfigError("heartbeat_interval must be at least 1 second (or -1 to disable), not %r" % (heartbeat_interval,))
    if msg_timeout is not None and (isinstance(msg_timeout, bool) or not isinstance(msg_timeout, (int, float)) or msg_timeout <= 0):
        raise ConfigError("msg_timeout must be a positive number of seconds, not %r" % (msg_timeout,))
    for name, value in (("requeue_delay", requeue_delay), ("max_requeue_delay", max_requeue_delay)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ConfigError("%s must be a non-negative number of seconds, not %r" % (name, value))


class Connection(events.EventedMixin):
    """A connection to one nsqd, usable on gevent or threads.

    ``connect()`` blocks until the handshake is done; afterwards a reader task
    dispatches frames. Messages go to ``message_sink(conn, messages)`` when set
    (the Reader does this), otherwise to the ``message`` event one by one.
    """

    def __init__(
        self,
        host: str,
        port: int,
        timeout: float = 1.0,
        heartbeat_interval: float = 30,
        requeue_delay: float = 90,
        tls_v1: bool = False,
        tls_options: Mapping[str, Any] | Any = None,
        snappy: bool = False,
        deflate: bool = False,
        deflate_level: int = 6,
        user_agent: str = DEFAULT_USER_AGENT,
        output_buffer_size: int = 16 * 1024,
        output_buffer_timeout: int = 250,
        sample_rate: int = 0,
        io_loop: Any = None,
        auth_secret: bytes | str | None = None,
        msg_timeout: float | None = None,
        hostname: str | None = None,
        client_id: str | None = None,
        topology_zone: str | None = None,
        topology_region: str | None = None,
        max_requeue_delay: float = 900,
        max_frame_size: int = codec.DEFAULT_MAX_FRAME_SIZE,
        read_size: int = DEFAULT_READ_SIZE,
        backend: str | Backend = "auto",
    ) -> None:
        _validated_settings(
            heartbeat_interval, snappy, deflate, deflate_level, sample_rate, msg_timeout, requeue_delay, max_requeue_delay
        )
        if not isinstance(port, int) or not 0 < port < 65536:
            raise ConfigError("port must be an int from 1 to 65535, not %r" % (port,))
        self.host = host
        self.port = port
        self.timeout = timeout
        self.heartbeat_interval = heartbeat_interval
        self.requeue_delay = requeue_delay
        self.max_requeue_delay = max_requeue_delay
        self.tls_v1 = tls_v1
        self.tls_options = tls_options
        self.snappy = snappy
        self.deflate = deflate
        self.deflate_level = deflate_level
        self.user_agent = user_agent
        self.output_buffer_size = output_buffer_size
        self.output_buffer_timeout = output_buffer_timeout
        self.sample_rate = sample_rate
        self._auth_secret = auth_secret
        self.msg_timeout = msg_timeout
        self.hostname = hostname or socket.gethostname()
        self.client_id = client_id or self.hostname.split(".")[0]
        self.topology_zone = topology_zone
        self.topology_region = topology_region
        self.max_frame_size = max_frame_size
        self.read_size = read_size
        self.backend = get_backend(backend)
        if tls_v1:
            self._ssl_context = make_ssl_context(tls_options)
        if snappy:
            import_snappy()  # a missing python-snappy fails here, not mid-handshake

        self.state = INIT
        self.features: dict[str, Any] = {}
        self.max_rdy_count = DEFAULT_MAX_RDY_COUNT
        self.auth_identity: dict[str, Any] | None = None
        self.in_flight = 0
        self.rdy = 0
        self.last_rdy = 0
        self.last_recv_timestamp = 0.0
        self.last_msg_timestamp = 0.0
        self.close_error: BaseException | None = None
        self.message_sink: Callable[["Connection", list[Message]], None] | None = None
        # Called after each FIN/REQ with success True (FIN), False (REQ with
        # backoff) or None (REQ without backoff).
        self.response_listener: Callable[["Connection", Message, bool | None], None] | None = None

        self._stream: Any = None
        self._decoder = codec.FrameDecoder(max_frame_size)
        self._early_frames: collections.deque = collections.deque()
        self._lock = self.backend.lock()
        self._out: list[bytes] = []
        self._writing = False
        self._waiters: collections.deque[Pending] = collections.deque()
        self._closed = self.backend.event()
        self._reader_task: Any = None
        on_fork_in_child(self)

    # -- introspection --------------------------------------------------

    @property
    def id(self) -> str:
        return "%s:%d" % (self.host, self.port)

    def __str__(self) -> str:
        return self.id

    def __repr__(self) -> str:
        return "<nsq.Connection %s %s rdy=%d in_flight=%d>" % (self.id, self.state, self.rdy, self.in_flight)

    def is_connected(self) -> bool:
        return self.state == CONNECTED

    def connected(self) -> bool:
        return self.state == CONNECTED

    def closed(self) -> bool:
        return self.state == CLOSED

    # -- handshake ------------------------------------------------------

    def identify_data(self) -> dict[str, Any]:
        heartbeat = self.heartbeat_interval
        data: dict[str, Any] = {
            "client_id": self.client_id,
            "hostname": self.hostname,
            "feature_negotiation": True,
            "heartbeat_interval": -1 if heartbeat in (None, -1) else int(heartbeat * 1000),
            "output_buffer_size": self.output_buffer_size,
            "output_buffer_timeout": self.output_buffer_timeout,
            "tls_v1": bool(self.tls_v1),
            "snappy": bool(self.snappy),
            "deflate": bool(self.deflate),
            "deflate_level": self.deflate_level,
            "sample_rate": self.sample_rate,
            "user_agent": self.user_agent,
        }
        if self.msg_timeout is not None:
            data["msg_timeout"] = int(self.msg_timeout * 1000)
        if self.topology_zone is not None:
            data["topology_zone"] = self.topology_zone
        if self.topology_region is not None:
            data["topology_region"] = self.topology_region
        return data

    def connect(self) -> None:
        """Open the socket and negotiate; raises on any failure (and closes)."""
        if self.state != INIT:
            raise Error("connection %s was already used (state %s); make a new one" % (self.id, self.state))
        self.state = CONNECTING
        try:
            sock = self.backend.create_connection((self.host, self.port), self.timeout)
        except OSError as exc:
            self.state = CLOSED
            self.close_error = exc
            self._closed.set()
            raise ConnectionClosedError("cannot connect to nsqd %s: %s" % (self.id, exc)) from exc
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._stream = PlainStream(sock, self.read_size)
            self._handshake(sock)
        except BaseException as exc:
            self._close_now(exc)
            if isinstance(exc, ssl.SSLError):
                raise ConnectionClosedError("TLS handshake with nsqd %s failed: %s" % (self.id, exc)) from exc
            if isinstance(exc, (socket.timeout, OSError, EOFError)):
                raise ConnectionClosedError("handshake with nsqd %s failed: %s" % (self.id, exc)) from exc
            raise
        # Dead-peer detection is a watchdog on last_recv_timestamp, not a socket
        # timeout: under gevent a timeout costs a timer object per blocking read.
        self._stream.settimeout(None)
        self.last_recv_timestamp = monotonic()
        self.state = CONNECTED
        self._reader_task = self.backend.spawn(self._read_loop)
        if self._read_timeout() is not None:
            self.backend.spawn(self._watchdog)
        self.trigger(events.CONNECT, conn=self)

    def _handshake(self, sock: socket.socket) -> None:
        # Order as nsqd upgrades: IDENTIFY response, then TLS (handshake, then an
        # OK inside TLS), then compression (an OK already compressed), then AUTH.
        # The IDENTIFY response and the TLS OK are read byte-exactly: the bytes
        # after each belong to the next layer (nsqd sends the compressed OK right
        # after the TLS OK); frames that come after the compressed OK in the same
        # read are kept for the reader task.

        stream = self._stream
        stream.send(codec.MAGIC_V2 + codec.encode_identify(self.identify_data()))
        frame_type, data = self._read_frame_sync(exact=True)
        self._raise_if_error(frame_type, data)
        self._apply_features(data)
        if self.tls_v1:
            self._require_feature("tls_v1")
            tls = TLSStream(sock, self._ssl_context, self.host, self.read_size)
            tls.handshake()  # ssl.SSLError (an OSError) when a certificate is refused
            self._stream = stream = tls
            self._expect_ok("TLS", exact=True)
            logger.debug("[%s] TLS established: %s %s", self.id, tls.version(), (tls.cipher() or ("?",))[0])
        if self.snappy:
            self._require_feature("snappy")
            self._stream = SnappyStream(stream)
            self._expect_ok("snappy")
        elif self.deflate:
            self._require_feature("deflate")
            self._stream = DeflateStream(stream, self.deflate_level)
            self._expect_ok("deflate")
        if self.features.get("auth_required"):
            self._authenticate()
        elif self._auth_secret:
            logger.warning("[%s] auth_secret given but nsqd does not require AUTH; not sending it", self.id)
        self._stream.settimeout(self._read_timeout())

    def _apply_features(self, data: bytes) -> None:
        if data == OK:
            features: dict[str, Any] = {}
        else:
            try:
                features = json.loads(data)
            except ValueError as exc:
                raise ProtocolError("IDENTIFY response is neither OK nor JSON: %r" % (bytes(data[:100]),)) from exc
            if not isinstance(features, dict):
                raise ProtocolError("IDENTIFY response is JSON but not an object: %r" % (bytes(data[:100]),))
        self.features = features
        self.max_rdy_count = int(features.get("max_rdy_count", DEFAULT_MAX_RDY_COUNT))
        self.trigger(events.IDENTIFY_RESPONSE, conn=self, data=features)

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
        raise FeatureNegotiationError("%s was requested but nsqd %s does not offer it: %s" % (name, self.id, why))

    def _expect_ok(self, what: str, exact: bool = False) -> None:
        frame_type, data = self._read_frame_sync(exact)
        self._raise_if_error(frame_type, data)
        if data != OK:
            raise ProtocolError("expected OK after %s negotiation with nsqd %s, got %r" % (what, self.id, bytes(data[:100])))

    def _authenticate(self) -> None:
        # The secret goes into the AUTH command only: never into logs, events or errors.
        if not self._auth_secret:
            raise AuthError("nsqd %s requires AUTH but no auth_secret was given" % (self.id,), code="E_AUTH_REQUIRED")
        self._stream.send(codec.encode_auth(self._auth_secret))
        frame_type, data = self._read_frame_sync()
        self._raise_if_error(frame_type, data)
        try:
            identity = json.loads(data)
        except ValueError as exc:
            raise ProtocolError("AUTH response from nsqd %s is not JSON" % (self.id,)) from exc
        if not isinstance(identity, dict):
            raise ProtocolError("AUTH response from nsqd %s is not a JSON object" % (self.id,))
        self.auth_identity = identity
        logger.debug(
            "[%s] authenticated as %r (%s permissions)", self.id, identity.get("identity"), identity.get("permission_count")
        )
        self.trigger(events.AUTH, conn=self, data=identity)

    def _read_frame_sync(self, exact: bool = False) -> tuple[int, Any]:
        """The next frame during the handshake. exact=True reads it without
        reading past its end (the stream must offer recv_exact); otherwise
        frames after it in the same read wait in _early_frames."""
        early = self._early_frames
        if exact and not early:
            stream = self._stream
            head = stream.recv_exact(4)
            size = int.from_bytes(head, "big")
            if not 4 <= size <= self.max_frame_size:
                raise ProtocolError(
                    "nsqd %s sent a %d-byte frame during the handshake; is this an nsqd TCP port?" % (self.id, size)
                )
            return self._decoder.feed(head + stream.recv_exact(size))[0]
        while not early:
            data = self._stream.recv()
            if not data:
                raise EOFError("nsqd %s closed the connection during the handshake" % (self.id,))
            early.extend(self._decoder.feed(data))
        return early.popleft()

    @staticmethod
    def _raise_if_error(frame_type: int, data: Any) -> None:
        if frame_type == codec.FRAME_TYPE_ERROR:
            raise server_error(data)
        if frame_type != codec.FRAME_TYPE_RESPONSE:
            raise ProtocolError("expected a response frame during the handshake, got frame type %d" % frame_type)

    def _read_timeout(self) -> float | None:
        if self.heartbeat_interval in (None, -1):
            return None
        return 2.0 * self.heartbeat_interval

    # -- reading ----------------------------------------------------------

    def _watchdog(self) -> None:
        """Close the connection when nothing arrived for two heartbeat intervals
        (nsqd sends a heartbeat every interval, so the peer is gone)."""
        limit = self._read_timeout() or 0.0
        while True:
            remaining = self.last_recv_timestamp + limit - monotonic()
            if remaining <= 0:
                self._close_now(
                    ConnectionClosedError(
                        "nothing received from nsqd %s for two heartbeat intervals (%.1fs); assuming it is gone"
                        % (self.id, limit)
                    )
                )
                return
            if self._closed.wait(remaining):
                return

    def _read_loop(self) -> None:
        error: BaseException | None = None
        try:
            if self._early_frames:
                frames = list(self._early_frames)
                self._early_frames.clear()
                self._handle_frames(frames)
            stream = self._stream
            feed = self._decoder.feed
            while self.state in (CONNECTED, CLOSING):
                data = stream.recv()
                if not data:
                    raise ConnectionClosedError("nsqd %s closed the connection" % (self.id,))
                self.last_recv_timestamp = monotonic()
                frames = feed(data)
                if frames:
                    self._handle_frames(frames)
        except BaseException as exc:  # noqa: BLE001 - the loop's end is reported, never swallowed
            error = exc
        if self.state != CLOSED:
            if error is not None and not isinstance(error, (ConnectionClosedError, OSError)):
                logger.error("[%s] closing after error: %r", self.id, error)
            self._close_now(error)

    def _handle_frames(self, frames: list) -> None:
        messages: list[Message] | None = None
        for frame_type, data in frames:
            if frame_type == 2:
                timestamp, attempts, message_id, body = data
                message = Message(message_id, body, timestamp, attempts, self)
                if messages is None:
                    messages = [message]
                else:
                    messages.append(message)
            elif frame_type == 0:
                if data == HEARTBEAT:
                    self._on_heartbeat()
                else:
                    self._on_response(data)
            else:
                self._on_error(server_error(data))
        if messages is not None:
            count = len(messages)
            self.in_flight += count
            self.rdy = max(self.rdy - count, 0)
            self.last_msg_timestamp = monotonic()
            sink = self.message_sink
            if sink is not None:
                sink(self, messages)
            else:
                for message in messages:
                    self.trigger(events.MESSAGE, conn=self, message=message)

    def _on_heartbeat(self) -> None:
        self.trigger(events.HEARTBEAT, conn=self)
        try:
            self.send(codec.encode_nop())
        except Error:
            pass

    def _on_response(self, data: bytes) -> None:
        try:
            waiter = self._waiters.popleft()
        except IndexError:
            waiter = None
        if self.has_listeners(events.RESPONSE):
            self.trigger(events.RESPONSE, conn=self, data=data)
        if waiter is not None:
            waiter.resolve(self, data)
        if data == CLOSE_WAIT:
            self.state = CLOSING

    def _on_error(self, error: ServerError) -> None:
        waiter = None
        if isinstance(error, (FinFailedError, ReqFailedError, TouchFailedError)):
            logger.warning("[%s] %s", self.id, error)
        else:
            try:
                waiter = self._waiters.popleft()
            except IndexError:
                logger.error("[%s] %s", self.id, error)
        self.trigger(events.ERROR, conn=self, error=error)
        if error.fatal:  # closed before the caller wakes, so it cannot reuse this connection
            self._close_now(error)
        if waiter is not None:
            waiter.resolve(self, error)

    # -- writing ----------------------------------------------------------

    def send(self, data: bytes, waiter: Pending | None = None, flush: bool = True) -> None:
        """Queue a command; commands queued while a write is in flight leave
        together in the next single write. With flush=False the bytes wait
        for the next flush() or send()."""
        self.backend.check_context("Connection.send")
        with self._lock:
            if self.state not in (CONNECTED, CLOSING):
                raise ConnectionClosedError("connection to nsqd %s is %s" % (self.id, self.state.lower()))
            self._out.append(data)
            if waiter is not None:
                self._waiters.append(waiter)
            if self._writing or not flush:
                return
            self._writing = True
        self._drain()

    def flush(self) -> None:
        """Write what send(..., flush=False) left buffered. A failed write closes
        the connection (its waiters get the error, CLOSE listeners hear of it);
        the caller of a flush is not the one to tell, so it does not raise."""
        self.backend.check_context("Connection.flush")
        with self._lock:
            if self._writing or not self._out or self.state not in (CONNECTED, CLOSING):
                return
            self._writing = True
        try:
            self._drain()
        except ConnectionClosedError as exc:
            logger.debug("[%s] flush failed: %s", self.id, exc)

    def _drain(self) -> None:
        out = self._out
        while True:
            with self._lock:
                if not out:
                    self._writing = False
                    return
                data = out[0] if len(out) == 1 else b"".join(out)
                out.clear()
            try:
                self._stream.send(data)
            except BaseException as exc:
                with self._lock:
                    self._writing = False
                self._close_now(exc)
                raise ConnectionClosedError("write to nsqd %s failed: %s" % (self.id, exc)) from exc

    def request(self, data: bytes, timeout: float | None = None) -> bytes:
        """Send a command that nsqd answers and block for the answer."""
        waiter = Pending(event=self.backend.event())
        self.send(data, waiter)
        if not waiter.event.wait(timeout if timeout is not None else self.timeout * 10):
            raise ConnectionClosedError("no answer from nsqd %s in time" % (self.id,))
        if isinstance(waiter.result, BaseException):
            raise waiter.result
        return waiter.result

    # -- commands ---------------------------------------------------------

    def subscribe(self, topic: str, channel: str) -> None:
        self.request(codec.encode_sub(topic, channel))

    def send_rdy(self, count: int, flush: bool = True) -> None:
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ConfigError("RDY count must be a non-negative int, not %r" % (count,))
        if count > self.max_rdy_count:
            raise ConfigError("RDY %d exceeds nsqd %s's max_rdy_count of %d" % (count, self.id, self.max_rdy_count))
        self.send(codec.encode_rdy(count), flush=flush)
        self.rdy = count
        self.last_rdy = count
        self.trigger(events.READY, conn=self)

    def _respond(self, data: bytes, message: Message, success: bool | None) -> None:
        if not self.backend.in_backend_context():
            self.backend.call_threadsafe(self._respond, data, message, success)
            return
        try:
            batching = self.batching
            self.send(data, flush=not batching)
            if batching and not self.batching:
                # the batch ended between our check and our append: its final
                # flush may have run before our bytes were queued
                self.flush()
        except ConnectionClosedError:
            logger.warning("[%s] cannot answer message %r: connection closed; nsqd will redeliver it", self.id, message.id)
        self.in_flight -= 1
        listener = self.response_listener
        if listener is not None:
            listener(self, message, success)

    #: While True (the Reader sets it around a batch of handler calls), answers
    #: wait in the write buffer for the next flush() instead of leaving one by one.
    batching = False

    def finish_batch(self, message_ids: list[bytes]) -> None:
        """FIN several messages in one write (the Reader's fast path for
        handlers that returned True); the caller does its own bookkeeping."""
        try:
            self.send(codec.encode_fin_many(message_ids), flush=not self.batching)
        except ConnectionClosedError:
            logger.warning("[%s] cannot finish %d messages: connection closed; nsqd will redeliver them", self.id, len(message_ids))
        self.in_flight -= len(message_ids)

    def finish_message(self, message: Message) -> None:
        """FIN one message (Message.finish() calls this)."""
        self._respond(codec.encode_fin(message.id), message, True)

    def requeue_delay_ms(self, message: Message, delay: float) -> int:
        """REQ delay in ms: the given seconds, or requeue_delay x attempts capped by max_requeue_delay."""
        if delay < 0:
            delay = min(self.requeue_delay * message.attempts, self.max_requeue_delay)
        # nsqd caps a REQ delay at its --max-req-timeout, but only if the number
        # did not wrap around on the way: cap it first.
        return min(int(delay * 1000), MAX_DELAY_MS)

    def requeue_message(self, message: Message, delay: float, backoff: bool) -> None:
        """REQ one message (Message.requeue() calls this)."""
        self._respond(codec.encode_req(message.id, self.requeue_delay_ms(message, delay)), message, False if backoff else None)

    def touch_message(self, message: Message) -> None:
        """TOUCH one message (Message.touch() calls this)."""
        if not self.backend.in_backend_context():
            self.backend.call_threadsafe(self.touch_message, message)
            return
        self.send(codec.encode_touch(message.id))
        self.trigger(events.TOUCH, conn=self, message=message)

    # -- closing ----------------------------------------------------------

    def close_gracefully(self, timeout: float) -> bool:
        """Send CLS and wait for CLOSE_WAIT; True when nsqd confirmed it."""
        try:
            result = self.request(codec.encode_cls(), timeout)
        except Error:
            return False
        return result == CLOSE_WAIT

    def close(self, reason: BaseException | None = None) -> None:
        """Close now: commands still waiting for an answer fail (with reason, when given)."""
        self._close_now(reason)

    def _close_now(self, error: BaseException | None) -> None:
        with self._lock:
            if self.state == CLOSED:
                return
            self.state = CLOSED
            self.close_error = error
            waiters = list(self._waiters)
            self._waiters.clear()
            self._out.clear()
        if self._stream is not None:
            try:
                self._stream.close()
            except Exception:
                pass
        closed_error = ConnectionClosedError("connection to nsqd %s closed%s" % (self.id, ": %s" % (error,) if error else ""))
        for waiter in waiters:
            waiter.resolve(self, closed_error)
        self._closed.set()
        self.trigger(events.CLOSE, conn=self)

    def wait_closed(self, timeout: float | None = None) -> bool:
        return bool(self._closed.wait(timeout))

    def is_idle(self) -> bool:
        """Nothing waits to be written and no command waits for its answer."""
        return not self._waiters and not self._out

    def stop_io_after_fork(self) -> None:
        """First thing in a forked child, before any owner hears of the fork:
        from now on no byte leaves this process on the parent's socket."""
        if self.state != CLOSED:
            self.state = CLOSED
            self.close_error = ForkedError(
                "connection to nsqd %s belongs to the process that opened it (this process forked from it)"
                % (self.id,)
            )

    def after_fork_in_child(self) -> None:
        """In a forked child: the socket is the parent's. Drop this process's
        descriptor without writing a byte or shutting the connection down,
        and fail whatever waited on it here (never the parent's waiters)."""
        if self._stream is None and self._closed.is_set():
            return
        self.stop_io_after_fork()
        error = self.close_error
        self._lock = self.backend.lock()  # it may have been held by a thread that does not exist here
        waiters = list(self._waiters)
        self._waiters.clear()
        self._out.clear()
        self._writing = False
        stream, self._stream = self._stream, None
        if stream is not None:
            try:
                stream.close()  # no shutdown(): see the transport's close()
            except Exception:
                pass
        if self.backend.tasks_survive_fork:
            # greenlets survive the fork: wake those that wait here with the error
            for waiter in waiters:
                waiter.resolve(self, error)
            self._closed.set()
            self.trigger(events.CLOSE, conn=self)
        else:
            # the threads that waited do not exist in the child
            self._closed = self.backend.event()
            self._closed.set()


AsyncConn = Connection
