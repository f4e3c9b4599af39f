"""The `nsq` streaming source. Spark keeps one stream reader object on the
driver for the life of a query; that object owns the consumer
(``nsq.spark.consumer``: connections subscribed to topic/channel, the buffer
of received messages, and the messages of planned batches). Micro-batch data
travels to the executors inside the pickled input partitions. A message is
finished (FIN, on the connection that received it) only in commit(), which
Spark calls for batch N when it plans batch N+1; the source therefore asks
for one trailing empty batch after a batch that carried data. Messages held
meanwhile are TOUCHed. Offsets name the reader's session, so that a
restarted query does not take a dead run's batches for its own: those
messages come back from nsqd.
"""
from __future__ import annotations

import logging
import math
import time
import uuid
from typing import Any, Iterator, Mapping

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import BinaryType, IntegerType, StringType, StructField, StructType, TimestampType

from ..conn import Connection
from ..message import Message
from ._options import NsqOptionError, SourceConfig
from .consumer import Consumer, _Chunk

logger = logging.getLogger(__name__)

#: The rows the source produces (a user-given schema may pick a subset, in any order).
SOURCE_SCHEMA = StructType(
    [
        StructField("id", StringType()),
        StructField("body", BinaryType()),
        StructField("timestamp", TimestampType()),
        StructField("attempts", IntegerType()),
        StructField("nsqd", StringType()),
        StructField("topic", StringType()),
        StructField("channel", StringType()),
    ]
)
_COLUMN_TYPES = {f.name: f.dataType for f in SOURCE_SCHEMA.fields}


def check_schema(schema: StructType | None) -> list[tuple[str, str]]:
    """(name as given, source column) pairs to produce; a user schema may only
    pick the source's own columns, in any order and letter case."""
    if schema is None:
        return [(name, name) for name in SOURCE_SCHEMA.fieldNames()]
    names = []
    for f in schema.fields:
        expected = _COLUMN_TYPES.get(f.name.lower())
        if expected is None:
            raise NsqOptionError(
                "the nsq source has no column %r; its columns are %s" % (f.name, ", ".join(_COLUMN_TYPES))
            )
        if f.dataType != expected:
            raise NsqOptionError(
                "the nsq source's column %r is %s, not %s" % (f.name, expected.simpleString(), f.dataType.simpleString())
            )
        names.append((f.name, f.name.lower()))
    return names


# --------------------------------------------------------------------------- driver side


class NsqInputPartition(InputPartition):
    """The messages of one slice of a micro-batch, column by column."""

    def __init__(self, ids: list, bodies: list, timestamps: list, attempts: list, nsqd: list) -> None:
        super().__init__(len(ids))
        self.ids = ids
        self.bodies = bodies
        self.timestamps = timestamps
        self.attempts = attempts
        self.nsqd = nsqd


def _to_partitions(consumer: Consumer, items: list[tuple[Connection, Message]], parts: int) -> list[NsqInputPartition]:
    if not items:
        return []
    parts = max(1, min(parts, len(items)))
    size = math.ceil(len(items) / parts)
    result = []
    for start in range(0, len(items), size):
        piece = items[start : start + size]
        result.append(
            NsqInputPartition(
                [m.id for _, m in piece],
                [m.body for _, m in piece],
                [m.timestamp for _, m in piece],
                [m.attempts for _, m in piece],
                [consumer.name_of(c) for c, _ in piece],
            )
        )
    return result


def _partition_batch(
    partition: NsqInputPartition, columns: list[tuple[str, str]], topic: str, channel: str
) -> pa.RecordBatch:
    from pyspark.sql.pandas.types import to_arrow_schema

    n = len(partition.ids)
    arrays = []
    for _, name in columns:
        if name == "id":
            arrays.append(pa.array(partition.ids, pa.binary()).cast(pa.string()))
        elif name == "body":
            arrays.append(pa.array(partition.bodies, pa.binary()))
        elif name == "timestamp":
            micros = pc.divide(pa.array(partition.timestamps, pa.int64()), 1000)
            arrays.append(micros.cast(pa.timestamp("us", tz="UTC")))
        elif name == "attempts":
            arrays.append(pa.array(partition.attempts, pa.int32()))
        elif name == "nsqd":
            arrays.append(pa.array(partition.nsqd, pa.string()))
        elif name == "topic":
            arrays.append(pa.array([topic] * n, pa.string()))
        elif name == "channel":
            arrays.append(pa.array([channel] * n, pa.string()))
    schema = to_arrow_schema(StructType([StructField(given, _COLUMN_TYPES[c]) for given, c in columns]), timezone="UTC")
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


# --------------------------------------------------------------------------- the stream reader


class NsqStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("nsq")``: at-least-once consumption of one topic/channel.

    Offsets are ``{"session": <this run>, "seq": <messages handed out>, "tick": <offsets handed out>}``.
    """

    def __init__(self, config: SourceConfig, columns: list[tuple[str, str]]) -> None:
        self.config = config
        self.columns = columns
        self._consumer: Consumer | None = None
        self._session: str | None = None
        self._seq = 0
        self._tick = 0
        self._available_now = False

    # Copies of this object go to the executors (and to Spark's planner
    # process): only the configuration travels, never the consumer.
    def __getstate__(self) -> dict:
        return {"config": self.config, "columns": self.columns}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["config"], state["columns"])  # type: ignore[misc]

    # -- driver -------------------------------------------------------------

    def _start(self) -> Consumer:
        if self._consumer is None:
            self._session = uuid.uuid4().hex
            consumer = Consumer(self.config)
            consumer.start()
            self._consumer = consumer
            logger.info(
                "nsq source: session %s reading %s/%s", self._session, self.config.topic, self.config.channel
            )
        return self._consumer

    def _offset(self) -> dict:
        return {"session": self._session, "seq": self._seq, "tick": self._tick}

    def _mine(self, offset: Mapping[str, Any] | None) -> bool:
        return offset is not None and offset.get("session") == self._session

    def initialOffset(self) -> dict:
        self._start()
        return {"session": self._session, "seq": 0, "tick": 0}

    def prepareForTriggerAvailableNow(self) -> None:
        # Messages nsqd accepted after this moment are not part of the run.
        consumer = self._start()
        consumer.cutoff_ns = time.time_ns()
        self._available_now = True

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.config.max_messages_per_batch)

    def _limits(self, limit: ReadLimit | None) -> tuple[int | None, int | None, int]:
        """(max rows, max bytes, min rows) for one batch."""
        cfg = self.config
        if limit is None or isinstance(limit, ReadAllAvailable):
            return None, None, 0
        if isinstance(limit, ReadMaxRows):
            return limit.max_rows, cfg.max_bytes_per_batch, 0
        if isinstance(limit, ReadMaxBytes):
            return cfg.max_messages_per_batch, limit.max_bytes, 0
        if isinstance(limit, ReadMinRows):
            return cfg.max_messages_per_batch, cfg.max_bytes_per_batch, limit.min_rows
        return cfg.max_messages_per_batch, cfg.max_bytes_per_batch, 0

    def latestOffset(self, start: dict | None = None, limit: ReadLimit | None = None) -> dict:
        if isinstance(limit, ReadAllAvailable) and not self._available_now:
            # Only Trigger.Once asks for everything without preparing for
            # AvailableNow. Its one batch is never committed (Spark commits a
            # batch when it plans the next), so nothing would ever be finished.
            raise NsqOptionError(
                "the nsq source does not support Trigger.Once: its only batch is never committed, so its messages "
                "would come back from nsqd; use trigger(availableNow=True)"
            )
        consumer = self._start()
        max_rows, max_bytes, min_rows = self._limits(limit)
        mine = self._mine(start)
        pending_commit = mine and consumer.unfinished_through(int(start["seq"]))  # type: ignore[index]
        if self._available_now and not pending_commit:
            consumer.wait_for_messages(self.config.available_now_idle)
        if min_rows and not self._available_now and consumer.buffered() < min_rows:
            items = []
        else:
            items = consumer.take(max_rows, max_bytes)
        if items:
            chunk = _Chunk(self._seq, self._seq + len(items), items)
            consumer.add_chunk(chunk)
            self._seq = chunk.end
            self._tick += 1
            return self._offset()
        if pending_commit:
            # Spark commits batch N only when it plans batch N+1: ask for an
            # empty batch so that the last batch with data gets finished.
            self._tick += 1
            return self._offset()
        if self._available_now and consumer.held:
            # the availableNow run ends here: what arrived after its cut-off goes back now
            consumer.requeue_held()
        if start is None:
            return self._offset()
        return start

    def reportLatestOffset(self) -> dict | None:
        return None

    def partitions(self, start: dict, end: dict) -> list[NsqInputPartition]:
        consumer = self._start()
        if not self._mine(end):
            # Planned by an earlier run of the query: this process never
            # received those messages; nsqd delivers them again.
            return []
        first = int(start["seq"]) if self._mine(start) else 0
        items = consumer.items_between(first, int(end["seq"]))
        return _to_partitions(consumer, items, self.config.num_partitions)

    def commit(self, end: dict) -> None:
        if self._consumer is None or not self._mine(end):
            return
        self._consumer.finish_through(int(end["seq"]))

    def stop(self) -> None:
        if self._consumer is not None:
            self._consumer.close()

    # -- executors ------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, NsqInputPartition) or not partition.ids:
            return iter(())
        return iter([_partition_batch(partition, self.columns, self.config.topic, self.config.channel)])
