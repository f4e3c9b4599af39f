"""Positions in a Pulsar topic partition, as the ``pulsar`` Spark source
counts them: where a partition's offset stands, how many entries lie between
two positions, where a range of n entries ends, and how a read limit is
spread over partitions. Pure logic over the partition's ledger list (the
broker's ``internalStats``); nothing here talks to a server or imports
pyspark.

A position is ``(ledger_id, entry_id)`` of a stored entry. An entry holds one
message, or a batch of them when the producer batched. A source offset names,
for each partition, the **last entry already read** (``BEFORE_FIRST``,
``(-1, -1)``, when nothing has been read): a batch reads the entries after
its start position up to and including its end position, whole.
"""
from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, field
from typing import Iterable, Mapping, NamedTuple, Sequence


class Position(NamedTuple):
    """An entry of a partition: ``(ledger_id, entry_id)``; ordered as the partition's entries are."""

    ledger: int
    entry: int

    def __str__(self) -> str:
        return "%d:%d" % (self.ledger, self.entry)


#: the offset of a partition nothing of which has been read: its first entry comes next
BEFORE_FIRST = Position(-1, -1)


@dataclass(frozen=True)
class Ledgers:
    """A partition's ledgers that hold entries, in order, and how many each holds (the
    broker's internal stats: a closed ledger's count, and the current ledger's). Entries of a
    ledger are numbered from 0."""

    ids: tuple[int, ...]
    counts: tuple[int, ...]
    #: the ledger new entries go to (-1: not known); it may hold none yet
    current: int = field(default=-1, compare=False)
    #: entries the broker added since it loaded the partition (``entriesAddedCounter``; -1: not known)
    added: int = field(default=-1, compare=False)
    #: durable subscriptions' mark-delete positions (what each has acknowledged, in order)
    cursors: tuple[tuple[str, Position], ...] = field(default=(), compare=False)

    @classmethod
    def from_internal_stats(cls, stats: Mapping) -> "Ledgers":
        """From ``GET .../internalStats``: its ``ledgers`` list, the last one (the current ledger)
        counted by ``currentLedgerEntries``; ledgers without entries are left out."""
        ledgers = list(stats.get("ledgers") or [])
        ids: list[int] = []
        counts: list[int] = []
        for index, ledger in enumerate(ledgers):
            count = int(ledger.get("entries") or 0)
            if index == len(ledgers) - 1:
                count = max(count, int(stats.get("currentLedgerEntries") or 0))
            if count > 0:
                ids.append(int(ledger["ledgerId"]))
                counts.append(count)
        cursors = []
        for name, cursor in (stats.get("cursors") or {}).items():
            try:
                cursors.append((str(name), parse_position(cursor["markDeletePosition"])))
            except (KeyError, TypeError, ValueError):
                continue
        return cls(tuple(ids), tuple(counts), int(ledgers[-1]["ledgerId"]) if ledgers else -1,
                   int(stats.get("entriesAddedCounter", -1)), tuple(cursors))

    @property
    def total(self) -> int:
        return sum(self.counts)

    def first(self) -> Position | None:
        """The oldest entry still stored (None: none)."""
        return Position(self.ids[0], 0) if self.ids else None

    def last(self) -> Position:
        """The newest entry (``BEFORE_FIRST`` when the partition holds none)."""
        if not self.ids:
            return BEFORE_FIRST
        return Position(self.ids[-1], self.counts[-1] - 1)

    def _rank(self, position: Position) -> int:
        """How many stored entries are at or before position."""
        index = bisect.bisect_left(self.ids, position.ledger)
        before = sum(self.counts[:index])
        if index < len(self.ids) and self.ids[index] == position.ledger:
            before += min(max(position.entry + 1, 0), self.counts[index])
        return before

    def count_after(self, start: Position, end: Position | None = None) -> int:
        """Stored entries after start, up to and including end (the last entry when None)."""
        top = self.total if end is None else self._rank(end)
        return max(0, top - self._rank(start))

    def advance(self, start: Position, n: int) -> Position:
        """The position of the n-th stored entry after start (the last entry when fewer follow)."""
        target = self._rank(start) + n
        if n <= 0:
            return start
        if target >= self.total:
            return self.last()
        for ledger, count in zip(self.ids, self.counts):
            if target <= count:
                return Position(ledger, target - 1)
            target -= count
        return self.last()  # (not reached)

    def lost_after(self, start: Position) -> bool:
        """Whether entries that followed start may be gone: start names a ledger older than the
        oldest one still stored, which is no longer there (trimmed by retention, or deleted).
        Reading from the beginning (``BEFORE_FIRST``) loses nothing. ``kept_after`` tells the
        cases where nothing was lost all the same."""
        if start == BEFORE_FIRST or not self.ids:
            return False
        return start.ledger < self.ids[0]

    def kept_after(self, start: Position, earlier: "Ledgers | None", subscription: str | None) -> bool:
        """Whether nothing after start is gone although start's ledger is (``lost_after``):

        - the durable subscription has acknowledged no further than start: the broker trims
          only what every durable subscription acknowledged;
        - or an earlier look at the partition (``earlier``) saw start as the last entry of its
          ledger, and that ledger then closed (no longer the current one), or it was current and
          every entry the broker added since is in a later ledger (the same load of the partition:
          ``added`` counts from it).
        """
        if subscription is not None:
            acknowledged = dict(self.cursors).get(subscription)
            if acknowledged is not None and acknowledged <= start:
                return True
        if earlier is None or start.ledger not in earlier.ids:
            return False
        if earlier.counts[earlier.ids.index(start.ledger)] != start.entry + 1:
            return False
        if earlier.current != start.ledger:
            return True
        if earlier.added < 0 or self.added < earlier.added:
            return False
        later = sum(count for ledger, count in zip(self.ids, self.counts) if ledger > start.ledger)
        return self.added - earlier.added == later

    def before(self, position: Position) -> Position:
        """The stored entry just before position (``BEFORE_FIRST`` when none is): where a read
        that must include position starts."""
        rank = self._rank(Position(position.ledger, position.entry - 1))
        if rank <= 0:
            return BEFORE_FIRST
        return self.advance(BEFORE_FIRST, rank)


# -- offsets: {partition name: [ledger, entry]} --------------------------------------------------


def offsets_to_json(offsets: Mapping[str, Position]) -> dict[str, list[int]]:
    """The JSON-able form Spark keeps in its offset log, partitions in name order."""
    return {name: [int(p.ledger), int(p.entry)] for name, p in sorted(offsets.items())}


def offsets_from_json(value: Mapping) -> dict[str, Position]:
    """The offsets of a checkpoint (as ``offsets_to_json`` wrote them); ValueError when malformed."""
    result: dict[str, Position] = {}
    for name, pair in value.items():
        if not isinstance(pair, (list, tuple)) or len(pair) != 2 or not all(isinstance(x, int) for x in pair):
            raise ValueError("offset of %r is not [ledgerId, entryId]: %r" % (name, pair))
        result[str(name)] = Position(int(pair[0]), int(pair[1]))
    return result


def parse_position(text: str) -> Position:
    """``"ledger:entry"`` (the form the broker's stats print) as a Position."""
    ledger, _, entry = str(text).partition(":")
    return Position(int(ledger), int(entry))


def dumps(offsets: Mapping[str, Position]) -> str:
    return json.dumps(offsets_to_json(offsets), sort_keys=True)


# -- spreading a limit -------------------------------------------------------------------------


def spread(limit: int, backlogs: Mapping[str, int]) -> dict[str, int]:
    """How many entries each partition may take when a trigger may take ``limit`` in all: shares
    in proportion to each one's backlog (largest remainders first, ties by name), never more than
    its backlog, and what one cannot use goes to the others. The shares add up to
    min(limit, total backlog)."""
    wanted = {name: n for name, n in backlogs.items() if n > 0}
    shares = {name: 0 for name in backlogs}
    left = min(limit, sum(wanted.values()))
    while left > 0 and wanted:
        total = sum(wanted.values())
        exact = {name: left * n / total for name, n in wanted.items()}
        given = {name: min(int(x), wanted[name]) for name, x in exact.items()}
        rest = left - sum(given.values())
        for name in sorted(wanted, key=lambda k: (-(exact[k] - int(exact[k])), k)):
            if rest <= 0:
                break
            if given[name] < wanted[name]:
                given[name] += 1
                rest -= 1
        for name, n in given.items():
            shares[name] += n
            wanted[name] -= n
            left -= n
        wanted = {name: n for name, n in wanted.items() if n > 0}
        if not any(given.values()):
            break
    return shares


def slices(ledgers: Ledgers, start: Position, end: Position, pieces: int) -> list[tuple[Position, Position]]:
    """The range (start, end] cut into up to ``pieces`` consecutive ranges of about as many
    entries each (empty ranges left out)."""
    count = ledgers.count_after(start, end)
    if count <= 0:
        return []
    pieces = max(1, min(pieces, count))
    result = []
    low = start
    for index in range(pieces):
        size = count * (index + 1) // pieces - count * index // pieces
        high = end if index == pieces - 1 else ledgers.advance(low, size)
        result.append((low, high))
        low = high
    return result


def sizes_for(items: Iterable[tuple[str, int]], pieces: int) -> dict[str, int]:
    """How many slices each partition's range is cut into so that there are about ``pieces``
    in all (at least one each): the largest ranges get the extra ones."""
    ranges = [(name, n) for name, n in items if n > 0]
    result = {name: 1 for name, _ in ranges}
    extra = pieces - len(ranges)
    if extra <= 0:
        return result
    total = sum(n for _, n in ranges)
    for name, n in ranges:
        result[name] += extra * n // total
    return result


def ordered(names: Sequence[str]) -> list[str]:
    """Partition names in a stable order (base topic, then partition index)."""
    def key(name: str) -> tuple[str, int]:
        base, marker, index = name.rpartition("-partition-")
        if marker and index.isdigit():
            return base, int(index)
        return name, -1
    return sorted(names, key=key)
