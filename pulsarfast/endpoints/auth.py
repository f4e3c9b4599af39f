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
- ``AuthenticationBasic(username, password, method="basic")`` (or
  ``auth_params_string='{"username": ..., "password": ...}'``): CONNECT
  carries ``username:password`` under the method name, which the broker's
  AuthenticationProviderBasic checks against its htpasswd-style file.
- ``AuthenticationOauth2(auth_params_string)``: the OAuth 2.0
  client-credentials flow (``pulsarfast.endpoints.oauth2``); the access token goes in
  CONNECT as method ``token``, is renewed shortly before it expires, and a
  new one answers every AUTH_CHALLENGE.
- ``Authentication(dynamicLibPath, authParamsString)``: the official
  client's generic form. Its built-in plugin names (any case) map onto the
  classes above: ``tls`` / ``org.apache.pulsar.client.impl.auth.AuthenticationTls``
  (``tlsCertFile:...,tlsKeyFile:...``, or the same keys as JSON),
  ``token`` / ``...AuthenticationToken`` (``token:xxx``, ``file:///path``
  read for each connection, ``env:NAME``, or the bare token), ``basic`` /
  ``...AuthenticationBasic`` (JSON) and ``oauth2token`` /
  ``org.apache.pulsar.client.impl.auth.oauth2.AuthenticationOAuth2`` (JSON).
  Anything else (a shared library of C++ plugins cannot be loaded here) is
  accepted with a warning, as the official client does, and raises
  AuthenticationError when the client first connects.
- ``AuthenticationAthenz`` (and the ``athenz`` plugin names) is not
  supported: InvalidConfiguration.

What a connection asks of an Authentication: ``method_name``,
``auth_data()`` for CONNECT, ``challenge_data()`` for AUTH_RESPONSE,
``client_certificate()`` for the TLS handshake, and ``blocking_io`` (the data
may need network I/O: the connection runs those calls through its backend's
``run_blocking``). An HTTP lookup asks ``http_scheme``: its data goes in an
``Authorization: <scheme> ...`` header (``Bearer`` for a token, ``Basic``
for basic whatever its method name, as the official client's HTTP headers).
Secrets stay out of every repr, log line and exception message.

Credentials that cannot be had (a token function that raises or returns no
str, an unknown plugin, unusable OAuth2 parameters) raise AuthenticationError
at the first connection, as the official client fails then; a token
function's own error message is kept in the exception's text.
"""
from __future__ import annotations

import json
import logging
import os
from typing import Any, Callable

from pulsarfast.base.results import AuthenticationError, InvalidConfiguration
from pulsarfast.endpoints.oauth2 import ClientCredentialsFlow, parse_params

logger = logging.getLogger(__name__)

SUPPORTED = "AuthenticationToken, AuthenticationTLS, AuthenticationBasic or AuthenticationOauth2"
_JAVA = "org.apache.pulsar.client.impl.auth."
TLS_PLUGINS = ("tls", _JAVA + "authenticationtls")
TOKEN_PLUGINS = ("token", _JAVA + "authenticationtoken")
BASIC_PLUGINS = ("basic", _JAVA + "authenticationbasic")
OAUTH2_PLUGINS = ("oauth2token", _JAVA + "oauth2.authenticationoauth2")
ATHENZ_PLUGINS = ("athenz", _JAVA + "authenticationathenz")


def _check_str(value: Any, name: str) -> None:
    if not isinstance(value, str):
        raise ValueError("Argument %s is expected to be of type 'str' and not '%s'" % (name, type(value).__name__))


class Authentication:
    """The base of the authentication classes, and the generic
    ``Authentication(plugin name, params)`` form; see the module docstring."""

    method_name = ""
    #: auth_data() and challenge_data() may block on network I/O (OAuth2)
    blocking_io = False
    #: the scheme of the HTTP Authorization header that carries auth_data() (None: no header)
    http_scheme: str | None = None
    _plugin: Authentication | None = None
    _unknown_plugin: str | None = None

    def __init__(self, dynamicLibPath: str, authParamsString: str) -> None:
        _check_str(dynamicLibPath, "dynamicLibPath")
        _check_str(authParamsString, "authParamsString")
        plugin = builtin_plugin(dynamicLibPath, authParamsString)
        if plugin is None:
            # the official client logs this and fails with AuthenticationError when it connects
            logger.warning("cannot load the authentication plugin %s: pulsarfast knows only the built-in "
                           "plugins (tls, token, basic, oauth2token and their Java class names)", dynamicLibPath)
            self._unknown_plugin = dynamicLibPath
        else:
            self._plugin = plugin
            self.method_name = plugin.method_name
            self.blocking_io = plugin.blocking_io
            self.http_scheme = plugin.http_scheme

    def auth_data(self) -> bytes:
        """The authentication data for CONNECT; raises AuthenticationError when it cannot be had."""
        if self._plugin is not None:
            return self._plugin.auth_data()
        if self._unknown_plugin is not None:
            raise AuthenticationError("the authentication plugin %s could not be loaded" % self._unknown_plugin)
        return b""

    def challenge_data(self) -> bytes:
        """Fresh data to answer the broker's AUTH_CHALLENGE (by default, auth_data())."""
        if self._plugin is not None:
            return self._plugin.challenge_data()
        return self.auth_data()

    def client_certificate(self) -> tuple[str, str] | None:
        """(certificate file, private key file) to show in the TLS handshake, if any."""
        if self._plugin is not None:
            return self._plugin.client_certificate()
        return None

    def __repr__(self) -> str:
        if self._plugin is not None:
            return "<Authentication %r>" % self._plugin
        if self._unknown_plugin is not None:
            return "<Authentication unknown plugin %s>" % self._unknown_plugin
        return "<%s>" % type(self).__name__


class AuthenticationToken(Authentication):
    """Token authentication: ``AuthenticationToken("eyJ...")`` or ``AuthenticationToken(read_token)``."""

    method_name = "token"
    http_scheme = "Bearer"

    def __init__(self, token: str | Callable[[], str]) -> None:
        if not (isinstance(token, str) or callable(token)):
            raise ValueError("Argument token is expected to be of type 'str' or a function returning 'str'")
        self._token = token

    def auth_data(self) -> bytes:
        token = self._token
        if callable(token):
            # (the official client fails the connection with AuthenticationError here)
            try:
                token = token()
            except Exception as exc:
                raise AuthenticationError("the token function raised %s: %s" % (type(exc).__name__, exc)) from exc
            if not isinstance(token, str):
                raise AuthenticationError("the token function returned %s, not a str" % type(token).__name__)
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

    def auth_data(self) -> bytes:
        return b""

    def client_certificate(self) -> tuple[str, str] | None:
        return self.certificate_path, self.private_key_path

    def __repr__(self) -> str:
        return "<AuthenticationTLS certificate %s>" % self.certificate_path


class AuthenticationBasic(Authentication):
    """Basic authentication: ``AuthenticationBasic("user", "pass")``, or its
    JSON form ``AuthenticationBasic(auth_params_string='{"username": ..., "password": ..., "method": ...}')``
    (which then wins over the other arguments). The method names the broker's provider in CONNECT
    only: HTTP requests carry ``Authorization: Basic ...`` whatever it is, as the official client's."""

    http_scheme = "Basic"

    def __init__(self, username: str | None = None, password: str | None = None, method: str = "basic",
                 auth_params_string: str | None = None) -> None:
        if auth_params_string is not None:
            _check_str(auth_params_string, "auth_params_string")
            username, password, method = _basic_params(auth_params_string)
        else:
            _check_str(username, "username")
            _check_str(password, "password")
            _check_str(method, "method")
        assert username is not None and password is not None
        self.username = username
        self.method_name = method
        self._data = ("%s:%s" % (username, password)).encode("utf-8")

    def auth_data(self) -> bytes:
        return self._data

    def __repr__(self) -> str:
        return "<AuthenticationBasic method %s, password hidden>" % self.method_name


def _basic_params(text: str) -> tuple[str, str, str]:
    # (the official client raises RuntimeError for these, from its C++ core)
    try:
        params = json.loads(text) if text else {}
    except json.JSONDecodeError as exc:
        raise RuntimeError("the basic authentication parameters are not valid JSON (%s)" % exc.msg) from None
    if not isinstance(params, dict):
        raise RuntimeError("the basic authentication parameters are not a JSON object")
    if "username" not in params:
        raise RuntimeError("No username provided for basic provider")
    if "password" not in params:
        raise RuntimeError("No password provided for basic provider")
    return str(params["username"]), str(params["password"]), str(params.get("method", "basic"))


class AuthenticationOauth2(Authentication):
    """OAuth 2.0 client credentials: ``AuthenticationOauth2('{"issuer_url": ..., "private_key": ...}')``.

    Parameters that cannot be used are logged here and raise
    AuthenticationError when the client connects, as in the official client."""

    method_name = "token"
    blocking_io = True
    http_scheme = "Bearer"

    def __init__(self, auth_params_string: str) -> None:
        _check_str(auth_params_string, "auth_params_string")
        self._flow: ClientCredentialsFlow | None = None
        self._problem: AuthenticationError | None = None
        try:
            self._flow = ClientCredentialsFlow(parse_params(auth_params_string))
        except AuthenticationError as exc:
            logger.error("AuthenticationOauth2: %s", exc)
            self._problem = exc

    def _current(self, fresh: bool) -> bytes:
        if self._flow is None:
            raise AuthenticationError(str(self._problem))
        return self._flow.token(fresh).encode("utf-8")

    def auth_data(self) -> bytes:
        return self._current(False)

    def challenge_data(self) -> bytes:
        return self._current(True)

    def __repr__(self) -> str:
        if self._flow is None:
            return "<AuthenticationOauth2 (unusable parameters)>"
        return "<AuthenticationOauth2 issuer %s>" % self._flow.params.issuer_url


class _TokenFromFile:
    """A token function reading a file at each call (the ``file:`` form of the token plugin)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self) -> str:
        with open(self.path, encoding="utf-8") as f:
            return f.read().strip()


class _TokenFromEnv:
    """A token function reading an environment variable at each call (the ``env:`` form)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self) -> str:
        value = os.environ.get(self.name)
        if value is None:
            raise KeyError("no environment variable %s" % self.name)
        return value


def _key_value_params(text: str) -> dict[str, str]:
    """``key:value,key:value``, or the same keys as a JSON object."""
    try:
        params = json.loads(text)
        if isinstance(params, dict):
            return {str(k): str(v) for k, v in params.items()}
    except ValueError:
        pass
    pairs = {}
    for item in text.split(","):
        key, colon, value = item.partition(":")
        if colon and ":" not in value:
            pairs[key] = value
    return pairs


def _token_plugin(text: str) -> AuthenticationToken:
    if text.startswith("token:"):
        return AuthenticationToken(text[len("token:"):])
    if text.startswith("file:"):
        path = text[len("file:"):]
        return AuthenticationToken(_TokenFromFile(path[2:] if path.startswith("//") else path))
    if text.startswith("env:"):
        return AuthenticationToken(_TokenFromEnv(text[len("env:"):]))
    return AuthenticationToken(text)


def builtin_plugin(name: str, params: str) -> Authentication | None:
    """The Authentication a built-in plugin name (any case) stands for, or None for an unknown one."""
    key = name.lower()
    if key in TLS_PLUGINS:
        pairs = _key_value_params(params)
        return AuthenticationTLS(pairs.get("tlsCertFile", ""), pairs.get("tlsKeyFile", ""))
    if key in TOKEN_PLUGINS:
        return _token_plugin(params)
    if key in BASIC_PLUGINS:
        return AuthenticationBasic(auth_params_string=params)
    if key in OAUTH2_PLUGINS:
        return AuthenticationOauth2(params)
    if key in ATHENZ_PLUGINS:
        raise InvalidConfiguration("Athenz authentication is not supported by pulsarfast; use %s" % SUPPORTED)
    return None


class AuthenticationAthenz(Authentication):
    """Not available in pulsarfast (raises InvalidConfiguration)."""

    def __init__(self, auth_params_string: str) -> None:
        _check_str(auth_params_string, "auth_params_string")
        raise InvalidConfiguration("AuthenticationAthenz is not supported by pulsarfast; use %s" % SUPPORTED)


__all__ = ["Authentication", "AuthenticationToken", "AuthenticationTLS", "AuthenticationAthenz",
           "AuthenticationOauth2", "AuthenticationBasic"]
