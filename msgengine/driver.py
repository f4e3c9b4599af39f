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
``self.lock`` (``command``); ``receive_data`` is called by the reader task
alone, without the lock, so a protocol object must make that one call safe
beside commands (it may only touch state no command writes), and events are
handled outside any lock.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Protocol

from .errors import StreamClosedError
from .runtime import Backend, monotonic

logger = logging.getLogger(__name__)


class SansIOProtocol(Protocol):
    def receive_data(self, data: Any) -> list: ...

    def data_to_send(self) -> bytes: ...

    def flush_due(self) -> bool: ...

    def close(self) -> list: ...


class Driver:
    """Bytes between ``self.protocol`` and ``self.stream``; see the module docstring."""

    protocol: SansIOProtocol
    #: what close errors are raised and reported as (a client package's own class)
    closed_error: Callable[[str], BaseException] = StreamClosedError

    def __init__(self, backend: Backend, name: str) -> None:
        self.backend = backend
        self.name = name
        self.stream: Any = None
        self.lock = backend.lock()
        self.last_recv_timestamp = 0.0
        self.close_error: BaseException | None = None
        self._writing = False
        self._closed_event = backend.event()
        #: True once the connection closed (or stopped I/O after a fork): read it, never set it
        self.io_stopped = False
        self._reader_task: Any = None
        self._watchdog: Any = None
        self._close_listeners: list[Callable[[Any], None]] = []

    # -- running --------------------------------------------------------------

    def start_io(self, read_timeout: float | None) -> None:
        """The handshake is done: start the reader task and, with a read
        timeout, the watchdog."""
        self.last_recv_timestamp = monotonic()
        self._reader_task = self.backend.spawn(self._read_loop)
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

    def _read_loop(self) -> None:
        error: BaseException | None = None
        try:
            stream = self.stream
            receive = self.protocol.receive_data
            handle = self.handle_events
            while not self.io_stopped:
                data = stream.recv()
                if not data:
                    raise self.closed_error("%s closed the connection" % (self.name,))
                self.last_recv_timestamp = monotonic()
                events = receive(data)  # (without the lock: see the protocol's receive_data)
                if events:
                    handle(events)  # (what it queues is written by the command that queued it)
        except BaseException as exc:  # noqa: BLE001 - the loop's end is reported, never swallowed
            error = exc
        if not self.io_stopped:
            if error is not None and not isinstance(error, (ConnectionError, OSError)):
                logger.error("[%s] closing after error: %r", self.name, error)
            self.close_now(error)

    def handle_events(self, events: list) -> None:
        """Act on what the protocol object reported (called on the reader task)."""
        raise NotImplementedError

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
        self._write(data)

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
        self._write(data)

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
