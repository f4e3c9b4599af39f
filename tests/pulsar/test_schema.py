# pulsarfast.schema against the official `pulsar.schema` (pulsar-client 3.13): the definitions both
# register are the same text for the same Record shape (checked without a broker, and on the broker's
# schema registry), and on the shared broker, with both backends, values go through StringSchema,
# JsonSchema and AvroSchema, from pulsarfast to the official client and back.
#
# The official client blocks in C++: under gevent its part of a test runs through run_blocking,
# entirely before or after pulsarfast's part.
from __future__ import annotations

import enum
import sys

import pytest

import pulsarfast
from pulsarfast import schema as fast_schema
from tests.support.pulsar_broker import PulsarAdminError
from tests.support.pulsar_helpers import official_client
from tests.support.waiting import run_blocking

official = pytest.importorskip(
    "pulsar", reason="the official `pulsar-client` wheel is not installed (pip install -r requirements-dev.txt)"
)

pytestmark = pytest.mark.timeout(150)

RECEIVE_MS = 10_000
EMPTY_MS = 1_000


# ----------------------------------------------------------------------------- record shapes, for either module


class Color(enum.Enum):
    red = 1
    green = 2


def _shapes(m) -> dict:
    """The same Record classes, built with module m's classes (pulsar.schema or pulsarfast.schema)."""

    class Point(m.Record):
        x = m.Integer()
        y = m.Integer()

    class Inner(m.Record):
        _avro_namespace = "com.example"
        a = m.Integer(required=True)
        b = m.String(default="x", required=True, required_default=True)

    class Everything(m.Record):
        i = m.Integer()
        l = m.Long(required=True)  # noqa: E741
        f = m.Float()
        d = m.Double(default=1.5, required=True, required_default=True)
        s = m.String()
        by = m.Bytes()
        bo = m.Boolean(required=True, default=True, required_default=True)
        names = m.Array(m.String())
        inners = m.Array(Inner())
        counts = m.Map(m.Long())
        by_name = m.Map(Inner())
        color = Color
        other_color = m.CustomEnum(Color, default=Color.green, required=True, required_default=True)
        inner = Inner
        required_inner = Inner(required=True)

    class Sorted(m.Record):
        _sorted_fields = True
        zeta = m.Integer()
        alpha = m.String()
        mid = m.Array(m.Integer())

    return {"Point": Point, "Inner": Inner, "Everything": Everything, "Sorted": Sorted}


FAST = _shapes(fast_schema)
OFFICIAL = _shapes(official.schema)


def _everything(m, shapes):
    """An Everything value with every field set, from module m."""
    inner = shapes["Inner"]
    return shapes["Everything"](i=1, l=2 ** 40, f=0.5, s="text", by=b"\x01\x02", names=["a", "b"],
                                inners=[inner(a=1), inner(a=2, b="y")], counts={"k": 3},
                                by_name={"n": inner(a=4)}, color=Color.red, inner=inner(a=5),
                                required_inner=inner(a=6))


# ----------------------------------------------------------------------------- without a broker


@pytest.mark.parametrize("kind", ["JsonSchema", "AvroSchema"])
@pytest.mark.parametrize("shape", sorted(FAST))
def test_definition_is_byte_identical_to_the_official(kind, shape):
    ours = getattr(fast_schema, kind)(FAST[shape]).schema_info()
    theirs = getattr(official.schema, kind)(OFFICIAL[shape]).schema_info()
    assert ours.schema() == theirs.schema()
    assert (ours.name(), ours.schema_type().value) == (theirs.name(), theirs.schema_type().value)


@pytest.mark.parametrize("kind", ["StringSchema", "BytesSchema"])
def test_primitive_schema_info_is_the_official(kind):
    ours = getattr(fast_schema, kind)().schema_info()
    theirs = getattr(official.schema, kind)().schema_info()
    assert (ours.name(), ours.schema(), ours.schema_type().value) == \
        (theirs.name(), theirs.schema(), theirs.schema_type().value)


def test_official_submodule_paths_import():
    from pulsarfast.schema.definition import Record  # noqa: F401
    from pulsarfast.schema.schema import BytesSchema, JsonSchema, StringSchema  # noqa: F401
    from pulsarfast.schema.schema_avro import AvroSchema  # noqa: F401
    import pulsarfast._pulsar as _pulsar

    assert pulsarfast.schema.StringSchema is StringSchema
    assert pulsarfast.BytesSchema is BytesSchema
    assert _pulsar.SchemaInfo is fast_schema.SchemaInfo


@pytest.mark.parametrize("kind", ["JsonSchema", "AvroSchema"])
def test_payloads_decode_with_the_other_module(kind):
    ours = getattr(fast_schema, kind)(FAST["Everything"])
    theirs = getattr(official.schema, kind)(OFFICIAL["Everything"])
    fast_value = _everything(fast_schema, FAST)
    official_value = _everything(official.schema, OFFICIAL)
    assert ours.encode(fast_value) == theirs.encode(official_value)
    assert ours.decode(theirs.encode(official_value)) == fast_value
    assert theirs.decode(ours.encode(fast_value)) == official_value


def test_avro_from_a_definition_dict_takes_dicts():
    definition = {"type": "record", "name": "Pair", "fields": [{"name": "k", "type": "string"},
                                                                {"name": "v", "type": "long"}]}
    ours = fast_schema.AvroSchema(None, definition)
    theirs = official.schema.AvroSchema(None, definition)
    assert ours.schema_info().schema() == theirs.schema_info().schema()
    assert ours.decode(theirs.encode({"k": "a", "v": 7})) == {"k": "a", "v": 7}
    with pytest.raises(ValueError):
        ours.encode(["not", "a", "dict"])


def test_avro_without_fastavro_raises_import_error_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "fastavro", None)  # (import fastavro now raises ImportError)
    with pytest.raises(ImportError, match=r"nsqfast\[avro\]"):
        fast_schema.AvroSchema(FAST["Point"])


def test_record_checks_field_types_as_the_official():
    point = FAST["Point"]
    with pytest.raises(TypeError):
        point(x="not an int")
    with pytest.raises(AttributeError):
        point().z = 1
    with pytest.raises(TypeError):
        official.schema.JsonSchema(OFFICIAL["Point"]).encode(OFFICIAL["Inner"](a=1))
    with pytest.raises(TypeError):
        fast_schema.JsonSchema(point).encode(FAST["Inner"](a=1))


def test_a_schema_not_of_pulsarfast_is_refused_as_the_official_client_refuses_ours(client, pulsar_topic):
    with pytest.raises(ValueError) as ours:
        client.create_producer(pulsar_topic, schema=official.schema.StringSchema())
    theirs = official.Client("pulsar://127.0.0.1:1")
    try:
        with pytest.raises(ValueError) as refused:
            theirs.create_producer(pulsar_topic, schema=pulsarfast.schema.StringSchema())
    finally:
        theirs.close()
    assert str(ours.value) == str(refused.value) == (
        "Argument schema is expected to be of type 'Schema' and not 'StringSchema'")


# ----------------------------------------------------------------------------- on the broker


def _registered(broker, backend, topic):
    """The broker's registered schema of the topic (its admin API): (type, definition text)."""
    answer = run_blocking(backend, broker.admin, "GET", "/admin/v2/schemas/public/default/%s/schema" % topic)
    return answer["type"], answer["data"]


def test_string_schema_round_trip(client, pulsar_broker, pulsar_topic, backend):
    consumer = client.subscribe(pulsar_topic, "sub", schema=fast_schema.StringSchema())
    producer = client.create_producer(pulsar_topic, schema=fast_schema.StringSchema())
    texts = ["héllo", "", "wörld"]
    for text in texts:
        producer.send(text)
    got = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in texts]
    assert [m.value() for m in got] == texts
    assert [m.data() for m in got] == [t.encode("utf-8") for t in texts]
    assert _registered(pulsar_broker, backend, pulsar_topic)[0] == "STRING"


@pytest.mark.parametrize("batching", [False, True], ids=["unbatched", "batched"])
def test_json_schema_round_trip(client, pulsar_broker, pulsar_topic, backend, batching):
    schema = fast_schema.JsonSchema(FAST["Everything"])
    consumer = client.subscribe(pulsar_topic, "sub", schema=fast_schema.JsonSchema(FAST["Everything"]))
    producer = client.create_producer(pulsar_topic, schema=schema, batching_enabled=batching)
    second = _everything(fast_schema, FAST)
    second.i, second.names, second.color = None, None, None
    values = [_everything(fast_schema, FAST), second]
    for value in values:
        producer.send_async(value, None)
    producer.flush()
    got = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in values]
    assert [m.value() for m in got] == values
    assert all(m.schema_version() for m in got), "the producer's messages carry its schema version"
    assert _registered(pulsar_broker, backend, pulsar_topic) == ("JSON", schema.schema_info().schema())


def test_reader_decodes_with_its_schema(client, pulsar_topic):
    producer = client.create_producer(pulsar_topic, schema=fast_schema.JsonSchema(FAST["Point"]))
    producer.send(FAST["Point"](x=1, y=2))
    reader = client.create_reader(pulsar_topic, pulsarfast.MessageId.earliest,
                                  schema=fast_schema.JsonSchema(FAST["Point"]))
    assert reader.read_next(timeout_millis=RECEIVE_MS).value() == FAST["Point"](x=1, y=2)


def test_a_value_the_schema_cannot_encode_raises_before_anything_is_sent(client, pulsar_topic):
    consumer = client.subscribe(pulsar_topic, "sub", schema=fast_schema.StringSchema())
    producer = client.create_producer(pulsar_topic, schema=fast_schema.StringSchema())
    with pytest.raises(TypeError):
        producer.send(b"bytes, not str")
    with pytest.raises(TypeError):
        producer.send_async(FAST["Point"](x=1), None)
    assert producer.stats()["sent"] == 0 and producer.stats()["failed"] == 0
    producer.send("after")
    message = consumer.receive(timeout_millis=RECEIVE_MS)
    assert (message.value(), message.sequence_id()) == ("after", 0)  # (the refused ones took no sequence id)
    with pytest.raises(pulsarfast.Timeout):
        consumer.receive(timeout_millis=EMPTY_MS)


def _official_json_consume(broker, topic, count):
    """The official client subscribes with the official JsonSchema(Everything) and reads count values:
    (values, schema versions)."""
    client = official_client(broker)
    try:
        consumer = client.subscribe(topic, "official-sub", schema=official.schema.JsonSchema(OFFICIAL["Everything"]),
                                    initial_position=official.InitialPosition.Earliest)
        got = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(count)]
        return [m.value() for m in got], [m.schema_version() for m in got]
    finally:
        client.close()


def _official_json_produce(broker, topic, values):
    client = official_client(broker)
    try:
        producer = client.create_producer(topic, schema=official.schema.JsonSchema(OFFICIAL["Everything"]))
        for value in values:
            producer.send(value)
        producer.close()
    finally:
        client.close()


def test_pulsarfast_json_is_read_by_the_official_consumer(client, pulsar_broker, pulsar_topic, backend):
    producer = client.create_producer(pulsar_topic, schema=fast_schema.JsonSchema(FAST["Everything"]))
    producer.send(_everything(fast_schema, FAST))
    producer.close()
    registered = _registered(pulsar_broker, backend, pulsar_topic)
    values, versions = run_blocking(backend, _official_json_consume, pulsar_broker, pulsar_topic, 1)
    assert values == [_everything(official.schema, OFFICIAL)]
    assert versions[0] != ""
    # what pulsarfast registered is what the official client registers for the same shape
    assert registered == ("JSON", official.schema.JsonSchema(OFFICIAL["Everything"]).schema_info().schema())


def test_official_json_is_read_by_pulsarfast(client, pulsar_broker, pulsar_topic, backend):
    run_blocking(backend, _official_json_produce, pulsar_broker, pulsar_topic, [_everything(official.schema, OFFICIAL)])
    registered = _registered(pulsar_broker, backend, pulsar_topic)
    consumer = client.subscribe(pulsar_topic, "sub", schema=fast_schema.JsonSchema(FAST["Everything"]),
                                initial_position=pulsarfast.InitialPosition.Earliest)
    message = consumer.receive(timeout_millis=RECEIVE_MS)
    assert message.value() == _everything(fast_schema, FAST)
    assert message.schema_version() != ""
    # the official registration is the one pulsarfast's consumer matched, and the same text pulsarfast registers
    assert registered == ("JSON", fast_schema.JsonSchema(FAST["Everything"]).schema_info().schema())
    # and a pulsarfast producer of the same shape joins the topic with the same schema version
    producer = client.create_producer(pulsar_topic, schema=fast_schema.JsonSchema(FAST["Everything"]))
    producer.send(_everything(fast_schema, FAST))
    assert consumer.receive(timeout_millis=RECEIVE_MS).schema_version() == message.schema_version()


def _official_create_error(broker, topic, schema):
    """The exception class the official client raises creating a producer with schema on topic."""
    client = official_client(broker)
    try:
        client.create_producer(topic, schema=schema)
    except Exception as exc:  # noqa: BLE001 - the class is what is compared
        return type(exc).__name__
    finally:
        client.close()
    return None


def test_an_incompatible_schema_is_refused_with_the_official_error(client, pulsar_broker, pulsar_topic, backend):
    producer = client.create_producer(pulsar_topic, schema=fast_schema.JsonSchema(FAST["Point"]))
    producer.send(FAST["Point"](x=1, y=2))
    official_error = run_blocking(backend, _official_create_error, pulsar_broker, pulsar_topic,
                                  official.schema.StringSchema())
    assert official_error == "IncompatibleSchema"
    with pytest.raises(pulsarfast.IncompatibleSchema):
        client.create_producer(pulsar_topic, schema=fast_schema.StringSchema())
    with pytest.raises(pulsarfast.IncompatibleSchema):
        client.subscribe(pulsar_topic, "sub", schema=fast_schema.StringSchema())


def _official_avro(broker, topic, send_values):
    """The official client with AvroSchema(Everything): sends send_values, or (None) reads one value."""
    client = official_client(broker)
    try:
        schema = official.schema.AvroSchema(OFFICIAL["Everything"])
        if send_values is not None:
            producer = client.create_producer(topic, schema=schema)
            for value in send_values:
                producer.send(value)
            producer.close()
            return None
        consumer = client.subscribe(topic, "official-sub", schema=schema,
                                    initial_position=official.InitialPosition.Earliest)
        return consumer.receive(timeout_millis=RECEIVE_MS).value()
    finally:
        client.close()


def test_avro_round_trip_and_interop_both_ways(client, pulsar_broker, pulsar_topic, backend):
    schema = fast_schema.AvroSchema(FAST["Everything"])
    consumer = client.subscribe(pulsar_topic, "sub", schema=schema,
                                initial_position=pulsarfast.InitialPosition.Earliest)
    producer = client.create_producer(pulsar_topic, schema=schema)
    producer.send(_everything(fast_schema, FAST))
    assert consumer.receive(timeout_millis=RECEIVE_MS).value() == _everything(fast_schema, FAST)
    assert _registered(pulsar_broker, backend, pulsar_topic) == \
        ("AVRO", official.schema.AvroSchema(OFFICIAL["Everything"]).schema_info().schema())
    # pulsarfast -> official
    assert run_blocking(backend, _official_avro, pulsar_broker, pulsar_topic, None) == \
        _everything(official.schema, OFFICIAL)
    # official -> pulsarfast
    changed = _everything(official.schema, OFFICIAL)
    changed.s = "from the official client"
    run_blocking(backend, _official_avro, pulsar_broker, pulsar_topic, [changed])
    expected = _everything(fast_schema, FAST)
    expected.s = "from the official client"
    assert consumer.receive(timeout_millis=RECEIVE_MS).value() == expected


def test_bytes_producer_sends_no_schema(client, pulsar_broker, pulsar_topic, backend):
    producer = client.create_producer(pulsar_topic, schema=pulsarfast.BytesSchema())
    consumer = client.subscribe(pulsar_topic, "sub")
    producer.send(b"raw")
    message = consumer.receive(timeout_millis=RECEIVE_MS)
    assert (message.value(), message.schema_version()) == (b"raw", "")
    with pytest.raises(PulsarAdminError) as refused:  # (nothing registered for the topic)
        _registered(pulsar_broker, backend, pulsar_topic)
    assert refused.value.status == 404
