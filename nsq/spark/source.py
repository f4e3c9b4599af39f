# The `nsq` streaming source. Spark keeps one stream reader object on the
# driver for the life of a query; that object owns the consumer: connections
# subscribed to topic/channel, the buffer of received messages, and the
# messages of planned batches. Micro-batch data travels to the executors
# inside the pickled input partitions. A message is finished (FIN, on the
# connection that received it) only in commit(), which Spark calls for batch N
# when it plans batch N+1; the source therefore asks for one trailing empty
# batch after a batch that carried data. Messages held meanwhile are TOUCHed.
# Offsets name the reader's session, so that a restarted query does not take
# a dead run's batches for its own: those messages come back from nsqd.
from __future__ import annotations

import collections
import logging
import math
import threading
import time
import uuid
from dataclasses import dataclass
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

from .. import codec
from ..client import reconnect_delay
from ..conn import Connection
from ..errors import ConnectionClosedError, Error
from ..message import Message
from ._options import (
    NsqOptionError,
    Options,
    check_channel_option,
    check_topic_option,
    connection_kwargs,
    discover,
    nsqd_addresses,
)

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

DEFAULT_MAX_IN_FLIGHT = 20000
DEFAULT_MAX_MESSAGES_PER_BATCH = 10000


@dataclass(frozen=True)
class SourceConfig:
    topic: str
    channel: str
    nsqd: tuple[tuple[str, int], ...]
    lookupd: tuple[str, ...]
    lookupd_timeout: float
    lookupd_poll_interval: float
    max_in_flight: int
    max_messages_per_batch: int
    max_bytes_per_batch: int | None
    num_partitions: int
    msg_timeout: float | None
    touch_interval: float | None
    available_now_idle: float
    max_reconnect_delay: float
    conn_kwargs: Mapping[str, Any]

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> "SourceConfig":
        opts = Options(options)
        topic = check_topic_option(opts.required("topic", "the nsq topic to read"))
        channel = check_channel_option(opts.required("channel", "the nsq channel to consume as"))
        nsqd = nsqd_addresses(opts.get_list("nsqd_tcp_addresses"))
        lookupd = opts.get_list("lookupd_http_addresses")
        if not nsqd and not lookupd:
            raise NsqOptionError("the nsq source needs option 'nsqd_tcp_addresses' or 'lookupd_http_addresses'")
        max_in_flight = opts.get_int("max_in_flight", DEFAULT_MAX_IN_FLIGHT, minimum=1)
        max_bytes = opts.get_int("max_bytes_per_batch", 0, minimum=0)
        msg_timeout_ms = opts.get_int("msg_timeout_ms", 0, minimum=0)
        touch_ms = opts.get_int("touch_interval_ms", 0, minimum=0)
        conn_kwargs = connection_kwargs(opts)
        if msg_timeout_ms:
            conn_kwargs["msg_timeout"] = msg_timeout_ms / 1000.0
        return cls(
            topic=topic,
            channel=channel,
            nsqd=tuple(nsqd),
            lookupd=tuple(lookupd),
            lookupd_timeout=opts.get_int("lookupd_timeout_ms", 5000, minimum=1) / 1000.0,
            lookupd_poll_interval=opts.get_int("lookupd_poll_interval_ms", 30000, minimum=100) / 1000.0,
            max_in_flight=max_in_flight,
            max_messages_per_batch=opts.get_int(
                "max_messages_per_batch", min(DEFAULT_MAX_MESSAGES_PER_BATCH, max_in_flight), minimum=1
            ),
            max_bytes_per_batch=max_bytes or None,
            num_partitions=opts.get_int("num_partitions", 2, minimum=1),
            msg_timeout=msg_timeout_ms / 1000.0 if msg_timeout_ms else None,
            touch_interval=touch_ms / 1000.0 if touch_ms else None,
            available_now_idle=opts.get_int("available_now_idle_ms", 2000, minimum=0) / 1000.0,
            max_reconnect_delay=opts.get_int("max_reconnect_delay_ms", 30000, minimum=100) / 1000.0,
            conn_kwargs=conn_kwargs,
        )


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


class _Chunk:
    """Messages handed out by one latestOffset() call: sequence numbers [start, end)."""

    __slots__ = ("start", "end", "items")

    def __init__(self, start: int, end: int, items: list[tuple[Connection, Message]]) -> None:
        self.start = start
        self.end = end
        self.items = items


class Consumer:
    """Connections subscribed to one topic/channel, and every message they
    received and that is not finished yet (buffered, held back, or in a chunk)."""

    def __init__(self, config: SourceConfig) -> None:
        self.config = config
        self.cond = threading.Condition(threading.RLock())  # guards the message structures
        self._io_lock = threading.Lock()  # orders FIN / TOUCH / REQ writes (never taken under cond)
        self.buffer: collections.deque[tuple[Connection, Message]] = collections.deque()
        #: messages received after the availableNow cut-off: never batched, returned to nsqd at the end
        self.held: list[tuple[Connection, Message]] = []
        self.chunks: collections.deque[_Chunk] = collections.deque()
        self.conns: dict[tuple[str, int], list[Connection]] = {}
        self._failures: dict[tuple[str, int], int] = {}
        self._retry_at: dict[tuple[str, int], float] = {}
        self._names: dict[Connection, str] = {}
        self.closing = threading.Event()
        self._threads: list[threading.Thread] = []
        self.received = 0
        self.finished = 0
        self.lost = 0  # finished in Spark, but their connection closed before FIN: nsqd redelivers them
        self._touch_interval: float | None = config.touch_interval
        self.cutoff_ns: int | None = None

    # -- connections ----------------------------------------------------------

    def start(self) -> None:
        cfg = self.config
        if cfg.nsqd:
            targets = list(cfg.nsqd)
        else:
            targets = discover(list(cfg.lookupd), cfg.topic, cfg.lookupd_timeout, fall_back_to_nodes=False)
        errors = []
        for target in targets:
            self.conns.setdefault(target, [])  # the maintenance thread retries those that fail now
            try:
                self._open_target(target)
            except Exception as exc:
                errors.append("%s:%d: %s" % (target[0], target[1], exc))
                self._note_failure(target)
        if cfg.nsqd and not any(self.conns.values()):
            self.close(requeue=False)
            raise ConnectionError("the nsq source could not connect to any nsqd: %s" % "; ".join(errors))
        for err in errors:
            logger.warning("nsq source: %s (will retry)", err)
        self._spawn(self._maintain_loop, "nsq-spark-maintain")
        self._spawn(self._touch_loop, "nsq-spark-touch")

    def _spawn(self, fn: Any, name: str) -> None:
        thread = threading.Thread(target=fn, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _connect_one(self, target: tuple[str, int], rdy: int | None) -> Connection:
        cfg = self.config
        conn = Connection(target[0], target[1], **cfg.conn_kwargs)
        conn.message_sink = self._on_messages
        conn.connect()
        try:
            conn.subscribe(cfg.topic, cfg.channel)
        except BaseException:
            conn.close()
            raise
        with self.cond:
            if self.closing.is_set():
                conn.close()
                raise ConnectionClosedError("consumer is closing")
            self._names[conn] = conn.id
            self.conns.setdefault(target, []).append(conn)
        conn.on("close", self._on_close)
        if rdy is None:
            rdy = min(conn.max_rdy_count, cfg.max_in_flight)
        conn.send_rdy(rdy)
        if self._touch_interval is None:
            timeout_ms = conn.features.get("msg_timeout") or 60000
            self._touch_interval = max(0.2, timeout_ms / 1000.0 / 4)
        return conn

    def _open_target(self, target: tuple[str, int]) -> None:
        """Open enough connections to the nsqd to have max_in_flight messages
        in flight (each connection gets at most nsqd's max_rdy_count)."""
        cfg = self.config
        have = [c for c in self.conns.get(target, []) if c.is_connected()]
        have_rdy = sum(c.last_rdy for c in have)
        if not have:
            first = self._connect_one(target, None)
            have, have_rdy = [first], first.last_rdy
        while have_rdy < cfg.max_in_flight and not self.closing.is_set():
            conn = self._connect_one(target, min(have[0].max_rdy_count, cfg.max_in_flight - have_rdy))
            have_rdy += conn.last_rdy
        self._failures.pop(target, None)

    def _note_failure(self, target: tuple[str, int]) -> None:
        failures = self._failures.get(target, 0) + 1
        self._failures[target] = failures
        self._retry_at[target] = time.monotonic() + reconnect_delay(failures, self.config.max_reconnect_delay)

    def _on_close(self, conn: Connection) -> None:
        with self.cond:
            for conns in self.conns.values():
                if conn in conns:
                    conns.remove(conn)
                    break
            # Buffered messages of a dead connection cannot be finished: nsqd
            # gives them to another consumer, maybe to us again. Drop them.
            if any(c is conn for c, _ in self.buffer):
                self.buffer = collections.deque(item for item in self.buffer if item[0] is not conn)
            self.held = [item for item in self.held if item[0] is not conn]
        if not self.closing.is_set():
            logger.warning("nsq source: lost nsqd connection %s (%s)", conn.id, conn.close_error)

    def _maintain_loop(self) -> None:
        cfg = self.config
        next_lookup = 0.0
        while not self.closing.wait(0.5):
            if cfg.lookupd and time.monotonic() >= next_lookup:
                connected = any(c.is_connected() for cs in list(self.conns.values()) for c in cs)
                # ask often while no nsqd has the topic yet, then every lookupd_poll_interval
                next_lookup = time.monotonic() + (cfg.lookupd_poll_interval if connected else min(2.0, cfg.lookupd_poll_interval))
                try:
                    found = discover(list(cfg.lookupd), cfg.topic, cfg.lookupd_timeout, fall_back_to_nodes=False)
                    with self.cond:
                        for target in found:
                            self.conns.setdefault(target, [])
                except Exception as exc:
                    logger.warning("nsq source: nsqlookupd query failed: %s", exc)
            for target in list(self.conns):
                live = [c for c in self.conns.get(target, []) if c.is_connected()]
                if live and sum(c.last_rdy for c in live) >= cfg.max_in_flight:
                    continue
                if time.monotonic() < self._retry_at.get(target, 0.0):
                    continue
                try:
                    self._open_target(target)
                    logger.info("nsq source: connected to nsqd %s:%d", *target)
                except Exception as exc:
                    self._note_failure(target)
                    logger.warning("nsq source: cannot connect to nsqd %s:%d: %s", target[0], target[1], exc)

    # -- messages -------------------------------------------------------------

    def _on_messages(self, conn: Connection, messages: list[Message]) -> None:
        with self.cond:
            self.received += len(messages)
            self.buffer.extend([(conn, m) for m in messages])
            self.cond.notify_all()

    def buffered(self) -> int:
        return len(self.buffer)

    def wait_for_messages(self, timeout: float) -> bool:
        """Block until an eligible message is buffered (True) or timeout passes."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                self._hold_back_late()
                if self.buffer:
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self.cond.wait(remaining)

    def _hold_back_late(self) -> None:
        """With an availableNow cut-off, set aside messages nsqd accepted after it."""
        cutoff = self.cutoff_ns
        if cutoff is None or not self.buffer:
            return
        if all(m.timestamp <= cutoff for _, m in self.buffer):
            return
        keep: collections.deque[tuple[Connection, Message]] = collections.deque()
        for item in self.buffer:
            (keep if item[1].timestamp <= cutoff else self.held).append(item)
        self.buffer = keep

    def take(self, max_rows: int | None, max_bytes: int | None) -> list[tuple[Connection, Message]]:
        with self.cond:
            self._hold_back_late()
            buffer = self.buffer
            if max_bytes is None:
                count = len(buffer) if max_rows is None else min(max_rows, len(buffer))
                return [buffer.popleft() for _ in range(count)]
            items: list[tuple[Connection, Message]] = []
            size = 0
            while buffer and (max_rows is None or len(items) < max_rows):
                body_len = len(buffer[0][1].body)
                if items and size + body_len > max_bytes:
                    break
                items.append(buffer.popleft())
                size += body_len
            return items

    def add_chunk(self, chunk: _Chunk) -> None:
        with self.cond:
            self.chunks.append(chunk)

    def items_between(self, start: int, end: int) -> list[tuple[Connection, Message]]:
        with self.cond:
            items: list[tuple[Connection, Message]] = []
            for chunk in self.chunks:
                if chunk.start >= start and chunk.end <= end:
                    items.extend(chunk.items)
            return items

    def unfinished_through(self, seq: int) -> bool:
        """True when a chunk that ends at or before seq is not finished yet."""
        with self.cond:
            return bool(self.chunks) and self.chunks[0].end <= seq

    def finish_through(self, seq: int) -> int:
        """FIN every message of the chunks that end at or before seq."""
        with self._io_lock:
            with self.cond:
                items: list[tuple[Connection, Message]] = []
                while self.chunks and self.chunks[0].end <= seq:
                    items.extend(self.chunks.popleft().items)
            done = self._respond(items, "finish")
            with self.cond:
                self.finished += done
            return done

    def _respond(self, items: list[tuple[Connection, Message]], how: str) -> int:
        """FIN ("finish") or REQ without delay ("requeue") messages, one write per connection."""
        by_conn: dict[Connection, list[Message]] = {}
        for conn, message in items:
            by_conn.setdefault(conn, []).append(message)
        done = 0
        for conn, messages in by_conn.items():
            if not conn.is_connected():
                if how == "finish":
                    with self.cond:
                        self.lost += len(messages)
                    logger.warning(
                        "nsq source: %d processed messages cannot be finished: the connection to %s closed; "
                        "nsqd will deliver them again", len(messages), conn.id,
                    )
                continue
            conn.batching = True
            try:
                for message in messages:
                    if message.has_responded():
                        continue
                    if how == "finish":
                        message.finish()
                    else:
                        message.requeue(backoff=False, delay=0)
                    done += 1
            except Error as exc:
                logger.warning("nsq source: cannot %s messages on %s: %s", how, conn.id, exc)
            finally:
                conn.batching = False
                conn.flush()
        return done

    def requeue_held(self) -> int:
        """Give back at once the messages set aside after the availableNow cut-off."""
        with self._io_lock:
            with self.cond:
                items, self.held = self.held, []
            return self._respond(items, "requeue")

    def touch_all(self) -> int:
        """TOUCH every message received and not finished yet (buffered, held, in a chunk)."""
        with self._io_lock:
            with self.cond:
                items = list(self.buffer) + self.held + [item for chunk in self.chunks for item in chunk.items]
            by_conn: dict[Connection, list[Message]] = {}
            for conn, message in items:
                by_conn.setdefault(conn, []).append(message)
            touched = 0
            for conn, messages in by_conn.items():
                if not conn.is_connected():
                    continue
                try:
                    for message in messages:
                        conn.send(codec.encode_touch(message.id), flush=False)
                    conn.flush()
                    touched += len(messages)
                except Error as exc:
                    logger.warning("nsq source: cannot TOUCH messages on %s: %s", conn.id, exc)
            return touched

    def _touch_loop(self) -> None:
        while not self.closing.wait(self._touch_interval or 1.0):
            try:
                self.touch_all()
            except Exception:
                logger.exception("nsq source: TOUCH round failed")

    def name_of(self, conn: Connection) -> str:
        name = self._names.get(conn)
        if name is None:
            name = self._names[conn] = conn.id
        return name

    def close(self, requeue: bool = True) -> None:
        """Close every connection without finishing anything. With requeue, first
        give every unfinished message back (REQ, no delay) so that nsqd delivers
        it again at once instead of after its msg_timeout."""
        if self.closing.is_set():
            return
        self.closing.set()
        if requeue:
            with self.cond:
                items = list(self.buffer) + self.held + [item for chunk in self.chunks for item in chunk.items]
                self.buffer.clear()
                self.held = []
                self.chunks.clear()
            with self._io_lock:
                self._respond(items, "requeue")
        with self.cond:
            conns = [c for cs in self.conns.values() for c in cs]
            self.cond.notify_all()
        for conn in conns:
            if requeue and conn.is_connected():
                # nsqd answers CLS after the REQs before it: they are all taken back
                conn.close_gracefully(1.0)
            conn.close()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(2.0)


# --------------------------------------------------------------------------- partitions / executor side


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
