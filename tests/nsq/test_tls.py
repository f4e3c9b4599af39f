# TLS against a real nsqd (--tls-cert/--tls-key from a test CA made by tests/support/certs.py):
# verification on by default (CA, host name, SNI), off only when asked, client
# certificates (--tls-client-auth-policy=require-verify), a server without TLS,
# tls_options handling; Writer -> nsqd -> Reader on both backends.
from __future__ import annotations

import functools
import os
import ssl
import time

import pytest

import nsq
from nsq.conn import Connection
from msgengine.errors import EngineConfigError
from nsq.errors import ConfigError, ConnectionClosedError, FeatureNegotiationError, InvalidError
from msgengine.transport import TLSStream, make_ssl_context

from tests.support.certs import make_pki
from tests.support.servers import free_port
from tests.support import waiting

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def pki():
    return make_pki()


def start_tls_nsqd(nsqd_factory, pki, *extra, cert=None, key=None):
    """nsqd with TLS required on TCP (HTTP stays plain for the harness)."""
    return nsqd_factory(
        "--tls-cert=%s" % (cert or pki.server_cert),
        "--tls-key=%s" % (key or pki.server_key),
        "--tls-required=tcp-https",
        "--https-address=127.0.0.1:%d" % free_port(),
        *extra,
    )


@pytest.fixture
def tls_nsqd(nsqd_factory, pki):
    return start_tls_nsqd(nsqd_factory, pki)


def connect(server, backend, host="127.0.0.1", **kwargs):
    conn = Connection(host, server.tcp_port, backend=backend, **kwargs)
    conn.connect()
    return conn


def refused(server, backend, host="127.0.0.1", **kwargs):
    conn = Connection(host, server.tcp_port, backend=backend, **kwargs)
    started = time.monotonic()
    with pytest.raises(ConnectionClosedError) as info:
        conn.connect()
    assert time.monotonic() - started < 5
    assert conn.closed()
    return info.value


wait_for = functools.partial(waiting.wait_for, timeout=10.0, interval=0.01)


def client_stats(server):
    return [c for t in server.stats().get("topics") or [] for ch in t.get("channels") or [] for c in ch.get("clients") or []]


# ----------------------------------------------------------------------------- verification


def test_right_ca_connects_and_nsqd_sees_tls(tls_nsqd, pki, backend, topic):
    conn = connect(tls_nsqd, backend, tls_v1=True, tls_options={"ca_certs": pki.ca_cert})
    try:
        assert conn.features["tls_v1"] is True
        stream = conn.stream
        assert isinstance(stream, TLSStream)
        assert stream.version() in ("TLSv1.2", "TLSv1.3")
        assert stream.getpeercert()["subject"][-1] == (("commonName", "localhost"),)
        assert conn.request(nsq.codec.encode_pub(topic, b"over tls")) == b"OK"
    finally:
        conn.close()
    assert tls_nsqd.topic_depth(topic) == 1


def test_wrong_ca_is_refused(tls_nsqd, pki, backend):
    error = refused(tls_nsqd, backend, tls_v1=True, tls_options={"ca_certs": pki.wrong_ca_cert})
    assert "certificate" in str(error).lower()
    assert isinstance(error.__cause__, ssl.SSLCertVerificationError)


def test_default_verifies_against_system_cas(tls_nsqd, backend):
    # No tls_options: verification is on; the test CA is not a system CA.
    error = refused(tls_nsqd, backend, tls_v1=True)
    assert "certificate verify failed" in str(error)


def test_hostname_mismatch_is_refused(nsqd_factory, pki, backend):
    server = start_tls_nsqd(nsqd_factory, pki, cert=pki.other_cert, key=pki.other_key)  # SAN: other.invalid only
    error = refused(server, backend, tls_v1=True, tls_options={"ca_certs": pki.ca_cert})
    assert "certificate" in str(error).lower() and "mismatch" in str(error).lower()
    assert isinstance(error.__cause__, ssl.SSLCertVerificationError)
    # Turning only the host name check off is an explicit choice, and then the CA still counts.
    conn = connect(server, backend, tls_v1=True, tls_options={"ca_certs": pki.ca_cert, "check_hostname": False})
    conn.close()
    refused(server, backend, tls_v1=True, tls_options={"ca_certs": pki.wrong_ca_cert, "check_hostname": False})


def test_dns_name_and_sni(tls_nsqd, pki, backend):
    # "localhost" matches the certificate's DNS SAN (and is sent as SNI).
    conn = connect(tls_nsqd, backend, host="localhost", tls_v1=True, tls_options={"ca_certs": pki.ca_cert})
    try:
        assert conn.stream.tls.server_hostname == "localhost"
    finally:
        conn.close()


def test_verification_off_only_when_asked(nsqd_factory, pki, backend):
    server = start_tls_nsqd(nsqd_factory, pki, cert=pki.other_cert, key=pki.other_key)
    refused(server, backend, tls_v1=True, tls_options={"ca_certs": pki.wrong_ca_cert})
    conn = connect(server, backend, tls_v1=True, tls_options={"cert_reqs": ssl.CERT_NONE})
    assert conn.is_connected()
    conn.close()


def test_ssl_context_is_used_as_given(tls_nsqd, pki, backend):
    context = ssl.create_default_context(cafile=pki.ca_cert)
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    conn = connect(tls_nsqd, backend, tls_v1=True, tls_options=context)
    try:
        assert conn.stream.version() == "TLSv1.2"
    finally:
        conn.close()
    refused(tls_nsqd, backend, tls_v1=True, tls_options=ssl.create_default_context(cafile=pki.wrong_ca_cert))


def test_pynsq_ssl_version_pins_the_protocol(tls_nsqd, pki):
    conn = connect(
        tls_nsqd, "threads", tls_v1=True, tls_options={"ca_certs": pki.ca_cert, "ssl_version": ssl.PROTOCOL_TLSv1_2}
    )
    try:
        assert conn.stream.version() == "TLSv1.2"
    finally:
        conn.close()


# ----------------------------------------------------------------------------- client certificates


def test_client_certificate_required(nsqd_factory, pki, backend, topic):
    server = start_tls_nsqd(
        nsqd_factory, pki, "--tls-client-auth-policy=require-verify", "--tls-root-ca-file=%s" % pki.ca_cert
    )
    with_cert = {"ca_certs": pki.ca_cert, "certfile": pki.client_cert, "keyfile": pki.client_key}
    conn = connect(server, backend, tls_v1=True, tls_options=with_cert)
    try:
        assert conn.request(nsq.codec.encode_pub(topic, b"with a client cert")) == b"OK"
    finally:
        conn.close()
    error = refused(server, backend, tls_v1=True, tls_options={"ca_certs": pki.ca_cert})
    assert "certificate required" in str(error).lower()  # nsqd's TLS alert


def test_client_certificate_from_another_ca_is_refused(nsqd_factory, pki, backend):
    server = start_tls_nsqd(
        nsqd_factory, pki, "--tls-client-auth-policy=require-verify", "--tls-root-ca-file=%s" % pki.ca_cert
    )
    rogue = {"ca_certs": pki.ca_cert, "certfile": pki.rogue_client_cert, "keyfile": pki.client_key}
    error = refused(server, backend, tls_v1=True, tls_options=rogue)
    assert "unknown ca" in str(error).lower()  # nsqd's TLS alert


# ----------------------------------------------------------------------------- negotiation


def test_tls_not_offered_is_a_clear_error(nsqd_factory, pki, backend):
    server = nsqd_factory()  # no --tls-cert
    conn = Connection("127.0.0.1", server.tcp_port, backend=backend, tls_v1=True, tls_options={"ca_certs": pki.ca_cert})
    started = time.monotonic()
    with pytest.raises(FeatureNegotiationError) as info:
        conn.connect()
    assert time.monotonic() - started < 2
    assert "tls_v1" in str(info.value) and "--tls-cert" in str(info.value)
    assert conn.closed()


def test_plain_client_against_tls_required(tls_nsqd, backend, topic):
    conn = connect(tls_nsqd, backend)
    try:
        with pytest.raises(InvalidError):
            conn.request(nsq.codec.encode_pub(topic, b"not encrypted"))
    finally:
        conn.close()


# ----------------------------------------------------------------------------- Writer -> nsqd -> Reader


@pytest.mark.pythons  # (make test-pythons: on every supported Python)
def test_writer_and_reader_over_tls(tls_nsqd, pki, backend, topic):
    options = {"tls_v1": True, "tls_options": {"ca_certs": pki.ca_cert}, "backend": backend}
    bodies = [b"tls message %d" % i for i in range(50)] + [os.urandom(200_000)]
    received = []

    def handler(message):
        received.append(bytes(message.body))
        return True

    writer = nsq.Writer([tls_nsqd.tcp_address], **options)
    try:
        for body in bodies:
            assert writer.pub(topic, body) == b"OK"
    finally:
        writer.close()
    reader = nsq.Reader(topic, "ch", handler, nsqd_tcp_addresses=[tls_nsqd.tcp_address], max_in_flight=10, **options)
    reader.start()
    try:
        wait_for(lambda: len(received) >= len(bodies), backend, message="messages over TLS")
        clients = client_stats(tls_nsqd)
        assert clients and all(c["tls"] for c in clients)
    finally:
        reader.close()
    assert sorted(received) == sorted(bodies)


def test_reader_with_a_refused_certificate_keeps_retrying(tls_nsqd, pki, backend, topic, caplog):
    reader = nsq.Reader(
        topic, "ch", lambda m: True, nsqd_tcp_addresses=[tls_nsqd.tcp_address], backend=backend,
        tls_v1=True, tls_options={"ca_certs": pki.wrong_ca_cert},
    )
    reader.start()
    try:
        wait_for(
            lambda: sum("certificate verify failed" in r.getMessage() for r in caplog.records) >= 2,
            backend,
            message="two failed TLS attempts logged",
        )
        assert not reader.conns
    finally:
        reader.close()


# ----------------------------------------------------------------------------- tls_options


def test_tls_options_validation(pki):
    # the engine's transport checks them; nsq's Config says so with nsq's ConfigError
    with pytest.raises(ConfigError, match="unknown tls_options"):
        Connection("127.0.0.1", 4150, tls_v1=True, tls_options={"verify": False})
    with pytest.raises(EngineConfigError, match="unknown tls_options"):
        make_ssl_context({"verify": False})
    with pytest.raises(EngineConfigError, match="check_hostname"):
        make_ssl_context({"cert_reqs": ssl.CERT_NONE, "check_hostname": True})
    with pytest.raises(EngineConfigError, match="dict or an ssl.SSLContext"):
        make_ssl_context([("ca_certs", pki.ca_cert)])
    with pytest.raises(EngineConfigError, match="ca_certs"):
        make_ssl_context({"ca_certs": "/nonexistent/ca.pem"})
    with pytest.raises(EngineConfigError, match="client certificate"):
        make_ssl_context({"ca_certs": pki.ca_cert, "certfile": "/nonexistent/client.pem"})
    with pytest.raises(ConfigError):
        Connection("127.0.0.1", 4150, tls_v1=True, tls_options={"bogus": 1})

    default = make_ssl_context(None)
    assert default.verify_mode == ssl.CERT_REQUIRED and default.check_hostname
    off = make_ssl_context({"cert_reqs": ssl.CERT_NONE})
    assert off.verify_mode == ssl.CERT_NONE and not off.check_hostname
    pinned = make_ssl_context({"ssl_version": ssl.PROTOCOL_TLSv1_2, "ca_certs": pki.ca_cert})
    assert pinned.minimum_version == pinned.maximum_version == ssl.TLSVersion.TLSv1_2
    context = ssl.create_default_context()
    assert make_ssl_context(context) is context
    with_cert = make_ssl_context({"ca_certs": pki.ca_cert, "certfile": pki.client_cert, "keyfile": pki.client_key})
    assert with_cert.verify_mode == ssl.CERT_REQUIRED

