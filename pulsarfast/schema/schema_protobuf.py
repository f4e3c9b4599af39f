"""``ProtobufNativeSchema`` (the official ``pulsar.schema.schema_protobuf``):
instances of a generated protobuf message class, in protobuf's own binary
encoding, through the ``protobuf`` library (the ``protobuf`` extra: ``pip
install 'nsqfast[protobuf]'``; without it ``ProtobufNativeSchema(...)``
raises ``ImportError``). The library is imported by the first
``ProtobufNativeSchema``, not with the package.

What it registers is what the Java and official Python clients register for
a PROTOBUF_NATIVE schema: a JSON object with ``fileDescriptorSet`` (the
base64 of a serialized ``FileDescriptorSet`` holding the message's
``.proto`` file and every file it imports, each after its own imports),
``rootMessageTypeName`` (the message's full name) and
``rootFileDescriptorName`` (its file's name), in that order, so both clients
register the same text for the same class.
"""
from __future__ import annotations

import base64
import importlib
from typing import Any

from pulsarfast.base.enums import SchemaType
from pulsarfast.schema.schema import Schema

__all__ = ["ProtobufNativeSchema"]


def _protobuf() -> tuple[Any, Any]:
    """(descriptor_pb2, the Message base class), or ImportError naming the extra that installs them."""
    try:
        descriptor_pb2 = importlib.import_module("google.protobuf.descriptor_pb2")
        message = importlib.import_module("google.protobuf.message")
    except ImportError:
        raise ImportError("ProtobufNativeSchema needs the protobuf library: pip install 'nsqfast[protobuf]'") from None
    return descriptor_pb2, message.Message


def _files_in_import_order(file_descriptor: Any) -> list[Any]:
    """The file and every file it imports, transitively, each once and after its own imports."""
    ordered: list[Any] = []
    seen: set[str] = set()
    stack: list[tuple[Any, bool]] = [(file_descriptor, False)]
    while stack:
        current, imports_done = stack.pop()
        if imports_done:
            ordered.append(current)
            continue
        if current.name in seen:
            continue
        seen.add(current.name)
        stack.append((current, True))
        stack.extend((dependency, False) for dependency in reversed(current.dependencies))
    return ordered


def native_definition(descriptor: Any, descriptor_pb2: Any) -> dict[str, str]:
    """The PROTOBUF_NATIVE definition of a message descriptor (see the module docstring)."""
    file_set = descriptor_pb2.FileDescriptorSet()
    for file_descriptor in _files_in_import_order(descriptor.file):
        file_descriptor.CopyToProto(file_set.file.add())
    return {
        "fileDescriptorSet": base64.b64encode(file_set.SerializeToString()).decode("ascii"),
        "rootMessageTypeName": descriptor.full_name,
        "rootFileDescriptorName": descriptor.file.name,
    }


class ProtobufNativeSchema(Schema):
    """``ProtobufNativeSchema(record_cls)``: record_cls is a generated protobuf message class; values are
    its instances."""

    def __init__(self, record_cls: Any) -> None:
        descriptor_pb2, message_class = _protobuf()
        if not (isinstance(record_cls, type) and issubclass(record_cls, message_class)):
            raise TypeError("record_cls must be a protobuf Message subclass, got %r" % (record_cls,))
        descriptor: Any = getattr(record_cls, "DESCRIPTOR")
        super().__init__(record_cls, SchemaType.PROTOBUF_NATIVE, native_definition(descriptor, descriptor_pb2),
                         "PROTOBUF_NATIVE")

    def encode(self, obj: Any) -> bytes:
        self._validate_object_type(obj)
        data: bytes = obj.SerializeToString()
        return data

    def decode(self, data: bytes) -> Any:
        return self._record_cls.FromString(data)

    def __str__(self) -> str:
        return "ProtobufNativeSchema(%s)" % self._record_cls.__name__
