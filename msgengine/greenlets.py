"""The gevent backend: tasks are greenlets of one hub, the primitives are
gevent's (checked against use from other OS threads with
NSQ_CHECK_HUB_THREAD=1), timers are the hub's libev watchers, and the one
door into the hub from other OS threads. gevent is imported when this
backend is made, never before. See ``msgengine.runtime`` for the rules of
threads and greenlets.
"""
from __future__ import annotations

import collections
import functools
import logging
import os
import socket as _socket
from typing import Any, Callable

from msgengine.errors import CallTimeoutError, HubStateError, HubThreadError
from msgengine.primitives import (
    NULL_LOCK,
    Backend,
    NullLock,
    Outcome,
    Task,
    Timer,
    original,
    spent,
    start_os_thread,
    timer_delay,
)

logger = logging.getLogger(__name__)

#: Set to 1 to make every gevent primitive check that it runs on the hub's thread.
CHECK_HUB_THREAD_ENV = "NSQ_CHECK_HUB_THREAD"


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

        check_context = backend.check_context
        check: Callable[[str], None] | None = check_context if checked else None
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
                    check_context("Event.set")
                    super().set()

                def clear(self) -> None:
                    check_context("Event.clear")
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
                    check_context("Queue.put")
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


class _UncheckedGreenletWaiter(_GreenletWaiter):
    """The waiter when the hub-thread checks are off: the same, without their calls
    (a blocking publish makes one and goes through both of its methods)."""

    __slots__ = ()

    def set(self) -> None:
        if not self._is_set:
            self._is_set = True
            self._run_callback(self._waiter.switch, None)  # Waiter.switch must run in the hub

    def wait(self) -> None:
        try:
            self._waiter.get()
        except self._backend.loop_exit as exc:
            raise self._backend.describe_loop_exit(exc) from exc


class _CheckedNullLock(NullLock):
    """The gevent backend's no-op lock, checking that only the hub's thread enters."""

    __slots__ = ("_check",)

    def __init__(self, check: Callable[[str], None]) -> None:
        self._check = check

    def __enter__(self) -> "NullLock":
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
        self._fn, self._args = spent, ()  # let go of what the call referred to
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
        self._thread_ident = original("_thread", "get_ident")
        self._hub_thread: int | None = self._thread_ident()
        self._hub = gevent.get_hub()  # the hub of the thread that runs the greenlets
        self.checked = os.environ.get(CHECK_HUB_THREAD_ENV, "") not in ("", "0")
        self._primitives = _GeventPrimitives(self, self.checked)
        self._door = _HubDoor(self._hub.loop, gevent.spawn)
        if not self.checked:
            self.check_context = Backend.check_context.__get__(self)  # type: ignore[method-assign]
        # waiter(): a new one-shot, made without a call of this class's in between (one per blocking publish)
        self._waiter_type = _GreenletWaiter if self.checked else _UncheckedGreenletWaiter
        self.waiter = functools.partial(self._waiter_type, self, self._hub, self._waiter_cls)  # type: ignore[method-assign]
        self._lock = _CheckedNullLock(self.check_context) if self.checked else NULL_LOCK

    # -- the hub's thread --------------------------------------------------------

    def in_backend_context(self) -> bool:
        return self._thread_ident() == self._hub_thread

    # (the same test, without in_backend_context()'s call from the base's: every acknowledge() asks)
    may_call_inline = in_backend_context

    def may_wait(self) -> bool:
        # (a greenlet of the hub's thread; never the hub itself, where a wait would stop the loop)
        return self._thread_ident() == self._hub_thread and self._gevent.getcurrent() is not self._hub

    def join_task(self, task: Task, timeout: float) -> None:
        if task is not self._gevent.getcurrent() and self.may_wait():
            task.join(timeout)

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
        outcome = Outcome()
        self._door.enter(outcome.run, (fn,))
        if not outcome.done.wait(timeout):
            raise CallTimeoutError(
                "the gevent hub (thread %#x) did not complete %r within %ss; is its thread blocked outside gevent?"
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

    def waiter(self) -> "_GreenletWaiter":  # (__init__ puts the same call, made cheaper, in its place)
        return self._waiter_type(self, self._hub, self._waiter_cls)

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
        outcome = Outcome()

        def work() -> None:
            outcome.run(functools.partial(fn, *args))
            self._door.enter(done.set, ())

        start_os_thread(work)
        while not done.wait(1.0):  # a timer keeps the loop alive meanwhile
            pass
        return outcome.result()

    def after_fork_in_child(self) -> None:
        from gevent import monkey

        if not monkey.is_module_patched("os"):
            # os.fork() was the plain one, which does not tell gevent: its loop and thread pool (the
            # resolver's) are the parent's until reinit (the patched fork calls it itself)
            self._gevent.reinit()
        self._door.forget_pending()
        if self._thread_ident() != self._hub_thread:
            # forked from another OS thread: the hub's thread does not exist here
            self._hub_thread = None
