# pulsarfast.spark on a local Spark (local[2] by default) and a real Pulsar broker of
# its own (tests/support/pulsar_broker.py), beside pulsarfast's own producer and
# consumer on the same broker. Prints one JSON object (make bench writes it to
# benchmarks/results/pulsar_spark.json) with:
#
#   produce   pulsarfast's batched produce (send_async without a callback, then
#             flush; batching on, 1,000 messages a batch) of --messages 100-byte
#             messages into a 4-partition topic: the sink's reference, the median
#             of --runs runs (each a topic of its own)
#   consume   pulsarfast's consumer (threads, receive + acknowledge, receiver
#             queue 1000, as make bench-pulsar's consume row) draining that
#             backlog from its start: the source's reference, the median of --runs
#             runs (each a subscription of its own)
#   source    readStream.format("pulsar") with Trigger.AvailableNow into the noop
#             sink over a backlog of the same shape (each run a topic of its own),
#             in a JVM warmed by a query of the same shape: its rate from the
#             first micro-batch's trigger to the end of the batch holding the last
#             message (as make bench's nsq.spark row), and from start() to the
#             query's end (start-up included); the median of --runs; its ratio to
#             the consumer's rate (target >= 0.5)
#   sink      df.write.format("pulsar") of --messages 100-byte rows into a
#             4-partition topic, after a warm-up write; the median of --runs;
#             its ratio to the producer's rate (target >= 0.5)
#
# Every count is checked against the broker (msgInCounter of each topic; the
# source's numInputRows).
#
#   python benchmarks/bench_pulsar_spark.py [--messages 500000] [--runs 3]
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.bench_spark import batch_end, progress_time  # noqa: E402
from benchmarks.bench_spark import make_spark as make_nsq_spark  # noqa: E402

PARTITIONS = 4
BODY = 100


def make_spark(master: str):
    """bench_spark's local session, with the pulsar format registered too."""
    import pulsarfast.spark

    spark = make_nsq_spark(master)
    pulsarfast.spark.register(spark)
    return spark


def stored(broker, topic: str) -> int:
    return int(broker.partitioned_stats(topic, per_partition=False)["msgInCounter"])


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def produce(broker, topic: str, messages: int) -> float:
    """pulsarfast's batched produce of messages into topic: msgs/s, checked against the broker."""
    import pulsarfast

    broker.create_partitioned_topic(topic, PARTITIONS)
    client = pulsarfast.Client(broker.service_url, backend="threads")
    try:
        producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=1000,
                                          block_if_queue_full=True, max_pending_messages=10_000)
        bodies = [b"%012d" % i + b"x" * (BODY - 12) for i in range(messages)]
        started = time.perf_counter()
        for body in bodies:
            producer.send_async(body, None)
        producer.flush()
        elapsed = time.perf_counter() - started
        producer.close()
    finally:
        client.close()
    count = stored(broker, topic)
    assert count == messages, "the broker stored %d of %d" % (count, messages)
    return messages / elapsed


def consume(broker, topic: str, subscription: str, messages: int) -> float:
    """pulsarfast's consumer draining topic from its start (receive + acknowledge): msgs/s."""
    import pulsarfast

    client = pulsarfast.Client(broker.service_url, backend="threads")
    try:
        consumer = client.subscribe(topic, subscription, initial_position=pulsarfast.InitialPosition.Earliest)
        first = consumer.receive(30_000)
        started = time.perf_counter()
        consumer.acknowledge(first)
        for _ in range(messages - 1):
            consumer.acknowledge(consumer.receive(30_000))
        elapsed = time.perf_counter() - started
        consumer.close()
    finally:
        client.close()
    return (messages - 1) / elapsed


def options(broker, topic: str) -> dict:
    return {"service_url": broker.service_url, "admin_url": broker.web_url, "topic": topic,
            "startingOffsets": "earliest"}


def source(spark, broker, topic: str, messages: int, workdir: str) -> dict:
    """The source over topic's backlog with availableNow into noop: its rate from the first
    micro-batch's trigger to the end of the batch holding the last message (as make bench's nsq.spark
    row measures), and from start() to the query's end, start-up included."""
    started_wall = time.time()
    started = time.perf_counter()
    query = (spark.readStream.format("pulsar").options(**options(broker, topic)).load()
             .writeStream.format("noop").option("checkpointLocation", os.path.join(workdir, "ck-" + topic))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(600), "the source query did not finish"
    elapsed = time.perf_counter() - started
    assert query.exception() is None, query.exception()
    progress = query.recentProgress
    rows = sum(p["numInputRows"] for p in progress)
    assert rows == messages, "the source read %d rows of %d" % (rows, messages)
    data = [p for p in progress if p["numInputRows"]]
    last_row = max(batch_end(p) for p in data)
    first_trigger = min(progress_time(p) for p in progress)
    phases: dict = {}
    for p in data:
        for phase, ms in p["durationMs"].items():
            phases[phase] = phases.get(phase, 0) + ms
    return {"messages": messages,
            "messages_per_s": round(messages / (last_row - first_trigger)),
            "first_trigger_to_last_row_s": round(last_row - first_trigger, 3),
            "start_to_end_s": round(elapsed, 3),
            "messages_per_s_with_start_up": round(messages / elapsed),
            "start_up_s": round(first_trigger - started_wall, 3),
            "batches": len(data),
            "ms_by_phase": phases}


def sink(spark, broker, topic: str, messages: int) -> float:
    """df.write.format("pulsar") of messages rows into a new 4-partition topic: rows/s, checked."""
    broker.create_partitioned_topic(topic, PARTITIONS)
    df = spark.range(messages).selectExpr("cast(concat(lpad(cast(id as string), 12, '0'), '%s') as binary) as value"
                                          % ("x" * (BODY - 12)))
    df.cache().count()  # (the rows are made before the clock starts)
    started = time.perf_counter()
    df.write.format("pulsar").mode("append").option("service_url", broker.service_url).option("topic", topic).save()
    elapsed = time.perf_counter() - started
    df.unpersist()
    count = stored(broker, topic)
    assert count == messages, "the broker stored %d of %d" % (count, messages)
    return messages / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--messages", type=int, default=500_000)
    parser.add_argument("--warmup-messages", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    import tempfile

    import pyspark

    from tests.support.pulsar_broker import PulsarBroker

    broker = PulsarBroker(config={}).start()
    workdir = tempfile.mkdtemp(prefix="bench-pulsar-spark-")
    try:
        spark = make_spark(args.master)
        result: dict = {
            "benchmark": "pulsarfast.spark",
            "date": datetime.date.today().isoformat(),
            "pyspark": pyspark.__version__,
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "master": args.master,
            "partitions": PARTITIONS,
            "body_bytes": BODY,
            "load_before": os.getloadavg(),
        }
        produce_runs = [produce(broker, "backlog-%d" % run, args.messages) for run in range(args.runs)]
        backlog = "backlog-0"
        consume_runs = [consume(broker, backlog, "ref-%d" % run, args.messages) for run in range(args.runs)]
        # warm-up: a query and a write of the same shape, on topics of their own
        produce(broker, "warmup", args.warmup_messages)
        source(spark, broker, "warmup", args.warmup_messages, workdir)
        sink(spark, broker, "warmup-sink", args.warmup_messages)
        source_runs = [source(spark, broker, "backlog-%d" % run, args.messages, workdir) for run in range(args.runs)]
        sink_runs = [sink(spark, broker, "sink-%d" % run, args.messages) for run in range(args.runs)]
        reference_consume, reference_produce = median(consume_runs), median(produce_runs)
        # every figure the median of its runs
        mid_source = sorted(source_runs, key=lambda run: run["messages_per_s"])[len(source_runs) // 2]
        result.update({
            "produce": {"messages_per_s": round(reference_produce), "runs": [round(r) for r in produce_runs]},
            "consume": {"messages_per_s": round(reference_consume), "runs": [round(r) for r in consume_runs]},
            "source": dict(mid_source, runs=[run["messages_per_s"] for run in source_runs],
                           runs_with_start_up=[run["messages_per_s_with_start_up"] for run in source_runs],
                           ratio_to_consumer=round(mid_source["messages_per_s"] / reference_consume, 2),
                           ratio_with_start_up=round(mid_source["messages_per_s_with_start_up"] / reference_consume,
                                                     2)),
            "sink": {"messages": args.messages, "rows_per_s": round(median(sink_runs)),
                     "runs": [round(r) for r in sink_runs],
                     "ratio_to_producer": round(median(sink_runs) / reference_produce, 2)},
            "load_after": os.getloadavg(),
        })
        print(json.dumps(result, indent=2))
        spark.stop()
    finally:
        broker.kill()


if __name__ == "__main__":
    main()
