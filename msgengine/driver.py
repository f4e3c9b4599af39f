"""The I/O driver of one connection: moves bytes between a sans-I/O protocol
object and a transport stream on the runtime's tasks.

A ``Driver`` owns the stream, one reader task, write coalescing (commands
queued while a write is in flight leave together in the next single write),
the dead-peer watchdog (nothing received for ``read_timeout`` seconds closes
the connection), and closing (every request still waiting is failed). It
knows nothing of any wire format: a subclass gives it the protocol object
(anything with ``receive_data(bytes) -> events``, ``data_to_send() ->
bytes``, ``flush_due() -> bool`` and ``close() -> pending requests``) and
handles the events in ``handle_events``.

The protocol object is not thread-safe: commands go into it under
``self.lock`` (``command``); ``receive_data`` is called by one reading task
at a time, without the lock, so a protocol object must make that one call
safe beside commands (it may only touch state no command writes), and events
are handled outside any lock.

Who reads. By default the reader task reads for ever. With
``enable_caller_reads()`` (a request/response client: the NSQ Writer) a task
that waits for an answer reads the stream itself when no other task does,
the leader/follower pattern: the one reading is the leader; tasks that wait
meanwhile are followers; a leader whose own answer came hands the read to a
follower still waiting (or, with answers outstanding and no follower, to the
reader task). A lone caller so pays no hand-off between tasks at all: it
writes its request and reads its answer, spinning on non-blocking reads
first for about as long as answers usually take to come (a sleep and a
wake-up cost more), and not at all when they take long. The reader task
then reads only while no caller does (heartbeats between publishes, answers
of publishes with callbacks), parking while callers read.
"""
from __future__ import annotations

import collections
import logging
from typing import Any, Callable, Generic, Protocol, TypeVar

from msgengine.correlator import Pending
from msgengine.errors import StreamClosedError
from msgengine.primitives import lock_or_none
from msgengine.runtime import Backend, monotonic

logger = logging.getLogger(__name__)

#: the read token's holder when the reader task reads (caller reads enabled)
_READER_TASK = "reader task"
#: how long the reader task parks while callers read, before it looks again
PARK_SECONDS = 0.05
#: A lone leader tries non-blocking reads for a while before it sleeps: an
#: answer over loopback usually comes sooner than a sleep and a wake-up take.
#: It spins for 2.5 times the usual answer time (a moving average), and not at
#: all when answers take longer than SPIN_MAX_SECONDS (a slow or distant server).
SPIN_MAX_SECONDS = 300e-6
SPIN_FIRST_GUESS = 40e-6


class SansIOProtocol(Protocol):
    def receive_data(self, data: Any) -> list: ...

    def data_to_send(self) -> bytes: ...

    def flush_due(self) -> bool: ...

    def close(self) -> list: ...

    def waiting_answers(self) -> int: ...


P = TypeVar("P", bound=SansIOProtocol)


class Driver(Generic[P]):
    """Bytes between ``self.protocol`` and ``self.stream``; see the module docstring.
    A client's connection names its protocol object's class: ``Driver[NsqProtocol]``."""

    protocol: P
    #: what close errors are raised and reported as (a client package's own class)
    closed_error: Callable[[str], BaseException] = StreamClosedError

    def __init__(self, backend: Backend, name: str) -> None:
        self.backend = backend
        self.name = name
        self.stream: Any = None
        self.lock = backend.lock()
        self._await_lock = lock_or_none(self.lock)  # (await_answer's: None where it does nothing, gevent's)
        self.last_recv_timestamp = 0.0
        self.close_error: BaseException | None = None
        self._writing = False
        self._closed_event = backend.event()
        #: True once the connection closed (or stopped I/O after a fork): read it, never set it
        self.io_stopped = False
        self._reader_task: Any = None
        self._between_reads = False  # the reader task waits for bytes, with nothing half done
        self._watchdog: Any = None
        self._close_listeners: list[Callable[[Any], None]] = []
        # caller reads (leader/follower), all under self.lock
        self.callers_read = False
        self._read_owner: Any = None  # None, _READER_TASK or the leading caller's Pending
        self._followers: collections.deque[Pending] = collections.deque()
        self._callers_active = False  # a caller waited since the reader task last looked
        self._reader_wake: Any = None
        self._new_waiter = backend.waiter
        self._answer_time = SPIN_FIRST_GUESS  # moving average: a leader's wait for its first bytes
        self._spin_seconds = 2.5 * SPIN_FIRST_GUESS

    def rebind(self, backend: Backend) -> None:
        """Run on backend instead (before any I/O: the primitives are made afresh)."""
        self.backend = backend
        self.lock = backend.lock()
        self._await_lock = lock_or_none(self.lock)
        self._closed_event = backend.event()
        self._new_waiter = backend.waiter

    # -- running --------------------------------------------------------------

    def start_io(self, read_timeout: float | None) -> None:
        """The handshake is done: start the reader task and, with a read
        timeout, the watchdog."""
        self.last_recv_timestamp = monotonic()
        if self.callers_read and not hasattr(self.stream, "recv_within"):
            self.callers_read = False  # (a stream that cannot wait with a deadline: TLS, compression)
        if self.callers_read:
            self._reader_wake = self.backend.event()
            self._reader_task = self.backend.spawn(self._shared_read_loop)
        else:
            self._start_reader()
        if read_timeout is not None:
            self._watchdog = self.backend.call_every(min(read_timeout / 4, 1.0), self._check_alive, read_timeout)

    def _check_alive(self, limit: float) -> None:
        if self.io_stopped:
            self._stop_watchdog()
            return
        if monotonic() - self.last_recv_timestamp > limit:
            self._stop_watchdog()
            # closing writes and wakes waiters: never on a timer callback
            self.backend.spawn(
                self.close_now,
                self.closed_error(
                    "nothing received from %s for two heartbeat intervals (%.1fs); assuming it is gone"
                    % (self.name, limit)
                ),
            )

    def _stop_watchdog(self) -> None:
        watchdog, self._watchdog = self._watchdog, None
        if watchdog is not None:
            watchdog.cancel()

    def _start_reader(self) -> None:
        self._reader_task = task = self.backend.spawn(self._read_loop)
        self.backend.when_lost(task, self._reader_lost)

    def _read_loop(self) -> None:
        error: BaseException | None = None
        try:
            recv = self.stream.recv
            received = self._received
            while not self.io_stopped:
                self._between_reads = True  # (nothing half done: see _reader_lost)
                data = recv()
                self._between_reads = False
                received(data)
        except BaseException as exc:  # noqa: BLE001 - the loop's end is reported, never swallowed
            error = exc
        self._reading_ended(error)

    def _reader_lost(self) -> None:
        """The reader task cannot go on (Backend.when_lost: an asyncio loop stopped, then run by
        another thread). Lost while it waited for bytes, a new one reads on; lost in the middle of
        a read's events, the rest of them are gone with it, and the connection closes (its
        requests fail; its owner reconnects, and nsqd hands unfinished messages out again)."""
        if self.io_stopped:
            return
        if self._between_reads:
            self._start_reader()
        else:
            self._reading_ended(self.closed_error(
                "%s: reading stopped midway: the event loop now runs on another thread" % (self.name,)))

    def _received(self, data: Any) -> None:
        """Act on one read (by whichever task holds the read)."""
        if not data:
            raise self.closed_error("%s closed the connection" % (self.name,))
        self.last_recv_timestamp = monotonic()
        events = self.protocol.receive_data(data)  # (without the lock: see the protocol's receive_data)
        if events:
            self.handle_events(events)  # (what it queues is written by the command that queued it)

    def _reading_ended(self, error: BaseException | None) -> None:
        """Reading ended (error None: the stream ended): close, unless closed already."""
        if not self.io_stopped:
            # (a ReferenceError: an owner that held this connection's listeners weakly is gone)
            if isinstance(error, Exception) and not isinstance(error, (ConnectionError, OSError, ReferenceError)):
                logger.error("[%s] closing after error: %r", self.name, error)
            elif error is not None and not isinstance(error, Exception):
                # (the reading task was cancelled or killed: an asyncio loop's end, a greenlet killed)
                logger.info("[%s] closing: reading stopped by %r", self.name, error)
            self.close_now(error)

    def handle_events(self, events: list) -> None:
        """Act on what the protocol object reported (called by the task that read)."""
        raise NotImplementedError

    # -- caller reads (leader/follower) ---------------------------------------

    def enable_caller_reads(self) -> None:
        """Before start_io(): let callers of await_answer() read the stream
        themselves (see the module docstring). Streams that cannot wait with
        a deadline keep the reader task as the only reader, and so do backends
        whose waits are awaits (``Backend.callers_may_read``)."""
        self.callers_read = self.backend.callers_may_read

    def _shared_read_loop(self) -> None:
        """The reader task under caller reads: it reads while no caller has
        waited for a whole park interval. After a read that answered the
        last request outstanding, or while callers wait, it gives the read
        up (to a waiting caller, if any) and parks: a caller whose answer
        it read is likely to publish again at once, and should find the read
        free rather than wait for this task to read its answer."""
        error: BaseException | None = None
        try:
            recv = self.stream.recv
            received = self._received
            waiting_answers = self.protocol.waiting_answers
            lock = self.lock
            wake = self._reader_wake
            rest = False
            while not self.io_stopped:
                with lock:
                    owner = self._read_owner
                    if owner is None and not self._callers_active and not rest:
                        self._read_owner = owner = _READER_TASK
                    self._callers_active = False
                rest = False
                if owner is not _READER_TASK:
                    wake.wait(PARK_SECONDS)  # (set when a leader leaves answers outstanding and no follower)
                    wake.clear()  # (the owner, checked under the lock, is what counts, not the wake)
                    continue
                data = recv()
                outstanding = waiting_answers()
                received(data)
                if self._followers or self._callers_active or (outstanding and not waiting_answers()):
                    with lock:
                        if self._read_owner is _READER_TASK:
                            self._pass_read_locked()
                            rest = True
        except BaseException as exc:  # noqa: BLE001 - the loop's end is reported, never swallowed
            error = exc
        self._reading_ended(error)

    def reader_needed(self) -> None:
        """A request was queued whose sender will not wait in await_answer()
        (a callback): make sure some task reads its answer."""
        if self.callers_read:
            with self.lock:
                if self._read_owner is None:
                    self._read_owner = _READER_TASK
                    self._reader_wake.set()

    def await_answer(self, pending: Pending, deadline: float) -> None:
        """Return once ``pending`` has its result, or ``deadline`` (monotonic)
        passed (``pending.result`` is then still None). With caller reads,
        this task reads the stream itself when no other task does; otherwise
        ``pending`` needs an event (anything with set() and wait()) that its
        owner sets at the deadline. The owner of a pending whose event is
        None sets the event it finds there at the deadline, if any."""
        if not self.callers_read:
            pending.event.wait()
            return
        lock = self._await_lock
        while True:
            if lock is not None:
                lock.acquire()
            try:
                self._callers_active = True
                owner = self._read_owner
                if owner is pending or (owner is None and not self.io_stopped and pending.result is None):
                    self._read_owner = pending
                    lead = True
                else:
                    lead = False
                    pending.event = self._new_waiter()  # (a fresh one-shot for every wait)
                    if pending.result is not None:
                        return
                    if not self.io_stopped:  # (once closed, the close resolves every request: just wait)
                        self._followers.append(pending)
            finally:
                if lock is not None:
                    lock.release()
            if lead:
                self._lead(pending, deadline)
            else:
                pending.event.wait()  # answered, made leader, closed, or woken at the deadline
                if pending.result is not None and self._read_owner is not pending:
                    return  # (answered: the common case, without the lock)
                with self.lock:
                    if self._read_owner is pending:
                        continue  # made leader
                    if pending.result is None and pending in self._followers:
                        self._followers.remove(pending)  # (it is leaving or will wait afresh)
            if pending.result is not None or monotonic() >= deadline:
                return

    def _lead(self, pending: Pending, deadline: float) -> None:
        """Read and dispatch until pending has its answer, then pass the read on."""
        stream = self.stream
        dispatching = False
        try:
            first = True
            while pending.result is None and not self.io_stopped:
                started = monotonic()
                spin = self._spin_seconds
                data = None
                if spin and not self._followers:  # (followers wait to run: no spinning then)
                    data = stream.poll_recv(started + spin)
                if data is None:
                    remaining = deadline - monotonic()
                    if remaining <= 0:
                        break
                    data = stream.recv_within(remaining)
                    if data is None:
                        break
                if first:  # how long answers take: the next spin's length
                    first = False
                    self._answer_time += (monotonic() - started - self._answer_time) * 0.25
                    spin = 2.5 * self._answer_time
                    self._spin_seconds = spin if spin <= SPIN_MAX_SECONDS else 0.0
                dispatching = True
                self._received(data)
                dispatching = False
        except Exception as exc:  # the stream or the protocol failed: the connection is done
            self._reading_ended(exc)
        except BaseException as exc:  # interrupted (Ctrl-C, a gevent Timeout, a kill)
            if dispatching and not self.io_stopped:  # events read but not acted on: answers would be lost
                self.close_now(exc)
            raise
        finally:
            with self.lock:
                if self._read_owner is pending:
                    self._pass_read_locked()

    def _pass_read_locked(self) -> None:
        """The reader gives up the read (under self.lock): to the first
        follower still waiting, else to the reader task while answers are
        outstanding, else to no one."""
        followers = self._followers
        if self.io_stopped:  # the close resolves every request: nothing is left to read
            followers.clear()
            self._read_owner = None
            return
        while followers:
            follower = followers.popleft()
            if follower.result is None:
                self._read_owner = follower
                follower.event.set()
                return
        if self.protocol.waiting_answers():
            self._read_owner = _READER_TASK
            self._reader_wake.set()
        else:
            self._read_owner = None

    # -- writing --------------------------------------------------------------

    def command(self, queue: Callable[..., Any], *args: Any) -> None:
        """Queue a command: ``queue(*args)`` (a method of the protocol object)
        runs under the lock, and when the protocol says a write is due and no
        other task is writing, this task writes, claiming the write in the same
        critical section (one lock round trip per command)."""
        self.backend.check_context("Driver.command")
        with self.lock:
            queue(*args)
            if self._writing or self.io_stopped or not self.protocol.flush_due():
                return
            data = self.protocol.data_to_send()
            self._writing = True
        self._write_here(data)

    def _write_here(self, data: bytes) -> None:
        """Write (the caller claimed the write): here, or, where a wait would freeze the asyncio
        backend's loop (one of its callbacks), here until the socket is full and in a task from there."""
        if self.backend.may_wait():
            self._write(data)
        else:
            self.backend.spawn_eager(self._write, data)

    def flush(self) -> None:
        """Write what the protocol object has queued, unless another task is
        writing (it takes our bytes along). A failed write closes the
        connection: waiters get the error and close listeners hear of it,
        so the caller of a flush is not told again."""
        self.backend.check_context("Driver.flush")
        with self.lock:
            if self._writing or self.io_stopped:
                return
            data = self.protocol.data_to_send()
            if not data:
                return
            self._writing = True
        self._write_here(data)

    def _write(self, data: bytes) -> None:
        protocol = self.protocol
        while True:
            try:
                self.stream.send(data)
            except BaseException as exc:
                with self.lock:
                    self._writing = False
                self.close_now(exc)
                return
            with self.lock:
                data = protocol.data_to_send()
                if not data:
                    self._writing = False
                    return

    def write_due(self) -> None:
        """Write now if the protocol object says so (after queuing a command)."""
        if self.protocol.flush_due():
            self.flush()

    # -- closing --------------------------------------------------------------

    def is_closed(self) -> bool:
        return self.io_stopped

    def close_now(self, error: BaseException | None = None) -> None:
        """Close the stream; requests still waiting get a closed error (with the reason)."""
        with self.lock:
            if self.io_stopped:
                return
            self.io_stopped = True
            self.close_error = error
            waiting = self.protocol.close()
        self._stop_watchdog()
        if self.stream is not None:
            try:
                self.stream.close()
            except Exception:
                pass
        if self._reader_wake is not None:
            self._reader_wake.set()  # a parked reader task ends
        closed = self.closed_error("connection to %s closed%s" % (self.name, ": %s" % (error,) if error else ""))
        for pending in waiting:
            pending.resolve(self, closed)
        self._closed_event.set()
        try:
            self.on_closed()
        except Exception:
            logger.exception("[%s] close hook raised", self.name)
        for listener in self._close_listeners:
            try:
                listener(self)
            except Exception:
                logger.exception("[%s] close listener raised", self.name)

    def on_closed(self) -> None:
        """Called once, after the connection closed and its waiters were failed."""

    def add_close_listener(self, listener: Callable[[Any], None]) -> None:
        """Call listener(self) once the connection has closed (at once if it has)."""
        self._close_listeners.append(listener)
        if self._closed_event.is_set() and listener in self._close_listeners:
            self._close_listeners.remove(listener)
            listener(self)

    def wait_closed(self, timeout: float | None = None) -> bool:
        return bool(self._closed_event.wait(timeout))

    def join_reader(self, timeout: float) -> None:
        """After close_now(): wait, at most timeout, for the reader task to end (at once on
        that task itself), so that an owner that closed leaves no task of its own behind."""
        task = self._reader_task
        if task is not None:
            self.backend.join_task(task, timeout)

    def stop_io(self, error: BaseException) -> None:
        """Stop reading and writing at once, without touching the stream or
        telling anyone (the first step in a forked child)."""
        self.io_stopped = True
        self.close_error = error

    def drop_after_fork(self, error: BaseException) -> list:
        """In a forked child: stop all I/O at once, and drop this process's
        descriptor without writing or shutting the connection down; returns the
        requests that waited here (the caller decides whether anyone can be told)."""
        self.io_stopped = True
        self.close_error = error
        self._stop_watchdog_quietly()
        self.lock = self.backend.lock()  # it may have been held by a thread that does not exist here
        self._await_lock = lock_or_none(self.lock)
        self._writing = False
        waiting = self.protocol.close()
        stream, self.stream = self.stream, None
        if stream is not None:
            try:
                stream.close()  # no shutdown(): see the transport's close()
            except Exception:
                pass
        return waiting

    def _stop_watchdog_quietly(self) -> None:
        watchdog, self._watchdog = self._watchdog, None
        if watchdog is not None:
            try:
                watchdog.cancel()
            except Exception:  # a timer of the parent's scheduler
                pass

    def has_closed(self) -> bool:
        """close_now() has run to its end (waiters failed, listeners told)."""
        return self._closed_event.is_set()

    def set_closed_event(self) -> None:
        """Wake whoever waits in wait_closed() (after a fork where tasks survived)."""
        self._closed_event.set()

    def reset_closed_event(self) -> None:
        """A fresh, set closed event (after a fork where the old one's lock may
        have been held by a thread that does not exist in the child)."""
        self._closed_event = self.backend.event()
        self._closed_event.set()
