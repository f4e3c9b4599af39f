# pulsarfast.spark against a real local Spark (local[2]) and the run's real
# Pulsar broker: a source -> sink -> source round trip of 200k messages on 4
# partitions (counts checked against the broker, the durable subscription's
# backlog cleared), a query killed mid-stream and restarted from its
# checkpoint (every message once in the file sink's output), entries trimmed
# and a topic deleted under failOnDataLoss true and false, the sink's
# producerName on a namespace with deduplication, topicsPattern,
# startingTimestamp and endingOffsets, and the example pipeline (Pulsar -> NSQ -> Pulsar).
#
# Skipped with a reason when pyspark/pyarrow or java is missing, unless
# NSQ_REQUIRE_SPARK=1 (set by `make test`), which turns that into a failure.
from __future__ import annotations

import importlib.util
import json
import os
import time
import uuid

import pytest

from tests.support.servers import REPO_ROOT, wait_until
from tests.support.spark_processes import kill_source_runner, require_spark

pytestmark = [pytest.mark.timeout(300), pytest.mark.integration, pytest.mark.slow, pytest.mark.xdist_group("spark")]

require_spark()

from pyspark.errors import StreamingQueryException  # noqa: E402

import pulsarfast  # noqa: E402
from pulsarfast.spark.source import SOURCE_SCHEMA  # noqa: E402

N = 200_000
PARTITIONS = 4


def _name(prefix: str) -> str:
    return "%s_%s" % (prefix, uuid.uuid4().hex[:10])


def _options(broker, topic: str, **more) -> dict:
    return {"service_url": broker.service_url, "admin_url": broker.web_url, "topic": topic,
            **{k: str(v) for k, v in more.items()}}


def produce(broker, topic: str, bodies, batch: int = 1000, **send_kwargs) -> None:
    """Publish every body with a batching pulsarfast producer; returns once the broker stored all."""
    client = pulsarfast.Client(broker.service_url, backend="threads", operation_timeout_seconds=30)
    try:
        producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=batch,
                                          block_if_queue_full=True, max_pending_messages=10_000)
        failures = []

        def sent(result, _message_id):
            if result != pulsarfast.Result.Ok:
                failures.append(result)

        for body in bodies:
            producer.send_async(body, sent, **send_kwargs)
        producer.flush()
        producer.close()
        assert not failures, failures[:5]
    finally:
        client.close()


def stored(broker, topic: str) -> int:
    """Messages the broker took in on the topic (every partition)."""
    if broker.partitions(topic) > 0:
        return int(broker.partitioned_stats(topic, per_partition=False)["msgInCounter"])
    return int(broker.topic_stats(topic)["msgInCounter"])


def _stop_all(spark) -> None:
    for query in spark.streams.active:
        try:
            query.stop()
        except Exception:
            pass


def _stream(spark, broker, topic, checkpoint, out, trigger=None, **options):
    reader = spark.readStream.format("pulsar").options(**_options(broker, topic, **options))
    writer = (reader.load().selectExpr("value", "partition", "message_id").writeStream.format("parquet")
              .option("path", str(out)).option("checkpointLocation", str(checkpoint)))
    return writer.trigger(**(trigger or {"availableNow": True})).start()


def _reader(spark, broker):
    """A new DataFrameReader of the pulsar format on broker (a reader's options stay set: one per query)."""
    return spark.read.format("pulsar").option("service_url", broker.service_url).option("admin_url", broker.web_url)


def _values(spark, out) -> list[bytes]:
    return [bytes(row.value) for row in spark.read.parquet(str(out)).select("value").collect()]


# ----------------------------------------------------------------------------- round trip


def test_source_sink_source_round_trip_200k_on_4_partitions(spark, pulsar_broker, tmp_path, capsys):
    source, target = _name("spark_src"), _name("spark_dst")
    pulsar_broker.create_partitioned_topic(source, PARTITIONS)
    pulsar_broker.create_partitioned_topic(target, PARTITIONS)
    produce(pulsar_broker, source, (b"m-%d" % i for i in range(N)), properties={"origin": "test"},
            event_timestamp=1_700_000_000_000)
    assert stored(pulsar_broker, source) == N

    started = time.monotonic()
    query = (
        spark.readStream.format("pulsar")
        .options(**_options(pulsar_broker, source, startingOffsets="earliest", subscriptionName="spark-rt"))
        .load()
        .selectExpr("value", "concat('k-', cast(partition as string)) as key", "properties", "event_time")
        .writeStream.format("pulsar")
        .option("service_url", pulsar_broker.service_url).option("topic", target)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True).start()
    )
    try:
        assert query.awaitTermination(240), "the availableNow query did not finish"
        assert query.exception() is None
    finally:
        _stop_all(spark)
    elapsed = time.monotonic() - started
    with capsys.disabled():
        print("\n[pulsar source -> sink] %d messages in %.1fs (%.0f msgs/s, query start-up included)"
              % (N, elapsed, N / elapsed))

    assert stored(pulsar_broker, target) == N
    # the durable subscription followed the committed offsets: nothing left in its backlog
    stats = pulsar_broker.partitioned_stats(source)
    for partition in stats["partitions"].values():
        assert partition["subscriptions"]["spark-rt"]["msgBacklog"] == 0

    back = spark.read.format("pulsar").options(**_options(pulsar_broker, target)).load()
    rows = back.select("value", "key", "properties", "event_time", "partition", "topic").collect()
    assert len(rows) == N
    assert {bytes(r.value) for r in rows} == {b"m-%d" % i for i in range(N)}
    sample = rows[0]
    assert sample.key.startswith("k-") and sample.properties == {"origin": "test"}
    assert int(sample.event_time.timestamp() * 1000) == 1_700_000_000_000
    assert sample.topic == "persistent://public/default/" + target
    # a key goes to one partition: the sink's producer routes by key
    by_key: dict = {}
    for r in rows:
        by_key.setdefault(r.key, set()).add(r.partition)
    assert all(len(parts) == 1 for parts in by_key.values())


# ----------------------------------------------------------------------------- kill and restart


def test_query_killed_and_restarted_puts_every_message_once_in_the_output(spark, pulsar_broker, tmp_path, capsys):
    if not os.path.isdir("/proc"):
        pytest.skip("finding Spark's source process needs /proc")
    topic = _name("spark_kill")
    pulsar_broker.create_partitioned_topic(topic, PARTITIONS)
    produce(pulsar_broker, topic, (b"k-%d" % i for i in range(N)), batch=100)
    checkpoint, out = tmp_path / "ck", tmp_path / "out"
    # 400 entries of 100 messages a trigger: about 5 micro-batches of 40k messages
    options = {"startingOffsets": "earliest", "maxMessagesPerTrigger": 400}

    query = _stream(spark, pulsar_broker, topic, checkpoint, out, trigger={"processingTime": "0 seconds"},
                    **options)
    try:
        wait_until(lambda: sum(p["numInputRows"] for p in query.recentProgress) >= 80_000, timeout=120,
                   interval=0.05)
        kill_source_runner(spark)
        with pytest.raises(StreamingQueryException):
            query.awaitTermination(60)
        assert not query.isActive
    finally:
        _stop_all(spark)
    first_run = sum(p["numInputRows"] for p in query.recentProgress)
    assert all(p["numInputRows"] <= 400 * 100 for p in query.recentProgress)
    assert 0 < first_run < N

    query = _stream(spark, pulsar_broker, topic, checkpoint, out, **options)
    try:
        assert query.awaitTermination(180), "the restarted query did not finish"
        assert query.exception() is None
    finally:
        _stop_all(spark)
    values = _values(spark, out)
    with capsys.disabled():
        print("\n[pulsar kill/restart] %d messages; the first run read %d before SIGKILL; the output holds %d rows, "
              "%d distinct" % (N, first_run, len(values), len(set(values))))
    assert len(values) == N, "duplicates or losses"
    assert set(values) == {b"k-%d" % i for i in range(N)}


# ----------------------------------------------------------------------------- data loss


def test_trimmed_entries_and_a_deleted_topic_under_fail_on_data_loss(spark, pulsar_broker, tmp_path):
    topic = _name("spark_loss")
    full = "persistent://public/default/" + topic
    produce(pulsar_broker, topic, [b"a-%d" % i for i in range(50)], batch=1)
    strict, lenient = (tmp_path / "strict", tmp_path / "lenient")
    for where in (strict, lenient):
        query = _stream(spark, pulsar_broker, topic, where / "ck", where / "out", startingOffsets="earliest",
                        failOnDataLoss=str(where is strict).lower())
        assert query.awaitTermination(120)
        assert query.exception() is None
        assert len(_values(spark, where / "out")) == 50
    # 30 entries nobody reads, then their ledger is closed (unload) and trimmed away (truncate)
    produce(pulsar_broker, topic, [b"b-%d" % i for i in range(30)], batch=1)
    pulsar_broker.unload_topic(topic)
    produce(pulsar_broker, topic, [b"c-%d" % i for i in range(20)], batch=1)
    pulsar_broker.admin("DELETE", pulsar_broker.topic_path(topic) + "/truncate")

    query = _stream(spark, pulsar_broker, topic, strict / "ck", strict / "out", failOnDataLoss="true")
    with pytest.raises(StreamingQueryException, match="no longer stored"):
        query.awaitTermination(120)
    _stop_all(spark)

    query = _stream(spark, pulsar_broker, topic, lenient / "ck", lenient / "out", failOnDataLoss="false")
    assert query.awaitTermination(120)
    assert query.exception() is None
    values = _values(spark, lenient / "out")
    assert sorted(values) == sorted([b"a-%d" % i for i in range(50)] + [b"c-%d" % i for i in range(20)])

    # the topic deleted: failOnDataLoss=true fails, false ends with nothing more
    caught_up = tmp_path / "caught_up"
    query = _stream(spark, pulsar_broker, topic, caught_up / "ck", caught_up / "out", startingOffsets="earliest")
    assert query.awaitTermination(120) and query.exception() is None
    pulsar_broker.delete_topic(topic)
    query = _stream(spark, pulsar_broker, full, caught_up / "ck", caught_up / "out")
    with pytest.raises(StreamingQueryException, match="gone"):
        query.awaitTermination(120)
    _stop_all(spark)
    query = _stream(spark, pulsar_broker, full, lenient / "ck", lenient / "out", failOnDataLoss="false")
    assert query.awaitTermination(120)
    assert query.exception() is None
    assert len(_values(spark, lenient / "out")) == 70


# ----------------------------------------------------------------------------- sink


def test_sink_producer_name_makes_a_rerun_idempotent_on_a_deduplicating_namespace(spark, pulsar_broker):
    namespace = "public/" + _name("dedup").replace("_", "-")
    pulsar_broker.admin("PUT", "/admin/v2/namespaces/" + namespace, {})
    pulsar_broker.admin("POST", "/admin/v2/namespaces/%s/deduplication" % namespace, True)
    named, anonymous = ("persistent://%s/%s" % (namespace, _name(kind)) for kind in ("named", "anon"))
    df = spark.range(10_000).selectExpr("cast(concat('d-', cast(id as string)) as binary) as value").repartition(3)
    for _ in range(2):  # the same job twice: as Spark's retry of every task would send it again
        df.write.format("pulsar").mode("append").option("service_url", pulsar_broker.service_url) \
            .option("topic", named).option("producerName", "job-1").save()
        df.write.format("pulsar").mode("append").option("service_url", pulsar_broker.service_url) \
            .option("topic", anonymous).save()
    assert _reader(spark, pulsar_broker).option("topic", named).load().count() == 10_000
    assert _reader(spark, pulsar_broker).option("topic", anonymous).load().count() == 20_000


def test_sink_column_checks_and_a_failed_send_fails_the_job(spark, pulsar_broker):
    url = pulsar_broker.service_url
    with pytest.raises(Exception, match="needs a 'value' column"):
        spark.range(3).write.format("pulsar").mode("append").option("service_url", url).option("topic", "x").save()
    with pytest.raises(Exception, match="'key' column must be string"):
        spark.range(3).selectExpr("cast('v' as binary) as value", "id as key").write.format("pulsar") \
            .mode("append").option("service_url", url).option("topic", "x").save()
    with pytest.raises(Exception, match="needs option 'topic' or a 'topic' column"):
        spark.range(3).selectExpr("cast('v' as binary) as value").write.format("pulsar") \
            .mode("append").option("service_url", url).save()
    # larger than the broker's 5 MiB limit (no chunking): the broker refuses it, the job fails
    big = spark.range(1).selectExpr("cast(repeat('x', 6 * 1024 * 1024) as binary) as value")
    with pytest.raises(Exception, match="not acknowledged|MessageTooBig|too big"):
        big.write.format("pulsar").mode("append").option("service_url", url).option("topic", _name("big")) \
            .option("pulsar.producer.batching_enabled", "false").save()


# ----------------------------------------------------------------------------- more of the source


def test_topics_pattern_starting_timestamp_and_ending_offsets(spark, pulsar_broker):
    prefix = _name("spark_pat")
    first, second, other = prefix + "_a", prefix + "_b", _name("spark_other")
    pulsar_broker.create_partitioned_topic(second, 2)
    produce(pulsar_broker, first, [b"a-%d" % i for i in range(100)], batch=10)
    produce(pulsar_broker, second, [b"b-%d" % i for i in range(100)], batch=10)
    produce(pulsar_broker, other, [b"o-%d" % i for i in range(10)], batch=10)
    by_pattern = _reader(spark, pulsar_broker).option("topicsPattern", "persistent://public/default/%s_.*" % prefix).load()
    values = [bytes(r.value) for r in by_pattern.select("value").collect()]
    assert sorted(values) == sorted([b"a-%d" % i for i in range(100)] + [b"b-%d" % i for i in range(100)])

    cut = int(time.time() * 1000) + 1  # (after every publish time so far, which are whole ms up to now)
    while int(time.time() * 1000) <= cut:  # (and the next ones are at or after it)
        time.sleep(0.001)
    produce(pulsar_broker, first, [b"late-%d" % i for i in range(7)], batch=1)
    late = _reader(spark, pulsar_broker).option("topic", first).option("startingTimestamp", str(cut)).load()
    assert sorted(bytes(r.value) for r in late.select("value").collect()) == sorted(b"late-%d" % i for i in range(7))

    # endingOffsets: the entries before a given position (the first 3 of the 7 late ones: one entry each)
    ids = [r.message_id for r in late.select("message_id").collect()]
    positions = sorted((m.ledger_id(), m.entry_id()) for m in map(pulsarfast.MessageId.deserialize, ids))
    ledger, entry = positions[3]
    bounded = _reader(spark, pulsar_broker).option("topic", first).option("startingTimestamp", str(cut)) \
        .option("endingOffsets", '{"%s": [%d, %d]}' % (first, ledger, entry)).load()
    assert bounded.count() == 3

    many = _reader(spark, pulsar_broker).option("topic", second).option("minPartitions", "6").load()
    assert many.rdd.getNumPartitions() == 6
    assert many.count() == 100


def test_source_schema_and_option_errors(spark, pulsar_broker):
    assert [f.name for f in SOURCE_SCHEMA.fields] == [
        "key", "value", "topic", "partition", "message_id", "publish_time", "event_time", "properties"]
    with pytest.raises(Exception, match="needs option 'admin_url'"):
        spark.read.format("pulsar").option("service_url", pulsar_broker.service_url).option("topic", "x").load().count()
    with pytest.raises(Exception, match="exactly one of the options"):
        _reader(spark, pulsar_broker).option("topic", "x").option("topics", "y").load().count()
    with pytest.raises(Exception, match="startingOffsets"):
        _reader(spark, pulsar_broker).option("topic", "x").option("startingOffsets", "soon").load().count()
    topic = _name("spark_cols")
    produce(pulsar_broker, topic, [b"v"], batch=1)
    picked = spark.read.format("pulsar").schema("VALUE binary, publish_time timestamp") \
        .option("service_url", pulsar_broker.service_url).option("admin_url", pulsar_broker.web_url) \
        .option("topic", topic).load()
    assert picked.columns == ["VALUE", "publish_time"]
    assert bytes(picked.collect()[0].VALUE) == b"v"


# ----------------------------------------------------------------------------- example


def test_example_pipeline_pulsar_to_nsq_and_back(spark, pulsar_broker, nsqd, tmp_path):
    path = os.path.join(REPO_ROOT, "examples", "spark_pulsar_pipeline.py")
    spec = importlib.util.spec_from_file_location("spark_pulsar_pipeline", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    readings, back, nsq_topic = _name("readings"), _name("readings_f"), _name("readings_f")
    pulsar_broker.create_partitioned_topic(back, 2)
    values = [json.dumps({"sensor": "s%d" % (i % 5), "celsius": i / 10}).encode() for i in range(1000)]
    values += [b"not json", b'{"sensor": "s9"}']
    produce(pulsar_broker, readings, values, batch=100)

    query = example.pulsar_to_nsq(spark, service_url=pulsar_broker.service_url, admin_url=pulsar_broker.web_url,
                                  pulsar_topic=readings, nsqd=nsqd.tcp_address, nsq_topic=nsq_topic,
                                  checkpoint=str(tmp_path / "to-nsq"), available_now=True)
    try:
        assert query.awaitTermination(120) and query.exception() is None
    finally:
        _stop_all(spark)
    expected = example.to_fahrenheit_locally(values)
    assert nsqd.message_count(nsq_topic) == len(expected) == 1000
    nsqd.create_channel(nsq_topic, "spark")  # (the channel takes a copy of what the topic holds from now on)

    query = example.nsq_to_pulsar(spark, nsqd=nsqd.tcp_address, nsq_topic=nsq_topic, channel="spark",
                                  service_url=pulsar_broker.service_url, pulsar_topic=back,
                                  checkpoint=str(tmp_path / "to-pulsar"), available_now=True)
    try:
        assert query.awaitTermination(120) and query.exception() is None
    finally:
        _stop_all(spark)
    rows = _reader(spark, pulsar_broker).option("topic", back).load().select("value", "key", "partition").collect()
    got = [json.loads(bytes(r.value)) for r in rows]
    assert sorted(got, key=json.dumps) == sorted(expected, key=json.dumps)
    assert all(r.key == json.loads(bytes(r.value))["sensor"] for r in rows)
    by_sensor: dict = {}
    for r in rows:
        by_sensor.setdefault(r.key, set()).add(r.partition)
    assert all(len(parts) == 1 for parts in by_sensor.values())


# ----------------------------------------------------------------------------- valueSchema


def test_value_schema_topic_decodes_avro_and_json_values_into_columns(spark, pulsar_broker):
    from pulsarfast.schema import Array, AvroSchema, Boolean, Double, Integer, JsonSchema, Map, Record, String

    class Reading(Record):
        sensor = String()
        count = Integer()
        celsius = Double()
        tags = Array(String())
        attrs = Map(String())
        ok = Boolean()

    client = pulsarfast.Client(pulsar_broker.service_url, backend="threads", operation_timeout_seconds=30)
    topics = {}
    try:
        for kind, schema in (("avro", AvroSchema(Reading)), ("json", JsonSchema(Reading))):
            topic = _name("spark_" + kind)
            producer = client.create_producer(topic, schema=schema)
            for i in range(20):
                producer.send(Reading(sensor="s%d" % i, count=i, celsius=i / 2, tags=["t%d" % i],
                                      attrs={"k": str(i)}, ok=i % 2 == 0))
            producer.close()
            topics[kind] = topic
    finally:
        client.close()
    for kind, topic in topics.items():
        df = _reader(spark, pulsar_broker).option("topic", topic).option("valueSchema", "topic").load()
        assert df.columns[:8] == [f.name for f in SOURCE_SCHEMA.fields]
        assert df.columns[8:] == ["sensor", "count", "celsius", "tags", "attrs", "ok"]
        assert dict(df.dtypes)["count"] == "int" and dict(df.dtypes)["attrs"] == "map<string,string>"
        rows = sorted(df.select("sensor", "count", "celsius", "tags", "attrs", "ok").collect(), key=lambda r: r["count"])
        assert [(r.sensor, r["count"], r.celsius, r.tags, r.attrs, r.ok) for r in rows] == [
            ("s%d" % i, i, i / 2, ["t%d" % i], {"k": str(i)}, i % 2 == 0) for i in range(20)], kind
        # a user schema may pick fields and columns
        picked = _reader(spark, pulsar_broker).schema("celsius double, key string").option("topic", topic) \
            .option("valueSchema", "topic").load()
        assert sorted(r.celsius for r in picked.collect()) == [i / 2 for i in range(20)]
    with pytest.raises(Exception, match="has no schema registered"):
        plain = _name("spark_plain")
        produce(pulsar_broker, plain, [b"x"], batch=1)
        _reader(spark, pulsar_broker).option("topic", plain).option("valueSchema", "topic").load()


def test_sink_topic_column_sends_each_row_to_its_topic(spark, pulsar_broker):
    first, second = _name("spark_col_a"), _name("spark_col_b")
    rows = [(b"r-%d" % i, first if i % 3 else "persistent://public/default/" + second) for i in range(30)]
    spark.createDataFrame(rows, "value binary, topic string").repartition(2).write.format("pulsar") \
        .mode("append").option("service_url", pulsar_broker.service_url).save()
    for topic, expected in ((first, 20), (second, 10)):
        values = [bytes(r.value) for r in _reader(spark, pulsar_broker).option("topic", topic).load().collect()]
        assert sorted(values) == sorted(v for v, t in rows if t.endswith(topic))
        assert len(values) == expected
