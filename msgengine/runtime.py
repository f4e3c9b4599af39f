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

Modules: ``primitives`` (the base every backend builds on), ``fork``,
``scheduler`` (the threads' timers), ``threads`` and ``greenlets`` (the two
backends). This module chooses a backend (``get_backend``, and the
``BackendSetting`` field of settings objects), marks methods callable from
any OS thread (``from_any_thread``), and is where the layers above import
all of it from.
"""
from __future__ import annotations

import functools
import sys
from typing import Any, Callable, TypeVar, overload

from msgengine.errors import EngineConfigError
from msgengine.fork import fork_generation, on_fork_first, on_fork_in_child
from msgengine.greenlets import CHECK_HUB_THREAD_ENV, GeventBackend
from msgengine.primitives import (
    DEFAULT_READ_SIZE,
    Backend,
    LockWaiter,
    Outcome,
    ProcessLock,
    Task,
    Timer,
    monotonic,
    original,
    os_lock,
    os_thread_ident,
    start_os_thread,
    timer_delay,
)
from msgengine.threads import ThreadsBackend

__all__ = [
    "BACKEND_NAMES", "CHECK_HUB_THREAD_ENV", "DEFAULT_READ_SIZE", "FOREIGN_THREAD_GRACE", "Backend", "BackendSetting", "GeventBackend",
    "LockWaiter", "Outcome", "ProcessLock", "Task", "ThreadsBackend", "Timer", "fork_generation", "from_any_thread",
    "get_backend", "gevent_socket_patched", "monotonic", "on_fork_in_child", "original", "os_lock",
    "os_thread_ident", "start_os_thread", "timer_delay",
]

BACKEND_NAMES = ("auto", "gevent", "threads", "asyncio")

F = TypeVar("F", bound=Callable[..., Any])

#: How much longer than a call's own timeout a caller on another OS thread
#: waits for the hub to hand back the result before it gives up.
FOREIGN_THREAD_GRACE = 5.0


def from_any_thread(timeout: Callable[..., float | None] | None = None, inline: bool = False) -> Callable[[F], F]:
    """Mark a method of an object with a ``backend`` attribute as callable
    from any OS thread: outside the backend's context the call goes through
    the door and the caller waits on its own thread's lock. ``timeout(self,
    *args, **kwargs)`` bounds that wait (None: no bound). ``inline``: the
    method never waits when called on the backend's own thread (it hands
    what would wait to a task), so a plain callback of the asyncio backend's
    running loop may call it in place (see ``Backend.may_call_inline``)."""

    def decorate(method: F) -> F:
        @functools.wraps(method)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            backend = self.backend
            if backend.in_backend_context() or (inline and backend.may_call_inline()):
                return method(self, *args, **kwargs)
            limit = timeout(self, *args, **kwargs) if timeout is not None else None
            return backend.call_and_wait(functools.partial(method, self, *args, **kwargs), limit)

        return wrapper  # type: ignore[return-value]

    return decorate



# -- choosing a backend ---------------------------------------------------------------

_backends: dict[str, Backend] = {}
_backends_lock = ProcessLock()


def gevent_socket_patched() -> bool:
    """True when gevent's monkey patching of `socket` is active (never imports gevent)."""
    monkey = sys.modules.get("gevent.monkey")
    return bool(monkey is not None and monkey.is_module_patched("socket"))


def get_backend(name: str | Backend = "auto") -> Backend:
    """The backend for a `backend=` argument: "auto", "gevent", "threads", "asyncio" (the running
    loop's: msgengine.aio) or an instance."""
    if isinstance(name, Backend):
        return name
    if name not in BACKEND_NAMES:
        raise EngineConfigError("backend must be one of %s, not %r" % (", ".join(BACKEND_NAMES), name))
    if name == "auto":
        name = "gevent" if gevent_socket_patched() else "threads"
    if name == "asyncio":  # (one per running loop: msgengine.aio, imported only here)
        from msgengine.aio import backend_for_running_loop
        return backend_for_running_loop()
    with _backends_lock:
        backend = _backends.get(name)
        if backend is None:
            backend = GeventBackend() if name == "gevent" else ThreadsBackend()
            _backends[name] = backend
            on_fork_first(backend)
        return backend


class BackendSetting:
    """A field of a settings dataclass that takes a ``backend=`` argument (a name or
    a Backend) and holds the Backend: ``backend: BackendSetting = BackendSetting()``.
    A bad name raises ``error`` (the settings' own exception type) with the engine's
    message. The field's default is "auto"."""

    default = "auto"

    def __init__(self, error: type[Exception] = EngineConfigError) -> None:
        self._error = error
        self._attribute = "_backend"

    def __set_name__(self, owner: type, name: str) -> None:
        self._attribute = "_" + name

    def requested(self, obj: object) -> str:
        """What obj's field was given as: a name ("auto", ...), or the given Backend's name."""
        return str(obj.__dict__[self._attribute + "_requested"])

    @overload
    def __get__(self, obj: None, objtype: Any = None) -> str: ...

    @overload
    def __get__(self, obj: object, objtype: Any = None) -> Backend: ...

    def __get__(self, obj: object | None, objtype: Any = None) -> str | Backend:
        if obj is None:  # the class attribute: the dataclass reads its default here
            return self.default
        backend: Backend = obj.__dict__[self._attribute]
        return backend

    def __set__(self, obj: object, value: str | Backend) -> None:
        try:
            backend = get_backend(value)
        except EngineConfigError as exc:
            if self._error is EngineConfigError:
                raise
            raise self._error(str(exc)) from exc
        obj.__dict__[self._attribute] = backend
        obj.__dict__[self._attribute + "_requested"] = value if isinstance(value, str) else backend.name
