# The official names of issue 32's second part, server-less: pulsar.functions, pulsar.exceptions, the
# extension's policies, MessageBatch, the crypto names, _pulsar's configurations and MessageBuilder. Each
# is compared with the official module where it is cheap (the same call on both).
from __future__ import annotations

import datetime
import inspect
import pickle

import pytest

import pulsarfast
import pulsarfast._pulsar as fast_pulsar
from pulsarfast.wire import codec, proto

official = pytest.importorskip(
    "pulsar", reason="the official `pulsar-client` wheel is not installed (pip install -r requirements-dev.txt)"
)
import _pulsar as official_pulsar  # noqa: E402 - the official C extension (after the official wheel's skip)
import pulsar.exceptions  # noqa: E402,F401
import pulsar.functions.serde  # noqa: E402,F401

pytestmark = pytest.mark.timeout(60)

NOWHERE = "pulsar://127.0.0.1:1"
NOT_YET = {"Callable", "List", "Optional", "Tuple", "Union", "logging", "re",
           "timedelta"}  # what the official module imports for itself
NOT_YET_PULSAR: set[str] = set()


def outcome(call):
    try:
        result = call()
    except Exception as exc:  # noqa: BLE001 - what is raised is what is compared
        return type(exc).__name__, str(exc)
    return "ok", result


def kinds(make):
    """(outcome kind, value or None for exceptions) on both: the exception types must agree, not the texts."""
    results = []
    for module, raw in ((official, official_pulsar), (pulsarfast, fast_pulsar)):
        kind, value = outcome(lambda: make(module, raw))
        results.append((kind, value if kind == "ok" else None))
    return results


# ----------------------------------------------------------------------------- every name


def test_every_official_name_is_here():
    assert [name for name in dir(official) if not name.startswith("_") and name not in NOT_YET
            and not hasattr(pulsarfast, name)] == []
    assert [name for name in dir(official_pulsar) if not name.startswith("_") and name not in NOT_YET_PULSAR
            and not hasattr(fast_pulsar, name)] == []


def test_exceptions_module():
    from pulsarfast.exceptions import Timeout
    assert Timeout is pulsarfast.Timeout is fast_pulsar.Timeout
    assert sorted(official.exceptions.__dict__.keys() - {"__builtins__", "__cached__", "__doc__", "__file__",
                                                         "__loader__", "__name__", "__package__", "__spec__"}) \
        == sorted(pulsarfast.exceptions.__all__)
    for name in pulsarfast.exceptions.__all__:
        assert getattr(pulsarfast.exceptions, name) is getattr(pulsarfast, name)


# ----------------------------------------------------------------------------- functions


@pytest.mark.parametrize("name", ["Function", "Context", "SerDe", "PickleSerDe", "IdentitySerDe"])
def test_functions_classes(name):
    theirs, ours = getattr(official, name), getattr(pulsarfast, name)
    assert ours is getattr(pulsarfast.functions, name)
    methods = sorted(key for key in dir(theirs) if not key.startswith("_"))
    assert sorted(key for key in dir(ours) if not key.startswith("_")) == methods
    for method in methods:
        assert list(inspect.signature(getattr(ours, method)).parameters.items()).__len__() == \
            len(inspect.signature(getattr(theirs, method)).parameters)
        assert [(p.name, p.default) for p in inspect.signature(getattr(ours, method)).parameters.values()] == \
            [(p.name, p.default) for p in inspect.signature(getattr(theirs, method)).parameters.values()]


def test_function_subclass_runs():
    for pulsar in (official, pulsarfast):
        class Exclaim(pulsar.Function):
            def process(self, input, context):
                return input + "!"

        assert Exclaim().process("hi", None) == "hi!"
        assert pulsar.Function().process("x", None) is None
        assert pulsar.Context().get_message_id() is None


@pytest.mark.parametrize("value", [5, 2.5, 1j, "text", b"\xff\x00", "12", b"3.5"])
def test_identity_serde(value):
    theirs, ours = official.IdentitySerDe(), pulsarfast.IdentitySerDe()
    assert ours.serialize(value) == theirs.serialize(value)
    data = theirs.serialize(value)
    assert ours.deserialize(data) == theirs.deserialize(data)
    assert type(ours.deserialize(data)) is type(theirs.deserialize(data))


def test_serde_refusals_and_pickle():
    for pulsar in (official, pulsarfast):
        with pytest.raises(TypeError):
            pulsar.IdentitySerDe().serialize([1])
        serde = pulsar.PickleSerDe()
        assert serde.deserialize(serde.serialize({"a": [1, 2]})) == {"a": [1, 2]}
        assert pickle.loads(serde.serialize(3)) == 3


# ----------------------------------------------------------------------------- policies


def test_policies_are_shared_with_pulsar_module():
    for name in ("BatchReceivePolicy", "KeySharedPolicy", "DeadLetterPolicyBuilder"):
        assert getattr(official, name) is getattr(official_pulsar, name)
        assert getattr(pulsarfast, name) is getattr(fast_pulsar, name)


@pytest.mark.parametrize("make", [
    lambda p, r: (lambda b: (b.getMaxNumMessages(), b.getMaxNumBytes(), b.getTimeoutMs()))(
        r.BatchReceivePolicy(1, 2, 3)),
    lambda p, r: (lambda b: (b.getMaxNumMessages(), b.getMaxNumBytes()))(r.BatchReceivePolicy(-1, -1, 5)),
    lambda p, r: r.BatchReceivePolicy(0, 0, 0),
    lambda p, r: r.BatchReceivePolicy(1, 2),
    lambda p, r: r.BatchReceivePolicy(1.5, 2, 3),
    lambda p, r: (lambda k: (k.get_key_shared_mode().name, k.is_allow_out_of_order_delivery(),
                             k.get_sticky_ranges()))(r.KeySharedPolicy()),
    lambda p, r: r.KeySharedPolicy().set_key_shared_mode(r.KeySharedMode.Sticky).get_key_shared_mode().name,
    lambda p, r: r.KeySharedPolicy().set_key_shared_mode(1),
    lambda p, r: r.KeySharedPolicy().set_sticky_ranges([(0, 10), (5, 20)]),
    lambda p, r: r.KeySharedPolicy().set_sticky_ranges([(0, 70000)]),
    lambda p, r: r.KeySharedPolicy().set_sticky_ranges([]),
    lambda p, r: r.KeySharedPolicy().set_sticky_ranges([(10, 0)]).get_sticky_ranges(),
    lambda p, r: r.KeySharedPolicy().set_sticky_ranges([(0, 10)]).set_sticky_ranges([(5, 20)]).get_sticky_ranges(),
    lambda p, r: r.KeySharedPolicy().set_sticky_ranges("ab"),
    lambda p, r: r.KeySharedPolicy().set_allow_out_of_order_delivery(1).is_allow_out_of_order_delivery(),
    lambda p, r: r.KeySharedPolicy().set_allow_out_of_order_delivery(None).is_allow_out_of_order_delivery(),
    lambda p, r: (lambda d: (d.getMaxRedeliverCount(), d.getDeadLetterTopic(), d.getInitialSubscriptionName()))(
        r.DeadLetterPolicyBuilder().build()),
    lambda p, r: (lambda d: (d.getMaxRedeliverCount(), d.getDeadLetterTopic(), d.getInitialSubscriptionName()))(
        r.DeadLetterPolicyBuilder().maxRedeliverCount(3).deadLetterTopic("t").initialSubscriptionName("s").build()),
    lambda p, r: type(r.DeadLetterPolicyBuilder().maxRedeliverCount(0)).__name__,
    lambda p, r: r.DeadLetterPolicyBuilder().maxRedeliverCount(0).build(),
    lambda p, r: r.DeadLetterPolicyBuilder().maxRedeliverCount("x"),
    lambda p, r: r.DeadLetterPolicyBuilder().maxRedeliverCount(2 ** 40),
    lambda p, r: r.DeadLetterPolicyBuilder().deadLetterTopic(5),
    lambda p, r: (lambda b: b.maxRedeliverCount(1) is b)(r.DeadLetterPolicyBuilder()),
], ids=["batch-getters", "batch-defaults", "batch-all-zero", "batch-two-args", "batch-float", "key-defaults",
        "key-mode", "key-mode-int", "key-overlap", "key-bounds", "key-empty", "key-reversed", "key-ranges-added",
        "key-ranges-str", "key-order-int", "key-order-none", "dlq-defaults", "dlq-set", "dlq-setter-takes-zero",
        "dlq-build-zero", "dlq-count-str", "dlq-count-big", "dlq-topic-int", "dlq-chains"])
def test_raw_policies(make):
    theirs, ours = kinds(make)
    assert ours == theirs


def test_subscribe_refuses_raw_policies():
    for pulsar in (official, pulsarfast):
        client = pulsar.Client(NOWHERE, **({"backend": "threads"} if pulsar is pulsarfast else {}))
        try:
            with pytest.raises(ValueError, match="ConsumerBatchReceivePolicy"):
                client.subscribe("t", "s", batch_receive_policy=pulsar.BatchReceivePolicy(1, 2, 3))
            with pytest.raises(ValueError, match="ConsumerKeySharedPolicy"):
                client.subscribe("t", "s", key_shared_policy=pulsar.KeySharedPolicy())
        finally:
            client.close()


# ----------------------------------------------------------------------------- MessageBatch


def _batch_payload():
    bodies = [b"a", b"bb", b"ccc"]
    return b"".join(codec.encode_batch_entry(proto.single_message_metadata(
        len(body), {"k": "v"} if i == 0 else None, "pk" if i == 1 else None, 5 if i == 2 else 0, i,
        b"ok" if i == 1 else None), body) for i, body in enumerate(bodies))


def _describe(messages):
    return [(m.data(), m.properties(), m.partition_key(), m.ordering_key(), m.event_timestamp(), str(m.message_id()),
             m.topic_name(), m.publish_timestamp(), m.redelivery_count(), m.producer_name()) for m in messages]


@pytest.mark.parametrize("with_id", [True, False])
@pytest.mark.parametrize("count", [3, 2, 0])
def test_message_batch(with_id, count):
    payload = _batch_payload()
    results = []
    for pulsar in (official, pulsarfast):
        batch = pulsar.MessageBatch()
        if with_id:
            assert batch.with_message_id(pulsar.MessageId(1, 10, 20, -1)) is batch
        results.append(_describe(batch.parse_from(payload, count)))
    assert results[1] == results[0]
    raw = fast_pulsar.MessageBatch().parse_from(bytearray(payload), 3)
    assert [m.data() for m in raw.messages()] == [b"a", b"bb", b"ccc"]


def test_message_batch_refusals():
    for pulsar in (official, pulsarfast):
        with pytest.raises(TypeError, match="unknown message id type"):
            pulsar.MessageBatch().with_message_id(5)
        with pytest.raises(TypeError):
            pulsar.MessageBatch().parse_from(_batch_payload(), "3")
    with pytest.raises(pulsarfast.InvalidMessage):  # (the official client returns empty messages)
        pulsarfast.MessageBatch().parse_from(_batch_payload(), 4)


# ----------------------------------------------------------------------------- crypto names


@pytest.mark.parametrize("args", [("a", "b"), (1, "b"), ("a", None), ("a",)])
def test_crypto_key_reader(args):
    theirs, ours = kinds(lambda p, r: sorted(vars(p.CryptoKeyReader(*args))))
    assert ours == theirs


def test_crypto_key_reader_reads_its_files(tmp_path):
    public, private = tmp_path / "pub.pem", tmp_path / "priv.pem"
    public.write_bytes(b"PUBLIC")
    private.write_bytes(b"PRIVATE")
    reader = pulsarfast.CryptoKeyReader(str(public), str(private))
    key = reader.cryptoKeyReader.getPublicKey("k", {"m": "1"})
    assert (key.key, key.value(), key.metadata) == ("k", b"PUBLIC", {"m": "1"})
    assert isinstance(reader.cryptoKeyReader, fast_pulsar.AbstractCryptoKeyReader)
    # (encrypting with it, and what an unusable key does: tests/pulsar/test_encryption.py)


def test_encryption_context_wrappers():
    raw_key = fast_pulsar.EncryptionKey("k.pem", b"xyz", {"a": "b"})
    context = pulsarfast.EncryptionContext(fast_pulsar.EncryptionContext(
        [raw_key], b"param", "RSA", pulsarfast.CompressionType.LZ4, 10, 3))
    assert str(pulsarfast.EncryptionKey(raw_key)) == "EncryptionKey(key=k.pem, value_len=3, metadata={'a': 'b'})"
    assert str(context) == ("EncryptionContext(algorithm=RSA, compression_type=LZ4, uncompressed_message_size=10, "
                            "is_decryption_failed=False, keys=[EncryptionKey(key=k.pem, value_len=3, "
                            "metadata={'a': 'b'})])")
    assert (context.param(), context.batch_size(), context.keys()[0].value) == (b"param", 3, b"xyz")


# ----------------------------------------------------------------------------- configurations


def _getters(conf_class):
    """{method: value read} of every option the official configuration can read without argument."""
    conf = conf_class()
    read = {}
    for name in dir(conf_class):
        if name.startswith("_") or name == "kwargs":
            continue
        kind, value = outcome(getattr(conf, name))
        if kind == "ok" and not hasattr(value, "__dict__") and not type(value).__module__ == "_pulsar":
            read[name] = value.name if hasattr(value, "name") else value
    return read


@pytest.mark.parametrize("name", ["ClientConfiguration", "ProducerConfiguration", "ConsumerConfiguration",
                                  "ReaderConfiguration", "TableViewConfiguration"])
def test_configuration_defaults_and_methods(name):
    theirs, ours = getattr(official_pulsar, name), getattr(fast_pulsar, name)
    assert {m for m in dir(theirs) if not m.startswith("_")} <= set(dir(ours))
    official_defaults = _getters(theirs)
    fast_defaults = {key: value for key, value in _getters(ours).items() if key in official_defaults}
    assert fast_defaults == official_defaults


@pytest.mark.parametrize("make", [
    lambda r: r.ProducerConfiguration().send_timeout_millis(1000).send_timeout_millis(),
    lambda r: r.ProducerConfiguration().send_timeout_millis("1"),
    lambda r: r.ProducerConfiguration().send_timeout_millis(1.0),
    lambda r: r.ProducerConfiguration().producer_name(b"ab").producer_name(),
    lambda r: r.ProducerConfiguration().batching_enabled(None).batching_enabled(),
    lambda r: r.ProducerConfiguration().batching_enabled("x"),
    lambda r: r.ProducerConfiguration().compression_type(r.CompressionType.LZ4).compression_type().name,
    lambda r: r.ProducerConfiguration().compression_type(1),
    lambda r: r.ClientConfiguration().io_threads(-3).io_threads(),
    lambda r: r.ClientConfiguration().io_threads(2 ** 33),
    lambda r: r.ClientConfiguration().io_threads(True).io_threads(),
    lambda r: r.ClientConfiguration().tls_trust_certs_file_path("/x") is not None,
    lambda r: r.ClientConfiguration().listener_name(),
    lambda r: r.ConsumerConfiguration().receiver_queue_size(5),
    lambda r: r.ConsumerConfiguration().consumer_type(r.ConsumerType.Shared).consumer_type().name,
    lambda r: r.ConsumerConfiguration().property("a", 1),
    lambda r: r.ReaderConfiguration().reader_name("n"),
    lambda r: r.ReaderConfiguration().start_message_id_inclusive(True).start_message_id_inclusive(),
    lambda r: r.TableViewConfiguration().subscription_name("s"),
    lambda r: r.TableViewConfiguration().subscription_name(b"s"),
    lambda r: r.TableViewConfiguration().subscription_name(1),
    lambda r: r.TableViewConfiguration().subscription_name(),
    lambda r: r.TableViewConfiguration().schema(r.SchemaInfo(r.SchemaType.JSON, "j", "{}")),
    lambda r: r.TableViewConfiguration().schema("x"),
    lambda r: r.TableViewConfiguration().schema(),
    lambda r: r.TableView().size(),
    lambda r: r.TableView().get("k"),
    lambda r: r.TableView().get(1),
    lambda r: r.TableView().for_each(1),
    lambda r: r.TableView().for_each_and_listen(print),
    lambda r: r.TableView().close(),
], ids=["int", "int-str", "int-float", "str-bytes", "bool-none", "bool-str", "enum", "enum-int", "negative",
        "int32-overflow", "int-bool", "set-only-chains", "set-only-read", "setter-returns-none", "consumer-type",
        "property-int", "reader-name-none", "reader-inclusive", "tv-subscription", "tv-subscription-bytes",
        "tv-subscription-int", "tv-subscription-read", "tv-schema", "tv-schema-str", "tv-schema-read", "tv-size",
        "tv-get", "tv-get-int", "tv-for-each-int", "tv-listen", "tv-close"])
def test_configuration_methods(make):
    theirs, ours = kinds(lambda p, r: make(r))
    assert ours == theirs


def _schema_outcome(info):
    return info.schema_type().name, info.name(), info.schema()


@pytest.mark.parametrize("name", ["ProducerConfiguration", "ConsumerConfiguration", "ReaderConfiguration"])
def test_configuration_schema(name):
    """schema(): the BYTES SchemaInfo until set; set with a SchemaInfo (returns the configuration), else
    TypeError; reads back what was set."""
    seen = []
    for raw in (official_pulsar, fast_pulsar):
        conf = getattr(raw, name)()
        default = _schema_outcome(conf.schema())
        info = raw.SchemaInfo(raw.SchemaType.JSON, "JSON", '{"type": "record"}')
        chained = conf.schema(info) is conf
        with pytest.raises(TypeError):
            conf.schema("not a SchemaInfo")
        seen.append((default, chained, _schema_outcome(conf.schema())))
    assert seen[1] == seen[0]
    assert seen[0][0] == ("BYTES", "BYTES", "")


def test_configuration_schema_becomes_a_schema_keyword():
    from pulsarfast.schema.given import InfoSchema

    info = pulsarfast.schema.StringSchema().schema_info()
    assert isinstance(fast_pulsar.ProducerConfiguration().schema(info).kwargs()["schema"], InfoSchema)
    assert fast_pulsar.ConsumerConfiguration().schema(info).kwargs()["schema"].schema_info() is info
    kept = fast_pulsar.ReaderConfiguration().schema(fast_pulsar.ReaderConfiguration().schema()).kwargs()
    assert isinstance(kept["schema"], pulsarfast.BytesSchema)  # (BYTES: nothing registered, as for none)


@pytest.mark.parametrize("make", [
    lambda r: r.TopicRegex("persistent://public/default/a.*").pattern,
    lambda r: r.TopicRegex(b"a-.*").pattern,
    lambda r: r.TopicRegex("(unclosed").pattern,
    lambda r: r.TopicRegex(5),
    lambda r: r.TopicRegex(),
    lambda r: setattr(r.TopicRegex("a"), "pattern", "b"),
], ids=["str", "bytes", "not-compiled", "int", "no-argument", "read-only"])
def test_topic_regex(make):
    theirs, ours = kinds(lambda p, r: make(r))
    assert ours == theirs


def test_extension_message_and_client_schema_methods():
    assert callable(fast_pulsar.Message.int_schema_version) and callable(official_pulsar.Message.int_schema_version)
    assert fast_pulsar.Message(b"x", pulsarfast.MessageId(0, 1, 2), "t").int_schema_version() == -1
    assert fast_pulsar.Message(b"x", pulsarfast.MessageId(0, 1, 2), "t",
                               schema_version=(3).to_bytes(8, "big")).int_schema_version() == 3
    assert callable(fast_pulsar.Client.get_schema_info) and callable(official_pulsar.Client.get_schema_info)
    assert not hasattr(official.Client, "get_schema_info") and not hasattr(pulsarfast.Client, "get_schema_info")


def test_configuration_kwargs():
    conf = fast_pulsar.ConsumerConfiguration().consumer_type(pulsarfast.ConsumerType.Shared)
    conf.receiver_queue_size(5)
    conf.subscription_initial_position(pulsarfast.InitialPosition.Earliest)
    conf.dead_letter_policy(fast_pulsar.DeadLetterPolicyBuilder().maxRedeliverCount(2).build())
    conf.key_shared_policy(fast_pulsar.KeySharedPolicy().set_allow_out_of_order_delivery(True))
    conf.property("a", "b")
    kwargs = conf.kwargs()
    assert kwargs["consumer_type"] is pulsarfast.ConsumerType.Shared
    assert kwargs["initial_position"] is pulsarfast.InitialPosition.Earliest
    assert kwargs["receiver_queue_size"] == 5 and kwargs["properties"] == {"a": "b"}
    assert kwargs["dead_letter_policy"].max_redeliver_count == 2
    assert kwargs["key_shared_policy"].allow_out_of_order_delivery is True
    producer = fast_pulsar.ProducerConfiguration().partitions_routing_mode(
        pulsarfast.PartitionsRoutingMode.UseSinglePartition).send_timeout_millis(5)
    assert producer.kwargs() == {"message_routing_mode": pulsarfast.PartitionsRoutingMode.UseSinglePartition,
                                 "send_timeout_millis": 5}
    client = fast_pulsar.ClientConfiguration().connection_timeout(500).operation_timeout_seconds(7)
    assert client.kwargs() == {"connection_timeout_ms": 500, "operation_timeout_seconds": 7}


def test_client_from_configuration():
    client = fast_pulsar.Client(NOWHERE, fast_pulsar.ClientConfiguration().operation_timeout_seconds(7))
    try:
        assert isinstance(client, pulsarfast.Client)
    finally:
        client.close()
    with pytest.raises(TypeError):
        fast_pulsar.Client(NOWHERE, None)


# ----------------------------------------------------------------------------- MessageBuilder


def test_message_builder():
    results = []
    for raw in (official_pulsar, fast_pulsar):
        message = raw.MessageBuilder().content("x").property("a", "b").properties({"c": "d"}).partition_key(
            "pk").ordering_key("ok").event_timestamp(5).sequence_id(7).replication_clusters(["c1"]).disable_replication(
            True).deliver_at(10).deliver_after(datetime.timedelta(seconds=1)).build()
        results.append((message.data(), message.properties(), message.partition_key(), message.ordering_key(),
                        message.event_timestamp(), str(message.message_id()), message.topic_name(),
                        raw.MessageBuilder().build().data(),
                        raw.MessageBuilder().set_null_value().build().has_null_value()))
    assert results[1] == results[0]


@pytest.mark.parametrize("make", [
    lambda r: r.MessageBuilder().content(5),
    lambda r: r.MessageBuilder().properties({"a": 1}),
    lambda r: r.MessageBuilder().deliver_after(5),
    lambda r: r.MessageBuilder().sequence_id("1"),
    lambda r: r.MessageBuilder().content(b"\xff").build().data(),
], ids=["content-int", "properties-int", "deliver-after-int", "sequence-str", "content-bytes"])
def test_message_builder_arguments(make):
    theirs, ours = kinds(lambda p, r: make(r))
    assert ours == theirs


def test_message_builder_send_kwargs():
    builder = fast_pulsar.MessageBuilder().content(b"x").partition_key("k").disable_replication(True)
    assert builder.send_kwargs() == {"content": b"x", "partition_key": "k", "disable_replication": True}


def test_the_extension_error_pair_reads_as_the_official_one():
    error = fast_pulsar.Error(pulsarfast.Result.Timeout, "no answer")
    assert (error.error, error.message) == (pulsarfast.Result.Timeout, "no answer")
    assert {name for name in dir(official_pulsar.Error) if not name.startswith("_")} <= set(dir(error))
