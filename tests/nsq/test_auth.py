# AUTH against a real nsqd whose --auth-http-address points at tests/support/authserver.py
# (in-process, free loopback port): allowed, refused and partial grants, the
# identity kept on the connection, distinct errors (AuthFailedError,
# UnauthorizedError), a Reader that keeps retrying, a Writer whose publish
# raises, AUTH over TLS with a client certificate, and a secret that never shows
# in logs, reprs or error messages.
from __future__ import annotations

import functools
import logging

import pytest

import nsq
from nsq.conn import Connection
from nsq.errors import AuthError, AuthFailedError, Error, UnauthorizedError

from tests.support.authserver import AuthServer, grant
from tests.support.certs import make_pki
from tests.support.servers import free_port
from tests.support import waiting

pytestmark = pytest.mark.timeout(60)

SECRET_ALL = "s3cret-all-Zq8T"
SECRET_PUB = "s3cret-pub-only-Hw2K"
SECRET_SUB = "s3cret-sub-only-Pd5M"
SECRET_NONE = "s3cret-no-grants-Jc7R"
SECRET_REFUSED = "s3cret-refused-Xv4N"
ALL_SECRETS = (SECRET_ALL, SECRET_PUB, SECRET_SUB, SECRET_NONE, SECRET_REFUSED)


@pytest.fixture
def authd():
    server = AuthServer()
    server.allow(SECRET_ALL, grant(), identity="alice")
    server.allow(SECRET_PUB, grant(permissions=("publish",)), identity="publisher")
    server.allow(SECRET_SUB, grant(permissions=("subscribe",)), identity="subscriber")
    server.allow(SECRET_NONE, identity="nobody")  # no authorizations: nsqd says E_UNAUTHORIZED
    server.fail(SECRET_REFUSED, 403)  # an HTTP error: nsqd says E_AUTH_FAILED
    yield server
    server.close()


@pytest.fixture
def auth_nsqd(nsqd_factory, authd):
    return nsqd_factory("--auth-http-address=%s" % authd.address)


wait_for = functools.partial(waiting.wait_for, timeout=10.0, interval=0.01)


def connect(server, backend, secret, **kwargs):
    conn = Connection("127.0.0.1", server.tcp_port, backend=backend, auth_secret=secret, **kwargs)
    conn.connect()
    return conn


# ----------------------------------------------------------------------------- connection level


def test_allowed_secret_keeps_the_identity(auth_nsqd, authd, backend, topic):
    conn = connect(auth_nsqd, backend, SECRET_ALL)
    try:
        assert conn.features["auth_required"] is True
        assert conn.auth_identity == {
            "identity": "alice",
            "identity_url": "https://example.invalid/users/test-user",
            "permission_count": 1,
        }
        assert conn.request(nsq.codec.encode_pub(topic, b"authorized")) == b"OK"
    finally:
        conn.close()
    (request,) = authd.requests_for(SECRET_ALL)
    assert request["remote_ip"] == "127.0.0.1" and request["tls"] == "false"


def test_secret_as_bytes(auth_nsqd, backend):
    conn = connect(auth_nsqd, backend, SECRET_ALL.encode())
    assert conn.auth_identity["identity"] == "alice"
    conn.close()


def test_refused_secret_is_auth_failed(auth_nsqd, backend):
    conn = Connection("127.0.0.1", auth_nsqd.tcp_port, backend=backend, auth_secret=SECRET_REFUSED)
    with pytest.raises(AuthFailedError) as info:
        conn.connect()
    assert info.value.code == "E_AUTH_FAILED"
    assert conn.closed() and conn.auth_identity is None


def test_secret_without_grants_is_unauthorized(auth_nsqd, backend):
    conn = Connection("127.0.0.1", auth_nsqd.tcp_port, backend=backend, auth_secret=SECRET_NONE)
    with pytest.raises(UnauthorizedError) as info:
        conn.connect()
    assert info.value.code == "E_UNAUTHORIZED"
    assert conn.closed()


def test_missing_secret_fails_before_sending_anything(auth_nsqd, authd, backend):
    conn = Connection("127.0.0.1", auth_nsqd.tcp_port, backend=backend)
    with pytest.raises(AuthError, match="requires AUTH but no auth_secret"):
        conn.connect()
    assert conn.closed()
    assert authd.requests == []


def test_secret_is_not_sent_when_nsqd_does_not_ask(nsqd, authd, backend, caplog):
    caplog.set_level(logging.WARNING, logger="nsq")
    conn = connect(nsqd, backend, SECRET_ALL)
    try:
        assert not conn.features.get("auth_required")
        assert conn.auth_identity is None
    finally:
        conn.close()
    assert "does not require AUTH" in caplog.text


# ----------------------------------------------------------------------------- Writer / Reader


def test_writer_and_reader_with_an_allowed_secret(auth_nsqd, backend, topic):
    options = {"auth_secret": SECRET_ALL, "backend": backend}
    writer = nsq.Writer([auth_nsqd.tcp_address], **options)
    try:
        for i in range(20):
            assert writer.pub(topic, b"m%d" % i) == b"OK"
    finally:
        writer.close()
    received = []

    def handler(message):
        received.append(bytes(message.body))
        return True

    reader = nsq.Reader(topic, "ch", handler, nsqd_tcp_addresses=[auth_nsqd.tcp_address], max_in_flight=5, **options)
    reader.start()
    try:
        wait_for(lambda: len(received) >= 20, backend, message="20 messages")
        (conn,) = reader.conns.values()
        assert conn.auth_identity["identity"] == "alice"
    finally:
        reader.close()
    assert sorted(received) == sorted(b"m%d" % i for i in range(20))


def test_publish_only_secret(auth_nsqd, authd, backend, topic, caplog):
    caplog.set_level(logging.WARNING, logger="nsq")
    writer = nsq.Writer([auth_nsqd.tcp_address], auth_secret=SECRET_PUB, backend=backend)
    try:
        assert writer.pub(topic, b"published with a publish-only grant") == b"OK"
    finally:
        writer.close()
    assert auth_nsqd.topic_depth(topic) == 1

    # SUB is refused with E_UNAUTHORIZED, directly on a connection ...
    conn = connect(auth_nsqd, backend, SECRET_PUB)
    with pytest.raises(UnauthorizedError):
        conn.subscribe(topic, "ch")
    conn.wait_closed(5)
    assert conn.closed()  # nsqd closes after E_UNAUTHORIZED

    # ... and a Reader keeps retrying (each attempt asks the auth server again).
    before = len(authd.requests_for(SECRET_PUB))
    reader = nsq.Reader(
        topic, "ch", lambda m: True, nsqd_tcp_addresses=[auth_nsqd.tcp_address], backend=backend, auth_secret=SECRET_PUB
    )
    reader.start()
    try:
        wait_for(lambda: len(authd.requests_for(SECRET_PUB)) - before >= 3, backend, message="3 AUTH attempts")
        assert not reader.conns
        assert reader.stats()["received"] == 0
    finally:
        reader.close()
    assert "E_UNAUTHORIZED" in caplog.text


def test_subscribe_only_secret_makes_a_blocking_publish_raise(auth_nsqd, backend, topic):
    writer = nsq.Writer([auth_nsqd.tcp_address], auth_secret=SECRET_SUB, backend=backend, publish_timeout=5)
    try:
        with pytest.raises(UnauthorizedError):
            writer.pub(topic, b"not allowed")
        # nsqd closed that connection (E_UNAUTHORIZED is fatal): the next publish goes out on a new one
        with pytest.raises(UnauthorizedError):
            writer.mpub(topic, [b"not", b"allowed"])
    finally:
        writer.close()
    assert auth_nsqd.topic_depth(topic) == 0


def test_refused_secret_makes_a_blocking_publish_raise(auth_nsqd, authd, backend, topic):
    writer = nsq.Writer([auth_nsqd.tcp_address], auth_secret=SECRET_REFUSED, backend=backend, publish_timeout=1)
    try:
        with pytest.raises(AuthFailedError):
            writer.pub(topic, b"not allowed")
        assert authd.requests_for(SECRET_REFUSED)
        assert not writer.conns
    finally:
        writer.close()


def test_reader_with_a_refused_secret_keeps_retrying(auth_nsqd, authd, backend, topic, caplog):
    caplog.set_level(logging.WARNING, logger="nsq")
    reader = nsq.Reader(
        topic, "ch", lambda m: True, nsqd_tcp_addresses=[auth_nsqd.tcp_address], backend=backend,
        auth_secret=SECRET_REFUSED,
    )
    reader.start()
    try:
        wait_for(lambda: len(authd.requests_for(SECRET_REFUSED)) >= 3, backend, message="3 AUTH attempts")
        assert not reader.conns
    finally:
        reader.close()
    assert "E_AUTH_FAILED" in caplog.text


# ----------------------------------------------------------------------------- with TLS


def test_auth_over_tls_with_a_client_certificate(nsqd_factory, authd, backend, topic):
    pki = make_pki()
    server = nsqd_factory(
        "--auth-http-address=%s" % authd.address,
        "--tls-cert=%s" % pki.server_cert,
        "--tls-key=%s" % pki.server_key,
        "--tls-required=tcp-https",
        "--https-address=127.0.0.1:%d" % free_port(),
        "--tls-client-auth-policy=require-verify",
        "--tls-root-ca-file=%s" % pki.ca_cert,
    )
    conn = connect(
        server, backend, SECRET_ALL, tls_v1=True, deflate=True,
        tls_options={"ca_certs": pki.ca_cert, "certfile": pki.client_cert, "keyfile": pki.client_key},
    )
    try:
        assert conn.auth_identity["identity"] == "alice"
        assert conn.request(nsq.codec.encode_pub(topic, b"tls + deflate + auth")) == b"OK"
    finally:
        conn.close()
    (request,) = authd.requests_for(SECRET_ALL)
    assert request["tls"] == "true"
    assert request["common_name"] == pki.client_common_name


# ----------------------------------------------------------------------------- the secret stays secret


def test_secret_never_appears_in_logs_reprs_or_errors(auth_nsqd, backend, topic, caplog):
    caplog.set_level(logging.DEBUG)
    texts = []
    errors = []

    conn = connect(auth_nsqd, backend, SECRET_ALL)
    texts += [repr(conn), str(conn), repr(conn.auth_identity)]
    conn.close()

    for secret in (SECRET_REFUSED, SECRET_NONE):
        conn = Connection("127.0.0.1", auth_nsqd.tcp_port, backend=backend, auth_secret=secret)
        with pytest.raises(Error) as info:
            conn.connect()
        errors.append(info.value)
        texts.append(repr(conn))

    conn = connect(auth_nsqd, backend, SECRET_PUB)
    with pytest.raises(UnauthorizedError) as info:
        conn.subscribe(topic, "ch")
    errors.append(info.value)
    texts.append(repr(conn))
    conn.close()

    writer = nsq.Writer([auth_nsqd.tcp_address], auth_secret=SECRET_SUB, backend=backend, publish_timeout=5)
    try:
        with pytest.raises(UnauthorizedError) as info:
            writer.pub(topic, b"x")
        errors.append(info.value)
        texts += [repr(writer)] + [repr(c) for c in writer.conns.values()]
    finally:
        writer.close()

    reader = nsq.Reader(
        topic, "ch", lambda m: True, nsqd_tcp_addresses=[auth_nsqd.tcp_address], backend=backend,
        auth_secret=SECRET_PUB,
    )
    reader.start()
    try:
        wait_for(lambda: "E_UNAUTHORIZED" in caplog.text, backend, message="a logged SUB refusal")
        texts.append(repr(reader))
    finally:
        reader.close()

    for error in errors:
        texts += [str(error), repr(error), str(error.args)]
        cause = error.__cause__ or error.__context__
        while cause is not None:
            texts += [str(cause), repr(cause)]
            cause = cause.__cause__ or cause.__context__
    texts.append(caplog.text)
    texts += [repr(record.args) for record in caplog.records]
    assert caplog.records, "nothing was logged; the check would prove nothing"
    for secret in ALL_SECRETS:
        for text in texts:
            assert secret not in text, "secret leaked into: %s" % text[:300]
