"""The few calls of Pulsar's admin REST API that the ``pulsar`` Spark source
makes on the driver: a topic's partition count, a namespace's topics (for
``topicsPattern``), a partition's ledgers (``internalStats``: where its
entries are, what retention has trimmed), the message id at a publish time,
a durable subscription's creation and cursor moves, and a topic's registered
schema; for the exactly-once sink, a partition's transaction buffer and whether
a transaction that ended was aborted on a partition it wrote to. Plain ``http.client``
requests (one connection per call), with the client's authentication as an
``Authorization`` header and its TLS settings for ``https://``.
"""
from __future__ import annotations

import http.client
import json
import ssl
import urllib.parse
from dataclasses import dataclass
from typing import Any

from pulsarfast.base.results import PulsarException
from pulsarfast.endpoints.auth import Authentication
from pulsarfast.network.httplookup import authorization_header, topic_path
from pulsarfast.spark.positions import Position

#: a request that takes longer than this fails the call
DEFAULT_TIMEOUT = 30.0


class AdminError(PulsarException):
    """The broker's admin API refused a request of the Spark source (``status``: the HTTP status)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class AdminSettings:
    """Where the admin API is and how to reach it (picklable: made on the driver from options)."""

    url: str
    timeout: float = DEFAULT_TIMEOUT
    trust_certs_file: str | None = None
    allow_insecure: bool = False
    validate_hostname: bool = True


class Admin:
    """The admin API of one Pulsar cluster, as the Spark source uses it."""

    def __init__(self, settings: AdminSettings, authentication: Authentication | None = None) -> None:
        parsed = urllib.parse.urlsplit(settings.url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise AdminError("admin_url must be http://host:port or https://host:port, not %r" % settings.url)
        self.settings = settings
        self._secure = parsed.scheme == "https"
        self._host = parsed.hostname
        self._port = parsed.port or (443 if self._secure else 80)
        self._prefix = parsed.path.rstrip("/")
        self._authentication = authentication
        self._context: ssl.SSLContext | None = None
        if self._secure:
            context = ssl.create_default_context(cafile=settings.trust_certs_file)
            if settings.allow_insecure:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            elif not settings.validate_hostname:
                context.check_hostname = False
            certificate = authentication.client_certificate() if authentication is not None else None
            if certificate is not None:
                context.load_cert_chain(certificate[0], certificate[1])
            self._context = context

    # -- requests --------------------------------------------------------------------------------

    def request(self, method: str, path: str, body: Any = None, missing_ok: bool = False) -> Any:
        """The parsed JSON answer of one call (None when empty, or a 404 with missing_ok)."""
        headers = {"Accept": "application/json", "User-Agent": "pulsarfast-spark"}
        authorization = authorization_header(self._authentication)
        if authorization is not None:
            headers["Authorization"] = authorization
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if self._secure:
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                self._host, self._port, timeout=self.settings.timeout, context=self._context)
        else:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=self.settings.timeout)
        try:
            conn.request(method, self._prefix + path, body=data, headers=headers)
            response = conn.getresponse()
            raw = response.read()
            status = response.status
        except (OSError, http.client.HTTPException) as exc:
            raise AdminError("admin API %s: %s %s failed: %s" % (self.settings.url, method, path, exc)) from exc
        finally:
            conn.close()
        if status == 404 and missing_ok:
            return None
        if status >= 300:
            reason = raw.decode("utf-8", "replace")
            try:
                reason = json.loads(reason).get("reason", reason)
            except (ValueError, AttributeError):
                pass
            raise AdminError("admin API %s %s: HTTP %d: %s" % (method, path, status, reason), status)
        return json.loads(raw) if raw else None

    # -- the calls -------------------------------------------------------------------------------

    def partitions(self, topic: str) -> int | None:
        """A topic's partition count (0: not partitioned), or None when the topic does not exist."""
        answer = self.request("GET", "/admin/v2/%s/partitions" % topic_path(topic), missing_ok=True)
        if answer is None:
            return None
        count = int(answer.get("partitions", 0))
        if count == 0 and self.internal_stats(topic) is None:
            return None
        return count

    def namespace_topics(self, namespace: str, domain: str = "persistent") -> list[str]:
        """Every topic of ``tenant/namespace`` (partitions by their own names)."""
        return list(self.request("GET", "/admin/v2/%s/%s" % (domain, namespace)) or [])

    def internal_stats(self, partition: str) -> dict | None:
        """A partition's (or unpartitioned topic's) internal stats; None when it does not exist."""
        return self.request("GET", "/admin/v2/%s/internalStats" % topic_path(partition), missing_ok=True)

    def message_id_at(self, partition: str, timestamp_ms: int) -> Position:
        """The first entry published at or after timestamp_ms (the position after the last
        entry when none is)."""
        answer = self.request("GET", "/admin/v2/%s/messageid/%d" % (topic_path(partition), timestamp_ms))
        return Position(int(answer["ledgerId"]), int(answer["entryId"]))

    def schema(self, topic: str) -> dict | None:
        """The topic's latest registered schema (``{"type", "data", ...}``), or None without one."""
        rest = topic.partition("://")[2]
        return self.request("GET", "/admin/v2/schemas/%s/schema" % "/".join(
            rest.split("/")[:-1] + [urllib.parse.quote(rest.split("/")[-1], safe="")]), missing_ok=True)

    def create_subscription(self, partition: str, subscription: str, first_unread: Position) -> bool:
        """Make a durable subscription whose first unread entry is first_unread (``(-1, -1)``:
        the partition's first). False when it was there already (it is left as it is)."""
        path = "/admin/v2/%s/subscription/%s" % (topic_path(partition), urllib.parse.quote(subscription, safe=""))
        try:
            self.request("PUT", path, {"ledgerId": first_unread.ledger, "entryId": first_unread.entry})
        except AdminError as exc:
            if exc.status == 409:
                return False
            raise
        return True

    def move_cursor(self, partition: str, subscription: str, last_read: Position) -> None:
        """Move a subscription's cursor so that everything up to last_read is acknowledged."""
        path = "/admin/v2/%s/subscription/%s/resetcursor" % (
            topic_path(partition), urllib.parse.quote(subscription, safe=""))
        self.request("POST", path, {"ledgerId": last_read.ledger, "entryId": last_read.entry, "excluded": True})

    def transaction_aborted(self, partition: str, most_bits: int, least_bits: int) -> bool:
        """Whether the transaction (most_bits, least_bits), which wrote to partition (a persistent
        topic's partition, or an unpartitioned topic), was aborted there: the transaction buffer's
        ``aborted`` (``GET /admin/v3/transactions/transactionInBufferStats/<tenant>/<namespace>/
        <topic>/<most>/<least>``). False for one committed, or still open, or one that never wrote there."""
        answer = self.request("GET", "/admin/v3/transactions/transactionInBufferStats/%s/%d/%d" % (
            topic_path(partition).split("/", 1)[1], most_bits, least_bits))
        return bool((answer or {}).get("aborted", False))

    def transaction_buffer_stats(self, partition: str) -> dict | None:
        """A partition's transaction buffer (``GET /admin/v3/transactions/transactionBufferStats/<tenant>/
        <namespace>/<topic>``: ``state``, ``lastSnapshotTimestamps``, ``ongoingTxnSize``...), None when the
        partition is not there yet (a partitioned topic's partitions appear at their first producer)."""
        return self.request("GET", "/admin/v3/transactions/transactionBufferStats/%s" % (
            topic_path(partition).split("/", 1)[1]), missing_ok=True)
