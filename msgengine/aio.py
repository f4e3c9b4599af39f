"""The asyncio backend: the engine's blocking-style code (drivers, supervisors, the clients' sync
APIs) runs on the program's running event loop, with no OS thread per connection.

A task is a greenlet (``greenlet`` is gevent's own coroutine library; gevent itself is never
imported here) driven by an asyncio Task of the loop. Where the engine blocks (an Event's wait, a
socket read, a sleep, a lock held by another task), the greenlet hands an awaitable to its driving
coroutine (``await_only``), which awaits it on the loop and switches back with the outcome. So
every hook and callback runs on the loop's thread, between the loop's other tasks, and a blocking
call costs two greenlet switches around the await.

Where calls come from:

- coroutines of the program: ``await run_sync(fn, *args)`` runs a blocking call of a client (its
  sync API) in a task of the running loop's backend and awaits its outcome; this is what
  ``pulsarfast.asyncio`` is made of. A blocking call made directly on the loop, outside such a
  task, raises ``BlockingCallError`` (it would freeze the loop) instead of hanging. On the loop's
  thread while the loop is stopped (before the program runs it, between two runs, after the
  last), ``call_and_wait`` runs the loop until the call is done;
- other OS threads: the one door, ``loop.call_soon_threadsafe`` (``call_and_wait`` waits on the
  caller's own thread for the outcome), the rule the gevent backend's door follows;
- timers: ``loop.call_later``, each call in a task of its own.

Sockets are non-blocking; ``AioSocket`` gives the transports the blocking socket calls they use
(``recv_into``, ``send``, ``sendall``, a timeout of 0 for reads that never wait), each wait an
await on the loop's readiness callbacks. TLS and the compression layers sit on top as they do on
the other backends (``msgengine.transport``).

``get_backend("asyncio")`` needs a running loop and hands out that loop's backend (one per loop);
``backend_for_loop`` also takes one not running yet (NSQ's loop programs make their clients before
they run the loop: see ``nsq.loops``). The loop's thread is the one that runs it, whichever that
is, seen as it runs (``AsyncioBackend.on_loop_thread``): a program may make its clients on one
thread and run the loop on another (``Thread(target=IOLoop.current().start)``), or run it on a
third after it stopped. While it is stopped, its thread is the one that ran it last (before its
first run, the one that made the backend), until that thread ends.
"""
from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextvars
import errno
import functools
import logging
import queue as _queue
import socket as _socket
import threading
import weakref
from typing import Any, Awaitable, Callable

import greenlet

from msgengine.errors import CallTimeoutError, EngineConfigError, EngineError, HubThreadError
from msgengine.primitives import Backend, Task, Timer, spent, timer_delay

logger = logging.getLogger(__name__)

__all__ = ["SLICE", "AsyncioBackend", "AioSocket", "BlockingCallError", "await_only", "backend_for_loop",
           "backend_for_running_loop", "next_turn", "run_sync"]


class BlockingCallError(EngineError, RuntimeError):
    """A blocking call made on the event loop outside a task of the asyncio backend (it would
    freeze the loop): await it through ``run_sync`` (what ``pulsarfast.asyncio`` does)."""


class _TaskGreenlet(greenlet.greenlet):
    """A greenlet of the asyncio backend: one that may block (its waits are awaits on the loop)."""

    backend: "AsyncioBackend"
    #: the task spawn() returned for it (None for the backend's own: call_and_wait's, spawn_eager's)
    owner: "_AioTask | None" = None
    #: the OS thread it runs on (see _drive_on; an ident may be reused by a later thread: not that)
    thread: threading.Thread


def _task_greenlet() -> _TaskGreenlet:
    """The running task greenlet; BlockingCallError when the caller is not in one."""
    current = greenlet.getcurrent()
    if not isinstance(current, _TaskGreenlet):
        raise BlockingCallError("a blocking call on the event loop's thread outside a task of the asyncio "
                                "backend would freeze the loop: await it (msgengine.aio.run_sync, or the "
                                "pulsarfast.asyncio API)")
    return current


def await_only(make: Callable[[], Awaitable[Any]]) -> Any:
    """Await make()'s awaitable on the loop from a task greenlet and return its result (raise its
    exception); BlockingCallError (and nothing made) outside a task greenlet."""
    parent = _task_greenlet().parent
    assert parent is not None
    return parent.switch(make())


async def _drive(backend: "AsyncioBackend", fn: Callable[..., Any], args: tuple, kwargs: dict,
                 owner: "_AioTask | None" = None) -> Any:
    """Run fn(*args, **kwargs) in a task greenlet, awaiting on the loop whatever it hands over."""
    glet = _TaskGreenlet(functools.partial(fn, *args, **kwargs), parent=greenlet.getcurrent())
    # the caller's context variables, as asyncio.to_thread passes them on (a greenlet starts in an
    # empty context): the current OpenTelemetry span, a request id, ... are seen by the blocking call
    glet.gr_context = contextvars.copy_context()
    glet.backend = backend
    glet.owner = owner
    glet.thread = thread = threading.current_thread()
    backend.turn_at = backend.loop.time()
    backend.runs_on(thread)
    return await _drive_on(glet, glet.switch())


async def _drive_on(glet: _TaskGreenlet, handed: Any) -> Any:
    """Go on driving glet, which handed over ``handed`` (its result once it is dead).

    A greenlet is bound to the OS thread it started on: when the loop has since been run by
    another thread (stopped, then run by a thread of its own), it cannot go on, and the task is
    lost (``AsyncioBackend.task_lost``)."""
    backend = glet.backend
    while not glet.dead:
        try:
            value = await handed
        except BaseException as exc:  # (a CancelledError too: raised where the greenlet waits)
            backend.turn_at = backend.loop.time()
            try:
                handed = glet.throw(exc)
            except greenlet.error:
                if glet.thread is threading.current_thread():  # (raised by the task itself)
                    raise
                if isinstance(exc, asyncio.CancelledError):
                    raise exc from None  # (cancelled, and lost too: nothing to go on with)
                return backend.task_lost(glet)
        else:
            backend.turn_at = backend.loop.time()
            try:
                handed = glet.switch(value)
            except greenlet.error:
                if glet.thread is threading.current_thread():
                    raise
                return backend.task_lost(glet)
    return handed


def backend_for_running_loop() -> "AsyncioBackend":
    """The running loop's backend (made at its first use)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        raise EngineConfigError("backend='asyncio' needs a running event loop: make the client in a "
                                "coroutine (or choose backend='gevent' or 'threads')") from None
    return backend_for_loop(loop)


def backend_for_loop(loop: asyncio.AbstractEventLoop) -> "AsyncioBackend":
    """loop's backend (made at its first use): on the loop's thread while it runs, from any thread
    before (its thread is then the one that runs it: see AsyncioBackend.on_loop_thread)."""
    backend = _BACKENDS.get(loop)
    if backend is None:
        if loop.is_running():
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is not loop:
                raise EngineConfigError("the asyncio backend of %r must be made on the loop's own thread" % (loop,))
        backend = _BACKENDS[loop] = AsyncioBackend(loop)
    return backend


_BACKENDS: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncioBackend]" = weakref.WeakKeyDictionary()


async def run_sync(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Await the blocking call fn(*args, **kwargs), run in a task of the running loop's backend."""
    return await _drive(backend_for_running_loop(), fn, args, kwargs)


# ----------------------------------------------------------------------------- tasks and timers


class _AioTask:
    __slots__ = ("task", "backend", "on_lost")

    def __init__(self, backend: "AsyncioBackend", fn: Callable[..., Any], args: tuple) -> None:
        self.backend = backend
        self.on_lost: Callable[[], Any] | None = None  # see AsyncioBackend.when_lost
        self.task = backend.loop.create_task(_drive(backend, fn, args, {}, self),
                                             name="msgengine-%s" % getattr(fn, "__name__", "task"))

    def join(self, timeout: float | None = None) -> None:
        if self.task.done():
            return
        try:
            await_only(lambda: asyncio.wait_for(asyncio.shield(self.task), timeout))
        except (asyncio.TimeoutError, asyncio.CancelledError):
            pass
        except Exception:
            pass  # (its own failure was logged where it ended)


def _log_failure(task: "asyncio.Task[Any]") -> None:
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        logger.error("task %s raised", task.get_name(), exc_info=exc)


class _AioTimer(Timer):
    """A call_later / call_every handle: each call runs in a task of its own."""

    __slots__ = ("_backend", "_periodic", "_interval", "_fn", "_args", "_handle", "_cancelled", "_deadline",
                 "_running")

    def __init__(self, backend: "AsyncioBackend", delay: float, periodic: bool, fn: Callable[..., Any],
                 args: tuple) -> None:
        self._backend = backend
        self._periodic = periodic
        self._interval = delay
        self._fn = fn
        self._args = args
        self._handle: Any = None
        self._cancelled = False
        self._deadline: float | None = None
        self._running: Any = None
        backend.on_loop(self._schedule, delay)

    def _schedule(self, delay: float) -> None:
        if self._cancelled:
            return
        loop = self._backend.loop
        self._deadline = loop.time() + delay
        self._handle = loop.call_later(delay, self._fire)

    def _fire(self) -> None:
        self._handle = None
        self._deadline = None
        if self._cancelled:
            return
        self._running = self._backend.spawn(self._call)

    def _call(self) -> None:
        try:
            self._fn(*self._args)
        except Exception:
            logger.exception("timer call %r raised", self._fn)
        if self._periodic and not self._cancelled:
            self._schedule(self._interval)
        elif not self._periodic:
            self._fn, self._args = spent, ()

    def cancel(self) -> None:
        self._cancelled = True
        self._backend.on_loop(self._cancel_on_loop)

    def _cancel_on_loop(self) -> None:
        handle, self._handle = self._handle, None
        self._deadline = None
        if handle is not None:
            handle.cancel()

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    @property
    def deadline(self) -> float | None:
        return self._deadline

    def join(self, timeout: float | None = None) -> bool:
        running = self._running
        if running is not None:
            running.join(timeout)
        return not running or running.task.done()


# ----------------------------------------------------------------------------- primitives


def _bounded(future: "asyncio.Future[Any]", timeout: float | None) -> "asyncio.Future[Any]":
    """future, failing with asyncio.TimeoutError after timeout seconds (None: never). What
    asyncio.wait_for does, without the Task it makes per call on Pythons before 3.12."""
    if timeout is not None:
        handle = future.get_loop().call_later(max(0.0, timeout), _time_out, future)
        future.add_done_callback(lambda _done: handle.cancel())
    return future


def _time_out(future: "asyncio.Future[Any]") -> None:
    if not future.done():
        future.set_exception(asyncio.TimeoutError())


class _Event:
    """threading.Event's interface on the loop (set() from any thread goes through the door)."""

    __slots__ = ("_backend", "_flag", "_waiters")

    def __init__(self, backend: "AsyncioBackend") -> None:
        self._backend = backend
        self._flag = False
        self._waiters: list[asyncio.Future[None]] = []

    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        if self._flag:
            return
        self._backend.on_loop(self._set)

    def _set(self) -> None:
        self._flag = True
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def clear(self) -> None:
        self._flag = False

    def wait(self, timeout: float | None = None) -> bool:
        if self._flag:
            return True
        if timeout is not None and timeout <= 0:
            return False
        _task_greenlet()  # (BlockingCallError before anything is queued)
        waiter = self._backend.loop.create_future()
        self._waiters.append(waiter)
        try:
            await_only(lambda: _bounded(waiter, timeout))
        except asyncio.TimeoutError:
            return self._flag
        finally:
            if self._waiters:  # (not woken by set(), which takes the list: a timeout, a cancellation)
                try:
                    self._waiters.remove(waiter)
                except ValueError:
                    pass
        return True


class _Lock:
    """A lock of the loop's tasks, held across waits if need be (reentrant or not)."""

    __slots__ = ("_reentrant", "_owner", "_count", "_waiters")

    def __init__(self, reentrant: bool) -> None:
        self._reentrant = reentrant
        self._owner: Any = None
        self._count = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        me = greenlet.getcurrent()
        if self._owner is me and self._reentrant:
            self._count += 1
            return True
        while self._owner is not None:
            if not blocking:
                return False
            _task_greenlet()  # (BlockingCallError before anything is queued)
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await_only(lambda: _bounded(waiter, None if timeout is None or timeout < 0 else timeout))
            except asyncio.TimeoutError:
                return False
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
        self._owner = me
        self._count = 1
        return True

    def release(self) -> None:
        self._count -= 1
        if self._count == 0:
            self._owner = None
            while self._waiters:
                waiter = self._waiters.popleft()
                if not waiter.done():
                    waiter.set_result(None)
                    break

    def __enter__(self) -> "_Lock":
        self.acquire()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.release()


class _Queue:
    """queue.SimpleQueue's interface on the loop (put() from any thread goes through the door)."""

    __slots__ = ("_backend", "_items", "_getters")

    def __init__(self, backend: "AsyncioBackend") -> None:
        self._backend = backend
        self._items: collections.deque[Any] = collections.deque()
        self._getters: collections.deque[asyncio.Future[None]] = collections.deque()

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        self._backend.on_loop(self._put, item)

    put_nowait = put

    def _put(self, item: Any) -> None:
        self._items.append(item)
        self._wake_one()

    def _wake_one(self) -> None:
        while self._getters:
            getter = self._getters.popleft()
            if not getter.done():
                getter.set_result(None)
                return

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        items = self._items
        while not items:
            if not block or (timeout is not None and timeout <= 0):
                raise _queue.Empty
            _task_greenlet()  # (BlockingCallError before anything is queued)
            getter = asyncio.get_running_loop().create_future()
            self._getters.append(getter)
            try:
                await_only(lambda: _bounded(getter, timeout))
            except asyncio.TimeoutError:
                if not items:
                    raise _queue.Empty from None
            except BaseException:
                if getter.done() and not getter.cancelled() and items:
                    self._wake_one()  # (woken, then cancelled: the item goes to the next getter)
                raise
        return items.popleft()

    def get_nowait(self) -> Any:
        return self.get(False)

    def empty(self) -> bool:
        return not self._items

    def qsize(self) -> int:
        return len(self._items)


#: The longest a task reading a busy socket keeps the loop without giving it a turn (seconds).
SLICE = 0.0005


def next_turn() -> "asyncio.Future[None]":
    """An awaitable done on the loop's next turn, behind the timers already due (a ticker that
    waited for this task runs first; asyncio.sleep(0) would come back before them). For a task
    greenlet (await_only) or a coroutine that gives the loop a turn in a long stretch of work."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()
    loop.call_at(loop.time(), _settle_none, future)
    return future


def _settle_none(future: "asyncio.Future[None]") -> None:
    if not future.done():
        future.set_result(None)


class AioSocket:
    """A non-blocking socket with the blocking calls the transports use, each wait an await on
    the loop (timeouts as socket.settimeout's: None waits, 0 raises BlockingIOError)."""

    def __init__(self, sock: _socket.socket, loop: asyncio.AbstractEventLoop) -> None:
        sock.setblocking(False)
        self._sock = sock
        self._loop = loop
        self._timeout: float | None = None
        #: the readiness futures tasks wait on (woken with an error when the socket closes)
        self._waiting: list[asyncio.Future[None]] = []

    def fileno(self) -> int:
        return self._sock.fileno()

    def settimeout(self, timeout: float | None) -> None:
        self._timeout = timeout

    def gettimeout(self) -> float | None:
        return self._timeout

    def getpeername(self) -> Any:
        return self._sock.getpeername()

    def getsockname(self) -> Any:
        return self._sock.getsockname()

    def setsockopt(self, *args: Any) -> None:
        self._sock.setsockopt(*args)

    def getsockopt(self, *args: Any) -> Any:
        return self._sock.getsockopt(*args)

    def shutdown(self, how: int) -> None:
        self._sock.shutdown(how)

    def close(self) -> None:
        """Close the socket: a task waiting on it wakes with OSError (EBADF), and the loop forgets
        its descriptor first (a socket opened next may get the same number)."""
        fd = self._sock.fileno()
        if fd >= 0:
            self._loop.remove_reader(fd)
            self._loop.remove_writer(fd)
        for ready in self._waiting:
            if not ready.done():
                ready.set_exception(OSError(errno.EBADF, "the socket was closed"))
        self._waiting.clear()
        self._sock.close()

    def _wait(self, writing: bool) -> None:
        if self._timeout is not None and self._timeout <= 0:
            raise BlockingIOError("the socket is not ready")
        loop = self._loop
        fd = self._sock.fileno()
        if fd < 0:
            raise OSError(errno.EBADF, "the socket was closed")
        ready = loop.create_future()

        def wake() -> None:
            if not ready.done():
                ready.set_result(None)

        (loop.add_writer if writing else loop.add_reader)(fd, wake)
        self._waiting.append(ready)
        try:
            await_only(lambda: _bounded(ready, self._timeout))
        except asyncio.TimeoutError:
            raise _socket.timeout("timed out") from None
        finally:
            if ready in self._waiting:
                self._waiting.remove(ready)
            if self._sock.fileno() >= 0:
                (loop.remove_writer if writing else loop.remove_reader)(fd)

    def _take_turns(self) -> None:
        """A reader that always finds data never waits, and so would keep the loop for as long as
        the peer keeps sending (and the messages' handlers with it): it gives the loop its turns
        (AsyncioBackend.pause_point) before each read."""
        current = greenlet.getcurrent()
        if isinstance(current, _TaskGreenlet):
            current.backend.pause_point()

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        self._take_turns()
        while True:
            try:
                return self._sock.recv_into(buffer, nbytes, flags)
            except (BlockingIOError, InterruptedError):
                if flags & _socket.MSG_DONTWAIT:
                    raise
                self._wait(False)

    def recv(self, size: int, flags: int = 0) -> bytes:
        self._take_turns()
        while True:
            try:
                return self._sock.recv(size, flags)
            except (BlockingIOError, InterruptedError):
                self._wait(False)

    def send(self, data: Any, flags: int = 0) -> int:
        while True:
            try:
                return self._sock.send(data, flags)
            except (BlockingIOError, InterruptedError):
                self._wait(True)

    def sendall(self, data: Any, flags: int = 0) -> None:
        view = memoryview(data).cast("B")
        while view:
            sent = self.send(view, flags)
            view = view[sent:]


def _numeric(host: str, port: int) -> list | None:
    """getaddrinfo's answer for an IP address (None for a name, which the resolver must look up)."""
    for family in (_socket.AF_INET, _socket.AF_INET6):
        try:
            _socket.inet_pton(family, host)
        except (OSError, ValueError):
            continue
        return [(family, _socket.SOCK_STREAM, 0, "", (host, port))]
    return None


# ----------------------------------------------------------------------------- the backend


#: The loop this thread runs now, or None (asyncio's low-level function for loop implementations:
#: a lookup, no exception when there is none)
_get_running_loop = asyncio._get_running_loop


class AsyncioBackend(Backend):
    """The primitives of one running event loop; see the module docstring."""

    name = "asyncio"
    #: Smaller reads than the other backends': one read's messages are decoded at once by the
    #: reading task, and 16 KiB of small messages (more once decompressed) take a fraction of a
    #: millisecond, so the loop's other work waits little longer than SLICE.
    read_size = 16 * 1024
    #: Caller reads save a hand-off to the reading task only where waiting is a thread's or a
    #: greenlet's; here every wait is an await on the loop, and the reading task's read is as cheap.
    callers_may_read = False

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.turn_at = 0.0  # see pause_point
        #: The thread that last ran the loop, as seen by on_loop_thread() and runs_on() (its ident, and
        #: itself: an ident may be reused by a later thread); until the loop first runs, the one that
        #: made this backend (the one that will run it, in pynsq's programs)
        self._thread = threading.get_ident()
        self._thread_object = threading.current_thread()
        self._lost: list[_TaskGreenlet] = []  # see task_lost

    def __repr__(self) -> str:
        return "<AsyncioBackend %r>" % (self.loop,)

    def on_loop_thread(self) -> bool:
        """True on the loop's thread: the one running it now, whichever that is; while it is stopped,
        the one that ran it last (or made this backend, before its first run) until that thread has
        ended, then the caller. A loop made on one thread may be run on another (a tornado program's
        ``Thread(target=IOLoop.current().start)``), and by a third after it stopped."""
        loop = self.loop
        if _get_running_loop() is loop:
            if threading.get_ident() != self._thread:  # (recorded as it runs: another may run it next time)
                self.runs_on(threading.current_thread())
            return True
        if loop.is_running():  # on another thread
            return False
        if threading.get_ident() == self._thread:
            return True
        if not self._thread_object.is_alive():  # the thread that ran it has ended: the caller runs it now
            self.runs_on(threading.current_thread())
            return True
        return False

    def runs_on(self, thread: threading.Thread) -> None:
        """thread runs the loop (now, or next: see on_loop_thread)."""
        self._thread = thread.ident or 0
        self._thread_object = thread

    def on_loop(self, fn: Callable[..., Any], *args: Any) -> None:
        """Call fn(*args) now on the loop's thread, or through the door from another thread."""
        if self.in_backend_context() or self.on_loop_thread():
            fn(*args)
        else:
            self.loop.call_soon_threadsafe(fn, *args)

    # -- tasks ---------------------------------------------------------------------------

    def spawn(self, fn: Callable[..., Any], *args: Any) -> Task:
        if not (self.in_backend_context() or self.on_loop_thread()):
            raise HubThreadError("spawn() on the asyncio backend from another OS thread: use call_threadsafe()")
        task = _AioTask(self, fn, args)
        task.task.add_done_callback(_log_failure)
        return task

    def when_lost(self, task: Task, lost: Callable[[], Any]) -> None:
        # (a task greenlet waiting while its loop stopped cannot go on if the loop is run by another
        # thread next: greenlets never change threads; see _drive_on)
        if isinstance(task, _AioTask):
            task.on_lost = lost

    def task_lost(self, glet: _TaskGreenlet) -> None:
        """glet, suspended on the thread that ran the loop before, cannot go on here: its owner's
        when_lost() callback runs in a task of its own, on this thread; without one, the task is
        dropped and said so."""
        # Kept while its thread lives: freed, it would be killed there (GreenletExit raised where it
        # waits, running its handlers on that thread) at that thread's next greenlet call
        self._lost = [kept for kept in self._lost if kept.thread.is_alive()]
        self._lost.append(glet)
        lost = glet.owner.on_lost if glet.owner is not None else None
        if lost is not None:
            self.spawn(lost)
            return
        current = asyncio.current_task()
        logger.error("task %s cannot go on: it waited on the thread that ran %r before, and the loop now runs on "
                     "another (a task stays on the thread it started on); it is dropped. Run the loop on one "
                     "thread, or make the clients with backend='threads'",
                     current.get_name() if current is not None else "?", self.loop)

    def spawn_eager(self, fn: Callable[..., Any], *args: Any) -> None:
        if self.may_wait():
            self.spawn(fn, *args)
            return
        if not self.on_loop_thread():
            raise HubThreadError("spawn_eager() on the asyncio backend from another OS thread")
        # (the loop's own greenlet runs this: a task's coroutine, which goes on driving it, runs there too)
        glet = _TaskGreenlet(functools.partial(fn, *args), parent=greenlet.getcurrent())
        glet.backend = self
        glet.thread = threading.current_thread()
        try:
            handed = glet.switch()
        except Exception:
            logger.exception("task %s raised", getattr(fn, "__name__", fn))
            return
        if not glet.dead:
            task = self.loop.create_task(_drive_on(glet, handed), name="msgengine-%s" % getattr(fn, "__name__", "task"))
            task.add_done_callback(_log_failure)

    def sleep(self, seconds: float) -> None:
        await_only(lambda: asyncio.sleep(max(0.0, seconds)))

    def pause(self, seconds: float) -> None:
        self.sleep(seconds)

    def event(self) -> _Event:
        return _Event(self)

    def lock(self) -> _Lock:
        return _Lock(reentrant=True)

    def mutex(self) -> _Lock:
        return _Lock(reentrant=False)

    def waiter(self) -> _Event:
        return _Event(self)

    def queue(self) -> _Queue:
        return _Queue(self)

    def create_connection(self, address: tuple[str, int], timeout: float | None) -> Any:
        host, port = address
        infos = _numeric(host, port)  # (an IP address needs no resolver: no executor thread for it)
        if infos is None:
            infos = await_only(lambda: self.loop.getaddrinfo(host, port, type=_socket.SOCK_STREAM))
        last: BaseException | None = None
        for family, kind, proto, _name, sockaddr in infos:
            sock = _socket.socket(family, kind, proto)
            sock.setblocking(False)
            try:
                await_only(lambda: asyncio.wait_for(self.loop.sock_connect(sock, sockaddr), timeout))
            except asyncio.TimeoutError:
                sock.close()
                last = _socket.timeout("connect to %s:%d timed out" % (host, port))
            except OSError as exc:
                sock.close()
                last = exc
            else:
                return AioSocket(sock, self.loop)
        raise last if last is not None else OSError("no address for %s" % host)

    # -- other threads ---------------------------------------------------------------------

    def call_threadsafe(self, fn: Callable[..., Any], *args: Any) -> None:
        self.loop.call_soon_threadsafe(self.spawn, fn, *args)

    def call_and_wait(self, fn: Callable[[], Any], timeout: float | None = None) -> Any:
        if self.in_backend_context():
            return fn()
        if self.on_loop_thread():
            loop = self.loop
            if loop.is_closed():
                # Nothing runs on it any more (asyncio.run() ended, its tasks cancelled): the call
                # runs in place, and raises BlockingCallError if it would have to wait.
                return fn()
            if not loop.is_running():
                # The loop's own thread while the loop is stopped (a program between two runs of its
                # loop, or closing its clients after the last): run the loop until the call is done.
                return loop.run_until_complete(_drive(self, fn, (), {}))
            raise BlockingCallError("%r blocks: on the event loop's thread, await it (msgengine.aio.run_sync, or "
                                    "the pulsarfast.asyncio API)" % (fn,))
        future = asyncio.run_coroutine_threadsafe(_drive(self, fn, (), {}), self.loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:  # (TimeoutError itself from 3.11 on)
            future.cancel()
            raise CallTimeoutError("the event loop did not run %r within %ss" % (fn, timeout)) from None

    def in_backend_context(self) -> bool:
        # (a task greenlet of this backend runs on the thread running its loop: greenlets never
        # change threads)
        current = greenlet.getcurrent()
        return isinstance(current, _TaskGreenlet) and current.backend is self

    def may_wait(self) -> bool:
        return isinstance(greenlet.getcurrent(), _TaskGreenlet)

    def pause_point(self) -> None:
        # (turn_at: when the running task last got the loop back from an await: _drive_on)
        if self.loop.time() - self.turn_at >= SLICE and isinstance(greenlet.getcurrent(), _TaskGreenlet):
            await_only(next_turn)

    def at_turn_end(self, fn: Callable[..., Any], *args: Any) -> bool:
        self.loop.call_soon(fn, *args)
        return True

    def may_call_inline(self) -> bool:
        return self.in_backend_context() or (
            self.on_loop_thread() and (self.loop.is_running() or self.loop.is_closed()))

    def check_context(self, what: str) -> None:
        if not (self.in_backend_context() or self.on_loop_thread()):
            raise HubThreadError("%s on the asyncio backend from another OS thread" % what)

    def run_blocking(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await_only(lambda: self.loop.run_in_executor(None, functools.partial(fn, *args)))

    def current_task_id(self) -> int:
        return id(greenlet.getcurrent())

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> Timer:
        return _AioTimer(self, timer_delay(delay), False, fn, args)

    def call_every(self, interval: float, fn: Callable[..., Any], *args: Any) -> Timer:
        return _AioTimer(self, timer_delay(interval, periodic=True), True, fn, args)

