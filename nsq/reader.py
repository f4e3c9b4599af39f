"""The consumer: pynsq's Reader signature and hooks. It owns handler
dispatch (one at a time unless concurrency=N, on worker tasks or the
program's loop), max_tries and giving_up, the heartbeat() and disabled()
hooks, awaitable handlers, FINs of a batch written together, graceful close
and stats; the connections, discovery, reconnection and RDY are its
``Subscription``'s.

Where user code runs. In a program with a loop (tornado's, or asyncio's; the
Reader looks for it when it starts), the handler, preprocess_message,
validate_message, giving_up, heartbeat, disabled and the listeners of the
messages' events run on the loop's thread, as in pynsq. Without a loop they
run on the library's tasks: handlers on worker threads, heartbeat on the
connection's read thread, disabled on the timer's task. Under gevent all of
them run in greenlets of the hub, except the body of an ``async def`` handler,
which an asyncio loop on a real OS thread awaits. The connect_to_nsqd and
query_lookupd overrides block until connected (or answered), so they always
run on the library's tasks, never on the program's loop.
"""
from __future__ import annotations

import inspect
import logging
import os
from typing import Any, Callable, Iterable, Mapping

from msgengine.errors import EngineError
from msgengine.runtime import FOREIGN_THREAD_GRACE, from_any_thread, monotonic, on_fork_in_child

from nsq import client, loops
from nsq.config import Config, ReaderSettings
from nsq.conn import Connection
from nsq.errors import ConfigError, Error, ForkedError, ReadOnlyAttributeError
from nsq.message import Message
from nsq.names import check_channel, check_topic
from nsq.subscription import Subscription

logger = logging.getLogger(__name__)

Handler = Callable[[Message], Any]

_STOP = object()

# Answers of one batch of handler calls leave together, but never later than this (seconds).
ACK_FLUSH_INTERVAL = 0.05


def _verdict(result: Any) -> bool | None:
    """What a handler's result says: True finishes, False requeues, None
    says neither. 1 and 0 count as True and False, as pynsq reads them."""
    if result is True or result is False:
        return result
    if isinstance(result, int) and result in (0, 1):
        return bool(result)
    return None


class Reader(metaclass=client.ClientMeta):
    """Consumes a topic/channel from nsqd (directly or discovered through nsqlookupd).

    The handler returns True to finish a message and False to requeue it; an
    exception requeues it too. It may also return an awaitable (``async def``
    handlers, futures): its result decides the same way once it is done.
    ``message.enable_async()`` lets later code (any thread or greenlet) call
    ``finish()``/``requeue()`` instead.

    It starts as pynsq's does: when ``nsq.run()`` (or ``run()``/``start()``)
    runs, on the first turn of the program's tornado/asyncio loop, or at once
    when made while either is already running. In a program with such a loop
    (found when the Reader is made or, failing that, when it starts: a Reader
    made before the program imports tornado finds it then), handlers and hooks
    are called on the loop's thread (``io_loop``); see the module docstring.
    """

    def __init__(
        self,
        topic: str | Handler,
        channel: str,
        message_handler: Handler | str | None = None,
        name: str | None = None,
        nsqd_tcp_addresses: Iterable[str] | str | None = None,
        lookupd_http_addresses: Iterable[str] | str | None = None,
        max_tries: int = ReaderSettings.max_tries,
        max_in_flight: int = ReaderSettings.max_in_flight,
        lookupd_poll_interval: float = ReaderSettings.lookupd_poll_interval,
        low_rdy_idle_timeout: float = ReaderSettings.low_rdy_idle_timeout,
        max_backoff_duration: float = ReaderSettings.max_backoff_duration,
        lookupd_poll_jitter: float = ReaderSettings.lookupd_poll_jitter,
        lookupd_connect_timeout: float = ReaderSettings.lookupd_connect_timeout,
        lookupd_request_timeout: float = ReaderSettings.lookupd_request_timeout,
        *,
        concurrency: int = ReaderSettings.concurrency,
        close_timeout: float = ReaderSettings.close_timeout,
        max_reconnect_delay: float = ReaderSettings.max_reconnect_delay,
        **conn_kwargs: Any,
    ) -> None:
        if callable(topic):  # nsq.Reader(handler, topic, channel)
            topic, channel, message_handler = channel, message_handler, topic  # type: ignore[assignment]
        self.topic = check_topic(topic)
        self.channel = check_channel(channel)
        if message_handler is not None and not callable(message_handler):
            raise ConfigError("message_handler must be callable")
        settings = ReaderSettings(
            max_tries=max_tries,
            max_in_flight=max_in_flight,
            lookupd_poll_interval=lookupd_poll_interval,
            low_rdy_idle_timeout=low_rdy_idle_timeout,
            max_backoff_duration=max_backoff_duration,
            lookupd_poll_jitter=lookupd_poll_jitter,
            lookupd_connect_timeout=lookupd_connect_timeout,
            lookupd_request_timeout=lookupd_request_timeout,
            concurrency=concurrency,
            close_timeout=close_timeout,
            max_reconnect_delay=max_reconnect_delay,
        )
        self.nsqd_tcp_addresses = client.address_list(nsqd_tcp_addresses, "nsqd_tcp_addresses")
        self.lookupd_http_addresses = client.address_list(lookupd_http_addresses, "lookupd_http_addresses")
        if not self.nsqd_tcp_addresses and not self.lookupd_http_addresses:
            raise ConfigError("Reader needs nsqd_tcp_addresses or lookupd_http_addresses")
        self._direct = [client.split_host_port(a) for a in self.nsqd_tcp_addresses]
        self.message_handler = message_handler
        self.name = name or "%s:%s" % (self.topic, self.channel)
        # pynsq's attributes (read, and sometimes assigned, by programs and subclasses);
        # max_in_flight is the flow control's (a property)
        self.max_tries = settings.max_tries
        self.lookupd_poll_interval = settings.lookupd_poll_interval
        self.lookupd_poll_jitter = settings.lookupd_poll_jitter
        self.lookupd_connect_timeout = settings.lookupd_connect_timeout
        self.lookupd_request_timeout = settings.lookupd_request_timeout
        self.low_rdy_idle_timeout = settings.low_rdy_idle_timeout
        self.max_backoff_duration = settings.max_backoff_duration
        self.concurrency = settings.concurrency
        self.close_timeout = settings.close_timeout
        self.max_reconnect_delay = settings.max_reconnect_delay
        self.config = Config.from_kwargs(conn_kwargs)
        self.conn_kwargs = conn_kwargs
        # The program's event loop, if it has one: user code is called there
        # (if none yet, the Reader looks again when it starts), and the Reader
        # runs on it when it is running here (else it may move there as it starts).
        self._bridge = loops.program_loop(self.config.io_loop, self.config.backend)
        on_loop = loops.loop_backend(self.config, self._bridge)
        if on_loop is not None:
            self.config = self.config.replace(backend=on_loop)
        self.backend = self.config.backend
        self._disabled_by_hook = False
        self._disabled_check_queued = False  # a tick's disabled() check waits for the loop
        self._max_in_flight_before_disabled = settings.max_in_flight
        self._settings = settings
        self._subscription = self._make_subscription()
        self._make_primitives()
        self._started = False
        self._forked_from: int | None = None  # the pid that started this Reader, when this is a forked child
        self._handling: set[int] = set()  # tasks currently inside a handler batch
        self._tasks: list[Any] = []
        self._stats = {"given_up": 0, "handler_errors": 0}  # (received/finished/requeued: the subscription's)
        client.register(self)
        on_fork_in_child(self)

    def _make_subscription(self) -> Subscription:
        return Subscription(
            self.topic,
            self.channel,
            self.config,
            self._settings,
            self._dispatch,
            name=self.name,
            nsqd=self._direct,
            lookupd_http_addresses=self.lookupd_http_addresses,
            on_heartbeat=self._on_heartbeat,
            poll_round=lambda: self.query_lookupd(),  # both overridable, as in pynsq
            connect=lambda host, port: self.connect_to_nsqd(host, port),
            before_tick=self._tick_disabled,
        )

    @from_any_thread(inline=True)
    def _make_primitives(self) -> None:
        self._lock = self.backend.lock()
        self._queue = self.backend.queue()
        self._closing = self.backend.event()
        self._closed = self.backend.event()

    def _move_to_loop(self) -> None:
        """Starting on the program's running loop (pynsq's ``Reader(...)`` then
        the loop's start): run there, on its asyncio backend, if nothing has
        started yet on the backend chosen at construction (see nsq.loops)."""
        if self._started or self.backend.name != "threads" or self._closing.is_set():
            return
        backend = loops.loop_backend(self.config, self._bridge)
        if backend is None:
            return
        max_in_flight = self.max_in_flight  # (set_max_in_flight may have changed it before the start)
        self.config = self.config.replace(backend=backend)
        self.backend = backend
        self._make_primitives()
        self._subscription = self._make_subscription()
        if max_in_flight != self._settings.max_in_flight:
            self._subscription.set_max_in_flight(max_in_flight)

    def _handles_on_reads(self) -> bool:
        """Handlers run in the reading task itself (pynsq's way): on the loop's backend, one at a time."""
        return self.backend.name == "asyncio" and self.concurrency == 1

    def after_construction(self) -> None:
        """Every __init__ of a subclass has returned: start as pynsq would."""
        if self._bridge is not None:
            self._bridge.call_soon(self._start_logged)  # on the loop's first turn
        elif client.running():
            self.start()  # made while nsq.run() runs

    def _start_logged(self) -> None:
        try:
            self.start()
        except Exception:
            logger.exception("[%s] cannot start", self.name)

    def __repr__(self) -> str:
        return "<nsq.Reader %s conns=%d total_rdy=%d>" % (self.name, len(self.conns), self.total_rdy)

    @property
    def io_loop(self) -> Any:
        """The loop user code runs on: the program's tornado IOLoop (or an
        IOLoop-like view of its asyncio loop); in a program without a loop,
        one the library owns (``add_callback``, ``call_later``, ... work on it)."""
        bridge = self._bridge
        if bridge is None and not self._started:  # the loop it will find when it starts
            bridge = loops.program_loop(None, self.backend)
        return (bridge or loops.owned_loop()).io_loop

    @io_loop.setter
    def io_loop(self, value: Any) -> None:
        raise ReadOnlyAttributeError.on_assignment(
            self, "io_loop", "the loop is found when the Reader is made; pass io_loop= to Reader() "
            "(or make the Reader on that loop's thread)"
        )

    # -- pynsq attributes -------------------------------------------------------

    # pynsq kept these as plain attributes; here they are the subscription's. Assigning
    # one either does what it did on pynsq (max_in_flight; conns with what it holds) or
    # raises ReadOnlyAttributeError saying what to do instead.

    @property
    def conns(self) -> dict[str, Connection]:
        """Open connections by id (host:port)."""
        return self._subscription.conns

    @conns.setter
    def conns(self, value: Any) -> None:
        # pynsq's unit tests reset a new Reader's conns to an empty dict: assigning what it
        # already holds (same ids, same connections) changes nothing, so it is accepted
        current = self._subscription.conns
        if isinstance(value, Mapping) and len(value) == len(current) and all(
            current.get(key) is conn for key, conn in value.items()
        ):
            return
        raise ReadOnlyAttributeError.on_assignment(
            self, "conns", "the Reader keeps its connections itself: connect_to_nsqd(host, port) adds one, "
            "nsqd_tcp_addresses=/lookupd_http_addresses= choose them, close() ends them"
        )

    @property
    def max_in_flight(self) -> int:
        return self._subscription.rdy.max_in_flight

    @max_in_flight.setter
    def max_in_flight(self, value: int) -> None:
        # as pynsq's attribute, it sets the budget that RDY is spread from: set_max_in_flight()
        if "_subscription" not in self.__dict__:
            raise ReadOnlyAttributeError.on_assignment(
                self, "max_in_flight", "Reader.__init__ has not run yet and would overwrite it (as on pynsq); "
                "pass max_in_flight= to Reader.__init__, or assign it (or call set_max_in_flight()) after that"
            )
        self.set_max_in_flight(value)

    @property
    def total_rdy(self) -> int:
        return self._subscription.rdy.total_rdy

    @total_rdy.setter
    def total_rdy(self, value: int) -> None:
        raise ReadOnlyAttributeError.on_assignment(
            self, "total_rdy", "it is the sum of the connections' RDY, counted by the Reader; "
            "set_max_in_flight(n) changes the budget it is spread from"
        )

    @property
    def backoff_timer(self) -> Any:
        return self._subscription.rdy.backoff_timer

    @backoff_timer.setter
    def backoff_timer(self, value: Any) -> None:
        raise ReadOnlyAttributeError.on_assignment(
            self, "backoff_timer", "the Reader makes its backoff timer from max_backoff_duration= "
            "(pass it to Reader()); its methods may be called, the object cannot be replaced"
        )

    def set_message_handler(self, message_handler: Handler) -> None:
        if not callable(message_handler):
            raise ConfigError("message_handler must be callable")
        self.message_handler = message_handler

    # -- hooks users override ---------------------------------------------------

    def process_message(self, message: Message) -> Any:
        if self.message_handler is None:
            raise ConfigError("Reader %s has no message_handler (and process_message is not overridden)" % self.name)
        return self.message_handler(message)

    def preprocess_message(self, message: Message) -> Message:
        return message

    def validate_message(self, message: Message) -> bool:
        return True

    def giving_up(self, message: Message) -> None:
        logger.warning(
            "[%s] giving up on message %s after %d tries (max:%d) %r",
            self.name, message.id, message.attempts, self.max_tries, message.body[:100],
        )

    def heartbeat(self, conn: Connection) -> None:
        """Called on every heartbeat from nsqd (on the program's loop, if any)."""

    # -- lifecycle --------------------------------------------------------------

    def _find_loop(self) -> None:
        """A Reader made before the program had a loop (before it imported
        tornado, say) looks again as it starts: nsq.run() starts it on its loop."""
        if self._bridge is None and self.config.io_loop is None:
            self._bridge = loops.program_loop(None, self.backend)

    def _check_startable(self) -> None:
        if self.message_handler is None and type(self).process_message is Reader.process_message:
            raise ConfigError("you must specify the Reader's message_handler (or override process_message)")
        if self._forked_from is not None:
            raise ForkedError(
                "Reader %s was started in process %d, which this process forked from; a Reader consumes only "
                "in the process that started it: create and start a new Reader here" % (self.name, self._forked_from)
            )

    @from_any_thread(inline=True)
    def start(self) -> None:
        """Start connecting and consuming in the background (run() calls it)."""
        self._check_startable()
        if not self._started:
            self._find_loop()
            self._move_to_loop()
        with self._lock:
            if self._started or self._closing.is_set():
                return
            self._started = True
        self._apply_disabled()
        spawn = self.backend.spawn
        if not self._handles_on_reads():
            # (with a loop, handlers run there once the program runs it; until then, on the workers)
            self._tasks += [spawn(self._worker) for _ in range(self.concurrency)]
        self._subscription.start()

    def run(self) -> None:
        """Consume until close() (or Ctrl-C, which closes gracefully).

        In a program with a loop that is not running yet, this runs the loop
        until the Reader closes. A KeyboardInterrupt or SystemExit raised by
        the handler closes the Reader and is raised again here."""
        self._check_startable()
        if not self._started:
            self._find_loop()
        bridge = self._bridge if self._bridge is not None and not self._bridge.is_running() else None
        if bridge is not None:  # a loop to run here
            bridge.call_soon(self._start_on_loop, bridge)  # on the loop's first turn, where handlers will run
        else:
            self.start()
        try:
            if bridge is not None:
                bridge.run()
                if not self._closed.is_set() and self.backend.name == "asyncio":
                    return  # the program stopped its loop: the Reader, on it, waits for the next run
            # Poll instead of waiting on the Event: Ctrl-C inside Event.wait() can
            # leave its lock held, and close() must set that Event.
            while not self._closed.is_set():
                self.backend.pause(0.05)
        except KeyboardInterrupt:  # Ctrl-C: a graceful close, and run() returns
            self.close()
        finally:
            client.raise_interrupt()

    def _start_on_loop(self, bridge: loops.LoopBridge) -> None:
        self._start_logged()
        watcher = self.backend.spawn(self._stop_loop_when_closed, bridge)  # (on the backend the start chose)
        # (lost when the loop is next run by another thread: each run() watches anew, the old one goes)
        self.backend.when_lost(watcher, lambda: None)

    def _stop_loop_when_closed(self, bridge: loops.LoopBridge) -> None:
        self._closed.wait()
        bridge.stop()


    def is_closed(self) -> bool:
        return self._closed.is_set()

    def after_fork_in_child(self) -> None:
        """In a forked child: a Reader started in the parent stops here for
        good (its sockets are the parent's, and the parent goes on consuming);
        one that was never started starts normally in the child."""
        if not self._started or self._closed.is_set():
            return
        self._forked_from = os.getppid()
        conns = self._subscription.forget_after_fork()
        if self.backend.tasks_survive_fork:
            try:
                self._closing.set()  # greenlets survived: they see it and stop
                for _ in range(self.concurrency):
                    self._queue.put(_STOP)
                self._closed.set()
            except (Error, EngineError):  # forked from a thread other than the hub's: no greenlet runs here
                pass
        else:
            self._make_primitives()  # held by threads that do not exist here, maybe
            self._closing.set()
            self._closed.set()
        for conn in conns:
            conn.after_fork_in_child()
        client.unregister(self)

    # -- connections --------------------------------------------------------------

    @from_any_thread(inline=True)
    def connect_to_nsqd(self, host: str, port: int) -> Connection | None:
        """Connect and subscribe to one nsqd; returns the connection, or None
        when it is already connected or the attempt failed (logged). Called
        in a callback of the loop the Reader runs on, it connects on a task
        and returns None at once (waiting would stall the loop)."""
        if self._closing.is_set():
            return None
        if loops.stalls_loop(self._bridge, self.backend) and self.backend.name == "asyncio":
            self.backend.spawn(self.connect_to_nsqd, host, port)
            return None
        return self._subscription.connect(host, port)

    @from_any_thread(inline=True)
    def query_lookupd(self) -> list[tuple[str, int]]:
        """One discovery round: ask every nsqlookupd at once, connect to new
        producers; returns them. In a callback of the loop the Reader runs on,
        the round runs on a task and this returns [] at once."""
        if loops.stalls_loop(self._bridge, self.backend) and self.backend.name == "asyncio":
            self.backend.spawn(self.query_lookupd)
            return []
        return self._subscription.query_lookupd()

    @classmethod
    def disabled(cls) -> bool:
        """Override to pause consumption while it returns True (pynsq's hook;
        looked at on start and at every RDY redistribution, at most 5 s apart,
        on the program's loop if there is one). ``set_max_in_flight(0)`` does
        the same on demand."""
        return False

    def _tick_disabled(self) -> None:
        """The subscription's tick: ask disabled(), on the program's loop if in use
        (one check at a time waits there, however long the loop is stopped)."""
        if getattr(type(self).disabled, "__func__", None) is _DISABLED_HOOK:
            return  # not overridden: nothing to call (nor a loop to wake)
        bridge = self._bridge
        if bridge is None or not bridge.in_use():
            self._apply_disabled()
        elif not self._disabled_check_queued:
            self._disabled_check_queued = True
            bridge.call_soon(self._apply_disabled_on_loop)

    def _apply_disabled_on_loop(self) -> None:
        self._disabled_check_queued = False
        if not self._closing.is_set():
            self._apply_disabled()

    def _apply_disabled(self) -> None:
        if getattr(type(self).disabled, "__func__", None) is _DISABLED_HOOK:
            return  # not overridden
        try:
            disabled = bool(self.disabled())
        except Exception:
            logger.exception("[%s] disabled() raised; treating it as False", self.name)
            disabled = False
        if disabled and not self._disabled_by_hook:
            logger.info("[%s] disabled() is True: pausing (RDY 0)", self.name)
            self._max_in_flight_before_disabled = self.max_in_flight
            self._disabled_by_hook = True
            self._set_max_in_flight(0)
        elif not disabled and self._disabled_by_hook:
            logger.info("[%s] disabled() is False again: resuming", self.name)
            self._disabled_by_hook = False
            self._set_max_in_flight(self._max_in_flight_before_disabled)

    def is_starved(self) -> bool:
        """True when some connection has (nearly) as many messages in flight as its RDY."""
        return self._subscription.is_starved()

    @from_any_thread(inline=True)
    def set_max_in_flight(self, max_in_flight: int) -> None:
        """Change max_in_flight now (0 pauses consumption)."""
        if isinstance(max_in_flight, bool) or not isinstance(max_in_flight, int) or max_in_flight < 0:
            raise ConfigError("max_in_flight must be an int >= 0, not %r" % (max_in_flight,))
        if self._disabled_by_hook:  # applies once disabled() turns False
            self._max_in_flight_before_disabled = max_in_flight
            return
        self._set_max_in_flight(max_in_flight)

    def _set_max_in_flight(self, max_in_flight: int) -> None:
        self._subscription.set_max_in_flight(max_in_flight)

    # -- messages -------------------------------------------------------------------

    def _on_heartbeat(self, conn: Connection) -> None:
        """A connection's read task heard a heartbeat: the hook, on the program's loop if in use."""
        if getattr(self.heartbeat, "__func__", None) is Reader.heartbeat:
            return  # not overridden: nothing to call (nor a loop to wake)
        bridge = self._bridge
        if bridge is not None and bridge.in_use() and self.backend.name != "asyncio":
            bridge.call_soon(self._heartbeat_logged, conn)
        else:  # (on the loop's backend, the reading task is on the loop: pynsq calls it there too)
            self._heartbeat_logged(conn)

    def _heartbeat_logged(self, conn: Connection) -> None:
        try:
            self.heartbeat(conn)
        except Exception:
            logger.exception("[%s] heartbeat hook raised", self.name)

    def _dispatch(self, conn: Connection, messages: list[Message]) -> None:
        """The subscription's sink: one read's messages, to the workers or the program's loop."""
        bridge = self._bridge
        if self._handles_on_reads():
            self._handle_batch(conn, messages)
        elif bridge is not None and bridge.in_use() and self.backend.name != "asyncio":
            bridge.call_soon(self._handle_batch, conn, messages)
        elif self.concurrency == 1:
            self._queue.put((conn, messages))
        else:
            for message in messages:
                self._queue.put((conn, (message,)))

    def _worker(self) -> None:
        get = self._queue.get
        while True:
            item = get()
            if item is _STOP:
                return
            try:
                self._handle_batch(*item)
            except Exception:  # a worker must outlive any one batch, or nothing more is handled
                logger.exception("[%s] error while handling a batch of messages", self.name)

    def _handle_batch(self, conn: Connection, messages: Any) -> None:
        """Hand one read's messages to the handler, on a worker task or the program's loop."""
        if self._closing.is_set():
            return  # not handed to a handler: nsqd times it out and redelivers
        me = self.backend.current_task_id()
        with self._lock:
            self._handling.add(me)
        conn.hold_answers()
        finished: list[bytes] = []
        handle = self._handle
        closing = self._closing.is_set
        flush_at = monotonic() + ACK_FLUSH_INTERVAL
        # (on the loop's backend a long batch gives the loop its turns; elsewhere, no call per message)
        pause_point = self.backend.pause_point if self.backend.name == "asyncio" else None
        try:
            for message in messages:
                if closing():
                    break
                if pause_point is not None:
                    pause_point()
                if handle(message):
                    message.mark_finished()
                    finished.append(message.id)
                if monotonic() >= flush_at:  # slow handlers: answers must not wait for the whole batch
                    if finished:
                        self._subscription.finish_many(conn, finished)
                        finished = []
                    conn.flush()
                    flush_at = monotonic() + ACK_FLUSH_INTERVAL
        finally:
            conn.release_answers()
            if finished:
                self._subscription.finish_many(conn, finished)
            with self._lock:
                self._handling.discard(me)
            self._subscription.flush_all()

    def _handle(self, message: Message) -> bool:
        """Run the hooks and the handler; True means "finish it" (the caller
        batches those FINs); every other outcome has been answered here."""
        if self.max_tries and message.attempts > self.max_tries:
            self._give_up(message)
            return False
        try:
            if not self.validate_message(self.preprocess_message(message)):
                return not message.has_responded()
            result = self.process_message(message)
        except (KeyboardInterrupt, SystemExit) as exc:
            self._interrupted(message, exc)
            return False
        except Exception:
            self._handler_failed(message, "raised")
            return False
        if message.is_async() or message.has_responded():
            if loops.is_awaitable(result):  # nothing will await it: do not leave it unawaited
                self._settle(message, result, answer=False)
            return False
        if result is True:  # the per-message common case: no call
            return True
        verdict = _verdict(result)
        if verdict is True:
            return True
        if verdict is False:
            message.requeue()
            return False
        if result is None:
            logger.error(
                "[%s] handler returned None for message %s; return True to finish or False to requeue (requeueing)",
                self.name, message.id,
            )
            message.requeue()
            return False
        if loops.is_awaitable(result):
            message.enable_async()
            self._settle(message, result, answer=True)
            return False
        self._handler_failed(
            message, "returned %s, which is neither a bool nor an awaitable" % (
                "a generator (a coroutine needs async def or @gen.coroutine)" if inspect.isgenerator(result)
                else "a %s" % type(result).__name__
            ),
            log_traceback=False,
        )
        return False

    def _handler_failed(self, message: Message, what: str, log_traceback: bool = True) -> None:
        log = logger.exception if log_traceback else logger.error
        log("[%s] handler %s on message %s; requeueing", self.name, what, message.id)
        with self._lock:
            self._stats["handler_errors"] += 1
        if not message.has_responded():
            message.requeue()

    def _interrupted(self, message: Message, exc: BaseException) -> None:
        """KeyboardInterrupt or SystemExit from a handler: requeue, close, and
        let run()/nsq.run() raise it in the thread that runs them."""
        logger.warning("[%s] handler raised %s; requeueing and closing", self.name, type(exc).__name__)
        if not message.has_responded():
            message.requeue(backoff=False, delay=0)  # the message did not fail: the program is stopping
        self.backend.call_threadsafe(self._close_in_background, self.close_timeout)
        client.report_interrupt(exc)

    def _close_in_background(self, timeout: float) -> None:
        if not self._closing.is_set():
            self._closing.set()
            self.backend.spawn(self._close, timeout)

    def _settle(self, message: Message, awaitable: Any, answer: bool) -> None:
        """Await what a handler returned (on the program's loop, or the owned
        one); with answer, its result finishes or requeues the message."""

        def settled(ok: bool, value: Any) -> None:
            if not answer or message.has_responded():
                if not ok and not isinstance(value, Exception):
                    self._interrupted(message, value)
                return
            if ok and _verdict(value) is True:
                message.finish()
            elif ok:
                if _verdict(value) is None:
                    logger.error(
                        "[%s] handler's awaitable gave %r for message %s, not True or False; requeueing",
                        self.name, value, message.id,
                    )
                message.requeue()
            elif isinstance(value, Exception):
                logger.error("[%s] handler's awaitable raised on message %s; requeueing", self.name, message.id,
                             exc_info=value)
                with self._lock:
                    self._stats["handler_errors"] += 1
                message.requeue()
            else:
                self._interrupted(message, value)

        def on_loop(ok: bool, value: Any) -> None:  # the outcome enters the runtime like any other call
            self.backend.call_threadsafe(settled, ok, value)

        bridge = self._bridge
        (bridge if bridge is not None and bridge.in_use() else loops.owned_loop()).settle(awaitable, on_loop)

    def _give_up(self, message: Message) -> None:
        with self._lock:
            self._stats["given_up"] += 1
        try:
            self.giving_up(message)
        except Exception:
            logger.exception("[%s] giving_up hook raised on message %s", self.name, message.id)
        if not message.has_responded():
            message.finish()

    # -- closing --------------------------------------------------------------------

    @from_any_thread(
        timeout=lambda self, timeout=None: (self.close_timeout if timeout is None else timeout) + FOREIGN_THREAD_GRACE,
        inline=True,
    )
    def close(self, timeout: float | None = None) -> None:
        """Stop consuming: CLS to every nsqd, let running handlers finish and
        answer (up to timeout, default close_timeout), then close the sockets.
        Messages not yet handed to a handler are left to nsqd's timeout.

        Called from inside a handler, it starts the close and returns at once;
        the close completes when that handler has returned."""
        timeout = timeout if timeout is not None else self.close_timeout
        in_handler = self.backend.current_task_id() in self._handling
        if in_handler or loops.stalls_loop(self._bridge, self.backend):
            # a handler (or anything on the loop handlers run on) must not wait for handlers
            self._close_in_background(timeout)
            return
        if self._closing.is_set():
            self._closed.wait(timeout)
            return
        self._closing.set()
        self._close(timeout)

    def _close(self, timeout: float) -> None:
        deadline = monotonic() + timeout
        subscription = self._subscription
        conns = subscription.stop()  # no new connections from here on
        subscription.pause_rdy()
        cls_tasks = [self.backend.spawn(conn.close_gracefully, max(deadline - monotonic(), 0.1)) for conn in conns]
        for task in cls_tasks:
            task.join(max(deadline - monotonic(), 0.1))
        for _ in range(self.concurrency):
            self._queue.put(_STOP)
        while self._handling and monotonic() < deadline:
            self.backend.sleep(0.01)
        subscription.flush_all()
        for conn in conns:
            conn.close()
        self._closed.set()
        client.unregister(self)

    # -- stats ----------------------------------------------------------------------

    @from_any_thread(inline=True)
    def stats(self) -> dict[str, Any]:
        """Counters since start ("received", "finished", "requeued",
        "given_up", "handler_errors"), and now: "connections",
        "max_in_flight", "total_rdy", "in_flight", "in_backoff", and
        "per_connection" (connection id: "rdy", "in_flight")."""
        result = self._subscription.stats()
        with self._lock:
            result.update(self._stats)
        return result


#: Reader.disabled's function: a subclass that has another overrides the hook
_DISABLED_HOOK = vars(Reader)["disabled"].__func__

