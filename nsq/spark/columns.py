"""The Spark source's rows as Arrow: on the driver, the messages of a planned
micro-batch become one Arrow IPC stream per input partition, column by column
(ids, bodies, timestamps, attempts, the nsqd that delivered them, topic and
channel); on the executors, an IPC stream becomes record batches again
without touching a row. Only pyarrow is imported here, not pyspark: the
caller gives the Arrow schema Spark expects.
"""
from __future__ import annotations

import math
from operator import attrgetter
from typing import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ..message import Message

#: an input partition's IPC stream stays under this size when the batch allows (Spark ships it inside the task)
MAX_PARTITION_BYTES = 32 * 1024 * 1024

#: (nsqd "host:port", the messages it delivered in one read)
Run = tuple[str, Sequence[Message]]

_ID = attrgetter("id")
_BODY = attrgetter("body")
_TIMESTAMP = attrgetter("timestamp")
_ATTEMPTS = attrgetter("attempts")


def _column(name: str, runs: Sequence[Run], count: int, topic: str, channel: str) -> pa.Array:
    if name == "id":
        return pa.array([i for _, messages in runs for i in map(_ID, messages)], pa.string())
    if name == "body":
        return pa.array([b for _, messages in runs for b in map(_BODY, messages)], pa.binary())
    if name == "timestamp":
        nanos = pa.array([t for _, messages in runs for t in map(_TIMESTAMP, messages)], pa.int64())
        return pc.divide(nanos, 1000).cast(pa.timestamp("us", tz="UTC"))
    if name == "attempts":
        return pa.array([a for _, messages in runs for a in map(_ATTEMPTS, messages)], pa.int32())
    if name == "nsqd":
        names: list[str] = []
        for nsqd, messages in runs:
            names += [nsqd] * len(messages)
        return pa.array(names, pa.string())
    if name == "topic":
        return pa.repeat(pa.scalar(topic, pa.string()), count)
    if name == "channel":
        return pa.repeat(pa.scalar(channel, pa.string()), count)
    raise ValueError("the nsq source has no column %r" % (name,))


def record_batch(
    runs: Sequence[Run], columns: Sequence[str], schema: pa.Schema, topic: str, channel: str
) -> pa.RecordBatch:
    """One record batch of every message in runs; ``columns`` names the
    source column behind each field of ``schema``, in order."""
    count = sum(len(messages) for _, messages in runs)
    arrays = [_column(name, runs, count, topic, channel) for name in columns]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def partition_count(batch: pa.RecordBatch, wanted: int) -> int:
    """At least ``wanted`` partitions (never more than rows), more when the
    batch would make partitions larger than MAX_PARTITION_BYTES."""
    if batch.num_rows == 0:
        return 0
    by_size = math.ceil(batch.nbytes / MAX_PARTITION_BYTES)
    return max(1, min(batch.num_rows, max(wanted, by_size)))


def to_ipc(batch: pa.RecordBatch, parts: int) -> list[tuple[bytes, int]]:
    """The batch cut into ``parts`` slices of nearly equal rows, each as
    (Arrow IPC stream, rows)."""
    if batch.num_rows == 0:
        return []
    size = math.ceil(batch.num_rows / parts)
    payloads = []
    for offset in range(0, batch.num_rows, size):
        sink = pa.BufferOutputStream()
        piece = batch.slice(offset, size)
        with pa.ipc.new_stream(sink, batch.schema) as writer:
            writer.write_batch(piece)
        payloads.append((sink.getvalue().to_pybytes(), piece.num_rows))
    return payloads


def from_ipc(payload: bytes, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The record batches of one IPC stream, labelled with ``schema`` (the
    one Spark checks: same types, field names as the query gave them)."""
    with pa.ipc.open_stream(payload) as reader:
        for batch in reader:
            yield pa.RecordBatch.from_arrays(batch.columns, schema=schema)
