"""``SchemaInfo``: what a schema registers with the broker (the official
``_pulsar.SchemaInfo``: its type, its name and its definition text), and the
protobuf ``Schema`` message the PRODUCER and SUBSCRIBE commands carry it in.
"""
from __future__ import annotations

from typing import Mapping

from pulsarfast.base.enums import SchemaType

__all__ = ["SchemaInfo"]


class SchemaInfo:
    """``SchemaInfo(schema_type, name, schema)``: a schema's type, name and definition (JSON text for
    JSON and Avro), as the official extension's object."""

    __slots__ = ("_type", "_name", "_schema", "_properties")

    def __init__(self, schema_type: SchemaType, name: str, schema: str,
                 properties: Mapping[str, str] | None = None) -> None:
        self._type = SchemaType(schema_type)
        self._name = name
        self._schema = schema
        self._properties = dict(properties or {})

    def schema_type(self) -> SchemaType:
        return self._type

    def name(self) -> str:
        return self._name

    def schema(self) -> str:
        return self._schema

    def properties(self) -> dict[str, str]:
        return dict(self._properties)

    def __repr__(self) -> str:
        return "SchemaInfo(%s, %r, %r)" % (self._type.name, self._name, self._schema)
