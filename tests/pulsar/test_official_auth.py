"""The official client's authentication classes on pulsarfast: AuthenticationBasic,
the generic ``Authentication(plugin, params)`` form with the official plugin
names, and AuthenticationOauth2 (client credentials), each compared with the
official ``pulsar`` module where that is cheap.

The network tests run on the secured broker of tests/support/secured_pulsar.py
(shared with test_security.py: token, TLS and basic providers), on both
backends; OAuth2 runs against a local issuer (tests/support/oauth2_issuer.py)
whose access tokens are JWTs signed with the broker's token secret, so the
real broker accepts them. The argument tests need no server.
"""
from __future__ import annotations

import base64
import functools
import json
import logging

import pytest

import pulsarfast
from pulsarfast.endpoints import oauth2
from tests.support.oauth2_issuer import OAuth2Issuer
from tests.support.secured_pulsar import BASIC_PASSWORD, BASIC_USER, XDIST_GROUP, Secured, secured_broker
from tests.support.waiting import wait_for
from tests.support.pulsar_helpers import patient_client, round_trip

official = pytest.importorskip("pulsar")

# (one worker runs the group's modules, against one secured broker)
pytestmark = [pytest.mark.timeout(120), pytest.mark.xdist_group(XDIST_GROUP)]

WAIT = 20.0
wait_for = functools.partial(wait_for, timeout=WAIT)
JAVA = "org.apache.pulsar.client.impl.auth."
CLIENT_ID, CLIENT_SECRET = "pulsar-app", "the-client-secret-1234"
MODULES = pytest.mark.parametrize("module", [official, pulsarfast], ids=["official", "pulsarfast"])


@pytest.fixture(scope="module")
def secured(request) -> Secured:
    return secured_broker(request)


@pytest.fixture
def issuer(secured):
    with OAuth2Issuer({CLIENT_ID: CLIENT_SECRET}, lambda client_id, expires_at: secured.token(client_id, expires_at)
                      ) as server:
        yield server


def key_data_url(client_id: str = CLIENT_ID, client_secret: str = CLIENT_SECRET) -> str:
    text = json.dumps({"client_id": client_id, "client_secret": client_secret})
    return "data:application/json;base64," + base64.b64encode(text.encode()).decode()


def oauth2_params(issuer_url: str, **extra: str) -> str:
    return json.dumps({"issuer_url": issuer_url, "private_key": key_data_url(), **extra})






def refused_by(module, url, auth, topic, **kwargs):
    """The exception create_producer raises on a client of module (official or pulsarfast)."""
    client = module.Client(url, authentication=auth, **kwargs)
    try:
        with pytest.raises(module.PulsarException) as info:
            client.create_producer(topic)
        return info.value
    finally:
        client.close()


# --------------------------------------------------------------------------- arguments (no server)


@MODULES
def test_basic_arguments_are_checked_like_the_official_client(module):
    for kwargs, name in [({}, "username"), ({"username": "u"}, "password"), ({"username": 1, "password": "p"},
                                                                             "username"),
                         ({"username": "u", "password": "p", "method": None}, "method"),
                         ({"auth_params_string": 5}, "auth_params_string")]:
        with pytest.raises(ValueError, match="Argument %s is expected to be of type" % name):
            module.AuthenticationBasic(**kwargs)
    for text, message in [("not json", None), ("{}", "No username provided for basic provider"),
                          ('{"username": "u"}', "No password provided for basic provider")]:
        with pytest.raises(RuntimeError, match=message):
            module.AuthenticationBasic(auth_params_string=text)
    # the JSON form wins over the other arguments
    module.AuthenticationBasic(1, 2, auth_params_string='{"username": "u", "password": "p"}')
    module.AuthenticationBasic("u", "p", "custom-method")


@MODULES
def test_oauth2_and_generic_arguments_are_checked_like_the_official_client(module):
    with pytest.raises(ValueError, match="auth_params_string"):
        module.AuthenticationOauth2(5)
    with pytest.raises(ValueError, match="dynamicLibPath"):
        module.Authentication(None, "")
    with pytest.raises(ValueError, match="authParamsString"):
        module.Authentication("token", b"token:x")
    # unusable parameters and unknown plugins are accepted here: they fail when the client connects
    module.AuthenticationOauth2("not json")
    module.AuthenticationOauth2("{}")
    for name in ("no-such-plugin", "/usr/lib/libno-such-auth.so", "oauth2", ""):
        module.Authentication(name, "params")


def test_the_plugin_names_map_onto_the_builtin_classes(tmp_path, monkeypatch):
    token_file = tmp_path / "token.txt"
    token_file.write_text("from-a-file\n")
    monkeypatch.setenv("PULSARFAST_TEST_TOKEN", "from-the-env")
    cases = [
        ("token", "token:abc", "token", b"abc"),
        ("TOKEN", "abc", "token", b"abc"),
        (JAVA + "AuthenticationToken", "token:abc", "token", b"abc"),
        ("token", "file://" + str(token_file), "token", b"from-a-file"),
        ("token", "file:" + str(token_file), "token", b"from-a-file"),
        ("token", "env:PULSARFAST_TEST_TOKEN", "token", b"from-the-env"),
        ("basic", '{"username": "u", "password": "p"}', "basic", b"u:p"),
        (JAVA + "AuthenticationBasic", '{"username": "u", "password": "p", "method": "m"}', "m", b"u:p"),
        ("tls", "tlsCertFile:/c.pem,tlsKeyFile:/k.pem", "tls", b""),
        (JAVA.upper() + "AUTHENTICATIONTLS", '{"tlsCertFile": "/c.pem", "tlsKeyFile": "/k.pem"}', "tls", b""),
    ]
    for name, params, method, data in cases:
        auth = pulsarfast.Authentication(name, params)
        assert (auth.method_name, auth.auth_data()) == (method, data), name
    assert pulsarfast.Authentication("tls", "tlsCertFile:/c.pem,tlsKeyFile:/k.pem").client_certificate() == (
        "/c.pem", "/k.pem")
    for name in ("oauth2token", JAVA + "oauth2.AuthenticationOAuth2"):
        auth = pulsarfast.Authentication(name, oauth2_params("http://127.0.0.1:1"))
        assert auth.method_name == "token" and auth.blocking_io
    for name in ("athenz", JAVA + "AuthenticationAthenz"):
        with pytest.raises(pulsarfast.InvalidConfiguration, match="Athenz"):
            pulsarfast.Authentication(name, "{}")
    token_file.write_text("rotated")  # the file is read again for each connection
    assert pulsarfast.Authentication("token", "file://" + str(token_file)).auth_data() == b"rotated"


def test_an_unknown_plugin_fails_only_when_asked_for_data(caplog):
    auth = pulsarfast.Authentication("no-such-plugin", "a:b")
    assert "could not be loaded" not in caplog.text
    assert any("no-such-plugin" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    with pytest.raises(pulsarfast.AuthenticationError, match="no-such-plugin"):
        auth.auth_data()


def test_the_oauth2_private_key_forms(tmp_path):
    path = tmp_path / "credentials.json"
    path.write_text(json.dumps({"client_id": "id-1", "client_secret": "s-1"}))
    for form in (str(path), "file://" + str(path), "file:" + str(path), key_data_url("id-1", "s-1")):
        assert oauth2.read_credentials(form) == ("id-1", "s-1")
    for form, message in [(str(tmp_path / "missing.json"), "cannot read"), ("ftp://x/y", "not supported"),
                          ("data:text/plain;base64,e30=", "data: URL")]:
        with pytest.raises(pulsarfast.AuthenticationError, match=message):
            oauth2.read_credentials(form)
    path.write_text("{}")
    with pytest.raises(pulsarfast.AuthenticationError, match="client_id and client_secret"):
        oauth2.read_credentials(str(path))
    params = oauth2.parse_params(json.dumps({"issuer_url": "https://issuer", "client_id": "i", "client_secret": "s",
                                             "audience": "a", "scope": "x y", "request_timeout_seconds": "5"}))
    assert (params.issuer_url, params.audience, params.scope, params.timeout) == ("https://issuer", "a", "x y", 5.0)
    for text, message in [("[]", "JSON object"), ("{}", "issuer_url"), ('{"issuer_url": "x"}', "private_key")]:
        with pytest.raises(pulsarfast.AuthenticationError, match=message):
            oauth2.parse_params(text)


def test_secrets_stay_out_of_reprs():
    shown = [repr(pulsarfast.AuthenticationBasic("user", BASIC_PASSWORD)),
             repr(pulsarfast.Authentication("basic", json.dumps({"username": "u", "password": BASIC_PASSWORD}))),
             repr(pulsarfast.AuthenticationOauth2(json.dumps({"issuer_url": "http://i", "client_id": "c",
                                                              "client_secret": CLIENT_SECRET}))),
             repr(pulsarfast.Authentication("token", "token:" + CLIENT_SECRET)),
             repr(oauth2.parse_params(json.dumps({"issuer_url": "http://i", "client_id": "c",
                                                  "client_secret": CLIENT_SECRET})))]
    for text in shown:
        assert BASIC_PASSWORD not in text and CLIENT_SECRET not in text


# --------------------------------------------------------------------------- basic, on the broker


@pytest.mark.parametrize("form", ["arguments", "json"])
@pytest.mark.integration
@pytest.mark.slow
def test_basic_authentication_connects(secured, backend, pulsar_topic, form):
    if form == "arguments":
        auth = pulsarfast.AuthenticationBasic(BASIC_USER, BASIC_PASSWORD)
    else:
        auth = pulsarfast.AuthenticationBasic(
            auth_params_string=json.dumps({"username": BASIC_USER, "password": BASIC_PASSWORD}))
    client = patient_client(secured.plain_url, backend, authentication=auth)
    try:
        round_trip(client, pulsar_topic, count=2)
    finally:
        client.close()


@pytest.mark.parametrize("who", ["wrong password", "unknown user", "another method name"])
@pytest.mark.integration
@pytest.mark.slow
def test_refused_basic_credentials_raise_authentication_error(secured, backend, pulsar_topic, who, caplog):
    auth = {
        "wrong password": pulsarfast.AuthenticationBasic(BASIC_USER, "not-the-password"),
        "unknown user": pulsarfast.AuthenticationBasic("nobody", BASIC_PASSWORD),
        "another method name": pulsarfast.AuthenticationBasic(BASIC_USER, BASIC_PASSWORD, method="no-such-method"),
    }[who]
    caplog.set_level(logging.DEBUG)
    # (a long operation timeout: a retry loop would end in Timeout, not AuthenticationError)
    client = patient_client(secured.plain_url, backend, authentication=auth, operation_timeout_seconds=60)
    try:
        with pytest.raises(pulsarfast.AuthenticationError) as info:
            client.create_producer(pulsar_topic)
    finally:
        client.close()
    assert BASIC_PASSWORD not in caplog.text + str(info.value)


@pytest.mark.integration
@pytest.mark.slow
def test_the_official_client_times_out_where_pulsarfast_raises_authentication_error(secured, pulsar_topic):
    # what the official client does with credentials the broker refuses (it retries the connection
    # until the operation timeout): pulsarfast raises the broker's AuthenticationError at once instead
    error = refused_by(official, secured.plain_url, official.AuthenticationBasic(BASIC_USER, "wrong"), pulsar_topic,
                       operation_timeout_seconds=3)
    assert isinstance(error, official.Timeout)
    ours = refused_by(pulsarfast, secured.plain_url, pulsarfast.AuthenticationBasic(BASIC_USER, "wrong"),
                      pulsar_topic, operation_timeout_seconds=60)
    assert isinstance(ours, pulsarfast.AuthenticationError)


# --------------------------------------------------------------------------- the generic form, on the broker


GENERIC = [
    ("token", "token"), (JAVA + "AuthenticationToken", "token"), ("token", "raw token"),
    ("basic", "basic"), (JAVA + "AuthenticationBasic", "basic"),
    ("tls", "tls"), (JAVA + "AuthenticationTls", "tls"),
    ("oauth2token", "oauth2"), (JAVA + "oauth2.AuthenticationOAuth2", "oauth2"),
]


@pytest.mark.parametrize("name, kind", GENERIC, ids=["%s-%s" % (n.rsplit(".", 1)[-1], k) for n, k in GENERIC])
@pytest.mark.integration
@pytest.mark.slow
def test_the_generic_form_connects_with_each_builtin_plugin(secured, backend, pulsar_topic, issuer, name, kind):
    params = {
        "token": "token:" + secured.token(),
        "raw token": secured.token(),
        "basic": json.dumps({"username": BASIC_USER, "password": BASIC_PASSWORD}),
        "tls": "tlsCertFile:%s,tlsKeyFile:%s" % (secured.client_cert, secured.client_key),
        "oauth2": oauth2_params(issuer.url),
    }[kind]
    url = secured.tls_url if kind == "tls" else secured.plain_url
    client = patient_client(url, backend, authentication=pulsarfast.Authentication(name, params),
                         tls_trust_certs_file_path=secured.ca)
    try:
        round_trip(client, pulsar_topic, count=2)
    finally:
        client.close()
    if kind == "oauth2":
        assert issuer.token_count() == 1


@pytest.mark.parametrize("call", ["create_producer", "subscribe"])
@pytest.mark.integration
@pytest.mark.slow
def test_an_unknown_plugin_raises_authentication_error_at_first_use(secured, backend, pulsar_topic, call):
    auth = pulsarfast.Authentication("no-such-plugin", "a:b")  # accepted, as the official client does
    client = patient_client(secured.plain_url, backend, authentication=auth, operation_timeout_seconds=60)
    try:
        with pytest.raises(pulsarfast.AuthenticationError, match="no-such-plugin"):
            if call == "create_producer":
                client.create_producer(pulsar_topic)
            else:
                client.subscribe(pulsar_topic, "sub")
        assert client.broker_connections() == []
    finally:
        client.close()


@pytest.mark.integration
@pytest.mark.slow
def test_the_official_client_also_raises_authentication_error_for_an_unknown_plugin(secured, pulsar_topic):
    for module in (official, pulsarfast):
        error = refused_by(module, secured.plain_url, module.Authentication("no-such-plugin", "a:b"), pulsar_topic,
                           operation_timeout_seconds=60)
        assert isinstance(error, module.AuthenticationError)


# --------------------------------------------------------------------------- OAuth2, on the broker


@pytest.mark.integration
@pytest.mark.slow
def test_oauth2_client_credentials_connect(secured, backend, pulsar_topic, issuer):
    auth = pulsarfast.AuthenticationOauth2(oauth2_params(issuer.url + "/", audience="urn:pulsar", scope="a b"))
    client = patient_client(secured.plain_url, backend, authentication=auth)
    try:
        round_trip(client, pulsar_topic, count=2)
        round_trip(client, pulsar_topic + "_2", count=2)
    finally:
        client.close()
    assert issuer.discoveries == 1
    (form,) = issuer.token_requests  # the token is kept while it is valid
    assert form == {"grant_type": "client_credentials", "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET,
                    "audience": "urn:pulsar", "scope": "a b", "content_type": "application/x-www-form-urlencoded"}


@pytest.mark.integration
@pytest.mark.slow
def test_the_official_client_sends_the_same_oauth2_request(secured, backend, pulsar_topic, issuer):
    params = oauth2_params(issuer.url, audience="urn:pulsar", scope="a b")
    theirs = official.Client(secured.plain_url, authentication=official.AuthenticationOauth2(params),
                             operation_timeout_seconds=30)
    try:
        theirs.create_producer(pulsar_topic).send(b"from the official client")
    finally:
        theirs.close()
    ours = patient_client(secured.plain_url, backend, authentication=pulsarfast.AuthenticationOauth2(params))
    try:
        ours.create_producer(pulsar_topic).send(b"from pulsarfast")
    finally:
        ours.close()
    official_form, our_form = issuer.token_requests
    assert our_form == official_form


@pytest.mark.integration
@pytest.mark.slow
def test_an_expiring_oauth2_token_is_refreshed(secured, backend, pulsar_topic, issuer):
    # each access token (and its JWT) expires 2 s after it is issued: the broker (checking every
    # second) challenges the connection, and the client answers with a new token from the issuer
    issuer.lifetime = 2
    client = patient_client(secured.plain_url, backend,
                         authentication=pulsarfast.AuthenticationOauth2(oauth2_params(issuer.url)))
    try:
        producer = client.create_producer(pulsar_topic)
        producer.send(b"before")
        (conn,) = client.broker_connections()
        first = issuer.token_count()
        wait_for(lambda: issuer.token_count() >= first + 2, backend, message="two fresh tokens for AUTH_CHALLENGEs")
        producer.send(b"after")
        assert client.broker_connections() == [conn]
        assert conn.is_ready() and producer.is_connected()
    finally:
        client.close()
    assert issuer.discoveries == 1


@pytest.mark.integration
@pytest.mark.slow
def test_an_oauth2_answer_without_expires_in_is_used_once(secured, backend, pulsar_topic, issuer):
    issuer.send_expires_in = False  # (the official client accepts such an answer too)
    auth = pulsarfast.AuthenticationOauth2(oauth2_params(issuer.url))
    for topic in (pulsar_topic, pulsar_topic + "_2"):
        client = patient_client(secured.plain_url, backend, authentication=auth)
        try:
            client.create_producer(topic).send(b"x")
        finally:
            client.close()
    assert issuer.token_count() == 2


@pytest.mark.parametrize("problem", ["wrong secret", "unknown client", "issuer down", "not json", "no credentials"])
@pytest.mark.integration
@pytest.mark.slow
def test_oauth2_failures_raise_authentication_error_like_the_official_client(
        secured, backend, pulsar_topic, issuer, problem, caplog):
    params = {
        "wrong secret": json.dumps({"issuer_url": issuer.url, "private_key": key_data_url(CLIENT_ID, "wrong")}),
        "unknown client": json.dumps({"issuer_url": issuer.url, "client_id": "who", "client_secret": "x"}),
        "issuer down": oauth2_params("http://127.0.0.1:1"),
        "not json": "not json",
        "no credentials": json.dumps({"issuer_url": issuer.url}),
    }[problem]
    caplog.set_level(logging.DEBUG)
    error = refused_by(official, secured.plain_url, official.AuthenticationOauth2(params), pulsar_topic,
                       operation_timeout_seconds=60)
    assert isinstance(error, official.AuthenticationError)
    client = patient_client(secured.plain_url, backend, authentication=pulsarfast.AuthenticationOauth2(params),
                         operation_timeout_seconds=60)
    try:
        with pytest.raises(pulsarfast.AuthenticationError) as info:
            client.create_producer(pulsar_topic)
    finally:
        client.close()
    assert CLIENT_SECRET not in caplog.text + str(info.value)


@pytest.mark.integration
@pytest.mark.slow
def test_no_log_line_or_error_shows_oauth2_secrets_or_tokens(secured, backend, pulsar_topic, issuer, caplog):
    caplog.set_level(logging.DEBUG)
    auth = pulsarfast.AuthenticationOauth2(oauth2_params(issuer.url))
    client = patient_client(secured.plain_url, backend, authentication=auth)
    try:
        client.create_producer(pulsar_topic).send(b"x")
        shown = [repr(auth), repr(client)] + [repr(c) for c in client.broker_connections()]
    finally:
        client.close()
    assert any(r.levelno == logging.DEBUG for r in caplog.records)  # (the capture did see debug lines)
    assert issuer.issued
    for text in [caplog.text] + shown:
        assert CLIENT_SECRET not in text
        for token in issuer.issued:
            assert token.rsplit(".", 1)[1] not in text
