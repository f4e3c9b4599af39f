"""The Spark source's consumer, on the driver: the shared subscription
machinery (``nsq.subscription.Subscription``: connections kept alive on every
nsqd with the topic, RDY spread over them) plus what a streaming source
needs on top: the buffer of received messages, the messages set aside after
an availableNow cut-off, the chunks handed to planned micro-batches, FIN
only when a batch is committed, and TOUCH for everything held meanwhile.
Nothing here imports pyspark.
"""
from __future__ import annotations

import collections
import logging
import threading
import time

from ..conn import Connection
from ..errors import Error
from ..message import Message
from ..subscription import Subscription
from ._options import SourceConfig

logger = logging.getLogger(__name__)

#: how often the TOUCH timer looks whether a round is due (seconds)
TOUCH_CHECK_INTERVAL = 0.25


class _Chunk:
    """Messages handed out by one latestOffset() call: sequence numbers [start, end)."""

    __slots__ = ("start", "end", "items")

    def __init__(self, start: int, end: int, items: list[tuple[Connection, Message]]) -> None:
        self.start = start
        self.end = end
        self.items = items


class Consumer:
    """Connections subscribed to one topic/channel, and every message they
    received and that is not finished yet (buffered, held back, or in a chunk)."""

    def __init__(self, config: SourceConfig) -> None:
        self.config = config
        self.cond = threading.Condition(threading.RLock())  # guards the message structures
        self._io_lock = threading.Lock()  # orders FIN / TOUCH / REQ writes (never taken under cond)
        self.buffer: collections.deque[tuple[Connection, Message]] = collections.deque()
        #: messages received after the availableNow cut-off: never batched, returned to nsqd at the end
        self.held: list[tuple[Connection, Message]] = []
        self.chunks: collections.deque[_Chunk] = collections.deque()
        self.closing = threading.Event()
        self.received = 0
        self.finished = 0
        self.lost = 0  # finished in Spark, but their connection closed before FIN: nsqd redelivers them
        self._touch_interval: float | None = config.touch_interval
        self._next_touch = 0.0
        self._touch_timer = None
        self.cutoff_ns: int | None = None
        self.subscription = Subscription(
            config.topic,
            config.channel,
            config.connection,
            self._on_messages,
            name="nsq source %s/%s" % (config.topic, config.channel),
            nsqd=config.nsqd,
            lookupd_http_addresses=config.lookupd,
            max_in_flight=config.max_in_flight,
            max_reconnect_delay=config.max_reconnect_delay,
            lookupd_poll_interval=self._poll_interval,
            lookupd_poll_jitter=0.0,
            lookupd_connect_timeout=config.lookupd_timeout,
            lookupd_request_timeout=config.lookupd_timeout,
            connections_per_nsqd=0,  # as many as max_in_flight needs under nsqd's max_rdy_count
            max_in_flight_per_nsqd=True,  # the option's documented meaning
            keep_discovered=True,
            on_lost=self._on_close,
        )
        self.backend = self.subscription.backend

    # -- connections ----------------------------------------------------------

    def start(self) -> None:
        """Connect (the first attempt to each given nsqd before returning:
        none reachable is an error), and start polling and TOUCHing."""
        subscription = self.subscription
        subscription.start(connect_now=True)
        if self.config.nsqd and not subscription.is_connected():
            errors = "; ".join("%s: %s" % (key, exc) for key, exc in sorted(subscription.connect_errors.items()))
            self.close(requeue=False)
            raise ConnectionError("the nsq source could not connect to any nsqd: %s" % (errors or "no answer",))
        self._next_touch = time.monotonic() + (self._touch_interval or 0.0)
        self._touch_timer = self.backend.call_every(TOUCH_CHECK_INTERVAL, self._touch_if_due)

    def _poll_interval(self) -> float:
        """Ask often while no nsqd has the topic yet, then every lookupd_poll_interval."""
        interval = self.config.lookupd_poll_interval
        return interval if self.subscription.is_connected() else min(2.0, interval)

    def _on_close(self, conn: Connection) -> None:
        with self.cond:
            # Buffered messages of a dead connection cannot be finished: nsqd
            # gives them to another consumer, maybe to us again. Drop them.
            if any(c is conn for c, _ in self.buffer):
                self.buffer = collections.deque(item for item in self.buffer if item[0] is not conn)
            self.held = [item for item in self.held if item[0] is not conn]
        if not self.closing.is_set():
            logger.warning("nsq source: lost nsqd connection %s (%s)", conn.id, conn.close_error)

    # -- messages -------------------------------------------------------------

    def _on_messages(self, conn: Connection, messages: list[Message]) -> None:
        with self.cond:
            self.received += len(messages)
            self.buffer.extend([(conn, m) for m in messages])
            self.cond.notify_all()

    def buffered(self) -> int:
        return len(self.buffer)

    def wait_for_messages(self, timeout: float) -> bool:
        """Block until an eligible message is buffered (True) or timeout passes."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                self._hold_back_late()
                if self.buffer:
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self.cond.wait(remaining)

    def _hold_back_late(self) -> None:
        """With an availableNow cut-off, set aside messages nsqd accepted after it."""
        cutoff = self.cutoff_ns
        if cutoff is None or not self.buffer:
            return
        if all(m.timestamp <= cutoff for _, m in self.buffer):
            return
        keep: collections.deque[tuple[Connection, Message]] = collections.deque()
        for item in self.buffer:
            (keep if item[1].timestamp <= cutoff else self.held).append(item)
        self.buffer = keep

    def take(self, max_rows: int | None, max_bytes: int | None) -> list[tuple[Connection, Message]]:
        with self.cond:
            self._hold_back_late()
            buffer = self.buffer
            if max_bytes is None:
                count = len(buffer) if max_rows is None else min(max_rows, len(buffer))
                return [buffer.popleft() for _ in range(count)]
            items: list[tuple[Connection, Message]] = []
            size = 0
            while buffer and (max_rows is None or len(items) < max_rows):
                body_len = len(buffer[0][1].body)
                if items and size + body_len > max_bytes:
                    break
                items.append(buffer.popleft())
                size += body_len
            return items

    def add_chunk(self, chunk: _Chunk) -> None:
        with self.cond:
            self.chunks.append(chunk)

    def items_between(self, start: int, end: int) -> list[tuple[Connection, Message]]:
        with self.cond:
            items: list[tuple[Connection, Message]] = []
            for chunk in self.chunks:
                if chunk.start >= start and chunk.end <= end:
                    items.extend(chunk.items)
            return items

    def unfinished_through(self, seq: int) -> bool:
        """True when a chunk that ends at or before seq is not finished yet."""
        with self.cond:
            return bool(self.chunks) and self.chunks[0].end <= seq

    def finish_through(self, seq: int) -> int:
        """FIN every message of the chunks that end at or before seq."""
        with self._io_lock:
            with self.cond:
                items: list[tuple[Connection, Message]] = []
                while self.chunks and self.chunks[0].end <= seq:
                    items.extend(self.chunks.popleft().items)
            done = self._respond(items, "finish")
            with self.cond:
                self.finished += done
            return done

    def _respond(self, items: list[tuple[Connection, Message]], how: str) -> int:
        """FIN ("finish") or REQ without delay ("requeue") messages, one write per connection."""
        by_conn: dict[Connection, list[Message]] = {}
        for conn, message in items:
            by_conn.setdefault(conn, []).append(message)
        done = 0
        for conn, messages in by_conn.items():
            if not conn.is_connected():
                if how == "finish":
                    with self.cond:
                        self.lost += len(messages)
                    logger.warning(
                        "nsq source: %d processed messages cannot be finished: the connection to %s closed; "
                        "nsqd will deliver them again", len(messages), conn.id,
                    )
                continue
            if how == "finish":  # one FIN write and one flow-control step per connection
                finished = []
                for message in messages:
                    if not message.has_responded():
                        message.mark_finished()
                        finished.append(message.id)
                if finished:
                    self.subscription.finish_many(conn, finished)
                done += len(finished)
                continue
            conn.hold_answers()
            try:
                for message in messages:
                    if not message.has_responded():
                        message.requeue(backoff=False, delay=0)
                        done += 1
            except Error as exc:
                logger.warning("nsq source: cannot requeue messages on %s: %s", conn.id, exc)
            finally:
                conn.release_answers()
        return done

    def requeue_held(self) -> int:
        """Give back at once the messages set aside after the availableNow cut-off."""
        with self._io_lock:
            with self.cond:
                items, self.held = self.held, []
            return self._respond(items, "requeue")

    def touch_all(self) -> int:
        """TOUCH every message received and not finished yet (buffered, held, in a chunk)."""
        with self._io_lock:
            with self.cond:
                items = list(self.buffer) + self.held + [item for chunk in self.chunks for item in chunk.items]
            by_conn: dict[Connection, list[Message]] = {}
            for conn, message in items:
                by_conn.setdefault(conn, []).append(message)
            touched = 0
            for conn, messages in by_conn.items():
                if not conn.is_connected():
                    continue
                try:
                    conn.touch_many([message.id for message in messages])
                    touched += len(messages)
                except Error as exc:
                    logger.warning("nsq source: cannot TOUCH messages on %s: %s", conn.id, exc)
            return touched

    def _touch_if_due(self) -> None:
        """The TOUCH timer: a round every touch interval (a quarter of nsqd's
        msg_timeout unless given), run on a task of its own."""
        if self.closing.is_set():
            return
        if self._touch_interval is None:
            conns = list(self.subscription.conns.values())
            if not conns:
                return
            timeout_ms = conns[0].features.get("msg_timeout") or 60000
            self._touch_interval = max(0.2, timeout_ms / 1000.0 / 4)
            self._next_touch = time.monotonic() + self._touch_interval
            return
        if time.monotonic() < self._next_touch:
            return
        self._next_touch = time.monotonic() + self._touch_interval
        self.backend.spawn(self._touch_round)

    def _touch_round(self) -> None:
        try:
            self.touch_all()
        except Exception:
            logger.exception("nsq source: TOUCH round failed")

    def name_of(self, conn: Connection) -> str:
        return conn.id

    def close(self, requeue: bool = True) -> None:
        """Close every connection without finishing anything. With requeue, first
        give every unfinished message back (REQ, no delay) so that nsqd delivers
        it again at once instead of after its msg_timeout."""
        if self.closing.is_set():
            return
        self.closing.set()
        timer, self._touch_timer = self._touch_timer, None
        if timer is not None:
            timer.cancel()
        if requeue:
            with self.cond:
                items = list(self.buffer) + self.held + [item for chunk in self.chunks for item in chunk.items]
                self.buffer.clear()
                self.held = []
                self.chunks.clear()
            with self._io_lock:
                self._respond(items, "requeue")
        conns = self.subscription.stop()
        with self.cond:
            self.cond.notify_all()
        for conn in conns:
            if requeue and conn.is_connected():
                # nsqd answers CLS after the REQs before it: they are all taken back
                conn.close_gracefully(1.0)
            conn.close()
