# Tests of the Pulsar test harness itself (tests/support/pulsar_broker.py): the session's real standalone
# broker answers its admin API, the admin helpers do what they say, and the official client
# (`pulsar-client`, requirements-dev.txt) round-trips messages through it.
from __future__ import annotations

import json
import socket
import time
import urllib.request

import pytest

from tests.support.pulsar_broker import PulsarAdminError, PulsarBroker, PulsarNotInstalled, require_pulsar_lib
from tests.support.pulsar_helpers import full, needs_official, official, official_client
from tests.support.servers import wait_until

# The first test asking for the broker pays for its start (about 4-6 s, up to 90 s allowed).
pytestmark = pytest.mark.timeout(150)

CLIENT_TIMEOUT_MS = 15_000


def _get_json(url: str):
    with urllib.request.urlopen(url, timeout=10) as resp:
        assert resp.status == 200
        return json.loads(resp.read())


def test_missing_jars_fail_with_the_install_command(tmp_path, monkeypatch):
    monkeypatch.setenv("PULSAR_LIB_DIR", str(tmp_path))
    with pytest.raises(PulsarNotInstalled) as info:
        require_pulsar_lib()
    assert "bash ci/install-pulsar.sh" in str(info.value)
    assert str(tmp_path) in str(info.value)
    with pytest.raises(PulsarNotInstalled):
        PulsarBroker().start()  # nothing spawned
    assert not PulsarBroker().running


def test_admin_api_lists_the_cluster(pulsar_broker):
    assert pulsar_broker.running
    assert pulsar_broker.service_url == f"pulsar://127.0.0.1:{pulsar_broker.port}"
    assert pulsar_broker.web_url == f"http://127.0.0.1:{pulsar_broker.web_port}"
    assert _get_json(pulsar_broker.web_url + "/admin/v2/clusters") == ["standalone"]
    assert "public/default" in _get_json(pulsar_broker.web_url + "/admin/v2/namespaces/public")
    # the binary port listens on loopback
    with socket.create_connection(("127.0.0.1", pulsar_broker.port), timeout=5):
        pass
    assert "PulsarStandaloneStarter" in pulsar_broker.log_tail(10**7)  # the log file holds the command line


def test_partitioned_topic_helpers(pulsar_broker, pulsar_topic):
    pulsar_broker.create_partitioned_topic(pulsar_topic, 3)
    url = f"{pulsar_broker.web_url}/admin/v2/persistent/public/default/{pulsar_topic}/partitions"
    assert _get_json(url)["partitions"] == 3  # 4.0 answers {"partitions": 3, "deleted": false}
    assert pulsar_broker.partitions(pulsar_topic) == 3
    stats = pulsar_broker.partitioned_stats(pulsar_topic)
    assert stats["metadata"]["partitions"] == 3

    pulsar_broker.delete_topic(pulsar_topic)
    with pytest.raises(PulsarAdminError) as info:
        pulsar_broker.partitions(pulsar_topic)
    assert info.value.status == 404
    pulsar_broker.delete_topic(pulsar_topic, missing_ok=True)
    with pytest.raises(PulsarAdminError):
        pulsar_broker.delete_topic(pulsar_topic)


@needs_official
def test_official_client_round_trip(pulsar_broker, pulsar_topic):
    client = official_client(pulsar_broker, connection_timeout_ms=10_000)
    try:
        consumer = client.subscribe(pulsar_topic, "smoke", consumer_type=official.ConsumerType.Shared)
        producer = client.create_producer(pulsar_topic, send_timeout_millis=CLIENT_TIMEOUT_MS)
        producer.send(b"hello pulsar", properties={"k": "v"})
        msg = consumer.receive(timeout_millis=CLIENT_TIMEOUT_MS)
        assert msg.data() == b"hello pulsar"
        assert msg.properties() == {"k": "v"}
        assert msg.topic_name() == full(pulsar_topic)
        consumer.acknowledge(msg)

        stats = pulsar_broker.topic_stats(pulsar_topic)
        assert stats["msgInCounter"] == 1
        assert "smoke" in stats["subscriptions"]
    finally:
        client.close()


@needs_official
def test_official_client_survives_an_unload_of_a_partitioned_topic(pulsar_broker, pulsar_topic):
    pulsar_broker.create_partitioned_topic(pulsar_topic, 2)
    client = official_client(pulsar_broker, connection_timeout_ms=10_000)
    try:
        consumer = client.subscribe(pulsar_topic, "smoke", consumer_type=official.ConsumerType.Shared)
        producer = client.create_producer(
            pulsar_topic, send_timeout_millis=CLIENT_TIMEOUT_MS, batching_enabled=False,
            message_routing_mode=official.PartitionsRoutingMode.RoundRobinDistribution,
        )
        sent = [f"m{i}".encode() for i in range(10)]
        for body in sent[:5]:
            producer.send(body)
        for i in range(2):
            pulsar_broker.unload_topic(f"{pulsar_topic}-partition-{i}")
        for body in sent[5:]:
            producer.send(body)  # the client reconnects after the unload

        # at least once: what the consumer had prefetched but not acked before the unload comes again
        got = set()
        deadline = time.monotonic() + 30
        while got != set(sent) and time.monotonic() < deadline:
            msg = consumer.receive(timeout_millis=CLIENT_TIMEOUT_MS)
            assert msg.data() in sent
            got.add(msg.data())
            consumer.acknowledge(msg)
        assert got == set(sent)

        stats = pulsar_broker.partitioned_stats(pulsar_topic)
        assert stats["metadata"]["partitions"] == 2
        assert set(stats["partitions"]) == {full(f"{pulsar_topic}-partition-{i}") for i in range(2)}
        # (the unload reset the counters: msgInCounter only counts what came after it)
        wait_until(
            lambda: pulsar_broker.partitioned_stats(pulsar_topic)["subscriptions"]["smoke"]["msgBacklog"] == 0,
            timeout=15, interval=0.1, message="acks did not reach the broker",
        )
    finally:
        client.close()
