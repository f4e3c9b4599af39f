"""pulsarfast's TLS and authentication against a real Pulsar broker configured
for them, on both backends (the `backend` fixture).

One standalone broker has it all (tests/support/secured_pulsar.py, shared with
test_official_auth.py): TLS on brokerServicePortTls with a certificate from a
test CA naming only the DNS name ``localhost`` (so ``127.0.0.1`` is a host
name mismatch), and authentication by token (HS256 JWTs signed with the
broker's tokenSecretKey), by TLS client certificate (AuthenticationTLS) or
basic. authenticationRefreshCheckSeconds is 1, so a token with an ``exp``
soon is challenged (AUTH_CHALLENGE) within seconds of expiring.
"""
from __future__ import annotations

import functools
import logging
import time

import pytest

import pulsarfast as pulsar
from msgengine.transport import TLSStream
from pulsarfast.wire import proto
from pulsarfast.wire.codec import encode_simple
from pulsarfast.wire.sansio import AuthChallenged, PulsarProtocol
from tests.support.pulsar_helpers import patient_client, round_trip, topic_stats
from tests.support.secured_pulsar import XDIST_GROUP, Secured, make_jwt, secured_broker
from tests.support.waiting import run_blocking, wait_for

# (one worker runs the group's modules: their broker is one more JVM for the run, not one per worker)
pytestmark = [pytest.mark.timeout(120), pytest.mark.integration, pytest.mark.slow,
              pytest.mark.xdist_group(XDIST_GROUP)]

WAIT = 20.0
wait_for = functools.partial(wait_for, timeout=WAIT)


@pytest.fixture(scope="module")
def secured(request) -> Secured:
    return secured_broker(request)






# --------------------------------------------------------------------------- TLS


def test_produce_and_consume_over_tls_with_the_right_trust_file(secured, backend, pulsar_topic):
    client = patient_client(secured.tls_url, backend, authentication=pulsar.AuthenticationToken(secured.token()),
                         tls_trust_certs_file_path=secured.ca)
    try:
        round_trip(client, pulsar_topic, count=5)
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
    client = patient_client("pulsar://127.0.0.1:%d" % secured.tls_port, backend, use_tls=True,
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
    client = patient_client(secured.tls_url, backend, authentication=pulsar.AuthenticationToken(secured.token()),
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
    client = patient_client(secured.tls_url, backend, authentication=pulsar.AuthenticationToken(secured.token()),
                         tls_trust_certs_file_path=secured.ca, tls_validate_hostname=True,
                         operation_timeout_seconds=60)
    try:
        with pytest.raises(pulsar.ConnectError, match="not valid for '127.0.0.1'"):
            client.create_producer(pulsar_topic)
    finally:
        client.close()


def test_hostname_validation_accepts_the_name_in_the_certificate(secured, backend, pulsar_topic):
    client = patient_client(secured.tls_name_url, backend, authentication=pulsar.AuthenticationToken(secured.token()),
                         tls_trust_certs_file_path=secured.ca, tls_validate_hostname=True)
    try:
        round_trip(client, pulsar_topic, count=2)
        assert {c.address[0] for c in client.broker_connections()} == {"localhost"}
    finally:
        client.close()


def test_allow_insecure_connection_skips_certificate_verification(secured, backend, pulsar_topic):
    client = patient_client(secured.tls_url, backend, authentication=pulsar.AuthenticationToken(secured.token()),
                         tls_trust_certs_file_path=secured.wrong_ca, tls_allow_insecure_connection=True,
                         tls_validate_hostname=True)
    try:
        round_trip(client, pulsar_topic, count=1)
    finally:
        client.close()


def test_tls_to_the_plain_port_is_a_connect_error(secured, backend, pulsar_topic):
    client = patient_client("pulsar+ssl://127.0.0.1:%d" % secured.broker.port, backend,
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
    # (a certificate and a key read but not going together fail the first connection, as in the
    # official client: test_official_auth_errors.py)


def test_mutual_tls_authentication_with_a_client_certificate(secured, backend, pulsar_topic):
    auth = pulsar.AuthenticationTLS(secured.client_cert, secured.client_key)
    client = patient_client(secured.tls_url, backend, authentication=auth, tls_trust_certs_file_path=secured.ca)
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
    client = patient_client(url, backend, authentication=pulsar.AuthenticationToken(secured.token()),
                         tls_trust_certs_file_path=secured.ca)
    try:
        round_trip(client, pulsar_topic, count=5)
    finally:
        client.close()


def test_a_token_function_is_called_for_each_connection(secured, backend, pulsar_topic):
    calls = []

    def token():
        calls.append(1)
        return secured.token()

    client = patient_client(secured.plain_url, backend, authentication=pulsar.AuthenticationToken(token))
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
    client = patient_client(secured.plain_url, backend, authentication=auth, operation_timeout_seconds=60)
    try:
        with pytest.raises(pulsar.AuthenticationError):
            if call == "create_producer":
                client.create_producer(pulsar_topic)
            else:
                client.subscribe(pulsar_topic, "sub")
    finally:
        client.close()


def test_a_token_function_that_fails_raises_authentication_error(secured, backend, pulsar_topic):
    # (as the official client; a function that raises: test_official_auth_errors.py, side by side)
    def broken():
        raise RuntimeError("no token today")

    for supplier, message in ((broken, "no token today"), (lambda: 42, "returned int, not a str")):
        client = patient_client(secured.plain_url, backend, authentication=pulsar.AuthenticationToken(supplier))
        try:
            with pytest.raises(pulsar.AuthenticationError, match=message):
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

    client = patient_client(secured.plain_url, backend, authentication=pulsar.AuthenticationToken(token))
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
    client = patient_client(secured.plain_url, backend, authentication=auth, tls_trust_certs_file_path=secured.ca)
    try:
        round_trip(client, pulsar_topic, count=1)
        shown = [repr(client)] + [repr(c) for c in client.broker_connections()]
    finally:
        client.close()
    refused = patient_client(secured.plain_url, backend, authentication=pulsar.AuthenticationToken(wrong))
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
    client = patient_client(secured.tls_url, backend, authentication=pulsar.AuthenticationToken(secured.token()),
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
    client = patient_client(secured.tls_url, backend, authentication=pulsar.AuthenticationToken(secured.token()),
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
    ours = patient_client(secured.tls_url, backend, authentication=pulsar.AuthenticationToken(secured.token()),
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
    with pytest.raises(pulsar.InvalidConfiguration, match="not supported"):
        pulsar.AuthenticationAthenz("{}")
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
