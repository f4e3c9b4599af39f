# Pure unit tests of nsq.rdy.RdyManager: RDY bootstrap and even distribution,
# the max_in_flight ceiling, nsqd's max_rdy_count, refresh at 25 %, rotation
# when there are more connections than max_in_flight, is_starved, pausing with
# set_max_in_flight(0), and pynsq's backoff state machine. A fake clock and a
# seeded random.Random make every run identical; no sockets, no sleeping.
from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nsq.backoff_timer import BackoffTimer
from nsq.rdy import RdyManager


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Harness:
    """A RdyManager plus a mirror of what nsqd was told: every action list the
    manager returns is replayed onto ``wire`` and checked against the invariants."""

    def __init__(self, max_in_flight: int, idle: float = 10, max_backoff: float = 128, seed: int = 1) -> None:
        self.clock = FakeClock()
        self.m = RdyManager(max_in_flight, idle, max_backoff, clock=self.clock, rng=random.Random(seed))
        self.wire: dict[str, int] = {}
        self.sent: list[tuple[str, int]] = []

    def apply(self, actions):
        for key, count in actions:
            assert key in self.m.conns, "RDY for a connection the manager does not know: %r" % (key,)
            assert isinstance(count, int) and count >= 0
            self.wire[key] = count
            self.sent.append((key, count))
        self.check()
        return actions

    def check(self) -> None:
        m = self.m
        for key in list(self.wire):
            if key not in m.conns:
                del self.wire[key]
        for key, conn in m.conns.items():
            assert self.wire.get(key, 0) == conn.rdy, "manager thinks %s has RDY %d, nsqd was told %d" % (
                key, conn.rdy, self.wire.get(key, 0))
            assert conn.rdy <= conn.max_rdy_count
        assert sum(self.wire.values()) <= max(m.max_in_flight, 0), (self.wire, m.max_in_flight)
        assert m.total_rdy == sum(self.wire.values())
        if m.backoff_block:
            assert all(v == 0 for v in self.wire.values())

    # shorthands
    def add(self, key, max_rdy_count=2500):
        return self.apply(self.m.add_conn(key, max_rdy_count))

    def remove(self, key):
        return self.apply(self.m.remove_conn(key))

    def msgs(self, key, count=1):
        link = self.m.conns.get(key)
        if link is not None:  # what the connection's protocol object counts
            link.arrived += count
        return self.apply(self.m.on_messages(key, count))

    def resp(self, key, success=True):
        link = self.m.conns.get(key)
        if link is not None:  # the FIN/REQ left: counted by the protocol object
            link.answer(1)
        actions, delay = self.m.on_response(key, success)
        self.apply(actions)
        return actions, delay

    def end_block(self):
        return self.apply(self.m.end_backoff_block())

    def redistribute(self):
        return self.apply(self.m.redistribute())

    def set_mif(self, n):
        return self.apply(self.m.set_max_in_flight(n))

    def rdy(self, key) -> int:
        return self.m.conns[key].rdy

    def rdys(self) -> dict:
        return {k: c.rdy for k, c in self.m.conns.items()}

    def grow(self, key):
        """One message in and finished: a fresh RDY-1 connection grows to its share."""
        self.msgs(key, 1)
        self.resp(key, True)


# -- bootstrap and distribution ---------------------------------------------------


def test_new_connection_starts_at_rdy_1():
    h = Harness(max_in_flight=100)
    assert h.add("a") == [("a", 1)]
    assert h.rdy("a") == 1


def test_first_connection_grows_to_max_in_flight_after_first_message():
    h = Harness(max_in_flight=100)
    h.add("a")
    assert h.msgs("a", 1) == [("a", 100)]
    assert h.rdy("a") == 100


def test_max_in_flight_is_spread_evenly_over_connections():
    h = Harness(max_in_flight=100)
    for key in "abcd":
        h.add(key)
        # a newcomer starts at 1, and nobody keeps more than the new even share
        assert h.rdy(key) == 1
        assert all(v <= 100 // len(h.m.conns) for v in h.rdys().values())
        for other in h.m.conns:
            h.grow(other)
    assert h.rdys() == {"a": 25, "b": 25, "c": 25, "d": 25}


def test_uneven_division_rounds_down_and_never_exceeds_max_in_flight():
    h = Harness(max_in_flight=10)
    for key in "abc":
        h.add(key)
    for key in "abc":
        h.grow(key)
    assert h.rdys() == {"a": 3, "b": 3, "c": 3}
    assert h.m.total_rdy == 9


def test_new_connection_gets_nothing_when_the_budget_is_spent():
    h = Harness(max_in_flight=2)
    h.add("a")
    h.add("b")
    assert h.add("c") == []
    assert h.rdy("c") == 0
    assert h.m.total_rdy == 2


def test_never_above_nsqd_max_rdy_count():
    h = Harness(max_in_flight=1000)
    h.add("small", max_rdy_count=3)
    h.grow("small")
    assert h.rdy("small") == 3
    h.add("big")
    h.grow("big")
    h.grow("small")
    assert h.rdys() == {"small": 3, "big": 500}
    assert h.set_mif(5000) and h.rdys() == {"small": 3, "big": 2500}  # 2500 is nsqd's default cap


def test_shares_shrink_before_a_newcomer_gets_rdy():
    h = Harness(max_in_flight=10)
    h.add("a")
    h.grow("a")
    assert h.rdy("a") == 10
    actions = h.add("b")
    assert actions.index(("a", 5)) < actions.index(("b", 1))  # shrink first: the sum never passes 10
    assert h.rdys() == {"a": 5, "b": 1}


def test_remove_conn_frees_budget_for_the_others():
    h = Harness(max_in_flight=10)
    for key in "ab":
        h.add(key)
    for key in "ab":
        h.grow(key)
    assert h.rdys() == {"a": 5, "b": 5}
    assert h.remove("b") == [("a", 10)]
    assert h.rdys() == {"a": 10}


def test_remove_unknown_conn_is_harmless():
    h = Harness(max_in_flight=10)
    h.add("a")
    assert h.remove("nope") == []
    assert h.m.on_messages("nope", 3) == []
    assert h.m.on_response("nope", True) == ([], None)


# -- refresh ------------------------------------------------------------------------


def test_refresh_when_remaining_hits_zero():
    h = Harness(max_in_flight=1)
    h.add("a")
    h.msgs("a", 1)
    actions, delay = h.resp("a", True)
    assert (actions, delay) == ([("a", 1)], None)


def test_refresh_when_remaining_falls_below_a_quarter():
    h = Harness(max_in_flight=100)
    h.add("a")
    h.grow("a")
    assert h.rdy("a") == 100
    h.msgs("a", 70)  # 30 left: more than 25 %
    assert h.resp("a", True) == ([], None)
    h.msgs("a", 6)  # 24 left: below 25 %
    assert h.resp("a", True) == ([("a", 100)], None)
    assert h.m.conns["a"].remaining == 100
    assert h.resp("a", True) == ([], None)  # refreshed: nothing more to send


# -- starvation ----------------------------------------------------------------------


def test_is_starved_as_the_guide_defines_it():
    h = Harness(max_in_flight=100)
    assert not h.m.is_starved()  # no connections
    h.add("a")
    h.grow("a")
    assert not h.m.is_starved()  # nothing in flight
    h.msgs("a", 84)
    assert not h.m.is_starved()  # 84 < 0.85 * 100
    h.msgs("a", 1)
    assert h.m.is_starved()  # 85 >= 85
    h.resp("a", True)
    assert not h.m.is_starved()


def test_is_starved_looks_at_every_connection():
    h = Harness(max_in_flight=20)
    h.add("a")
    h.add("b")
    h.grow("a")
    h.grow("b")
    assert h.rdys() == {"a": 10, "b": 10}
    h.msgs("b", 9)
    assert h.m.is_starved()  # b alone is starved, a has nothing in flight
    h.msgs("a", 1)
    assert h.m.is_starved()


# -- rotation (max_in_flight < connections) -------------------------------------------


def _rotating_harness(seed: int = 7) -> Harness:
    h = Harness(max_in_flight=2, idle=10, seed=seed)
    for key in "abcde":
        h.add(key)
    assert h.m.rotating()
    assert h.rdys() == {"a": 1, "b": 1, "c": 0, "d": 0, "e": 0}
    return h


def test_rotation_moves_rdy_from_idle_connections_to_random_others():
    h = _rotating_harness()
    h.clock.advance(5)
    assert h.redistribute() == []  # nobody idle yet
    h.clock.advance(6)  # a and b idle for 11 s > 10 s
    h.redistribute()
    rdys = h.rdys()
    assert rdys["a"] == rdys["b"] == 0
    assert sorted(rdys.values()) == [0, 0, 0, 1, 1]
    assert h.m.total_rdy == 2


def test_rotation_keeps_rdy_on_a_connection_that_receives_messages():
    h = _rotating_harness()
    h.clock.advance(9)
    h.msgs("a", 1)
    h.resp("a", True)
    h.clock.advance(2)  # a had a message 2 s ago, b nothing for 11 s
    h.redistribute()
    assert h.rdy("a") == 1
    assert h.rdy("b") == 0
    assert sum(h.rdys().values()) == 2


def test_rotation_counts_connections_with_messages_in_flight():
    h = _rotating_harness()
    h.msgs("a", 1)  # a's message is still being handled
    h.clock.advance(11)
    h.redistribute()
    # a loses its RDY (idle since its message) but its in-flight message keeps it busy:
    # only one other connection may get RDY 1 so that in_flight + rdy stays <= 2
    assert h.rdy("a") == 0
    assert sum(h.rdys().values()) == 1
    h.resp("a", True)
    h.clock.advance(11)
    h.redistribute()
    assert sum(h.rdys().values()) == 2


@pytest.mark.parametrize("seed", range(5))
def test_rotation_eventually_gives_every_connection_rdy(seed):
    h = Harness(max_in_flight=2, idle=10, seed=seed)
    keys = ["c%d" % i for i in range(8)]
    for key in keys:
        h.add(key)
    ever = {k for k, v in h.rdys().items() if v}
    for _ in range(100):
        h.clock.advance(11)
        h.redistribute()
        assert h.m.total_rdy == 2
        ever |= {k for k, v in h.rdys().items() if v}
        if ever == set(keys):
            break
    assert ever == set(keys)


def test_rotation_removing_a_connection_with_rdy_hands_it_to_another():
    h = _rotating_harness()
    h.remove("a")
    assert h.m.total_rdy == 2
    assert h.rdy("b") == 1


def test_leaving_rotation_gives_everyone_a_share():
    h = _rotating_harness()
    h.set_mif(10)
    assert h.rdys() == {k: 2 for k in "abcde"}


# -- pause / resume -----------------------------------------------------------------------


def test_set_max_in_flight_zero_pauses_and_n_redistributes_at_once():
    h = Harness(max_in_flight=10)
    h.add("a")
    h.add("b")
    h.grow("a")
    h.grow("b")
    actions = h.set_mif(0)
    assert sorted(actions) == [("a", 0), ("b", 0)]
    assert h.m.total_rdy == 0
    # while paused nothing grows back
    assert h.redistribute() == []
    h.clock.advance(100)
    assert h.redistribute() == []
    assert h.m.add_conn("c") == [] and h.m.remove_conn("c") == []
    actions = h.set_mif(6)
    assert sorted(actions) == [("a", 3), ("b", 3)]
    actions = h.set_mif(2)
    assert sorted(actions) == [("a", 1), ("b", 1)]


def test_set_max_in_flight_zero_while_messages_are_in_flight_does_not_refresh():
    h = Harness(max_in_flight=4)
    h.add("a")
    h.grow("a")
    h.msgs("a", 4)
    h.set_mif(0)
    for _ in range(4):
        assert h.resp("a", True) == ([], None)
    assert h.m.total_rdy == 0


# -- backoff -------------------------------------------------------------------------------


def _flowing(max_in_flight=10, keys="ab", max_backoff=128, seed=3) -> Harness:
    h = Harness(max_in_flight=max_in_flight, max_backoff=max_backoff, seed=seed)
    for key in keys:
        h.add(key)
    for key in keys:
        h.grow(key)
    return h


def test_failure_sets_rdy_zero_everywhere_and_returns_the_backoff_timer_interval():
    h = _flowing()
    h.msgs("a", 1)
    actions, delay = h.resp("a", False)
    assert sorted(actions) == [("a", 0), ("b", 0)]
    assert delay == 3.584
    expected = BackoffTimer(0, 128)
    expected.failure()
    assert delay == expected.get_interval()
    assert h.m.in_backoff() and h.m.backoff_block


def test_backoff_delay_follows_max_backoff_duration():
    h = _flowing(max_backoff=1)
    h.msgs("a", 1)
    _, delay = h.resp("a", False)
    expected = BackoffTimer(0, 1)
    expected.failure()
    assert delay == expected.get_interval() == 0.028


def test_end_backoff_block_tests_the_waters_with_rdy_1_on_exactly_one_connection():
    h = _flowing(keys="abc", max_in_flight=30)
    h.msgs("a", 1)
    h.resp("a", False)
    actions = h.end_block()
    assert len(actions) == 1 and actions[0][1] == 1
    assert sorted(h.rdys().values()) == [0, 0, 1]
    assert h.m.in_backoff() and not h.m.backoff_block


def test_rdy_1_connection_is_chosen_at_random():
    chosen = set()
    for seed in range(20):
        h = _flowing(keys="abc", max_in_flight=30, seed=seed)
        h.msgs("a", 1)
        h.resp("a", False)
        chosen.add(h.end_block()[0][0])
    assert chosen == {"a", "b", "c"}


def test_success_after_backoff_restores_full_flow():
    h = _flowing()
    h.msgs("a", 1)
    h.resp("a", False)
    (key, _), = h.end_block()
    h.msgs(key, 1)
    actions, delay = h.resp(key, True)
    assert delay is None
    assert not h.m.in_backoff()
    assert h.rdys() == {"a": 5, "b": 5}


def test_interval_shrinks_one_success_at_a_time():
    h = _flowing()
    timer = BackoffTimer(0, 128)
    # two failures, each in its own interval
    h.msgs("a", 1)
    _, delay = h.resp("a", False)
    timer.failure()
    assert delay == timer.get_interval()
    (key, _), = h.end_block()
    h.msgs(key, 1)
    _, delay = h.resp(key, False)
    timer.failure()
    assert delay == timer.get_interval() == 7.168
    # first success: interval shrinks but is not zero: another (shorter) block
    (key, _), = h.end_block()
    h.msgs(key, 1)
    actions, delay = h.resp(key, True)
    timer.success()
    assert delay == timer.get_interval() == 3.584
    assert all(v == 0 for v in h.rdys().values())
    # second success: interval 0, full distribution
    (key, _), = h.end_block()
    h.msgs(key, 1)
    actions, delay = h.resp(key, True)
    assert delay is None and not h.m.in_backoff()
    assert h.rdys() == {"a": 5, "b": 5}


def test_failures_during_a_block_are_ignored_and_successes_count_as_in_pynsq():
    h = _flowing()
    h.msgs("a", 3)
    h.msgs("b", 2)
    _, delay = h.resp("a", False)
    assert delay == 3.584
    # failures during the block: no effect on the interval, no RDY
    assert h.resp("a", False) == ([], None)
    assert h.resp("a", False) == ([], None)
    assert h.m.backoff_timer.get_interval() == 3.584
    assert h.resp("b", True) == ([], None)  # a success during the block: counted, nothing sent
    assert h.m.backoff_timer.get_interval() == 0
    assert h.resp("b", False) == ([], None)
    assert h.m.backoff_timer.get_interval() == 0
    assert h.m.total_rdy == 0
    assert all(c.in_flight == 0 for c in h.m.conns.values())  # in-flight accounting still runs
    # the block ends with nothing left to work off: pynsq's probe (credit 1 on one
    # connection), then full flow at its first success
    (key, _), = h.end_block()
    assert h.m.in_backoff() and h.m.total_rdy == 1
    h.msgs(key, 1)
    h.resp(key, True)
    assert not h.m.in_backoff() and h.m.total_rdy == 10  # (max_in_flight, over both connections)


def test_neutral_requeue_changes_no_backoff_state():
    h = _flowing()
    h.msgs("a", 1)
    actions, delay = h.resp("a", None)
    assert delay is None and not h.m.in_backoff()
    assert h.rdys() == {"a": 5, "b": 5}


def test_nothing_grows_during_backoff():
    h = _flowing()
    h.msgs("a", 2)
    h.resp("a", False)
    assert h.redistribute() == []
    assert h.msgs("b", 0) == []
    (key, _), = h.end_block()
    other = "b" if key == "a" else "a"
    h.clock.advance(1)
    # in backoff (not in a block) a message on the RDY-1 connection does not grow it
    assert h.msgs(key, 1) == []
    assert h.rdy(key) == 1 and h.rdy(other) == 0


def test_new_connection_during_backoff_gets_no_rdy_while_one_is_testing():
    h = _flowing()
    h.msgs("a", 1)
    h.resp("a", False)
    assert h.add("c") == []  # during the block
    h.end_block()
    assert h.add("d") == []  # one connection already tests with RDY 1
    assert h.m.total_rdy == 1


def test_end_backoff_block_without_connections_then_a_new_one_tests():
    h = _flowing(keys="a")
    h.msgs("a", 1)
    h.resp("a", False)
    h.remove("a")
    assert h.end_block() == []
    assert h.add("b") == [("b", 1)]


def test_backoff_recovers_when_the_testing_connection_goes_away():
    """After a block, RDY 1 sits on one connection; if that connection closes,
    another one must get it (pynsq's redistribution does this in backoff), or
    the reader stays at RDY 0 everywhere forever."""
    h = _flowing(keys="abc", max_in_flight=30)
    h.msgs("a", 1)
    h.resp("a", False)
    (key, _), = h.end_block()
    h.remove(key)
    h.clock.advance(11)
    h.redistribute()
    assert h.m.total_rdy == 1


def test_backoff_moves_the_testing_rdy_off_an_idle_connection():
    """The RDY-1 connection after a block may have no messages (another nsqd
    has them all); after low_rdy_idle_timeout it must move, as in pynsq."""
    h = _flowing(keys="abc", max_in_flight=30, seed=5)
    h.msgs("a", 1)
    h.resp("a", False)
    (key, _), = h.end_block()
    seen = {key}
    for _ in range(50):
        h.clock.advance(11)
        h.redistribute()
        assert h.m.total_rdy <= 1
        seen |= {k for k, v in h.rdys().items() if v}
    assert seen == {"a", "b", "c"}


# -- invariants under arbitrary event sequences ---------------------------------------------

KEYS = ["k%d" % i for i in range(6)]

op = st.one_of(
    st.tuples(st.just("add"), st.sampled_from(KEYS), st.sampled_from([2500, 2500, 1, 3, 7])),
    st.tuples(st.just("remove"), st.sampled_from(KEYS)),
    st.tuples(st.just("msgs"), st.sampled_from(KEYS), st.integers(1, 50)),
    st.tuples(st.just("resp"), st.sampled_from(KEYS), st.sampled_from([True, True, True, False, None])),
    st.tuples(st.just("tick"), st.sampled_from([0.5, 3, 11])),
    st.tuples(st.just("end_block")),
    st.tuples(st.just("mif"), st.integers(0, 20)),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mif=st.integers(1, 20), ops=st.lists(op, max_size=80), seed=st.integers(0, 2**16))
def test_invariants_hold_for_any_sequence(mif, ops, seed):
    """RDY never exceeds max_in_flight in total or max_rdy_count per connection,
    the actions mirror the manager's state, and a block means RDY 0 everywhere."""
    h = Harness(max_in_flight=mif, idle=10, max_backoff=4, seed=seed)
    block_pending = False
    for item in ops:
        kind = item[0]
        if kind == "add":
            if item[1] not in h.m.conns:
                h.add(item[1], item[2])
        elif kind == "remove":
            h.remove(item[1])
        elif kind == "msgs":
            conn = h.m.conns.get(item[1])
            # nsqd 1.x pushes while in_flight < RDY
            if conn is not None and conn.rdy > conn.in_flight:
                h.msgs(item[1], min(item[2], conn.rdy - conn.in_flight))
        elif kind == "resp":
            conn = h.m.conns.get(item[1])
            if conn is not None and conn.in_flight:
                _, delay = h.resp(item[1], item[2])
                if delay is not None:
                    assert delay > 0 and h.m.backoff_block
                    block_pending = True
        elif kind == "tick":
            h.clock.advance(item[1])
            h.redistribute()
        elif kind == "end_block":
            if block_pending:
                h.end_block()
                block_pending = False
        elif kind == "mif":
            h.set_mif(item[1])
        h.check()
        # spread evenly: outside backoff and rotation no connection holds more than its share
        m = h.m
        if not m.in_backoff() and not m.rotating() and m.max_in_flight:
            for conn in m.conns.values():
                assert conn.rdy <= m.share(conn)
