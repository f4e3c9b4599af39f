"""pulsarfast's TLS and authentication against a real Pulsar broker configured
for them, on both backends (the `backend` fixture).

One module-scoped standalone broker has it all: TLS on brokerServicePortTls
with a certificate from a test CA made here (tests/support/certs.py), naming only the
DNS name ``localhost`` (so ``127.0.0.1`` is a host name mismatch), and
authentication by token (HS256 JWTs signed here with hmac; the broker's
tokenSecretKey is the same secret) or by TLS client certificate
(AuthenticationTLS). authenticationRefreshCheckSeconds is 1, so a token with
an ``exp`` soon is challenged (AUTH_CHALLENGE) within seconds of expiring.
"""
from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
import logging
import os
import secrets
import shutil
import tempfile
import time
from dataclasses import dataclass

import pytest

import pulsarfast as pulsar
from tests.support.certs import RSAKey, certificate_pem, make_certificate
from msgengine.transport import TLSStream
from pulsarfast import proto
from pulsarfast.sansio import AuthChallenged, PulsarProtocol
from pulsarfast.wire import encode_simple
from tests.support.pulsar_broker import PulsarBroker, require_pulsar_lib
from tests.support.pulsar_helpers import topic_stats
from tests.support.servers import free_port
from tests.support.waiting import run_blocking, wait_for

# (one worker runs the module: its broker is one more JVM for the run, not one per worker)
pytestmark = [pytest.mark.timeout(120), pytest.mark.integration, pytest.mark.slow,
              pytest.mark.xdist_group("pulsar_security")]

WAIT = 20.0
wait_for = functools.partial(wait_for, timeout=WAIT)

CA_NAME = "pulsarfast test CA"
SUPERUSER = "admin"


# --------------------------------------------------------------------------- tokens and keys


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def make_jwt(secret: bytes, subject: str, expires_at: float | None = None) -> str:
    """An HS256 JWT for ``subject`` (the broker's role), signed with secret."""
    claims: dict = {"sub": subject}
    if expires_at is not None:
        claims["exp"] = int(expires_at)
    signing_input = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode()) + "." + _b64url(
        json.dumps(claims).encode())
    signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return signing_input + "." + _b64url(signature)


def _der_length(n: int) -> bytes:
    if n < 0x80:
        return bytes([n])
    raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(raw)]) + raw


def pkcs8_pem(pkcs1_pem: bytes) -> bytes:
    """An RSA key as PKCS#8 (BEGIN PRIVATE KEY), the form the broker's tlsKeyFilePath wants."""
    pkcs1 = base64.b64decode(b"".join(line for line in pkcs1_pem.splitlines() if not line.startswith(b"-----")))
    rsa_algorithm = bytes.fromhex("300d06092a864886f70d0101010500")  # SEQ { rsaEncryption, NULL }
    body = b"\x02\x01\x00" + rsa_algorithm + b"\x04" + _der_length(len(pkcs1)) + pkcs1
    text = base64.b64encode(b"\x30" + _der_length(len(body)) + body).decode()
    lines = [text[i:i + 64] for i in range(0, len(text), 64)]
    return ("-----BEGIN PRIVATE KEY-----\n" + "\n".join(lines) + "\n-----END PRIVATE KEY-----\n").encode()


# --------------------------------------------------------------------------- the broker


@dataclass
class Secured:
    broker: PulsarBroker
    tls_port: int
    secret: bytes
    ca: str
    wrong_ca: str
    client_cert: str
    client_key: str

    @property
    def plain_url(self) -> str:
        return self.broker.service_url

    @property
    def tls_url(self) -> str:  # by address: the certificate does not name it
        return "pulsar+ssl://127.0.0.1:%d" % self.tls_port

    @property
    def tls_name_url(self) -> str:  # by the name in the certificate
        return "pulsar+ssl://localhost:%d" % self.tls_port

    def token(self, subject: str = "user", expires_at: float | None = None) -> str:
        return make_jwt(self.secret, subject, expires_at)


@pytest.fixture(scope="module")
def secured(request) -> Secured:
    require_pulsar_lib()
    directory = tempfile.mkdtemp(prefix="pulsarfast-security-")
    request.addfinalizer(lambda: shutil.rmtree(directory, ignore_errors=True))
    ca_key, leaf_key, wrong_ca_key = (RSAKey.generate() for _ in range(3))
    files = {
        "ca.pem": certificate_pem(make_certificate(ca_key, CA_NAME, ca=True)),
        "wrong-ca.pem": certificate_pem(make_certificate(wrong_ca_key, CA_NAME, ca=True)),
        "broker.pem": certificate_pem(make_certificate(leaf_key, "localhost", ca_key, CA_NAME,
                                                       dns_names=("localhost",), server=True)),
        "broker.key": pkcs8_pem(leaf_key.private_pem()),
        "client.pem": certificate_pem(make_certificate(leaf_key, "tls-client", ca_key, CA_NAME, client=True)),
        "client.key": leaf_key.private_pem(),
    }
    for name, data in files.items():
        with open(os.path.join(directory, name), "wb") as f:
            f.write(data)
    path = functools.partial(os.path.join, directory)
    secret = secrets.token_bytes(32)
    superuser_token = make_jwt(secret, SUPERUSER)
    tls_port = free_port()
    broker = PulsarBroker(config={
        "brokerServicePortTls": tls_port,
        "tlsCertificateFilePath": path("broker.pem"),
        "tlsKeyFilePath": path("broker.key"),
        "tlsTrustCertsFilePath": path("ca.pem"),
        "authenticationEnabled": "true",
        "authenticationProviders": "org.apache.pulsar.broker.authentication.AuthenticationProviderToken,"
                                   "org.apache.pulsar.broker.authentication.AuthenticationProviderTls",
        "tokenSecretKey": "data:;base64," + base64.b64encode(secret).decode(),
        "authenticationRefreshCheckSeconds": "1",
        "superUserRoles": SUPERUSER,
        # the standalone's own client (it creates the cluster and the namespaces) signs in too
        "brokerClientAuthenticationPlugin": "org.apache.pulsar.client.impl.auth.AuthenticationToken",
        "brokerClientAuthenticationParameters": "token:" + superuser_token,
    }, admin_headers={"Authorization": "Bearer " + superuser_token})
    request.addfinalizer(broker.kill)  # (its data goes with it: no graceful stop needed)
    broker.start()
    return Secured(broker, tls_port, secret, path("ca.pem"), path("wrong-ca.pem"), path("client.pem"),
                   path("client.key"))


def make_client(url, backend, **kwargs):
    kwargs.setdefault("operation_timeout_seconds", 30)
    kwargs.setdefault("connection_timeout_ms", 5000)
    return pulsar.Client(url, backend=backend, **kwargs)


def round_trip(client, topic, count=5):
    """Produce count messages and consume them back on the client; returns the bodies received."""
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic)
    sent = [b"m-%d" % i for i in range(count)]
    for body in sent:
        producer.send(body)
    received = []
    for _ in sent:
        msg = consumer.receive(timeout_millis=int(WAIT * 1000))
        received.append(msg.data())
        consumer.acknowledge(msg)
    assert received == sent
    return received


# --------------------------------------------------------------------------- TLS


def test_produce_and_consume_over_tls_with_the_right_trust_file(secured, backend, pulsar_topic):
    client = make_client(secured.tls_url, backend, authentication=pulsar.AuthenticationToken(secured.token()),
                         tls_trust_certs_file_path=secured.ca)
    try:
        round_trip(client, pulsar_topic)
        connections = client.broker_connections()
        assert connections
        for conn in connections:
            assert isinstance(conn.stream, TLSStream)
            assert conn.stream.version() in ("TLSv1.2", "TLSv1.3")
            assert conn.address == ("127.0.0.1", secured.tls_port)
        # the topic's broker is the lookup answer's brokerServiceUrlTls
        assert "pulsar+ssl://127.0.0.1:%d" % secured.tls_port in {c.logical_url for c in connections}
    finally:
        client.close()


def test_use_tls_with_a_pulsar_url_runs_tls(secured, backend, pulsar_topic):
    client = make_client("pulsar://127.0.0.1:%d" % secured.tls_port, backend, use_tls=True,
                         authentication=pulsar.AuthenticationToken(secured.token()),
                         tls_trust_certs_file_path=secured.ca)
    try:
        round_trip(client, pulsar_topic, count=1)
        assert all(isinstance(c.stream, TLSStream) for c in client.broker_connections())
    finally:
        client.close()


@pytest.mark.parametrize("call", ["create_producer", "subscribe"])
def test_a_wrong_trust_file_is_a_connect_error_at_once(secured, backend, pulsar_topic, call):
    # operation_timeout_seconds is long: a retry loop would end in Timeout, not ConnectError
    client = make_client(secured.tls_url, backend, authentication=pulsar.AuthenticationToken(secured.token()),
                         tls_trust_certs_file_path=secured.wrong_ca, operation_timeout_seconds=60)
    try:
        with pytest.raises(pulsar.ConnectError, match="certificate verify failed"):
            if call == "create_producer":
                client.create_producer(pulsar_topic)
            else:
                client.subscribe(pulsar_topic, "sub")
        assert client.broker_connections() == []
    finally:
        client.close()


def test_hostname_validation_refuses_a_certificate_for_another_name(secured, backend, pulsar_topic):
    client = make_client(secured.tls_url, backend, authentication=pulsar.AuthenticationToken(secured.token()),
                         tls_trust_certs_file_path=secured.ca, tls_validate_hostname=True,
                         operation_timeout_seconds=60)
    try:
        with pytest.raises(pulsar.ConnectError, match="not valid for '127.0.0.1'"):
            client.create_producer(pulsar_topic)
    finally:
        client.close()


def test_hostname_validation_accepts_the_name_in_the_certificate(secured, backend, pulsar_topic):
    client = make_client(secured.tls_name_url, backend, authentication=pulsar.AuthenticationToken(secured.token()),
                         tls_trust_certs_file_path=secured.ca, tls_validate_hostname=True)
    try:
        round_trip(client, pulsar_topic, count=2)
        assert {c.address[0] for c in client.broker_connections()} == {"localhost"}
    finally:
        client.close()


def test_allow_insecure_connection_skips_certificate_verification(secured, backend, pulsar_topic):
    client = make_client(secured.tls_url, backend, authentication=pulsar.AuthenticationToken(secured.token()),
                         tls_trust_certs_file_path=secured.wrong_ca, tls_allow_insecure_connection=True,
                         tls_validate_hostname=True)
    try:
        round_trip(client, pulsar_topic, count=1)
    finally:
        client.close()


def test_tls_to_the_plain_port_is_a_connect_error(secured, backend, pulsar_topic):
    client = make_client("pulsar+ssl://127.0.0.1:%d" % secured.broker.port, backend,
                         authentication=pulsar.AuthenticationToken(secured.token()),
                         tls_trust_certs_file_path=secured.ca, operation_timeout_seconds=60)
    try:
        with pytest.raises(pulsar.ConnectError, match="TLS handshake"):
            client.create_producer(pulsar_topic)
    finally:
        client.close()


def test_tls_files_that_cannot_be_loaded_are_invalid_configuration(secured, tmp_path):
    with pytest.raises(pulsar.InvalidConfiguration, match="tls_trust_certs_file_path"):
        pulsar.Client(secured.tls_url, tls_trust_certs_file_path=str(tmp_path / "missing.pem"))
    with pytest.raises(pulsar.InvalidConfiguration, match="client certificate"):
        pulsar.Client(secured.tls_url, tls_trust_certs_file_path=secured.ca,
                      tls_certificate_file_path=secured.client_cert)  # without its key
    with pytest.raises(pulsar.InvalidConfiguration, match="client certificate"):
        pulsar.Client(secured.tls_url, authentication=pulsar.AuthenticationTLS(secured.client_cert, secured.ca))


def test_mutual_tls_authentication_with_a_client_certificate(secured, backend, pulsar_topic):
    auth = pulsar.AuthenticationTLS(secured.client_cert, secured.client_key)
    client = make_client(secured.tls_url, backend, authentication=auth, tls_trust_certs_file_path=secured.ca)
    try:
        round_trip(client, pulsar_topic, count=2)
        assert all(c.stream.getpeercert() for c in client.broker_connections())
    finally:
        client.close()
    with pytest.raises(pulsar.InvalidConfiguration, match="pulsar\\+ssl"):
        pulsar.Client(secured.plain_url, authentication=auth)


# --------------------------------------------------------------------------- tokens


@pytest.mark.parametrize("transport", ["plain", "tls"])
def test_a_valid_token_connects(secured, backend, pulsar_topic, transport):
    url = secured.plain_url if transport == "plain" else secured.tls_url
    client = make_client(url, backend, authentication=pulsar.AuthenticationToken(secured.token()),
                         tls_trust_certs_file_path=secured.ca)
    try:
        round_trip(client, pulsar_topic)
    finally:
        client.close()


def test_a_token_function_is_called_for_each_connection(secured, backend, pulsar_topic):
    calls = []

    def token():
        calls.append(1)
        return secured.token()

    client = make_client(secured.plain_url, backend, authentication=pulsar.AuthenticationToken(token))
    try:
        round_trip(client, pulsar_topic, count=1)
        assert len(calls) == len(client.broker_connections()) >= 1
    finally:
        client.close()


@pytest.mark.parametrize("credentials", ["absent", "wrong signature", "expired", "empty"])
@pytest.mark.parametrize("call", ["create_producer", "subscribe"])
def test_a_refused_token_raises_authentication_error(secured, backend, pulsar_topic, credentials, call):
    auth = {
        "absent": None,
        "wrong signature": pulsar.AuthenticationToken(make_jwt(b"not the broker's secret" * 2, "user")),
        "expired": pulsar.AuthenticationToken(secured.token(expires_at=time.time() - 60)),
        "empty": pulsar.AuthenticationToken(""),
    }[credentials]
    client = make_client(secured.plain_url, backend, authentication=auth, operation_timeout_seconds=60)
    try:
        with pytest.raises(pulsar.AuthenticationError):
            if call == "create_producer":
                client.create_producer(pulsar_topic)
            else:
                client.subscribe(pulsar_topic, "sub")
    finally:
        client.close()


def test_a_token_function_that_fails_raises_error_getting_authentication_data(secured, backend, pulsar_topic):
    def broken():
        raise RuntimeError("no token today")

    for supplier in (broken, lambda: 42):
        client = make_client(secured.plain_url, backend, authentication=pulsar.AuthenticationToken(supplier))
        try:
            with pytest.raises(pulsar.ErrorGettingAuthenticationData):
                client.create_producer(pulsar_topic)
        finally:
            client.close()


def test_an_auth_challenge_is_answered_with_a_fresh_token(secured, backend, pulsar_topic):
    # each token expires 2 s after it is made: the broker (checking every second) challenges the
    # connection, the client answers with the function's next token, and the connection stays
    calls = []

    def token():
        calls.append(time.time())
        return secured.token(expires_at=time.time() + 2)

    client = make_client(secured.plain_url, backend, authentication=pulsar.AuthenticationToken(token))
    try:
        producer = client.create_producer(pulsar_topic)
        producer.send(b"before")
        (conn,) = client.broker_connections()
        first_calls = len(calls)
        wait_for(lambda: len(calls) >= first_calls + 2, backend, message="two AUTH_CHALLENGEs answered")
        producer.send(b"after")
        assert client.broker_connections() == [conn]
        assert conn.is_ready()
        assert producer.is_connected()
    finally:
        client.close()


def test_no_log_line_repr_or_error_shows_the_token(secured, backend, pulsar_topic, caplog):
    token = secured.token()
    wrong = make_jwt(b"another secret, another token!!!", "user")
    auth = pulsar.AuthenticationToken(token)
    assert token not in repr(auth) and token not in str(auth)
    assert "hidden" in repr(auth)
    caplog.set_level(logging.DEBUG)
    client = make_client(secured.plain_url, backend, authentication=auth, tls_trust_certs_file_path=secured.ca)
    try:
        round_trip(client, pulsar_topic, count=1)
        shown = [repr(client)] + [repr(c) for c in client.broker_connections()]
    finally:
        client.close()
    refused = make_client(secured.plain_url, backend, authentication=pulsar.AuthenticationToken(wrong))
    try:
        with pytest.raises(pulsar.AuthenticationError) as info:
            refused.create_producer(pulsar_topic)
    finally:
        refused.close()
    shown += [str(info.value), repr(info.value)]
    assert any(r.levelno == logging.DEBUG for r in caplog.records)  # (the capture did see debug lines)
    for secret in (token, wrong, token.rsplit(".", 1)[1], wrong.rsplit(".", 1)[1]):
        assert secret not in caplog.text
        assert not any(secret in text for text in shown)


# --------------------------------------------------------------------------- staying connected over TLS


def test_keep_alive_keeps_an_idle_tls_connection(secured, backend, pulsar_topic):
    # keep-alive every second, so the watchdog would close a connection that heard nothing for 2 s
    client = make_client(secured.tls_url, backend, authentication=pulsar.AuthenticationToken(secured.token()),
                         tls_trust_certs_file_path=secured.ca, keep_alive_interval_seconds=1)
    try:
        producer = client.create_producer(pulsar_topic)
        producer.send(b"one")
        (conn,) = client.broker_connections()
        before = conn.protocol.frames_received
        # pongs to our pings come in over TLS: four of them span more than the watchdog's 2 s
        wait_for(lambda: conn.protocol.frames_received >= before + 4, backend, message="four keep-alive answers")
        assert conn.is_ready() and client.broker_connections() == [conn]
        producer.send(b"two")
    finally:
        client.close()


def test_a_tls_producer_reconnects_after_the_topic_is_unloaded(secured, backend, pulsar_topic):
    client = make_client(secured.tls_url, backend, authentication=pulsar.AuthenticationToken(secured.token()),
                         tls_trust_certs_file_path=secured.ca)
    try:
        consumer = client.subscribe(pulsar_topic, "sub")
        producer = client.create_producer(pulsar_topic)
        producer.send(b"before")
        publisher = topic_stats(secured.broker, backend, pulsar_topic)["publishers"][0]
        run_blocking(backend, secured.broker.unload_topic, pulsar_topic)
        sent = [b"after-%d" % i for i in range(20)]
        for body in sent:
            producer.send(body)  # each one acknowledged by the broker (after the reconnection)
        received = [consumer.receive(timeout_millis=int(WAIT * 1000)).data() for _ in range(len(sent) + 1)]
        assert received == [b"before"] + sent
        stats = topic_stats(secured.broker, backend, pulsar_topic)
        assert stats["publishers"][0]["connectedSince"] != publisher["connectedSince"]  # re-created
        assert all(isinstance(c.stream, TLSStream) for c in client.broker_connections())
    finally:
        client.close()


# --------------------------------------------------------------------------- the official client


def test_the_official_client_interoperates_over_tls_with_a_token(secured, backend, pulsar_topic):
    official = pytest.importorskip("pulsar")
    ours = make_client(secured.tls_url, backend, authentication=pulsar.AuthenticationToken(secured.token()),
                       tls_trust_certs_file_path=secured.ca)
    theirs = official.Client(secured.tls_url, authentication=official.AuthenticationToken(secured.token()),
                             tls_trust_certs_file_path=secured.ca, operation_timeout_seconds=30)
    try:
        consumer = ours.subscribe(pulsar_topic, "ours")
        their_consumer = theirs.subscribe(pulsar_topic, "theirs")
        theirs.create_producer(pulsar_topic).send(b"from the official client")
        ours.create_producer(pulsar_topic).send(b"from pulsarfast")
        assert [consumer.receive(timeout_millis=int(WAIT * 1000)).data() for _ in range(2)] == [
            b"from the official client", b"from pulsarfast"]
        assert [their_consumer.receive(timeout_millis=int(WAIT * 1000)).data() for _ in range(2)] == [
            b"from the official client", b"from pulsarfast"]
    finally:
        ours.close()
        theirs.close()


# --------------------------------------------------------------------------- arguments


def test_authentication_arguments():
    with pytest.raises(ValueError):
        pulsar.AuthenticationToken(42)
    with pytest.raises(ValueError):
        pulsar.AuthenticationTLS(None, "key.pem")
    with pytest.raises(pulsar.InvalidConfiguration, match="shared library"):
        pulsar.Authentication("/usr/lib/libauth.so", "params")
    for unsupported in (pulsar.AuthenticationAthenz, pulsar.AuthenticationOauth2, pulsar.AuthenticationBasic):
        with pytest.raises(pulsar.InvalidConfiguration, match="not supported"):
            unsupported("{}")
    with pytest.raises(ValueError, match="authentication"):
        pulsar.Client("pulsar://127.0.0.1:6650", authentication="token")
    with pytest.raises(ValueError, match="use_tls"):
        pulsar.Client("pulsar://127.0.0.1:6650", use_tls=1)
    with pytest.raises(ValueError, match="tls_validate_hostname"):
        pulsar.Client("pulsar+ssl://127.0.0.1:6651", tls_validate_hostname="yes")
    with pytest.raises(ValueError, match="tls_trust_certs_file_path"):
        pulsar.Client("pulsar+ssl://127.0.0.1:6651", tls_trust_certs_file_path=b"/ca.pem")
    assert pulsar.AuthenticationToken(lambda: "t").auth_data() == b"t"
    assert "hidden" not in repr(pulsar.AuthenticationToken(lambda: "t"))


def test_the_auth_commands_on_the_wire():

    kind, record = proto.decode_command(proto.auth_response("token", b"fresh"))
    assert kind == proto.AUTH_RESPONSE
    assert (record.response.auth_method_name, record.response.auth_data) == ("token", b"fresh")
    assert record.client_version == proto.CLIENT_VERSION and record.protocol_version == proto.PROTOCOL_VERSION
    kind, record = proto.decode_command(proto.connect(auth_method_name="token", auth_data=b"t",
                                                      supports_auth_refresh=True))
    assert record.feature_flags.supports_auth_refresh is True
    assert (record.auth_method_name, record.auth_data) == ("token", b"t")
    assert proto.decode_command(proto.connect())[1].feature_flags is None
    # a challenge while connecting is an event, and its answer may be queued before CONNECTED
    protocol = PulsarProtocol(proto.connect())
    protocol.start()
    protocol.data_to_send()
    challenge = proto.base_command(proto.AUTH_CHALLENGE, proto.f_str(1, "broker") + proto.f_bytes(
        2, proto.f_str(1, "token") + proto.f_bytes(2, b"refresh")))
    (event,) = protocol.receive_data(encode_simple(challenge))
    assert isinstance(event, AuthChallenged) and (event.method_name, event.data) == ("token", b"refresh")
    protocol.send_auth_response(proto.auth_response("token", b"again"))
    assert protocol.data_to_send() == encode_simple(proto.auth_response("token", b"again"))
