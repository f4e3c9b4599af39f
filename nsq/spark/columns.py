"""The Spark source's rows as Arrow. On the driver, the messages of a planned
micro-batch become Arrow IPC streams, one per input partition, holding the
columns that differ per message (id, body, timestamp, attempts); on the
executors, an IPC stream becomes record batches again without touching a
row, and the columns that repeat (the nsqd that delivered each run of
messages, topic, channel) are filled in there, so they never travel. Only
pyarrow is imported here, not pyspark: the caller gives the Arrow schema
Spark expects.
"""
from __future__ import annotations

import math
from operator import attrgetter
from typing import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from nsq.message import Message

#: an input partition's IPC stream stays under this size when the batch allows (Spark ships it inside the task)
MAX_PARTITION_BYTES = 32 * 1024 * 1024

#: the columns that travel in the IPC stream; the others are filled in on the executors
PER_MESSAGE = ("id", "body", "timestamp", "attempts")

#: (nsqd "host:port", the messages it delivered in one read)
Run = tuple[str, Sequence[Message]]

#: (nsqd "host:port", how many consecutive rows it delivered)
NsqdRuns = list[tuple[str, int]]

_GETTERS = {name: attrgetter(name) for name in PER_MESSAGE}
_TYPES = {"id": pa.string(), "body": pa.binary(), "timestamp": pa.int64(), "attempts": pa.int32()}


def record_batch(runs: Sequence[Run], columns: Sequence[str]) -> tuple[pa.RecordBatch, NsqdRuns]:
    """The per-message columns among ``columns`` for every message in runs
    (timestamps still in nanoseconds), and which nsqd delivered which rows."""
    wanted = [name for name in PER_MESSAGE if name in columns]
    arrays = []
    for name in wanted:
        get = _GETTERS[name]
        arrays.append(pa.array([value for _, messages in runs for value in map(get, messages)], _TYPES[name]))
    nsqd: NsqdRuns = []
    for name, messages in runs:
        if nsqd and nsqd[-1][0] == name:
            nsqd[-1] = (name, nsqd[-1][1] + len(messages))
        else:
            nsqd.append((name, len(messages)))
    rows = sum(count for _, count in nsqd)
    if not wanted:  # only repeated columns asked for: the stream still says how many rows
        return pa.RecordBatch.from_arrays([pa.nulls(rows, pa.int8())], names=["rows"]), nsqd
    return pa.RecordBatch.from_arrays(arrays, names=wanted), nsqd


def partition_count(batch: pa.RecordBatch, wanted: int) -> int:
    """At least ``wanted`` partitions (never more than rows), more when the
    batch would make partitions larger than MAX_PARTITION_BYTES."""
    if batch.num_rows == 0:
        return 0
    by_size = math.ceil(batch.nbytes / MAX_PARTITION_BYTES)
    return max(1, min(batch.num_rows, max(wanted, by_size)))


def _slice_runs(nsqd: NsqdRuns, offset: int, length: int) -> NsqdRuns:
    result: NsqdRuns = []
    position = 0
    for name, count in nsqd:
        start, end = max(offset, position), min(offset + length, position + count)
        if start < end:
            result.append((name, end - start))
        position += count
    return result


def to_ipc(batch: pa.RecordBatch, nsqd: NsqdRuns, parts: int) -> list[tuple[bytes, int, NsqdRuns]]:
    """The batch cut into ``parts`` slices of nearly equal rows, each as
    (Arrow IPC stream, rows, which nsqd delivered them)."""
    if batch.num_rows == 0:
        return []
    size = math.ceil(batch.num_rows / parts)
    payloads = []
    for offset in range(0, batch.num_rows, size):
        piece = batch.slice(offset, size)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, batch.schema) as writer:
            writer.write_batch(piece)
        payloads.append((sink.getvalue().to_pybytes(), piece.num_rows, _slice_runs(nsqd, offset, piece.num_rows)))
    return payloads


def _repeat(value: str, count: int) -> pa.Array:
    return pa.repeat(pa.scalar(value, pa.string()), count)


def from_ipc(
    payload: bytes, nsqd: NsqdRuns, columns: Sequence[str], schema: pa.Schema, topic: str, channel: str
) -> Iterator[pa.RecordBatch]:
    """The record batches of one IPC stream with every column of ``columns``
    (source column names, in the order of ``schema``'s fields), labelled
    with ``schema``: the one Spark checks."""
    with pa.ipc.open_stream(payload) as reader:
        position = 0
        for batch in reader:
            rows = batch.num_rows
            arrays = []
            for name in columns:
                if name == "timestamp":
                    micros = pc.divide(batch.column("timestamp"), 1000)
                    arrays.append(micros.cast(pa.timestamp("us", tz="UTC")))
                elif name in PER_MESSAGE:
                    arrays.append(batch.column(name))
                elif name == "nsqd":
                    pieces = [_repeat(host, count) for host, count in _slice_runs(nsqd, position, rows)]
                    arrays.append(pa.concat_arrays(pieces) if pieces else _repeat("", 0))
                elif name == "topic":
                    arrays.append(_repeat(topic, rows))
                elif name == "channel":
                    arrays.append(_repeat(channel, rows))
                else:
                    raise ValueError("the nsq source has no column %r" % (name,))
            position += rows
            yield pa.RecordBatch.from_arrays(arrays, schema=schema)
