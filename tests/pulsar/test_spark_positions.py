# pulsarfast.spark.positions without a server or pyspark: a partition's ledger
# list read from the broker's internalStats (the current ledger counted by
# currentLedgerEntries, empty ledgers left out), counting and walking entries
# across ledgers (count_after, advance, before, first, last) from positions
# inside a ledger, at its ends, before the oldest stored ledger (trimmed) and
# from BEFORE_FIRST, lost_after, the offsets' JSON form and its errors, and
# property tests of advance / count_after, slices, spread and sizes_for.
from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pulsarfast.spark.positions import (
    BEFORE_FIRST,
    Ledgers,
    Position,
    dumps,
    offsets_from_json,
    offsets_to_json,
    ordered,
    parse_position,
    sizes_for,
    slices,
    spread,
)

pytestmark = pytest.mark.timeout(60)

SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])

P = Position

# Ledger 3: 5 entries (closed), 4: empty (closed), 7: 2 entries (closed), 9: the current ledger, 3 entries.
STATS = {
    "currentLedgerEntries": 3,
    "ledgers": [
        {"ledgerId": 3, "entries": 5, "size": 500, "offloaded": False},
        {"ledgerId": 4, "entries": 0, "size": 0, "offloaded": False},
        {"ledgerId": 7, "entries": 2, "size": 200, "offloaded": False},
        {"ledgerId": 9, "entries": 0, "size": 0, "offloaded": False},
    ],
}
L = Ledgers.from_internal_stats(STATS)
EMPTY = Ledgers((), ())
STORED = [P(3, e) for e in range(5)] + [P(7, 0), P(7, 1)] + [P(9, e) for e in range(3)]
TRIMMED = P(1, 4)  # a ledger older than the oldest one still stored


# -- from_internal_stats ---------------------------------------------------------------------------


def test_from_internal_stats_counts_current_ledger_by_current_ledger_entries_and_drops_empty_ones():
    assert L == Ledgers((3, 7, 9), (5, 2, 3))
    assert L.total == 10


def test_from_internal_stats_current_ledger_without_entries_is_dropped():
    stats = {"currentLedgerEntries": 0, "ledgers": [{"ledgerId": 5, "entries": 4}, {"ledgerId": 6, "entries": 0}]}
    assert Ledgers.from_internal_stats(stats) == Ledgers((5,), (4,))


def test_from_internal_stats_current_ledger_entries_counts_only_the_last_ledger():
    stats = {"currentLedgerEntries": 8, "ledgers": [{"ledgerId": 5, "entries": 0}, {"ledgerId": 6, "entries": 0}]}
    assert Ledgers.from_internal_stats(stats) == Ledgers((6,), (8,))


def test_from_internal_stats_of_a_partition_without_ledgers_is_empty():
    assert Ledgers.from_internal_stats({}) == EMPTY
    assert Ledgers.from_internal_stats({"ledgers": [], "currentLedgerEntries": 0}) == EMPTY
    assert EMPTY.total == 0


# -- first / last ----------------------------------------------------------------------------------


def test_first_and_last_are_the_oldest_and_newest_stored_entries():
    assert L.first() == P(3, 0)
    assert L.last() == P(9, 2)


def test_first_and_last_of_an_empty_partition():
    assert EMPTY.first() is None
    assert EMPTY.last() == BEFORE_FIRST


# -- count_after -----------------------------------------------------------------------------------


@pytest.mark.parametrize("start, end, expected", [
    (BEFORE_FIRST, None, 10),
    (BEFORE_FIRST, P(3, 0), 1),
    (BEFORE_FIRST, P(3, 4), 5),  # the end of the first ledger
    (BEFORE_FIRST, P(9, 2), 10),
    (P(3, 0), P(3, 4), 4),  # inside one ledger
    (P(3, 2), P(7, 1), 4),  # across the empty ledger 4
    (P(3, 4), P(7, 0), 1),  # the last of a ledger to the first of the next
    (P(7, 1), P(9, 0), 1),
    (P(3, 0), None, 9),
    (P(9, 2), None, 0),  # at the last entry
    (P(9, 2), P(9, 2), 0),
    (P(7, 1), P(3, 0), 0),  # start after end
    (TRIMMED, None, 10),  # before the oldest stored ledger: every stored entry follows
    (TRIMMED, P(7, 0), 6),
    (P(4, 0), P(9, 0), 3),  # the empty ledger 4: after ledger 3's entries
])
def test_count_after(start, end, expected):
    assert L.count_after(start, end) == expected


def test_count_after_of_an_empty_partition_is_zero():
    assert EMPTY.count_after(BEFORE_FIRST) == 0
    assert EMPTY.count_after(BEFORE_FIRST, BEFORE_FIRST) == 0


# -- advance ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("start, n, expected", [
    (BEFORE_FIRST, 1, P(3, 0)),
    (BEFORE_FIRST, 5, P(3, 4)),  # the end of the first ledger
    (BEFORE_FIRST, 6, P(7, 0)),  # the next ledger's first
    (BEFORE_FIRST, 10, P(9, 2)),
    (BEFORE_FIRST, 11, P(9, 2)),  # fewer follow: the last
    (P(3, 1), 2, P(3, 3)),  # inside a ledger
    (P(3, 4), 1, P(7, 0)),  # over the empty ledger 4
    (P(7, 1), 1, P(9, 0)),
    (P(3, 0), 1000, P(9, 2)),
    (P(9, 2), 1, P(9, 2)),  # at the last entry
    (TRIMMED, 1, P(3, 0)),  # from before the oldest stored ledger
    (TRIMMED, 7, P(7, 1)),
    (TRIMMED, 8, P(9, 0)),
    (P(7, 0), 0, P(7, 0)),
    (TRIMMED, 0, TRIMMED),
    (BEFORE_FIRST, 0, BEFORE_FIRST),
])
def test_advance(start, n, expected):
    assert L.advance(start, n) == expected


def test_advance_in_an_empty_partition_stays_before_first():
    assert EMPTY.advance(BEFORE_FIRST, 3) == BEFORE_FIRST


# -- before ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("position, expected", [
    (P(3, 0), BEFORE_FIRST),  # the first stored entry
    (P(3, 3), P(3, 2)),  # inside a ledger
    (P(3, 4), P(3, 3)),
    (P(7, 0), P(3, 4)),  # a ledger's first: the previous ledger's last (over the empty ledger 4)
    (P(9, 0), P(7, 1)),
    (P(9, 2), P(9, 1)),  # the last
    (BEFORE_FIRST, BEFORE_FIRST),
    (TRIMMED, BEFORE_FIRST),  # before the oldest stored ledger
    (P(4, 0), P(3, 4)),  # the empty ledger: after ledger 3
])
def test_before(position, expected):
    assert L.before(position) == expected


def test_before_in_an_empty_partition_is_before_first():
    assert EMPTY.before(P(5, 0)) == BEFORE_FIRST


# -- lost_after ------------------------------------------------------------------------------------


@pytest.mark.parametrize("start, expected", [
    (BEFORE_FIRST, False),  # reading from the beginning loses nothing
    (P(3, 0), False),
    (P(3, 4), False),
    (P(7, 1), False),
    (P(9, 2), False),
    (TRIMMED, True),  # its ledger is older than the oldest stored one
    (P(2, 0), True),
])
def test_lost_after(start, expected):
    assert L.lost_after(start) is expected


def test_lost_after_in_an_empty_partition_is_false():
    assert EMPTY.lost_after(P(3, 4)) is False


# -- the offsets' JSON form ------------------------------------------------------------------------

OFFSETS = {"persistent://public/default/t-partition-1": P(7, 1),
           "persistent://public/default/t-partition-0": BEFORE_FIRST,
           "persistent://public/default/u": P(123456789012, 0)}


def test_offsets_json_round_trip():
    text = json.dumps(offsets_to_json(OFFSETS))
    assert offsets_from_json(json.loads(text)) == OFFSETS
    assert offsets_from_json(json.loads(dumps(OFFSETS))) == OFFSETS


def test_offsets_to_json_lists_partitions_in_name_order_as_pairs_of_ints():
    value = offsets_to_json(OFFSETS)
    assert list(value) == sorted(OFFSETS)
    assert value["persistent://public/default/t-partition-0"] == [-1, -1]
    assert dumps(OFFSETS) == json.dumps(value, sort_keys=True)


def test_offsets_from_json_gives_positions():
    result = offsets_from_json({"a": [1, 2]})
    assert result == {"a": P(1, 2)}
    assert type(result["a"]) is Position


def test_offsets_from_json_of_nothing_is_empty():
    assert offsets_from_json({}) == {}


@pytest.mark.parametrize("pair", [[1], [1, 2, 3], "1:2", 5, None, [1.0, 2], ["1", "2"], [1, None], {"l": 1}])
def test_offsets_from_json_refuses_malformed_pairs(pair):
    with pytest.raises(ValueError, match="is not \\[ledgerId, entryId\\]"):
        offsets_from_json({"t": pair})


@given(st.dictionaries(st.text(min_size=1, max_size=20),
                       st.tuples(st.integers(-1, 2**63 - 1), st.integers(-1, 2**63 - 1)).map(lambda t: P(*t)),
                       max_size=10))
@SETTINGS
def test_offsets_json_round_trip_property(offsets):
    assert offsets_from_json(json.loads(dumps(offsets))) == offsets


def test_parse_position_reads_the_stats_form():
    assert parse_position("12:34") == P(12, 34)
    assert str(P(12, 34)) == "12:34"
    with pytest.raises(ValueError):
        parse_position("12")


# -- ordered / sizes_for ---------------------------------------------------------------------------


def test_ordered_sorts_partitions_by_index_not_by_text():
    names = ["t-partition-10", "u", "t-partition-2", "t-partition-0"]
    assert ordered(names) == ["t-partition-0", "t-partition-2", "t-partition-10", "u"]


def test_sizes_for_gives_the_extra_slices_to_the_largest_ranges():
    assert sizes_for([("a", 300), ("b", 100), ("c", 0)], 6) == {"a": 4, "b": 2}
    assert sizes_for([("a", 300), ("b", 100)], 1) == {"a": 1, "b": 1}  # at least one each


@given(st.lists(st.tuples(st.text(min_size=1, max_size=5), st.integers(0, 10**6)), max_size=8,
                unique_by=lambda item: item[0]),
       st.integers(0, 64))
@SETTINGS
def test_sizes_for_property(items, pieces):
    result = sizes_for(items, pieces)
    wanted = [name for name, n in items if n > 0]
    assert sorted(result) == sorted(wanted)
    assert all(count >= 1 for count in result.values())
    assert sum(result.values()) <= max(pieces, len(wanted))


# -- property tests --------------------------------------------------------------------------------


@st.composite
def partitions(draw):
    """A partition: 1 to 5 stored ledgers (increasing ids, 1 to 12 entries each), and its stored
    positions in order."""
    ids = sorted(draw(st.sets(st.integers(0, 2**40), min_size=1, max_size=5)))
    counts = draw(st.lists(st.integers(1, 12), min_size=len(ids), max_size=len(ids)))
    ledgers = Ledgers(tuple(ids), tuple(counts))
    stored = [P(ledger, entry) for ledger, count in zip(ids, counts) for entry in range(count)]
    return ledgers, stored


@st.composite
def partition_and_range(draw):
    """A partition and a range (start, end] of it: start BEFORE_FIRST or a stored entry, end a
    stored entry after start."""
    ledgers, stored = draw(partitions())
    points = [BEFORE_FIRST] + stored
    i = draw(st.integers(0, len(points) - 2))
    j = draw(st.integers(i + 1, len(points) - 1))
    return ledgers, stored, points[i], points[j]


@given(partition_and_range())
@SETTINGS
def test_advance_by_count_after_reaches_end(case):
    ledgers, stored, start, end = case
    assert ledgers.advance(start, ledgers.count_after(start, end)) == end


@given(partitions())
@SETTINGS
def test_count_after_before_first_is_the_rank_and_before_inverts_advance(case):
    ledgers, stored = case
    for rank, position in enumerate(stored, 1):
        assert ledgers.count_after(BEFORE_FIRST, position) == rank
        assert ledgers.advance(BEFORE_FIRST, rank) == position
        assert ledgers.before(position) == (stored[rank - 2] if rank > 1 else BEFORE_FIRST)
    assert ledgers.count_after(BEFORE_FIRST) == ledgers.total == len(stored)
    assert ledgers.last() == stored[-1]


@given(partition_and_range(), st.integers(1, 50))
@SETTINGS
def test_count_after_over_consecutive_slices_sums_to_the_whole(case, pieces):
    ledgers, stored, start, end = case
    cut = slices(ledgers, start, end, pieces)
    whole = ledgers.count_after(start, end)
    assert sum(ledgers.count_after(low, high) for low, high in cut) == whole
    assert 1 <= len(cut) <= pieces
    assert cut[0][0] == start and cut[-1][1] == end
    assert all(a[1] == b[0] for a, b in zip(cut, cut[1:]))  # consecutive
    sizes = [ledgers.count_after(low, high) for low, high in cut]
    assert min(sizes) >= 1 and max(sizes) - min(sizes) <= 1  # about as many entries each


def test_slices_of_an_empty_range_is_empty():
    assert slices(L, P(9, 2), P(9, 2), 4) == []
    assert slices(L, P(7, 0), P(3, 0), 4) == []


BACKLOGS = st.dictionaries(st.text(min_size=1, max_size=6),
                           st.one_of(st.integers(0, 50), st.integers(0, 10**6), st.integers(0, 10**15)),
                           max_size=10)
LIMITS = st.one_of(st.integers(0, 100), st.integers(0, 10**7), st.integers(0, 10**16))


@given(LIMITS, BACKLOGS)
@SETTINGS
def test_spread_never_exceeds_a_backlog_and_sums_to_min_of_limit_and_total(limit, backlogs):
    shares = spread(limit, backlogs)
    assert set(shares) == set(backlogs)
    for name, share in shares.items():
        assert 0 <= share <= backlogs[name]
    assert sum(shares.values()) == min(limit, sum(backlogs.values()))


@given(LIMITS, BACKLOGS, st.randoms(use_true_random=False))
@SETTINGS
def test_spread_is_deterministic(limit, backlogs, rnd):
    shares = spread(limit, backlogs)
    assert spread(limit, dict(backlogs)) == shares
    items = list(backlogs.items())
    rnd.shuffle(items)
    assert spread(limit, dict(items)) == shares  # (whatever the order the partitions come in)


def test_spread_shares_by_backlog_and_gives_what_one_cannot_use_to_the_others():
    assert spread(10, {"a": 30, "b": 10}) == {"a": 8, "b": 2}  # 7.5 / 2.5: the tie goes by name
    assert spread(10, {"a": 1, "b": 100, "c": 0}) == {"a": 0, "b": 10, "c": 0}  # 0.099 / 9.9
    assert spread(5, {"a": 1, "b": 1, "c": 1}) == {"a": 1, "b": 1, "c": 1}
    assert spread(100, {"a": 3, "b": 4}) == {"a": 3, "b": 4}
    assert spread(0, {"a": 3}) == {"a": 0}
    assert spread(5, {}) == {}


# -- the data-loss check over ledgers (Planner.check_loss, with the broker's stats stubbed) ---------
#
# The internalStats below are those Pulsar 4.0.7 (the run's broker) answered, cut to the fields read:
# a topic with a durable subscription of the source (subscriptionName) that has read and acknowledged
# all 5 entries of ledger 3; the topic is then unloaded (as a broker restart or a bundle move does),
# which closes ledger 3 and trims it (every subscription had read it all), and 3 more entries go to
# ledger 5. Nothing the query was to read is gone: the entries after 3:4 are 5:0..5:2, all stored.

TOPIC = "persistent://public/default/lost"
STATS_READ = {"currentLedgerEntries": 5, "ledgers": [{"ledgerId": 3, "entries": 0}],
              "cursors": {"spark-sub": {"markDeletePosition": "3:4", "readPosition": "3:5"}}}
STATS_TRIMMED_AFTER_READ = {"currentLedgerEntries": 3, "ledgers": [{"ledgerId": 5, "entries": 0}],
                            "cursors": {"spark-sub": {"markDeletePosition": "3:4", "readPosition": "5:0"}}}


class _StubAdmin:
    """What the planner asks the admin API, answered from stats (an unpartitioned topic)."""

    def __init__(self, stats):
        self.stats = stats

    def partitions(self, topic):
        return 0

    def internal_stats(self, partition):
        return self.stats


def _planner(stats):
    from pulsarfast.spark.options import SourceConfig
    from pulsarfast.spark.planner import Planner

    config = SourceConfig.from_options({"service_url": "pulsar://127.0.0.1:1", "admin_url": "http://127.0.0.1:1",
                                        "topic": TOPIC, "subscriptionName": "spark-sub"})
    planner = Planner(config)  # (no request is made: every call below goes to the stub)
    planner.admin = _StubAdmin(stats)
    return planner


def test_entries_trimmed_before_they_were_read_are_data_loss():
    from pulsarfast.spark.options import DataLossError

    planner = _planner(STATS_READ)
    end, count = planner.latest({TOPIC: P(3, 2)}, None)
    assert (end, count) == ({TOPIC: P(3, 4)}, 2)
    planner.admin.stats = {"currentLedgerEntries": 3, "ledgers": [{"ledgerId": 5, "entries": 0}]}
    with pytest.raises(DataLossError, match="after 3:2 are no longer stored"):
        planner.latest({TOPIC: P(3, 2)}, None)  # (3:3 and 3:4 were never read)


def test_a_fully_read_ledger_trimmed_is_no_data_loss():
    planner = _planner(STATS_READ)
    end, count = planner.latest({TOPIC: BEFORE_FIRST}, None)
    assert (end, count) == ({TOPIC: P(3, 4)}, 5)
    planner.admin.stats = STATS_TRIMMED_AFTER_READ
    # (ledger 3 is gone, but the last look saw 3:4 as its last entry and every entry added since is in 5)
    assert planner.latest(end, None) == ({TOPIC: P(5, 2)}, 3)


def test_kept_after_tells_a_ledger_read_to_its_end_from_a_loss():
    # ledger 3 is gone; start 3:4 was its last entry when the earlier look saw it
    now = Ledgers((5,), (3,), current=5, added=8, cursors=(("sub", P(3, 4)),))
    closed = Ledgers((3, 5), (5, 1), current=5, added=6)  # 3 already closed: its 5 entries were all
    current = Ledgers((3,), (5,), current=3, added=5)  # 3 still current: more could have followed
    assert now.lost_after(P(3, 4))
    # the subscription acknowledged up to the start: the broker kept everything after it
    assert now.kept_after(P(3, 4), None, "sub")
    assert not now.kept_after(P(3, 4), None, "other")
    assert not Ledgers((5,), (3,), cursors=(("sub", P(5, 0)),)).kept_after(P(3, 4), None, "sub")
    # seen closed with start as its last entry
    assert now.kept_after(P(3, 4), closed, None)
    assert not now.kept_after(P(3, 3), closed, None)  # (3:4 followed and is gone)
    # seen current: only if every entry added since is in a later ledger (8 - 5 == the 3 of ledger 5)
    assert now.kept_after(P(3, 4), current, None)
    assert not Ledgers((5,), (3,), current=5, added=9).kept_after(P(3, 4), current, None)  # one went to 3
    assert not Ledgers((5,), (3,), current=5, added=2).kept_after(P(3, 4), current, None)  # reloaded since
    assert not now.kept_after(P(3, 4), None, None)  # nothing to tell by: a loss, to be safe
