"""Which service a client uses now, and its lookups: ``Discovery``.

It starts on the client's endpoint (``ClientSettings.endpoint``: the service
URL, or the initial ``ServiceInfo`` of an ``AutoClusterFailover`` or
``ServiceInfoProvider``) and looks topics up there: over the binary protocol
(``lookup.Lookup``) for ``pulsar://`` and ``pulsar+ssl://``, over the
broker's HTTP API (``httplookup.HttpLookup``) for ``http://`` and
``https://``; both send the client's ``listener_name``.

``start()`` begins what may switch it: the probing of an
AutoClusterFailover (``failover.FailoverWatch``), or a provider's
``initialize(on_service_info_update)``. A switch (from any thread) makes the
new ServiceInfo an endpoint (its own authentication and trust file), so new
lookups and connections go there, then calls the client's ``on_switch`` on
the backend's context: the client closes its connections, and its
producers and consumers re-connect through the supervisor, by lookups on the
new service. ``close()`` stops the watch and calls the provider's
``close()``.
"""
from __future__ import annotations

import logging
from typing import Callable, Protocol

from pulsarfast.endpoints.endpoint import Endpoint, make_endpoint
from pulsarfast.endpoints.failover import AutoClusterFailover, FailoverWatch
from pulsarfast.endpoints.serviceinfo import ServiceInfo, ServiceInfoProvider
from pulsarfast.network.httplookup import HttpLookup
from pulsarfast.network.lookup import Lookup
from pulsarfast.network.pool import ConnectionPool
from pulsarfast.options.settings import ClientSettings

logger = logging.getLogger(__name__)


class Lookups(Protocol):
    """What Lookup and HttpLookup both answer."""

    def partitions(self, topic: str) -> int: ...

    def broker_for(self, topic: str) -> tuple[str, tuple[str, int], bool]: ...


class Discovery:
    def __init__(self, settings: ClientSettings, pool: ConnectionPool, on_switch: Callable[[], None]) -> None:
        self.settings = settings
        self.pool = pool
        self.backend = pool.backend  # (the client's, which counts the tasks of its own: lifetime.py)
        self.on_switch = on_switch
        self.endpoint: Endpoint = settings.endpoint
        self.lookup: Lookups = self._lookups(self.endpoint)
        self.switches = 0  # how many times the service changed
        self._watch: FailoverWatch | None = None
        self._closed = False

    def _lookups(self, endpoint: Endpoint) -> Lookups:
        settings = self.settings
        if endpoint.http:
            return HttpLookup(self.backend, endpoint.hosts, settings.operation_timeout, settings.connect_timeout,
                              use_tls=endpoint.tls, ssl_context=endpoint.ssl_context,
                              authentication=endpoint.authentication, listener_name=settings.listener_name)
        return Lookup(self.pool, endpoint.url, endpoint.hosts, settings.operation_timeout, use_tls=endpoint.tls,
                      listener_name=settings.listener_name)

    # -- what the client asks ---------------------------------------------------------------

    def partitions(self, topic: str) -> int:
        return self.lookup.partitions(topic)

    def broker_for(self, topic: str) -> tuple[str, tuple[str, int], bool]:
        return self.lookup.broker_for(topic)

    def service_info(self) -> ServiceInfo:
        """The service in use (Client.get_service_info())."""
        return ServiceInfo(self.endpoint.url, None, self.endpoint.trust_file)

    # -- switching --------------------------------------------------------------------------

    def start(self) -> None:
        provider = self.settings.service_url
        if isinstance(provider, AutoClusterFailover):
            self._watch = FailoverWatch(provider, self.backend, self.settings.connect_timeout, self.switch)
            self._watch.start()
        elif isinstance(provider, ServiceInfoProvider):
            provider.initialize(self.switch)

    def switch(self, service_info: ServiceInfo) -> None:
        """Use service_info from now on (the callback a provider is given; any thread)."""
        if self._closed:
            return
        if not isinstance(service_info, ServiceInfo):
            logger.error("a service info update must be a ServiceInfo, not %r: ignored", type(service_info).__name__)
            return
        try:
            endpoint = make_endpoint(service_info.service_url, service_info.authentication,
                                     service_info.tls_trust_certs_file_path, self.settings.tls_options)
        except Exception as exc:
            logger.error("cannot switch to %s: %s", service_info.service_url, exc)
            return
        lookup = self._lookups(endpoint)
        self.endpoint, self.lookup = endpoint, lookup
        self.switches += 1
        logger.info("the client now uses %s", endpoint.url)
        self.backend.call_threadsafe(self.on_switch)

    def close(self) -> None:
        self._closed = True
        if self._watch is not None:
            self._watch.close()
        provider = self.settings.service_url
        if isinstance(provider, ServiceInfoProvider):
            try:
                provider.close()
            except Exception:
                logger.exception("the ServiceInfoProvider's close() failed")

