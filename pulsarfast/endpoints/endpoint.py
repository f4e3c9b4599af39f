"""One service endpoint, ready to use: what a service URL (with the
authentication and trust file that go with it) becomes for the client.

``make_endpoint(url, authentication, trust file, tls flags...)`` parses the
URL (``topics.parse_service_url``), decides whether connections use TLS (a
``pulsar+ssl://`` or ``https://`` URL, or ``use_tls``), and loads the TLS
context once (``tls.make_client_context``; a client certificate from
AuthenticationTLS or the certificate/key files). ``Client`` has one endpoint
from its ``service_url``; with a ``ServiceInfoProvider`` or
``AutoClusterFailover`` (``discovery.py``) every ``ServiceInfo`` it switches
to becomes one, with that ServiceInfo's own authentication and trust file.
"""
from __future__ import annotations

import dataclasses
import ssl

from pulsarfast.base.results import InvalidConfiguration
from pulsarfast.base.topics import HTTP_SCHEMES, parse_service_url
from pulsarfast.endpoints.auth import Authentication
from pulsarfast.endpoints.tls import make_client_context

#: the schemes that mean TLS by themselves
TLS_SCHEMES = ("pulsar+ssl", "https")


@dataclasses.dataclass(frozen=True)
class TlsOptions:
    """The client-wide TLS settings every endpoint's context is made with."""

    use_tls: bool = False
    allow_insecure_connection: bool = False
    validate_hostname: bool = False
    certificate_file_path: str | None = None
    private_key_file_path: str | None = None


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """A parsed service URL with the security it is used with."""

    url: str
    scheme: str
    hosts: list[tuple[str, int]]
    #: connections (and HTTP lookups) use TLS
    tls: bool
    ssl_context: ssl.SSLContext | None = dataclasses.field(repr=False, compare=False)
    authentication: Authentication | None = dataclasses.field(repr=False, compare=False)
    trust_file: str | None = None

    @property
    def http(self) -> bool:
        """Lookups go over the broker's HTTP API (an http:// or https:// URL)."""
        return self.scheme in HTTP_SCHEMES


def make_endpoint(url: str, authentication: Authentication | None, trust_file: str | None,
                  options: TlsOptions) -> Endpoint:
    """The endpoint of url; raises InvalidUrl (a bad URL) or InvalidConfiguration (TLS files)."""
    scheme, hosts = parse_service_url(url)
    tls = scheme in TLS_SCHEMES or options.use_tls
    client_certificate = authentication.client_certificate() if authentication is not None else None
    context = None
    if tls:
        certificate_file, key_file = client_certificate or (options.certificate_file_path,
                                                            options.private_key_file_path)
        context = make_client_context(trust_file, options.allow_insecure_connection, options.validate_hostname,
                                      certificate_file, key_file)
    elif client_certificate is not None:
        raise InvalidConfiguration("AuthenticationTLS needs a pulsar+ssl:// service URL (or use_tls=True)")
    return Endpoint(url, scheme, hosts, tls, context, authentication, trust_file)
