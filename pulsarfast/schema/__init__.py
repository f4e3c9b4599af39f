"""Schemas (the official ``pulsar.schema`` package, module for module):
``definition`` (``Record`` and its field types), ``schema`` (``Schema``,
``BytesSchema``, ``StringSchema``, ``JsonSchema``), ``schema_avro``
(``AvroSchema``, with the ``avro`` extra), ``schema_protobuf``
(``ProtobufNativeSchema``, with the ``protobuf`` extra), and ``info``
(``SchemaInfo``, the official ``_pulsar.SchemaInfo``).
"""
from __future__ import annotations

from pulsarfast.schema.definition import (
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
from pulsarfast.schema.info import SchemaInfo
from pulsarfast.schema.schema import BytesSchema, JsonSchema, Schema, StringSchema
from pulsarfast.schema.schema_avro import AvroSchema
from pulsarfast.schema.schema_protobuf import ProtobufNativeSchema

__all__ = ["Record", "Field", "Null", "Boolean", "Integer", "Long", "Float", "Double", "Bytes", "String", "Array",
           "Map", "CustomEnum", "Schema", "BytesSchema", "StringSchema", "JsonSchema", "AvroSchema", "ProtobufNativeSchema",
           "SchemaInfo"]
