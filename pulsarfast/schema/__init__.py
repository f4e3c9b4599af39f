"""Schemas (the official ``pulsar.schema`` package, module for module):
``definition`` (``Record`` and its field types), ``schema`` (``Schema``,
``BytesSchema``, ``StringSchema``, ``JsonSchema``), ``schema_avro``
(``AvroSchema``, with the ``avro`` extra), ``schema_protobuf``
(``ProtobufNativeSchema``, with the ``protobuf`` extra), and ``info``
(``SchemaInfo``, the official ``_pulsar.SchemaInfo``).
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
from .schema_protobuf import ProtobufNativeSchema

__all__ = ["Record", "Field", "Null", "Boolean", "Integer", "Long", "Float", "Double", "Bytes", "String", "Array",
           "Map", "CustomEnum", "Schema", "BytesSchema", "StringSchema", "JsonSchema", "AvroSchema", "ProtobufNativeSchema",
           "SchemaInfo"]
