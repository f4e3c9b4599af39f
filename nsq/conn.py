"""One connection to one nsqd: the engine's driver (``msgengine.driver``)
running the sans-I/O NSQ protocol object (``nsq.sansio``), with pynsq's
``AsyncConn`` names and events.

Two classes share it. ``AsyncConn`` is pynsq's: its ``connect()`` returns at
once, the handshake runs on a task of the engine, and the events (``connect``,
``identify``, ``identify_response``, ``auth``, ``auth_response``, ``ready``;
then ``message``, ``response``, ``heartbeat``, ``error``, ``close``) are
called on the program's loop when ``connect()`` finds one (see
``nsq.loops.program_loop``), else on the engine's task; a failure is told by
``error``/``close``, never raised. Connected on the thread of the program's
loop with ``backend=`` left "auto", it runs on that loop's asyncio backend
(``nsq.loops.loop_backend``): the handshake and the reads are tasks of the
loop, and the events are called in place there, as pynsq calls them. ``Connection``, what Reader, Writer, the
Spark modules and the CLI open, is the same with a blocking ``connect()``
that raises on failure, and listeners called in place.

The handshake (``open()``) opens the socket and negotiates (stream upgrades
for TLS and compression happen here, at the points the protocol object
names); afterwards the driver's reader task feeds the protocol object and
this class acts on its events: messages go to ``message_sink`` (the Reader,
the Spark source) or to ``message`` listeners, answers wake their requests,
heartbeats reach ``heartbeat`` listeners. The public methods below are the
only way Reader, Writer and the Spark modules talk to a connection.
"""
from __future__ import annotations

import functools
import logging
import socket
import ssl
import time
from typing import Any, Callable

from msgengine.correlator import Pending
from msgengine.driver import Driver
from msgengine.runtime import on_fork_in_child
from msgengine.transport import DeflateStream, PlainStream, SnappyStream, TLSStream

from nsq import codec, hooks, loops
from nsq.config import DEFAULT_USER_AGENT, POSITIONAL, Config
from nsq.errors import (
    ConfigError,
    ConnectionClosedError,
    Error,
    FinFailedError,
    ForkedError,
    ReadOnlyAttributeError,
    ReqFailedError,
    TouchFailedError,
)
from nsq.message import Message
from nsq.sansio import (
    CLOSE_WAIT,
    HEARTBEAT,
    MAX_DELAY_MS,
    OK,
    Authenticated,
    ErrorReceived,
    HeartbeatReceived,
    Identified,
    Ready,
    MessagesReceived,
    NsqProtocol,
    ResponseReceived,
    State,
    UpgradeCompression,
    UpgradeTLS,
    public_state,
)

__all__ = [
    "AsyncConn", "CLOSE_WAIT", "CLOSED", "CLOSING", "CONNECTED", "CONNECTING", "Connection", "DEFAULT_USER_AGENT",
    "DISCONNECTED", "HEARTBEAT", "INIT", "MAX_DELAY_MS", "OK", "Pending",
]

logger = logging.getLogger(__name__)

# pynsq's state names (and CLOSING: nsqd answered CLS). CLOSED is the earlier name of DISCONNECTED.
INIT, CONNECTING, CONNECTED, CLOSING, DISCONNECTED = "INIT", "CONNECTING", "CONNECTED", "CLOSING", "DISCONNECTED"
CLOSED = DISCONNECTED

#: message_sink(conn, messages): the owner of a connection takes each read's messages
MessageSink = Callable[["Connection", list[Message]], None]
#: response_listener(conn, message, success): after each FIN (True), REQ with backoff (False) or without (None)
ResponseListener = Callable[["Connection", Message, "bool | None"], None]


class Connection(Driver[NsqProtocol], hooks.EventedMixin):
    """A connection to one nsqd, usable on gevent or threads: ``connect()``
    runs the handshake on the caller and raises on failure (``AsyncConn``,
    below, is pynsq's, whose ``connect()`` returns at once).

    Settings are pynsq's ``AsyncConn`` keywords (see ``nsq.config.Config``),
    or a ready ``config=``. ``key`` names the connection to its owner's flow
    control (default: its id, host:port).
    """

    closed_error = ConnectionClosedError

    def __init__(
        self, host: str, port: int, *args: Any, config: Config | None = None, key: str | None = None, **settings: Any
    ) -> None:
        if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
            raise ConfigError("port must be an int from 1 to 65535, not %r" % (port,))
        if len(args) == 1 and isinstance(args[0], Config) and config is None:
            config = args[0]
        elif args:  # pynsq's positional order: timeout, heartbeat_interval, requeue_delay, ...
            if len(args) > len(POSITIONAL):
                raise TypeError("Connection takes at most %d positional settings" % len(POSITIONAL))
            for name, value in zip(POSITIONAL, args):
                if name in settings:
                    raise TypeError("Connection got %r both by position and by keyword" % (name,))
                settings[name] = value
        if config is None:
            config = Config.from_kwargs(settings)
        elif settings:
            config = config.replace(**settings)
        self.config = config
        self.host = host
        self.port = port
        Driver.__init__(self, config.backend, "nsqd %s:%d" % (host, port))
        self.protocol = NsqProtocol(
            config.identify_data(),
            tls_v1=config.tls_v1,
            snappy=config.snappy,
            deflate=config.deflate,
            deflate_level=config.deflate_level,
            auth_secret=config.auth_secret,
            max_frame_size=config.max_frame_size,
            message_factory=self._message,
            name=self.id,
            key=key or self.id,  # what flow control knows it by (several connections to one nsqd differ)
        )
        self.last_msg_timestamp = time.time()  # (pynsq's clock; the driver's last_recv_timestamp is monotonic)
        self._callbacks = None  # EventedMixin's listeners (looked up on every response)
        self._started = False  # the handshake was started
        self.message_sink: MessageSink | None = None
        self.response_listener: ResponseListener | None = None
        on_fork_in_child(self)

    def _message(self, timestamp: int, attempts: int, message_id: bytes, body: bytes) -> Message:
        return Message(message_id, body, timestamp, attempts, self)

    # -- introspection --------------------------------------------------

    @property
    def id(self) -> str:
        return "%s:%d" % (self.host, self.port)

    def __str__(self) -> str:
        return self.id

    def __repr__(self) -> str:
        return "<nsq.%s %s %s rdy=%d in_flight=%d>" % (type(self).__name__, self.id, self.state, self.rdy, self.in_flight)

    def __getattr__(self, name: str) -> Any:
        # pynsq's AsyncConn keeps its settings as attributes (conn.heartbeat_interval, ...)
        config = self.__dict__.get("config")
        if config is not None and not name.startswith("_") and hasattr(config, name):
            return getattr(config, name)
        raise AttributeError("%r object has no attribute %r" % (type(self).__name__, name))

    @property
    def heartbeat_interval(self) -> int:
        """In milliseconds, as pynsq keeps it (-1: no heartbeats)."""
        return self.config.identify_data()["heartbeat_interval"]

    @property
    def msg_timeout(self) -> int | None:
        """In milliseconds, as pynsq keeps it (None: nsqd's default)."""
        return self.config.identify_data().get("msg_timeout")

    @property
    def state(self) -> str:
        """pynsq's state names: INIT, CONNECTING (the handshake runs), CONNECTED
        (it is done), DISCONNECTED; and CLOSING once nsqd answered CLS."""
        if self.is_closed():
            return DISCONNECTED
        state = public_state(self.protocol.state)
        return CONNECTING if state == INIT and self._started else state

    @state.setter
    def state(self, value: str) -> None:
        raise ReadOnlyAttributeError.on_assignment(
            self, "state", "it follows the socket and the handshake: connect() opens the connection, close() ends it"
        )

    @property
    def features(self) -> dict[str, Any]:
        return self.protocol.features

    @property
    def auth_identity(self) -> dict[str, Any] | None:
        return self.protocol.auth_identity

    @property
    def max_rdy_count(self) -> int:
        return self.protocol.max_rdy_count

    @property
    def rdy(self) -> int:
        """Messages nsqd may still push under the last RDY."""
        return self.protocol.credit.remaining

    @property
    def last_rdy(self) -> int:
        """The last RDY count sent."""
        return self.protocol.credit.credit

    @property
    def in_flight(self) -> int:
        return self.protocol.credit.in_flight

    @in_flight.setter
    def in_flight(self, value: int) -> None:
        raise ReadOnlyAttributeError.on_assignment(
            self, "in_flight", "it counts the messages nsqd sent that are not answered yet; "
            "a message's finish() or requeue() lowers it"
        )

    @property
    def credit(self) -> Any:
        """The connection's RDY and in-flight counts (an ``nsq.rdy.RdyCount``),
        the object a Reader's flow control reads."""
        return self.protocol.credit

    def is_connected(self) -> bool:
        return self.protocol.state is State.READY and not self.io_stopped

    def connected(self) -> bool:
        return self.is_connected()

    def connecting(self) -> bool:
        return self.state == CONNECTING

    def closed(self) -> bool:
        """pynsq's: not connected yet (INIT) or no longer (DISCONNECTED)."""
        return self.is_closed() or not self._started

    def is_idle(self) -> bool:
        """Nothing waits to be written and no request waits for its answer."""
        protocol = self.protocol
        return not protocol.waiting_answers() and not protocol.has_data()

    def identify_data(self) -> dict[str, Any]:
        return self.config.identify_data()

    # -- handshake ------------------------------------------------------

    def connect(self) -> None:
        """Open the socket and negotiate; raises on any failure (and closes)."""
        self.open()

    def open(self) -> None:
        """Connect and negotiate on the calling task, firing the same events
        there; returns once the connection is ready, raises on any failure
        (and closes)."""
        self._check_unused()
        self._started = True
        try:
            self._establish()
        except BaseException as exc:
            self.close_now(exc)
            failure = self._failure(exc)
            if failure is exc:
                raise
            raise failure from exc

    def _check_unused(self) -> None:
        if self._started or self.is_closed():
            raise Error("connection %s was already used (state %s); make a new one" % (self.id, self.state))

    def _failure(self, exc: BaseException) -> BaseException:
        """What a failed handshake is reported as: socket-level failures as ConnectionClosedError."""
        if isinstance(exc, Error):
            return exc
        if isinstance(exc, ssl.SSLError):
            return ConnectionClosedError("TLS handshake with nsqd %s failed: %s" % (self.id, exc))
        if isinstance(exc, (socket.timeout, OSError, EOFError)):
            if self.stream is None:
                return ConnectionClosedError("cannot connect to nsqd %s: %s" % (self.id, exc))
            return ConnectionClosedError("handshake with nsqd %s failed: %s" % (self.id, exc))
        return exc

    def _establish(self) -> None:
        """Connect, negotiate and start reading, firing the handshake's events;
        raises on any failure, leaving the closing to the caller."""
        config = self.config
        sock = self.backend.create_connection((self.host, self.port), config.timeout)
        self.stream = PlainStream(sock, config.read_size or self.backend.read_size)
        self._check_not_closed()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.stream.settimeout(config.timeout)
        self.trigger(hooks.CONNECT, conn=self)
        early = self._handshake(sock)
        # Dead-peer detection is the driver's watchdog, not a socket timeout:
        # under gevent a timeout costs a timer object per blocking read.
        self.stream.settimeout(None)
        if early:
            self.handle_events(early)
        self._check_not_closed()
        self.start_io(config.read_timeout)
        self.trigger(hooks.READY, conn=self)

    def _check_not_closed(self) -> None:
        """(AsyncConn: the program may close the connection while it connects.)"""
        if self.io_stopped:
            self.stream.close()  # (close() may have come before the stream existed)
            raise ConnectionClosedError("connection to nsqd %s was closed while connecting" % (self.id,))

    def _handshake(self, sock: socket.socket) -> list:
        """Run the protocol object's handshake over the stream (a heartbeat
        that comes while AUTH waits is answered here); returns the events of
        frames that came right after the last answer, for the live connection."""
        protocol = self.protocol
        protocol.start()
        if self.has_listeners(hooks.IDENTIFY):
            self.trigger(hooks.IDENTIFY, conn=self, data=self.config.identify_data())
        self.stream.send(protocol.data_to_send())
        early: list = []
        ready = False
        auth_told = False
        while protocol.state is not State.READY:
            wanted = protocol.bytes_wanted()
            data = self.stream.recv_exact(wanted) if wanted else self.stream.recv()
            if not data:
                raise EOFError("nsqd %s closed the connection during the handshake" % (self.id,))
            for event in protocol.receive_data(data):
                if isinstance(event, Ready):
                    ready = True
                elif ready:
                    early.append(event)  # frames right after the last answer: the live connection's
                elif isinstance(event, Identified):
                    self.trigger(hooks.IDENTIFY_RESPONSE, conn=self, data=event.features)
                elif isinstance(event, UpgradeTLS):
                    tls = TLSStream(sock, self.config.ssl_context, self.host,
                                    self.config.read_size or self.backend.read_size)
                    tls.handshake()  # ssl.SSLError (an OSError) when a certificate is refused
                    self.stream = tls
                    protocol.tls_established()
                    logger.debug("[%s] TLS established: %s %s", self.id, tls.version(), (tls.cipher() or ("?",))[0])
                elif isinstance(event, UpgradeCompression):
                    if event.kind == "snappy":
                        self.stream = SnappyStream(self.stream)
                    else:
                        self.stream = DeflateStream(self.stream, event.level)
                    protocol.compression_established()
                elif isinstance(event, HeartbeatReceived):  # (nsqd's ticker runs while its auth server answers)
                    protocol.send_nop()
                elif isinstance(event, Authenticated):
                    identity = event.identity
                    logger.debug("[%s] authenticated as %r (%s permissions)",
                                 self.id, identity.get("identity"), identity.get("permission_count"))
                    self.trigger(hooks.AUTH_RESPONSE, conn=self, data=identity)
            if protocol.state is State.AUTHENTICATING and not auth_told:
                auth_told = True  # pynsq's auth event: the secret, as the AUTH about to go out carries it
                secret = self.config.auth_secret
                self.trigger(hooks.AUTH, conn=self, data=secret.encode() if isinstance(secret, str) else secret)
            data = protocol.data_to_send()  # AUTH, NOP
            if data:
                self.stream.send(data)
        return early

    # -- reading ----------------------------------------------------------

    def handle_events(self, received: list) -> None:
        for event in received:
            kind = event.__class__
            if kind is MessagesReceived:
                self.last_msg_timestamp = time.time()
                sink = self.message_sink
                if sink is not None:
                    sink(self, event.messages)
                else:
                    for message in event.messages:
                        self.trigger(hooks.MESSAGE, conn=self, message=message)
            elif kind is ResponseReceived:
                if self.has_listeners(hooks.RESPONSE):
                    self.trigger(hooks.RESPONSE, conn=self, data=event.data)
                if event.pending is not None:
                    event.pending.resolve(self, event.data)
            elif isinstance(event, HeartbeatReceived):
                try:
                    self.command(self.protocol.send_nop)  # written before anything else runs
                except Error:
                    pass
                self.trigger(hooks.HEARTBEAT, conn=self)
            elif kind is ErrorReceived:
                self._on_error(event)

    def _on_error(self, event: ErrorReceived) -> None:
        error = event.error
        if event.pending is None:
            log = logger.warning if isinstance(error, (FinFailedError, ReqFailedError, TouchFailedError)) else logger.error
            log("[%s] %s", self.id, error)
        self.trigger(hooks.ERROR, conn=self, error=error)
        if error.fatal:  # closed before the caller wakes, so it cannot reuse this connection
            self.close_now(error)
        if event.pending is not None:
            event.pending.resolve(self, error)

    # -- requests ---------------------------------------------------------

    def send_request(self, data: bytes, pending: Pending | None = None) -> None:
        """Queue a command nsqd answers (PUB, MPUB, DPUB, SUB, CLS) and write
        it; ``pending`` is resolved with the answer (bytes or an nsq.Error).
        Raises ConnectionClosedError when the connection is not open. On a
        connection whose callers read (a Writer's), the caller then waits
        in ``await_answer()``, or calls ``reader_needed()``."""
        self.command(self.protocol.send_request, data, pending)

    def send(self, data: bytes, waiter: Pending | None = None, flush: bool = True) -> None:
        """pynsq's ``send``: queue raw command bytes; with a waiter, nsqd's
        answer resolves it. With flush=False the bytes wait for the next flush()."""
        self.backend.check_context("Connection.send")
        with self.lock:
            if waiter is not None:
                self.protocol.send_request(data, waiter)
            else:
                self.protocol.send_unanswered(data)
        if flush:
            self.flush()
        if waiter is not None:
            self.reader_needed()

    def request(self, data: bytes, timeout: float | None = None) -> bytes:
        """Send a command that nsqd answers and block for the answer."""
        pending = Pending(event=self.backend.event())
        self.send_request(data, pending)
        self.reader_needed()
        if not pending.event.wait(timeout if timeout is not None else (self.config.timeout or 1.0) * 10):
            raise ConnectionClosedError("no answer from nsqd %s in time" % (self.id,))
        if isinstance(pending.result, BaseException):
            raise pending.result
        return pending.result

    def subscribe(self, topic: str, channel: str) -> None:
        pending = Pending(event=self.backend.event())
        self.command(self.protocol.subscribe, topic, channel, pending)
        self.reader_needed()
        if not pending.event.wait((self.config.timeout or 1.0) * 10):
            raise ConnectionClosedError("no answer to SUB from nsqd %s in time" % (self.id,))
        if isinstance(pending.result, BaseException):
            raise pending.result

    # -- flow control and answers ----------------------------------------------

    def send_rdy(self, count: int, flush: bool = True) -> bool:
        """Queue RDY count (and write it, unless flush=False); True, as pynsq's."""
        with self.lock:
            self.protocol.send_rdy(count)
        if flush:
            self.flush()
        return True

    def hold_answers(self) -> None:
        """Answers (FIN/REQ/TOUCH/RDY) given from now on wait in the write
        buffer until release_answers() (or a request, or a flush())."""
        with self.lock:
            self.protocol.hold_answers()

    def release_answers(self) -> None:
        """End a hold_answers(): what waited is written now."""
        with self.lock:
            self.protocol.release_answers()
        self.write_due()

    def answers_held(self) -> bool:
        return self.protocol.answers_held()

    @property
    def batching(self) -> bool:
        """The earlier spelling of hold_answers()/release_answers(), as a flag."""
        return self.protocol.answers_held()

    @batching.setter
    def batching(self, value: bool) -> None:
        if value and not self.protocol.answers_held():
            self.hold_answers()
        elif not value and self.protocol.answers_held():
            self.release_answers()

    def _answer(self, queue: Callable[[], None], message: Message, success: bool | None) -> None:
        if not self.backend.in_backend_context():
            self.backend.call_threadsafe(self._answer, queue, message, success)
            return
        # Flow control first, as pynsq does: a RDY change it makes (RDY 0 when a failure
        # starts a backoff block) goes out before this answer, so nsqd sends nothing
        # more into the block.
        listener = self.response_listener
        if listener is not None:
            listener(self, message, success)
        try:
            self.command(queue)
        except ConnectionClosedError:
            with self.lock:
                self.protocol.message_lost(1)
            logger.warning("[%s] cannot answer message %r: connection closed; nsqd will redeliver it", self.id, message.id)

    def finish_message(self, message: Message) -> None:
        """FIN one message (Message.finish() calls this)."""
        message_id = message.id
        self._answer(lambda: self.protocol.fin(message_id), message, True)

    def requeue_message(self, message: Message, delay: float, backoff: bool) -> None:
        """REQ one message (Message.requeue() calls this)."""
        delay_ms = self.requeue_delay_ms(message, delay)
        message_id = message.id
        self._answer(lambda: self.protocol.req(message_id, delay_ms), message, False if backoff else None)

    def touch_message(self, message: Message) -> None:
        """TOUCH one message (Message.touch() calls this)."""
        if not self.backend.in_backend_context():
            self.backend.call_threadsafe(self.touch_message, message)
            return
        self.command(self.protocol.touch, message.id)
        self.trigger(hooks.TOUCH, conn=self, message=message)

    def finish_many(self, message_ids: list[bytes]) -> None:
        """FIN several messages in one write (the caller marks them finished
        and does its own bookkeeping)."""
        try:
            self.command(self.protocol.fin_many, message_ids)
        except ConnectionClosedError:
            with self.lock:
                self.protocol.message_lost(len(message_ids))
            logger.warning("[%s] cannot finish %d messages: connection closed; nsqd will redeliver them", self.id, len(message_ids))

    def touch_many(self, message_ids: list[bytes]) -> None:
        """TOUCH several messages in one write."""
        with self.lock:
            for message_id in message_ids:
                self.protocol.touch(message_id)
        self.flush()

    def requeue_delay_ms(self, message: Message, delay: float) -> int:
        """REQ delay in ms: the given seconds, or requeue_delay x attempts capped by max_requeue_delay."""
        config = self.config
        if delay < 0:
            delay = min(config.requeue_delay * message.attempts, config.max_requeue_delay)
        return min(int(delay * 1000), MAX_DELAY_MS)

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
        self.close_now(reason)

    def on_closed(self) -> None:
        self.trigger(hooks.CLOSE, conn=self)

    def stop_io_after_fork(self) -> None:
        """First thing in a forked child, before any owner hears of the fork:
        from now on no byte leaves this process on the parent's socket."""
        if not self.is_closed():
            self.stop_io(ForkedError(
                "connection to nsqd %s belongs to the process that opened it (this process forked from it)" % (self.id,)
            ))
            self.protocol.state = State.CLOSED  # commands are refused from now on

    def after_fork_in_child(self) -> None:
        """In a forked child: the socket is the parent's. Drop this process's
        descriptor without writing a byte or shutting the connection down,
        and fail whatever waited on it here (never the parent's waiters)."""
        if self.stream is None and self.has_closed():
            return
        self.stop_io_after_fork()
        error = self.close_error
        waiting = self.drop_after_fork(error or ForkedError("forked"))
        if self.backend.tasks_survive_fork:
            # greenlets survive the fork: wake those that wait here with the error
            for pending in waiting:
                pending.resolve(self, error)
            self.set_closed_event()
            self.trigger(hooks.CLOSE, conn=self)
        else:
            # the threads that waited do not exist in the child
            self.reset_closed_event()


class AsyncConn(Connection):
    """pynsq's connection to one nsqd: ``connect()`` returns at once, events
    report the rest, on the program's loop when there is one (see the module
    docstring). ``io_loop=`` names that loop (default: the one ``connect()``
    finds, as ``nsq.loops.program_loop`` does for a Reader)."""

    #: where listeners run, once connect() found the program's loop (None: in place)
    _bridge: loops.LoopBridge | None = None

    def connect(self) -> None:
        """pynsq's ``connect()``: returns at once; the handshake runs on a task
        of the engine, and its events follow on the program's loop when there
        is one (an ``io_loop=`` setting, else ``nsq.loops.program_loop``), else
        on that task: ``connect``, ``identify``, ``identify_response``, ``auth``
        and ``auth_response`` when nsqd asks for AUTH, then ``ready`` once
        ``send()`` works. A failure is not raised: nsqd's refusal (or a broken
        handshake) fires ``error``, and every failure ``close``. While
        connecting or connected it does nothing; a closed connection cannot
        be connected again (make a new one)."""
        if self._started and not self.is_closed():
            return
        self._check_unused()
        self._started = True
        self._bridge = loops.program_loop(self.config.io_loop, self.backend)
        on_loop = loops.loop_backend(self.config, self._bridge, not_running_too=True)
        if on_loop is not None:  # the program's loop, on this thread: the connection runs there (pynsq's model)
            self.config = self.config.replace(backend=on_loop)
            self.rebind(on_loop)
        self.backend.spawn(self._connect_in_background)

    def _connect_in_background(self) -> None:
        try:
            self._establish()
        except Exception as exc:
            failure = self._failure(exc)
            if isinstance(failure, ConnectionClosedError):  # the socket failed: pynsq fires close alone
                logger.warning("[%s] %s", self.id, failure)
            elif isinstance(failure, Error):  # nsqd refused (E_AUTH_FAILED, ...), or a broken handshake
                logger.warning("[%s] handshake failed: %s", self.id, failure)
                self.trigger(hooks.ERROR, conn=self, error=failure)
            else:
                logger.exception("[%s] handshake failed", self.id)
            self.close_now(exc)
        except BaseException as exc:  # the task was killed or interrupted
            self.close_now(exc)
            raise

    def trigger(self, name: str, *args: Any, **kwargs: Any) -> None:
        """Call name's listeners: queued, in order, on the program's loop when
        connect() found one; else here."""
        bridge = self._bridge
        if bridge is None or (self.backend.name == "asyncio" and bridge.in_loop_thread()):
            hooks.EventedMixin.trigger(self, name, *args, **kwargs)
        elif self.has_listeners(name):
            bridge.call_soon(functools.partial(hooks.EventedMixin.trigger, self, name, *args, **kwargs))
