"""The `nsq` streaming source. Spark keeps one stream reader object on the
driver for the life of a query; that object owns the consumer
(``nsq.spark.consumer``: connections subscribed to topic/channel, the buffer
of received messages, and the messages of planned batches). A micro-batch
travels to the executors as Arrow IPC streams inside the input partitions
(``nsq.spark.columns``). A message is finished (FIN, on the connection that
received it) only once its batch is in Spark's commit log: in
latestOffset(start), which Spark calls for the next batch only after the
batch ending at start has run and been committed, and at the latest in
commit(). The reader's worker thread sends those FINs and builds a planned
batch's partitions, while Spark writes its offset log and plans the batch.
Messages held meanwhile are TOUCHed. Offsets name the reader's
session, so that a restarted query does not take a dead run's batches for
its own: those messages come back from nsqd.
"""
from __future__ import annotations

import logging
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for_futures
from typing import Any, Iterator, Mapping

import pyarrow as pa
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

from msgengine.sparkoptions import pick_columns

from nsq.spark import columns as arrow_columns
from nsq.spark._options import NsqOptionError, SourceConfig
from nsq.spark.consumer import Chunk, Consumer

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

#: the default read limit when max_messages_per_batch is not set: a batch takes what has arrived
NO_ROW_LIMIT = 2**31 - 1


def check_schema(schema: StructType | None) -> list[tuple[str, str]]:
    """(name as given, source column) pairs to produce; a user schema may only
    pick the source's own columns, in any order and letter case."""
    return pick_columns(schema, _COLUMN_TYPES, NsqOptionError, "nsq")


def _log_failure(future: Future) -> None:
    exc = future.exception()
    if exc is not None:
        logger.error("nsq source: background work failed", exc_info=exc)


# --------------------------------------------------------------------------- partitions


class NsqInputPartition(InputPartition):
    """One slice of a micro-batch: its per-message columns as an Arrow IPC
    stream built on the driver, and which nsqd delivered which of its rows."""

    def __init__(self, payload: bytes, rows: int, nsqd: list[tuple[str, int]]) -> None:
        super().__init__(rows)
        self.payload = payload
        self.rows = rows
        self.nsqd = nsqd


def arrow_schema(columns: list[tuple[str, str]]) -> pa.Schema:
    """The Arrow schema Spark expects from read(), for the (given name, source column) pairs."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(StructType([StructField(given, _COLUMN_TYPES[c]) for given, c in columns]), timezone="UTC")


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
        self._schema: pa.Schema | None = None
        # FIN and the partitions of a planned batch are done on this thread,
        # while Spark writes its offset log and plans the batch
        self._worker: ThreadPoolExecutor | None = None
        self._prepared: dict[tuple[int, int], Future[list[NsqInputPartition]]] = {}

    def _arrow_schema(self) -> pa.Schema:
        if self._schema is None:
            self._schema = arrow_schema(self.columns)
        return self._schema

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

    def _in_background(self, fn: Any, *args: Any) -> Future:
        if self._worker is None:
            self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nsq source")
        future = self._worker.submit(fn, *args)
        future.add_done_callback(_log_failure)
        return future

    def _build_partitions(self, chunks: list[Chunk]) -> list[NsqInputPartition]:
        """The input partitions holding the messages of chunks."""
        consumer = self._start()
        runs = [(consumer.name_of(conn), messages) for chunk in chunks for conn, messages in chunk.slabs]
        if not runs:
            return []
        batch, nsqd = arrow_columns.record_batch(runs, [name for _, name in self.columns])
        parts = arrow_columns.partition_count(batch, self.config.num_partitions)
        return [NsqInputPartition(*piece) for piece in arrow_columns.to_ipc(batch, nsqd, parts)]

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
        # "no cap" is a very large ReadMaxRows rather than ReadAllAvailable,
        # which is how Trigger.Once is told apart (see latestOffset)
        return ReadMaxRows(self.config.max_messages_per_batch or NO_ROW_LIMIT)

    def _limits(self, limit: ReadLimit | None) -> tuple[int | None, int | None, int]:
        """(max rows, max bytes, min rows) for one batch."""
        cfg = self.config
        if limit is None or isinstance(limit, ReadAllAvailable):
            return None, None, 0
        if isinstance(limit, ReadMaxRows):
            return (limit.max_rows if limit.max_rows < NO_ROW_LIMIT else None), cfg.max_bytes_per_batch, 0
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
        # Spark asks for the batch after `start` only once the batch that ends
        # there has run and is in the query's commit log: it is finished now,
        # on the worker thread (Spark does not wait for it), which gives its
        # max_in_flight room back to the next batch.
        committed = int(start["seq"]) if self._mine(start) else None  # type: ignore[index]
        max_rows, max_bytes, min_rows = self._limits(limit)
        if max_rows is None:
            max_rows = consumer.half_budget()
        finishing = None
        if committed is not None and consumer.buffered() < max_rows:
            # the next batch may wait to fill: it needs that room first
            finishing = self._in_background(consumer.finish_through, committed)
            committed = None
        if self._available_now:
            if finishing is not None and not consumer.buffered():
                # Those FIN may give nsqd the room it lacked, which starts the
                # idle time again (Consumer.finish_through): let them go out first.
                wait_for_futures([finishing], self.config.available_now_idle)
            # The run ends once nsqd has had available_now_idle to send an
            # eligible message and sent none, counting the time it already had
            # (typically while Spark ran the last batch).
            consumer.wait_for_messages(self.config.available_now_idle, idle=True)
        if consumer.buffered() and self.config.batch_wait:
            consumer.wait_to_fill(self.config.batch_wait, max_rows)
        chunk = None
        if not min_rows or self._available_now or consumer.buffered() >= min_rows:
            chunk = consumer.plan(self._seq, max_rows, max_bytes)
        if chunk is not None:
            self._seq = chunk.end
            # (before the FIN: partitions() will wait for it)
            self._prepared[(chunk.start, chunk.end)] = self._in_background(self._build_partitions, [chunk])
        if committed is not None:
            self._in_background(consumer.finish_through, committed)
        if chunk is not None:
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
        first, last = (int(start["seq"]) if self._mine(start) else 0), int(end["seq"])
        prepared = self._prepared.pop((first, last), None)
        for key in [key for key in self._prepared if key[1] <= last]:
            del self._prepared[key]  # (planned, never asked for)
        if prepared is not None:
            return prepared.result()
        return self._build_partitions(consumer.chunks_between(first, last))

    def commit(self, end: dict) -> None:
        # (latestOffset has normally finished these already)
        if self._consumer is None or not self._mine(end):
            return
        self._consumer.finish_through(int(end["seq"]))

    def stop(self) -> None:
        if self._worker is not None:
            self._worker.shutdown(wait=True)  # a FIN under way goes out before the connections close
        self._prepared.clear()
        if self._consumer is not None:
            self._consumer.close()

    # -- executors ------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, NsqInputPartition) or not partition.rows:
            return iter(())
        return arrow_columns.from_ipc(
            partition.payload, partition.nsqd, [name for _, name in self.columns], self._arrow_schema(),
            self.config.topic, self.config.channel,
        )
