"""Schemas (the official ``pulsar.schema`` package, module for module):
``definition`` (``Record`` and its field types), ``schema`` (``Schema``,
``BytesSchema``, ``StringSchema``, ``JsonSchema``), ``schema_avro``
(``AvroSchema``, with the ``avro`` extra), and ``info`` (``SchemaInfo``, the
official ``_pulsar.SchemaInfo``).

Not here yet: ``ProtobufNativeSchema``.
"""
from __future__ import annotations

from .definition import (
    Array,
    Boolean,
    Bytes,
    CustomEnum,
    Double,
    Field,
    Float,
    Integer,
    Long,
    Map,
    Null,
    Record,
    String,
)
from .info import SchemaInfo
from .schema import BytesSchema, JsonSchema, Schema, StringSchema
from .schema_avro import AvroSchema

__all__ = ["Record", "Field", "Null", "Boolean", "Integer", "Long", "Float", "Double", "Bytes", "String", "Array",
           "Map", "CustomEnum", "Schema", "BytesSchema", "StringSchema", "JsonSchema", "AvroSchema", "SchemaInfo"]
