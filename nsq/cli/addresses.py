"""The addresses the nsqfast commands are given, checked before anything
connects: nsqd TCP addresses as ``host:port``, nsqd and nsqlookupd HTTP
addresses as ``host:port`` or ``http(s)://host:port``. A bad one is a
``CliError`` naming the option. ``check_nsqd`` and ``check_http`` make one
bounded attempt to reach a server, so that an unreachable one is reported at
once, with the reason, instead of being retried forever."""
from __future__ import annotations

from urllib.parse import urlsplit

import requests

from msgengine.cli.app import CliError, one_line

from nsq.conn import Connection
from nsq.errors import Error


def _host_port(text: str, option: str) -> tuple[str, int]:
    host, sep, port = text.strip().rpartition(":")
    bracketed = host.startswith("[") and host.endswith("]") and len(host) > 2
    if bracketed:  # [v6 address]:port
        host = host[1:-1]
    if (not sep or not host or not port.isdigit() or not 0 < int(port) < 65536
            or any(c in host for c in "/[] ") or (":" in host and not bracketed)):
        raise CliError("%s %r is not host:port (for example 127.0.0.1:4150 or [::1]:4150)" % (option, text))
    return host, int(port)


def tcp_address(text: str, option: str = "--nsqd-tcp-address") -> str:
    """'host:port', checked."""
    host, port = _host_port(text, option)
    return "[%s]:%d" % (host, port) if ":" in host else "%s:%d" % (host, port)


def http_url(text: str, option: str) -> str:
    """'http://host:port' from 'host:port' or an http(s) URL, checked."""
    if "://" not in text:
        host, port = _host_port(text, option)
        return "http://%s:%d" % ("[%s]" % host if ":" in host else host, port)
    try:
        parts = urlsplit(text.strip())
        parts.port  # (raises ValueError for a bad one)
    except ValueError as exc:
        raise CliError("%s %r is not a usable URL: %s" % (option, text, exc)) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CliError("%s %r is not host:port or an http:// URL" % (option, text))
    return "%s://%s" % (parts.scheme, parts.netloc)


def check_nsqd(address: str, timeout: float) -> None:
    """Connect to nsqd and complete NSQ's handshake once, or raise CliError saying why not."""
    host, port = _host_port(address, "nsqd address")
    connection = Connection(host, port, timeout=timeout)
    try:
        connection.connect()
    except Error as exc:
        reason = one_line(exc)
        if address not in reason and "%s:%d" % (host, port) not in reason:  # (say which server, and a likely cause)
            reason = "nsqd at %s did not complete the NSQ handshake (is it nsqd's TCP port?): %s" % (address, reason)
        raise CliError(reason) from None
    finally:
        connection.close()


def get_json(base_url: str, path: str, timeout: float, what: str) -> object:
    """GET base_url + path as JSON; CliError (naming base_url) when the server
    cannot be reached or answers badly."""
    try:
        response = requests.get(base_url + path, headers={"Accept": "application/vnd.nsq; version=1.0"},
                                timeout=(timeout, timeout))
    except requests.RequestException as exc:
        raise CliError("cannot reach %s at %s: %s" % (what, base_url, _reason(exc))) from None
    if response.status_code != 200:
        raise CliError("%s at %s answered %s with HTTP %d: %s"
                       % (what, base_url, path.partition("?")[0], response.status_code, one_line(response.text)[:200]))
    try:
        return response.json()
    except ValueError:
        raise CliError("%s at %s did not answer JSON (is it the HTTP port?)" % (what, base_url)) from None


def check_http(base_url: str, timeout: float, what: str) -> None:
    """GET /ping on an nsqd or nsqlookupd HTTP address, or raise CliError."""
    url = base_url + "/ping"
    try:
        response = requests.get(url, timeout=(timeout, timeout))
    except requests.RequestException as exc:
        raise CliError("cannot reach %s at %s: %s" % (what, base_url, _reason(exc))) from None
    if response.status_code != 200:
        raise CliError("%s at %s answered /ping with HTTP %d (is it the HTTP port?)"
                       % (what, base_url, response.status_code))


def _reason(exc: requests.RequestException) -> str:
    """The root cause of a requests failure ("Connection refused", ...), without urllib3's reprs."""
    if isinstance(exc, requests.Timeout):
        return "no answer within the timeout"
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, OSError) and cause.strerror:
            return cause.strerror
        cause = cause.__cause__ or cause.__context__
    return one_line(exc)
