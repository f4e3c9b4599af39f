"""``AvroSchema`` (the official ``pulsar.schema.schema_avro``): a ``Record``
class's instances, or dicts of a definition given as a dict, in Avro's binary
encoding, through ``fastavro`` (the ``avro`` extra: ``pip install
'nsqfast[avro]'``; without it ``AvroSchema(...)`` raises ``ImportError``).

``fastavro`` is imported by the first ``AvroSchema``, not with the package.

``decode(data)`` reads with the schema's own definition. A received message's
value (``decode_message``, what ``Message.value()`` calls) is read as the
official client reads it: with the definition it was written with, the
topic's registered schema of the message's version, which the client the
consumer or reader attached (``attach_client``) fetches once per topic and
version (``pulsarfast.network.schemafetch``), resolved against the schema's own (so
a reader with a newer definition gets the defaults of fields the writer did
not have). The writer's record takes the reader's name first, as there. If
that fails (no client, the broker cannot say, not an Avro schema), a warning
is logged and the schema's own definition reads the payload.
"""
from __future__ import annotations

import enum
import io
import json
import logging
from typing import Any

from pulsarfast.base.enums import SchemaType
from pulsarfast.schema.definition import Record
from pulsarfast.schema.schema import Schema, record_dict

__all__ = ["AvroSchema"]

logger = logging.getLogger(__name__)


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
        #: (topic, schema version) -> the writer's definition, parsed
        self._writer_schemas: dict[tuple[str, int], Any] = {}
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
        return self._decode_with(data, self._parsed, None)

    def decode_message(self, msg: Any) -> Any:
        """A received message's value, read with its writer's definition (see the module docstring)."""
        if self._client is None:
            return self.decode(msg.data())
        topic, version = msg.topic_name(), msg.int_schema_version()
        try:
            writer = self._writer_schema(topic, version)
            return self._decode_with(msg.data(), writer, self._parsed)
        except Exception as exc:  # (any failure: the schema's own definition, as the official client does)
            logger.warning("Failed to decode %s with the schema of %s version %d: %s; decoding with the "
                           "reader's schema", msg.message_id(), topic, version, exc)
            return self.decode(msg.data())

    def _writer_schema(self, topic: str, version: int) -> Any:
        """The parsed definition topic's schema had at version (fetched once)."""
        known = self._writer_schemas.get((topic, version))
        if known is not None:
            return known
        logger.info("Downloading schema of %s version %d...", topic, version)
        info = self._client.get_schema_info(topic, version)
        if info.schema_type() is not SchemaType.AVRO:
            raise RuntimeError('The schema type of topic "%s" and version %d is %s' % (topic, version,
                                                                                     info.schema_type()))
        definition = json.loads(info.schema())
        if isinstance(definition, dict) and isinstance(self._schema, dict) and "name" in self._schema:
            definition["name"] = self._schema["name"]
        parsed = self._writer_schemas[(topic, version)] = self._fastavro.parse_schema(definition)
        return parsed

    def _decode_with(self, data: bytes, writer: Any, reader: Any) -> Any:
        values: Any = self._fastavro.schemaless_reader(io.BytesIO(data), writer, reader)
        return self._record_cls(**values) if self._record_cls is not None else values
