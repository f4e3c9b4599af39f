# End-to-end encryption (pulsarfast.wire.crypto), side by side with the official client on the shared
# broker: what one client encrypts the other decrypts (batched or not, compressed or not); a consumer
# without the right private key, or without a key reader, does what crypto_failure_action says, the
# same with either client; the encryption contexts of a message are the same from either client; the
# argument checks and the error of an unreadable public key are the official ones.
#
# The official client blocks in C++: under gevent its part of a test runs through run_blocking, as a
# whole before or after pulsarfast's part, never interleaved.
from __future__ import annotations

import logging
import sys

import pytest

import pulsarfast as pulsar
from tests.support.pulsar_helpers import needs_official, official, official_session, send_all, send_outcomes
from tests.support.waiting import run_blocking, wait_for

cryptography = pytest.importorskip("cryptography")
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402

from tests.support.cryptokeys import rsa_pem_pair, write_pem_pair  # noqa: E402

pytestmark = [pytest.mark.timeout(120), needs_official]

RECEIVE_MS = 15_000
NOTHING_MS = 1_500  # (a consumer that must get nothing: how long it waits for it)
KEY = "app-key"


# ----------------------------------------------------------------------------- keys


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    """Key pairs in PEM files: "right" (what producers encrypt for), "wrong" (another RSA pair), "ec"."""
    directory = tmp_path_factory.mktemp("keys")
    return {
        "right": rsa_pem_pair(directory, "right"),
        "wrong": rsa_pem_pair(directory, "wrong"),
        "ec": write_pem_pair(directory, "ec", ec.generate_private_key(ec.SECP256R1())),
        "missing": (str(directory / "missing.pub.pem"), str(directory / "missing.pem")),
    }


def ours_reader(keys, which: str = "right"):
    return pulsar.CryptoKeyReader(*keys[which])


def official_reader(keys, which: str = "right"):
    return official.CryptoKeyReader(*keys[which])


def context_fields(message) -> tuple | None:
    """What either client's message.encryption_context() says, as a tuple (None: no context)."""
    context = message.encryption_context()
    if context is None:
        return None
    return (tuple((key.key, key.value, tuple(sorted(key.metadata.items()))) for key in context.keys()),
            context.param(), context.algorithm(), int(context.compression_type()),
            context.uncompressed_message_size(), context.batch_size(), context.is_decryption_failed())


def outcome(message) -> tuple:
    """(payload, properties, encryption context fields) of a message of either client."""
    return message.data(), dict(message.properties()), context_fields(message)


BODIES = [b"secret-%d " % i * 20 for i in range(4)]


def _send_mixed(client, topic: str, keys_reader, **kwargs) -> None:
    """One message on its own (compressed, with properties), then a batch of three: two entries. Either client."""
    producer = client.create_producer(topic, encryption_key=KEY, crypto_key_reader=keys_reader,
                                      compression_type=client_compression(client, "LZ4"), **kwargs)
    send_all(producer, [(BODIES[0], {"properties": {"n": "0"}})])
    producer.close()
    producer = client.create_producer(topic, encryption_key=KEY, crypto_key_reader=keys_reader,
                                      batching_enabled=True, batching_max_publish_delay_ms=60_000,
                                      batching_max_messages=3)
    send_all(producer, [(body, {"properties": {"n": str(i + 1)}}) for i, body in enumerate(BODIES[1:])])
    producer.close()


def client_compression(client, name: str):
    module = pulsar if isinstance(client, pulsar.Client) else official
    return getattr(module.CompressionType, name)


def _official_receive_all(broker, topic: str, subscription: str, count: int, **subscribe_kwargs) -> list:
    """Subscribe (from the earliest), receive count messages (acknowledged) and then nothing more:
    their outcomes. The official half of a test (blocks in C++)."""
    with official_session(broker) as client:
        consumer = client.subscribe(topic, subscription, initial_position=official.InitialPosition.Earliest,
                                    **subscribe_kwargs)
        got = []
        for _ in range(count):
            message = consumer.receive(RECEIVE_MS)
            got.append(outcome(message))
            consumer.acknowledge(message)
        with pytest.raises(official.Timeout):
            extra = consumer.receive(NOTHING_MS)
            pytest.fail("unexpected message %r" % (extra.data(),))
        consumer.close()
    return got


def _ours_receive_all(client, topic: str, subscription: str, count: int, **subscribe_kwargs) -> list:
    consumer = client.subscribe(topic, subscription, initial_position=pulsar.InitialPosition.Earliest,
                                **subscribe_kwargs)
    got = []
    for _ in range(count):
        message = consumer.receive(timeout_millis=RECEIVE_MS)
        got.append(outcome(message))
        consumer.acknowledge(message)
    with pytest.raises(pulsar.Timeout):
        extra = consumer.receive(timeout_millis=NOTHING_MS)
        pytest.fail("unexpected message %r" % (extra.data(),))
    consumer.close()
    return got


# ----------------------------------------------------------------------------- argument checks


@pytest.mark.parametrize("call, kwargs", [
    ("create_producer", {"encryption_key": 5}),
    ("create_producer", {"encryption_key": ["a"]}),
    ("create_producer", {"crypto_key_reader": "reader"}),
    ("subscribe", {"crypto_key_reader": object()}),
    ("create_reader", {"crypto_key_reader": 1}),
    ("subscribe", {"crypto_failure_action": 1}),
    ("create_reader", {"crypto_failure_action": "FAIL"}),
])
def test_argument_checks_are_the_official_ones(call, kwargs):
    def attempt(module):
        client = module.Client("pulsar://127.0.0.1:1")
        try:
            args = {"create_producer": ("t",), "subscribe": ("t", "s"),
                    "create_reader": ("t", module.MessageId.earliest)}[call]
            with pytest.raises(ValueError) as error:
                getattr(client, call)(*args, **kwargs)
            return str(error.value)
        finally:
            client.close()

    assert attempt(pulsar) == attempt(official)


def test_crypto_key_reader_checks_its_paths_as_the_official_one():
    with pytest.raises(ValueError) as ours:
        pulsar.CryptoKeyReader(1, "x")
    with pytest.raises(ValueError) as theirs:
        official.CryptoKeyReader(1, "x")
    assert str(ours.value) == str(theirs.value)


# ----------------------------------------------------------------------------- interoperability


@pytest.mark.parametrize("batching, compression", [(False, "NONE"), (False, "ZLib"), (True, "NONE"), (True, "LZ4")])
def test_pulsarfast_producer_official_consumer(client, pulsar_broker, pulsar_topic, backend, keys, batching,
                                               compression):
    bodies = [b"payload %d " % i * 30 for i in range(5)]
    producer = client.create_producer(pulsar_topic, encryption_key=KEY, crypto_key_reader=ours_reader(keys),
                                      batching_enabled=batching, batching_max_messages=len(bodies),
                                      batching_max_publish_delay_ms=60_000,
                                      compression_type=getattr(pulsar.CompressionType, compression))
    send_all(producer, [(body, {"properties": {"i": str(i)}}) for i, body in enumerate(bodies)])
    producer.close()
    got = run_blocking(backend, lambda: _official_receive_all(
        pulsar_broker, pulsar_topic, "official", len(bodies), crypto_key_reader=official_reader(keys)))
    assert [(data, props) for data, props, _ in got] == [(body, {"i": str(i)}) for i, body in enumerate(bodies)]
    for _, _, context in got:
        assert context is not None and context[0][0][0] == KEY and len(context[1]) == 12
        assert context[2] == "" and context[5] == (len(bodies) if batching else -1) and context[6] is False


@pytest.mark.parametrize("batching, compression", [(False, "NONE"), (False, "LZ4"), (True, "NONE"), (True, "ZLib")])
def test_official_producer_pulsarfast_consumer(client, pulsar_broker, pulsar_topic, backend, keys, batching,
                                               compression):
    bodies = [b"payload %d " % i * 30 for i in range(5)]

    def official_send():
        with official_session(pulsar_broker) as official_client:
            producer = official_client.create_producer(
                pulsar_topic, encryption_key=KEY, crypto_key_reader=official_reader(keys),
                batching_enabled=batching, batching_max_messages=len(bodies), batching_max_publish_delay_ms=60_000,
                compression_type=getattr(official.CompressionType, compression))
            send_all(producer, [(body, {"properties": {"i": str(i)}}) for i, body in enumerate(bodies)])
            producer.close()

    run_blocking(backend, official_send)
    got = _ours_receive_all(client, pulsar_topic, "ours", len(bodies), crypto_key_reader=ours_reader(keys))
    assert [(data, props) for data, props, _ in got] == [(body, {"i": str(i)}) for i, body in enumerate(bodies)]
    for _, _, context in got:
        assert context is not None and not context[6] and context[5] == (len(bodies) if batching else -1)


def test_encryption_contexts_are_the_same_from_either_client(client, pulsar_broker, pulsar_topic, backend, keys):
    _send_mixed(client, pulsar_topic, ours_reader(keys))
    ours = _ours_receive_all(client, pulsar_topic, "ours", len(BODIES), crypto_key_reader=ours_reader(keys))
    theirs = run_blocking(backend, lambda: _official_receive_all(
        pulsar_broker, pulsar_topic, "official", len(BODIES), crypto_key_reader=official_reader(keys)))
    assert ours == theirs
    assert [data for data, _, _ in ours] == BODIES
    (keys_0, _, _, compression_0, size_0, batch_0, failed_0) = ours[0][2]
    assert (compression_0, size_0, batch_0, failed_0) == (int(pulsar.CompressionType.LZ4), len(BODIES[0]), -1, False)
    assert ours[1][2][5] == 3 and ours[1][2][1] == ours[3][2][1]  # (a batch: one IV)
    assert ours[0][2][1] != ours[1][2][1]


def test_unencrypted_messages_have_no_context(client, pulsar_topic, keys):
    send_all(client.create_producer(pulsar_topic), [b"plain"])
    assert _ours_receive_all(client, pulsar_topic, "s", 1, crypto_key_reader=ours_reader(keys)) == [
        (b"plain", {}, None)]


def test_a_reader_decrypts(client, pulsar_topic, keys):
    _send_mixed(client, pulsar_topic, ours_reader(keys))
    reader = client.create_reader(pulsar_topic, pulsar.MessageId.earliest, crypto_key_reader=ours_reader(keys))
    assert [reader.read_next(RECEIVE_MS).data() for _ in BODIES] == BODIES
    reader.close()


# ----------------------------------------------------------------------------- failures to decrypt


def _official_failure(broker, topic: str, subscription: str, subscribe_kwargs: dict, expected: int) -> list:
    """The official consumer's messages (expected of them, then nothing more), not acknowledged."""
    with official_session(broker) as client:
        consumer = client.subscribe(topic, subscription, initial_position=official.InitialPosition.Earliest,
                                    **subscribe_kwargs)
        got = [outcome(consumer.receive(RECEIVE_MS)) for _ in range(expected)]
        with pytest.raises(official.Timeout):
            extra = consumer.receive(NOTHING_MS)
            pytest.fail("unexpected message %r" % (extra.data(),))
        consumer.close()
    return got


@pytest.mark.parametrize("reader", ["wrong", None])
@pytest.mark.parametrize("action", ["FAIL", "DISCARD", "CONSUME"])
def test_failure_actions_are_the_official_ones(client, pulsar_broker, pulsar_topic, backend, keys, action, reader):
    expected = 2 if action == "CONSUME" else 0  # (CONSUME: the batch comes as one message, still encrypted)
    _send_mixed(client, pulsar_topic, ours_reader(keys))

    ours_kwargs: dict = {"crypto_failure_action": getattr(pulsar.ConsumerCryptoFailureAction, action)}
    theirs_kwargs: dict = {"crypto_failure_action": getattr(official.ConsumerCryptoFailureAction, action)}
    if reader is not None:
        ours_kwargs["crypto_key_reader"] = ours_reader(keys, reader)
        theirs_kwargs["crypto_key_reader"] = official_reader(keys, reader)

    consumer = client.subscribe(pulsar_topic, "ours", initial_position=pulsar.InitialPosition.Earliest,
                                **ours_kwargs)
    ours = [outcome(consumer.receive(timeout_millis=RECEIVE_MS)) for _ in range(expected)]
    with pytest.raises(pulsar.Timeout):
        extra = consumer.receive(timeout_millis=NOTHING_MS)
        pytest.fail("unexpected message %r" % (extra.data(),))
    consumer.close()
    theirs = run_blocking(backend, _official_failure, pulsar_broker, pulsar_topic, "official", theirs_kwargs,
                          expected)
    assert ours == theirs
    for data, props, context in ours:
        assert data not in BODIES and context is not None and context[6] is True

    # what each subscription still holds, read again with the right key: everything under FAIL and
    # CONSUME (nothing was acknowledged), nothing under DISCARD
    left = [] if action == "DISCARD" else BODIES
    theirs_left = run_blocking(backend, lambda: _official_receive_all(
        pulsar_broker, pulsar_topic, "official", len(left), crypto_key_reader=official_reader(keys)))
    ours_left = _ours_receive_all(client, pulsar_topic, "ours", len(left), crypto_key_reader=ours_reader(keys))
    assert [data for data, _, _ in theirs_left] == [data for data, _, _ in ours_left] == left


def test_a_message_failed_under_fail_comes_again_after_the_unacked_timeout(client, pulsar_topic, backend, keys,
                                                                            caplog):
    """As the C++ client puts it in its unacked tracker: with a timeout it is asked for again (and
    decrypted again), each time refused again with the wrong key; nothing is acknowledged."""
    producer = client.create_producer(pulsar_topic, encryption_key=KEY, crypto_key_reader=ours_reader(keys),
                                      batching_enabled=False)
    consumer = client.subscribe(pulsar_topic, "again", crypto_key_reader=ours_reader(keys, "wrong"),
                                unacked_messages_timeout_ms=1000, initial_position=pulsar.InitialPosition.Earliest)
    producer.send(b"secret")

    def refusals():
        return sum("crypto_failure_action FAIL" in record.getMessage() for record in caplog.records)

    with caplog.at_level(logging.ERROR, logger="pulsarfast"):
        wait_for(lambda: refusals() >= 2, backend, timeout=15, message="the message delivered (and refused) again")
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=NOTHING_MS)


# ----------------------------------------------------------------------------- keys that cannot be used


@pytest.mark.parametrize("which", ["missing", "ec"])
def test_an_unusable_public_key_fails_each_send_as_with_the_official_client(client, pulsar_broker, pulsar_topic,
                                                                            backend, keys, which, caplog):
    def official_attempt():
        with official_session(pulsar_broker) as official_client:
            producer = official_client.create_producer(pulsar_topic, encryption_key=KEY,
                                                       crypto_key_reader=official_reader(keys, which))
            with pytest.raises(official.CryptoError):
                producer.send(b"never")
            result = send_outcomes(producer, [b"never"])[0][0]
            producer.close()
            return result.name

    official_result = run_blocking(backend, official_attempt)
    with caplog.at_level(logging.ERROR, logger="pulsarfast"):
        producer = client.create_producer(pulsar_topic, encryption_key=KEY, crypto_key_reader=ours_reader(keys, which))
    assert KEY in caplog.text  # (the failure to read the key is logged at create)
    with pytest.raises(pulsar.CryptoError) as error:
        producer.send(b"never")
    assert KEY in str(error.value)
    assert send_outcomes(producer, [b"never"])[0][0].name == official_result == "CryptoError"
    batching = client.create_producer(pulsar_topic, encryption_key=KEY, crypto_key_reader=ours_reader(keys, which),
                                      batching_enabled=True)
    with pytest.raises(pulsar.CryptoError):
        batching.send(b"never")
    batching.close()
    producer.close()
    # nothing reached the topic
    assert run_blocking(backend, pulsar_broker.topic_stats, pulsar_topic)["msgInCounter"] == 0


def test_encryption_takes_a_key_name_and_a_key_reader_as_with_the_official_client(client, pulsar_topic, keys):
    """A key name without a reader, or a reader without a key name, sends unencrypted (the official client does)."""
    send_all(client.create_producer(pulsar_topic, encryption_key=KEY), [b"one"])
    send_all(client.create_producer(pulsar_topic, crypto_key_reader=ours_reader(keys)), [b"two"])
    assert _ours_receive_all(client, pulsar_topic, "s", 2) == [(b"one", {}, None), (b"two", {}, None)]


def test_keys_are_never_logged(client, pulsar_topic, keys, caplog):
    with open(keys["right"][1], "rb") as file:
        private_pem = file.read()
    with caplog.at_level(logging.DEBUG, logger="pulsarfast"):
        _send_mixed(client, pulsar_topic, ours_reader(keys))
        _ours_receive_all(client, pulsar_topic, "right", len(BODIES), crypto_key_reader=ours_reader(keys))
        _ours_receive_all(client, pulsar_topic, "wrong", 0, crypto_key_reader=ours_reader(keys, "wrong"))
    assert "BEGIN" not in caplog.text and private_pem[40:80].decode() not in caplog.text


def test_without_the_cryptography_library_encryption_names_its_extra(monkeypatch, keys):
    monkeypatch.setitem(sys.modules, "cryptography.hazmat.primitives.ciphers.aead", None)  # (import fails)
    client = pulsar.Client("pulsar://127.0.0.1:1")
    try:
        with pytest.raises(ImportError, match=r"nsqfast\[encryption\]"):
            client.create_producer("t", encryption_key=KEY, crypto_key_reader=ours_reader(keys))
        with pytest.raises(ImportError, match=r"nsqfast\[encryption\]"):
            client.subscribe("t", "s", crypto_key_reader=ours_reader(keys))
    finally:
        client.close()
