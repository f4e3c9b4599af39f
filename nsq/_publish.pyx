# cython: language_level=3, annotation_typing=False
# The blocking publish path of nsq.Writer, compiled: the lanes, the answers that
# resolve their callers, the blocking caller's wait and the blocking publish itself,
# with PUB and MPUB encoded straight from the bodies' buffers. Must behave exactly
# like the pure-Python twin nsq/_publish_py.py (its docstring says what this owns).
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport uint64_t
from libc.string cimport memcpy

import collections
import itertools
import logging
from time import monotonic as _monotonic

from msgengine.fork import fork_generation
from msgengine.primitives import lock_or_none

from nsq import codec
from nsq.errors import (
    ConnectionClosedError,
    InvalidArgumentError,
    InvalidBodyError,
    MessageTooLargeError,
    PublishInCallbackError,
    TimeoutError,
)
from nsq.names import check_topic

__all__ = ["BATCH_MAX_COUNT", "LaneAnswer", "Publisher", "TopicLane", "Waiter", "lane_lock"]

BATCH_MAX_COUNT = 2000
cdef Py_ssize_t _BATCH_MAX_COUNT = 2000

# Pending's logger: a failing answer callback is reported as Pending reports it
cdef object _correlator_logger = logging.getLogger("msgengine.correlator")


# --- encoding -------------------------------------------------------------------


cdef inline void _put_u32(char* w, uint64_t v) noexcept:
    w[0] = <char>((v >> 24) & 0xFF)
    w[1] = <char>((v >> 16) & 0xFF)
    w[2] = <char>((v >> 8) & 0xFF)
    w[3] = <char>(v & 0xFF)


cdef object _contiguous_body(object body):
    """body as the codec takes it: bytes, bytearray or a C-contiguous memoryview
    (a non-contiguous one is copied); anything else is refused."""
    if isinstance(body, (bytes, bytearray)):
        return body
    if isinstance(body, memoryview):
        if body.c_contiguous:
            return body
        return body.tobytes()
    raise InvalidBodyError("message body must be bytes, not %s" % type(body).__name__)


cdef inline int _check_size(uint64_t n) except -1:
    if n > 0xFFFFFFFF:
        raise MessageTooLargeError("message body of %d bytes is too large for NSQ" % n)
    return 0


cdef bytes _encode_pub(bytes prefix, object body):
    """prefix (b"PUB <topic>\\n"), the body's size and the body, in one bytes."""
    cdef Py_buffer view
    cdef Py_ssize_t p = PyBytes_GET_SIZE(prefix), n
    cdef bytes out
    cdef char* w
    if type(body) is bytes:
        n = PyBytes_GET_SIZE(body)
        _check_size(<uint64_t>n)
        out = PyBytes_FromStringAndSize(NULL, p + 4 + n)
        w = PyBytes_AS_STRING(out)
        memcpy(w, PyBytes_AS_STRING(prefix), p)
        _put_u32(w + p, <uint64_t>n)
        memcpy(w + p + 4, PyBytes_AS_STRING(body), n)
        return out
    body = _contiguous_body(body)
    PyObject_GetBuffer(body, &view, PyBUF_SIMPLE)
    try:
        n = view.len
        _check_size(<uint64_t>n)
        out = PyBytes_FromStringAndSize(NULL, p + 4 + n)
        w = PyBytes_AS_STRING(out)
        memcpy(w, PyBytes_AS_STRING(prefix), p)
        _put_u32(w + p, <uint64_t>n)
        memcpy(w + p + 4, view.buf, n)
    finally:
        PyBuffer_Release(&view)
    return out


cdef Py_ssize_t _body_size(object body) except -1:
    cdef Py_buffer view
    cdef Py_ssize_t n
    if type(body) is bytes:
        return PyBytes_GET_SIZE(body)
    PyObject_GetBuffer(body, &view, PyBUF_SIMPLE)
    n = view.len
    PyBuffer_Release(&view)
    return n


cdef Py_ssize_t _copy_body(char* w, object body) except -1:
    cdef Py_buffer view
    cdef Py_ssize_t n
    if type(body) is bytes:
        n = PyBytes_GET_SIZE(body)
        _put_u32(w, <uint64_t>n)
        memcpy(w + 4, PyBytes_AS_STRING(body), n)
        return n
    PyObject_GetBuffer(body, &view, PyBUF_SIMPLE)
    n = view.len
    _put_u32(w, <uint64_t>n)
    memcpy(w + 4, view.buf, n)
    PyBuffer_Release(&view)
    return n


cdef bytes _encode_mpub(bytes prefix, list bodies):
    """prefix (b"MPUB <topic>\\n"), the body's size, the count, then each body's size and bytes."""
    cdef list parts = []
    cdef uint64_t total = 4
    cdef Py_ssize_t p = PyBytes_GET_SIZE(prefix), n, count = 0, pos
    cdef bytes out
    cdef char* w
    for body in bodies:
        body = _contiguous_body(body)
        n = _body_size(body)
        _check_size(<uint64_t>n)
        parts.append(body)
        total += 4 + <uint64_t>n
        count += 1
    if not count:
        raise InvalidArgumentError("MPUB needs at least one message")
    if total > 0xFFFFFFFF:
        raise MessageTooLargeError("MPUB body of %d bytes is too large for NSQ" % total)
    out = PyBytes_FromStringAndSize(NULL, p + 4 + <Py_ssize_t>total)
    w = PyBytes_AS_STRING(out)
    memcpy(w, PyBytes_AS_STRING(prefix), p)
    _put_u32(w + p, total)
    _put_u32(w + p + 4, <uint64_t>count)
    pos = p + 8
    for body in parts:
        pos += 4 + _copy_body(w + pos, body)
    return out


# --- waits and answers ------------------------------------------------------------


cdef class Waiter:
    """A blocking caller's wait for one answer (what a ``Pending`` is: the driver
    gives it an event when the caller has to wait for another reader)."""

    cdef public object callback
    cdef public object event
    cdef public object result
    cdef public double deadline

    def __init__(self, callback=None, event=None, double deadline=0.0):
        self.callback = callback
        self.event = event
        self.result = None
        self.deadline = deadline

    cpdef resolve(self, source, result):
        """The answer (or an exception) arrived from source: call back, then wake the waiter."""
        self.result = result
        if self.callback is not None:
            try:
                self.callback(source, result)
            except Exception:
                _correlator_logger.exception("[%s] answer callback raised", source)
        if self.event is not None:
            self.event.set()


cdef inline _resolve(object waiter, object source, object result):
    if type(waiter) is Waiter:
        (<Waiter>waiter).resolve(source, result)
    else:
        waiter.resolve(source, result)


cdef class LaneAnswer:
    """The answer to a lane's command: lets the lane send its next batch,
    then resolves the waiter (or each of the list of waiters) it carried (the
    next command is on its way to nsqd while they wake up)."""

    cdef public object callback
    cdef public object event
    cdef public object result
    cdef public double deadline
    cdef public TopicLane lane
    cdef public object waiters

    def __init__(self, TopicLane lane, waiters):
        self.callback = None
        self.event = None
        self.result = None
        self.deadline = 0.0
        self.lane = lane
        self.waiters = waiters

    cpdef resolve(self, source, result):
        self.result = result
        try:
            self.lane.next_batch()  # (first: nsqd works on it while the callers wake up)
        finally:
            waiters = self.waiters
            if isinstance(waiters, list):
                for waiter in <list>waiters:
                    _resolve(waiter, source, result)
            else:
                _resolve(waiters, source, result)


# --- lanes ----------------------------------------------------------------------------


def lane_lock(backend):
    """The lock of a new lane on backend: None where the backend's lock does nothing
    (gevent's, when its checks are off), so that the lane does not call it."""
    return lock_or_none(backend.lock())


cdef class TopicLane:
    """PUBs to one topic on one connection: at most one command in flight;
    PUBs that arrive meanwhile wait in batches and leave as one MPUB each.
    ``lock`` guards the batches (None: the backend needs none, gevent's)."""

    cdef public object conn
    cdef public str topic
    cdef public bint busy
    cdef public Py_ssize_t max_bytes
    cdef object _lock
    cdef object _batches
    cdef object _send
    cdef bytes _pub_prefix
    cdef bytes _mpub_prefix

    def __init__(self, conn, topic, max_bytes, lock=None):
        pub = codec.encode_pub(topic, b"")  # (checks the name as every PUB would)
        self.conn = conn
        self.topic = topic
        self.busy = False
        self.max_bytes = max_bytes
        self._lock = lock
        self._batches = collections.deque()
        self._send = conn.send_request
        self._pub_prefix = pub[:len(pub) - 4]
        self._mpub_prefix = b"M" + self._pub_prefix

    def pending_batches(self):
        """Batches waiting for the command in flight to be answered."""
        return len(self._batches)

    cpdef publish(self, body, waiter):
        """Send body's PUB now if nothing is in flight, else join the last
        batch (or start one); waiter gets nsqd's answer."""
        cdef list bodies, waiters, size
        cdef Py_ssize_t grows
        lock = self._lock
        if lock is not None:
            lock.acquire()
        try:
            if self.busy:
                batches = self._batches
                grows = len(body) + 4
                if batches:
                    bodies, waiters, size = batches[len(batches) - 1]
                    if <Py_ssize_t>size[0] + grows <= self.max_bytes and len(bodies) < _BATCH_MAX_COUNT:
                        bodies.append(body)
                        waiters.append(waiter)
                        size[0] += grows
                        return
                batches.append(([body], [waiter], [grows]))
                return
            self.busy = True
        finally:
            if lock is not None:
                lock.release()
        try:  # (the common case, one PUB and nothing in flight, without lists)
            self._send(_encode_pub(self._pub_prefix, body), LaneAnswer(self, waiter))
        except ConnectionClosedError as exc:
            _resolve(waiter, self.conn, exc)
            self.next_batch()

    cpdef next_batch(self):
        """The command in flight was answered: send the next batch, or go idle."""
        cdef list bodies, waiters
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
                data = _encode_pub(self._pub_prefix, bodies[0])
                answer = LaneAnswer(self, waiters[0])
            else:
                data = _encode_mpub(self._mpub_prefix, bodies)
                answer = LaneAnswer(self, waiters)
            try:
                self._send(data, answer)
                return
            except ConnectionClosedError as exc:
                conn = self.conn
                for waiter in waiters:
                    _resolve(waiter, conn, exc)


# --- the blocking publish ----------------------------------------------------------


cdef class _Topic:
    cdef str name
    cdef object counts


cdef class Publisher:
    """The blocking ``Writer.pub`` (no callback, no program loop, joined
    publishes) and the lanes of every topic and connection of one Writer;
    see the pure twin's docstring for what the Writer hands over."""

    cdef public object backend
    cdef public list conns
    cdef public object blocking
    cdef public object callback_tasks
    cdef public double publish_timeout
    cdef public bint retry_publish
    cdef public Py_ssize_t max_msg_size
    cdef public Py_ssize_t max_bytes
    cdef public object round_robin
    cdef object _pick
    cdef object _counts_for
    cdef object _in_this_process
    cdef object _elsewhere
    cdef object _generation
    cdef dict _topics
    cdef dict _lanes

    def __init__(self, backend, *, pick, counts_for, in_this_process, elsewhere, callback_tasks, blocking,
                 round_robin, publish_timeout, retry_publish, max_msg_size, max_bytes):
        self.backend = backend
        self.conns = []
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
        self._generation = None
        self._topics = {}
        self._lanes = {}

    # -- lanes ------------------------------------------------------------

    cpdef TopicLane lane(self, conn, str topic):
        """The lane of topic (a checked name) on conn, made when it is new."""
        key = (id(conn), topic)
        lane = self._lanes.get(key)
        if lane is None or (<TopicLane>lane).conn is not conn:
            lane = TopicLane(conn, topic, self.max_bytes, lane_lock(conn.backend))
            self._lanes[key] = lane
        return <TopicLane>lane

    def send_to_lane(self, conn, waiter, topic_and_body):
        """A PUB goes into its topic's lane on conn (joined with others while one is in flight)."""
        topic, body = topic_and_body
        self.lane(conn, topic).publish(body, waiter)

    def lane_busy(self, conn):
        """PUBs to this connection still waiting in a lane (between two of its commands)."""
        return any(lane.busy for lane in list(self._lanes.values()) if lane.conn is conn)

    def forget(self, conn):
        """conn is gone: drop its lanes."""
        for key in [k for k, lane in list(self._lanes.items()) if lane.conn is conn]:
            self._lanes.pop(key, None)

    def reset(self):
        """After a fork: no lanes, no connections."""
        self._lanes = {}
        self.conns = []

    # -- the blocking publish -----------------------------------------------

    cdef _Topic _topic(self, topic):
        name = check_topic(topic)
        cdef _Topic entry = _Topic.__new__(_Topic)
        entry.name = name
        entry.counts = None  # (made once the first body passed, as the Writer's stats() show them)
        if len(self._topics) < 4096:  # (publishers reuse a few topics)
            self._topics[topic] = entry
        return entry

    def pub(self, topic, body):
        """Publish body to topic and return nsqd's answer (b"OK"), or raise
        (a timeout included: the message may or may not have been published)."""
        cdef _Topic entry
        cdef Py_ssize_t size, n
        cdef Waiter waiter
        cdef double deadline
        found = self._topics.get(topic)
        if found is None:
            entry = self._topic(topic)
        else:
            entry = <_Topic>found
        if type(body) is bytes:
            size = PyBytes_GET_SIZE(body)
        elif isinstance(body, (bytes, bytearray, memoryview)):
            size = len(body)
        else:
            raise InvalidBodyError("message body must be bytes, not %s" % type(body).__name__)
        if size > self.max_msg_size:
            raise MessageTooLargeError(
                "message of %d bytes exceeds max_msg_size %d (nsqd --max-msg-size)" % (size, self.max_msg_size)
            )
        generation = fork_generation()
        if self._generation != generation:
            self._in_this_process()
            self._generation = generation
        counts = entry.counts
        if counts is None:
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
                n = len(conns)
                if n and tried is None:
                    conn = conns[next(self.round_robin) % n]
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
                if type(result) is bytes:  # (nsqd's OK: the common case first)
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
