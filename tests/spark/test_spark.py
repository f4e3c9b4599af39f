# nsq.spark against a real local Spark (local[2]) and real nsqd: the batch and
# streaming sink, the streaming source (every message delivered and finished),
# a query killed mid-stream and restarted from its checkpoint (nothing lost,
# duplicates printed), and the example pipeline.
#
# Skipped with a reason when pyspark/pyarrow or java is missing, unless
# NSQ_REQUIRE_SPARK=1 (set by `make test`), which turns that into a failure.
from __future__ import annotations

import importlib.util
import os
import threading
import time
import uuid

import pytest

from tests.support.servers import REPO_ROOT, wait_until
from tests.support.spark_processes import kill_source_runner, require_spark

# (one worker runs the module, on one SparkSession, while the others go on)
pytestmark = [pytest.mark.timeout(240), pytest.mark.integration, pytest.mark.slow, pytest.mark.xdist_group("spark")]


require_spark()

from pyspark.errors import StreamingQueryException  # noqa: E402

import nsq  # noqa: E402
import nsq.spark  # noqa: E402
from nsq.spark.source import SOURCE_SCHEMA  # noqa: E402


# ----------------------------------------------------------------------------- fixtures


def _stop_all(spark) -> None:
    for query in spark.streams.active:
        try:
            query.stop()
        except Exception:
            pass


def consume_bodies(nsqd, topic: str, expected: int, timeout: float = 60.0) -> list[bytes]:
    """Read `expected` messages from a fresh channel with nsq.Reader (finishing them); return the bodies."""
    bodies: list[bytes] = []
    lock = threading.Lock()

    def handler(message):
        with lock:
            bodies.append(bytes(message.body))
        return True

    reader = nsq.Reader(
        topic, "verify", handler, nsqd_tcp_addresses=[nsqd.tcp_address], max_in_flight=2500, backend="threads"
    )
    reader.start()
    try:
        wait_until(lambda: len(bodies) >= expected, timeout=timeout, interval=0.05,
                   message=lambda: "consumed %d of %d" % (len(bodies), expected))
        time.sleep(0.2)  # anything beyond `expected` would show up now
    finally:
        reader.close()
    return bodies


def assert_channel_drained(nsqd, topic: str, channel: str, timeout: float = 20.0) -> dict:
    def drained():
        stats = nsqd.channel_stats(topic, channel)
        return stats if stats and stats["depth"] == 0 and stats["in_flight_count"] == 0 and stats["deferred_count"] == 0 else None

    return wait_until(drained, timeout=timeout, interval=0.1,
                      message=lambda: "channel not drained: %r" % (nsqd.channel_stats(topic, channel),))


# ----------------------------------------------------------------------------- sink


def test_batch_write_100k(spark, nsqd, topic, capsys):
    n = 100_000
    df = spark.range(n).selectExpr("concat('m-', cast(id as string)) as body")
    started = time.monotonic()
    (df.write.format("nsq").mode("append")
     .option("topic", topic).option("nsqd_tcp_addresses", nsqd.tcp_address).save())
    elapsed = time.monotonic() - started
    with capsys.disabled():
        print("\n[batch write] %d rows in %.2fs (%.0f rows/s, includes job start-up)" % (n, elapsed, n / elapsed))
    assert nsqd.message_count(topic) == n
    assert nsqd.topic_depth(topic) == n
    bodies = consume_bodies(nsqd, topic, n)
    assert len(bodies) == n
    assert set(bodies) == {b"m-%d" % i for i in range(n)}


def test_batch_write_topic_column_and_binary_body(spark, nsqd, topic):
    other = topic[:-1] + ("x" if topic[-1] != "x" else "y")
    rows = [(bytes([i % 256, 1, 2]) + b"%d" % i, topic if i % 3 else other) for i in range(300)]
    df = spark.createDataFrame(rows, "body binary, topic string").repartition(3)
    df.write.format("nsq").mode("append").option("nsqd_tcp_addresses", nsqd.tcp_address) \
        .option("mpub_max_count", "7").save()
    assert nsqd.message_count(topic) == 200
    assert nsqd.message_count(other) == 100
    assert sorted(consume_bodies(nsqd, other, 100)) == sorted(b for b, t in rows if t == other)


def test_failed_task_fails_the_job(spark, topic):
    from tests.support.servers import free_port

    df = spark.range(10).selectExpr("cast(id as string) as body")
    with pytest.raises(Exception) as info:
        (df.write.format("nsq").mode("append").option("topic", topic)
         .option("nsqd_tcp_addresses", "127.0.0.1:%d" % free_port()).option("connect_timeout_ms", "1000").save())
    assert "cannot connect to nsqd" in str(info.value)


def test_sink_option_errors(spark, topic):
    df = spark.range(3).selectExpr("cast(id as string) as body")
    with pytest.raises(Exception, match="needs option 'topic'"):
        df.write.format("nsq").mode("append").option("nsqd_tcp_addresses", "127.0.0.1:4150").save()
    with pytest.raises(Exception, match="needs a 'body' column"):
        spark.range(3).write.format("nsq").mode("append").option("topic", topic) \
            .option("nsqd_tcp_addresses", "127.0.0.1:4150").save()


def test_stream_write_from_file_source(spark, nsqd, topic, tmp_path):
    source_dir = tmp_path / "in"
    source_dir.mkdir()
    expected = []
    for f in range(4):
        lines = ["file%d-line%d" % (f, i) for i in range(2500)]
        expected += lines
        (source_dir / ("part-%d.txt" % f)).write_text("\n".join(lines) + "\n")
    query = (
        spark.readStream.format("text").option("maxFilesPerTrigger", "1").load(str(source_dir))
        .selectExpr("value as body")
        .writeStream.format("nsq")
        .option("topic", topic).option("nsqd_tcp_addresses", nsqd.tcp_address)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(120), "streaming write did not finish"
        assert query.exception() is None
    finally:
        _stop_all(spark)
    assert nsqd.message_count(topic) == len(expected)
    assert sorted(consume_bodies(nsqd, topic, len(expected))) == sorted(s.encode() for s in expected)


def test_stream_write_from_rate_source(spark, nsqd, topic, tmp_path):
    query = (
        spark.readStream.format("rate").option("rowsPerSecond", "2000").load()
        .selectExpr("concat('tick-', cast(value as string)) as body")
        .writeStream.format("nsq")
        .option("topic", topic).option("nsqd_tcp_addresses", nsqd.tcp_address)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        wait_until(lambda: sum(p["numInputRows"] for p in query.recentProgress) >= 2000, timeout=60, interval=0.1)
        query.stop()
    finally:
        _stop_all(spark)
    processed = sum(p["numInputRows"] for p in query.recentProgress)
    published = nsqd.message_count(topic)
    # every batch that completed was published; a batch cut short by stop() may have published part of its rows
    assert published >= processed >= 2000
    bodies = consume_bodies(nsqd, topic, published)
    assert {b"tick-%d" % i for i in range(processed)} <= set(bodies)


# ----------------------------------------------------------------------------- source


def _read_query(spark, nsqd, topic, channel, checkpoint, sink_name=None, sink_path=None, trigger=None, **options):
    reader = (
        spark.readStream.format("nsq")
        .option("topic", topic).option("channel", channel)
        .option("nsqd_tcp_addresses", nsqd.tcp_address)
    )
    for key, value in options.items():
        reader = reader.option(key, str(value))
    writer = reader.load().writeStream.option("checkpointLocation", str(checkpoint))
    if sink_name:
        writer = writer.format("memory").queryName(sink_name)
    else:
        writer = writer.format("parquet").option("path", str(sink_path))
    return writer.trigger(**(trigger or {"processingTime": "0 seconds"})).start()


def test_stream_read_50k(spark, nsqd, topic, tmp_path, capsys):
    n = 50_000
    channel = "spark"
    nsqd.create_topic(topic)
    nsqd.create_channel(topic, channel)
    nsqd.http_mpub(topic, (b"r-%d" % i for i in range(n // 2)))
    name = "read50k_" + uuid.uuid4().hex[:8]
    started = time.monotonic()
    query = _read_query(spark, nsqd, topic, channel, tmp_path / "ck", sink_name=name, max_messages_per_batch=12500)
    try:
        nsqd.http_mpub(topic, (b"r-%d" % i for i in range(n // 2, n)))  # while the query runs
        count = lambda: spark.sql("select count(*) from %s" % name).collect()[0][0]  # noqa: E731
        wait_until(lambda: count() >= n, timeout=120, interval=0.25, message=lambda: "sink has %d rows" % count())
        elapsed = time.monotonic() - started
        # the last batch is finished once Spark commits it (the source asks for a trailing empty batch)
        stats = assert_channel_drained(nsqd, topic, channel)
        assert query.isActive, query.exception()
    finally:
        _stop_all(spark)
    with capsys.disabled():
        print("\n[streaming read] %d messages in %.2fs (%.0f msg/s, includes query start-up)" % (n, elapsed, n / elapsed))
    rows = spark.sql("select * from %s" % name).collect()
    assert [f.name for f in spark.table(name).schema.fields] == SOURCE_SCHEMA.fieldNames()
    assert len(rows) == n
    assert {r.body for r in rows} == {b"r-%d" % i for i in range(n)}
    assert len({r.id for r in rows}) == n
    sample = rows[0]
    assert sample.topic == topic and sample.channel == channel and sample.nsqd == nsqd.tcp_address
    assert sample.attempts == 1 and sample.timestamp is not None and len(sample.id) == 16
    assert stats["message_count"] == n and stats["timeout_count"] == 0 and stats["requeue_count"] == 0


def test_stream_read_killed_and_restarted(spark, nsqd, topic, tmp_path, capsys):
    n = 30_000
    channel = "spark"
    nsqd.create_topic(topic)
    nsqd.create_channel(topic, channel)
    nsqd.http_mpub(topic, (b"k-%d" % i for i in range(n)))
    checkpoint = tmp_path / "ck"
    out = tmp_path / "out"
    if not os.path.isdir("/proc"):
        pytest.skip("finding Spark's source process needs /proc")
    # a short msg_timeout so that nsqd gives back the killed run's messages quickly
    options = {"max_messages_per_batch": 1500, "max_in_flight": 5000, "msg_timeout_ms": 3000}

    # run 1: killed (SIGKILL of the driver-side reader process) after a few batches
    query = _read_query(spark, nsqd, topic, channel, checkpoint, sink_path=out, **options)
    try:
        wait_until(lambda: sum(p["numInputRows"] for p in query.recentProgress) >= 4500, timeout=90, interval=0.05)
        kill_source_runner(spark)
        with pytest.raises(StreamingQueryException):
            query.awaitTermination(60)
        assert not query.isActive
    finally:
        _stop_all(spark)
    first_run = sum(p["numInputRows"] for p in query.recentProgress)
    # nsqd takes back the dead process's unfinished messages when their msg_timeout expires
    wait_until(lambda: nsqd.channel_stats(topic, channel)["in_flight_count"] == 0, timeout=30)
    left = nsqd.channel_stats(topic, channel)["depth"]
    assert 0 < left < n

    # run 2: same checkpoint (larger batches: options may change between runs), until nsqd has nothing left
    options.update(max_messages_per_batch=10000, max_in_flight=20000)
    query = _read_query(spark, nsqd, topic, channel, checkpoint, sink_path=out,
                        trigger={"availableNow": True}, **options)
    try:
        assert query.awaitTermination(120), "restarted query did not finish"
        assert query.exception() is None
    finally:
        _stop_all(spark)
    assert_channel_drained(nsqd, topic, channel)
    bodies = [r.body for r in spark.read.parquet(str(out)).select("body").collect()]
    distinct = set(bodies)
    seen: dict = {}
    for body in bodies:
        seen[body] = seen.get(body, 0) + 1
    duplicated = sorted((b for b, times in seen.items() if times > 1), key=lambda b: int(b[2:]))
    with capsys.disabled():
        print(
            "\n[kill/restart] %d messages; first run read %d rows before SIGKILL, %d were left in nsqd; "
            "the sink holds %d rows: %d duplicates (at-least-once), %d missing"
            % (n, first_run, left, len(bodies), len(bodies) - len(distinct), n - len(distinct))
        )
        if duplicated:
            print("[kill/restart] duplicated messages (%d): %s%s" % (
                len(duplicated), b" ".join(duplicated[:20]).decode(), " ..." if len(duplicated) > 20 else ""))
    assert distinct == {b"k-%d" % i for i in range(n)}, "messages lost"


def test_two_queries_on_one_channel_receive_every_message_once(spark, nsqd, topic, tmp_path, capsys):
    # nsqd spreads a channel's messages over its consumers, so two queries on
    # one channel share the stream: together they see every message. A
    # message goes to the other query only if nsqd gave it back (REQ) or
    # timed it out; when neither happened, each message is seen exactly once.
    n = 20_000
    channel = "shared"
    nsqd.create_topic(topic)
    nsqd.create_channel(topic, channel)
    names = ["share_a_" + uuid.uuid4().hex[:6], "share_b_" + uuid.uuid4().hex[:6]]
    # a small max_in_flight: neither query can take the whole stream while the other waits
    queries = [
        _read_query(spark, nsqd, topic, channel, tmp_path / ("ck-%d" % i), sink_name=name,
                    trigger={"processingTime": "200 milliseconds"}, max_in_flight=2000)
        for i, name in enumerate(names)
    ]
    try:
        wait_until(lambda: len(nsqd.clients(topic, channel)) >= 2, timeout=60, interval=0.1,
                   message=lambda: "clients: %r" % (nsqd.clients(topic, channel),))
        nsqd.http_mpub(topic, (b"s-%d" % i for i in range(n)))
        count = lambda name: spark.sql("select count(*) from %s" % name).collect()[0][0]  # noqa: E731
        wait_until(lambda: sum(count(name) for name in names) >= n, timeout=120, interval=0.25,
                   message=lambda: "the sinks have %s rows" % ([count(name) for name in names],))
        stats = assert_channel_drained(nsqd, topic, channel)
        for query in queries:
            assert query.isActive, query.exception()
    finally:
        _stop_all(spark)
    per_query = [[r.body for r in spark.sql("select body from %s" % name).collect()] for name in names]
    union = per_query[0] + per_query[1]
    with capsys.disabled():
        print("\n[two queries, one channel] %d messages: %d and %d rows; nsqd requeued %d, timed out %d"
              % (n, len(per_query[0]), len(per_query[1]), stats["requeue_count"], stats["timeout_count"]))
    assert set(union) == {b"s-%d" % i for i in range(n)}, "messages lost"
    assert all(per_query), "one query received nothing: the stream was not shared"
    if stats["requeue_count"] == 0 and stats["timeout_count"] == 0:
        assert len(union) == n, "duplicates although nsqd redelivered nothing"
    else:  # only what nsqd redelivered may appear twice
        assert len(union) - n <= stats["requeue_count"] + stats["timeout_count"]


def test_held_messages_are_touched(spark, nsqd, topic, tmp_path):
    # Messages wait in the buffer between triggers (4s) far longer than their
    # msg_timeout (1.5s): without TOUCH nsqd would time them out and resend them.
    n = 1000
    nsqd.create_topic(topic)
    nsqd.create_channel(topic, "c")
    nsqd.http_mpub(topic, (b"t-%d" % i for i in range(n)))
    name = "touch_" + uuid.uuid4().hex[:8]
    query = _read_query(spark, nsqd, topic, "c", tmp_path / "ck", sink_name=name,
                        trigger={"processingTime": "4 seconds"}, msg_timeout_ms=1500)
    try:
        count = lambda: spark.sql("select count(*) from %s" % name).collect()[0][0]  # noqa: E731
        wait_until(lambda: count() >= n, timeout=60, interval=0.25)
        stats = assert_channel_drained(nsqd, topic, "c", timeout=30)
        assert query.isActive, query.exception()
    finally:
        _stop_all(spark)
    rows = spark.sql("select body, attempts from %s" % name).collect()
    assert stats["timeout_count"] == 0, stats
    assert len(rows) == n and {r.attempts for r in rows} == {1}


def test_source_user_schema_and_option_errors(spark, nsqd, topic, tmp_path):
    nsqd.http_mpub(topic, [b"a", b"b", b"c"])
    name = "subset_" + uuid.uuid4().hex[:8]
    query = (
        spark.readStream.format("nsq").schema("BODY binary, attempts int")
        .option("topic", topic).option("channel", "c").option("nsqd_tcp_addresses", nsqd.tcp_address).load()
        .writeStream.format("memory").queryName(name).option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True).start()
    )
    try:
        assert query.awaitTermination(60)
    finally:
        _stop_all(spark)
    table = spark.table(name)
    assert table.columns == ["BODY", "attempts"]
    assert sorted(r.BODY for r in table.collect()) == [b"a", b"b", b"c"]
    assert_channel_drained(nsqd, topic, "c")
    with pytest.raises(Exception, match="does not support Trigger.Once"):
        spark.readStream.format("nsq").option("topic", topic).option("channel", "c2") \
            .option("nsqd_tcp_addresses", nsqd.tcp_address).load() \
            .writeStream.format("memory").queryName("once_" + uuid.uuid4().hex[:6]) \
            .option("checkpointLocation", str(tmp_path / "ck-once")).trigger(once=True).start().awaitTermination(60)
    _stop_all(spark)
    with pytest.raises(Exception, match="needs option 'channel'"):
        spark.readStream.format("nsq").option("topic", topic).option("nsqd_tcp_addresses", nsqd.tcp_address) \
            .load().writeStream.format("memory").queryName("bad_" + uuid.uuid4().hex[:6]).start().awaitTermination(30)
    _stop_all(spark)


def test_discovery_through_nsqlookupd(spark, nsqlookupd, nsqd_factory, topic, tmp_path):
    nsqd = nsqd_factory(lookupd=nsqlookupd)
    wait_until(lambda: nsqlookupd.nodes(), timeout=15)
    lookupd = nsqlookupd.http_address
    n = 2000
    # the topic exists nowhere yet: the sink publishes to the nsqd that /nodes lists
    (spark.range(n).selectExpr("concat('d-', cast(id as string)) as body")
     .write.format("nsq").mode("append").option("topic", topic).option("lookupd_http_addresses", lookupd).save())
    assert nsqd.message_count(topic) == n
    wait_until(lambda: nsqlookupd.lookup(topic), timeout=15)
    name = "lookupd_" + uuid.uuid4().hex[:8]
    query = (
        spark.readStream.format("nsq").option("topic", topic).option("channel", "c")
        .option("lookupd_http_addresses", lookupd).load()
        .writeStream.format("memory").queryName(name).option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True).start()
    )
    try:
        assert query.awaitTermination(90)
        assert query.exception() is None
    finally:
        _stop_all(spark)
    assert {r.body for r in spark.table(name).collect()} == {b"d-%d" % i for i in range(n)}
    assert_channel_drained(nsqd, topic, "c")


# ----------------------------------------------------------------------------- example


def test_example_pipeline(spark, nsqd, topic, tmp_path):
    spec = importlib.util.spec_from_file_location("spark_pipeline", os.path.join(REPO_ROOT, "examples", "spark_pipeline.py"))
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    out_topic = topic[:50] + "_out"
    events = [b'{"user": "u%d", "amount": %d}' % (i % 7, i) for i in range(1000)] + [b"not json"]
    nsqd.http_mpub(topic, events)
    query = example.start_pipeline(
        spark, nsqd_tcp_addresses=nsqd.tcp_address, in_topic=topic, channel="pipeline", out_topic=out_topic,
        checkpoint=str(tmp_path / "ck"), available_now=True,
    )
    try:
        assert query.awaitTermination(120)
        assert query.exception() is None
    finally:
        _stop_all(spark)
    assert_channel_drained(nsqd, topic, "pipeline")
    expected = sorted(example.transform_locally(events))
    assert nsqd.message_count(out_topic) == len(expected)
    assert sorted(consume_bodies(nsqd, out_topic, len(expected))) == expected
