"""``MessageBuilder``: the official C extension's ``_pulsar.MessageBuilder``,
which builds a message before the extension's ``Producer.send(message)``.

Each setter converts its argument as the extension does (``TypeError``
otherwise) and returns the builder: ``content`` (bytes, or str sent as
UTF-8), ``property(key, value)``, ``properties(dict)`` (added to those set),
``partition_key``, ``ordering_key``, ``event_timestamp``, ``sequence_id``,
``replication_clusters(list)``, ``disable_replication(bool)``,
``deliver_at(ms)``, ``deliver_after(timedelta)`` and ``set_null_value()``.
``build()`` gives a ``pulsarfast.Message`` with the payload, properties,
keys, event time, sequence id and null value, no topic and the id
``(-1,-1,-1,-1)``, as the official one.

pulsarfast's ``Producer.send`` takes the content and keyword arguments (the
top-level API), not a built message: ``producer.send(**builder.send_kwargs())``
sends what the builder holds.
"""
from __future__ import annotations

import datetime
from typing import Any, Mapping, Sequence

from pulsarfast.extension.configobjects import convert_bool, convert_int64, convert_str, incompatible
from pulsarfast.wire.message import Message, MessageId

__all__ = ["MessageBuilder"]


class MessageBuilder:
    """``_pulsar.MessageBuilder()`` (see the module docstring)."""

    def __init__(self) -> None:
        self._content = b""
        self._properties: dict[str, str] = {}
        self._partition_key: str | None = None
        self._ordering_key: str | None = None
        self._event_timestamp: int | None = None
        self._sequence_id: int | None = None
        self._replication_clusters: list[str] | None = None
        self._disable_replication = False
        self._deliver_at: int | None = None
        self._deliver_after: datetime.timedelta | None = None
        self._null_value = False

    def content(self, content: bytes | str) -> "MessageBuilder":
        if isinstance(content, str):
            content = content.encode("utf-8")
        if not isinstance(content, bytes):
            raise incompatible("content", content)
        self._content = content
        return self

    def property(self, key: str, value: str) -> "MessageBuilder":
        self._properties[convert_str("property", key)] = convert_str("property", value)
        return self

    def properties(self, properties: Mapping[str, str]) -> "MessageBuilder":
        if not isinstance(properties, Mapping):
            raise incompatible("properties", properties)
        self._properties.update({convert_str("properties", key): convert_str("properties", value)
                                 for key, value in properties.items()})
        return self

    def partition_key(self, key: str) -> "MessageBuilder":
        self._partition_key = convert_str("partition_key", key)
        return self

    def ordering_key(self, key: str) -> "MessageBuilder":
        self._ordering_key = convert_str("ordering_key", key)
        return self

    def event_timestamp(self, timestamp: int) -> "MessageBuilder":
        self._event_timestamp = convert_int64("event_timestamp", timestamp)
        return self

    def sequence_id(self, sequence_id: int) -> "MessageBuilder":
        self._sequence_id = convert_int64("sequence_id", sequence_id)
        return self

    def replication_clusters(self, clusters: Sequence[str]) -> "MessageBuilder":
        if isinstance(clusters, (str, bytes)) or not isinstance(clusters, Sequence):
            raise incompatible("replication_clusters", clusters)
        self._replication_clusters = [convert_str("replication_clusters", cluster) for cluster in clusters]
        return self

    def disable_replication(self, flag: bool) -> "MessageBuilder":
        self._disable_replication = convert_bool("disable_replication", flag)
        return self

    def deliver_at(self, timestamp: int) -> "MessageBuilder":
        self._deliver_at = convert_int64("deliver_at", timestamp)
        return self

    def deliver_after(self, delay: datetime.timedelta) -> "MessageBuilder":
        if not isinstance(delay, datetime.timedelta):
            raise incompatible("deliver_after", delay)
        self._deliver_after = delay
        return self

    def set_null_value(self) -> "MessageBuilder":
        self._null_value = True
        return self

    def build(self) -> Message:
        return Message(
            self._content, MessageId(), "", properties=dict(self._properties), partition_key=self._partition_key,
            ordering_key=self._ordering_key.encode("utf-8") if self._ordering_key is not None else None,
            event_time=self._event_timestamp or 0, sequence_id=self._sequence_id or 0, null_value=self._null_value)

    def send_kwargs(self) -> dict[str, Any]:
        """What the builder holds, as ``pulsarfast.Producer.send``'s arguments."""
        kwargs: dict[str, Any] = {"content": None if self._null_value else self._content}
        for name, value in (("properties", dict(self._properties) or None), ("partition_key", self._partition_key),
                            ("ordering_key", self._ordering_key), ("sequence_id", self._sequence_id),
                            ("replication_clusters", self._replication_clusters),
                            ("event_timestamp", self._event_timestamp), ("deliver_at", self._deliver_at),
                            ("deliver_after", self._deliver_after)):
            if value is not None:
                kwargs[name] = value
        if self._disable_replication:
            kwargs["disable_replication"] = True
        return kwargs
