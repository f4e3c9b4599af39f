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

With ``deliveryGuarantee=exactly-once`` a task sends its rows in a transaction of its
own (made at its first row, ``transactionTimeoutMs``), waits for every
acknowledgement and leaves it open: its commit message carries the transaction
(``eolog.TaskTxn``), and the driver commits them all, or aborts them
(``eocommit``; for streams through the log topic). A failing task aborts its own.
"""
from __future__ import annotations

import logging
import threading
import time
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
from pulsarfast.spark import eocommit
from pulsarfast.spark.admin import Admin
from pulsarfast.spark.eolog import TaskTxn, drop_log, log_for
from pulsarfast.spark.options import (
    PRODUCER_PREFIX,
    ClientOptions,
    DeliverySettings,
    Options,
    PulsarOptionError,
    pass_through,
)
from pulsarfast.spark.reading import client_for, drop_client
from pulsarfast.transactions.transaction import Transaction

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
    delivery: DeliverySettings = DeliverySettings()

    @property
    def exactly_once(self) -> bool:
        return self.delivery.exactly_once

    @classmethod
    def from_options(cls, options: Mapping[str, Any], schema: StructType, streaming: bool = False) -> "SinkConfig":
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
        delivery = DeliverySettings.from_options(opts, topic)
        if delivery.exactly_once and streaming:
            if client.admin_url is None:
                raise PulsarOptionError("the pulsar sink with deliveryGuarantee=exactly-once needs option "
                                        "'admin_url' (http://host:8080) for a stream: a restarted query asks it "
                                        "whether an earlier attempt's transactions were aborted")
            if delivery.log_topic is None:
                raise PulsarOptionError("the pulsar sink with deliveryGuarantee=exactly-once and no 'topic' option "
                                        "needs option 'exactlyOnceLogTopic' for a stream")
        kwargs = dict(PRODUCER_DEFAULTS)
        kwargs.update(pass_through(opts, PRODUCER_PREFIX, Client.create_producer, skip=("producer_name",)))
        return cls(
            client=client,
            topic=topic,
            columns=columns,
            producer_kwargs=kwargs,
            producer_name=opts.get_str("producerName"),
            delivery=delivery,
        )


@dataclass
class PulsarCommitMessage(WriterCommitMessage):
    """What one task stored: messages in all and per topic; with exactly-once, the open transaction
    that holds them (None: no rows) and the streaming query's id and micro-batch (None: a batch job)."""

    messages: int = 0
    topics: dict = field(default_factory=dict)
    txn: TaskTxn | None = None
    query_id: str | None = None
    batch_id: int | None = None


class _Outcomes:
    """The broker's answers to a task's sends."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acknowledged = 0
        self.failures: list[str] = []
        self._expected = -1
        self._all_in = threading.Event()

    def callback(self, result: Any, _message_id: Any) -> None:
        with self.lock:
            if result == 0:  # Result.Ok
                self.acknowledged += 1
            else:
                self.failures.append(str(result))
            if self.acknowledged + len(self.failures) == self._expected:
                self._all_in.set()

    def wait_for(self, sent: int, timeout: float) -> None:
        """Wait (up to timeout seconds) until sent sends have their answer. (A producer's flush()
        does not cover the sends of a transaction still waiting for their partition's registration.)"""
        with self.lock:
            self._expected = sent
            if self.acknowledged + len(self.failures) >= sent:
                return
        self._all_in.wait(timeout)


def _task_ids() -> tuple[int, int, str | None, int | None]:
    """(the task's partition, the micro-batch id or 0, the streaming query's id and micro-batch
    id, or None) of the running Spark task."""
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        return 0, 0, None, None
    batch = context.getLocalProperty("streaming.sql.batchId")
    query = context.getLocalProperty("sql.streaming.queryId")
    return context.partitionId(), int(batch) if batch else 0, query or None, int(batch) if batch else None


def produce_batches(config: SinkConfig, iterator: Iterator[pa.RecordBatch]) -> PulsarCommitMessage:
    """Send every row of the task and wait for the broker's acknowledgements; raise if any failed.
    With exactly-once, in a transaction left open for the driver (aborted if the task fails)."""
    partition, batch_id, query_id, stream_batch = _task_ids()
    client = client_for(config.client)
    producers: dict[str, Producer] = {}
    outcomes = _Outcomes()
    callback = outcomes.callback
    exactly_once = config.exactly_once
    txn: Transaction | None = None
    deadline_ms = 0
    send_kwargs: dict[str, Any] = {}
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
            if exactly_once and txn is None:
                deadline_ms = int(time.time() * 1000) + config.delivery.transaction_timeout_ms
                txn = client.new_transaction(timeout_ms=config.delivery.transaction_timeout_ms)
                send_kwargs["transaction"] = txn
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
                kwargs: dict[str, Any] = dict(send_kwargs) if send_kwargs else {}
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
        outcomes.wait_for(sent, client.operation_timeout)
        with outcomes.lock:
            failures = list(outcomes.failures)
            acknowledged = outcomes.acknowledged
        if failures or acknowledged != sent:
            raise PulsarSinkError("pulsar sink: %d of %d messages were not acknowledged (%s)" % (
                sent - acknowledged, sent, ", ".join(sorted(set(failures))) or "no answer"))
    except BaseException:
        if txn is not None:
            _abort_quietly(txn)
        raise
    finally:
        for producer in producers.values():
            try:
                producer.close()
            except PulsarException:
                pass
    task_txn = None
    if txn is not None:
        most, least = txn.id
        # (the partitions registered in it: each one got messages, all acknowledged)
        partitions = tuple(p for topic in counts for p in client.get_topic_partitions(topic) if txn.partition_ready(p))
        task_txn = TaskTxn(most, least, partitions, sent, deadline_ms)
    return PulsarCommitMessage(messages=sent, topics=counts, txn=task_txn, query_id=query_id, batch_id=stream_batch)


def _abort_quietly(txn: Transaction) -> None:
    """A failing task's abort of its transaction (best effort: else its coordinator aborts it at its timeout)."""
    try:
        txn.abort()
    except Exception as exc:  # (the task's own error is the one to report)
        logger.warning("pulsar sink: the failed task's transaction %s was not aborted (%s); its coordinator "
                       "aborts it at its timeout", txn.id, exc)


def _log_commit(what: str, messages: list[Any]) -> None:
    total = sum(m.messages for m in messages if isinstance(m, PulsarCommitMessage))
    logger.info("pulsar sink: %s stored %d messages in %d tasks", what, total, len(messages))


def prepare_output(config: SinkConfig) -> None:
    """On the driver, before a job's or a query's tasks write: with exactly-once, the output
    topic's partitions made ready for transactional messages from many producers at once
    (``eocommit.prepare_partitions``). Topics named by a 'topic' column are not known here."""
    if not config.exactly_once or config.topic is None:
        return
    admin = None
    if config.client.admin_url is not None:
        admin = Admin(config.client.admin_settings(), config.client.authentication())
    prepared = eocommit.prepare_partitions(client_for(config.client), admin, config.topic)
    if prepared:
        logger.info("pulsar sink: the transaction buffers of %s took their first snapshot", ", ".join(prepared))


def _txns(messages: list[Any]) -> list[TaskTxn]:
    return [m.txn for m in messages if isinstance(m, PulsarCommitMessage) and m.txn is not None]


def _query_id(messages: list[Any]) -> str | None:
    return next((m.query_id for m in messages if isinstance(m, PulsarCommitMessage) and m.query_id), None)


class PulsarWriter(DataSourceArrowWriter):
    """Batch sink: ``df.write.format("pulsar")``."""

    def __init__(self, config: SinkConfig) -> None:
        self.config = config

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PulsarCommitMessage:
        return produce_batches(self.config, iterator)

    def commit(self, messages: list[Any]) -> None:
        if self.config.exactly_once:
            eocommit.commit_job(client_for(self.config.client), _txns(messages))
        _log_commit("job", messages)

    def abort(self, messages: list[Any]) -> None:
        if self.config.exactly_once:
            eocommit.abort_job(client_for(self.config.client), _txns(messages))
            logger.warning("pulsar sink: job aborted; its transactions aborted (exactly-once)")
            return
        logger.warning("pulsar sink: job aborted; messages the broker stored stay stored (at-least-once)")


class PulsarStreamWriter(DataSourceStreamArrowWriter):
    """Streaming sink: ``df.writeStream.format("pulsar")``."""

    def __init__(self, config: SinkConfig) -> None:
        self.config = config

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PulsarCommitMessage:
        return produce_batches(self.config, iterator)

    def commit(self, messages: list[Any], batchId: int) -> None:
        if self.config.exactly_once:
            logger.info("pulsar sink: %s", self._end_micro_batch(messages, batchId, eocommit.commit_micro_batch))
        _log_commit("micro-batch %d" % batchId, messages)

    def abort(self, messages: list[Any], batchId: int) -> None:
        if self.config.exactly_once:
            logger.warning("pulsar sink: %s", self._end_micro_batch(messages, batchId, eocommit.abort_micro_batch))
            return
        logger.warning("pulsar sink: micro-batch %d aborted; messages the broker stored stay stored and the "
                       "batch's retry sends them again (at-least-once; producerName with broker deduplication "
                       "stores them once)", batchId)

    def _end_micro_batch(self, messages: list[Any], batch: int, how: Any) -> str:
        """Commit or abort (how) an exactly-once micro-batch through the query's log records."""
        config = self.config
        client = client_for(config.client)
        txns = _txns(messages)
        query = _query_id(messages)
        if query is None:  # (no task said which query: Spark gives every streaming task its query's id)
            if not txns:
                return "micro-batch %d: nothing written" % batch
            raise eocommit.ExactlyOnceError("pulsar sink (exactly-once): micro-batch %d's tasks did not say "
                                            "their streaming query's id: its transactions stay open until "
                                            "their timeout aborts them" % batch)
        assert config.delivery.log_topic is not None
        try:
            log = log_for(config.client, config.delivery.log_topic)
            return str(how(client, lambda: Admin(config.client.admin_settings(), config.client.authentication()),
                           log, query, batch, txns))
        except PulsarException:
            drop_log(config.client, config.delivery.log_topic)
            raise
