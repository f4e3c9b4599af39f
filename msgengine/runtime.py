"""The concurrency layer: spawn, sleep, Event, Lock, Queue, timers and sockets
over gevent greenlets or plain OS threads, the one door into a gevent hub
from other OS threads, and what happens to all of it after ``os.fork()``.

Nothing above this module imports gevent; it asks get_backend() for a
backend and uses its primitives.

Threads and greenlets. Under gevent only the hub's own OS thread may touch
the hub: its loop, watchers, Events, Waiters, Queues and the sockets it
owns. libev counts active watchers in a plain integer that the hub thread
changes without holding the GIL, so even gevent's
``loop.run_callback_threadsafe`` from another thread can lose an update and
drive the count negative, after which the hub stops scheduling. Every call
that may come from another OS thread therefore enters through one door: a
deque plus one hub-owned ``async_`` watcher (libev's ``ev_async_send`` is
its one thread-safe call). The hub runs what came in, each call in a
greenlet of its own. A caller that must wait for the result waits on a lock
of its own OS thread (``call_and_wait``), never on a greenlet primitive.
Methods that users may call from any thread are marked ``@from_any_thread``.
With NSQ_CHECK_HUB_THREAD=1 in the environment, every gevent primitive
handed out here checks that it is used on the hub's thread and raises
HubThreadError otherwise; the test suite runs with the switch on.

Timers. ``call_later`` and ``call_every`` return a ``Timer`` handle. On
threads every timer of the process waits on one scheduler thread
(``msgengine.scheduler``) and runs there; under gevent a timer is a libev
watcher of the hub whose call runs in a greenlet of its own. Either way a
timer's call must not block for long: what may block goes to a task.

Forking. ``fork_generation()`` counts the forks this process descends from;
objects registered with ``on_fork_in_child`` are told in the child, before
anything else runs there, so that nothing in the child uses a socket it
shares with its parent.
"""
from __future__ import annotations

import _thread
import collections
import functools
import logging
import os
import queue as _queue
import socket as _socket
import sys
import threading
import time
import weakref
from typing import Any, Callable, Protocol, TypeVar

from .errors import CallTimeoutError, EngineConfigError, HubStateError, HubThreadError

logger = logging.getLogger(__name__)

monotonic = time.monotonic

_fork_generation = 0  # forks this process descends from (see fork_generation())

BACKEND_NAMES = ("auto", "gevent", "threads")

#: Set to 1 to make every gevent primitive check that it runs on the hub's thread.
CHECK_HUB_THREAD_ENV = "NSQ_CHECK_HUB_THREAD"


def _original(module: str, name: str) -> Any:
    """``module.name`` as it was before gevent's monkey patching (if any)."""
    monkey = sys.modules.get("gevent.monkey")
    if monkey is not None:
        try:
            return monkey.get_original(module, name)
        except Exception:  # pragma: no cover - a module gevent does not know
            pass
    return getattr(sys.modules[module] if module in sys.modules else __import__(module), name)


def os_thread_ident() -> int:
    """The OS thread's id, also under monkey patching (where get_ident names a greenlet)."""
    return _original("_thread", "get_ident")()


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


def _spent(*args: Any) -> None:
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


class LockWaiter:
    """Signal between OS threads: a raw (never monkey-patched) lock taken at
    birth, released by set(). A wait() that returns True takes the lock
    again, so the signal can be set once more (the scheduler's wake-up)."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = os_lock()
        self._lock.acquire()

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
    return _original("_thread", "allocate_lock")()


def start_os_thread(fn: Callable[[], Any]) -> None:
    """Run fn on a new real OS thread (never a greenlet, whatever is monkey-patched)."""
    _original("_thread", "start_new_thread")(fn, ())


class ProcessLock:
    """A module-level mutex for OS threads that a forked child gets fresh:
    one held at fork time by a thread that does not exist in the child
    would otherwise stay held there for ever."""

    __slots__ = ("_lock", "_generation")

    def __init__(self) -> None:
        self._lock = os_lock()
        self._generation = _fork_generation

    def __enter__(self) -> "ProcessLock":
        if self._generation != _fork_generation:
            self._lock = os_lock()
            self._generation = _fork_generation
        self._lock.acquire()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._lock.release()


class _Outcome:
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


class Backend:
    """What every backend offers; subclasses fill in the primitives."""

    name = "base"
    #: Whether tasks of this backend go on running in a forked child (greenlets
    #: do, with the hub; threads other than the forking one do not).
    tasks_survive_fork = False

    def spawn(self, fn: Callable[..., Any], *args: Any) -> Task:
        raise NotImplementedError

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
            _original("time", "sleep")(seconds)

    monotonic = staticmethod(time.monotonic)


F = TypeVar("F", bound=Callable[..., Any])

#: How much longer than a call's own timeout a caller on another OS thread
#: waits for the hub to hand back the result before it gives up.
FOREIGN_THREAD_GRACE = 5.0


def from_any_thread(timeout: Callable[..., float | None] | None = None) -> Callable[[F], F]:
    """Mark a method of an object with a ``backend`` attribute as callable
    from any OS thread: outside the backend's context the call goes through
    the door and the caller waits on its own thread's lock. ``timeout(self,
    *args, **kwargs)`` bounds that wait (None: no bound)."""

    def decorate(method: F) -> F:
        @functools.wraps(method)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            backend = self.backend
            if backend.in_backend_context():
                return method(self, *args, **kwargs)
            limit = timeout(self, *args, **kwargs) if timeout is not None else None
            return backend.call_and_wait(functools.partial(method, self, *args, **kwargs), limit)

        return wrapper  # type: ignore[return-value]

    return decorate


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
        thread = threading.Thread(target=fn, args=args, daemon=True, name="msgengine-%s" % getattr(fn, "__name__", "task"))
        thread.start()
        return _ThreadTask(thread)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def event(self) -> threading.Event:
        return threading.Event()

    def lock(self) -> Any:
        return threading.RLock()

    def mutex(self) -> Any:
        return threading.Lock()

    def waiter(self) -> "LockWaiter":
        return LockWaiter()

    def queue(self) -> Any:
        return _queue.SimpleQueue()

    def create_connection(self, address: tuple[str, int], timeout: float | None) -> _socket.socket:
        return _socket.create_connection(address, timeout=timeout)

    def call_threadsafe(self, fn: Callable[..., Any], *args: Any) -> None:
        fn(*args)

    # No thread per timer: every timer of the process waits on the one
    # scheduler thread and runs there. A Timer used to be a thread of its
    # own, where a call could block; now a call that may block spawns a task
    # (see Backend.call_later).

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> Timer:
        from .scheduler import thread_scheduler

        return thread_scheduler().call_later(delay, fn, *args)

    def call_every(self, interval: float, fn: Callable[..., Any], *args: Any) -> Timer:
        from .scheduler import thread_scheduler

        return thread_scheduler().call_every(interval, fn, *args)


# -- gevent ---------------------------------------------------------------------------


def _run_logged(fn: Callable[..., Any], args: tuple) -> None:
    try:
        fn(*args)
    except Exception:
        logger.exception("call from another thread raised: %r", fn)


class _HubDoor:
    """The one way in from other OS threads: a deque of calls and one
    hub-owned async watcher. enter() may be called from any thread (a deque
    append is atomic, ev_async_send is thread-safe); the watcher's callback
    runs on the hub and starts a greenlet per call, in arrival order."""

    def __init__(self, loop: Any, spawn: Callable[..., Any]) -> None:
        self._calls: collections.deque = collections.deque()
        self._spawn = spawn
        # ref=False: an idle door must not keep the loop alive (gevent.wait()
        # would never return); a wake-up still interrupts the loop's poll.
        self._watcher = loop.async_(ref=False)
        self._watcher.start(self._run_pending)

    def enter(self, fn: Callable[..., Any], args: tuple) -> None:
        self._calls.append((fn, args))
        self._watcher.send()

    def _run_pending(self) -> None:
        calls = self._calls
        spawn = self._spawn
        while calls:
            fn, args = calls.popleft()
            spawn(_run_logged, fn, args)

    def forget_pending(self) -> None:
        """In a forked child: the calls queued before the fork were the parent's."""
        self._calls.clear()


class _GeventPrimitives:
    """The gevent classes, subclassed so that a wait that gevent would end
    with LoopExit says why, and (with the check on) so that every use
    outside the hub's thread raises HubThreadError."""

    def __init__(self, backend: "GeventBackend", checked: bool) -> None:
        import gevent.event
        import gevent.queue
        from gevent.exceptions import LoopExit

        check = backend.check_context if checked else None
        describe = backend.describe_loop_exit

        class Event(gevent.event.Event):
            __slots__ = ()

            def wait(self, timeout: float | None = None) -> bool:
                if check is not None:
                    check("Event.wait")
                try:
                    return super().wait(timeout)
                except LoopExit as exc:
                    raise describe(exc) from exc

            if checked:

                def set(self) -> None:
                    check("Event.set")
                    super().set()

                def clear(self) -> None:
                    check("Event.clear")
                    super().clear()

        class Queue(gevent.queue.Queue):
            __slots__ = ()

            def get(self, block: bool = True, timeout: float | None = None) -> Any:
                if check is not None:
                    check("Queue.get")
                try:
                    return super().get(block, timeout)
                except LoopExit as exc:
                    raise describe(exc) from exc

            if checked:

                def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
                    check("Queue.put")
                    super().put(item, block, timeout)

        self.Event = Event
        self.Queue = Queue


class _GreenletWaiter:
    """One-shot signal between greenlets of one hub, cheaper than an Event."""

    __slots__ = ("_waiter", "_is_set", "_run_callback", "_backend")

    def __init__(self, backend: "GeventBackend", hub: Any, waiter_cls: Any) -> None:
        self._waiter = waiter_cls(hub)
        self._is_set = False
        self._run_callback = hub.loop.run_callback
        self._backend = backend

    def set(self) -> None:
        if not self._is_set:
            self._backend.check_context("waiter.set")
            self._is_set = True
            self._run_callback(self._waiter.switch, None)  # Waiter.switch must run in the hub

    def wait(self) -> None:
        self._backend.check_context("waiter.wait")
        try:
            self._waiter.get()
        except self._backend.loop_exit as exc:
            raise self._backend.describe_loop_exit(exc) from exc


class _CheckedNullLock(_NullLock):
    """The gevent backend's no-op lock, checking that only the hub's thread enters."""

    __slots__ = ("_check",)

    def __init__(self, check: Callable[[str], None]) -> None:
        self._check = check

    def __enter__(self) -> "_NullLock":
        self._check("lock")
        return self

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        self._check("lock")
        return True


class _HubTimer(Timer):
    """A timer under gevent: one libev timer watcher, armed on the hub's
    thread (from another OS thread through the door). Its callback runs on
    the hub, where nothing may block, so it only starts a raw greenlet that
    makes the call; a periodic timer arms a new watcher once that call has
    returned (libev leaves a fired timer's expiry used up: started again,
    it would fire at once)."""

    __slots__ = (
        "_backend", "_fn", "_args", "_after", "_periodic", "_watcher", "_cancelled", "_running", "_done", "_joined"
    )

    def __init__(
        self, backend: "GeventBackend", after: float, periodic: bool, fn: Callable[..., Any], args: tuple
    ) -> None:
        self._backend = backend
        self._fn = fn
        self._args = args
        self._after = after
        self._periodic = periodic
        self._watcher: Any = None
        self._cancelled = False
        self._running = False  # from the watcher's callback until the call returned
        self._done = False
        self._joined: Any = None  # an Event, made for the first join()
        backend.call_threadsafe(self._arm)

    def _arm(self) -> None:  # on the hub's thread
        if self._cancelled:
            return
        self._watcher = self._backend._hub.loop.timer(self._after)
        # update=True: count the delay from now, not from the loop's last turn
        self._watcher.start(self._fire, update=True)

    def _fire(self) -> None:  # a callback of the hub: must not block
        if not self._cancelled:
            self._running = True
            self._backend._gevent.spawn_raw(self._run)

    def _run(self) -> None:  # a greenlet of its own
        try:
            if not self._cancelled:
                self._fn(*self._args)
        except Exception:
            logger.exception("timer callback %r raised", self._fn)
        finally:
            self._running = False
            if self._periodic and not self._cancelled:
                self._arm()
            else:
                self._finish()

    def _finish(self) -> None:
        self._done = True
        self._fn, self._args = _spent, ()  # let go of what the call referred to
        if self._joined is not None:
            self._joined.set()

    def _stop(self) -> None:  # on the hub's thread
        if self._watcher is not None:
            self._watcher.stop()
        if not self._running and not self._done:
            self._finish()

    def cancel(self) -> None:
        if not self._cancelled:
            self._cancelled = True  # seen at once by _fire/_run, whichever thread cancels
            self._backend.call_threadsafe(self._stop)

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    @property
    def deadline(self) -> float | None:
        watcher = self._watcher
        return watcher.at if watcher is not None and watcher.active else None

    def join(self, timeout: float | None = None) -> bool:
        self._backend.check_context("Timer.join")
        if not self._done:
            if self._joined is None:
                self._joined = self._backend.event()
            self._joined.wait(timeout)
        return self._done


class GeventBackend(Backend):
    name = "gevent"
    tasks_survive_fork = True

    def __init__(self) -> None:
        import gevent
        import gevent.socket
        from gevent.exceptions import LoopExit
        from gevent.hub import Waiter

        self._gevent = gevent
        self._waiter_cls = Waiter
        self._gsocket = gevent.socket
        self.loop_exit = LoopExit
        # After monkey.patch_all() threading.get_ident() names the greenlet, not
        # the OS thread; the original function tells the hub's thread apart.
        self._thread_ident = _original("_thread", "get_ident")
        self._hub_thread: int | None = self._thread_ident()
        self._hub = gevent.get_hub()  # the hub of the thread that runs the greenlets
        self.checked = os.environ.get(CHECK_HUB_THREAD_ENV, "") not in ("", "0")
        self._primitives = _GeventPrimitives(self, self.checked)
        self._door = _HubDoor(self._hub.loop, gevent.spawn)
        if not self.checked:
            self.check_context = Backend.check_context.__get__(self)  # type: ignore[method-assign]
        self._lock = _CheckedNullLock(self.check_context) if self.checked else _NULL_LOCK

    # -- the hub's thread --------------------------------------------------------

    def in_backend_context(self) -> bool:
        return self._thread_ident() == self._hub_thread

    def check_context(self, what: str) -> None:
        if self._thread_ident() != self._hub_thread:
            raise HubThreadError(
                "%s used from OS thread %#x, but under gevent only the hub's thread (%s) may use it; "
                "calls from other threads must enter through the backend's call_threadsafe/call_and_wait"
                % (what, self._thread_ident(), "%#x" % self._hub_thread if self._hub_thread else "gone after fork")
            )

    def call_threadsafe(self, fn: Callable[..., Any], *args: Any) -> None:
        if self._thread_ident() == self._hub_thread:
            fn(*args)
        else:
            self._door.enter(fn, args)

    def call_and_wait(self, fn: Callable[[], Any], timeout: float | None = None) -> Any:
        if self._thread_ident() == self._hub_thread:
            return fn()
        if self._hub_thread is None:
            raise HubStateError("the gevent hub's thread did not survive os.fork(); use a new client in this process")
        outcome = _Outcome()
        self._door.enter(outcome.run, (fn,))
        if not outcome.done.wait(timeout):
            raise CallTimeoutError(
                "the gevent hub (thread %#x) did not complete %r within %.1fs; is its thread blocked outside gevent?"
                % (self._hub_thread, fn, timeout)
            )
        return outcome.result()

    def hub_problem(self) -> str | None:
        loop = self._hub.loop
        if loop is None:
            return "the gevent hub's loop was destroyed"
        count = getattr(loop, "activecnt", 0)
        if count < 0:
            return (
                "libev's count of active watchers is %d: the loop was changed from an OS thread that does not own it"
                % count
            )
        return None

    def describe_loop_exit(self, exc: BaseException) -> BaseException:
        problem = self.hub_problem()
        if problem is None:
            return exc  # an ordinary LoopExit: nothing left that could wake this wait
        logger.critical("gevent hub is broken: %s", problem)
        return HubStateError("gevent hub is broken: %s (%s)" % (problem, str(exc).splitlines()[0]))

    # -- primitives ----------------------------------------------------------------

    def spawn(self, fn: Callable[..., Any], *args: Any) -> Task:
        self.check_context("spawn")
        return self._gevent.spawn(fn, *args)

    def sleep(self, seconds: float) -> None:
        self.check_context("sleep")
        try:
            self._gevent.sleep(seconds)
        except self.loop_exit as exc:
            raise self.describe_loop_exit(exc) from exc

    def event(self) -> Any:
        self.check_context("event()")  # a gevent Event binds to the hub of the thread that first waits on it
        return self._primitives.Event()

    def lock(self) -> Any:
        # Greenlets of one hub switch only where they block, and no region this
        # library guards with a lock blocks; other OS threads come in only
        # through the door. So a lock would only cost time.
        return self._lock

    def mutex(self) -> Any:
        import gevent.lock

        return gevent.lock.Semaphore(1)

    def waiter(self) -> "_GreenletWaiter":
        return _GreenletWaiter(self, self._hub, self._waiter_cls)

    def queue(self) -> Any:
        self.check_context("queue()")  # a gevent Queue binds to the hub of the thread that makes it
        return self._primitives.Queue()

    def create_connection(self, address: tuple[str, int], timeout: float | None) -> _socket.socket:
        self.check_context("create_connection")
        return self._gsocket.create_connection(address, timeout=timeout)

    def current_task_id(self) -> int:
        return id(self._gevent.getcurrent())

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> Timer:
        return _HubTimer(self, timer_delay(delay), False, fn, args)

    def call_every(self, interval: float, fn: Callable[..., Any], *args: Any) -> Timer:
        return _HubTimer(self, timer_delay(interval, periodic=True), True, fn, args)

    def run_blocking(self, fn: Callable[..., Any], *args: Any) -> Any:
        # A real OS thread, so that unpatched blocking I/O does not stall the
        # hub; its result comes back through the door, like every other call
        # from another thread.
        self.check_context("run_blocking")
        done = self.event()
        outcome = _Outcome()

        def work() -> None:
            outcome.run(functools.partial(fn, *args))
            self._door.enter(done.set, ())

        start_os_thread(work)
        while not done.wait(1.0):  # a timer keeps the loop alive meanwhile
            pass
        return outcome.result()

    def after_fork_in_child(self) -> None:
        self._door.forget_pending()
        if self._thread_ident() != self._hub_thread:
            # forked from another OS thread: the hub's thread does not exist here
            self._hub_thread = None


# -- choosing a backend ---------------------------------------------------------------

_backends: dict[str, Backend] = {}
_backends_lock = ProcessLock()


def gevent_socket_patched() -> bool:
    """True when gevent's monkey patching of `socket` is active (never imports gevent)."""
    monkey = sys.modules.get("gevent.monkey")
    return bool(monkey is not None and monkey.is_module_patched("socket"))


def get_backend(name: str | Backend = "auto") -> Backend:
    """The backend for a `backend=` argument: "auto", "gevent", "threads" or an instance."""
    if isinstance(name, Backend):
        return name
    if name not in BACKEND_NAMES:
        raise EngineConfigError("backend must be one of %s, not %r" % (", ".join(BACKEND_NAMES), name))
    if name == "auto":
        name = "gevent" if gevent_socket_patched() else "threads"
    with _backends_lock:
        backend = _backends.get(name)
        if backend is None:
            backend = GeventBackend() if name == "gevent" else ThreadsBackend()
            _backends[name] = backend
        return backend


# -- fork -----------------------------------------------------------------------------

_fork_watchers: "weakref.WeakSet[Any]" = weakref.WeakSet()


def fork_generation() -> int:
    """How many forks separate this process from the one that imported msgengine."""
    return _fork_generation


def on_fork_in_child(obj: Any) -> None:
    """Call ``obj.after_fork_in_child()`` in a child process after os.fork()
    (held weakly: a collected object is forgotten)."""
    _fork_watchers.add(obj)


def _after_fork_in_child() -> None:
    global _fork_generation
    _fork_generation += 1
    for backend in list(_backends.values()):
        backend.after_fork_in_child()
    watchers = list(_fork_watchers)
    for obj in watchers:  # first every socket goes quiet, then owners clean up
        stop_io = getattr(obj, "stop_io_after_fork", None)
        if stop_io is not None:
            stop_io()
    for obj in watchers:
        try:
            obj.after_fork_in_child()
        except Exception:  # pragma: no cover - must not break the child
            logger.exception("after-fork cleanup of %r failed", obj)


os.register_at_fork(after_in_child=_after_fork_in_child)
