"""``SerDe`` and its implementations (the official
``pulsar.functions.serde``): how a Pulsar Function's input bytes become the
object ``process`` receives, and its output object becomes bytes.

``PickleSerDe`` pickles. ``IdentitySerDe`` writes an int, float, complex or
str as its ``str()`` in UTF-8 and bytes as they are (anything else:
``TypeError``), and reads bytes back as the first of int, float, complex,
str that parses the UTF-8 text (bytes that are not UTF-8 come back as they
are), as the official one does.
"""
from __future__ import annotations

import pickle
from abc import abstractmethod
from typing import Any

__all__ = ["SerDe", "PickleSerDe", "IdentitySerDe"]


class SerDe:
    """Serialization of a function's inputs and outputs: subclass it."""

    @abstractmethod
    def serialize(self, input: Any) -> bytes:  # noqa: A002 - the official parameter name
        """The object as bytes."""

    @abstractmethod
    def deserialize(self, input_bytes: bytes) -> Any:
        """The bytes as an object."""


class PickleSerDe(SerDe):
    """Objects pickled (``pickle.dumps`` / ``pickle.loads``)."""

    def serialize(self, input: Any) -> bytes:  # noqa: A002
        return pickle.dumps(input)

    def deserialize(self, input_bytes: bytes) -> Any:
        return pickle.loads(input_bytes)


class IdentitySerDe(SerDe):
    """Numbers and text as UTF-8 text, bytes as they are (see the module docstring)."""

    def __init__(self) -> None:
        self._types: list[type] = [int, float, complex, str]

    def serialize(self, input: Any) -> bytes:  # noqa: A002
        if type(input) in self._types:
            return str(input).encode("utf-8")
        if type(input) is bytes:
            return input
        raise TypeError("IdentitySerde cannot serialize object of type %s" % type(input))

    def deserialize(self, input_bytes: bytes) -> Any:
        for kind in self._types:
            try:
                return kind(input_bytes.decode("utf-8"))
            except Exception:  # noqa: BLE001 - the next kind is tried, as the official one does
                continue
        return input_bytes
