"""The exactly-once sink's log topic (``exactlyOnceLogTopic``): where a streaming
query's driver writes down, before it ends the transactions of micro-batch B, that
it is committing them (``committing``, with each transaction's id and the
partitions it wrote to), and after, that it did (``committed``). Records are JSON,
keyed by the query's id (the message key), so that a driver restarted after a
crash finds the last one of its query and knows how far the batch Spark runs
again had got (``eocommit`` decides from it).

Each process keeps one ``ExactlyOnceLog`` per (cluster, log topic): a reader from
the earliest record that it carries forward at each look-up, so a driver reads the
whole log once and then only what was added since. The log is kept by a durable
subscription that nothing acknowledges (``SUBSCRIPTION``): without one a topic
with no retention loses its records, and an inactive one is deleted.
"""
from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass
from typing import Any

from pulsarfast.base.results import PulsarException
from pulsarfast.client import Client
from pulsarfast.spark.admin import Admin
from pulsarfast.spark.options import ClientOptions
from pulsarfast.spark.positions import BEFORE_FIRST
from pulsarfast.spark.reading import client_for
from pulsarfast.wire.message import MessageId

logger = logging.getLogger(__name__)

#: the durable subscription that keeps the log's records (never acknowledged)
SUBSCRIPTION = "pulsarfast-spark-eo-log"
COMMITTING = "committing"
COMMITTED = "committed"


@dataclass(frozen=True)
class TaskTxn:
    """One task's transaction: its id, the partitions it wrote to, its message count, and when
    (epoch ms, by the task's clock, a little before the coordinator's) its coordinator aborts it
    unless it was ended."""

    most_bits: int
    least_bits: int
    partitions: tuple[str, ...]
    messages: int
    deadline_ms: int

    @property
    def id(self) -> tuple[int, int]:
        return (self.most_bits, self.least_bits)

    def __str__(self) -> str:
        return "(%d,%d)" % self.id

    def to_json(self) -> dict[str, Any]:
        return {"most": self.most_bits, "least": self.least_bits, "partitions": list(self.partitions),
                "messages": self.messages, "deadline_ms": self.deadline_ms}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "TaskTxn":
        return cls(int(data["most"]), int(data["least"]), tuple(str(p) for p in data.get("partitions", ())),
                   int(data.get("messages", 0)), int(data.get("deadline_ms", 0)))


@dataclass(frozen=True)
class LogRecord:
    """Where the commit of one micro-batch of one query is: ``committing`` or ``committed``."""

    query: str
    batch: int
    state: str
    txns: tuple[TaskTxn, ...]
    deadline_ms: int  # the earliest of the transactions' deadlines (0: none)

    def to_bytes(self) -> bytes:
        return json.dumps({"query": self.query, "batch": self.batch, "state": self.state,
                           "txns": [t.to_json() for t in self.txns], "deadline_ms": self.deadline_ms},
                          separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> "LogRecord | None":
        """The record, or None for a message that is not one (logged)."""
        try:
            value = json.loads(data)
            return cls(str(value["query"]), int(value["batch"]), str(value["state"]),
                       tuple(TaskTxn.from_json(t) for t in value.get("txns", ())), int(value.get("deadline_ms", 0)))
        except (ValueError, KeyError, TypeError) as exc:
            logger.warning("pulsar sink: a message of the exactly-once log is not a record (%s): %r", exc, data[:200])
            return None


class ExactlyOnceLog:
    """The log topic of one cluster, as this process reads and appends to it."""

    def __init__(self, client: Client, topic: str, admin: Admin) -> None:
        self.topic = topic
        self._lock = threading.Lock()
        self._last: dict[str, LogRecord] = {}
        self._producer = client.create_producer(topic, batching_enabled=False)
        try:
            # (made by the admin API: a consumer subscribed and closed at once would be handed records for nothing)
            admin.create_subscription(topic, SUBSCRIPTION, BEFORE_FIRST)
            self._reader = client.create_reader(topic, MessageId.earliest)
        except BaseException:
            self._producer.close()
            raise
        self._read_timeout_ms = int(client.operation_timeout * 1000)
        self.records_read = 0

    def last(self, query: str) -> LogRecord | None:
        """The query's newest record (reading the records added since the last look-up)."""
        with self._lock:
            while self._reader.has_message_available():
                message = self._reader.read_next(timeout_millis=self._read_timeout_ms)
                self.records_read += 1
                record = LogRecord.from_bytes(message.data())
                if record is not None:
                    self._last[record.query] = record
            return self._last.get(query)

    def append(self, record: LogRecord) -> None:
        """Write record; returns once the broker has stored it."""
        self._producer.send(record.to_bytes(), partition_key=record.query)

    def close(self) -> None:
        for closable in (self._reader, self._producer):
            try:
                closable.close()
            except PulsarException:
                pass


_logs: dict[tuple[ClientOptions, str], ExactlyOnceLog] = {}
_logs_lock = threading.Lock()


def log_for(options: ClientOptions, topic: str) -> ExactlyOnceLog:
    """This process's view of the log topic on the cluster options name (made on first use)."""
    with _logs_lock:
        log = _logs.get((options, topic))
        if log is None:
            admin = Admin(options.admin_settings(), options.authentication())
            log = _logs[(options, topic)] = ExactlyOnceLog(client_for(options), topic, admin)
        return log


def drop_log(options: ClientOptions, topic: str) -> None:
    """Forget (and close) this process's view of a log topic, after an error on it."""
    with _logs_lock:
        log = _logs.pop((options, topic), None)
    if log is not None:
        log.close()
