"""The timers of the threads backend: one scheduler per process, one OS thread.

This module owns the process's pending timers (a heap of ``(deadline, seq,
handle)``), the one daemon OS thread that sleeps until the earliest
deadline and runs what is due, and what becomes of both after os.fork().
``ThreadsBackend.call_later``/``call_every`` come here; gevent has timers
of its own (the hub's watchers, see ``greenlets``).

The thread starts with the first timer. It is a real OS thread and waits on
raw locks (``primitives.start_os_thread``, ``os_lock``), so gevent's monkey
patching cannot turn it into a greenlet. Callbacks run ON this thread, one
after another, in deadline order: a callback must be short, and one that
needs to block must spawn a task and return. A callback that raises is
logged and the thread goes on; a periodic timer keeps its schedule.

Fork: the child of os.fork() has no scheduler thread. The child's scheduler
(told through ``fork.on_fork_in_child``) drops the parent's timers, which
count as cancelled there, and starts a thread of its own for the first
timer the child sets.
"""
from __future__ import annotations

import functools
import heapq
import itertools
import logging
from typing import Any, Callable

from msgengine.fork import fork_generation, on_fork_in_child
from msgengine.primitives import (
    LockWaiter,
    ProcessLock,
    Timer,
    monotonic,
    os_thread_ident,
    spent,
    start_os_thread,
    timer_delay,
)

logger = logging.getLogger(__name__)

#: The heap is rebuilt without its cancelled entries when they are more than
#: this many and more than half of it.
_COMPACT_AT = 64


class TimerHandle(Timer):
    """A timer of a Scheduler. All its state changes under the scheduler's lock."""

    __slots__ = (
        "_scheduler", "_fn", "_args", "_interval", "_deadline", "_cancelled", "_running", "_done", "_joined"
    )

    def __init__(
        self, scheduler: "Scheduler", fn: Callable[..., Any], args: tuple, interval: float | None
    ) -> None:
        self._scheduler = scheduler
        self._fn = fn
        self._args = args
        self._interval = interval  # None: a one-shot timer
        self._deadline: float | None = None  # while in the heap
        self._cancelled = False
        self._running = False
        self._done = False
        self._joined: LockWaiter | None = None  # made for the first join()

    def __repr__(self) -> str:
        state = "cancelled" if self._cancelled else "done" if self._done else "running" if self._running else "pending"
        return "<TimerHandle %s %r every=%r>" % (state, self._fn, self._interval)

    def cancel(self) -> None:
        self._scheduler._cancel(self)

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    @property
    def deadline(self) -> float | None:
        return self._deadline

    def join(self, timeout: float | None = None) -> bool:
        scheduler = self._scheduler
        with scheduler._lock:
            scheduler._renew_if_forked()
            if self._done:
                return True
            if scheduler.in_scheduler_thread():
                raise RuntimeError("a timer callback waited for %r: only the scheduler thread could run it" % self)
            if self._joined is None:
                self._joined = LockWaiter()
            joined = self._joined
        if joined.wait(timeout):
            joined.set()  # pass it on to the next thread that joins
            return True
        return False

    def _finish(self) -> LockWaiter | None:
        """Mark done (scheduler lock held); the caller sets what it returns, after the lock."""
        self._done = True
        self._deadline = None
        self._fn, self._args = spent, ()  # let go of what the call referred to
        return self._joined


class Scheduler:
    """Runs timers on one daemon OS thread of its own, started with the first timer."""

    def __init__(self) -> None:
        self._lock = ProcessLock()
        self._heap: list[tuple[float, int, TimerHandle]] = []
        self._seq = itertools.count()  # ties in deadline run in the order they were set
        self._dead = 0  # cancelled entries still in the heap
        self._wakeup = LockWaiter()  # set when the earliest deadline moves closer
        self._generation = fork_generation()
        self._started = False
        self._thread_ident: int | None = None
        self._current: TimerHandle | None = None  # the handle whose callback runs
        on_fork_in_child(self)

    # -- public ------------------------------------------------------------------

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> TimerHandle:
        """Call fn(*args) on the scheduler thread once, delay seconds from now (never earlier)."""
        handle = TimerHandle(self, fn, args, None)
        self._push(handle, timer_delay(delay))
        return handle

    def call_every(self, interval: float, fn: Callable[..., Any], *args: Any) -> TimerHandle:
        """Call fn(*args) on the scheduler thread every interval seconds until
        cancelled: first interval seconds from now, then interval seconds
        after each call returned (or raised)."""
        interval = timer_delay(interval, periodic=True)
        handle = TimerHandle(self, fn, args, interval)
        self._push(handle, interval)
        return handle

    def in_scheduler_thread(self) -> bool:
        """True when called from this scheduler's thread (from inside a callback)."""
        return self._thread_ident is not None and self._thread_ident == os_thread_ident()

    def pending(self) -> int:
        """How many timers wait for their deadline (cancelled ones not counted)."""
        with self._lock:
            self._renew_if_forked()
            return len(self._heap) - self._dead

    # -- any thread ----------------------------------------------------------------

    def _push(self, handle: TimerHandle, delay: float) -> None:
        with self._lock:
            self._renew_if_forked()
            if not self._started:
                start_os_thread(functools.partial(self._run, self._generation))
                self._started = True
            earliest = self._enqueue(handle, delay)
            wakeup = self._wakeup
        if earliest and not self.in_scheduler_thread():
            wakeup.set()

    def _enqueue(self, handle: TimerHandle, delay: float) -> bool:
        """Put handle in the heap, due delay seconds from now (lock held); True if it comes first."""
        deadline = monotonic() + delay
        entry = (deadline, next(self._seq), handle)
        handle._deadline = deadline
        heapq.heappush(self._heap, entry)
        return self._heap[0] is entry

    def _cancel(self, handle: TimerHandle) -> None:
        with self._lock:
            self._renew_if_forked()
            if handle._cancelled:
                return
            handle._cancelled = True
            if handle._running or handle._done:
                return  # a running call finishes; _fire() sees the flag
            self._dead += 1  # its entry is skipped when it comes up
            if self._dead > _COMPACT_AT and 2 * self._dead > len(self._heap):
                self._heap = [entry for entry in self._heap if not entry[2]._cancelled]
                heapq.heapify(self._heap)
                self._dead = 0
            joined = handle._finish()
        if joined is not None:
            joined.set()

    def after_fork_in_child(self) -> None:
        """In a forked child (runtime's fork hook): the parent's timers and
        thread are not this process's; the next timer starts a new thread."""
        with self._lock:  # a ProcessLock: fresh in the child
            self._renew_if_forked()

    def _renew_if_forked(self) -> None:
        """Drop the parent's timers and thread if this is a forked child (lock
        held). Every entry point calls it: another object's fork hook may set
        or cancel a timer before this scheduler's own hook has run."""
        if self._generation == fork_generation():
            return
        dropped = [entry[2] for entry in self._heap]
        if self._current is not None:
            dropped.append(self._current)
        for handle in dropped:
            handle._cancelled = True
            handle._running = False
            handle._finish()  # whoever joined it was a thread of the parent
        self._heap = []
        self._dead = 0
        self._wakeup = LockWaiter()
        self._generation = fork_generation()
        self._started = False
        self._thread_ident = None
        self._current = None

    # -- the scheduler thread ----------------------------------------------------------

    def _run(self, generation: int) -> None:
        with self._lock:
            if self._generation != generation:
                return
            self._thread_ident = os_thread_ident()
        while True:
            with self._lock:
                if self._generation != generation:
                    return  # forked from a callback: this child's scheduler starts its own thread
                handle, timeout = self._next_due()
                wakeup = self._wakeup
            if handle is None:
                wakeup.wait(timeout)
            else:
                self._fire(handle, generation)

    def _next_due(self) -> tuple[TimerHandle | None, float | None]:
        """Pop the first due timer, or say how long to wait for one (lock held)."""
        heap = self._heap
        now = monotonic()
        while heap:
            deadline, _, handle = heap[0]
            if handle._cancelled:
                heapq.heappop(heap)
                self._dead -= 1
            elif deadline > now:
                return None, deadline - now
            else:
                heapq.heappop(heap)
                handle._deadline = None
                handle._running = True
                self._current = handle
                return handle, None
        return None, None

    def _fire(self, handle: TimerHandle, generation: int) -> None:
        fn = handle._fn
        try:
            fn(*handle._args)
        except BaseException:  # noqa: BLE001 - nothing a callback does may end this thread
            logger.exception("timer callback %r raised", fn)
        joined = None
        with self._lock:
            if self._generation != generation:
                return  # forked inside the callback: the child dropped this timer
            handle._running = False
            self._current = None
            if handle._interval is not None and not handle._cancelled:
                self._enqueue(handle, handle._interval)  # this thread looks at the heap next: no wake-up
            else:
                joined = handle._finish()
        if joined is not None:
            joined.set()


_scheduler = Scheduler()


def thread_scheduler() -> Scheduler:
    """The process's scheduler (the threads backend's timers)."""
    return _scheduler
