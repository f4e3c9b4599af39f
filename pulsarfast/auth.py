"""Authentication: what a client proves to the broker, with the official
``pulsar`` module's classes.

- ``AuthenticationToken(token)``: a JWT (or any token the broker's token
  provider accepts), as a str or a function returning one. It goes in
  CONNECT (method ``token``); a function is called again for every new
  connection and every AUTH_CHALLENGE (the broker asks again when the token
  it holds expires), so it can hand out a fresh token each time.
- ``AuthenticationTLS(certificate_path, private_key_path)``: a client
  certificate shown in the TLS handshake (mutual TLS); CONNECT names the
  method ``tls`` and the broker takes the role from the certificate. Needs a
  ``pulsar+ssl://`` service URL (or ``use_tls=True``).
- ``Authentication(dynamicLibPath, authParamsString)`` loads a C++ plugin in
  the official client: pulsarfast has no such plugins and raises
  InvalidConfiguration, as do ``AuthenticationAthenz``,
  ``AuthenticationOauth2`` and ``AuthenticationBasic``.

Secrets stay out of every repr, log line and exception message.
"""
from __future__ import annotations

from typing import Any, Callable

from .errors import ErrorGettingAuthenticationData, InvalidConfiguration

SUPPORTED = "AuthenticationToken or AuthenticationTLS"


def _check_str(value: Any, name: str) -> None:
    if not isinstance(value, str):
        raise ValueError("Argument %s is expected to be of type 'str' and not '%s'" % (name, type(value).__name__))


class Authentication:
    """The base of the authentication classes; see the module docstring.

    A subclass sets ``method_name`` and answers ``auth_data()`` (the bytes
    for CONNECT and AUTH_RESPONSE) and ``client_certificate()``."""

    method_name = ""

    def __init__(self, dynamicLibPath: str, authParamsString: str) -> None:
        _check_str(dynamicLibPath, "dynamicLibPath")
        _check_str(authParamsString, "authParamsString")
        raise InvalidConfiguration("pulsarfast cannot load authentication plugins from a shared library (%s); use %s"
                                   % (dynamicLibPath, SUPPORTED))

    def auth_data(self) -> bytes:
        """The authentication data to send now; raises ErrorGettingAuthenticationData."""
        return b""

    def client_certificate(self) -> tuple[str, str] | None:
        """(certificate file, private key file) to show in the TLS handshake, if any."""
        return None

    def __repr__(self) -> str:
        return "<%s>" % type(self).__name__


class AuthenticationToken(Authentication):
    """Token authentication: ``AuthenticationToken("eyJ...")`` or ``AuthenticationToken(read_token)``."""

    method_name = "token"

    def __init__(self, token: str | Callable[[], str]) -> None:
        if not (isinstance(token, str) or callable(token)):
            raise ValueError("Argument token is expected to be of type 'str' or a function returning 'str'")
        self._token = token

    def auth_data(self) -> bytes:
        token = self._token
        if callable(token):
            try:
                token = token()
            except Exception as exc:
                raise ErrorGettingAuthenticationData(
                    "the token function raised %s" % type(exc).__name__) from exc
            if not isinstance(token, str):
                raise ErrorGettingAuthenticationData(
                    "the token function returned %s, not a str" % type(token).__name__)
        return token.encode("utf-8")

    def __repr__(self) -> str:
        return "<AuthenticationToken %s>" % ("from a function" if callable(self._token) else "(hidden)")


class AuthenticationTLS(Authentication):
    """Mutual TLS: the client certificate and its private key (PEM files)."""

    method_name = "tls"

    def __init__(self, certificate_path: str, private_key_path: str) -> None:
        _check_str(certificate_path, "certificate_path")
        _check_str(private_key_path, "private_key_path")
        self.certificate_path = certificate_path
        self.private_key_path = private_key_path

    def client_certificate(self) -> tuple[str, str] | None:
        return self.certificate_path, self.private_key_path

    def __repr__(self) -> str:
        return "<AuthenticationTLS certificate %s>" % self.certificate_path


class _Unsupported(Authentication):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise InvalidConfiguration("%s is not supported by pulsarfast; use %s" % (type(self).__name__, SUPPORTED))


class AuthenticationAthenz(_Unsupported):
    """Not available in pulsarfast (raises InvalidConfiguration)."""


class AuthenticationOauth2(_Unsupported):
    """Not available in pulsarfast (raises InvalidConfiguration)."""


class AuthenticationBasic(_Unsupported):
    """Not available in pulsarfast (raises InvalidConfiguration)."""


__all__ = ["Authentication", "AuthenticationToken", "AuthenticationTLS", "AuthenticationAthenz",
           "AuthenticationOauth2", "AuthenticationBasic"]
