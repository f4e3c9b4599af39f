"""The blocking publish path of ``nsq.Writer``, in pure Python: the twin of
the compiled ``nsq._publish`` (``nsq.publishing`` chooses one; they behave
the same, and ``tests/nsq/test_publish_twins.py`` holds them to it).

It owns what a PUB goes through between ``Writer.pub`` and the connection,
and back: the topic lanes (``TopicLane``: at most one command in flight per
topic and connection; PUBs that come meanwhile wait in batches and leave as
one MPUB each), the answer that resolves a lane's callers (``LaneAnswer``),
the one-shot wait of a blocking caller (``Waiter``, a ``Pending``), and the
blocking publish itself (``Publisher.pub``: the checks, the choice of
connection, the wait for nsqd's answer with the retry and the timeout, the
counts). The Writer hands it what it keeps (its connections, settings and
counts) and the slow paths (waiting for a connection, a call from another OS
thread under gevent); the connection's driver does the I/O.
"""
from __future__ import annotations

import collections
import itertools
import time
from typing import Any, Callable

from msgengine.correlator import Pending
from msgengine.fork import fork_generation
from msgengine.primitives import lock_or_none

from nsq import codec
from nsq.errors import (
    ConnectionClosedError,
    InvalidBodyError,
    MessageTooLargeError,
    PublishInCallbackError,
    TimeoutError,
)
from nsq.names import check_topic

__all__ = ["BATCH_MAX_COUNT", "LaneAnswer", "Publisher", "TopicLane", "Waiter", "lane_lock"]

#: the most PUBs joined into one MPUB
BATCH_MAX_COUNT = 2000

_monotonic = time.monotonic


class Waiter(Pending):
    """A blocking caller's wait for one answer (a ``Pending``: the driver
    gives it an event when the caller has to wait for another reader)."""

    __slots__ = ()


class TopicLane:
    """PUBs to one topic on one connection: at most one command in flight;
    PUBs that arrive meanwhile wait in batches and leave as one MPUB each.
    ``lock`` guards the batches (None: the backend needs none, gevent's)."""

    __slots__ = ("conn", "topic", "busy", "max_bytes", "_lock", "_batches", "_send")

    def __init__(self, conn: Any, topic: str, max_bytes: int, lock: Any = None) -> None:
        codec.encode_pub(topic, b"")  # (checks the name as every PUB would)
        self.conn = conn
        self.topic = topic
        self.busy = False
        self.max_bytes = max_bytes
        self._lock = lock
        self._batches: collections.deque[tuple[list, list, list[int]]] = collections.deque()
        self._send = conn.send_request

    def pending_batches(self) -> int:
        """Batches waiting for the command in flight to be answered."""
        return len(self._batches)

    def publish(self, body: Any, waiter: Any) -> None:
        """Send body's PUB now if nothing is in flight, else join the last
        batch (or start one); waiter gets nsqd's answer."""
        lock = self._lock
        if lock is not None:
            lock.acquire()
        try:
            if self.busy:
                batches = self._batches
                if batches:
                    bodies, waiters, size = batches[-1]
                    if size[0] + len(body) + 4 <= self.max_bytes and len(bodies) < BATCH_MAX_COUNT:
                        bodies.append(body)
                        waiters.append(waiter)
                        size[0] += len(body) + 4
                        return
                batches.append(([body], [waiter], [len(body) + 4]))
                return
            self.busy = True
        finally:
            if lock is not None:
                lock.release()
        try:  # (the common case, one PUB and nothing in flight, without lists)
            self._send(codec.encode_pub(self.topic, body), LaneAnswer(self, waiter))
        except ConnectionClosedError as exc:
            waiter.resolve(self.conn, exc)
            self.next_batch()

    def next_batch(self) -> None:
        """The command in flight was answered: send the next batch, or go idle."""
        lock = self._lock
        while True:
            if lock is not None:
                lock.acquire()
            try:
                if not self._batches:
                    self.busy = False
                    return
                bodies, waiters, _ = self._batches.popleft()
            finally:
                if lock is not None:
                    lock.release()
            if len(bodies) == 1:
                data = codec.encode_pub(self.topic, bodies[0])
                answer = LaneAnswer(self, waiters[0])
            else:
                data = codec.encode_mpub(self.topic, bodies)
                answer = LaneAnswer(self, waiters)
            try:
                self._send(data, answer)
                return
            except ConnectionClosedError as exc:
                conn = self.conn
                for waiter in waiters:
                    waiter.resolve(conn, exc)


class LaneAnswer(Pending):
    """The answer to a lane's command: lets the lane send its next batch,
    then resolves the waiter (or each of the list of waiters) it carried (the
    next command is on its way to nsqd while they wake up)."""

    __slots__ = ("lane", "waiters")

    def __init__(self, lane: TopicLane, waiters: Any) -> None:
        Pending.__init__(self)
        self.lane = lane
        self.waiters = waiters

    def resolve(self, source: Any, result: Any) -> None:
        self.result = result
        try:
            self.lane.next_batch()  # (first: nsqd works on it while the callers wake up)
        finally:
            waiters = self.waiters
            if isinstance(waiters, list):
                for waiter in waiters:
                    waiter.resolve(source, result)
            else:
                waiters.resolve(source, result)


class _Topic:
    """What a Publisher keeps per topic, as the caller named it: the checked name and its counts
    (None until a publish to it got past the checks)."""

    __slots__ = ("name", "counts")

    def __init__(self, name: str, counts: Any) -> None:
        self.name = name
        self.counts = counts


class Publisher:
    """The blocking ``Writer.pub`` (no callback, no program loop, joined
    publishes) and the lanes of every topic and connection of one Writer.

    The Writer hands over: ``backend``; ``pick(exclude, deadline)``, its
    choice of a connection when the quick one (``conns`` in turn, by
    ``round_robin``) finds none open; ``counts_for(topic)``, the counts of a
    topic; ``in_this_process()``, its start in a forked child;
    ``elsewhere(topic, body, counts)``, the publish of a caller outside the
    backend's context (another OS thread under gevent), which goes through
    the backend's door; ``callback_tasks``, the tasks running a publish
    callback now; and its settings. It keeps ``conns`` and ``blocking`` (the
    set of waits its expiry tick looks at) current.
    """

    __slots__ = (
        "backend", "conns", "blocking", "callback_tasks", "publish_timeout", "retry_publish", "max_msg_size",
        "max_bytes", "round_robin", "_pick", "_counts_for", "_in_this_process", "_elsewhere", "_generation",
        "_topics", "_lanes",
    )

    def __init__(
        self,
        backend: Any,
        *,
        pick: Callable[[Any, float], Any],
        counts_for: Callable[[str], Any],
        in_this_process: Callable[[], None],
        elsewhere: Callable[[Any, Any, Any], bytes],
        callback_tasks: set,
        blocking: set,
        round_robin: Any,
        publish_timeout: float,
        retry_publish: bool,
        max_msg_size: int,
        max_bytes: int,
    ) -> None:
        self.backend = backend
        self.conns: list = []
        self.blocking = blocking
        self.callback_tasks = callback_tasks
        self.publish_timeout = publish_timeout
        self.retry_publish = retry_publish
        self.max_msg_size = max_msg_size
        self.max_bytes = max_bytes
        self.round_robin = round_robin if round_robin is not None else itertools.count()
        self._pick = pick
        self._counts_for = counts_for
        self._in_this_process = in_this_process
        self._elsewhere = elsewhere
        self._generation: int | None = None
        self._topics: dict[Any, _Topic] = {}
        self._lanes: dict[tuple[int, str], TopicLane] = {}

    # -- lanes ------------------------------------------------------------

    def lane(self, conn: Any, topic: str) -> TopicLane:
        """The lane of topic (a checked name) on conn, made when it is new."""
        key = (id(conn), topic)
        lane = self._lanes.get(key)
        if lane is None or lane.conn is not conn:
            lane = TopicLane(conn, topic, self.max_bytes, lane_lock(conn.backend))
            self._lanes[key] = lane
        return lane

    def send_to_lane(self, conn: Any, waiter: Any, topic_and_body: tuple[str, Any]) -> None:
        """A PUB goes into its topic's lane on conn (joined with others while one is in flight)."""
        topic, body = topic_and_body
        self.lane(conn, topic).publish(body, waiter)

    def lane_busy(self, conn: Any) -> bool:
        """PUBs to this connection still waiting in a lane (between two of its commands)."""
        return any(lane.busy for lane in list(self._lanes.values()) if lane.conn is conn)

    def forget(self, conn: Any) -> None:
        """conn is gone: drop its lanes."""
        for key in [k for k, lane in list(self._lanes.items()) if lane.conn is conn]:
            self._lanes.pop(key, None)

    def reset(self) -> None:
        """After a fork: no lanes, no connections."""
        self._lanes = {}
        self.conns = []

    # -- the blocking publish -----------------------------------------------

    def _topic(self, topic: Any) -> _Topic:
        entry = _Topic(check_topic(topic), None)
        if len(self._topics) < 4096:  # (publishers reuse a few topics)
            self._topics[topic] = entry
        return entry

    def pub(self, topic: Any, body: Any) -> bytes:
        """Publish body to topic and return nsqd's answer (b"OK"), or raise
        (a timeout included: the message may or may not have been published)."""
        entry = self._topics.get(topic)
        if entry is None:
            entry = self._topic(topic)
        if not isinstance(body, (bytes, bytearray, memoryview)):
            raise InvalidBodyError("message body must be bytes, not %s" % type(body).__name__)
        if len(body) > self.max_msg_size:
            raise MessageTooLargeError(
                "message of %d bytes exceeds max_msg_size %d (nsqd --max-msg-size)" % (len(body), self.max_msg_size)
            )
        generation = fork_generation()
        if self._generation != generation:
            self._in_this_process()
            self._generation = generation
        counts = entry.counts
        if counts is None:  # (made once the first body passed, as the Writer's stats() show them)
            counts = entry.counts = self._counts_for(entry.name)
        backend = self.backend
        if not backend.in_backend_context():
            return self._elsewhere(entry.name, body, counts)
        if self.callback_tasks and backend.current_task_id() in self.callback_tasks:
            raise PublishInCallbackError(
                "a blocking publish from a publish callback would wait for an answer that only this "
                "task reads: pass a callback (writer.pub(topic, msg, callback))")
        deadline = _monotonic() + self.publish_timeout
        tried = None
        blocking = self.blocking
        try:
            while True:
                conns = self.conns
                conn = None
                if conns and tried is None:
                    conn = conns[next(self.round_robin) % len(conns)]
                    if not conn.is_connected():
                        conn = None
                if conn is None:
                    conn = self._pick(tried, deadline)
                # (a connection whose callers read makes the event only if this call has to wait for another reader)
                waiter = Waiter(None, None if conn.callers_read else backend.waiter(), deadline)
                blocking.add(waiter)
                try:
                    try:
                        self.lane(conn, entry.name).publish(body, waiter)
                    except ConnectionClosedError as exc:
                        waiter.result = exc
                    else:
                        conn.await_answer(waiter, deadline)  # the answer, the close, or the deadline
                finally:
                    blocking.discard(waiter)
                result = waiter.result
                if result.__class__ is bytes:  # (nsqd's OK: the common case first)
                    counts.published += 1
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
                counts.published += 1
                return result
        except BaseException:
            counts.errors += 1
            raise


def lane_lock(backend: Any) -> Any:
    """The lock of a new lane on backend: None where the backend's lock does nothing
    (gevent's, when its checks are off), so that the lane does not call it."""
    return lock_or_none(backend.lock())
