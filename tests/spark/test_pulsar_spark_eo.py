# The pulsar sink's exactly-once delivery (deliveryGuarantee=exactly-once: each
# task's rows in a transaction its driver commits) on the run's transaction broker
# (txn_broker) and real Spark: the options; batch jobs (the output is the input
# once; a task failing midway leaves nothing visible); the driver's commit of a
# micro-batch that Spark runs again after a crash (rolling the first attempt
# forward, straight on the broker); a streaming query whose driver program is
# SIGKILLed during a batch's writes, between the writes and the commit, and right
# after the commit, then restarted from its checkpoint (every input message once
# in the output); and a batch job on a Spark standalone cluster (a master and two
# workers) and through Spark Connect.
#
# Skipped with a reason when pyspark/pyarrow or java is missing, unless
# NSQ_REQUIRE_SPARK=1 (set by `make test`), which turns that into a failure.
from __future__ import annotations

import json
import os
import signal
import time
import uuid

import pytest

from tests.support.servers import REPO_ROOT, wait_until
from tests.support.spark_cluster import SparkConnectServer, SparkMaster, SparkWorker, spark_connect_missing
from tests.support.spark_processes import require_spark
from tests.support.subprocess_programs import Program

pytestmark = [pytest.mark.timeout(300), pytest.mark.integration, pytest.mark.slow]
#: the tests on the run's SparkSession (one xdist worker runs them all: tests/spark/conftest.py)
in_session = pytest.mark.xdist_group("spark")
#: the tests whose Spark runs in processes of their own (driver programs, a cluster, a Connect
#: server): one worker runs them one after the other, beside the session's tests
in_programs = pytest.mark.xdist_group("spark-programs")

require_spark()

import pulsarfast  # noqa: E402
from pulsarfast.spark import eocommit  # noqa: E402
from pulsarfast.spark.admin import Admin, AdminSettings  # noqa: E402
from pulsarfast.spark.eolog import COMMITTED, COMMITTING, ExactlyOnceLog, LogRecord, TaskTxn  # noqa: E402
from pulsarfast.spark.options import DeliverySettings, Options, PulsarOptionError  # noqa: E402

from .test_pulsar_spark import produce  # noqa: E402

DRIVER = os.path.join(REPO_ROOT, "tests", "support", "programs", "spark_eo_driver.py")


def _name(prefix: str) -> str:
    return "%s_%s" % (prefix, uuid.uuid4().hex[:10])


def _full(name: str) -> str:
    return "persistent://public/default/" + name


def _sink_options(broker, topic: str, **more) -> dict:
    return {"service_url": broker.service_url, "admin_url": broker.web_url, "topic": topic,
            "deliveryGuarantee": "exactly-once", **{k: str(v) for k, v in more.items()}}


def visible(broker, topic: str, timeout: float = 90.0) -> list[bytes]:
    """Every message a plain reader gets from each partition of topic, read to its end once no
    transaction is open on it (an open one hides what follows it until it ends)."""
    partitions = broker.partitions(topic)
    names = [_full(topic) + "-partition-%d" % i for i in range(partitions)] if partitions else [_full(topic)]

    def open_transactions():
        return sum(broker.admin("GET", "/admin/v3/transactions/transactionBufferStats/public/default/%s"
                                % name.rsplit("/", 1)[1])["ongoingTxnSize"] for name in names)

    wait_until(lambda: open_transactions() == 0, timeout=timeout, interval=0.2,
               message=lambda: "transactions still open on %s: %d" % (topic, open_transactions()))
    client = pulsarfast.Client(broker.service_url, backend="threads", operation_timeout_seconds=30)
    values: list[bytes] = []
    try:
        for name in names:
            reader = client.create_reader(name, pulsarfast.MessageId.earliest)
            while reader.has_message_available():
                values.append(reader.read_next(timeout_millis=10_000).data())
            reader.close()
    finally:
        client.close()
    return values


def received(broker, topic: str) -> int:
    """Messages the broker took in on topic (every partition), visible or not."""
    if broker.partitions(topic) > 0:
        return int(broker.partitioned_stats(topic, per_partition=False)["msgInCounter"])
    return int(broker.topic_stats(topic)["msgInCounter"])


# ----------------------------------------------------------------------------- options


@in_session
def test_delivery_guarantee_option_defaults_to_at_least_once_and_refuses_other_values(spark, txn_broker):
    default = DeliverySettings.from_options(Options({}), _full("out"))
    assert not default.exactly_once and default.transaction_timeout_ms == 60_000
    assert default.log_topic == "persistent://public/default/__pulsarfast_spark_eo_log"
    chosen = DeliverySettings.from_options(Options({"deliveryGuarantee": "EXACTLY-ONCE", "transactionTimeoutMs": "30s",
                                                    "exactlyOnceLogTopic": "t/ns/log"}), None)
    assert chosen.exactly_once and chosen.transaction_timeout_ms == 30_000
    assert chosen.log_topic == "persistent://t/ns/log"
    with pytest.raises(PulsarOptionError, match="'deliveryGuarantee' must be 'at-least-once' .* not 'exactly-twice'"):
        DeliverySettings.from_options(Options({"deliveryGuarantee": "exactly-twice"}), None)
    df = spark.range(3).selectExpr("cast(id as string) as value")
    with pytest.raises(Exception, match="'deliveryGuarantee' must be 'at-least-once'"):
        df.write.format("pulsar").mode("append").options(**_sink_options(txn_broker, _name("x"))) \
            .option("deliveryGuarantee", "at-most-once").save()


# ----------------------------------------------------------------------------- batch jobs


@in_session
def test_exactly_once_batch_write_puts_the_input_in_the_output_once(spark, txn_broker):
    topic = _name("eo_batch")
    txn_broker.create_partitioned_topic(topic, 2)
    df = spark.range(0, 3000, 1, 3).selectExpr("cast(concat('b-', cast(id as string)) as binary) as value",
                                               "cast(id as string) as key")
    df.write.format("pulsar").mode("append").options(**_sink_options(txn_broker, topic)).save()
    values = visible(txn_broker, topic)
    assert sorted(values) == sorted(b"b-%d" % i for i in range(3000))


@in_session
def test_exactly_once_batch_write_with_a_task_failing_midway_leaves_nothing_visible(spark, txn_broker):
    topic = _name("eo_fail")
    txn_broker.create_partitioned_topic(topic, 2)
    # task 0 sends its 1000 rows; task 1 sends 500, then its 501st row has a null value: the sink
    # raises (the task aborts its transaction), the job fails and the driver aborts task 0's
    df = spark.range(0, 2000, 1, 2).selectExpr(
        "case when id = 1500 then null else cast(concat('f-', cast(id as string)) as binary) end as value",
        "cast(id as string) as key")
    with pytest.raises(Exception, match="'value' column is null"):
        df.write.format("pulsar").mode("append").options(**_sink_options(txn_broker, topic)).save()
    assert received(txn_broker, topic) >= 1000  # (the broker has task 0's messages at least...)
    assert visible(txn_broker, topic) == []  # (...and no reader sees any of them)


# ----------------------------------------------------------------------------- the driver's commit


class _Attempt:
    """One attempt of a micro-batch on the broker: a transaction per "task", each with its messages."""

    def __init__(self, client, topic: str, bodies_per_task: list[list[bytes]], timeout_ms: int = 60_000):
        self.txns: list[TaskTxn] = []
        producer = client.create_producer(topic)
        for bodies in bodies_per_task:
            txn = client.new_transaction(timeout_ms=timeout_ms)
            parts = {producer.send(b, transaction=txn, partition_key=b.decode()).partition() for b in bodies}
            self.txns.append(TaskTxn(txn.id.most_bits, txn.id.least_bits,
                                     tuple(sorted("%s-partition-%d" % (topic, p) for p in parts)), len(bodies),
                                     int(time.time() * 1000) + timeout_ms))
        producer.close()


def test_a_micro_batch_run_again_after_a_crash_mid_commit_is_rolled_forward_once(txn_broker):
    topic, log_topic, query = _full(_name("eo_roll")), _full(_name("eo_log")), str(uuid.uuid4())
    txn_broker.create_partitioned_topic(topic.rsplit("/", 1)[1], 2)
    client = pulsarfast.Client(txn_broker.service_url, backend="threads", operation_timeout_seconds=30)
    admin = Admin(AdminSettings(txn_broker.web_url))
    tasks = [[b"r-%d" % i for i in range(t * 50, t * 50 + 50)] for t in range(3)]
    try:
        log = ExactlyOnceLog(client, log_topic, admin)
        # batch 6's first attempt: its driver recorded "committing", ended one of three transactions, died
        first = _Attempt(client, topic, tasks)
        log.append(LogRecord(query, 6, COMMITTING, tuple(first.txns), 0))
        client.transaction(first.txns[0].id).commit()
        # Spark runs batch 6 again: the same rows in new transactions; the commit rolls the first forward
        second = _Attempt(client, topic, tasks)
        done = eocommit.commit_micro_batch(client, lambda: admin, log, query, 6, second.txns)
        assert "committed by an earlier attempt" in done
        last = log.last(query)
        assert (last.batch, last.state, last.txns) == (6, COMMITTED, tuple(first.txns))
        assert sorted(visible(txn_broker, topic.rsplit("/", 1)[1])) == sorted(b for t in tasks for b in t)
        # and once more (a crash after the commit, before Spark's commit log): the second attempt aborted too
        third = _Attempt(client, topic, tasks)
        assert "committed by an earlier attempt" in eocommit.commit_micro_batch(client, lambda: admin, log, query, 6,
                                                                                third.txns)
        # the next batch commits fresh
        fourth = _Attempt(client, topic, [[b"n-1", b"n-2"]])
        assert "1 transactions committed" in eocommit.commit_micro_batch(client, lambda: admin, log, query, 7,
                                                                         fourth.txns)
        assert sorted(visible(txn_broker, topic.rsplit("/", 1)[1])) == sorted(
            [b for t in tasks for b in t] + [b"n-1", b"n-2"])
        log.close()
    finally:
        client.close()


def test_a_micro_batch_whose_first_attempt_timed_out_is_committed_and_a_half_committed_one_is_an_error(txn_broker):
    topic, log_topic = _full(_name("eo_timeout")), _full(_name("eo_log"))
    txn_broker.create_partitioned_topic(topic.rsplit("/", 1)[1], 2)
    client = pulsarfast.Client(txn_broker.service_url, backend="threads", operation_timeout_seconds=30)
    admin = Admin(AdminSettings(txn_broker.web_url))
    try:
        log = ExactlyOnceLog(client, log_topic, admin)
        # query A's batch 2: "committing" recorded, then every transaction aborted (as by their timeout)
        query = str(uuid.uuid4())
        first = _Attempt(client, topic, [[b"a-1", b"a-2"], [b"a-3"]])
        log.append(LogRecord(query, 2, COMMITTING, tuple(first.txns), 0))
        for txn in first.txns:
            client.transaction(txn.id).abort()
        second = _Attempt(client, topic, [[b"a-1", b"a-2"], [b"a-3"]])
        assert "2 transactions committed" in eocommit.commit_micro_batch(client, lambda: admin, log, query, 2,
                                                                         second.txns)
        assert sorted(visible(txn_broker, topic.rsplit("/", 1)[1])) == [b"a-1", b"a-2", b"a-3"]
        # query B's batch 0: one transaction committed, the other aborted (the driver died between the two
        # END_TXNs and stayed down past the timeout): a clear error, the new attempt aborted
        other = str(uuid.uuid4())
        half = _Attempt(client, topic, [[b"h-1"], [b"h-2"]])
        log.append(LogRecord(other, 0, COMMITTING, tuple(half.txns), 0))
        client.transaction(half.txns[0].id).commit()
        client.transaction(half.txns[1].id).abort()
        again = _Attempt(client, topic, [[b"h-1"], [b"h-2"]])
        with pytest.raises(eocommit.ExactlyOnceError, match=r"micro-batch 0 of query %s is half committed.*"
                           r"transactions %s committed and %s were aborted" % (
                               other, *(str(t).replace("(", r"\(").replace(")", r"\)") for t in half.txns))):
            eocommit.commit_micro_batch(client, lambda: admin, log, other, 0, again.txns)
        assert sorted(visible(txn_broker, topic.rsplit("/", 1)[1])) == [b"a-1", b"a-2", b"a-3", b"h-1"]
        log.close()
    finally:
        client.close()


def test_the_output_partitions_take_their_first_transaction_snapshot_before_the_tasks_write(txn_broker):
    topic = _name("eo_prepare")
    txn_broker.create_partitioned_topic(topic, 3)
    client = pulsarfast.Client(txn_broker.service_url, backend="threads", operation_timeout_seconds=30)
    admin = Admin(AdminSettings(txn_broker.web_url))
    partitions = [_full(topic) + "-partition-%d" % i for i in range(3)]
    try:
        assert all(admin.transaction_buffer_stats(p) is None for p in partitions)  # (not there yet)
        assert eocommit.prepare_partitions(client, admin, _full(topic)) == partitions
        assert all(admin.transaction_buffer_stats(p)["lastSnapshotTimestamps"] > 0 for p in partitions)
        assert eocommit.prepare_partitions(client, admin, _full(topic)) == []  # (once is enough)
    finally:
        client.close()
    assert visible(txn_broker, topic) == []  # (its messages were in an aborted transaction)
    assert received(txn_broker, topic) == 3


# ----------------------------------------------------------------------------- a driver killed


N_STREAM = 1200


@in_programs
@pytest.mark.timeout(900)  # (four driver processes in turn, each starting Spark: 90-150 s, over 300 s beside a CPU hog)
def test_streaming_driver_killed_during_writes_before_and_after_the_commit_puts_each_message_once(
        txn_broker, tmp_path, capsys):
    source, target = _name("eo_in"), _name("eo_out")
    txn_broker.create_partitioned_topic(source, 4)
    txn_broker.create_partitioned_topic(target, 4)
    produce(txn_broker, source, (b"s-%d" % i for i in range(N_STREAM)), batch=10)
    marker = str(tmp_path / "crashed")
    spec = {"mode": "stream", "service_url": txn_broker.service_url, "admin_url": txn_broker.web_url,
            "input": source, "output": target, "checkpoint": str(tmp_path / "ck"), "maxMessagesPerTrigger": 24,
            "options": {"transactionTimeoutMs": "30000", "exactlyOnceLogTopic": _full(_name("eo_log")),
                        "crashMarker": marker}}
    timings = []
    for point in ("write:1", "precommit:2", "postcommit:3", None):
        started = time.monotonic()
        run = dict(spec, options=dict(spec["options"], crashAt=point or ""))
        program = Program([DRIVER, json.dumps(run)])
        code = program.wait_exit(400)
        timings.append("%s %.0fs" % (point or "to the end", time.monotonic() - started))
        if point is None:
            assert code == 0, program.report()
            done = json.loads(program.stdout[-1].split(" ", 1)[1])
            assert done["batches"][0] == 3  # (it ran batch 3 again: Spark had not recorded it)
        else:
            assert code == -signal.SIGKILL, program.report()
            with open(marker) as f:
                assert f.read() == point
            os.unlink(marker)
    values = visible(txn_broker, target, timeout=60)
    with capsys.disabled():
        print("\n[exactly-once kill/restart] runs: %s; output %d messages, %d distinct" % (
            ", ".join(timings), len(values), len(set(values))))
    assert len(values) == N_STREAM, "duplicates or losses"
    assert set(values) == {b"s-%d" % i for i in range(N_STREAM)}


# ----------------------------------------------------------------------------- elsewhere than local[N]


def _batch_spec(broker, topic: str, **more) -> str:
    return json.dumps({"mode": "batch", "service_url": broker.service_url, "admin_url": broker.web_url,
                       "output": topic, "rows": 2000, "partitions": 4, **more})


@in_programs
def test_exactly_once_batch_write_on_a_standalone_cluster_of_two_workers(txn_broker):
    topic = _name("eo_cluster")
    txn_broker.create_partitioned_topic(topic, 2)
    with SparkMaster() as master:
        master.start()
        workers = [SparkWorker(master) for _ in range(2)]
        try:
            for worker in workers:
                worker.start()
            program = Program([DRIVER, _batch_spec(txn_broker, topic, master=master.url, conf={
                "spark.executor.memory": "512m", "spark.executor.cores": "1", "spark.cores.max": "2"})])
            assert program.wait_exit(240) == 0, program.report()
        finally:
            for worker in workers:
                worker.close()
    done = json.loads(program.stdout[-1].split(" ", 1)[1])
    assert done["executors"] == 2  # (one on each worker: 1 core each)
    assert sorted(visible(txn_broker, topic)) == sorted(b"v-%d" % i for i in range(2000))


@in_programs
def test_exactly_once_batch_write_through_spark_connect(txn_broker):
    missing = spark_connect_missing()
    if missing:
        if os.environ.get("NSQ_REQUIRE_SPARK", "").strip() not in ("", "0"):
            pytest.fail("Spark tests required (NSQ_REQUIRE_SPARK=1) but %s" % missing, pytrace=False)
        pytest.skip(missing)
    topic = _name("eo_connect")
    txn_broker.create_partitioned_topic(topic, 2)
    with SparkConnectServer() as server:
        server.start()
        program = Program([DRIVER, _batch_spec(txn_broker, topic, remote=server.url)])
        assert program.wait_exit(240) == 0, program.report() + "\nserver log:\n" + server.log_tail()
    assert sorted(visible(txn_broker, topic)) == sorted(b"v-%d" % i for i in range(2000))
