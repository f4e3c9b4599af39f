"""A topic's registered schema of one version, asked of the broker that serves
the topic over the binary protocol (GET_SCHEMA, answered by
GET_SCHEMA_RESPONSE), as the official extension's
``Client.get_schema_info(topic, version)``: what ``AvroSchema`` decodes a
message written with another version of the schema with.

A version is the long the broker gives it (0 for the first); on the wire and
in a message's metadata it is that number's 8 bytes, big-endian
(``version_bytes``; ``Message.int_schema_version()`` reads a message's). A
negative version asks for the latest.
The answer is a ``SchemaInfo`` with the registered type, definition and
properties, and an empty name, as the official client's (the broker's answer
names the topic's schema, ``tenant/namespace/topic``: not kept).
A version or topic the broker does not have raises its error (``TopicNotFound``,
as the official client's).

``SchemaSource(client)`` is what a client attaches to the schema of each
consumer and reader it makes (``Schema.attach_client``), as the official
client attaches its extension's client: its ``get_schema_info(topic,
version)`` asks through the client, which it holds as given (the client's
weak proxy: once the client is gone, asking raises ``ReferenceError``).
"""
from __future__ import annotations

from typing import Any

from msgengine.runtime import from_any_thread

from pulsarfast.base.enums import SchemaType
from pulsarfast.base.results import PulsarException, TopicNotFound, from_server_error
from pulsarfast.schema.info import SchemaInfo
from pulsarfast.wire import proto

__all__ = ["version_bytes", "schema_info_of", "fetch_schema_info", "SchemaSource", "attach_schema_source"]


def version_bytes(version: int) -> bytes | None:
    """A schema version as GET_SCHEMA carries it (None: the latest)."""
    if version < 0:
        return None
    return int(version).to_bytes(8, "big", signed=True)


def schema_info_of(record: Any) -> SchemaInfo:
    """The SchemaInfo of a decoded ``Schema`` message."""
    try:
        kind = SchemaType(record.type)
    except ValueError:
        raise PulsarException("the broker gave a schema of type %d, which this client does not know"
                              % record.type) from None
    properties = {pair.key: pair.value for pair in record.properties}
    return SchemaInfo(kind, "", bytes(record.schema_data).decode("utf-8"), properties)


def fetch_schema_info(connection: Any, topic: str, version: int, timeout: float) -> SchemaInfo:
    """The schema of topic at version (negative: the latest), asked on connection (a
    ``BrokerConnection`` to the broker that serves the topic)."""
    wanted = version_bytes(version)
    answer = connection.request(lambda request_id: proto.get_schema(topic, request_id, wanted), timeout)
    if answer.error_code is not None:
        raise from_server_error(answer.error_code, answer.error_message
                                or "no schema of version %d for %s" % (version, topic))
    if answer.schema is None:
        raise TopicNotFound("no schema of version %d for %s" % (version, topic))
    return schema_info_of(answer.schema)


class SchemaSource:
    """``get_schema_info(topic, version)`` through a client (its ``connection_for``, ``operation_timeout``
    and ``backend``); see the module docstring."""

    def __init__(self, client: Any) -> None:
        self._client = client

    @property
    def backend(self) -> Any:
        return self._client.backend

    @from_any_thread()
    def get_schema_info(self, topic: str, version: int) -> SchemaInfo:
        """The registered schema of topic at version (negative: the latest)."""
        client = self._client
        return fetch_schema_info(client.connection_for(topic), topic, version, client.operation_timeout)


def attach_schema_source(schema: Any, client: Any) -> None:
    """Give a consumer's or reader's schema (None: none) a SchemaSource through client."""
    if schema is not None:
        schema.attach_client(SchemaSource(client))
