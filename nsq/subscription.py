"""A subscription: connections to every nsqd that has one topic, each
subscribed to one channel, kept alive, with RDY spread over them.

``Subscription`` is what the Reader and the Spark source share. It owns the
connections (``conns``, keyed by connection id), their lifecycle through a
``msgengine.supervisor.Supervisor`` (direct nsqd addresses kept with
reconnects, nsqlookupd polled for more), and flow control through
``nsq.rdy.RdyManager``: RDY on connect, growth as messages arrive, refresh
as they are answered, rotation, pynsq's backoff, the periodic redistribution
tick, and ``set_max_in_flight``. What happens to messages is its owner's:
each read's messages go to ``sink(conn, messages)``; answers come back
through the connection (``Message.finish()`` and friends) and are counted
here.
"""
from __future__ import annotations

import logging
import math
from typing import Any, Callable, Hashable, Iterable, cast

from msgengine.supervisor import Supervisor

from nsq import lookupd
from nsq.config import Config, ReaderSettings
from nsq.conn import Connection, MessageSink
from nsq.errors import ConfigError, Error
from nsq.message import Message
from nsq.rdy import RdyManager

logger = logging.getLogger(__name__)

Target = tuple[str, int, int]  # host, port, slot (several connections to one nsqd: slots 1, 2, ...)


class Subscription:
    """topic/channel on every nsqd found; see the module docstring.

    ``settings`` (``nsq.config.ReaderSettings``) holds max_in_flight, the
    flow-control, discovery and reconnection settings, and the choices where
    the Spark source differs from pynsq: ``connections_per_nsqd`` (1 as in
    pynsq; 0 opens as many connections to each nsqd as it takes for
    max_in_flight to fit under nsqd's max_rdy_count), ``keep_discovered``
    (keep nsqd found through nsqlookupd connected between polls; pynsq
    connects to them once per poll) and ``max_in_flight_per_nsqd``
    (max_in_flight is each nsqd's budget rather than the whole
    subscription's). The rest are its owner's hooks: ``poll_interval()``
    replaces ``settings.lookupd_poll_interval``, asked before each discovery
    round; ``poll_round()`` replaces a discovery round (the Reader calls its
    overridable ``query_lookupd`` there) and ``connect(host, port)`` the
    first connection to each nsqd (its ``connect_to_nsqd``);
    ``before_tick()`` runs at each redistribution tick; ``on_heartbeat(conn)``
    hears each heartbeat and ``on_lost(conn)`` each connection that closed.
    ``counts`` holds the messages "received", "finished" and "requeued" so far.
    """

    def __init__(
        self,
        topic: str,
        channel: str,
        config: Config,
        settings: ReaderSettings,
        sink: MessageSink,
        *,
        name: str,
        nsqd: Iterable[tuple[str, int]] = (),
        lookupd_http_addresses: Iterable[str] = (),
        poll_interval: Callable[[], float] | None = None,
        on_heartbeat: Callable[[Connection], None] | None = None,
        on_lost: Callable[[Connection], None] | None = None,
        poll_round: Callable[[], Any] | None = None,
        before_tick: Callable[[], None] | None = None,
        connect: Callable[[str, int], Connection | None] | None = None,
    ) -> None:
        self.topic = topic
        self.channel = channel
        self.config = config
        self.settings = settings
        self.backend = config.backend
        self.name = name
        self.nsqd = [(host, port) for host, port in nsqd]
        self.lookupd_http_addresses = list(lookupd_http_addresses)
        self._sink = sink
        self._poll_interval = poll_interval
        self._on_heartbeat = on_heartbeat
        self._on_lost = on_lost
        self._poll_round = poll_round
        self._before_tick = before_tick
        self._connect_hook = connect
        self._budget_per_nsqd = settings.max_in_flight if settings.max_in_flight_per_nsqd else None
        self._ticking = False
        self.conns: dict[str, Connection] = {}
        #: messages received, finished and requeued so far (counted under the lock it takes anyway)
        self.counts = {"received": 0, "finished": 0, "requeued": 0}
        #: why the last attempt to each nsqd failed (until one succeeds)
        self.connect_errors: dict[str, BaseException] = {}
        self.rdy = RdyManager(settings.max_in_flight, settings.low_rdy_idle_timeout, settings.max_backoff_duration)
        self._lock = self.backend.lock()
        self._connecting: set[str] = set()
        self._stopped = False
        self._supervisor = Supervisor(
            self.backend, name, self._connect_target, max_reconnect_delay=settings.max_reconnect_delay
        )
        self._ticker: Any = None

    # -- lifecycle --------------------------------------------------------------

    def start(self, connect_now: bool = False) -> None:
        """Connect to the direct nsqd (kept alive), poll nsqlookupd, start
        the redistribution tick. With connect_now, the first attempt to each
        direct nsqd is made before this returns."""
        for host, port in self.nsqd:
            self._supervisor.keep((host, port, 0), now=connect_now)
        settings = self.settings
        if self.lookupd_http_addresses:
            interval = self._poll_interval or settings.lookupd_poll_interval
            self._supervisor.poll(self._poll, interval, jitter=settings.lookupd_poll_jitter)
        tick = min(5.0, max(0.05, settings.low_rdy_idle_timeout / 2))
        self._ticker = self.backend.call_every(tick, self.backend.spawn, self._tick)

    def stop(self) -> list[Connection]:
        """No more connecting, polling or ticks; returns the open connections
        (the owner closes them its own way)."""
        self._stopped = True
        self._supervisor.close()
        self._stop_ticker()
        with self._lock:
            return list(self.conns.values())

    def _stop_ticker(self) -> None:
        ticker, self._ticker = self._ticker, None
        if ticker is not None:
            ticker.cancel()

    def forget_after_fork(self) -> list[Connection]:
        """In a forked child: stop for good; returns the parent's connections
        (the caller drops them without a word to nsqd)."""
        self._stopped = True
        self._supervisor.forget_after_fork()
        try:
            self._stop_ticker()  # gevent's timers survive a fork
        except Exception:  # the parent's scheduler thread: gone, and its timers with it
            self._ticker = None
        self._lock = self.backend.lock()
        conns = list(self.conns.values())
        self.conns = {}
        return conns

    # -- connections --------------------------------------------------------------

    def _connect_target(self, target: Hashable) -> Connection | None:
        host, port, slot = cast(Target, target)
        if slot == 0 and self._connect_hook is not None:
            return self._connect_hook(host, port)
        return self.connect(host, port, slot)

    def connect(self, host: str, port: int, slot: int = 0) -> Connection | None:
        """Connect and subscribe to one nsqd; returns the connection, or None
        when it is already connected or the attempt failed (logged)."""
        if not isinstance(host, str) or isinstance(port, bool) or not isinstance(port, int):
            raise ConfigError("connect_to_nsqd needs a host string and an int port")
        key = "%s:%d" % (host, port) if not slot else "%s:%d#%d" % (host, port, slot)
        with self._lock:
            if key in self.conns or key in self._connecting or self._stopped:
                return None
            self._connecting.add(key)
        try:
            return self._open(host, port, slot, key)
        finally:
            with self._lock:
                self._connecting.discard(key)

    def _open(self, host: str, port: int, slot: int, key: str) -> Connection | None:
        conn = Connection(host, port, self.config, key=key)
        conn.message_sink = self._on_messages
        conn.response_listener = self._on_response
        if self._on_heartbeat is not None:
            conn.on("heartbeat", self._on_heartbeat)
        try:
            conn.connect()
            conn.subscribe(self.topic, self.channel)
        except Exception as exc:
            conn.close()
            self.connect_errors[key] = exc
            logger.warning("[%s] cannot connect to nsqd %s: %s", self.name, key, exc)
            return None
        self.connect_errors.pop(key, None)
        if self.settings.connections_per_nsqd == 1 and conn.max_rdy_count < self.max_in_flight:
            logger.warning(
                "[%s] nsqd %s max_rdy_count %d is below max_in_flight %d",
                self.name, key, conn.max_rdy_count, self.max_in_flight,
            )
        with self._lock:
            if self._stopped:
                conn.close()
                return None
            self.conns[key] = conn
            self._send_rdy(self._rebudget())
            self._send_rdy(self.rdy.add_link(conn.credit))
        conn.flush()
        conn.on("close", self._on_close)
        if conn.closed():
            self._on_close(conn)
        logger.info("[%s] connected to nsqd %s", self.name, key)
        if slot == 0:
            for extra in range(1, self._connections_wanted(conn)):
                self._supervisor.keep((host, port, extra))
        return conn

    def _rebudget(self) -> list:
        """With a budget per nsqd: max_in_flight follows the number of nsqd
        connected (the caller holds the lock)."""
        per_nsqd = self._budget_per_nsqd
        if per_nsqd is None or not self.rdy.max_in_flight:
            return []
        nsqd = len({(conn.host, conn.port) for conn in self.conns.values()})
        wanted = per_nsqd * max(nsqd, 1)
        if wanted == self.rdy.max_in_flight:
            return []
        return self.rdy.set_max_in_flight(wanted)

    def _connections_wanted(self, conn: Connection) -> int:
        if self.settings.connections_per_nsqd:
            return self.settings.connections_per_nsqd
        budget = self._budget_per_nsqd or self.max_in_flight
        return max(1, math.ceil(budget / max(conn.max_rdy_count, 1)))

    def _on_close(self, conn: Connection) -> None:
        with self._lock:
            key = conn.credit.key
            if self.conns.get(key) is not conn:
                return
            del self.conns[key]
            self._send_rdy(self.rdy.remove_conn(key))
            self._send_rdy(self._rebudget())
        self.flush_all()
        if self._on_lost is not None:
            self._on_lost(conn)
        if not self._stopped:
            error = conn.close_error
            if error is None or isinstance(error, Exception):
                logger.warning("[%s] lost nsqd %s: %s", self.name, key, error)
            else:  # (its task was cancelled or killed: the program's loop ended, say)
                logger.info("[%s] lost nsqd %s: reading stopped by %r", self.name, key, error)

    def is_connected(self) -> bool:
        with self._lock:
            return any(conn.is_connected() for conn in self.conns.values())

    # -- discovery ------------------------------------------------------------------

    def discover(self) -> list[tuple[str, int]]:
        """Every nsqd that some nsqlookupd lists for the topic (all asked at once)."""
        results: list[list[tuple[str, int]]] = []
        timeouts = (self.settings.lookupd_connect_timeout, self.settings.lookupd_request_timeout)

        def ask(address: str) -> None:
            try:
                results.append(self.backend.run_blocking(lookupd.query, address, self.topic, *timeouts))
            except Exception as exc:
                logger.warning("[%s] lookupd %s failed: %s", self.name, address, exc)

        tasks = [self.backend.spawn(ask, address) for address in self.lookupd_http_addresses]
        for task in tasks:
            task.join()
        return sorted({p for found in results for p in found})

    def query_lookupd(self) -> list[tuple[str, int]]:
        """One discovery round: connect to the nsqd found; returns them."""
        producers = self.discover()
        for host, port in producers:
            if self.settings.keep_discovered:
                self._supervisor.keep((host, port, 0))
            else:
                self._supervisor.try_once((host, port, 0))
        return producers

    def _poll(self) -> tuple:
        if self._poll_round is not None:
            self._poll_round()
        else:
            self.query_lookupd()
        return ()  # (the round connected to what it found)

    # -- RDY --------------------------------------------------------------------------

    @property
    def max_in_flight(self) -> int:
        return self.rdy.max_in_flight

    def _send_rdy(self, actions: list[tuple[Any, int]]) -> None:
        """Queue RDY commands (the caller holds self._lock and flushes later)."""
        for key, count in actions:
            conn = self.conns.get(key)
            if conn is None or (count and self._stopped):  # closing: RDY only goes down
                continue
            try:
                conn.send_rdy(count, flush=False)
            except Error as exc:
                logger.warning("[%s] cannot send RDY %d to %s: %s", self.name, count, key, exc)

    def flush_all(self) -> None:
        for conn in list(self.conns.values()):
            conn.flush()

    def _tick(self) -> None:
        """The periodic tick: the owner's hook, then RDY moved off idle connections."""
        with self._lock:
            if self._stopped or self._ticking:  # a slow tick (a slow disabled() hook): the next one waits
                return
            self._ticking = True
        try:
            if self._before_tick is not None:
                self._before_tick()
            with self._lock:
                self._send_rdy(self.rdy.redistribute())
            self.flush_all()
        except Exception:  # the next tick must still come
            logger.exception("[%s] RDY redistribution failed", self.name)
        finally:
            self._ticking = False

    def _end_backoff_block(self) -> None:
        if self._stopped:
            return
        with self._lock:
            self._send_rdy(self.rdy.end_backoff_block())
        self.flush_all()

    def is_starved(self) -> bool:
        return self.rdy.is_starved()

    def set_max_in_flight(self, max_in_flight: int) -> None:
        with self._lock:
            self._send_rdy(self.rdy.set_max_in_flight(max_in_flight))
        self.flush_all()

    def pause_rdy(self) -> None:
        """RDY 0 everywhere now (closing): through the flow control, so that
        no answer grants RDY again."""
        with self._lock:
            self._send_rdy(self.rdy.set_max_in_flight(0))
        self.flush_all()

    def stats(self) -> dict[str, Any]:
        """The counts, max_in_flight, total RDY and in-flight, backoff, and RDY
        and in-flight per connection."""
        with self._lock:
            result: dict[str, Any] = dict(self.counts)
            result["connections"] = len(self.conns)
            result["max_in_flight"] = self.rdy.max_in_flight
            result["total_rdy"] = self.rdy.total_rdy
            result["in_backoff"] = self.rdy.in_backoff()
            per_connection = {
                key: {"rdy": link.credit, "in_flight": link.in_flight} for key, link in self.rdy.conns.items()
            }
            result["in_flight"] = sum(c["in_flight"] for c in per_connection.values())
            result["per_connection"] = per_connection
        return result

    # -- messages ---------------------------------------------------------------------

    def _on_messages(self, conn: Connection, messages: list[Message]) -> None:
        """A connection's reader task, with the messages of one read."""
        with self._lock:
            self.counts["received"] += len(messages)
            actions = self.rdy.on_messages(conn.credit.key, len(messages))
            if actions:
                self._send_rdy(actions)
        if actions:
            conn.flush()
        self._sink(conn, messages)

    def _on_response(self, conn: Connection, message: Message, success: bool | None) -> None:
        with self._lock:
            self.counts["finished" if success else "requeued"] += 1
            actions, delay = self.rdy.on_response(conn.credit.key, success)
            if actions:
                self._send_rdy(actions)
        self._after_rdy_change(conn, actions, delay)

    def finish_many(self, conn: Connection, message_ids: list[bytes]) -> None:
        """FIN messages the owner marked finished, in one write, and count them.
        The RDY change they cause goes out first, as in pynsq: a backoff block's
        RDY 0 reaches nsqd before the FIN that would let it push another message."""
        with self._lock:
            self.counts["finished"] += len(message_ids)
            actions, delay = self.rdy.on_finished(conn.credit.key, len(message_ids))
            if actions:
                self._send_rdy(actions)
        conn.finish_many(message_ids)
        self._after_rdy_change(conn, actions, delay)

    def _after_rdy_change(self, conn: Connection, actions: list, delay: float | None) -> None:
        if actions and not conn.answers_held():
            self.flush_all()
        if delay:
            logger.info("[%s] backing off for %.3fs", self.name, delay)
            self.backend.call_later(delay, self.backend.spawn, self._end_backoff_block)
