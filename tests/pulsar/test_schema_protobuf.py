# pulsarfast.schema.ProtobufNativeSchema against the official one (pulsar-client 3.13): the definition
# both register for the same generated class is the same text (checked without a broker and on the
# broker's schema registry), payloads are protobuf's own encoding, and on the shared broker, with both
# backends, values go from pulsarfast to the official client and back on one topic.
#
# The message classes are built at test time from FileDescriptorProtos (a file importing another, so
# the definition's file set holds both, the imported one first), in a descriptor pool of their own.
#
# The official client blocks in C++: under gevent its part of a test runs through run_blocking,
# entirely before or after pulsarfast's part.
from __future__ import annotations

import sys

import pytest

import pulsarfast
import pulsarfast._pulsar as fast_pulsar
from pulsarfast import schema as fast_schema
from tests.support.pulsar_helpers import official_session
from tests.support.waiting import run_blocking

official = pytest.importorskip(
    "pulsar", reason="the official `pulsar-client` wheel is not installed (pip install -r requirements-dev.txt)"
)
descriptor_pb2 = pytest.importorskip("google.protobuf.descriptor_pb2", reason="protobuf is not installed")
from google.protobuf import descriptor_pool, message_factory  # noqa: E402 - after the skip

pytestmark = pytest.mark.timeout(150)

RECEIVE_MS = 10_000
Field = descriptor_pb2.FieldDescriptorProto


def _message_classes() -> dict:
    """{"Point", "Shape"}: Shape (in nsqfast_test/shape.proto) has a string, an enum, a repeated Point
    (imported from nsqfast_test/point.proto) and a map."""
    pool = descriptor_pool.DescriptorPool()
    point_file = descriptor_pb2.FileDescriptorProto(name="nsqfast_test/point.proto", package="nsqfast.test",
                                                    syntax="proto3")
    point = point_file.message_type.add(name="Point")
    point.field.add(name="x", number=1, type=Field.TYPE_SINT64, label=Field.LABEL_OPTIONAL)
    point.field.add(name="y", number=2, type=Field.TYPE_DOUBLE, label=Field.LABEL_OPTIONAL)
    pool.Add(point_file)

    shape_file = descriptor_pb2.FileDescriptorProto(name="nsqfast_test/shape.proto", package="nsqfast.test",
                                                    syntax="proto3", dependency=["nsqfast_test/point.proto"])
    kind = shape_file.enum_type.add(name="Kind")
    kind.value.add(name="KIND_UNSET", number=0)
    kind.value.add(name="KIND_POLYGON", number=1)
    shape = shape_file.message_type.add(name="Shape")
    shape.field.add(name="name", number=1, type=Field.TYPE_STRING, label=Field.LABEL_OPTIONAL)
    shape.field.add(name="kind", number=2, type=Field.TYPE_ENUM, label=Field.LABEL_OPTIONAL,
                    type_name=".nsqfast.test.Kind")
    shape.field.add(name="points", number=3, type=Field.TYPE_MESSAGE, label=Field.LABEL_REPEATED,
                    type_name=".nsqfast.test.Point")
    entry = shape.nested_type.add(name="TagsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=Field.TYPE_STRING, label=Field.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=Field.TYPE_INT32, label=Field.LABEL_OPTIONAL)
    shape.field.add(name="tags", number=4, type=Field.TYPE_MESSAGE, label=Field.LABEL_REPEATED,
                    type_name=".nsqfast.test.Shape.TagsEntry")
    pool.Add(shape_file)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName("nsqfast.test." + name))
            for name in ("Point", "Shape")}


CLASSES = _message_classes()
Shape, Point = CLASSES["Shape"], CLASSES["Point"]


def _shape(name: str = "triangle"):
    value = Shape(name=name, kind=1, points=[Point(x=-1, y=0.5), Point(x=2 ** 40, y=-3.0)])
    value.tags["sides"] = 3
    return value


# ----------------------------------------------------------------------------- without a broker


@pytest.mark.parametrize("name", ["Shape", "Point"])
def test_definition_is_byte_identical_to_the_official(name):
    ours = fast_schema.ProtobufNativeSchema(CLASSES[name]).schema_info()
    theirs = official.schema.ProtobufNativeSchema(CLASSES[name]).schema_info()
    assert ours.schema() == theirs.schema()
    assert (ours.name(), ours.schema_type().value) == (theirs.name(), theirs.schema_type().value)
    assert ours.schema_type() is fast_pulsar.SchemaType.PROTOBUF_NATIVE


def test_the_definition_holds_the_imported_file_first():
    import base64
    import json

    definition = json.loads(fast_schema.ProtobufNativeSchema(Shape).schema_info().schema())
    assert list(definition) == ["fileDescriptorSet", "rootMessageTypeName", "rootFileDescriptorName"]
    files = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(definition["fileDescriptorSet"]))
    assert [f.name for f in files.file] == ["nsqfast_test/point.proto", "nsqfast_test/shape.proto"]
    assert (definition["rootMessageTypeName"], definition["rootFileDescriptorName"]) == \
        ("nsqfast.test.Shape", "nsqfast_test/shape.proto")


def test_encode_decode_and_str_are_the_official():
    ours, theirs = fast_schema.ProtobufNativeSchema(Shape), official.schema.ProtobufNativeSchema(Shape)
    value = _shape()
    assert ours.encode(value) == theirs.encode(value) == value.SerializeToString()
    assert ours.decode(theirs.encode(value)) == value
    assert theirs.decode(ours.encode(value)) == value
    assert str(ours) == str(theirs) == "ProtobufNativeSchema(Shape)"


@pytest.mark.parametrize("record_cls", [int, None, "Shape", Shape(), pulsarfast.schema.Record],
                         ids=["int", "none", "str", "instance", "record"])
def test_a_class_not_of_protobuf_is_refused_as_by_the_official(record_cls):
    with pytest.raises(TypeError) as theirs:
        official.schema.ProtobufNativeSchema(record_cls)
    with pytest.raises(TypeError) as ours:
        fast_schema.ProtobufNativeSchema(record_cls)
    assert str(ours.value) == str(theirs.value)


def test_encoding_another_class_raises_type_error():
    with pytest.raises(TypeError):
        fast_schema.ProtobufNativeSchema(Shape).encode(Point(x=1))
    with pytest.raises(TypeError):
        official.schema.ProtobufNativeSchema(Shape).encode(Point(x=1))


def test_without_protobuf_raises_import_error_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "google.protobuf.descriptor_pb2", None)  # (importing it now raises)
    with pytest.raises(ImportError, match=r"nsqfast\[protobuf\]"):
        fast_schema.ProtobufNativeSchema(Shape)


def test_official_module_paths():
    from pulsarfast.schema.schema_protobuf import ProtobufNativeSchema

    assert fast_schema.ProtobufNativeSchema is ProtobufNativeSchema
    assert "ProtobufNativeSchema" in fast_schema.__all__


# ----------------------------------------------------------------------------- on the broker


def _registered(broker, backend, topic):
    """The broker's registered schema of the topic (its admin API): (type, definition text)."""
    answer = run_blocking(backend, broker.admin, "GET", "/admin/v2/schemas/public/default/%s/schema" % topic)
    return answer["type"], answer["data"]


@pytest.mark.parametrize("batching", [False, True], ids=["unbatched", "batched"])
def test_round_trip_registers_the_official_definition(client, pulsar_broker, pulsar_topic, backend, batching):
    consumer = client.subscribe(pulsar_topic, "sub", schema=fast_schema.ProtobufNativeSchema(Shape))
    producer = client.create_producer(pulsar_topic, schema=fast_schema.ProtobufNativeSchema(Shape),
                                      batching_enabled=batching)
    values = [_shape("a"), Shape(), _shape("c")]
    for value in values:
        producer.send_async(value, None)
    producer.flush()
    got = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in values]
    assert [m.value() for m in got] == values
    assert all(isinstance(m.value(), Shape) for m in got)
    assert [m.data() for m in got] == [v.SerializeToString() for v in values]
    assert _registered(pulsar_broker, backend, pulsar_topic) == \
        ("PROTOBUF_NATIVE", official.schema.ProtobufNativeSchema(Shape).schema_info().schema())


def _official_send(broker, topic, values):
    with official_session(broker) as client:
        producer = client.create_producer(topic, schema=official.schema.ProtobufNativeSchema(Shape))
        for value in values:
            producer.send(value)
        producer.close()


def _official_receive(broker, topic, count):
    """The official consumer (ProtobufNativeSchema(Shape), from the earliest): (values, schema versions)."""
    with official_session(broker) as client:
        consumer = client.subscribe(topic, "official-sub", schema=official.schema.ProtobufNativeSchema(Shape),
                                    initial_position=official.InitialPosition.Earliest)
        got = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(count)]
        return [m.value() for m in got], [m.schema_version() for m in got]


def test_pulsarfast_protobuf_is_read_by_the_official_consumer(client, pulsar_broker, pulsar_topic, backend):
    producer = client.create_producer(pulsar_topic, schema=fast_schema.ProtobufNativeSchema(Shape))
    sent = [_shape("from pulsarfast"), _shape("second")]
    for value in sent:
        producer.send(value)
    producer.close()
    values, versions = run_blocking(backend, _official_receive, pulsar_broker, pulsar_topic, len(sent))
    assert values == sent
    assert all(isinstance(value, Shape) for value in values)
    assert versions[0] != "" and versions[0] == versions[1]


def test_official_protobuf_is_read_by_pulsarfast(client, pulsar_broker, pulsar_topic, backend):
    run_blocking(backend, _official_send, pulsar_broker, pulsar_topic, [_shape("from the official client")])
    consumer = client.subscribe(pulsar_topic, "sub", schema=fast_schema.ProtobufNativeSchema(Shape),
                                initial_position=pulsarfast.InitialPosition.Earliest)
    message = consumer.receive(timeout_millis=RECEIVE_MS)
    assert message.value() == _shape("from the official client")
    # a pulsarfast producer of the same class joins the official registration: the same schema version
    producer = client.create_producer(pulsar_topic, schema=fast_schema.ProtobufNativeSchema(Shape))
    producer.send(_shape("then pulsarfast"))
    after = consumer.receive(timeout_millis=RECEIVE_MS)
    assert after.value() == _shape("then pulsarfast")
    assert after.schema_version() == message.schema_version() != ""


def test_reader_decodes_protobuf(client, pulsar_topic):
    producer = client.create_producer(pulsar_topic, schema=fast_schema.ProtobufNativeSchema(Shape))
    producer.send(_shape())
    reader = client.create_reader(pulsar_topic, pulsarfast.MessageId.earliest,
                                  schema=fast_schema.ProtobufNativeSchema(Shape))
    assert reader.read_next(timeout_millis=RECEIVE_MS).value() == _shape()


def test_another_message_class_is_refused_as_incompatible(client, pulsar_topic):
    producer = client.create_producer(pulsar_topic, schema=fast_schema.ProtobufNativeSchema(Shape))
    producer.send(_shape())
    with pytest.raises(pulsarfast.IncompatibleSchema):
        client.create_producer(pulsar_topic, schema=fast_schema.StringSchema())
