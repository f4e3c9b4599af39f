"""``AutoClusterFailover`` (the official class: a primary ``ServiceInfo``,
ordered secondaries, and the probing thresholds) and ``FailoverWatch``, the
probing that a ``Client`` given one runs.

The watch does what the official client's does: every ``check_interval_ms``
it probes the service in use by opening a TCP connection to its hosts (one
answering host is enough; each attempt is bounded by the client's connect
timeout). On the primary, after ``failover_threshold`` failed probes in a row
it switches to the first secondary that answers a probe. On a secondary it
probes that secondary and the primary: the primary answering
``switch_back_threshold`` times in a row switches back; the secondary
failing ``failover_threshold`` times in a row switches back to the primary
at once if it answers. A switch calls ``on_switch(service_info)``
(``discovery.py`` makes the client use it).

Probes run in a task of the client's backend (a greenlet or a thread),
started by a timer of the backend, one probe round at a time.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from msgengine.runtime import Backend, Timer

from pulsarfast.base.topics import parse_service_url
from pulsarfast.endpoints.serviceinfo import ServiceInfo

logger = logging.getLogger(__name__)


def _check_type(kind: type, value: Any, name: str) -> None:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError("Argument %s is expected to be of type '%s' and not '%s'"
                         % (name, kind.__name__, type(value).__name__))


class AutoClusterFailover:
    """Cluster-level automatic failover configuration for :class:`Client`:
    ``AutoClusterFailover(primary, secondary, check_interval_ms=5000,
    failover_threshold=1, switch_back_threshold=1)``, given as the Client's
    ``service_url``."""

    def __init__(self, primary: ServiceInfo, secondary: list[ServiceInfo], check_interval_ms: int = 5000,
                 failover_threshold: int = 1, switch_back_threshold: int = 1) -> None:
        _check_type(ServiceInfo, primary, "primary")
        _check_type(list, secondary, "secondary")
        _check_type(int, check_interval_ms, "check_interval_ms")
        _check_type(int, failover_threshold, "failover_threshold")
        _check_type(int, switch_back_threshold, "switch_back_threshold")
        if not secondary:
            raise ValueError("Argument secondary is expected to contain at least one ServiceInfo")
        for index, service_info in enumerate(secondary):
            if not isinstance(service_info, ServiceInfo):
                raise ValueError("Argument secondary[%d] is expected to be of type 'ServiceInfo' and not '%s'"
                                 % (index, type(service_info).__name__))
        if check_interval_ms <= 0:
            raise ValueError("Argument check_interval_ms is expected to be greater than 0")
        if failover_threshold <= 0:
            raise ValueError("Argument failover_threshold is expected to be greater than 0")
        if switch_back_threshold <= 0:
            raise ValueError("Argument switch_back_threshold is expected to be greater than 0")
        self.primary = primary
        self.secondary = list(secondary)
        self.check_interval_ms = check_interval_ms
        self.failover_threshold = failover_threshold
        self.switch_back_threshold = switch_back_threshold

    def __repr__(self) -> str:
        return ("AutoClusterFailover(primary=%r, secondary=%r, check_interval_ms=%r, failover_threshold=%r, "
                "switch_back_threshold=%r)" % (self.primary, self.secondary, self.check_interval_ms,
                                               self.failover_threshold, self.switch_back_threshold))


class FailoverWatch:
    """The probing of one client's AutoClusterFailover; see the module docstring."""

    def __init__(self, config: AutoClusterFailover, backend: Backend, probe_timeout: float,
                 on_switch: Callable[[ServiceInfo], None]) -> None:
        self.config = config
        self.backend = backend
        self.probe_timeout = probe_timeout
        self.on_switch = on_switch
        self.current = config.primary
        self.failures = 0  # failed probes in a row of the service in use
        self.recoveries = 0  # answered probes in a row of the primary, while on a secondary
        self._running = False  # a probe round is under way
        self._closed = False
        self._timer: Timer | None = None

    def start(self) -> None:
        self._timer = self.backend.call_every(self.config.check_interval_ms / 1000.0, self._tick)

    def close(self) -> None:
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()

    def _tick(self) -> None:
        if self._running or self._closed:
            return
        self._running = True
        self.backend.spawn(self._round)

    def _round(self) -> None:
        try:
            self.check()
        except Exception:  # a probe round must never end the watch
            logger.exception("failover check of %s failed", self.current.service_url)
        finally:
            self._running = False

    # -- one probe round (public for tests: it is what the timer runs) ----------------------

    def check(self) -> None:
        if self.current is self.config.primary:
            self._check_primary()
        else:
            self._check_secondary()

    def _check_primary(self) -> None:
        if self.probe(self.current):
            self.failures = 0
            return
        self.failures += 1
        if self.failures < self.config.failover_threshold:
            return
        for service_info in self.config.secondary:
            if self._closed:
                return
            if self.probe(service_info):
                self._switch(service_info)
                return

    def _check_secondary(self) -> None:
        if self.probe(self.current):
            self.failures = 0
        else:
            self.failures += 1
            if self.failures >= self.config.failover_threshold and self.probe(self.config.primary):
                self._switch(self.config.primary)
                return
        if self.probe(self.config.primary):
            self.recoveries += 1
            if self.recoveries >= self.config.switch_back_threshold:
                self._switch(self.config.primary)
        else:
            self.recoveries = 0

    def _switch(self, service_info: ServiceInfo) -> None:
        if self._closed or service_info is self.current:
            return
        logger.info("switching service URL from %s to %s", self.current.service_url, service_info.service_url)
        self.current = service_info
        self.failures = 0
        self.recoveries = 0
        self.on_switch(service_info)

    def probe(self, service_info: ServiceInfo) -> bool:
        """Whether one of the service URL's hosts accepts a TCP connection."""
        try:
            _scheme, hosts = parse_service_url(service_info.service_url)
        except Exception:
            return False
        for host in hosts:
            try:
                sock = self.backend.create_connection(host, self.probe_timeout)
            except OSError:
                continue
            sock.close()
            return True
        return False
