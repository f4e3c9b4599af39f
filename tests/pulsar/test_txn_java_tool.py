"""The transaction test infrastructure, proved with the Java client alone: the run's transaction broker
(``txn_broker``), a broker of a test's own that restarts (``private_txn_broker``), moving the coordinator
(``unload_coordinator``), and the Java tool (tests/support/java_txn.py: ``run_java_txn``,
``HeldTransaction``). The reference behaviour later tests hold pulsarfast's transactions to: messages
produced in a transaction are invisible to consumers (the Java client's and the official Python
client's, which read committed data only) until it commits, and never visible once it aborts;
acknowledgements made in a transaction count only once it commits.

Every Java command is a JVM of its own (about 1.5 s): these tests take several seconds each.
"""
from __future__ import annotations

import pulsar
import pytest

from tests.support.java_txn import HeldTransaction, messages, run_java_txn
from tests.support.pulsar_broker import PulsarAdminError
from tests.support.waiting import wait_for

pytestmark = pytest.mark.slow

#: how long a consumer waits for one more message before it says there is none
IDLE_MS = 1000
N = 5


def _expected(prefix: str, n: int = N) -> list[str]:
    return ["%s-%d" % (prefix, i) for i in range(n)]


def _java_consume(broker, topic: str, subscription: str) -> list[str]:
    lines = run_java_txn(["consume", broker.service_url, topic, subscription, IDLE_MS])
    assert lines[-1] == {"received": len(messages(lines))}
    return messages(lines)


def _official_receive_all(consumer, expected_count: int) -> list[str]:
    """What an official-client consumer receives: ``expected_count`` messages (15 s each at most), then
    nothing more within IDLE_MS."""
    values: list[str] = []
    for _ in range(expected_count):
        msg = consumer.receive(timeout_millis=15000)
        values.append(msg.data().decode())
        consumer.acknowledge(msg)
    return values + _official_drain(consumer)


def _official_drain(consumer) -> list[str]:
    values: list[str] = []
    while True:
        try:
            msg = consumer.receive(timeout_millis=IDLE_MS)
        except pulsar.Timeout:
            return values
        values.append(msg.data().decode())
        consumer.acknowledge(msg)


@pytest.fixture
def official_client(txn_broker):
    client = pulsar.Client(txn_broker.service_url, operation_timeout_seconds=15)
    yield client
    client.close()


def test_txn_broker_has_a_ready_coordinator(txn_broker):
    assert txn_broker.coordinator_count() == 1
    stats = txn_broker.coordinator_stats()
    assert stats[0]["state"] == "Ready"


def test_java_produce_in_held_txn_invisible_to_java_consumer_until_commit(txn_broker, pulsar_topic):
    topic = txn_broker.topic_name(pulsar_topic)
    with HeldTransaction(["produce", txn_broker.service_url, topic, N, "m", "hold"]) as held:
        assert held.opened["sent"] == N
        assert len(held.opened["ids"]) == N
        metadata = txn_broker.transaction_metadata(*held.txn_id)
        assert metadata["status"] == "OPEN"
        assert _java_consume(txn_broker, topic, "sub") == []
        assert held.commit() == {"outcome": "committed", "state": "COMMITTED"}
    assert _java_consume(txn_broker, topic, "sub") == _expected("m")


def test_java_produce_in_aborted_txn_never_visible_to_java_consumer(txn_broker, pulsar_topic):
    topic = txn_broker.topic_name(pulsar_topic)
    with HeldTransaction(["produce", txn_broker.service_url, topic, N, "aborted", "hold"]) as held:
        assert held.abort() == {"outcome": "aborted", "state": "ABORTED"}
    # a committed transaction after it: what the consumer gets is all of that one and nothing aborted
    run_java_txn(["produce", txn_broker.service_url, topic, N, "committed", "commit"])
    assert _java_consume(txn_broker, topic, "sub") == _expected("committed")


def test_java_produce_in_held_txn_invisible_to_official_client_until_commit(txn_broker, official_client,
                                                                             pulsar_topic):
    topic = txn_broker.topic_name(pulsar_topic)
    consumer = official_client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    with HeldTransaction(["produce", txn_broker.service_url, topic, N, "m", "hold"]) as held:
        assert _official_drain(consumer) == []
        held.commit()
    assert _official_receive_all(consumer, N) == _expected("m")


def test_java_produce_in_aborted_txn_never_visible_to_official_client(txn_broker, official_client, pulsar_topic):
    topic = txn_broker.topic_name(pulsar_topic)
    consumer = official_client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    with HeldTransaction(["produce", txn_broker.service_url, topic, N, "aborted", "hold"]) as held:
        held.abort()
    run_java_txn(["produce", txn_broker.service_url, topic, N, "committed", "commit"])
    assert _official_receive_all(consumer, N) == _expected("committed")


def test_java_acks_in_txn_count_only_once_committed(txn_broker, pulsar_topic):
    topic = txn_broker.topic_name(pulsar_topic)
    run_java_txn(["produce", txn_broker.service_url, topic, N, "m", "commit"])

    def backlog() -> int:
        return int(txn_broker.topic_stats(pulsar_topic)["subscriptions"]["sub"]["msgBacklog"])

    # (sorted: the subject is which messages an acknowledgement covers, not their order, which a
    # redelivery under load can change: a consumer that reconnects gets its unacknowledged ones again)
    aborted = run_java_txn(["consume-txn-ack", txn_broker.service_url, topic, "sub", N, "abort"])
    assert sorted(messages(aborted)) == _expected("m")
    assert aborted[-1]["outcome"] == "aborted"
    assert backlog() == N
    committed = run_java_txn(["consume-txn-ack", txn_broker.service_url, topic, "sub", N, "commit"])
    assert sorted(messages(committed)) == _expected("m")  # (the aborted acknowledgements left them to be redelivered)
    assert committed[-1]["outcome"] == "committed"
    wait_for(lambda: backlog() == 0, "threads", timeout=15, message=lambda: "backlog 0 (is %d)" % backlog())


@pytest.mark.timeout(240)  # (five JVMs, one after another: a loaded machine took the default 60 s)
def test_txn_begun_written_and_committed_by_three_java_processes(txn_broker, pulsar_topic):
    topic = txn_broker.topic_name(pulsar_topic)
    begun = run_java_txn(["new-txn", txn_broker.service_url, 600000])  # (its timeout far past the five JVMs)
    most, least = begun[0]["txn"]
    assert run_java_txn(["produce-in", txn_broker.service_url, most, least, topic, N, "m"]) == [{"sent": N}]
    assert txn_broker.transaction_metadata(most, least)["status"] == "OPEN"
    assert _java_consume(txn_broker, topic, "sub") == []
    ended = run_java_txn(["commit", txn_broker.service_url, most, least])
    assert ended == [{"txn": [most, least], "outcome": "committed"}]
    assert _java_consume(txn_broker, topic, "sub") == _expected("m")


@pytest.mark.timeout(240)
def test_unloaded_coordinator_is_reloaded_and_held_txn_commits(private_txn_broker, pulsar_topic):
    broker = private_txn_broker
    topic = broker.topic_name(pulsar_topic)
    with HeldTransaction(["produce", broker.service_url, topic, N, "m", "hold"]) as held:
        assert broker.unload_coordinator() == [0]
        with pytest.raises(PulsarAdminError) as raised:  # not loaded until a client connects to it again
            broker.coordinator_stats()
        assert "Transaction coordinator not found" in raised.value.body
        assert held.commit()["outcome"] == "committed"  # (the Java client connects to it again)
    assert broker.coordinator_stats()[0]["state"] == "Ready"
    assert _java_consume(broker, topic, "sub") == _expected("m")


@pytest.mark.timeout(240)
def test_crashed_txn_broker_restarts_with_open_txn_and_commits_it(private_txn_broker, pulsar_topic):
    broker = private_txn_broker
    topic = broker.topic_name(pulsar_topic)
    ports = (broker.port, broker.web_port)
    # (a timeout far past the restart: a slow one on a loaded machine took the default 60 s, and the
    # coordinator aborted the transaction before the checks below)
    opened = run_java_txn(["produce", broker.service_url, topic, N, "m", "open", "--txn-timeout-ms", "600000"])
    most, least = opened[0]["txn"]
    broker.kill(keep_data=True)  # (SIGKILL: the coordinator recovers from its log, not from a clean close)
    broker.start()
    assert (broker.port, broker.web_port) == ports
    assert broker.restarts == 1
    assert broker.coordinator_stats()[0]["ongoingTxnSize"] == 1  # (recovered from the coordinator's log)
    assert _java_consume(broker, topic, "sub") == []
    assert broker.transaction_metadata(most, least)["status"] == "OPEN"
    assert run_java_txn(["commit", broker.service_url, most, least])[-1]["outcome"] == "committed"
    assert _java_consume(broker, topic, "sub") == _expected("m")
