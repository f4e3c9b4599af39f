"""``AvroSchema`` (the official ``pulsar.schema.schema_avro``): a ``Record``
class's instances, or dicts of a definition given as a dict, in Avro's binary
encoding, through ``fastavro`` (the ``avro`` extra: ``pip install
'nsqfast[avro]'``; without it ``AvroSchema(...)`` raises ``ImportError``).

``fastavro`` is imported by the first ``AvroSchema``, not with the package.

Decoding uses the reader's own definition (the official client also fetches
the writer's definition by the message's schema version; pulsarfast does not
yet).
"""
from __future__ import annotations

import enum
import io
from typing import Any

from ..enums import SchemaType
from .definition import Record
from .schema import Schema, record_dict

__all__ = ["AvroSchema"]


def _fastavro() -> Any:
    """The fastavro module, or ImportError naming the extra that installs it."""
    try:
        import fastavro
    except ImportError:
        raise ImportError("AvroSchema needs the fastavro library: pip install 'nsqfast[avro]'") from None
    return fastavro


def _plain(value: Any) -> Any:
    """A value as fastavro writes it: enums by name, records and maps as dicts, lists item by item."""
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, Record):
        return {key: _plain(item) for key, item in record_dict(value).items()}
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


class AvroSchema(Schema):
    """``AvroSchema(record_cls, schema_definition=None)``: from a Record class, or (record_cls None)
    from a definition dict, whose values are then dicts."""

    def __init__(self, record_cls: Any, schema_definition: Any = None) -> None:
        self._fastavro = _fastavro()
        if record_cls is None and schema_definition is None:
            raise AssertionError("The param record_cls and schema_definition shouldn't be both None.")
        self._schema = record_cls.schema() if record_cls is not None else schema_definition
        self._parsed = self._fastavro.parse_schema(self._schema)
        super().__init__(record_cls, SchemaType.AVRO, self._schema, "AVRO")

    def encode(self, obj: Any) -> bytes:
        if self._record_cls is not None:
            self._validate_object_type(obj)
            values = _plain(obj)
        elif isinstance(obj, dict):
            values = obj
        else:
            raise ValueError("If using the custom schema, the record data should be dict type.")
        buffer = io.BytesIO()
        self._fastavro.schemaless_writer(buffer, self._parsed, values)
        return buffer.getvalue()

    def decode(self, data: bytes) -> Any:
        values: Any = self._fastavro.schemaless_reader(io.BytesIO(data), self._parsed, None)
        return self._record_cls(**values) if self._record_cls is not None else values
