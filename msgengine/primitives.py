"""The backend-neutral base of the concurrency layer: what a backend offers
(``Backend``, ``Task``, ``Timer``) and the few primitives every backend and the
threads' scheduler build on, all made from the original (never monkey-patched)
``_thread`` functions: ``os_lock``, ``LockWaiter``, ``ProcessLock`` (a mutex a
forked child gets fresh), ``start_os_thread``, ``Outcome`` (a call's result
handed between OS threads). It imports no backend; ``msgengine.runtime``
chooses one.
"""
from __future__ import annotations

import _thread
import socket as _socket
import sys
import threading
import time
from typing import Any, Callable, Protocol

from msgengine import fork
from msgengine.errors import EngineConfigError

monotonic = time.monotonic


def original(module: str, name: str) -> Any:
    """``module.name`` as it was before gevent's monkey patching (if any)."""
    monkey = sys.modules.get("gevent.monkey")
    if monkey is not None:
        try:
            return monkey.get_original(module, name)
        except Exception:  # pragma: no cover - a module gevent does not know
            pass
    return getattr(sys.modules[module] if module in sys.modules else __import__(module), name)


#: the original _thread.allocate_lock, once os_lock() found it (a builtin: patching never replaces it)
_allocate_lock: Any = None


def os_thread_ident() -> int:
    """The OS thread's id, also under monkey patching (where get_ident names a greenlet)."""
    return original("_thread", "get_ident")()


class Task(Protocol):
    def join(self, timeout: float | None = None) -> None: ...


class Timer:
    """A handle on a callback that ``Backend.call_later`` or ``Backend.call_every``
    scheduled. ``cancel()`` may be called from any OS thread, any number of
    times: a pending call never starts, a periodic timer is not scheduled
    again, a call already running finishes. ``join()`` waits until nothing
    more will run."""

    __slots__ = ()

    def cancel(self) -> None:
        raise NotImplementedError

    @property
    def cancelled(self) -> bool:
        """True once cancel() was called."""
        raise NotImplementedError

    @property
    def deadline(self) -> float | None:
        """When the next call is due (``monotonic()`` time), or None while none is pending."""
        raise NotImplementedError

    def join(self, timeout: float | None = None) -> bool:
        """Wait until the timer has run its last call (a one-shot has run, or a
        cancelled timer's running call has finished); False if timeout came first."""
        raise NotImplementedError

    @property
    def task(self) -> "Timer":
        """The handle itself: a Timer used to be a task of its own, and
        ``timer.task.join()`` still works."""
        return self


def spent(*args: Any) -> None:
    """What a timer that will not run again holds instead of its callback."""


def timer_delay(seconds: float, periodic: bool = False) -> float:
    """A timer's delay as a float: a negative delay means now; NaN is refused,
    and so is an interval of a periodic timer that is not above zero."""
    seconds = float(seconds)
    if seconds != seconds:
        raise EngineConfigError("a timer's delay must be a number of seconds, not NaN")
    if periodic and seconds <= 0:
        raise EngineConfigError("a periodic timer's interval must be above 0 seconds, not %r" % seconds)
    return max(seconds, 0.0)


class NullLock:
    __slots__ = ()

    def __enter__(self) -> "NullLock":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        return None

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return True

    def release(self) -> None:
        return None


NULL_LOCK = NullLock()


def lock_or_none(lock: Any) -> Any:
    """lock, or None when it does nothing (a ``NullLock``: gevent's, its checks off), for a hot
    path that tests ``if lock is not None`` instead of paying ``with``'s two calls for nothing."""
    return None if type(lock) is NullLock else lock


class LockWaiter:
    """Signal between OS threads: a raw (never monkey-patched) lock taken at
    birth, released by set(). A wait() that returns True takes the lock
    again, so the signal can be set once more (the scheduler's wake-up)."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = lock = (_allocate_lock or os_lock)()
        lock.acquire()

    def set(self) -> None:
        try:
            self._lock.release()
        except RuntimeError:  # already set
            pass

    def wait(self, timeout: float | None = None) -> bool:
        if timeout is None:
            return self._lock.acquire()
        return self._lock.acquire(True, min(max(timeout, 0.0), _thread.TIMEOUT_MAX))


def os_lock() -> Any:
    """A plain mutex for OS threads, never a monkey-patched (greenlet) one."""
    global _allocate_lock
    allocate = _allocate_lock
    if allocate is None:
        allocate = original("_thread", "allocate_lock")
        if type(allocate) is type(_thread.get_ident):  # (the builtin, not a patch: it stays the original)
            _allocate_lock = allocate
    return allocate()


def start_os_thread(fn: Callable[[], Any]) -> None:
    """Run fn on a new real OS thread (never a greenlet, whatever is monkey-patched)."""
    original("_thread", "start_new_thread")(fn, ())


class ProcessLock:
    """A module-level mutex for OS threads that a forked child gets fresh:
    one held at fork time by a thread that does not exist in the child
    would otherwise stay held there for ever."""

    __slots__ = ("_lock", "_generation")

    def __init__(self) -> None:
        self._lock = os_lock()
        self._generation = fork.generation

    def __enter__(self) -> "ProcessLock":
        if self._generation != fork.generation:
            self._lock = os_lock()
            self._generation = fork.generation
        self._lock.acquire()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._lock.release()


class Outcome:
    """The result of a call made on another task, handed to the OS thread that waits for it."""

    __slots__ = ("done", "value", "error")

    def __init__(self) -> None:
        self.done = LockWaiter()
        self.value: Any = None
        self.error: BaseException | None = None

    def run(self, fn: Callable[[], Any]) -> None:
        try:
            self.value = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            self.error = exc
        finally:
            self.done.set()

    def result(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


#: Bytes a connection asks its socket for per read, unless configured (see Backend.read_size).
DEFAULT_READ_SIZE = 256 * 1024


class Backend:
    """What every backend offers; subclasses fill in the primitives."""

    name = "base"
    #: Whether tasks of this backend go on running in a forked child (greenlets
    #: do, with the hub; threads other than the forking one do not).
    tasks_survive_fork = False
    #: Bytes per socket read when a connection is not told otherwise: what one read brings is
    #: decoded and handled before the next read.
    read_size = DEFAULT_READ_SIZE
    #: Whether a caller waiting for an answer may read the stream itself (Driver.enable_caller_reads):
    #: it saves a hand-off between OS threads or greenlets where the wait would be one anyway.
    callers_may_read = True

    def spawn(self, fn: Callable[..., Any], *args: Any) -> Task:
        raise NotImplementedError

    def when_lost(self, task: Task, lost: Callable[[], Any]) -> None:
        """Call lost() in a task of its own if task (one spawn() returned) can never go on: on the
        asyncio backend, a task that waited while its loop stopped, the loop then run by another
        OS thread (a task's greenlet stays on the thread it started on). Elsewhere, never."""

    def sleep(self, seconds: float) -> None:
        raise NotImplementedError

    def event(self) -> Any:
        raise NotImplementedError

    def lock(self) -> Any:
        raise NotImplementedError

    def mutex(self) -> Any:
        """A lock that may be held across a call that blocks (a write that waits for the
        socket, a sleep): other tasks wait for it, greenlets cooperatively. Not reentrant."""
        raise NotImplementedError

    def waiter(self) -> Any:
        """A one-shot signal: set() once from any task of this backend, wait() blocks until then."""
        raise NotImplementedError

    def queue(self) -> Any:
        raise NotImplementedError

    def create_connection(self, address: tuple[str, int], timeout: float | None) -> _socket.socket:
        raise NotImplementedError

    def call_threadsafe(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run fn(*args) in this backend's context, from any OS thread; does not wait."""
        raise NotImplementedError

    def call_and_wait(self, fn: Callable[[], Any], timeout: float | None = None) -> Any:
        """Run fn() in this backend's context and return its result (or raise
        its exception), from any OS thread. A caller outside the context waits
        on a lock of its own thread, at most timeout seconds (CallTimeoutError)."""
        return fn()

    def in_backend_context(self) -> bool:
        """True when the caller may use this backend's primitives directly."""
        return True

    def may_wait(self) -> bool:
        """True when the caller may wait here (block on a primitive, a socket): everywhere but on
        the asyncio backend's loop outside its tasks, where a wait would freeze the loop."""
        return True

    def join_task(self, task: Task, timeout: float) -> None:
        """Wait, at most timeout seconds, for task (one spawn() returned) to end: at once where
        the caller may not wait (may_wait) or is that task itself (an owner closing from one of
        its own tasks: a callback, a finalizer that ran there)."""
        if self.may_wait():
            task.join(timeout)

    def pause_point(self) -> None:
        """A long stretch of work may let the backend's other work run here: on the asyncio
        backend, a task that has kept the loop for SLICE seconds gives it a turn (elsewhere,
        where tasks are preempted or the work is the hub's to share, nothing)."""

    def spawn_eager(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run fn(*args) as a task that starts at once, in place: on the asyncio backend it runs
        here until it first waits and goes on as a task of the loop from there (for a caller that
        may not wait: see may_wait); elsewhere a task like spawn()'s."""
        self.spawn(fn, *args)

    def at_turn_end(self, fn: Callable[..., Any], *args: Any) -> bool:
        """Call fn(*args), which must not block, once the callbacks ready now have run (on the
        backend's thread; from it only). False, and nothing scheduled, on a backend without such
        turns (threads, gevent here)."""
        return False

    def may_call_inline(self) -> bool:
        """True when a call that never waits may run right here (``from_any_thread(inline=True)``):
        in the backend's context, or on the asyncio backend's running loop outside its tasks."""
        return self.in_backend_context()

    def check_context(self, what: str) -> None:
        """Raise HubThreadError when the checks are on and the caller is outside the context."""

    def hub_problem(self) -> str | None:
        """What is wrong with the event loop under this backend, or None."""
        return None

    def run_blocking(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Call a function that may block in C or in unpatched I/O (HTTP lookups)."""
        return fn(*args)

    def current_task_id(self) -> int:
        """An id of the running thread or greenlet."""
        return threading.get_ident()

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> Timer:
        """Call fn(*args) once, delay seconds from now (never earlier); from any
        OS thread. fn must be short: on the threads backend it runs on the
        process's one scheduler thread (msgengine.scheduler), where a call
        that blocks holds up every other timer; under gevent it runs in a
        greenlet of its own. Work that may block belongs in a task of its
        own: ``call_later(delay, backend.spawn, fn, *args)``. A call that
        raises is logged."""
        raise NotImplementedError

    def call_every(self, interval: float, fn: Callable[..., Any], *args: Any) -> Timer:
        """Call fn(*args) every interval seconds until the handle is cancelled,
        the first time interval seconds from now and each next one interval
        seconds after the previous call returned. A call that raises is
        logged and the calls go on. fn runs where call_later's would."""
        raise NotImplementedError

    def after_fork_in_child(self) -> None:
        """Called in a forked child before any client hears of the fork."""

    def pause(self, seconds: float) -> None:
        """Sleep in the way that suits the calling thread, holding no lock: a
        KeyboardInterrupt or a signal handler arriving meanwhile cannot leave
        a lock held (which a wait on an Event could)."""
        if self.in_backend_context():
            self.sleep(seconds)
        else:
            original("time", "sleep")(seconds)

    monotonic = staticmethod(time.monotonic)
