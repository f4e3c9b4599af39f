"""What an executor task of the ``pulsar`` source does: read one partition's
range of entries, after its start position up to and including its end
position, with a non-durable reader, and hand the messages on as Arrow
record batches of the source's columns. Each Python worker keeps one client
per cluster (``clients``), so that the tasks it runs reuse its connections.

The range is read whole or the task fails: if the reader waits
``pollTimeoutMs`` without reaching the end, the task asks the admin API
whether the range's entries are still stored; when they are gone (retention,
a deleted topic) it ends with what it read under ``failOnDataLoss=false``
and fails otherwise, and when they are there it fails (Spark runs it again).
"""
from __future__ import annotations

import atexit
import logging
import threading
import time
from typing import Any, Iterator

import pyarrow as pa

from pulsarfast.base.results import PulsarException, Timeout
from pulsarfast.client import Client
from pulsarfast.spark.admin import Admin
from pulsarfast.spark.options import ClientOptions, DataLossError, SourceConfig
from pulsarfast.spark.positions import BEFORE_FIRST, Ledgers, Position
from pulsarfast.spark.values import ValueDecoder
from pulsarfast.wire import proto
from pulsarfast.wire.message import MessageId

logger = logging.getLogger(__name__)

#: the source's columns and their Arrow types (Spark's: timestamps in µs, UTC)
ARROW_TYPES: dict[str, pa.DataType] = {
    "key": pa.string(),
    "value": pa.binary(),
    "topic": pa.string(),
    "partition": pa.int32(),
    "message_id": pa.binary(),
    "publish_time": pa.timestamp("us", tz="UTC"),
    "event_time": pa.timestamp("us", tz="UTC"),
    "properties": pa.map_(pa.string(), pa.string()),
}
COLUMNS = tuple(ARROW_TYPES)


# -- one client per cluster in each Python worker ------------------------------------------------

_clients: dict[ClientOptions, Client] = {}
_clients_lock = threading.Lock()


def client_for(options: ClientOptions) -> Client:
    """This process's client of the cluster options name (made on first use, closed at exit)."""
    with _clients_lock:
        client = _clients.get(options)
        if client is None:
            client = Client(options.service_url, authentication=options.authentication(), backend="threads",
                            **dict(options.client_kwargs))
            _clients[options] = client
        return client


def drop_client(options: ClientOptions) -> None:
    """Close and forget this process's client of a cluster (after it failed a task)."""
    with _clients_lock:
        client = _clients.pop(options, None)
    if client is not None:
        try:
            client.close()
        except PulsarException:
            pass


@atexit.register
def _close_clients() -> None:
    with _clients_lock:
        clients = list(_clients.values())
        _clients.clear()
    for client in clients:
        try:
            client.close()
        except Exception:  # (at exit: nothing to report to)
            pass


# -- reading a range -------------------------------------------------------------------------


def start_id(start: Position, index: int) -> MessageId:
    """Where a reader of the range after start begins: the entry after start (or the first)."""
    if start == BEFORE_FIRST:
        return MessageId.earliest
    return MessageId(index, start.ledger, start.entry, -1)


class _Rows:
    """The columns of the rows read so far (decoded: the value's fields and their Arrow types)."""

    def __init__(self, columns: list[str], topic: str, index: int, decoded: dict[str, pa.DataType]) -> None:
        self.columns = columns
        self.topic = topic
        self.index = index
        self.decoded_types = decoded
        self.clear()

    def clear(self) -> None:
        self.keys: list[Any] = []
        self.values: list[bytes] = []
        self.ids: list[bytes] = []
        self.published: list[int] = []
        self.events: list[Any] = []
        self.properties: list[Any] = []
        self.decoded: list[dict | None] = []

    def __len__(self) -> int:
        return len(self.values)

    def batch(self) -> pa.RecordBatch:
        n = len(self.values)
        arrays = []
        for name in self.columns:
            if name == "key":
                arrays.append(pa.array(self.keys, pa.string()))
            elif name == "value":
                arrays.append(pa.array(self.values, pa.binary()))
            elif name == "topic":
                arrays.append(pa.repeat(pa.scalar(self.topic, pa.string()), n))
            elif name == "partition":
                arrays.append(pa.repeat(pa.scalar(self.index, pa.int32()), n))
            elif name == "message_id":
                arrays.append(pa.array(self.ids, pa.binary()))
            elif name == "publish_time":
                arrays.append(pa.array(self.published, pa.int64()).cast(pa.timestamp("ms", tz="UTC"))
                              .cast(ARROW_TYPES["publish_time"]))
            elif name == "event_time":
                arrays.append(pa.array(self.events, pa.int64()).cast(pa.timestamp("ms", tz="UTC"))
                              .cast(ARROW_TYPES["event_time"]))
            elif name == "properties":
                arrays.append(pa.array(self.properties, ARROW_TYPES["properties"]))
            else:  # a field of the decoded value
                arrays.append(pa.array([None if d is None else d.get(name) for d in self.decoded],
                                       self.decoded_types[name]))
        self.clear()
        return pa.RecordBatch.from_arrays(arrays, names=self.columns)


def read_range(config: SourceConfig, partition: str, topic: str, index: int, start: Position, end: Position,
               columns: list[str]) -> Iterator[pa.RecordBatch]:
    """The messages of partition's entries after start up to and including end, as record
    batches of columns (names of ``COLUMNS``), at most ``rowsPerArrowBatch`` rows each."""
    if end <= start:
        return
    client = client_for(config.client)
    try:
        reader = client.create_reader(partition, start_id(start, index),
                                      receiver_queue_size=config.receiver_queue_size)
    except PulsarException:
        drop_client(config.client)
        raise
    decoder = None
    decoded_types: dict[str, pa.DataType] = {}
    if config.value_schema is not None:
        decoded_types = {name: kind for name, kind in config.value_schema.fields() if name in columns}
        if decoded_types:
            decoder = ValueDecoder(config.value_schema)
    rows = _Rows(columns, topic, index, decoded_types)
    want_key = "key" in columns
    want_id = "message_id" in columns
    want_props = "properties" in columns
    want_event = "event_time" in columns
    values, ids, published = rows.values, rows.ids, rows.published
    ids_of = _IdBytes()
    limit = config.rows_per_batch
    timeout = config.poll_timeout_ms / 1000.0
    last_seen = start
    consumer = reader.consumer
    waited_since = time.monotonic()
    entry: tuple[int, int] | None = None
    skip = True
    position = start
    try:
        while True:
            arrived = consumer.batch_receive()  # (what arrived, up to the receiver queue; [] after 100 ms)
            if not arrived:
                if time.monotonic() - waited_since < timeout:
                    continue
                if _range_lost(config, partition, last_seen, end):
                    break  # (failOnDataLoss=false: what was read still goes to Spark)
                raise Timeout("pulsar source: no message from %s for %d ms (pollTimeoutMs) while reading up to "
                              "%s; last read %s" % (partition, config.poll_timeout_ms, end, last_seen))
            waited_since = time.monotonic()
            done = False
            for message in arrived:
                mid = message.message_id()
                key = mid.entry_key()
                if key != entry:  # (the messages of a batch share their entry: judged once)
                    entry = key
                    if key <= start:
                        skip = True  # (a reader started inside an entry, or one the broker sends again after a reconnect)
                    elif key > end:
                        done = True  # (the end entry had no message to hand out)
                        break
                    else:
                        skip = False
                        last_seen = position = Position(*key)
                if skip:
                    continue
                data = message.data()
                values.append(data)
                if decoder is not None:
                    rows.decoded.append(decoder(data))
                if want_key:
                    rows.keys.append(message.partition_key() or None)
                if want_id:
                    ids.append(ids_of(mid, position))
                published.append(message.publish_timestamp())
                if want_event:
                    event = message.event_timestamp()
                    rows.events.append(event if event > 0 else None)
                if want_props:
                    props = message.properties()
                    rows.properties.append(list(props.items()) if props else [])
                if position == end:
                    batch_index = mid.batch_index()
                    if batch_index < 0 or batch_index >= mid.batch_size() - 1:
                        done = True
                        break
                if len(values) >= limit:
                    yield rows.batch()
                    values, ids, published = rows.values, rows.ids, rows.published
            if done:
                break
        if len(rows):
            yield rows.batch()
    finally:
        try:
            reader.close()
        except PulsarException:
            pass


class _IdBytes:
    """Serialized message ids (``MessageId.serialize()``'s bytes), the entry's part made once per
    entry: the messages of a batch differ only in their index."""

    def __init__(self) -> None:
        self._entry: Position | None = None
        self._prefix = b""
        self._suffixes: dict[tuple[int, int], bytes] = {}

    def __call__(self, mid: MessageId, position: Position) -> bytes:
        if position != self._entry:
            self._entry = position
            self._prefix = proto.message_id_data(position.ledger & _U64, position.entry & _U64, mid.partition())
        index = mid.batch_index()
        if index < 0:
            return self._prefix
        key = (index, mid.batch_size())
        suffix = self._suffixes.get(key)
        if suffix is None:
            suffix = self._suffixes[key] = (proto.f_uint(4, index) + proto.f_uint(6, key[1]) if key[1] > 0
                                            else proto.f_uint(4, index))
        return self._prefix + suffix


_U64 = (1 << 64) - 1


def _range_lost(config: SourceConfig, partition: str, last_seen: Position, end: Position) -> bool:
    """Whether the entries after last_seen up to end are gone (then: True with failOnDataLoss
    false; DataLossError with it true). False when they are stored (the wait was something else)."""
    stats = Admin(config.client.admin_settings(), config.client.authentication()).internal_stats(partition)
    gone = stats is None
    if stats is not None:
        ledgers = Ledgers.from_internal_stats(stats)
        gone = ledgers.count_after(last_seen, end) == 0 or ledgers.lost_after(last_seen)
    if not gone:
        return False
    message = "pulsar source: entries of %s after %s up to %s are no longer stored%s" % (
        partition, last_seen, end, " (the topic was deleted)" if stats is None else "")
    if config.fail_on_data_loss:
        raise DataLossError(message + "; set failOnDataLoss=false to go on without them")
    logger.warning("%s; going on (failOnDataLoss=false)", message)
    return True
