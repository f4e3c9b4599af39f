"""TLS for broker connections: the ``ssl.SSLContext`` a client's options
make when the service URL is ``pulsar+ssl://`` (or ``use_tls=True``).

The options are the official client's, with its defaults:
``tls_trust_certs_file_path`` (the CAs the broker's certificate must chain
to; None: the system's), ``tls_allow_insecure_connection`` (no verification
at all), ``tls_validate_hostname`` (off by default: the chain is verified,
the name in the certificate is not), and a client certificate for mutual
TLS (``AuthenticationTLS``, else ``tls_certificate_file_path`` with
``tls_private_key_file_path``). The socket then runs the engine's
``msgengine.transport.TLSStream`` (OpenSSL over memory BIOs).

Files are loaded when the client is made (``settings.ClientSettings``, which
also checks the options' types): a missing or unreadable one is an
InvalidConfiguration then, not a failure at the first connection. A client
certificate and key that are read but do not load together (given the wrong
way round, or a key that is not the certificate's) are the official
client's ConnectError at the first connection instead, as there: the client
is made with an ``UnusableClientCertificate`` context, which fails every
connection it is asked for (a broker connection: ConnectError; an
``https://`` lookup: LookupError, as the official client's).
"""
from __future__ import annotations

import ssl
from typing import Any, NoReturn

from pulsarfast.base.results import InvalidConfiguration


def _no_password() -> str:
    # (without a callback, OpenSSL would prompt on the terminal for an encrypted key's password)
    raise InvalidConfiguration("the private key is encrypted; pulsarfast takes unencrypted keys only")


class UnusableClientCertificate(ssl.SSLContext):
    """The context of a client whose certificate and key files do not load together: wrapping a
    connection raises ``ssl.SSLError`` with ``reason`` (what OpenSSL said, and which files)."""

    reason = ""

    def wrap_bio(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise ssl.SSLError(self.reason)

    def wrap_socket(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise ssl.SSLError(self.reason)


def _unusable(certificate_file_path: str, private_key_file_path: str, exc: ssl.SSLError) -> ssl.SSLContext:
    context = UnusableClientCertificate(ssl.PROTOCOL_TLS_CLIENT)
    context.reason = "cannot use the client certificate %r with the private key %r: %s" % (
        certificate_file_path, private_key_file_path, exc.reason or exc)
    return context


def make_client_context(
    trust_certs_file_path: str | None = None,
    allow_insecure_connection: bool = False,
    validate_hostname: bool = False,
    certificate_file_path: str | None = None,
    private_key_file_path: str | None = None,
) -> ssl.SSLContext:
    """The context every TLS connection of one client uses (an UnusableClientCertificate when the
    certificate and key do not go together); raises InvalidConfiguration."""
    try:
        context = ssl.create_default_context(cafile=trust_certs_file_path or None)
    except (OSError, ssl.SSLError) as exc:
        raise InvalidConfiguration("cannot load tls_trust_certs_file_path %r: %s" % (trust_certs_file_path, exc)) from exc
    context.check_hostname = False
    if allow_insecure_connection:
        context.verify_mode = ssl.CERT_NONE
    else:
        context.verify_mode = ssl.CERT_REQUIRED
        context.check_hostname = bool(validate_hostname)
    if certificate_file_path or private_key_file_path:
        if not (certificate_file_path and private_key_file_path):
            raise InvalidConfiguration("a client certificate needs both its certificate file and its private key file")
        try:
            context.load_cert_chain(certificate_file_path, private_key_file_path, password=_no_password)
        except ssl.SSLError as exc:  # (read, but not a certificate and its key)
            return _unusable(certificate_file_path, private_key_file_path, exc)
        except (OSError, InvalidConfiguration) as exc:
            raise InvalidConfiguration("cannot load the client certificate %r (key %r): %s"
                                       % (certificate_file_path, private_key_file_path, exc)) from exc
    return context
