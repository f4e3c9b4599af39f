"""The Pulsar protocol without a broker: the hand-written protobuf messages
(pulsarfast.wire.proto), the sans-I/O protocol object (pulsarfast.wire.sansio), topic
names and service URLs (pulsarfast.base.topics), MessageId, error mapping, and the
engine's KeyedCorrelator."""
from __future__ import annotations

import pytest

import pulsarfast as pulsar
from msgengine.correlator import KeyedCorrelator, Pending
from pulsarfast.base import topics
from pulsarfast.base.results import ProtocolError, from_server_error
from pulsarfast.wire import proto, sansio
from pulsarfast.wire.codec import encode_payload, encode_simple

pytestmark = pytest.mark.pure


def ready_protocol() -> sansio.PulsarProtocol:
    protocol = sansio.PulsarProtocol(proto.connect(), name="test")
    protocol.start()
    connected = proto.base_command(proto.CONNECTED, proto.f_str(1, "broker-4.0.7") + proto.f_uint(2, 20)
                                   + proto.f_uint(3, 1024))
    [event] = protocol.receive_data(encode_simple(connected))
    assert isinstance(event, sansio.Connected)
    protocol.data_to_send()
    return protocol


# -- proto -------------------------------------------------------------------------------------


def test_every_sent_command_decodes_to_its_fields():
    cases = [
        (proto.connect("me", 20, "token", b"secret"), proto.CONNECT,
         dict(client_version="me", protocol_version=20, auth_method_name="token", auth_data=b"secret")),
        (proto.lookup("persistent://a/b/c", 7, True), proto.LOOKUP,
         dict(topic="persistent://a/b/c", request_id=7, authoritative=True)),
        (proto.producer("t", 3, 9, "name", True, 2), proto.PRODUCER,
         dict(topic="t", producer_id=3, request_id=9, producer_name="name", epoch=2, user_provided_producer_name=True)),
        (proto.send(3, 2 ** 40, 5), proto.SEND, dict(producer_id=3, sequence_id=2 ** 40, num_messages=5)),
        (proto.flow(4, 500), proto.FLOW, dict(consumer_id=4, messagePermits=500)),
        (proto.unsubscribe(4, 11), proto.UNSUBSCRIBE, dict(consumer_id=4, request_id=11)),
        (proto.partitioned_metadata("t", 12), proto.PARTITIONED_METADATA, dict(topic="t", request_id=12)),
        (proto.subscribe("t", "s", proto.SUB_SHARED, 4, 13, consumer_name="c", initial_position=proto.POSITION_EARLIEST),
         proto.SUBSCRIBE, dict(topic="t", subscription="s", subType=1, consumer_id=4, request_id=13,
                               consumer_name="c", initialPosition=1)),
    ]
    for data, kind, fields in cases:
        decoded_kind, record = proto.decode_command(data)
        assert decoded_kind == kind
        for name, value in fields.items():
            assert getattr(record, name) == value, (kind, name)


def test_ack_carries_each_message_id():
    ids = [proto.message_id_data(1, 2), proto.message_id_data(1, 3, partition=4)]
    kind, record = proto.decode_command(proto.ack(9, proto.ACK_INDIVIDUAL, ids))
    assert kind == proto.ACK
    assert [(m.ledgerId, m.entryId, m.partition) for m in record.message_id] == [(1, 2, -1), (1, 3, 4)]


def test_message_metadata_round_trip():
    data = proto.message_metadata("p", 41, 1700000000000, properties={"a": "1", "b": "ü"}, partition_key="key",
                                  event_time=5, num_messages_in_batch=3, ordering_key=b"o", deliver_at_time=9)
    meta = proto.decode(proto.MESSAGE_METADATA, data)
    assert (meta.producer_name, meta.sequence_id, meta.publish_time) == ("p", 41, 1700000000000)
    assert {kv.key: kv.value for kv in meta.properties} == {"a": "1", "b": "ü"}
    assert (meta.partition_key, meta.event_time, meta.num_messages_in_batch) == ("key", 5, 3)
    assert (meta.ordering_key, meta.deliver_at_time) == (b"o", 9)


def test_metadata_without_batch_count_says_not_batched():
    meta = proto.decode(proto.MESSAGE_METADATA, proto.message_metadata("p", 1, 2))
    assert meta.num_messages_in_batch is None
    assert meta.partition_key is None


def test_negative_int_fields_decode_signed():
    record = proto.decode(proto.MESSAGE_ID_DATA, proto.message_id_data(1, 2, partition=3, batch_index=0)
                          + proto.f_uint(4, -1))
    assert record.batch_index == -1


def test_unknown_fields_are_skipped():
    data = proto.f_uint(1, 5) + proto.f_str(99, "from a newer broker") + proto.f_uint(2, 6)
    record = proto.decode(proto.MESSAGE_ID_DATA, data)
    assert (record.ledgerId, record.entryId) == (5, 6)


@pytest.mark.parametrize("data", [b"\x08", b"\x0a\x05ab", b"\x0b", b"\x00\x01"])
def test_malformed_command_raises_protocol_error(data):
    with pytest.raises(ProtocolError):
        proto.decode_command(data)


def test_command_of_wrong_wire_type_raises_protocol_error():
    # field 1 (type) given as bytes, not a varint
    with pytest.raises(ProtocolError):
        proto.decode(proto.KEY_VALUE, proto.f_uint(1, 3))


# -- the protocol object ---------------------------------------------------------------------------


def test_handshake_sends_connect_and_reports_connected():
    protocol = sansio.PulsarProtocol(proto.connect("me"), name="t")
    protocol.start()
    sent = protocol.data_to_send()
    kind, record = proto.decode_command(sent[8:])
    assert kind == proto.CONNECT and record.client_version == "me"
    data = encode_simple(proto.base_command(proto.CONNECTED, proto.f_str(1, "v") + proto.f_uint(3, 2048)))
    events = []
    for byte in data:  # one byte at a time
        events += protocol.receive_data(bytes([byte]))
    assert [type(e) for e in events] == [sansio.Connected]
    assert protocol.max_message_size == 2048
    assert protocol.state is sansio.State.READY


def test_refused_connect_is_reported():
    protocol = sansio.PulsarProtocol(proto.connect(), name="t")
    protocol.start()
    error = proto.base_command(proto.ERROR, proto.f_uint(1, 0) + proto.f_uint(2, 3) + proto.f_str(3, "who are you"))
    [event] = protocol.receive_data(encode_simple(error))
    assert isinstance(event, sansio.ConnectFailed)
    assert isinstance(event.error, pulsar.AuthenticationError)


def test_answers_find_their_requests_by_id_in_any_order():
    protocol = ready_protocol()
    first, second = Pending(), Pending()
    protocol.send_request(1, proto.lookup("a", 1), first)
    protocol.send_request(2, proto.lookup("b", 2), second)
    answers = encode_simple(proto.base_command(proto.SUCCESS, proto.f_uint(1, 2))) + encode_simple(
        proto.base_command(proto.ERROR, proto.f_uint(1, 1) + proto.f_uint(2, 16) + proto.f_str(3, "busy")))
    events = protocol.receive_data(answers)
    assert [e.pending for e in events] == [second, first]
    assert isinstance(events[1].result, pulsar.ProducerBusy)
    assert protocol.waiting_answers() == 0


def test_late_answer_after_forget_is_dropped():
    protocol = ready_protocol()
    protocol.send_request(5, proto.lookup("a", 5), Pending())
    protocol.forget_request(5)
    assert protocol.receive_data(encode_simple(proto.base_command(proto.SUCCESS, proto.f_uint(1, 5)))) == []


def test_message_frame_reports_payload_and_checksum():
    protocol = ready_protocol()
    command = proto.base_command(proto.MESSAGE, proto.f_uint(1, 7) + proto.f_bytes(2, proto.message_id_data(3, 4))
                                 + proto.f_uint(3, 2))
    metadata = proto.message_metadata("p", 1, 2)
    good = encode_payload(command, metadata, b"body")
    bad = bytearray(good)
    bad[-1] ^= 0xFF  # a flipped payload byte
    events = protocol.receive_data(good + bytes(bad))
    assert [e.checksum_ok for e in events] == [True, False]
    assert (events[0].consumer_id, events[0].payload) == (7, b"body")
    assert (events[0].ledger_id, events[0].entry_id) == (3, 4)
    assert events[0].fields[5] == 2  # redelivery count
    assert events[1].fields is None  # (metadata of a payload that failed its checksum is not read)
    assert (events[1].consumer_id, events[1].ledger_id, events[1].entry_id) == (7, 3, 4)


def test_receipts_errors_closes_and_pings_become_events():
    protocol = ready_protocol()
    frames = b"".join(encode_simple(c) for c in (
        proto.base_command(proto.SEND_RECEIPT, proto.f_uint(1, 1) + proto.f_uint(2, 9)
                           + proto.f_bytes(3, proto.message_id_data(5, 6))),
        proto.base_command(proto.SEND_ERROR, proto.f_uint(1, 1) + proto.f_uint(2, 10) + proto.f_uint(3, 15)
                           + proto.f_str(4, "terminated")),
        proto.close_producer(1, 0), proto.close_consumer(2, 0), proto.ping(), proto.pong(),
    ))
    events = protocol.receive_data(frames)
    kinds = [type(e) for e in events]
    assert kinds == [sansio.SendReceipt, sansio.SendError, sansio.ProducerClosed, sansio.ConsumerClosed,
                     sansio.PingReceived]
    assert events[0].sequence_id == 9 and events[0].message_id.entryId == 6
    assert isinstance(events[1].error, pulsar.TopicTerminated)


def test_commands_are_refused_before_connected_and_after_close():
    protocol = sansio.PulsarProtocol(proto.connect(), name="t")
    with pytest.raises(pulsar.NotConnected):
        protocol.send_command(proto.ping())
    protocol = ready_protocol()
    waiting = Pending()
    protocol.send_request(1, proto.lookup("a", 1), waiting)
    assert protocol.close() == [waiting]
    with pytest.raises(pulsar.NotConnected):
        protocol.send_command(proto.ping())


def test_a_frame_over_the_limit_breaks_the_stream():
    protocol = sansio.PulsarProtocol(proto.connect(), max_frame_size=64, name="t")
    protocol.start()
    with pytest.raises(ProtocolError):
        protocol.receive_data((1000).to_bytes(4, "big") + b"x" * 10)


# -- names, ids, errors ---------------------------------------------------------------------------


@pytest.mark.parametrize("short, full", [
    ("t", "persistent://public/default/t"),
    ("tenant/ns/t", "persistent://tenant/ns/t"),
    ("non-persistent://a/b/c", "non-persistent://a/b/c"),
])
def test_topic_names_are_completed(short, full):
    assert topics.full_topic_name(short) == full


@pytest.mark.parametrize("bad", ["", "a/b", "a/b/c/d/e", "http://a/b/c", None, "persistent://a//c"])
def test_bad_topic_names_are_refused(bad):
    with pytest.raises(pulsar.InvalidTopicName):
        topics.full_topic_name(bad)


def test_partition_names():
    name = topics.partition_name("persistent://a/b/t", 3)
    assert name == "persistent://a/b/t-partition-3"
    assert topics.partition_index(name) == 3
    assert topics.partition_index("persistent://a/b/t") == -1


def test_service_urls_with_several_hosts():
    assert topics.parse_service_url("pulsar://h1:6651,h2,[::1]:7000") == (
        "pulsar", [("h1", 6651), ("h2", 6650), ("::1", 7000)])


@pytest.mark.parametrize("bad", ["localhost:6650", "ftp://h:1", "pulsar://", "pulsar://h:notaport", "pulsar://h:0"])
def test_bad_service_urls_are_refused(bad):
    with pytest.raises(pulsar.InvalidUrl):
        topics.parse_service_url(bad)


def test_client_refuses_bad_url_before_connecting():
    with pytest.raises(pulsar.InvalidUrl):
        pulsar.Client("bogus://x", backend="threads")
    with pytest.raises(ValueError):
        pulsar.Client(6650, backend="threads")


def test_message_id_serializes_as_the_official_client_does():
    # bytes of the official client's MessageId(3, 10, 20, -1).serialize() (partition 3, ledger 10, entry 20)
    assert pulsar.MessageId(3, 10, 20, -1).serialize() == b"\x08\n\x10\x14\x18\x03"
    again = pulsar.MessageId.deserialize(pulsar.MessageId(1, 2, 3, 4).serialize())
    assert (again.partition(), again.ledger_id(), again.entry_id(), again.batch_index()) == (1, 2, 3, 4)
    assert str(pulsar.MessageId(3, 10, 20, -1)) == "(10,20,3,-1)"
    assert pulsar.MessageId.deserialize(pulsar.MessageId.earliest.serialize()) == pulsar.MessageId.earliest


def test_message_ids_order_by_position():
    ids = [pulsar.MessageId(0, 2, 0), pulsar.MessageId(0, 1, 5, 1), pulsar.MessageId(0, 1, 5, 0)]
    assert sorted(ids) == [ids[2], ids[1], ids[0]]


def test_deserializing_garbage_raises_invalid_message():
    with pytest.raises(pulsar.InvalidMessage):
        pulsar.MessageId.deserialize(b"\xff")


def test_server_errors_map_to_the_official_exception_classes():
    assert isinstance(from_server_error(5, "x"), pulsar.ConsumerBusy)
    assert from_server_error(6, "x").retriable
    assert isinstance(from_server_error(999, "x"), pulsar.UnknownError)
    assert all(issubclass(getattr(pulsar, r.name), pulsar.PulsarException) for r in pulsar.Result if r.name != "Ok")
    assert pulsar.Timeout.result is pulsar.Result.Timeout


def test_keyed_correlator_pairs_by_id():
    correlator = KeyedCorrelator()
    a, b = Pending(), Pending()
    first, second = correlator.next_id(), correlator.next_id()
    assert first != second
    correlator.expect(first, a)
    correlator.expect(second, b)
    assert correlator.answer(second) is b
    assert correlator.answer(second) is None
    assert correlator.drain() == [a]
    assert len(correlator) == 0


def test_importing_pulsarfast_loads_neither_nsq_nor_gevent():
    import subprocess
    import sys

    code = ("import sys, pulsarfast; c = pulsarfast.Client('pulsar://127.0.0.1:1', backend='threads'); "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'nsq', 'gevent', 'pyspark'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_enums_print_as_the_official_module_s_do():
    assert str(pulsar.Result.Ok) == "Result.Ok" and pulsar.Result.Ok == 0
    assert str(pulsar.ConsumerType.KeyShared) == "ConsumerType.KeyShared" and pulsar.ConsumerType.KeyShared == 3
    assert str(pulsar.InitialPosition.Earliest) == "InitialPosition.Earliest"
