"""Keeping connections alive: "have a connection to each of these servers".

A ``Supervisor`` owns, for one client, the set of targets it must stay
connected to and how it gets there: connect (in a short-lived task, since
connecting blocks), reconnect with jittered exponential backoff after a
failure or a close, discover more targets by polling (one poller, on the
runtime's timers), and stop all of it on close. It holds no task while a
connection is up or while it waits to retry: waiting is a timer, so a kept
connection costs nothing beyond the connection's own reader.

It knows nothing of any protocol. The client gives it ``connect(target)``,
which returns an open link (anything with ``add_close_listener(fn)`` and
``close()``) or None/raises when the attempt failed; and optionally
``discover()``, which returns targets (it may block: it runs in a task).
"""
from __future__ import annotations

import logging
import random
from typing import Any, Callable, Generic, Hashable, Iterable, TypeVar

from msgengine.backoff import reconnect_delay
from msgengine.runtime import Backend

logger = logging.getLogger(__name__)

#: what a supervisor keeps connected: an address, a (host, port, slot), a producer...
Target = TypeVar("Target", bound=Hashable)


class Supervisor(Generic[Target]):
    """Connections to targets, kept alive; see the module docstring.

    ``max_reconnect_delay`` caps the backoff after failed attempts;
    ``reconnect_after_close`` caps the (jittered) wait before reconnecting a
    connection that was up and closed (default: the same cap).
    """

    def __init__(
        self,
        backend: Backend,
        name: str,
        connect: Callable[[Target], Any],
        *,
        max_reconnect_delay: float,
        reconnect_after_close: float | None = None,
        on_lost: Callable[[Target, Any], None] | None = None,
    ) -> None:
        self.backend = backend
        self.name = name
        self._connect = connect
        self._max_delay = max_reconnect_delay
        self._after_close = reconnect_after_close if reconnect_after_close is not None else max_reconnect_delay
        self._on_lost = on_lost
        self._lock = backend.lock()
        self._kept: set[Target] = set()
        self._links: dict[Target, Any] = {}
        self._attempting: set[Target] = set()
        self._failures: dict[Target, int] = {}
        self._timers: dict[Any, Any] = {}
        self._poll_timer: Any = None
        self._closed = False
        self.last_error: BaseException | None = None

    # -- what to connect to ---------------------------------------------------

    def keep(self, target: Target, now: bool = False) -> None:
        """Stay connected to target: connect at once (in a task; with now,
        in the caller, before this returns), and again, with backoff, whenever
        the attempt fails or the connection closes."""
        with self._lock:
            if self._closed or target in self._kept:
                return
            self._kept.add(target)
        if now:
            self._attempt(target)
        else:
            self.backend.spawn(self._attempt, target)

    def try_once(self, target: Target) -> None:
        """Connect to target in the background unless it is connected or
        being connected (a discovered server: the next poll tries again)."""
        with self._lock:
            if self._closed or target in self._links or target in self._attempting:
                return
        self.backend.spawn(self._attempt, target)

    def adopt(self, target: Target, link: Any) -> None:
        """Keep target, whose link the caller opened itself (a first attempt
        whose errors the caller wanted to see): from now on it is reconnected
        like any kept target when the link closes."""
        with self._lock:
            closed = self._closed
            if not closed:
                self._kept.add(target)
                self._links[target] = link
        if closed:
            link.close()
            return
        link.add_close_listener(lambda closed_link: self._lost(target, closed_link))

    def release(self, target: Target) -> Any:
        """Stop keeping target (no more attempts); returns its open link, if
        any, for the caller to close its own way."""
        with self._lock:
            self._kept.discard(target)
            link = self._links.pop(target, None)
            timer = self._timers.pop(target, None)
        if timer is not None:
            try:
                timer.cancel()
            except Exception:  # pragma: no cover - a timer of a scheduler gone after a fork
                pass
        return link

    def connected(self, target: Target) -> bool:
        with self._lock:
            return target in self._links

    def links(self) -> list[Any]:
        with self._lock:
            return list(self._links.values())

    def targets(self) -> list[Target]:
        """Every target kept or connected."""
        with self._lock:
            return list(self._kept | set(self._links))

    # -- discovery --------------------------------------------------------------

    def poll(
        self,
        discover: Callable[[], Iterable[Target]],
        interval: float | Callable[[], float],
        *,
        jitter: float = 0.0,
        keep_found: bool = False,
    ) -> None:
        """Ask discover() now and then every interval (plus up to jitter x
        interval at random); connect to what it finds, once (``try_once``)
        or for good (``keep``). ``interval`` may be a function, asked each round."""
        self._schedule_poll(0.0, discover, interval, jitter, keep_found)

    def _schedule_poll(self, delay: float, *args: Any) -> None:
        with self._lock:
            if self._closed:
                return
            self._poll_timer = self.backend.call_later(delay, self.backend.spawn, self._poll_round, *args)

    def _poll_round(
        self, discover: Callable[[], Iterable[Target]], interval: Any, jitter: float, keep_found: bool
    ) -> None:
        if self._closed:
            return
        try:
            for target in discover():
                (self.keep if keep_found else self.try_once)(target)
        except Exception as exc:
            logger.warning("[%s] discovery failed: %s", self.name, exc)
        every = interval() if callable(interval) else interval
        self._schedule_poll(every + random.random() * jitter * every, discover, interval, jitter, keep_found)

    # -- connecting -------------------------------------------------------------

    def _attempt(self, target: Target) -> None:
        with self._lock:
            if self._closed or target in self._attempting or target in self._links:
                return
            self._attempting.add(target)
            kept = target in self._kept
        link = None
        try:
            link = self._connect(target)
        except Exception as exc:
            self.last_error = exc
            logger.warning("[%s] cannot connect to %s: %s", self.name, target, exc)
        finally:
            with self._lock:
                # the attempt ends and its link (if any) counts in one step: no second attempt in between
                self._attempting.discard(target)
                closed = self._closed or (kept and target not in self._kept)  # (closed, or released meanwhile)
                if link is not None:
                    self._failures.pop(target, None)
                    if not closed:
                        self._links[target] = link
                else:
                    failures = self._failures[target] = self._failures.get(target, 0) + 1
        if link is None:
            self._retry(target, reconnect_delay(failures, self._max_delay))
            return
        if closed:
            link.close()
            return
        link.add_close_listener(lambda closed_link: self._lost(target, closed_link))

    def _lost(self, target: Target, link: Any) -> None:
        with self._lock:
            if self._links.get(target) is not link:
                return
            del self._links[target]
            closed = self._closed
        if self._on_lost is not None:
            try:
                self._on_lost(target, link)
            except Exception:
                logger.exception("[%s] on_lost hook raised", self.name)
        if not closed:
            self._retry(target, reconnect_delay(1, self._after_close))

    def _retry(self, target: Target, delay: float) -> None:
        """A kept target is tried again after delay (on a timer, not a waiting task)."""
        with self._lock:
            if self._closed or target not in self._kept or target in self._timers:
                return
            self._timers[target] = self.backend.call_later(delay, self._retry_now, target)

    def _retry_now(self, target: Target) -> None:
        with self._lock:
            self._timers.pop(target, None)
            if self._closed:
                return
        self.backend.spawn(self._attempt, target)

    # -- closing ----------------------------------------------------------------

    def is_closed(self) -> bool:
        return self._closed

    def close(self) -> list[Any]:
        """Stop connecting and polling; returns the open links (the client closes them its own way)."""
        with self._lock:
            self._closed = True
            links = list(self._links.values())
        self._cancel_timers()
        return links

    def _cancel_timers(self) -> None:
        with self._lock:
            timers = list(self._timers.values()) + ([self._poll_timer] if self._poll_timer is not None else [])
            self._timers = {}
            self._poll_timer = None
        for timer in timers:
            try:
                timer.cancel()
            except Exception:  # after a fork: a timer of the parent's scheduler thread, already gone
                pass

    def forget_after_fork(self) -> None:
        """In a forked child: the links are the parent's; start over empty and
        closed, with the timers cancelled (gevent's survive a fork)."""
        self._lock = self.backend.lock()
        self._closed = True
        self._cancel_timers()  # (gevent's survive a fork)
        self._links = {}
        self._attempting = set()
