"""``Takes``: the awaited receives of one consumer (or reader) of ``pulsarfast.asyncio``, made so
that cancelling an ``await consumer.receive()`` loses no message.

Each take is the blocking ``Consumer.receive()`` (``Reader.read_next()``) run by
``msgengine.aio.run_sync`` in a task of its own, awaited as ``asyncio.shield`` would: a
cancellation (``asyncio.wait_for`` timing out, ``task.cancel()``) ends the await, never the
blocking call half way (after it took a message from the queue and before it returned it).
What happens to the take then:

- it had already ended with a message: the message goes back to the front of the consumer's
  queue (``Consumer.return_to_queue``), for the next receive;
- it still waits: it becomes an orphan. The next receive adopts it (awaits it) instead of starting
  a take of its own, so a program polling with ``wait_for`` keeps one waiting take, not one per
  poll; an orphan that gets its message while nobody awaits it puts the message back itself.

Everything here runs on the loop's thread (the takes' greenlets too), so a take's "orphaned"
flag is read and written without a lock.
"""
from __future__ import annotations

import asyncio
import collections
import functools
from typing import Any, Callable, Generic, TypeVar

from msgengine.aio import run_sync

T = TypeVar("T")


class _Take(Generic[T]):
    """One blocking take in its task; ``orphaned`` while nobody awaits it."""

    __slots__ = ("task", "orphaned")

    def __init__(self) -> None:
        self.task: asyncio.Future[T | None] | None = None
        self.orphaned = False


def _wake(waiter: "asyncio.Future[None]", _task: "asyncio.Future[Any]") -> None:
    if not waiter.done():
        waiter.set_result(None)


def _retrieve(task: "asyncio.Future[Any]") -> None:
    """An orphan ended: its outcome is retrieved (no "exception never retrieved" warning)."""
    if not task.cancelled():
        task.exception()


class Takes(Generic[T]):
    """The takes of one consumer: ``take`` blocks for the next item (the sync API's call),
    ``give_back`` puts an item taken back at the front of the queue."""

    def __init__(self, take: Callable[[], T], give_back: Callable[[T], None]) -> None:
        self._take = take
        self._give_back = give_back
        self._orphans: collections.deque[_Take[T]] = collections.deque()

    def _run(self, take: _Take[T]) -> T | None:
        """In the take's greenlet: the item, or None when it came to an orphan (put back)."""
        item = self._take()
        if take.orphaned:
            self._give_back(item)
            return None
        return item

    def _adopt(self) -> _Take[T] | None:
        orphans = self._orphans
        while orphans:
            take = orphans.popleft()
            assert take.task is not None
            if not take.task.done() or not take.task.cancelled():
                take.orphaned = False
                return take
        return None

    async def next(self) -> T:
        """The next item; a cancellation of this await loses none (see the module docstring)."""
        while True:
            take = self._adopt()
            if take is None:
                take = _Take()
                take.task = asyncio.ensure_future(run_sync(self._run, take))
            task = take.task
            assert task is not None
            if task.done():  # (an adopted orphan that ended)
                item = task.result()
            else:
                waiter: asyncio.Future[None] = task.get_loop().create_future()
                task.add_done_callback(functools.partial(_wake, waiter))
                try:
                    await waiter  # (a cancellation cancels this wait, not the take: a lighter asyncio.shield)
                except asyncio.CancelledError:
                    if task.done() and task.cancelled():
                        raise
                    self._cancelled(take)
                    raise
                item = task.result()
            if item is not None:
                return item
            # (an orphan that put its item back before it was adopted: take again)

    def _cancelled(self, take: _Take[T]) -> None:
        """The await of take was cancelled: its item goes back, or it becomes an orphan."""
        task = take.task
        assert task is not None
        if not task.done():
            take.orphaned = True
            self._orphans.append(take)
            task.add_done_callback(_retrieve)
        elif not task.cancelled() and task.exception() is None:
            taken = task.result()
            if taken is not None:
                self._give_back(taken)
