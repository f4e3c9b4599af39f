"""The publisher: pynsq's Writer signature and callback contract, plus
blocking calls that return only when nsqd has the message, publishes
pipelined from any number of callers, spread over several nsqd kept
connected by a ``msgengine.supervisor.Supervisor``, and concurrent PUBs to
one topic joined into one MPUB (the lanes of ``nsq.publishing``, which also
holds the blocking ``pub``'s path to the connection and back, compiled or
pure). It counts what it published and what failed, per topic (``stats()``).
"""
from __future__ import annotations

import collections
import itertools
import logging
import ssl
from typing import Any, Awaitable, Callable, Iterable, TypedDict

from msgengine.correlator import Pending
from msgengine.runtime import (
    FOREIGN_THREAD_GRACE,
    ProcessLock,
    fork_generation,
    from_any_thread,
    monotonic,
    on_fork_in_child,
)
from msgengine.supervisor import Supervisor

from nsq import client, codec, hooks, loops, publishing
from nsq.config import DEFAULT_MAX_BODY_SIZE, DEFAULT_MAX_MSG_SIZE, Config, WriterSettings
from nsq.conn import MAX_DELAY_MS, Connection
from nsq.errors import (
    AuthError,
    ConnectionClosedError,
    Error,
    FeatureNegotiationError,
    InvalidArgumentError,
    InvalidBodyError,
    MessageTooLargeError,
    PartialPublishError,
    PublishInCallbackError,
    ReadOnlyAttributeError,
    SendError,
    TimeoutError,
)
from nsq.names import check_topic

logger = logging.getLogger(__name__)

Callback = Callable[[Any, Any], None]

BATCH_MAX_COUNT = publishing.BATCH_MAX_COUNT


class TopicStats(TypedDict):
    """One topic's counts in ``Writer.stats()``."""

    published: int  #: messages nsqd acknowledged (OK)
    errors: int  #: publish calls (PUB, MPUB, DPUB, a pub_many) that ended in an error or a timeout


class WriterStats(TypedDict):
    """``Writer.stats()``: totals, connections and the counts per topic."""

    published: int
    errors: int
    connections: int  #: nsqd connected now
    topics: dict[str, TopicStats]


class _TopicCounts:
    """What a Writer published to one topic. Plain int additions, without a
    lock, on the paths that already run: with the GIL an attribute's ``+=``
    is not interrupted by another thread (CPython switches threads only at
    calls and backward jumps); under gevent every publish runs on the hub."""

    __slots__ = ("published", "errors")

    def __init__(self) -> None:
        self.published = 0
        self.errors = 0


#: send(conn, waiter, what): put one publish on conn (what: the command's bytes, or a lane's topic and body)
Send = Callable[[Connection, Pending, Any], None]


def _send_request(conn: Connection, waiter: Pending, data: bytes) -> None:
    conn.send_request(data, waiter)


def _reporting_write(bridge: loops.LoopBridge, send: Send, callback: Callback) -> "tuple[Any, Send, Callback]":
    """pynsq's publish Future (its write's), for a publish with a callback
    made on the loop's thread: a future of the loop, and send and callback
    wrapped to settle it from any thread: None once the command is handed to
    a connection; the error if no connection could be picked (the callback
    hears (None, error)) or the connection was closed before the command was
    handed over. A failed future is marked retrieved (the callback reports
    the error), as pynsq's make_exc_future does."""
    future = bridge.loop.create_future()

    def settle(error: Any) -> None:
        if future.done():  # (the first outcome counts: a close after the write changes nothing)
            return
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error)
            future.exception()

    def written(error: Any) -> None:
        if bridge.in_loop_thread():
            settle(error)
        else:
            bridge.call_soon(settle, error)

    def send_and_report(conn: Connection, waiter: Pending, what: Any) -> None:
        send(conn, waiter, what)  # (raises ConnectionClosedError when the connection is closed)
        written(None)

    def callback_and_report(conn: Any, data: Any) -> None:
        if conn is None or isinstance(data, ConnectionClosedError):
            written(data)
        callback(conn, data)

    return future, send_and_report, callback_and_report


def _batches(bodies: Any, count: int, max_bytes: int) -> Iterable[list]:
    """Lists of at most count bodies whose MPUB body stays within max_bytes
    (a single body larger than that still makes a batch: MPUB's checks refuse it)."""
    batch: list = []
    size = 4  # the MPUB body's message count
    for body in bodies:
        grows = 4 + (len(body) if isinstance(body, (bytes, bytearray, memoryview)) else 0)
        if batch and (len(batch) >= count or size + grows > max_bytes):
            yield batch
            batch, size = [], 4
        batch.append(body)
        size += grows
    if batch:
        yield batch


class Writer:
    """Publishes to one or more nsqd.

    Without a callback, pub/mpub/dpub block until nsqd answers and return
    b"OK" or raise; with one, they return at once and later call
    ``callback(conn, data)`` where data is b"OK" or an nsq.Error.

    In a program with a tornado or asyncio loop (see nsq.loops), callbacks
    and the ``heartbeat`` hook are called on the loop's thread, and a
    publish made on the running loop's thread never blocks it: without a
    callback it returns an awaitable that resolves to b"OK" or raises
    (ignoring it is fire-and-forget, as on pynsq; a failure is logged);
    with one it returns, as pynsq does, the awaitable of the write: None
    once the command is handed to a connection, or the error (SendError
    when no connection is open) if it could not be; nsqd's answer goes to
    the callback, exactly once. Off the loop (threads, gevent), a publish
    with a callback returns None.

    Without a loop, callbacks run on whichever task read nsqd's answer
    (the connection's reader task, or a blocking publisher's that was
    reading for its own answer): keep them short, as that connection reads
    nothing else meanwhile. ``heartbeat`` runs on a task of its own.
    """

    def __init__(
        self,
        nsqd_tcp_addresses: Iterable[str] | str,
        reconnect_interval: float = WriterSettings.reconnect_interval,
        name: str | None = None,
        *,
        publish_timeout: float = WriterSettings.publish_timeout,
        retry_publish: bool = WriterSettings.retry_publish,
        max_msg_size: int = WriterSettings.max_msg_size,
        max_body_size: int = WriterSettings.max_body_size,
        join_publishes: bool = WriterSettings.join_publishes,
        **conn_kwargs: Any,
    ) -> None:
        addresses = client.address_list(nsqd_tcp_addresses, "nsqd_tcp_addresses")
        if not addresses:
            raise InvalidArgumentError("Writer needs at least one nsqd address")
        settings = WriterSettings(
            reconnect_interval=reconnect_interval,
            publish_timeout=publish_timeout,
            retry_publish=retry_publish,
            max_msg_size=max_msg_size,
            max_body_size=max_body_size,
            join_publishes=join_publishes,
        )
        self.nsqd_tcp_addresses = addresses
        self.name = name or addresses[0]
        self.reconnect_interval = settings.reconnect_interval
        self.publish_timeout = settings.publish_timeout
        self.retry_publish = settings.retry_publish
        self.max_msg_size = settings.max_msg_size
        self.max_body_size = settings.max_body_size
        self.join_publishes = settings.join_publishes
        self.conn_kwargs = conn_kwargs
        self._targets = [client.split_host_port(a) for a in addresses]
        self.config = Config.from_kwargs(conn_kwargs)
        # The program's event loop, if it has one: callbacks and hooks run there, and so does the
        # Writer when the loop runs on this thread (see nsq.loops); made before the loop runs, it
        # connects on the loop's first turn, as pynsq's does, unless something uses it before that.
        self._bridge = loops.program_loop(self.config.io_loop, self.config.backend)
        on_loop = loops.loop_backend(self.config, self._bridge)
        if on_loop is not None:
            self.config = self.config.replace(backend=on_loop)
        self.backend = self.config.backend
        self._placing = ProcessLock()  # the choice between starting here and on the loop's first turn
        #: the tasks (thread or greenlet ids) running a publish callback right now
        self._callback_tasks: set[int] = set()
        self.conns: dict[str, Connection] = {}
        self._conn_list: list[Connection] = []
        self._round_robin = itertools.count()
        self._counts: dict[str, _TopicCounts] = {}  # per topic: see stats()
        # Blocking publishes in flight; one task expires them at their deadline
        # (cheaper than a timer per call).
        self._blocking: set[Pending] = set()
        self._generation: int | None = None  # the fork generation the connections belong to
        self._supervisor: Supervisor | None = None
        self._ticker: Any = None
        # The lanes of every topic and connection, and the blocking pub() (compiled or pure):
        # it keeps a copy of _conn_list and _blocking, renewed wherever those are.
        self._publisher = publishing.Publisher(
            self.backend,
            pick=self._pick,
            counts_for=self._counts_for,
            in_this_process=self._in_this_process,
            elsewhere=self._pub_elsewhere,
            callback_tasks=self._callback_tasks,
            blocking=self._blocking,
            round_robin=self._round_robin,
            publish_timeout=self.publish_timeout,
            retry_publish=self.retry_publish,
            max_msg_size=self.max_msg_size,
            max_bytes=min(self.max_body_size, 1024 * 1024),
        )
        #: pub() without a callback goes straight to the publisher (no program loop, joined publishes)
        self._blocking_pub = self.join_publishes and self._bridge is None
        self._make_primitives()
        bridge = self._bridge
        if on_loop is None and bridge is not None and loops.loop_backend(self.config, bridge, not_running_too=True):
            bridge.call_soon(self._start_on_loop)
        else:
            self._start_tasks()
        client.register(self)
        on_fork_in_child(self)

    def __repr__(self) -> str:
        return "<nsq.Writer %s conns=%d>" % (self.name, len(self._conn_list))

    @property
    def io_loop(self) -> Any:
        """The loop user code runs on (see Reader.io_loop)."""
        return (self._bridge or loops.owned_loop()).io_loop

    @io_loop.setter
    def io_loop(self, value: Any) -> None:
        raise ReadOnlyAttributeError.on_assignment(
            self, "io_loop", "the loop is found when the Writer is made; pass io_loop= to Writer() "
            "(or make the Writer on that loop's thread)"
        )

    def __enter__(self) -> "Writer":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    # -- tasks and processes ------------------------------------------------

    @from_any_thread(inline=True)
    def _make_primitives(self) -> None:
        self._lock = self.backend.lock()
        self._connected = self.backend.event()
        self._closing = self.backend.event()
        self._closed = self.backend.event()

    def _start_on_loop(self) -> None:
        """The loop's first turn: start there, on its asyncio backend, unless the Writer was used
        (and so started) before."""
        with self._placing:
            if self._generation is not None or self._closing.is_set():
                return
            backend = loops.loop_backend(self.config, self._bridge)
            if backend is not None:
                self.config = self.config.replace(backend=backend)
                self.backend = backend
                self._publisher.backend = backend
                self._make_primitives()
        self._start_tasks()

    @from_any_thread(inline=True)
    def _start_tasks(self) -> None:
        with self._placing:
            if self._generation == fork_generation() or self._closing.is_set():
                return
            self._generation = generation = fork_generation()
        self._supervisor = supervisor = Supervisor(
            self.backend, self.name, self._open, max_reconnect_delay=self.reconnect_interval,
            reconnect_after_close=self.reconnect_interval,
        )
        for target in self._targets:
            supervisor.keep(target)
        interval = max(0.01, min(0.1, self.publish_timeout / 10))
        self._ticker = self.backend.call_every(interval, self._expire_blocking, generation)

    def _in_this_process(self) -> None:
        """After os.fork(), the first use in the child starts connections of its own."""
        if self._generation != fork_generation():
            self._start_tasks()

    def after_fork_in_child(self) -> None:
        """In a forked child: forget the parent's connections (their sockets
        are the parent's) and let the next use connect afresh."""
        self._generation = None  # tasks that survived the fork (greenlets) stop
        if self._supervisor is not None:
            self._supervisor.forget_after_fork()
        self._stop_ticker()
        conns = list(self.conns.values())
        if not self.backend.tasks_survive_fork:
            # locks and events may have been held by threads that do not exist here
            closing, closed = self._closing.is_set(), self._closed.is_set()
            self._make_primitives()
            if closing:  # closed in the parent: stays closed here
                self._closing.set()
            if closed:
                self._closed.set()
            self._blocking = set()
            self._publisher.blocking = self._blocking
        for conn in conns:
            conn.after_fork_in_child()
        self.conns = {}
        self._conn_list = []
        self._publisher.reset()
        self._connected.clear()

    # -- connections ------------------------------------------------------

    def _open(self, target: tuple[str, int]) -> Connection | None:
        """One connection attempt (the supervisor retries with backoff)."""
        generation = self._generation
        conn = Connection(target[0], target[1], self.config)
        conn.on(hooks.HEARTBEAT, self._on_heartbeat)
        conn.enable_caller_reads()  # a blocking publish reads its own answer when no one else reads
        conn.connect()  # (a failure is the supervisor's last_error)
        if generation != self._generation:  # forked while connecting: this connection is the parent's
            conn.after_fork_in_child()
            return None
        self._add(conn)
        return conn

    def _stop_ticker(self) -> None:
        ticker, self._ticker = self._ticker, None
        if ticker is not None:
            ticker.cancel()

    def _add(self, conn: Connection) -> None:
        with self._lock:
            if self._closing.is_set():
                conn.close()
                return
            # Forget a connection the moment it closes, so that no publish picks it
            # while its maintainer task has not woken up yet.
            conn.on(hooks.CLOSE, self._on_conn_close)
            self.conns[conn.id] = conn
            self._conn_list = self._publisher.conns = list(self.conns.values())
            self._connected.set()
        if not conn.is_connected():  # closed before the hook was attached
            self._remove(conn)

    def _on_conn_close(self, conn: Connection, **_: Any) -> None:
        self._remove(conn)

    def _on_heartbeat(self, conn: Connection, **_: Any) -> None:
        """A heartbeat was read (on the task that read it): call the hook on
        the program's loop, or, without one, on a task of its own: the
        reading task may be a publisher's, in the middle of its pub(), and
        a hook that blocks (or publishes) must not hold up the reads."""
        bridge = self._bridge
        if bridge is not None and bridge.in_use():
            bridge.call_soon(self._call_heartbeat, conn)
        else:
            self.backend.spawn(self._call_heartbeat, conn)

    def _call_heartbeat(self, conn: Connection) -> None:
        try:
            self.heartbeat(conn)
        except Exception:
            logger.exception("[%s] heartbeat hook raised", self.name)

    def heartbeat(self, conn: Connection) -> None:
        """Called on every heartbeat from nsqd (pynsq's hook: override it,
        e.g. for liveness monitoring); conn is the connection it came on.
        Runs on the program's loop when there is one, else on a task of its
        own; an exception is logged."""

    def connect(self) -> None:
        """pynsq's: ``connect_to_nsqd(host, port)`` for each of
        ``nsqd_tcp_addresses``. The Writer connects to them on its own from
        construction and reconnects after a loss, so this only matters to
        an override of ``connect_to_nsqd``, which hears each address (the
        library itself calls neither method)."""
        for host, port in self._targets:
            self.connect_to_nsqd(host, port)

    def connect_to_nsqd(self, host: str, port: int) -> None:
        """Keep the nsqd at host:port connected, as for the addresses given
        at construction (reconnected after a loss, used by publishes once
        connected); nothing if it is kept already or the Writer is closed.
        Returns None at once, as pynsq's does: the connection is made on a
        task (``wait_connected()`` or ``conns`` tell when it is up)."""
        if (not isinstance(host, str) or not host or isinstance(port, bool) or not isinstance(port, int)
                or not 0 < port < 65536):
            raise InvalidArgumentError("connect_to_nsqd needs a host string and an int port, not %r, %r" % (host, port))
        self._in_this_process()
        self._keep((host, port))

    @from_any_thread(inline=True)
    def _keep(self, target: tuple[str, int]) -> None:
        with self._lock:
            if self._closing.is_set():
                return
            if target not in self._targets:
                self._targets.append(target)  # (also kept by a forked child's fresh start)
            supervisor = self._supervisor
        if supervisor is not None:
            supervisor.keep(target)  # (connects on a task)

    def _remove(self, conn: Connection) -> None:
        with self._lock:
            if self.conns.get(conn.id) is conn:
                del self.conns[conn.id]
            self._conn_list = self._publisher.conns = list(self.conns.values())
            if not self._conn_list:
                self._connected.clear()
            self._publisher.forget(conn)

    def _pick(self, exclude: Connection | None = None, deadline: float | None = None) -> Connection:
        conns = self._conn_list
        if conns and exclude is None:  # the common case: closed connections leave the list on close
            conn = conns[next(self._round_robin) % len(conns)]
            if conn.is_connected():
                return conn
        if deadline is None:
            deadline = monotonic() + self.publish_timeout
        while True:
            conns = [c for c in self._conn_list if c.is_connected()]
            if conns:
                break
            if self._closing.is_set():
                raise SendError("writer is closed")
            remaining = deadline - monotonic()
            if remaining <= 0:
                error = self._supervisor.last_error if self._supervisor is not None else None
                if isinstance(error, (AuthError, FeatureNegotiationError, ssl.SSLError)):
                    raise error  # a reason that retrying will not fix: say it
                raise SendError("no open connections", error)
            if self._connected.is_set():
                # only connections that are closing right now: they leave the list at once
                self.backend.sleep(min(0.005, remaining))
            else:
                self._connected.wait(remaining)
        if exclude is not None and len(conns) > 1:
            conns = [c for c in conns if c is not exclude]
        return conns[next(self._round_robin) % len(conns)]

    # -- validation -------------------------------------------------------

    def _check_body(self, body: Any) -> bytes | bytearray | memoryview:
        if not isinstance(body, (bytes, bytearray, memoryview)):
            raise InvalidBodyError("message body must be bytes, not %s" % type(body).__name__)
        if len(body) > self.max_msg_size:
            raise MessageTooLargeError(
                "message of %d bytes exceeds max_msg_size %d (nsqd --max-msg-size)" % (len(body), self.max_msg_size)
            )
        return body

    def _encode_mpub(self, topic: str, msgs: Any) -> tuple[bytes, int]:
        """MPUB bytes for msgs and how many messages they carry; the codec
        checks each body's type, we check the sizes."""
        if isinstance(msgs, (bytes, bytearray, memoryview)):
            msgs = [msgs]
        elif isinstance(msgs, str) or not isinstance(msgs, Iterable):
            raise InvalidBodyError("mpub needs bytes or a list of bytes, not %s" % type(msgs).__name__)
        elif not isinstance(msgs, (list, tuple)):
            msgs = list(msgs)
        data = codec.encode_mpub(topic, msgs)
        total = len(data) - len(topic) - 10  # less b"MPUB ", topic, b"\n" and the 4-byte size
        if total > self.max_msg_size:  # (else no message in it can be larger: no need to look at each)
            largest = max(map(len, msgs))
            if largest > self.max_msg_size:
                raise MessageTooLargeError(
                    "message of %d bytes exceeds max_msg_size %d (nsqd --max-msg-size)" % (largest, self.max_msg_size)
                )
        if total > self.max_body_size:
            raise MessageTooLargeError(
                "MPUB body of %d bytes exceeds max_body_size %d (nsqd --max-body-size)" % (total, self.max_body_size)
            )
        return data, len(msgs)

    def _counts_for(self, topic: str) -> _TopicCounts:
        counts = self._counts.get(topic)
        if counts is None:
            counts = self._counts.setdefault(topic, _TopicCounts())  # (setdefault: one object per topic, any thread)
        return counts

    # -- publishing -------------------------------------------------------

    def pub(self, topic: str, msg: bytes, callback: Callback | None = None) -> "bytes | Awaitable[bytes] | None":
        if callback is None and self._blocking_pub:  # (the common case: see nsq.publishing)
            return self._publisher.pub(topic, msg)
        topic = check_topic(topic)
        body = self._check_body(msg)
        send: Send
        what: Any
        if self.join_publishes:
            send, what = self._send_to_lane, (topic, body)
        else:
            send, what = _send_request, codec.encode_pub(topic, body)
        counts = self._counts.get(topic) or self._counts_for(topic)
        if callback is None and self._bridge is None:  # (not joined: without _submit's questions)
            if self._generation != fork_generation():
                self._start_tasks()
            return self._publish_blocking(send, what, counts, 1)
        return self._submit(send, what, callback, counts, 1)

    def mpub(
        self,
        topic: str,
        msg: Iterable[bytes] | bytes | None = None,
        callback: Callback | None = None,
        *,
        msgs: Iterable[bytes] | bytes | None = None,
    ) -> "bytes | Awaitable[bytes] | None":
        """Publish several messages in one MPUB (``msg`` is a list of bodies, as
        in pynsq; ``msgs=`` is accepted too)."""
        topic = check_topic(topic)
        if (msg is None) == (msgs is None):
            raise InvalidBodyError("mpub needs the message bodies: mpub(topic, [body, ...])")
        data, count = self._encode_mpub(topic, msg if msg is not None else msgs)
        return self._submit(_send_request, data, callback, self._counts_for(topic), count)

    def dpub(self, topic: str, delay_ms: int, msg: bytes, callback: Callback | None = None) -> "bytes | Awaitable[bytes] | None":
        topic = check_topic(topic)
        if isinstance(delay_ms, bool) or not isinstance(delay_ms, int) or not 0 <= delay_ms <= MAX_DELAY_MS:
            # (nsqd would read a larger delay wrapped around: 2**64 ms as 0)
            raise InvalidArgumentError("dpub delay_ms must be an int from 0 to %d, not %r" % (MAX_DELAY_MS, delay_ms))
        data = codec.encode_dpub(topic, delay_ms, self._check_body(msg))
        return self._submit(_send_request, data, callback, self._counts_for(topic), 1)

    def pub_many(self, topic: str, bodies: Iterable[bytes], batch_size: int = 100, window: int = 8) -> int:
        """Publish many messages from one caller, pipelined: MPUBs of up to
        ``batch_size`` messages (and ``max_body_size`` bytes), with up to
        ``window`` of them awaiting nsqd's answer at once, all on one
        connection (nsqd keeps their order). Blocks; returns how many were
        published once nsqd acknowledged every MPUB.

        If one fails (or a body is refused), no further MPUB is sent and,
        once every MPUB sent has its answer, ``PartialPublishError`` is
        raised: its ``published`` messages from the start are in nsqd, its
        ``error`` is the first failure. A failure before anything was sent
        is raised as it is."""
        topic = check_topic(topic)
        for name, value in (("batch_size", batch_size), ("window", window)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgumentError("pub_many %s must be a positive int, not %r" % (name, value))
        if isinstance(bodies, (bytes, bytearray, memoryview, str)) or not isinstance(bodies, Iterable):
            raise InvalidBodyError("pub_many needs an iterable of bytes bodies, not %s" % type(bodies).__name__)
        self._in_this_process()
        bridge = self._bridge
        if bridge is not None and bridge.in_loop_thread():
            raise InvalidArgumentError("pub_many blocks: call it from a worker thread, not the event loop's thread")
        counts = self._counts_for(topic)
        try:
            published = self._pub_many(topic, iter(bodies), batch_size, window)
        except PartialPublishError as exc:
            counts.published += exc.published
            counts.errors += 1
            raise
        except BaseException:
            counts.errors += 1
            raise
        counts.published += published
        return published

    @from_any_thread()
    def _pub_many(self, topic: str, bodies: Any, batch_size: int, window: int) -> int:
        conn = self._pick()
        in_flight: collections.deque[tuple[int, int, Pending]] = collections.deque()  # (batch index, count, answer)
        sent = published = 0
        failure: BaseException | None = None
        failed_at = 0  # the index of the batch that failed first (when failure is set)
        blocking = self._blocking

        def settle() -> None:
            nonlocal published, failure, failed_at
            index, count, pending = in_flight.popleft()
            try:
                conn.await_answer(pending, pending.deadline)
            finally:
                blocking.discard(pending)
            result = pending.result
            if result is None:
                result = TimeoutError("nsqd %s did not answer an MPUB within %.1fs" % (conn.id, self.publish_timeout))
            if isinstance(result, BaseException):
                if failure is None or index < failed_at:  # (a body refused later may have been seen first)
                    failure, failed_at = result, index
            elif failure is None or index < failed_at:
                published += count

        limit = min(self.max_body_size, 1024 * 1024)
        for index, batch in enumerate(_batches(bodies, batch_size, limit)):
            try:
                data, _count = self._encode_mpub(topic, batch)
            except Error as exc:
                if failure is None:
                    failure, failed_at = exc, index
                break
            pending = Pending(event=None if conn.callers_read else self.backend.waiter(),
                              deadline=monotonic() + self.publish_timeout)
            blocking.add(pending)
            in_flight.append((index, len(batch), pending))
            try:
                conn.send_request(data, pending)
            except ConnectionClosedError as exc:
                pending.result = exc
            sent += 1
            while len(in_flight) >= window or (in_flight and in_flight[0][2].result is not None):
                settle()
            if failure is not None:
                break
        while in_flight:
            settle()
        if failure is not None:
            if not sent:
                raise failure
            raise PartialPublishError(
                "pub_many stopped after %d messages known to be published: %s" % (published, failure),
                published, failure,
            ) from failure
        return published

    def _send_to_lane(self, conn: Connection, waiter: Pending, topic_and_body: tuple[str, bytes]) -> None:
        """A PUB goes into its topic's lane on conn (joined with others while one is in flight)."""
        self._publisher.send_to_lane(conn, waiter, topic_and_body)

    def _pub_elsewhere(self, topic: str, body: Any, counts: _TopicCounts) -> bytes:
        """The publisher's blocking pub called outside the backend's context (another
        OS thread under gevent): the whole publish runs in it, through its door."""
        return self._publish_blocking(self._send_to_lane, (topic, body), counts, 1)

    def _submit(self, send: "Send", what: Any, callback: Callback | None, counts: _TopicCounts, n: int) -> Any:
        """One publish of n messages, counted in counts: blocking, with a callback, or on the program's loop."""
        self._in_this_process()
        bridge = self._bridge
        if bridge is not None and callback is not None:
            callback = bridge.wrap_callback(callback)  # called on the program's loop, as pynsq does
        if bridge is None or not bridge.in_loop_thread():
            if callback is None:
                return self._publish_blocking(send, what, counts, n)
            self.backend.call_threadsafe(self._publish_with_callback, send, what, callback, False, counts, n)
            return None
        # On the running loop's thread: never block it.
        if callback is None:  # an awaitable of nsqd's answer
            result, resolve = bridge.future("publish")
            callback = lambda conn, data: resolve(data)  # noqa: E731
        else:  # pynsq's: the awaitable of the write (nsqd's answer goes to the callback)
            result, send, callback = _reporting_write(bridge, send, callback)
        if self._conn_list and self.backend.may_call_inline():  # (the write itself never waits here: Driver.flush)
            self._publish_with_callback(send, what, callback, False, counts, n)
        else:  # waiting for a connection would stall the loop: wait on a task
            self.backend.spawn(self._publish_with_callback, send, what, callback, False, counts, n)
        return result

    @from_any_thread(timeout=lambda self, *_: self.publish_timeout + FOREIGN_THREAD_GRACE)
    def _publish_blocking(self, send: "Send", what: Any, counts: _TopicCounts, n: int) -> bytes:
        """Publish and wait for nsqd's answer (retrying once elsewhere with
        retry_publish); n messages counted published in counts, or one error."""
        if self._callback_tasks and self.backend.current_task_id() in self._callback_tasks:
            raise PublishInCallbackError(
                "a blocking publish from a publish callback would wait for an answer that only this "
                "task reads: pass a callback (writer.pub(topic, msg, callback))")
        deadline = monotonic() + self.publish_timeout
        tried: Connection | None = None
        blocking = self._blocking
        try:
            while True:
                conn = self._pick(tried, deadline)
                # (a connection whose callers read makes the event only if this call has to wait for another reader)
                waiter = Pending(None, None if conn.callers_read else self.backend.waiter(), deadline)
                blocking.add(waiter)
                try:
                    try:
                        send(conn, waiter, what)
                    except ConnectionClosedError as exc:
                        waiter.result = exc
                    else:
                        conn.await_answer(waiter, deadline)  # the answer, the close, or the deadline (_expire_blocking)
                finally:
                    blocking.discard(waiter)
                result = waiter.result
                if result.__class__ is bytes:  # (nsqd's OK: the common case first)
                    counts.published += n
                    return result
                if result is None:
                    raise TimeoutError(
                        "nsqd %s did not answer within %.1fs; the message may or may not have been published"
                        % (conn.id, self.publish_timeout)
                    )
                if isinstance(result, ConnectionClosedError) and self.retry_publish and tried is None:
                    tried = conn
                    continue
                if isinstance(result, BaseException):
                    raise result
                counts.published += n
                return result
        except BaseException:
            counts.errors += 1
            raise

    def _expire_blocking(self, generation: int) -> None:
        """A periodic tick: wake blocking publishes whose deadline passed
        (cheaper than a timer per call)."""
        if generation != self._generation:
            return
        now = monotonic()
        for waiter in [w for w in self._blocking.copy() if w.deadline <= now]:  # (copy(): atomic against other threads)
            event = waiter.event
            if event is not None:  # (None: the caller reads the stream itself, with the deadline)
                event.set()

    def _publish_with_callback(self, send: "Send", what: Any, callback: Callback, retried: bool,
                               counts: _TopicCounts, n: int) -> None:
        try:
            conn = self._pick()
        except Error as exc:
            counts.errors += 1
            callback(None, exc)
            return

        def answered(conn: Connection, result: Any) -> None:
            if isinstance(result, ConnectionClosedError) and self.retry_publish and not retried:
                self.backend.spawn(self._publish_with_callback, send, what, callback, True, counts, n)
                return
            if result.__class__ is bytes:
                counts.published += n
            else:
                counts.errors += 1
            task = self.backend.current_task_id()
            tasks = self._callback_tasks
            nested = task in tasks
            tasks.add(task)
            try:
                callback(conn, result)
            finally:
                if not nested:
                    tasks.discard(task)

        waiter = Pending(callback=answered)
        try:
            send(conn, waiter, what)
        except ConnectionClosedError as exc:
            answered(conn, exc)
        else:
            conn.reader_needed()  # no caller waits to read this answer

    # -- lifecycle --------------------------------------------------------

    def _lane_busy(self, conn: Connection) -> bool:
        """PUBs to this connection still waiting in a lane (between two of its commands)."""
        with self._lock:
            return bool(self._publisher.lane_busy(conn))

    def is_closed(self) -> bool:
        return self._closed.is_set()

    def stats(self) -> WriterStats:
        """Messages published (acknowledged by nsqd) and publish calls that
        failed, in all and per topic, since the Writer was made; and the nsqd
        connected now. A call that timed out counts as an error (its messages
        may or may not be in nsqd). Safe from any thread: it only reads."""
        topics: dict[str, TopicStats] = {
            topic: {"published": counts.published, "errors": counts.errors}
            for topic, counts in list(self._counts.items())  # (list(): one step, whatever other threads add)
        }
        return {
            "published": sum(t["published"] for t in topics.values()),
            "errors": sum(t["errors"] for t in topics.values()),
            "connections": len(self._conn_list),
            "topics": topics,
        }

    def wait_connected(self, timeout: float | None = None) -> bool:
        """Block until at least one nsqd is connected."""
        self._in_this_process()
        return self._wait_connected(timeout)

    @from_any_thread(timeout=lambda self, timeout=None: None if timeout is None else timeout + FOREIGN_THREAD_GRACE)
    def _wait_connected(self, timeout: float | None) -> bool:
        return bool(self._connected.wait(timeout))

    @from_any_thread(timeout=lambda self, timeout=5.0: timeout + FOREIGN_THREAD_GRACE, inline=True)
    def close(self, timeout: float = 5.0) -> None:
        """Let publishes in flight get their answers (up to timeout), then close.
        On the program's loop outside its tasks (a callback), the close runs on a
        task of its own and this returns at once (waiting would stall the loop)."""
        if self.backend.name == "asyncio" and loops.stalls_loop(self._bridge, self.backend):
            self.backend.spawn(self.close, timeout)
            return
        if self._closing.is_set():
            self._closed.wait(timeout)
            return
        self._closing.set()
        deadline = monotonic() + timeout
        if self._supervisor is not None:
            self._supervisor.close()  # no new connections from here on
        for conn in list(self._conn_list):
            while conn.is_connected() and (not conn.is_idle() or self._lane_busy(conn)) and monotonic() < deadline:
                self.backend.sleep(0.005)
        with self._lock:
            conns = list(self.conns.values())
        for conn in conns:
            conn.close()
        self._stop_ticker()
        self._closed.set()
        client.unregister(self)
