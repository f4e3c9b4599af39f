"""The ``pulsar`` sink: each Spark task produces its rows with batching
producers of this Python worker's client (one per topic it writes to) and
succeeds only once the broker has acknowledged every message; any failed
send fails the task, and so the job or the micro-batch. Delivery is at least
once, since Spark may run a task again after some of its messages were
stored.

Columns: ``value`` (binary or string, required), and when present ``key``
(string: the partition key), ``properties`` (map of strings), ``event_time``
(timestamp), ``topic`` (string: each row's topic, else the ``topic``
option) and ``sequence_id`` (long).

With ``producerName``, a task's producers are named ``<producerName>-<task's
partition>`` and its messages carry sequence ids that a retry of the task
repeats (the ``sequence_id`` column, else the row's place in the task's
partition counted from 1, after the micro-batch id in the high 32 bits), so that a broker
with deduplication on stores a retried task's messages once.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import BinaryType, LongType, MapType, StringType, StructType, TimestampType

from pulsarfast.base.results import PulsarException
from pulsarfast.base.topics import full_topic_name
from pulsarfast.client import Client
from pulsarfast.producing.producer import Producer
from pulsarfast.spark.options import PRODUCER_PREFIX, ClientOptions, Options, PulsarOptionError, pass_through
from pulsarfast.spark.reading import client_for, drop_client

logger = logging.getLogger(__name__)

#: the producers' settings unless pulsar.producer.* says otherwise
PRODUCER_DEFAULTS: Mapping[str, Any] = {
    "batching_enabled": True,
    "batching_max_messages": 1000,
    "batching_max_publish_delay_ms": 10,
    "max_pending_messages": 10000,
    "block_if_queue_full": True,
}
#: the columns the sink reads and the types each may have
_COLUMNS = {
    "value": (BinaryType, StringType),
    "key": (StringType,),
    "properties": (MapType,),
    "event_time": (TimestampType,),
    "topic": (StringType,),
    "sequence_id": (LongType,),
}


class PulsarSinkError(PulsarException):
    """The broker refused, or did not acknowledge, a message of a Spark task."""


@dataclass(frozen=True)
class SinkConfig:
    """Everything a task needs, checked on the driver and pickled to the executors."""

    client: ClientOptions
    topic: str | None
    columns: Mapping[str, int]  # the sink's column -> its index in the rows
    producer_kwargs: Mapping[str, Any]
    producer_name: str | None

    @classmethod
    def from_options(cls, options: Mapping[str, Any], schema: StructType) -> "SinkConfig":
        opts = Options(options)
        client = ClientOptions.from_options(opts, need_admin=False)
        lowered = [f.name.lower() for f in schema.fields]
        columns: dict[str, int] = {}
        for name, types in _COLUMNS.items():
            if name not in lowered:
                continue
            index = lowered.index(name)
            data_type = schema.fields[index].dataType
            if not isinstance(data_type, types):
                raise PulsarOptionError("the pulsar sink's %r column must be %s, not %s" % (
                    schema.fields[index].name, " or ".join(t.typeName() for t in types), data_type.simpleString()))
            if isinstance(data_type, MapType) and not (isinstance(data_type.keyType, StringType)
                                                       and isinstance(data_type.valueType, StringType)):
                raise PulsarOptionError("the pulsar sink's 'properties' column must be map<string,string>, not %s"
                                        % data_type.simpleString())
            columns[name] = index
        if "value" not in columns:
            raise PulsarOptionError("the pulsar sink needs a 'value' column (binary or string) holding the "
                                    "messages; the data has columns %s" % [f.name for f in schema.fields])
        topic = opts.get_str("topic")
        if topic is not None:
            try:
                topic = full_topic_name(topic)
            except PulsarException as exc:
                raise PulsarOptionError("option 'topic': %s" % exc) from None
        elif "topic" not in columns:
            raise PulsarOptionError("the pulsar sink needs option 'topic' or a 'topic' column")
        kwargs = dict(PRODUCER_DEFAULTS)
        kwargs.update(pass_through(opts, PRODUCER_PREFIX, Client.create_producer, skip=("producer_name",)))
        return cls(
            client=client,
            topic=topic,
            columns=columns,
            producer_kwargs=kwargs,
            producer_name=opts.get_str("producerName"),
        )


@dataclass
class PulsarCommitMessage(WriterCommitMessage):
    """What one task stored: messages in all and per topic."""

    messages: int = 0
    topics: dict = field(default_factory=dict)


class _Outcomes:
    """The broker's answers to a task's sends."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acknowledged = 0
        self.failures: list[str] = []

    def callback(self, result: Any, _message_id: Any) -> None:
        if result == 0:  # Result.Ok
            with self.lock:
                self.acknowledged += 1
        else:
            with self.lock:
                self.failures.append(str(result))


def _task_ids() -> tuple[int, int]:
    """(the task's partition, the micro-batch id or 0) of the running Spark task."""
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        return 0, 0
    batch = context.getLocalProperty("streaming.sql.batchId")
    return context.partitionId(), int(batch) if batch else 0


def produce_batches(config: SinkConfig, iterator: Iterator[pa.RecordBatch]) -> PulsarCommitMessage:
    """Send every row of the task and wait for the broker's acknowledgements; raise if any failed."""
    partition, batch_id = _task_ids()
    client = client_for(config.client)
    producers: dict[str, Producer] = {}
    outcomes = _Outcomes()
    callback = outcomes.callback
    counts: dict[str, int] = {}
    sent = 0
    cols = config.columns
    named = config.producer_name is not None
    sequence = batch_id << 32
    full_names: dict[str, str] = {}

    def producer_of(topic: str) -> Producer:
        producer = producers.get(topic)
        if producer is None:
            kwargs = dict(config.producer_kwargs)
            if named:
                kwargs["producer_name"] = "%s-%d" % (config.producer_name, partition)
            try:
                producer = producers[topic] = client.create_producer(topic, **kwargs)
            except PulsarException:
                drop_client(config.client)
                raise
        return producer

    try:
        for batch in iterator:
            n = batch.num_rows
            if not n:
                continue
            value = batch.column(cols["value"])
            if pa.types.is_string(value.type) or pa.types.is_large_string(value.type):
                value = value.cast(pa.large_binary() if pa.types.is_large_string(value.type) else pa.binary())
            values = value.to_pylist()
            keys = batch.column(cols["key"]).to_pylist() if "key" in cols else None
            props = batch.column(cols["properties"]).to_pylist() if "properties" in cols else None
            events = None
            if "event_time" in cols:
                events = pc.cast(batch.column(cols["event_time"]).cast(pa.timestamp("us", tz="UTC")), pa.int64())
                events = [None if us is None else us // 1000 for us in events.to_pylist()]
            topics = batch.column(cols["topic"]).to_pylist() if "topic" in cols else None
            sequences = batch.column(cols["sequence_id"]).to_pylist() if "sequence_id" in cols else None
            default = producer_of(config.topic) if config.topic is not None and topics is None else None
            default_topic = config.topic or ""
            for i in range(n):
                body = values[i]
                if body is None:
                    raise PulsarSinkError("the pulsar sink's 'value' column is null in a row")
                if default is not None:
                    producer, row_topic = default, default_topic
                else:
                    named_topic = topics[i] if topics is not None else None
                    topic = config.topic
                    if named_topic:  # (each name checked and made full once per task)
                        topic = full_names.get(named_topic) or full_names.setdefault(
                            named_topic, full_topic_name(named_topic))
                    if topic is None:
                        raise PulsarSinkError("a row has no topic (null 'topic' column and no 'topic' option)")
                    producer, row_topic = producer_of(topic), topic
                kwargs: dict[str, Any] = {}
                if keys is not None and keys[i] is not None:
                    kwargs["partition_key"] = keys[i]
                if props is not None and props[i]:
                    kwargs["properties"] = dict(props[i])
                if events is not None and events[i] is not None and events[i] > 0:
                    kwargs["event_timestamp"] = events[i]
                if sequences is not None and sequences[i] is not None:
                    kwargs["sequence_id"] = sequences[i]
                elif named:
                    kwargs["sequence_id"] = sequence + sent + 1  # (from 1: 0 means "assign one", as officially)
                producer.send_async(body, callback, **kwargs)
                sent += 1
                counts[row_topic] = counts.get(row_topic, 0) + 1
        for producer in producers.values():
            producer.flush()
    finally:
        for producer in producers.values():
            try:
                producer.close()
            except PulsarException:
                pass
    with outcomes.lock:
        failures = list(outcomes.failures)
        acknowledged = outcomes.acknowledged
    if failures or acknowledged != sent:
        raise PulsarSinkError("pulsar sink: %d of %d messages were not acknowledged (%s)" % (
            sent - acknowledged, sent, ", ".join(sorted(set(failures))) or "no answer"))
    return PulsarCommitMessage(messages=sent, topics=counts)


def _log_commit(what: str, messages: list[Any]) -> None:
    total = sum(m.messages for m in messages if isinstance(m, PulsarCommitMessage))
    logger.info("pulsar sink: %s stored %d messages in %d tasks", what, total, len(messages))


class PulsarWriter(DataSourceArrowWriter):
    """Batch sink: ``df.write.format("pulsar")``."""

    def __init__(self, config: SinkConfig) -> None:
        self.config = config

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PulsarCommitMessage:
        return produce_batches(self.config, iterator)

    def commit(self, messages: list[Any]) -> None:
        _log_commit("job", messages)

    def abort(self, messages: list[Any]) -> None:
        logger.warning("pulsar sink: job aborted; messages the broker stored stay stored (at-least-once)")


class PulsarStreamWriter(DataSourceStreamArrowWriter):
    """Streaming sink: ``df.writeStream.format("pulsar")``."""

    def __init__(self, config: SinkConfig) -> None:
        self.config = config

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PulsarCommitMessage:
        return produce_batches(self.config, iterator)

    def commit(self, messages: list[Any], batchId: int) -> None:
        _log_commit("micro-batch %d" % batchId, messages)

    def abort(self, messages: list[Any], batchId: int) -> None:
        logger.warning("pulsar sink: micro-batch %d aborted; messages the broker stored stay stored and the "
                       "batch's retry sends them again (at-least-once; producerName with broker deduplication "
                       "stores them once)", batchId)
