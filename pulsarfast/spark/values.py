"""Decoding message values by the topic's schema, for the ``pulsar``
source's ``valueSchema=topic``: the schema registered on the topic (AVRO or
JSON, whose definition is an Avro record) becomes columns, one per field, and
each message's value is decoded into them. ``arrow_type`` maps an Avro type to
the Arrow type Spark reads (and from which the source's Spark schema is
made); ``ValueDecoder`` turns a payload into a dict of the fields (None when
it does not decode). Needs pyarrow; fastavro for AVRO.
"""
from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any, Callable

import pyarrow as pa

from pulsarfast.spark.options import PulsarOptionError

#: the schema types whose values decode into fields
DECODED_KINDS = ("AVRO", "JSON")

_PRIMITIVES: dict[str, pa.DataType] = {
    "null": pa.null(),
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}


def arrow_type(avro: Any, names: dict[str, pa.DataType] | None = None) -> pa.DataType:
    """The Arrow type of an Avro type (a union with null is the other type, nullable; enums are
    strings, fixed is binary; logical types keep their underlying type)."""
    names = {} if names is None else names
    if isinstance(avro, str):
        if avro in _PRIMITIVES:
            return _PRIMITIVES[avro]
        if avro in names:
            return names[avro]
        raise PulsarOptionError("the topic's schema uses the type %r, which the pulsar source cannot read" % avro)
    if isinstance(avro, list):
        kinds = [t for t in avro if t != "null"]
        if len(kinds) != 1:
            raise PulsarOptionError("the topic's schema has a union of %s: only a type or null is read" % avro)
        return arrow_type(kinds[0], names)
    if not isinstance(avro, dict):
        raise PulsarOptionError("not an Avro type: %r" % (avro,))
    kind = avro.get("type")
    if kind == "record":
        made = pa.struct([(f["name"], arrow_type(f["type"], names)) for f in avro.get("fields", [])])
        names[avro.get("name", "")] = made
        return made
    if kind == "array":
        return pa.list_(arrow_type(avro["items"], names))
    if kind == "map":
        return pa.map_(pa.string(), arrow_type(avro["values"], names))
    if kind == "enum":
        names[avro.get("name", "")] = pa.string()
        return pa.string()
    if kind == "fixed":
        names[avro.get("name", "")] = pa.binary()
        return pa.binary()
    return arrow_type(kind, names)


@dataclass(frozen=True)
class ValueSchema:
    """A topic's registered schema: its type (AVRO or JSON) and its definition (an Avro record, as
    JSON text), checked on the driver and pickled to the executors."""

    kind: str
    definition: str

    @classmethod
    def from_registry(cls, answer: dict, topic: str) -> "ValueSchema":
        """From the admin API's ``GET /admin/v2/schemas/<topic>/schema`` answer."""
        kind = str(answer.get("type", "")).upper()
        if kind not in DECODED_KINDS:
            raise PulsarOptionError("option 'valueSchema': the schema of %s is %s; only %s values decode into "
                                    "columns" % (topic, kind or "none", " and ".join(DECODED_KINDS)))
        made = cls(kind, str(answer.get("data", "")))
        if not isinstance(made.parsed(), dict) or made.parsed().get("type") != "record":
            raise PulsarOptionError("option 'valueSchema': the schema of %s is not a record" % topic)
        return made

    def parsed(self) -> Any:
        return json.loads(self.definition)

    def fields(self) -> list[tuple[str, pa.DataType]]:
        """The record's fields and their Arrow types, in order."""
        record = arrow_type(self.parsed())
        return [(record.field(i).name, record.field(i).type) for i in range(record.num_fields)]


class ValueDecoder:
    """A payload -> dict of the record's fields (None when the payload does not decode)."""

    def __init__(self, schema: ValueSchema) -> None:
        self._decode: Callable[[bytes], Any]
        if schema.kind == "AVRO":
            try:
                import fastavro
            except ImportError:
                raise ImportError("valueSchema with an AVRO topic needs fastavro: pip install 'nsqfast[avro]'") from None
            parsed = fastavro.parse_schema(schema.parsed())
            reader = fastavro.schemaless_reader

            def decode_avro(data: bytes) -> Any:
                return reader(io.BytesIO(data), parsed, None)
            self._decode = decode_avro
        else:
            self._decode = json.loads

    def __call__(self, data: bytes) -> dict | None:
        try:
            value = self._decode(data)
        except Exception:  # (a payload that is not of the schema: its fields are null, its value is there)
            return None
        return value if isinstance(value, dict) else None
