"""The Spark source's consumer, on the driver: the shared subscription
machinery (``nsq.subscription.Subscription``: connections kept alive on every
nsqd with the topic, RDY spread over them) plus what a streaming source
needs on top: the buffer of received messages, the messages set aside after
an availableNow cut-off, the chunks handed to planned micro-batches, FIN
only when a batch is committed, and TOUCH for everything held meanwhile.
Messages stay in the list each read produced (a slab) from arrival to FIN.
Nothing here imports pyspark.
"""
from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Iterable

from msgengine.primitives import Timer

from nsq.conn import Connection
from nsq.errors import Error
from nsq.message import Message
from nsq.spark._options import SourceConfig
from nsq.subscription import Subscription

logger = logging.getLogger(__name__)

#: how often the TOUCH timer looks whether a round is due (seconds)
TOUCH_CHECK_INTERVAL = 0.25

#: while a batch fills, the buffer is looked at this often (seconds) ...
ARRIVAL_GAP = 0.03
#: ... and the wait goes on while it grew by this fraction meanwhile
FILL_GROWTH = 0.1

#: the messages of one read on one connection: received, buffered, batched and finished together
Slab = tuple[Connection, list[Message]]


class Chunk:
    """Messages handed to one planned micro-batch: sequence numbers [start, end), in slabs."""

    __slots__ = ("start", "end", "slabs")

    def __init__(self, start: int, end: int, slabs: list[Slab]) -> None:
        self.start = start
        self.end = end
        self.slabs = slabs

    def __len__(self) -> int:
        return self.end - self.start


def _by_conn(slabs: Iterable[Slab]) -> dict[Connection, list[bytes]]:
    """The message ids of slabs, grouped by the connection that received them."""
    ids: dict[Connection, list[bytes]] = {}
    for conn, messages in slabs:
        ids.setdefault(conn, []).extend([m.id for m in messages])
    return ids


class Consumer:
    """Connections subscribed to one topic/channel, and every message they
    received and that is not finished yet (buffered, held back, or in a chunk).

    Messages stay in the slabs their reads produced (one list per read and
    connection): buffering, batching, TOUCH and FIN work per slab, never per
    message, which keeps the driver's receive path the compiled codec's."""

    def __init__(self, config: SourceConfig) -> None:
        self.config = config
        self.cond = threading.Condition(threading.RLock())  # guards the message structures
        self._io_lock = threading.Lock()  # orders FIN / TOUCH / REQ writes (never taken under cond)
        self.buffer: collections.deque[Slab] = collections.deque()
        self._buffered = 0  # messages in buffer
        #: messages received after the availableNow cut-off: never batched, returned to nsqd at the end
        self.held: list[Slab] = []
        self.chunks: collections.deque[Chunk] = collections.deque()
        self.closing = threading.Event()
        self.received = 0
        self.finished = 0
        self.lost = 0  # finished in Spark, but their connection closed before FIN: nsqd redelivers them
        self._touch_interval: float | None = config.touch_interval
        self._next_touch = 0.0
        self._touch_timer: Timer | None = None
        self.cutoff_ns: int | None = None
        #: when nsqd last sent us messages, or last got room to send them after having none (monotonic)
        self.last_activity = time.monotonic()
        self.subscription = Subscription(
            config.topic,
            config.channel,
            config.connection,
            config.reader_settings,
            self._on_messages,
            name="nsq source %s/%s" % (config.topic, config.channel),
            nsqd=config.nsqd,
            lookupd_http_addresses=config.lookupd,
            poll_interval=self._poll_interval,
            on_lost=self._on_close,
        )
        self.backend = self.subscription.backend

    # -- connections ----------------------------------------------------------

    def start(self) -> None:
        """Connect (the first attempt to each given nsqd before returning:
        none reachable is an error), and start polling and TOUCHing."""
        subscription = self.subscription
        self.last_activity = time.monotonic()
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
                self.buffer = collections.deque(slab for slab in self.buffer if slab[0] is not conn)
                self._buffered = sum(len(messages) for _, messages in self.buffer)
            self.held = [slab for slab in self.held if slab[0] is not conn]
        if not self.closing.is_set():
            logger.warning("nsq source: lost nsqd connection %s (%s)", conn.id, conn.close_error)

    # -- messages -------------------------------------------------------------

    def _on_messages(self, conn: Connection, messages: list[Message]) -> None:
        with self.cond:
            self.last_activity = time.monotonic()
            self.received += len(messages)
            self.buffer.append((conn, messages))
            self._buffered += len(messages)
            self.cond.notify_all()

    def buffered(self) -> int:
        return self._buffered

    def wait_for_messages(self, timeout: float, idle: bool = False) -> bool:
        """Block until an eligible message is buffered (True) or timeout passes.
        With idle, the timeout runs from ``last_activity`` rather than from
        now: the time nsqd has already had to send us something counts."""
        start = time.monotonic()
        with self.cond:
            while True:
                self._hold_back_late()
                if self.buffer:
                    return True
                remaining = (self.last_activity if idle else start) + timeout - time.monotonic()
                if remaining <= 0:
                    return False
                self.cond.wait(remaining)

    def half_budget(self) -> int:
        """Half of max_in_flight on every nsqd connected: a batch no larger
        leaves the other half to arrive while Spark runs it."""
        nsqd = {conn.id for conn in list(self.subscription.conns.values())}
        return max(1, self.config.max_in_flight * max(1, len(nsqd)) // 2)

    def wait_to_fill(self, budget: float, target: int | None) -> int:
        """Let a batch grow while it is worth it: wait up to ``budget`` seconds
        while fewer than ``target`` messages are buffered and the buffer still
        grows by FILL_GROWTH every ARRIVAL_GAP (a backlog streaming in; a
        steady trickle or a full max_in_flight ends the wait at once).
        Returns the number buffered."""
        deadline = time.monotonic() + budget
        with self.cond:
            while target is None or self._buffered < target:
                before = self._buffered
                now = time.monotonic()
                if now >= deadline or self.closing.is_set():
                    break
                gap_end = min(now + ARRIVAL_GAP, deadline)
                while not self.closing.is_set():  # (every read wakes the condition: wait out the gap)
                    left = gap_end - time.monotonic()
                    if left <= 0:
                        break
                    self.cond.wait(left)
                if self._buffered < before * (1 + FILL_GROWTH) or self._buffered == before:
                    break
            return self._buffered

    def _hold_back_late(self) -> None:
        """With an availableNow cut-off, set aside messages nsqd accepted after it."""
        cutoff = self.cutoff_ns
        if cutoff is None or not self.buffer:
            return
        if all(max(m.timestamp for m in messages) <= cutoff for _, messages in self.buffer):
            return
        keep: collections.deque[Slab] = collections.deque()
        for conn, messages in self.buffer:
            early = [m for m in messages if m.timestamp <= cutoff]
            if len(early) < len(messages):
                self.held.append((conn, [m for m in messages if m.timestamp > cutoff]))
            if early:
                keep.append((conn, early))
        self.buffer = keep
        self._buffered = sum(len(messages) for _, messages in keep)

    def take(self, max_rows: int | None, max_bytes: int | None) -> list[Slab]:
        """Remove from the buffer up to max_rows messages of at most max_bytes
        body bytes in all (at least one message if any is buffered)."""
        with self.cond:
            self._hold_back_late()
            buffer = self.buffer
            taken: list[Slab] = []
            rows = 0
            size = 0
            while buffer and (max_rows is None or rows < max_rows):
                conn, messages = buffer[0]
                room = len(messages) if max_rows is None else min(len(messages), max_rows - rows)
                if max_bytes is not None:
                    fit = 0
                    for message in messages[:room]:
                        if (rows or fit) and size + len(message.body) > max_bytes:
                            break
                        size += len(message.body)
                        fit += 1
                    room = fit
                if room == 0:
                    break
                if room == len(messages):
                    buffer.popleft()
                    taken.append((conn, messages))
                else:
                    taken.append((conn, messages[:room]))
                    buffer[0] = (conn, messages[room:])
                rows += room
            self._buffered -= rows
            return taken

    def plan(self, start: int, max_rows: int | None, max_bytes: int | None) -> Chunk | None:
        """Move buffered messages into a new chunk numbered from ``start``
        (None when nothing is buffered)."""
        slabs = self.take(max_rows, max_bytes)
        if not slabs:
            return None
        chunk = Chunk(start, start + sum(len(messages) for _, messages in slabs), slabs)
        with self.cond:
            self.chunks.append(chunk)
        return chunk

    def chunks_between(self, start: int, end: int) -> list[Chunk]:
        """The chunks planned within sequence numbers [start, end)."""
        with self.cond:
            return [chunk for chunk in self.chunks if chunk.start >= start and chunk.end <= end]

    def _room(self) -> bool:
        """Whether nsqd may send us a message now: some connection has RDY
        above its messages in flight."""
        for conn in list(self.subscription.conns.values()):
            credit = conn.credit
            if credit.credit > credit.in_flight and conn.is_connected():
                return True
        return False

    def finish_through(self, seq: int) -> int:
        """FIN every message of the chunks that end at or before seq: one
        write and one flow-control step per connection."""
        with self._io_lock:
            with self.cond:
                slabs: list[Slab] = []
                while self.chunks and self.chunks[0].end <= seq:
                    slabs.extend(self.chunks.popleft().slabs)
            # nsqd could not send anything while we had no room: the idle
            # time of an availableNow run starts again once these FIN give it some
            no_room = bool(slabs) and not self._room()
            done = 0
            for conn, ids in _by_conn(slabs).items():
                if not conn.is_connected():
                    with self.cond:
                        self.lost += len(ids)
                    logger.warning(
                        "nsq source: %d processed messages cannot be finished: the connection to %s closed; "
                        "nsqd will deliver them again", len(ids), conn.id,
                    )
                    continue
                self.subscription.finish_many(conn, ids)
                done += len(ids)
            with self.cond:
                self.finished += done
                if no_room and done:
                    self.last_activity = time.monotonic()
                    self.cond.notify_all()
            return done

    def _requeue(self, slabs: list[Slab]) -> int:
        """REQ without delay every message of slabs whose connection is still open."""
        done = 0
        for conn, messages in slabs:
            if not conn.is_connected():
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
                slabs, self.held = self.held, []
            return self._requeue(slabs)

    def _unfinished(self) -> list[Slab]:
        with self.cond:
            return list(self.buffer) + self.held + [slab for chunk in self.chunks for slab in chunk.slabs]

    def touch_all(self) -> int:
        """TOUCH every message received and not finished yet (buffered, held, in a chunk)."""
        with self._io_lock:
            touched = 0
            for conn, ids in _by_conn(self._unfinished()).items():
                if not conn.is_connected():
                    continue
                try:
                    conn.touch_many(ids)
                    touched += len(ids)
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
            slabs = self._unfinished()
            with self.cond:
                self.buffer.clear()
                self._buffered = 0
                self.held = []
                self.chunks.clear()
            with self._io_lock:
                self._requeue(slabs)
        conns = self.subscription.stop()
        with self.cond:
            self.cond.notify_all()
        for conn in conns:
            if requeue and conn.is_connected():
                # nsqd answers CLS after the REQs before it: they are all taken back
                conn.close_gracefully(1.0)
            conn.close()
