"""A schema known only by its ``SchemaInfo``: what the official extension's
configurations take (``_pulsar.ProducerConfiguration().schema(info)``, the
consumer's and the reader's), made a ``Schema`` for ``pulsarfast.Client``'s
``schema=`` (``schema_of_info``).

As with the extension's producers and consumers, the payloads are bytes both
ways (the caller encodes and decodes them); the info is what the PRODUCER and
SUBSCRIBE commands register, unchanged. A BYTES info is ``BytesSchema``:
nothing registered, as for no schema.
"""
from __future__ import annotations

from typing import Any

from pulsarfast.base.enums import SchemaType
from pulsarfast.schema.info import SchemaInfo
from pulsarfast.schema.schema import BytesSchema, Schema

__all__ = ["InfoSchema", "schema_of_info"]


class InfoSchema(Schema):
    """``InfoSchema(info)``: registers info; bytes in, bytes out."""

    def __init__(self, info: SchemaInfo) -> None:
        super().__init__(bytes, info.schema_type(), None, info.name())
        self._given = info

    def schema_info(self) -> SchemaInfo:
        return self._given

    def encode(self, data: Any) -> bytes:
        self._validate_object_type(data)
        return bytes(data)

    def decode(self, data: bytes) -> bytes:
        return data

    def __str__(self) -> str:
        return "InfoSchema(%s)" % self._given.schema_type().name


def schema_of_info(info: SchemaInfo) -> Schema:
    """The Schema that registers info (BytesSchema for a BYTES one)."""
    if info.schema_type() is SchemaType.BYTES:
        return BytesSchema()
    return InfoSchema(info)
