"""The ``pulsar`` source's driver side, without pyspark: which partitions the
query reads (``topic``, ``topics`` or ``topicsPattern``, looked up again at
every trigger, so that added partitions and topics join), where each starts
(``startingOffsets`` / ``startingTimestamp``), where the next micro-batch ends
(every stored entry, or ``maxMessagesPerTrigger`` entries spread over the
partitions by backlog), the ranges the executors read (a partition's range
cut into slices for ``minPartitions``), the data-loss checks, and the
durable subscription whose cursor follows the committed offsets.

Offsets are ``{partition name: [ledgerId, entryId]}``: the last entry read
(positions.py).
"""
from __future__ import annotations

import logging
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from pulsarfast.base.topics import PARTITION_SUFFIX
from pulsarfast.spark.admin import Admin, AdminError
from pulsarfast.spark.options import EARLIEST, LATEST, Bound, DataLossError, SourceConfig
from pulsarfast.spark.positions import BEFORE_FIRST, Ledgers, Position, ordered, sizes_for, slices, spread

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Range:
    """What one task reads: partition's entries after start up to and including end."""

    partition: str
    topic: str
    index: int  # the partition's index (-1: an unpartitioned topic)
    start: Position
    end: Position


class Planner:
    """The source's questions to the cluster, on the driver."""

    def __init__(self, config: SourceConfig) -> None:
        self.config = config
        self.admin = Admin(config.client.admin_settings(), config.client.authentication())
        #: partition name -> (topic, index), as last looked up
        self.known: dict[str, tuple[str, int]] = {}
        #: the ledgers of each partition as the last latest offset saw them
        self.ledgers: dict[str, Ledgers] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._moved: dict[str, Position] = {}

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False)

    # -- partitions ----------------------------------------------------------------------------

    def topics(self) -> list[str]:
        if self.config.pattern is None:
            return list(self.config.topics)
        pattern = re.compile(self.config.pattern)
        domain, _, rest = self.config.pattern.partition("://")
        namespace = "/".join(rest.split("/")[:2])
        names = set()
        for name in self.admin.namespace_topics(namespace, domain):
            base, marker, index = name.rpartition(PARTITION_SUFFIX)
            topic = base if marker and index.isdigit() else name
            if pattern.fullmatch(topic):
                names.add(topic)
        return sorted(names)

    def partitions(self) -> dict[str, tuple[str, int]]:
        """Every partition the query reads now: name -> (topic, index)."""
        found: dict[str, tuple[str, int]] = {}
        for topic in self.topics():
            count = self.admin.partitions(topic)
            if count is None:
                continue  # (not there yet, or deleted: the data-loss check tells which)
            if count == 0:
                found[topic] = (topic, -1)
            for index in range(count):
                found["%s%s%d" % (topic, PARTITION_SUFFIX, index)] = (topic, index)
        self.known.update(found)
        return {name: found[name] for name in ordered(list(found))}

    def _map(self, fn: Callable[[str], Any], names: list[str]) -> list:
        if len(names) <= 1:
            return [fn(name) for name in names]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="pulsar source admin")
        return list(self._pool.map(fn, names))

    def refresh(self, names: list[str]) -> dict[str, Ledgers | None]:
        """The ledgers of each partition named, now (None: the partition does not exist)."""
        stats = self._map(self.admin.internal_stats, names)
        result: dict[str, Ledgers | None] = {}
        for name, each in zip(names, stats):
            result[name] = None if each is None else Ledgers.from_internal_stats(each)
            if each is not None:
                self.ledgers[name] = result[name]  # type: ignore[assignment]
        return result

    # -- offsets -------------------------------------------------------------------------------

    def resolve(self, bound: Bound, partition: str, topic: str, ledgers: Ledgers, ending: bool = False) -> Position:
        """The offset (last entry read) a bound names for a partition."""
        where = bound.for_partition(partition, topic)
        if where == EARLIEST:
            return BEFORE_FIRST
        if where == LATEST:
            return ledgers.last()
        assert isinstance(where, Position)
        return ledgers.before(where)  # (a given position is the first entry of the range, or the first after it)

    def initial(self) -> dict[str, Position]:
        """Where a new query starts, for every partition there is now."""
        parts = self.partitions()
        stats = self.refresh(list(parts))
        offsets: dict[str, Position] = {}
        timestamp = self.config.starting_timestamp
        for name, (topic, _index) in parts.items():
            ledgers = stats.get(name)
            if ledgers is None:
                continue
            if timestamp is not None:
                offsets[name] = ledgers.before(self.admin.message_id_at(name, timestamp))
            else:
                offsets[name] = self.resolve(self.config.starting, name, topic, ledgers)
        return offsets

    def ending(self) -> dict[str, Position]:
        """A batch query's end (endingOffsets), for the partitions there are now."""
        parts = self.partitions()
        stats = self.refresh(list(parts))
        return {name: self.resolve(self.config.ending, name, topic, ledgers, ending=True)
                for name, (topic, _index) in parts.items()
                if (ledgers := stats.get(name)) is not None}

    def check_loss(self, start: Mapping[str, Position], stats: Mapping[str, Ledgers | None],
                   earlier: Mapping[str, Ledgers] | None = None) -> dict[str, Position]:
        """start without the partitions that are gone; raises DataLossError (failOnDataLoss) when a
        partition with a position was deleted or lost entries that were not read (earlier: how
        the last look saw each partition, which tells a ledger read to its end and then trimmed)."""
        kept = dict(start)
        for name, position in start.items():
            ledgers = stats.get(name)
            problem = None
            if ledgers is None:
                if position != BEFORE_FIRST:
                    problem = "%s is gone (deleted) after %s" % (name, position)
                kept.pop(name)
            elif ledgers.lost_after(position) and not ledgers.kept_after(
                    position, (earlier or {}).get(name), self.config.subscription):
                problem = "entries of %s after %s are no longer stored (its oldest ledger is %d)" % (
                    name, position, ledgers.ids[0])
            if problem is None:
                continue
            if self.config.fail_on_data_loss:
                raise DataLossError("pulsar source: %s; set failOnDataLoss=false to go on without them" % problem)
            logger.warning("pulsar source: %s; going on (failOnDataLoss=false)", problem)
        return kept

    def latest(self, start: Mapping[str, Position], max_entries: int | None,
               cap: Mapping[str, Position] | None = None) -> tuple[dict[str, Position], int]:
        """The next batch's end from start: every stored entry, at most max_entries in all
        (spread by backlog), never past cap (availableNow's end); and how many entries it holds.
        Partitions new since start begin at their first entry."""
        parts = self.partitions()
        names = sorted(set(parts) | set(start))
        earlier = dict(self.ledgers)
        stats = self.refresh(names)
        start = self.check_loss({n: start.get(n, BEFORE_FIRST) for n in names}, stats, earlier)
        ends: dict[str, Position] = {}
        backlogs: dict[str, int] = {}
        for name, position in start.items():
            ledgers = stats[name]
            assert ledgers is not None
            last = ledgers.last()
            if cap is not None:
                last = min(last, cap.get(name, position)) if name in cap else position
            if last < position:
                last = position
            ends[name] = last
            backlogs[name] = ledgers.count_after(position, last)
        total = sum(backlogs.values())
        if max_entries is not None and total > max_entries:
            shares = spread(max_entries, backlogs)
            for name, share in shares.items():
                ledgers = stats[name]
                assert ledgers is not None
                ends[name] = ledgers.advance(start[name], share)
            total = sum(shares.values())
        return ends, total

    def ranges(self, start: Mapping[str, Position], end: Mapping[str, Position]) -> list[Range]:
        """The tasks of the batch (start, end]: a range per partition with entries, cut into slices
        when minPartitions asks for more tasks than there are such partitions."""
        spans: list[tuple[str, Position, Position, int]] = []
        missing = [name for name in end if name not in self.ledgers]
        if missing:
            self.refresh(missing)
        for name in ordered(list(end)):
            low, high = start.get(name, BEFORE_FIRST), end[name]
            ledgers = self.ledgers.get(name)
            if ledgers is None or high <= low:
                continue
            count = ledgers.count_after(low, high)
            if count > 0:
                spans.append((name, low, high, count))
        pieces = sizes_for([(name, count) for name, _, _, count in spans], self.config.min_partitions)
        result = []
        for name, low, high, _count in spans:
            topic, index = self.known.get(name) or _topic_of(name)
            ledgers = self.ledgers[name]
            for a, b in slices(ledgers, low, high, pieces.get(name, 1)):
                result.append(Range(name, topic, index, a, b))
        return result

    # -- the durable subscription -------------------------------------------------------------

    def move_subscription(self, end: Mapping[str, Position]) -> None:
        """Acknowledge, in subscriptionName, every entry up to end on each partition (making the
        subscription first where it is not there yet)."""
        subscription = self.config.subscription
        if subscription is None:
            return
        for name, position in end.items():
            if self._moved.get(name) == position:
                continue
            try:
                if position == BEFORE_FIRST:
                    self.admin.create_subscription(name, subscription, BEFORE_FIRST)
                else:
                    try:
                        self.admin.move_cursor(name, subscription, position)
                    except AdminError as exc:
                        if exc.status != 404:
                            raise
                        self.admin.create_subscription(name, subscription, BEFORE_FIRST)
                        self.admin.move_cursor(name, subscription, position)
            except AdminError as exc:
                if exc.status == 404 and self.admin.internal_stats(name) is None:
                    continue  # (the partition was deleted: the data-loss check reports it)
                raise
            self._moved[name] = position


def _topic_of(name: str) -> tuple[str, int]:
    base, marker, index = name.rpartition(PARTITION_SUFFIX)
    if marker and index.isdigit():
        return base, int(index)
    return name, -1
