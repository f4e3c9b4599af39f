"""Flow control as pure logic: how much credit (messages a server may push
before it is told more) each connection gets, given a budget of in-flight
messages (``max_in_flight``), the connections, their in-flight messages,
idleness and backoff. NSQ calls the credit RDY; Pulsar calls it FLOW permits.

No I/O, no timers, no threads: every call returns the credit commands to send
as (key, count) pairs, and a backoff returns the delay the caller must wait
before calling ``end_backoff_block()``.

The counts live in one place: a ``LinkCredit`` per connection, owned by the
connection's protocol object. Each count has one writer, so that the task
that reads from the socket needs no lock: it alone adds to ``arrived``; the
tasks that answer messages add to ``answered`` (under the connection's lock);
a grant (``grant()``) sets ``credit`` and remembers ``arrived`` at that
moment. ``in_flight`` and ``remaining`` are computed from them.
``FlowControl`` reads them and decides; it only grants.
"""
from __future__ import annotations

import random
import time
from typing import Callable, Hashable

from msgengine.backoff import BackoffTimer

Action = tuple[Hashable, int]

REFRESH_RATIO = 0.25
STARVED_RATIO = 0.85

#: Seconds a connection may hold credit without a message before the periodic
#: redistribution moves it elsewhere (pynsq's ``low_rdy_idle_timeout``).
DEFAULT_LOW_RDY_IDLE_TIMEOUT: float = 10
#: The longest backoff interval, in seconds (pynsq's ``max_backoff_duration``).
DEFAULT_MAX_BACKOFF_DURATION: float = 128


class LinkCredit:
    """What the manager knows about one connection."""

    __slots__ = ("key", "credit", "arrived", "answered", "granted_at", "last_message", "max_credit")

    def __init__(self, key: Hashable, max_credit: int, now: float = 0.0) -> None:
        self.key = key
        self.credit = 0  # the last grant
        self.arrived = 0  # messages received (written by the reading task only)
        self.answered = 0  # messages answered (written under the connection's lock only)
        self.granted_at = 0  # `arrived` when the last grant was made
        self.last_message = now
        self.max_credit = max_credit

    @property
    def in_flight(self) -> int:
        """Messages received and not answered yet."""
        in_flight = self.arrived - self.answered
        return in_flight if in_flight > 0 else 0

    @property
    def remaining(self) -> int:
        """Messages the server may still push under the last grant."""
        remaining = self.credit - (self.arrived - self.granted_at)
        return remaining if remaining > 0 else 0

    def grant(self, count: int) -> None:
        """A grant of count: what arrives from now on counts against it."""
        self.credit = count
        self.granted_at = self.arrived

    def answer(self, count: int) -> None:
        """count messages were answered (never more than arrived)."""
        answered = self.answered + count
        arrived = self.arrived
        self.answered = answered if answered < arrived else arrived

    def __repr__(self) -> str:
        return "<LinkCredit %s credit=%d in_flight=%d>" % (self.key, self.credit, self.in_flight)


class FlowControl:
    """Spreads max_in_flight over connections; rotates credit when there are
    more connections than max_in_flight; runs pynsq's backoff state machine."""

    def __init__(
        self,
        max_in_flight: int,
        low_rdy_idle_timeout: float = DEFAULT_LOW_RDY_IDLE_TIMEOUT,
        max_backoff_duration: float = DEFAULT_MAX_BACKOFF_DURATION,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        self.max_in_flight = max_in_flight
        self.low_rdy_idle_timeout = low_rdy_idle_timeout
        self.backoff_timer = BackoffTimer(0, max_backoff_duration)
        self.backoff_block = False  # credit 0 everywhere until end_backoff_block()
        #: a block ended with nothing left to work off (successes during it counted): the
        #: credit-1 probe is out, and its success brings full flow back (pynsq's order)
        self.probing = False
        self.clock = clock
        self.rng = rng or random.Random()
        self.conns: dict[Hashable, LinkCredit] = {}

    # -- views --------------------------------------------------------------

    @property
    def total_credit(self) -> int:
        return sum(c.credit for c in self.conns.values())

    def in_backoff(self) -> bool:
        return self.backoff_block or self.probing or self.backoff_timer.get_interval() > 0

    def rotating(self) -> bool:
        return 0 < self.max_in_flight < len(self.conns)

    def share(self, conn: LinkCredit) -> int:
        """The credit count a connection gets in normal flow."""
        if self.max_in_flight == 0 or not self.conns:
            return 0
        return min(max(1, self.max_in_flight // len(self.conns)), conn.max_credit)

    def is_starved(self) -> bool:
        return any(c.in_flight > 0 and c.in_flight >= c.credit * STARVED_RATIO for c in self.conns.values())

    # -- helpers ------------------------------------------------------------

    def _set(self, conn: LinkCredit, count: int, actions: list[Action]) -> None:
        count = max(0, min(count, conn.max_credit))
        if count and not conn.credit:
            conn.last_message = self.clock()  # idleness counts from when credit was granted
        conn.grant(count)
        actions.append((conn.key, count))

    def _budget(self) -> int:
        return self.max_in_flight - self.total_credit

    def _all_zero(self, actions: list[Action]) -> None:
        for conn in self.conns.values():
            if conn.credit:
                self._set(conn, 0, actions)

    def _distribute(self) -> list[Action]:
        """Full redistribution for normal flow (or rotation when it applies)."""
        actions: list[Action] = []
        if self.max_in_flight == 0 or self.in_backoff():
            self._all_zero(actions)
            return actions
        if self.rotating():
            active = [c for c in self.conns.values() if c.credit > 0]
            for conn in active[self.max_in_flight :]:
                self._set(conn, 0, actions)
            for conn in active[: self.max_in_flight]:
                if conn.credit != 1:
                    self._set(conn, 1, actions)
            self._fill_idle(actions, exclude=())
            return actions
        for conn in self.conns.values():  # shrink first so the sum never passes max_in_flight
            if conn.credit > self.share(conn):
                self._set(conn, self.share(conn), actions)
        for conn in self.conns.values():
            want = min(self.share(conn), conn.credit + self._budget())
            if want > conn.credit:
                self._set(conn, want, actions)
        return actions

    def _fill_idle(self, actions: list[Action], exclude: tuple) -> None:
        """Rotation: hand free credit 1s to random connections that have none."""
        busy = sum(1 for c in self.conns.values() if c.credit > 0 or c.in_flight > 0)
        available = self.max_in_flight - busy
        if available <= 0:
            return
        candidates = [c for c in self.conns.values() if c.credit == 0 and c.in_flight == 0 and c.key not in exclude]
        if len(candidates) < available:
            candidates += [c for c in self.conns.values() if c.credit == 0 and c.in_flight == 0 and c.key in exclude]
        self.rng.shuffle(candidates)
        for conn in candidates[:available]:
            self._set(conn, 1, actions)

    # -- connections --------------------------------------------------------

    def add_conn(self, key: Hashable, max_credit: int) -> list[Action]:
        """A new connection with counts of its own (see add_link)."""
        return self.add_link(LinkCredit(key, max_credit))

    def add_link(self, conn: LinkCredit) -> list[Action]:
        """A new connection, whose counts its protocol object keeps: credit 1
        if the budget allows, and the others shrink to the new share."""
        conn.last_message = self.clock()
        self.conns[conn.key] = conn
        actions: list[Action] = []
        if self.max_in_flight == 0 or self.backoff_block:
            return actions
        if self.in_backoff():
            if self.total_credit == 0:
                self._set(conn, 1, actions)
            return actions
        if not self.rotating():
            for other in self.conns.values():
                if other.credit > self.share(other):
                    self._set(other, self.share(other), actions)
        if self._budget() >= 1:
            self._set(conn, 1, actions)
        return actions

    def remove_conn(self, key: Hashable) -> list[Action]:
        conn = self.conns.pop(key, None)
        if conn is None or self.backoff_block or self.max_in_flight == 0:
            return []
        if self.in_backoff():
            actions: list[Action] = []
            self._keep_testing(actions, exclude=())
            return actions
        return self._distribute()

    # -- message flow -------------------------------------------------------

    def on_messages(self, key: Hashable, count: int) -> list[Action]:
        """count messages arrived on a connection (its owner has counted
        them already); may grow its credit to its share."""
        conn = self.conns.get(key)
        if conn is None:
            return []
        conn.last_message = self.clock()
        actions: list[Action] = []
        if not self.in_backoff() and not self.rotating() and self.max_in_flight:
            want = min(self.share(conn), conn.credit + self._budget())
            if want > conn.credit:
                self._set(conn, want, actions)
        return actions

    def on_finished(self, key: Hashable, count: int) -> tuple[list[Action], float | None]:
        """count messages on one connection were finished together. In normal
        flow this is one credit evaluation; in backoff it counts as one result."""
        return self.on_response(key, True)

    def on_response(self, key: Hashable, success: bool | None) -> tuple[list[Action], float | None]:
        """A message on this connection was answered.

        success is True (finished), False (failed: requeued with backoff) or
        None (neutral: requeued without backoff). Returns the credit commands and,
        when a backoff block starts, its length in seconds (the caller calls
        end_backoff_block() after it).
        """
        conn = self.conns.get(key)
        actions: list[Action] = []
        delay = None
        if success and self.backoff_block:
            # A success that comes during a block counts, as pynsq counts it (a failure
            # there does not: the block is already that failure's); nothing else moves
            # until the block ends.
            self.backoff_timer.success()
        elif success is not None and not self.backoff_block:
            timer = self.backoff_timer
            if success and self.probing and timer.get_interval() == 0:
                self.probing = False
                actions.extend(self._distribute())
            elif success:
                if timer.get_interval() > 0:
                    timer.success()
                    if timer.get_interval() > 0:
                        delay = self._start_block(actions)
                    else:
                        actions.extend(self._distribute())
            else:
                timer.failure()
                delay = self._start_block(actions)
        if conn is not None and delay is None and not self.in_backoff() and self.max_in_flight and conn.key in self.conns:
            if not self.rotating():
                want = min(self.share(conn), conn.credit + self._budget())
                if want > conn.credit:
                    self._set(conn, want, actions)
                    return actions, delay
            if conn.credit > 0 and (conn.remaining == 0 or conn.remaining < conn.credit * REFRESH_RATIO):
                self._set(conn, conn.credit, actions)
        return actions, delay

    # -- backoff ------------------------------------------------------------

    def _start_block(self, actions: list[Action]) -> float:
        self.backoff_block = True
        self.probing = False
        self._all_zero(actions)
        return self.backoff_timer.get_interval()

    def end_backoff_block(self) -> list[Action]:
        """The backoff interval passed: credit 1 on one random connection to test the waters."""
        self.backoff_block = False
        actions: list[Action] = []
        self.probing = self.backoff_timer.get_interval() == 0
        if self.conns and self.max_in_flight:
            conn = self.rng.choice(list(self.conns.values()))
            self._set(conn, 1, actions)
        return actions

    # -- periodic and control -------------------------------------------------

    def _keep_testing(self, actions: list[Action], exclude: tuple) -> None:
        """In backoff (between blocks): exactly one connection tests with credit 1
        unless one already has credit or a message in flight."""
        conns = list(self.conns.values())
        if not conns or any(c.credit > 0 or c.in_flight > 0 for c in conns):
            return
        candidates = [c for c in conns if c.key not in exclude] or conns
        self._set(self.rng.choice(candidates), 1, actions)

    def _take_from_idle(self, actions: list[Action]) -> tuple:
        """credit 0 to connections idle longer than low_rdy_idle_timeout; their keys."""
        now = self.clock()
        freed = []
        for conn in self.conns.values():
            if conn.credit > 0 and now - conn.last_message > self.low_rdy_idle_timeout:
                self._set(conn, 0, actions)
                freed.append(conn.key)
        return tuple(freed)

    def redistribute(self) -> list[Action]:
        """Periodic: in rotation (and in backoff, for the testing credit 1), move
        credit away from connections idle longer than low_rdy_idle_timeout to
        others chosen at random."""
        if not self.conns or self.max_in_flight == 0 or self.backoff_block:
            return []
        actions: list[Action] = []
        if self.in_backoff():
            self._keep_testing(actions, exclude=self._take_from_idle(actions))
        elif self.rotating():
            self._fill_idle(actions, exclude=self._take_from_idle(actions))
        elif self.total_credit > self.max_in_flight or any(c.credit == 0 for c in self.conns.values()):
            actions.extend(self._distribute())
        return actions

    def set_max_in_flight(self, max_in_flight: int) -> list[Action]:
        self.max_in_flight = max_in_flight
        if max_in_flight == 0:
            actions: list[Action] = []
            self._all_zero(actions)
            return actions
        return self._distribute()
