"""The OAuth 2.0 client-credentials flow behind ``AuthenticationOauth2``:
the parameters, the credentials file, the HTTP exchange and the cached
access token. ``pulsarfast.endpoints.auth`` wraps it as an Authentication.

- ``parse_params(text)``: the official JSON parameters (``issuer_url``,
  ``private_key``, or ``client_id`` + ``client_secret``, ``audience``,
  ``scope``, ``request_timeout_seconds``) -> ``OAuth2Params``.
- ``read_credentials(private_key)``: ``client_id`` and ``client_secret`` from
  the JSON credentials file a ``private_key`` names: ``/path``,
  ``file:///path``, ``file:/path`` or ``data:application/json;base64,...``.
- ``ClientCredentialsFlow``: finds the token endpoint once from
  ``<issuer_url>/.well-known/openid-configuration`` (``token_endpoint``),
  POSTs ``grant_type=client_credentials`` with the client's id, secret,
  ``audience`` (and ``scope`` if set) as a form, and keeps the answer's
  ``access_token`` until shortly before ``expires_in`` runs out;
  ``token(fresh=True)`` asks for a new one whatever the cache holds (an
  AUTH_CHALLENGE: the broker found the one it holds expired).

Standard library only (urllib; ``urllib.request`` and the ``http.client`` under it load at the
first exchange, not with the module: import time, issue 49). The calls block: the connection runs them
through its backend's ``run_blocking`` (an OS thread under gevent, so the
hub never waits on this socket). Every failure is an AuthenticationError,
as in the official client; the client secret and the tokens appear in no
message, log line or repr.
"""
from __future__ import annotations

import base64
import dataclasses
import json
import logging
import urllib.parse
from typing import TYPE_CHECKING, Any

from msgengine.runtime import monotonic, os_lock

from pulsarfast.base.results import AuthenticationError

if TYPE_CHECKING:
    import urllib.request

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_SECONDS = 30.0
#: a token is renewed this share of its lifetime before it runs out (at most MAX_MARGIN_SECONDS before)
MARGIN_SHARE = 0.1
MAX_MARGIN_SECONDS = 60.0
WELL_KNOWN_PATH = "/.well-known/openid-configuration"


@dataclasses.dataclass(frozen=True)
class OAuth2Params:
    """What AuthenticationOauth2's JSON names (the secret stays out of the repr)."""

    issuer_url: str
    private_key: str = ""
    client_id: str = ""
    client_secret: str = dataclasses.field(default="", repr=False)
    audience: str = ""
    scope: str = ""
    timeout: float = DEFAULT_TIMEOUT_SECONDS


def _text(value: Any) -> str:
    # the official client reads every JSON value as a string
    if isinstance(value, str):
        return value
    return json.dumps(value)


def parse_params(text: str) -> OAuth2Params:
    """The JSON parameters; raises AuthenticationError when they cannot be used."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AuthenticationError("the OAuth2 parameters are not valid JSON (%s)" % exc.msg) from None
    if not isinstance(raw, dict):
        raise AuthenticationError("the OAuth2 parameters are not a JSON object")
    fields = {key: _text(value) for key, value in raw.items()}
    if not fields.get("issuer_url"):
        raise AuthenticationError("the OAuth2 parameters have no issuer_url")
    if not fields.get("private_key") and not fields.get("client_id"):
        raise AuthenticationError("the OAuth2 parameters have neither private_key nor client_id")
    timeout = DEFAULT_TIMEOUT_SECONDS
    if fields.get("request_timeout_seconds"):
        try:
            timeout = float(fields["request_timeout_seconds"])
        except ValueError:
            logger.warning("ignoring the OAuth2 request_timeout_seconds %r", fields["request_timeout_seconds"])
    return OAuth2Params(
        issuer_url=fields["issuer_url"], private_key=fields.get("private_key", ""),
        client_id=fields.get("client_id", ""), client_secret=fields.get("client_secret", ""),
        audience=fields.get("audience", ""), scope=fields.get("scope", ""), timeout=timeout if timeout > 0 else
        DEFAULT_TIMEOUT_SECONDS)


def _credentials_text(private_key: str) -> str:
    scheme, colon, rest = private_key.partition(":")
    if not colon or "/" in scheme:  # a plain path
        path = private_key
    elif scheme == "file":
        path = rest[2:] if rest.startswith("//") else rest
    elif scheme == "data":
        media, comma, payload = rest.partition(",")
        if not comma or media != "application/json;base64":
            raise AuthenticationError("the OAuth2 private_key data: URL must be data:application/json;base64,...")
        try:
            return base64.b64decode(payload, validate=False).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            raise AuthenticationError("the OAuth2 private_key data: URL is not base64 JSON") from None
    else:
        raise AuthenticationError("the OAuth2 private_key URL scheme %r is not supported" % scheme)
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise AuthenticationError("cannot read the OAuth2 credentials file %s: %s"
                                  % (path, getattr(exc, "strerror", None) or type(exc).__name__)) from None


def read_credentials(private_key: str) -> tuple[str, str]:
    """(client_id, client_secret) from the credentials file private_key names."""
    try:
        data = json.loads(_credentials_text(private_key))
    except ValueError:
        raise AuthenticationError("the OAuth2 credentials file is not valid JSON") from None
    if not isinstance(data, dict) or not isinstance(data.get("client_id"), str) or not isinstance(
            data.get("client_secret"), str):
        raise AuthenticationError("the OAuth2 credentials file has no client_id and client_secret")
    return data["client_id"], data["client_secret"]


def _request(url: str, **options: Any) -> urllib.request.Request:
    import urllib.request  # (here, not at the top: it loads http.client and email)

    return urllib.request.Request(url, **options)


def _fetch_json(request: urllib.request.Request, timeout: float, what: str) -> dict:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            body = answer.read()
    except urllib.error.HTTPError as exc:
        detail = ""
        try:
            error = json.loads(exc.read()).get("error")
            if isinstance(error, str):
                detail = " (%s)" % error[:100]  # an OAuth2 error code such as invalid_client
        except Exception:
            pass
        raise AuthenticationError("%s answered HTTP %d%s" % (what, exc.code, detail)) from None
    except (OSError, ValueError) as exc:  # URLError, timeouts, a malformed URL
        raise AuthenticationError("cannot reach %s: %s" % (what, getattr(exc, "reason", None) or exc)) from None
    try:
        data = json.loads(body)
    except ValueError:
        raise AuthenticationError("%s did not answer JSON" % what) from None
    if not isinstance(data, dict):
        raise AuthenticationError("%s did not answer a JSON object" % what)
    return data


def discover_token_endpoint(issuer_url: str, timeout: float) -> str:
    """The issuer's token_endpoint, from its OpenID configuration."""
    url = issuer_url.rstrip("/") + WELL_KNOWN_PATH
    what = "the OAuth2 issuer's configuration %s" % url
    data = _fetch_json(_request(url, headers={"Accept": "application/json"}), timeout, what)
    endpoint = data.get("token_endpoint")
    if not isinstance(endpoint, str) or not endpoint:
        raise AuthenticationError("%s names no token_endpoint" % what)
    return endpoint


@dataclasses.dataclass(frozen=True)
class AccessToken:
    value: str = dataclasses.field(repr=False)
    expires_in: float
    #: when it counts as stale (monotonic clock): a little before it expires
    renew_at: float


def request_token(endpoint: str, params: OAuth2Params, client_id: str, client_secret: str) -> AccessToken:
    """POST the client-credentials grant to the token endpoint."""
    form = {"grant_type": "client_credentials", "client_id": client_id, "client_secret": client_secret,
            "audience": params.audience}
    if params.scope:
        form["scope"] = params.scope
    request = _request(
        endpoint, data=urllib.parse.urlencode(form).encode("ascii"), method="POST",
        headers={"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"})
    started = monotonic()
    data = _fetch_json(request, params.timeout, "the OAuth2 token endpoint %s" % endpoint)
    token = data.get("access_token")
    if not isinstance(token, str) or not token:
        raise AuthenticationError("the OAuth2 token endpoint %s answered no access_token" % endpoint)
    expires_in = data.get("expires_in")
    if isinstance(expires_in, str):
        try:
            expires_in = float(expires_in)
        except ValueError:
            pass
    if isinstance(expires_in, bool) or not isinstance(expires_in, (int, float)) or expires_in <= 0:
        # no lifetime given (the official client accepts that too): good for this one use only
        return AccessToken(token, 0.0, started)
    margin = min(expires_in * MARGIN_SHARE, MAX_MARGIN_SECONDS)
    return AccessToken(token, float(expires_in), started + expires_in - margin)


class ClientCredentialsFlow:
    """One client's access tokens (see the module docstring); safe from several OS threads."""

    def __init__(self, params: OAuth2Params) -> None:
        self.params = params
        self._lock = os_lock()
        self._endpoint: str | None = None
        self._token: AccessToken | None = None

    def token(self, fresh: bool = False) -> str:
        """A current access token: the cached one, or a new one from the token endpoint."""
        with self._lock:
            cached = self._token
            if cached is not None and not fresh and monotonic() < cached.renew_at:
                return cached.value
            params = self.params
            if params.private_key:
                client_id, client_secret = read_credentials(params.private_key)
            else:
                client_id, client_secret = params.client_id, params.client_secret
            if self._endpoint is None:
                self._endpoint = discover_token_endpoint(params.issuer_url, params.timeout)
            token = self._token = request_token(self._endpoint, params, client_id, client_secret)
            logger.debug("got an OAuth2 access token from %s for client %s, valid %s", self._endpoint, client_id,
                         "%.0fs" % token.expires_in if token.expires_in else "for one use")
            return token.value

    def __repr__(self) -> str:
        return "<ClientCredentialsFlow issuer %s>" % self.params.issuer_url


__all__ = ["OAuth2Params", "parse_params", "read_credentials", "discover_token_endpoint", "request_token",
           "AccessToken", "ClientCredentialsFlow"]
