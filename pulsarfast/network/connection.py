"""One TCP connection to one Pulsar broker: the engine's driver
(``msgengine.driver``) running the sans-I/O ``PulsarProtocol``.

``connect()`` opens the socket and runs CONNECT / CONNECTED; afterwards the
driver's reader task feeds the protocol object and this class acts on its
events: answers wake their requests, receipts and messages go to the
producer or consumer session registered under their id, PING is answered
with PONG, and CLOSE_PRODUCER / CLOSE_CONSUMER close that session (its owner
then looks the topic up again). A SEND_ERROR for a producer id with no
session here (the broker sends those after closing the producer of a topic
terminated under its sends) goes to ``on_unknown_send_error``, if given.
The connection also sends a PING every ``keep_alive_seconds`` and closes
itself when nothing at all came from the broker for twice that long (the
driver's watchdog). Every producer and consumer on one broker shares one
connection (``pulsarfast.network.pool``).

With an ``ssl_context`` the socket runs TLS (``msgengine.transport.TLSStream``,
handshake before CONNECT; a failed one is a ConnectError). With an
``authentication`` (``pulsarfast.endpoints.auth``) CONNECT carries its method and data,
and an AUTH_CHALLENGE is answered with fresh data in AUTH_RESPONSE
(``challenge_data()``); an authentication whose data needs network I/O
(``blocking_io``: OAuth2) is asked through the backend's ``run_blocking``.
"""
from __future__ import annotations

import logging
import socket
import ssl
from typing import Any, Callable, Protocol

from msgengine.correlator import Pending
from msgengine.driver import Driver
from msgengine.runtime import Backend, monotonic, on_fork_in_child
from msgengine.transport import PlainStream, TLSStream

from pulsarfast.base.results import (
    AuthenticationError,
    ConnectError,
    ForkedError,
    NotConnected,
    PulsarException,
    Timeout,
)
from pulsarfast.wire import proto
from pulsarfast.wire.sansio import (
    ActiveConsumerChange,
    Answered,
    AuthChallenged,
    ConnectFailed,
    Connected,
    ConsumerClosed,
    EndOfTopic,
    MessageReceived,
    PingReceived,
    ProducerClosed,
    PulsarProtocol,
    SendError,
    SendReceipt,
    State,
    TopicListChanged,
)

logger = logging.getLogger(__name__)


class ProducerSink(Protocol):
    """What a connection tells the producer session registered under an id."""

    def on_receipt(self, event: SendReceipt) -> None: ...

    def on_send_error(self, event: SendError) -> None: ...

    def on_closed(self, reason: BaseException) -> None: ...


class ConsumerSink(Protocol):
    """What a connection tells the consumer session registered under an id."""

    def on_message(self, event: MessageReceived) -> None: ...

    def on_end_of_topic(self) -> None: ...

    def on_active_change(self, is_active: bool) -> None: ...

    def on_closed(self, reason: BaseException) -> None: ...


class TopicListSink(Protocol):
    """What a connection tells a topic-list watch registered under its watcher id."""

    def on_topics_changed(self, new_topics: list[str], deleted_topics: list[str]) -> None: ...

    def on_closed(self, reason: BaseException) -> None: ...


class BrokerConnection(Driver[PulsarProtocol]):
    """A connection to one broker; see the module docstring.

    ``logical_url`` is the broker the topic lives on, ``address`` where the
    socket goes (the same broker, or the service URL's host when lookups say
    to go through a proxy, in which case CONNECT names the broker to proxy to).
    """

    closed_error = NotConnected

    def __init__(
        self,
        backend: Backend,
        logical_url: str,
        address: tuple[str, int],
        *,
        connect_timeout: float = 10.0,
        keep_alive_seconds: float = 30.0,
        proxy_to_broker_url: str | None = None,
        client_version: str = proto.CLIENT_VERSION,
        auth_method_name: str | None = None,
        auth_data: bytes | None = None,
        ssl_context: ssl.SSLContext | None = None,
        authentication: Any = None,
        on_unknown_send_error: Callable[[SendError], None] | None = None,
    ) -> None:
        Driver.__init__(self, backend, "broker %s (%s:%d)" % (logical_url, address[0], address[1]))
        self.logical_url = logical_url
        self.address = address
        self.connect_timeout = connect_timeout
        self.keep_alive_seconds = keep_alive_seconds
        self.ssl_context = ssl_context
        self.authentication = authentication
        self.on_unknown_send_error = on_unknown_send_error
        if authentication is not None:
            auth_method_name, auth_data = authentication.method_name, self._credentials(authentication.auth_data)
        self.protocol = PulsarProtocol(
            proto.connect(client_version=client_version, auth_method_name=auth_method_name, auth_data=auth_data,
                          proxy_to_broker_url=proxy_to_broker_url, supports_auth_refresh=authentication is not None),
            name=self.name,
        )
        self._producers: dict[int, ProducerSink] = {}
        self._consumers: dict[int, ConsumerSink] = {}
        self._watchers: dict[int, TopicListSink] = {}
        self._keep_alive: Any = None
        self.server_version = ""
        self.max_message_size = 5 * 1024 * 1024
        on_fork_in_child(self)

    def __repr__(self) -> str:
        return "<BrokerConnection %s %s>" % (self.name, self.protocol.state.name)

    # -- handshake ------------------------------------------------------------

    def connect(self) -> None:
        """Open the socket and run CONNECT/CONNECTED; raises ConnectError (and closes) on failure."""
        if self.protocol.state is not State.INIT or self.is_closed():
            raise ConnectError("connection %s was already used" % self.name)
        try:
            sock = self.backend.create_connection(self.address, self.connect_timeout)
        except OSError as exc:
            self.close_now(exc)
            raise ConnectError("cannot connect to %s: %s" % (self.name, exc)) from exc
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.ssl_context is None:
                self.stream = PlainStream(sock, self.backend.read_size)
                self.stream.settimeout(self.connect_timeout)
            else:
                self.stream = TLSStream(sock, self.ssl_context, server_hostname=self.address[0],
                                        read_size=self.backend.read_size)
                self.stream.settimeout(self.connect_timeout)
                self.stream.handshake()
            early = self._handshake()
        except BaseException as exc:
            self.close_now(exc)
            if isinstance(exc, PulsarException):
                raise
            if isinstance(exc, ssl.SSLError):
                detail = exc.args[0] if len(exc.args) == 1 else exc  # (a one-argument SSLError prints as a tuple)
                raise ConnectError("TLS handshake with %s failed: %s" % (self.name, detail)) from exc
            if isinstance(exc, (OSError, EOFError)):
                raise ConnectError("handshake with %s failed: %s" % (self.name, exc)) from exc
            raise
        self.stream.settimeout(None)
        self.start_io(self.keep_alive_seconds * 2)
        self._keep_alive = self.backend.call_every(self.keep_alive_seconds, self._send_ping)
        if early:
            self.backend.spawn(self.handle_events, early)

    def _handshake(self) -> list:
        protocol = self.protocol
        protocol.start()
        self.stream.send(protocol.data_to_send())
        deadline = monotonic() + self.connect_timeout
        while True:
            if monotonic() > deadline:
                raise Timeout("no CONNECTED from %s within %.1fs" % (self.name, self.connect_timeout))
            data = self.stream.recv()
            if not data:
                raise EOFError("%s closed the connection during the handshake" % self.name)
            events = protocol.receive_data(data)
            for index, event in enumerate(events):
                if isinstance(event, Connected):
                    self.server_version = event.server_version
                    self.max_message_size = event.max_message_size
                    logger.debug("[%s] connected: %s, protocol %d", self.name, event.server_version,
                                 event.protocol_version)
                    return events[index + 1:]
                if isinstance(event, ConnectFailed):
                    raise event.error
                if isinstance(event, AuthChallenged):  # (an authentication in more than one step)
                    protocol.send_auth_response(self._auth_response())
                    self.stream.send(protocol.data_to_send())

    def _auth_response(self) -> bytes:
        """AUTH_RESPONSE with fresh data (a token function is called again);
        raises AuthenticationError when the data cannot be had, or without credentials."""
        auth = self.authentication
        if auth is None:
            raise AuthenticationError("the broker %s asks for credentials and this client has none" % self.name)
        return proto.auth_response(auth.method_name, self._credentials(auth.challenge_data))

    def _credentials(self, fetch: Callable[[], bytes]) -> bytes:
        """fetch() of the authentication: through run_blocking when it may block on network I/O (OAuth2)."""
        if self.authentication is not None and self.authentication.blocking_io:
            data: bytes = self.backend.run_blocking(fetch)
            return data
        return fetch()

    def _refresh_credentials(self) -> None:
        """The broker challenged a ready connection (its token expired): answer, or close."""
        try:
            self.command(self.protocol.send_auth_response, self._auth_response())
            logger.debug("[%s] answered the broker's authentication challenge", self.name)
        except PulsarException as exc:
            logger.warning("[%s] cannot answer the broker's authentication challenge: %s", self.name, exc)
            self.close_now(exc)

    def _send_ping(self) -> None:
        if self.io_stopped:
            if self._keep_alive is not None:
                self._keep_alive.cancel()
            return
        self.backend.spawn(self._ping_now)

    def _ping_now(self) -> None:
        try:
            self.command(self.protocol.send_command, proto.ping())
        except PulsarException:
            pass

    # -- registrations --------------------------------------------------------

    def register_producer(self, producer_id: int, sink: ProducerSink) -> None:
        self._producers[producer_id] = sink

    def unregister_producer(self, producer_id: int, sink: ProducerSink) -> None:
        if self._producers.get(producer_id) is sink:
            del self._producers[producer_id]

    def register_consumer(self, consumer_id: int, sink: ConsumerSink) -> None:
        self._consumers[consumer_id] = sink

    def unregister_consumer(self, consumer_id: int, sink: ConsumerSink) -> None:
        if self._consumers.get(consumer_id) is sink:
            del self._consumers[consumer_id]

    @property
    def supports_topic_watchers(self) -> bool:
        """The broker said (in CONNECTED) that it takes WATCH_TOPIC_LIST."""
        return self.protocol.supports_topic_watchers

    def register_watcher(self, watcher_id: int, sink: TopicListSink) -> None:
        self._watchers[watcher_id] = sink

    def unregister_watcher(self, watcher_id: int, sink: TopicListSink) -> None:
        if self._watchers.get(watcher_id) is sink:
            del self._watchers[watcher_id]

    # -- events ---------------------------------------------------------------

    def handle_events(self, events: list) -> None:
        for event in events:
            kind = event.__class__
            if kind is MessageReceived:
                sink = self._consumers.get(event.consumer_id)
                if sink is not None:
                    sink.on_message(event)
            elif kind is SendReceipt:
                producer = self._producers.get(event.producer_id)
                if producer is not None:
                    producer.on_receipt(event)
            elif kind is Answered:
                event.pending.resolve(self, event.result)
            elif kind is PingReceived:
                try:
                    self.command(self.protocol.send_command, proto.pong())
                except PulsarException:
                    pass
            elif kind is SendError:
                producer = self._producers.get(event.producer_id)
                if producer is not None:
                    producer.on_send_error(event)
                elif self.on_unknown_send_error is not None:
                    self.on_unknown_send_error(event)
            elif kind is ProducerClosed:
                producer = self._producers.pop(event.producer_id, None)
                if producer is not None:
                    logger.info("[%s] the broker closed producer %d", self.name, event.producer_id)
                    producer.on_closed(NotConnected("the broker closed the producer"))
            elif kind is ConsumerClosed:
                consumer = self._consumers.pop(event.consumer_id, None)
                if consumer is not None:
                    logger.info("[%s] the broker closed consumer %d", self.name, event.consumer_id)
                    consumer.on_closed(NotConnected("the broker closed the consumer"))
            elif kind is AuthChallenged:
                self.backend.spawn(self._refresh_credentials)
            elif kind is EndOfTopic:
                consumer = self._consumers.get(event.consumer_id)
                if consumer is not None:
                    consumer.on_end_of_topic()
            elif kind is ActiveConsumerChange:
                consumer = self._consumers.get(event.consumer_id)
                if consumer is not None:
                    consumer.on_active_change(event.is_active)
            elif kind is TopicListChanged:
                watcher = self._watchers.get(event.watcher_id)
                if watcher is not None:
                    watcher.on_topics_changed(event.new_topics, event.deleted_topics)

    # -- commands ---------------------------------------------------------------

    def request(self, build: Callable[[int], bytes], timeout: float) -> Any:
        """Send the command build(request_id) and block for its answer (a
        response record); raises the broker's error, Timeout, or NotConnected."""
        protocol = self.protocol
        request_id = protocol.new_request_id()
        pending = Pending(event=self.backend.event())
        self.command(protocol.send_request, request_id, build(request_id), pending)
        if not pending.event.wait(timeout):
            protocol.forget_request(request_id)
            if pending.result is None:
                raise Timeout("no answer from %s within %.1fs" % (self.name, timeout))
        result = pending.result
        if isinstance(result, BaseException):
            raise result
        return result

    def send_command(self, command: bytes) -> None:
        """Send a command that gets no answer by request id (FLOW, ACK, ...)."""
        self.command(self.protocol.send_command, command)

    def send_frames(self, frames: list[bytes]) -> None:
        """Send ready frames (SEND), in order."""
        self.command(self.protocol.send_frames, frames)

    def queue_frames(self, frames: list[bytes]) -> None:
        """Queue ready frames without writing them (the caller flushes after
        leaving its own lock: its order is the wire's, and no write happens
        while it holds the lock the reading task may need)."""
        self.backend.check_context("BrokerConnection.queue_frames")
        with self.lock:
            self.protocol.send_frames(frames)

    def is_ready(self) -> bool:
        return self.protocol.state is State.READY and not self.io_stopped

    # -- closing ----------------------------------------------------------------

    def close(self, reason: BaseException | None = None) -> None:
        self.close_now(reason)

    def on_closed(self) -> None:
        if self._keep_alive is not None:
            try:
                self._keep_alive.cancel()
            except Exception:  # pragma: no cover - a timer of a scheduler gone after a fork
                pass
        reason = NotConnected("connection to %s closed%s" % (
            self.name, ": %s" % (self.close_error,) if self.close_error else ""))
        sinks: list[Any] = (list(self._producers.values()) + list(self._consumers.values())
                            + list(self._watchers.values()))
        self._producers.clear()
        self._consumers.clear()
        self._watchers.clear()
        for sink in sinks:
            try:
                sink.on_closed(reason)
            except Exception:
                logger.exception("[%s] close hook of %r raised", self.name, sink)

    def stop_io_after_fork(self) -> None:
        """First thing in a forked child: no byte leaves this process on the parent's socket."""
        if not self.is_closed():
            self.stop_io(ForkedError("connection to %s belongs to the parent process" % self.name))
            self.protocol.state = State.CLOSED

    def after_fork_in_child(self) -> None:
        """In a forked child: drop the parent's socket without a word to the
        broker, and tell the sessions (their owners reconnect or fail)."""
        if self.stream is None and self.has_closed():
            return
        self.stop_io_after_fork()
        error = self.close_error or ForkedError("forked")
        self._keep_alive = None
        waiting = self.drop_after_fork(error)
        if self.backend.tasks_survive_fork:
            for pending in waiting:
                pending.resolve(self, error)
            self.set_closed_event()
        else:
            self.reset_closed_event()
        self._producers.clear()
        self._consumers.clear()

