# Chunking (pulsarfast.wire.chunks): a message larger than the broker's maxMessageSize, split by a producer
# with chunking_enabled=True into chunks of their own entries, put back together by consumers, and
# acknowledged chunk by chunk; with the official client both ways. The broker is this module's own,
# with a 5 MB limit (its CONNECTED frame says so to clients).
#
# The official client blocks in C++: under gevent its part of a test runs entirely before or after
# pulsarfast's part (through run_blocking), never interleaved.
from __future__ import annotations

import os
import types

import pytest

import pulsarfast as pulsar
from pulsarfast.wire.chunks import ChunkAssembler, ChunkedMessageId, chunk_frames
from tests.support.pulsar_broker import PulsarBroker, require_pulsar_lib
from pulsarfast.wire import proto
from tests.support.pulsar_helpers import (entry_of, needs_official, official, official_client, official_session,
                                         raw_producer, read_until, subscription_stats)
from tests.support.waiting import join_all, run_blocking, wait_for

# (one worker runs the module: its broker is one more JVM for the run, not one per worker)
pytestmark = [pytest.mark.timeout(300), pytest.mark.xdist_group("pulsar_chunking")]

LIMIT = 5 * 1024 * 1024
MB20 = 20 * 1024 * 1024  # (the interop tests' payload: 5 chunks)
RECEIVE_MS = 20_000
EMPTY_MS = 1_000
WAIT = 30.0


@pytest.fixture(scope="module")
def chunk_broker():
    """A broker of this module's own whose maxMessageSize is 5 MB."""
    require_pulsar_lib()
    # (the bookie's frame limit must take an entry of the broker's limit with its headers: Pulsar's own
    # standalone.conf says 5 MB + 10 KB, and without it the bookie drops a 5 MB entry and sends time out)
    broker = PulsarBroker(config={"maxMessageSize": LIMIT, "nettyMaxFrameSizeBytes": LIMIT + 10240})
    broker.start()
    try:
        yield broker
    finally:
        broker.kill()


def big(tag: bytes, size: int = 3 * LIMIT) -> bytes:
    """size bytes, different at every offset of each chunk (a misplaced chunk shows)."""
    block = os.urandom(4096)
    return (tag + block * (size // 4096 + 1))[:size]


def backlog_is_zero(broker, backend, topic, subscription):
    def check():
        stats = subscription_stats(broker, backend, topic, subscription)
        return stats is not None and stats["msgBacklog"] == 0 and stats["unackedMessages"] == 0
    wait_for(check, backend, timeout=WAIT, message=lambda: "backlog of %s: %r" % (
        subscription, subscription_stats(broker, backend, topic, subscription)))


def entries_written(broker, backend, topic) -> int:
    return run_blocking(backend, broker.topic_stats, topic)["msgInCounter"]


# ----------------------------------------------------------------------------- settings


def test_chunking_with_batching_is_refused_as_by_the_official_client():
    with pytest.raises(ValueError) as ours:
        client = pulsar.Client("pulsar://127.0.0.1:1")
        try:
            client.create_producer("t", chunking_enabled=True, batching_enabled=True)
        finally:
            client.close()
    if official is not None:
        theirs_client = official.Client("pulsar://127.0.0.1:1")
        try:
            with pytest.raises(ValueError) as theirs:
                theirs_client.create_producer("t", chunking_enabled=True, batching_enabled=True)
        finally:
            theirs_client.close()
        assert str(ours.value) == str(theirs.value)


def test_a_message_over_the_limit_without_chunking_is_refused(make_client, chunk_broker, pulsar_topic):
    producer = make_client(chunk_broker).create_producer(pulsar_topic)
    with pytest.raises(pulsar.MessageTooBig):
        producer.send(big(b"x", LIMIT + 1))
    producer.send(b"small")  # (nothing of it was queued)


# ----------------------------------------------------------------------------- pulsarfast both ways


@pytest.mark.parametrize("compression", [pulsar.CompressionType.NONE, pulsar.CompressionType.ZLib],
                         ids=["plain", "zlib"])
def test_a_15mb_message_goes_in_chunks_and_comes_back_whole(make_client, chunk_broker, pulsar_topic, backend,
                                                           compression):
    client = make_client(chunk_broker)
    consumer = client.subscribe(pulsar_topic, "whole")
    producer = client.create_producer(pulsar_topic, chunking_enabled=True, batching_enabled=False,
                                      compression_type=compression, producer_name="chunker")
    payload = os.urandom(3 * LIMIT)  # (random: compression leaves it over the limit)
    sent_id = producer.send(payload, properties={"k": "v"}, partition_key="key")
    small_id = producer.send(b"after")
    chunks = entries_written(chunk_broker, backend, pulsar_topic) - 1
    assert chunks == 4  # (15 MB in chunks of a little under 5 MB)

    message = consumer.receive(timeout_millis=RECEIVE_MS)
    assert message.data() == payload
    assert message.properties() == {"k": "v"} and message.partition_key() == "key"
    assert message.producer_name() == "chunker" and message.sequence_id() == 0
    assert entry_of(message.message_id()) == entry_of(sent_id)  # (the last chunk's entry, both)
    assert small_id.entry_id() == sent_id.entry_id() + 1
    after = consumer.receive(timeout_millis=RECEIVE_MS)
    assert after.data() == b"after" and after.sequence_id() == 1
    consumer.acknowledge(message)
    consumer.acknowledge(after)
    backlog_is_zero(chunk_broker, backend, pulsar_topic, "whole")


def test_chunks_of_a_negatively_acknowledged_message_all_come_again(make_client, chunk_broker, pulsar_topic,
                                                                    backend):
    client = make_client(chunk_broker)
    consumer = client.subscribe(pulsar_topic, "nack", consumer_type=pulsar.ConsumerType.Shared,
                                negative_ack_redelivery_delay_ms=100)
    payload = big(b"n", 2 * LIMIT)
    client.create_producer(pulsar_topic, chunking_enabled=True).send(payload)
    first = consumer.receive(timeout_millis=RECEIVE_MS)
    consumer.negative_acknowledge(first)
    again = consumer.receive(timeout_millis=RECEIVE_MS)
    assert again.data() == payload and again.redelivery_count() == 1
    consumer.acknowledge(again)
    backlog_is_zero(chunk_broker, backend, pulsar_topic, "nack")


def test_chunked_messages_of_several_producers_at_once(make_client, chunk_broker, pulsar_topic, backend):
    consumer = make_client(chunk_broker).subscribe(pulsar_topic, "several")
    sent = {}
    producers = [make_client(chunk_broker).create_producer(pulsar_topic, chunking_enabled=True,
                                                           producer_name="p%d" % i) for i in range(3)]

    def send_from(i, producer):
        for n in range(2):
            payload = big(b"%d-%d" % (i, n), (2 + n) * LIMIT)
            sent[(producer.producer_name(), n)] = payload
            producer.send(payload)

    from msgengine.runtime import get_backend
    tasks = [get_backend(backend).spawn(send_from, i, producer) for i, producer in enumerate(producers)]
    join_all(backend, tasks, timeout=WAIT)
    got = {}
    for _ in range(len(producers) * 2):
        message = consumer.receive(timeout_millis=RECEIVE_MS)
        got[(message.producer_name(), message.sequence_id())] = message.data()
        consumer.acknowledge(message)
    assert got.keys() == sent.keys()
    assert all(got[k] == sent[k] for k in sent)
    backlog_is_zero(chunk_broker, backend, pulsar_topic, "several")


def test_a_chunked_message_not_acknowledged_in_time_comes_again_whole(make_client, chunk_broker, pulsar_topic,
                                                                       backend):
    client = make_client(chunk_broker)
    consumer = client.subscribe(pulsar_topic, "unacked", consumer_type=pulsar.ConsumerType.Shared,
                                unacked_messages_timeout_ms=1000)
    payload = big(b"u", 2 * LIMIT)
    client.create_producer(pulsar_topic, chunking_enabled=True).send(payload)
    first = consumer.receive(timeout_millis=RECEIVE_MS)  # (not acknowledged: every chunk is asked for again)
    again = consumer.receive(timeout_millis=RECEIVE_MS)
    assert again.data() == payload and again.redelivery_count() == 1
    assert entry_of(again.message_id()) == entry_of(first.message_id())
    consumer.acknowledge(again)
    backlog_is_zero(chunk_broker, backend, pulsar_topic, "unacked")


def test_an_incomplete_chunked_message_expires_and_its_chunks_are_acknowledged(make_client, chunk_broker,
                                                                               pulsar_topic, backend):
    consumer = make_client(chunk_broker).subscribe(pulsar_topic, "expiry",
                                                   expire_time_of_incomplete_chunked_message_ms=300)
    frames = chunk_frames(1, 0, b"raw-producer", 1_700_000_000_000, big(b"x", 10_000), (None, None, 0, b""), 4096)
    assert len(frames) == 3

    def send_two_of_three():  # (its producer "dies" before the last chunk)
        with raw_producer(chunk_broker, pulsar_topic, timeout=WAIT) as (sock, decoder):
            for frame in frames[:2]:
                sock.sendall(frame)
                read_until(sock, decoder, proto.SEND_RECEIPT, WAIT)

    run_blocking(backend, send_two_of_three)
    make_client(chunk_broker).create_producer(pulsar_topic).send(b"after")
    after = consumer.receive(timeout_millis=RECEIVE_MS)
    assert after.data() == b"after"  # (the incomplete message is never delivered)
    consumer.acknowledge(after)
    backlog_is_zero(chunk_broker, backend, pulsar_topic, "expiry")  # (its two chunks too, once expired)
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=EMPTY_MS)


# ----------------------------------------------------------------------------- the official client


def _official_receive(broker, topic, subscription, count):
    client = official_client(broker)
    try:
        consumer = client.subscribe(topic, subscription, initial_position=official.InitialPosition.Earliest)
        out = []
        for _ in range(count):
            message = consumer.receive(timeout_millis=RECEIVE_MS)
            out.append((message.data(), message.properties(), message.producer_name(),
                        entry_of(message.message_id())))
            consumer.acknowledge(message)
        try:
            consumer.receive(timeout_millis=EMPTY_MS)
            extra = True
        except official.Timeout:
            extra = False
        consumer.close()
        return out, extra
    finally:
        client.close()


def _official_send(broker, topic, payloads):
    client = official_client(broker)
    try:
        producer = client.create_producer(topic, chunking_enabled=True, batching_enabled=False,
                                          producer_name="official-chunker")
        ids = [entry_of(producer.send(payload, properties={"n": str(n)})) for n, payload in enumerate(payloads)]
        producer.close()
        return ids
    finally:
        client.close()


@needs_official
def test_pulsarfast_chunks_are_read_by_the_official_client(make_client, chunk_broker, pulsar_topic, backend):
    payloads = [big(b"a", MB20), b"small", big(b"b", LIMIT + 1)]
    client = make_client(chunk_broker)
    client.subscribe(pulsar_topic, "official").close()  # (the subscription exists before the sends)
    producer = client.create_producer(pulsar_topic, chunking_enabled=True, producer_name="fast-chunker")
    ids = [entry_of(producer.send(payload, properties={"n": str(n)})) for n, payload in enumerate(payloads)]
    producer.close()
    got, extra = run_blocking(backend, _official_receive, chunk_broker, pulsar_topic, "official", len(payloads))
    assert not extra
    assert [g[0] for g in got] == payloads
    assert [g[1] for g in got] == [{"n": str(n)} for n in range(len(payloads))]
    assert [g[2] for g in got] == ["fast-chunker"] * len(payloads)
    assert [g[3] for g in got] == ids  # (the official consumer's ids: the last chunks' entries, as ours)
    backlog_is_zero(chunk_broker, backend, pulsar_topic, "official")


@needs_official
def test_official_chunks_are_read_by_pulsarfast(make_client, chunk_broker, pulsar_topic, backend):
    payloads = [big(b"a", MB20), b"small", big(b"b", LIMIT + 1)]
    client = make_client(chunk_broker)
    consumer = client.subscribe(pulsar_topic, "fast")
    ids = run_blocking(backend, _official_send, chunk_broker, pulsar_topic, payloads)
    got = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in payloads]
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=EMPTY_MS)
    assert [m.data() for m in got] == payloads
    assert [m.properties() for m in got] == [{"n": str(n)} for n in range(len(payloads))]
    assert [(m.producer_name(), m.sequence_id()) for m in got] == [("official-chunker", n) for n in range(3)]
    assert [entry_of(m.message_id()) for m in got] == ids
    assert isinstance(got[0].message_id(), ChunkedMessageId) and len(got[0].message_id().chunk_entries) == 5
    for message in got:
        consumer.acknowledge(message)
    backlog_is_zero(chunk_broker, backend, pulsar_topic, "fast")


@needs_official
@pytest.mark.parametrize("direction", ["pulsarfast-to-official", "official-to-pulsarfast"])
def test_an_encrypted_chunked_message_goes_both_ways(make_client, chunk_broker, pulsar_topic, backend, tmp_path,
                                                     direction):
    """Each chunk is encrypted on its own (its own IV and data key fields), as the official producer
    writes them; the consumer decrypts each before putting them back together."""
    from tests.support.cryptokeys import rsa_pem_pair
    public, private = rsa_pem_pair(tmp_path, "chunks")
    payload = big(b"e", 2 * LIMIT + 5)
    client = make_client(chunk_broker)
    if direction == "pulsarfast-to-official":
        client.subscribe(pulsar_topic, "enc").close()
        producer = client.create_producer(pulsar_topic, chunking_enabled=True, encryption_key="k",
                                          crypto_key_reader=pulsar.CryptoKeyReader(public, private))
        producer.send(payload)

        def official_receive():
            with official_session(chunk_broker) as theirs:
                consumer = theirs.subscribe(pulsar_topic, "enc",
                                            crypto_key_reader=official.CryptoKeyReader(public, private))
                message = consumer.receive(timeout_millis=RECEIVE_MS)
                consumer.acknowledge(message)
                consumer.close()
                return message.data(), message.encryption_context() is not None

        data, has_context = run_blocking(backend, official_receive)
    else:
        consumer = client.subscribe(pulsar_topic, "enc", crypto_key_reader=pulsar.CryptoKeyReader(public, private))

        def official_send():
            with official_session(chunk_broker) as theirs:
                theirs.create_producer(pulsar_topic, chunking_enabled=True, batching_enabled=False,
                                       encryption_key="k",
                                       crypto_key_reader=official.CryptoKeyReader(public, private)).send(payload)

        run_blocking(backend, official_send)
        message = consumer.receive(timeout_millis=RECEIVE_MS)
        consumer.acknowledge(message)
        data, has_context = message.data(), message.encryption_context() is not None
    assert data == payload and has_context
    assert entries_written(chunk_broker, backend, pulsar_topic) == 3  # (each chunk a little under 5 MB)
    backlog_is_zero(chunk_broker, backend, pulsar_topic, "enc")


# ----------------------------------------------------------------------------- reassembly (no broker)


def _chunk(uuid, count, total, chunk_id):
    return types.SimpleNamespace(uuid=uuid, num_chunks_from_msg=count, total_chunk_msg_size=total,
                                 chunk_id=chunk_id)


def _assembler(max_pending=10, auto_ack=False):
    acked: list = []
    return ChunkAssembler("t", max_pending, auto_ack, acked.extend), acked


def test_interleaved_chunks_of_several_messages_are_put_back_together():
    assembler, acked = _assembler()
    a = [b"a0", b"a1", b"a2"]
    b = [b"b0", b"b1"]
    add = assembler.add
    assert add(_chunk("A", 3, 6, 0), a[0], (1, 0)) is None
    assert add(_chunk("B", 2, 4, 0), b[0], (1, 1)) is None
    assert add(_chunk("A", 3, 6, 1), a[1], (1, 2)) is None
    assert add(_chunk("B", 2, 4, 1), b[1], (1, 3)) == (b"b0b1", [(1, 1), (1, 3)])
    assert add(_chunk("A", 3, 6, 2), a[2], (1, 4)) == (b"a0a1a2", [(1, 0), (1, 2), (1, 4)])
    assert len(assembler) == 0 and acked == []


def test_a_chunk_out_of_order_drops_its_message_unacknowledged():
    assembler, acked = _assembler()
    assert assembler.add(_chunk("A", 3, 6, 1), b"a1", (1, 0)) is None  # (its first chunk never came)
    assert assembler.add(_chunk("B", 3, 6, 0), b"b0", (1, 1)) is None
    assert assembler.add(_chunk("B", 3, 6, 2), b"b2", (1, 2)) is None  # (chunk 1 is missing)
    assert assembler.add(_chunk("B", 3, 6, 1), b"b1", (1, 3)) is None
    assert len(assembler) == 0 and acked == []
    # delivered again from its first chunk, it comes whole
    for i, entry in enumerate([(1, 1), (1, 3), (1, 2)]):
        whole = assembler.add(_chunk("B", 3, 6, i), b"b%d" % i, entry)
    assert whole == (b"b0b1b2", [(1, 1), (1, 3), (1, 2)])


@pytest.mark.parametrize("auto_ack", [False, True], ids=["left", "acknowledged"])
def test_the_oldest_incomplete_message_makes_room(auto_ack):
    assembler, acked = _assembler(max_pending=2, auto_ack=auto_ack)
    assembler.add(_chunk("A", 2, 4, 0), b"a0", (1, 0))
    assembler.add(_chunk("B", 2, 4, 0), b"b0", (1, 1))
    assembler.add(_chunk("C", 2, 4, 0), b"c0", (1, 2))  # (A goes)
    assert len(assembler) == 2
    assert acked == ([(1, 0)] if auto_ack else [])
    assert assembler.add(_chunk("A", 2, 4, 1), b"a1", (1, 3)) is None
    assert assembler.add(_chunk("B", 2, 4, 1), b"b1", (1, 4)) == (b"b0b1", [(1, 1), (1, 4)])


def test_an_incomplete_message_expires_oldest_first_and_is_acknowledged():
    now = [100.0]
    acked: list = []
    assembler = ChunkAssembler("t", 10, False, acked.extend, expire_seconds=5.0, clock=lambda: now[0])
    assert assembler.expire() is None  # (nothing pending)
    assembler.add(_chunk("A", 3, 6, 0), b"a0", (1, 0))
    now[0] = 103.0
    assembler.add(_chunk("B", 2, 4, 0), b"b0", (1, 1))
    assembler.add(_chunk("A", 3, 6, 1), b"a1", (1, 2))
    assert assembler.expire() == 2.0 and acked == []  # (A is due at 105)
    now[0] = 105.0
    assert assembler.expire() == 3.0  # (B is due at 108)
    assert acked == [(1, 0), (1, 2)] and len(assembler) == 1
    assert assembler.add(_chunk("A", 3, 6, 2), b"a2", (1, 3)) is None  # (its start is gone: not delivered)
    assert assembler.add(_chunk("B", 2, 4, 1), b"b1", (1, 4)) == (b"b0b1", [(1, 1), (1, 4)])
    assert assembler.expire() is None


def test_chunk_frames_fit_the_limit_and_carry_the_official_fields():
    payload = big(b"f", 10_000)
    frames = chunk_frames(7, 42, b"prod", 1, payload, (None, None, 0, b""), 4096)
    assert all(len(frame) <= 4096 + 4 for frame in frames)
    assert len(frames) == 3
    # each frame: total size, command size, command, magic, crc, metadata size, metadata, payload
    pieces = []
    for i, frame in enumerate(frames):
        command_size = int.from_bytes(frame[4:8], "big")
        at = 8 + command_size + 2 + 4
        metadata_size = int.from_bytes(frame[at:at + 4], "big")
        metadata = proto.decode(proto.MESSAGE_METADATA, frame[at + 4:at + 4 + metadata_size])
        assert (metadata.uuid, metadata.num_chunks_from_msg, metadata.total_chunk_msg_size, metadata.chunk_id,
                metadata.sequence_id) == ("prod-42", 3, len(payload), i, 42)
        pieces.append(frame[at + 4 + metadata_size:])
    assert b"".join(pieces) == payload

