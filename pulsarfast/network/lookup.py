"""Service discovery over the binary protocol: partitioned-topic metadata
and topic lookup with redirects (the spec's "Service discovery").

``Lookup.partitions(topic)`` asks how many partitions a topic has (0: not
partitioned). ``Lookup.broker_for(topic)`` returns where the topic lives as
(logical broker URL, socket address, through_proxy): it follows Redirect
answers (passing on their ``authoritative`` flag) until a Connect answer, and
when the answer says ``proxy_through_service_url`` the socket goes to the
service URL's host and CONNECT names the broker. Lookups are requests on a
connection to one of the service URL's hosts: the one that answered last,
else the next ones in turn. A client on TLS takes the answers'
``brokerServiceUrlTls`` (a broker without one is a LookupError).

With ``listener_name`` (Client's ``listener_name=``) each LOOKUP carries it
as ``advertised_listener_name``: the broker answers with that listener's
URLs (and, as Pulsar 4 brokers do, ``proxy_through_service_url``, so the
socket still goes to the service URL's host while CONNECT names the
listener's URL). A broker that refuses a lookup as not ready (its answer to a
listener it does not advertise, or a bundle in transit) is asked again with
backoff until the operation timeout, which then raises Timeout, as the
official client does.

``httplookup.HttpLookup`` is the same interface over the broker's HTTP API.
"""
from __future__ import annotations

import logging
from typing import Any

from msgengine.backoff import reconnect_delay
from msgengine.runtime import monotonic

from pulsarfast.base.results import LookupError as PulsarLookupError
from pulsarfast.base.results import PulsarException, ServiceUnitNotReady, Timeout, TopicNotFound, from_server_error
from pulsarfast.base.topics import address_of
from pulsarfast.network.pool import ConnectionPool
from pulsarfast.wire import proto

logger = logging.getLogger(__name__)

MAX_REDIRECTS = 20


class Lookup:
    def __init__(self, pool: ConnectionPool, service_url: str, hosts: list[tuple[str, int]], timeout: float,
                 use_tls: bool = False, listener_name: str | None = None) -> None:
        self.pool = pool
        self.use_tls = use_tls
        self.listener_name = listener_name or None
        self.service_url = service_url
        self.hosts = hosts
        self.timeout = timeout
        self._current = 0  # the host lookups go to

    def service_connection(self) -> Any:
        """A connection to one of the service URL's hosts: the one that worked
        last, else the next ones in turn."""
        last: BaseException | None = None
        for _ in range(len(self.hosts)):
            index = self._current
            host = self.hosts[index]
            url = "%s://%s:%d" % ("pulsar+ssl" if self.use_tls else "pulsar", host[0], host[1])
            try:
                return self.pool.get(url, host)
            except PulsarException as exc:
                last = exc
                self._current = (index + 1) % len(self.hosts)
                logger.warning("cannot reach service host %s: %s", url, exc)
        assert last is not None
        raise last

    def partitions(self, topic: str) -> int:
        conn = self.service_connection()
        answer = conn.request(lambda rid: proto.partitioned_metadata(topic, rid), self.timeout)
        if answer.response == proto.METADATA_FAILED or answer.error is not None:
            raise from_server_error(answer.error, answer.message or "partition metadata of %s failed" % topic)
        return answer.partitions

    def broker_for(self, topic: str) -> tuple[str, tuple[str, int], bool]:
        """Where topic lives; a broker not ready to answer is asked again until the operation timeout."""
        deadline = monotonic() + self.timeout
        failures = 0
        while True:
            try:
                return self._broker_for(topic)
            except ServiceUnitNotReady as exc:
                failures += 1
                delay = reconnect_delay(failures, cap=1.0)
                if monotonic() + delay >= deadline:
                    raise Timeout("lookup of %s timed out: %s" % (topic, exc)) from None
                logger.info("lookup of %s: %s; trying again in %.2fs", topic, exc, delay)
                self.pool.backend.sleep(delay)

    def _broker_for(self, topic: str) -> tuple[str, tuple[str, int], bool]:
        conn = self.service_connection()
        authoritative = False
        listener = self.listener_name
        for _ in range(MAX_REDIRECTS):
            answer = conn.request(lambda rid: proto.lookup(topic, rid, authoritative, listener), self.timeout)
            if answer.response == proto.LOOKUP_FAILED or answer.response is None:
                if answer.error is not None:
                    raise from_server_error(answer.error, answer.message or "lookup of %s failed" % topic)
                raise PulsarLookupError("lookup of %s failed: %s" % (topic, answer.message or "no answer"))
            broker_url = answer.brokerServiceUrlTls if self.use_tls else answer.brokerServiceUrl
            if not broker_url:
                raise PulsarLookupError("lookup of %s gave no broker URL%s" % (topic, " for TLS" if self.use_tls else ""))
            through_proxy = answer.proxy_through_service_url
            address = conn.address if through_proxy else address_of(broker_url)
            if answer.response == proto.LOOKUP_CONNECT:
                return broker_url, address, through_proxy
            authoritative = answer.authoritative  # Redirect: ask that broker
            conn = self.pool.get(broker_url, address, through_proxy)
        raise TopicNotFound("lookup of %s redirected more than %d times" % (topic, MAX_REDIRECTS))
