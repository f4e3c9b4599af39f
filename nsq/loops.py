"""Loop bridges: where clients and user code run when the program has an event loop.

pynsq calls handlers, publish callbacks and ``io_loop`` callbacks on the
program's tornado IOLoop. When a Reader or Writer is made in a program that
uses tornado (imported), runs an asyncio loop in this thread, or sets one for
it (or passes ``io_loop=``), the client gets a LoopBridge to that loop: its
connections keep running on the runtime's threads, and only user code is
called on the loop's thread. A program without a loop gets none; its
``io_loop`` and awaitable handlers use one loop the library owns, on an OS
thread of its own, started on first use.

Where the client runs. A client made while the program's loop runs on this
thread (in a coroutine or a callback), or a Reader or Writer that starts on the
loop's first turn (pynsq's ``Reader(...)`` then ``nsq.run()`` or
``IOLoop.current().start()``), or an ``AsyncConn`` connected on the loop's
thread, runs on the loop's asyncio backend (``msgengine.aio``; see
``loop_backend``): connections, timers and hooks are tasks of that loop, and no
engine thread is started, as in pynsq. Such a client is on the loop when its
``backend=`` is left "auto"; ``backend="threads"`` keeps its connections on
the engine's threads, with only user code bridged to the loop. A client used
before its loop ever runs (from another thread, say) stays on threads.

Neither tornado nor asyncio is imported here until the program has imported
it (or an awaitable handler needs the owned loop): their presence in
``sys.modules`` is how a program with a loop is told from one without. One
that another thread is still importing is waited for, never used half
initialised (see ``_imported``).

The owned loop never stops: its ``io_loop.stop()`` ends ``nsq.run()`` instead,
as stopping the loop pynsq's ``run()`` runs does (see ``OwnedIOLoop``).
"""
from __future__ import annotations

import concurrent.futures
import importlib
import inspect
import logging
import os
import sys
import weakref
from typing import TYPE_CHECKING, Any, Callable

from msgengine.runtime import Backend, ProcessLock, original, os_lock, start_os_thread

if TYPE_CHECKING:
    import asyncio

logger = logging.getLogger(__name__)

Settled = Callable[[bool, Any], None]


def is_awaitable(value: Any) -> bool:
    """What a handler may return to be awaited: a coroutine, a future, anything awaitable."""
    return inspect.isawaitable(value) or isinstance(value, concurrent.futures.Future)


class AsyncioIOLoop:
    """The tornado IOLoop methods pynsq programs call (add_callback, call_later,
    add_timeout, ...) over an asyncio loop, for programs without tornado."""

    def __init__(self, loop: "asyncio.AbstractEventLoop") -> None:
        self.asyncio_loop = loop

    def time(self) -> float:
        return self.asyncio_loop.time()

    def add_callback(self, callback: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """Run callback(*args, **kwargs) on the loop's thread soon; callable from any thread."""
        self.asyncio_loop.call_soon_threadsafe(lambda: callback(*args, **kwargs))

    spawn_callback = add_callback

    def call_later(self, delay: float, callback: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return self._on_loop(lambda: self.asyncio_loop.call_later(delay, lambda: callback(*args, **kwargs)))

    def call_at(self, when: float, callback: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return self._on_loop(lambda: self.asyncio_loop.call_at(when, lambda: callback(*args, **kwargs)))

    def add_timeout(self, deadline: Any, callback: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """deadline: a loop time (see time()) or a datetime.timedelta from now."""
        if hasattr(deadline, "total_seconds"):
            return self.call_later(deadline.total_seconds(), callback, *args, **kwargs)
        return self.call_at(deadline, callback, *args, **kwargs)

    def remove_timeout(self, timeout: Any) -> None:
        timeout.cancel()

    def add_future(self, future: Any, callback: Callable[[Any], Any]) -> None:
        import asyncio

        future = asyncio.wrap_future(future, loop=self.asyncio_loop) if isinstance(
            future, concurrent.futures.Future
        ) else future
        future.add_done_callback(lambda f: self.add_callback(callback, f))

    def run_in_executor(self, executor: Any, func: Callable[..., Any], *args: Any) -> Any:
        return self.asyncio_loop.run_in_executor(executor, func, *args)

    def start(self) -> None:
        self.asyncio_loop.run_forever()

    def stop(self) -> None:
        self.asyncio_loop.call_soon_threadsafe(self.asyncio_loop.stop)

    def _on_loop(self, schedule: Callable[[], Any]) -> Any:
        if _running_loop() is self.asyncio_loop:
            return schedule()
        handle = _Deferred()
        self.asyncio_loop.call_soon_threadsafe(lambda: handle.bind(schedule()))
        return handle


class _Deferred:
    """A timer handle for a timer scheduled from another thread (cancel() works before and after)."""

    def __init__(self) -> None:
        self._handle: Any = None
        self._cancelled = False

    def bind(self, handle: Any) -> None:
        self._handle = handle
        if self._cancelled:
            handle.cancel()

    def cancel(self) -> None:
        self._cancelled = True
        if self._handle is not None:
            self._handle.cancel()


_ready_modules: dict[str, Any] = {}  # modules _imported() has seen fully imported


def _imported(name: str) -> Any:
    """The module ``name`` if the program has imported it, else None.

    A module in ``sys.modules`` may still be half initialised: another thread
    is in the middle of importing it (or this one is, lower in its stack).
    The import system is asked for it, which waits under the module's import
    lock until the other thread's import is done; one this thread is still
    importing counts as not imported."""
    module = _ready_modules.get(name)
    if module is not None:
        return module
    if sys.modules.get(name) is None:
        return None
    try:
        module = importlib.import_module(name)
    except ImportError:  # the other thread's import failed, and so does this one
        return None
    if getattr(getattr(module, "__spec__", None), "_initializing", False):
        return None  # this very thread is importing it
    _ready_modules[name] = module
    return module


def _running_loop() -> "asyncio.AbstractEventLoop | None":
    asyncio = _imported("asyncio")
    if asyncio is None:
        return None
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class LoopBridge:
    """One asyncio loop (tornado's, or a plain one) as the place user code runs."""

    def __init__(self, loop: "asyncio.AbstractEventLoop", io_loop: Any) -> None:
        self.loop = loop
        self.io_loop = io_loop
        self.turned = False  # the loop has run at least one turn since this bridge was made
        self.call_soon(self._mark_turned)

    def _mark_turned(self) -> None:
        self.turned = True

    def in_use(self) -> bool:
        """True once the program runs its loop: from then on user code is
        called there (and waits there while the loop is stopped). Before, as in
        a program that imported tornado but never runs a loop, it is not."""
        return self.turned or self.loop.is_running()

    def __repr__(self) -> str:
        return "<nsq.LoopBridge %r>" % (self.io_loop,)

    def in_loop_thread(self) -> bool:
        """True when called from inside the running loop (so blocking here would stall it)."""
        return _running_loop() is self.loop

    def is_running(self) -> bool:
        return self.loop.is_running()

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run fn(*args) on the loop's thread; from any thread. Dropped if the loop is closed."""
        try:
            if self.in_loop_thread():  # (no wake-up of the loop's selector needed: it is running this)
                self.loop.call_soon(fn, *args)
            else:
                self.loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop is closed: nothing will run there any more
            logger.debug("loop %r is closed; dropping %r", self.loop, fn)

    def settle(self, awaitable: Any, done: Settled) -> None:
        """Await awaitable on the loop, then call done(True, result) or
        done(False, exception) on the loop's thread."""

        import asyncio

        def start() -> None:
            try:
                if isinstance(awaitable, concurrent.futures.Future):
                    future = asyncio.wrap_future(awaitable, loop=self.loop)
                else:
                    future = asyncio.ensure_future(awaitable, loop=self.loop)
            except BaseException as exc:  # noqa: BLE001 - a failed start is the handler's failure
                done(False, exc)
                return
            future.add_done_callback(lambda f: _report(f, done))

        if self.in_loop_thread():
            start()
        else:
            self.call_soon(start)

    def wrap_callback(self, callback: Callable[..., Any]) -> Callable[..., None]:
        """callback, called on the loop's thread whatever thread calls the
        wrapper; at once while the program has never run its loop (one that
        imported tornado but never runs a loop must still hear its answers)."""

        def on_loop(*args: Any) -> None:
            if self.in_loop_thread() or not self.in_use():
                callback(*args)
            else:
                self.call_soon(callback, *args)

        return on_loop

    def future(self, what: str) -> "tuple[asyncio.Future, Callable[[Any], None]]":
        """A future of this loop (call on its thread) and a function, callable
        from any thread, that resolves it: with a value, or raising an exception."""
        future = self.loop.create_future()

        def resolve_on_loop(value: Any) -> None:
            if isinstance(value, BaseException):
                logger.warning("%s failed: %s", what, value)
                if not future.done():
                    future.set_exception(value)
            elif not future.done():
                future.set_result(value)

        def resolve(value: Any) -> None:
            if self.in_loop_thread():
                resolve_on_loop(value)
            else:
                self.call_soon(resolve_on_loop, value)

        return future, resolve

    def run(self) -> None:
        """Run the loop until something stops it (the program's own start())."""
        start = getattr(self.io_loop, "start", None)
        if start is not None:
            start()
        else:  # pragma: no cover - every io_loop here has start()
            self.loop.run_forever()

    def stop(self) -> None:
        """Stop the loop; callable from any thread and from signal handlers."""
        try:
            self.loop.call_soon_threadsafe(self.loop.stop)
        except RuntimeError:
            pass


def _report(future: Any, done: Settled) -> None:
    import asyncio

    if future.cancelled():
        done(False, asyncio.CancelledError("the handler's awaitable was cancelled"))
        return
    error = future.exception()
    if error is not None:
        done(False, error)
    else:
        done(True, future.result())


# -- choosing the loop for a new client ------------------------------------------------------

_bridges: "weakref.WeakKeyDictionary[Any, LoopBridge]" = weakref.WeakKeyDictionary()
_bridges_lock = ProcessLock()


def _bridge_for(loop: "asyncio.AbstractEventLoop", io_loop: Any = None) -> LoopBridge:
    with _bridges_lock:
        bridge = _bridges.get(loop)
        if bridge is None:
            bridge = _bridges[loop] = LoopBridge(loop, io_loop if io_loop is not None else AsyncioIOLoop(loop))
        return bridge


def _loop_set_for_this_thread() -> "asyncio.AbstractEventLoop | None":
    """The asyncio loop the program set for this thread (never one made here)."""
    import asyncio

    local = getattr(asyncio.get_event_loop_policy(), "_local", None)
    loop = getattr(local, "_loop", None)
    if loop is not None and not loop.is_closed():
        return loop
    return None


def program_loop(io_loop: Any, backend: Backend) -> LoopBridge | None:
    """The loop a client made here should call user code on, or None.

    In order: an explicit ``io_loop``; tornado's ``IOLoop.current()`` when the
    program imported tornado (as pynsq does); the asyncio loop running in this
    thread, or set for it. Under the gevent backend there is none: there the
    hub is the program's loop, and handlers run on its greenlets.
    """
    if backend.name == "gevent":
        return None
    if io_loop is not None:
        import asyncio

        if isinstance(io_loop, asyncio.AbstractEventLoop):
            return _bridge_for(io_loop)
        loop = getattr(io_loop, "asyncio_loop", None)
        if loop is None:
            raise TypeError("io_loop must be a tornado IOLoop (5 or later) or an asyncio loop, not %r" % (io_loop,))
        return _bridge_for(loop, io_loop)
    tornado_ioloop = _imported("tornado.ioloop")
    if tornado_ioloop is not None:
        try:
            current = tornado_ioloop.IOLoop.current()
        except RuntimeError:  # a thread without a loop
            current = None
        if current is not None and getattr(current, "asyncio_loop", None) is not None:
            return _bridge_for(current.asyncio_loop, current)
    if _imported("asyncio") is not None:
        loop = _running_loop() or _loop_set_for_this_thread()
        if loop is not None:
            return _bridge_for(loop)
    return None


def loop_backend(config: Any, bridge: LoopBridge | None, not_running_too: bool = False) -> Backend | None:
    """The asyncio backend of the program's loop when a client with settings ``config`` is to run
    there (connections, timers and hooks all on the loop, no engine thread), else None.

    That is when its ``backend=`` was left "auto" (and gevent does not patch sockets: then the
    hub is the program's loop) and the loop found (``program_loop``) runs on this thread now; with
    ``not_running_too``, also when it is not running yet (pynsq's programs make their clients, then
    start the loop, on this thread or on another one: the backend's thread is the one running it)."""
    if bridge is None or config.backend_requested != "auto" or config.backend.name != "threads":
        return None
    loop = bridge.loop
    if not bridge.in_loop_thread() and not (not_running_too and not loop.is_running() and not loop.is_closed()):
        return None
    from msgengine.aio import backend_for_loop  # (the asyncio backend: loaded by loop programs only)

    return backend_for_loop(loop)


def stalls_loop(bridge: LoopBridge | None, backend: Backend) -> bool:
    """True when a wait here would stall the program's loop: on its thread while it runs, outside
    a task of its asyncio backend (whose waits are awaits)."""
    if bridge is None or not bridge.in_loop_thread():
        return False
    return not (backend.name == "asyncio" and backend.in_backend_context())


# -- the loop the library owns ----------------------------------------------------------------

_owned: LoopBridge | None = None
_owned_pid = 0
_owned_lock = ProcessLock()
_stop_requested = [False]  # OwnedIOLoop.stop() was called since nsq.run() last took it
_stop_lock = ProcessLock()


class OwnedIOLoop(AsyncioIOLoop):
    """``io_loop`` of the clients of a program without a loop: the library's
    own loop. It serves awaitable handlers and callbacks for the whole
    process, so ``stop()`` does not stop it: it ends ``nsq.run()``, as stopping
    the loop pynsq's ``run()`` runs does (``reader.io_loop.add_callback(
    reader.io_loop.stop)`` is pynsq's way to end ``nsq.run()``). A stop
    while nsq.run() is not running ends the next one, as an IOLoop stopped
    before it starts returns from its next ``start()``."""

    def stop(self) -> None:
        with _stop_lock:
            _stop_requested[0] = True


def take_stop_request() -> bool:
    """True once per OwnedIOLoop.stop() (any number of them before the call count as one)."""
    with _stop_lock:
        requested, _stop_requested[0] = _stop_requested[0], False
    return requested


def owned_loop() -> LoopBridge:
    """A loop on an OS thread of the library's own (made on first use; one
    per process), for io_loop callbacks and awaitable handlers in programs
    that have no loop."""
    global _owned, _owned_pid
    with _owned_lock:
        if _owned is None or _owned_pid != os.getpid():
            import asyncio

            # (under gevent's monkey patching, the loop must not wait in a gevent
            # selector: there is no hub with work on this thread)
            loop = asyncio.SelectorEventLoop(original("selectors", "DefaultSelector")())
            ready = os_lock()
            ready.acquire()

            def run() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.release)
                loop.run_forever()

            start_os_thread(run)
            ready.acquire()
            _owned = LoopBridge(loop, OwnedIOLoop(loop))
            _owned_pid = os.getpid()
        return _owned

