# The concurrency layer: spawn, sleep, Event, Lock, Queue, timers and sockets
# over gevent greenlets or plain OS threads. Nothing above this module imports
# gevent or threading directly; it asks get_backend() for one of these.
from __future__ import annotations

import _thread
import queue as _queue
import socket as _socket
import sys
import threading
import time
from typing import Any, Callable, Protocol

from .errors import ConfigError

monotonic = time.monotonic

BACKEND_NAMES = ("auto", "gevent", "threads")


class Task(Protocol):
    def join(self, timeout: float | None = None) -> None: ...


class Timer:
    """A callback scheduled once after a delay; cancel() stops it if still pending."""

    def __init__(self, backend: "Backend", delay: float, fn: Callable[..., Any], args: tuple) -> None:
        self._cancelled = backend.event()
        self._fn = fn
        self._args = args
        self._delay = delay
        self.task = backend.spawn(self._run)

    def _run(self) -> None:
        if not self._cancelled.wait(self._delay):
            self._fn(*self._args)

    def cancel(self) -> None:
        self._cancelled.set()


class _NullLock:
    __slots__ = ()

    def __enter__(self) -> "_NullLock":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        return None

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return True

    def release(self) -> None:
        return None


_NULL_LOCK = _NullLock()


class _LockWaiter:
    """One-shot signal between OS threads: a raw lock taken at birth, released by set()."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = _thread.allocate_lock()
        self._lock.acquire()

    def set(self) -> None:
        try:
            self._lock.release()
        except RuntimeError:  # already set
            pass

    def wait(self) -> None:
        self._lock.acquire()


class _GreenletWaiter:
    """One-shot signal between greenlets of one hub, cheaper than an Event."""

    __slots__ = ("_waiter", "_is_set", "_run_callback")

    def __init__(self, hub: Any, waiter_cls: Any) -> None:
        self._waiter = waiter_cls(hub)
        self._is_set = False
        self._run_callback = hub.loop.run_callback

    def set(self) -> None:
        if not self._is_set:
            self._is_set = True
            self._run_callback(self._waiter.switch, None)  # Waiter.switch must run in the hub

    def wait(self) -> None:
        self._waiter.get()


class Backend:
    """What every backend offers; subclasses fill in the primitives."""

    name = "base"

    def spawn(self, fn: Callable[..., Any], *args: Any) -> Task:
        raise NotImplementedError

    def sleep(self, seconds: float) -> None:
        raise NotImplementedError

    def event(self) -> Any:
        raise NotImplementedError

    def lock(self) -> Any:
        raise NotImplementedError

    def waiter(self) -> Any:
        """A one-shot signal: set() once from any task of this backend, wait() blocks until then."""
        raise NotImplementedError

    def queue(self) -> Any:
        raise NotImplementedError

    def create_connection(self, address: tuple[str, int], timeout: float | None) -> _socket.socket:
        raise NotImplementedError

    def call_threadsafe(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run fn(*args) in this backend's context, when called from any OS thread."""
        raise NotImplementedError

    def in_backend_context(self) -> bool:
        """True when the caller may use this backend's primitives directly."""
        return True

    def run_blocking(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Call a function that may block in C or in unpatched I/O (HTTP lookups)."""
        return fn(*args)

    def current_task_id(self) -> int:
        """An id of the running thread or greenlet."""
        return threading.get_ident()

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> Timer:
        return Timer(self, delay, fn, args)

    monotonic = staticmethod(time.monotonic)


class _ThreadTask:
    __slots__ = ("thread",)

    def __init__(self, thread: threading.Thread) -> None:
        self.thread = thread

    def join(self, timeout: float | None = None) -> None:
        if self.thread is not threading.current_thread():
            self.thread.join(timeout)


class ThreadsBackend(Backend):
    name = "threads"

    def spawn(self, fn: Callable[..., Any], *args: Any) -> Task:
        thread = threading.Thread(target=fn, args=args, daemon=True, name="nsq-%s" % getattr(fn, "__name__", "task"))
        thread.start()
        return _ThreadTask(thread)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def event(self) -> threading.Event:
        return threading.Event()

    def lock(self) -> Any:
        return threading.RLock()

    def waiter(self) -> "_LockWaiter":
        return _LockWaiter()

    def queue(self) -> Any:
        return _queue.SimpleQueue()

    def create_connection(self, address: tuple[str, int], timeout: float | None) -> _socket.socket:
        return _socket.create_connection(address, timeout=timeout)

    def call_threadsafe(self, fn: Callable[..., Any], *args: Any) -> None:
        fn(*args)


class GeventBackend(Backend):
    name = "gevent"

    def __init__(self) -> None:
        import gevent
        import gevent.event
        import gevent.queue
        import gevent.socket

        from gevent.hub import Waiter

        self._gevent = gevent
        self._event_cls = gevent.event.Event
        self._waiter_cls = Waiter
        self._queue_cls = gevent.queue.Queue
        self._gsocket = gevent.socket
        # After monkey.patch_all() threading.get_ident() names the greenlet, not
        # the OS thread; the original function tells the hub's thread apart.
        try:
            from gevent.monkey import get_original

            self._thread_ident = get_original("_thread", "get_ident")
        except Exception:  # pragma: no cover - gevent without its monkey module
            self._thread_ident = _thread.get_ident
        self._hub_thread = self._thread_ident()
        self._hub = gevent.get_hub()  # the hub of the thread that runs the greenlets

    def spawn(self, fn: Callable[..., Any], *args: Any) -> Task:
        return self._gevent.spawn(fn, *args)

    def sleep(self, seconds: float) -> None:
        self._gevent.sleep(seconds)

    def event(self) -> Any:
        return self._event_cls()

    def lock(self) -> Any:
        # Greenlets of one hub switch only where they block, and no region this
        # library guards with a lock blocks; other OS threads reach this backend
        # only through call_threadsafe(). So a lock would only cost time.
        return _NULL_LOCK

    def waiter(self) -> "_GreenletWaiter":
        return _GreenletWaiter(self._gevent.get_hub(), self._waiter_cls)

    def queue(self) -> Any:
        return self._queue_cls()

    def create_connection(self, address: tuple[str, int], timeout: float | None) -> _socket.socket:
        return self._gsocket.create_connection(address, timeout=timeout)

    def in_backend_context(self) -> bool:
        return self._thread_ident() == self._hub_thread

    def current_task_id(self) -> int:
        return id(self._gevent.getcurrent())

    def run_blocking(self, fn: Callable[..., Any], *args: Any) -> Any:
        # A real thread, so that unpatched blocking I/O does not stall the hub.
        return self._hub.threadpool.apply(fn, args)

    def call_threadsafe(self, fn: Callable[..., Any], *args: Any) -> None:
        if self._thread_ident() == self._hub_thread:
            fn(*args)
        else:
            # get_hub() here would make a new hub for the calling thread; and the
            # callback runs in the hub greenlet, which must not block: spawn.
            self._hub.loop.run_callback_threadsafe(self._gevent.spawn, fn, *args)


_backends: dict[str, Backend] = {}
_backends_lock = threading.Lock()


def gevent_socket_patched() -> bool:
    """True when gevent's monkey patching of `socket` is active (never imports gevent)."""
    monkey = sys.modules.get("gevent.monkey")
    return bool(monkey is not None and monkey.is_module_patched("socket"))


def get_backend(name: str | Backend = "auto") -> Backend:
    """The backend for a `backend=` argument: "auto", "gevent", "threads" or an instance."""
    if isinstance(name, Backend):
        return name
    if name not in BACKEND_NAMES:
        raise ConfigError("backend must be one of %s, not %r" % (", ".join(BACKEND_NAMES), name))
    if name == "auto":
        name = "gevent" if gevent_socket_patched() else "threads"
    with _backends_lock:
        backend = _backends.get(name)
        if backend is None:
            backend = GeventBackend() if name == "gevent" else ThreadsBackend()
            _backends[name] = backend
        return backend
