"""The schemas (the official ``pulsar.schema.schema``): ``Schema``, the base
every schema extends, and ``BytesSchema``, ``StringSchema``, ``JsonSchema``.

A schema turns a value into a payload (``encode``, which checks the value's
type first: ``TypeError`` before anything is sent) and back (``decode``), and
describes itself to the broker (``schema_info()``: its type, its name and its
definition, the JSON text ``json.dumps(definition, indent=True)`` gives, as
the official client writes it, so both register the same text).
"""
from __future__ import annotations

import enum
import json
from typing import Any

from pulsarfast.base.enums import SchemaType
from pulsarfast.schema.info import SchemaInfo

__all__ = ["Schema", "BytesSchema", "StringSchema", "JsonSchema"]

_RESERVED = ("_default", "_required", "_required_default")


def record_dict(obj: Any) -> dict[str, Any]:
    """A record's field values (its attributes, without the record's own settings)."""
    return {key: value for key, value in vars(obj).items() if key not in _RESERVED}


class Schema:
    """The base of the schemas: ``Schema(record_cls, schema_type, schema_definition, schema_name)``."""

    def __init__(self, record_cls: Any, schema_type: SchemaType, schema_definition: Any, schema_name: str) -> None:
        self._record_cls = record_cls
        self._schema_info = SchemaInfo(schema_type, schema_name, json.dumps(schema_definition, indent=True))
        self._client: Any = None

    def encode(self, obj: Any) -> bytes:
        raise NotImplementedError

    def decode(self, data: bytes) -> Any:
        raise NotImplementedError

    def decode_message(self, msg: Any) -> Any:
        """The value of a received message (its payload decoded)."""
        return self.decode(msg.data())

    def schema_info(self) -> SchemaInfo:
        return self._schema_info

    def attach_client(self, client: Any) -> None:
        self._client = client

    def _validate_object_type(self, obj: Any) -> None:
        if not isinstance(obj, self._record_cls):
            raise TypeError("Invalid record obj of type " + str(type(obj))
                            + " - expected type is " + str(self._record_cls))


class BytesSchema(Schema):
    """Bytes in, bytes out: the default schema (nothing is registered with the broker)."""

    def __init__(self) -> None:
        super().__init__(bytes, SchemaType.BYTES, None, "BYTES")

    def encode(self, data: Any) -> bytes:
        self._validate_object_type(data)
        return data

    def decode(self, data: bytes) -> bytes:
        return data

    def __str__(self) -> str:
        return "BytesSchema"


class StringSchema(Schema):
    """``str`` values, as UTF-8."""

    def __init__(self) -> None:
        super().__init__(str, SchemaType.STRING, None, "STRING")

    def encode(self, obj: Any) -> bytes:
        self._validate_object_type(obj)
        return obj.encode("utf-8")

    def decode(self, data: bytes) -> str:
        return data.decode("utf-8")

    def __str__(self) -> str:
        return "StringSchema"


class JsonSchema(Schema):
    """A ``Record`` class's instances as JSON objects."""

    def __init__(self, record_cls: Any) -> None:
        super().__init__(record_cls, SchemaType.JSON, record_cls.schema(), "JSON")

    @staticmethod
    def _plain(value: Any) -> Any:
        if isinstance(value, enum.Enum):
            return value.value
        if isinstance(value, bytes):
            return value.decode()
        return record_dict(value)

    def encode(self, obj: Any) -> bytes:
        self._validate_object_type(obj)
        return json.dumps(record_dict(obj), default=self._plain, indent=True).encode("utf-8")

    def decode(self, data: bytes) -> Any:
        return self._record_cls(**json.loads(data))
