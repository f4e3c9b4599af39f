"""The threads backend: a task is a daemon OS thread, the primitives are
``threading``'s, and every timer of the process runs on the one scheduler
thread (``msgengine.scheduler``)."""
from __future__ import annotations

import queue as _queue
import socket as _socket
import threading
import time
from typing import Any, Callable

from msgengine.primitives import Backend, LockWaiter, Task, Timer
from msgengine.scheduler import thread_scheduler


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

    def may_call_inline(self) -> bool:
        return True  # (every thread is in the backend's context: in_backend_context's answer, without its call)

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
        return thread_scheduler().call_later(delay, fn, *args)

    def call_every(self, interval: float, fn: Callable[..., Any], *args: Any) -> Timer:
        return thread_scheduler().call_every(interval, fn, *args)

