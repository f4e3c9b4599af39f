"""``TaskGroup``: one owner's view of a backend, which counts the tasks spawned through it.

An owner (a Pulsar ``Client``) hands a ``TaskGroup`` to everything it makes instead of the
backend itself. Everything but ``spawn`` is the backend's own bound method, so a primitive costs
no call more; a task spawned through the group is known to it until it ends, so the owner can
wait for every task of its own to end (``join``): the reading tasks of its connections, and the
short ones (an acknowledgement's send, a batch's flush, a reconnection attempt) that timers and
callbacks start. Those are OS threads on the threads backend and greenlets under gevent.

``join`` never waits for the task it is called on, nor where its caller may not wait (the gevent
hub, an asyncio loop outside its tasks: ``Backend.may_wait``).
"""
from __future__ import annotations

import itertools
from typing import Any, Callable

from msgengine.fork import on_fork_in_child
from msgengine.primitives import Backend, Task, monotonic

#: the methods of a backend a group hands on as they are (every public one but spawn's and the fork hook)
_HANDED_ON = tuple(name for name, value in vars(Backend).items()
                   if callable(value) and not name.startswith("_") and name not in ("spawn", "spawn_eager", "after_fork_in_child"))


class TaskGroup(Backend):
    """A backend that is ``backend`` for everything, counting the tasks spawned through it."""

    def __init__(self, backend: Backend) -> None:
        self.inner = backend
        self.name = backend.name
        self.tasks_survive_fork = backend.tasks_survive_fork
        self.read_size = backend.read_size
        self.callers_may_read = backend.callers_may_read
        for name in _HANDED_ON:
            setattr(self, name, getattr(backend, name))
        #: key -> (the task, once spawn() returned; the id of its thread or greenlet, once it runs)
        self._running: dict[int, list[Any]] = {}
        self._keys = itertools.count()
        on_fork_in_child(self)

    def __getattr__(self, name: str) -> Any:
        # (what a backend has beyond the base class: gevent's loop_exit, asyncio's loop)
        return getattr(self.__dict__["inner"], name)

    def spawn(self, fn: Callable[..., Any], *args: Any) -> Task:
        key = next(self._keys)
        entry: list[Any] = [None, None]
        running = self._running
        current_task_id = self.inner.current_task_id
        running[key] = entry

        def run() -> None:
            entry[1] = current_task_id()
            try:
                fn(*args)
            finally:
                running.pop(key, None)

        run.__name__ = getattr(fn, "__name__", "task")  # (the thread's name: msgengine-<fn>)
        try:
            task = self.inner.spawn(run)
        except BaseException:
            running.pop(key, None)
            raise
        entry[0] = task
        return task

    def spawn_eager(self, fn: Callable[..., Any], *args: Any) -> None:
        if self.inner.name == "asyncio":  # (it runs fn here until fn first waits: not a task to count)
            self.inner.spawn_eager(fn, *args)
        else:
            self.spawn(fn, *args)

    def after_fork_in_child(self) -> None:
        """In a forked child: the threads the parent spawned are not here (greenlets are)."""
        if not self.tasks_survive_fork:
            self._running.clear()

    def running(self) -> int:
        """How many tasks spawned through the group have not ended yet."""
        return len(self._running)

    def join(self, seconds: float) -> None:
        """Wait, at most seconds in all, until every task spawned through the group (those that
        these spawn meanwhile too) has ended, but the caller's own."""
        backend = self.inner
        if not backend.may_wait():
            return
        deadline = monotonic() + seconds
        me = backend.current_task_id()
        while True:
            left = [entry for entry in list(self._running.values()) if entry[1] != me]
            remaining = deadline - monotonic()
            if not left or remaining <= 0:
                return
            for task, _task_id in left:
                if task is None:  # (spawn() under way on another thread: its task comes next round)
                    backend.sleep(0.001)
                else:
                    backend.join_task(task, max(deadline - monotonic(), 0.0))
