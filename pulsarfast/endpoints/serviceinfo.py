"""``ServiceInfo`` and ``ServiceInfoProvider``, the official module's
description of one cluster endpoint (what ``Client.get_service_info()``
returns) and base class of Python-defined service discovery.

A ``ServiceInfoProvider`` subclass (or an ``AutoClusterFailover``,
``failover.py``) as ``Client``'s ``service_url``: the client starts on
``initial_service_info()``, then calls ``initialize(on_service_info_update)``;
each ``on_service_info_update(service_info)`` (from any thread) switches the
client to that service (``discovery.py``), and ``Client.close()`` calls the
provider's ``close()``.
"""
from __future__ import annotations

from typing import Callable

from pulsarfast.endpoints.auth import Authentication

#: the schemes the official ServiceInfo takes, and whether each means TLS
SCHEMES = {"pulsar": False, "pulsar+ssl": True, "http": False, "https": True}


def check_service_url(url: str) -> bool:
    """Whether url (a str) is a TLS one; ValueError, with the official messages, when it is not a service URL."""
    index = url.find("://")
    if index < 0:
        raise ValueError("The scheme part is missing: %s" % url)
    if index == 0:
        raise ValueError("Expected scheme name at index 0: %s" % url)
    scheme = url[:index]
    if scheme not in SCHEMES:
        raise ValueError("Invalid scheme: %s" % scheme)
    if not url[index + 3:]:
        raise ValueError("No service url is provided yet")
    return SCHEMES[scheme]


class ServiceInfo:
    """Connection information for one Pulsar cluster endpoint:
    ``ServiceInfo(service_url, authentication=None, tls_trust_certs_file_path=None)``."""

    def __init__(self, service_url: str, authentication: Authentication | None = None,
                 tls_trust_certs_file_path: str | None = None) -> None:
        if not isinstance(service_url, str):
            raise ValueError("Argument service_url is expected to be of type 'str' and not '%s'"
                             % type(service_url).__name__)
        if authentication is not None and not isinstance(authentication, Authentication):
            raise ValueError("Argument authentication is expected to be either None or of type 'Authentication'")
        if tls_trust_certs_file_path is not None and not isinstance(tls_trust_certs_file_path, str):
            raise ValueError("Argument tls_trust_certs_file_path is expected to be either None or of type 'str'")
        self._use_tls = check_service_url(service_url)
        self._service_url = service_url
        self._authentication = authentication
        self._tls_trust_certs_file_path = tls_trust_certs_file_path

    @property
    def service_url(self) -> str:
        return self._service_url

    @property
    def use_tls(self) -> bool:
        return self._use_tls

    @property
    def tls_trust_certs_file_path(self) -> str | None:
        return self._tls_trust_certs_file_path

    @property
    def authentication(self) -> Authentication | None:
        """The authentication used with this service (not in the official class: pulsarfast's client reads it)."""
        return self._authentication

    def __repr__(self) -> str:
        return ("ServiceInfo(service_url=%r, use_tls=%r, tls_trust_certs_file_path=%r)"
                % (self.service_url, self.use_tls, self.tls_trust_certs_file_path))

    @classmethod
    def wrap(cls, service_info: "ServiceInfo") -> "ServiceInfo":
        """A copy of service_info, without its authentication (the official ``wrap`` of the C extension's
        object, which keeps none)."""
        return cls(service_info.service_url, None, service_info.tls_trust_certs_file_path)


class ServiceInfoProvider:
    """Base class of Python-defined service discovery and failover providers
    (the official ``pulsar.ServiceInfoProvider``)."""

    def initial_service_info(self) -> ServiceInfo:
        raise NotImplementedError

    def initialize(self, on_service_info_update: Callable[[ServiceInfo], None]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Stop background work and release resources."""
        return None
