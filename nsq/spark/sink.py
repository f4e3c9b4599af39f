"""The `nsq` sink: every Spark task opens its own connection(s) to nsqd, turns
the Arrow record batches it is given into MPUB commands cut by count and by
bytes, keeps a few of them in flight per connection, and returns only when
nsqd has answered OK to every one. Any error fails the task (and so the job
or the micro-batch): delivery is at least once, since Spark may run a task
again after some of its MPUBs were accepted.
"""
from __future__ import annotations

import bisect
import collections
import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import BinaryType, StringType, StructType

from msgengine.correlator import Pending

from nsq import codec
from nsq.config import Config
from nsq.conn import Connection
from nsq.errors import Error
from nsq.names import valid_topic_name
from nsq.spark._options import NsqOptionError, Options, check_topic_option, connection_kwargs, discover, nsqd_addresses

logger = logging.getLogger(__name__)

OK = b"OK"
#: nsqd's --max-body-size default is 5 MiB; one MPUB stays well under it by default.
DEFAULT_MPUB_MAX_BYTES = 1024 * 1024
DEFAULT_MPUB_MAX_COUNT = 5000
DEFAULT_PIPELINE = 4


class NsqPublishError(Error):
    """nsqd refused or did not answer a publish from a Spark task."""


@dataclass(frozen=True)
class SinkConfig:
    """Everything a task needs, checked on the driver and pickled to executors."""

    topic: str | None
    body_index: int
    body_is_string: bool
    topic_index: int | None
    nsqd: tuple[tuple[str, int], ...]
    lookupd: tuple[str, ...]
    lookupd_timeout: float
    conn_kwargs: Mapping[str, Any]  # pickled to executors: the Config is built where it is used

    @property
    def connection(self) -> Config:
        return Config.from_kwargs(self.conn_kwargs)
    mpub_max_count: int
    mpub_max_bytes: int
    pipeline: int
    publish_timeout: float

    @classmethod
    def from_options(cls, options: Mapping[str, Any], schema: StructType) -> "SinkConfig":
        opts = Options(options)
        names = [f.name for f in schema.fields]
        lowered = [n.lower() for n in names]

        body_name = opts.get_str("body_column") or "body"
        if body_name.lower() not in lowered:
            raise NsqOptionError(
                "the nsq sink needs a %r column (binary or string) holding the message bodies; "
                "the data has columns %s" % (body_name, names)
            )
        body_index = lowered.index(body_name.lower())
        body_type = schema.fields[body_index].dataType
        if not isinstance(body_type, (BinaryType, StringType)):
            raise NsqOptionError(
                "the nsq sink's %r column must be binary or string, not %s" % (names[body_index], body_type.simpleString())
            )

        topic = opts.get_str("topic")
        if topic is not None:
            check_topic_option(topic)
        topic_name = opts.get_str("topic_column") or "topic"
        topic_index = lowered.index(topic_name.lower()) if topic_name.lower() in lowered else None
        if topic_index is not None and not isinstance(schema.fields[topic_index].dataType, StringType):
            raise NsqOptionError(
                "the nsq sink's %r column must be a string (the topic of each row), not %s"
                % (names[topic_index], schema.fields[topic_index].dataType.simpleString())
            )
        if topic is None and topic_index is None:
            raise NsqOptionError("the nsq sink needs option 'topic' or a %r column" % topic_name)

        nsqd = nsqd_addresses(opts.get_list("nsqd_tcp_addresses"))
        lookupd = opts.get_list("lookupd_http_addresses")
        if not nsqd and not lookupd:
            raise NsqOptionError("the nsq sink needs option 'nsqd_tcp_addresses' or 'lookupd_http_addresses'")

        max_bytes = opts.get_int("mpub_max_bytes", DEFAULT_MPUB_MAX_BYTES, minimum=1024)
        return cls(
            topic=topic,
            body_index=body_index,
            body_is_string=isinstance(body_type, StringType),
            topic_index=topic_index,
            nsqd=tuple(nsqd),
            lookupd=tuple(lookupd),
            lookupd_timeout=opts.get_int("lookupd_timeout_ms", 5000, minimum=1) / 1000.0,
            conn_kwargs=connection_kwargs(opts),
            mpub_max_count=opts.get_int("mpub_max_count", DEFAULT_MPUB_MAX_COUNT, minimum=1),
            mpub_max_bytes=max_bytes,
            pipeline=opts.get_int("mpub_pipeline", DEFAULT_PIPELINE, minimum=1),
            publish_timeout=opts.get_int("publish_timeout_ms", 30000, minimum=1) / 1000.0,
        )


@dataclass
class NsqCommitMessage(WriterCommitMessage):
    """What one task published: messages, body bytes, MPUB commands, per topic counts."""

    messages: int = 0
    bytes: int = 0
    mpubs: int = 0
    topics: dict = field(default_factory=dict)


class _Link:
    """One connection with up to ``depth`` MPUBs awaiting nsqd's answer."""

    def __init__(self, conn: Connection, depth: int, timeout: float) -> None:
        self.conn = conn
        self.depth = depth
        self.timeout = timeout
        self.outstanding: collections.deque[tuple[Pending, int]] = collections.deque()

    def send(self, data: bytes, count: int) -> None:
        while len(self.outstanding) >= self.depth:
            self.wait_oldest()
        waiter = Pending(event=threading.Event())
        self.conn.send_request(data, waiter)
        self.outstanding.append((waiter, count))

    def wait_oldest(self) -> None:
        waiter, count = self.outstanding.popleft()
        if not waiter.event.wait(self.timeout):
            raise NsqPublishError(
                "nsqd %s did not answer an MPUB of %d messages within %.1fs; they may or may not be published"
                % (self.conn.id, count, self.timeout)
            )
        result = waiter.result
        if isinstance(result, BaseException):
            raise NsqPublishError("MPUB of %d messages to nsqd %s failed: %s" % (count, self.conn.id, result)) from result
        if result != OK:
            raise NsqPublishError("nsqd %s answered an MPUB with %r" % (self.conn.id, bytes(result)[:100]))

    def drain(self) -> None:
        while self.outstanding:
            self.wait_oldest()


class Publisher:
    """Publishes Arrow record batches for one task; use as a context manager."""

    def __init__(self, config: SinkConfig) -> None:
        self.config = config
        self.links: list[_Link] = []
        self._next = 0
        self.result = NsqCommitMessage()

    def __enter__(self) -> "Publisher":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def targets(self) -> list[tuple[str, int]]:
        cfg = self.config
        if cfg.nsqd:
            return list(cfg.nsqd)
        found = discover(list(cfg.lookupd), cfg.topic, cfg.lookupd_timeout, fall_back_to_nodes=True)
        if not found:
            raise NsqPublishError("nsqlookupd %s knows no nsqd to publish to" % (", ".join(cfg.lookupd),))
        return found

    def open(self) -> None:
        """Connect to every target nsqd (done on the first publish: an empty task connects to nothing)."""
        cfg = self.config
        try:
            for host, port in self.targets():
                conn = Connection(host, port, cfg.connection)
                self.links.append(_Link(conn, cfg.pipeline, cfg.publish_timeout))
                conn.connect()
        except BaseException:
            self.close()
            self.links = []
            raise

    def close(self) -> None:
        for link in self.links:
            link.conn.close()

    def _link(self) -> _Link:
        if not self.links:
            self.open()
        link = self.links[self._next % len(self.links)]
        self._next += 1
        return link

    def write_batch(self, batch: pa.RecordBatch) -> None:
        cfg = self.config
        if batch.num_rows == 0:
            return
        body = batch.column(cfg.body_index)
        if body.null_count:
            raise NsqPublishError("the body column holds %d null value(s); nsq messages need a body" % body.null_count)
        if cfg.body_is_string:
            body = body.cast(pa.large_binary() if pa.types.is_large_string(body.type) else pa.binary())
        for topic, bodies in self._by_topic(batch, body):
            self._publish(topic, bodies)

    def _by_topic(self, batch: pa.RecordBatch, body: pa.Array) -> list[tuple[str, pa.Array]]:
        cfg = self.config
        if cfg.topic_index is None:
            return [(cfg.topic, body)]  # type: ignore[list-item]
        topics = batch.column(cfg.topic_index)
        if topics.null_count:
            if cfg.topic is None:
                raise NsqPublishError("%d row(s) have a null topic and no 'topic' option gives a default" % topics.null_count)
            topics = pc.fill_null(topics, cfg.topic)
        names = pc.unique(topics).to_pylist()
        for name in names:
            if not valid_topic_name(name):
                raise NsqPublishError("a row's topic %r is not a valid nsq topic name" % (name,))
        if len(names) == 1:
            return [(names[0], body)]
        return [(name, body.filter(pc.equal(topics, name))) for name in names]

    def _publish(self, topic: str, body: pa.Array) -> None:
        cfg = self.config
        lengths = pc.binary_length(body)
        stats = pc.min_max(lengths).as_py()
        if stats["min"] == 0:
            empty = pc.sum(pc.equal(lengths, 0)).as_py()
            raise NsqPublishError("%d row(s) have an empty body; nsqd refuses empty messages" % empty)
        values = body.to_pylist()
        n = len(values)
        total = pc.sum(lengths).as_py()
        # MPUB body: 4 bytes of count, then 4 bytes of size before each message.
        budget = cfg.mpub_max_bytes - 4
        step = cfg.mpub_max_count
        if (stats["max"] + 4) * min(step, n) <= budget:
            cuts = list(range(step, n, step)) + [n]  # the count limit always binds first
        else:
            ends = pc.cumulative_sum(pc.add(lengths.cast(pa.int64()), 4)).to_pylist()
            cuts = []
            start = 0
            while start < n:
                base = ends[start - 1] if start else 0
                stop = bisect.bisect_right(ends, base + budget, lo=start)
                stop = min(max(stop, start + 1), start + step, n)
                cuts.append(stop)
                start = stop
        start = 0
        for stop in cuts:
            self._link().send(codec.encode_mpub(topic, values[start:stop]), stop - start)
            start = stop
        self.result.mpubs += len(cuts)
        self.result.messages += n
        self.result.bytes += total
        self.result.topics[topic] = self.result.topics.get(topic, 0) + n

    def finish(self) -> NsqCommitMessage:
        """Wait for nsqd's answer to every MPUB still in flight; raise on any failure."""
        for link in self.links:
            link.drain()
        return self.result


def publish_batches(config: SinkConfig, batches: Iterator[pa.RecordBatch]) -> NsqCommitMessage:
    with Publisher(config) as publisher:
        for batch in batches:
            publisher.write_batch(batch)
        return publisher.finish()


def _log_commit(what: str, messages: Sequence[Any]) -> None:
    total = sum(m.messages for m in messages if isinstance(m, NsqCommitMessage))
    logger.info("nsq sink: %s published %d messages in %d tasks", what, total, len(messages))


class NsqWriter(DataSourceArrowWriter):
    """Batch sink: ``df.write.format("nsq")``."""

    def __init__(self, config: SinkConfig) -> None:
        self.config = config

    def write(self, iterator: Iterator[pa.RecordBatch]) -> NsqCommitMessage:
        return publish_batches(self.config, iterator)

    def commit(self, messages: list[Any]) -> None:
        _log_commit("job", messages)

    def abort(self, messages: list[Any]) -> None:
        logger.warning(
            "nsq sink: job aborted; messages already accepted by nsqd stay published (at-least-once)"
        )


class NsqStreamWriter(DataSourceStreamArrowWriter):
    """Streaming sink: ``df.writeStream.format("nsq")``."""

    def __init__(self, config: SinkConfig) -> None:
        self.config = config

    def write(self, iterator: Iterator[pa.RecordBatch]) -> NsqCommitMessage:
        return publish_batches(self.config, iterator)

    def commit(self, messages: list[Any], batchId: int) -> None:
        _log_commit("micro-batch %d" % batchId, messages)

    def abort(self, messages: list[Any], batchId: int) -> None:
        logger.warning(
            "nsq sink: micro-batch %d aborted; messages already accepted by nsqd stay published and the "
            "batch's retry publishes them again (at-least-once)", batchId,
        )
