"""Service discovery over the broker's HTTP API, for ``http://`` and
``https://`` service URLs: the same two questions as ``lookup.Lookup``, with
the same interface.

``HttpLookup.partitions(topic)`` is ``GET /admin/v2/<domain>/<tenant>/<ns>/<topic>/partitions?checkAllowAutoCreation=true``
(``{"partitions": n}``); ``HttpLookup.broker_for(topic)`` is
``GET /lookup/v2/topic/<domain>/<tenant>/<ns>/<topic>`` (``{"brokerUrl":
..., "brokerUrlTls": ...}``), which returns (broker URL, its address, False):
``brokerUrlTls`` when the client uses TLS (``brokerUrlSsl`` in older
brokers), else ``brokerUrl``. These are the official C++ client's requests.
Redirects (307 to another broker's HTTP service) are followed, up to 20.

Each request carries the client's authentication as an ``Authorization``
header (``Bearer <token>`` for token and OAuth2, ``Basic ...`` for basic, as
the official client's HTTP headers) and, with ``listener_name``, the
``X-Pulsar-ListenerName`` header (the official Java client's; the C++ client
sends none), so the broker answers that listener's URLs.

Errors as the official client has them: an HTTP error status (404 for a
namespace that does not exist, 401, 500 ...) is a ConnectError; a refused
connection is tried again (with backoff) until the operation timeout, then a
Timeout, and so is a request that outlasts it; a TLS failure or an answer
that is not the expected JSON is a LookupError.

The requests use ``http.client`` on the socket module as it is (plain or
gevent-patched), in ``backend.run_blocking`` (an OS thread under gevent, so
the hub never waits on them), one connection per request; ``http.client`` loads at the first
request, not with the module (import time, issue 49).
"""
from __future__ import annotations

import base64
import json
import logging
import socket
import ssl
import urllib.parse
from typing import TYPE_CHECKING, Any

from msgengine.backoff import reconnect_delay
from msgengine.runtime import Backend, monotonic

from pulsarfast.base.results import ConnectError, PulsarException, Timeout
from pulsarfast.base.results import LookupError as PulsarLookupError
from pulsarfast.base.topics import address_of
from pulsarfast.endpoints.auth import Authentication

if TYPE_CHECKING:
    import http.client

logger = logging.getLogger(__name__)

MAX_REDIRECTS = 20
LISTENER_HEADER = "X-Pulsar-ListenerName"
USER_AGENT = "pulsarfast"


def topic_path(topic: str) -> str:
    """``<domain>/<tenant>/<namespace>/<encoded local name>`` of a full topic name (v1 names keep their cluster)."""
    domain, _, rest = topic.partition("://")
    parts = rest.split("/")
    return "/".join([domain] + parts[:-1] + [urllib.parse.quote(parts[-1], safe="")])


def authorization_header(authentication: Authentication | None) -> str | None:
    """The Authorization header the official client sends for authentication (None: none): by the kind
    of authentication (its ``http_scheme``), not by its method name (a basic one's may be any)."""
    if authentication is None or authentication.http_scheme is None:
        return None
    data = authentication.auth_data()
    if not data:
        return None
    if authentication.http_scheme == "Basic":
        return "Basic " + base64.b64encode(data).decode("ascii")
    return "%s %s" % (authentication.http_scheme, data.decode("utf-8"))


class _Retry(Exception):
    """A request that may succeed when tried again (the connection was refused)."""


class HttpLookup:
    def __init__(self, backend: Backend, hosts: list[tuple[str, int]], timeout: float, connect_timeout: float,
                 use_tls: bool = False, ssl_context: ssl.SSLContext | None = None,
                 authentication: Authentication | None = None, listener_name: str | None = None) -> None:
        self.backend = backend
        self.hosts = hosts
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.use_tls = use_tls
        self.ssl_context = ssl_context
        self.authentication = authentication
        self.listener_name = listener_name
        self._current = 0  # the host requests go to

    def partitions(self, topic: str) -> int:
        answer = self._get("/admin/v2/%s/partitions?checkAllowAutoCreation=true" % topic_path(topic), topic)
        partitions = answer.get("partitions", 0)
        if not isinstance(partitions, int):
            raise PulsarLookupError("partition metadata of %s: no partition count in %r" % (topic, answer))
        return partitions

    def broker_for(self, topic: str) -> tuple[str, tuple[str, int], bool]:
        answer = self._get("/lookup/v2/topic/%s" % topic_path(topic), topic)
        if self.use_tls:
            broker_url = answer.get("brokerUrlTls") or answer.get("brokerUrlSsl")
        else:
            broker_url = answer.get("brokerUrl")
        if not broker_url or not isinstance(broker_url, str):
            raise PulsarLookupError("lookup of %s gave no broker URL%s" % (topic, " for TLS" if self.use_tls else ""))
        return broker_url, address_of(broker_url), False

    # -- requests -----------------------------------------------------------------------------

    def _get(self, path: str, topic: str) -> dict[str, Any]:
        """The JSON object a GET of path answers, tried again while the connection is refused."""
        deadline = monotonic() + self.timeout
        failures = 0
        while True:
            host = self.hosts[self._current]
            try:
                return self.backend.run_blocking(self._request, host, path, deadline)
            except _Retry as exc:
                failures += 1
                self._current = (self._current + 1) % len(self.hosts)
                delay = reconnect_delay(failures, cap=1.0)
                if monotonic() + delay >= deadline:
                    raise Timeout("lookup of %s timed out: %s" % (topic, exc)) from None
                logger.info("HTTP lookup of %s: %s; trying again in %.2fs", topic, exc, delay)
                self.backend.sleep(delay)

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        authorization = authorization_header(self.authentication)
        if authorization is not None:
            headers["Authorization"] = authorization
        if self.listener_name:
            headers[LISTENER_HEADER] = self.listener_name
        return headers

    def _connection(self, host: tuple[str, int], secure: bool, timeout: float) -> http.client.HTTPConnection:
        import http.client

        if secure:
            context = self.ssl_context if self.ssl_context is not None else ssl.create_default_context()
            return http.client.HTTPSConnection(host[0], host[1], timeout=timeout, context=context)
        return http.client.HTTPConnection(host[0], host[1], timeout=timeout)

    def _request(self, host: tuple[str, int], path: str, deadline: float) -> dict[str, Any]:
        """One GET (and its redirects); in run_blocking."""
        import http.client

        secure = self.use_tls
        headers = self._headers()
        for _ in range(MAX_REDIRECTS):
            remaining = deadline - monotonic()
            if remaining <= 0:
                raise Timeout("HTTP lookup %s timed out" % path)
            conn = self._connection(host, secure, min(remaining, self.connect_timeout))
            try:
                try:
                    conn.connect()
                except ConnectionRefusedError as exc:
                    raise _Retry("%s:%d refused the connection (%s)" % (host[0], host[1], exc)) from None
                if conn.sock is not None:
                    conn.sock.settimeout(max(deadline - monotonic(), 0.001))
                conn.request("GET", path, headers=headers)
                response = conn.getresponse()
                body = response.read()
            except PulsarException:
                raise
            except (socket.timeout, TimeoutError):
                raise Timeout("HTTP lookup %s on %s:%d timed out" % (path, host[0], host[1])) from None
            except ssl.SSLError as exc:
                detail = exc.args[0] if len(exc.args) == 1 else exc  # (a one-argument SSLError prints as a tuple)
                raise PulsarLookupError("HTTP lookup %s on %s:%d: TLS failed: %s" % (path, host[0], host[1], detail)
                                        ) from None
            except (OSError, http.client.HTTPException) as exc:
                raise ConnectError("HTTP lookup %s on %s:%d failed: %s" % (path, host[0], host[1], exc)) from None
            finally:
                conn.close()
            if response.status in (301, 302, 303, 307, 308):
                location = response.getheader("Location") or ""
                target = urllib.parse.urlsplit(location)
                if not target.hostname:
                    raise PulsarLookupError("HTTP lookup %s: a redirect without a location" % path)
                secure = target.scheme == "https"
                host = (target.hostname, target.port or (443 if secure else 80))
                path = target.path + ("?" + target.query if target.query else "")
                continue
            if response.status >= 400:
                raise ConnectError("HTTP lookup %s on %s:%d: %d %s" % (path, host[0], host[1], response.status,
                                                                       _reason(response, body)))
            try:
                answer = json.loads(body)
            except ValueError:
                answer = None
            if not isinstance(answer, dict):
                raise PulsarLookupError("HTTP lookup %s: not a JSON object: %r" % (path, body[:200]))
            return answer
        raise PulsarLookupError("HTTP lookup %s redirected more than %d times" % (path, MAX_REDIRECTS))


def _reason(response: http.client.HTTPResponse, body: bytes) -> str:
    """The broker's reason for an error status: its status line's (Pulsar puts the error message there),
    else the JSON ``reason``."""
    if response.reason and response.reason.strip():
        return response.reason.strip()
    try:
        reason = json.loads(body).get("reason")
    except (ValueError, AttributeError):
        reason = None
    return reason.strip() if isinstance(reason, str) else ""
