# Broker-side deduplication with batching, against the run's real broker: a
# producer named "x" sends 200 messages with explicit sequence ids 1..200 in
# batches of 50, is closed, and a new producer of the same name sends the same
# 200 again, batched the same way or in batches of 30 (what a client does
# when it is unsure whether its sends were stored). On a namespace with
# deduplication on, the topic then holds 200 messages, each once: the broker
# drops every resent batch whole. Resent in other batches, that needs each
# batch's SEND to carry its last sequence id as highest_sequence_id
# (pulsarfast.producing.producer._close_batch_locked): without it the batch 181..200 is
# stored again. pulsarfast on both backends; the official client
# (pulsar-client) with the same steps on the same broker gives the same
# outcome, but for the batches of 30, where it stores 181..200 again (it
# writes no highest_sequence_id): a known difference, tested as such.
#
# The official client blocks in C++: its tests take no backend and never run
# pulsarfast or gevent. Every wait is bounded: the sends by send_timeout_millis
# (flush), the reads by READ_MS, the broker's answers by the clients'
# operation timeouts and the admin calls' HTTP timeout.
from __future__ import annotations

import uuid

import pytest

import pulsarfast
from tests.support.pulsar_helpers import official_client, send_outcomes
from tests.support.waiting import run_blocking, wait_for

official = pytest.importorskip(
    "pulsar", reason="the official `pulsar-client` wheel is not installed (pip install -r requirements-dev.txt)"
)

# The first test asking for the broker pays for its start (about 4-6 s).
pytestmark = pytest.mark.timeout(150)

COUNT = 200
BATCH = 50
SEQUENCE_IDS = range(1, COUNT + 1)
READ_MS = 10_000
PRODUCER_KWARGS = dict(
    producer_name="x",
    batching_enabled=True,
    batching_max_messages=BATCH,
    batching_max_publish_delay_ms=60_000,  # (long: only a full batch, or flush(), sends one)
    block_if_queue_full=True,
    max_pending_messages=1000,
    send_timeout_millis=30_000,  # (bounds flush())
)


def _deduplicating_topic(broker) -> tuple[str, str]:
    """A new namespace of public with deduplication on, and the full name of a topic in it (not made
    yet); returns (full topic name, its admin path)."""
    namespace = "public/dedup-" + uuid.uuid4().hex[:10]
    broker.admin("PUT", "/admin/v2/namespaces/" + namespace, {})
    broker.admin("POST", "/admin/v2/namespaces/%s/deduplication" % namespace, True)
    assert broker.admin("GET", "/admin/v2/namespaces/%s/deduplication" % namespace) is True
    short = "t-" + uuid.uuid4().hex[:8]
    return "persistent://%s/%s" % (namespace, short), "/admin/v2/persistent/%s/%s" % (namespace, short)


def _messages() -> list:
    return [(b"m-%d" % i, {"sequence_id": i}) for i in SEQUENCE_IDS]


def _send_round(client, topic: str, admin_path: str, broker, backend, batch: int = BATCH) -> list:
    """One producer "x": the 200 messages with their sequence ids, in batches of batch, then flush
    and close; [(result, message id)] in send order. The broker's deduplication is confirmed on the
    topic before the first send."""
    producer = client.create_producer(topic, **{**PRODUCER_KWARGS, "batching_max_messages": batch})
    try:
        wait_for(lambda: _stats(broker, backend, admin_path).get("deduplicationStatus") == "Enabled", backend,
                 timeout=15, message="the topic's deduplication to be enabled")
        outcomes = send_outcomes(producer, _messages())
    finally:
        producer.close()
    return outcomes


def _stats(broker, backend, admin_path: str) -> dict:
    return run_blocking(backend, broker.admin, "GET", admin_path + "/stats")


def _internal_stats(broker, backend, admin_path: str) -> dict:
    return run_blocking(backend, broker.admin, "GET", admin_path + "/internalStats")


def _read_all(client, topic: str, message_id_class) -> list:
    """Every message of the topic, read from the earliest with a reader until the broker has no
    more: the messages."""
    reader = client.create_reader(topic, message_id_class.earliest)
    try:
        got = []
        while reader.has_message_available():
            message = reader.read_next(timeout_millis=READ_MS)
            got.append(message)
            assert len(got) <= 2 * COUNT, "the reader does not stop"
        return got
    finally:
        reader.close()


def _check(outcomes_first, outcomes_again, got, stats, internal, ok, extra=()) -> None:
    """Both rounds succeeded (a dropped duplicate is no error), and the topic holds the first round's
    200 messages once each, in order, in its 4 entries, followed by extra (a resent batch stored again)."""
    assert [result for result, _ in outcomes_first] == [ok] * COUNT
    assert [result for result, _ in outcomes_again] == [ok] * COUNT
    assert [m.data() for m in got] == [b"m-%d" % i for i in SEQUENCE_IDS] + [b"m-%d" % i for i in extra]
    assert {m.producer_name() for m in got} == {"x"}
    assert stats["deduplicationStatus"] == "Enabled"
    assert stats["msgInCounter"] == 2 * COUNT  # (the broker got both rounds, and counts what it dropped)
    assert stats["storageSize"] == internal["totalSize"]
    assert internal["numberOfEntries"] == COUNT // BATCH + (1 if extra else 0)


# The resend batched as the first round (50), or otherwise (30: its last batch, 181..200, starts after
# the first round's last batch's first id, 151, and is a duplicate only by that batch's highest id).
AGAIN_BATCHES = pytest.mark.parametrize("again_batch", [BATCH, 30], ids=["same-batches", "other-batches"])


@AGAIN_BATCHES
def test_deduplication_drops_a_resent_batched_round_pulsarfast(make_client, pulsar_broker, backend, again_batch):
    topic, admin_path = _deduplicating_topic(pulsar_broker)
    client = make_client()
    first = _send_round(client, topic, admin_path, pulsar_broker, backend)
    assert len({(m.ledger_id(), m.entry_id()) for _, m in first}) == COUNT // BATCH  # batched: 4 entries
    again = _send_round(client, topic, admin_path, pulsar_broker, backend, again_batch)
    got = _read_all(client, topic, pulsarfast.MessageId)
    _check(first, again, got, _stats(pulsar_broker, backend, admin_path),
           _internal_stats(pulsar_broker, backend, admin_path), pulsarfast.Result.Ok)
    assert [m.sequence_id() for m in got] == list(SEQUENCE_IDS)  # (the official Message has no sequence_id())


def _official_steps(broker, topic: str, admin_path: str, again_batch: int):
    client = official_client(broker)
    try:
        first = _send_round(client, topic, admin_path, broker, "threads")
        again = _send_round(client, topic, admin_path, broker, "threads", again_batch)
        got = _read_all(client, topic, official.MessageId)
    finally:
        client.close()
    return first, again, got


def test_deduplication_drops_a_resent_batched_round_official_client(pulsar_broker):
    topic, admin_path = _deduplicating_topic(pulsar_broker)
    first, again, got = _official_steps(pulsar_broker, topic, admin_path, BATCH)
    assert len({(m.ledger_id(), m.entry_id()) for _, m in first}) == COUNT // BATCH  # batched: 4 entries
    _check(first, again, got, _stats(pulsar_broker, "threads", admin_path),
           _internal_stats(pulsar_broker, "threads", admin_path), official.Result.Ok)


def test_official_client_resent_in_other_batches_stores_the_last_batch_again(pulsar_broker):
    """A known difference, in pulsarfast's favour: the official client (pulsar-client 3.13, its C++
    library) writes no highest_sequence_id in a batch's SEND, so the broker takes each batch for its
    first sequence id. Resent in batches of 30, the last one (181..200) starts after 151, the last
    id the broker recorded for "x", and is stored again; pulsarfast (as the Java client) drops it."""
    topic, admin_path = _deduplicating_topic(pulsar_broker)
    first, again, got = _official_steps(pulsar_broker, topic, admin_path, 30)
    _check(first, again, got, _stats(pulsar_broker, "threads", admin_path),
           _internal_stats(pulsar_broker, "threads", admin_path), official.Result.Ok, extra=range(181, COUNT + 1))
