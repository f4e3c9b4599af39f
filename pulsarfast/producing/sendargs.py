"""The checks ``Producer.send`` and ``send_async`` make of a message's arguments, as the official
client 3.13 makes them, before anything is queued or sent (so a refused message takes no sequence id
and leaves the producer as it was).

The official client refuses in two steps, and so do these checks, with the same exception classes:

- its Python layer (``Producer._build_msg``): ``content`` goes through the schema (``BytesSchema``:
  anything but ``bytes``, a ``bytearray`` or ``str`` too, raises ``TypeError``), then a wrong type
  of ``properties`` (not a dict), ``partition_key``, ``ordering_key`` (not str), ``sequence_id``,
  ``event_timestamp``, ``deliver_at`` (not int), ``replication_clusters`` (not a list),
  ``deliver_after`` (not a ``timedelta``) raises ``ValueError`` "Argument X is expected to be either
  None or of type 'T'", and a ``disable_replication`` that is not a bool (None included) "Argument
  disable_replication is expected to be of type 'bool' and not 'T'";
- its C++ binding (pybind11), for the values that pass those: a property key or value, or a
  replication cluster, that is not text (str, bytes or bytearray) raises ``TypeError``; a
  ``sequence_id`` below 0 ``ValueError`` ("sequenceId needs to be >= 0") and one above 2**63 - 1
  ``TypeError``; an ``event_timestamp`` or ``deliver_at`` outside 0..2**64 - 1 ``TypeError``. These
  values are only looked at when true, as there (``sequence_id=0`` and ``event_timestamp=0`` mean
  none; an empty ``replication_clusters`` means the namespace's).

``check_content`` is the only check a plain ``send(b"...")`` makes (one ``isinstance``);
``check_options`` runs only when an option is given, and returns the properties as the frame
carries them (UTF-8 pairs).
"""
from __future__ import annotations

import datetime
from typing import Any

__all__ = ["check_content", "check_options", "check_callback", "encode_text"]

MAX_INT64 = (1 << 63) - 1
MAX_UINT64 = (1 << 64) - 1


def check_content(content: Any) -> bytes:
    """The payload of a content that is not None: bytes, or TypeError (the official BytesSchema's)."""
    if isinstance(content, bytes):
        return content
    raise TypeError("Invalid record obj of type %s - expected type is %s" % (type(content), bytes))


def _either_none_or(name: str, value: Any, kind: type) -> None:
    if value is not None and not isinstance(value, kind):
        raise ValueError("Argument %s is expected to be either None or of type '%s'" % (name, kind.__name__))


def encode_text(value: Any, call: str) -> bytes:
    """A property key or value, or a cluster name, as bytes: str (UTF-8), bytes or bytearray, as the
    C++ binding takes them; anything else is the binding's TypeError."""
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    raise TypeError("%s(): incompatible function arguments. The following argument types are supported: str "
                    "(invoked with %s)" % (call, type(value).__name__))


def _unsigned(name: str, value: int, maximum: int) -> None:
    if not 0 <= value <= maximum:
        raise TypeError("%s(): incompatible function arguments. The following argument types are supported: "
                        "an int of 0 to %d (invoked with %d)" % (name, maximum, value))


def check_options(properties: Any, partition_key: Any, ordering_key: Any, sequence_id: Any,
                  replication_clusters: Any, disable_replication: Any, event_timestamp: Any, deliver_at: Any,
                  deliver_after: Any) -> list[tuple[bytes, bytes]] | None:
    """Check the message's options as the official client does (see the module docstring); the
    properties as UTF-8 (key, value) pairs (None: no property)."""
    _either_none_or("properties", properties, dict)
    _either_none_or("partition_key", partition_key, str)
    _either_none_or("ordering_key", ordering_key, str)
    _either_none_or("sequence_id", sequence_id, int)
    _either_none_or("replication_clusters", replication_clusters, list)
    if not isinstance(disable_replication, bool):
        raise ValueError("Argument disable_replication is expected to be of type 'bool' and not '%s'"
                         % type(disable_replication).__name__)
    _either_none_or("event_timestamp", event_timestamp, int)
    _either_none_or("deliver_at", deliver_at, int)
    _either_none_or("deliver_after", deliver_after, datetime.timedelta)
    pairs = [(encode_text(key, "property"), encode_text(value, "property"))
             for key, value in properties.items()] if properties else None
    if sequence_id:
        if sequence_id < 0:
            raise ValueError("sequenceId needs to be >= 0")
        _unsigned("sequence_id", sequence_id, MAX_INT64)
    if replication_clusters:
        for cluster in replication_clusters:
            encode_text(cluster, "replication_clusters")
    if event_timestamp:
        _unsigned("event_timestamp", event_timestamp, MAX_UINT64)
    if deliver_at:
        _unsigned("deliver_at", deliver_at, MAX_UINT64)
    return pairs


def check_callback(callback: Any) -> None:
    """send_async's callback: callable or None, else the binding's TypeError."""
    if callback is not None and not callable(callback):
        raise TypeError("send_async(): incompatible function arguments: the callback must be callable or None, "
                        "not %s" % type(callback).__name__)
