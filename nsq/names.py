"""Topic and channel name rules: 1 to 64 characters of [.a-zA-Z0-9_-], with an
optional "#ephemeral" suffix, checked before anything reaches the wire.
"""
from __future__ import annotations

import re

from nsq.errors import InvalidArgumentError

#: anchored as pynsq's is (``VALID_NAME_RE.match(name)`` checks the whole name), with ``\Z``
#: rather than ``$``, so that a trailing newline is not a valid name either
VALID_NAME_RE = re.compile(r"^[.a-zA-Z0-9_-]+(#ephemeral)?\Z")


def _is_valid_name(name: object) -> bool:
    if isinstance(name, bytes):
        try:
            name = name.decode("ascii")
        except UnicodeDecodeError:
            return False
    if not isinstance(name, str) or not 0 < len(name) <= 64:
        return False
    return VALID_NAME_RE.fullmatch(name) is not None


def valid_topic_name(topic: object) -> bool:
    return _is_valid_name(topic)


def valid_channel_name(channel: object) -> bool:
    return _is_valid_name(channel)


_checked_topics: dict[object, str] = {}


def check_topic(topic: object) -> str:
    """Return the topic as str, or raise InvalidArgumentError naming the problem."""
    checked = _checked_topics.get(topic)
    if checked is not None:
        return checked
    if not valid_topic_name(topic):
        raise InvalidArgumentError(
            "invalid topic name %r: use 1 to 64 characters of [.a-zA-Z0-9_-], optionally ending in #ephemeral" % (topic,)
        )
    checked = topic.decode("ascii") if isinstance(topic, bytes) else topic  # type: ignore[assignment]
    if len(_checked_topics) < 4096:  # publishers reuse a few topics; remember them
        _checked_topics[topic] = checked  # type: ignore[assignment]
    return checked  # type: ignore[return-value]


def check_channel(channel: object) -> str:
    if not valid_channel_name(channel):
        raise InvalidArgumentError(
            "invalid channel name %r: use 1 to 64 characters of [.a-zA-Z0-9_-], optionally ending in #ephemeral"
            % (channel,)
        )
    return channel.decode("ascii") if isinstance(channel, bytes) else channel  # type: ignore[return-value]
