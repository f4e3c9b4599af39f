"""Discovery through nsqlookupd: build the /lookup URL from an address given
with or without http://, query one lookupd, and parse its producers into
(broadcast_address, tcp_port) pairs. The Reader polls all of them each round.
``requests`` loads at the first query, not with the module (import time, issue 49).
"""
from __future__ import annotations

import logging
from urllib.parse import urlencode, urlsplit, urlunsplit, parse_qsl

logger = logging.getLogger(__name__)

ACCEPT = "application/vnd.nsq; version=1.0"


def lookup_url(address: str, topic: str) -> str:
    """http://host:port/lookup?topic=... from 'host:port', 'http://host:port' or a full URL."""
    if "://" not in address:
        address = "http://" + address
    scheme, netloc, path, query, _ = urlsplit(address)
    if path in ("", "/"):
        path = "/lookup"
    params = [(k, v) for k, v in parse_qsl(query) if k != "topic"] + [("topic", topic)]
    return urlunsplit((scheme, netloc, path, urlencode(params), ""))


def parse_producers(payload: dict) -> list[tuple[str, int]]:
    """Producers from a /lookup answer (nsqlookupd v1 format, or the older wrapped one)."""
    data = payload.get("data", payload) if isinstance(payload, dict) else {}
    producers = []
    for producer in data.get("producers") or []:
        host = producer.get("broadcast_address") or producer.get("address")
        port = producer.get("tcp_port")
        if host and isinstance(port, int):
            producers.append((host, port))
    return producers


def query(address: str, topic: str, connect_timeout: float, request_timeout: float) -> list[tuple[str, int]]:
    """The producers one nsqlookupd lists for a topic; [] when it does not know the topic."""
    import requests  # (here, not at the top: it loads urllib3, http.client, email, ...)

    response = requests.get(
        lookup_url(address, topic), headers={"Accept": ACCEPT}, timeout=(connect_timeout, request_timeout)
    )
    if response.status_code == 404:
        return []
    response.raise_for_status()
    return parse_producers(response.json())
