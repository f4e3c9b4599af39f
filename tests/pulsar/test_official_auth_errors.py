"""Authentication and TLS failures as the official client (``pulsar-client`` 3.13) has them, the
same steps on both clients against the secured broker of tests/support/secured_pulsar.py:

- an ``http://`` service URL whose lookup the broker answers 401 (no credentials, a wrong
  password): ConnectError from create_producer / subscribe on both (the official client maps
  every HTTP error status of a lookup to ConnectError). A basic authentication's method name
  goes in CONNECT only: its HTTP requests carry ``Authorization: Basic ...`` whatever the
  method, so with a method the broker does not take the lookups still pass on both, and only
  CONNECT is refused (official: Timeout after its retries; pulsarfast: AuthenticationError at
  once, the difference docs/pulsar.md records); on a broker with an anonymous role and
  authorization, as the official client's own tests have it, that CONNECT is the anonymous role's
  and the refusal AuthorizationError (test_official_auth_anonymous.py);
- a client certificate and its key given the wrong way round (or a key that is not the
  certificate's): Client() is made, the first connection fails with ConnectError (an
  ``https://`` lookup: LookupError), on both;
- a token function that raises: AuthenticationError from create_producer / subscribe, on the
  blocking API (both backends) and on the asyncio one, whose text has the function's message.
  The official client runs those steps in a child process: after such a failure it has
  aborted its process at exit now and then ("terminate called without an active exception").
"""
from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys

import pytest

import pulsarfast
import pulsarfast.asyncio as fast_asyncio
from pulsarfast.network.httplookup import authorization_header
from tests.support.pulsar_helpers import OFFICIAL_LOGGER, patient_client
from tests.support.secured_pulsar import BASIC_PASSWORD, BASIC_USER, XDIST_GROUP, Secured, secured_broker

official = pytest.importorskip("pulsar")

# (one worker runs the group's modules, against one secured broker)
pytestmark = [pytest.mark.timeout(120), pytest.mark.xdist_group(XDIST_GROUP)]

CALLS = pytest.mark.parametrize("call", ["create_producer", "subscribe"])
SUPPLIER_MESSAGE = "no token today: the vault is sealed"
CHILD_WAIT = 60.0  # seconds: the bound of the official client's child process


@pytest.fixture(scope="module")
def secured(request) -> Secured:
    return secured_broker(request)


def first_use(client, call: str, topic: str) -> None:
    if call == "create_producer":
        client.create_producer(topic)
    else:
        client.subscribe(topic, "sub")


def failure(module, url: str, call: str, topic: str, **kwargs) -> BaseException:
    """The exception the first create_producer / subscribe raises on a client of module (made
    without error: the test fails if Client() raises), the client then closed."""
    if module is official:
        kwargs.setdefault("logger", OFFICIAL_LOGGER)
    client = module.Client(url, **kwargs)
    try:
        with pytest.raises(module.PulsarException) as info:
            first_use(client, call, topic)
        return info.value
    finally:
        client.close()


def basic_with_method(module, form: str, method: str):
    if form == "arguments":
        return module.AuthenticationBasic(BASIC_USER, BASIC_PASSWORD, method)
    return module.AuthenticationBasic(
        auth_params_string=json.dumps({"username": BASIC_USER, "password": BASIC_PASSWORD, "method": method}))


# --------------------------------------------------------------------------- http:// lookups


@pytest.mark.parametrize("credentials", ["none", "wrong password"])
@CALLS
@pytest.mark.integration
@pytest.mark.slow
def test_an_http_lookup_answered_401_is_a_connect_error_on_both_clients(secured, backend, pulsar_topic,
                                                                       credentials, call):
    url = secured.broker.web_url
    auths = {module: None if credentials == "none" else module.AuthenticationBasic(BASIC_USER, "not-the-password")
             for module in (official, pulsarfast)}
    # (a long operation timeout: a retry loop would end in Timeout, not ConnectError)
    theirs = failure(official, url, call, pulsar_topic, authentication=auths[official], operation_timeout_seconds=60)
    ours = failure(pulsarfast, url, call, pulsar_topic + "_2", authentication=auths[pulsarfast], backend=backend,
                   operation_timeout_seconds=60)
    assert isinstance(theirs, official.ConnectError)
    assert isinstance(ours, pulsarfast.ConnectError)
    assert "401" in str(ours)


def test_a_basic_authentication_sends_basic_over_http_whatever_its_method():
    expected = "Basic " + base64.b64encode(("%s:%s" % (BASIC_USER, BASIC_PASSWORD)).encode()).decode()
    for form in ("arguments", "json"):
        for method in ("basic", "no-such-method"):
            assert authorization_header(basic_with_method(pulsarfast, form, method)) == expected, (form, method)
    generic = pulsarfast.Authentication(
        "basic", json.dumps({"username": BASIC_USER, "password": BASIC_PASSWORD, "method": "m"}))
    assert authorization_header(generic) == expected
    assert authorization_header(pulsarfast.AuthenticationToken("abc")) == "Bearer abc"
    assert authorization_header(pulsarfast.Authentication("token", "token:abc")) == "Bearer abc"
    assert authorization_header(pulsarfast.AuthenticationTLS("/c.pem", "/k.pem")) is None
    assert authorization_header(None) is None


@pytest.mark.parametrize("form", ["arguments", "json"])
@pytest.mark.integration
@pytest.mark.slow
def test_a_basic_method_the_broker_does_not_take_passes_http_lookups_and_fails_connect(secured, backend,
                                                                                     pulsar_topic, form):
    url = secured.broker.web_url
    partitions = {}
    for module in (official, pulsarfast):
        extra = {"logger": OFFICIAL_LOGGER} if module is official else {"backend": backend}
        client = module.Client(url, authentication=basic_with_method(module, form, "no-such-method"),
                               operation_timeout_seconds=30, **extra)
        try:
            # a lookup over HTTP: the Basic header is taken, the method name is not looked at
            partitions[module] = client.get_topic_partitions(pulsar_topic)
        finally:
            client.close()
    assert partitions[official] == partitions[pulsarfast] == ["persistent://public/default/" + pulsar_topic]
    # then CONNECT names the method, which the broker refuses: the official client tries again until its
    # operation timeout, pulsarfast raises the broker's AuthenticationError at once (docs/pulsar.md)
    theirs = failure(official, url, "create_producer", pulsar_topic,
                     authentication=basic_with_method(official, form, "no-such-method"), operation_timeout_seconds=3)
    ours = failure(pulsarfast, url, "create_producer", pulsar_topic, backend=backend,
                   authentication=basic_with_method(pulsarfast, form, "no-such-method"), operation_timeout_seconds=60)
    assert isinstance(theirs, official.Timeout)
    assert isinstance(ours, pulsarfast.AuthenticationError)


# --------------------------------------------------------------------------- a certificate and a key that do not go together


def certificate_kwargs(module, secured: Secured, form: str) -> dict:
    if form == "options the wrong way round":
        return {"tls_certificate_file_path": secured.client_key, "tls_private_key_file_path": secured.client_cert,
                "authentication": module.AuthenticationToken(secured.token())}
    if form == "AuthenticationTLS the wrong way round":
        return {"authentication": module.AuthenticationTLS(secured.client_key, secured.client_cert)}
    assert form == "a key that is not the certificate's"
    return {"authentication": module.AuthenticationTLS(secured.client_cert, secured.ca)}


FORMS = ["options the wrong way round", "AuthenticationTLS the wrong way round", "a key that is not the certificate's"]


@pytest.mark.parametrize("form", FORMS)
@CALLS
@pytest.mark.integration
@pytest.mark.slow
def test_a_certificate_and_key_that_do_not_go_together_fail_the_first_connection(secured, backend, pulsar_topic,
                                                                                 form, call):
    # Client() takes them on both; the first connection fails with ConnectError (with a long operation
    # timeout: a retry loop would end in Timeout)
    errors = {}
    for module in (official, pulsarfast):
        extra = {} if module is official else {"backend": backend}
        errors[module] = failure(module, secured.tls_url, call, pulsar_topic, tls_trust_certs_file_path=secured.ca,
                                 operation_timeout_seconds=60, **certificate_kwargs(module, secured, form), **extra)
    assert isinstance(errors[official], official.ConnectError)
    assert isinstance(errors[pulsarfast], pulsarfast.ConnectError)
    assert "client certificate" in str(errors[pulsarfast])


@pytest.mark.integration
@pytest.mark.slow
def test_a_certificate_and_key_the_wrong_way_round_fail_an_https_lookup(secured, backend, pulsar_topic):
    # (the certificate is loaded before any byte goes out: the web port needs no TLS for this)
    url = secured.broker.web_url.replace("http://", "https://")
    errors = {}
    for module in (official, pulsarfast):
        extra = {} if module is official else {"backend": backend}
        errors[module] = failure(module, url, "create_producer", pulsar_topic, tls_trust_certs_file_path=secured.ca,
                                 operation_timeout_seconds=60,
                                 **certificate_kwargs(module, secured, "options the wrong way round"), **extra)
    assert isinstance(errors[official], official.LookupError)
    assert isinstance(errors[pulsarfast], pulsarfast.LookupError)


# --------------------------------------------------------------------------- a token function that raises


OFFICIAL_SUPPLIER_STEPS = """
import asyncio, json, sys
import pulsar, pulsar.asyncio
url, topic, api, call, message = sys.argv[1:6]
def supplier():
    raise RuntimeError(message)
logger = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
def report(exc):
    error = exc.error().name if api == "asyncio" else type(exc).__name__
    print(json.dumps({"error": error, "text": str(exc)}), flush=True)
if api == "blocking":
    client = pulsar.Client(url, authentication=pulsar.AuthenticationToken(supplier), operation_timeout_seconds=60,
                           logger=logger)
    try:
        client.create_producer(topic) if call == "create_producer" else client.subscribe(topic, "sub")
        print(json.dumps({"error": None}), flush=True)
    except pulsar.PulsarException as exc:
        report(exc)
    client.close()
else:
    async def main():
        client = pulsar.asyncio.Client(url, authentication=pulsar.AuthenticationToken(supplier),
                                       operation_timeout_seconds=60, logger=logger)
        try:
            if call == "create_producer":
                await asyncio.wait_for(client.create_producer(topic), 60)
            else:
                await asyncio.wait_for(client.subscribe(topic, "sub"), 60)
            print(json.dumps({"error": None}), flush=True)
        except pulsar.asyncio.PulsarException as exc:
            report(exc)
        await asyncio.wait_for(client.close(), 60)
    asyncio.run(main())
"""


def official_supplier_failure(url: str, topic: str, api: str, call: str) -> dict:
    """What the official client's first create_producer / subscribe does with a token function that
    raises: {"error": the exception's class (blocking) or Result (asyncio) name, "text": str(exception)}."""
    child = subprocess.run([sys.executable, "-c", OFFICIAL_SUPPLIER_STEPS, url, topic, api, call, SUPPLIER_MESSAGE],
                           capture_output=True, text=True, timeout=CHILD_WAIT)
    lines = [line for line in child.stdout.splitlines() if line.startswith("{")]
    assert lines, "the official client's child printed no outcome: %s" % child.stderr[-2000:]
    return json.loads(lines[-1])


def broken_supplier() -> str:
    raise RuntimeError(SUPPLIER_MESSAGE)


@CALLS
@pytest.mark.integration
@pytest.mark.slow
def test_a_token_function_that_raises_is_an_authentication_error_with_its_message(secured, backend, pulsar_topic,
                                                                                  call):
    theirs = official_supplier_failure(secured.plain_url, pulsar_topic, "blocking", call)
    assert theirs["error"] == "AuthenticationError"
    ours = failure(pulsarfast, secured.plain_url, call, pulsar_topic, backend=backend, operation_timeout_seconds=60,
                   authentication=pulsarfast.AuthenticationToken(broken_supplier))
    assert isinstance(ours, pulsarfast.AuthenticationError)
    assert SUPPLIER_MESSAGE in str(ours)


async def _fast_asyncio_failure(url: str, topic: str, call: str) -> BaseException:
    client = fast_asyncio.Client(url, authentication=pulsarfast.AuthenticationToken(broken_supplier),
                                 operation_timeout_seconds=60)
    try:
        with pytest.raises(fast_asyncio.PulsarException) as info:
            if call == "create_producer":
                await asyncio.wait_for(client.create_producer(topic), 60)
            else:
                await asyncio.wait_for(client.subscribe(topic, "sub"), 60)
        return info.value
    finally:
        await asyncio.wait_for(client.close(), 60)


@CALLS
@pytest.mark.integration
@pytest.mark.slow
def test_a_token_function_that_raises_is_an_authentication_error_on_the_asyncio_api(secured, pulsar_topic, call):
    theirs = official_supplier_failure(secured.plain_url, pulsar_topic, "asyncio", call)
    ours = asyncio.run(_fast_asyncio_failure(secured.plain_url, pulsar_topic, call))
    assert theirs["error"] == ours.error().name == "AuthenticationError"
    assert SUPPLIER_MESSAGE in theirs["text"]
    assert SUPPLIER_MESSAGE in str(ours)


@pytest.mark.integration
@pytest.mark.slow
def test_a_token_function_that_raises_fails_an_http_lookup_with_authentication_error(secured, backend,
                                                                                     pulsar_topic):
    # (the official client aborts its process here: the function's exception escapes its lookup thread)
    ours = failure(pulsarfast, secured.broker.web_url, "create_producer", pulsar_topic, backend=backend,
                   authentication=pulsarfast.AuthenticationToken(broken_supplier), operation_timeout_seconds=60)
    assert isinstance(ours, pulsarfast.AuthenticationError)
    assert SUPPLIER_MESSAGE in str(ours)
