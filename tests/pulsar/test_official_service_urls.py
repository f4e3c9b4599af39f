"""Service URLs as the official client has them, on real brokers and both backends:
``http://`` service URLs (lookups over the broker's HTTP API), ``listener_name=``
(advertised listeners), and ``AutoClusterFailover`` / ``ServiceInfoProvider``
switching a client between services.

The listener tests share ONE broker of this module's own, which advertises two
listeners: ``internal`` (its own port) and ``external`` (a TCP relay started
here in front of that port, so a test sees which address the client used). The
failover tests put a relay that the test can take down in front of the run's
shared broker as the primary, and the broker itself as the secondary (the same
cluster, so messages keep flowing across a switch).

What the official client (3.13) does, checked side by side on these brokers:
an http:// URL works; an HTTP error status (404 for a namespace that does not
exist) is ConnectError at once; a refused connection is Timeout after the
operation timeout; TLS to a plain port is LookupError. Over the binary protocol
the broker answers a named listener's lookup with that listener's URL and
``proxy_through_service_url``, so the official client's socket goes to the
service URL; a listener the broker does not advertise is Timeout after the
operation timeout. The official client sends no listener over HTTP (it ignores
``listener_name`` there); pulsarfast sends the Java client's
``X-Pulsar-ListenerName`` header, so the named listener's address is used, and
an unknown one is the broker's HTTP 500: ConnectError.
"""
from __future__ import annotations

import functools
import http.server
import json
import threading

import pytest

import pulsarfast as pulsar
from tests.support.ports import LOOPBACK
from tests.support.pulsar_broker import PulsarBroker, require_pulsar_lib
from tests.support.servers import free_port
from tests.support.tcprelay import TcpRelay
from tests.support.waiting import wait_for
from tests.support.pulsar_helpers import patient_client, round_trip

pytestmark = [pytest.mark.timeout(120), pytest.mark.integration, pytest.mark.slow,
              pytest.mark.xdist_group("pulsar_service_urls")]

WAIT = 20.0
wait_for = functools.partial(wait_for, timeout=WAIT)






def ports_used(client):
    return {conn.address[1] for conn in client.broker_connections()}


# --------------------------------------------------------------------------- http:// service URLs


def test_an_http_service_url_produces_and_consumes(pulsar_broker, backend, pulsar_topic):
    client = patient_client(pulsar_broker.web_url, backend)
    try:
        round_trip(client, pulsar_topic, count=3)
        assert client.get_service_info().service_url == pulsar_broker.web_url
        # the lookup answer's brokerUrl: the binary port, by the broker's own name for it
        assert {c.logical_url for c in client.broker_connections()} == {pulsar_broker.service_url}
    finally:
        client.close()


def test_an_http_service_url_finds_the_partitions_of_a_partitioned_topic(pulsar_broker, backend, pulsar_topic):
    pulsar_broker.create_partitioned_topic(pulsar_topic, 3)
    client = patient_client(pulsar_broker.web_url + "/", backend)
    try:
        full = "persistent://public/default/" + pulsar_topic
        assert client.get_topic_partitions(pulsar_topic) == ["%s-partition-%d" % (full, i) for i in range(3)]
        round_trip(client, pulsar_topic, count=6, ordered=False)
    finally:
        client.close()


def test_an_http_lookup_in_a_namespace_that_does_not_exist_is_a_connect_error(pulsar_broker, backend):
    client = patient_client(pulsar_broker.web_url, backend)
    try:
        with pytest.raises(pulsar.ConnectError, match="404"):
            client.create_producer("persistent://no-such-tenant/ns/topic")
        with pytest.raises(pulsar.ConnectError):
            client.get_topic_partitions("persistent://no-such-tenant/ns/topic")
    finally:
        client.close()


def test_an_http_service_url_nobody_listens_on_is_a_timeout(backend, pulsar_topic):
    client = patient_client("http://127.0.0.1:%d" % free_port(), backend, operation_timeout_seconds=1)
    try:
        with pytest.raises(pulsar.Timeout):
            client.create_producer(pulsar_topic)
    finally:
        client.close()


def test_an_https_url_to_a_plain_http_port_is_a_lookup_error(pulsar_broker, backend, pulsar_topic):
    client = patient_client(pulsar_broker.web_url.replace("http://", "https://"), backend,
                         tls_allow_insecure_connection=True)
    try:
        with pytest.raises(pulsar.LookupError):
            client.create_producer(pulsar_topic)
    finally:
        client.close()


class _Recorder(http.server.BaseHTTPRequestHandler):
    """A lookup endpoint that records each request's path and headers and answers as the broker does
    (the partition count, then the real broker's brokerUrl)."""

    requests: list = []
    broker_url = ""

    def do_GET(self):  # noqa: N802 (http.server's name)
        type(self).requests.append((self.path, dict(self.headers)))
        body = {"partitions": 0} if "/partitions" in self.path else {"brokerUrl": self.broker_url, "brokerUrlTls": ""}
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_http_lookups_send_the_token_and_the_listener_name_as_headers(pulsar_broker, backend, pulsar_topic):
    handler = type("Recorder", (_Recorder,), {"requests": [], "broker_url": pulsar_broker.service_url})
    server = http.server.ThreadingHTTPServer((LOOPBACK, 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    # A real lookup first, so that the broker serves the topic's namespace bundle: the recorder answers
    # without one, and a broker that does not serve the bundle yet refuses the producer (ServiceUnitNotReady)
    # until some lookup has it load the bundle (this test passed only after another test had done that)
    pulsar_broker.admin("GET", "/lookup/v2/topic/persistent/public/default/%s" % pulsar_topic)
    client = patient_client("http://%s:%d" % (LOOPBACK, server.server_address[1]), backend,
                         authentication=pulsar.AuthenticationToken("secret-token"), listener_name="external")
    try:
        client.create_producer(pulsar_topic).send(b"x")
        paths = [path for path, _headers in handler.requests]
        assert paths == ["/admin/v2/persistent/public/default/%s/partitions?checkAllowAutoCreation=true" % pulsar_topic,
                         "/lookup/v2/topic/persistent/public/default/%s" % pulsar_topic]
        for _path, headers in handler.requests:
            assert headers["Authorization"] == "Bearer secret-token"
            assert headers["X-Pulsar-ListenerName"] == "external"
    finally:
        client.close()
        server.shutdown()
        server.server_close()


# --------------------------------------------------------------------------- listener_name


class Listeners:
    def __init__(self, broker: PulsarBroker, port: int, relay: TcpRelay):
        self.broker = broker
        self.port = port  # the broker's binary port: the internal listener
        self.relay = relay  # in front of it: the external listener

    @property
    def internal_url(self) -> str:
        return "pulsar://%s:%d" % (LOOPBACK, self.port)


@pytest.fixture(scope="module")
def listeners(request) -> Listeners:
    require_pulsar_lib()
    port = free_port()
    relay = TcpRelay(port)
    request.addfinalizer(relay.close)
    broker = PulsarBroker(config={
        "brokerServicePort": port,
        "advertisedListeners": "internal:pulsar://%s:%d,external:%s" % (LOOPBACK, port, relay.url),
        "internalListenerName": "internal",
    })
    request.addfinalizer(broker.kill)
    broker.start()
    return Listeners(broker, port, relay)


def test_listener_name_over_http_connects_to_the_named_listeners_address(listeners, backend, pulsar_topic):
    client = patient_client(listeners.broker.web_url, backend, listener_name="external")
    try:
        before = listeners.relay.accepted
        round_trip(client, pulsar_topic, count=3)
        assert ports_used(client) == {listeners.relay.port}
        assert listeners.relay.accepted > before
    finally:
        client.close()


def test_without_listener_name_http_lookups_give_the_internal_address(listeners, backend, pulsar_topic):
    client = patient_client(listeners.broker.web_url, backend)
    try:
        round_trip(client, pulsar_topic, count=3)
        assert ports_used(client) == {listeners.port}
    finally:
        client.close()


def test_listener_name_over_the_binary_protocol_names_the_listener_through_the_service_url(
        listeners, backend, pulsar_topic):
    # the broker answers the external listener's URL with proxy_through_service_url: the socket goes
    # to the service URL (here the external address itself), CONNECT names the listener's URL
    client = patient_client(listeners.relay.url, backend, listener_name="external")
    try:
        round_trip(client, pulsar_topic, count=3)
        assert ports_used(client) == {listeners.relay.port}
        assert {c.logical_url for c in client.broker_connections()} == {listeners.relay.url}
    finally:
        client.close()


def test_without_listener_name_the_binary_lookup_names_the_internal_listener(listeners, backend, pulsar_topic):
    # (this broker answers every lookup with proxy_through_service_url: the official client's sockets
    # go to the service URL here too, checked side by side)
    client = patient_client(listeners.relay.url, backend)
    try:
        round_trip(client, pulsar_topic, count=3)
        assert ports_used(client) == {listeners.relay.port}
        assert {c.logical_url for c in client.broker_connections()} == {listeners.relay.url, listeners.internal_url}
    finally:
        client.close()


def test_a_listener_the_broker_does_not_advertise_is_a_timeout_over_the_binary_protocol(
        listeners, backend, pulsar_topic):
    client = patient_client(listeners.internal_url, backend, listener_name="nope", operation_timeout_seconds=2)
    try:
        with pytest.raises(pulsar.Timeout, match="nope"):
            client.create_producer(pulsar_topic)
        # partition metadata carries no listener: it works, as in the official client
        assert client.get_topic_partitions(pulsar_topic) == ["persistent://public/default/" + pulsar_topic]
    finally:
        client.close()


def test_a_listener_the_broker_does_not_advertise_is_a_connect_error_over_http(listeners, backend, pulsar_topic):
    client = patient_client(listeners.broker.web_url, backend, listener_name="nope")
    try:
        with pytest.raises(pulsar.ConnectError, match="nope"):
            client.create_producer(pulsar_topic)
    finally:
        client.close()


# --------------------------------------------------------------------------- failover


@pytest.fixture
def primary_relay(pulsar_broker):
    relay = TcpRelay(pulsar_broker.port)
    yield relay
    relay.close()


def test_auto_cluster_failover_moves_a_sending_producer_to_the_secondary_and_back(
        pulsar_broker, primary_relay, backend, pulsar_topic):
    primary = pulsar.ServiceInfo(primary_relay.url)
    secondary = pulsar.ServiceInfo(pulsar_broker.service_url)
    failover = pulsar.AutoClusterFailover(primary, [secondary], check_interval_ms=100, failover_threshold=2,
                                          switch_back_threshold=2)
    client = patient_client(failover, backend)
    try:
        assert client.get_service_info().service_url == primary_relay.url
        consumer = client.subscribe(pulsar_topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(pulsar_topic)
        sent = []

        def send(count):
            for _ in range(count):
                body = b"m-%d" % len(sent)
                producer.send(body)
                sent.append(body)

        send(3)
        assert primary_relay.open_connections() >= 1  # (lookups, producer and consumer: through the primary)
        primary_relay.down()
        send(3)  # (the sends wait for the re-connection, through the secondary)
        wait_for(lambda: client.get_service_info().service_url == pulsar_broker.service_url, backend)
        send(3)
        assert ports_used(client) == {pulsar_broker.port}
        primary_relay.up()
        wait_for(lambda: client.get_service_info().service_url == primary_relay.url, backend)
        wait_for(lambda: ports_used(client) == {primary_relay.port}, backend,
                 message=lambda: "connections on %s" % ports_used(client))
        send(3)
        received = set()  # (at least once: acknowledgements lost with a connection bring messages again)
        while received != set(sent):
            msg = consumer.receive(timeout_millis=int(WAIT * 1000))
            received.add(msg.data())
            consumer.acknowledge(msg)
        assert received == set(sent)
    finally:
        client.close()


def test_a_service_info_provider_switches_the_client(pulsar_broker, primary_relay, backend, pulsar_topic):
    class Provider(pulsar.ServiceInfoProvider):
        update = None
        closed = False

        def initial_service_info(self):
            return pulsar.ServiceInfo(primary_relay.url)

        def initialize(self, on_service_info_update):
            self.update = on_service_info_update

        def close(self):
            self.closed = True

    provider = Provider()
    client = patient_client(provider, backend)
    try:
        producer = client.create_producer(pulsar_topic)
        producer.send(b"before")
        assert ports_used(client) == {primary_relay.port}
        provider.update(pulsar.ServiceInfo(pulsar_broker.service_url))
        assert client.get_service_info().service_url == pulsar_broker.service_url
        wait_for(lambda: ports_used(client) == {pulsar_broker.port}, backend,
                 message=lambda: "connections on %s" % ports_used(client))
        producer.send(b"after")
    finally:
        client.close()
    assert provider.closed


def test_failover_arguments_are_checked_as_the_official_client_checks_them():
    primary = pulsar.ServiceInfo("pulsar://127.0.0.1:1")
    with pytest.raises(ValueError, match="at least one"):
        pulsar.AutoClusterFailover(primary, [])
    with pytest.raises(ValueError, match=r"secondary\[0\]"):
        pulsar.AutoClusterFailover(primary, ["pulsar://127.0.0.1:2"])
    with pytest.raises(ValueError, match="check_interval_ms"):
        pulsar.AutoClusterFailover(primary, [primary], check_interval_ms=0)
    failover = pulsar.AutoClusterFailover(primary, [primary])
    with pytest.raises(ValueError, match="authentication"):
        pulsar.Client(failover, authentication=pulsar.AuthenticationToken("t"))
    with pytest.raises(ValueError, match="tls_trust_certs_file_path"):
        pulsar.Client(failover, tls_trust_certs_file_path="/x")
    assert repr(failover).startswith("AutoClusterFailover(primary=ServiceInfo(")
