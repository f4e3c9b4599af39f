"""A producer that writes a batch the consumer cannot read: its MessageMetadata claims a huge
num_messages_in_batch over a payload that holds no such batch. The broker passes the metadata on
as it is, so any producer on a topic can send one (the fuzzer's path, end to end).

pulsarfast must refuse that entry (reported, never acknowledged) and keep consuming: it gives the
broker back the permits the broker counted for the batch in one FLOW. It used to give them back
one message_read() at a time, 2**31-1 calls on the connection's reading task, which froze the
consumer (and every other session on that connection) for many minutes.

The bad entry is written on a raw socket with pulsarfast's own encoders (the client's producer
never writes such metadata), to a real broker."""
from __future__ import annotations

import functools

import pytest

import pulsarfast as pulsar
from pulsarfast.wire import codec, proto
from tests.support.pulsar_helpers import raw_producer, read_until
from tests.support.waiting import run_blocking, wait_for

pytestmark = pytest.mark.timeout(120)

WAIT = 20.0
wait_for = functools.partial(wait_for, timeout=WAIT)


def send_raw_batch(broker, topic, num_messages_in_batch, payload):
    """One SEND whose metadata claims num_messages_in_batch messages, on a raw connection."""
    with raw_producer(broker, topic, timeout=WAIT) as (sock, decoder):
        metadata = proto.message_metadata("raw-producer", 0, 1_700_000_000_000,
                                          num_messages_in_batch=num_messages_in_batch)
        sock.sendall(codec.encode_payload(proto.send(1, 0, num_messages=1), metadata, payload))
        return read_until(sock, decoder, proto.SEND_RECEIPT, WAIT).message_id


@pytest.mark.parametrize("claimed", [2**31 - 1, 2**40], ids=["int32-max", "past-int32"])
def test_a_batch_claiming_billions_of_messages_is_refused_and_consuming_goes_on(
        pulsar_broker, pulsar_topic, backend, claimed):
    client = pulsar.Client(pulsar_broker.service_url, backend=backend, operation_timeout_seconds=10)
    try:
        consumer = client.subscribe(pulsar_topic, "bad-batch", negative_ack_redelivery_delay_ms=60_000)
        producer = client.create_producer(pulsar_topic)
        bad_id = run_blocking(backend, send_raw_batch, pulsar_broker, pulsar_topic, claimed, b"not a batch")
        assert bad_id is not None
        producer.send(b"after-the-bad-batch")
        msg = consumer.receive(timeout_millis=int(WAIT * 1000))  # the bad entry is never handed out
        assert msg.data() == b"after-the-bad-batch"
        consumer.acknowledge(msg)
        # and the consumer still has permits: more messages come
        for i in range(5):
            producer.send(b"more-%d" % i)
        got = [consumer.receive(timeout_millis=int(WAIT * 1000)).data() for _ in range(5)]
        assert got == [b"more-%d" % i for i in range(5)]
    finally:
        client.close()
