"""The ``pulsar`` source's Spark classes: ``PulsarStreamReader``
(``spark.readStream``) and ``PulsarBatchReader`` (``spark.read``). The driver
plans (planner.py: offsets are each partition's last entry read, kept in
Spark's checkpoint); each input partition is one range of one topic
partition that an executor task reads on its own (reading.py). Nothing is
acknowledged on the topic: a restarted query reads again exactly the ranges
after its last committed offsets, which with an idempotent sink puts every
message in the output once. With ``subscriptionName``, a durable
subscription's cursor follows the committed offsets, so retention keeps
what the query has not read and the subscription's backlog clears.
"""
from __future__ import annotations

import logging
import time
from typing import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.pandas.types import from_arrow_type
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from msgengine.sparkoptions import pick_columns

from pulsarfast.spark.options import PulsarOptionError, SourceConfig
from pulsarfast.spark.planner import Planner, Range
from pulsarfast.spark.positions import Position, offsets_from_json, offsets_to_json
from pulsarfast.spark.reading import ARROW_TYPES, read_range

logger = logging.getLogger(__name__)

#: the rows the source produces (a user-given schema may pick a subset, in any order)
SOURCE_SCHEMA = StructType([
    StructField("key", StringType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("message_id", BinaryType()),
    StructField("publish_time", TimestampType()),
    StructField("event_time", TimestampType()),
    StructField("properties", MapType(StringType(), StringType())),
])
_COLUMN_TYPES = {f.name: f.dataType for f in SOURCE_SCHEMA.fields}


def value_fields(config: SourceConfig) -> list[StructField]:
    """The columns of the decoded value's fields (valueSchema=topic), after the source's own."""
    if config.value_schema is None:
        return []
    fields = []
    for name, kind in config.value_schema.fields():
        if name.lower() in _COLUMN_TYPES:
            raise PulsarOptionError("the value's field %r has the name of one of the pulsar source's columns (%s): "
                                    "read the value as binary instead (no valueSchema)" % (name, ", ".join(_COLUMN_TYPES)))
        fields.append(StructField(name, from_arrow_type(kind)))
    return fields


def source_schema(config: SourceConfig) -> StructType:
    """The rows the source produces for these settings: its columns, then the value's fields."""
    return StructType(SOURCE_SCHEMA.fields + value_fields(config))


def check_schema(schema: StructType | None, config: SourceConfig | None = None) -> list[tuple[str, str]]:
    """(name as given, source column) pairs to produce: a user schema may pick the source's own
    columns (and the value's fields), in any order and letter case."""
    types = dict(_COLUMN_TYPES)
    if config is not None:
        types.update((f.name.lower(), f.dataType) for f in value_fields(config))
    if schema is None and config is not None:
        schema = source_schema(config)
    return pick_columns(schema, types, PulsarOptionError, "pulsar")


class PulsarRange(InputPartition):
    """One task's range: a topic partition's entries after ``start`` up to and including ``end``."""

    def __init__(self, task: Range) -> None:
        super().__init__(task.partition)
        self.task = task


class _Reading:
    """What the batch and the stream reader share: the columns and the executors' read()."""

    def __init__(self, config: SourceConfig, columns: list[tuple[str, str]]) -> None:
        self.config = config
        self.columns = columns
        self._planner: Planner | None = None

    @property
    def planner(self) -> Planner:
        if self._planner is None:
            self._planner = Planner(self.config)
        return self._planner

    # (copies go to the executors: only the settings travel)
    def __getstate__(self) -> dict:
        return {"config": self.config, "columns": self.columns}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["config"], state["columns"])  # type: ignore[misc]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, PulsarRange)
        task = partition.task
        names = [column for _, column in self.columns]
        given = [name for name, _ in self.columns]
        for batch in read_range(self.config, task.partition, task.topic, task.index, task.start, task.end, names):
            if given != names:
                batch = pa.RecordBatch.from_arrays(batch.columns, names=given)
            yield batch

    def _inputs(self, start: dict[str, Position], end: dict[str, Position]) -> list[PulsarRange]:
        return [PulsarRange(task) for task in self.planner.ranges(start, end)]


class PulsarBatchReader(_Reading, DataSourceReader):
    """``spark.read.format("pulsar")``: the entries from startingOffsets (default earliest) to
    endingOffsets (default latest), read once."""

    def partitions(self) -> list[PulsarRange]:
        planner = self.planner
        start = planner.initial()
        end = planner.ending()
        start = planner.check_loss(start, {name: planner.ledgers.get(name) for name in start})
        return self._inputs(start, {name: end[name] for name in end if name in start})


class PulsarStreamReader(_Reading, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("pulsar")``; see the module docstring."""

    def __init__(self, config: SourceConfig, columns: list[tuple[str, str]]) -> None:
        super().__init__(config, columns)
        self._cap: dict[str, Position] | None = None  # availableNow: the end of the run
        self._last_batch = time.monotonic()

    def initialOffset(self) -> dict:
        offsets = self.planner.initial()
        self.planner.move_subscription(offsets)
        logger.info("pulsar source: starting at %s", offsets_to_json(offsets))
        return offsets_to_json(offsets)

    def prepareForTriggerAvailableNow(self) -> None:
        planner = self.planner
        names = list(planner.partitions())
        self._cap = {name: ledgers.last() for name, ledgers in planner.refresh(names).items()
                     if ledgers is not None}

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.config.max_entries_per_trigger is not None:
            return ReadMaxRows(self.config.max_entries_per_trigger)
        if self.config.min_entries_per_trigger is not None:
            return ReadMinRows(self.config.min_entries_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict | None = None, limit: ReadLimit | None = None) -> dict:
        begin = offsets_from_json(start or {})
        # Spark asks for the batch after start once the batch ending there is in its commit log (and
        # calls commit() only when it plans the next one: never for an availableNow run's last batch)
        self.planner.move_subscription(begin)
        max_entries = self.config.max_entries_per_trigger
        if isinstance(limit, ReadMaxRows):
            max_entries = limit.max_rows
        elif isinstance(limit, ReadAllAvailable):
            max_entries = None
        end, count = self.planner.latest(begin, max_entries, self._cap)
        if not count and start is not None:
            return start  # (nothing new: no batch)
        minimum = self.config.min_entries_per_trigger
        if isinstance(limit, ReadMinRows):
            minimum = limit.min_rows
        if (count and minimum and count < minimum and self._cap is None
                and (time.monotonic() - self._last_batch) * 1000 < self.config.max_trigger_delay_ms):
            return offsets_to_json(begin) if start is not None else offsets_to_json(end)  # (wait for more)
        if count:
            self._last_batch = time.monotonic()
        return offsets_to_json(end)

    def reportLatestOffset(self) -> dict | None:
        return None

    def partitions(self, start: dict, end: dict) -> list[PulsarRange]:
        return self._inputs(offsets_from_json(start), offsets_from_json(end))

    def commit(self, end: dict) -> None:
        self.planner.move_subscription(offsets_from_json(end))

    def stop(self) -> None:
        if self._planner is not None:
            self._planner.close()


__all__ = ["SOURCE_SCHEMA", "PulsarStreamReader", "PulsarBatchReader", "PulsarRange", "check_schema", "ARROW_TYPES"]
