# Avro schema evolution, read as the official client reads it: a topic gets a v1 record, then a v2
# record (v2 adds a field with a default, which the broker takes as compatible); a consumer or reader
# with the v2 schema reads the v1 message with the writer's definition, fetched from the broker by the
# message's schema version (GET_SCHEMA), once per topic and version, and falls back to its own
# definition with a warning when it cannot fetch it. The official client reads the same messages the
# same way, side by side. Also the extension's side (`_pulsar`): Client.get_schema_info against the
# official one, Message.int_schema_version, and the configurations' schema() honoured by the factories.
#
# The official client blocks in C++: under gevent its part of a test runs through run_blocking.
from __future__ import annotations

import logging

import pytest

import pulsarfast
import pulsarfast._pulsar as fast_pulsar
from pulsarfast import schema as fast_schema
from pulsarfast.network.schemafetch import SchemaSource
from tests.support.pulsar_helpers import full, official_session
from tests.support.waiting import run_blocking

official = pytest.importorskip(
    "pulsar", reason="the official `pulsar-client` wheel is not installed (pip install -r requirements-dev.txt)"
)
pytest.importorskip("fastavro", reason="fastavro is not installed")
import _pulsar as official_pulsar  # noqa: E402 - the official C extension (after the official wheel's skip)

pytestmark = pytest.mark.timeout(150)

RECEIVE_MS = 10_000


def _versions(m) -> dict:
    """The two versions of the User record, built with module m's classes (pulsar.schema or pulsarfast.schema):
    v2 adds `email`, with a default (null), so that v2 reads what v1 wrote."""

    class User(m.Record):
        name = m.String()
        age = m.Integer()

    v1 = User

    class User(m.Record):  # noqa: F811 - the same record name, evolved
        name = m.String()
        age = m.Integer()
        email = m.String(default=None, required_default=True)

    return {"v1": v1, "v2": User}


FAST = _versions(fast_schema)
OFFICIAL = _versions(official.schema)


def _fields(value) -> dict:
    return {name: getattr(value, name) for name in ("name", "age", "email") if hasattr(value, name)}


def _write_both_versions(client, topic):
    """A v1 record, then a v2 record, from producers of their own (the second registers version 1)."""
    first = client.create_producer(topic, schema=fast_schema.AvroSchema(FAST["v1"]))
    first.send(FAST["v1"](name="ada", age=36))
    first.close()
    second = client.create_producer(topic, schema=fast_schema.AvroSchema(FAST["v2"]))
    second.send(FAST["v2"](name="bob", age=41, email="bob@example.com"))
    second.close()


EXPECTED = [{"name": "ada", "age": 36, "email": None}, {"name": "bob", "age": 41, "email": "bob@example.com"}]


def _official_read(broker, topic):
    """The official consumer with the official AvroSchema(v2), from the earliest: (fields, schema versions,
    int schema versions) of the two messages."""
    with official_session(broker) as client:
        consumer = client.subscribe(topic, "official-sub", schema=official.schema.AvroSchema(OFFICIAL["v2"]),
                                    initial_position=official.InitialPosition.Earliest)
        got = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(2)]
        return [_fields(m.value()) for m in got], [m.schema_version() for m in got]


# ----------------------------------------------------------------------------- without a broker


def test_v2_cannot_read_v1_payloads_with_its_own_definition_alone():
    """What the fetch is for: v1's payload is not v2's encoding."""
    payload = fast_schema.AvroSchema(FAST["v1"]).encode(FAST["v1"](name="ada", age=36))
    with pytest.raises(Exception):
        fast_schema.AvroSchema(FAST["v2"]).decode(payload)


def test_definitions_are_the_official_ones():
    for version in ("v1", "v2"):
        assert fast_schema.AvroSchema(FAST[version]).schema_info().schema() == \
            official.schema.AvroSchema(OFFICIAL[version]).schema_info().schema()


def test_get_schema_commands_round_trip():
    from pulsarfast.wire import proto
    from pulsarfast.network.schemafetch import schema_info_of, version_bytes

    assert version_bytes(-1) is None and version_bytes(1) == b"\x00" * 7 + b"\x01"
    kind, asked = proto.decode_command(proto.get_schema("persistent://public/default/t", 9, version_bytes(258)))
    assert (kind, asked.request_id, asked.topic, asked.schema_version) == \
        (proto.GET_SCHEMA, 9, "persistent://public/default/t", b"\x00" * 6 + b"\x01\x02")
    assert proto.decode_command(proto.get_schema("t", 1))[1].schema_version == b""
    schema = proto.schema_message("public/default/t", b'{"type": "string"}', 4, {"k": "v"})
    body = proto.f_uint(1, 9) + proto.f_bytes(4, schema) + proto.f_bytes(5, version_bytes(0))
    kind, answer = proto.decode_command(proto.base_command(proto.GET_SCHEMA_RESPONSE, body))
    assert (kind, answer.request_id, answer.error_code) == (proto.GET_SCHEMA_RESPONSE, 9, None)
    info = schema_info_of(answer.schema)
    assert (info.schema_type(), info.name(), info.schema(), info.properties()) == \
        (fast_pulsar.SchemaType.AVRO, "", '{"type": "string"}', {"k": "v"})


# ----------------------------------------------------------------------------- on the broker


def test_v2_consumer_reads_v1_message_as_the_official_does(client, pulsar_broker, pulsar_topic, backend):
    _write_both_versions(client, pulsar_topic)
    consumer = client.subscribe(pulsar_topic, "sub", schema=fast_schema.AvroSchema(FAST["v2"]),
                                initial_position=pulsarfast.InitialPosition.Earliest)
    got = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(2)]
    assert [_fields(m.value()) for m in got] == EXPECTED
    assert all(isinstance(m.value(), FAST["v2"]) for m in got)
    assert [m.int_schema_version() for m in got] == [0, 1]
    # the official client, side by side: the same values, the same schema_version() texts
    values, versions = run_blocking(backend, _official_read, pulsar_broker, pulsar_topic)
    assert values == EXPECTED
    assert [m.schema_version() for m in got] == versions
    assert versions[0] != versions[1]


def test_official_v1_and_v2_messages_are_read_by_pulsarfast_v2(client, pulsar_broker, pulsar_topic, backend):
    def official_write(broker, topic):
        with official_session(broker) as official_client:
            first = official_client.create_producer(topic, schema=official.schema.AvroSchema(OFFICIAL["v1"]))
            first.send(OFFICIAL["v1"](name="ada", age=36))
            first.close()
            second = official_client.create_producer(topic, schema=official.schema.AvroSchema(OFFICIAL["v2"]))
            second.send(OFFICIAL["v2"](name="bob", age=41, email="bob@example.com"))
            second.close()

    run_blocking(backend, official_write, pulsar_broker, pulsar_topic)
    reader = client.create_reader(pulsar_topic, pulsarfast.MessageId.earliest,
                                  schema=fast_schema.AvroSchema(FAST["v2"]))
    got = [reader.read_next(timeout_millis=RECEIVE_MS) for _ in range(2)]
    assert [_fields(m.value()) for m in got] == EXPECTED
    assert [m.int_schema_version() for m in got] == [0, 1]


def test_partitioned_topic_fetches_through_its_partitions(client, pulsar_broker, pulsar_topic, backend):
    run_blocking(backend, pulsar_broker.create_partitioned_topic, pulsar_topic, 2)
    _write_both_versions(client, pulsar_topic)
    consumer = client.subscribe(pulsar_topic, "sub", schema=fast_schema.AvroSchema(FAST["v2"]),
                                initial_position=pulsarfast.InitialPosition.Earliest)
    got = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(2)]
    assert all("-partition-" in m.topic_name() for m in got)
    assert sorted((_fields(m.value()) for m in got), key=lambda fields: fields["name"]) == EXPECTED


def test_a_dict_definition_schema_reads_v1_too(client, pulsar_topic):
    _write_both_versions(client, pulsar_topic)
    schema = fast_schema.AvroSchema(None, FAST["v2"].schema())
    consumer = client.subscribe(pulsar_topic, "sub", schema=schema,
                                initial_position=pulsarfast.InitialPosition.Earliest)
    assert [consumer.receive(timeout_millis=RECEIVE_MS).value() for _ in range(2)] == EXPECTED


class CountingSource:
    """A SchemaSource that records what it was asked."""

    def __init__(self, source):
        self.source = source
        self.asked = []

    def get_schema_info(self, topic, version):
        self.asked.append((topic, version))
        return self.source.get_schema_info(topic, version)


def test_each_topic_and_version_is_fetched_once(client, pulsar_topic):
    _write_both_versions(client, pulsar_topic)
    schema = fast_schema.AvroSchema(FAST["v2"])
    reader = client.create_reader(pulsar_topic, pulsarfast.MessageId.earliest, schema=schema)
    counting = CountingSource(SchemaSource(client))
    schema.attach_client(counting)  # (after create_reader, which attached the client's own)
    got = [reader.read_next(timeout_millis=RECEIVE_MS) for _ in range(2)]
    for _ in range(3):
        assert [_fields(m.value()) for m in got] == EXPECTED
    assert counting.asked == [(full(pulsar_topic), 0), (full(pulsar_topic), 1)]


def test_without_the_writer_schema_it_falls_back_with_a_warning(make_client, pulsar_broker, pulsar_topic, caplog):
    client = make_client(pulsar_broker)
    _write_both_versions(client, pulsar_topic)
    consumer = client.subscribe(pulsar_topic, "sub", schema=fast_schema.AvroSchema(FAST["v2"]),
                                initial_position=pulsarfast.InitialPosition.Earliest)
    got = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(2)]
    client.close()  # (no more fetching: the v2 message still reads, with the reader's own definition)
    with caplog.at_level(logging.WARNING, logger="pulsarfast.schema.schema_avro"):
        assert _fields(got[1].value()) == EXPECTED[1]
    assert any("Failed to decode" in record.getMessage() and "version 1" in record.getMessage()
               for record in caplog.records)


def test_an_unattached_schema_decodes_with_its_own_definition(client, pulsar_topic):
    producer = client.create_producer(pulsar_topic, schema=fast_schema.AvroSchema(FAST["v2"]))
    producer.send(FAST["v2"](name="c", age=1, email="c@d"))
    consumer = client.subscribe(pulsar_topic, "sub", initial_position=pulsarfast.InitialPosition.Earliest)
    message = consumer.receive(timeout_millis=RECEIVE_MS)  # (a bytes consumer: no schema, none attached)
    assert _fields(fast_schema.AvroSchema(FAST["v2"]).decode_message(message)) == \
        {"name": "c", "age": 1, "email": "c@d"}


# ----------------------------------------------------------------------------- the extension's side


def _official_schema_infos(broker, topic, versions):
    """The official _pulsar.Client.get_schema_info(topic, v) of each version: (type name, name, schema) or
    the exception's class name."""
    raw = official_pulsar.Client(broker.service_url, official_pulsar.ClientConfiguration())
    try:
        return [_info_outcome(lambda v=v: raw.get_schema_info(topic, v)) for v in versions]
    finally:
        raw.close()


def _info_outcome(call):
    try:
        info = call()
    except Exception as exc:  # noqa: BLE001 - the class is what is compared
        return type(exc).__name__
    return info.schema_type().name, info.name(), info.schema()


def test_get_schema_info_is_the_official(make_client, pulsar_broker, pulsar_topic, backend):
    client = make_client(pulsar_broker)
    _write_both_versions(client, pulsar_topic)
    versions = [0, 1, -1, 7]
    theirs = run_blocking(backend, _official_schema_infos, pulsar_broker, full(pulsar_topic), versions)
    raw = fast_pulsar.Client(pulsar_broker.service_url,
                             fast_pulsar.ClientConfiguration().operation_timeout_seconds(15))
    try:
        ours = [_info_outcome(lambda v=v: raw.get_schema_info(pulsar_topic, v)) for v in versions]
    finally:
        raw.close()
    assert ours == theirs
    assert ours[0][0] == "AVRO" and ours[3] == "TopicNotFound"
    assert not hasattr(official.Client, "get_schema_info")  # (the extension's only, as here)
    assert not hasattr(pulsarfast.Client, "get_schema_info")


def test_configurations_schema_is_registered_by_the_factories(make_client, pulsar_broker, pulsar_topic, backend):
    info = fast_schema.JsonSchema(FAST["v1"]).schema_info()
    raw = fast_pulsar.Client(pulsar_broker.service_url,
                             fast_pulsar.ClientConfiguration().operation_timeout_seconds(15))
    try:
        producer = raw.create_producer(pulsar_topic, fast_pulsar.ProducerConfiguration().schema(info))
        consumer = raw.subscribe(pulsar_topic, "sub", fast_pulsar.ConsumerConfiguration().schema(info))
        reader = raw.create_reader(pulsar_topic, pulsarfast.MessageId.earliest,
                                   fast_pulsar.ReaderConfiguration().schema(info))
        payload = fast_schema.JsonSchema(FAST["v1"]).encode(FAST["v1"](name="e", age=2))
        producer.send(payload)  # (bytes, as the extension's producer takes them)
        assert consumer.receive(timeout_millis=RECEIVE_MS).value() == payload
        assert reader.read_next(timeout_millis=RECEIVE_MS).data() == payload
        with pytest.raises(TypeError):
            producer.send(FAST["v1"](name="not", age=0))
        answer = run_blocking(backend, pulsar_broker.admin, "GET",
                              "/admin/v2/schemas/public/default/%s/schema" % pulsar_topic)
        assert (answer["type"], answer["data"]) == ("JSON", info.schema())
        # a consumer whose configuration's schema is another type is refused, as with schema=
        string_info = fast_schema.StringSchema().schema_info()
        with pytest.raises(pulsarfast.IncompatibleSchema):
            raw.subscribe(pulsar_topic, "other", fast_pulsar.ConsumerConfiguration().schema(string_info))
    finally:
        raw.close()


def test_topic_regex_subscribes_to_its_pattern(pulsar_broker, pulsar_topic):
    raw = fast_pulsar.Client(pulsar_broker.service_url,
                             fast_pulsar.ClientConfiguration().operation_timeout_seconds(15))
    try:
        producer = raw.create_producer(pulsar_topic + "-a")
        producer.send(b"matched")
        conf = fast_pulsar.ConsumerConfiguration()
        conf.subscription_initial_position(fast_pulsar.InitialPosition.Earliest)
        consumer = raw.subscribe(fast_pulsar.TopicRegex(full(pulsar_topic) + "-.*"), "sub", conf)
        assert [each.topic for each in consumer.topic_consumers()] == [full(pulsar_topic) + "-a"]
        assert consumer.receive(timeout_millis=RECEIVE_MS).data() == b"matched"
    finally:
        raw.close()
