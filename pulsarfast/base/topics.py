"""Topic names and service URLs.

A short topic name (``my-topic``) lives in ``persistent://public/default``;
``tenant/namespace/topic`` is persistent; a full name keeps its domain.
Partitions of a partitioned topic are ``<topic>-partition-<n>``. Service
URLs are ``pulsar://host[:port][,host[:port]...]`` (port 6650 by default),
``pulsar+ssl://`` for TLS (port 6651 by default), or the broker's HTTP
service, ``http://`` (port 80) and ``https://`` (port 443), for lookups over
its HTTP API (``httplookup.py``).
"""
from __future__ import annotations

import re

from pulsarfast.base.results import InvalidServiceUrl, InvalidTopicName

PARTITION_SUFFIX = "-partition-"
DEFAULT_PORT = 6650
DEFAULT_TLS_PORT = 6651
#: each service URL scheme's default port
DEFAULT_PORTS = {"pulsar": DEFAULT_PORT, "pulsar+ssl": DEFAULT_TLS_PORT, "http": 80, "https": 443}
#: the schemes whose lookups go over the broker's HTTP API
HTTP_SCHEMES = ("http", "https")
_DOMAINS = ("persistent", "non-persistent")
_NAME_PART = re.compile(r"^[-=:.\w]+$")


def full_topic_name(topic: str) -> str:
    """The complete name: ``persistent://tenant/namespace/topic``."""
    if not isinstance(topic, str) or not topic.strip():
        raise InvalidTopicName("a topic name must be a non-empty string, not %r" % (topic,))
    topic = topic.strip()
    if "://" in topic:
        domain, _, rest = topic.partition("://")
        if domain not in _DOMAINS:
            raise InvalidTopicName("topic domain must be persistent or non-persistent: %r" % topic)
    else:
        domain, rest = "persistent", topic
        if "/" not in rest:
            rest = "public/default/" + rest
    parts = rest.split("/")
    if len(parts) not in (3, 4) or not all(parts):  # (4: a v1 name with a cluster)
        raise InvalidTopicName("invalid topic name %r: expected tenant/namespace/topic" % topic)
    if not all(_NAME_PART.match(part) for part in parts[:-1]):
        raise InvalidTopicName("invalid tenant or namespace in topic name %r" % topic)
    return "%s://%s" % (domain, rest)


def partition_name(topic: str, index: int) -> str:
    return "%s%s%d" % (topic, PARTITION_SUFFIX, index)


def partition_index(topic: str) -> int:
    """The partition number of a partition's name, -1 for any other topic."""
    base, sep, number = topic.rpartition(PARTITION_SUFFIX)
    if sep and base and number.isdigit():
        return int(number)
    return -1


def parse_service_url(url: str) -> tuple[str, list[tuple[str, int]]]:
    """(scheme, [(host, port), ...]) of a service URL; InvalidServiceUrl (with the official client's
    ValueError messages) when it is not one."""
    if not isinstance(url, str) or "://" not in url:
        raise InvalidServiceUrl("The scheme part is missing: %s" % (url,))
    scheme, _, rest = url.strip().partition("://")
    if not scheme:
        raise InvalidServiceUrl("Expected scheme name at index 0: %s" % (url,))
    if scheme not in DEFAULT_PORTS:
        raise InvalidServiceUrl("Invalid scheme: %s" % (scheme,))
    rest = rest.rstrip("/")
    if not rest:
        raise InvalidServiceUrl("No service url is provided yet")
    hosts = []
    for item in rest.split(","):
        item = item.strip()
        if not item:
            raise InvalidServiceUrl("invalid hostname: %s" % (rest,))
        if item.startswith("["):  # [ipv6]:port
            host, _, tail = item[1:].partition("]")
            port_text = tail[1:] if tail.startswith(":") else ""
        else:
            host, _, port_text = item.rpartition(":") if ":" in item else (item, "", "")
        try:
            port = int(port_text) if port_text else DEFAULT_PORTS[scheme]
        except ValueError:
            raise InvalidServiceUrl("invalid hostname: %s" % (item,)) from None
        if not host or not 0 < port < 65536:
            raise InvalidServiceUrl("invalid hostname: %s (the port must be 1 to 65535)" % (item,))
        hosts.append((host, port))
    return scheme, hosts


def address_of(broker_url: str) -> tuple[str, int]:
    """The (host, port) of a single-broker URL such as a lookup's brokerServiceUrl."""
    _scheme, hosts = parse_service_url(broker_url)
    return hosts[0]
