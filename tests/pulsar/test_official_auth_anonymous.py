"""Authentication and authorization errors on a broker configured as the official client's own
test broker (tests/support/secured_pulsar.py ``authorizing_broker``: authorization on, an anonymous
role, the basic login ``admin`` / ``123456`` a superuser, namespace ``private/auth`` closed to the
anonymous role), the same steps on the official client (``pulsar-client`` 3.13, whose C++ core
says Pulsar-CPP-v4.2.0) and on pulsarfast, blocking (both backends) and asyncio.

What the official client does there, and pulsarfast with it:

- ``AuthenticationBasic(user, password, method)`` with a method no provider of the broker has
  (argument or JSON form): HTTP lookups carry ``Authorization: Basic ...`` and no method name, so
  over ``http://`` the superuser's lookups pass; CONNECT names the method, which the broker answers
  by connecting the anonymous role; PRODUCER / SUBSCRIBE are then refused (ServerError
  AuthorizationError): AuthorizationError. Over ``pulsar://`` the binary lookup is the refused
  command: AuthorizationError too.
- An HTTP lookup the broker answers with an error status (401 here: unknown user, wrong password or
  no credentials, each the anonymous role, not allowed to look the topic up): ConnectError, as for
  any HTTP error status. So AuthorizationError never comes from an HTTP answer, only from the
  broker's binary-protocol error.
- Without credentials over ``pulsar://``: the anonymous role's lookup is refused: AuthorizationError.
- Credentials the basic provider refuses in CONNECT (over ``pulsar://``): the official client
  retries until Timeout, pulsarfast raises AuthenticationError at once (docs/pulsar.md), as on the
  broker without an anonymous role (test_official_auth_errors.py, which shows what the official
  client does there: the broker refuses CONNECT for an unknown method instead of connecting the
  anonymous role).
"""
from __future__ import annotations

import asyncio
import http.server
import json
import re
import threading
import time
import uuid
from typing import Iterator

import pytest

import pulsarfast
import pulsarfast.asyncio as fast_asyncio
from tests.support.pulsar_helpers import OFFICIAL_LOGGER
from tests.support.secured_pulsar import (ANONYMOUS_ROLE, OFFICIAL_TESTS_PASSWORD, OFFICIAL_TESTS_USER,
                                          PRIVATE_NAMESPACE, XDIST_GROUP, Secured, authorizing_broker)

official = pytest.importorskip("pulsar")
official_asyncio = pytest.importorskip("pulsar.asyncio")

# (one worker runs the security modules; this one's broker lives as long as the module)
pytestmark = [pytest.mark.timeout(120), pytest.mark.xdist_group(XDIST_GROUP)]

CALLS = pytest.mark.parametrize("call", ["create_producer", "subscribe"])
FORMS = pytest.mark.parametrize("form", ["arguments", "json"])
OPERATION_TIMEOUT = 30  # seconds: every failure here but one comes at once
RECEIVE_MS = 10_000
LOG_WAIT = 10.0  # seconds: for the broker's log line about a connection
CONNECTED = re.compile(r"connected with role=(\S+) using authMethod=(\S+), clientVersion=([^,]+)")


@pytest.fixture(scope="module")
def authorizing(request) -> Iterator[Secured]:
    secured = authorizing_broker(request.config)
    yield secured
    secured.broker.kill()


@pytest.fixture
def private_topic(pulsar_topic) -> str:
    return "persistent://%s/%s" % (PRIVATE_NAMESPACE, pulsar_topic)


def urls(secured: Secured) -> dict:
    return {"http": secured.broker.web_url, "binary": secured.plain_url}


def basic(module, form: str, user: str = OFFICIAL_TESTS_USER, password: str = OFFICIAL_TESTS_PASSWORD,
          method: str | None = None):
    if form == "arguments":
        return module.AuthenticationBasic(user, password) if method is None else module.AuthenticationBasic(
            user, password, method)
    params = {"username": user, "password": password}
    if method is not None:
        params["method"] = method
    return module.AuthenticationBasic(auth_params_string=json.dumps(params))


def client_of(module, url: str, backend: str | None, **kwargs):
    if module is official:
        kwargs.setdefault("logger", OFFICIAL_LOGGER)
    else:
        kwargs["backend"] = backend
    kwargs.setdefault("operation_timeout_seconds", OPERATION_TIMEOUT)
    return module.Client(url, **kwargs)


def first_use(client, call: str, topic: str) -> None:
    if call == "create_producer":
        client.create_producer(topic)
    else:
        client.subscribe(topic, "sub")


def blocking_failure(module, url: str, backend: str | None, call: str, topic: str, **kwargs) -> BaseException:
    client = client_of(module, url, backend, **kwargs)
    try:
        with pytest.raises(module.PulsarException) as info:
            first_use(client, call, topic)
        return info.value
    finally:
        client.close()


async def _asyncio_failure(module, url: str, call: str, topic: str, **kwargs) -> BaseException:
    if module is official_asyncio:
        kwargs.setdefault("logger", OFFICIAL_LOGGER)
    client = module.Client(url, operation_timeout_seconds=OPERATION_TIMEOUT, **kwargs)
    try:
        with pytest.raises(module.PulsarException) as info:
            if call == "create_producer":
                await asyncio.wait_for(client.create_producer(topic), OPERATION_TIMEOUT + 10)
            else:
                await asyncio.wait_for(client.subscribe(topic, "sub"), OPERATION_TIMEOUT + 10)
        return info.value
    finally:
        await asyncio.wait_for(client.close(), OPERATION_TIMEOUT)


def asyncio_failure(module, url: str, call: str, topic: str, **kwargs) -> BaseException:
    return asyncio.run(_asyncio_failure(module, url, call, topic, **kwargs))


def connections_by_method(secured: Secured, method: str, clients: int) -> dict:
    """{client version: role} of the broker's log lines for connections made with this method name,
    once there are ``clients`` of them (or after LOG_WAIT)."""
    log_path = secured.broker.log_path
    assert log_path is not None
    deadline = time.monotonic() + LOG_WAIT
    while True:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            found = {version: role for role, name, version in CONNECTED.findall(f.read()) if name == method}
        if len(found) >= clients or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def a_method_no_provider_has() -> str:
    return "unknown-" + uuid.uuid4().hex[:8]


# --------------------------------------------------------------------------- the official tests' steps


def produce_and_consume(module, url: str, backend: str | None, topic: str, **kwargs) -> bytes:
    client = client_of(module, url, backend, **kwargs)
    try:
        consumer = client.subscribe(topic, "sub", consumer_type=module.ConsumerType.Shared)
        client.create_producer(topic).send(b"hello")
        return consumer.receive(RECEIVE_MS).data()
    finally:
        client.close()


@pytest.mark.parametrize("method", [None, "basic"])
@FORMS
@pytest.mark.integration
@pytest.mark.slow
def test_the_superuser_basic_login_produces_and_consumes_on_the_private_namespace(authorizing, backend,
                                                                                   private_topic, form, method):
    for module, topic in ((official, private_topic + "_o"), (pulsarfast, private_topic + "_f")):
        assert produce_and_consume(module, authorizing.broker.web_url, backend, topic,
                                   authentication=basic(module, form, method=method)) == b"hello"


@pytest.mark.integration
@pytest.mark.slow
def test_tls_with_a_client_certificate_and_basic_authentication(authorizing, backend, private_topic):
    for module, topic in ((official, private_topic + "_o"), (pulsarfast, private_topic + "_f")):
        got = produce_and_consume(module, authorizing.tls_url, backend, topic,
                                  authentication=basic(module, "arguments"),
                                  tls_trust_certs_file_path=authorizing.ca,
                                  tls_certificate_file_path=authorizing.client_cert,
                                  tls_private_key_file_path=authorizing.client_key)
        assert got == b"hello", module
    # the certificate and its key the wrong way round: ConnectError on both
    errors = {module: blocking_failure(module, authorizing.tls_url, backend, "subscribe", private_topic,
                                       authentication=basic(module, "arguments"),
                                       tls_trust_certs_file_path=authorizing.ca,
                                       tls_certificate_file_path=authorizing.client_key,
                                       tls_private_key_file_path=authorizing.client_cert)
              for module in (official, pulsarfast)}
    assert isinstance(errors[official], official.ConnectError)
    assert isinstance(errors[pulsarfast], pulsarfast.ConnectError)


# --------------------------------------------------------------------------- a method no provider has


@pytest.mark.parametrize("url", ["http", "binary"])
@CALLS
@FORMS
@pytest.mark.integration
@pytest.mark.slow
def test_a_method_no_provider_has_connects_as_anonymous_and_is_refused_authorization(authorizing, backend,
                                                                                     private_topic, form,
                                                                                     call, url):
    method = a_method_no_provider_has()
    errors = {module: blocking_failure(module, urls(authorizing)[url], backend, call, private_topic,
                                       authentication=basic(module, form, method=method))
              for module in (official, pulsarfast)}
    assert isinstance(errors[official], official.AuthorizationError)
    assert isinstance(errors[pulsarfast], pulsarfast.AuthorizationError)
    # what CONNECT carried: the method's name, which made each a connection of the anonymous role
    roles = connections_by_method(authorizing, method, clients=2)
    assert sorted(roles.items()) == [("Pulsar-CPP-v4.2.0", ANONYMOUS_ROLE), ("pulsarfast", ANONYMOUS_ROLE)]


@CALLS
@FORMS
@pytest.mark.integration
@pytest.mark.slow
def test_a_method_no_provider_has_is_an_authorization_error_on_the_asyncio_api(authorizing, private_topic, form,
                                                                               call):
    url = authorizing.broker.web_url
    theirs = asyncio_failure(official_asyncio, url, call, private_topic,
                             authentication=basic(official, form, method=a_method_no_provider_has()))
    ours = asyncio_failure(fast_asyncio, url, call, private_topic,
                           authentication=basic(pulsarfast, form, method=a_method_no_provider_has()))
    assert theirs.error() == official.Result.AuthorizationError
    assert ours.error() == pulsarfast.Result.AuthorizationError


# --------------------------------------------------------------------------- the anonymous role's lookups


def refused_logins(module, who: str):
    if who == "an unknown user":
        return basic(module, "arguments", user="invalid")
    if who == "an unknown user (JSON)":
        return basic(module, "json", user="invalid")
    if who == "a wrong password":
        return basic(module, "arguments", password="not-" + OFFICIAL_TESTS_PASSWORD)
    assert who == "no credentials"
    return None


WHO = pytest.mark.parametrize("who", ["an unknown user", "an unknown user (JSON)", "a wrong password",
                                      "no credentials"])


@WHO
@CALLS
@pytest.mark.integration
@pytest.mark.slow
def test_an_http_lookup_answered_401_is_a_connect_error(authorizing, backend, private_topic, who, call):
    errors = {module: blocking_failure(module, authorizing.broker.web_url, backend, call, private_topic,
                                       authentication=refused_logins(module, who))
              for module in (official, pulsarfast)}
    assert isinstance(errors[official], official.ConnectError)
    assert isinstance(errors[pulsarfast], pulsarfast.ConnectError)
    assert "401" in str(errors[pulsarfast])


@WHO
@pytest.mark.integration
@pytest.mark.slow
def test_an_http_lookup_answered_401_is_a_connect_error_on_the_asyncio_api(authorizing, private_topic, who):
    url = authorizing.broker.web_url
    theirs = asyncio_failure(official_asyncio, url, "subscribe", private_topic,
                             authentication=refused_logins(official, who))
    ours = asyncio_failure(fast_asyncio, url, "subscribe", private_topic,
                           authentication=refused_logins(pulsarfast, who))
    assert theirs.error() == official.Result.ConnectError
    assert ours.error() == pulsarfast.Result.ConnectError


@CALLS
@pytest.mark.integration
@pytest.mark.slow
def test_a_binary_lookup_of_the_anonymous_role_is_an_authorization_error(authorizing, backend, private_topic,
                                                                        call):
    errors = {module: blocking_failure(module, authorizing.plain_url, backend, call, private_topic)
              for module in (official, pulsarfast)}
    assert isinstance(errors[official], official.AuthorizationError)
    assert isinstance(errors[pulsarfast], pulsarfast.AuthorizationError)


@pytest.mark.integration
@pytest.mark.slow
def test_credentials_refused_in_connect_are_not_the_anonymous_role(authorizing, backend, private_topic):
    # the broker refuses CONNECT (no fallback to the anonymous role for a provider that says no): the
    # official client retries until its operation timeout, pulsarfast raises AuthenticationError at once
    # (the difference docs/pulsar.md records)
    theirs = blocking_failure(official, authorizing.plain_url, None, "subscribe", private_topic,
                              authentication=refused_logins(official, "an unknown user"), operation_timeout_seconds=3)
    ours = blocking_failure(pulsarfast, authorizing.plain_url, backend, "subscribe", private_topic,
                            authentication=refused_logins(pulsarfast, "an unknown user"))
    assert isinstance(theirs, official.Timeout)
    assert isinstance(ours, pulsarfast.AuthenticationError)


# --------------------------------------------------------------------------- what a lookup request carries


class _RecordingServer(http.server.ThreadingHTTPServer):
    """An HTTP server on loopback that answers every GET with ``status`` and keeps each request's
    headers in ``requests``."""

    def __init__(self, status: int) -> None:
        super().__init__(("127.0.0.1", 0), _Recorder)
        self.status = status
        self.requests: list[dict[str, str]] = []


class _Recorder(http.server.BaseHTTPRequestHandler):
    server: _RecordingServer

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.server.requests.append(dict(self.headers))
        self.send_response(self.server.status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (http.server's name)
        pass


@pytest.mark.parametrize("status", [401, 403])
@FORMS
def test_a_lookup_carries_basic_credentials_without_the_method_and_an_error_status_is_a_connect_error(
        backend, form, status):
    server = _RecordingServer(status)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = "http://127.0.0.1:%d" % server.server_address[1]
        errors, sent = {}, {}
        for module in (official, pulsarfast):
            del server.requests[:]
            errors[module] = blocking_failure(module, url, backend, "subscribe", "persistent://private/auth/t",
                                              authentication=basic(module, form, method="not-basic"))
            sent[module] = list(server.requests)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
    assert isinstance(errors[official], official.ConnectError)
    assert isinstance(errors[pulsarfast], pulsarfast.ConnectError)
    for module in (official, pulsarfast):
        assert len(sent[module]) == 1, module  # an error status is not tried again
        headers = {name.lower(): value for name, value in sent[module][0].items()}
        assert headers["authorization"] == sent[official][0]["Authorization"]
        assert headers["authorization"].startswith("Basic ")
        assert not [name for name in headers if "method" in name or name.startswith("x-pulsar")], headers
