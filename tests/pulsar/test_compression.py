# Compression in pulsarfast (pulsarfast/wire/compression.py, the producer's compression_type, the consumer's
# decompression), on the session's real Pulsar broker and both backends:
#
# - the codecs alone (no broker): each type round trips (empty, one byte, 1 MiB compressible and
#   random), writes the format the standard decoders read, and refuses corrupt payloads and a wrong
#   uncompressed size with ProtocolError; `import pulsarfast` does not import lz4 or zstandard, and a
#   missing one is named at create_producer;
# - each type round trips through the broker, unbatched and batched, with properties, keys and event
#   times intact, and is compressed on the wire (the broker counts fewer bytes in than were sent);
# - the official `pulsar` client (pulsar-client 3.x) reads what we compress, and we read what it
#   compresses, for each type, batched and not;
# - a payload whose metadata says compressed but that does not decompress (a SEND frame built with the
#   package's own encoder on a producer made by hand) is never delivered, never acknowledged, asked
#   again after the negative-ack delay, and a refused batch gives back the permits of all its messages.
#
# The official client blocks in C++: its part of a test runs through the backend's run_blocking,
# entirely before or after pulsarfast's part.
from __future__ import annotations

import importlib
import logging
import os
import subprocess
import sys
import textwrap
import time
import zlib

import pytest

import pulsarfast as pulsar
from pulsarfast.wire import compression, proto
from pulsarfast.wire.codec import encode_send_frame
from tests.support.pulsar_helpers import (
    entry_of, full, needs_official, official, official_client, produce, send_all, subscription_stats, topic_stats)
from tests.support.waiting import run_blocking, wait_for

# The first test asking for the broker pays for its start (about 4-6 s).
pytestmark = pytest.mark.timeout(150)

RECEIVE_MS = 10_000  # a message that is due must arrive within this
EMPTY_MS = 1_000  # nothing more arrives within this (checked after everything expected arrived)
TYPES = [pulsar.CompressionType.LZ4, pulsar.CompressionType.ZLib, pulsar.CompressionType.ZSTD,
         pulsar.CompressionType.SNAPPY]
TYPE_IDS = [t.name for t in TYPES]
MIB = 1024 * 1024


def compressible(index: int, size: int = 4096) -> bytes:
    """size bytes that compress well, distinct per index."""
    head = b"message %06d|" % index
    return (head + b"the same words again and again, " * (size // 32 + 1))[:size]


# ----------------------------------------------------------------------------- the codecs alone


@pytest.mark.parametrize("kind", TYPES, ids=TYPE_IDS)
def test_each_codec_round_trips_empty_small_and_1_mib_payloads(kind):
    codec = compression.codec_for(kind)
    assert codec is not None and codec.type == kind
    random_mib = os.urandom(MIB)
    for data in (b"", b"x", compressible(1, 1000), compressible(2, MIB), random_mib):
        packed = codec.compress(data)
        assert codec.decompress(packed, len(data)) == data
        assert compression.decompress(int(kind), memoryview(packed), len(data)) == data  # (any bytes-like)
        assert compression.compress(kind, data) == packed
    assert len(codec.compress(compressible(2, MIB))) < MIB // 20


@pytest.mark.parametrize("kind", TYPES, ids=TYPE_IDS)
def test_each_codec_writes_the_format_the_standard_decoders_read(kind):
    data = compressible(3, 100_000)
    packed = compression.compress(kind, data)
    if kind == pulsar.CompressionType.LZ4:
        lz4_block = importlib.import_module("lz4.block")
        # a raw block: no size prefix (with one, the first four bytes would read as 100000 little-endian)
        assert int.from_bytes(packed[:4], "little") != len(data)
        assert lz4_block.decompress(packed, uncompressed_size=len(data)) == data
    elif kind == pulsar.CompressionType.ZLib:
        assert zlib.decompress(packed) == data  # a zlib stream (header and Adler-32), not raw deflate
        with pytest.raises(zlib.error):
            zlib.decompress(packed, -15)
    elif kind == pulsar.CompressionType.ZSTD:
        zstandard = importlib.import_module("zstandard")
        assert packed[:4] == b"\x28\xb5\x2f\xfd"  # one standard frame, with its content size
        assert zstandard.frame_content_size(packed) == len(data)
        assert zstandard.ZstdDecompressor().decompress(packed) == data
    else:
        cramjam = importlib.import_module("cramjam")
        # the raw block format: the uncompressed length as a varint, no stream identifier chunk
        assert packed[:3] == bytes([0xA0, 0x8D, 0x06])  # 100000
        assert bytes(cramjam.snappy.decompress_raw(packed)) == data


@pytest.mark.parametrize("kind", TYPES, ids=TYPE_IDS)
def test_each_codec_refuses_corrupt_payloads_and_a_wrong_size(kind):
    data = compressible(4, 10_000)
    packed = compression.compress(kind, data)
    bad = {
        "garbage": (b"\xff\x00 this is not a compressed payload \x13\x37" * 3, len(data)),
        "empty": (b"", len(data)),
        "truncated": (packed[: len(packed) // 2], len(data)),
        "one byte short": (packed, len(data) - 1),
        "one byte long": (packed, len(data) + 1),
    }
    for why, (payload, size) in bad.items():
        with pytest.raises(pulsar.ProtocolError) as caught:
            compression.decompress(int(kind), payload, size)
        assert kind.name in str(caught.value), (why, str(caught.value))


def test_codec_choice_and_unknown_types():
    assert compression.codec_for(pulsar.CompressionType.NONE) is None
    assert compression.codec_for(0) is None
    assert compression.codec_for(3).type == pulsar.CompressionType.ZSTD  # (a plain int, as the official values)
    for wrong in ("LZ4", None, 2.0, True, 9, -1):
        with pytest.raises(ValueError):
            compression.codec_for(wrong)
    with pytest.raises(pulsar.ProtocolError, match="unknown compression type 7"):
        compression.decompress(7, b"abc", 3)
    assert compression.decompress(0, memoryview(b"abc"), 3) == b"abc"


def test_import_is_cheap_and_a_missing_library_is_named_at_create_producer():
    program = textwrap.dedent("""
        import sys
        import pulsarfast
        assert "lz4" not in sys.modules and "zstandard" not in sys.modules, "imported eagerly"
        sys.modules["lz4"] = sys.modules["lz4.block"] = sys.modules["zstandard"] = None  # (not installed)
        client = pulsarfast.Client("pulsar://127.0.0.1:1", backend="threads")
        for kind, package in ((pulsarfast.CompressionType.LZ4, "lz4"), (pulsarfast.CompressionType.ZSTD, "zstandard")):
            try:
                client.create_producer("t", compression_type=kind)
            except pulsarfast.InvalidConfiguration as exc:
                assert "pip install %s" % package in str(exc), str(exc)
            else:
                raise AssertionError("no error for %s" % kind)
        try:
            pulsarfast.wire.compression.decompress(1, b"x", 1)
        except pulsarfast.ProtocolError as exc:
            assert "pip install lz4" in str(exc), str(exc)
        client.close()
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


# ----------------------------------------------------------------------------- through the broker


def _items(prefix: str, count: int, with_ordering_key: bool = False):
    items = []
    for i in range(count):
        kwargs = {"properties": {"i": str(i), "set": prefix}, "partition_key": "key-%d" % (i % 5),
                  "event_timestamp": 1_700_000_000_000 + i}
        if with_ordering_key and i % 4 == 0:
            kwargs["ordering_key"] = "order-%d" % i
        items.append((prefix.encode() + b"|" + compressible(i), kwargs))
    items.append((b"", {"properties": {"i": str(count), "set": prefix}}))  # an empty payload too
    return items


def _send_plain_and_batched(client, topic, kind, plain_items, batch_items):
    """plain_items unbatched, then batch_items in batches of 10, compressed with kind: their ids."""
    plain = client.create_producer(topic, compression_type=kind)
    batched = client.create_producer(topic, compression_type=kind, batching_enabled=True,
                                     batching_max_messages=10, batching_max_publish_delay_ms=60_000)
    return send_all(plain, plain_items), send_all(batched, batch_items)


def _check_received(got, items, prefix):
    """The messages of one set, compared with what was sent."""
    ours = sorted((m for m in got if m.properties()["set"] == prefix), key=lambda m: int(m.properties()["i"]))
    assert len(ours) == len(items)
    for msg, (payload, kwargs) in zip(ours, items):
        assert msg.data() == payload
        assert msg.properties() == kwargs["properties"]
        assert msg.partition_key() == kwargs.get("partition_key", "")
        assert msg.event_timestamp() == kwargs.get("event_timestamp", 0)
        assert msg.ordering_key() == kwargs.get("ordering_key", "")
    return ours


@pytest.mark.parametrize("kind", TYPES, ids=TYPE_IDS)
def test_compressed_messages_round_trip_unbatched_and_batched(make_client, pulsar_broker, pulsar_topic, backend,
                                                             kind):
    client = make_client()
    consumer = client.subscribe(pulsar_topic, "round-trip")
    plain_items = _items("plain", 20, with_ordering_key=True)
    batch_items = _items("batch", 30)
    plain_ids, batch_ids = _send_plain_and_batched(client, pulsar_topic, kind, plain_items, batch_items)
    assert all(m.batch_index() == -1 for m in plain_ids)
    assert all(m.batch_index() >= 0 for m in batch_ids)
    assert len({entry_of(m) for m in batch_ids}) == 4  # 10 + 10 + 10 + the flushed one

    got = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(len(plain_items) + len(batch_items))]
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=EMPTY_MS)  # no duplicates, nothing refused
    plain_got = _check_received(got, plain_items, "plain")
    batch_got = _check_received(got, batch_items, "batch")
    assert [m.message_id() for m in plain_got] == plain_ids
    assert [m.message_id() for m in batch_got] == batch_ids
    for msg in got:
        consumer.acknowledge(msg)

    # compressed on the wire: the broker took in far fewer bytes than the payloads hold
    sent = sum(len(payload) for payload, _ in plain_items + batch_items)
    bytes_in = topic_stats(pulsar_broker, backend, pulsar_topic)["bytesInCounter"]
    assert 0 < bytes_in < sent // 4, (bytes_in, sent)


def test_compression_is_off_by_default_and_with_none(make_client, pulsar_broker, pulsar_topic, backend):
    client = make_client()
    consumer = client.subscribe(pulsar_topic, "none")
    producer = client.create_producer(pulsar_topic, compression_type=pulsar.CompressionType.NONE)
    items = [(compressible(i), {}) for i in range(10)]
    send_all(producer, items)
    assert [consumer.receive(timeout_millis=RECEIVE_MS).data() for _ in items] == [p for p, _ in items]
    bytes_in = topic_stats(pulsar_broker, backend, pulsar_topic)["bytesInCounter"]
    assert bytes_in >= sum(len(p) for p, _ in items)  # the payloads as they are


# ----------------------------------------------------------------------------- and the official client


def _official_type(kind):
    return getattr(official.CompressionType, kind.name)


def _official_produce(broker, topic, kind, plain_items, batch_items):
    """The items sent by the official client with compression kind (plain ones unbatched, the others batched)."""
    client = official_client(broker)
    try:
        for items, batching in ((plain_items, False), (batch_items, True)):
            ids = produce(client, topic, items, compression_type=_official_type(kind), batching_enabled=batching,
                          batching_max_messages=10, batching_max_publish_delay_ms=60_000)
            assert all((m.batch_index() >= 0) == batching for m in ids), [m.batch_index() for m in ids]
    finally:
        client.close()


def _official_consume(broker, topic, count):
    """count messages read by the official client (acknowledged), then checks that nothing more comes."""
    client = official_client(broker)
    try:
        consumer = client.subscribe(topic, "official-sub", initial_position=official.InitialPosition.Earliest)
        got = []
        for _ in range(count):
            msg = consumer.receive(timeout_millis=RECEIVE_MS)
            got.append((msg.data(), msg.properties(), msg.partition_key(), msg.event_timestamp(),
                        msg.ordering_key(), msg.message_id().batch_index()))
            consumer.acknowledge(msg)
        try:
            extra = consumer.receive(timeout_millis=EMPTY_MS)
        except official.Timeout:
            extra = None
        consumer.close()
        return got, extra
    finally:
        client.close()


@needs_official
@pytest.mark.parametrize("kind", TYPES, ids=TYPE_IDS)
def test_the_official_client_reads_what_we_compress(make_client, pulsar_broker, pulsar_topic, backend, kind):
    plain_items = _items("plain", 20, with_ordering_key=True)
    batch_items = _items("batch", 30)
    client = make_client()
    _send_plain_and_batched(client, pulsar_topic, kind, plain_items, batch_items)
    client.close()
    sent = sum(len(payload) for payload, _ in plain_items + batch_items)
    assert topic_stats(pulsar_broker, backend, pulsar_topic)["bytesInCounter"] < sent // 4  # (compressed)

    got, extra = run_blocking(backend, _official_consume, pulsar_broker, pulsar_topic,
                              len(plain_items) + len(batch_items))
    assert extra is None
    by_set = {}
    for data, properties, key, event_time, ordering_key, batch_index in got:
        by_set.setdefault(properties["set"], []).append((data, properties, key, event_time, ordering_key,
                                                         batch_index >= 0))
    for prefix, items, batching in (("plain", plain_items, False), ("batch", batch_items, True)):
        expected = [(payload, kw["properties"], kw.get("partition_key", ""), kw.get("event_timestamp", 0),
                     kw.get("ordering_key", ""), batching) for payload, kw in items]
        assert by_set[prefix] == expected


@needs_official
@pytest.mark.parametrize("kind", TYPES, ids=TYPE_IDS)
def test_we_read_what_the_official_client_compresses(make_client, pulsar_broker, pulsar_topic, backend, kind):
    plain_items = _items("plain", 20, with_ordering_key=True)
    batch_items = _items("batch", 30)
    client = make_client()
    consumer = client.subscribe(pulsar_topic, "from-official")
    run_blocking(backend, _official_produce, pulsar_broker, pulsar_topic, kind, plain_items, batch_items)
    sent = sum(len(payload) for payload, _ in plain_items + batch_items)
    assert topic_stats(pulsar_broker, backend, pulsar_topic)["bytesInCounter"] < sent // 4  # (it compressed)

    got = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(len(plain_items) + len(batch_items))]
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=EMPTY_MS)  # nothing refused, no duplicates
    plain_got = _check_received(got, plain_items, "plain")
    batch_got = _check_received(got, batch_items, "batch")
    assert all(m.message_id().batch_index() == -1 for m in plain_got)
    assert all(m.message_id().batch_index() >= 0 for m in batch_got)
    for msg in got:
        consumer.acknowledge(msg)
    for topic_consumer in consumer.topic_consumers():
        assert topic_consumer.corrupt_messages == 0


# ----------------------------------------------------------------------------- payloads that do not decompress


class HandMadeProducer:
    """A producer created on the broker by hand, over a pulsarfast connection's public methods, to
    send SEND frames the test builds with the package's own encoder (encode_send_frame)."""

    def __init__(self, client, backend, topic):
        self.topic = full(topic)
        self.backend = backend
        self.conn = client.connection_for(self.topic)
        self.producer_id = client.new_producer_id()
        self.receipts = {}
        self.errors = []
        self.conn.register_producer(self.producer_id, self)
        answer = self.conn.request(lambda rid: proto.producer(self.topic, self.producer_id, rid), 15)
        self.name = answer.producer_name.encode("utf-8")
        self.next_sequence_id = 0

    # what the connection tells a producer session
    def on_receipt(self, event):
        self.receipts[event.sequence_id] = pulsar.MessageId.from_proto(event.message_id)

    def on_send_error(self, event):
        self.errors.append(event.error)

    def on_closed(self, reason):
        self.errors.append(reason)

    def send(self, payload, extra_metadata=b"", num_messages=1):
        """One frame (payload and metadata as given); its message id once the broker stored it."""
        sequence_id = self.next_sequence_id
        self.next_sequence_id += num_messages
        self.conn.send_frames([encode_send_frame(self.producer_id, sequence_id, self.name, int(time.time() * 1000),
                                                 payload, None, None, 0, extra_metadata, num_messages)])
        wait_for(lambda: sequence_id in self.receipts or self.errors, self.backend, timeout=15,
                 message="the broker's receipt")
        assert not self.errors, self.errors
        return self.receipts[sequence_id]

    def close(self):
        self.conn.request(lambda rid: proto.close_producer(self.producer_id, rid), 15)
        self.conn.unregister_producer(self.producer_id, self)


GARBAGE = b"\xde\xad\xbe\xef this payload says it is compressed but it is not \x00\x01\x02" * 4


def test_a_payload_that_does_not_decompress_is_refused_never_acknowledged_and_asked_again(
        make_client, pulsar_broker, pulsar_topic, backend, caplog):
    caplog.set_level(logging.ERROR, logger="pulsarfast.consuming.consumer")
    client = make_client()
    consumer = client.subscribe(pulsar_topic, "corrupt", consumer_type=pulsar.ConsumerType.Shared,
                                negative_ack_redelivery_delay_ms=100)
    hand_made = HandMadeProducer(client, backend, pulsar_topic)
    # a single message said to be LZ4, and a batch of three said to be ZSTD: neither decompresses
    single_id = hand_made.send(GARBAGE, proto.compression_metadata(proto.COMPRESSION_LZ4, 1000))
    batch_id = hand_made.send(GARBAGE, proto.f_uint(11, 3) + proto.compression_metadata(proto.COMPRESSION_ZSTD, 900),
                              num_messages=3)
    hand_made.close()
    good = client.create_producer(pulsar_topic, compression_type=pulsar.CompressionType.LZ4)
    good_id = good.send(b"after the corrupt ones", properties={"good": "yes"})

    msg = consumer.receive(timeout_millis=RECEIVE_MS)
    assert (msg.data(), msg.properties(), msg.message_id()) == (b"after the corrupt ones", {"good": "yes"}, good_id)
    consumer.acknowledge(msg)
    [topic_consumer] = consumer.topic_consumers()

    def refusals():
        return [r.getMessage() for r in caplog.records
                if r.name == "pulsarfast.consuming.consumer" and "not delivered" in r.getMessage()]

    # each corrupt entry is refused, asked again after the negative-ack delay, and refused again
    def refused_twice_each():
        texts = refusals()
        return all(sum(("%d:%d" % (mid.ledger_id(), mid.entry_id())) in t for t in texts) >= 2
                   for mid in (single_id, batch_id))

    wait_for(refused_twice_each, backend, timeout=20, message=lambda: "two refusals of each: %r" % refusals())
    texts = refusals()
    assert any("LZ4" in t and "does not decompress" in t for t in texts), texts
    assert any("ZSTD" in t for t in texts), texts
    assert topic_consumer.corrupt_messages >= 4
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=300)  # never delivered
    consumer.close()  # (grouped acknowledgements go before the close)

    # never acknowledged: both corrupt entries stay in the subscription's backlog, the good one does not
    backlog = subscription_stats(pulsar_broker, backend, pulsar_topic, "corrupt")["msgBacklog"]
    assert backlog == 2, backlog


def test_refused_compressed_batches_give_back_every_permit(make_client, pulsar_broker, pulsar_topic, backend, caplog):
    """Five batches of ten whose payload does not decompress, then twenty good messages, on a
    consumer with receiver_queue_size=10: the twenty arrive (the refused batches gave back the
    permits of their fifty messages)."""
    caplog.set_level(logging.ERROR, logger="pulsarfast.consuming.consumer")
    client = make_client()
    consumer = client.subscribe(pulsar_topic, "permits", receiver_queue_size=10,
                                negative_ack_redelivery_delay_ms=60_000)  # refused ones do not come back meanwhile
    hand_made = HandMadeProducer(client, backend, pulsar_topic)
    for _ in range(5):
        hand_made.send(GARBAGE, proto.f_uint(11, 10) + proto.compression_metadata(proto.COMPRESSION_SNAPPY, 500),
                       num_messages=10)
    hand_made.close()
    good = client.create_producer(pulsar_topic, compression_type=pulsar.CompressionType.SNAPPY)
    send_all(good, [b"good-%d" % i for i in range(20)])

    got = []
    for _ in range(20):
        try:
            msg = consumer.receive(timeout_millis=RECEIVE_MS)
        except pulsar.Timeout:
            pytest.fail("only %d of the 20 good messages arrived: %r" % (len(got), got))
        got.append(msg.data())
        consumer.acknowledge(msg)
    assert got == [b"good-%d" % i for i in range(20)]
    refused = [r.getMessage() for r in caplog.records
               if r.name == "pulsarfast.consuming.consumer" and "not delivered" in r.getMessage()]
    assert len(refused) == 5 and all("SNAPPY" in text for text in refused), refused
