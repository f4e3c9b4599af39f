# pulsarfast.spark.values, without a server or Spark: Avro types as the Arrow
# types the source's decoded columns have, a registry answer checked, and
# payloads decoded (AVRO with fastavro, JSON), a bad payload giving no fields.
from __future__ import annotations

import io
import json

import pytest

pa = pytest.importorskip("pyarrow")

from pulsarfast.spark.options import PulsarOptionError  # noqa: E402
from pulsarfast.spark.values import ValueDecoder, ValueSchema, arrow_type  # noqa: E402

RECORD = {"type": "record", "name": "R", "fields": [
    {"name": "s", "type": ["null", "string"]},
    {"name": "i", "type": "int"},
    {"name": "l", "type": ["null", "long"]},
    {"name": "d", "type": "double"},
    {"name": "b", "type": "bytes"},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "m", "type": ["null", {"type": "map", "values": "long"}]},
    {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "BLUE"]}},
    {"name": "inner", "type": {"type": "record", "name": "Inner", "fields": [{"name": "x", "type": "float"}]}},
    {"name": "again", "type": "Inner"},
]}


def test_avro_types_map_to_arrow_types():
    record = arrow_type(RECORD)
    assert [(f.name, f.type) for f in record] == [
        ("s", pa.string()), ("i", pa.int32()), ("l", pa.int64()), ("d", pa.float64()), ("b", pa.binary()),
        ("tags", pa.list_(pa.string())), ("m", pa.map_(pa.string(), pa.int64())), ("color", pa.string()),
        ("inner", pa.struct([("x", pa.float32())])), ("again", pa.struct([("x", pa.float32())])),
    ]
    with pytest.raises(PulsarOptionError, match="union"):
        arrow_type(["int", "string"])
    with pytest.raises(PulsarOptionError, match="cannot read"):
        arrow_type("Unknown")


def test_a_registry_answer_is_checked():
    made = ValueSchema.from_registry({"type": "AVRO", "data": json.dumps(RECORD)}, "t")
    assert [name for name, _ in made.fields()][:3] == ["s", "i", "l"]
    with pytest.raises(PulsarOptionError, match="STRING"):
        ValueSchema.from_registry({"type": "STRING", "data": ""}, "t")
    with pytest.raises(PulsarOptionError, match="not a record"):
        ValueSchema.from_registry({"type": "JSON", "data": '"string"'}, "t")


def test_values_decode_into_their_fields():
    fastavro = pytest.importorskip("fastavro")
    value = {"s": "a", "i": 1, "l": None, "d": 2.5, "b": b"\x00", "tags": ["x"], "m": {"k": 3}, "color": "BLUE",
             "inner": {"x": 1.5}, "again": {"x": 2.0}}
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, fastavro.parse_schema(RECORD), value)
    avro = ValueDecoder(ValueSchema("AVRO", json.dumps(RECORD)))
    assert avro(buffer.getvalue()) == value
    assert avro(b"\xff") is None  # (not of the schema: no fields; the value column still has it)
    as_json = ValueDecoder(ValueSchema("JSON", json.dumps(RECORD)))
    assert as_json(b'{"s": "a", "i": 1}') == {"s": "a", "i": 1}
    assert as_json(b"not json") is None and as_json(b"[1]") is None
    # the decoded dicts make the Arrow columns the source hands to Spark
    record = arrow_type(RECORD)
    assert pa.array([avro(buffer.getvalue()), None], record).to_pylist()[0]["m"] == [("k", 3)]
